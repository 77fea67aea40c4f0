"""numcodecs' quantize, bitround and astype filters, as zarr-python 3 writes them in v2 (`filters`)
and v3 (`numcodecs.*` array-to-array codecs) metadata: zarrstream reads what zarr-python reads, bit
for bit, behind every compressor. The filters are lossy or narrowing, so zarr-python's own read is
the reference (checked to be close to the source, so the fixture is what the test means)."""

from __future__ import annotations

import numcodecs
import numpy as np
import pytest
import zarr
from zarr.codecs import numcodecs as v3_codecs

import zarrstream
from zarrstream.errors import UnsupportedError

from conftest import check_read, make_compressible, native, read_json, write_json, zarr_read

# name -> (v2 filter, v3 codec, decoded dtype, absolute tolerance against the source)
FILTERS = {
    "quantize-f8": (numcodecs.Quantize(digits=3, dtype="<f8"), v3_codecs.Quantize(digits=3), "<f8", 1e-3),
    "quantize-f8-to-f4": (numcodecs.Quantize(digits=2, dtype="<f8", astype="<f4"), None, "<f8", 1e-2),
    "quantize-f4": (numcodecs.Quantize(digits=1, dtype="<f4"), v3_codecs.Quantize(digits=1), "<f4", 0.1),
    "bitround-f4": (numcodecs.BitRound(keepbits=7), v3_codecs.BitRound(keepbits=7), "<f4", 4.0),
    "bitround-f8": (numcodecs.BitRound(keepbits=20), v3_codecs.BitRound(keepbits=20), "<f8", 1e-3),
    "bitround-f2": (numcodecs.BitRound(keepbits=4), v3_codecs.BitRound(keepbits=4), "<f2", 16.0),
    "astype-f8-to-f4": (numcodecs.AsType(encode_dtype="<f4", decode_dtype="<f8"),
                        v3_codecs.AsType(encode_dtype="f4", decode_dtype="f8"), "<f8", 1e-3),
    "astype-f4-to-f2": (numcodecs.AsType(encode_dtype="<f2", decode_dtype="<f4"),
                        v3_codecs.AsType(encode_dtype="float16", decode_dtype="float32"), "<f4", 0.5),
    "astype-i8-to-i2": (numcodecs.AsType(encode_dtype="<i2", decode_dtype="<i8"),
                        v3_codecs.AsType(encode_dtype="i2", decode_dtype="i8"), "<i8", 0),
    "astype-f4-to-big-i2": (numcodecs.AsType(encode_dtype=">i2", decode_dtype="<f4"), None, "<f4", 1.0),
}

V2_COMPRESSORS = {
    "zlib": numcodecs.Zlib(level=1),
    "blosc-lz4-shuffle": numcodecs.Blosc(cname="lz4", clevel=5, shuffle=numcodecs.Blosc.SHUFFLE),
}

V3_COMPRESSORS = {
    "zstd": zarr.codecs.ZstdCodec(level=3),
    "numcodecs-zlib": v3_codecs.Zlib(level=1),
}


def source(dtype: str) -> np.ndarray:
    """A smooth field with noise: ERA5-like temperatures, or counts for integers."""
    data = make_compressible("<f8", (37, 29), seed=21)
    data = np.nan_to_num(data, nan=1.0, posinf=1.0, neginf=1.0)
    data = 280.0 + 20.0 * np.tanh(data / (np.abs(data).max() or 1.0))
    if np.dtype(dtype).kind == "i":
        return np.round(data * 10).astype(dtype)
    return data.astype(dtype)


def check(store, data, tolerance):
    ref = native(zarr_read(store))
    np.testing.assert_allclose(ref.astype("f8"), data.astype("f8"), atol=tolerance)
    check_read(store, ref)


@pytest.mark.parametrize("compressor", list(V2_COMPRESSORS), ids=str)
@pytest.mark.parametrize("name", list(FILTERS), ids=str)
def test_v2_filters_read_as_zarr_python_reads_them(store, name, compressor):
    v2_filter, _, dtype, tolerance = FILTERS[name]
    data = source(dtype)
    z = zarr.create_array(str(store), shape=data.shape, chunks=(16, 10), dtype=dtype, zarr_format=2,
                          filters=[v2_filter], compressors=V2_COMPRESSORS[compressor], fill_value=0)
    z[...] = data
    assert read_json(store / ".zarray")["filters"][0]["id"] == v2_filter.codec_id
    check(store, data, tolerance)


@pytest.mark.parametrize("compressor", list(V3_COMPRESSORS), ids=str)
@pytest.mark.parametrize("name", [n for n, f in FILTERS.items() if f[1] is not None], ids=str)
def test_v3_filters_read_as_zarr_python_reads_them(store, name, compressor):
    _, v3_codec, dtype, tolerance = FILTERS[name]
    data = source(dtype)
    compressors = V3_COMPRESSORS[compressor]
    z = zarr.create_array(str(store), shape=data.shape, chunks=(16, 10), dtype=dtype, zarr_format=3,
                          filters=[v3_codec], compressors=compressors, fill_value=0)
    z[...] = data
    assert read_json(store / "zarr.json")["codecs"][0]["name"] == v3_codec.codec_name
    check(store, data, tolerance)


def test_v3_filters_inside_shards_and_chained(store):
    data = source("<f8")
    z = zarr.create_array(str(store), shape=data.shape, chunks=(8, 10), shards=(16, 20), dtype="<f8",
                          filters=[v3_codecs.Quantize(digits=2), v3_codecs.BitRound(keepbits=12),
                                   v3_codecs.AsType(encode_dtype="f4", decode_dtype="f8")],
                          compressors=zarr.codecs.ZstdCodec(level=1), fill_value=0)
    z[...] = data
    check(store, data, 0.1)


def test_filters_without_a_compressor(store):
    data = source("<f4")
    z = zarr.create_array(str(store), shape=data.shape, chunks=(16, 10), dtype="<f4", zarr_format=2,
                          filters=[numcodecs.AsType(encode_dtype="<f2", decode_dtype="<f4")], compressors=None)
    z[...] = data
    check(store, data, 0.5)


def test_v2_filter_chain_with_missing_chunks(store):
    # Unwritten chunks read as the fill value, which the filters do not touch.
    data = source("<f4")
    z = zarr.create_array(str(store), shape=data.shape, chunks=(16, 10), dtype="<f4", zarr_format=2,
                          filters=[numcodecs.Quantize(digits=2, dtype="<f4"), numcodecs.BitRound(keepbits=9),
                                   numcodecs.AsType(encode_dtype="<f2", decode_dtype="<f4")],
                          compressors=numcodecs.Blosc(cname="zstd"), fill_value=-999.0)
    z[:16, :10] = data[:16, :10]
    z[30:, 20:] = data[30:, 20:]
    ref = native(zarr_read(store))
    assert (ref == -999.0).sum() > 0
    check_read(store, ref)


def test_unknown_filters_name_the_filter_store_and_array(tmp_path):
    root = tmp_path / "archive.zarr"
    g = zarr.open_group(str(root), mode="w", zarr_format=2)
    g.create_array("t2m", shape=(4, 4), chunks=(2, 2), dtype="<f4", filters=[numcodecs.BitRound(keepbits=5)])
    meta_path = root / "t2m" / ".zarray"
    meta = read_json(meta_path)
    meta["filters"] = [{"id": "packbits"}]
    write_json(meta_path, meta)
    with pytest.raises(UnsupportedError) as raised:
        zarrstream.open_array(str(root / "t2m"))
    message = str(raised.value)
    assert "packbits" in message and "archive.zarr" in message and "t2m" in message

    root3 = tmp_path / "archive3.zarr"
    g = zarr.open_group(str(root3), mode="w", zarr_format=3)
    g.create_array("z500", shape=(4, 4), chunks=(2, 2), dtype="<f4", filters=[v3_codecs.BitRound(keepbits=5)])
    meta_path = root3 / "z500" / "zarr.json"
    meta = read_json(meta_path)
    meta["codecs"][0] = {"name": "numcodecs.packbits", "configuration": {}}
    write_json(meta_path, meta)
    with pytest.raises(UnsupportedError) as raised:
        zarrstream.open_array(str(root3 / "z500"))
    message = str(raised.value)
    assert "numcodecs.packbits" in message and "archive3.zarr" in message and "z500" in message

"""zarrstream reads what tensorstore writes (zarr3 and zarr v2 drivers), bit for bit."""

from __future__ import annotations

import numpy as np
import pytest
import tensorstore as ts

import zarrstream

from conftest import assert_bit_equal, check_read, chunk_files, chunk_key, make_compressible, make_data, read_json


def ts_write(spec: dict, data: np.ndarray) -> None:
    t = ts.open(spec, create=True, delete_existing=True).result()
    t[...].write(data).result()


def ts_read(path) -> np.ndarray:
    driver = "zarr3" if (path / "zarr.json").exists() else "zarr"
    t = ts.open({"driver": driver, "kvstore": {"driver": "file", "path": str(path)}}, open=True).result()
    return t.read().result()


def sharding_codec(inner, codecs, index_location=None, index_codecs=None):
    config = {
        "chunk_shape": list(inner),
        "codecs": codecs,
        "index_codecs": index_codecs
        or [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "crc32c"}],
    }
    if index_location is not None:
        config["index_location"] = index_location
    return {"name": "sharding_indexed", "configuration": config}


ZSTD = {"name": "zstd", "configuration": {"level": 3}}
LITTLE = {"name": "bytes", "configuration": {"endian": "little"}}
BIG = {"name": "bytes", "configuration": {"endian": "big"}}


@pytest.mark.parametrize("index_location", [None, "start", "end"])
@pytest.mark.parametrize("dtype", ["float32", "int16", "uint64", "complex64"])
def test_zarr3_sharding_zstd(store, dtype, index_location):
    shape, shard, inner = (10, 20, 30), (4, 10, 16), (2, 5, 8)
    data = make_data(dtype, shape, seed=40)
    spec = {
        "driver": "zarr3",
        "kvstore": {"driver": "file", "path": str(store)},
        "metadata": {
            "shape": list(shape),
            "data_type": dtype,
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": list(shard)}},
            "codecs": [sharding_codec(inner, [LITTLE, ZSTD], index_location)],
            "dimension_names": ["t", "y", "x"],
        },
    }
    ts_write(spec, data)
    assert_bit_equal(ts_read(store), data, "tensorstore's own read")
    a = check_read(store, data)
    assert a.chunks == inner
    assert a.shard_shape == shard
    assert a.dims == ("t", "y", "x")
    for key in [(slice(1, 2), slice(1, 4), slice(2, 7)), (slice(3, 6), slice(8, 13), slice(14, 19)),
                (slice(8, 10), slice(10, 20), slice(16, 30)), (7, 19, slice(None))]:
        assert_bit_equal(a[key], data[key], repr(key))


def test_zarr3_sharding_partial_writes_nan_fill(store):
    # tensorstore writes only the inner chunks it is given; the rest read as the NaN fill value.
    shape, shard, inner = (8, 12), (4, 6), (2, 3)
    spec = {
        "driver": "zarr3",
        "kvstore": {"driver": "file", "path": str(store)},
        "metadata": {
            "shape": list(shape),
            "data_type": "float64",
            "fill_value": "NaN",
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": list(shard)}},
            "codecs": [sharding_codec(inner, [BIG, ZSTD], "start")],
        },
    }
    t = ts.open(spec, create=True, delete_existing=True).result()
    block = make_data("float64", (2, 3), seed=41)
    t[2:4, 3:6].write(block).result()
    t[7, 11].write(5.0).result()
    expected = np.full(shape, np.nan)
    expected[2:4, 3:6] = block
    expected[7, 11] = 5.0
    assert_bit_equal(ts_read(store), expected, "tensorstore's own read")
    assert {chunk_key(store, f) for f in chunk_files(store)} == {"c/0/0", "c/1/1"}
    check_read(store, expected)


def test_zarr3_sharding_blosc_transpose(store):
    shape, shard, inner = (6, 16, 24), (6, 8, 12), (3, 4, 6)
    data = make_compressible("float32", shape, seed=42)
    codecs = [
        {"name": "transpose", "configuration": {"order": [2, 0, 1]}},
        LITTLE,
        {"name": "blosc", "configuration": {"cname": "lz4", "clevel": 5, "shuffle": "shuffle", "typesize": 4,
                                            "blocksize": 0}},
    ]
    spec = {
        "driver": "zarr3",
        "kvstore": {"driver": "file", "path": str(store)},
        "metadata": {
            "shape": list(shape),
            "data_type": "float32",
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": list(shard)}},
            "codecs": [sharding_codec(inner, codecs, "end")],
        },
    }
    ts_write(spec, data)
    assert_bit_equal(ts_read(store), data, "tensorstore's own read")
    check_read(store, data)


def test_zarr3_unsharded_gzip_dot_keys(store):
    shape = (13, 17)
    data = make_data("int32", shape, seed=43)
    spec = {
        "driver": "zarr3",
        "kvstore": {"driver": "file", "path": str(store)},
        "metadata": {
            "shape": list(shape),
            "data_type": "int32",
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [5, 6]}},
            "chunk_key_encoding": {"name": "default", "configuration": {"separator": "."}},
            "codecs": [BIG, {"name": "gzip", "configuration": {"level": 6}}, {"name": "crc32c"}],
        },
    }
    ts_write(spec, data)
    assert "c.2.2" in {chunk_key(store, f) for f in chunk_files(store)}
    check_read(store, data, missing_chunks="error")


V2_COMPRESSORS = [
    None,
    {"id": "zstd", "level": 3},
    {"id": "zlib", "level": 5},
    {"id": "blosc", "cname": "lz4", "clevel": 5, "shuffle": 1},
    {"id": "blosc", "cname": "zstd", "clevel": 3, "shuffle": 2},
    {"id": "bz2", "level": 9},
]


@pytest.mark.parametrize("compressor", V2_COMPRESSORS, ids=lambda c: "none" if c is None else
                         "-".join(str(c.get(k, "")) for k in ("id", "cname", "shuffle")).rstrip("-"))
@pytest.mark.parametrize("dtype, order, sep", [(">i2", "F", "/"), ("<f8", "C", "."), ("|u1", "C", "/"),
                                               ("<c8", "F", ".")])
def test_zarr_v2_driver(store, compressor, dtype, order, sep):
    shape = (10, 21)
    data = make_compressible(dtype, shape, seed=44)
    spec = {
        "driver": "zarr",
        "kvstore": {"driver": "file", "path": str(store)},
        "metadata": {
            "shape": list(shape),
            "chunks": [4, 8],
            "dtype": dtype,
            "compressor": compressor,
            "order": order,
            "fill_value": None,
            "dimension_separator": sep,
        },
    }
    ts_write(spec, data)
    meta = read_json(store / ".zarray")
    assert meta["dtype"] == dtype and meta["order"] == order
    assert_bit_equal(ts_read(store), data, "tensorstore's own read")
    check_read(store, data, missing_chunks="error")


def test_zarr_v2_driver_fill_value_and_missing(store):
    spec = {
        "driver": "zarr",
        "kvstore": {"driver": "file", "path": str(store)},
        "metadata": {"shape": [9, 9], "chunks": [3, 3], "dtype": "<f4", "fill_value": "NaN",
                     "compressor": {"id": "zstd", "level": 1}},
    }
    t = ts.open(spec, create=True, delete_existing=True).result()
    t[3:6, 3:6].write(np.full((3, 3), 2.5, "f4")).result()
    expected = np.full((9, 9), np.nan, "f4")
    expected[3:6, 3:6] = 2.5
    a = check_read(store, expected)
    assert np.isnan(a.fill_value)
    b = zarrstream.open_array(str(store), missing_chunks="error")
    assert_bit_equal(b[3:6, 3:6], expected[3:6, 3:6])
    with pytest.raises(zarrstream.NotFoundError):
        b[0, 0]

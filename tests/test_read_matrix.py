"""zarrstream reads what zarr-python 3 writes, bit for bit.

Every fixture is written by zarr-python in the test (under tmp_path); zarrstream's read() and many
basic-indexing slices are compared with the same selection of the numpy source (and, where the
codec is lossy, with zarr-python's own read).
"""

from __future__ import annotations

import json
import re

import numcodecs
import numpy as np
import pytest
import zarr
from zarr.codecs import (
    BloscCodec,
    BytesCodec,
    Crc32cCodec,
    GzipCodec,
    ShardingCodec,
    TransposeCodec,
    ZstdCodec,
)

import zarrstream
from zarrstream.errors import ConfigError, InvalidArgumentError, NotFoundError, ZarrstreamError

from conftest import (
    ALL_DTYPES,
    assert_bit_equal,
    check_against_zarr,
    check_read,
    chunk_files,
    chunk_key,
    make_compressible,
    make_data,
    native,
    read_json,
    zarr_read,
)


def write(store, data, **kwargs):
    """zarr.create_array + write all of `data`; returns the zarr array."""
    z = zarr.create_array(str(store), shape=data.shape, dtype=data.dtype, **kwargs)
    z[...] = data
    return z


def key_in(key: str, message: str) -> bool:
    """`key` (relative to the array) appears in `message` as a whole key."""
    return re.search(re.escape(key) + r"(?![0-9A-Za-z])", message) is not None


# ---------------------------------------------------------------------------------------------
# Data types and byte order.


@pytest.mark.parametrize("endian", ["little", "big"])
@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_v3_dtype_and_endian(store, dtype, endian):
    data = make_data(dtype, (13, 7), seed=1)
    write(store, data, chunks=(5, 3), zarr_format=3, serializer=BytesCodec(endian=endian),
          compressors=ZstdCodec(level=1))
    a = check_against_zarr(store, data)
    assert a.zarr_format == 3
    assert a.chunks == (5, 3)
    assert a.shard_shape is None


@pytest.mark.parametrize("order", ["<", ">"])
@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_v2_dtype_and_byte_order(store, dtype, order):
    dt = np.dtype(dtype).newbyteorder(order)
    data = make_data(dt, (13, 7), seed=2)
    write(store, data, chunks=(5, 3), zarr_format=2)
    a = check_against_zarr(store, data)
    assert a.zarr_format == 2
    assert a.dtype == np.dtype(dtype)  # native


@pytest.mark.parametrize("dtype", ["bool", "int16", "uint64", "float16", "float64", "complex64"])
def test_v3_bytes_only_uncompressed(store, dtype):
    data = make_data(dtype, (9, 11), seed=3)
    write(store, data, chunks=(4, 4), zarr_format=3, compressors=None)
    check_against_zarr(store, data)


# ---------------------------------------------------------------------------------------------
# Memory order.


@pytest.mark.parametrize("dtype", ["<i4", ">f8", "|u1", "<c8"])
@pytest.mark.parametrize("order", ["C", "F"])
def test_v2_memory_order(store, order, dtype):
    data = make_data(dtype, (7, 10, 9), seed=4)
    write(store, data, chunks=(3, 4, 5), zarr_format=2, order=order)
    assert read_json(store / ".zarray")["order"] == order
    check_against_zarr(store, data)


@pytest.mark.parametrize(
    "shape, chunks, perm",
    [
        ((11, 13), (4, 5), [1, 0]),
        ((7, 10, 9), (3, 4, 5), [2, 0, 1]),
        ((7, 10, 9), (3, 4, 5), [1, 2, 0]),
        ((7, 10, 9), (3, 4, 5), [0, 1, 2]),
        ((3, 4, 5, 6), (2, 3, 2, 4), [3, 1, 0, 2]),
    ],
)
@pytest.mark.parametrize("endian", ["little", "big"])
def test_v3_transpose(store, shape, chunks, perm, endian):
    data = make_data("float32", shape, seed=5)
    write(store, data, chunks=chunks, zarr_format=3, filters=[TransposeCodec(order=perm)],
          serializer=BytesCodec(endian=endian), compressors=GzipCodec(level=1))
    check_against_zarr(store, data)


# ---------------------------------------------------------------------------------------------
# v3 codecs.

V3_COMPRESSORS = {
    "none": None,
    "zstd0": ZstdCodec(level=0),
    "zstd1": ZstdCodec(level=1),
    "zstd-5": ZstdCodec(level=-5),
    "zstd3-checksum": ZstdCodec(level=3, checksum=True),
    "zstd19-checksum": ZstdCodec(level=19, checksum=True),
    "gzip1": GzipCodec(level=1),
    "gzip9": GzipCodec(level=9),
    "crc32c": Crc32cCodec(),
    "zstd+crc32c": [ZstdCodec(level=2), Crc32cCodec()],
    "gzip+crc32c": [GzipCodec(level=5), Crc32cCodec()],
    "blosc-default": BloscCodec(),
    "zstd+gzip": [ZstdCodec(level=1), GzipCodec(level=1)],
}


@pytest.mark.parametrize("compressors", list(V3_COMPRESSORS), ids=str)
@pytest.mark.parametrize("dtype", ["int16", "float32"])
def test_v3_compressors(store, compressors, dtype):
    data = make_compressible(dtype, (70, 100), seed=6)
    write(store, data, chunks=(32, 64), zarr_format=3, compressors=V3_COMPRESSORS[compressors])
    check_against_zarr(store, data)


def _numcodecs_v3_compressors():
    from zarr.codecs import numcodecs as zn

    return {
        "zstd": zn.Zstd(level=3),
        "zstd-checksum": zn.Zstd(level=1, checksum=True),
        "gzip": zn.GZip(level=5),
        "zlib": zn.Zlib(level=5),
        "lz4": zn.LZ4(),
        "bz2": zn.BZ2(),
        "blosc-shuffle": zn.Blosc(cname="lz4", shuffle=1),
        "blosc-bitshuffle": zn.Blosc(cname="zstd", shuffle=2),
        "blosc-autoshuffle": zn.Blosc(cname="zlib", shuffle=-1),
        "blosc-noshuffle": zn.Blosc(cname="blosclz", shuffle=0),
    }


@pytest.mark.parametrize("name", list(_numcodecs_v3_compressors()))
@pytest.mark.parametrize("dtype", ["uint8", "float32"])
def test_v3_numcodecs_compressors(store, name, dtype):
    """zarr-python writes numcodecs compressors into v3 metadata as "numcodecs.<id>"."""
    data = make_compressible(dtype, (50, 60), seed=8)
    write(store, data, chunks=(16, 32), zarr_format=3,
          compressors=[_numcodecs_v3_compressors()[name]])
    meta = json.loads((store / "zarr.json").read_text())
    assert meta["codecs"][-1]["name"].startswith("numcodecs.")
    check_against_zarr(store, data)


@pytest.mark.parametrize("shuffle", ["noshuffle", "shuffle", "bitshuffle"])
@pytest.mark.parametrize("cname", ["lz4", "lz4hc", "zstd", "zlib", "blosclz"])
@pytest.mark.parametrize("dtype", ["uint8", "int16", "float64"])
def test_v3_blosc(store, cname, shuffle, dtype):
    data = make_compressible(dtype, (70, 100), seed=7)
    write(store, data, chunks=(32, 64), zarr_format=3,
          compressors=BloscCodec(cname=cname, shuffle=shuffle, clevel=5))
    assert all(f.stat().st_size < 32 * 64 * data.dtype.itemsize for f in chunk_files(store))
    check_against_zarr(store, data)


def test_v3_blosc_random_data_and_big_endian(store):
    # Incompressible data: blosc stores blocks verbatim (the memcpy'd path of the frame).
    data = make_data(">f4", (50, 40), seed=8)
    write(store, data, chunks=(25, 40), zarr_format=3, serializer=BytesCodec(endian="big"),
          compressors=[BloscCodec(cname="lz4", shuffle="shuffle"), Crc32cCodec()])
    check_against_zarr(store, data)


def test_v3_everything_in_one_chain(store):
    data = make_compressible(">i8", (9, 12, 10), seed=9)
    write(store, data, chunks=(4, 5, 6), zarr_format=3, filters=[TransposeCodec(order=[2, 0, 1])],
          serializer=BytesCodec(endian="big"),
          compressors=[BloscCodec(cname="zstd", shuffle="bitshuffle"), ZstdCodec(level=3, checksum=True),
                       Crc32cCodec()])
    check_against_zarr(store, data)


# ---------------------------------------------------------------------------------------------
# v2 compressors and filters.

V2_COMPRESSORS = {
    "none": None,
    "zstd": numcodecs.Zstd(level=3),
    "zstd-checksum": numcodecs.Zstd(level=1, checksum=True),
    "zstd-neg": numcodecs.Zstd(level=-3),
    "zlib1": numcodecs.Zlib(level=1),
    "zlib9": numcodecs.Zlib(level=9),
    "gzip": numcodecs.GZip(level=5),
    "lz4": numcodecs.LZ4(acceleration=1),
    "lz4-fast": numcodecs.LZ4(acceleration=10),
    "bz2": numcodecs.BZ2(level=9),
    "blosc-lz4-shuffle": numcodecs.Blosc(cname="lz4", clevel=5, shuffle=numcodecs.Blosc.SHUFFLE),
    "blosc-zstd-bitshuffle": numcodecs.Blosc(cname="zstd", clevel=3, shuffle=numcodecs.Blosc.BITSHUFFLE),
    "blosc-zlib-noshuffle": numcodecs.Blosc(cname="zlib", clevel=5, shuffle=numcodecs.Blosc.NOSHUFFLE),
    "blosc-lz4hc-auto": numcodecs.Blosc(cname="lz4hc", clevel=9, shuffle=numcodecs.Blosc.AUTOSHUFFLE),
    "blosc-blosclz": numcodecs.Blosc(cname="blosclz", clevel=5, shuffle=numcodecs.Blosc.SHUFFLE),
    "blosc-blocksize": numcodecs.Blosc(cname="lz4", clevel=5, shuffle=numcodecs.Blosc.SHUFFLE,
                                       blocksize=1024),
}


@pytest.mark.parametrize("compressor", list(V2_COMPRESSORS), ids=str)
@pytest.mark.parametrize("dtype", ["<i2", ">f8", "|u1"])
def test_v2_compressors(store, compressor, dtype):
    data = make_compressible(dtype, (70, 100), seed=10)
    write(store, data, chunks=(32, 64), zarr_format=2, compressors=V2_COMPRESSORS[compressor])
    meta = read_json(store / ".zarray")
    expected_id = None if V2_COMPRESSORS[compressor] is None else V2_COMPRESSORS[compressor].codec_id
    assert (meta["compressor"] or {}).get("id") == expected_id
    check_against_zarr(store, data)


@pytest.mark.parametrize("dtype", ["<i4", ">i2", "<u8", "<f4", ">f8"])
@pytest.mark.parametrize("compressor", ["none", "zlib1", "blosc-lz4-shuffle"])
def test_v2_delta_filter(store, dtype, compressor):
    data = make_compressible(dtype, (37, 20), seed=11)
    if data.dtype.kind == "f":
        data[np.isnan(data)] = 1.0  # delta coding spreads a NaN over the rest of its chunk
    write(store, data, chunks=(10, 8), zarr_format=2, filters=[numcodecs.Delta(dtype=dtype)],
          compressors=V2_COMPRESSORS[compressor])
    check_against_zarr(store, data)


@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("compressor", ["none", "zstd"])
def test_v2_fixedscaleoffset_float64_to_uint8(store, compressor, order):
    rng = np.random.default_rng(12)
    data = rng.uniform(10.0, 35.0, size=(23, 17))
    write(store, data, chunks=(10, 8), zarr_format=2, order=order,
          filters=[numcodecs.FixedScaleOffset(offset=10, scale=10, dtype="<f8", astype="|u1")],
          compressors=V2_COMPRESSORS[compressor])
    ref = native(zarr_read(store))
    # Lossy: zarr-python's own read is the reference; it is within one quantum of the source.
    np.testing.assert_allclose(ref, data, atol=0.051)
    check_read(store, ref)


@pytest.mark.parametrize("dtype", ["<i2", ">f4", "<f8", "<c16"])
def test_v2_shuffle_filter(store, dtype):
    dt = np.dtype(dtype)
    data = make_compressible(dt, (30, 41), seed=13)
    write(store, data, chunks=(16, 16), zarr_format=2, filters=[numcodecs.Shuffle(elementsize=dt.itemsize)],
          compressors=numcodecs.Zlib(level=3))
    check_against_zarr(store, data)


def test_v2_filter_chain(store):
    data = make_compressible("<i8", (40, 33), seed=14)
    write(store, data, chunks=(16, 16), zarr_format=2, order="F",
          filters=[numcodecs.Delta(dtype="<i8"), numcodecs.Shuffle(elementsize=8)],
          compressors=numcodecs.LZ4())
    check_against_zarr(store, data)


# ---------------------------------------------------------------------------------------------
# Shapes: rank 0..4, edge chunks, chunks larger than the array.

SHAPES = {
    "1d": ((100,), (30,)),
    "1d-exact": ((96,), (32,)),
    "1d-one-element": ((1,), (1,)),
    "2d-edges": ((17, 23), (5, 7)),
    "3d-edges": ((9, 10, 11), (4, 3, 5)),
    "4d-era5": ((6, 3, 19, 36), (2, 3, 10, 16)),
    "chunk-larger-than-array": ((5, 7), (8, 10)),
    "chunk-larger-one-dim": ((20, 3), (6, 10)),
    "unit-chunks": ((4, 5), (1, 1)),
    "0d": ((), ()),
}


@pytest.mark.parametrize(
    "case, layout",
    # (zarr-python 3.1.6 cannot write a 0-d sharded array: its shard index code fails for rank 0.)
    [(c, lay) for c in SHAPES for lay in ("v2", "v3", "v3-sharded") if SHAPES[c][0] or lay != "v3-sharded"],
    ids=str,
)
def test_shapes(store, case, layout):
    shape, chunks = SHAPES[case]
    data = make_data("float32", shape, seed=15)
    shards = tuple(2 * c for c in chunks)
    if layout == "v3-sharded":
        write(store, data, chunks=shards, zarr_format=3, compressors=None,
              serializer=ShardingCodec(chunk_shape=chunks, codecs=[BytesCodec(), ZstdCodec(level=1)]))
    else:
        write(store, data, chunks=chunks, zarr_format=2 if layout == "v2" else 3)
    a = check_against_zarr(store, data)
    assert a.ndim == len(shape)
    assert a.chunks == chunks
    assert a.shard_shape == (shards if layout == "v3-sharded" else None)


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_0d(store, zarr_format):
    data = np.array(-2.5, dtype="float64")
    write(store, data, chunks=(), zarr_format=zarr_format)
    a = zarrstream.open_array(str(store))
    assert a.shape == ()
    assert_bit_equal(a.read(), data)
    assert_bit_equal(a[()], data[()])
    assert_bit_equal(a[...], data[...])
    assert_bit_equal(a[None], data[None])
    with pytest.raises(IndexError):
        a[0]
    with pytest.raises(TypeError):
        len(a)


def test_size_zero_dimension(store):
    data = np.zeros((0, 5), dtype="int32")
    zarr.create_array(str(store), shape=(0, 5), chunks=(2, 2), dtype="int32", zarr_format=3)
    a = zarrstream.open_array(str(store))
    assert a.shape == (0, 5)
    assert_bit_equal(a.read(), data)
    assert_bit_equal(a[:, 1:3], data[:, 1:3])


# ---------------------------------------------------------------------------------------------
# Missing chunks.

MISSING_CASES = {
    # name: (zarr_format, dtype, fill_value written, fill value zarr-python reads)
    "v3-f4-nan": (3, "float32", np.nan, np.nan),
    "v3-i2-neg": (3, "int16", -7, -7),
    "v3-u8-max": (3, "uint64", 2**64 - 1, 2**64 - 1),
    "v3-c16": (3, "complex128", complex(1.5, -2), complex(1.5, -2)),
    "v3-bool-true": (3, "bool", True, True),
    "v3-f8-zero": (3, "float64", 0.0, 0.0),
    "v2-f8-nan": (2, "float64", np.nan, np.nan),
    "v2-f4-none": (2, "float32", None, 0.0),
    "v2-i4-none": (2, "int32", None, 0),
    "v2-u1-none": (2, "uint8", None, 0),
    "v2-i8-fill": (2, "int64", -(2**63), -(2**63)),
    "v2-f2-ninf": (2, "float16", -np.inf, -np.inf),
}


@pytest.mark.parametrize("case", list(MISSING_CASES), ids=str)
def test_missing_chunks_read_as_fill(store, case):
    zarr_format, dtype, fill, reads_as = MISSING_CASES[case]
    shape, chunks = (10, 9), (4, 4)
    z = zarr.create_array(str(store), shape=shape, chunks=chunks, dtype=dtype, zarr_format=zarr_format,
                          fill_value=fill)
    part = make_data(dtype, (4, 9), seed=16)
    z[0:4, :] = part  # row of chunks 0 only; rows 1 and 2 are missing
    expected = np.full(shape, reads_as, dtype=dtype)
    expected[0:4] = part
    # zarr-python agrees on what missing chunks read as.
    assert_bit_equal(native(zarr_read(store)), expected, "zarr-python")
    a = check_read(store, expected)
    if fill is None:
        assert a.fill_value is None
    else:
        assert_bit_equal(np.asarray(a.fill_value), np.asarray(reads_as, dtype=dtype), "fill_value")


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_missing_chunks_error_mode(store, zarr_format):
    shape, chunks = (10, 9), (4, 4)
    z = zarr.create_array(str(store), shape=shape, chunks=chunks, dtype="float32",
                          zarr_format=zarr_format, fill_value=np.nan)
    part = make_data("float32", (4, 9), seed=17)
    z[0:4, :] = part
    stored = {chunk_key(store, f) for f in chunk_files(store)}
    sep = "/" if zarr_format == 3 else "."
    prefix = "c/" if zarr_format == 3 else ""
    all_keys = {f"{prefix}{i}{sep}{j}" for i in range(3) for j in range(3)}
    missing = all_keys - stored
    assert stored == {f"{prefix}0{sep}{j}" for j in range(3)}

    a = zarrstream.open_array(str(store), missing_chunks="error")
    # Regions touching only stored chunks read normally.
    assert_bit_equal(a[0:4], part)
    assert_bit_equal(a[1:3, 2:7], part[1:3, 2:7])
    # Anything touching a missing chunk raises NotFoundError naming a missing chunk's key.
    with pytest.raises(NotFoundError) as e:
        a.read()
    assert any(key_in(k, str(e.value)) for k in missing), str(e.value)
    assert isinstance(e.value, ZarrstreamError)
    for i in (1, 2):
        for j in range(3):
            with pytest.raises(NotFoundError) as e:
                a[i * 4 + 1, j * 4]
            assert key_in(f"{prefix}{i}{sep}{j}", str(e.value)), str(e.value)
    # The default mode fills.
    b = zarrstream.open_array(str(store))
    expected = np.full(shape, np.nan, dtype="float32")
    expected[0:4] = part
    assert_bit_equal(b.read(), expected)


def test_missing_chunks_bad_option(store):
    write(store, np.zeros(3, "i1"), chunks=(2,), zarr_format=3)
    with pytest.raises(ConfigError):
        zarrstream.open_array(str(store), missing_chunks="skip")


def test_no_chunks_stored_at_all(store):
    zarr.create_array(str(store), shape=(5, 6), chunks=(2, 2), dtype="int8", zarr_format=3, fill_value=3)
    a = check_read(store, np.full((5, 6), 3, dtype="int8"))
    assert a.fill_value == 3


# ---------------------------------------------------------------------------------------------
# Sharding.

INNER_CODECS = {
    "bytes": dict(codecs=[BytesCodec()]),
    "zstd": dict(codecs=[BytesCodec(), ZstdCodec(level=3)]),
    "blosc": dict(codecs=[BytesCodec(), BloscCodec(cname="lz4", shuffle="shuffle")]),
    "gzip-crc": dict(codecs=[BytesCodec(), GzipCodec(level=6), Crc32cCodec()]),
    "transpose-big-zstd": dict(codecs=[TransposeCodec(order=[2, 0, 1]), BytesCodec(endian="big"),
                                       ZstdCodec(level=1, checksum=True)]),
    "index-no-crc": dict(codecs=[BytesCodec(), ZstdCodec(level=1)], index_codecs=[BytesCodec()]),
    "index-big": dict(codecs=[BytesCodec()],
                      index_codecs=[BytesCodec(endian="big"), Crc32cCodec()]),
}

SHARD_SHAPE, INNER, SHARD = (10, 20, 30), (2, 5, 8), (4, 10, 16)

# Regions (as index keys) chosen relative to the inner chunks (2, 5, 8) and shards (4, 10, 16).
SHARD_KEYS = [
    (slice(0, 2), slice(0, 5), slice(0, 8)),  # exactly one inner chunk
    (slice(1, 2), slice(1, 4), slice(2, 7)),  # inside one inner chunk
    (slice(0, 4), slice(0, 10), slice(0, 16)),  # exactly one shard
    (slice(1, 3), slice(3, 8), slice(5, 12)),  # inside one shard, across inner chunks
    (slice(3, 6), slice(8, 13), slice(14, 19)),  # across shards in every dimension
    (slice(8, 10), slice(10, 20), slice(16, 30)),  # the edge shard (partial in dims 0 and 2)
    (slice(9, None), slice(-1, None), slice(-2, None)),  # last element region
    (5, slice(None), 17),  # ints through a shard
    (slice(None, None, 3), slice(2, None, 7), slice(None, None, -5)),
    Ellipsis,
]


@pytest.mark.parametrize("index_location", ["start", "end"])
@pytest.mark.parametrize("inner", list(INNER_CODECS), ids=str)
def test_sharding_layouts(store, inner, index_location):
    data = make_compressible("float32", SHARD_SHAPE, seed=18)
    data[1, 2, 3] = np.nan
    write(store, data, chunks=SHARD, zarr_format=3, compressors=None,
          serializer=ShardingCodec(chunk_shape=INNER, index_location=index_location, **INNER_CODECS[inner]))
    assert read_json(store / "zarr.json")["codecs"][0]["name"] == "sharding_indexed"
    a = check_against_zarr(store, data)
    assert a.chunks == INNER
    assert a.shard_shape == SHARD
    for key in SHARD_KEYS:
        assert_bit_equal(a[key], data[key], f"a[{key!r}]")


@pytest.mark.parametrize("dtype", ["int8", ">u2", "float64", "complex64", "bool"])
def test_sharding_via_shards_argument(store, dtype):
    data = make_data(dtype, (17, 12), seed=19)
    write(store, data, chunks=(3, 4), shards=(6, 8), zarr_format=3,
          compressors=ZstdCodec(level=1), serializer=BytesCodec(endian="big") if ">" in dtype else "auto")
    a = check_against_zarr(store, data)
    assert a.chunks == (3, 4)
    assert a.shard_shape == (6, 8)


@pytest.mark.parametrize("index_location", ["start", "end"])
@pytest.mark.parametrize("fill", [np.nan, -1.0])
def test_sharding_missing_inner_chunks_and_shards(store, index_location, fill):
    shape = (10, 20, 30)
    z = zarr.create_array(str(store), shape=shape, chunks=SHARD, zarr_format=3, dtype="float32",
                          fill_value=fill, compressors=None,
                          serializer=ShardingCodec(chunk_shape=INNER, index_location=index_location,
                                                   codecs=[BytesCodec(), ZstdCodec(level=1)]))
    expected = np.full(shape, fill, dtype="float32")
    # Shard (0,0,0): only two of its 2*2*2 inner chunks are stored.
    block = make_data("float32", (2, 5, 8), seed=20)
    z[0:2, 0:5, 0:8] = block
    expected[0:2, 0:5, 0:8] = block
    z[2:4, 5:10, 8:16] = block + 1
    expected[2:4, 5:10, 8:16] = block + 1
    # Shard (2,1,1) (an edge shard): one partial inner chunk is stored.
    edge = make_data("float32", (2, 5, 6), seed=21)
    z[8:10, 15:20, 24:30] = edge
    expected[8:10, 15:20, 24:30] = edge
    stored = {chunk_key(store, f) for f in chunk_files(store)}
    assert stored == {"c/0/0/0", "c/2/1/1"}, stored
    assert_bit_equal(native(zarr_read(store)), expected, "zarr-python")
    a = check_read(store, expected, chunks=INNER)
    for key in SHARD_KEYS:
        assert_bit_equal(a[key], expected[key], f"a[{key!r}]")

    # missing_chunks="error": stored inner chunks read; a missing inner chunk or shard raises.
    e_arr = zarrstream.open_array(str(store), missing_chunks="error")
    assert_bit_equal(e_arr[0:2, 0:5, 0:8], block)
    assert_bit_equal(e_arr[2:4, 5:10, 8:16], block + 1)
    with pytest.raises(NotFoundError) as e:
        e_arr[0:2, 5:10, 0:8]  # missing inner chunk of a stored shard
    assert key_in("c/0/0/0", str(e.value)), str(e.value)
    with pytest.raises(NotFoundError) as e:
        e_arr[5, 12, 20]  # a shard that is not stored at all
    assert key_in("c/1/1/1", str(e.value)), str(e.value)


def test_sharding_nested(store):
    data = make_data("uint16", (19, 16), seed=22)
    write(store, data, chunks=(8, 8), zarr_format=3, compressors=None,
          serializer=ShardingCodec(chunk_shape=(4, 4), codecs=[
              ShardingCodec(chunk_shape=(2, 2), codecs=[BytesCodec(), ZstdCodec(level=1)],
                            index_location="start")]))
    codecs = read_json(store / "zarr.json")["codecs"]
    assert codecs[0]["configuration"]["codecs"][0]["name"] == "sharding_indexed"
    a = check_against_zarr(store, data)
    assert a.shard_shape == (8, 8)
    assert_bit_equal(a[1:3, 5:7], data[1:3, 5:7])
    assert_bit_equal(a[6:11, 3:14], data[6:11, 3:14])


def test_sharding_nested_missing_inner(store):
    z = zarr.create_array(str(store), shape=(16, 16), chunks=(8, 8), zarr_format=3, dtype="int32",
                          fill_value=-5, compressors=None,
                          serializer=ShardingCodec(chunk_shape=(4, 4), codecs=[
                              ShardingCodec(chunk_shape=(2, 2), codecs=[BytesCodec()])]))
    expected = np.full((16, 16), -5, dtype="int32")
    z[0:2, 2:4] = [[1, 2], [3, 4]]
    expected[0:2, 2:4] = [[1, 2], [3, 4]]
    z[9:12, 13:16] = 7
    expected[9:12, 13:16] = 7
    check_against_zarr(store, expected)


def test_sharding_one_shard_whole_array_1d(store):
    data = make_data("int64", (1000,), seed=23)
    write(store, data, chunks=(100,), shards=(1000,), zarr_format=3, compressors=ZstdCodec(level=1))
    a = check_against_zarr(store, data)
    for key in [slice(99, 101), slice(250, 260), slice(-5, None), slice(None, None, 97), 555]:
        assert_bit_equal(a[key], data[key])


def test_sharding_4d_era5_like(store):
    # (time, level, lat, lon), a time step per inner chunk, several time steps per shard.
    shape = (8, 3, 19, 36)
    data = make_compressible("float32", shape, seed=24)
    write(store, data, chunks=(1, 3, 19, 36), shards=(4, 3, 19, 36), zarr_format=3,
          compressors=[BloscCodec(cname="zstd", shuffle="shuffle")],
          dimension_names=["time", "level", "latitude", "longitude"])
    a = check_against_zarr(store, data)
    assert a.dims == ("time", "level", "latitude", "longitude")
    assert_bit_equal(a[3], data[3])
    assert_bit_equal(a[3:5, 1], data[3:5, 1])
    assert_bit_equal(a[:, :, 10, 20], data[:, :, 10, 20])


# ---------------------------------------------------------------------------------------------
# Chunk key encodings.

KEY_ENCODINGS = {
    "v3-default-slash": (3, {"name": "default", "separator": "/"}, "c/1/2"),
    "v3-default-dot": (3, {"name": "default", "separator": "."}, "c.1.2"),
    "v3-v2-dot": (3, {"name": "v2", "separator": "."}, "1.2"),
    "v3-v2-slash": (3, {"name": "v2", "separator": "/"}, "1/2"),
    "v2-dot": (2, {"name": "v2", "separator": "."}, "1.2"),
    "v2-slash": (2, {"name": "v2", "separator": "/"}, "1/2"),
}


@pytest.mark.parametrize(
    "case, sharded",
    [(c, False) for c in KEY_ENCODINGS] + [(c, True) for c in KEY_ENCODINGS if KEY_ENCODINGS[c][0] == 3],
    ids=str,
)
def test_chunk_key_encodings(store, case, sharded):
    zarr_format, encoding, sample_key = KEY_ENCODINGS[case]
    data = make_data("int32", (9, 13), seed=25)
    kwargs = dict(chunks=(4, 5), zarr_format=zarr_format, chunk_key_encoding=encoding)
    if sharded:
        kwargs = dict(chunks=(2, 5), shards=(4, 5), zarr_format=3, chunk_key_encoding=encoding)
    write(store, data, **kwargs)
    keys = {chunk_key(store, f) for f in chunk_files(store)}
    assert sample_key in keys, keys
    # "error" mode: a wrong key encoding cannot hide behind fill values.
    check_against_zarr(store, data, missing_chunks="error")


def test_v2_dimension_separator_3d_nested(store):
    data = make_data("float64", (5, 6, 7), seed=26)
    write(store, data, chunks=(2, 3, 4), zarr_format=2, chunk_key_encoding={"name": "v2", "separator": "/"})
    assert (store / "2" / "1" / "1").is_file()
    check_against_zarr(store, data, missing_chunks="error")


# ---------------------------------------------------------------------------------------------
# Dimension names, attributes, fill values.

ATTRS = {
    "units": "K",
    "long_name": "température à 2 m",
    "scale": 0.5,
    "valid_range": [-100, 100],
    "nested": {"a": [1, 2, {"b": None}], "flag": True},
}


def test_v3_dimension_names_and_attrs(store):
    data = make_data("float32", (4, 5, 6), seed=27)
    write(store, data, chunks=(2, 5, 3), zarr_format=3, dimension_names=["time", "lat", "lon"],
          attributes=ATTRS)
    a = check_against_zarr(store, data)
    assert a.dims == ("time", "lat", "lon")
    assert a.attrs == ATTRS


def test_v2_array_dimensions_attr(store):
    data = make_data("float32", (4, 5, 6), seed=28)
    write(store, data, chunks=(2, 5, 3), zarr_format=2,
          attributes={"_ARRAY_DIMENSIONS": ["time", "lat", "lon"], **ATTRS})
    a = check_against_zarr(store, data)
    assert a.dims == ("time", "lat", "lon")
    for k, v in ATTRS.items():
        assert a.attrs[k] == v


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_no_dims_no_attrs(store, zarr_format):
    write(store, np.arange(6, dtype="i2"), chunks=(4,), zarr_format=zarr_format)
    a = zarrstream.open_array(str(store))
    assert a.dims is None
    assert a.attrs == {}


FILL_VALUES = [
    ("float32", np.nan),
    ("float64", np.inf),
    ("float16", -np.inf),
    ("float64", -0.0),
    ("float32", 1e-45),  # subnormal
    ("int8", -128),
    ("int16", -7),
    ("int32", 2**31 - 1),
    ("int64", -(2**63)),
    ("uint8", 255),
    ("uint16", 1),
    ("uint64", 2**64 - 1),
    ("bool", True),
    ("complex64", complex(1, -2)),
    ("complex128", complex(np.nan, np.inf)),
    ("complex128", complex(-np.inf, 0.25)),
]


@pytest.mark.parametrize("zarr_format", [2, 3])
@pytest.mark.parametrize("dtype, fill", FILL_VALUES, ids=lambda v: str(v))
def test_fill_value_forms(store, zarr_format, dtype, fill):
    z = zarr.create_array(str(store), shape=(7, 5), chunks=(3, 5), dtype=dtype, zarr_format=zarr_format,
                          fill_value=fill)
    z[3:6, :] = make_data(dtype, (3, 5), seed=29)
    ref = native(zarr_read(store))
    want = np.asarray(fill, dtype=dtype)
    assert_bit_equal(ref[0], np.full(5, want), "zarr-python fills")  # the fixture is what we mean
    a = check_read(store, ref)
    assert_bit_equal(np.asarray(a.fill_value), want, "fill_value")


def test_v3_hex_nan_fill_value(store):
    # A NaN fill value with a payload, written as hex: the bits survive.
    zarr.create_array(str(store), shape=(5,), chunks=(2,), dtype="float32", zarr_format=3, fill_value=np.nan)
    meta = read_json(store / "zarr.json")
    meta["fill_value"] = "0x7fc00001"
    (store / "zarr.json").write_text(__import__("json").dumps(meta))
    ref = native(zarr_read(store))
    assert ref.view("u4")[0] == 0x7FC00001
    a = check_read(store, ref)
    assert np.asarray(a.fill_value).view("u4") == 0x7FC00001


# ---------------------------------------------------------------------------------------------
# Groups.


def _build_group(root, zarr_format, consolidated):
    g = zarr.open_group(str(root), mode="w", zarr_format=zarr_format, attributes={"title": "test", "n": 3})
    data = {
        "temperature": make_data("float32", (6, 8), seed=30),
        "atmos/pressure": make_data(">f8" if zarr_format == 2 else "float64", (5, 4), seed=31),
        "atmos/levels": np.array([1000, 850, 500], dtype="int32"),
        "atmos/deep/er/most": make_data("uint8", (3, 3, 3), seed=32),
        "mask": make_data("bool", (7,), seed=33),
    }
    atmos = g.create_group("atmos", attributes={"kind": "atmosphere"})
    deep = atmos.create_group("deep")
    deep.create_group("er")
    g.create_group("empty")
    dims = {"temperature": ["lat", "lon"], "atmos/pressure": ["x", "level"]}
    for name, arr in data.items():
        parent, _, leaf = name.rpartition("/")
        grp = g[parent] if parent else g
        kw = {}
        if name in dims:
            if zarr_format == 3:
                kw["dimension_names"] = dims[name]
            else:
                kw["attributes"] = {"_ARRAY_DIMENSIONS": dims[name]}
        z = grp.create_array(leaf, shape=arr.shape, dtype=arr.dtype, chunks=tuple(max(1, s // 2) for s in arr.shape),
                             **kw)
        z[...] = arr
    if consolidated:
        zarr.consolidate_metadata(str(root))
    return data, dims


@pytest.mark.parametrize("consolidated", [False, True])
@pytest.mark.parametrize("zarr_format", [2, 3])
def test_groups(store, zarr_format, consolidated):
    data, dims = _build_group(store, zarr_format, consolidated)
    g = zarrstream.open_group(str(store))
    assert g.zarr_format == zarr_format
    assert g.consolidated is consolidated
    assert g.attrs == {"title": "test", "n": 3}
    assert sorted(g.array_names()) == ["mask", "temperature"]
    assert sorted(g.group_names()) == ["atmos", "empty"]
    assert sorted(g) == ["atmos", "empty", "mask", "temperature"]
    assert len(g) == 4
    assert isinstance(g["temperature"], zarrstream.Array)
    assert isinstance(g["atmos"], zarrstream.Group)
    assert g["atmos"].attrs == {"kind": "atmosphere"}
    assert sorted(g["atmos"].array_names()) == ["levels", "pressure"]
    assert sorted(g["atmos"].group_names()) == ["deep"]
    assert sorted(g["atmos/deep"].group_names()) == ["er"]
    assert sorted(g["atmos/deep/er"].array_names()) == ["most"]
    assert len(g["empty"]) == 0
    for name, arr in data.items():
        a = g[name]
        assert isinstance(a, zarrstream.Array), name
        assert a.zarr_format == zarr_format
        assert_bit_equal(a.read(), arr, name)
        assert_bit_equal(a[1:, ...], arr[1:, ...], name)
        assert a.dims == (tuple(dims[name]) if name in dims else None), name
    # Lookup through intermediate groups gives the same arrays.
    assert_bit_equal(g["atmos"]["deep"]["er"]["most"].read(), data["atmos/deep/er/most"])
    assert_bit_equal(g["atmos"]["pressure"][2], data["atmos/pressure"][2])
    # Membership and missing members.
    assert "temperature" in g and "atmos/levels" in g and "atmos/deep/er" in g
    assert "nope" not in g and "atmos/nope" not in g
    with pytest.raises(KeyError):
        g["nope"]
    with pytest.raises(KeyError):
        g["atmos/deep/nope"]
    # Arrays by full URL agree with the group lookups.
    a = zarrstream.open_array(str(store / "atmos" / "pressure"))
    assert_bit_equal(a.read(), data["atmos/pressure"])
    sub = zarrstream.open_group(str(store / "atmos"))
    assert sorted(sub.array_names()) == ["levels", "pressure"]
    assert dict(g.arrays()).keys() == {"mask", "temperature"}


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_open_group_on_array_and_array_on_group(store, zarr_format):
    _build_group(store, zarr_format, consolidated=False)
    with pytest.raises(ZarrstreamError):
        zarrstream.open_array(str(store))
    with pytest.raises(ZarrstreamError):
        zarrstream.open_group(str(store / "temperature"))


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_file_url(store, zarr_format):
    data = make_data("int16", (5, 5), seed=34)
    write(store, data, chunks=(2, 3), zarr_format=zarr_format)
    a = zarrstream.open_array(store.resolve().as_uri())
    assert_bit_equal(a.read(), data)


# ---------------------------------------------------------------------------------------------
# read_region, out buffers, threads.


@pytest.mark.parametrize("num_threads", [0, 1, 3])
def test_read_region_and_threads(store, num_threads):
    data = make_data("float64", (20, 30), seed=35)
    write(store, data, chunks=(7, 8), zarr_format=3, compressors=ZstdCodec(level=1))
    a = zarrstream.open_array(str(store), num_threads=num_threads)
    assert_bit_equal(a.read_region((3, 5), (10, 20)), data[3:13, 5:25])
    assert_bit_equal(a.read_region((0, 0), (20, 30)), data)
    # Into a Fortran-ordered buffer.
    out = np.zeros((10, 20), order="F")
    r = a.read_region([3, 5], [10, 20], out=out)
    assert r is out
    assert_bit_equal(out, data[3:13, 5:25])
    # Into a strided view of a bigger buffer: nothing outside the view is touched.
    big = np.full((25, 70), -1.0)
    view = big[2:22:2, 1:61:3]
    a.read_region((3, 5), (10, 20), out=view)
    assert_bit_equal(view, data[3:13, 5:25])
    untouched = np.ones(big.shape, bool)
    untouched[2:22:2, 1:61:3] = False
    assert (big[untouched] == -1.0).all()
    # Negative-stride view.
    rev = np.zeros((10, 20))[::-1, ::-1]
    a.read_region((3, 5), (10, 20), out=rev)
    assert_bit_equal(rev, data[3:13, 5:25])
    with pytest.raises(TypeError):
        a.read_region((0, 0), (2, 2), out=np.zeros((2, 2), dtype="float32"))
    with pytest.raises(InvalidArgumentError):
        a.read_region((15, 0), (10, 5))


def test_array_protocol_and_len(store):
    data = make_data("int32", (6, 4), seed=36)
    write(store, data, chunks=(4, 4), zarr_format=3)
    a = zarrstream.open_array(str(store))
    assert len(a) == 6
    assert_bit_equal(np.asarray(a), data)
    assert a.size == 24 and a.nbytes == 96 and a.ndim == 2


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_out_of_bounds_index(store, zarr_format):
    write(store, np.arange(12, dtype="i4").reshape(3, 4), chunks=(2, 2), zarr_format=zarr_format)
    a = zarrstream.open_array(str(store))
    for key in [3, -4, (0, 4), (0, -5), (Ellipsis, 10)]:
        with pytest.raises(IndexError):
            a[key]
    with pytest.raises(IndexError):
        a[0, 0, 0]
    with pytest.raises(IndexError):
        a[..., ...]
    with pytest.raises(IndexError):
        a[[0, 1]]


def test_many_chunks_in_parallel(store):
    data = make_compressible("float32", (48, 64, 40), seed=37)
    data += np.arange(data.size, dtype="float32").reshape(data.shape) * 1e-3  # every chunk distinct
    write(store, data, chunks=(6, 8, 8), zarr_format=3, compressors=ZstdCodec(level=1))
    a = zarrstream.open_array(str(store), num_threads=8)
    assert_bit_equal(a.read(), data)
    rng = np.random.default_rng(38)
    for _ in range(20):
        lo = [int(rng.integers(0, s)) for s in data.shape]
        hi = [int(rng.integers(l + 1, s + 1)) for l, s in zip(lo, data.shape)]
        key = tuple(slice(l, h) for l, h in zip(lo, hi))
        assert_bit_equal(a[key], data[key], repr(key))


def test_codecs_description(store):
    write(store, make_data("int32", (6, 6), seed=39), chunks=(3, 3), zarr_format=3,
          filters=[TransposeCodec(order=[1, 0])], serializer=BytesCodec(endian="big"),
          compressors=[BloscCodec(cname="zstd"), Crc32cCodec()])
    a = zarrstream.open_array(str(store))
    assert [c["name"] for c in a.codecs] == ["transpose", "bytes", "blosc", "crc32c"]
    b_store = store.parent / "sharded.zarr"
    write(b_store, make_data("int32", (6, 6), seed=39), chunks=(2, 3), shards=(6, 6), zarr_format=3,
          compressors=ZstdCodec(level=1))
    b = zarrstream.open_array(str(b_store))
    assert b.codecs[0]["name"] == "sharding_indexed"
    inner = [c["name"] for c in b.codecs[0]["configuration"]["codecs"]]
    assert inner == ["bytes", "zstd"]
    v2_store = store.parent / "v2.zarr"
    write(v2_store, make_data("int32", (6, 6), seed=39), chunks=(3, 3), zarr_format=2,
          compressors=numcodecs.Zstd(level=1))
    c = zarrstream.open_array(str(v2_store))
    assert isinstance(c.codecs, list) and c.codecs and all("name" in x for x in c.codecs)


@pytest.mark.parametrize("dtype", ["float32", "int16", "uint8", "complex128"])
def test_large_reads_lie_on_whole_huge_pages(store, dtype):
    # 4 MiB and more: the output starts on a 2 MiB boundary (malloc alone would not), and is an
    # ordinary writable C-ordered array of the data; smaller ones are read as before.
    data = make_data(dtype, (5, 3, 1000 * 8 // np.dtype(dtype).itemsize, 130), seed=41)
    write(store, data, chunks=(1, 2, 300, 130), zarr_format=3, compressors=ZstdCodec(level=1))
    a = zarrstream.open_array(str(store))
    for out, expected in ((a.read(), data), (a[1:4], data[1:4]), (a[2], data[2]),
                          (a.read_region([0, 1, 0, 0], [5, 2, data.shape[2], 130]), data[:, 1:])):
        assert_bit_equal(out, expected)
        assert out.flags.c_contiguous and out.flags.writeable and out.dtype == data.dtype
        if out.nbytes >= 4 << 20:
            assert out.ctypes.data % (2 << 20) == 0
    small = a[0, 0]
    assert small.nbytes < 4 << 20
    assert_bit_equal(small, data[0, 0])

"""Bad input: corrupt chunks and shards, malformed metadata, unsupported types, missing stores.

Each case raises the specific zarrstream.errors subclass (never a crash, never garbage data), and
the message names the store, the array path and, for chunk errors, the chunk key.
"""

from __future__ import annotations

import json
import struct
import subprocess
import sys
import textwrap

import crc32c
import numcodecs
import numpy as np
import pytest
import zarr
from zarr.codecs import BloscCodec, BytesCodec, Crc32cCodec, GzipCodec, ShardingCodec, ZstdCodec

import zarrstream
from zarrstream.errors import (
    CorruptChunkError,
    InvalidArgumentError,
    MetadataError,
    NotFoundError,
    OutOfMemoryError,
    UnsupportedError,
    ZarrstreamError,
)

from conftest import assert_bit_equal, make_compressible, read_json, write_json

ARRAY = "grp/temperature"  # the array's path inside the store in these tests
SHAPE, CHUNKS = (8, 12), (4, 6)  # 2 x 2 chunks


def build(store, zarr_format=3, data=None, **kwargs):
    """A group store with one array at ARRAY; returns its source data."""
    root = zarr.open_group(str(store), mode="w", zarr_format=zarr_format)
    root.create_group("grp")
    if data is None:
        data = make_compressible("float32", SHAPE, seed=50)
    kwargs.setdefault("chunks", CHUNKS)
    z = root.create_array(ARRAY, shape=data.shape, dtype=data.dtype, **kwargs)
    z[...] = data
    return data


def chunk_path(store, zarr_format, coords=(0, 1)):
    if zarr_format == 3:
        return store / ARRAY / "c" / "/".join(map(str, coords))
    return store / ARRAY / ".".join(map(str, coords))


def chunk_key(zarr_format, coords=(0, 1)):
    return ("c/" if zarr_format == 3 else "") + ("/" if zarr_format == 3 else ".").join(map(str, coords))


def assert_names(message: str, store, key: str | None = None):
    """The message names the store, the array path and (when given) the chunk key."""
    assert str(store) in message or str(store.resolve()) in message, f"store not named: {message}"
    assert ARRAY in message, f"array path {ARRAY!r} not named: {message}"
    if key is not None:
        assert key in message, f"chunk key {key!r} not named: {message}"


def open_both(store, **kwargs):
    """The array opened through its group and directly by URL."""
    return [zarrstream.open_group(str(store), **kwargs)[ARRAY],
            zarrstream.open_array(str(store / ARRAY), **kwargs)]


def flip(path, offset, mask=0xFF):
    b = bytearray(path.read_bytes())
    b[offset] ^= mask
    path.write_bytes(bytes(b))


def truncate(path, size):
    b = path.read_bytes()
    path.write_bytes(b[:size])


# ---------------------------------------------------------------------------------------------
# Corrupt chunks.

# name: (zarr_format, create_array kwargs, corruption(path))
CORRUPTIONS = {
    "v3-zstd-truncated": (3, dict(compressors=ZstdCodec(level=3)), lambda p: truncate(p, p.stat().st_size // 2)),
    "v3-zstd-empty-file": (3, dict(compressors=ZstdCodec(level=3)), lambda p: truncate(p, 0)),
    "v3-zstd-bad-magic": (3, dict(compressors=ZstdCodec(level=3)), lambda p: flip(p, 1)),
    "v3-zstd-checksum-flip": (3, dict(compressors=ZstdCodec(level=3, checksum=True)),
                              lambda p: flip(p, p.stat().st_size // 2, 0x10)),
    "v3-zstd-checksum-flip-trailer": (3, dict(compressors=ZstdCodec(level=3, checksum=True)),
                                      lambda p: flip(p, p.stat().st_size - 1)),
    "v3-zstd-garbage": (3, dict(compressors=ZstdCodec(level=3)),
                        lambda p: p.write_bytes(np.random.default_rng(0).bytes(300))),
    "v3-gzip-flip": (3, dict(compressors=GzipCodec(level=6)), lambda p: flip(p, p.stat().st_size // 2, 0x01)),
    "v3-gzip-truncated": (3, dict(compressors=GzipCodec(level=6)), lambda p: truncate(p, p.stat().st_size - 6)),
    "v3-gzip-bad-crc": (3, dict(compressors=GzipCodec(level=6)), lambda p: flip(p, p.stat().st_size - 5)),
    "v3-blosc-truncated": (3, dict(compressors=BloscCodec(cname="lz4")), lambda p: truncate(p, p.stat().st_size - 10)),
    "v3-blosc-header-nbytes": (3, dict(compressors=BloscCodec(cname="lz4")), lambda p: flip(p, 5, 0x01)),
    "v3-blosc-header-cbytes": (3, dict(compressors=BloscCodec(cname="zstd")), lambda p: flip(p, 14, 0x10)),
    "v3-blosc-bad-version": (3, dict(compressors=BloscCodec(cname="lz4")), lambda p: flip(p, 0, 0xF0)),
    "v3-bytes-truncated": (3, dict(compressors=None), lambda p: truncate(p, p.stat().st_size - 1)),
    "v3-bytes-too-long": (3, dict(compressors=None), lambda p: p.write_bytes(p.read_bytes() + b"\0" * 4)),
    "v3-crc32c-checksum-flip": (3, dict(compressors=Crc32cCodec()), lambda p: flip(p, p.stat().st_size - 2)),
    "v3-crc32c-data-flip": (3, dict(compressors=Crc32cCodec()), lambda p: flip(p, 7, 0x01)),
    "v3-crc32c-truncated": (3, dict(compressors=Crc32cCodec()), lambda p: truncate(p, 3)),
    "v3-zstd-crc32c-flip": (3, dict(compressors=[ZstdCodec(level=1), Crc32cCodec()]),
                            lambda p: flip(p, p.stat().st_size // 2, 0x01)),
    "v2-zlib-flip": (2, dict(compressors=numcodecs.Zlib(level=5)), lambda p: flip(p, p.stat().st_size // 2, 0x01)),
    "v2-zlib-truncated": (2, dict(compressors=numcodecs.Zlib(level=5)), lambda p: truncate(p, p.stat().st_size - 3)),
    "v2-gzip-flip": (2, dict(compressors=numcodecs.GZip(level=5)), lambda p: flip(p, p.stat().st_size // 2, 0x01)),
    "v2-bz2-flip": (2, dict(compressors=numcodecs.BZ2(level=9)), lambda p: flip(p, p.stat().st_size // 2, 0x01)),
    "v2-bz2-truncated": (2, dict(compressors=numcodecs.BZ2(level=9)), lambda p: truncate(p, p.stat().st_size // 2)),
    "v2-lz4-truncated": (2, dict(compressors=numcodecs.LZ4()), lambda p: truncate(p, p.stat().st_size // 2)),
    "v2-lz4-size-header": (2, dict(compressors=numcodecs.LZ4()), lambda p: flip(p, 1, 0x01)),
    "v2-blosc-truncated": (2, dict(compressors=numcodecs.Blosc(cname="lz4")), lambda p: truncate(p, 20)),
    "v2-zstd-truncated": (2, dict(compressors=numcodecs.Zstd(level=1)), lambda p: truncate(p, p.stat().st_size - 4)),
    "v2-none-truncated": (2, dict(compressors=None), lambda p: truncate(p, p.stat().st_size - 1)),
    "v2-none-too-long": (2, dict(compressors=None), lambda p: p.write_bytes(p.read_bytes() * 2)),
}


@pytest.mark.parametrize("case", list(CORRUPTIONS), ids=str)
def test_corrupt_chunk(store, case):
    zarr_format, kwargs, corrupt = CORRUPTIONS[case]
    data = build(store, zarr_format, **kwargs)
    path = chunk_path(store, zarr_format)
    assert path.is_file()
    corrupt(path)
    key = chunk_key(zarr_format)
    for a in open_both(store):
        with pytest.raises(CorruptChunkError) as e:
            a.read()
        assert_names(str(e.value), store, key)
        with pytest.raises(CorruptChunkError) as e:
            a[1, 7]
        assert_names(str(e.value), store, key)
        # Chunks that are intact still read.
        assert_bit_equal(a[:, 0:6], data[:, 0:6])
        assert_bit_equal(a[4:, :], data[4:, :])


def test_corrupt_chunk_error_is_a_zarrstream_error(store):
    build(store, 3, compressors=ZstdCodec(level=3))
    truncate(chunk_path(store, 3), 5)
    with pytest.raises(ZarrstreamError):
        zarrstream.open_array(str(store / ARRAY)).read()


# ---------------------------------------------------------------------------------------------
# Corrupt shards.

INNER, SHARD = (2, 3), (4, 6)  # 2 x 2 inner chunks per shard, 2 x 2 shards
N_INNER = 4


def build_sharded(store, index_location="end", crc=True, codecs=None, data=None):
    index_codecs = [BytesCodec(), Crc32cCodec()] if crc else [BytesCodec()]
    return build(store, 3, data=data, chunks=SHARD, compressors=None,
                 serializer=ShardingCodec(chunk_shape=INNER, index_location=index_location,
                                          codecs=codecs or [BytesCodec(), ZstdCodec(level=1)],
                                          index_codecs=index_codecs))


def index_span(blob: bytes, index_location: str, crc: bool):
    size = N_INNER * 16 + (4 if crc else 0)
    return (0, size) if index_location == "start" else (len(blob) - size, len(blob))


def read_index(blob, index_location, crc):
    lo, hi = index_span(blob, index_location, crc)
    raw = blob[lo:hi]
    entries = np.frombuffer(raw[: N_INNER * 16], dtype="<u8").reshape(N_INNER, 2).copy()
    if crc:
        assert struct.unpack("<I", raw[-4:])[0] == crc32c.crc32c(raw[:-4]), "index checksum layout"
    return entries


def write_index(path, entries, index_location, crc):
    blob = path.read_bytes()
    lo, hi = index_span(blob, index_location, crc)
    raw = np.asarray(entries, dtype="<u8").tobytes()
    if crc:
        raw += struct.pack("<I", crc32c.crc32c(raw))
    path.write_bytes(blob[:lo] + raw + blob[hi:])


SHARD_KEY = "c/0/1"


def shard_path(store):
    return store / ARRAY / "c" / "0" / "1"


def _offset_past_end(e, size):
    e[1, 0] = size + 100


def _length_past_end(e, size):
    e[1, 1] = size


def _huge_offset(e, size):
    e[1, 0] = 2**63


def _overflowing_range(e, size):
    e[1, 0] = 2**64 - 8
    e[1, 1] = 16


def _half_empty_marker(e, size):
    e[1, 0] = 2**64 - 1  # offset says "empty", nbytes does not


SHARD_INDEX_CORRUPTIONS = {
    "offset-past-end": _offset_past_end,
    "length-past-end": _length_past_end,
    "huge-offset": _huge_offset,
    "offset-plus-length-overflows": _overflowing_range,
    "half-empty-marker": _half_empty_marker,
}


@pytest.mark.parametrize("crc", [True, False], ids=["crc32c-index", "plain-index"])
@pytest.mark.parametrize("index_location", ["start", "end"])
@pytest.mark.parametrize("case", list(SHARD_INDEX_CORRUPTIONS), ids=str)
def test_shard_index_points_outside(store, case, index_location, crc):
    data = build_sharded(store, index_location, crc)
    path = shard_path(store)
    blob = path.read_bytes()
    entries = read_index(blob, index_location, crc)
    SHARD_INDEX_CORRUPTIONS[case](entries, len(blob))
    write_index(path, entries, index_location, crc)  # checksum recomputed: the index itself is valid
    for a in open_both(store):
        with pytest.raises(CorruptChunkError) as e:
            a.read()
        assert_names(str(e.value), store, SHARD_KEY)
        # Inner chunk 1 of shard (0, 1) is rows 0-1, columns 9-11.
        with pytest.raises(CorruptChunkError) as e:
            a[0:2, 9:12]
        assert_names(str(e.value), store, SHARD_KEY)
        # Other shards still read.
        assert_bit_equal(a[:, 0:6], data[:, 0:6])
        assert_bit_equal(a[4:, :], data[4:, :])


def test_shard_inner_chunk_overlapping_index(store):
    data = build_sharded(store, "end", True)
    path = shard_path(store)
    blob = path.read_bytes()
    entries = read_index(blob, "end", True)
    last = int(np.argmax(entries[:, 0]))
    entries[last, 1] += 8  # the last inner chunk now runs into the index
    write_index(path, entries, "end", True)
    a = zarrstream.open_array(str(store / ARRAY))
    with pytest.raises(CorruptChunkError) as e:
        a.read()
    assert_names(str(e.value), store, SHARD_KEY)
    assert_bit_equal(a[:, 0:6], data[:, 0:6])


@pytest.mark.parametrize("index_location", ["start", "end"])
def test_shard_index_checksum_mismatch(store, index_location):
    build_sharded(store, index_location, True)
    path = shard_path(store)
    blob = path.read_bytes()
    lo, _ = index_span(blob, index_location, True)
    flip(path, lo + 3, 0x01)  # an index byte; checksum not updated
    a = zarrstream.open_array(str(store / ARRAY))
    with pytest.raises(CorruptChunkError) as e:
        a.read()
    assert_names(str(e.value), store, SHARD_KEY)


@pytest.mark.parametrize("index_location", ["start", "end"])
@pytest.mark.parametrize("size", [0, 10, N_INNER * 16 + 3])
def test_shard_truncated(store, index_location, size):
    build_sharded(store, index_location, True)
    truncate(shard_path(store), size)
    a = zarrstream.open_array(str(store / ARRAY))
    with pytest.raises(CorruptChunkError) as e:
        a.read()
    assert_names(str(e.value), store, SHARD_KEY)


def test_shard_inner_chunk_corrupt(store):
    data = build_sharded(store, "end", True, codecs=[BytesCodec(), ZstdCodec(level=1, checksum=True)])
    path = shard_path(store)
    entries = read_index(path.read_bytes(), "end", True)
    offset, nbytes = (int(x) for x in entries[0])  # inner chunk (0, 0) of the shard
    flip(path, offset + nbytes // 2, 0x04)
    a = zarrstream.open_array(str(store / ARRAY))
    with pytest.raises(CorruptChunkError) as e:
        a[0:2, 6:9]
    assert_names(str(e.value), store, SHARD_KEY)
    assert_bit_equal(a[0:2, 9:12], data[0:2, 9:12])


def test_shard_inner_chunk_wrong_length_uncompressed(store):
    build_sharded(store, "start", True, codecs=[BytesCodec()])
    path = shard_path(store)
    entries = read_index(path.read_bytes(), "start", True)
    entries[0, 1] -= 4  # inner chunk is 4 bytes short of 2 x 3 float32
    write_index(path, entries, "start", True)
    a = zarrstream.open_array(str(store / ARRAY))
    with pytest.raises(CorruptChunkError) as e:
        a[0:2, 6:9]
    assert_names(str(e.value), store, SHARD_KEY)


# ---------------------------------------------------------------------------------------------
# Fuzz: random byte flips never crash; with a checksum in the chain they are always detected.

FUZZ_SCRIPT = textwrap.dedent(
    """
    import json, os, sys
    import numpy as np
    import zarrstream
    from zarrstream.errors import ZarrstreamError, CorruptChunkError

    array_url, chunk, must_detect, seed = sys.argv[1], sys.argv[2], sys.argv[3] == "1", int(sys.argv[4])
    original = open(chunk, "rb").read()
    expected = zarrstream.open_array(array_url).read()
    rng = np.random.default_rng(seed)
    undetected, other = 0, []
    for i in range(150):
        b = bytearray(original)
        for _ in range(int(rng.integers(1, 4))):
            b[int(rng.integers(0, len(b)))] ^= int(rng.integers(1, 256))
        if rng.random() < 0.2:
            b = b[: int(rng.integers(0, len(b)))]
        open(chunk, "wb").write(bytes(b))
        try:
            got = zarrstream.open_array(array_url).read()
        except CorruptChunkError:
            continue
        except Exception as e:  # another type: reported below
            other.append(f"{type(e).__name__}: {e}")
            continue
        if got.tobytes() != expected.tobytes():
            undetected += 1
    open(chunk, "wb").write(original)
    print(json.dumps({"undetected": undetected, "other": other[:5]}))
    """
)

FUZZ_CASES = {
    # name: (zarr_format, kwargs, every corruption must be detected)
    "v3-zstd-checksum": (3, dict(compressors=ZstdCodec(level=3, checksum=True)), True),
    "v3-crc32c": (3, dict(compressors=[BloscCodec(cname="lz4"), Crc32cCodec()]), True),
    "v3-gzip": (3, dict(compressors=GzipCodec(level=6)), True),
    "v3-zstd": (3, dict(compressors=ZstdCodec(level=3)), False),
    "v3-blosc-lz4": (3, dict(compressors=BloscCodec(cname="lz4", shuffle="shuffle")), False),
    "v3-blosc-zstd-bitshuffle": (3, dict(compressors=BloscCodec(cname="zstd", shuffle="bitshuffle")), False),
    "v3-blosc-blosclz": (3, dict(compressors=BloscCodec(cname="blosclz")), False),
    "v3-sharded": (3, dict(chunks=SHARD, compressors=None, serializer=ShardingCodec(
        chunk_shape=INNER, codecs=[BytesCodec(), ZstdCodec(level=1)], index_codecs=[BytesCodec()])), False),
    "v3-sharded-crc": (3, dict(chunks=SHARD, compressors=None, serializer=ShardingCodec(
        chunk_shape=INNER, codecs=[BytesCodec(), ZstdCodec(level=1), Crc32cCodec()])), True),
    "v2-zlib": (2, dict(compressors=numcodecs.Zlib(level=5)), True),
    "v2-bz2": (2, dict(compressors=numcodecs.BZ2()), True),
    "v2-lz4": (2, dict(compressors=numcodecs.LZ4()), False),
    "v2-blosc-zlib": (2, dict(compressors=numcodecs.Blosc(cname="zlib", shuffle=numcodecs.Blosc.BITSHUFFLE)), False),
}


@pytest.mark.parametrize("case", list(FUZZ_CASES), ids=str)
def test_fuzz_byte_flips(store, case):
    zarr_format, kwargs, must_detect = FUZZ_CASES[case]
    data = make_compressible("float32", (16, 24), seed=51)
    kwargs = dict(kwargs)
    kwargs.setdefault("chunks", (16, 24))
    build(store, zarr_format, data=data, **kwargs)
    chunk = chunk_path(store, zarr_format, (0, 0))
    script = store.parent / "fuzz.py"
    script.write_text(FUZZ_SCRIPT)
    proc = subprocess.run([sys.executable, str(script), str(store / ARRAY), str(chunk), str(int(must_detect)), "7"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"crashed (rc {proc.returncode}): {proc.stderr[-2000:]}"
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["other"] == [], f"errors of another type than CorruptChunkError: {result['other']}"
    if must_detect:
        assert result["undetected"] == 0, f"{result['undetected']} corruptions read as wrong data"


# ---------------------------------------------------------------------------------------------
# Malformed v3 metadata.


def _set(field, value):
    def edit(meta):
        meta[field] = value
    return edit


def _del(field):
    def edit(meta):
        del meta[field]
    return edit


def _codec(i, codec):
    def edit(meta):
        meta["codecs"][i] = codec
    return edit


def _chunk_shape(value):
    def edit(meta):
        meta["chunk_grid"]["configuration"]["chunk_shape"] = value
    return edit


def _append_codec(codec):
    def edit(meta):
        meta["codecs"].append(codec)
    return edit


V3_BAD_METADATA = {
    # name: (edit, expected error)
    "shape-string": (_set("shape", "abc"), MetadataError),
    "shape-negative": (_set("shape", [-1, 12]), MetadataError),
    "shape-float": (_set("shape", [8.5, 12]), MetadataError),
    "shape-missing": (_del("shape"), MetadataError),
    "data-type-number": (_set("data_type", 5), MetadataError),
    "data-type-missing": (_del("data_type"), MetadataError),
    "chunk-shape-wrong-rank": (_chunk_shape([4]), MetadataError),
    "chunk-shape-zero": (_chunk_shape([0, 6]), MetadataError),
    "chunk-shape-string": (_chunk_shape("4,6"), MetadataError),
    "chunk-grid-missing": (_del("chunk_grid"), MetadataError),
    "codecs-missing": (_del("codecs"), MetadataError),
    "codecs-not-list": (_set("codecs", {"name": "bytes"}), MetadataError),
    "codecs-empty": (_set("codecs", []), MetadataError),
    "codecs-no-array-to-bytes": (_set("codecs", [{"name": "zstd", "configuration": {"level": 1}}]), MetadataError),
    "codec-not-object": (_codec(0, 17), MetadataError),
    "codec-without-name": (_codec(0, {"configuration": {"endian": "little"}}), MetadataError),
    "bytes-endian-bad": (_codec(0, {"name": "bytes", "configuration": {"endian": "middle"}}), MetadataError),
    "zstd-level-string": (_append_codec({"name": "zstd", "configuration": {"level": "high"}}), MetadataError),
    "transpose-bad-order": (lambda m: m["codecs"].insert(0, {"name": "transpose", "configuration": {"order": [0, 0]}}),
                            MetadataError),
    "fill-value-wrong-type": (_set("fill_value", "banana"), MetadataError),
    "fill-value-list-for-float": (_set("fill_value", [1, 2]), MetadataError),
    "zarr-format-string": (_set("zarr_format", "3"), MetadataError),
    "node-type-bad": (_set("node_type", "banana"), MetadataError),
    "dimension-names-wrong-length": (_set("dimension_names", ["a"]), MetadataError),
    "dimension-names-not-strings": (_set("dimension_names", [1, 2]), MetadataError),
    "attributes-not-object": (_set("attributes", [1]), MetadataError),
    "unknown-codec": (_append_codec({"name": "snappy-deluxe", "configuration": {}}), UnsupportedError),
    "unknown-data-type": (_set("data_type", "float8_e9m9"), UnsupportedError),
    "unknown-chunk-grid": (_set("chunk_grid", {"name": "rectilinear", "configuration": {"chunk_shapes": [[4], [6]]}}),
                           UnsupportedError),
    "unknown-chunk-key-encoding": (_set("chunk_key_encoding", {"name": "hilbert"}), UnsupportedError),
    "unknown-extension-field": (_set("my_extension", {"must_understand": True, "x": 1}), UnsupportedError),
    "unknown-extension-plain": (_set("my_extension", 1), UnsupportedError),
    "unknown-storage-transformer": (_set("storage_transformers", [{"name": "funky", "configuration": {}}]),
                                    UnsupportedError),
}


def assert_edited_metadata_fails(store, metadata_file: str, edit, error):
    """After `edit` of ARRAY's `metadata_file`, opening the array fails with `error`, naming it;
    through the group, the same error (not a KeyError, not a crash)."""
    meta_path = store / ARRAY / metadata_file
    meta = read_json(meta_path)
    edit(meta)
    write_json(meta_path, meta)
    with pytest.raises(error) as e:
        zarrstream.open_array(str(store / ARRAY))
    assert ARRAY in str(e.value) and str(store) in str(e.value), str(e.value)
    with pytest.raises(error) as e:
        zarrstream.open_group(str(store))[ARRAY]
    assert_names(str(e.value), store)


@pytest.mark.parametrize("case", list(V3_BAD_METADATA), ids=str)
def test_v3_malformed_metadata(store, case):
    edit, error = V3_BAD_METADATA[case]
    build(store, 3, compressors=None)
    assert_edited_metadata_fails(store, "zarr.json", edit, error)


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_group_with_one_broken_member(store, zarr_format):
    # zarr-python opens the group and its healthy members; only the broken member fails, with a
    # MetadataError naming it (not a KeyError, not a failure of the whole group).
    data = build(store, zarr_format)
    root = zarr.open_group(str(store), mode="a")
    other = root.create_array("other", shape=(3,), chunks=(2,), dtype="int16")
    other[...] = [1, 2, 3]
    meta = store / "broken" / ("zarr.json" if zarr_format == 3 else ".zarray")
    root.create_array("broken", shape=(3,), chunks=(2,), dtype="int16")
    meta.write_text("{broken")
    zg = zarr.open_group(str(store), mode="r")  # what zarr-python does
    assert list(zg["other"][...]) == [1, 2, 3]

    g = zarrstream.open_group(str(store))
    assert_bit_equal(g["other"].read(), np.array([1, 2, 3], dtype="int16"))
    assert_bit_equal(g[ARRAY].read(), data)
    with pytest.raises(MetadataError) as e:
        g["broken"]
    assert "broken" in str(e.value), str(e.value)


@pytest.mark.parametrize("text", ["{not json", "", "[1, 2, 3]", "null", '{"zarr_format": 3', "\x00\x01"],
                         ids=["garbage", "empty", "list", "null", "unterminated", "binary"])
def test_v3_invalid_json(store, text):
    build(store, 3)
    (store / ARRAY / "zarr.json").write_text(text)
    with pytest.raises(MetadataError) as e:
        zarrstream.open_array(str(store / ARRAY))
    assert ARRAY in str(e.value), str(e.value)
    with pytest.raises(MetadataError) as e:
        zarrstream.open_group(str(store))[ARRAY]
    assert_names(str(e.value), store)


def test_v3_ignorable_extension_field_is_ignored(store):
    data = build(store, 3)
    meta_path = store / ARRAY / "zarr.json"
    meta = read_json(meta_path)
    meta["my_extension"] = {"must_understand": False, "anything": [1, 2]}
    write_json(meta_path, meta)
    assert_bit_equal(zarrstream.open_array(str(store / ARRAY)).read(), data)


def test_v3_malformed_group_metadata(store):
    build(store, 3)
    (store / "zarr.json").write_text("{broken")
    with pytest.raises(MetadataError) as e:
        zarrstream.open_group(str(store))
    assert str(store) in str(e.value) or str(store.resolve()) in str(e.value), str(e.value)


# ---------------------------------------------------------------------------------------------
# Malformed and unsupported v2 metadata.

V2_BAD_METADATA = {
    "dtype-void": (_set("dtype", "|V8"), UnsupportedError),
    "dtype-object-without-codec": (_set("dtype", "|O"), UnsupportedError),
    "dtype-structured": (_set("dtype", [["a", "<i4"], ["b", "<f8"]]), UnsupportedError),
    "dtype-garbage": (_set("dtype", "<x7"), (UnsupportedError, MetadataError)),
    "dtype-number": (_set("dtype", 4), MetadataError),
    "dtype-missing": (_del("dtype"), MetadataError),
    "shape-chunks-rank-mismatch": (_set("chunks", [4]), MetadataError),
    "chunks-zero": (_set("chunks", [0, 6]), MetadataError),
    "shape-string": (_set("shape", "8,12"), MetadataError),
    "order-bad": (_set("order", "X"), MetadataError),
    "unknown-compressor": (_set("compressor", {"id": "snappy-deluxe"}), UnsupportedError),
    "compressor-not-object": (_set("compressor", "zstd"), MetadataError),
    "unknown-filter": (_set("filters", [{"id": "fancy-filter"}]), UnsupportedError),
    "separator-bad": (_set("dimension_separator", "|"), MetadataError),
    "zarr-format-wrong": (_set("zarr_format", 7), (UnsupportedError, MetadataError)),
}


@pytest.mark.parametrize("case", list(V2_BAD_METADATA), ids=str)
def test_v2_malformed_metadata(store, case):
    edit, error = V2_BAD_METADATA[case]
    build(store, 2)
    assert_edited_metadata_fails(store, ".zarray", edit, error)


@pytest.mark.parametrize("text", ["{not json", "", "[]"], ids=["garbage", "empty", "list"])
def test_v2_invalid_json(store, text):
    build(store, 2)
    (store / ARRAY / ".zarray").write_text(text)
    with pytest.raises(MetadataError) as e:
        zarrstream.open_array(str(store / ARRAY))
    assert ARRAY in str(e.value), str(e.value)


def test_v2_invalid_zattrs(store):
    build(store, 2)
    (store / ARRAY / ".zattrs").write_text("{oops")
    with pytest.raises(MetadataError) as e:
        zarrstream.open_array(str(store / ARRAY))
    assert ARRAY in str(e.value), str(e.value)


@pytest.mark.parametrize("kind", ["unicode", "object"])
def test_v2_string_dtypes_written_by_zarr_read(store, kind):
    """Once refused, now read (tests/test_string_types.py covers every type)."""
    root = zarr.open_group(str(store), mode="w", zarr_format=2)
    root.create_group("grp")
    values = np.array(["a", "bb", "ccc", "dddd", "é"], dtype="<U10" if kind == "unicode" else object)
    z = root.create_array(ARRAY, shape=(5,), chunks=(2,), dtype="<U10" if kind == "unicode" else str)
    z[:] = values
    assert read_json(store / ARRAY / ".zarray")["dtype"] in ("<U10", "|O")
    assert zarrstream.open_array(str(store / ARRAY)).read().tolist() == values.tolist()
    assert zarrstream.open_group(str(store))[ARRAY].read().tolist() == values.tolist()


def test_v3_unknown_data_type_names_the_array(store):
    root = zarr.open_group(str(store), mode="w", zarr_format=3)
    root.create_group("grp")
    root.create_array(ARRAY, shape=(3,), chunks=(2,), dtype="float32")
    meta = read_json(store / ARRAY / "zarr.json")
    meta["data_type"] = "float8_e9m9"
    (store / ARRAY / "zarr.json").write_text(json.dumps(meta))
    with pytest.raises(UnsupportedError) as e:
        zarrstream.open_array(str(store / ARRAY))
    assert ARRAY in str(e.value) or "float8_e9m9" in str(e.value), str(e.value)
    with pytest.raises(UnsupportedError) as e:
        zarrstream.open_group(str(store))[ARRAY]
    assert ARRAY in str(e.value), str(e.value)


def test_malformed_consolidated_metadata(store):
    build(store, 2)
    zarr.consolidate_metadata(str(store))
    (store / ".zmetadata").write_text('{"metadata": 5, "zarr_consolidated_format": 1}')
    with pytest.raises(MetadataError) as e:
        zarrstream.open_group(str(store))
    assert ".zmetadata" in str(e.value) or str(store) in str(e.value), str(e.value)


# ---------------------------------------------------------------------------------------------
# Missing stores and members, bad URLs, bad indices.


@pytest.mark.parametrize("opener", ["open_array", "open_group"])
def test_missing_store(tmp_path, opener):
    missing = tmp_path / "does-not-exist.zarr"
    with pytest.raises(NotFoundError) as e:
        getattr(zarrstream, opener)(str(missing))
    assert isinstance(e.value, FileNotFoundError)
    assert "does-not-exist.zarr" in str(e.value)


@pytest.mark.parametrize("opener", ["open_array", "open_group"])
def test_empty_directory_is_not_found(tmp_path, opener):
    (tmp_path / "empty.zarr").mkdir()
    with pytest.raises(NotFoundError) as e:
        getattr(zarrstream, opener)(str(tmp_path / "empty.zarr"))
    assert "empty.zarr" in str(e.value)


def test_missing_member(store):
    build(store, 3)
    with pytest.raises(NotFoundError):
        zarrstream.open_array(str(store / "grp" / "nope"))
    g = zarrstream.open_group(str(store))
    with pytest.raises(KeyError):
        g["grp/nope"]


def test_unsupported_url_scheme():
    with pytest.raises(UnsupportedError) as e:
        zarrstream.open_array("ftp://example.invalid/data.zarr")
    assert "ftp" in str(e.value)


@pytest.mark.parametrize("member", ["../outside", "grp/../../outside", "/etc"])
def test_keys_do_not_escape_the_store(store, member):
    build(store, 3)
    outside = store.parent / "outside"
    zarr.create_array(str(outside), shape=(2,), dtype="i1", zarr_format=3)
    g = zarrstream.open_group(str(store))
    with pytest.raises((KeyError, ZarrstreamError)):
        g[member]


def test_index_errors(store):
    build(store, 3)
    a = zarrstream.open_array(str(store / ARRAY))
    with pytest.raises(IndexError):
        a[8]
    with pytest.raises(IndexError):
        a[-9]
    with pytest.raises(IndexError):
        a[0, 12]
    with pytest.raises(IndexError):
        a[0, 0, 0]
    with pytest.raises(IndexError):
        a["x"]
    with pytest.raises(IndexError):
        a[0.5]
    with pytest.raises(InvalidArgumentError):
        a.read_region((0, 0), (9, 1))
    with pytest.raises(InvalidArgumentError):
        a.read_region((0,), (1,))
    with pytest.raises(InvalidArgumentError):
        a.read_region((0, 0), (2, 2), out=np.zeros((3, 2), dtype="float32"))



def test_scalar_boolean_indices_add_an_axis_as_numpy_does(store):
    data = build(store, 3)
    a = zarrstream.open_array(str(store / ARRAY))
    for key in (True, False, np.True_, np.False_, (True, 1), (0, False), (Ellipsis, True),
                (False, slice(1, 3), None), np.array(True)):
        got, want = a[key], data[key]
        assert got.shape == want.shape, (key, got.shape, want.shape)
        assert_bit_equal(got, want, repr(key))


@pytest.mark.parametrize("key", [
    np.ones(SHAPE[0], dtype=bool),
    (slice(None), np.arange(SHAPE[1]) % 2 == 0),
    np.zeros(SHAPE, dtype=bool),
    [True, False] * (SHAPE[0] // 2),
    [0, 2],
    np.array([1, 3]),
])
def test_index_arrays_are_refused_by_name(store, key):
    build(store, 3)
    a = zarrstream.open_array(str(store / ARRAY))
    with pytest.raises(IndexError, match="boolean mask|index array"):
        a[key]


def test_boolean_indices_in_writes_are_refused(store):
    build(store, 3)
    a = zarrstream.open_array(str(store / ARRAY))
    with pytest.raises(IndexError, match="boolean"):
        a[True] = 0


def test_more_dimensions_than_numpy_is_an_unsupported_error(store):
    # 65 dimensions of extent 1: the array opens, a read would need a 65-d numpy array.
    root = store / "deep.zarr"
    zarr.create_array(str(root), shape=(1,) * 65, dtype="uint8", zarr_format=3)
    a = zarrstream.open_array(str(root))
    assert a.ndim == 65
    with pytest.raises(UnsupportedError, match="65 dimensions"):
        a.read()
    for key in (Ellipsis, 0):  # the region read is 65-d even where the result is not
        with pytest.raises(UnsupportedError, match="65 dimensions"):
            a[key]


def test_read_larger_than_memory_is_an_out_of_memory_error(store):
    root = store / "huge.zarr"
    root.mkdir(parents=True)
    write_json(root / "zarr.json", {
        "zarr_format": 3, "node_type": "array", "shape": [2**60, 4], "data_type": "float64",
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [1024, 4]}},
        "chunk_key_encoding": {"name": "default"}, "fill_value": 0,
        "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}], "attributes": {},
    })
    a = zarrstream.open_array(str(root))
    assert a.nbytes == 2**60 * 4 * 8  # 2^65: Python integers, no int64 wrap
    with pytest.raises(OutOfMemoryError, match=f"needs {2**60 * 4 * 8} bytes") as e:
        a.read()
    assert isinstance(e.value, MemoryError) and "huge.zarr" in str(e.value)
    assert a[2**60 - 1].tolist() == [0.0] * 4


@pytest.mark.parametrize("field", ["data_type", "node_type", "attributes"])
def test_invalid_utf8_in_metadata_is_a_zarrstream_error(store, field):
    root = store / "bad.zarr"
    root.mkdir(parents=True)
    doc = {
        "zarr_format": 3, "node_type": "array", "shape": [4], "data_type": "uint8",
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [2]}},
        "chunk_key_encoding": {"name": "default"}, "fill_value": 0,
        "codecs": [{"name": "bytes"}], "attributes": {},
    }
    doc[field] = "PLACEHOLDER"
    text = json.dumps(doc).encode().replace(b"PLACEHOLDER", b"bad\xff\xfebytes")
    (root / "zarr.json").write_bytes(text)
    with pytest.raises(ZarrstreamError) as e:
        zarrstream.open_array(str(root))
    assert "bad.zarr" in str(e.value)

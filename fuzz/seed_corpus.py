#!/usr/bin/env python3
"""Writes the fuzz targets' seed corpora: real documents and chunks from zarr-python and numcodecs.

    python fuzz/seed_corpus.py build/fuzz/seeds

makes one folder per target (build/fuzz/seeds/<target>/), filled with inputs in that target's
layout (see the overview comment of fuzz/<target>.cc). Metadata and shards are written by
zarr-python into a scratch store and read back from disk; codec chunks are encoded by numcodecs,
which is what zarr-python calls to encode them. Seeds are generated, never committed.
"""

import hashlib
import shutil
import sys
import tempfile
import warnings
from pathlib import Path

import crc32c
import numcodecs
import numpy as np
import zarr
from zarr.codecs import (BloscCodec, BytesCodec, Crc32cCodec, GzipCodec, ShardingCodec,
                         TransposeCodec, ZstdCodec)

# Must match kDataTypes in codec_decode_fuzzer.cc.
CODEC_DATA_TYPES = ["|u1", "<i2", "<u2", "<i4", "<f4", "<f8", "<i8", "<c8", "|b1", "<f2", "<u8",
                    "|i1"]


class Corpus:
    """Seed files of one target, named by content hash so reruns do not duplicate them."""

    def __init__(self, root: Path, target: str):
        self.dir = root / target
        self.dir.mkdir(parents=True, exist_ok=True)
        self.count = 0

    def add(self, data: bytes) -> None:
        (self.dir / hashlib.sha1(data).hexdigest()).write_bytes(data)
        self.count += 1


def sample(dtype: str, shape) -> np.ndarray:
    """A smooth, compressible field of small values (they fit fixedscaleoffset's int16)."""
    n = int(np.prod(shape, dtype=np.int64))
    values = (np.sin(np.arange(n) * 0.3) * 50 + 60).reshape(shape)
    return values.astype(np.dtype(dtype))


# ---- metadata -------------------------------------------------------------------------------------

def v3_arrays(store: Path):
    """(name, kwargs) of zarr-python v3 arrays covering data types, fill values and codecs."""
    yield "f4_zstd", dict(shape=(20, 30), chunks=(10, 15), dtype="f4", fill_value=float("nan"),
                          compressors=ZstdCodec(level=3), dimension_names=["y", "x"],
                          attributes={"units": "K", "scale": [1, 2.5]})
    yield "i2_gzip", dict(shape=(7,), chunks=(3,), dtype="i2", fill_value=-1,
                          compressors=GzipCodec(level=5))
    yield "u1_blosc", dict(shape=(4, 4, 4), chunks=(2, 2, 2), dtype="u1", fill_value=255,
                           compressors=BloscCodec(cname="lz4", clevel=5, shuffle="bitshuffle"))
    yield "f8_inf", dict(shape=(5, 5), chunks=(5, 5), dtype="f8", fill_value=float("-inf"),
                         compressors=None)
    yield "c8", dict(shape=(6,), chunks=(2,), dtype="c8", fill_value=complex(1, -2))
    yield "bool", dict(shape=(9,), chunks=(4,), dtype="bool", fill_value=True)
    yield "f2", dict(shape=(3, 3), chunks=(2, 2), dtype="f2", fill_value=0.5)
    yield "u8_crc", dict(shape=(10,), chunks=(5,), dtype="u8", fill_value=0,
                         compressors=[ZstdCodec(level=1, checksum=True), Crc32cCodec()])
    yield "sharded", dict(shape=(16, 16), chunks=(4, 4), shards=(8, 8), dtype="i4",
                          fill_value=0, compressors=ZstdCodec(level=1))
    yield "transpose", dict(shape=(6, 4), chunks=(3, 2), dtype="<u2", fill_value=7,
                            filters=[TransposeCodec(order=(1, 0))])
    yield "big_endian", dict(shape=(4,), chunks=(4,), dtype="i8", fill_value=3,
                             serializer=BytesCodec(endian="big"))
    yield "scalar", dict(shape=(), chunks=(), dtype="f4", fill_value=1.0)


def v2_arrays():
    yield "f4_zstd", dict(shape=(20, 30), chunks=(10, 15), dtype="<f4", fill_value=float("nan"),
                          compressors=numcodecs.Zstd(level=3),
                          attributes={"_ARRAY_DIMENSIONS": ["y", "x"], "units": "K"})
    yield "i8_blosc_F", dict(shape=(6, 5), chunks=(3, 5), dtype=">i8", fill_value=0,
                             order="F", compressors=numcodecs.Blosc(cname="zstd", shuffle=2))
    yield "delta_zlib", dict(shape=(12,), chunks=(5,), dtype="<i4", fill_value=None,
                             filters=[numcodecs.Delta(dtype="<i4")],
                             compressors=numcodecs.Zlib(level=1))
    yield "fso_gzip", dict(shape=(8,), chunks=(8,), dtype="<f8", fill_value=-9999.0,
                           filters=[numcodecs.FixedScaleOffset(offset=1, scale=10, dtype="<f8",
                                                               astype="<i2")],
                           compressors=numcodecs.GZip(level=1))
    yield "lz4_slash", dict(shape=(4, 4), chunks=(2, 2), dtype="|u1", fill_value=1,
                            compressors=numcodecs.LZ4(), chunk_key_encoding={"name": "v2",
                                                                             "separator": "/"})
    yield "bz2_bool", dict(shape=(10,), chunks=(3,), dtype="|b1", fill_value=False,
                           compressors=numcodecs.BZ2(level=1))
    yield "shuffle_c16", dict(shape=(3,), chunks=(3,), dtype="<c16", fill_value=None,
                              filters=[numcodecs.Shuffle(elementsize=16)], compressors=None)


def write_metadata_seeds(out: Path, scratch: Path) -> None:
    v3 = Corpus(out, "v3_metadata_fuzzer")
    v2 = Corpus(out, "v2_metadata_fuzzer")
    consolidated = Corpus(out, "consolidated_metadata_fuzzer")

    root3 = scratch / "v3.zarr"
    group = zarr.open_group(root3, mode="w", zarr_format=3, attributes={"title": "seeds"})
    for name, kwargs in v3_arrays(root3):
        array = group.create_array(name, **kwargs)
        array[...] = sample(str(array.dtype), array.shape)
    group.create_group("sub", attributes={"nested": True}).create_array(
        "leaf", shape=(2,), chunks=(2,), dtype="u2")
    zarr.consolidate_metadata(root3)
    for path in root3.rglob("zarr.json"):
        v3.add(path.read_bytes())

    root2 = scratch / "v2.zarr"
    group = zarr.open_group(root2, mode="w", zarr_format=2, attributes={"title": "seeds"})
    for name, kwargs in v2_arrays():
        array = group.create_array(name, **kwargs)
        array[...] = sample(str(array.dtype), array.shape)
    group.create_group("sub").create_array("leaf", shape=(2,), chunks=(2,), dtype="<u2")
    zarr.consolidate_metadata(root2)
    for path in root2.rglob(".zarray"):
        attrs = path.parent / ".zattrs"
        v2.add(path.read_bytes())
        if attrs.exists():
            v2.add(path.read_bytes() + b"\0" + attrs.read_bytes())
    for path in root2.rglob(".zgroup"):
        attrs = path.parent / ".zattrs"
        v2.add(path.read_bytes() + (b"\0" + attrs.read_bytes() if attrs.exists() else b""))
    consolidated.add((root2 / ".zmetadata").read_bytes())
    print(f"seeds: {v3.count} zarr.json, {v2.count} v2 documents, {consolidated.count} .zmetadata")


# ---- codec chains ---------------------------------------------------------------------------------

def blosc(cname, shuffle):
    return lambda b, a: numcodecs.Blosc(cname=cname, clevel=5, shuffle=shuffle,
                                        blocksize=0).encode(np.frombuffer(b, dtype=a.dtype))


def with_crc32c(b: bytes) -> bytes:
    return b + crc32c.crc32c(b).to_bytes(4, "little")


# Index = chain byte; must match kChains in codec_decode_fuzzer.cc. Each entry: (array->array
# encoder or None, bytes->bytes encoder taking (bytes, the array they serialise)).
CHAINS = [
    (None, lambda b, a: b),
    (None, lambda b, a: numcodecs.Zstd(level=3).encode(b)),
    (None, lambda b, a: numcodecs.GZip(level=5).encode(b)),
    (None, lambda b, a: numcodecs.Zlib(level=5).encode(b)),
    (None, lambda b, a: numcodecs.LZ4(acceleration=1).encode(b)),
    (None, lambda b, a: numcodecs.BZ2(level=5).encode(b)),
    (None, blosc("lz4", numcodecs.Blosc.SHUFFLE)),
    (None, blosc("zstd", numcodecs.Blosc.AUTOSHUFFLE)),
    (None, lambda b, a: with_crc32c(b)),
    (None, lambda b, a: numcodecs.Zstd(level=1).encode(
        numcodecs.Shuffle(elementsize=a.dtype.itemsize).encode(b))),
    (None, lambda b, a: with_crc32c(numcodecs.Zstd(level=3, checksum=True).encode(b))),
    (None, lambda b, a: numcodecs.Zstd(level=1).encode(numcodecs.GZip(level=1).encode(b))),
    ("delta", lambda b, a: numcodecs.Zstd(level=1).encode(b)),
    ("fixedscaleoffset", lambda b, a: numcodecs.Zlib(level=1).encode(b)),
    ("transpose", lambda b, a: numcodecs.LZ4(acceleration=1).encode(b)),
    ("transpose", blosc("zstd", numcodecs.Blosc.BITSHUFFLE)),
]

CODEC_SHAPES = [(), (16,), (4, 5), (3, 4, 5), (0, 3), (16, 16, 16)]
PERMUTATIONS = {0: [()], 1: [(0,)], 2: [(0, 1), (1, 0)], 3: [(0, 1, 2), (0, 2, 1), (1, 0, 2)]}


def encode_chunk(chain: int, dtype: str, shape, big_endian: bool, order) -> bytes:
    array_codec, bytes_codec = CHAINS[chain]
    data = sample(dtype, shape)
    if array_codec == "delta" and data.size:  # numcodecs cannot delta-encode an empty chunk
        data = numcodecs.Delta(dtype=dtype).encode(data).reshape(shape)
    elif array_codec == "fixedscaleoffset":
        data = numcodecs.FixedScaleOffset(offset=1.5, scale=100, dtype=dtype,
                                          astype="<i2").encode(data).reshape(shape)
    elif array_codec == "transpose":
        data = np.ascontiguousarray(np.transpose(data, order))
    serialised = data.astype(data.dtype.newbyteorder(">" if big_endian else "<")).tobytes()
    return bytes(bytes_codec(serialised, data))


def write_codec_seeds(out: Path) -> None:
    corpus = Corpus(out, "codec_decode_fuzzer")
    for chain in range(len(CHAINS)):
        for type_index, dtype in enumerate(CODEC_DATA_TYPES):
            if CHAINS[chain][0] == "fixedscaleoffset" and dtype not in ("<f4", "<f8"):
                continue
            if CHAINS[chain][0] == "delta" and dtype in ("<c8", "|b1", "<f2"):
                continue
            for shape in CODEC_SHAPES:
                if shape == (16, 16, 16) and type_index % 4:
                    continue  # a few large chunks are enough
                for perm_index, order in enumerate(PERMUTATIONS[len(shape)]):
                    if CHAINS[chain][0] != "transpose" and perm_index:
                        continue
                    big = dtype.startswith("<") and (chain + type_index) % 3 == 0
                    dims = list(shape) + [0] * (3 - len(shape))
                    header = bytes([chain, type_index, len(shape), *dims, int(big), perm_index])
                    corpus.add(header + encode_chunk(chain, dtype, shape, big, order))
    # Blosc frames of many blocks, a short last one, and split streams (the GPU path parses each
    # block's streams itself): small block sizes on the largest chunks.
    for chain, cname, shuffle in ((6, "lz4", numcodecs.Blosc.SHUFFLE),
                                  (7, "zstd", numcodecs.Blosc.SHUFFLE)):
        for type_index, dtype in enumerate(CODEC_DATA_TYPES):
            for blocksize in (256, 1000, 4096):
                data = sample(dtype, (16, 16, 16))
                frame = numcodecs.Blosc(cname=cname, clevel=5, shuffle=shuffle,
                                        blocksize=blocksize).encode(data)
                corpus.add(bytes([chain, type_index, 3, 16, 16, 16, 0, 0]) + bytes(frame))
    print(f"seeds: {corpus.count} encoded chunks")


# ---- shards ---------------------------------------------------------------------------------------

# Must match kLayouts in shard_fuzzer.cc: (dtype, shard shape, inner chunk shape).
SHARD_LAYOUTS = [("<u2", (4, 6), (2, 3)), ("<u4", (8,), (2,)), ("|u1", (2, 2, 4), (1, 2, 2)),
                 ("<f8", (4, 4), (4, 4))]


def sharding_codec(config: int, inner_shape) -> ShardingCodec:
    if config & 16:
        nested = (1,) * (len(inner_shape) - 1) + (inner_shape[-1],)
        codecs = [ShardingCodec(chunk_shape=nested, codecs=[BytesCodec()])]
    else:
        reversed_order = tuple(reversed(range(len(inner_shape))))
        codecs = [[BytesCodec()], [BytesCodec(), ZstdCodec(level=1)],
                  [BytesCodec(), Crc32cCodec()],
                  [TransposeCodec(order=reversed_order), BytesCodec(), GzipCodec(level=1)]
                  ][(config >> 1) & 3]
    index_codecs = [BytesCodec()] if config & 8 else [BytesCodec(), Crc32cCodec()]
    return ShardingCodec(chunk_shape=inner_shape, codecs=codecs, index_codecs=index_codecs,
                         index_location="start" if config & 1 else "end")


def write_shard_seeds(out: Path, scratch: Path) -> None:
    corpus = Corpus(out, "shard_fuzzer")
    for config in range(128):
        if config & 16 and (config >> 1) & 3:
            continue  # nested sharding ignores the inner codec bits
        dtype, shard_shape, inner_shape = SHARD_LAYOUTS[(config >> 5) & 3]
        for partial in (False, True):
            path = scratch / f"shard{config}_{int(partial)}.zarr"
            array = zarr.create_array(path, shape=shard_shape, chunks=shard_shape, dtype=dtype,
                                      serializer=sharding_codec(config, inner_shape),
                                      compressors=None, filters=None, fill_value=0x7F,
                                      zarr_format=3)
            data = sample(dtype, shard_shape)
            if partial:  # leave inner chunks at the fill value: empty index entries
                array[(slice(0, 1),) * len(shard_shape)] = data[(slice(0, 1),) * len(shard_shape)]
            else:
                array[...] = data
            for chunk in path.glob("c/**/*"):
                if chunk.is_file():
                    corpus.add(bytes([config]) + chunk.read_bytes())
    print(f"seeds: {corpus.count} shards")


def write_parquet_seeds(out: Path, scratch: Path) -> None:
    """Record files of Parquet reference sets as fsspec writes them, with each engine installed
    (fastparquet, pyarrow), plus pyarrow's data page v2 and GZIP variants."""
    import importlib.util

    import pandas as pd

    corpus = Corpus(out, "parquet_file_fuzzer")
    frame = pd.DataFrame({
        "path": pd.Categorical(["a.nc", None, "b.nc", "a.nc"]),
        "offset": np.array([10, 0, 30, 0], dtype="int64"),
        "size": np.array([5, 0, 7, 0], dtype="int64"),
        "raw": [None, None, None, b"inline"],
    })
    for engine in ("fastparquet", "pyarrow"):
        if importlib.util.find_spec(engine) is None:
            continue
        variants = [{"compression": "zstd"}, {"compression": "gzip"}, {"compression": None}]
        if engine == "pyarrow":
            variants.append({"compression": "zstd", "data_page_version": "2.0"})
        for i, options in enumerate(variants):
            path = scratch / f"refs_{engine}_{i}.parq"
            frame.to_parquet(path, engine=engine, index=False, **options)
            corpus.add(path.read_bytes())
    print(f"seeds: {corpus.count} Parquet files")


def main() -> None:
    if len(sys.argv) != 2:
        sys.exit("usage: seed_corpus.py OUTPUT_DIR")
    out = Path(sys.argv[1])
    shutil.rmtree(out, ignore_errors=True)
    warnings.filterwarnings("ignore")  # zarr-python warns about numcodecs codecs in v3 and v2
    with tempfile.TemporaryDirectory() as scratch:
        write_metadata_seeds(out, Path(scratch))
        write_codec_seeds(out)
        write_shard_seeds(out, Path(scratch))
        write_parquet_seeds(out, Path(scratch))


if __name__ == "__main__":
    main()

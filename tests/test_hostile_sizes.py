"""Declared sizes no machine could hold, and size arithmetic near 2^64.

Metadata is written by hand (zarr-python will not write such arrays) with huge declared shapes,
chunks and shards. Every case runs in a subprocess under an address-space limit (RLIMIT_AS) and a
timeout, so an allocation sized from a declared shape fails fast instead of swapping, a
std::bad_alloc that escapes a worker thread shows as a killed process, and a loop over a huge chunk
grid shows as a timeout. What each case must give: a ZarrstreamError naming the array and what was
asked (or the right values, where memory is bounded by what is requested and stored).
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import textwrap
from pathlib import Path

import numcodecs
import pytest

from conftest import CLI

# Enough for the interpreter, numpy, torch and the library's threads; far below what any hostile
# case would take if it allocated what its metadata declares.
ADDRESS_SPACE_LIMIT = 6 << 30
TIMEOUT = 120


def _limit_address_space():
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE_LIMIT, ADDRESS_SPACE_LIMIT))


def run_limited(args: list[str]) -> subprocess.CompletedProcess:
    proc = subprocess.run(args, capture_output=True, text=True, timeout=TIMEOUT,
                          preexec_fn=_limit_address_space)
    # A negative code: killed by a signal (an uncaught exception aborts).
    assert proc.returncode >= 0, f"killed by signal {-proc.returncode}: {proc.stderr}"
    return proc


def run_python(code: str) -> str:
    """Runs `code` under the limits; it prints what it found. Returns its output."""
    proc = run_limited([sys.executable, "-c", textwrap.dedent(code)])
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def write_v3_array(root: Path, shape, chunks, dtype="uint8", shard=None, dims=None) -> None:
    """zarr.json of an array with `shape` and `chunks` (inner chunks of `shard` when given), zstd."""
    codecs = [{"name": "bytes", "configuration": {"endian": "little"}},
              {"name": "zstd", "configuration": {"level": 1, "checksum": False}}]
    grid = list(chunks)
    if shard is not None:
        codecs = [{"name": "sharding_indexed",
                   "configuration": {"chunk_shape": list(chunks), "codecs": codecs,
                                     "index_codecs": [{"name": "bytes",
                                                       "configuration": {"endian": "little"}},
                                                      {"name": "crc32c"}],
                                     "index_location": "end"}}]
        grid = list(shard)
    doc = {
        "zarr_format": 3,
        "node_type": "array",
        "shape": list(shape),
        "data_type": dtype,
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": grid}},
        "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
        "fill_value": 0,
        "codecs": codecs,
        "attributes": {},
        "dimension_names": list(dims) if dims else [f"d{i}" for i in range(len(shape))],
    }
    root.mkdir(parents=True, exist_ok=True)
    (root / "zarr.json").write_text(json.dumps(doc))


def store_chunk(root: Path, key: str, payload: bytes) -> None:
    path = root / key
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(numcodecs.Zstd(level=1).encode(payload))


@pytest.fixture
def huge_chunk(tmp_path):
    """A 1-D uint8 array whose chunks declare 2^40 bytes, with one small stored chunk (chunk 0)
    and chunk 1 not stored."""
    root = tmp_path / "huge_chunk.zarr"
    write_v3_array(root, shape=[2**41], chunks=[2**40], dims=["time"])
    store_chunk(root, "c/0", bytes(range(16)))
    return root


def test_read_of_a_stored_chunk_larger_than_memory_is_an_error(huge_chunk):
    out = run_python(f"""
        import zarrstream
        a = zarrstream.open_array({str(huge_chunk)!r})
        try:
            a[0:10]
            print("read")
        except zarrstream.OutOfMemoryError as e:
            assert isinstance(e, MemoryError)
            print("error:", e)
    """)
    assert out.startswith("error:"), out
    # What was asked and of what: the chunk's shape and bytes, the chunk key, the array.
    assert "out of memory" in out and str(2**40) in out and "'c/0'" in out, out
    assert "huge_chunk.zarr" in out, out


def test_read_of_a_missing_chunk_costs_only_the_request(huge_chunk):
    # A chunk not stored is its fill value: nothing of its declared size is allocated.
    out = run_python(f"""
        import zarrstream
        a = zarrstream.open_array({str(huge_chunk)!r})
        print(a[2**40 + 5: 2**40 + 9].tolist())
    """)
    assert out.strip() == "[0, 0, 0, 0]", out


def test_sharded_array_with_huge_inner_chunks_or_index_is_an_error(tmp_path):
    # Inner chunks of 2^36 bytes; and a shard of 2^40 one-byte inner chunks (a 16 TiB index).
    big_inner = tmp_path / "big_inner.zarr"
    write_v3_array(big_inner, shape=[2**37], chunks=[2**36], shard=[2**37])
    huge_index = tmp_path / "huge_index.zarr"
    write_v3_array(huge_index, shape=[2**40], chunks=[1], shard=[2**40])
    for root in (big_inner, huge_index):
        # A shard file whose tail is read as its index.
        (root / "c").mkdir()
        (root / "c" / "0").write_bytes(bytes(64))
    out = run_python(f"""
        import zarrstream
        for url in ({str(big_inner)!r}, {str(huge_index)!r}):
            try:
                a = zarrstream.open_array(url)
                a[0:4]
                print("read", url)
            except zarrstream.ZarrstreamError as e:
                print(type(e).__name__, e)
    """)
    lines = out.strip().splitlines()
    assert len(lines) == 2 and not any(line.startswith("read") for line in lines), out
    assert all("c/0" in line or "shard" in line for line in lines), out


def test_whole_array_read_larger_than_memory_is_an_out_of_memory_error(tmp_path):
    # 8 x 2^30 x 2^30 float32, nothing stored: the result alone is 2^65 bytes; a[0] 2^62.
    root = tmp_path / "cube.zarr"
    write_v3_array(root, shape=[8, 2**30, 2**30], chunks=[1, 2**15, 2**15], dtype="float32",
                   dims=["time", "y", "x"])
    out = run_python(f"""
        import zarrstream
        a = zarrstream.open_array({str(root)!r})
        print(a.size == 8 * 2**60, a.nbytes == 4 * 8 * 2**60)
        for what, read in (("read", a.read), ("a[0]", lambda: a[0]),
                           ("region", lambda: a.read_region([0, 0, 0], [1, 2**20, 2**20]))):
            try:
                read()
                print(what, "read")
            except zarrstream.OutOfMemoryError as e:
                print(what, "error:", e)
        # What is requested stays cheap, however large the array.
        print(a[7, 2**30 - 2:, :3].tolist())
    """)
    lines = out.strip().splitlines()
    assert lines[0] == "True True", out
    for line in lines[1:4]:
        assert "error: out of memory" in line and "bytes" in line and "cube.zarr" in line, out
    assert lines[4] == "[[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]", out


def test_read_touching_more_chunks_than_one_call_takes_is_read_in_runs(tmp_path):
    # One-element chunks: a read of 2^17 + 5 elements touches that many chunks, handed to the
    # chunk reader in runs (of 2^16), so that its bookkeeping stays bounded however many chunks a
    # read touches. Values from different runs land in their places.
    root = tmp_path / "tiny.zarr"
    write_v3_array(root, shape=[2**40], chunks=[1], dtype="uint8")
    store_chunk(root, "c/3", bytes([7]))
    store_chunk(root, f"c/{2**16 + 1}", bytes([9]))
    out = run_python(f"""
        import numpy as np
        import zarrstream
        a = zarrstream.open_array({str(root)!r})
        got = a[0:2**17 + 5]
        print(got.shape, np.flatnonzero(got).tolist(), got[3], got[2**16 + 1])
    """)
    assert out.strip() == f"({2**17 + 5},) [3, {2**16 + 1}] 7 9", out


def test_rechunk_of_a_chunk_larger_than_memory_fails_clearly(huge_chunk, tmp_path):
    dst = tmp_path / "dst.zarr"
    proc = run_limited([str(CLI), "rechunk", str(huge_chunk), str(dst), "--threads", "2"])
    assert proc.returncode == 1, proc.stderr
    assert "out of memory" in proc.stderr and str(2**40) in proc.stderr, proc.stderr
    # Refused while planning: nothing recorded that would block a corrected command.
    assert not (dst / ".zarrstream-rechunk").exists()


def test_rechunk_reading_a_source_chunk_larger_than_memory_fails_clearly(tmp_path):
    # A small array whose one chunk declares 2^40 bytes: the output slabs fit, but reading them
    # decodes the whole source chunk.
    src = tmp_path / "src.zarr"
    write_v3_array(src, shape=[2**16], chunks=[2**40], dims=["time"])
    store_chunk(src, "c/0", bytes(16))
    dst = tmp_path / "dst.zarr"
    proc = run_limited([str(CLI), "rechunk", str(src), str(dst), "--threads", "2"])
    assert proc.returncode == 1, proc.stderr
    assert "out of memory" in proc.stderr and "'c/0'" in proc.stderr, proc.stderr


def test_rechunk_of_more_slabs_than_memory_can_track_fails_clearly(tmp_path):
    # 8 x 2^30 x 2^30 in chunks of 1 x 2^15 x 2^15: 2^33 output chunks, none stored. Listing them
    # would take hundreds of GB before the first was copied.
    src = tmp_path / "cube.zarr"
    write_v3_array(src, shape=[8, 2**30, 2**30], chunks=[1, 2**15, 2**15], dtype="float32",
                   dims=["time", "y", "x"])
    dst = tmp_path / "dst.zarr"
    proc = run_limited([str(CLI), "rechunk", str(src), str(dst), "--threads", "2"])
    assert proc.returncode == 1, proc.stderr
    assert f"tracking the {2**33} slabs" in proc.stderr and "out of memory" in proc.stderr, proc.stderr
    assert not (dst / ".zarrstream-rechunk").exists()


def write_t2m_group(root: Path, shape, chunks) -> None:
    """A group at `root` with one float32 array t2m (time, y, x)."""
    root.mkdir()
    (root / "zarr.json").write_text(json.dumps(
        {"zarr_format": 3, "node_type": "group", "attributes": {}}))
    write_v3_array(root / "t2m", shape=shape, chunks=chunks, dtype="float32",
                   dims=["time", "y", "x"])


def first_t2m_batch(root: Path) -> str:
    """Takes the first batch of 4x4 windows of t2m under the limits: "batch", or the error's class
    and message."""
    return run_python(f"""
        import zarrstream
        try:
            loader = zarrstream.Loader({str(root)!r}, ["t2m"], sample={{"y": 4, "x": 4}},
                                       batch_size=1, shuffle="none", output="dlpack")
            next(iter(loader))
            print("batch")
        except zarrstream.ZarrstreamError as e:
            print(type(e).__name__, e)
    """)


def test_loader_over_a_chunk_larger_than_memory_fails_clearly(tmp_path):
    root = tmp_path / "ds.zarr"
    write_t2m_group(root, shape=[4, 2**20, 2**20], chunks=[1, 2**20, 2**20])
    store_chunk(root / "t2m", "c/0/0/0", bytes(64))
    out = first_t2m_batch(root)
    assert out.startswith("OutOfMemoryError") and "t2m" in out, out


def test_loader_failing_to_allocate_a_chunk_is_an_error_not_an_abort(tmp_path):
    # A chunk of exactly the address-space limit: it is not refused up front (the limit is not
    # passed), and its allocation fails on a loader thread, where it must become the batch's error.
    root = tmp_path / "ds.zarr"
    chunk = [1, ADDRESS_SPACE_LIMIT // 4 // 2**15, 2**15]
    write_t2m_group(root, shape=[4, *chunk[1:]], chunks=chunk)
    out = first_t2m_batch(root)
    assert out.startswith("OutOfMemoryError") and "chunk cache entry" in out and "t2m" in out, out

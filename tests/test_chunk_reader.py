"""The remote path of the chunk reader (src/array/chunk_reader.h) through Array.read over HTTP.

nginx serves stores written by zarr-python: a sharded array of more shards than the reader issues
in one batch (so index reads, inner-range reads and the request window all come into play), with
shards never written and inner chunks left empty, and an unsharded array of more chunks than the
request window. Reads must equal zarr-python's bit for bit, each shard's index must be read once
per read, and per-chunk errors must name the chunk.
"""

from __future__ import annotations

import collections

import numpy as np
import pytest
import zarr

import zarrstream

from conftest import assert_bit_equal, make_compressible, zarr_read
from object_servers import Nginx

SHARDED_SHAPE = (40, 48)  # 10 x 12 = 120 shards of (4, 4), each of 2 x 2 inner chunks of (2, 2)


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    root = tmp_path_factory.mktemp("chunk_reader_tree")
    sharded = zarr.create_array(root / "sharded.zarr", shape=SHARDED_SHAPE, chunks=(2, 2),
                                shards=(4, 4), dtype="int32", fill_value=-7)
    data = make_compressible("int32", SHARDED_SHAPE, seed=11)
    # Shards whose row is 3 are never written; inner chunks equal to the fill value are left out
    # of their shard (zarr-python does not store empty chunks).
    data[12:16, :] = -7
    data[0:2, 2:4] = -7
    data[22:24, 30:32] = -7
    sharded[...] = data
    unsharded = zarr.create_array(root / "unsharded.zarr", shape=(300, 8), chunks=(1, 8),
                                  dtype="float32", fill_value=np.nan)
    unsharded[...] = make_compressible("float32", (300, 8), seed=5)
    # Rows never written read as NaN (the fill value): zarr-python skips storing them.
    unsharded[100:103] = np.nan
    return root


@pytest.fixture(scope="module")
def nginx(tree, tmp_path_factory):
    server = Nginx(tree, tmp_path_factory.mktemp("nginx"))
    yield server
    server.stop()


def chunk_requests(nginx):
    """The logged requests for chunks and shards (nginx may log the metadata read that opened the
    array after the test cleared the log: it logs once the response is sent)."""
    return [r for r in nginx.requests() if "/c/" in r.path]


def test_the_fixture_has_missing_shards_and_empty_inner_chunks(tree):
    shards = {p.relative_to(tree / "sharded.zarr").as_posix()
              for p in (tree / "sharded.zarr" / "c").rglob("*") if p.is_file()}
    assert "c/3/0" not in shards and "c/0/0" in shards and len(shards) == 120 - 12
    assert not (tree / "unsharded.zarr" / "c" / "100" / "0").exists()


def test_sharded_reads_equal_zarr_python(nginx, tree):
    expected = zarr_read(tree / "sharded.zarr")
    a = zarrstream.open_array(f"{nginx.url}/sharded.zarr")
    assert a.shard_shape == (4, 4)
    assert_bit_equal(a.read(), expected, "whole array")
    for key in [(slice(1, 39), slice(3, 45)), (slice(12, 16), slice(None)), (5, slice(None)),
                (slice(None, None, 3), slice(1, None, 5)), (slice(0, 2), slice(2, 4))]:
        assert_bit_equal(a[key], expected[key], f"a[{key!r}]")


def test_each_shard_index_is_read_once_per_read(nginx, tree):
    a = zarrstream.open_array(f"{nginx.url}/sharded.zarr")
    nginx.clear_log()
    a.read()
    reqs = chunk_requests(nginx)
    index_reads = collections.Counter(r.path for r in reqs if r.range.startswith("bytes=-"))
    assert len(index_reads) == 120 and set(index_reads.values()) == {1}, \
        "every shard's index once, the missing shards' included"
    inner = collections.Counter(r.path for r in reqs if not r.range.startswith("bytes=-"))
    assert len(inner) == 120 - 12, "one read of the inner chunks of each stored shard"
    assert all(r.status in (206, 404) for r in reqs)

    # A region inside one inner chunk of each of a row of shards: an index and one inner read each.
    nginx.clear_log()
    assert_bit_equal(a[5, 1:47], zarr_read(tree / "sharded.zarr")[5, 1:47])
    paths = collections.Counter(r.path for r in chunk_requests(nginx))
    assert len(paths) == 12 and set(paths.values()) == {2}


def test_unsharded_reads_past_the_request_window(nginx, tree):
    expected = zarr_read(tree / "unsharded.zarr")
    a = zarrstream.open_array(f"{nginx.url}/unsharded.zarr")
    nginx.clear_log()
    assert_bit_equal(a.read(), expected, "whole array")
    reqs = chunk_requests(nginx)
    assert len(reqs) == 300 and len({r.path for r in reqs}) == 300, "each chunk requested once"
    assert sum(r.status == 404 for r in reqs) == 3
    assert np.isnan(a[100:103]).all()


def test_missing_chunks_as_errors_name_the_shard_and_inner_chunk(nginx):
    strict = zarrstream.open_array(f"{nginx.url}/sharded.zarr", missing_chunks="error")
    assert strict[0:4, 4:8].shape == (4, 4)
    with pytest.raises(zarrstream.NotFoundError,
                       match=r"reading chunk 'c/3/1' .*inner chunk \(\d,\d\): shard is not stored"):
        strict[12:16, 4:8]
    with pytest.raises(zarrstream.NotFoundError,
                       match=r"reading chunk 'c/0/0' .*inner chunk \(0,1\): inner chunk is empty"):
        strict[0:2, 2:4]


def test_a_corrupt_inner_chunk_names_its_shard_and_position(tree, tmp_path_factory):
    root = tmp_path_factory.mktemp("corrupt_tree")
    z = zarr.create_array(root / "s.zarr", shape=(4, 4), chunks=(2, 2), shards=(4, 4),
                          dtype="int32")
    z[...] = np.arange(16, dtype="int32").reshape(4, 4)
    shard = root / "s.zarr" / "c" / "0" / "0"
    data = bytearray(shard.read_bytes())
    # The index (at the end: 4 entries of offset, nbytes, then a crc32c): spoil inner chunk (1, 1).
    entries = np.frombuffer(bytes(data[-(4 * 16 + 4):-4]), dtype="<u8").reshape(4, 2)
    offset, nbytes = (int(v) for v in entries[3])
    data[offset:offset + nbytes] = b"\x5a" * nbytes
    shard.write_bytes(bytes(data))
    server = Nginx(root, tmp_path_factory.mktemp("nginx_corrupt"))
    try:
        a = zarrstream.open_array(f"{server.url}/s.zarr")
        assert_bit_equal(a[0:2, :], np.arange(8, dtype="int32").reshape(2, 4))
        with pytest.raises(zarrstream.CorruptChunkError,
                           match=r"reading chunk 'c/0/0' of .*s\.zarr.*inner chunk \(1,1\)"):
            a.read()
    finally:
        server.stop()

"""What zarrstream writes, peers read bit for bit.

Arrays and groups are created and written with zarrstream under tmp_path, then read with zarr-python
and tensorstore (and xarray for a dataset-shaped group) and compared bit for bit with the numpy
source. Also: partial writes (read-modify-write), overwrites, fill-valued chunks left unstored,
fill values, attributes, dimension names, inline consolidated metadata, zstd frame headers, and
zarrstream's own partial reads of the sharded arrays it writes.
"""

from __future__ import annotations

import struct
import threading

import numpy as np
import pytest
import tensorstore as ts
import zarr

import zarrstream
from zarrstream.errors import InvalidArgumentError, ZarrstreamError

from conftest import (
    ALL_DTYPES,
    assert_bit_equal,
    check_read,
    chunk_files,
    chunk_key,
    make_data,
    native,
    read_json,
    zarr_read,
)

# Short specs of every compressor zarrstream writes; blosc with each shuffle mode.
COMPRESSORS = [
    "none",
    "zstd:3",
    "gzip:1",
    "lz4",
    "blosc:lz4:5:shuffle",
    "blosc:zstd:3:bitshuffle",
    "blosc:blosclz:9:noshuffle",
]

# Edge chunks (and edge shards) in both dimensions.
SHAPE = (7, 5)
CHUNKS = (3, 2)
SHARDS = (6, 4)


def ts_read(path) -> np.ndarray:
    t = ts.open({"driver": "zarr3", "kvstore": {"driver": "file", "path": str(path)}}, open=True)
    return t.result().read().result()


def check_peers(path, expected: np.ndarray, *, tensorstore: bool = True) -> None:
    """zarr-python (and tensorstore) read `expected` back from `path`, bit for bit."""
    assert_bit_equal(native(zarr_read(path)), expected, f"zarr-python reading {path.name}")
    if tensorstore:
        assert_bit_equal(native(ts_read(path)), expected, f"tensorstore reading {path.name}")


# ---------------------------------------------------------------------------------------------
# The matrix: data types × compressors × sharding, with edge chunks.


@pytest.mark.parametrize("compressor", COMPRESSORS)
@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_peers_read_what_zarrstream_writes(tmp_path, dtype, compressor):
    data = make_data(dtype, SHAPE, seed=len(compressor))
    for shards in (None, SHARDS):
        path = tmp_path / f"{'sharded' if shards else 'chunked'}.zarr"
        a = zarrstream.create_array(str(path), SHAPE, dtype, CHUNKS, shards=shards, compressor=compressor)
        a[...] = data
        # tensorstore has no numcodecs.lz4.
        check_peers(path, data, tensorstore=compressor != "lz4")
        assert_bit_equal(zarrstream.open_array(str(path)).read(), data, "zarrstream's own read")


def test_edge_chunks_are_stored_full_shape(tmp_path):
    path = tmp_path / "edge.zarr"
    a = zarrstream.create_array(str(path), (5, 3), "int16", (4, 2), compressor="none", fill_value=-9)
    a[...] = np.arange(15, dtype="int16").reshape(5, 3)
    edge = np.frombuffer((path / "c" / "1" / "1").read_bytes(), dtype="<i2")
    # As zarr-python writes it: the whole 4x2 chunk, fill value past the array's edge.
    np.testing.assert_array_equal(edge, [14, -9, -9, -9, -9, -9, -9, -9])


def test_zarrstream_reads_its_sharded_arrays_in_part(tmp_path):
    path = tmp_path / "sharded.zarr"
    data = make_data("float32", (13, 9, 6), seed=5)
    a = zarrstream.create_array(str(path), data.shape, "float32", (2, 3, 2), shards=(4, 6, 6))
    a.write((0, 0, 0), data)
    check_read(path, data, chunks=(2, 3, 2))


# ---------------------------------------------------------------------------------------------
# Partial writes, overwrites, fill-valued chunks.


@pytest.mark.parametrize("shards", [None, (4, 6)])
def test_partial_writes_read_modify_write(tmp_path, shards):
    path = tmp_path / "partial.zarr"
    model = make_data("float64", (9, 11), seed=1)
    a = zarrstream.create_array(str(path), model.shape, "float64", (2, 3), shards=shards, fill_value=np.nan)
    a[...] = model
    rng = np.random.default_rng(2)
    edits = [
        (slice(1, 4), slice(2, 9)),  # across chunk and shard boundaries
        (8, slice(None)),  # an integer drops a dimension
        (slice(None), 10),
        (Ellipsis, slice(3, 5)),
        (slice(0, 2), slice(0, 3)),  # exactly one chunk
        (slice(5, 9), slice(None, None, 1)),
    ]
    for key in edits:
        value = rng.standard_normal(model[key].shape)
        a[key] = value
        model[key] = value
        assert_bit_equal(a.read(), model, f"zarrstream after a[{key!r}] = ...")
    a[2:7, 4] = 0.5  # a scalar broadcast over a region
    model[2:7, 4] = 0.5
    a[3] = np.arange(11.0)  # a row broadcast
    model[3] = np.arange(11.0)
    a.write((6, 1), np.full((2, 2), -3.0))
    model[6:8, 1:3] = -3.0
    check_peers(path, model)


def test_input_layouts_and_dtypes_are_converted(tmp_path):
    path = tmp_path / "layouts.zarr"
    a = zarrstream.create_array(str(path), (6, 8), "int32", (4, 3))
    model = np.arange(48, dtype="int32").reshape(6, 8)
    a[...] = np.asfortranarray(model)
    a[0:3, :] = model[0:3, ::-1][:, ::-1]  # negative strides
    a[3:6, 0:4] = model[3:6, 0:8:2].astype(">i4")  # non-native byte order, every other column
    model[3:6, 0:4] = model[3:6, 0:8:2].copy()
    a[5, 4:8] = np.array([1.9, 2.9, 3.9, 4.9])  # float values cast like numpy assignment
    model[5, 4:8] = [1, 2, 3, 4]
    check_peers(path, model)


def test_overwrite_replaces_array_and_removes_stale_chunks(tmp_path):
    path = tmp_path / "over.zarr"
    a = zarrstream.create_array(str(path), (8, 8), "uint8", (2, 2))
    a[...] = make_data("uint8", (8, 8), seed=3) | 1  # no all-zero (fill) chunks
    assert len(chunk_files(path)) == 16
    with pytest.raises(InvalidArgumentError, match="already exists"):
        zarrstream.create_array(str(path), (4,), "uint8", (4,))
    b = zarrstream.create_array(str(path), (3, 3), "int16", (3, 3), overwrite=True, fill_value=7)
    assert chunk_files(path) == []
    check_peers(path, np.full((3, 3), 7, dtype="int16"))
    data = make_data("int16", (3, 3), seed=4)
    b[...] = data
    check_peers(path, data)


@pytest.mark.parametrize("shards", [None, (4, 4)])
def test_fill_valued_chunks_are_not_stored(tmp_path, shards):
    path = tmp_path / "fill.zarr"
    a = zarrstream.create_array(str(path), (8, 8), "float32", (2, 2), shards=shards, fill_value=1.5)
    model = np.full((8, 8), 1.5, dtype="float32")
    a[...] = model
    assert chunk_files(path) == []
    model[0, 0] = 2.0
    model[5, 6] = -0.0
    a[...] = model
    if shards is None:
        assert [chunk_key(path, f) for f in chunk_files(path)] == ["c/0/0", "c/2/3"]
    else:
        assert [chunk_key(path, f) for f in chunk_files(path)] == ["c/0/0", "c/1/1"]
        # Shard (0, 0) stores only inner chunk (0, 0); the index marks the other three empty.
        shard = (path / "c" / "0" / "0").read_bytes()
        index = np.frombuffer(shard[-(4 * 16 + 4) : -4], dtype="<u8").reshape(4, 2)
        empty = np.iinfo(np.uint64).max
        assert index[0].tolist() == [0, len(shard) - 68]
        assert (index[1:] == empty).all()
    check_peers(path, model)
    a[0:2, 0:2] = 1.5  # back to fill: the chunk (or the whole shard) is deleted
    model[0:2, 0:2] = 1.5
    assert [chunk_key(path, f) for f in chunk_files(path)] == (["c/2/3"] if shards is None else ["c/1/1"])
    check_peers(path, model)


# ---------------------------------------------------------------------------------------------
# Metadata: fill values, attributes, dimension names, codecs lists.


@pytest.mark.parametrize(
    "dtype, fill, stored",
    [
        ("float32", np.nan, "NaN"),
        ("float64", -np.inf, "-Infinity"),
        ("float16", 0.25, 0.25),
        ("int16", -7, -7),
        ("uint64", 2**64 - 1, 2**64 - 1),
        ("bool", True, True),
        ("complex64", complex(np.nan, 1.0), ["NaN", 1.0]),
        ("float64", None, 0.0),
    ],
)
def test_fill_values(tmp_path, dtype, fill, stored):
    path = tmp_path / "fv.zarr"
    a = zarrstream.create_array(str(path), (4, 3), dtype, (2, 3), fill_value=fill)
    assert read_json(path / "zarr.json")["fill_value"] == stored
    expected = np.full((4, 3), 0 if fill is None else fill, dtype=dtype)
    data = make_data(dtype, (2, 3), seed=9)
    a[0:2] = data
    expected[0:2] = data
    check_peers(path, expected)
    z = zarr.open_array(str(path), mode="r")
    assert_bit_equal(np.asarray(z.fill_value, dtype=dtype), np.asarray(expected[3, 0]), "fill_value")
    assert_bit_equal(np.asarray(a.fill_value), np.asarray(expected[3, 0]), "zarrstream fill_value")


def test_attributes_and_dimension_names(tmp_path):
    path = tmp_path / "attrs.zarr"
    attrs = {"units": "K", "long_name": "temperature", "scale": [1, 2.5], "nested": {"a": None}}
    a = zarrstream.create_array(
        str(path), (2, 3, 4), "float32", (1, 3, 4), dims=("time", None, "lon"), attrs=attrs
    )
    z = zarr.open_array(str(path), mode="r")
    assert dict(z.attrs) == attrs
    assert z.metadata.dimension_names == ("time", None, "lon")
    assert zarrstream.open_array(str(path)).dims == ("time", "", "lon")
    a.set_attrs({"units": "degC"})
    assert a.attrs == {"units": "degC"}
    assert dict(zarr.open_array(str(path), mode="r").attrs) == {"units": "degC"}
    assert zarrstream.open_array(str(path)).attrs == {"units": "degC"}
    t = ts.open({"driver": "zarr3", "kvstore": {"driver": "file", "path": str(path)}}).result()
    assert list(t.domain.labels) == ["time", "", "lon"]


def test_a_full_codecs_list(tmp_path):
    path = tmp_path / "codecs.zarr"
    codecs = [
        {"name": "transpose", "configuration": {"order": [1, 0]}},
        {"name": "bytes", "configuration": {"endian": "big"}},
        {"name": "gzip", "configuration": {"level": 3}},
        {"name": "crc32c"},
    ]
    data = make_data("int32", (5, 7), seed=6)
    a = zarrstream.create_array(str(path), data.shape, "int32", (2, 3), compressor=codecs)
    a[...] = data
    assert [c["name"] for c in read_json(path / "zarr.json")["codecs"]] == [
        "transpose",
        "bytes",
        "gzip",
        "crc32c",
    ]
    check_peers(path, data)


def test_a_codecs_list_with_the_shard_index_at_the_start(tmp_path):
    path = tmp_path / "index_start.zarr"
    codecs = [
        {
            "name": "sharding_indexed",
            "configuration": {
                "chunk_shape": [2, 2],
                "codecs": [{"name": "bytes", "configuration": {"endian": "big"}}, {"name": "zstd"}],
                "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "crc32c"}],
                "index_location": "start",
            },
        }
    ]
    data = make_data("uint16", (7, 6), seed=13)
    a = zarrstream.create_array(str(path), data.shape, "uint16", (4, 4), compressor=codecs, fill_value=3)
    assert a.shard_shape == (4, 4) and a.chunks == (2, 2)
    a[...] = data
    data[1:6, 3] = 3  # partial writes of some inner chunks: read-modify-write of shards
    a[1:6, 3] = 3
    check_peers(path, data)


def test_zstd_frames_carry_their_content_size(tmp_path):
    """nvCOMP and other one-shot decoders size their output from the frame header."""
    path = tmp_path / "zstd.zarr"
    a = zarrstream.create_array(str(path), (6, 10), "float64", (3, 5), compressor="zstd:1")
    a[...] = make_data("float64", (6, 10), seed=8)
    for f in chunk_files(path):
        assert zstd_content_size(f.read_bytes()) == 3 * 5 * 8, chunk_key(path, f)

    sharded = tmp_path / "zstd_sharded.zarr"
    b = zarrstream.create_array(str(sharded), (6, 10), "uint16", (3, 5), shards=(6, 10), compressor="zstd")
    b[...] = make_data("uint16", (6, 10), seed=8)
    shard = (sharded / "c" / "0" / "0").read_bytes()
    index = np.frombuffer(shard[-(4 * 16 + 4) : -4], dtype="<u8").reshape(4, 2)
    for offset, nbytes in index:
        assert zstd_content_size(shard[offset : offset + nbytes]) == 3 * 5 * 2


def zstd_content_size(frame: bytes) -> int | None:
    """The Frame_Content_Size of a zstd frame header (RFC 8878 §3.1.1.1), None when absent."""
    assert struct.unpack("<I", frame[:4])[0] == 0xFD2FB528, "not a zstd frame"
    descriptor = frame[4]
    fcs_flag = descriptor >> 6
    single_segment = (descriptor >> 5) & 1
    dictionary_flag = descriptor & 3
    pos = 5 + (0 if single_segment else 1) + [0, 1, 2, 4][dictionary_flag]
    size = [1 if single_segment else 0, 2, 4, 8][fcs_flag]
    if size == 0:
        return None
    value = int.from_bytes(frame[pos : pos + size], "little")
    return value + 256 if size == 2 else value


# ---------------------------------------------------------------------------------------------
# Groups: coordinates, consolidated metadata, xarray.


def test_group_with_coordinates_and_consolidated_metadata(tmp_path):
    xr = pytest.importorskip("xarray")
    path = tmp_path / "era5.zarr"
    times, lats, lons = 4, 5, 8
    g = zarrstream.create_group(str(path), attrs={"title": "ERA5-like"})
    time = g.create_array(
        "time",
        (times,),
        "int64",
        (times,),
        dims=["time"],
        attrs={"units": "hours since 1979-01-01 00:00:00", "calendar": "proleptic_gregorian"},
    )
    time[...] = np.arange(times) * 6
    lat_values = np.linspace(90, -90, lats)
    lon_values = np.arange(lons) * 45.0
    g.create_array("latitude", (lats,), "float64", (lats,), dims=["latitude"])[...] = lat_values
    g.create_array("longitude", (lons,), "float64", (lons,), dims=["longitude"])[...] = lon_values
    temperature = make_data("float32", (times, lats, lons), seed=10)
    t = g.create_array(
        "temperature",
        temperature.shape,
        "float32",
        (1, lats, 4),
        shards=(2, lats, 8),
        dims=["time", "latitude", "longitude"],
        fill_value=np.nan,
        attrs={"units": "K"},
    )
    t[...] = temperature
    sub = g.create_group("static", attrs={"kind": "invariants"})
    sub.create_array("orography", (lats, lons), "float32", (lats, lons), dims=["latitude", "longitude"])
    g.consolidate_metadata()
    assert g.consolidated and set(g) == {"time", "latitude", "longitude", "temperature", "static"}

    doc = read_json(path / "zarr.json")
    meta = doc["consolidated_metadata"]
    assert meta["kind"] == "inline" and meta["must_understand"] is False
    assert set(meta["metadata"]) == {
        "time",
        "latitude",
        "longitude",
        "temperature",
        "static",
        "static/orography",
    }
    assert meta["metadata"]["static"]["consolidated_metadata"]["metadata"] == {}
    assert meta["metadata"]["temperature"] == read_json(path / "temperature" / "zarr.json")

    zg = zarr.open_group(str(path), mode="r", use_consolidated=True)
    assert zg.metadata.consolidated_metadata is not None
    assert set(zg.metadata.consolidated_metadata.flattened_metadata) == set(meta["metadata"])
    assert_bit_equal(native(zg["temperature"][...]), temperature, "zarr-python via consolidated")
    assert dict(zg["static"].attrs) == {"kind": "invariants"}

    ds = xr.open_zarr(str(path), consolidated=True)
    assert dict(ds.sizes) == {"time": times, "latitude": lats, "longitude": lons}
    assert set(ds.coords) == {"time", "latitude", "longitude"}
    assert list(ds.data_vars) == ["temperature"]
    assert ds["temperature"].dims == ("time", "latitude", "longitude")
    assert ds["temperature"].attrs["units"] == "K"
    assert ds.attrs["title"] == "ERA5-like"
    np.testing.assert_array_equal(
        ds["time"].values, np.datetime64("1979-01-01T00") + np.arange(times) * np.timedelta64(6, "h")
    )
    np.testing.assert_array_equal(ds["latitude"].values, lat_values)
    assert_bit_equal(ds["temperature"].values, temperature, "xarray")


# ---------------------------------------------------------------------------------------------
# Concurrency and errors.


def test_threads_write_disjoint_shards(tmp_path):
    path = tmp_path / "threads.zarr"
    data = make_data("int64", (16, 12), seed=12)
    a = zarrstream.create_array(str(path), data.shape, "int64", (2, 3), shards=(4, 6))
    errors = []

    def write_rows(first):
        try:
            for row in range(first, 16, 8):  # shard rows first/4 and first/4 + 2
                a[row : row + 4] = data[row : row + 4]
        except Exception as e:  # reported below: a thread's exception would otherwise be lost
            errors.append(e)

    threads = [threading.Thread(target=write_rows, args=(first,)) for first in (0, 4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors
    check_peers(path, data)


def test_write_errors(tmp_path):
    path = tmp_path / "errors.zarr"
    a = zarrstream.create_array(str(path), (4, 6), "float32", (2, 3))
    with pytest.raises(IndexError, match="step must be 1"):
        a[::2] = 1.0
    with pytest.raises(IndexError, match="step must be 1"):
        a[:, ::-1] = 1.0
    with pytest.raises(IndexError, match="out of bounds"):
        a[4] = 1.0
    with pytest.raises(ValueError):  # numpy: cannot broadcast
        a[0:2, 0:3] = np.zeros((3, 2))
    with pytest.raises(InvalidArgumentError, match="exceeds the array shape"):
        a.write((3, 0), np.zeros((2, 6), dtype="float32"))
    with pytest.raises(ZarrstreamError, match="unknown compressor 'snappy'"):
        zarrstream.create_array(str(tmp_path / "x.zarr"), (4,), "float32", (2,), compressor="snappy")
    with pytest.raises(InvalidArgumentError, match="not a multiple"):
        zarrstream.create_array(str(tmp_path / "y.zarr"), (4,), "float32", (2,), shards=(3,))
    with pytest.raises(InvalidArgumentError, match="dimension names"):
        zarrstream.create_array(str(tmp_path / "z.zarr"), (4,), "float32", (2,), dims=["a", "b"])
    assert not (tmp_path / "x.zarr").exists() and not (tmp_path / "y.zarr").exists()
    a[0:0] = 1.0  # an empty selection writes nothing
    assert chunk_files(path) == []


def test_members_created_through_a_group_show_at_once(tmp_path):
    path = tmp_path / "members.zarr"
    g = zarrstream.create_group(str(path))
    g.create_array("a", (2,), "int8", (2,))
    g.create_group("c").create_array("d", (1,), "int8", (1,))
    assert list(g) == ["a", "c"] and "a" in g and list(g["c"]) == ["d"]
    g.consolidate_metadata()
    assert g.consolidated

    # A consolidated group lists what its consolidated metadata says (as zarr-python does): a
    # member created later shows once the metadata is consolidated again.
    reopened = zarrstream.open_group(str(path))
    reopened.create_array("b", (3,), "int8", (3,), fill_value=4)
    assert list(reopened) == ["a", "c"]
    reopened.consolidate_metadata()
    assert list(reopened) == ["a", "b", "c"]
    assert_bit_equal(reopened["b"].read(), np.full(3, 4, dtype="int8"))
    assert set(read_json(path / "zarr.json")["consolidated_metadata"]["metadata"]) == {"a", "b", "c", "c/d"}


def test_zero_dimensional_array(tmp_path):
    path = tmp_path / "scalar.zarr"
    a = zarrstream.create_array(str(path), (), "complex128", (), fill_value=complex(1, -1))
    a[...] = complex(np.inf, -0.0)
    check_peers(path, np.array(complex(np.inf, -0.0)))
    a[()] = complex(1, -1)  # back to the fill value: the single chunk "c" is deleted
    assert chunk_files(path) == []
    check_peers(path, np.array(complex(1, -1)))


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_no_node_is_made_inside_an_array(tmp_path, zarr_format):
    """An array's folder holds its chunks ("t/c/0" in v3, "t/0" in v2): a node made inside it, at
    any depth and through any entry point, would share its keys, and overwrite would delete them.
    It is refused, and the array reads back unchanged."""
    path = tmp_path / "nested.zarr"
    root = zarr.open_group(path, mode="w", zarr_format=zarr_format)
    values = np.arange(8, dtype="int32") + 1
    t = root.create_array("t", shape=(8,), chunks=(2,), dtype="int32", fill_value=0)
    t[...] = values
    before = sorted(p.relative_to(path) for p in (path / "t").rglob("*"))
    g = zarrstream.open_group(str(path))
    inside = ["t/c", "t/c/0", "t/0", "t/a/b/c"]
    for name in inside:
        for overwrite in (False, True):
            with pytest.raises(InvalidArgumentError, match="is an array: no node can be made"):
                g.create_array(name, (2,), "int8", (1,), overwrite=overwrite)
            with pytest.raises(InvalidArgumentError, match="is an array: no node can be made"):
                g.create_group(name, overwrite=overwrite)
            # At a URL: the folders above the store root are checked too.
            with pytest.raises(InvalidArgumentError, match="is an array: no node can be made"):
                zarrstream.create_array(str(path / name), (2,), "int8", (1,), overwrite=overwrite)
            with pytest.raises(InvalidArgumentError, match="is an array: no node can be made"):
                zarrstream.create_group(f"file://{path / name}", overwrite=overwrite)
    assert sorted(p.relative_to(path) for p in (path / "t").rglob("*")) == before
    assert_bit_equal(zarrstream.open_group(str(path))["t"].read(), values)
    assert_bit_equal(zarr_read(path / "t"), values)


def test_an_array_over_members_needs_overwrite_which_removes_only_that_node(tmp_path):
    path = tmp_path / "members.zarr"
    g = zarrstream.create_group(str(path))
    g.create_array("m/x", (2,), "int8", (1,))[...] = np.array([1, 2], dtype="int8")
    sibling = g.create_array("m2", (2,), "int8", (1,))
    sibling[...] = np.array([3, 4], dtype="int8")
    with pytest.raises(InvalidArgumentError, match="keys below it"):
        g.create_array("m", (2,), "int8", (1,))
    with pytest.raises(InvalidArgumentError, match="keys below it"):
        zarrstream.create_array(str(path / "m"), (2,), "int8", (1,))
    assert_bit_equal(zarrstream.open_array(str(path / "m" / "x")).read(), np.array([1, 2], "int8"))
    g.create_array("m", (2,), "int8", (1,), overwrite=True)
    assert sorted(p.name for p in (path / "m").iterdir()) == ["zarr.json"]
    assert_bit_equal(zarrstream.open_array(str(path / "m2")).read(), np.array([3, 4], "int8"))


def test_large_read_outputs_reuse_memory_once_no_view_of_them_is_left(tmp_path):
    """Read outputs of 4 MiB or more come from zarrstream's block cache (zarrstream._array._empty):
    a read after the last output is gone takes its memory, pages touched before rather than fresh
    ones the kernel zeroes; one of which a view is still alive is never written over."""
    values = np.random.default_rng(1).random((8, 256, 512)).astype("float32")  # 4 MiB
    path = tmp_path / "big.zarr"
    zarrstream.create_array(str(path), values.shape, "float32", (1, 256, 512))[...] = values
    a = zarrstream.open_array(str(path))
    first = a.read()
    address = first.__array_interface__["data"][0]
    del first
    second = a.read()
    assert second.__array_interface__["data"][0] == address
    assert_bit_equal(second, values)
    view = second[3]
    del second
    third = a.read()
    assert third.__array_interface__["data"][0] != address  # the view holds the block
    third[...] = 0
    assert_bit_equal(view, values[3])
    assert third.flags.writeable and third.flags.c_contiguous

"""Strings, bytes, JSON objects and datetime64 as zarr-python 3 and xarray write them.

Every store here is written inside the test by a real writer (zarr-python 3 in both formats,
xarray's Dataset.to_zarr, numcodecs for json2), and every array zarrstream reads is compared with
zarr-python's read of the same array. Then: a store holding such arrays, or an array of a type
nobody supports, still opens, inspects, diagnoses, computes stats and loads; string coordinates
select by label, datetime64 coordinates select as times.
"""

from __future__ import annotations

import datetime
import json
import warnings

import numcodecs
import numpy as np
import pandas as pd
import pytest
import xarray as xr
import zarr
from conftest import run_cli

import zarrstream
from zarrstream.errors import ConfigError, InvalidArgumentError, NotFoundError, UnsupportedError

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::FutureWarning")


def as_reference(a: np.ndarray) -> np.ndarray:
    """zarr-python's read in the form zarrstream gives: numpy 2's StringDType as str objects."""
    if a.dtype.kind == "T":
        return a.astype(object)
    return a


def assert_same(ours: np.ndarray, reference: np.ndarray):
    reference = as_reference(np.asarray(reference))
    assert ours.dtype == reference.dtype, (ours.dtype, reference.dtype)
    assert ours.shape == reference.shape
    if ours.dtype.kind in "mM":
        np.testing.assert_array_equal(ours.view("i8"), reference.view("i8"))  # NaT included
    else:
        assert ours.tolist() == reference.tolist()
    if ours.dtype == object:
        assert [type(v) for v in ours.ravel()] == [type(v) for v in reference.ravel()]


def dims_kwargs(fmt: int, dims: list[str]) -> dict:
    if fmt == 3:
        return {"dimension_names": dims}
    return {"attributes": {"_ARRAY_DIMENSIONS": dims}}


def write_typed_group(path, fmt: int):
    """One array of each type zarr-python writes, each with unwritten chunks (fill values)."""
    g = zarr.open_group(str(path), mode="w", zarr_format=fmt)
    words = np.array(["a", "bé", "", "ccc€", "dd", "e"], dtype=object)
    s = g.create_array("s", shape=(8,), chunks=(3,), dtype=str)
    s[:6] = words
    s2 = g.create_array("s2", shape=(4, 5), chunks=(3, 2), dtype=str, fill_value="-")
    s2[:3, :4] = np.array([[f"r{i}c{j}" * j for j in range(4)] for i in range(3)], dtype=object)
    u = g.create_array("u", shape=(7,), chunks=(3,), dtype="<U4", fill_value="zz")
    u[:5] = np.array(["a", "bé", "ccc", "dddd", ""], dtype="<U4")
    b = g.create_array("S", shape=(6,), chunks=(4,), dtype="|S3")
    b[:3] = np.array([b"a", b"b\x00c", b"ccc"], dtype="|S3")
    vb = g.create_array("vb", shape=(5,), chunks=(2,), dtype=zarr.dtype.VariableLengthBytes())
    vb[:3] = np.array([b"x", b"\x00y\xff", b""], dtype=object)
    t = g.create_array("t", shape=(7,), chunks=(3,), dtype="<M8[ns]")
    t[:4] = np.array(["2020-01-01", "2020-01-02T03:04:05.123456789", "NaT", "1900-01-01"],
                     dtype="M8[ns]")
    t10 = g.create_array("t10", shape=(4,), chunks=(2,), dtype="<M8[10s]", fill_value=np.datetime64(70, "10s"))
    t10[:2] = np.array([0, 12345], dtype="M8[10s]")
    td = g.create_array("td", shape=(5,), chunks=(2,), dtype="<m8[s]")
    td[:3] = np.array([1, -2, 3], dtype="m8[s]")
    d = g.create_array("d", shape=(3,), chunks=(3,), dtype="<M8[D]")
    d[:] = np.array(["1979-01-01", "2000-02-29", "2024-12-31"], dtype="M8[D]")
    return g


@pytest.mark.parametrize("fmt", [2, 3])
def test_every_array_reads_as_zarr_python(tmp_path, fmt):
    path = tmp_path / f"typed{fmt}.zarr"
    reference = write_typed_group(path, fmt)
    group = zarrstream.open_group(str(path))
    assert sorted(group.keys()) == sorted(reference.array_keys())
    for name in reference.array_keys():
        want = reference[name][...]
        ours = group[name]
        assert ours.dtype == as_reference(want).dtype, name
        assert_same(ours.read(), want)
        assert_same(zarrstream.open_array(str(path / name)).read(), want)
        assert_same(np.asarray(ours), want)
        # Slices across chunk edges, steps, integer indices, the unwritten tail.
        for key in [slice(1, None), slice(None, None, 2), slice(-3, None), 0, -1]:
            if ours.ndim == 2:
                key = (key, slice(1, 4))
            got, want_part = ours[key], reference[name][key]
            if isinstance(got, np.ndarray):
                assert_same(got, np.asarray(want_part))
            elif ours.dtype.kind in "mM":
                assert np.asarray(got).view("i8") == np.asarray(want_part).view("i8"), (name, key)
            else:  # one element: numpy's scalar, or the str/bytes object itself
                assert got == want_part, (name, key)
        fill = reference[name].fill_value
        if isinstance(fill, np.ndarray) or fill is None:
            continue
        if np.asarray(fill).dtype.kind in "mM":
            assert np.asarray(ours.fill_value).view("i8") == np.asarray(fill).view("i8"), name
        else:
            assert ours.fill_value == fill, name


def test_metadata_forms(tmp_path):
    """The v3 data_type forms zarr-python writes, as the array's metadata and dtype give them."""
    write_typed_group(tmp_path / "g.zarr", 3)
    g = zarrstream.open_group(str(tmp_path / "g.zarr"))
    assert g["s"].dtype == np.dtype(object) and g["s"].metadata["data_type"] == "string"
    assert g["u"].metadata["data_type"] == {"name": "fixed_length_utf32",
                                            "configuration": {"length_bytes": 16}}
    assert g["t10"].dtype == np.dtype("M8[10s]")
    assert g["t10"].metadata["data_type"] == {"name": "numpy.datetime64",
                                              "configuration": {"unit": "s", "scale_factor": 10}}
    assert g["s"].codecs[0]["name"] == "vlen-utf8"


def test_zarrs_style_bytes_and_string(tmp_path):
    """zarrs writes variable-length bytes as data type "bytes" with a list-of-bytes fill value."""
    path = tmp_path / "zarrs.zarr"
    a = zarr.create_array(str(path), shape=(3,), chunks=(2,), dtype=zarr.dtype.VariableLengthBytes())
    a[:2] = np.array([b"ab", b"c"], dtype=object)
    meta = json.loads((path / "zarr.json").read_text())
    meta["data_type"] = "bytes"
    meta["fill_value"] = [1, 2]
    (path / "zarr.json").write_text(json.dumps(meta))
    ours = zarrstream.open_array(str(path))
    assert ours.read().tolist() == [b"ab", b"c", b"\x01\x02"]


def write_json2_v2(path, values: np.ndarray, chunks: tuple[int, ...], compressor=None):
    """A v2 object array encoded with numcodecs' json2 (as zarr-python 2 wrote it)."""
    path.mkdir()
    (path / ".zarray").write_text(json.dumps({
        "zarr_format": 2, "shape": list(values.shape), "chunks": list(chunks), "dtype": "|O",
        "fill_value": None, "order": "C", "filters": [numcodecs.JSON().get_config()],
        "compressor": None if compressor is None else compressor.get_config()}))
    codec = numcodecs.JSON()
    grid = [-(-s // c) for s in values.shape for c in [chunks[values.shape.index(s)]]]
    for index in np.ndindex(*grid):
        block = np.empty(chunks, dtype=object)
        block[...] = None
        region = tuple(slice(i * c, min((i + 1) * c, s)) for i, c, s in zip(index, chunks, values.shape))
        part = values[region]
        block[tuple(slice(0, n) for n in part.shape)] = part
        data = codec.encode(block)
        if compressor is not None:
            data = compressor.encode(data)
        (path / ".".join(map(str, index))).write_bytes(data)


def test_json2_objects(tmp_path):
    values = np.empty((5,), dtype=object)
    for i, v in enumerate(["x", 1, [1, 2], {"k": None}, 2.5]):
        values[i] = v
    write_json2_v2(tmp_path / "j.zarr", values, (2,), numcodecs.Zstd())
    ours = zarrstream.open_array(str(tmp_path / "j.zarr")).read()
    assert ours.dtype == object
    assert ours.tolist() == values.tolist()
    two_d = np.array([["a", "b", "c"], ["d", "e", "f"]], dtype=object)
    write_json2_v2(tmp_path / "j2.zarr", two_d, (1, 2))
    assert zarrstream.open_array(str(tmp_path / "j2.zarr"))[:, 1:].tolist() == two_d[:, 1:].tolist()


def test_text_arrays_are_cpu_only_and_read_only(tmp_path):
    write_typed_group(tmp_path / "g.zarr", 3)
    a = zarrstream.open_group(str(tmp_path / "g.zarr"))["s"]
    with pytest.raises(UnsupportedError, match="not supported"):
        a[0] = "x"


def test_corrupt_vlen_chunk_names_the_chunk(tmp_path):
    path = tmp_path / "bad.zarr"
    a = zarr.create_array(str(path), shape=(4,), chunks=(2,), dtype=str, compressors=None)
    a[:] = np.array(["a", "b", "c", "d"], dtype=object)
    (path / "c" / "1").write_bytes(b"\x05\x00\x00\x00\x01\x00")
    with pytest.raises(zarrstream.errors.CorruptChunkError, match="c/1"):
        zarrstream.open_array(str(path)).read()


# ---------------------------------------------------------------------------------------------
# Stores with members nobody can read: the rest stays usable.

def add_unknown_member(path, fmt: int, consolidated: bool):
    """An array of a data type no reader knows, next to the others (and in the consolidated
    metadata, which zarr-python cannot write for it)."""
    (path / "mystery").mkdir()
    if fmt == 3:
        meta = {"zarr_format": 3, "node_type": "array", "shape": [4], "data_type": "future.float7",
                "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [4]}},
                "chunk_key_encoding": {"name": "default"}, "fill_value": 0,
                "codecs": [{"name": "bytes"}], "attributes": {}, "dimension_names": ["valid_time"]}
        (path / "mystery" / "zarr.json").write_text(json.dumps(meta))
        if consolidated:
            root = json.loads((path / "zarr.json").read_text())
            root["consolidated_metadata"]["metadata"]["mystery"] = meta
            (path / "zarr.json").write_text(json.dumps(root))
    else:
        zarray = {"zarr_format": 2, "shape": [4], "chunks": [4], "dtype": "|V8", "fill_value": None,
                  "order": "C", "filters": None, "compressor": None}
        zattrs = {"_ARRAY_DIMENSIONS": ["valid_time"]}
        (path / "mystery" / ".zarray").write_text(json.dumps(zarray))
        (path / "mystery" / ".zattrs").write_text(json.dumps(zattrs))
        if consolidated:
            zmetadata = json.loads((path / ".zmetadata").read_text())
            zmetadata["metadata"]["mystery/.zarray"] = zarray
            zmetadata["metadata"]["mystery/.zattrs"] = zattrs
            (path / ".zmetadata").write_text(json.dumps(zmetadata))


def era5_like(n_time: int = 12) -> xr.Dataset:
    """New-CDS ERA5 conventions: valid_time, pressure_level, number, an `expver` string coordinate
    along valid_time, and a level-name string coordinate."""
    times = pd.date_range("2024-01-01", periods=n_time, freq="6h")
    levels = np.array([1000.0, 850.0, 500.0])
    rng = np.random.default_rng(0)
    t = rng.normal(280, 10, size=(n_time, 3, 4, 5)).astype("float32")
    expver = np.array(["0001"] * (n_time - 4) + ["0005"] * 4, dtype=object)
    return xr.Dataset(
        {"t": (("valid_time", "pressure_level", "latitude", "longitude"), t),
         "z": (("valid_time", "pressure_level", "latitude", "longitude"), t * 9.8)},
        coords={"valid_time": times, "pressure_level": levels, "number": 0,
                "latitude": np.linspace(60, 30, 4), "longitude": np.linspace(0, 20, 5),
                "expver": ("valid_time", expver),
                "level_name": ("pressure_level", np.array(["surface-ish", "low", "mid"], dtype="<U11"))},
    )


def write_era5(path, fmt: int, consolidated: bool, with_unknown: bool = True):
    ds = era5_like()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ds.to_zarr(str(path), mode="w", zarr_format=fmt, consolidated=consolidated)
    if with_unknown:
        add_unknown_member(path, fmt, consolidated)
    return ds


STORES = [(2, True), (2, False), (3, True), (3, False)]


@pytest.mark.parametrize("fmt,consolidated", STORES)
def test_xarray_era5_every_array_reads_and_unknown_member_is_skipped(tmp_path, fmt, consolidated):
    path = tmp_path / "era5.zarr"
    write_era5(path, fmt, consolidated)
    group = zarrstream.open_group(str(path))
    assert group.consolidated == consolidated
    assert sorted(group.keys()) == sorted(list(era5_like().variables) + ["mystery"])
    for name in group.keys():
        if name != "mystery":  # zarr-python opens each array alone: it cannot list the group
            assert_same(group[name].read(), zarr.open_array(str(path / name), mode="r")[...])
    assert group["expver"].read().tolist() == era5_like()["expver"].values.tolist()
    assert group["level_name"].read().tolist() == era5_like()["level_name"].values.tolist()
    with pytest.raises(UnsupportedError) as e:
        group["mystery"]
    assert "mystery" in str(e.value) and str(path.name) in str(e.value)


@pytest.mark.parametrize("fmt,consolidated", STORES)
def test_loader_selects_string_labels_next_to_unknown_member(tmp_path, fmt, consolidated):
    path = tmp_path / "era5.zarr"
    ds = write_era5(path, fmt, consolidated)
    loader = zarrstream.Loader(str(path), ["t"], select={"expver": "0001"}, shuffle="none")
    assert loader.num_samples == 8
    batch = next(iter(loader))
    np.testing.assert_array_equal(batch["input"][0].numpy(), ds["t"].values[0])
    assert zarrstream.Loader(str(path), ["t"], select={"expver": ["0005"]}).num_samples == 4
    assert zarrstream.Loader(str(path), ["t"], select={"expver": ["0001", "0005"]}).num_samples == 12
    with pytest.raises(NotFoundError, match="'0002'.*available: '0001', '0005'"):
        zarrstream.Loader(str(path), ["t"], select={"expver": "0002"})
    # Every numeric variable by default: the strings, coordinates and the unknown member stay out.
    assert len(zarrstream.Loader(str(path)).channels) == 2 * 3
    with pytest.raises(InvalidArgumentError, match="expver.*string"):
        zarrstream.Loader(str(path), ["expver"])
    with pytest.raises(UnsupportedError, match="mystery"):
        zarrstream.Loader(str(path), ["mystery"])


@pytest.mark.parametrize("fmt,consolidated", [(2, True), (3, False)])
def test_cli_commands_skip_what_they_cannot_use(tmp_path, fmt, consolidated):
    path = tmp_path / "era5.zarr"
    write_era5(path, fmt, consolidated)
    r = run_cli("inspect", path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "mystery  skipped:" in r.stdout and "future.float7" in r.stdout or "|V8" in r.stdout
    assert "expver  string" in r.stdout or "expver  object" in r.stdout, r.stdout
    r = run_cli("inspect", path, "--json")
    assert r.returncode == 0, r.stderr
    members = {m["name"]: m for m in json.loads(r.stdout)["members"]}
    assert "future.float7" in members["mystery"]["skipped"] or "V8" in members["mystery"]["skipped"]
    assert members["expver"]["gpu_decodable"] is False
    r = run_cli("doctor", path, "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    report = json.loads(r.stdout)["store"]
    assert [s["name"] for s in report["skipped_arrays"]] == ["mystery"]
    assert [a["name"] for a in report["arrays"]] == ["t", "z"]
    r = run_cli("doctor", path)
    assert r.returncode == 0 and "mystery" in r.stdout and "skipped" in r.stdout, r.stdout + r.stderr
    r = run_cli("stats", path, "--vars", "t", "--select", "valid_time=2024-01-01:2024-01-02",
                "-o", tmp_path / "stats.json")
    assert r.returncode == 0, r.stdout + r.stderr
    assert (tmp_path / "stats.json").exists()
    r = run_cli("stats", path, "--vars", "expver", "-o", tmp_path / "s2.json")
    assert r.returncode != 0 and "expver" in r.stderr


# ---------------------------------------------------------------------------------------------
# datetime64 coordinates as zarr-python stores them (not CF-encoded), and label values of every
# kind a user has at hand.

def write_datetime64_dataset(path, fmt: int, unit: str = "ns"):
    g = zarr.open_group(str(path), mode="w", zarr_format=fmt)
    times = np.arange("2000-01-01T00", "2000-01-06T00", np.timedelta64(6, "h"), dtype=f"M8[{unit}]")
    t = g.create_array("time", shape=times.shape, chunks=(7,), dtype=times.dtype, **dims_kwargs(fmt, ["time"]))
    t[...] = times
    # fill_value NaN: in v2, zarr-python's default 0 is the _FillValue xarray (and the loader)
    # masks, and the values start at 0.
    x = g.create_array("x", shape=(len(times), 3), chunks=(4, 3), dtype="float32", fill_value=np.nan,
                       **dims_kwargs(fmt, ["time", "lon"]))
    x[...] = np.arange(len(times) * 3, dtype="float32").reshape(-1, 3)
    lon = g.create_array("lon", shape=(3,), chunks=(3,), dtype="float64", **dims_kwargs(fmt, ["lon"]))
    lon[...] = [0.0, 1.0, 2.0]
    return times


@pytest.mark.parametrize("fmt", [2, 3])
@pytest.mark.parametrize("unit", ["ns", "s", "m"])
def test_datetime64_time_coordinate_selects_like_cf_time(tmp_path, fmt, unit):
    path = tmp_path / "t.zarr"
    times = write_datetime64_dataset(path, fmt, unit)
    ns = times.astype("M8[ns]")
    for select, want in [
        ({"time": (ns[0], ns[9])}, 10),                          # numpy datetime64[ns], a tuple
        ({"time": slice(times[2], times[5])}, 4),                 # the coordinate's own unit
        ({"time": (pd.Timestamp(ns[1]), pd.Timestamp(ns[3]))}, 3),
        ({"time": (datetime.datetime(2000, 1, 2), None)}, 16),
        ({"time": datetime.date(2000, 1, 3)}, 4),                 # a whole day
        ({"time": np.datetime64("2000-01-04", "D")}, 4),
        ({"time": "2000-01-05"}, 4),
        ({"time": [ns[0], ns[5]]}, None),                         # a list of instants
    ]:
        if want is None:
            with pytest.raises(InvalidArgumentError, match="not one run"):
                zarrstream.Loader(str(path), ["x"], select=select)
            continue
        loader = zarrstream.Loader(str(path), ["x"], select=select, shuffle="none")
        assert loader.num_samples == want, select
        first = next(iter(loader))["input"][0].numpy()
        start = int(np.searchsorted(ns, np.datetime64(pd.Timestamp(
            list(select["time"])[0] if isinstance(select["time"], tuple) else
            select["time"].start if isinstance(select["time"], slice) else select["time"]))))
        np.testing.assert_array_equal(first.ravel(), np.arange(3, dtype="float32") + 3 * start)


def test_label_errors_quote_the_one_bad_value(tmp_path):
    path = tmp_path / "t.zarr"
    write_datetime64_dataset(path, 3)
    with pytest.raises(ConfigError) as e:
        zarrstream.Loader(str(path), ["x"], select={"time": ("2000-01-01", object())})
    assert "2000-01-01" not in str(e.value) and "object" in str(e.value)
    with pytest.raises(InvalidArgumentError) as e:
        zarrstream.Loader(str(path), ["x"], select={"time": ("2000-01-01", "2000-13-01")})
    assert "'2000-13-01'" in str(e.value) and "2000-01-01:" not in str(e.value)
    with pytest.raises(ConfigError, match="fraction of a second"):
        zarrstream.Loader(str(path), ["x"], select={"time": np.datetime64("2000-01-01T00:00:00.5")})
    # NaT is no label.
    with pytest.raises(ConfigError, match="NaT"):
        zarrstream.Loader(str(path), ["x"], select={"time": (np.datetime64("NaT"), None)})


@pytest.mark.parametrize("fmt", [2, 3])
def test_numpy_datetime64_range_on_xarray_cf_time(tmp_path, fmt):
    """The issue's example: a range of the dataset's own numpy datetime64[ns] values, on the CF
    time coordinate xarray writes."""
    path = tmp_path / "era5.zarr"
    ds = write_era5(path, fmt, consolidated=True, with_unknown=False)
    select = {"valid_time": (ds.valid_time.values[0], ds.valid_time.values[9])}
    assert zarrstream.Loader(str(path), ["t"], select=select).num_samples == 10
    # expver selects along valid_time: both at once select one dimension twice.
    with pytest.raises(InvalidArgumentError, match="'valid_time' is selected twice"):
        zarrstream.Loader(str(path), ["t"], select={"valid_time": "2024-01-01", "expver": "0001"})


# ---------------------------------------------------------------------------------------------
# rechunk keeps what xarray and zarr-python read: text and time members are copied (whole, as one
# chunk), members of a type v3 cannot hold or nobody reads are named, and the rest is copied.

@pytest.mark.parametrize("fmt", [2, 3])
def test_rechunk_copies_every_extended_type_as_zarr_python_reads_it(tmp_path, fmt):
    reference = write_typed_group(tmp_path / "typed.zarr", fmt)
    for name in reference.array_keys():
        out = tmp_path / f"out_{name}.zarr"
        r = run_cli("rechunk", tmp_path / "typed.zarr" / name, out)
        assert r.returncode == 0, (name, r.stderr)
        copy = zarr.open_array(str(out), mode="r")
        assert copy.metadata.zarr_format == 3
        assert_same(as_reference(np.asarray(copy[...])), reference[name][...])
        fill, want = copy.fill_value, reference[name].fill_value
        if np.asarray(want).dtype.kind in "mM":
            assert np.asarray(fill).view("i8") == np.asarray(want).view("i8"), name
        else:
            assert fill == want, name
        assert_same(zarrstream.open_array(str(out)).read(), reference[name][...])


def test_rechunk_refuses_json_objects_by_name(tmp_path):
    values = np.array(["x", "y"], dtype=object)
    write_json2_v2(tmp_path / "j.zarr", values, (2,))
    r = run_cli("rechunk", tmp_path / "j.zarr", tmp_path / "out.zarr")
    assert r.returncode != 0
    assert "j.zarr" in r.stderr and "JSON" in r.stderr, r.stderr


@pytest.mark.parametrize("fmt,consolidated", [(2, True), (3, False), (3, True)])
def test_rechunk_of_xarray_store_with_strings_equals_the_source_in_xarray(tmp_path, fmt, consolidated):
    src, out = tmp_path / "era5.zarr", tmp_path / "out.zarr"
    ds = write_era5(src, fmt, consolidated)
    r = run_cli("rechunk", src, out, "--gpu-friendly")
    assert r.returncode == 0, r.stderr
    assert "not copied: mystery" in r.stderr, r.stderr
    copy = xr.open_zarr(str(out))
    xr.testing.assert_identical(copy.load(), ds)
    assert copy["level_name"].dtype == np.dtype("<U11")
    # A selection cuts the string coordinate along its dimension like the data.
    part = tmp_path / "part.zarr"
    r = run_cli("rechunk", src, part, "--select", "valid_time=2024-01-02T12:2024-01-03T12")
    assert r.returncode == 0, r.stderr
    want = ds.sel(valid_time=slice("2024-01-02T12", "2024-01-03T12"))
    xr.testing.assert_identical(xr.open_zarr(str(part)).load(), want)
    assert xr.open_zarr(str(part))["expver"].values.tolist() == ["0001", "0001", "0005", "0005", "0005"]
    # A rerun of the finished job is a no-op; the copy stays readable by zarrstream's loader.
    r = run_cli("rechunk", src, part, "--select", "valid_time=2024-01-02T12:2024-01-03T12")
    assert r.returncode == 0, r.stderr
    assert zarrstream.Loader(str(out), ["t"], select={"expver": "0005"}).num_samples == 4


def test_rechunk_copies_a_datetime64_time_axis_as_datetime64(tmp_path):
    times = write_datetime64_dataset(tmp_path / "dt.zarr", 3, "s")
    r = run_cli("rechunk", tmp_path / "dt.zarr", tmp_path / "out.zarr", "--select",
                "time=2000-01-02:2000-01-03")
    assert r.returncode == 0, r.stderr
    got = zarr.open_array(str(tmp_path / "out.zarr" / "time"), mode="r")[...]
    # As xarray's .sel(time=slice("2000-01-02", "2000-01-03")): the whole last day.
    want = times[(times >= np.datetime64("2000-01-02")) & (times < np.datetime64("2000-01-04"))]
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)
    assert xr.open_zarr(str(tmp_path / "out.zarr")).sizes["time"] == len(want)

"""xarray's ``engine="zarrstream"``: every fixture family of the suite (v2 and v3, consolidated,
sharded, strings and times, CF-packed int16 with _FillValue, filters, tensorstore-written stores)
opens to the Dataset ``engine="zarr"`` gives, with the encoding CF decoding leaves; dask chunks
follow the store's chunks; a selection reads only the chunks it covers (counted in the access log
of nginx serving the store); remote stores open over HTTP."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import numcodecs
import numpy as np
import pandas as pd
import pytest
import xarray as xr
import zarr
from era5_fixtures import arco_era5, cds_era5, weatherbench2
from object_servers import MotoS3, Nginx
from zarr.codecs import numcodecs as v3_codecs

from zarrstream.errors import ConfigError, InvalidArgumentError, MetadataError, NotFoundError

pytestmark = pytest.mark.filterwarnings(
    "ignore::UserWarning", "ignore::FutureWarning", "ignore::RuntimeWarning"
)

# Encoding keys whose values must be the zarr engine's: what CF decoding recorded (and what
# to_zarr/to_netcdf would write back), and the chunking dask and writers follow.
ENCODING_KEYS = ("chunks", "preferred_chunks", "shards", "dtype", "_FillValue", "missing_value",
                 "scale_factor", "add_offset", "units", "calendar", "fill_value")


def open_both(path, **kwargs) -> tuple[xr.Dataset, xr.Dataset]:
    kwargs.setdefault("chunks", None)
    ours = xr.open_dataset(str(path), engine="zarrstream", **kwargs)
    theirs = xr.open_dataset(str(path), engine="zarr", **kwargs)
    return ours, theirs


def values_of(v: xr.Variable) -> np.ndarray:
    a = np.asarray(v.values)
    return a.astype(object) if a.dtype.kind == "T" else a  # numpy 2's StringDType as str objects


def assert_same_dataset(ours: xr.Dataset, theirs: xr.Dataset) -> None:
    """Same variables, coordinates, dims, attributes, values (NaN-aware), dtypes and the encoding
    that matters."""
    xr.testing.assert_identical(ours, theirs)
    assert sorted(ours.variables) == sorted(theirs.variables)  # zarr's order: the store's listing
    assert ours.attrs == theirs.attrs
    for name, theirs_var in theirs.variables.items():
        ours_var = ours.variables[name]
        want = values_of(theirs_var)
        got = values_of(ours_var)
        assert got.dtype == want.dtype, (name, got.dtype, want.dtype)
        if got.dtype.kind in "fc":
            np.testing.assert_array_equal(got, want, err_msg=name, strict=True)
        else:
            assert got.tolist() == want.tolist(), name
        if got.dtype == object:
            assert [type(x) for x in got.ravel()] == [type(x) for x in want.ravel()], name
        assert _same(ours_var.attrs, theirs_var.attrs), (name, ours_var.attrs, theirs_var.attrs)
        for key in ENCODING_KEYS:
            if key in theirs_var.encoding or key in ours_var.encoding:
                mine, ref = ours_var.encoding.get(key), theirs_var.encoding.get(key)
                if key == "dtype":
                    mine, ref = comparable_dtype(mine), comparable_dtype(ref)
                assert _same(mine, ref), (name, key, mine, ref)


def comparable_dtype(dtype):
    """The differences the backend documents: numpy 2's StringDType (zarr-python's variable-length
    strings) is xarray's object dtype of str here, and values are in native byte order."""
    if dtype is None:
        return None
    dtype = np.dtype(dtype)
    if dtype.kind == "T":
        return np.dtype(object)
    return dtype.newbyteorder("=") if dtype.kind in "iufc" else dtype


def _same(a, b) -> bool:
    """Equal values of the same type (tuples and lists alike), NaN equal to NaN."""
    if isinstance(a, tuple | list) and isinstance(b, tuple | list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if type(a) is not type(b):
        return False
    if isinstance(a, float | np.floating | np.datetime64 | np.timedelta64) and np.isnan(a):
        return bool(np.isnan(b))
    return bool(a == b)


def check_against_zarr_engine(path, **kwargs) -> xr.Dataset:
    ours, theirs = open_both(path, **kwargs)
    assert_same_dataset(ours, theirs)
    return ours


# ---------------------------------------------------------------------------------------------
# Fixture families.


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    """``stores(builder, **kwargs)``: the store ``builder(root, **kwargs)`` writes, written once per
    module (the root is served over HTTP by the ``nginx`` fixture)."""
    root = tmp_path_factory.mktemp("stores")
    written = {}

    def get(builder, **kwargs):
        key = (builder.__name__, tuple(sorted(kwargs.items())))
        if key not in written:
            written[key] = builder(root, **kwargs)
        return written[key]

    get.root = root
    return get


@pytest.mark.parametrize("zarr_format, consolidated, sharded",
                         [(2, False, False), (2, True, False), (3, False, False), (3, True, False),
                          (3, False, True), (3, True, True)],
                         ids=["v2", "v2-consolidated", "v3", "v3-consolidated", "v3-sharded",
                              "v3-sharded-consolidated"])
def test_cds_packed_int16_fill_values_and_times(stores, zarr_format, consolidated, sharded):
    path = stores(cds_era5, zarr_format=zarr_format, consolidated=consolidated, sharded=sharded)
    ds = check_against_zarr_engine(path)
    # The fixture is what the test means: packed int16 unpacked to floats with missing cells.
    assert ds["t"].encoding["dtype"] == np.dtype("int16")
    assert ds["t"].encoding["_FillValue"] == -32767
    assert ds["t"].dtype.kind == "f" and ds["t"].isnull().any()
    assert ds["valid_time"].dtype.kind == "M"
    assert ds["expver"].values.tolist()[-1] == "0005"
    if sharded:
        assert ds["t"].encoding["shards"] is not None


@pytest.mark.parametrize("options", [
    dict(decode_cf=False),
    dict(mask_and_scale=False),
    dict(decode_times=False),
    dict(use_cftime=True),
    dict(decode_timedelta=False),
    dict(concat_characters=False),
    dict(drop_variables=["t", "msl"]),
    dict(drop_variables="sst"),
    dict(decode_coords="all"),
], ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()))
@pytest.mark.parametrize("zarr_format", [2, 3])
def test_decoding_options_as_the_zarr_engine(stores, zarr_format, options):
    path = stores(cds_era5, zarr_format=zarr_format)
    check_against_zarr_engine(path, **options)


def test_decode_cf_false_gives_the_stored_values(stores):
    """The backend reads stored values and leaves decoding to xarray: without it, packed int16."""
    path = stores(cds_era5, zarr_format=3)
    ds = xr.open_dataset(str(path), engine="zarrstream", decode_cf=False, chunks=None)
    stored = zarr.open_group(str(path), mode="r")["t"][...]
    assert ds["t"].dtype == np.int16
    np.testing.assert_array_equal(ds["t"].values, stored)
    assert (stored == -32767).any()


def test_use_zarr_fill_value_as_mask(stores):
    """As xr.open_zarr documents it (its zarr engine passes the option on to nothing): a v2 array's
    fill_value masks only when it is True, the default for v2."""
    v2 = stores(cds_era5, zarr_format=2)
    stored = zarr.open_group(str(v2), mode="r")["sst"]
    assert stored.fill_value == -32767
    masked = xr.open_dataset(str(v2), engine="zarrstream", use_zarr_fill_value_as_mask=True)
    unmasked = xr.open_dataset(str(v2), engine="zarrstream", use_zarr_fill_value_as_mask=False)
    assert masked["sst"].isnull().any() and not (masked["sst"] == -32767).any()
    assert (unmasked["sst"] == -32767).any() and not unmasked["sst"].isnull().any()
    assert "_FillValue" not in unmasked["sst"].encoding


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_arco_era5(stores, zarr_format):
    path = stores(arco_era5, zarr_format=zarr_format)
    ds = check_against_zarr_engine(path)
    assert ds["time"].encoding["units"] == "hours since 1900-01-01"
    # A pool of its own for the Dataset's reads: the same Dataset.
    one_thread = xr.open_dataset(str(path), engine="zarrstream", num_threads=1)
    xr.testing.assert_identical(one_thread.load(), ds.load())


def test_weatherbench2(stores):
    check_against_zarr_engine(stores(weatherbench2))


def write_text_and_time_group(path, fmt: int) -> None:
    """One array of each text and time type zarr-python writes, with dimension names, some chunks
    unwritten (fill values)."""
    g = zarr.open_group(str(path), mode="w", zarr_format=fmt)

    def create(name, dims, **kwargs):
        if fmt == 3:
            return g.create_array(name, dimension_names=dims, **kwargs)
        return g.create_array(name, attributes={"_ARRAY_DIMENSIONS": dims}, **kwargs)

    s = create("s", ["x"], shape=(8,), chunks=(3,), dtype=str)
    s[:6] = np.array(["a", "bé", "", "ccc€", "dd", "e"], dtype=object)
    s2 = create("s2", ["r", "c"], shape=(4, 5), chunks=(3, 2), dtype=str, fill_value="-")
    s2[:3, :4] = np.array([[f"r{i}c{j}" * j for j in range(4)] for i in range(3)], dtype=object)
    u = create("u", ["y"], shape=(7,), chunks=(3,), dtype="<U4", fill_value="zz")
    u[:5] = np.array(["a", "bé", "ccc", "dddd", ""], dtype="<U4")
    b = create("S", ["z"], shape=(6,), chunks=(4,), dtype="|S3")
    b[:3] = np.array([b"a", b"b\x00c", b"ccc"], dtype="|S3")
    if fmt == 3:
        vb = create("vb", ["w"], shape=(5,), chunks=(2,), dtype=zarr.dtype.VariableLengthBytes())
        vb[:3] = np.array([b"x", b"\x00y\xff", b""], dtype=object)
    t = create("t", ["time"], shape=(7,), chunks=(3,), dtype="<M8[ns]")
    t[:4] = np.array(["2020-01-01", "2020-01-02T03:04:05.123456789", "NaT", "1900-01-01"],
                     dtype="M8[ns]")
    td = create("td", ["lag"], shape=(5,), chunks=(2,), dtype="<m8[s]")
    td[:3] = np.array([1, -2, 3], dtype="m8[s]")
    v = create("v", ["time", "x"], shape=(7, 8), chunks=(3, 4), dtype="f4", fill_value=np.nan)
    v[...] = np.arange(56, dtype="f4").reshape(7, 8)


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_strings_bytes_and_times_from_zarr_python(tmp_path, zarr_format):
    path = tmp_path / "text.zarr"
    write_text_and_time_group(path, zarr_format)
    ds = check_against_zarr_engine(path)
    assert ds["s"].values.tolist()[:2] == ["a", "bé"]
    check_against_zarr_engine(path, decode_cf=False)


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_strings_and_times_from_xarray(tmp_path, zarr_format):
    """String coordinates and data, a CF-encoded time and timedelta, as Dataset.to_zarr writes
    them."""
    ds = xr.Dataset(
        {"station_name": ("station", np.array(["Zürich", "Oslo", ""], dtype=object)),
         "code": ("station", np.array([b"ZRH", b"OSL", b"X"])),
         "lead": ("step", pd.to_timedelta([0, 6, 12], unit="h").values),
         "obs": (("time", "station"), np.arange(12, dtype="f8").reshape(4, 3))},
        coords={"station": ["a", "bb", "ccc"],
                "time": pd.date_range("1999-12-31", periods=4, freq="D")},
    )
    path = tmp_path / "xr-text.zarr"
    ds.to_zarr(path, zarr_format=zarr_format, mode="w")
    check_against_zarr_engine(path)


def write_filter_group(path, fmt: int) -> None:
    """Arrays behind numcodecs' quantize, bitround and astype filters, as zarr-python writes them."""
    g = zarr.open_group(str(path), mode="w", zarr_format=fmt)
    data = 280 + 20 * np.sin(np.arange(37 * 29).reshape(37, 29) / 50)
    if fmt == 2:
        filters = {"q": (numcodecs.Quantize(digits=3, dtype="<f8"), "<f8"),
                   "br": (numcodecs.BitRound(keepbits=7), "<f4"),
                   "cast": (numcodecs.AsType(encode_dtype="<i2", decode_dtype="<i8"), "<i8")}
        compressors = numcodecs.Blosc(cname="lz4", clevel=5, shuffle=numcodecs.Blosc.SHUFFLE)
    else:
        filters = {"q": (v3_codecs.Quantize(digits=3), "<f8"),
                   "br": (v3_codecs.BitRound(keepbits=7), "<f4"),
                   "cast": (v3_codecs.AsType(encode_dtype="i2", decode_dtype="i8"), "<i8")}
        compressors = zarr.codecs.ZstdCodec(level=3)
    for name, (codec, dtype) in filters.items():
        dims = {"dimension_names": ["y", "x"]} if fmt == 3 else {
            "attributes": {"_ARRAY_DIMENSIONS": ["y", "x"]}}
        a = g.create_array(name, shape=data.shape, chunks=(16, 10), dtype=dtype, filters=[codec],
                           compressors=compressors, fill_value=0, **dims)
        a[...] = np.round(data) if np.dtype(dtype).kind == "i" else data.astype(dtype)


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_filters(tmp_path, zarr_format):
    path = tmp_path / "filters.zarr"
    write_filter_group(path, zarr_format)
    check_against_zarr_engine(path)


def test_tensorstore_written_stores(tmp_path):
    """A v3 sharded array and a v2 big-endian Fortran-order array written by tensorstore, in
    groups whose metadata carry the dimension names."""
    ts = pytest.importorskip("tensorstore")
    data = np.arange(6 * 8 * 10, dtype="f4").reshape(6, 8, 10) / 7
    v3 = tmp_path / "ts-v3.zarr"
    v3.mkdir()
    (v3 / "zarr.json").write_text(json.dumps({"zarr_format": 3, "node_type": "group"}))
    codecs = [{"name": "sharding_indexed", "configuration": {
        "chunk_shape": [1, 4, 5],
        "codecs": [{"name": "bytes", "configuration": {"endian": "little"}},
                   {"name": "zstd", "configuration": {"level": 3}}],
        "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}},
                         {"name": "crc32c"}]}}]
    t = ts.open({"driver": "zarr3", "kvstore": {"driver": "file", "path": str(v3 / "field")},
                 "metadata": {"shape": list(data.shape), "data_type": "float32",
                              "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [2, 8, 10]}},
                              "codecs": codecs, "fill_value": float("nan"),
                              "dimension_names": ["time", "lat", "lon"]}},
                create=True, delete_existing=True).result()
    t[:4].write(data[:4]).result()  # the last shard unwritten: NaN
    check_against_zarr_engine(v3)

    v2 = tmp_path / "ts-v2.zarr"
    v2.mkdir()
    (v2 / ".zgroup").write_text(json.dumps({"zarr_format": 2}))
    t = ts.open({"driver": "zarr", "kvstore": {"driver": "file", "path": str(v2 / "field")},
                 "metadata": {"shape": list(data.shape), "chunks": [2, 5, 5], "dtype": ">i2",
                              "order": "F", "fill_value": -9, "compressor": {"id": "zlib", "level": 1},
                              "dimension_separator": "/"}},
                create=True, delete_existing=True).result()
    t[:, :5].write(np.round(data[:, :5] * 10).astype(">i2")).result()
    (v2 / "field" / ".zattrs").write_text(json.dumps({"_ARRAY_DIMENSIONS": ["time", "lat", "lon"],
                                                      "scale_factor": 0.1}))
    ds = check_against_zarr_engine(v2)
    assert ds["field"].isnull().sum() > 0  # fill_value -9 is v2's _FillValue: the unwritten chunks


def test_group_option(tmp_path):
    path = tmp_path / "nested.zarr"
    root = zarr.open_group(str(path), mode="w", zarr_format=3)
    sub = root.create_group("era5").create_group("surface")
    a = sub.create_array("t2m", shape=(4, 3), chunks=(2, 3), dtype="f4", dimension_names=["time", "x"],
                         fill_value=np.nan, attributes={"units": "K"})
    a[...] = np.arange(12, dtype="f4").reshape(4, 3)
    root.attrs["title"] = "root"
    zarr.consolidate_metadata(str(path))
    for group in ("era5/surface", "/era5/surface"):
        for consolidated in (None, True, False):
            check_against_zarr_engine(path, group=group, consolidated=consolidated)
    with pytest.raises(NotFoundError):
        xr.open_dataset(str(path), engine="zarrstream", group="era5/nothing")


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_datatree_of_a_nested_store(tmp_path, zarr_format):
    path = tmp_path / "tree.zarr"
    root = zarr.open_group(str(path), mode="w", zarr_format=zarr_format)

    def create(group, name, dims, **kwargs):
        if zarr_format == 3:
            return group.create_array(name, dimension_names=dims, **kwargs)
        return group.create_array(name, attributes={"_ARRAY_DIMENSIONS": dims, **kwargs.pop("attributes", {})},
                                  **kwargs)

    create(root, "station", ["station"], shape=(2,), chunks=(2,), dtype=str)[...] = np.array(["a", "b"])
    era5 = root.create_group("era5", attributes={"source": "era5"})
    create(era5, "level", ["level"], shape=(3,), chunks=(3,), dtype="f8")[...] = [1000, 850, 500]
    surface = era5.create_group("surface")
    t2m = create(surface, "t2m", ["time", "x"], shape=(4, 3), chunks=(2, 3), dtype="i2", fill_value=-9,
                 attributes={"scale_factor": 0.5, "units": "K"})
    t2m[:2] = np.arange(6, dtype="i2").reshape(2, 3)
    zarr.consolidate_metadata(str(path))
    engine = xr.backends.list_engines()["zarrstream"]
    for group in (None, "era5"):
        ours = engine.open_groups_as_dict(str(path), group=group)
        theirs = xr.backends.list_engines()["zarr"].open_groups_as_dict(str(path), group=group)
        assert sorted(ours) == sorted(theirs)
        for key in theirs:
            assert_same_dataset(ours[key], theirs[key])
        tree = xr.open_datatree(str(path), engine="zarrstream", group=group)
        xr.testing.assert_identical(tree, xr.open_datatree(str(path), engine="zarr", group=group))


def test_consolidated_false_reads_each_arrays_own_metadata(tmp_path):
    """consolidated=False sees an attribute changed after consolidation, as the zarr engine does;
    None and True see the consolidated copy."""
    path = arco_era5(tmp_path, zarr_format=2)
    zattrs = path / "temperature" / ".zattrs"
    attrs = json.loads(zattrs.read_text())
    attrs["units"] = "degC"
    zattrs.write_text(json.dumps(attrs))
    ours = check_against_zarr_engine(path, consolidated=False)
    assert ours["temperature"].attrs["units"] == "degC"
    ours = check_against_zarr_engine(path, consolidated=True)
    assert ours["temperature"].attrs["units"] == "K"


def test_consolidated_true_without_consolidated_metadata_is_an_error(stores):
    path = stores(cds_era5, zarr_format=3, consolidated=False)
    with pytest.raises(NotFoundError, match="no consolidated metadata"):
        xr.open_dataset(str(path), engine="zarrstream", consolidated=True)


def test_zarr_format_is_checked_and_storage_options_refused(stores):
    path = stores(cds_era5, zarr_format=3)
    check_against_zarr_engine(path, zarr_format=3)
    with pytest.raises(NotFoundError, match="Zarr v3 group, not v2"):
        xr.open_dataset(str(path), engine="zarrstream", zarr_format=2)
    with pytest.raises(ConfigError, match="storage_options.*environment"):
        xr.open_dataset(str(path), engine="zarrstream", storage_options={"anon": True})


def test_the_backend_needs_no_zarr_python(stores):
    """zarr-python blocked from importing: the backend opens, reads and decodes without it."""
    path = stores(cds_era5, zarr_format=2, consolidated=True)
    code = (
        "import sys; sys.modules['zarr'] = None\n"
        "import xarray as xr\n"
        f"ds = xr.open_dataset({str(path)!r}, engine='zarrstream')\n"
        "print(float(ds['t'].isel(valid_time=2).mean()), ds['valid_time'].dtype, 'zarr' in sys.modules"
        " and sys.modules['zarr'] is not None)\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    theirs = xr.open_dataset(str(path), engine="zarr", chunks=None)
    mean, dtype, zarr_loaded = run.stdout.split()
    assert float(mean) == float(theirs["t"].isel(valid_time=2).mean())
    assert dtype == "datetime64[ns]" and zarr_loaded == "False"


def test_a_store_object_is_refused_by_name():
    with pytest.raises(InvalidArgumentError, match="by URL or path, not a MemoryStore"):
        xr.open_dataset(zarr.storage.MemoryStore(), engine="zarrstream")


def test_an_array_without_dimension_names_is_a_clear_error(tmp_path):
    path = tmp_path / "nodims.zarr"
    g = zarr.open_group(str(path), mode="w", zarr_format=3)
    g.create_array("a", shape=(3,), chunks=(3,), dtype="f4")
    with pytest.raises(MetadataError, match="'a'.*dimension"):
        xr.open_dataset(str(path), engine="zarrstream")


def test_the_engine_is_registered_and_claims_no_path_by_itself(stores):
    assert "zarrstream" in xr.backends.list_engines()
    path = stores(arco_era5, zarr_format=3)
    engine = xr.backends.list_engines()["zarrstream"]
    assert not engine.guess_can_open(str(path))


# ---------------------------------------------------------------------------------------------
# Lazy indexing and dask.


def test_lazy_indexing_matches_the_zarr_engine(stores):
    path = stores(cds_era5, zarr_format=3, sharded=True)
    ours, theirs = open_both(path)
    selections = [
        dict(valid_time=3),
        dict(valid_time=slice(1, 6, 2), longitude=slice(None, None, -1)),
        dict(valid_time=[0, 5, 2], latitude=[6, 0]),
        dict(pressure_level=-1, latitude=3, longitude=9),
    ]
    for sel in selections:
        for var in ("t", "t2m", "expver", "valid_time"):
            if not set(sel) & set(ours[var].dims):
                continue
            sub = {k: v for k, v in sel.items() if k in ours[var].dims}
            xr.testing.assert_identical(ours[var].isel(sub).load(), theirs[var].isel(sub).load())
    # Vectorized (pointwise) indexing.
    points = dict(latitude=xr.DataArray([0, 3, 6], dims="p"), longitude=xr.DataArray([9, 0, 4], dims="p"))
    xr.testing.assert_identical(ours["t"].isel(points).load(), theirs["t"].isel(points).load())
    # Index lists on several axes at once: unsorted, repeated, negative, across and within chunks.
    rng = np.random.default_rng(0)
    for _ in range(20):
        sel = {}
        for dim in ("valid_time", "pressure_level", "latitude", "longitude"):
            size = ours.sizes[dim]
            choice = rng.integers(0, 4)
            if choice == 0:
                sel[dim] = rng.integers(-size, size, rng.integers(1, 5)).tolist()
            elif choice == 1:
                sel[dim] = slice(int(rng.integers(0, size)), None, int(rng.integers(1, 3)))
            elif choice == 2:
                sel[dim] = int(rng.integers(-size, size))
        for var in ("t", "expver"):
            sub = {k: v for k, v in sel.items() if k in ours[var].dims}
            xr.testing.assert_identical(ours[var].isel(sub).load(), theirs[var].isel(sub).load())


def test_async_loading(stores):
    path = stores(cds_era5, zarr_format=3, sharded=True)
    ours, theirs = open_both(path)
    loaded = asyncio.run(ours.isel(valid_time=[1, 6], longitude=slice(2, 9)).load_async())
    xr.testing.assert_identical(loaded, theirs.isel(valid_time=[1, 6], longitude=slice(2, 9)).load())


@pytest.mark.parametrize("sharded", [False, True])
def test_dask_chunks_follow_the_store(stores, sharded):
    pytest.importorskip("dask")
    path = stores(cds_era5, zarr_format=3, sharded=sharded)
    ours, theirs = open_both(path, chunks={})
    for name in theirs.variables:
        assert ours[name].chunks == theirs[name].chunks, name
    # The read chunks: one step inside shards of four, else chunks of two steps.
    step_chunks = (1,) * 8 if sharded else (2,) * 4
    assert ours["t"].chunks == (step_chunks, (3,), (7,), (5, 5))
    assert_same_dataset(ours.compute(), theirs.compute())
    ours, theirs = open_both(path, chunks={"valid_time": 3})
    assert ours["t"].chunks == theirs["t"].chunks
    xr.testing.assert_identical(ours.compute(), theirs.compute())


# ---------------------------------------------------------------------------------------------
# Remote stores and chunk counts.


@pytest.fixture(scope="module")
def nginx(stores, tmp_path_factory):
    server = Nginx(stores.root, tmp_path_factory.mktemp("nginx"))
    yield server
    server.stop()


def chunk_requests(server: Nginx, store: str, array: str) -> list[str]:
    """Paths of the GET requests for `array`'s stored objects (its metadata excluded)."""
    prefix = f"/{store}/{array}/"
    meta = ("zarr.json", ".zarray", ".zattrs")
    return sorted(r.path[len(prefix):] for r in server.requests()
                  if r.method == "GET" and r.path.startswith(prefix) and not r.path.endswith(meta))


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_a_time_step_over_http_reads_only_its_chunk(stores, nginx, zarr_format):
    server = nginx
    path = stores(arco_era5, zarr_format=zarr_format)  # consolidated: HTTP cannot list
    url = f"{server.url}/{path.name}"
    ds = xr.open_dataset(url, engine="zarrstream", chunks=None)
    theirs = xr.open_dataset(str(path), engine="zarr", chunks=None)
    assert_same_dataset(ds, theirs)
    server.clear_log()
    ds = xr.open_dataset(url, engine="zarrstream", chunks=None)
    assert chunk_requests(server, path.name, "temperature") == []  # opening reads no data
    values = ds["temperature"].isel(time=5).values
    np.testing.assert_array_equal(values, theirs["temperature"].isel(time=5).values)
    key = "c/5/0/0/0" if zarr_format == 3 else "5.0.0.0"
    assert chunk_requests(server, path.name, "temperature") == [key]
    # A second variable's time step: its one chunk, and nothing more of the first.
    server.clear_log()
    values = ds["2m_temperature"].isel(time=2, latitude=slice(0, 3)).values
    np.testing.assert_array_equal(values, theirs["2m_temperature"].isel(time=2, latitude=slice(0, 3)).values)
    assert chunk_requests(server, path.name, "temperature") == []
    two_d = "c/2/0/0" if zarr_format == 3 else "2.0.0"
    assert chunk_requests(server, path.name, "2m_temperature") == [two_d]


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_a_cds_store_over_http_is_the_local_one(stores, nginx, zarr_format):
    """Packed variables, CF times and the expver text coordinate (whose v2 fill_value null is read
    from its .zarray over HTTP) as the zarr engine gives them from disk."""
    path = stores(cds_era5, zarr_format=zarr_format, consolidated=True)
    ours = xr.open_dataset(f"{nginx.url}/{path.name}", engine="zarrstream", chunks={})
    theirs = xr.open_dataset(str(path), engine="zarr", chunks={})
    assert_same_dataset(ours.compute(), theirs.compute())


def test_s3_listing_and_consolidated_metadata(stores, monkeypatch):
    """An S3 bucket (moto, requests signed) holding an unconsolidated v3 store, whose members are
    found by listing, and a consolidated v2 one opened with consolidated=False (listed too)."""
    v3 = stores(cds_era5, zarr_format=3, sharded=True)
    v2 = stores(arco_era5, zarr_format=2)
    server = MotoS3()
    try:
        for path in (v3, v2):
            server.upload_tree("xarray", path, path.name)
        server.set_auth(True)
        for var in ("AWS_SESSION_TOKEN", "AWS_NO_SIGN_REQUEST", "AWS_ENDPOINT_URL_S3"):
            monkeypatch.delenv(var, raising=False)
        monkeypatch.setenv("AWS_ENDPOINT_URL", server.endpoint)
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", server.access_key)
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", server.secret_key)
        monkeypatch.setenv("AWS_REGION", MotoS3.REGION)
        for path, options in ((v3, {}), (v2, {"consolidated": False})):
            ours = xr.open_dataset(f"s3://xarray/{path.name}", engine="zarrstream", chunks={}, **options)
            theirs = xr.open_dataset(str(path), engine="zarr", chunks={}, **options)
            assert_same_dataset(ours.compute(), theirs.compute())
    finally:
        server.stop()


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_a_list_of_time_steps_over_http_reads_only_their_chunks(stores, nginx, zarr_format):
    path = stores(arco_era5, zarr_format=zarr_format)
    ds = xr.open_dataset(f"{nginx.url}/{path.name}", engine="zarrstream", chunks=None)
    theirs = xr.open_dataset(str(path), engine="zarr", chunks=None)
    steps = [6, 1, 6, 2]
    nginx.clear_log()
    got = ds["temperature"].isel(time=steps, level=[0, 2]).values
    np.testing.assert_array_equal(got, theirs["temperature"].isel(time=steps, level=[0, 2]).values)
    # Steps 1 and 2 are neighbouring chunks (one read), step 6 another; not the chunks between.
    keys = [f"c/{t}/0/0/0" if zarr_format == 3 else f"{t}.0.0.0" for t in (1, 2, 6)]
    assert chunk_requests(nginx, path.name, "temperature") == keys
    # A step longer than the chunks skips the chunks between, forwards and backwards.
    for every_third in (slice(0, None, 3), slice(None, None, -3)):
        nginx.clear_log()
        got = ds["temperature"].isel(time=every_third).values
        np.testing.assert_array_equal(got, theirs["temperature"].isel(time=every_third).values)
        steps = range(8)[every_third]
        keys = sorted(f"c/{t}/0/0/0" if zarr_format == 3 else f"{t}.0.0.0" for t in steps)
        assert chunk_requests(nginx, path.name, "temperature") == keys


def test_a_time_step_of_a_sharded_store_over_http_reads_one_shard(stores, nginx):
    server = nginx
    path = stores(cds_era5, zarr_format=3, sharded=True, consolidated=True)
    url = f"{server.url}/{path.name}"
    ds = xr.open_dataset(url, engine="zarrstream", chunks={})
    theirs = xr.open_dataset(str(path), engine="zarr", chunks={})
    server.clear_log()
    got = ds["t"].isel(valid_time=5).values
    np.testing.assert_array_equal(got, theirs["t"].isel(valid_time=5).values)
    # Time step 5 is in the second shard (4 steps a shard): its index and inner chunk, ranged.
    requested = chunk_requests(server, path.name, "t")
    assert requested and set(requested) == {"c/1/0/0/0"}, requested


def test_the_xarray_benchmark_runs_and_checks_its_reads(stores, tmp_path):
    path = stores(arco_era5, zarr_format=3)
    out = tmp_path / "bench.json"
    bench = Path(__file__).parent.parent / "bench" / "xarray_bench.py"
    run = subprocess.run([sys.executable, str(bench), "--store", str(path), "--variable", "temperature",
                          "--reads", "3", "--repeats", "1", "--engines", "zarrstream,zarr",
                          "--json", str(out)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    results = json.loads(out.read_text())["results"]
    assert set(results) == {"zarrstream", "zarr"}
    assert all(r["reads"] == 3 and r["gb_per_s"] > 0 for r in results.values())

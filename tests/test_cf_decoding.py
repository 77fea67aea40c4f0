"""CF decoding as xarray does it by default: the loader, ``stats`` and ``open_array(decode_cf=True)``
against ``xr.open_zarr`` of stores xarray and zarr-python wrote (tests/era5_fixtures.py): packed
int16/uint8 variables with ``_FillValue`` and ``missing_value``, float fill values, ``_Unsigned``,
v2's fill_value; Zarr v2 and v3, consolidated or not, sharded or not. Expected values come from
xarray's decoded dataset, never from zarrstream. GPU batches of these stores:
tests/test_gpu_loader.py.
"""

from __future__ import annotations

import json
import os
import warnings

import numpy as np
import pytest
import xarray as xr
import zarr

import era5_fixtures
import zarrstream
from conftest import run_cli
from zarrstream.errors import ConfigError

torch = pytest.importorskip("torch")

CDS_VARIABLES = ["t", "z", "t2m", "msl", "lsm", "sst"]
NT_ALL = era5_fixtures.NT
CDS_VARIANTS = [
    pytest.param(dict(zarr_format=2), id="v2"),
    pytest.param(dict(zarr_format=2, consolidated=True), id="v2-consolidated"),
    pytest.param(dict(zarr_format=3), id="v3"),
    pytest.param(dict(zarr_format=3, consolidated=True, sharded=True), id="v3-sharded-consolidated"),
]


def open_xarray(path, consolidated=None) -> xr.Dataset:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return xr.open_zarr(path, consolidated=consolidated).load()


def channel_values(ds: xr.Dataset, channel: str, level_dim: str | None) -> np.ndarray:
    """One loader channel ("t@850" or "t2m") of xarray's dataset: [time, lat, lon]."""
    name, _, level = channel.partition("@")
    da = ds[name]
    if level:
        da = da.sel({level_dim: float(level)})
    return da.values


def loader_inputs(path, variables, **kwargs) -> tuple[list[str], np.ndarray]:
    loader = zarrstream.Loader(str(path), variables, shuffle="none", batch_size=1, **kwargs)
    batches = [batch["input"].numpy()[0] for batch in loader]
    return loader.channels, np.stack(batches)


def expected_inputs(ds, channels, level_dim) -> np.ndarray:
    """xarray's decoded values in the loader's layout [time, channel, lat, lon], as float32."""
    return np.stack([channel_values(ds, c, level_dim) for c in channels], axis=1).astype("float32")


def assert_same(got: np.ndarray, want: np.ndarray, what: str = ""):
    assert got.shape == want.shape, what
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg=what)
    np.testing.assert_array_equal(got, want, err_msg=what)


@pytest.fixture(scope="module")
def cds_root(tmp_path_factory):
    return tmp_path_factory.mktemp("cds")


@pytest.mark.parametrize("variant", CDS_VARIANTS)
def test_loader_batches_equal_xarrays_decoded_values(cds_root, variant):
    path = era5_fixtures.cds_era5(cds_root, **variant)
    ds = open_xarray(path, consolidated=variant.get("consolidated", False))
    assert ds.t.dtype == np.float64 and int(ds.t.isnull().sum()) > 0  # packed, with missing cells
    channels, got = loader_inputs(path, CDS_VARIABLES)
    assert channels[:3] == ["t@1000", "t@850", "t@500"]
    want = expected_inputs(ds, channels, "pressure_level")
    assert_same(got, want)
    # Masked cells are NaN before nan=: they are filled and flagged like any NaN.
    loader = zarrstream.Loader(str(path), CDS_VARIABLES, shuffle="none", batch_size=NT_ALL, nan=-5.0)
    batch = next(iter(loader))
    assert_same(batch["input"].numpy(), np.where(np.isnan(want), np.float32(-5), want))
    np.testing.assert_array_equal(batch["input_mask"].numpy(), np.isnan(want))


def test_an_expver_label_selects_the_steps_xarray_selects(cds_root):
    """The CDS's ``expver`` (a string coordinate along ``valid_time``) selects steps by label on a
    packed store, and the batches are xarray's decoded values at those steps."""
    path = era5_fixtures.cds_era5(cds_root, zarr_format=3)
    ds = open_xarray(path)
    assert ds.expver.dtype.kind in "UO" and set(ds.expver.values) == {"0001", "0005"}
    steps = np.flatnonzero(ds.expver.values == "0005")
    channels, got = loader_inputs(path, CDS_VARIABLES, select={"expver": "0005"})
    assert_same(got, expected_inputs(ds.isel(valid_time=steps), channels, "pressure_level"))


def test_decode_cf_false_gives_the_stored_integers(cds_root):
    path = era5_fixtures.cds_era5(cds_root, zarr_format=3)
    channels, got = loader_inputs(path, ["t", "lsm"], decode_cf=False)
    raw_t = zarr.open_array(path / "t")[...]
    raw_lsm = zarr.open_array(path / "lsm")[...]
    assert raw_t.dtype == np.int16 and (raw_t == -32767).any()
    want = np.concatenate([raw_t, raw_lsm[:, None]], axis=1).astype("float32")
    assert_same(got, want)


@pytest.mark.parametrize("variant", CDS_VARIANTS[1:3])
def test_stats_equal_statistics_of_xarrays_decoded_values(cds_root, tmp_path, variant):
    path = era5_fixtures.cds_era5(cds_root, **variant)
    ds = open_xarray(path, consolidated=variant.get("consolidated", False))
    out = tmp_path / "stats.json"
    proc = run_cli("stats", path, "--vars", "t@850,t2m,lsm,sst", "-o", out)
    assert proc.returncode == 0, proc.stderr
    channels = json.loads(out.read_text())["channels"]
    for c in channels:
        values = channel_values(ds, c["name"], "pressure_level").astype("float64")
        finite = values[~np.isnan(values)]
        assert c["nan_count"] == int(np.isnan(values).sum()), c["name"]
        assert c["count"] == finite.size, c["name"]
        np.testing.assert_allclose(c["mean"], finite.mean(), rtol=1e-12, err_msg=c["name"])
        np.testing.assert_allclose(c["std"], finite.std(), rtol=1e-9, err_msg=c["name"])
        assert c["min"] == finite.min() and c["max"] == finite.max(), c["name"]
    # --no-decode-cf: statistics of the stored integers, fill values included.
    proc = run_cli("stats", path, "--vars", "t@850", "--no-decode-cf", "-o", out)
    assert proc.returncode == 0, proc.stderr
    (raw,) = json.loads(out.read_text())["channels"]
    stored = zarr.open_array(path / "t")[:, 1].astype("float64")
    assert raw["nan_count"] == 0 and raw["min"] == -32767 == stored.min()
    np.testing.assert_allclose(raw["mean"], stored.mean(), rtol=1e-12)


def test_normalised_batches_use_decoded_statistics(cds_root, tmp_path):
    path = era5_fixtures.cds_era5(cds_root, zarr_format=3)
    ds = open_xarray(path)
    stats = tmp_path / "stats.json"
    assert run_cli("stats", path, "--vars", "t2m", "-o", stats).returncode == 0
    (c,) = json.loads(stats.read_text())["channels"]
    _, got = loader_inputs(path, ["t2m"], normalize=stats, nan=0.0)
    values = ds.t2m.values  # float64, as decoded
    want = ((values - c["mean"]) * (1.0 / c["std"])).astype("float32")
    want = np.where(np.isnan(want), np.float32(0), want)
    assert_same(got[:, 0], want)
    assert np.abs(got).max() < 10  # normalised: no fill value or raw integer leaked through


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_open_array_is_raw_unless_asked_to_decode(cds_root, zarr_format):
    path = era5_fixtures.cds_era5(cds_root, zarr_format=zarr_format)
    ds = open_xarray(path)
    for name in CDS_VARIABLES:
        raw = zarrstream.open_array(str(path / name))
        assert raw.dtype == zarr.open_array(path / name).dtype
        np.testing.assert_array_equal(raw[...], zarr.open_array(path / name)[...])
        decoded = zarrstream.open_array(str(path / name), decode_cf=True)
        assert decoded.dtype == ds[name].dtype, name
        assert_same(decoded.read(), ds[name].values, name)
        assert_same(decoded[1:3, ..., 2:5], ds[name].values[1:3, ..., 2:5], name)
        with pytest.raises(zarrstream.UnsupportedError, match="decode_cf"):
            decoded[0, ...] = 0


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_arco_and_weatherbench2_stores_read_as_xarray_reads_them(tmp_path, zarr_format):
    arco = era5_fixtures.arco_era5(tmp_path, zarr_format=zarr_format)
    ds = open_xarray(arco, consolidated=True)
    channels, got = loader_inputs(arco, ["2m_temperature", "temperature"])
    assert_same(got, expected_inputs(ds, channels, "level"))
    assert np.isnan(got[0, 0, 0, 0])
    if zarr_format == 2:
        wb2 = era5_fixtures.weatherbench2(tmp_path)
        ds = open_xarray(wb2, consolidated=True)
        channels, got = loader_inputs(wb2, ["geopotential", "2m_temperature"])
        assert_same(got, expected_inputs(ds, channels, "level"))


def _write_zarr(path, name, values, attrs, zarr_format, fill_value=None, dims=("time", "x")):
    g = zarr.open_group(path, mode="a", zarr_format=zarr_format)
    kwargs = {"dimension_names": list(dims)} if zarr_format == 3 else {}
    a = g.create_array(name, shape=values.shape, chunks=(2,) + values.shape[1:], dtype=values.dtype,
                       fill_value=fill_value, **kwargs)
    a[...] = values
    a.attrs.update(attrs)
    if zarr_format == 2:
        a.attrs["_ARRAY_DIMENSIONS"] = list(dims)
    if "time" not in g:
        t = g.create_array("time", shape=(values.shape[0],), dtype="int64", **(
            {"dimension_names": ["time"]} if zarr_format == 3 else {}))
        t[...] = np.arange(values.shape[0])
        t.attrs.update({"units": "hours since 2000-01-01"})
        if zarr_format == 2:
            t.attrs["_ARRAY_DIMENSIONS"] = ["time"]


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_unsigned_missing_value_lists_and_v2_fill_values_decode_as_in_xarray(tmp_path, zarr_format):
    path = tmp_path / "odd.zarr"
    rng = np.random.default_rng(5)
    shape = (6, 5)
    # int8 holding unsigned bytes (netCDF-3's way), 255 (-1 stored) missing, packed.
    u = rng.integers(-128, 127, shape).astype("int8")
    u[0, :2] = -1
    _write_zarr(path, "cloud", u, {"_Unsigned": "true", "_FillValue": -1, "scale_factor": 0.5,
                                   "add_offset": 1.0}, zarr_format)
    # missing_value as a list beside _FillValue, unpacked int16: float32 as in xarray.
    m = rng.integers(-1000, 1000, shape).astype("int16")
    m[1, 1], m[2, 2], m[3, 3] = -999, -998, 7777
    _write_zarr(path, "rain", m, {"_FillValue": 7777, "missing_value": [-999, -998]}, zarr_format)
    # int32 with a fill only: float64. float64 with a missing_value.
    w = rng.integers(-10**6, 10**6, shape).astype("int32")
    w[4, 4] = -1
    _write_zarr(path, "wide", w, {"_FillValue": -1}, zarr_format)
    f = rng.standard_normal(shape)
    f[5, 0] = 1e20
    _write_zarr(path, "f64", f, {"missing_value": 1e20}, zarr_format)
    if zarr_format == 2:
        # v2: the array's fill_value is xarray's _FillValue (zeros become NaN).
        z = rng.integers(0, 4, shape).astype("uint16")
        _write_zarr(path, "zeros", z, {}, zarr_format, fill_value=0)
    zarr.consolidate_metadata(path)
    ds = open_xarray(path, consolidated=True)
    for name in ds.data_vars:
        decoded = zarrstream.open_array(str(path / name), decode_cf=True)
        assert decoded.dtype == ds[name].dtype, name
        assert_same(decoded.read(), ds[name].values, name)
        assert int(np.isnan(ds[name].values).sum()) > 0, name
        _, got = loader_inputs(path, [name], sample={"time": 1})
        assert_same(got[:, 0], ds[name].values.astype("float32"), name)


@pytest.mark.parametrize("attrs, attribute", [
    ({"scale_factor": "0.1"}, "scale_factor"),
    ({"add_offset": {"value": 1}}, "add_offset"),
    ({"_FillValue": "-32767"}, "_FillValue"),
    ({"_FillValue": 1.5}, "_FillValue"),
    ({"_FillValue": 40000}, "_FillValue"),
    ({"missing_value": ["a"]}, "missing_value"),
])
def test_corrupt_cf_attributes_are_clear_errors(tmp_path, attrs, attribute):
    path = tmp_path / "bad.zarr"
    _write_zarr(path, "t", np.zeros((4, 3), dtype="int16"), attrs, 3)
    for open_it in (
        lambda: zarrstream.Loader(str(path), ["t"]),
        lambda: zarrstream.open_array(str(path / "t"), decode_cf=True),
    ):
        with pytest.raises(zarrstream.ZarrstreamError) as error:
            open_it()
        message = str(error.value)
        # The store and the array: "array 't' in file://.../bad.zarr" or "array at .../bad.zarr/t".
        assert f"attribute '{attribute}'" in message and "bad.zarr" in message
        assert "'t'" in message or "bad.zarr/t" in message
    proc = run_cli("stats", path, "--vars", "t")
    assert proc.returncode == 1 and f"attribute '{attribute}'" in proc.stderr
    # decode_cf=False does not look at them.
    assert zarrstream.Loader(str(path), ["t"], decode_cf=False).num_samples == 4
    assert zarrstream.open_array(str(path / "t")).read().dtype == np.int16


def test_inspect_marks_packed_variables_with_fill_values_units_and_the_time_range(cds_root):
    path = era5_fixtures.cds_era5(cds_root, zarr_format=2, consolidated=True)
    proc = run_cli("inspect", path, "--json")
    assert proc.returncode == 0, proc.stderr
    members = {m["name"]: m for m in json.loads(proc.stdout)["members"]}
    t = members["t"]
    assert t["packed"] is True and t["units"] == "K"
    assert t["cf_decoding"].startswith("packed int16") and "-32767" in t["cf_decoding"]
    assert t["cf_decoding"].endswith("float64")
    assert members["sst"]["packed"] is False and members["sst"]["cf_decoding"].endswith("float32")
    assert members["valid_time"]["time_range"] == ["2023-01-01T00:00:00", "2023-01-02T18:00:00"]
    assert members["valid_time"]["warnings"] == []  # a coordinate: no layout advice
    text = run_cli("inspect", path).stdout
    assert "CF: packed int16" in text and "units K" in text
    assert "from 2023-01-01T00:00:00 to 2023-01-02T18:00:00" in text


def test_bench_decodes_unless_told_not_to(cds_root, tmp_path):
    path = era5_fixtures.cds_era5(cds_root, zarr_format=3)
    for flags in ([], ["--no-decode-cf"]):
        proc = run_cli("bench", path, "--variables", "t,t2m", "--steps", "2", "--json",
                       tmp_path / "bench.json", *flags)
        assert proc.returncode == 0, proc.stderr
    bad = tmp_path / "bad.zarr"
    _write_zarr(bad, "t", np.zeros((4, 3), dtype="int16"), {"scale_factor": "x"}, 3)
    proc = run_cli("bench", bad, "--variables", "t", "--steps", "1")
    assert proc.returncode != 0 and "attribute 'scale_factor'" in proc.stderr
    assert run_cli("bench", bad, "--variables", "t", "--steps", "1", "--no-decode-cf").returncode == 0


def test_stats_file_records_decoding_and_the_loader_refuses_the_other_kind(cds_root, tmp_path):
    path = era5_fixtures.cds_era5(cds_root, zarr_format=3)
    raw, decoded = tmp_path / "raw.json", tmp_path / "decoded.json"
    assert run_cli("stats", path, "--vars", "t2m,lsm", "--no-decode-cf", "-o", raw).returncode == 0
    assert run_cli("stats", path, "--vars", "t2m,lsm", "-o", decoded).returncode == 0
    assert json.loads(raw.read_text())["decode_cf"] is False
    assert json.loads(decoded.read_text())["decode_cf"] is True
    # Statistics of packed integers cannot normalise decoded values, nor the other way round.
    with pytest.raises(ConfigError, match=r"decode_cf=False.*'t2m'.*packed"):
        zarrstream.Loader(str(path), ["t2m"], normalize=raw)
    with pytest.raises(ConfigError, match=r"decode_cf=True.*'t2m'"):
        zarrstream.Loader(str(path), ["t2m"], normalize=decoded, decode_cf=False)
    zarrstream.Loader(str(path), ["t2m"], normalize=raw, decode_cf=False)
    # A file without the field (written before it was recorded) is taken as it is.
    doc = json.loads(raw.read_text())
    del doc["decode_cf"]
    raw.write_text(json.dumps(doc))
    zarrstream.Loader(str(path), ["t2m"], normalize=raw)


def test_stats_select_by_expver_equals_xarrays_statistics(cds_root, tmp_path):
    path = era5_fixtures.cds_era5(cds_root, zarr_format=2, consolidated=True)
    ds = open_xarray(path, consolidated=True)
    out = tmp_path / "stats.json"
    proc = run_cli("stats", path, "--vars", "t@850,t2m", "--select", "expver=0005", "-o", out)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(out.read_text())
    assert doc["select"] == {"expver": {"values": ["0005"]}}
    part = ds.isel(valid_time=np.flatnonzero(ds.expver.values == "0005"))
    for c in doc["channels"]:
        values = channel_values(part, c["name"], "pressure_level").astype("float64")
        finite = values[~np.isnan(values)]
        assert c["count"] == finite.size, c["name"]
        np.testing.assert_allclose(c["mean"], finite.mean(), rtol=1e-12, err_msg=c["name"])
    # expver runs along valid_time: selecting both is one dimension selected twice.
    proc = run_cli("stats", path, "--vars", "t2m", "--select", "expver=0005",
                   "--select", "valid_time=2024", "-o", out)
    assert proc.returncode == 1 and "'valid_time' is selected twice" in proc.stderr, proc.stderr


def test_large_reads_of_an_xarray_store_reuse_memory_and_keep_every_result(tmp_path):
    """Read outputs of 4 MiB or more come from memory earlier outputs gave back (the block cache):
    on a store as xarray writes it (a CF-packed int16 variable with _FillValue, a string
    coordinate), every read, raw or CF-decoded, equals xarray's, and no earlier result is written
    over by a later read."""
    rng = np.random.default_rng(11)
    shape = (10, 361, 720)  # stored int16: 5.2 MB a read, decoded float64: 21 MB
    values = 250 + 30 * rng.random(shape)
    values[rng.random(shape) < 0.01] = np.nan
    ds = xr.Dataset(
        {"t": (("time", "latitude", "longitude"), values)},
        coords={"time": np.arange(10) * np.timedelta64(6, "h") + np.datetime64("2020-01-01"),
                "latitude": np.linspace(90, -90, 361), "longitude": np.arange(0, 360, 0.5),
                "expver": ("time", np.array(["0001"] * 5 + ["0005"] * 5))})
    ds.t.encoding.update(dtype="int16", scale_factor=0.01, add_offset=250.0, _FillValue=-32767)
    path = tmp_path / "packed.zarr"
    ds.to_zarr(path, zarr_format=3, consolidated=False)
    want = xr.open_zarr(path, consolidated=False).t.values
    stored = zarr.open_array(path / "t")[...]

    raw = zarrstream.open_array(str(path / "t"))
    decoded = zarrstream.open_array(str(path / "t"), decode_cf=True)
    first_raw, first = raw.read(), decoded.read()
    results = [(first_raw, first)]
    for _ in range(3):
        results.append((raw.read(), decoded.read()))
        del results[-1]  # given back: the next read takes its memory
        results.append((raw.read(), decoded.read()))
    for got_raw, got in results:
        np.testing.assert_array_equal(got_raw, stored)
        assert_same(got, want)


def _drop_from_page_cache(path):
    for root, _, files in os.walk(path):
        for name in files:
            fd = os.open(os.path.join(root, name), os.O_RDONLY)
            try:
                os.fdatasync(fd)
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)


def test_an_xarray_store_read_from_the_disk_with_read_hints_reads_as_xarray(tmp_path):
    """A store as xarray writes it (CF-packed int16 with _FillValue, a string coordinate), dropped
    from the page cache before every read: the reads find files not in the page cache and hint
    the others to the kernel (the file store's read hints), and every value is xarray's."""
    rng = np.random.default_rng(5)
    values = 250 + 30 * rng.random((12, 91, 180))
    values[rng.random(values.shape) < 0.01] = np.nan
    ds = xr.Dataset(
        {"t": (("time", "latitude", "longitude"), values),
         "z": (("latitude", "longitude"), rng.random((91, 180)))},
        coords={"time": np.arange(12) * np.timedelta64(6, "h") + np.datetime64("2020-01-01"),
                "latitude": np.linspace(90, -90, 91), "longitude": np.arange(0, 360, 2.0),
                "expver": ("time", np.array(["0001"] * 6 + ["0005"] * 6))})
    ds.t.encoding.update(dtype="int16", scale_factor=0.01, add_offset=250.0, _FillValue=-32767,
                         chunks=(1, 91, 180))
    path = tmp_path / "packed.zarr"
    ds.to_zarr(path, zarr_format=3, consolidated=False)
    want = xr.open_zarr(path, consolidated=False).t.values
    _drop_from_page_cache(path)
    assert_same(zarrstream.open_array(str(path / "t"), decode_cf=True).read(), want)
    for epoch in range(2):
        _drop_from_page_cache(path)
        loader = zarrstream.Loader(str(path), ["t"], shuffle="none", batch_size=4)
        loader.set_epoch(epoch)
        got = np.concatenate([batch["input"].numpy()[:, 0] for batch in loader])
        assert_same(got, want[:len(got)].astype(np.float32))

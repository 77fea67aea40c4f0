"""`zarrstream stats`: per-channel statistics of zarr-python-written datasets against numpy.

Datasets are ERA5-like: a time coordinate encoded as xarray writes it (int64 "hours since 1900-01-01
00:00:00", calendar proleptic_gregorian), latitude descending 90 → -90, a level coordinate, 2-D and
3-D-on-level variables with NaNs, a float64 variable, and geopotential-like values near 1e5 with a
tiny variance (where a naive sum of squares loses every digit). numpy (np.nanmean / np.nanstd,
ddof=0, in float64) is the reference, at rtol 1e-10.
"""

from __future__ import annotations

import json
import os
import pty
import subprocess

import cftime
import numpy as np
import pytest
import zarr
from zarr.codecs import ZstdCodec
from conftest import CLI, run_cli

UNITS = "hours since 1900-01-01 00:00:00"
CALENDAR = "proleptic_gregorian"
NT, NL, NY, NX = 4 * 365 * 3 + 4, 3, 9, 12  # 6-hourly 1979-1981 (1096 days)
LEVELS = np.array([500, 850, 1000], dtype="int64")
LATS = np.linspace(90, -90, NY, dtype="float32")



def stats(*args) -> dict:
    proc = run_cli("stats", *args)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.fixture(scope="module")
def era5(tmp_path_factory):
    """(path, data) of an ERA5-like zarr v3 group; data maps variable names to numpy arrays."""
    path = tmp_path_factory.mktemp("stats") / "era5.zarr"
    rng = np.random.default_rng(42)
    g = zarr.open_group(str(path), mode="w", zarr_format=3)
    start = int(cftime.date2num(cftime.datetime(1979, 1, 1, calendar=CALENDAR), UNITS, calendar=CALENDAR))
    t = g.create_array("time", shape=(NT,), chunks=(1000,), dtype="int64", dimension_names=["time"],
                       attributes={"units": UNITS, "calendar": CALENDAR})
    t[...] = start + 6 * np.arange(NT, dtype="int64")
    lv = g.create_array("level", shape=(NL,), dtype="int64", dimension_names=["level"])
    lv[...] = LEVELS
    la = g.create_array("latitude", shape=(NY,), dtype="float32", dimension_names=["latitude"])
    la[...] = LATS
    lo = g.create_array("longitude", shape=(NX,), dtype="float32", dimension_names=["longitude"])
    lo[...] = np.arange(NX, dtype="float32") * 30

    data = {}
    t2m = (280 + 20 * rng.standard_normal((NT, NY, NX))).astype("float32")
    t2m[rng.random(t2m.shape) < 0.03] = np.nan
    data["2m_temperature"] = t2m
    temperature = (250 + 10 * rng.standard_normal((NT, NL, NY, NX)) + LEVELS[None, :, None, None] / 20).astype(
        "float32")
    temperature[rng.random(temperature.shape) < 0.01] = np.nan
    data["temperature"] = temperature
    # Geopotential: ~1e5 with a spread of 0.1 (condition number ~1e12 for a naive sum of squares).
    z = 1e5 + LEVELS[None, :, None, None] + 0.1 * rng.standard_normal((NT, NL, NY, NX))
    data["geopotential"] = z
    precip = np.abs(rng.standard_normal((NT, NY, NX))) * 1e-3  # float64
    data["total_precipitation"] = precip

    dims3 = ["time", "latitude", "longitude"]
    dims4 = ["time", "level", "latitude", "longitude"]
    for name, arr, chunks in [
        ("2m_temperature", t2m, (100, 5, 12)),  # edge chunks along time and latitude
        ("temperature", temperature, (50, 2, 9, 12)),  # a chunk holds two levels
        ("geopotential", z, (73, 3, 9, 7)),
        ("total_precipitation", precip, (365, 9, 12)),
    ]:
        a = g.create_array(name, shape=arr.shape, chunks=chunks, dtype=arr.dtype,
                           dimension_names=dims4 if arr.ndim == 4 else dims3, compressors=ZstdCodec(level=1))
        a[...] = arr
    zarr.consolidate_metadata(str(path))
    return path, data


def time_index(label: str) -> int:
    d = cftime.datetime.strptime(label, "%Y-%m-%dT%H:%M:%S", calendar=CALENDAR)
    return int((d - cftime.datetime(1979, 1, 1, calendar=CALENDAR)).total_seconds() // 21600)


def check_channel(got: dict, values: np.ndarray, rtol=1e-10):
    v = np.asarray(values, dtype="float64")
    assert got["count"] == int(np.count_nonzero(~np.isnan(v))), got["name"]
    assert got["nan_count"] == int(np.count_nonzero(np.isnan(v))), got["name"]
    np.testing.assert_allclose(got["mean"], np.nanmean(v), rtol=rtol, err_msg=got["name"])
    np.testing.assert_allclose(got["std"], np.nanstd(v), rtol=rtol, err_msg=got["name"])
    assert got["min"] == np.nanmin(v) and got["max"] == np.nanmax(v), got["name"]


def test_stats_over_a_time_selection_match_numpy(era5, tmp_path):
    path, data = era5
    out_file = tmp_path / "stats.json"
    proc = run_cli("stats", path, "--vars", "2m_temperature,temperature@850,500", "--vars", "total_precipitation",
                   "--select", "time=1979-01-01:1980-12-31", "--threads", "3", "-o", out_file)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == ""
    out = json.loads(out_file.read_text())
    assert out["format"] == "zarrstream.stats/1"
    assert out["source"].endswith("era5.zarr")
    # The resolved, actual first and last labels (not the bounds as written).
    assert out["select"] == {"time": ["1979-01-01T00:00:00", "1980-12-31T18:00:00"]}
    t1 = time_index("1980-12-31T18:00:00") + 1
    names = [c["name"] for c in out["channels"]]
    assert names == ["2m_temperature", "temperature@850", "temperature@500", "total_precipitation"]
    assert [c["variable"] for c in out["channels"]] == ["2m_temperature", "temperature", "temperature",
                                                        "total_precipitation"]
    assert [c["level"] for c in out["channels"]] == [None, 850, 500, None]
    check_channel(out["channels"][0], data["2m_temperature"][:t1])
    check_channel(out["channels"][1], data["temperature"][:t1, 1])
    check_channel(out["channels"][2], data["temperature"][:t1, 0])
    check_channel(out["channels"][3], data["total_precipitation"][:t1])
    assert out["channels"][0]["nan_count"] > 0


def test_stats_never_leak_outside_the_selection(era5):
    path, data = era5
    # Validation year only, and a latitude band on the descending axis.
    # A single date names its whole period, as in xarray: "1981" is the year.
    out = stats(path, "--vars", "temperature@1000", "--select", "time=1981,latitude=45:-22.5")
    t0 = time_index("1981-01-01T00:00:00")
    band = np.nonzero((LATS <= 45) & (LATS >= -22.5))[0]
    assert out["select"] == {"time": ["1981-01-01T00:00:00", "1981-12-31T18:00:00"],
                             "latitude": [45.0, -22.5]}
    check_channel(out["channels"][0], data["temperature"][t0:, 2, band[0]:band[-1] + 1])


def test_ill_conditioned_values_keep_their_digits(era5):
    path, data = era5
    out = stats(path, "--vars", "geopotential@*", "--threads", "2")
    assert [c["name"] for c in out["channels"]] == ["geopotential@500", "geopotential@850", "geopotential@1000"]
    for k, channel in enumerate(out["channels"]):
        z = data["geopotential"][:, k]
        check_channel(channel, z)
        # What one pass of sum and sum of squares gives (the method this replaces): far off.
        n = z.size
        naive = np.sqrt(max(0.0, float(np.sum(z * z)) / n - (float(np.sum(z)) / n) ** 2))
        assert abs(naive - np.std(z)) > 1e-6 * np.std(z)


def test_default_is_every_time_dependent_variable_and_threads_do_not_change_results(era5):
    path, data = era5
    one = stats(path, "--threads", "1")
    many = stats(path, "--threads", "4")
    assert one == many
    names = [c["name"] for c in one["channels"]]
    assert names == ["2m_temperature", "geopotential@500", "geopotential@850", "geopotential@1000",
                     "temperature@500", "temperature@850", "temperature@1000", "total_precipitation"]
    assert one["select"] == {}
    check_channel(one["channels"][6], data["temperature"][:, 2])


def test_default_channels_are_the_loaders_on_a_synth_store_with_static_fields(tmp_path):
    import zarrstream

    store = tmp_path / "era5.zarr"
    assert run_cli("synth", store, "--preset", "era5-small", "--steps", "4").returncode == 0
    # The README's command, verbatim but for the paths.
    out = tmp_path / "stats.json"
    proc = run_cli("stats", store, "--select", "time=1979:2015", "-o", out)
    assert proc.returncode == 0, proc.stderr
    names = [c["name"] for c in json.loads(out.read_text())["channels"]]
    assert names == zarrstream.Loader(store, batch_size=1).channels
    assert "land_sea_mask" not in names
    # Named, a static field is one more channel, whole whatever the time selection.
    named = stats(store, "--vars", "2m_temperature,land_sea_mask", "--select", "time=1979:2015")
    lsm = zarr.open_group(str(store), mode="r")["land_sea_mask"][...].astype("float64")
    assert [c["name"] for c in named["channels"]] == ["2m_temperature", "land_sea_mask"]
    assert named["channels"][1]["count"] == lsm.size
    np.testing.assert_allclose(named["channels"][1]["mean"], lsm.mean(), rtol=1e-12)


def test_v2_dataset_and_stacked_array(tmp_path):
    rng = np.random.default_rng(3)
    nt = 40
    # v2 (dimension names in _ARRAY_DIMENSIONS) with a stacked (time, channel, lat, lon) array.
    g = zarr.open_group(str(tmp_path / "stacked.zarr"), mode="w", zarr_format=2)
    t = g.create_array("time", shape=(nt,), dtype="int64",
                       attributes={"units": "days since 2000-01-01", "calendar": "noleap",
                                   "_ARRAY_DIMENSIONS": ["time"]})
    t[...] = np.arange(nt)
    names = ["2m_temperature", "temperature@500", "temperature@850"]
    x = rng.standard_normal((nt, 3, 4, 5)) * np.array([1, 10, 100])[None, :, None, None]
    s = g.create_array("fields", shape=x.shape, chunks=(7, 2, 4, 5), dtype="float64",
                       attributes={"channel_names": names,
                                   "_ARRAY_DIMENSIONS": ["time", "channel", "lat", "lon"]})
    s[...] = x
    out = stats(tmp_path / "stacked.zarr", "--vars", "temperature@850,2m_temperature",
                "--select", "time=2000-01-05:2000-02")
    assert [c["name"] for c in out["channels"]] == ["temperature@850", "2m_temperature"]
    assert out["channels"][0]["variable"] == "temperature" and out["channels"][0]["level"] == 850
    assert out["select"]["time"] == ["2000-01-05T00:00:00", "2000-02-09T00:00:00"]
    check_channel(out["channels"][0], x[4:, 2])
    check_channel(out["channels"][1], x[4:, 0])
    everything = stats(tmp_path / "stacked.zarr")
    assert [c["name"] for c in everything["channels"]] == names


def test_errors_are_clear(era5, tmp_path):
    path, _ = era5
    cases = [
        (["--vars", "2m_temprature"], ["'2m_temprature'", "2m_temperature, geopotential"]),
        (["--vars", "temperature@700"], ["'700'", "coordinate 'level'", "500, 850, 1000"]),
        (["--vars", "2m_temperature@500"], ["no level dimension"]),
        (["--vars", "temperature@abc"], ["a level must be a number"]),
        (["--vars", "2m_temperature", "--select", "time=1979-13-01:1980"], ["'1979-13-01'", "month"]),
        (["--vars", "2m_temperature", "--select", "time=1979-01-01:tomorrow"], ["'tomorrow'"]),
        (["--vars", "2m_temperature", "--select", "time=1900:1950"],
         ["selects no label", "1979-01-01T00:00:00 to 1981-12-31T18:00:00"]),
        (["--vars", "2m_temperature", "--select", "time=1979-01-01T01:1979-01-01T05"], ["selects no label"]),
        (["--vars", "2m_temperature", "--select", "level=500"], ["name@500,850"]),
        (["--vars", "2m_temperature,temperature@500", "--select", "latitude=0:45"], ["latitude=45:0"]),
    ]
    for args, parts in cases:
        proc = run_cli("stats", path, *args)
        assert proc.returncode == 1, args
        assert proc.stderr.startswith("zarrstream stats: "), proc.stderr
        for part in parts:
            assert part in proc.stderr, (args, part, proc.stderr)
    proc = run_cli("stats", tmp_path / "missing.zarr")
    assert proc.returncode == 1 and "missing.zarr" in proc.stderr


def test_all_nan_channel_is_null_with_a_warning(tmp_path):
    g = zarr.open_group(str(tmp_path / "nan.zarr"), mode="w", zarr_format=3)
    a = g.create_array("x", shape=(4, 3), dtype="float32", dimension_names=["time", "y"], fill_value=np.nan)
    a[...] = np.nan
    proc = run_cli("stats", tmp_path / "nan.zarr")
    assert proc.returncode == 0, proc.stderr
    c = json.loads(proc.stdout)["channels"][0]
    assert (c["count"], c["nan_count"], c["mean"], c["std"], c["min"], c["max"]) == (0, 12, None, None, None, None)
    assert "warning" in proc.stderr and "'x'" in proc.stderr


def test_progress_goes_to_a_terminal(era5, tmp_path):
    path, _ = era5
    master, slave = pty.openpty()
    try:
        proc = subprocess.run([str(CLI), "stats", str(path), "--vars", "2m_temperature", "-o",
                               str(tmp_path / "s.json")], stderr=slave, stdout=subprocess.PIPE, timeout=120)
        os.close(slave)
        slave = -1
        chunks = []
        while True:
            try:
                chunk = os.read(master, 4096)
            except OSError:
                break
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        if slave >= 0:
            os.close(slave)
        os.close(master)
    assert proc.returncode == 0
    text = b"".join(chunks).decode()
    assert "stats [" in text and "100.0%" in text, text

"""`zarrstream stats --tendencies`: statistics of x[t+N] - x[t] against numpy on stores xarray wrote
(tests/era5_fixtures.py).

The reference is xarray's decoded dataset (packed int16 unpacked, fill values NaN) differenced in
float64 over the pairs of selected steps N apart; a NaN at either end is a NaN tendency. Parts
(plan_stats) must give what one run gives, pairs across a part's edge counted once.
"""

from __future__ import annotations

import json
import warnings

import numpy as np
import pandas as pd
import pytest
import xarray as xr

import era5_fixtures
import zarrstream
from conftest import run_cli
from zarrstream.errors import ZarrstreamError


def open_xarray(path) -> xr.Dataset:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return xr.open_zarr(path, consolidated=False).load()


def channel_values(ds: xr.Dataset, channel: str, level_dim: str = "pressure_level") -> np.ndarray:
    name, _, level = channel.partition("@")
    da = ds[name]
    if level:
        da = da.sel({level_dim: float(level)})
    return da.values.astype("float64")


def tendencies(values: np.ndarray, selected: np.ndarray, n: int) -> np.ndarray:
    """x[t+n] - x[t] for every t with t and t+n among the `selected` time indices."""
    chosen = set(selected.tolist())
    starts = np.array([t for t in selected if t + n in chosen], dtype="int64")
    return values[starts + n] - values[starts]


def check(got: dict, diffs: np.ndarray, name: str, rtol=1e-12):
    finite = diffs[~np.isnan(diffs)]
    assert got["nan_count"] == int(np.isnan(diffs).sum()), name
    assert got["count"] == finite.size, name
    np.testing.assert_allclose(got["mean"], finite.mean(), rtol=rtol, atol=1e-12, err_msg=name)
    np.testing.assert_allclose(got["std"], finite.std(), rtol=rtol, err_msg=name)
    np.testing.assert_allclose(got["min"], finite.min(), rtol=rtol, err_msg=name)
    np.testing.assert_allclose(got["max"], finite.max(), rtol=rtol, err_msg=name)


@pytest.fixture(scope="module")
def cds(tmp_path_factory):
    return era5_fixtures.cds_era5(tmp_path_factory.mktemp("cds"), with_expver=False)


@pytest.fixture(scope="module")
def surface(tmp_path_factory):
    """40 6-hourly steps chunked by 7 along time (pairs cross chunks), with a static field."""
    time = pd.date_range("2021-01-01", periods=40, freq="6h")
    lat, lon = np.linspace(60, -60, 5), np.arange(8) * 45.0
    path, ds = era5_fixtures.surface_and_static(
        tmp_path_factory.mktemp("surface") / "surface.zarr", seed=3, time=time, latitude=lat,
        longitude=lon, chunks={"2m_temperature": (7, 5, 4), "land_sea_mask": (5, 8)})
    return path, ds


def test_tendencies_of_cf_decoded_values_match_numpy(cds):
    """Packed int16 with fill values (NaN at either end counts as a NaN tendency), a uint8 fraction
    and a float32 field with its own fill value; level channels; N in steps and as a duration."""
    ds = open_xarray(cds)
    result = zarrstream.stats(cds, vars="t@850,z@500,t2m,lsm,sst", tendencies=[1, "18h"])
    assert result["tendency_steps"] == [1, 3]
    assert result["time_step_seconds"] == 6 * 3600
    selected = np.arange(era5_fixtures.NT)
    for c in result["channels"]:
        values = channel_values(ds, c["name"])
        assert set(c["tendencies"]) == {"1", "3"}
        for n in (1, 3):
            diffs = tendencies(values, selected, n)
            check(c["tendencies"][str(n)], diffs, f"{c['name']} n={n}")
    # Missing cells at either end make NaN tendencies (t@850 has them).
    assert result["channels"][0]["tendencies"]["1"]["nan_count"] > 0
    # The values' own statistics are unchanged by asking for tendencies.
    plain = zarrstream.stats(cds, vars="t@850,z@500,t2m,lsm,sst")
    assert "tendency_steps" not in plain and "time_step_seconds" not in plain
    for a, b in zip(plain["channels"], result["channels"]):
        assert "tendencies" not in a
        assert {k: v for k, v in b.items() if k != "tendencies"} == a


def test_tendencies_over_a_selection_with_gaps_and_the_cli(surface, tmp_path):
    """Pairs need both steps selected: a selection of separate labels leaves out pairs across its
    gaps; static fields have no tendencies."""
    path, ds = surface
    labels = [str(t)[:19] for t in ds.time.values]
    chosen = list(range(0, 12)) + list(range(15, 31)) + [33, 35, 36]
    out = tmp_path / "stats.json"
    proc = run_cli("stats", path, "--vars", "2m_temperature,land_sea_mask", "--select",
                   "time=" + ",".join(labels[i] for i in chosen), "--tendencies", "1,2",
                   "--tendencies", "18h,4", "--threads", "2", "-o", out)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(out.read_text())
    assert result["tendency_steps"] == [1, 2, 3, 4]
    # Evenly spaced from the first selected time to the last: the store's step.
    assert result["time_step_seconds"] == 21600
    t2m, lsm = result["channels"]
    assert "tendencies" not in lsm
    values = ds["2m_temperature"].values.astype("float64")
    for n in (1, 2, 3, 4):
        check(t2m["tendencies"][str(n)], tendencies(values, np.array(chosen), n), f"n={n}")


def test_tendencies_with_nan_values(tmp_path):
    time = pd.date_range("2021-01-01", periods=20, freq="1h")
    lat, lon = np.linspace(10, -10, 3), np.arange(4) * 90.0
    path, _ = era5_fixtures.surface_and_static(
        tmp_path / "nan.zarr", seed=5, time=time, latitude=lat, longitude=lon,
        chunks={"2m_temperature": (3, 3, 4), "land_sea_mask": (3, 4)})
    import zarr

    a = zarr.open_array(path / "2m_temperature", mode="r+")
    values = a[...].astype("float32")
    values[4, 1, :] = np.nan
    values[11, :, 2] = np.nan
    a[...] = values
    result = zarrstream.stats(path, tendencies=3, select="time=2021-01-01T02:00:2021-01-01T17:00")
    (c,) = result["channels"]
    selected = np.arange(2, 18)
    diffs = tendencies(values.astype("float64"), selected, 3)
    assert np.isnan(diffs).sum() > 0
    check(c["tendencies"]["3"], diffs, "n=3")


@pytest.mark.parametrize("parts", [2, 3, 7, 25])
def test_parts_give_what_one_run_gives(surface, parts):
    """Cut anywhere along time, the pairs whose first step ends a part are counted once."""
    path, _ = surface
    options = dict(vars=["2m_temperature", "land_sea_mask"], tendencies=[1, 5, "1d"],
                   select="time=2021-01-02:2021-01-09")
    whole = zarrstream.stats(path, **options)
    plan = zarrstream.plan_stats(path, parts=parts, **options)
    merged = plan.finalise([p.run() for p in reversed(plan.parts)])
    assert merged["tendency_steps"] == whole["tendency_steps"] == [1, 5, 4]
    for a, b in zip(whole["channels"], merged["channels"]):
        assert a.get("tendencies", {}).keys() == b.get("tendencies", {}).keys()
        for key, t in a.get("tendencies", {}).items():
            u = b["tendencies"][key]
            assert (t["count"], t["nan_count"], t["min"], t["max"]) == (
                u["count"], u["nan_count"], u["min"], u["max"]), key
            np.testing.assert_allclose(u["mean"], t["mean"], rtol=1e-12, atol=1e-13)
            np.testing.assert_allclose(u["std"], t["std"], rtol=1e-12)


def test_bad_tendencies_are_clear_errors(surface, tmp_path):
    path, _ = surface
    select = "time=2021-01-01:2021-01-02"  # 8 steps
    cases = [
        (0, "tendency '0': expected a positive number of time steps"),
        (8, r"tendency '8' \(8 time steps\): the selection of .* has 8 step\(s\) along 'time'"),
        ("2d", r"tendency '2d' \(8 time steps\)"),
        ("5h", r"tendency '5h' \(18000 s\) is not a whole number of the time steps"),
        ("6x", "tendency '6x': expected a whole number of s, min, h or d"),
        ([1, "6h"], "1 time steps are asked for twice"),
        (1.5, "tendencies: expected time steps"),
    ]
    for tendency, message in cases:
        with pytest.raises(ZarrstreamError, match=message):
            zarrstream.stats(path, vars="2m_temperature", select=select, tendencies=tendency)
    # Steps that exist but no selected pair lies that far apart.
    labels = "time=2021-01-01T00:00:00,2021-01-01T06:00:00,2021-01-02T00:00:00"
    with pytest.raises(ZarrstreamError, match="no two selected steps along 'time' .* are 2 time"):
        zarrstream.stats(path, vars="2m_temperature", select=labels, tendencies=2)
    # Only static fields: no time dimension.
    with pytest.raises(ZarrstreamError, match="no time dimension"):
        zarrstream.stats(path, vars="land_sea_mask", tendencies=1)
    proc = run_cli("stats", path, "--vars", "2m_temperature", "--select", select,
                   "--tendencies", "9")
    assert proc.returncode == 1
    assert "tendency '9' (9 time steps)" in proc.stderr, proc.stderr


def test_tendencies_across_concatenated_stores(tmp_path):
    """Two stores one after the other in time, cut inside a time chunk, each packing z with its
    own scale_factor: the pairs spanning the boundary count as in one store, each end decoded as
    its own store decodes it."""
    nt, split = 30, 13
    rng = np.random.default_rng(8)
    time = pd.date_range("2020-01-01", periods=nt, freq="6h")
    t2m = (280 + 5 * rng.standard_normal((nt, 4, 6))).astype("float32")
    t2m[12, 1, :] = np.nan
    z = 5e4 + 100 * rng.standard_normal((nt, 4, 6))
    z[14, :, 2] = np.nan
    ds = xr.Dataset({"t2m": (("time", "latitude", "longitude"), t2m),
                     "z": (("time", "latitude", "longitude"), z)},
                    coords={"time": time, "latitude": np.linspace(40, -40, 4),
                            "longitude": np.arange(6) * 60.0})
    paths = []
    for name, part, scale in (("a", slice(0, split), 0.1), ("b", slice(split, nt), 0.05)):
        path = tmp_path / f"{name}.zarr"
        ds.isel(time=part).to_zarr(path, zarr_format=3, consolidated=False, encoding={
            "t2m": {"chunks": (4, 4, 3)},
            "z": {"chunks": (4, 2, 6), "dtype": "int16", "scale_factor": scale,
                  "add_offset": 5e4, "_FillValue": -32767}})
        paths.append(str(path))
    form = json.dumps({"concat": paths, "dim": "time"})
    result = zarrstream.stats(form, vars="t2m,z", tendencies=[1, 3], threads=2)
    decoded = xr.concat([open_xarray(p) for p in paths], dim="time")
    selected = np.arange(nt)
    for c in result["channels"]:
        values = decoded[c["name"]].values.astype("float64")
        for n in (1, 3):
            check(c["tendencies"][str(n)], tendencies(values, selected, n), f"{c['name']} n={n}")

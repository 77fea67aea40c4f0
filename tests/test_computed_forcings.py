"""Computed forcings (anemoi-datasets' names: cos_latitude, ..., cos_solar_zenith_angle) against
references evaluated independently from what xarray decodes of a store xarray wrote: the published
formulas (earthkit-data's forcings source) in numpy on the decoded valid times and coordinates, and
for the solar zenith angle earthkit-meteo's own implementation. Whole grids and patches, label
selections, a frequency, two ranks, resumption mid-epoch, interleaving with stored forcings,
bfloat16 and NaN masks, and the errors. The GPU test (marked `gpu`) compares GPU batches with the
CPU loader's: stored channels bit for bit, computed forcings within float32 rounding.
"""

from __future__ import annotations

import datetime
from pathlib import Path

import numpy as np
import pytest

xr = pytest.importorskip("xarray")
pd = pytest.importorskip("pandas")
torch = pytest.importorskip("torch")

import era5_fixtures  # noqa: E402
import zarrstream  # noqa: E402

NT, NY, NX = 40, 5, 8
COMPUTED = ["cos_latitude", "sin_latitude", "cos_longitude", "sin_longitude", "cos_julian_day",
            "sin_julian_day", "cos_local_time", "sin_local_time", "cos_solar_zenith_angle",
            "insolation"]
# The loader computes in float64 and rounds once to float32, as the references are rounded: they
# differ by at most one float32 step of values in [-1, 1] (float64 libm results may differ in the
# last bit, which moves a rounding by one step at most).
ATOL = 2.0**-23


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> tuple[Path, "xr.Dataset"]:
    return era5_fixtures.surface_and_static(
        tmp_path_factory.mktemp("forcings") / "forcings.zarr",
        seed=11,
        # Every 90 minutes across a leap year's end: half hours, a new year, a new day.
        time=pd.date_range("2020-12-30T12:00", periods=NT, freq="90min"),
        latitude=np.linspace(80, -80, NY).astype("float32"),
        longitude=np.linspace(-180, 135, NX).astype("float64"),
        chunks={"2m_temperature": (4, 5, 4), "land_sea_mask": (5, 4)},
    )


def numpy_forcing(name: str, time: np.datetime64, lat: np.ndarray, lon: np.ndarray) -> np.ndarray:
    """Forcing `name` at `time` on the grid lat × lon (degrees), by earthkit-data's definitions."""
    lat2, lon2 = np.meshgrid(lat.astype("float64"), lon.astype("float64"), indexing="ij")
    t = time.astype("datetime64[s]")
    julian_day = (t - t.astype("datetime64[Y]")) / np.timedelta64(1, "D")
    hours = (t - t.astype("datetime64[D]")) / np.timedelta64(1, "h")
    local_time = (lon2 / 360.0 * 24.0 + hours) % 24
    day_angle = julian_day / 365.25 * np.pi * 2
    if name in ("cos_solar_zenith_angle", "insolation"):
        a = day_angle
        declination = np.deg2rad(0.396372 - 22.91327 * np.cos(a) + 4.025430 * np.sin(a)
                                 - 0.387205 * np.cos(2 * a) + 0.051967 * np.sin(2 * a)
                                 - 0.154527 * np.cos(3 * a) + 0.084798 * np.sin(3 * a))
        correction = (0.004297 + 0.107029 * np.cos(a) - 1.837877 * np.sin(a)
                      - 0.837378 * np.cos(2 * a) - 2.340475 * np.sin(2 * a))
        hour_angle = np.deg2rad((hours - 12) * 15 + lon2 + correction)
        phi = np.deg2rad(lat2)
        value = (np.sin(declination) * np.sin(phi)
                 + np.cos(declination) * np.cos(phi) * np.cos(hour_angle))
        return np.clip(value, 0.0, None)
    return {
        "cos_latitude": np.cos(np.deg2rad(lat2)),
        "sin_latitude": np.sin(np.deg2rad(lat2)),
        "cos_longitude": np.cos(np.deg2rad(lon2)),
        "sin_longitude": np.sin(np.deg2rad(lon2)),
        "cos_julian_day": np.full_like(lat2, np.cos(day_angle)),
        "sin_julian_day": np.full_like(lat2, np.sin(day_angle)),
        "cos_local_time": np.cos(local_time / 24 * np.pi * 2),
        "sin_local_time": np.sin(local_time / 24 * np.pi * 2),
    }[name]


def all_batches(loader):
    return [{k: v.clone() for k, v in b.items()} for b in loader]


def check_sample(ds, got, names, t0, window, step=1, ys=slice(None), xs=slice(None)):
    """`got` [window × len(names), y, x] against the stored values and numpy's forcings."""
    lat, lon = ds["latitude"].values[ys], ds["longitude"].values[xs]
    for s in range(window):
        t = t0 + s * step
        for c, name in enumerate(names):
            value = got[s * len(names) + c]
            if name in COMPUTED:
                expected = numpy_forcing(name, ds["time"].values[t], lat, lon).astype("float32")
                np.testing.assert_allclose(value, expected, rtol=0, atol=ATOL, err_msg=name)
            elif name == "land_sea_mask":
                np.testing.assert_array_equal(value, ds[name].values[ys, xs])
            else:
                np.testing.assert_array_equal(value, ds[name].values[t][ys, xs])


def test_every_computed_forcing_equals_numpy(store):
    path, ds = store
    loader = zarrstream.Loader(path, ["2m_temperature"], forcings=COMPUTED, sample={"time": 2},
                               stride={"time": 1}, target_offset={"time": 1}, batch_size=5,
                               shuffle="exact", seed=4)
    names = ["2m_temperature", *COMPUTED]
    assert loader.channels == names
    assert loader.target_channels == ["2m_temperature"]
    seen = []
    for b in loader:
        assert b["input"].shape[1:] == (2 * len(names), NY, NX)
        for i, (t0,) in enumerate(b["origin"].tolist()):
            seen.append(t0)
            check_sample(ds, b["input"][i].numpy(), names, t0, 2)
            np.testing.assert_array_equal(b["target"][i, 0].numpy(),
                                          ds["2m_temperature"].values[t0 + 2])
    assert sorted(seen) == list(range(NT - 2))


def test_solar_zenith_angle_equals_earthkit_meteo(store):
    solar = pytest.importorskip("earthkit.meteo.solar.array")
    path, ds = store
    loader = zarrstream.Loader(path, ["2m_temperature"], forcings=["cos_solar_zenith_angle"],
                               batch_size=8, shuffle="none")
    lat2, lon2 = np.meshgrid(ds["latitude"].values.astype("float64"),
                             ds["longitude"].values.astype("float64"), indexing="ij")
    daylight = 0
    for b in loader:
        for i, (t0,) in enumerate(b["origin"].tolist()):
            when = pd.Timestamp(ds["time"].values[t0]).to_pydatetime()
            assert isinstance(when, datetime.datetime)
            expected = solar.cos_solar_zenith_angle(when, lat2, lon2).astype("float32")
            np.testing.assert_allclose(b["input"][i, 1].numpy(), expected, rtol=0, atol=ATOL)
            daylight += int((expected > 0).sum())
    assert 0 < daylight < NT * NY * NX  # both day and night were compared


def test_computed_and_stored_forcings_keep_their_order(store):
    path, ds = store
    names = ["2m_temperature", "sin_local_time", "land_sea_mask", "cos_julian_day"]
    loader = zarrstream.Loader(path, ["2m_temperature"], forcings=names[1:], sample={"time": 3},
                               batch_size=4, shuffle="none", dtype="float32", nan=0.0)
    assert loader.channels == names
    for b in loader:
        assert not b["input_mask"].any()
        for i, (t0,) in enumerate(b["origin"].tolist()):
            check_sample(ds, b["input"][i].numpy(), names, t0, 3)


def test_patches_selection_and_frequency(store):
    path, ds = store
    # latitude 40..-40 is rows 1..3; longitude -135..90 columns 1..6; 3h is every 2nd step.
    names = ["2m_temperature", "cos_latitude", "sin_longitude", "cos_local_time",
             "cos_solar_zenith_angle"]
    loader = zarrstream.Loader(path, ["2m_temperature"], forcings=names[1:],
                               select={"latitude": (40, -40), "longitude": (-135, 90),
                                       "time": ("2020-12-31T03:00", "2021-01-01T12:00")},
                               frequency="3h", sample={"time": 2, "latitude": 2, "longitude": 3},
                               stride={"time": 1, "latitude": 1, "longitude": 2},
                               batch_size=6, shuffle="exact", seed=5)
    first = int(np.flatnonzero(ds["time"].values == np.datetime64("2020-12-31T03:00"))[0])
    n = 0
    for b in loader:
        for i, (t0, y0, x0) in enumerate(b["origin"].tolist()):
            assert (t0 - first) % 2 == 0 and 1 <= y0 <= 2 and x0 in (1, 3)
            check_sample(ds, b["input"][i].numpy(), names, t0, 2, step=2,
                         ys=slice(y0, y0 + 2), xs=slice(x0, x0 + 3))
            n += 1
    # 2020-12-31T03:00 .. 2021-01-01T12:00 every 3 h is 12 steps: 11 windows of 2; 2 × 2 patches.
    assert n == 11 * 2 * 2


def test_two_ranks_and_resumption(store):
    path, ds = store
    names = ["2m_temperature", "cos_julian_day", "cos_solar_zenith_angle"]
    kwargs = dict(variables=["2m_temperature"], forcings=names[1:], sample={"time": 2},
                  stride={"time": 1}, target_offset={"time": 1}, batch_size=3, shuffle="exact",
                  seed=9, world_size=2)
    seen = []
    for rank in range(2):
        batches = all_batches(zarrstream.Loader(path, rank=rank, **kwargs))
        for b in batches:
            for i, (t0,) in enumerate(b["origin"].tolist()):
                seen.append(t0)
                check_sample(ds, b["input"][i].numpy(), names, t0, 2)
        first = zarrstream.Loader(path, rank=rank, **kwargs)
        it = iter(first)
        for _ in range(2):
            next(it)
        resumed = zarrstream.Loader(path, rank=rank, **kwargs)
        resumed.load_state_dict(first.state_dict())
        rest = all_batches(resumed)
        assert len(rest) == len(batches) - 2
        for a, b in zip(rest, batches[2:]):
            for key in ("input", "target", "origin"):
                assert torch.equal(a[key], b[key]), key
    assert sorted(seen) == list(range(NT - 2))  # 38 samples: 19 per rank, no padding


def test_bfloat16_rounds_the_float32_values(store):
    path, _ = store
    kwargs = dict(variables=["2m_temperature"], forcings=COMPUTED, batch_size=8, shuffle="none")
    wide = all_batches(zarrstream.Loader(path, **kwargs))
    narrow = all_batches(zarrstream.Loader(path, dtype="bfloat16", **kwargs))
    for a, b in zip(wide, narrow):
        assert torch.equal(a["input"].to(torch.bfloat16), b["input"])


def test_unknown_forcing_names_variables_and_computed_forcings(store):
    path, _ = store
    with pytest.raises(zarrstream.NotFoundError,
                       match=r"forcing 'cos_lattitude' is neither a variable .*2m_temperature.*"
                             r"land_sea_mask.* nor a computed forcing \(cos_latitude, .*insolation"):
        zarrstream.Loader(path, ["2m_temperature"], forcings=["cos_lattitude"])
    with pytest.raises(zarrstream.ZarrstreamError, match="'cos_latitude' is named twice"):
        zarrstream.Loader(path, ["2m_temperature"], forcings=["cos_latitude", "cos_latitude"])


def test_forcing_without_its_coordinate_is_a_config_error(tmp_path):
    ds = xr.Dataset({"field": (("time", "y", "x"), np.zeros((4, 2, 3), "float32"))},
                    coords={"time": pd.date_range("2000-01-01", periods=4, freq="h")})
    path = tmp_path / "plain.zarr"
    ds.to_zarr(path, zarr_format=3, consolidated=False)
    with pytest.raises(zarrstream.ConfigError, match="'cos_latitude' needs a 'latitude' dimension"):
        zarrstream.Loader(path, ["field"], forcings=["cos_latitude"])
    # The julian day needs only the time.
    loader = zarrstream.Loader(path, ["field"], forcings=["sin_julian_day"], batch_size=4,
                               shuffle="none")
    b = next(iter(loader))
    hours = np.arange(4) / 24.0
    np.testing.assert_allclose(b["input"][:, 1].numpy(),
                               np.broadcast_to(np.sin(hours / 365.25 * np.pi * 2)[:, None, None],
                                               (4, 2, 3)).astype("float32"), rtol=0, atol=ATOL)


def test_bench_takes_computed_forcings(store):
    from conftest import run_cli

    path, _ = store
    r = run_cli("bench", path, "--variables", "2m_temperature", "--forcings",
                "cos_latitude,cos_solar_zenith_angle", "--steps", "2", "--batch-size", "2")
    assert r.returncode == 0, r.stderr


@pytest.mark.gpu
def test_gpu_batches_equal_cpu_batches_with_computed_forcings(store):
    path, _ = store
    for dtype in ("float32", "bfloat16"):
        kwargs = dict(variables=["2m_temperature"], forcings=[*COMPUTED[:5], "land_sea_mask",
                                                              *COMPUTED[5:]],
                      sample={"time": 2, "latitude": 3, "longitude": 4},
                      stride={"time": 1, "latitude": 1, "longitude": 2}, target_offset={"time": 1},
                      frequency="3h", batch_size=6, shuffle="exact", seed=2, nan=0.0, dtype=dtype)
        cpu_loader = zarrstream.Loader(path, **kwargs)
        computed = [c for c, name in enumerate(cpu_loader.channels * 2) if name in COMPUTED]
        cpu = all_batches(cpu_loader)
        gpu_loader = zarrstream.Loader(path, device="cuda", gpu_batches=True, **kwargs)
        gpu = [{k: v.cpu() for k, v in b.items()} for b in gpu_loader]
        assert len(cpu) == len(gpu)
        for a, b in zip(cpu, gpu):
            for key in a:
                if key != "input":
                    assert torch.equal(a[key], b[key]), key
            stored = [c for c in range(a["input"].shape[1]) if c not in computed]
            assert torch.equal(a["input"][:, stored], b["input"][:, stored])
            # float32: one step of rounding at most; bfloat16: its rounding of those.
            step = ATOL if dtype == "float32" else 2.0**-8
            np.testing.assert_allclose(b["input"][:, computed].float().numpy(),
                                       a["input"][:, computed].float().numpy(), rtol=0, atol=step)

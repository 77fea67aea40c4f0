"""Static fields (no time dimension: land-sea mask, orography, a climatology with levels) as loader
channels, broadcast over every time step of a window, against numpy broadcasting of the values
xarray reads from a store xarray wrote (`Dataset.to_zarr`, not zarrstream's writer): whole fields
and patches, label selection on the spatial dimensions, two ranks, resumption mid-epoch, forcings,
`zarrstream stats` defaults and normalisation. The GPU test (marked `gpu`) compares GPU batches
with the CPU loader's bit for bit.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

xr = pytest.importorskip("xarray")
pd = pytest.importorskip("pandas")
torch = pytest.importorskip("torch")

import era5_fixtures  # noqa: E402
import zarrstream  # noqa: E402
from conftest import run_cli  # noqa: E402

NT, NY, NX = 12, 6, 8


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> tuple[Path, "xr.Dataset"]:
    return era5_fixtures.surface_and_static(
        tmp_path_factory.mktemp("static") / "static.zarr",
        seed=25,
        time=pd.date_range("2000-01-01", periods=NT, freq="6h"),
        latitude=np.linspace(50, -50, NY).astype("float32"),
        longitude=(np.arange(NX) * 45.0).astype("float32"),
        levels=np.array([500, 850], dtype="int32"),
        chunks={"2m_temperature": (1, 3, 4), "land_sea_mask": (3, 4), "soil_climatology": (1, 3, 4)},
    )


def expected_input(ds, variables_at_step, t0: int, window: int, ys=slice(None), xs=slice(None)):
    """numpy's broadcast of each channel over the window's steps, time-major."""
    fields = []
    for step in range(t0, t0 + window):
        for channel in variables_at_step(ds, step):
            fields.append(np.broadcast_to(channel, (NY, NX))[ys, xs])
    return np.stack(fields)


def static_channels(ds, step):
    return [ds["2m_temperature"].values[step], ds["land_sea_mask"].values,
            ds["soil_climatology"].values[0], ds["soil_climatology"].values[1]]


def all_batches(loader):
    return [{k: v.clone() for k, v in b.items()} for b in loader]


def check_batches(ds, batches, window, lead):
    seen = []
    for b in batches:
        for i, origin in enumerate(b["origin"].tolist()):
            t0 = origin[0]
            seen.append(t0)
            np.testing.assert_array_equal(b["input"][i].numpy(),
                                          expected_input(ds, static_channels, t0, window))
            np.testing.assert_array_equal(b["target"][i].numpy(),
                                          ds["2m_temperature"].values[t0 + window - 1 + lead][None])
    return seen


def test_static_fields_broadcast_over_the_window(store):
    path, ds = store
    loader = zarrstream.Loader(path, ["2m_temperature", "land_sea_mask", "soil_climatology"],
                               sample={"time": 3}, stride={"time": 1}, target_offset={"time": 1},
                               batch_size=4, shuffle="exact", seed=3)
    assert loader.channels == ["2m_temperature", "land_sea_mask", "soil_climatology@500",
                               "soil_climatology@850"]
    assert loader.target_channels == ["2m_temperature"]
    seen = check_batches(ds, all_batches(loader), window=3, lead=1)
    assert sorted(seen) == list(range(NT - 3))


def test_static_fields_are_read_once(store):
    path, _ = store

    def decoded(variables):
        loader = zarrstream.Loader(path, variables, batch_size=2, shuffle="none")
        for _ in loader:
            pass
        return loader.stats()["bytes_decoded"]

    # Each batch decodes the time-dependent chunks only: the static fields were read at open.
    assert decoded(["2m_temperature", "land_sea_mask", "soil_climatology"]) == \
        decoded(["2m_temperature"])


def test_static_forcing_follows_the_variables(store):
    path, ds = store
    loader = zarrstream.Loader(path, ["2m_temperature"], forcings=["land_sea_mask"],
                               target_offset={"time": 2}, batch_size=5, shuffle="none")
    assert loader.channels == ["2m_temperature", "land_sea_mask"]
    for b in loader:
        for i, (t0,) in enumerate(b["origin"].tolist()):
            np.testing.assert_array_equal(
                b["input"][i].numpy(),
                np.stack([ds["2m_temperature"].values[t0], ds["land_sea_mask"].values]))
            np.testing.assert_array_equal(b["target"][i, 0].numpy(),
                                          ds["2m_temperature"].values[t0 + 2])


def test_a_forcing_with_levels_is_one_channel_per_level_in_its_place(store):
    """A stored forcing that resolves to several channels (one per level) takes exactly those
    places, wherever it is named among the forcings: the variables' channels are what the
    forcings' leave. (Counting forcings rather than their channels once gave an extra input
    channel, and past the channels' end a read out of bounds the loader-options fuzzer found.)"""
    path, ds = store
    names = ["2m_temperature", "soil_climatology@500", "soil_climatology@850", "cos_latitude", "land_sea_mask"]
    loader = zarrstream.Loader(path, ["2m_temperature"], forcings=["soil_climatology", "cos_latitude", "land_sea_mask"],
                               target_offset={"time": 2}, batch_size=5, shuffle="none")
    assert loader.channels == names and loader.target_channels == ["2m_temperature"]
    assert loader.input_shape[1] == len(names)
    soil = ds["soil_climatology"].values
    for b in loader:
        for i, (t0,) in enumerate(b["origin"].tolist()):
            got = b["input"][i].numpy()
            for c, want in ((0, ds["2m_temperature"].values[t0]), (1, soil[0]), (2, soil[1]),
                            (4, ds["land_sea_mask"].values)):
                np.testing.assert_array_equal(got[c], want)
            np.testing.assert_allclose(got[3], np.cos(np.deg2rad(ds["latitude"].values))[:, None]
                                       * np.ones_like(got[3]), rtol=0, atol=2.0**-23)
            np.testing.assert_array_equal(b["target"][i, 0].numpy(), ds["2m_temperature"].values[t0 + 2])


def test_static_target_is_a_config_error(store):
    path, _ = store
    with pytest.raises(zarrstream.ConfigError, match="'land_sea_mask'.*no time dimension.*input only"):
        zarrstream.Loader(path, ["2m_temperature", "land_sea_mask"], target_offset={"time": 1},
                          target_variables=["2m_temperature", "land_sea_mask"])


def test_patches_and_label_selection_cut_static_fields(store):
    path, ds = store
    # latitude 30..-30 is rows 1..4 (of 50, 30, 10, -10, -30, -50); longitude 90..315 columns 2..7.
    loader = zarrstream.Loader(path, ["2m_temperature", "land_sea_mask", "soil_climatology@850"],
                               select={"latitude": (30, -30), "longitude": (90, 315)},
                               sample={"time": 2, "latitude": 2, "longitude": 3},
                               stride={"time": 1, "latitude": 1, "longitude": 1},
                               batch_size=8, shuffle="exact", seed=1)
    assert loader.sample_dims == ["time", "latitude", "longitude"]
    n = 0
    for b in loader:
        for i, (t0, y0, x0) in enumerate(b["origin"].tolist()):
            assert 1 <= y0 <= 3 and 2 <= x0 <= 5
            ys, xs = slice(y0, y0 + 2), slice(x0, x0 + 3)
            channels = lambda d, s: [d["2m_temperature"].values[s], d["land_sea_mask"].values,  # noqa: E731
                                     d["soil_climatology"].values[1]]
            np.testing.assert_array_equal(b["input"][i].numpy(),
                                          expected_input(ds, channels, t0, 2, ys, xs))
            n += 1
    assert n == (NT - 1) * 3 * 4


def test_two_ranks_and_resumption(store):
    path, ds = store
    kwargs = dict(variables=["2m_temperature", "land_sea_mask", "soil_climatology"],
                  sample={"time": 2}, stride={"time": 1}, target_offset={"time": 1}, batch_size=2,
                  shuffle="exact", seed=7, world_size=2)
    seen = []
    for rank in range(2):
        batches = all_batches(zarrstream.Loader(path, rank=rank, **kwargs))
        seen += check_batches(ds, batches, window=2, lead=1)
        # Resumed after two batches, a fresh loader delivers exactly the rest.
        first = zarrstream.Loader(path, rank=rank, **kwargs)
        it = iter(first)
        for _ in range(2):
            next(it)
        state = first.state_dict()
        resumed = zarrstream.Loader(path, rank=rank, **kwargs)
        resumed.load_state_dict(state)
        rest = all_batches(resumed)
        assert len(rest) == len(batches) - 2
        for a, b in zip(rest, batches[2:]):
            for key in ("input", "target", "origin"):
                assert torch.equal(a[key], b[key]), key
    assert sorted(seen) == list(range(NT - 2))  # 10 samples: 5 per rank, no padding


def test_stats_default_to_time_dependent_variables_and_take_static_ones(store, tmp_path):
    path, ds = store
    out = tmp_path / "default.json"
    r = run_cli("stats", path, "--select", "time=2000-01-01:2000-01-02", "-o", out)
    assert r.returncode == 0, r.stderr
    assert [c["name"] for c in json.loads(out.read_text())["channels"]] == ["2m_temperature"]

    named = tmp_path / "named.json"
    r = run_cli("stats", path, "--vars", "2m_temperature,land_sea_mask,soil_climatology",
                "--select", "time=2000-01-01:2000-01-02", "-o", named)
    assert r.returncode == 0, r.stderr
    stats = {c["name"]: c for c in json.loads(named.read_text())["channels"]}
    t2m = ds["2m_temperature"].values[:8].astype("float64")  # the 8 steps of two days
    np.testing.assert_allclose(stats["2m_temperature"]["mean"], t2m.mean(), rtol=1e-12)
    # A time selection leaves a static field whole.
    lsm = ds["land_sea_mask"].values.astype("float64")
    assert stats["land_sea_mask"]["count"] == NY * NX
    np.testing.assert_allclose(stats["land_sea_mask"]["mean"], lsm.mean(), rtol=1e-12)
    np.testing.assert_allclose(stats["land_sea_mask"]["std"], lsm.std(), rtol=1e-12)
    soil = ds["soil_climatology"].values[1].astype("float64")
    np.testing.assert_allclose(stats["soil_climatology@850"]["mean"], soil.mean(), rtol=1e-12)

    loader = zarrstream.Loader(path, ["2m_temperature", "land_sea_mask", "soil_climatology"],
                               normalize=str(named), batch_size=4, shuffle="none")
    for b in loader:
        for i, (t0,) in enumerate(b["origin"].tolist()):
            raw = static_channels(ds, t0)
            for c, name in enumerate(loader.channels):
                mean, std = stats[name]["mean"], stats[name]["std"]
                np.testing.assert_allclose(b["input"][i, c].numpy(), (raw[c] - mean) / std,
                                           rtol=1e-5, atol=1e-6)

    partial = tmp_path / "partial.json"
    assert run_cli("stats", path, "-o", partial).returncode == 0
    with pytest.raises(zarrstream.ZarrstreamError, match="no channel 'land_sea_mask'"):
        zarrstream.Loader(path, ["2m_temperature", "land_sea_mask"], normalize=str(partial))


@pytest.mark.gpu
def test_gpu_batches_equal_cpu_batches_with_static_fields(store):
    path, _ = store
    kwargs = dict(variables=["2m_temperature", "land_sea_mask"], forcings=["soil_climatology@850"],
                  sample={"time": 2, "latitude": 3, "longitude": 4},
                  stride={"time": 1, "latitude": 1, "longitude": 2}, target_offset={"time": 1},
                  batch_size=6, shuffle="exact", seed=2, nan=0.0, dtype="bfloat16")
    cpu = all_batches(zarrstream.Loader(path, **kwargs))
    gpu_loader = zarrstream.Loader(path, device="cuda", gpu_batches=True, **kwargs)
    gpu = [{k: v.cpu() for k, v in b.items()} for b in gpu_loader]
    assert len(cpu) == len(gpu)
    for a, b in zip(cpu, gpu):
        for key in a:
            assert torch.equal(a[key], b[key]), key
    # Resumed mid-epoch on the GPU: the rest of the CPU loader's epoch.
    first = zarrstream.Loader(path, device="cuda", gpu_batches=True, **kwargs)
    it = iter(first)
    next(it)
    state = first.state_dict()
    resumed = zarrstream.Loader(path, device="cuda", gpu_batches=True, **kwargs)
    resumed.load_state_dict(state)
    rest = [{k: v.cpu() for k, v in b.items()} for b in resumed]
    assert len(rest) == len(cpu) - 1
    for a, b in zip(cpu[1:], rest):
        for key in a:
            assert torch.equal(a[key], b[key]), key

"""The loader's ``target_normalize="tendencies"``: targets delivered as their tendency from the
window's last input step, normalised with the stats file's tendency statistics, against numpy on
stores xarray wrote (tests/era5_fixtures.py).

Expected values: xarray's decoded values (float64), x[target] - x[last input], minus the tendency
mean over that many store steps, over its std, rounded to float32 (then to the batch dtype);
NaN at either end → the nan= fill and a set mask. Inputs stay normalised as values.
"""

from __future__ import annotations

import json
import warnings

import numpy as np
import pandas as pd
import pytest
import xarray as xr
import zarr

import era5_fixtures
import zarrstream
from zarrstream.errors import ConfigError

torch = pytest.importorskip("torch")

NT = 40


@pytest.fixture(scope="module")
def hourly(tmp_path_factory):
    """40 hourly steps of 2m_temperature (with NaNs) beside a static land_sea_mask; time chunks
    of 5 that tendencies' pairs cross. Returns (path, values [time, lat, lon] float32, stats
    path): the stats file has tendencies over 1, 2 and 4 steps."""
    root = tmp_path_factory.mktemp("hourly")
    time = pd.date_range("2000-01-01", periods=NT, freq="1h")
    lat, lon = np.linspace(60, -60, 6), np.arange(8) * 45.0
    path, _ = era5_fixtures.surface_and_static(
        root / "hourly.zarr", seed=11, time=time, latitude=lat, longitude=lon,
        chunks={"2m_temperature": (5, 3, 4), "land_sea_mask": (6, 8)})
    a = zarr.open_array(path / "2m_temperature", mode="r+")
    values = a[...]
    values[7, 2, :] = np.nan
    values[20, :, 5] = np.nan
    a[...] = values
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        decoded = xr.open_zarr(path, consolidated=False)["2m_temperature"].values
    stats = root / "stats.json"
    zarrstream.stats(path, vars="2m_temperature,land_sea_mask", tendencies=[1, 2, 4],
                     output=stats)
    return path, decoded, stats


def channel_stats(stats_path, name):
    return next(c for c in json.loads(open(stats_path).read())["channels"] if c["name"] == name)


def batches(loader):
    return [{k: v.clone() for k, v in b.items()} for b in loader]


def expected_target(values, stats, last, target, spatial=(slice(None), slice(None))):
    t = channel_stats(stats, "2m_temperature")["tendencies"][str(target - last)]
    d = values[(target, *spatial)].astype("float64") - values[(last, *spatial)].astype("float64")
    return ((d - t["mean"]) / t["std"]).astype("float32")


def expected_input(values, stats, step, spatial=(slice(None), slice(None))):
    c = channel_stats(stats, "2m_temperature")
    return ((values[(step, *spatial)].astype("float64") - c["mean"]) / c["std"]).astype("float32")


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_targets_are_normalised_tendencies(hourly, dtype):
    """Window 2 at frequency 2h, leads 1 and 2: targets 2 and 4 store steps after the last input
    step, normalised with the file's tendencies over 2 and 4 steps."""
    path, values, stats = hourly
    loader = zarrstream.Loader(path, ["2m_temperature"], sample={"time": 2},
                               target_offset={"time": [1, 2]}, frequency="2h", normalize=stats,
                               target_normalize="tendencies", batch_size=4, shuffle="none",
                               dtype=dtype)
    got = batches(loader)
    seen = 0
    for b in got:
        for i, (origin,) in enumerate(b["origin"].tolist()):
            last = origin + 2
            want_target = np.stack([expected_target(values, stats, last, last + 2),
                                    expected_target(values, stats, last, last + 4)])
            want_input = np.stack([expected_input(values, stats, origin),
                                   expected_input(values, stats, last)])
            target = b["target"][i].float().numpy()
            inputs = b["input"][i].float().numpy()
            if dtype == "float32":
                np.testing.assert_allclose(target, want_target, rtol=2e-6, atol=2e-6)
                np.testing.assert_allclose(inputs, want_input, rtol=2e-6, atol=2e-6)
            else:
                rounded = torch.from_numpy(want_target).to(torch.bfloat16).float().numpy()
                np.testing.assert_allclose(target, rounded, rtol=8e-3, atol=8e-3)
            # NaN at either end stays NaN (no nan= fill here), and only there.
            np.testing.assert_array_equal(np.isnan(target), np.isnan(want_target))
            seen += 1
    # Origins every 4 store steps (stride = window of 2 steps of 2h), the last target at +6.
    assert seen == len(range(0, NT - 6, 4))
    assert any(np.isnan(b["target"].float().numpy()).any() for b in got)


def test_nan_fill_masks_and_patches(hourly):
    """nan=0.0 fills NaN tendencies (either end NaN) and sets the target mask; spatial patches
    take the same values from their part of the grid."""
    path, values, stats = hourly
    loader = zarrstream.Loader(path, ["2m_temperature"],
                               sample={"time": 1, "latitude": 3, "longitude": 4},
                               stride={"time": 3, "latitude": 3, "longitude": 4},
                               target_offset={"time": [1, 4]}, normalize=stats,
                               target_normalize="tendencies", nan=0.0, batch_size=5,
                               shuffle="none")
    assert loader.sample_dims == ["time", "latitude", "longitude"]
    masked = 0
    for b in batches(loader):
        for i, (t0, y0, x0) in enumerate(b["origin"].tolist()):
            spatial = (slice(y0, y0 + 3), slice(x0, x0 + 4))
            want = np.stack([expected_target(values, stats, t0, t0 + 1, spatial),
                             expected_target(values, stats, t0, t0 + 4, spatial)])
            mask = np.isnan(want)
            np.testing.assert_array_equal(b["target_mask"][i].numpy(), mask)
            np.testing.assert_allclose(b["target"][i].numpy(), np.where(mask, 0, want),
                                       rtol=2e-6, atol=2e-6)
            masked += int(mask.sum())
    assert masked > 0


def test_cf_decoding_comes_before_the_difference(tmp_path):
    """Packed int16 with fill values (CDS-style): tendencies of the decoded values."""
    path = era5_fixtures.cds_era5(tmp_path, with_expver=False)
    stats = tmp_path / "stats.json"
    zarrstream.stats(path, vars="t@850,t2m", tendencies=[1, 2], output=stats)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ds = xr.open_zarr(path, consolidated=False).load()
    t2m = ds["t2m"].values.astype("float64")
    t850 = ds["t"].sel(pressure_level=850.0).values.astype("float64")
    loader = zarrstream.Loader(path, ["t@850", "t2m"], sample={"valid_time": 1},
                               target_offset={"valid_time": [1, 2]}, normalize=stats,
                               target_normalize="tendencies", batch_size=2, shuffle="none")
    file = json.loads(stats.read_text())["channels"]
    count = 0
    for b in batches(loader):
        for i, (t0,) in enumerate(b["origin"].tolist()):
            want = []
            for lead in (1, 2):
                for c, values in zip(file, (t850, t2m)):
                    t = c["tendencies"][str(lead)]
                    want.append(((values[t0 + lead] - values[t0]) - t["mean"]) / t["std"])
            want = np.stack(want).astype("float32")
            got = b["target"][i].numpy()
            np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
            np.testing.assert_allclose(got, want, rtol=2e-6, atol=2e-6)
            count += 1
    assert count == era5_fixtures.NT - 2


def test_resumption_gives_the_same_batches(hourly):
    path, _, stats = hourly
    kwargs = dict(variables=["2m_temperature"], sample={"time": 3}, target_offset={"time": 1},
                  normalize=stats, target_normalize="tendencies", batch_size=3, shuffle="exact",
                  seed=5)
    full = batches(zarrstream.Loader(path, **kwargs))
    first = zarrstream.Loader(path, **kwargs)
    it = iter(first)
    next(it)
    resumed = zarrstream.Loader(path, **kwargs)
    resumed.load_state_dict(first.state_dict())
    rest = batches(resumed)
    assert len(rest) == len(full) - 1
    for x, y in zip(rest, full[1:]):
        for key in ("input", "target", "origin"):  # NaN where the store has NaN: equal too
            np.testing.assert_array_equal(x[key].numpy(), y[key].numpy(), err_msg=key)


def test_missing_tendencies_and_bad_options_are_config_errors(hourly, tmp_path):
    path, _, stats = hourly
    base = dict(variables=["2m_temperature"], sample={"time": 2}, normalize=stats)
    # Lead 3 after the window: 3 store steps, which the file lacks.
    with pytest.raises(ConfigError, match=r"no tendency over 3 time steps of the store for target "
                                          r"channel '2m_temperature' \(it has tendencies over "
                                          r"1, 2, 4 steps\).*--tendencies 3"):
        zarrstream.Loader(path, target_offset={"time": 3}, target_normalize="tendencies", **base)
    # A stats file without tendencies.
    plain = tmp_path / "plain.json"
    zarrstream.stats(path, vars="2m_temperature", output=plain)
    with pytest.raises(ConfigError, match="it has no tendencies for it"):
        zarrstream.Loader(path, target_offset={"time": 1}, target_normalize="tendencies",
                          **dict(base, normalize=plain))
    with pytest.raises(ConfigError, match="needs a stats file with tendencies"):
        zarrstream.Loader(path, ["2m_temperature"], target_offset={"time": 1},
                          target_normalize="tendencies")
    with pytest.raises(ConfigError, match="needs targets"):
        zarrstream.Loader(path, target_normalize="tendencies", **base)
    with pytest.raises(ConfigError, match="target_normalize='delta': expected"):
        zarrstream.Loader(path, target_offset={"time": 1}, target_normalize="delta", **base)
    # Values as before by default.
    a = batches(zarrstream.Loader(path, target_offset={"time": 1}, shuffle="none", **base))
    b = batches(zarrstream.Loader(path, target_offset={"time": 1}, shuffle="none",
                                  target_normalize="values", **base))
    assert len(a) == len(b)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x["target"].numpy(), y["target"].numpy())


def bits(t):
    """A tensor's bit patterns (NaN payloads included), for comparisons that NaN does not spoil."""
    if t.is_floating_point():
        return t.view({2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()])
    return t


def assert_gpu_batches_equal_cpu(path, **kwargs):
    cpu = batches(zarrstream.Loader(path, **kwargs))
    gpu = [{k: v.cpu() for k, v in b.items()}
           for b in zarrstream.Loader(path, device="cuda", gpu_batches=True, **kwargs)]
    host = batches(zarrstream.Loader(path, device="cuda", gpu_batches=False, **kwargs))
    assert len(cpu) == len(gpu) == len(host) > 0
    for x, y, z in zip(cpu, gpu, host):
        assert x.keys() == y.keys()
        for key in x:
            assert torch.equal(bits(x[key]), bits(y[key])), key
            assert torch.equal(bits(x[key]), bits(z[key].cpu())), key


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_gpu_batches_equal_the_cpus_bit_for_bit(hourly, dtype):
    """GPU batches (the scatter kernel decoding targets and bases aside, then zs_tendencies) equal
    the CPU's bit for bit, NaN included: windows with frequency=, spatial patches shuffled across
    batches, nan= fills and masks or NaN kept; host batches copied to the GPU equal them too."""
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    path, _, stats = hourly
    common = dict(variables=["2m_temperature"], normalize=stats, target_normalize="tendencies",
                  dtype=dtype)
    assert_gpu_batches_equal_cpu(path, sample={"time": 2}, target_offset={"time": [1, 2]},
                                 frequency="2h", batch_size=4, shuffle="none", **common)
    for nan in (0.0, "keep"):
        assert_gpu_batches_equal_cpu(path, sample={"time": 1, "latitude": 3, "longitude": 4},
                                     stride={"time": 3, "latitude": 3, "longitude": 4},
                                     target_offset={"time": [1, 4]}, nan=nan, batch_size=5,
                                     shuffle="exact", seed=3, **common)


@pytest.mark.gpu
def test_gpu_batches_of_packed_variables_equal_the_cpus(tmp_path):
    """Packed int16 with fill values: CF decoding in float64 on the GPU before the difference."""
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    path = era5_fixtures.cds_era5(tmp_path, with_expver=False)
    stats = tmp_path / "stats.json"
    zarrstream.stats(path, vars="t@850,t2m", tendencies=[1, 2], output=stats)
    for dtype in ("float32", "bfloat16"):
        assert_gpu_batches_equal_cpu(path, variables=["t@850", "t2m"], sample={"valid_time": 1},
                                     target_offset={"valid_time": [1, 2]}, normalize=stats,
                                     target_normalize="tendencies", batch_size=2, shuffle="none",
                                     nan=-1.0, dtype=dtype)


def test_tendency_targets_over_concatenated_stores(tmp_path):
    """A dataset concatenated along time gives the batches of the one store it was cut from, with
    tendency statistics computed over the concatenation (pairs across the cut included)."""
    rng = np.random.default_rng(4)
    time = pd.date_range("2001-01-01", periods=NT, freq="1h")
    t2m = (280 + 5 * rng.standard_normal((NT, 4, 6))).astype("float32")
    t2m[16, 2, :] = np.nan
    ds = xr.Dataset({"2m_temperature": (("time", "latitude", "longitude"), t2m)},
                    coords={"time": time, "latitude": np.linspace(40, -40, 4),
                            "longitude": np.arange(6) * 60.0})
    encoding = {"2m_temperature": {"chunks": (5, 4, 3)}}
    whole = tmp_path / "whole.zarr"
    ds.to_zarr(whole, zarr_format=3, consolidated=False, encoding=encoding)
    parts = []
    for name, part in (("a", slice(0, 17)), ("b", slice(17, NT))):
        path = tmp_path / f"{name}.zarr"
        ds.isel(time=part).to_zarr(path, zarr_format=3, consolidated=False, encoding=encoding)
        parts.append(str(path))
    form = {"concat": parts, "dim": "time"}
    stats = tmp_path / "stats.json"
    result = zarrstream.stats(json.dumps(form), vars="2m_temperature", tendencies=[1, 3],
                              output=stats)
    one = zarrstream.stats(whole, vars="2m_temperature", tendencies=[1, 3])
    for n in ("1", "3"):
        got, want = result["channels"][0]["tendencies"][n], one["channels"][0]["tendencies"][n]
        assert (got["count"], got["nan_count"]) == (want["count"], want["nan_count"])
        np.testing.assert_allclose([got["mean"], got["std"]], [want["mean"], want["std"]],
                                   rtol=1e-12)
    kwargs = dict(sample={"time": 2}, stride={"time": 1}, target_offset={"time": [1, 3]},
                  normalize=stats, target_normalize="tendencies", nan=0.0, batch_size=4,
                  shuffle=False)
    concatenated = batches(zarrstream.Loader(form, ["2m_temperature"], **kwargs))
    reference = batches(zarrstream.Loader(whole, ["2m_temperature"], **kwargs))
    assert len(concatenated) == len(reference) > 0
    for got, want in zip(concatenated, reference):
        for key in ("input", "target", "target_mask", "origin"):
            assert torch.equal(got[key], want[key]), key
    # Spot check one target against numpy: the sample whose pair spans the cut (steps 16 -> 17).
    sample = 15  # window 15, 16; lead 1 is step 17 in the second store
    b, i = divmod(sample, 4)
    expected = expected_target(t2m, stats, 16, 17)
    assert concatenated[b]["origin"][i].tolist() == [sample]
    np.testing.assert_allclose(concatenated[b]["target"][i, 0].numpy(),
                               np.nan_to_num(expected, nan=0.0), rtol=2e-6, atol=2e-6)
    assert concatenated[b]["target_mask"][i, 0].sum() == 6  # row 2 of step 16: NaN, filled

"""`frequency=`: an hourly store sampled at 6-hourly steps, against xarray's
`ds.isel(time=slice(None, None, 6))` of the store xarray wrote: windows, targets and strides in
steps of the frequency, a selection that starts off the hour, two ranks, resumption mid-epoch and
the errors of frequencies the store's step does not divide.
"""

from __future__ import annotations

import datetime

import numpy as np
import pytest

xr = pytest.importorskip("xarray")
pd = pytest.importorskip("pandas")
torch = pytest.importorskip("torch")

import zarrstream  # noqa: E402

NT, NY, NX = 50, 3, 4


@pytest.fixture(scope="module")
def hourly(tmp_path_factory):
    rng = np.random.default_rng(6)
    ds = xr.Dataset(
        {
            "2m_temperature": (("time", "latitude", "longitude"),
                               rng.standard_normal((NT, NY, NX)).astype("float32")),
            "land_sea_mask": (("latitude", "longitude"), rng.random((NY, NX)).astype("float32")),
        },
        coords={
            "time": pd.date_range("2000-01-01", periods=NT, freq="1h"),
            "latitude": np.array([10, 0, -10], dtype="float32"),
            "longitude": np.arange(NX, dtype="float32") * 90,
        },
    )
    path = tmp_path_factory.mktemp("hourly") / "hourly.zarr"
    ds.to_zarr(path, zarr_format=3, consolidated=False,
               encoding={"2m_temperature": {"chunks": (5, NY, NX)}})
    return path, xr.open_zarr(path, consolidated=False).load()


def batches(loader):
    return [{k: v.clone() for k, v in b.items()} for b in loader]


def check(batch_list, ref, first_index, window=2, lead=1):
    """Each sample against `ref` (the 6-hourly steps), its origin a store index."""
    t2m, lsm = ref["2m_temperature"].values, ref["land_sea_mask"].values
    steps = []
    for b in batch_list:
        for i, (origin,) in enumerate(b["origin"].tolist()):
            assert (origin - first_index) % 6 == 0, origin
            j = (origin - first_index) // 6
            steps.append(j)
            want = np.concatenate([np.stack([t2m[j + s], lsm]) for s in range(window)])
            np.testing.assert_array_equal(b["input"][i].numpy(), want)
            np.testing.assert_array_equal(b["target"][i, 0].numpy(), t2m[j + window - 1 + lead])
    return steps


KWARGS = dict(variables=["2m_temperature"], forcings=["land_sea_mask"], sample={"time": 2},
              stride={"time": 1}, target_offset={"time": 1}, batch_size=2, shuffle="exact", seed=4)


def test_six_hourly_samples_of_an_hourly_store(hourly):
    path, ds = hourly
    ref = ds.isel(time=slice(None, None, 6))  # 9 steps: hours 0, 6, ..., 48
    got = check(batches(zarrstream.Loader(path, frequency="6h", **KWARGS)), ref, 0)
    assert sorted(got) == list(range(ref.sizes["time"] - 2))
    # A timedelta is the same frequency.
    a = batches(zarrstream.Loader(path, frequency="6h", **KWARGS))
    b = batches(zarrstream.Loader(path, frequency=datetime.timedelta(hours=6), **KWARGS))
    assert all(torch.equal(x["input"], y["input"]) for x, y in zip(a, b)) and len(a) == len(b)


def test_steps_start_at_the_selection(hourly):
    path, ds = hourly
    sel = ds.sel(time=slice("2000-01-01T03:00:00", "2000-01-02T20:00:00"))
    ref = sel.isel(time=slice(None, None, 6))  # hours 3, 9, ..., 39
    loader = zarrstream.Loader(path, frequency="6h",
                               select={"time": ("2000-01-01T03:00:00", "2000-01-02T20:00:00")}, **KWARGS)
    got = check(batches(loader), ref, 3)
    assert sorted(got) == list(range(ref.sizes["time"] - 2))


def test_two_ranks_and_resumption(hourly):
    path, ds = hourly
    ref = ds.isel(time=slice(None, None, 6))
    seen = []
    for rank in range(2):
        kwargs = dict(KWARGS, frequency="6h", rank=rank, world_size=2)
        full = batches(zarrstream.Loader(path, **kwargs))
        seen += check(full, ref, 0)
        first = zarrstream.Loader(path, **kwargs)
        it = iter(first)
        next(it)
        state = first.state_dict()
        resumed = zarrstream.Loader(path, **kwargs)
        resumed.load_state_dict(state)
        rest = batches(resumed)
        assert len(rest) == len(full) - 1
        for x, y in zip(rest, full[1:]):
            for key in ("input", "target", "origin"):
                assert torch.equal(x[key], y[key]), key
    # 7 samples over 2 ranks: 4 each, the order padded with its first sample.
    assert len(seen) == 8 and sorted(set(seen)) == list(range(ref.sizes["time"] - 2))


def test_frequencies_the_store_cannot_give_are_config_errors(hourly):
    path, _ = hourly
    with pytest.raises(zarrstream.ConfigError, match=r"frequency '90min' \(5400 s\) is not a whole number"):
        zarrstream.Loader(path, ["2m_temperature"], frequency="90min")
    with pytest.raises(zarrstream.ConfigError, match="frequency '6x': expected a whole number"):
        zarrstream.Loader(path, ["2m_temperature"], frequency="6x")
    with pytest.raises(zarrstream.ConfigError, match="whole number of seconds"):
        zarrstream.Loader(path, ["2m_temperature"], frequency=datetime.timedelta(seconds=0.5))
    with pytest.raises(zarrstream.ZarrstreamError, match=r"sample window 10 along 'time' \(steps of 6h"):
        zarrstream.Loader(path, ["2m_temperature"], frequency="6h", sample={"time": 10})


@pytest.mark.gpu
def test_gpu_batches_at_a_frequency_equal_cpu_batches(hourly):
    path, _ = hourly
    kwargs = dict(KWARGS, frequency="6h", world_size=2, rank=1)
    cpu = batches(zarrstream.Loader(path, **kwargs))
    gpu = [{k: v.cpu() for k, v in b.items()}
           for b in zarrstream.Loader(path, device="cuda", gpu_batches=True, **kwargs)]
    assert len(cpu) == len(gpu) > 0
    for x, y in zip(cpu, gpu):
        for key in x:
            assert torch.equal(x[key], y[key]), key

"""Ensembles (`ensemble=`): a store xarray wrote with a `number` dimension, each member a sample
or the members stacked into channels, against numpy's reading of the store xarray opens: values,
every (time, member) once per epoch, targets, a static field without members, two ranks,
resumption mid-epoch, block shuffle and the errors.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

xr = pytest.importorskip("xarray")
pd = pytest.importorskip("pandas")
torch = pytest.importorskip("torch")

import zarrstream  # noqa: E402
from conftest import run_cli  # noqa: E402

NT, NM, NL, NY, NX = 7, 3, 2, 3, 4
MEMBERS = [1, 2, 3]  # labels unlike the indices, as ECMWF's ensembles number theirs


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    rng = np.random.default_rng(11)
    ds = xr.Dataset(
        {
            "2m_temperature": (("time", "number", "latitude", "longitude"),
                               rng.standard_normal((NT, NM, NY, NX)).astype("float32")),
            "temperature": (("time", "number", "level", "latitude", "longitude"),
                            rng.standard_normal((NT, NM, NL, NY, NX)).astype("float32")),
            "land_sea_mask": (("latitude", "longitude"), rng.random((NY, NX)).astype("float32")),
        },
        coords={
            "time": pd.date_range("2000-01-01", periods=NT, freq="6h"),
            "number": np.array(MEMBERS, dtype="int64"),
            "level": np.array([500, 850], dtype="int64"),
            "latitude": np.array([10, 0, -10], dtype="float32"),
            "longitude": np.arange(NX, dtype="float32") * 90,
        },
    )
    path = tmp_path_factory.mktemp("ensemble") / "ensemble.zarr"
    ds.to_zarr(path, zarr_format=3, consolidated=False,
               encoding={"2m_temperature": {"chunks": (2, 2, NY, NX)},
                         "temperature": {"chunks": (2, 2, 1, NY, NX)}})
    return path, xr.open_zarr(path, consolidated=False).load()


def batches(loader):
    return [{k: v.clone() for k, v in b.items()} for b in loader]


VARIABLES = ["2m_temperature", "temperature@500,850"]


def sample_loader(path, **kwargs):
    kwargs = dict(dict(forcings=["land_sea_mask"], target_offset={"time": 1}, batch_size=4,
                       shuffle="exact", seed=3), **kwargs)
    return zarrstream.Loader(path, VARIABLES, ensemble="sample", **kwargs)


def check_samples(batch_list, ds):
    """Each member sample against the store's values; returns the (time, member) origins."""
    t2m, t = ds["2m_temperature"].values, ds["temperature"].values
    lsm = ds["land_sea_mask"].values
    seen = []
    for b in batch_list:
        for i, (step, member) in enumerate(b["origin"].tolist()):
            seen.append((step, member))
            want = np.stack([t2m[step, member], t[step, member, 0], t[step, member, 1], lsm])
            np.testing.assert_array_equal(b["input"][i].numpy(), want)
            lead = step + 1
            want = np.stack([t2m[lead, member], t[lead, member, 0], t[lead, member, 1]])
            np.testing.assert_array_equal(b["target"][i].numpy(), want)
    return seen


EVERY_SAMPLE = sorted((s, m) for s in range(NT - 1) for m in range(NM))


def test_each_member_is_a_sample(store):
    path, ds = store
    loader = sample_loader(path)
    assert loader.sample_dims == ["time", "number"]
    assert loader.spatial_dims == ["latitude", "longitude"]
    assert loader.channels == ["2m_temperature", "temperature@500", "temperature@850",
                               "land_sea_mask"]
    got = batches(loader)
    assert got[0]["input"].shape == (4, 4, NY, NX)
    assert got[0]["target"].shape == (4, 3, NY, NX)
    assert sorted(check_samples(got, ds)) == EVERY_SAMPLE
    # Block shuffle and index order sample the same set.
    for shuffle in ("block", "none"):
        assert sorted(check_samples(batches(sample_loader(path, shuffle=shuffle)), ds)) == EVERY_SAMPLE


def test_a_member_selection_and_windows(store):
    path, ds = store
    loader = sample_loader(path, select={"number": (2, 3)}, sample={"time": 2, "number": 1},
                           forcings=None, target_offset=None, shuffle="none")
    t2m, t = ds["2m_temperature"].values, ds["temperature"].values
    seen = []
    for b in batches(loader):
        for i, (step, member) in enumerate(b["origin"].tolist()):
            seen.append((step, member))
            want = np.concatenate([np.stack([t2m[step + s, member], t[step + s, member, 0],
                                             t[step + s, member, 1]]) for s in range(2)])
            np.testing.assert_array_equal(b["input"][i].numpy(), want)
    assert sorted(seen) == sorted((s, m) for s in (0, 2, 4) for m in (1, 2))


def test_members_stacked_into_channels(store):
    path, ds = store
    loader = zarrstream.Loader(path, VARIABLES, forcings=["land_sea_mask"], ensemble="channels",
                               target_offset={"time": 1}, batch_size=2, shuffle="exact", seed=5)
    names = [f"2m_temperature#{m}" for m in MEMBERS]
    names += [f"temperature@{level}#{m}" for level in (500, 850) for m in MEMBERS]
    assert loader.channels == names + ["land_sea_mask"]
    assert loader.target_channels == names
    assert loader.sample_dims == ["time"] and loader.spatial_dims == ["latitude", "longitude"]
    # The reference: xarray's variables with their members stacked, variable-major.
    t2m = ds["2m_temperature"].transpose("time", "number", "latitude", "longitude").values
    t = ds["temperature"].sel(level=[500, 850]).transpose(
        "time", "level", "number", "latitude", "longitude").values.reshape(NT, NL * NM, NY, NX)
    fields = np.concatenate([t2m, t], axis=1)
    lsm = ds["land_sea_mask"].values
    steps = []
    for b in batches(loader):
        assert b["input"].shape[1:] == (len(names) + 1, NY, NX)
        for i, (step,) in enumerate(b["origin"].tolist()):
            steps.append(step)
            np.testing.assert_array_equal(b["input"][i, :-1].numpy(), fields[step])
            np.testing.assert_array_equal(b["input"][i, -1].numpy(), lsm)
            np.testing.assert_array_equal(b["target"][i].numpy(), fields[step + 1])
    assert sorted(steps) == list(range(NT - 1))


def test_stacked_members_normalise_with_their_variable(store, tmp_path):
    path, ds = store
    stats = tmp_path / "stats.json"
    proc = run_cli("stats", path, "--vars", "2m_temperature", "-o", stats)
    assert proc.returncode == 0, proc.stderr
    entry = next(c for c in json.loads(stats.read_text())["channels"]
                 if c["name"] == "2m_temperature")
    loader = zarrstream.Loader(path, ["2m_temperature"], ensemble="channels", normalize=stats,
                               shuffle="none")
    t2m = ds["2m_temperature"].values
    for b in batches(loader):
        (step,) = b["origin"][0].tolist()
        want = (t2m[step] - np.float32(entry["mean"])) * np.float32(1 / entry["std"])
        np.testing.assert_allclose(b["input"][0].numpy(), want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("mode", ["sample", "channels"])
def test_two_ranks_and_resumption(store, mode):
    path, ds = store
    kwargs = dict(forcings=["land_sea_mask"], target_offset={"time": 1}, batch_size=2,
                  shuffle="block", seed=8, ensemble=mode, world_size=2)
    origins = []
    for rank in range(2):
        full = batches(zarrstream.Loader(path, VARIABLES, rank=rank, **kwargs))
        if mode == "sample":
            check_samples(full, ds)
        origins += [tuple(o) for b in full for o in b["origin"].tolist()]
        first = zarrstream.Loader(path, VARIABLES, rank=rank, **kwargs)
        it = iter(first)
        next(it)
        state = first.state_dict()
        resumed = zarrstream.Loader(path, VARIABLES, rank=rank, **kwargs)
        resumed.load_state_dict(state)
        rest = batches(resumed)
        assert len(rest) == len(full) - 1
        for x, y in zip(rest, full[1:]):
            for key in ("input", "target", "origin"):
                assert torch.equal(x[key], y[key]), key
    every = EVERY_SAMPLE if mode == "sample" else [(s,) for s in range(NT - 1)]
    # The ranks split the samples; an odd count is padded with the order's first sample.
    assert sorted(set(origins)) == every
    assert len(origins) == len(every) + len(every) % 2


def test_without_ensemble_the_members_are_a_dimension(store):
    path, ds = store
    loader = zarrstream.Loader(path, ["2m_temperature"], shuffle="none")
    assert loader.spatial_dims == ["number", "latitude", "longitude"]
    b = next(iter(loader))
    assert b["input"].shape == (1, 1, NM, NY, NX)
    np.testing.assert_array_equal(b["input"][0, 0].numpy(), ds["2m_temperature"].values[0])
    # A static field without members stacks with them only under ensemble=.
    with pytest.raises(zarrstream.ZarrstreamError, match="different dimensions"):
        zarrstream.Loader(path, ["2m_temperature"], forcings=["land_sea_mask"])


def test_errors(store, tmp_path):
    path, _ = store
    with pytest.raises(zarrstream.ConfigError, match="expected 'none', 'sample' or 'channels'"):
        zarrstream.Loader(path, ["2m_temperature"], ensemble="members")
    with pytest.raises(zarrstream.ConfigError, match="each member is a sample"):
        zarrstream.Loader(path, ["2m_temperature"], ensemble="sample", sample={"number": 2})
    with pytest.raises(zarrstream.ZarrstreamError, match="ensemble dimension 'members'"):
        zarrstream.Loader(path, ["2m_temperature"], ensemble="sample", ensemble_dim="members")
    with pytest.raises(zarrstream.ConfigError, match="without an ensemble mode"):
        zarrstream.Loader(path, ["2m_temperature"], ensemble_dim="number")
    plain = tmp_path / "plain.zarr"
    xr.Dataset({"t": (("time", "x"), np.zeros((3, 2), "float32"))},
               coords={"time": pd.date_range("2000-01-01", periods=3)}).to_zarr(
        plain, zarr_format=3, consolidated=False)
    with pytest.raises(zarrstream.ConfigError, match="has no member dimension"):
        zarrstream.Loader(plain, ["t"], ensemble="channels")


@pytest.mark.gpu
def test_gpu_batches_equal_cpu_batches(store):
    path, _ = store
    for mode in ("sample", "channels"):
        for dtype in ("float32", "bfloat16"):
            kwargs = dict(forcings=["land_sea_mask"], target_offset={"time": 1}, batch_size=4,
                          shuffle="exact", seed=2, ensemble=mode, dtype=dtype)
            cpu = batches(zarrstream.Loader(path, VARIABLES, **kwargs))
            gpu = [{k: v.cpu() for k, v in b.items()}
                   for b in zarrstream.Loader(path, VARIABLES, device="cuda", gpu_batches=True,
                                              **kwargs)]
            assert len(cpu) == len(gpu) > 0
            for a, b in zip(cpu, gpu):
                for key in a:
                    assert torch.equal(a[key], b[key]), (mode, dtype, key)

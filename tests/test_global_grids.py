"""Global grids: a periodic longitude (selections and patch windows wrap around it) and patch
padding at the latitude edges, against numpy's np.take / np.pad of the arrays xarray reads back
from the store it wrote; static fields, computed forcings and targets alike, two ranks, resuming
mid-epoch, `zarrstream stats` over a wrapping selection, the errors, and GPU batches equal to CPU
batches.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

xr = pytest.importorskip("xarray")
pd = pytest.importorskip("pandas")
torch = pytest.importorskip("torch")

import zarrstream  # noqa: E402
from conftest import run_cli  # noqa: E402

NT, NY, NX = 6, 7, 12
LONGITUDES = np.arange(NX, dtype="float32") * 30  # 0 to 330: once around the circle
LATITUDES = np.linspace(90, -90, NY, dtype="float32")


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    rng = np.random.default_rng(11)
    ds = xr.Dataset(
        {
            "2m_temperature": (("time", "latitude", "longitude"),
                               rng.standard_normal((NT, NY, NX)).astype("float32")),
            "land_sea_mask": (("latitude", "longitude"), rng.random((NY, NX)).astype("float32")),
        },
        coords={"time": pd.date_range("2001-03-01", periods=NT, freq="6h"),
                "latitude": LATITUDES, "longitude": LONGITUDES},
    )
    ds["longitude"].attrs["units"] = "degrees_east"
    path = tmp_path_factory.mktemp("global") / "global.zarr"
    # Chunks that a wrapped window crosses several of.
    ds.to_zarr(path, zarr_format=3, consolidated=False,
               encoding={"2m_temperature": {"chunks": (2, 4, 5)},
                         "land_sea_mask": {"chunks": (4, 5)}})
    return path, xr.open_zarr(path, consolidated=False).load()


def batches(loader):
    return [{k: v.clone() for k, v in b.items()} for b in loader]


def test_a_selection_wraps_around_a_periodic_longitude(store):
    path, ds = store
    t2m, lsm = ds["2m_temperature"].values, ds["land_sea_mask"].values
    columns = [10, 11, 0, 1, 2]  # 300, 330, 0, 30, 60
    want_t2m, want_lsm = t2m[..., columns], lsm[:, columns]
    for selection in ((300, 60), (-60, 60), (300, 420)):
        loader = zarrstream.Loader(path, ["2m_temperature"], forcings=["land_sea_mask"],
                                   select={"longitude": selection}, shuffle="none", batch_size=NT)
        (b,) = batches(loader)
        assert b["input"].shape == (NT, 2, NY, len(columns)), selection
        np.testing.assert_array_equal(b["input"][:, 0].numpy(), want_t2m)
        np.testing.assert_array_equal(b["input"][:, 1].numpy(), np.broadcast_to(want_lsm, (NT, NY, 5)))
    # A whole period from 90: every longitude once, starting there (as ds.roll would).
    (b,) = batches(zarrstream.Loader(path, ["2m_temperature"], select={"longitude": (90, 450)},
                                     shuffle="none", batch_size=NT))
    np.testing.assert_array_equal(b["input"][:, 0].numpy(), np.roll(t2m, -3, axis=-1))
    # Without the periodic dimension the same selection runs against the coordinate.
    with pytest.raises(zarrstream.ZarrstreamError, match="against the coordinate"):
        zarrstream.Loader(path, ["2m_temperature"], select={"longitude": (300, 60)}, periodic=[])


def test_stats_over_a_wrapping_selection(store, tmp_path):
    path, ds = store
    out = tmp_path / "stats.json"
    proc = run_cli("stats", path, "--vars", "2m_temperature", "--select", "longitude=300:60",
                   "-o", out)
    assert proc.returncode == 0, proc.stderr
    (channel,) = json.loads(out.read_text())["channels"]
    values = ds["2m_temperature"].values[..., [10, 11, 0, 1, 2]].astype("float64")
    assert channel["count"] == values.size
    assert channel["mean"] == pytest.approx(values.mean(), rel=1e-12)
    assert channel["std"] == pytest.approx(values.std(), rel=1e-9)


def wrapping_patches(path, **kwargs):
    options = dict(variables=["2m_temperature"], forcings=["land_sea_mask", "cos_longitude"],
                   sample={"time": 1, "longitude": 5}, stride={"longitude": 3},
                   target_offset={"time": 1}, batch_size=4, shuffle="exact", seed=3)
    options.update(kwargs)
    return zarrstream.Loader(path, **options)


def test_patches_wrap_around_a_periodic_longitude(store):
    path, ds = store
    t2m, lsm = ds["2m_temperature"].values, ds["land_sea_mask"].values
    loader = wrapping_patches(path)
    seen = []
    for b in batches(loader):
        for i, (t, x) in enumerate(b["origin"].tolist()):
            seen.append((t, x))
            cols = (x + np.arange(5)) % NX
            np.testing.assert_array_equal(b["input"][i, 0].numpy(), t2m[t][:, cols])
            np.testing.assert_array_equal(b["input"][i, 1].numpy(), lsm[:, cols])
            want = np.cos(np.deg2rad(LONGITUDES[cols].astype("float64")))
            np.testing.assert_allclose(b["input"][i, 2].numpy(), np.broadcast_to(want, (NY, 5)),
                                       rtol=0, atol=2.0**-23)
            np.testing.assert_array_equal(b["target"][i, 0].numpy(), t2m[t + 1][:, cols])
    # A window from every third longitude, the last ones running on past 330 to 0.
    assert sorted(seen) == [(t, x) for t in range(NT - 1) for x in (0, 3, 6, 9)]
    # periodic=[]: windows stay inside, as on a regional grid.
    inside = {tuple(o) for b in batches(wrapping_patches(path, periodic=[])) for o in b["origin"].tolist()}
    assert inside == {(t, x) for t in range(NT - 1) for x in (0, 3, 6)}


def test_wrapping_patches_under_two_ranks_and_resume(store):
    path, _ = store
    whole = {tuple(o) for b in batches(wrapping_patches(path)) for o in b["origin"].tolist()}
    ranks = [batches(wrapping_patches(path, rank=r, world_size=2)) for r in range(2)]
    shared = [{tuple(o) for b in rb for o in b["origin"].tolist()} for rb in ranks]
    assert shared[0] | shared[1] == whole and not shared[0] & shared[1]
    loader = wrapping_patches(path)
    it = iter(loader)
    next(it)
    state = loader.state_dict()
    rest = batches(loader)
    resumed = wrapping_patches(path)
    resumed.load_state_dict(state)
    again = batches(resumed)
    assert len(rest) == len(again) > 0
    for a, b in zip(rest, again):
        assert all(torch.equal(a[k], b[k]) for k in a)


def latitude_patches(path, padding, **kwargs):
    options = dict(variables=["2m_temperature"], forcings=["land_sea_mask", "cos_latitude"],
                   sample={"time": 1, "latitude": 3}, stride={"latitude": 3},
                   target_offset={"time": 1}, batch_size=5, shuffle="none",
                   patch_padding=padding)
    options.update(kwargs)
    return zarrstream.Loader(path, **options)


def test_reflect_padding_covers_every_latitude(store):
    path, ds = store
    t2m, lsm = ds["2m_temperature"].values, ds["land_sea_mask"].values
    # 7 rows in windows of 3, stride 3: 3 windows need 9 rows, one mirrored row at each edge.
    padded_t2m = np.pad(t2m, ((0, 0), (1, 1), (0, 0)), mode="reflect")
    padded_lsm = np.pad(lsm, ((1, 1), (0, 0)), mode="reflect")
    padded_lat = np.pad(LATITUDES.astype("float64"), 1, mode="reflect")
    origins = []
    for b in batches(latitude_patches(path, "reflect")):
        for i, (t, y) in enumerate(b["origin"].tolist()):
            origins.append((t, y))
            rows = slice(y + 1, y + 4)
            np.testing.assert_array_equal(b["input"][i, 0].numpy(), padded_t2m[t, rows])
            np.testing.assert_array_equal(b["input"][i, 1].numpy(), padded_lsm[rows])
            np.testing.assert_allclose(
                b["input"][i, 2].numpy(),
                np.broadcast_to(np.cos(np.deg2rad(padded_lat[rows]))[:, None], (3, NX)),
                rtol=0, atol=2.0**-23)
            np.testing.assert_array_equal(b["target"][i, 0].numpy(), padded_t2m[t + 1, rows])
    assert sorted(origins) == [(t, y) for t in range(NT - 1) for y in (-1, 2, 5)]
    # Without padding the rows past the last whole window are never sampled.
    plain = {tuple(o) for b in batches(latitude_patches(path, "none")) for o in b["origin"].tolist()}
    assert plain == {(t, y) for t in range(NT - 1) for y in (0, 3)}


def test_padding_with_a_value_fills_every_channel(store):
    path, ds = store
    t2m, lsm = ds["2m_temperature"].values, ds["land_sea_mask"].values
    for value, nan in ((0.5, "keep"), (float("nan"), -7.0)):
        loader = latitude_patches(path, value, nan=nan)
        for b in batches(loader):
            for i, (t, y) in enumerate(b["origin"].tolist()):
                rows = np.arange(y, y + 3)
                inside = (rows >= 0) & (rows < NY)
                fill = -7.0 if math.isnan(value) else value
                for c, field in ((0, t2m[t]), (1, lsm)):
                    got = b["input"][i, c].numpy()
                    np.testing.assert_array_equal(got[inside], field[rows[inside]])
                    assert (got[~inside] == fill).all()
                assert (b["input"][i, 2].numpy()[~inside] == fill).all()
                assert (b["target"][i, 0].numpy()[~inside] == fill).all()
                if nan != "keep":
                    # A NaN padding is missing, like a NaN in the data.
                    assert b["input_mask"][i][:, ~inside].all()
                    assert not b["input_mask"][i][:, inside].any()


@pytest.fixture(scope="module")
def tendency_stats(store, tmp_path_factory):
    path, _ = store
    out = tmp_path_factory.mktemp("global-stats") / "stats.json"
    zarrstream.stats(path, vars=["2m_temperature", "land_sea_mask"], tendencies=[1], output=out)
    return out


def test_padding_goes_over_tendency_targets(store, tendency_stats):
    path, ds = store
    t2m = ds["2m_temperature"].values.astype("float64")
    tendency = json.loads(tendency_stats.read_text())["channels"][0]["tendencies"]["1"]
    loader = latitude_patches(path, 0.5, normalize=tendency_stats, target_normalize="tendencies")
    for b in batches(loader):
        for i, (t, y) in enumerate(b["origin"].tolist()):
            rows = np.arange(y, y + 3)
            inside = (rows >= 0) & (rows < NY)
            got = b["target"][i, 0].numpy()
            assert (got[~inside] == 0.5).all()
            want = ((t2m[t + 1] - t2m[t]) - tendency["mean"]) / tendency["std"]
            np.testing.assert_allclose(got[inside], want[rows[inside]], rtol=2.0**-23, atol=1e-6)


def test_global_grid_errors(store):
    path, _ = store
    with pytest.raises(zarrstream.ConfigError, match="reflect.*pad with a value"):
        latitude_patches(path, "reflect", sample={"time": 1, "latitude": 20},
                         stride={"latitude": 20})
    with pytest.raises(zarrstream.ConfigError, match="patch_padding"):
        latitude_patches(path, "mirror")
    with pytest.raises(zarrstream.ConfigError, match="time dimension cannot wrap"):
        zarrstream.Loader(path, ["2m_temperature"], periodic=["time"])
    with pytest.raises(zarrstream.ZarrstreamError, match="periodic dimension 'level'"):
        zarrstream.Loader(path, ["2m_temperature"], periodic=["level"])


@pytest.mark.gpu
def test_gpu_batches_equal_cpu_batches_on_global_grids(store, tendency_stats):
    path, _ = store
    configurations = [
        lambda **kw: wrapping_patches(path, **kw),
        lambda **kw: latitude_patches(path, "reflect", **kw),
        lambda **kw: latitude_patches(path, 0.5, **kw),
        lambda **kw: latitude_patches(path, float("nan"), nan=-7.0, **kw),
        lambda **kw: latitude_patches(path, 0.5, normalize=tendency_stats,
                                      target_normalize="tendencies", **kw),
        lambda **kw: zarrstream.Loader(path, ["2m_temperature"], forcings=["land_sea_mask"],
                                       select={"longitude": (300, 60)}, batch_size=4, **kw),
    ]
    for make in configurations:
        for dtype in ("float32", "bfloat16"):
            cpu_loader = make(dtype=dtype)
            computed = [c for c, name in enumerate(cpu_loader.channels)
                        if name in ("cos_longitude", "cos_latitude")]
            cpu = batches(cpu_loader)
            gpu = [{k: v.cpu() for k, v in b.items()}
                   for b in make(dtype=dtype, device="cuda", gpu_batches=True)]
            assert len(cpu) == len(gpu) > 0
            for a, b in zip(cpu, gpu):
                for key in a:
                    if key != "input":
                        assert torch.equal(a[key], b[key]), key
                stored = [c for c in range(a["input"].shape[1]) if c not in computed]
                assert torch.equal(a["input"][:, stored], b["input"][:, stored])
                step = 2.0**-23 if dtype == "float32" else 2.0**-8
                np.testing.assert_allclose(b["input"][:, computed].float().numpy(),
                                           a["input"][:, computed].float().numpy(), rtol=0,
                                           atol=step)

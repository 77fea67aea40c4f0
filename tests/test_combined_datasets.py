"""Several stores as one dataset: a join of stores that split the variables (surface, pressure
levels, constants, as ARCO-ERA5 and CDS downloads come), an inner join on the times all hold, and a
concatenation along time of stores that follow each other (one per period). Every store is written
by xarray (`Dataset.to_zarr`); the reference is the loader on the one store they were cut from and
numpy on the values xarray reads (`xr.concat` of the periods). Joins and concatenations are
resolved when the loader opens, so batches, `stats()`, two ranks and resumption are checked as for
one store, and the command line takes the same forms.
"""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import numpy as np
import pytest

xr = pytest.importorskip("xarray")
pd = pytest.importorskip("pandas")
torch = pytest.importorskip("torch")

import zarrstream  # noqa: E402
from conftest import run_cli  # noqa: E402

NT, NY, NX = 16, 6, 8
SPLIT = 7  # the first period's steps: periods cut across the time chunks


def _dataset() -> "xr.Dataset":
    rng = np.random.default_rng(31)
    field = lambda *shape: rng.standard_normal(shape).astype("float32")  # noqa: E731
    return xr.Dataset(
        {
            "2m_temperature": (("time", "latitude", "longitude"), 280 + 10 * field(NT, NY, NX)),
            "temperature": (("time", "level", "latitude", "longitude"), 250 + field(NT, 2, NY, NX)),
            "geopotential": (("time", "level", "latitude", "longitude"),
                             5e4 + 100 * field(NT, 2, NY, NX)),
            "land_sea_mask": (("latitude", "longitude"), rng.random((NY, NX)).astype("float32")),
        },
        coords={
            "time": pd.date_range("2019-12-31T06:00", periods=NT, freq="6h"),
            "level": np.array([500, 850], dtype="int32"),
            "latitude": np.linspace(50, -50, NY).astype("float32"),
            "longitude": (np.arange(NX) * 45.0).astype("float32"),
        },
    )


SURFACE = ["2m_temperature"]
PRESSURE = ["temperature", "geopotential"]
CONSTANTS = ["land_sea_mask"]


def _write(ds, path: Path, zarr_format: int, time_chunk: int) -> Path:
    encoding = {}
    for name, var in ds.data_vars.items():
        chunks = [time_chunk if d == "time" else (1 if d == "level" else 3) for d in var.dims]
        encoding[name] = {"chunks": tuple(chunks)}
    ds.to_zarr(path, zarr_format=zarr_format, consolidated=False, encoding=encoding)
    return path


@pytest.fixture(scope="module")
def stores(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("combined")
    ds = _dataset()
    out = {"ds": ds, "whole": _write(ds, root / "whole.zarr", 3, 4)}
    out["surface"] = _write(ds[SURFACE], root / "surface.zarr", 2, 4)
    out["pressure"] = _write(ds[PRESSURE], root / "pressure.zarr", 3, 4)
    out["constants"] = _write(ds[CONSTANTS], root / "constants.zarr", 3, 4)
    # One store per period, chunked otherwise: xarray encodes each one's times from its own start.
    for part, times in (("a", slice(0, SPLIT)), ("b", slice(SPLIT, NT))):
        piece = ds.isel(time=times)
        out[f"whole_{part}"] = _write(piece, root / f"whole_{part}.zarr", 3, 3)
        out[f"surface_{part}"] = _write(piece[SURFACE], root / f"surface_{part}.zarr", 2, 2)
        out[f"pressure_{part}"] = _write(piece[PRESSURE], root / f"pressure_{part}.zarr", 3, 5)
    return out


KWARGS = dict(variables=["2m_temperature", "temperature@850", "geopotential"],
              forcings=["land_sea_mask", "cos_julian_day", "sin_local_time"],
              sample={"time": 2}, stride={"time": 1}, target_offset={"time": [1, 2]},
              batch_size=3, shuffle="exact", seed=5)


def all_batches(loader):
    return [{k: v.clone() for k, v in b.items()} for b in loader]


def assert_same_batches(a, b, keys=("input", "target", "origin")):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        for key in keys:
            assert torch.equal(x[key], y[key]), key


def s(path) -> str:
    return str(path)


def test_join_equals_the_store_it_was_split_from(stores):
    whole = zarrstream.Loader(stores["whole"], **KWARGS)
    joined = zarrstream.Loader([stores["surface"], stores["pressure"], stores["constants"]],
                               **KWARGS)
    assert joined.channels == whole.channels == [
        "2m_temperature", "temperature@850", "geopotential@500", "geopotential@850",
        "land_sea_mask", "cos_julian_day", "sin_local_time"]
    assert joined.target_channels == whole.target_channels
    assert_same_batches(all_batches(joined), all_batches(whole))
    # One read plan over the stores, counted together (the read counters also count batches
    # prefetched for the next epoch, which differ from run to run: compared loosely).
    a, b = joined.stats(), whole.stats()
    for key in ("samples", "batches", "estimated_read_amplification"):
        assert a[key] == b[key], key
    assert a["chunks_decoded"] >= 3 and a["requests"] >= 3
    assert a["bytes_read"] > 0 and a["bytes_decoded"] > 0 and a["bytes_used"] > 0


def test_join_takes_each_variable_from_the_first_store_holding_it(stores, tmp_path):
    ds = stores["ds"]
    shifted = ds[SURFACE] + 1000
    other = _write(shifted, tmp_path / "other.zarr", 3, 4)
    first = zarrstream.Loader([stores["surface"], other], ["2m_temperature"], batch_size=NT,
                              shuffle="none")
    np.testing.assert_array_equal(next(iter(first))["input"][:, 0].numpy(),
                                  ds["2m_temperature"].values)
    second = zarrstream.Loader([other, stores["surface"]], ["2m_temperature"], batch_size=NT,
                               shuffle="none")
    np.testing.assert_array_equal(next(iter(second))["input"][:, 0].numpy(),
                                  shifted["2m_temperature"].values)


def test_join_refuses_stores_on_other_grids(stores, tmp_path):
    ds = stores["ds"]
    latitude = ds.latitude.values.copy()
    latitude[3] += 1
    moved = _write(ds[SURFACE].assign_coords(latitude=latitude), tmp_path / "moved.zarr", 3, 4)
    with pytest.raises(zarrstream.ConfigError,
                       match=r"dimension 'latitude' differs at index 3: -10 in .*pressure\.zarr, "
                             r"-9 in .*moved\.zarr"):
        zarrstream.Loader([stores["pressure"], moved], ["temperature"])
    later = _write(ds[SURFACE].isel(time=slice(1, None)), tmp_path / "later.zarr", 3, 4)
    with pytest.raises(zarrstream.ConfigError, match=r"dimension 'time' differs at index 0"):
        zarrstream.Loader([stores["pressure"], later], ["temperature"])
    narrow = _write(ds[SURFACE].isel(longitude=slice(0, 6)), tmp_path / "narrow.zarr", 3, 4)
    with pytest.raises(zarrstream.ConfigError,
                       match=r"dimension 'longitude' has 8 labels in .*pressure\.zarr and 6 in "
                             r".*narrow\.zarr"):
        zarrstream.Loader([stores["pressure"], narrow], ["temperature"])
    with pytest.raises(zarrstream.NotFoundError, match=r"no variable or channel 'humidity' in any "
                                                        r"store"):
        zarrstream.Loader([stores["surface"], stores["pressure"]], ["humidity"])


def test_inner_join_takes_the_times_all_stores_hold(stores, tmp_path):
    ds = stores["ds"]
    surface = _write(ds[SURFACE].isel(time=slice(0, 12)), tmp_path / "surface.zarr", 3, 5)
    pressure = _write(ds[PRESSURE].isel(time=slice(2, NT)), tmp_path / "pressure.zarr", 2, 3)
    members = [surface, pressure, stores["constants"]]
    with pytest.raises(zarrstream.ConfigError, match="dimension 'time'"):
        zarrstream.Loader(members, **KWARGS)
    inner = zarrstream.Loader(members, join="inner", **KWARGS)
    # Times 2 to 11 of the whole store; the dataset's indices start at its first common time.
    times = ds.time.values
    whole = zarrstream.Loader(stores["whole"], select={"time": (times[2], times[11])}, **KWARGS)
    a, b = all_batches(inner), all_batches(whole)
    assert_same_batches(a, b, keys=("input", "target"))
    for x, y in zip(a, b):
        assert torch.equal(x["origin"] + 2, y["origin"])
    assert inner.num_samples == 10 - 3


def test_concat_equals_xr_concat_and_the_unsplit_store(stores):
    ds = stores["ds"]
    form = {"concat": [s(stores["whole_a"]), s(stores["whole_b"])], "dim": "time"}
    concat = zarrstream.Loader(form, **KWARGS)
    whole = zarrstream.Loader(stores["whole"], **KWARGS)
    batches = all_batches(concat)
    assert_same_batches(batches, all_batches(whole))
    # Against xarray's concatenation of the periods as the stores hold them.
    periods = [xr.open_zarr(stores[f"whole_{p}"], consolidated=False) for p in "ab"]
    joined = xr.concat(periods, dim="time", data_vars="minimal").load()
    np.testing.assert_array_equal(joined.time.values, ds.time.values)
    spanning = 0
    for b in batches:
        for i, (t0,) in enumerate(b["origin"].tolist()):
            spanning += t0 < SPLIT <= t0 + 3  # the window or a target in each period
            for step in range(2):
                got = b["input"][i, step * 7:step * 7 + 4].numpy()
                at = joined.isel(time=t0 + step)
                want = np.stack([at["2m_temperature"].values, at["temperature"].values[1],
                                 at["geopotential"].values[0], at["geopotential"].values[1]])
                np.testing.assert_array_equal(got, want)
                np.testing.assert_array_equal(b["input"][i, step * 7 + 4].numpy(),
                                              joined["land_sea_mask"].values)
            for j, lead in enumerate((1, 2)):
                at = joined.isel(time=t0 + 1 + lead)
                np.testing.assert_array_equal(b["target"][i, j * 4].numpy(),
                                              at["2m_temperature"].values)
    assert spanning == 3


def test_join_of_concatenations(stores):
    form = [{"concat": [s(stores["surface_a"]), s(stores["surface_b"])]},
            {"concat": [s(stores["pressure_a"]), s(stores["pressure_b"])]},
            s(stores["constants"])]
    combined = zarrstream.Loader(form, frequency="12h", **KWARGS)
    whole = zarrstream.Loader(stores["whole"], frequency="12h", **KWARGS)
    assert_same_batches(all_batches(combined), all_batches(whole))


def test_concat_refuses_gaps_and_overlaps(stores, tmp_path):
    ds = stores["ds"]
    times = ds.time.values
    late = _write(ds.isel(time=slice(SPLIT + 1, NT)), tmp_path / "late.zarr", 3, 3)
    label = lambda t: str(t)[:19]  # noqa: E731
    with pytest.raises(zarrstream.ConfigError,
                       match=rf"gap between .*whole_a\.zarr and .*late\.zarr: .*ends at "
                             rf"{label(times[SPLIT - 1])}, .*starts at {label(times[SPLIT + 1])}, "
                             rf"and neither holds {label(times[SPLIT])}"):
        zarrstream.Loader({"concat": [s(stores["whole_a"]), s(late)]}, ["2m_temperature"])
    early = _write(ds.isel(time=slice(SPLIT - 1, NT)), tmp_path / "early.zarr", 3, 3)
    with pytest.raises(zarrstream.ConfigError,
                       match=rf"whole_a\.zarr and .*early\.zarr overlap: .*runs to "
                             rf"{label(times[SPLIT - 1])} and .*starts at "
                             rf"{label(times[SPLIT - 1])}"):
        zarrstream.Loader({"concat": [s(stores["whole_a"]), s(early)]}, ["2m_temperature"])
    with pytest.raises(zarrstream.ConfigError, match="overlap"):
        zarrstream.Loader({"concat": [s(stores["whole_b"]), s(stores["whole_a"])]},
                          ["2m_temperature"])
    with pytest.raises(zarrstream.ConfigError, match="unknown key \"dims\""):
        zarrstream.Loader({"concat": [s(stores["whole_a"])], "dims": "time"})


def test_two_ranks_and_resumption_across_stores(stores):
    form = [{"concat": [s(stores["surface_a"]), s(stores["surface_b"])]},
            {"concat": [s(stores["pressure_a"]), s(stores["pressure_b"])]},
            s(stores["constants"])]
    kwargs = dict(KWARGS, batch_size=2, world_size=2)
    origins = []
    for rank in range(2):
        whole = all_batches(zarrstream.Loader(stores["whole"], rank=rank, **kwargs))
        batches = all_batches(zarrstream.Loader(form, rank=rank, **kwargs))
        assert_same_batches(batches, whole)
        origins += [o for b in batches for (o,) in b["origin"].tolist()]
        first = zarrstream.Loader(form, rank=rank, **kwargs)
        it = iter(first)
        for _ in range(2):
            next(it)
        resumed = zarrstream.Loader(form, rank=rank, **kwargs)
        resumed.load_state_dict(first.state_dict())
        assert_same_batches(all_batches(resumed), batches[2:])
        # Pickled, the loader opens the same stores again at the same position.
        again = pickle.loads(pickle.dumps(first))
        assert_same_batches(all_batches(again), batches[2:])
    # 13 samples: 7 per rank, the last one repeated to even them out.
    assert len(origins) == 14 and sorted(set(origins)) == list(range(NT - 3))


def test_stats_and_bench_take_several_stores(stores, tmp_path):
    select = "time=2019-12-31:2020-01-02"
    whole, joined, concat = (tmp_path / f"{n}.json" for n in ("whole", "joined", "concat"))
    variables = "2m_temperature,temperature,land_sea_mask"
    r = run_cli("stats", stores["whole"], "--vars", variables, "--select", select, "-o", whole)
    assert r.returncode == 0, r.stderr
    r = run_cli("stats", stores["surface"], stores["pressure"], stores["constants"], "--vars",
                variables, "--select", select, "-o", joined)
    assert r.returncode == 0, r.stderr
    # On the command line a form is a JSON object (several URLs are the join of a list).
    form = json.dumps({"join": [{"concat": [s(stores["surface_a"]), s(stores["surface_b"])]},
                                {"concat": [s(stores["pressure_a"]), s(stores["pressure_b"])]},
                                s(stores["constants"])]})
    r = run_cli("stats", form, "--vars", variables, "--select", select, "-o", concat)
    assert r.returncode == 0, r.stderr
    expected = json.loads(whole.read_text())["channels"]
    for path in (joined, concat):
        got = json.loads(path.read_text())["channels"]
        assert [c["name"] for c in got] == [c["name"] for c in expected]
        for g, e in zip(got, expected):
            assert g["count"] == e["count"]
            for key in ("mean", "std", "min", "max"):
                np.testing.assert_allclose(g[key], e[key], rtol=1e-12, err_msg=g["name"])

    report = tmp_path / "bench.json"
    r = run_cli("bench", stores["surface"], stores["pressure"], "--variables",
                "2m_temperature,temperature@850", "--target-offset", "time=1", "--batch-size", "2",
                "--steps", "3", "--json", report)
    assert r.returncode == 0, r.stderr
    measured = json.loads(report.read_text())
    assert measured["batches"] == 3 and measured["chunks_decoded"] > 0
    r = run_cli("bench", form, "--variables", "2m_temperature", "--steps", "2")
    assert r.returncode == 0, r.stderr
    r = run_cli("bench", stores["surface"], stores["pressure"], "--join", "outer")
    assert r.returncode != 0


@pytest.mark.gpu
def test_gpu_batches_equal_cpu_batches_across_stores(stores):
    # Joins and concatenations are resolved in the read plan: the GPU path reads each chunk from
    # its store as the CPU path does.
    form = [{"concat": [s(stores["surface_a"]), s(stores["surface_b"])]},
            {"concat": [s(stores["pressure_a"]), s(stores["pressure_b"])]},
            s(stores["constants"])]
    kwargs = dict(KWARGS, sample={"time": 2, "latitude": 3, "longitude": 4},
                  stride={"time": 1, "latitude": 1, "longitude": 2}, nan=0.0, dtype="bfloat16",
                  missing_dates=[stores["ds"].time.values[9]])
    cpu = all_batches(zarrstream.Loader(form, **kwargs))
    gpu = [{k: v.cpu() for k, v in b.items()}
           for b in zarrstream.Loader(form, device="cuda", gpu_batches=True, **kwargs)]
    assert len(cpu) == len(gpu)
    for a, b in zip(cpu, gpu):
        for key in a:
            assert torch.equal(a[key], b[key]), key

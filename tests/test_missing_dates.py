"""Missing dates, as anemoi-datasets' `missing_dates`: time steps no sample may touch, as input or
as target, named by label or detected as steps at which a channel has no value in its box: chunks
a store does not hold, inner chunks a shard leaves empty, values all NaN (or all _FillValue) inside
stored chunks. Stores written by xarray and zarr-python, chunks deleted as a gap in a real archive
leaves them; the reference is the loader's batches without missing dates, filtered by numpy's
answer to which samples touch a missing step. Counts, two ranks and resumption are exact, and the
labels `detect_missing_dates` returns are numpy's.
"""

from __future__ import annotations

import json
import pickle
import shutil

import numpy as np
import pytest

xr = pytest.importorskip("xarray")
torch = pytest.importorskip("torch")

import zarrstream  # noqa: E402
from conftest import run_cli  # noqa: E402
from test_combined_datasets import (  # noqa: E402
    KWARGS, NT, SPLIT, _dataset, _write, all_batches, assert_same_batches)

WINDOW, LEADS = 2, (1, 2)  # KWARGS' sample and target_offset


def touched(t0: int) -> set[int]:
    return set(range(t0, t0 + WINDOW)) | {t0 + WINDOW - 1 + lead for lead in LEADS}


def kept_origins(missing: set[int]) -> list[int]:
    return [t0 for t0 in range(NT - WINDOW - max(LEADS) + 1) if not touched(t0) & missing]


def delete_step(store, variable: str, t: int, every: bool = True) -> None:
    """Deletes the chunks of `variable` at time step `t` (chunked one step per chunk): all of
    them, or one only."""
    step = store / variable / "c" / str(t)
    assert step.is_dir()
    if every:
        shutil.rmtree(step)
    else:
        victim = next(p for p in step.rglob("*") if p.is_file())
        victim.unlink()


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    root = tmp_path_factory.mktemp("missing")
    ds = _dataset()
    out = {"ds": ds, "whole": _write(ds, root / "whole.zarr", 3, 1)}
    gappy = _write(ds, root / "gappy.zarr", 3, 1)
    delete_step(gappy, "temperature", 5)          # a whole step of one variable: missing
    delete_step(gappy, "2m_temperature", 9, every=False)  # part of a field: not a missing date
    out["gappy"] = gappy
    a = _write(ds.isel(time=slice(0, SPLIT)), root / "a.zarr", 3, 1)
    b = _write(ds.isel(time=slice(SPLIT, NT)), root / "b.zarr", 3, 1)
    delete_step(b, "geopotential", 10 - SPLIT)    # the concatenation's step 10
    out["a"], out["b"] = a, b
    return out


def by_origin(batches) -> dict:
    return {o: {k: b[k][i] for k in ("input", "target")}
            for b in batches for i, (o,) in enumerate(b["origin"].tolist())}


def check_kept(batches, reference, missing: set[int]) -> None:
    got = by_origin(batches)
    assert sorted(got) == kept_origins(missing)
    for origin, sample in got.items():
        for key in ("input", "target"):
            torch.testing.assert_close(sample[key], reference[origin][key], rtol=0, atol=0,
                                       equal_nan=True, msg=f"{origin} {key}")


def test_missing_dates_by_label_leave_out_every_sample_touching_them(stores):
    ds = stores["ds"]
    times = ds.time.values
    reference = by_origin(all_batches(zarrstream.Loader(stores["whole"], **KWARGS)))
    loader = zarrstream.Loader(stores["whole"], missing_dates=[times[5], str(times[9])[:19]],
                               **KWARGS)
    missing = {5, 9}
    assert loader.num_samples == len(kept_origins(missing)) == 5  # origins 0, 1, 10, 11, 12
    check_kept(all_batches(loader), reference, missing)
    assert loader.stats()["missing_date_samples"] == NT - 3 - 5
    # A date names its whole period: 2020-01-01 is steps 3 to 6.
    day = zarrstream.Loader(stores["whole"], missing_dates=["2020-01-01"], **KWARGS)
    check_kept(all_batches(day), reference, {3, 4, 5, 6})
    with pytest.raises(zarrstream.NotFoundError, match="2021-01-01"):
        zarrstream.Loader(stores["whole"], missing_dates=["2021-01-01"], **KWARGS)
    with pytest.raises(zarrstream.ConfigError, match="every sample touches a missing date"):
        zarrstream.Loader(stores["whole"], missing_dates=list(times), **KWARGS)


def test_detected_missing_dates_are_steps_without_chunks(stores):
    reference = by_origin(all_batches(zarrstream.Loader(stores["gappy"], **KWARGS)))
    detected = zarrstream.Loader(stores["gappy"], missing_dates="detect", **KWARGS)
    # Step 5 of temperature has no chunk; step 9 of 2m_temperature lost one of six: still read
    # (its missing cells are fill values), so only the samples touching step 5 are left out.
    check_kept(all_batches(detected), reference, {5})
    assert detected.stats()["missing_date_samples"] == NT - 3 - len(kept_origins({5}))
    # Variables not read are not looked at.
    surface = zarrstream.Loader(stores["gappy"], ["2m_temperature"], missing_dates="detect")
    assert surface.stats()["missing_date_samples"] == 0
    with pytest.raises(zarrstream.ConfigError, match="missing_dates='all'"):
        zarrstream.Loader(stores["gappy"], missing_dates="all", **KWARGS)


def test_detected_across_concatenated_stores_with_two_ranks_and_resumption(stores):
    form = {"concat": [str(stores["a"]), str(stores["b"])]}
    reference = by_origin(all_batches(zarrstream.Loader(stores["whole"], **KWARGS)))
    kwargs = dict(KWARGS, batch_size=2, world_size=2, missing_dates="detect")
    missing = {10}
    seen = []
    for rank in range(2):
        batches = all_batches(zarrstream.Loader(form, rank=rank, **kwargs))
        seen += batches
        first = zarrstream.Loader(form, rank=rank, **kwargs)
        it = iter(first)
        next(it)
        resumed = zarrstream.Loader(form, rank=rank, **kwargs)
        resumed.load_state_dict(first.state_dict())
        assert_same_batches(all_batches(resumed), batches[1:])
    origins = [o for b in seen for (o,) in b["origin"].tolist()]
    kept = kept_origins(missing)
    assert len(kept) == 9
    # 9 samples on two ranks: 5 each, the first repeated once as padding.
    assert len(origins) == 10 and sorted(set(origins)) == kept
    check_kept(seen, reference, missing)
    # Without detection the fill values are read like any value: NaN where xarray shows NaN.
    plain = zarrstream.Loader(form, **KWARGS)
    values = xr.open_zarr(stores["b"], consolidated=False)["geopotential"].isel(time=10 - SPLIT)
    assert np.isnan(values.values).all()
    assert plain.num_samples == NT - 3


# -- Steps without values inside stored chunks: all NaN, all _FillValue, empty inner chunks -------

NAN_STEP, PARTLY_NAN_STEP, FILL_STEP, EMPTY_STEP = 4, 8, 11, 13
READ = ["2m_temperature", "temperature@850", "geopotential"]  # KWARGS' time-dependent channels


def _holey_dataset():
    """_dataset() with 2m_temperature all NaN at NAN_STEP and NaN but for one cell at
    PARTLY_NAN_STEP, geopotential@500 all NaN at FILL_STEP (written as the int16 _FillValue), and
    an int32 "flags" variable of zeros (its fill value) at EMPTY_STEP."""
    ds = _dataset()
    t2m = ds["2m_temperature"].values.copy()
    t2m[NAN_STEP] = np.nan
    t2m[PARTLY_NAN_STEP] = np.nan
    t2m[PARTLY_NAN_STEP, 5, 7] = 280.0
    z = ds["geopotential"].values.copy()
    z[FILL_STEP, 0] = np.nan
    flags = np.ones(ds["2m_temperature"].shape, dtype="int32")
    flags[EMPTY_STEP] = 0
    return ds.assign(**{"2m_temperature": (ds["2m_temperature"].dims, t2m),
                        "geopotential": (ds["geopotential"].dims, z),
                        "flags": (ds["2m_temperature"].dims, flags)})


def _write_holey(ds, path, sharded: bool):
    """Chunks of 4 steps (so gaps lie inside stored chunks); geopotential CF-packed int16;
    sharded: inner chunks of one step in shards of 4, which zarr-python leaves empty where they
    hold only the fill value."""
    encoding = {}
    for name, var in ds.data_vars.items():
        spatial = [{"level": 1, "latitude": 3, "longitude": 4}[d] for d in var.dims[1:]]
        if sharded and "time" in var.dims:
            encoding[name] = {"chunks": (1, *spatial), "shards": (4, *[
                ds.sizes[d] for d in var.dims[1:]])}
        else:
            encoding[name] = {"chunks": (4, *spatial) if "time" in var.dims else tuple(
                {"latitude": 3, "longitude": 4}[d] for d in var.dims)}
    encoding["geopotential"].update(dtype="int16", scale_factor=0.1, add_offset=5e4,
                                    _FillValue=-32767)
    ds.to_zarr(path, zarr_format=3, consolidated=False, encoding=encoding)
    return path


def _reference_missing(store, channels) -> set[int]:
    """numpy's missing steps: those where a channel (a variable at one level; a variable with
    levels is one channel per level), as xarray decodes it, is all NaN."""
    opened = xr.open_zarr(store, consolidated=False)
    missing = set()
    for channel in channels:
        name, _, level = channel.partition("@")
        values = opened[name]
        levels = [int(level)] if level else (
            values.level.values.tolist() if "level" in values.dims else [None])
        for at in levels:
            field = values if at is None else values.sel(level=at)
            field = field.values.astype("float64")
            nan = np.isnan(field).reshape(field.shape[0], -1).all(axis=1)
            missing |= set(np.flatnonzero(nan).tolist())
    return missing


@pytest.fixture(scope="module")
def holey(tmp_path_factory):
    root = tmp_path_factory.mktemp("holey")
    ds = _holey_dataset()
    return {"ds": ds, "plain": _write_holey(ds, root / "plain.zarr", sharded=False),
            "sharded": _write_holey(ds, root / "sharded.zarr", sharded=True)}


def assert_same_with_nan(a, b) -> None:
    """assert_same_batches for batches with NaN in them (equal where both are NaN)."""
    assert len(a) == len(b)
    for x, y in zip(a, b):
        for key in ("input", "target", "origin"):
            torch.testing.assert_close(x[key], y[key], rtol=0, atol=0, equal_nan=True, msg=key)


def _labels(ds, steps) -> list[str]:
    return [str(ds.time.values[t])[:19] for t in sorted(steps)]


@pytest.mark.parametrize("kind", ["plain", "sharded"])
def test_detected_steps_are_all_nan_or_fill_values_inside_stored_chunks(holey, kind):
    store = holey[kind]
    missing = _reference_missing(store, READ)
    # Step 8 keeps one value: not missing; geopotential@500's fill values decode to NaN.
    assert missing == {NAN_STEP, FILL_STEP}
    reference = by_origin(all_batches(zarrstream.Loader(store, **KWARGS)))
    detected = zarrstream.Loader(store, missing_dates="detect", **KWARGS)
    assert detected.num_samples == len(kept_origins(missing))
    check_kept(all_batches(detected), reference, missing)
    assert detected.stats()["missing_date_samples"] == NT - 3 - len(kept_origins(missing))
    # The labels, found once, leave out the same samples without the pass.
    labels = zarrstream.detect_missing_dates(store, READ, forcings=KWARGS["forcings"])
    assert labels == _labels(holey["ds"], missing)
    assert detected.missing_dates == labels
    saved = zarrstream.Loader(store, missing_dates=labels, **KWARGS)
    assert_same_with_nan(all_batches(saved), all_batches(
        zarrstream.Loader(store, missing_dates="detect", **KWARGS)))
    # decode_cf=False reads geopotential's stored integers: never NaN.
    assert zarrstream.detect_missing_dates(store, READ, decode_cf=False) == _labels(
        holey["ds"], {NAN_STEP})


def test_empty_inner_chunks_of_stored_shards_are_missing(holey):
    store = holey["sharded"]
    # The shard of steps 12 to 15 is stored; step 13's inner chunks are not (zeros, the fill
    # value): xarray reads zeros there, no NaN, yet the step has no stored value.
    shard = store / "flags" / "c" / str(EMPTY_STEP // 4) / "0" / "0"
    assert shard.is_file()
    assert (xr.open_zarr(store, consolidated=False)["flags"].isel(time=EMPTY_STEP) == 0).all()
    assert zarrstream.detect_missing_dates(store, "flags") == _labels(holey["ds"], {EMPTY_STEP})
    # Unsharded, the zeros are a stored chunk's values among other steps': no missing date.
    assert zarrstream.detect_missing_dates(holey["plain"], "flags") == []
    missing = {NAN_STEP, FILL_STEP, EMPTY_STEP}
    kwargs = dict(KWARGS, variables=READ + ["flags"])
    reference = by_origin(all_batches(zarrstream.Loader(store, **kwargs)))
    detected = zarrstream.Loader(store, missing_dates="detect", **kwargs)
    check_kept(all_batches(detected), reference, missing)
    assert detected.stats()["missing_date_samples"] == NT - 3 - len(kept_origins(missing))


def test_detection_with_two_ranks_and_resumption_is_exact(holey):
    store = holey["sharded"]
    missing = {NAN_STEP, FILL_STEP}
    reference = by_origin(all_batches(zarrstream.Loader(store, **KWARGS)))
    kwargs = dict(KWARGS, batch_size=2, world_size=2, missing_dates="detect")
    seen = []
    for rank in range(2):
        batches = all_batches(zarrstream.Loader(store, rank=rank, **kwargs))
        seen += batches
        first = zarrstream.Loader(store, rank=rank, **kwargs)
        it = iter(first)
        next(it)
        resumed = zarrstream.Loader(store, rank=rank, **kwargs)
        resumed.load_state_dict(first.state_dict())
        assert_same_with_nan(all_batches(resumed), batches[1:])
    origins = sorted({o for b in seen for (o,) in b["origin"].tolist()})
    assert origins == kept_origins(missing)
    check_kept(seen, reference, missing)


def test_a_pickled_detecting_loader_carries_the_dates_it_found(holey):
    loader = zarrstream.Loader(holey["sharded"], **dict(KWARGS, missing_dates="detect"))
    copy = pickle.loads(pickle.dumps(loader))
    assert loader.missing_dates == _labels(holey["ds"], {NAN_STEP, FILL_STEP})
    assert copy._arguments["missing_dates"] == loader.missing_dates  # not detected again
    assert copy.missing_dates == loader.missing_dates
    assert_same_with_nan(all_batches(copy), all_batches(loader))


def test_detect_function_takes_every_dataset_form(stores, holey, tmp_path):
    ds = stores["ds"]
    form = {"concat": [str(stores["a"]), str(stores["b"])], "dim": "time"}
    assert zarrstream.detect_missing_dates(form, READ) == _labels(ds, {10})
    # Variables not read are not looked at; a selection leaves the rest out.
    assert zarrstream.detect_missing_dates(form, "2m_temperature") == []
    assert zarrstream.detect_missing_dates(
        form, READ, select={"time": (ds.time.values[11], None)}) == []
    # A join: each variable from its own store.
    surface = _write(holey["ds"][["2m_temperature"]], tmp_path / "surface.zarr", 3, 4)
    pressure = _write(holey["ds"][["temperature", "geopotential"]], tmp_path / "pressure.zarr", 2, 4)
    assert zarrstream.detect_missing_dates([surface, pressure], READ) == _labels(
        holey["ds"], {NAN_STEP, FILL_STEP})
    assert zarrstream.detect_missing_dates(stores["gappy"], READ) == _labels(ds, {5})
    assert zarrstream.detect_missing_dates(holey["plain"], READ, num_threads=1) == _labels(
        holey["ds"], {NAN_STEP, FILL_STEP})


def test_bench_prints_and_reports_the_detected_dates(holey, tmp_path):
    report = tmp_path / "bench.json"
    proc = run_cli("bench", holey["sharded"], "--variables", ",".join(READ), "--sample", "time=2",
                   "--target-offset", "time=1", "--missing-dates", "detect", "--steps", "2",
                   "--json", report)
    assert proc.returncode == 0, proc.stderr
    labels = _labels(holey["ds"], {NAN_STEP, FILL_STEP})
    assert "missing dates: 2 step(s)" in proc.stdout, proc.stdout
    assert all(label in proc.stdout for label in labels)
    assert json.loads(report.read_text())["missing_dates"] == labels
    # Given back as labels, the same samples are left out.
    again = run_cli("bench", holey["sharded"], "--variables", ",".join(READ), "--sample",
                    "time=2", "--target-offset", "time=1", "--missing-dates", ",".join(labels),
                    "--steps", "2", "--json", report)
    assert again.returncode == 0, again.stderr
    assert json.loads(report.read_text())["missing_dates"] == labels


def test_detect_function_errors_are_clear(stores):
    with pytest.raises(zarrstream.NotFoundError, match="no_such_variable"):
        zarrstream.detect_missing_dates(stores["whole"], "no_such_variable")
    with pytest.raises(zarrstream.ConfigError, match="no time dimension"):
        zarrstream.detect_missing_dates(stores["whole"], "land_sea_mask")
    with pytest.raises(zarrstream.ConfigError, match="join="):
        zarrstream.detect_missing_dates(stores["whole"], READ, join="outer")
    with pytest.raises(zarrstream.ZarrstreamError, match="does-not-exist"):
        zarrstream.detect_missing_dates(stores["whole"].parent / "does-not-exist.zarr", READ)

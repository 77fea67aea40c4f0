"""Missing dates, as anemoi-datasets' `missing_dates`: time steps no sample may touch, as input or
as target, named by label or detected as steps whose chunks a store does not hold (fill values
only). Stores written by xarray, chunks deleted as a gap in a real archive leaves them; the
reference is the loader's batches without missing dates, filtered by numpy's answer to which
samples touch a missing step. Counts, two ranks and resumption are exact.
"""

from __future__ import annotations

import shutil

import numpy as np
import pytest

xr = pytest.importorskip("xarray")
torch = pytest.importorskip("torch")

import zarrstream  # noqa: E402
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

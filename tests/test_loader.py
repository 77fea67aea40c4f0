"""zarrstream.Loader against a numpy reference built from zarr-python reads of the same store.

The fixture group is written by zarr-python: variables with and without levels, edge chunks,
chunks holding several levels, a float64 and an int16 variable, NaNs, a chunk never written, a
descending latitude and a CF time coordinate. Every batch the loader yields is compared value by
value with the reference for the batch's own origins, so a batch with the right values for the
wrong samples fails too.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
import zarr
from zarr.codecs import ZstdCodec

torch = pytest.importorskip("torch")

import zarrstream  # noqa: E402
from conftest import run_cli  # noqa: E402

NT, NL, NY, NX = 30, 4, 9, 14
LEVELS = np.array([250, 500, 700, 850])
UNITS = "hours since 1979-01-01 00:00:00"
CALENDAR = "proleptic_gregorian"


@pytest.fixture(scope="module")
def era5(tmp_path_factory):
    """(path, data): an ERA5-like zarr v3 group written by zarr-python, and its values."""
    path = tmp_path_factory.mktemp("loader") / "era5.zarr"
    rng = np.random.default_rng(7)
    g = zarr.open_group(str(path), mode="w", zarr_format=3)
    t = g.create_array("time", shape=(NT,), chunks=(100,), dtype="int64", dimension_names=["time"],
                       attributes={"units": UNITS, "calendar": CALENDAR})
    t[...] = 6 * np.arange(NT, dtype="int64")
    lv = g.create_array("level", shape=(NL,), dtype="int64", dimension_names=["level"])
    lv[...] = LEVELS
    la = g.create_array("latitude", shape=(NY,), dtype="float32", dimension_names=["latitude"])
    la[...] = np.linspace(90, -90, NY).astype("float32")
    lo = g.create_array("longitude", shape=(NX,), dtype="float32", dimension_names=["longitude"])
    lo[...] = np.arange(NX, dtype="float32") * (360 / NX)

    data = {}
    t2m = (280 + 20 * rng.standard_normal((NT, NY, NX))).astype("float32")
    t2m[rng.random(t2m.shape) < 0.05] = np.nan
    data["2m_temperature"] = t2m
    temperature = (250 + 10 * rng.standard_normal((NT, NL, NY, NX))).astype("float32")
    data["temperature"] = temperature
    data["geopotential"] = 1e5 + LEVELS[None, :, None, None] + rng.standard_normal((NT, NL, NY, NX))
    data["land_sea_mask_index"] = rng.integers(-300, 300, (NT, NY, NX)).astype("int16")
    dims3 = ["time", "latitude", "longitude"]
    dims4 = ["time", "level", "latitude", "longitude"]
    for name, chunks in [
        ("2m_temperature", (4, 5, 6)),  # edge chunks along every dimension
        ("temperature", (3, 2, 9, 14)),  # a chunk holds two levels
        ("geopotential", (7, 1, 4, 14)),
        ("land_sea_mask_index", (30, 9, 14)),
    ]:
        arr = data[name]
        a = g.create_array(name, shape=arr.shape, chunks=chunks, dtype=arr.dtype, fill_value=0,
                           dimension_names=dims4 if arr.ndim == 4 else dims3,
                           compressors=ZstdCodec(level=1))
        if name == "temperature":
            # Leave the chunk at time 6..8, levels 2..3 unwritten: it reads as the fill value 0.
            a[0:6] = arr[0:6]
            a[9:] = arr[9:]
            a[6:9, 0:2] = arr[6:9, 0:2]
            data[name] = arr.copy()
            data[name][6:9, 2:4] = 0
        else:
            a[...] = arr
    zarr.consolidate_metadata(str(path))
    return path, data


def channel_fields(data, spec: str) -> list[np.ndarray]:
    """The (time, lat, lon) fields a variable spec names, in channel order."""
    name, _, levels = spec.partition("@")
    arr = data[name]
    if arr.ndim == 3:
        return [arr]
    picked = range(NL) if levels in ("", "*") else [list(LEVELS).index(int(x)) for x in levels.split(",")]
    return [arr[:, i] for i in picked]


def reference(data, specs, origin_rows, sample_dims, window, target_specs=None, target_steps=(),
              dtype="float32"):
    """(input, target) numpy batches for `origin_rows` (one row per sample): the values as `dtype`
    (float32: as the batch holds them), held in float64."""
    fields = [f for s in specs for f in channel_fields(data, s)]
    tfields = [f for s in (target_specs or []) for f in channel_fields(data, s)]
    tw = window.get("time", 1)
    ins, tgs = [], []
    for row in origin_rows:
        o = dict(zip(sample_dims, (int(x) for x in row)))
        t0 = o["time"]
        ys = slice(o.get("latitude", 0), o.get("latitude", 0) + window.get("latitude", NY))
        xs = slice(o.get("longitude", 0), o.get("longitude", 0) + window.get("longitude", NX))
        ins.append(np.stack([f[t0 + s, ys, xs] for s in range(tw) for f in fields]).astype(dtype))
        if tfields:
            tgs.append(np.stack([f[t0 + tw - 1 + k, ys, xs] for k in target_steps for f in tfields])
                       .astype(dtype))
    return np.stack(ins).astype("float64"), (np.stack(tgs).astype("float64") if tgs else None)


def check(got: torch.Tensor, want: np.ndarray, rtol=0.0, atol=0.0):
    g = got.to(torch.float64).numpy()
    assert g.shape == want.shape
    np.testing.assert_allclose(g, want, rtol=rtol, atol=atol, equal_nan=True)


VARS = ["2m_temperature", "temperature@500,850", "geopotential", "land_sea_mask_index"]


def test_every_batch_equals_the_reference_and_each_sample_comes_once(era5):
    path, data = era5
    loader = zarrstream.Loader(path, VARS, target_offset={"time": 1}, batch_size=4, seed=3,
                               num_threads=2, prefetch=3)
    assert loader.channels == ["2m_temperature", "temperature@500", "temperature@850",
                               "geopotential@250", "geopotential@500", "geopotential@700",
                               "geopotential@850", "land_sea_mask_index"]
    assert loader.target_channels == loader.channels
    assert loader.sample_dims == ["time"]
    assert loader.spatial_dims == ["latitude", "longitude"]
    assert len(loader) == 8 and loader.num_samples == NT - 1
    seen = []
    for batch in loader:
        origins = batch["origin"].numpy()
        assert batch["origin"].dtype == torch.int64
        want_in, want_tg = reference(data, VARS, origins, ["time"], {}, VARS, [1])
        check(batch["input"], want_in)
        check(batch["target"], want_tg)
        assert batch["input"].dtype == torch.float32
        seen.extend(origins[:, 0].tolist())
    # 29 samples, one rank: every sample once (the last batch is short, not padded).
    assert sorted(seen) == list(range(NT - 1))
    assert seen != sorted(seen)  # shuffled
    stats = loader.stats()
    assert stats["batches"] == 8 and stats["samples"] == NT - 1
    assert stats["chunks_decoded"] > 0 and stats["bytes_read"] > 0
    assert stats["missing_chunks"] >= 1  # the unwritten temperature chunk
    assert sum(stats["wait_histogram_us_log2"]) == 8


def test_time_window_is_time_major_and_leads_are_lead_major(era5):
    path, data = era5
    specs = ["2m_temperature", "temperature@250"]
    loader = zarrstream.Loader(path, specs, sample={"time": 3}, stride={"time": 2},
                               target_offset={"time": [1, 4]}, target_variables=["2m_temperature"],
                               batch_size=5, shuffle="none")
    assert loader.input_shape == (5, 6, NY, NX)
    assert loader.target_shape == (5, 2, NY, NX)
    origins = []
    for batch in loader:
        o = batch["origin"].numpy()
        want_in, want_tg = reference(data, specs, o, ["time"], {"time": 3}, ["2m_temperature"], [1, 4])
        check(batch["input"], want_in)
        check(batch["target"], want_tg)
        origins.extend(o[:, 0].tolist())
    # origins t = 0, 2, 4, ... while t + 3 + 4 <= 30
    assert origins == list(range(0, NT - 3 - 4 + 1, 2))


def test_overlapping_patches_reuse_cached_chunks(era5):
    path, data = era5
    window = {"time": 1, "latitude": 4, "longitude": 6}
    # periodic=[]: windows inside the (global) grid, as `reference` cuts them; wrapping windows
    # are tests/test_global_grids.py's.
    loader = zarrstream.Loader(path, ["temperature"], sample=window,
                               stride={"latitude": 2, "longitude": 3}, batch_size=16, shuffle="block",
                               seed=1, periodic=[])
    assert loader.sample_dims == ["time", "latitude", "longitude"]
    n = 0
    for batch in loader:
        o = batch["origin"].numpy()
        want_in, _ = reference(data, ["temperature"], o, loader.sample_dims, window)
        check(batch["input"], want_in)
        n += len(o)
    assert n == loader.num_samples == NT * 3 * 3
    stats = loader.stats()
    assert stats["cache_hits"] > 0
    assert stats["chunk_refs"] > stats["chunks_decoded"]


def test_select_takes_ranges_slices_lists_and_dates_of_any_kind(era5):
    """Every form of a `select` value reaches the core as the same label selection: strings,
    datetime/date, numpy datetime64 (at its own precision), open ends as None or ""."""
    import datetime as dt

    path, _ = era5
    base = zarrstream.Loader(path, ["2m_temperature"], shuffle="none",
                             select={"time": ("1979-01-02", "1979-01-03"), "latitude": (60, -30)})
    assert base.num_samples == 8 and base.input_shape[2] < NY
    same = [
        {"time": slice("1979-01-02", "1979-01-03"), "latitude": slice(60.0, -30)},
        {"time": (dt.date(1979, 1, 2), dt.date(1979, 1, 3)), "latitude": (np.float32(60), -30)},
        {"time": (np.datetime64("1979-01-02"), np.datetime64("1979-01-03")), "latitude": (60, -30)},
        {"time": (dt.datetime(1979, 1, 2), dt.datetime(1979, 1, 3, 18)), "latitude": (60, -30)},
        {"time": (np.datetime64("1979-01-02T00:00:00.000000000"),
                  np.datetime64("1979-01-03T18", "h")), "latitude": (60, -30)},
        {"time": (dt.datetime(1979, 1, 2, tzinfo=dt.timezone.utc), "1979-01-03"), "latitude": (60, -30)},
    ]
    for select in same:
        loader = zarrstream.Loader(path, ["2m_temperature"], shuffle="none", select=select)
        assert (loader.num_samples, loader.input_shape) == (base.num_samples, base.input_shape), select
    assert zarrstream.Loader(path, ["2m_temperature"], select={"time": (None, "1979-01-01")}).num_samples == 4
    assert zarrstream.Loader(path, ["2m_temperature"], select={"time": ("", "1979-01-01")}).num_samples == 4
    assert zarrstream.Loader(path, ["2m_temperature"], select={"time": "1979-01-02"}).num_samples == 4
    assert zarrstream.Loader(path, ["2m_temperature"],
                             select={"time": [np.datetime64("1979-01-02T06", "h"), "1979-01-02T12"]}).num_samples == 2
    with pytest.raises(zarrstream.ConfigError, match=r"select\['time'\]: .* has a fraction of a second"):
        zarrstream.Loader(path, ["2m_temperature"], select={"time": dt.datetime(1979, 1, 2, 0, 0, 0, 500)})
    with pytest.raises(zarrstream.ConfigError, match=r"select\['time'\]: an empty list selects nothing"):
        zarrstream.Loader(path, ["2m_temperature"], select={"time": []})
    with pytest.raises(zarrstream.ConfigError, match=r"select\['time'\]: None is not a label"):
        zarrstream.Loader(path, ["2m_temperature"], select={"time": [None]})
    with pytest.raises(ValueError, match="a slice with a step"):
        zarrstream.Loader(path, ["2m_temperature"], select={"time": slice("1979", "1980", 2)})
    with pytest.raises(ValueError, match=r"a range is a \(start, stop\) pair"):
        zarrstream.Loader(path, ["2m_temperature"], select={"time": ("1979", "1980", "1981")})


def test_shuffle_and_cpu_decode_share_parse_once_in_the_core(era5):
    path, _ = era5
    for shuffle, name in ((True, "exact"), (False, "none"), ("block", "block")):
        loader = zarrstream.Loader(path, ["2m_temperature"], shuffle=shuffle)
        assert loader._options.shuffle == name
    with pytest.raises(zarrstream.ConfigError, match="unknown shuffle mode 'Exact': expected none, exact or block"):
        zarrstream.Loader(path, ["2m_temperature"], shuffle="Exact")
    decode = zarrstream.Loader(path, ["2m_temperature"], cpu_decode_share="auto", gpu_decode=False)._options.decode
    assert (decode.gpu, decode.adaptive, decode.cpu_share) == (False, True, 1.0)
    decode = zarrstream.Loader(path, ["2m_temperature"], cpu_decode_share="0.25")._options.decode
    assert (decode.gpu, decode.adaptive, decode.cpu_share) == (True, False, 0.25)
    with pytest.raises(zarrstream.ConfigError,
                       match="cpu_decode_share is '1.5': expected a share from 0 to 1 or 'auto'"):
        zarrstream.Loader(path, ["2m_temperature"], cpu_decode_share="1.5")


def test_cuda_without_gpu_batches_is_host_batches_torch_copies_or_an_error(era5):
    path, _ = era5
    if not torch.cuda.is_available():
        # No GPU at all: nothing to copy to, said at construction (tests/test_processes.py).
        with pytest.raises(zarrstream.ConfigError, match="no GPU zarrstream can use"):
            zarrstream.Loader(path, ["2m_temperature"], device="cuda:0", gpu_batches=False)
        return
    loader = zarrstream.Loader(path, ["2m_temperature"], device="cuda:0", gpu_batches=False)
    assert loader._options.device == "cpu"
    assert loader.gpu_decode_status == ("batches are made on the CPU and copied to the GPU "
                                        "(GPU batches are off (gpu_batches))")
    with pytest.raises(zarrstream.ConfigError, match=r"needs GPU batches, which are off \(gpu_batches\)"):
        zarrstream.Loader(path, ["2m_temperature"], device="cuda:0", gpu_batches=False, output="dlpack")
    unavailable = zarrstream._zarrstream.gpu_batches_unavailable_reason()
    if not unavailable:
        return  # a GPU this build can use: tests/test_gpu_loader.py covers GPU batches
    loader = zarrstream.Loader(path, ["2m_temperature"], device="cuda:0")
    assert loader._options.device == "cpu"
    assert loader.gpu_decode_status == f"batches are made on the CPU and copied to the GPU ({unavailable})"


def test_date_selection_keeps_inputs_and_targets_inside(era5):
    path, data = era5
    # time index i is 1979-01-01 + 6h * i: days 2 and 3 are indices 4..11.
    loader = zarrstream.Loader(path, ["2m_temperature"], target_offset={"time": 1},
                               select={"time": ("1979-01-02", "1979-01-03"), "latitude": (60, -30)},
                               batch_size=3)
    lat = np.linspace(90, -90, NY).astype("float32")
    rows = np.nonzero((lat <= 60) & (lat >= -30))[0]
    assert loader.input_shape == (3, 1, len(rows), NX)
    times = []
    for batch in loader:
        o = batch["origin"].numpy()
        times.extend(o[:, 0].tolist())
        want = np.stack([data["2m_temperature"][t, rows[0]:rows[-1] + 1][None] for t in o[:, 0]])
        want_t = np.stack([data["2m_temperature"][t + 1, rows[0]:rows[-1] + 1][None] for t in o[:, 0]])
        check(batch["input"], want)
        check(batch["target"], want_t)
    assert sorted(times) == list(range(4, 11))  # the target of 11 (index 12) is outside


def test_ranks_share_an_epoch_and_padding_repeats(era5):
    path, _ = era5
    per_rank = []
    for rank in range(3):
        loader = zarrstream.Loader(path, ["2m_temperature"], batch_size=2, rank=rank, world_size=3,
                                   seed=5)
        got = [b["origin"][:, 0].tolist() for b in loader]
        per_rank.append([t for b in got for t in b])
        assert len(loader) == len(got)
    counts = {len(r) for r in per_rank}
    assert counts == {10}  # ceil(30 / 3)
    flat = [t for r in per_rank for t in r]
    assert sorted(set(flat)) == list(range(NT))
    # drop_last: equal full batches, no repeats
    dropped = []
    for rank in range(3):
        loader = zarrstream.Loader(path, ["2m_temperature"], batch_size=4, rank=rank, world_size=3,
                                   seed=5, drop_last=True)
        dropped.extend(t for b in loader for t in b["origin"][:, 0].tolist())
    assert len(dropped) == len(set(dropped)) == 24


def test_order_is_deterministic_per_seed_and_epoch(era5):
    path, _ = era5

    def order(seed, epoch):
        loader = zarrstream.Loader(path, ["2m_temperature"], batch_size=4, seed=seed)
        loader.set_epoch(epoch)
        return [t for b in loader for t in b["origin"][:, 0].tolist()]

    assert order(1, 0) == order(1, 0)
    assert order(1, 0) != order(1, 1)
    assert order(1, 0) != order(2, 0)
    # A second loop over the same loader runs the next epoch.
    loader = zarrstream.Loader(path, ["2m_temperature"], batch_size=4, seed=1)
    first = [t for b in loader for t in b["origin"][:, 0].tolist()]
    second = [t for b in loader for t in b["origin"][:, 0].tolist()]
    assert first == order(1, 0) and second == order(1, 1)
    assert loader.epoch == 1


def test_resume_mid_epoch_yields_the_remaining_batches(era5):
    path, _ = era5
    kwargs = dict(variables=VARS, target_offset={"time": 1}, batch_size=3, seed=11, prefetch=4)
    full = zarrstream.Loader(path, **kwargs)
    full.set_epoch(2)
    whole = [b for b in full]
    interrupted = zarrstream.Loader(path, **kwargs)
    interrupted.set_epoch(2)
    it = iter(interrupted)
    for _ in range(4):
        next(it)  # the pipeline has prepared more than these: the state counts delivered ones
    state = json.loads(json.dumps(interrupted.state_dict()))
    resumed = zarrstream.Loader(path, **kwargs)
    resumed.load_state_dict(state)
    rest = list(resumed)
    assert len(rest) == len(whole) - 4
    for a, b in zip(rest, whole[4:]):
        assert torch.equal(a["origin"], b["origin"])
        assert torch.equal(a["input"].nan_to_num(), b["input"].nan_to_num())
    # A state is only valid with the same seed and geometry.
    other = zarrstream.Loader(path, **{**kwargs, "seed": 12})
    with pytest.raises(zarrstream.ZarrstreamError, match="seed"):
        other.load_state_dict(state)


def test_prefetch_changed_mid_epoch_keeps_the_position_and_the_batches(era5):
    path, _ = era5
    kwargs = dict(variables=VARS, target_offset={"time": 1}, batch_size=1, seed=11, prefetch=4)
    whole = [b["origin"] for b in zarrstream.Loader(path, **kwargs)]
    loader = zarrstream.Loader(path, **kwargs)
    assert loader.prefetch == 4
    got, held = [], []
    for i, batch in enumerate(loader):
        got.append(batch["origin"].clone())
        if i < 6:
            held.append(batch)  # a consumer holding six batches: six blocks at least
        if i == 5:
            assert loader.stats()["batch_blocks"] >= 6
            loader.prefetch = 1  # the batches made ahead are kept, and the next are the same ones
            assert loader.prefetch == 1 and loader._core.next_batch == 6
            held.clear()
        if i == 11:
            # The batches started at prefetch 4 delivered, the memory beyond what one batch ahead
            # needs (prefetch + 2 blocks) was freed as it came back.
            assert loader.stats()["batch_blocks"] <= 3, loader.stats()["batch_blocks"]
    assert len(got) == len(whole) > 12 and all(torch.equal(a, b) for a, b in zip(got, whole))
    loader.prefetch = 0  # at least one
    assert loader.prefetch == 1
    with pytest.raises(zarrstream.ConfigError, match="prefetch"):
        loader.prefetch = -1


def test_origins_kept_by_the_consumer_keep_no_batch_memory(era5):
    """A training loop that keeps every batch's origins (to log which samples it saw) keeps copies
    of a few bytes, not the batches' buffers: the loader's blocks stay at prefetch + 2 (a GPU
    batch's origins would otherwise hold its device block)."""
    path, _ = era5
    loader = zarrstream.Loader(path, variables=VARS, target_offset={"time": 1}, batch_size=1, seed=2,
                               prefetch=1)
    seen = []
    for i, batch in enumerate(loader):
        seen.append(batch["origin"])
        if i == 9:
            break
    assert len(seen) == 10 and loader.stats()["batch_blocks"] <= 3, loader.stats()["batch_blocks"]
    whole = [b["origin"] for b in zarrstream.Loader(path, variables=VARS, target_offset={"time": 1},
                                                     batch_size=1, seed=2)]
    assert all(torch.equal(a, b) for a, b in zip(seen, whole[:10]))


def test_pytorch_short_of_gpu_memory_in_two_steps_lowers_the_prefetch_by_one(era5):
    """The policy of GPU batches under PyTorch (zarrstream._loader._TorchMemoryWatch), driven by a
    made-up allocator counter: not the first step's retries (kernel selection), then every two
    steps that ran short one batch fewer ahead, down to one, with a warning each time."""
    from zarrstream._loader import _TorchMemoryWatch

    path, _ = era5
    loader = zarrstream.Loader(path, variables=VARS, batch_size=3, prefetch=3)
    counts = iter([0, 0, 3, 3, 5, 9, 9, 12, 20, 30])  # num_alloc_retries after each step from the first
    watch = _TorchMemoryWatch(lambda: next(counts), "cuda:0")
    lowered_at = {}
    for take in range(1, 12):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            watch.batch_taken(loader._core)
        if caught:
            assert "PyTorch ran short of GPU memory on cuda:0 in 2 steps" in str(caught[0].message)
            lowered_at[take] = loader.prefetch
    # Takes 2-11 read 0 0 3 3 5 9 9 12 20 30: short at takes 4, 6 (-> 2), 7, 9 (-> 1), then at 1.
    assert lowered_at == {6: 2, 9: 1}, lowered_at
    assert loader.prefetch == 1


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_reduced_precision_rounds_like_torch(era5, dtype):
    path, data = era5
    loader = zarrstream.Loader(path, VARS, batch_size=8, dtype=dtype, shuffle="none")
    batch = next(iter(loader))
    assert batch["input"].dtype == getattr(torch, dtype)
    want, _ = reference(data, VARS, batch["origin"].numpy(), ["time"], {})
    expected = torch.from_numpy(want.astype("float32")).to(getattr(torch, dtype))
    assert torch.equal(batch["input"].nan_to_num(), expected.nan_to_num())


def test_normalisation_from_a_stats_file_and_nan_fill(era5, tmp_path):
    path, data = era5
    stats_file = tmp_path / "stats.json"
    r = run_cli("stats", path, "--vars", ",".join(VARS), "--select", "time=1979-01-01:1979-01-05",
                "--output", stats_file)
    assert r.returncode == 0, r.stderr
    channels = {c["name"]: c for c in json.loads(stats_file.read_text())["channels"]}
    loader = zarrstream.Loader(path, VARS, batch_size=6, normalize=stats_file, nan=-9.0, shuffle="none",
                               target_offset={"time": 1})
    batch = next(iter(loader))
    # Normalised from the stored values (float64 geopotential is not rounded to float32 first).
    raw, raw_t = reference(data, VARS, batch["origin"].numpy(), ["time"], {}, VARS, [1], dtype="float64")
    mean = np.array([channels[c]["mean"] for c in loader.channels])[None, :, None, None]
    std = np.array([channels[c]["std"] for c in loader.channels])[None, :, None, None]
    for got, mask, values in ((batch["input"], batch["input_mask"], raw),
                              (batch["target"], batch["target_mask"], raw_t)):
        assert mask.dtype == torch.bool
        assert torch.equal(mask, torch.from_numpy(np.isnan(values)))
        assert mask.any()  # the fixture has NaNs in 2m_temperature
        want = np.where(np.isnan(values), -9.0, (values - mean) / std)
        check(got, want, rtol=1e-5, atol=1e-5)


def test_configuration_errors_are_clear(era5, tmp_path):
    path, _ = era5
    cases = [
        (dict(variables=["nope"]), "nope"),
        (dict(variables=["temperature@123"]), "123"),
        (dict(variables=["2m_temperature"], sample={"height": 2}), "height"),
        (dict(variables=["2m_temperature"], sample={"latitude": NY + 1}), "larger than"),
        (dict(variables=["2m_temperature"], target_offset={"time": NT}), "reaches past"),
        (dict(variables=["2m_temperature"], target_offset={"latitude": 1}), "time dimension"),
        (dict(variables=["2m_temperature"], select={"time": ("1990-01-01", "1991-01-01")}), "time"),
        (dict(variables=["2m_temperature"], select={"level": [500]}), "variables"),
        (dict(variables=["2m_temperature"], dtype="int8"), "int8"),
        (dict(variables=["2m_temperature"], shuffle="sometimes"), "sometimes"),
        (dict(variables=["2m_temperature"], normalize=tmp_path / "missing.json"), "missing.json"),
    ]
    for kwargs, needle in cases:
        with pytest.raises(zarrstream.ZarrstreamError, match=needle):
            zarrstream.Loader(path, **kwargs)
    stats_file = tmp_path / "t2m.json"
    assert run_cli("stats", path, "--vars", "2m_temperature", "--output", stats_file).returncode == 0
    with pytest.raises(zarrstream.ZarrstreamError, match="geopotential@250"):
        zarrstream.Loader(path, ["2m_temperature", "geopotential"], normalize=stats_file)


@pytest.mark.parametrize("name, value", [
    ("batch_size", -1), ("prefetch", -2), ("seed", -3), ("cache_bytes", -1), ("num_threads", -1),
    ("block_chunks", -1), ("block_window", -1), ("seed", 2**64), ("batch_size", "many"),
    ("rank", -1), ("world_size", 2**32), ("target_offset", {"time": -1}),
    ("target_offset", {"time": [1, -2]}), ("sample", {"latitude": -4}), ("stride", {"time": -1}),
])
def test_integer_options_out_of_range_name_the_option(era5, name, value):
    path, _ = era5
    with pytest.raises(zarrstream.ConfigError) as e:
        zarrstream.Loader(path, ["2m_temperature"], **{name: value})
    assert str(e.value).startswith(name), str(e.value)


def corrupt_copy(src: Path, dst: Path) -> Path:
    """A copy of `src` whose geopotential chunk (time 14..20, level 250, latitude 4..7) is garbage."""
    import shutil

    shutil.copytree(src, dst)
    (dst / "geopotential" / "c" / "2" / "0" / "1" / "0").write_bytes(b"\x28\xb5\x2f\xfd not a zstd frame")
    return dst


def test_a_corrupt_chunk_names_the_array_and_chunk_or_is_skipped(era5, tmp_path):
    path, _ = era5
    bad = corrupt_copy(path, tmp_path / "bad.zarr")
    loader = zarrstream.Loader(bad, ["geopotential"], batch_size=4, shuffle="none", prefetch=1)
    with pytest.raises(zarrstream.CorruptChunkError) as e:
        for _ in loader:
            pass
    message = str(e.value)
    assert "geopotential" in message and "c/2/0/1/0" in message and "time=" in message
    skipping = zarrstream.Loader(bad, ["geopotential"], batch_size=4, shuffle="exact", on_error="skip")
    kept = [t for b in skipping for t in b["origin"][:, 0].tolist()]
    assert sorted(kept) == [t for t in range(NT) if not 14 <= t <= 20]
    assert skipping.stats()["skipped_samples"] == 7


def test_iterable_dataset_adapter_feeds_a_dataloader_without_workers(era5):
    from torch.utils.data import DataLoader

    from zarrstream.torch import IterableDataset

    path, _ = era5
    loader = zarrstream.Loader(path, ["2m_temperature"], batch_size=5, seed=2)
    dataset = IterableDataset(loader)
    batches = list(DataLoader(dataset, batch_size=None, num_workers=0))
    assert len(batches) == len(loader) == 6
    assert sorted(t for b in batches for t in b["origin"][:, 0].tolist()) == list(range(NT))


def test_memory_stays_flat_across_epochs(era5):
    path, _ = era5

    def rss_kib():
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        raise AssertionError("no VmRSS")

    loader = zarrstream.Loader(path, VARS, target_offset={"time": 1}, batch_size=4, prefetch=4)
    for _ in range(3):
        for _ in loader:
            pass
    before = rss_kib()
    for _ in range(20):
        for _ in loader:
            pass
    growth = rss_kib() - before
    assert growth < 8 * 1024, f"RSS grew by {growth} KiB over 20 epochs"


DIST_SCRIPT = r"""
import json, sys, torch, torch.distributed as dist, zarrstream
dist.init_process_group("gloo")
loader = zarrstream.Loader(sys.argv[1], ["2m_temperature"], batch_size=3, seed=4, drop_last=True)
mine = torch.cat([b["origin"][:, 0] for b in loader])
gathered = [torch.zeros_like(mine) for _ in range(dist.get_world_size())]
dist.all_gather(gathered, mine)
if dist.get_rank() == 0:
    print("ORIGINS", json.dumps([g.tolist() for g in gathered]))
dist.destroy_process_group()
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_real_ranks_with_torch_distributed(era5, tmp_path):
    path, _ = era5
    script = tmp_path / "dist.py"
    script.write_text(DIST_SCRIPT)
    port = free_port()
    procs = []
    for rank in range(2):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=str(port))
        procs.append(subprocess.Popen([sys.executable, str(script), str(path)], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    outs = [p.communicate(timeout=240) for p in procs]
    for p, (_out, err) in zip(procs, outs):
        assert p.returncode == 0, err
    line = next(l for l in outs[0][0].splitlines() if l.startswith("ORIGINS"))
    a, b = json.loads(line.split(" ", 1)[1])
    assert len(a) == len(b) == 15  # drop_last: 30 samples, 2 ranks -> 5 batches of 3 each
    assert not set(a) & set(b)


THREADS_SCRIPT = """
import json, os, sys
import zarrstream
os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # one core, as taskset or a scheduler would
loader = zarrstream.Loader(sys.argv[1], "2m_temperature", batch_size=2)
print("THREADS", json.dumps([loader.num_threads, len(os.sched_getaffinity(0))]))
"""


def test_worker_threads_follow_the_cores_this_process_may_use(era5, tmp_path, monkeypatch):
    path, _ = era5
    monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)
    cores = len(os.sched_getaffinity(0))
    assert zarrstream.Loader(path, "2m_temperature", batch_size=2).num_threads == cores
    assert zarrstream.Loader(path, "2m_temperature", batch_size=2, num_threads=3).num_threads == 3
    # torchrun's ranks on one machine share its cores; an explicit count is kept as it is.
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    assert zarrstream.Loader(path, "2m_temperature", batch_size=2).num_threads == max(1, cores // 2)
    assert zarrstream.Loader(path, "2m_temperature", batch_size=2, num_threads=5).num_threads == 5
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "two")
    with pytest.raises(zarrstream.ConfigError, match="LOCAL_WORLD_SIZE='two'"):
        zarrstream.Loader(path, "2m_temperature", batch_size=2)
    monkeypatch.delenv("LOCAL_WORLD_SIZE")
    # A process pinned to one core starts one worker, not one per core of the machine.
    script = tmp_path / "threads.py"
    script.write_text(THREADS_SCRIPT)
    proc = subprocess.run([sys.executable, str(script), str(path)], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    line = next(l for l in proc.stdout.splitlines() if l.startswith("THREADS"))
    assert json.loads(line.split(" ", 1)[1]) == [1, 1]


def test_over_http_with_transient_faults_batches_are_unchanged(era5, tmp_path):
    """nginx serves the fixture; a proxy fails the first attempt of requests (503, reset,
    truncated body): the store retries, and every batch equals the local loader's."""
    from object_servers import FaultProxy, Nginx

    path, _ = era5
    server = Nginx(path.parent, tmp_path / "nginx")
    proxy = FaultProxy(server.port, stall_seconds=5)
    try:
        proxy.configure(faults=("503", "reset", "truncate"))
        kwargs = dict(variables=VARS, target_offset={"time": 1}, batch_size=4, seed=8)
        remote_loader = zarrstream.Loader(f"{proxy.url}/{path.name}", **kwargs)
        remote = list(remote_loader)
        local = list(zarrstream.Loader(path, **kwargs))
        assert len(remote) == len(local)
        for r, l in zip(remote, local):
            assert torch.equal(r["origin"], l["origin"])
            assert torch.equal(r["input"].nan_to_num(), l["input"].nan_to_num())
            assert torch.equal(r["target"].nan_to_num(), l["target"].nan_to_num())
        faulted = [q for q in proxy.requests() if q.fault]
        assert faulted, "the proxy injected no faults"
        stats = remote_loader.stats()
        # The retries show in the loader's stats; each attempt's latency is binned.
        assert stats["retries"] > 0 and stats["failed_requests"] >= stats["retries"]
        assert sum(stats["request_latency_us_log2"]) >= stats["requests"] + stats["retries"]
        assert zarrstream.Loader(path, **kwargs).stats()["request_latency_us_log2"] == []
    finally:
        proxy.stop()
        server.stop()


def drain_in_thread(loader, deadline_s: float):
    """Iterates `loader` on a thread; returns (origins of the batches it gave, the exception that
    ended it or None). Fails when the epoch neither ends nor fails within the generous deadline."""
    import threading

    got, failure = [], []

    def run():
        try:
            for batch in loader:
                got.append(batch)
        except BaseException as e:  # noqa: BLE001 (handed to the test)
            failure.append(e)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(deadline_s)
    assert not thread.is_alive(), f"the epoch neither ended nor failed within {deadline_s} s"
    return got, (failure[0] if failure else None)


# The geopotential chunk of time 14..20, level 250, latitude 4..7 (as corrupt_copy breaks it).
BROKEN_CHUNK = "geopotential/c/2/0/1/0"


def test_over_http_a_chunk_failing_for_good_is_a_clear_error_or_a_counted_skip(era5, tmp_path,
                                                                               monkeypatch):
    """One chunk answers HTTP 500 to every attempt: with the default retry budget the epoch ends in
    a StorageError naming the store, the array and the chunk; with on_error='skip' its samples are
    counted and every other batch equals the local loader's."""
    from object_servers import FaultProxy, Nginx

    path, _ = era5
    server = Nginx(path.parent, tmp_path / "nginx")
    proxy = FaultProxy(server.port)
    url = f"{proxy.url}/{path.name}"
    try:
        proxy.configure(broken={BROKEN_CHUNK: "500"})
        loader = zarrstream.Loader(url, ["geopotential"], batch_size=4, shuffle="none", prefetch=1)
        # The default policy gives up after 8 attempts (backoff up to 5 s): well inside 120 s.
        got, error = drain_in_thread(loader, deadline_s=120)
        assert isinstance(error, zarrstream.StorageError), repr(error)
        message = str(error)
        assert url in message and BROKEN_CHUNK in message and "HTTP 500" in message, message
        assert "gave up after 8 attempts" in message, message
        # Batches before the broken chunk's first sample (time 14) came through.
        assert [int(t) for b in got for t in b["origin"][:, 0]] == list(range(len(got) * 4))
        attempts = [q for q in proxy.requests() if q.path.endswith(BROKEN_CHUNK)]
        assert len(attempts) >= 8 and all(q.status == 500 for q in attempts)

        # Skipping: a short retry budget keeps the test quick (each skipped batch gives up anew).
        monkeypatch.setenv("ZARRSTREAM_HTTP_MAX_ATTEMPTS", "2")
        monkeypatch.setenv("ZARRSTREAM_HTTP_INITIAL_BACKOFF_MS", "10")
        kwargs = dict(variables=["geopotential"], batch_size=4, shuffle="exact", seed=3)
        skipping = zarrstream.Loader(url, on_error="skip", **kwargs)
        remote, error = drain_in_thread(skipping, deadline_s=120)
        assert error is None, repr(error)
        local = {int(b["origin"][i, 0]): b["input"][i]
                 for b in zarrstream.Loader(path, **kwargs) for i in range(len(b["origin"]))}
        kept = [int(t) for b in remote for t in b["origin"][:, 0]]
        assert sorted(kept) == [t for t in range(NT) if not 14 <= t <= 20]
        assert skipping.stats()["skipped_samples"] == 7
        for b in remote:
            for i, t in enumerate(b["origin"][:, 0].tolist()):
                assert torch.equal(b["input"][i], local[t]), f"sample at time {t}"
    finally:
        proxy.stop()
        server.stop()


def test_over_http_a_server_gone_mid_run_is_a_clear_error_in_bounded_time(era5, tmp_path):
    """The server stops after the loader opened the dataset: the next reads are refused, retried
    with the default policy, and the epoch ends in a StorageError naming the store, the array and
    the chunk rather than hanging."""
    from object_servers import FaultProxy, Nginx

    path, _ = era5
    server = Nginx(path.parent, tmp_path / "nginx")
    proxy = FaultProxy(server.port)
    url = f"{proxy.url}/{path.name}"
    try:
        loader = zarrstream.Loader(url, ["2m_temperature"], batch_size=4, shuffle="none")
    finally:
        proxy.stop()  # nothing listens on its port any more
        server.stop()
    got, error = drain_in_thread(loader, deadline_s=120)
    assert got == [] and isinstance(error, zarrstream.StorageError), repr(error)
    message = str(error)
    assert f"{url}/2m_temperature/c/" in message and "2m_temperature" in message, message
    assert "gave up after 8 attempts" in message and "connect" in message.lower(), message


@pytest.mark.parametrize("layout", ["v3-sharded", "wb2"])
def test_synth_layouts_match_zarr_python(tmp_path, layout):
    """Sharded (inner chunks read from shards) and Zarr v2 blosc stores as `zarrstream synth`
    writes them, read back through zarr-python for the reference."""
    store = tmp_path / f"{layout}.zarr"
    r = run_cli("synth", store, "--preset", "era5-small", "--layout", layout, "--steps", "8")
    assert r.returncode == 0, r.stderr
    specs = ["2m_temperature", "temperature@500,850", "geopotential@*"]
    loader = zarrstream.Loader(store, specs, target_offset={"time": 1}, batch_size=3, seed=1)
    group = zarr.open_group(str(store), mode="r")
    levels = list(group["level"][:])
    for batch in loader:
        for s, t in enumerate(batch["origin"][:, 0].tolist()):
            want = [group["2m_temperature"][t]]
            want += [group["temperature"][t, levels.index(lv)] for lv in (500, 850)]
            want += [group["geopotential"][t, i] for i in range(len(levels))]
            np.testing.assert_array_equal(batch["input"][s].numpy(), np.stack(want).astype("float32"))
            want_t = [group["2m_temperature"][t + 1]]
            want_t += [group["temperature"][t + 1, levels.index(lv)] for lv in (500, 850)]
            want_t += [group["geopotential"][t + 1, i] for i in range(len(levels))]
            np.testing.assert_array_equal(batch["target"][s].numpy(), np.stack(want_t).astype("float32"))


def test_block_shuffle_decodes_each_step_about_once(tmp_path):
    """One time step per chunk and a target one step ahead: an exact shuffle decodes most steps
    twice (as an input, later as a target), the default block shuffle about once, reading every
    sample once per epoch all the same."""
    store = tmp_path / "small.zarr"
    r = run_cli("synth", store, "--preset", "era5-small", "--steps", "96")
    assert r.returncode == 0, r.stderr
    variables = ["2m_temperature", "temperature", "geopotential"]  # 27 channels, 221 KB a step

    def decoded_per_used(shuffle: str) -> float:
        # A cache of 6 MB holds 27 of the 96 steps.
        loader = zarrstream.Loader(store, variables, target_offset={"time": 1}, batch_size=4,
                                   shuffle=shuffle, seed=3, cache_bytes=6 << 20)
        origins = [t for batch in loader for t in batch["origin"][:, 0].tolist()]
        assert sorted(origins) == list(range(95))
        stats = loader.stats()
        # The loader's block size is reported (0: not a block shuffle); 4 steps per block fill
        # three quarters of the cache with the 4 blocks in play.
        assert stats["block_chunks"] == (4 if shuffle == "block" else 0)
        # Used bytes count each step twice (input and target): 2 means each decode served one use.
        return 2 * stats["bytes_decoded"] / stats["bytes_used"]

    exact, block = decoded_per_used("exact"), decoded_per_used("block")
    # How many inputs are still cached when they come back as targets depends a little on how far
    # the pipeline has read ahead (timing): exact measured 1.44-1.50 over runs.
    assert exact > 1.4
    assert block < 1.3


@pytest.mark.gpu
def test_cuda_batches_come_from_pinned_buffers_and_equal_cpu_batches(era5):
    """device="cuda": page-locked host batches copied asynchronously; the values are the CPU
    loader's, batch after batch (a host buffer reused before its copy finished would show)."""
    path, _ = era5
    specs = ["2m_temperature", "temperature@500,850"]
    cpu = zarrstream.Loader(path, specs, target_offset={"time": 1}, batch_size=2, seed=5, pin_memory=False)
    gpu = zarrstream.Loader(path, specs, target_offset={"time": 1}, batch_size=2, seed=5, device="cuda",
                            prefetch=4, gpu_batches=False)
    assert gpu.pinned and not cpu.pinned
    for epoch in range(2):
        cpu.set_epoch(epoch)
        gpu.set_epoch(epoch)
        batches = list(gpu)  # all copies queued before any is read back
        expected = list(cpu)
        assert len(batches) == len(expected)
        for got, want in zip(batches, expected):
            assert got["input"].is_cuda and got["target"].is_cuda
            torch.testing.assert_close(got["input"].cpu(), want["input"], rtol=0, atol=0, equal_nan=True)
            torch.testing.assert_close(got["target"].cpu(), want["target"], rtol=0, atol=0, equal_nan=True)
            assert torch.equal(got["origin"].cpu(), want["origin"])


def test_pin_memory_follows_the_gpu_and_on_without_one_is_a_clear_error(era5):
    path, _ = era5
    assert not zarrstream.Loader(path, ["2m_temperature"], pin_memory=False).pinned
    if zarrstream.Loader(path, ["2m_temperature"]).pinned:
        assert zarrstream.Loader(path, ["2m_temperature"], pin_memory=True).pinned
        return
    with pytest.raises(zarrstream.ConfigError, match="pin_memory is on, but batches cannot be page-locked"):
        zarrstream.Loader(path, ["2m_temperature"], pin_memory=True)


def test_gpu_batches_need_cuda_and_say_why_not(era5):
    path, _ = era5
    with pytest.raises(zarrstream.ConfigError, match=r"GPU batches \(gpu_batches on\) need device cuda, not cpu"):
        zarrstream.Loader(path, ["2m_temperature"], gpu_batches=True)
    loader = zarrstream.Loader(path, ["2m_temperature"])
    assert loader.gpu_decode_status == "batches are made on the CPU"
    if not zarrstream._zarrstream.gpu_batches_unavailable_reason():
        return  # a GPU this build can use: tests/test_gpu_loader.py covers it
    # No GPU at all is said first (tests/test_processes.py); a GPU without GPU batches, so.
    with pytest.raises(zarrstream.ConfigError,
                       match=r"GPU batches \(gpu_batches on\) need device cuda and a GPU .*: "
                             r"|no GPU zarrstream can use"):
        zarrstream.Loader(path, ["2m_temperature"], device="cuda", gpu_batches=True)


@pytest.mark.parametrize("share", [-0.1, 1.5, float("nan")])
def test_a_cpu_decode_share_outside_0_to_1_is_a_clear_error(era5, share):
    path, _ = era5
    expected = r"cpu_decode_share is (-0.1|1.5|nan): expected a share from 0 to 1"
    with pytest.raises(zarrstream.ConfigError, match=expected):
        zarrstream.Loader(path, ["2m_temperature"], cpu_decode_share=share)


def test_an_adaptive_cpu_decode_share_is_auto_and_nothing_else(era5):
    path, _ = era5
    with pytest.raises(zarrstream.ConfigError,
                       match="cpu_decode_share is 'half': expected a share from 0 to 1 or 'auto'"):
        zarrstream.Loader(path, ["2m_temperature"], cpu_decode_share="half")
    # Host batches decode on the CPU anyway: "auto" changes nothing there.
    loader = zarrstream.Loader(path, ["2m_temperature"], batch_size=2, cpu_decode_share="auto")
    assert len(list(loader)) > 0 and loader.stats()["cpu_decode_share"] == 0


def test_timeline_records_every_stage_of_every_batch(era5):
    path, _ = era5
    loader = zarrstream.Loader(path, ["2m_temperature"], target_offset={"time": 1}, batch_size=3, timeline=True)
    batches = len(list(loader))
    spans = loader.timeline()
    stages = [s["stage"] for s in spans]
    assert stages.count("wait") == batches
    assert stages.count("plan") >= batches and "read+decode" in stages and "assemble" in stages
    assert all(0 <= s["start"] <= s["end"] for s in spans)
    assert [s["start"] for s in spans] == sorted(s["start"] for s in spans)
    assert {s["batch"] for s in spans if s["stage"] == "wait"} == set(range(batches))
    assert zarrstream.Loader(path, ["2m_temperature"]).timeline() == []


def test_default_channels_are_the_time_varying_variables(tmp_path):
    store = tmp_path / "small.zarr"
    assert run_cli("synth", store, "--preset", "era5-small", "--steps", "4").returncode == 0
    group = zarr.open_group(str(store), mode="r")
    coords = {name for name in group.array_keys() if group[name].ndim == 1}
    timed = sorted(n for n in group.array_keys() if n not in coords
                   and "time" in group[n].metadata.dimension_names)
    static = sorted(n for n in group.array_keys() if n not in coords and n not in timed)
    assert static, "the preset has static fields (orography, land-sea mask)"
    loader = zarrstream.Loader(store, batch_size=2)
    assert sorted({c.split("@")[0] for c in loader.channels}) == timed
    assert loader.channels == zarrstream.Loader(store, timed, batch_size=2).channels
    # Named, a static field is a channel broadcast over the window (tests/test_static_fields.py),
    # and an input only.
    named = zarrstream.Loader(store, [timed[0], static[0]], target_offset={"time": 1}, batch_size=2)
    assert named.channels[-1] == static[0] and static[0] not in named.target_channels


def test_dlpack_output_feeds_numpy_without_torch_and_equals_the_torch_batches(era5):
    path, _ = era5
    kwargs = dict(variables=["2m_temperature", "temperature@500"], batch_size=4, seed=3,
                  target_offset={"time": 1}, nan=0.0)
    want = list(zarrstream.Loader(path, **kwargs))
    got = list(zarrstream.Loader(path, output="dlpack", **kwargs))
    assert len(got) == len(want) > 2
    for g, w in zip(got, want):
        assert isinstance(g["input"], zarrstream.BatchArray) and g["input"].device == "cpu"
        assert g["input"].shape == tuple(w["input"].shape)
        for key in ("input", "target", "input_mask", "target_mask", "origin"):
            np.testing.assert_array_equal(np.from_dlpack(g[key]), w[key].numpy())
        assert g.keys() == w.keys()
    with pytest.raises(ValueError, match="output"):
        zarrstream.Loader(path, output="jax")
    if not torch.cuda.is_available():
        with pytest.raises(zarrstream.ConfigError, match="GPU batches|no GPU zarrstream can use"):
            zarrstream.Loader(path, device="cuda", output="dlpack")
    # No torch at all: the loader still serves NumPy (or CuPy, JAX) consumers.
    script = (
        "import sys; sys.modules['torch'] = None\n"
        "import numpy as np, zarrstream\n"
        f"loader = zarrstream.Loader({str(path)!r}, ['2m_temperature'], batch_size=3, "
        "output='dlpack', dtype='float32')\n"
        "b = next(iter(loader))\n"
        "print(np.from_dlpack(b['input']).shape, 'torch' in sys.modules and sys.modules['torch'])\n")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"(3, 1, {NY}, {NX}) None"


@pytest.mark.parametrize("shuffle", ["exact", "block"])
def test_the_next_epoch_is_prefetched_and_is_the_same_as_set_epoch(era5, shuffle):
    """After an epoch's last batch the pipeline goes on into the next epoch (its batches are made
    before the loop asks), and those batches are the ones a fresh loader's set_epoch gives; asking
    for another epoch, or restoring a state, discards them."""
    path, _ = era5
    kwargs = dict(variables=["2m_temperature", "temperature@500"], batch_size=4, seed=5,
                  shuffle=shuffle, target_offset={"time": 1}, prefetch=2)

    def batches(loader):
        return [(b["origin"].tolist(), b["input"].clone(), b["target"].clone()) for b in loader]

    def fresh(epoch):
        loader = zarrstream.Loader(path, **kwargs)
        loader.set_epoch(epoch)
        return batches(loader)

    def same(a, b):
        assert len(a) == len(b) > 2
        for (oa, ia, ta), (ob, ib, tb) in zip(a, b):
            assert oa == ob
            torch.testing.assert_close(ia, ib, rtol=0, atol=0, equal_nan=True)
            torch.testing.assert_close(ta, tb, rtol=0, atol=0, equal_nan=True)

    loader = zarrstream.Loader(path, timeline=True, **kwargs)
    epoch0 = batches(loader)
    deadline = time.monotonic() + 30
    ahead = set()
    while len(ahead) < 2 and time.monotonic() < deadline:  # made while nobody asks
        ahead = {s["batch"] for s in loader.timeline() if s["epoch"] == 1 and s["stage"] == "assemble"}
        time.sleep(0.01)
    assert ahead == {0, 1}  # prefetch=2: no further
    same(epoch0, fresh(0))
    same(batches(loader), fresh(1))
    # Jumping to epoch 5 (not the one made ahead) gives epoch 5's batches.
    loader.set_epoch(5)
    same(batches(loader), fresh(5))
    # A restored state mid-epoch: the remaining batches of that state, not those made ahead.
    loader = zarrstream.Loader(path, **kwargs)
    it = iter(loader)
    next(it)
    state = loader.state_dict()
    rest = batches(loader)
    batches(loader)  # epoch 1, and epoch 2's first batches made ahead
    loader.load_state_dict(state)
    same(batches(loader), rest)

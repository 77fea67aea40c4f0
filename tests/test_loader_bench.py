"""The peer benchmark (bench/loader_bench.py) runs end to end on tiny stores, so it cannot rot.

Asserts what the harness writes (fields, checks, batch counts, every row of every workload), never a
timing. Stores: one written by `zarrstream synth` with its v3-sharded twin (all three workloads,
every tool), one written by xarray (zarr-python, Zarr v2) with other variable names and levels.
Also checks that the harness's first-batch and whole-array checks catch a wrong read and that its
memory sampler sums a whole process tree.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from bench_scripts import load_bench

import zarrstream

BENCH = Path(__file__).resolve().parent.parent / "bench" / "loader_bench.py"

MEASURED_FIELDS = (
    "import_s",
    "startup_s",
    "measured_batches",
    "measured_samples",
    "elapsed_s",
    "samples_per_s",
    "gb_per_s",
    "wait_mean_ms",
    "wait_p99_ms",
    "wait_max_ms",
    "cpu_cores_busy",
    "rss_after_import_bytes",
    "peak_rss_bytes",
    "peak_pss_bytes",
    "peak_processes",
)




def run_bench(*args, env=None, timeout=600) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, str(BENCH), *map(str, args)], capture_output=True, text=True,
                          env=env, timeout=timeout)
    assert proc.returncode == 0, f"loader_bench failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
    return proc


def check_measured(result: dict, *, batches: int, batch_size: int, processes: int) -> None:
    assert result["available"] is True
    assert "error" not in result, result.get("error")
    for field in MEASURED_FIELDS:
        assert isinstance(result[field], (int, float)), f"{field}: {result.get(field)!r}"
    assert result["measured_batches"] == batches
    assert result["measured_samples"] == batches * batch_size
    assert result["samples_per_s"] > 0 and result["gb_per_s"] > 0
    assert result["wait_mean_ms"] <= result["wait_max_ms"]
    # The child alone imports torch: hundreds of MB; its workers are counted on top.
    assert result["peak_rss_bytes"] >= result["rss_after_import_bytes"] > 50 << 20
    assert result["peak_pss_bytes"] > 0
    assert result["peak_processes"] >= processes
    first = result["check"]
    assert first["ok"] is True, first["detail"]
    assert len(first["origins"]) == batch_size
    assert isinstance(result["config"], dict)


WHOLE_FIELDS = ("import_s", "startup_s", "array_bytes", "measured_reads", "elapsed_s", "gb_per_s", "read_mean_ms",
                "read_max_ms", "cpu_cores_busy", "rss_after_import_bytes", "peak_rss_bytes", "peak_pss_bytes")


def check_whole(result: dict, *, reads: int, nbytes: int) -> None:
    assert result["available"] is True
    assert "error" not in result, result.get("error")
    for field in WHOLE_FIELDS:
        assert isinstance(result[field], (int, float)), f"{field}: {result.get(field)!r}"
    assert result["measured_reads"] == reads and result["array_bytes"] == nbytes
    assert result["gb_per_s"] > 0 and result["read_mean_ms"] <= result["read_max_ms"]
    assert "samples_per_s" not in result
    assert result["check"] == {"ok": True, "detail": "equal to zarr-python's read"}


def check_insitubatch(result: dict) -> None:
    """insitubatch runs where it is installed (Python >= 3.12); elsewhere the row says why not."""
    if importlib.util.find_spec("insitubatch") is None:
        assert result["available"] is False
        assert "insitubatch needs Python >= 3.12" in result["reason"]
        return
    check_measured(result, batches=4, batch_size=2, processes=1)
    assert result["config"]["self_check"].startswith("equal to zarrstream's read")


@pytest.mark.slow
def test_synth_store_every_workload_and_tool(tmp_path):
    out = tmp_path / "bench.json"
    store = tmp_path / "small.zarr"
    sharded = tmp_path / "small-sharded.zarr"
    proc = run_bench("--preset", "era5-small", "--steps", 8, "--store", store, "--sharded-store", sharded,
                     "--workloads", "batches,whole,sharded", "--whole-repeats", 2, "--batch-size", 2,
                     "--batches", 2, "--epochs", 2, "--workers", 1, "--json", out)
    doc = json.loads(out.read_text())
    meta = doc["meta"]
    assert meta["machine"]["cores"] >= 1 and meta["machine"]["ram_bytes"] > 0
    assert meta["command"].startswith("python bench/loader_bench.py")
    assert meta["page_cache"].startswith("warm:")
    assert meta["versions"]["zarrs"] and meta["versions"]["tensorstore"] and meta["versions"]["zarr"]
    assert meta["store"]["preset"] == "era5-small" and meta["store"]["layout"] == "v3-zstd"
    assert meta["store"]["num_time"] == 8 and meta["store"]["zarr_format"] == 3
    # 2m_temperature, 10m_u_component_of_wind, and temperature, geopotential, specific_humidity at 13
    # levels.
    assert meta["store"]["channels"] == [1, 1, 13, 13, 13]
    workload = meta["workload"]
    assert workload["channels"] == 41 and workload["samples_per_epoch"] == 7
    assert workload["sample_bytes"] == 2 * 41 * 32 * 64 * 4
    assert workload["measured_batches_per_epoch"] == 2 and workload["epochs"] == 2
    assert meta["workloads"] == ["batches", "whole", "sharded"]
    # The sharded twin was synthesized beside the store: same variables and steps.
    assert meta["sharded_store"]["path"] == str(sharded) and meta["sharded_store"]["channels"] == [1, 1, 13, 13, 13]
    assert zarrstream.open_array(str(sharded / "temperature")).shard_shape is not None
    whole_bytes = 8 * 13 * 32 * 64 * 4
    assert meta["whole"] == {"variable": "temperature", "shape": [8, 13, 32, 64], "chunks": [1, 13, 32, 64],
                             "decoded_bytes": whole_bytes, "repeats": 2}

    results = doc["results"]
    assert list(results) == ["batches", "whole", "sharded"]
    batches = results["batches"]
    assert list(batches) == ["xbatcher", "tensorstore", "zarr-python", "zarrs", "insitubatch", "zarrstream",
                             "zarrstream-block"]
    # xbatcher: the child and its one DataLoader worker.
    check_measured(batches["xbatcher"], batches=4, batch_size=2, processes=2)
    assert batches["xbatcher"]["config"]["num_workers"] == 1
    assert batches["xbatcher"]["config"]["prefetch_factor"] == 3
    assert results["sharded"].keys() == batches.keys() - {"xbatcher"}
    for rows in (batches, results["sharded"]):
        for name in ("tensorstore", "zarr-python", "zarrs"):
            check_measured(rows[name], batches=4, batch_size=2, processes=1)
        assert rows["zarrs"]["config"]["codec_pipeline"] == "zarrs.ZarrsCodecPipeline"
        assert rows["zarrs"]["config"]["read_through"].endswith("ZarrsCodecPipeline")
        # The arrays read through the pipeline the row says it chose.
        config = rows["zarr-python"]["config"]
        assert config["codec_pipeline"].startswith(config["read_through"])
        check_insitubatch(rows["insitubatch"])
        for name, shuffle in (("zarrstream", "exact"), ("zarrstream-block", "block")):
            check_measured(rows[name], batches=4, batch_size=2, processes=1)
            assert rows[name]["config"]["shuffle"] == shuffle
            # The loader's own account of what it delivered: the start-up batch and the measured ones.
            assert rows[name]["loader_stats"]["samples"] == 1 * 2 + 4 * 2
    assert list(results["whole"]) == ["tensorstore", "zarr-python", "zarrs", "zarrstream", "libzstd"]
    for r in results["whole"].values():
        check_whole(r, reads=2, nbytes=whole_bytes)
        assert r["config"]["variable"] == "temperature"
    assert results["whole"]["libzstd"]["config"]["version"].startswith("1.")
    assert results["whole"]["zarr-python"]["config"]["codec_pipeline"].startswith(
        results["whole"]["zarr-python"]["config"]["read_through"])
    # One table: a row per workload and tool, each with its ratio to zarrstream's in that workload.
    rows = [line.split("|")[1:-1] for line in proc.stdout.splitlines() if line.startswith("| ")]
    header, rows = [c.strip() for c in rows[0]], [[c.strip() for c in r] for r in rows[1:]]
    assert header[:2] == ["workload", "tool"] and header[-1] == "vs zarrstream"
    assert [(r[0], r[1]) for r in rows] == [(k, n) for k, v in results.items() for n in v]
    assert all(r[-2] == "ok" for r in rows if results[r[0]][r[1]]["available"])
    assert [r[-1] for r in rows if r[1] == "zarrstream"] == ["1.00x"] * 3


def write_xarray_store(path: Path) -> None:
    """A small (time, level, latitude, longitude) dataset written by xarray as Zarr v2, with CF time."""
    import pandas as pd
    import xarray as xr

    rng = np.random.default_rng(3)
    time = pd.date_range("2000-01-01", periods=7, freq="6h")
    lat = np.linspace(80, -80, 9, dtype=np.float32)
    lon = np.arange(0, 360, 30, dtype=np.float32)
    level = np.array([500, 850, 1000])
    ds = xr.Dataset(
        {
            "t2m": (("time", "latitude", "longitude"), rng.normal(280, 5, (7, 9, 12)).astype(np.float32)),
            "z": (("time", "level", "latitude", "longitude"), rng.normal(5e4, 1e3, (7, 3, 9, 12)).astype(np.float32)),
        },
        coords={"time": time, "level": level, "latitude": lat, "longitude": lon},
    )
    ds["z"][2, 1, 4, 5] = np.nan  # a NaN must compare equal to the reference's NaN
    encoding = {"t2m": {"chunks": (1, 9, 12)}, "z": {"chunks": (1, 3, 9, 12)}}
    ds.to_zarr(path, zarr_format=2, consolidated=True, encoding=encoding)


@pytest.mark.slow
def test_xarray_written_v2_store_without_workers(tmp_path):
    store = tmp_path / "xr.zarr"
    write_xarray_store(store)
    out = tmp_path / "bench.json"
    # 6 samples (targets at t + 1) make 3 batches of 2; --workers 0 is the demo's first experiment
    # (no worker processes, no prefetch).
    run_bench("--store", store, "--variables", "t2m,z", "--loaders", "xbatcher,tensorstore,zarrs", "--batch-size", 2,
              "--epochs", 3, "--workers", 0, "--no-warm", "--workloads", "batches,whole", "--whole-variable", "z",
              "--whole-repeats", 1, "--json", out)
    doc = json.loads(out.read_text())
    assert doc["meta"]["store"]["zarr_format"] == 2 and doc["meta"]["store"]["channels"] == [1, 3]
    assert doc["meta"]["page_cache"].startswith("as found")
    results = doc["results"]["batches"]
    assert list(results) == ["xbatcher", "tensorstore", "zarrs"]
    # Default --batches: every full batch of an epoch but the start-up batch.
    check_measured(results["xbatcher"], batches=2 * 3, batch_size=2, processes=1)
    assert results["xbatcher"]["config"]["persistent_workers"] is False
    check_measured(results["tensorstore"], batches=2 * 3, batch_size=2, processes=1)
    check_measured(results["zarrs"], batches=2 * 3, batch_size=2, processes=1)
    # Zarr v2, with the NaN in z.
    whole = doc["results"]["whole"]
    assert list(whole) == ["tensorstore", "zarrs"]
    for r in whole.values():
        check_whole(r, reads=1, nbytes=7 * 3 * 9 * 12 * 4)


def test_sharded_workload_needs_a_sharded_store(tmp_path):
    store = tmp_path / "xr.zarr"
    write_xarray_store(store)
    proc = subprocess.run([sys.executable, str(BENCH), "--store", str(store), "--variables", "t2m,z",
                           "--workloads", "sharded"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "--sharded-store" in proc.stderr


def small_workload(bench, tmp_path):
    """A workload of one 2-sample batch over t2m and z of an xarray-written store."""
    store = tmp_path / "xr.zarr"
    write_xarray_store(store)
    info = bench.describe_store(store, ["t2m", "z"])
    return bench.Workload(store=str(store), variables=["t2m", "z"], batch_size=2, batches=1, epochs=1, seed=0,
                          step_time=0, workers=0, prefetch_factor=3, dask_threads=4, mp_context=None,
                          prefetch=1, ts_cache_bytes=0, cores=1, **info)


def test_first_batch_check_catches_a_wrong_batch(tmp_path):
    bench = load_bench("loader_bench")
    w = small_workload(bench, tmp_path)
    # The NaN of z (time 2, level 850: channel 2) is in sample 0's target and sample 1's input.
    origins = np.array([1, 2])
    inp, tgt = bench.reference_batch(w, origins)
    assert inp.shape == tgt.shape == (2, 4, 9, 12)
    assert np.isnan(tgt[0, 2, 4, 5]) and np.isnan(inp[1, 2, 4, 5]) and np.isnan(inp).sum() == 1

    npz = tmp_path / "batch.npz"
    np.savez(npz, input=inp, target=tgt, origins=origins)
    assert bench.check_first_batch(w, npz)["ok"] is True

    wrong = tgt.copy()
    wrong[1, 3, 0, 0] += 1
    np.savez(npz, input=inp, target=wrong, origins=origins)
    check = bench.check_first_batch(w, npz)
    assert check["ok"] is False
    assert "target: 1 of" in check["detail"] and "sample 1 (time 2), channel 3" in check["detail"]

    # Right values under the wrong origins (a loader that mislabels its samples).
    np.savez(npz, input=inp, target=tgt, origins=origins[::-1])
    assert bench.check_first_batch(w, npz)["ok"] is False

    np.savez(npz, input=inp.astype(np.float64), target=tgt, origins=origins)
    assert "float64" in bench.check_first_batch(w, npz)["detail"]


def test_insitubatch_self_check_catches_a_wrong_batch(tmp_path):
    """The insitubatch row's own check of its first batch (against zarrstream's read of the same
    time steps), and its stacking of variables and levels into channels, on a batch read here."""
    bench = load_bench("loader_bench")
    w = small_workload(bench, tmp_path)
    origins = np.array([1, 2])
    inp, tgt = bench.reference_batch(w, origins)
    # insitubatch's batch: one array per view, [B, lat, lon] or [B, level, lat, lon].
    views = {"t2m": inp[:, :1].reshape(2, 9, 12), "z": inp[:, 1:], "t2m@t+1": tgt[:, 0], "z@t+1": tgt[:, 1:]}
    assert np.array_equal(bench.stack_channels(w, views), inp, equal_nan=True)
    assert np.array_equal(bench.stack_channels(w, views, bench.TARGET_SUFFIX), tgt, equal_nan=True)
    assert bench.check_against_zarrstream(w, origins, inp, tgt) == (
        "equal to zarrstream's read of time steps [1, 2] and the next")

    wrong = tgt.copy()
    wrong[1, 3, 0, 0] += 1
    with pytest.raises(RuntimeError, match=r"target: 1 of 864 values differ .* sample 1 \(time 2\), channel 3"):
        bench.check_against_zarrstream(w, origins, inp, wrong)
    # The right values under the wrong time steps.
    with pytest.raises(RuntimeError, match="input"):
        bench.check_against_zarrstream(w, origins[::-1], inp, tgt)


def test_whole_array_check_catches_a_wrong_read(tmp_path):
    import zarr

    bench = load_bench("loader_bench")
    store = tmp_path / "xr.zarr"
    write_xarray_store(store)
    info = bench.describe_store(store, ["t2m", "z"])
    w = bench.Workload(store=str(store), variables=["t2m", "z"], batch_size=2, batches=1, epochs=1, seed=0,
                       step_time=0, workers=0, prefetch_factor=3, dask_threads=4, mp_context=None, prefetch=1,
                       ts_cache_bytes=0, cores=1, kind="whole", whole_variable="z", whole_repeats=1, **info)
    ref = zarr.open_array(str(store / "z"), mode="r")[...]
    assert np.isnan(ref).sum() == 1  # the NaN must compare equal to the reference's NaN
    npy = tmp_path / "whole.npy"
    np.save(npy, ref)
    assert bench.check_whole(w, npy)["ok"] is True

    wrong = ref.copy()
    wrong[5, 2, 1, 0] += 1
    np.save(npy, wrong)
    check = bench.check_whole(w, npy)
    assert check["ok"] is False
    assert check["detail"] == "1 of 324 values of time step 5 differ from zarr-python's read, first at (2, 1, 0)"
    np.save(npy, ref[:-1])
    assert "reference (7, 3, 9, 12)" in bench.check_whole(w, npy)["detail"]


ALLOCATE = """
import subprocess, sys
grandchild = None
if sys.argv[1] == "parent":
    grandchild = subprocess.Popen([sys.executable, "-c", sys.argv[2], "child", ""], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE)
    grandchild.stdout.readline()
block = b"x" * ((200 if sys.argv[1] == "parent" else 100) << 20)
print("ready", flush=True)
sys.stdin.read()
if grandchild:
    grandchild.stdin.close()
    grandchild.wait()
"""


def test_memory_sampler_sums_the_process_tree():
    bench = load_bench("loader_bench")
    proc = subprocess.Popen([sys.executable, "-c", ALLOCATE, "parent", ALLOCATE], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE)
    try:
        assert proc.stdout.readline() == b"ready\n"
        sampler = bench.TreeMemorySampler(proc.pid)
        sampler.sample(0)
        assert sampler.peak_processes == 2
        # 200 MB in the child and 100 MB in its own child, each touched (written), plus interpreters.
        assert sampler.peak_rss >= 300 << 20
        assert sampler.peak_pss >= 300 << 20
        assert sampler.peak_rss < 2 << 30
    finally:
        proc.stdin.close()
        proc.wait(timeout=60)


def test_libzstd_row_decodes_zstd_slabs_as_zarr_python_reads_them(tmp_path):
    """The whole-array read's reference row (the decoder alone) on zarr-python's zstd arrays, v2 and
    v3, with a last chunk past the array's end; what it cannot read is named, not misread."""
    import numcodecs
    import zarr

    bench = load_bench("loader_bench")
    if not bench.libzstd_library():
        pytest.skip("no libzstd shared library on this machine")
    values = np.random.default_rng(5).standard_normal((7, 4, 5)).astype(np.float32)
    values[2, 1, 3] = np.nan
    stores = {
        2: dict(compressors=numcodecs.Zstd(level=1), filters=None),
        3: dict(compressors=zarr.codecs.ZstdCodec(level=1)),
    }
    for zarr_format, options in stores.items():
        path = tmp_path / f"v{zarr_format}.zarr"
        group = zarr.open_group(str(path), mode="w", zarr_format=zarr_format)
        group.create_array("z", shape=values.shape, chunks=(3, 4, 5), dtype="f4", **options)[...] = values
        w = bench.Workload(store=str(path), variables=["z"], batch_size=1, batches=1, epochs=1, seed=0,
                           step_time=0, workers=0, prefetch_factor=3, dask_threads=4, mp_context=None,
                           prefetch=1, ts_cache_bytes=0, cores=2, zarr_format=zarr_format,
                           channels=[1], num_time=7, num_lat=4, num_lon=5, kind="whole", whole_variable="z",
                           whole_repeats=1)
        layout, why_not = bench.whole_zstd_slabs(w)
        assert why_not is None and len(layout["files"]) == 3
        read = bench.libzstd_whole_reader(w)
        np.testing.assert_array_equal(read(), values)
        np.testing.assert_array_equal(read(), values)  # again, into a new array

    blosc = tmp_path / "blosc.zarr"
    zarr.open_group(str(blosc), mode="w", zarr_format=2).create_array(
        "z", shape=values.shape, chunks=(3, 4, 5), dtype="f4", compressors=numcodecs.Blosc())[...] = values
    w = dataclasses.replace(w, store=str(blosc), zarr_format=2)
    assert "compressor blosc" in bench.whole_zstd_slabs(w)[1]
    with pytest.raises(ValueError, match="compressor blosc"):
        bench.libzstd_whole_reader(w)
    tiles = tmp_path / "tiles.zarr"
    zarr.open_group(str(tiles), mode="w").create_array(
        "z", shape=values.shape, chunks=(3, 2, 5), dtype="f4", compressors=zarr.codecs.ZstdCodec())[...] = values
    assert "not whole slabs" in bench.whole_zstd_slabs(dataclasses.replace(w, store=str(tiles), zarr_format=3))[1]
    (tmp_path / "v3.zarr" / "z" / "c" / "1" / "0" / "0").unlink()
    assert "c/1/0/0 is not stored" in bench.whole_zstd_slabs(
        dataclasses.replace(w, store=str(tmp_path / "v3.zarr"), zarr_format=3))[1]

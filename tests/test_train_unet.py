"""examples/train_unet.py, the product's main job, on CPU: a single-process run; two real ranks
with torch.distributed (gloo) reading disjoint shards, killed and resumed; runs stopped mid-epoch
or at an epoch's end and resumed from their checkpoint, which train on exactly the samples, and end
with exactly the weights, of the uninterrupted run; the baseline and the ceiling; bad input."""

from __future__ import annotations

import collections
import json
import math
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from bench_scripts import load_bench

from conftest import run_cli

pytest.importorskip("torch")

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "train_unet.py"
VARIABLES = "2m_temperature,temperature@500,850,geopotential"  # 1 + 2 + 13 channels


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    root = tmp_path_factory.mktemp("train")
    store, stats = root / "era5.zarr", root / "stats.json"
    assert run_cli("synth", store, "--preset", "era5-small", "--steps", "26").returncode == 0
    r = run_cli("stats", store, "--vars", VARIABLES, "-o", stats)
    assert r.returncode == 0, r.stderr
    return store, stats


def run_example(dataset, tmp_path, *args, launcher=(), check=True):
    store, stats = dataset
    cmd = [*launcher, str(EXAMPLE), str(store), "--stats", str(stats), "--variables", VARIABLES,
           "--base-width", "8", "--depth", "2", "--batch-size", "4", "--device", "cpu", *map(str, args)]
    if not launcher:
        cmd.insert(0, sys.executable)
    # A rank that aborts prints every thread's Python stack, to say where. (The rare "terminate
    # called without an active exception" at exit was a Gloo thread in Python's shutdown: the
    # example now collects its DDP model before it.)
    env = {**os.environ, "PYTHONFAULTHANDLER": "1"}
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env)
    if check:
        assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def test_single_process_run_trains_and_reports(dataset, tmp_path):
    proc = run_example(dataset, tmp_path, "--epochs", 2, "--json-out", tmp_path / "log.json",
                       "--plot", tmp_path / "run.png")
    assert (tmp_path / "run.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    log = json.loads((tmp_path / "log.json").read_text())
    assert log["loader"] == "zarrstream" and log["channels"] == 16 and log["world_size"] == 1
    # 25 samples, batches of 4 with drop_last: 6 per epoch, every sample at most once per epoch.
    assert len(log["origins"]) == 12 and log["samples"] == 48
    for epoch in (0, 1):
        origins = [t for row in log["origins"] if row[0] == epoch for t in row[1:]]
        assert len(origins) == len(set(origins)) == 24 and all(0 <= t < 25 for t in origins)
    assert 0 < log["final_loss"] < 10
    assert 0 <= log["waiting_fraction"] <= 1 and log["samples_per_second"] > 0
    assert log["loader_stats"]["bytes_decoded"] > 0
    # The run's data: the store as given and the digest of its metadata.
    (store,) = log["dataset"]
    assert store["url"] == str(dataset[0]) and store["kind"] == "zarr" and len(store["id"]) == 64
    assert store["id"] in proc.stdout
    assert log["loader_threads"] == len(os.sched_getaffinity(0))
    assert log["gpu_memory"] is None and "GPU memory" not in proc.stdout
    assert log["gpu_idle_fraction"] is None and "GPU idle" not in proc.stdout
    assert not log["channels_last"] and not log["cudnn_benchmark"] and not log["high_priority_stream"]  # GPU only
    assert "zarrstream on cpu x1" in proc.stdout and "samples/s" in proc.stdout


def test_cold_runs_drop_the_stores_from_the_page_cache_before_every_epoch(dataset, tmp_path):
    run_example(dataset, tmp_path, "--epochs", 2, "--cold", "--json-out", tmp_path / "log.json")
    log = json.loads((tmp_path / "log.json").read_text())
    assert log["cold"] is True and log["page_cache_drops"] == 2 and log["samples"] == 48
    # (with the loader's timeline: a wait for each of the epoch's 6 batches, and their stages)
    plain = run_example(dataset, tmp_path, "--epochs", 1, "--timeline", "--json-out", tmp_path / "plain.json")
    assert plain.returncode == 0
    plain_log = json.loads((tmp_path / "plain.json").read_text())
    assert plain_log["page_cache_drops"] == 0
    stages = collections.Counter(s["stage"] for s in plain_log["loader_timeline"])
    assert stages["wait"] == 6 and stages["plan"] >= 6 and stages["read+decode"] >= 6, stages
    assert log["loader_timeline"] is None
    # Only local stores have pages here to drop.
    store, stats = dataset
    proc = subprocess.run([sys.executable, str(EXAMPLE), "s3://bucket/era5.zarr", "--stats", str(stats), "--cold"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "not a local store folder: s3://bucket/era5.zarr" in proc.stderr


def test_dropping_a_store_from_the_page_cache_leaves_none_of_it_resident(dataset):
    if shutil.which("fincore") is None:
        pytest.skip("fincore (util-linux) is not installed: residency cannot be read")
    page_cache = load_bench("page_cache")
    store, _ = dataset
    files = page_cache.store_files(store)
    for path in files:
        Path(path).read_bytes()

    def resident() -> int:
        out = subprocess.run(["fincore", "--bytes", "--noheadings", "--output", "RES", *files],
                             capture_output=True, text=True, check=True).stdout
        return sum(int(v) for v in out.split())

    if resident() == 0:
        pytest.skip("this file system keeps no page cache for the store (fincore shows nothing resident)")
    assert page_cache.drop_from_page_cache(store) == sum(os.path.getsize(f) for f in files)
    assert resident() == 0
    cold = page_cache.read_cold(store, threads=2)
    assert cold["stored_bytes"] == sum(os.path.getsize(f) for f in files) and cold["stored_gb_per_s"] > 0
    with pytest.raises(ValueError, match="not a local store folder"):
        page_cache.drop_from_page_cache("s3://bucket/era5.zarr")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_ranks_with_torchrun_read_disjoint_shards_and_resume(dataset, tmp_path):
    def torchrun(*args):
        launcher = (sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2",
                    "--master_addr", "127.0.0.1", "--master_port", str(free_port()))
        run_example(dataset, tmp_path, "--epochs", 2, "--checkpoint", tmp_path / "run.pt", *args, launcher=launcher)

    def rank_logs(name):
        return [json.loads((tmp_path / f"{name}{suffix}.json").read_text()) for suffix in ("", ".rank1")]

    # 25 samples over 2 ranks in batches of 4 (drop_last): 3 batches, 12 samples, per rank and epoch.
    # Killed after step 4 (epoch 1, batch 1 of 3) with every rank's position saved at step 4.
    torchrun("--checkpoint-every", 2, "--stop-after", 4, "--json-out", tmp_path / "first.json")
    torchrun("--resume", "--json-out", tmp_path / "rest.json")
    first, rest = rank_logs("first"), rank_logs("rest")
    assert [log["rank"] for log in first + rest] == [0, 1, 0, 1]
    assert all(log["world_size"] == 2 and math.isfinite(log["final_loss"]) for log in first + rest)
    # The two ranks on this machine share its cores rather than each starting one thread per core.
    assert all(log["loader_threads"] == max(1, len(os.sched_getaffinity(0)) // 2) for log in first + rest)
    origins = [a["origins"] + b["origins"] for a, b in zip(first, rest)]
    assert [[row[0] for row in rank] for rank in origins] == [[0, 0, 0, 1, 1, 1]] * 2
    for epoch in (0, 1):
        shards = [[t for row in rank if row[0] == epoch for t in row[1:]] for rank in origins]
        assert [len(s) for s in shards] == [12, 12] and [len(set(s)) for s in shards] == [12, 12]
        assert not set(shards[0]) & set(shards[1])


def test_the_baseline_under_torchrun_shards_its_samples_among_the_ranks(dataset, tmp_path):
    """--loader dataloader with two ranks: a DistributedSampler gives each rank its own half of the
    epoch, as PyTorch users shard a Dataset."""
    launcher = (sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2",
                "--master_addr", "127.0.0.1", "--master_port", str(free_port()))
    run_example(dataset, tmp_path, "--loader", "dataloader", "--workers", 0,
                "--variables", "2m_temperature,geopotential", "--epochs", 2,
                "--json-out", tmp_path / "baseline.json", launcher=launcher)
    logs = [json.loads((tmp_path / f"baseline{suffix}.json").read_text()) for suffix in ("", ".rank1")]
    by_epoch = []
    for epoch in (0, 1):
        # 25 samples, 12 per rank (the sampler drops the odd one), 3 batches of 4.
        shards = [[t for row in log["origins"] if row[0] == epoch for t in row[1:]] for log in logs]
        assert [len(s) for s in shards] == [12, 12] and [len(set(s)) for s in shards] == [12, 12]
        assert not set(shards[0]) & set(shards[1])
        by_epoch.append(shards[0])
    assert by_epoch[0] != by_epoch[1]  # each epoch shuffled anew


RESUMED = ("--seed", 3, "--shuffle", "exact")


@pytest.fixture(scope="module")
def uninterrupted(dataset, tmp_path_factory):
    """Two epochs (12 steps) in one go: the samples of every step and the final weights."""
    tmp_path = tmp_path_factory.mktemp("uninterrupted")
    run_example(dataset, tmp_path, *RESUMED, "--epochs", 2, "--checkpoint", tmp_path / "run.pt",
                "--json-out", tmp_path / "log.json")
    origins = json.loads((tmp_path / "log.json").read_text())["origins"]
    assert [row[0] for row in origins] == [0] * 6 + [1] * 6
    return origins, final_weights(tmp_path / "run.pt")


def final_weights(checkpoint: Path) -> dict:
    import torch

    return torch.load(checkpoint, weights_only=False)["model"]


def assert_same_weights(a: dict, b: dict) -> None:
    import torch

    assert a.keys() == b.keys()
    different = [name for name in a if not torch.equal(a[name], b[name])]
    assert not different, f"weights differ: {different}"


def test_a_run_killed_mid_epoch_resumes_with_the_same_samples(dataset, uninterrupted, tmp_path):
    whole, weights = uninterrupted
    checkpoint = tmp_path / "run.pt"
    # Killed after step 8 (epoch 1, batch 2 of 6); the last checkpoint is from step 7.
    run_example(dataset, tmp_path, *RESUMED, "--epochs", 2, "--checkpoint", checkpoint, "--checkpoint-every", 7,
                "--stop-after", 8, "--json-out", tmp_path / "first.json")
    assert final_weights(checkpoint).keys() == weights.keys()
    run_example(dataset, tmp_path, *RESUMED, "--epochs", 2, "--checkpoint", checkpoint, "--resume",
                "--json-out", tmp_path / "rest.json")
    first, rest = (json.loads((tmp_path / f"{n}.json").read_text())["origins"] for n in ("first", "rest"))
    assert len(first) == 8 and len(rest) == 5
    assert first[:7] + rest == whole
    assert_same_weights(final_weights(checkpoint), weights)


def test_a_run_stopped_at_the_end_of_an_epoch_resumes_with_the_next(dataset, uninterrupted, tmp_path):
    whole, weights = uninterrupted
    checkpoint = tmp_path / "run.pt"
    # --steps 6 ends exactly with epoch 0's last batch; the resumed run goes on to 12 steps in all.
    run_example(dataset, tmp_path, *RESUMED, "--steps", 6, "--checkpoint", checkpoint,
                "--json-out", tmp_path / "first.json")
    run_example(dataset, tmp_path, *RESUMED, "--steps", 12, "--checkpoint", checkpoint, "--resume",
                "--json-out", tmp_path / "rest.json")
    first, rest = (json.loads((tmp_path / f"{n}.json").read_text())["origins"] for n in ("first", "rest"))
    assert len(first) == 6 and len(rest) == 6
    assert first + rest == whole
    assert_same_weights(final_weights(checkpoint), weights)


@pytest.mark.parametrize("source", ["dataloader", "synthetic"])
def test_baseline_and_ceiling_feed_the_same_model(dataset, tmp_path, source):
    args = ["--loader", "dataloader", "--workers", 1] if source == "dataloader" else ["--synthetic"]
    # The baseline takes whole variables: 2m_temperature and the 13 levels of temperature.
    store, stats = dataset
    r = run_cli("stats", store, "--vars", "2m_temperature,temperature", "-o", tmp_path / "whole.json")
    assert r.returncode == 0, r.stderr
    # The first 5 days: 20 steps, 19 samples with a next step, 4 full batches.
    run_example((store, tmp_path / "whole.json"), tmp_path, "--variables", "2m_temperature,temperature",
                "--select", "time=1979-01-01:1979-01-05", *args, "--json-out", tmp_path / "log.json")
    log = json.loads((tmp_path / "log.json").read_text())
    assert log["loader"] == source and log["channels"] == 14
    assert log["samples"] == 16 and 0 < log["final_loss"] < 10


def test_bad_input_gets_a_clear_error(dataset, tmp_path):
    unknown = run_example(dataset, tmp_path, "--variables", "2m_temperature,no_such_variable", check=False)
    assert unknown.returncode != 0
    assert "no_such_variable" in unknown.stderr and "Traceback" not in unknown.stderr
    no_checkpoint = run_example(dataset, tmp_path, "--resume", "--checkpoint", tmp_path / "missing.pt", check=False)
    assert no_checkpoint.returncode == 2 and "--resume needs --checkpoint" in no_checkpoint.stderr
    bad_split = run_example(dataset, tmp_path, "--select", "time", check=False)
    assert bad_split.returncode == 2 and "expected DIM=START:STOP" in bad_split.stderr


def test_a_joined_dataset_with_static_and_computed_forcings_trains(dataset, tmp_path):
    """Surface, pressure-level and constants stores joined, from a --dataset file (paths relative
    to it) or from STOREs and --forcings: the forcings are inputs only, so the model predicts the
    variables' 3 channels from 6."""
    store, _ = dataset
    parts = tmp_path / "parts"
    for name, variables in (("surface", "2m_temperature"), ("pressure", "temperature,geopotential"),
                            ("constants", "land_sea_mask")):
        r = run_cli("rechunk", store, parts / f"{name}.zarr", "--vars", variables)
        assert r.returncode == 0, r.stderr
    stores = [parts / f"{name}.zarr" for name in ("surface", "pressure", "constants")]
    stats = parts / "stats.json"
    r = run_cli("stats", *stores, "--vars", "2m_temperature,temperature@500,850,land_sea_mask", "-o", stats)
    assert r.returncode == 0, r.stderr
    forcings = ["land_sea_mask", "cos_latitude", "cos_solar_zenith_angle"]
    (parts / "dataset.json").write_text(json.dumps({
        "dataset": ["surface.zarr", "pressure.zarr", "constants.zarr"],
        "variables": ["2m_temperature", "temperature@500,850"], "forcings": forcings}))
    common = [sys.executable, str(EXAMPLE), "--stats", str(stats), "--base-width", "8", "--depth", "2",
              "--batch-size", "4", "--device", "cpu", "--steps", "2"]
    runs = {"file": ["--dataset", str(parts / "dataset.json")],
            "stores": [*map(str, stores), "--variables", "2m_temperature,temperature@500,850",
                       "--forcings", ",".join(forcings)]}
    for name, args in runs.items():
        proc = subprocess.run([*common, *args, "--json-out", str(tmp_path / f"{name}.json"),
                               "--checkpoint", str(tmp_path / f"{name}.pt")],
                              capture_output=True, text=True, timeout=300, cwd=tmp_path)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        log = json.loads((tmp_path / f"{name}.json").read_text())
        assert log["channels"] == 6 and log["samples"] == 8 and math.isfinite(log["final_loss"])
        import torch

        head = torch.load(tmp_path / f"{name}.pt", weights_only=False)["model"]["head.weight"]
        assert head.shape[:2] == (3, 8)  # 3 predicted channels from the first stage's 8
    both = subprocess.run([*common, str(store), "--dataset", str(parts / "dataset.json")],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert both.returncode == 2 and "one or more STOREs or --dataset FILE" in both.stderr


@pytest.mark.gpu
def test_gpu_run_trains_on_gpu_batches_in_the_cpu_runs_order(dataset, tmp_path):
    """On a GPU the example trains from the loader's GPU batches; with the same shuffle blocks the
    loader's order does not depend on the device, so the samples are the CPU run's. (By default the
    block size does: GPU batches size blocks by the batch, CPU batches by the chunk cache.)"""
    blocks = ("--block-chunks", 2)
    cpu = tmp_path / "cpu.json"
    run_example(dataset, tmp_path, "--epochs", 2, "--json-out", cpu, *blocks)
    gpu = tmp_path / "gpu.json"
    # Every chunk on nvCOMP: the default ("auto") keeps them on the CPU where its cores keep up.
    proc = run_example(dataset, tmp_path, "--epochs", 2, "--json-out", gpu, "--device", "cuda", *blocks,
                       "--channels-last", "--high-priority-stream", "--cpu-decode-share", 0)
    log = json.loads(gpu.read_text())
    assert log["device"].startswith("cuda"), proc.stdout
    assert log["channels_last"] and log["cudnn_benchmark"] and log["high_priority_stream"]
    # The training stream's idle time (CUDA events) includes at least the waits for batches.
    assert log["waiting_fraction"] - 1e-3 <= log["gpu_idle_fraction"] < 1 and "GPU idle" in proc.stdout, log
    assert log["origins"] == json.loads(cpu.read_text())["origins"]
    assert math.isfinite(log["final_loss"]) and 0 < log["final_loss"] < 10
    stats = log["loader_stats"]
    assert stats["gpu_decoded_chunks"] > 0 and stats["gpu_rejected_chunks"] == 0, stats
    assert "GPU batches (nvCOMP" in proc.stdout, proc.stdout
    memory = log["gpu_memory"]
    assert 0 < memory["torch_peak_reserved_bytes"] < memory["peak_used_bytes"] <= memory["total_bytes"], memory
    assert memory["torch_alloc_retries"] >= 0, memory
    assert log["prefetch"]["asked"] >= log["prefetch"]["ended"] >= 1, log["prefetch"]
    assert "GPU memory: at most" in proc.stdout
    # --no-gpu-decode: the same samples from chunks the loader's CPU threads decoded.
    cpu_decoded = tmp_path / "cpu-decoded.json"
    proc = run_example(dataset, tmp_path, "--epochs", 2, "--json-out", cpu_decoded, "--device", "cuda",
                       "--no-gpu-decode", "--gpu-wave-mb", 1, *blocks)
    log = json.loads(cpu_decoded.read_text())
    assert log["origins"] == json.loads(cpu.read_text())["origins"]
    assert log["gpu_decode"] == "chunks decode on the CPU: gpu_decode is off"
    assert log["loader_stats"]["gpu_decoded_chunks"] == 0 and log["loader_stats"]["bytes_to_gpu"] > 0
    assert math.isfinite(log["final_loss"]) and 0 < log["final_loss"] < 10
    # --cpu-decode-share auto: the same samples, the share in the progress lines and the summary.
    adaptive = tmp_path / "adaptive.json"
    proc = run_example(dataset, tmp_path, "--epochs", 2, "--json-out", adaptive, "--device", "cuda",
                       "--cpu-decode-share", "auto", "--log-every", 1, *blocks)
    log = json.loads(adaptive.read_text())
    assert log["origins"] == json.loads(cpu.read_text())["origins"]
    assert log["cpu_decode_share"] == "auto" and "adapts to the consumer's time per batch" in log["gpu_decode"]
    assert all(0 <= step["cpu_decode_share"] <= 1 for step in log["steps"]), log["steps"]  # after each step
    assert "CPU decode share" in proc.stdout and "share of nvCOMP's chunks ended at" in proc.stdout, proc.stdout


@pytest.mark.gpu
@pytest.mark.multi_gpu
def test_two_ranks_on_two_gpus_train_on_their_own_devices_from_disjoint_shards(dataset, tmp_path):
    """torchrun with NCCL: each rank's loader makes GPU batches on that rank's device (LOCAL_RANK)
    from its own shard; together the ranks see every sample of an epoch once."""
    import torch

    if torch.cuda.device_count() < 2:
        pytest.skip(f"GPU test: two devices are needed, this machine has {torch.cuda.device_count()}")
    launcher = (sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2",
                "--master_addr", "127.0.0.1", "--master_port", str(free_port()))
    run_example(dataset, tmp_path, "--epochs", 2, "--device", "cuda", "--high-priority-stream",
                "--cpu-decode-share", 0, "--json-out", tmp_path / "ddp.json", launcher=launcher)
    logs = [json.loads((tmp_path / f"ddp{suffix}.json").read_text()) for suffix in ("", ".rank1")]
    assert [log["device"] for log in logs] == ["cuda:0", "cuda:1"]
    assert all(log["world_size"] == 2 and math.isfinite(log["final_loss"]) for log in logs)
    assert all(log["loader_stats"]["gpu_decoded_chunks"] > 0 for log in logs)
    for epoch in (0, 1):
        shards = [[t for row in log["origins"] if row[0] == epoch for t in row[1:]] for log in logs]
        assert [len(s) for s in shards] == [12, 12] and [len(set(s)) for s in shards] == [12, 12]
        assert not set(shards[0]) & set(shards[1])


MATRIX = Path(__file__).resolve().parent.parent / "bench" / "train_matrix.py"


def test_the_training_matrix_compares_runs_with_the_ceiling_and_reports_failures(dataset, tmp_path):
    store, stats = dataset
    common = f"--variables {VARIABLES} --base-width 8 --depth 2 --batch-size 4 --device cpu --steps 3"
    proc = subprocess.run(
        [sys.executable, str(MATRIX), "--stats", str(stats), "--store", f"small={store}", "--common", common,
         "--run", "ceiling=small:--synthetic", "--run", "zarrstream, prefetch 1=small:--prefetch 1",
         "--run", "broken=small:--select time", "--run", "two ranks=small:--prefetch 1 --ranks 2",
         "--json", str(tmp_path / "m.json")],
        capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    rows = [l for l in proc.stdout.splitlines() if l.startswith("| ")]
    assert rows[0].startswith("| run | samples/s | of the ceiling") and len(rows) == 6  # header, rule, 4 runs
    assert rows[2].startswith("| ceiling |") and "| 100 % |" in rows[2]
    assert rows[3].startswith("| zarrstream, prefetch 1 |") and " % |" in rows[3]
    assert rows[4].startswith("| broken | failed: exit 2:") and "DIM=START:STOP" in rows[4]
    assert rows[5].startswith("| two ranks |") and " % |" in rows[5]
    report = json.loads((tmp_path / "m.json").read_text())
    assert [r["name"] for r in report["runs"]] == ["ceiling", "zarrstream, prefetch 1", "broken", "two ranks"]
    assert report["ceiling"] == report["runs"][0]["log"]["samples_per_second"] > 0
    assert report["runs"][1]["log"]["loader"] == "zarrstream" and report["runs"][1]["log"]["samples"] == 12
    # Data-parallel: both ranks' logs, their rates summed, each rank 3 steps of its own samples.
    ddp = report["runs"][3]["log"]
    assert ddp["world_size"] == 2 and [r["rank"] for r in ddp["ranks"]] == [0, 1]
    assert ddp["samples_per_second"] == pytest.approx(sum(r["samples_per_second"] for r in ddp["ranks"]))
    origins = [set(t for row in r["origins"] for t in row[1:]) for r in ddp["ranks"]]
    assert all(len(o) == 12 for o in origins) and not origins[0] & origins[1]
    assert report["baseline"] is None and "× |" not in proc.stdout  # no --loader dataloader run
    # The machine, above the table and in the report.
    assert report["machine"]["cores"] >= 1 and f"machine: {report['machine']['cores']} cores (" in proc.stdout
    bad = subprocess.run([sys.executable, str(MATRIX), "--stats", str(stats), "--run", "x=nowhere:"],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode != 0 and "no --store named 'nowhere'" in bad.stderr


def test_the_training_matrix_states_each_run_as_a_multiple_of_the_baseline():
    matrix = load_bench("train_matrix")
    assert matrix.is_baseline(["--loader", "dataloader", "--workers", "16"])
    assert matrix.is_baseline(["--loader=dataloader"])
    assert not matrix.is_baseline(["--loader", "dataloader", "--loader", "zarrstream"])
    assert not matrix.is_baseline(["--synthetic"])

    def log(rate):
        return {"samples_per_second": rate, "world_size": 1, "waiting_fraction": 0.01}

    rows = [line for line in matrix.table([("ceiling", log(80.0)), ("zarrstream", log(68.0)),
                                           ("baseline", log(4.0)), ("oom", {"error": "exit 1: out of memory"})],
                                          ceiling=80.0, baseline=4.0).splitlines()]
    assert rows[0].startswith("| run | samples/s | of the ceiling | × the baseline | waiting | GPU idle | "
                              "median step, ms |")
    assert rows[3].startswith("| zarrstream | 68.0 | 85 % | 17.0× | 1.0 % |")
    assert rows[4].startswith("| baseline | 4.0 | 5 % | 1.0× |")
    assert rows[5] == "| oom | failed: exit 1: out of memory | | | | | | | | |"
    adaptive = dict(log(70.0), cpu_decode_share="auto", gpu_decode="nvCOMP 6.0.0 (libnvcomp.so.6); ...",
                    gpu_idle_fraction=0.015, gpu_memory={"peak_used_bytes": 6e10},
                    loader_stats={"bytes_to_gpu": 1, "gpu_decode_seconds": 5.0, "gpu_decoded_chunks": 900,
                                  "cpu_decode_share": 0.4})
    row = matrix.table([("auto", adaptive)], ceiling=80.0).splitlines()[2]
    assert row == "| auto | 70.0 | 88 % |  | 1.0 % | 1.5 % |  | 5.0 | 900 (CPU share ended at 40 %) | 60.0 |"
    steps = [{"step_ms": 5000.0}, {"step_ms": 230.0}, {"step_ms": 240.0}, {"step_ms": 900.0}]
    assert "| 1.5 % | 240.0 | 5.0 |" in matrix.table([("auto", dict(adaptive, steps=steps))], ceiling=80.0)
    # With gpu_decode off no share is shown: the CPU decoded every chunk whatever the option said.
    cpu = dict(adaptive, gpu_decode="chunks decode on the CPU: gpu_decode is off",
               loader_stats=dict(adaptive["loader_stats"], gpu_decoded_chunks=0, cpu_decode_share=0.0))
    assert "| 5.0 | 0 | 60.0 |" in matrix.table([("CPU", cpu)], ceiling=80.0).splitlines()[2]
    # A run whose PyTorch allocator ran short of GPU memory says how often.
    adaptive["gpu_memory"]["torch_alloc_retries"] = 12
    row = matrix.table([("auto", adaptive)], ceiling=80.0).splitlines()[2]
    assert row.endswith("| 60.0 (PyTorch ran short 12×) |"), row
    # ... and where the loader lowered its batches ahead because of it.
    adaptive["prefetch"] = {"asked": 2, "ended": 1}
    row = matrix.table([("auto", adaptive)], ceiling=80.0).splitlines()[2]
    assert row.endswith("| 60.0 (PyTorch ran short 12×) (prefetch 2 → 1) |"), row
    assert all(r.count("|") == rows[0].count("|") for r in rows[:5])
    # A failed run's row quotes the exception, a rank's where torchrun's report follows it.
    torchrun = ["Traceback (most recent call last):", '[rank1]:   File "train_unet.py", line 9, in <module>',
                "[rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 6.00 GiB.",
                "E1125 torch/distributed/elastic/multiprocessing/api.py failed (exitcode: 1)",
                "=" * 60, "  rank      : 1 (local_rank: 1)", "=" * 60]
    assert (matrix.error_line(torchrun)
            == "[rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 6.00 GiB.")
    assert matrix.error_line(["step 3", "error: no_such_variable: not in the store"]) == \
        "error: no_such_variable: not in the store"
    assert matrix.error_line(["usage: train_unet.py", "train_unet.py: error: bad --select"]) == \
        "train_unet.py: error: bad --select"
    assert matrix.error_line([]) == "no output"


def test_the_training_matrix_cold_measures_the_disk_and_each_runs_share_of_it(dataset, tmp_path):
    store, stats = dataset
    common = f"--variables {VARIABLES} --base-width 8 --depth 2 --batch-size 4 --device cpu --steps 3"
    proc = subprocess.run(
        [sys.executable, str(MATRIX), "--stats", str(stats), "--store", f"small={store}", "--common", common,
         "--run", "ceiling=small:--synthetic", "--run", "zarrstream=small:--prefetch 1", "--cold",
         "--json", str(tmp_path / "m.json")],
        capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert f"disk: {store} read cold at " in proc.stdout
    rows = [l for l in proc.stdout.splitlines() if l.startswith("| ")]
    assert rows[0].endswith("| of min(ceiling, disk) |") and len(rows) == 4
    assert rows[2].startswith("| ceiling |") and rows[2].endswith("| |")  # the ceiling reads nothing
    assert rows[3].startswith("| zarrstream |") and rows[3].endswith(" % |")
    report = json.loads((tmp_path / "m.json").read_text())
    assert report["disk"][str(store)]["stored_bytes"] > 0 and "--cold" in report["common"]
    run = report["runs"][1]["log"]
    assert run["cold"] is True and run["page_cache_drops"] >= 1
    assert run["disk_read_bytes"] >= 0  # Linux's /proc/self/io
    assert 0 < run["disk_bound_samples_per_second"] <= report["ceiling"]


def test_a_run_takes_ranks_and_environment_variables_of_its_own():
    matrix = load_bench("train_matrix")
    stores = {"gf": "/data/gf.zarr"}
    run = matrix.parse_run("one block=gf:--prefetch 1 --env ZARRSTREAM_GPU_BLOCKS_PER_SM=1 --ranks 2 "
                           "--env A=b=c --no-gpu-decode", stores)
    assert (run.name, run.store, run.ranks) == ("one block", "/data/gf.zarr", 2)
    assert run.args == ["--prefetch", "1", "--no-gpu-decode"]
    assert run.env == {"ZARRSTREAM_GPU_BLOCKS_PER_SM": "1", "A": "b=c"}
    assert matrix.parse_run("plain=gf:", stores).env == {}
    for bad, message in [("x=gf:--env", "--env takes KEY=VALUE"), ("x=gf:--env NOVALUE", "--env takes KEY=VALUE"),
                         ("x=gf:--ranks two", "--ranks takes a number of ranks")]:
        with pytest.raises(SystemExit, match=message):
            matrix.parse_run(bad, stores)


def test_the_disk_bound_counts_what_the_run_read_from_the_disk_not_the_page_cache():
    matrix = load_bench("train_matrix")
    stats = {"bytes_read": 8e9}
    log = {"samples": 100, "world_size": 1, "loader_stats": stats}
    # 2 GB/s; the loader read 80 MB per sample, half of it the page cache's (each time step is one
    # sample's input and another's target in the same epoch): 50 samples/s, not 25.
    assert matrix.disk_bound(dict(log, disk_read_bytes=4e9), 2e9, ceiling=70.0) == 50.0
    assert matrix.disk_bound(dict(log, disk_read_bytes=4e9), 2e9, ceiling=40.0) == 40.0
    assert matrix.disk_bound(dict(log, disk_read_bytes=None), 2e9, ceiling=70.0) == 25.0  # unknown
    assert matrix.disk_bound(dict(log, disk_read_bytes=0), 2e9, ceiling=70.0) == 70.0  # all cached
    assert matrix.disk_bound(dict(log, loader_stats={}), 2e9, ceiling=70.0) is None  # read nothing


def test_a_run_that_overruns_its_time_is_stopped_with_all_its_processes(dataset, tmp_path):
    """--timeout ends the run and its DataLoader workers, so that none of them holds memory (on a GPU,
    until it exits) while the next run goes on."""
    store, stats = dataset
    common = "--variables 2m_temperature,geopotential --base-width 8 --depth 2 --batch-size 4 --device cpu"
    proc = subprocess.run(
        [sys.executable, str(MATRIX), "--stats", str(stats), "--store", f"small={store}", "--common", common,
         "--run", "slow=small:--loader dataloader --workers 2 --epochs 1000", "--timeout", "8"],
        capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "| slow | failed: did not finish in 8 s |" in proc.stdout, proc.stdout
    matrix = load_bench("train_matrix")
    assert matrix.processes_with(str(EXAMPLE)) == []


def test_the_training_matrix_repeats_in_turn_and_shows_the_median(dataset, tmp_path):
    store, stats = dataset
    common = f"--variables {VARIABLES} --base-width 8 --depth 2 --batch-size 4 --device cpu --steps 2"
    proc = subprocess.run(
        [sys.executable, str(MATRIX), "--stats", str(stats), "--store", f"small={store}", "--common", common,
         "--run", "ceiling=small:--synthetic", "--run", "zarrstream=small:--prefetch 1", "--repeat", "3",
         "--json", str(tmp_path / "m.json")],
        capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    progress = [l.split(":")[0] for l in proc.stdout.splitlines() if "(round " in l]
    assert progress == ["ceiling", "zarrstream"] * 3  # in turn, not three of one then three of the other
    report = json.loads((tmp_path / "m.json").read_text())
    assert report["repeat"] == 3
    for run in report["runs"]:
        rates = sorted(r["samples_per_second"] for r in run["repeats"])
        assert len(rates) == 3 and run["log"]["samples_per_second"] == rates[1]
        assert run["log"]["failed_runs"] == 0
    row = next(l for l in proc.stdout.splitlines() if l.startswith("| zarrstream |"))
    assert f"({min(rates):.1f}–{max(rates):.1f})" in row
    bad = subprocess.run([sys.executable, str(MATRIX), "--stats", str(stats), "--store", f"small={store}",
                          "--run", "x=small:", "--repeat", "0"], capture_output=True, text=True, timeout=60)
    assert bad.returncode != 0 and "--repeat 0: expected at least 1" in bad.stderr


PROFILE = Path(__file__).resolve().parent.parent / "bench" / "step_profile.py"


def test_the_step_profile_sums_by_name_and_measures_the_overlap_with_the_loaders_kernels():
    profile = load_bench("step_profile")
    assert profile.merged([(5, 7), (0, 2), (1, 3), (7, 8)]) == [[0, 3], [5, 8]]
    assert profile.overlap_with([(2, 6), (0, 10)], [[0, 3], [5, 8]]) == 1 + 1 + 3 + 3
    events = [("zs_scatter", 0, 10), ("conv", 5, 15), ("zs_scatter", 20, 30), ("conv", 25, 26),
              ("Memcpy HtoD (Pinned -> Device)", 0, 40), ("relu", 40, 41)]
    summary = profile.summarise(events, top=2)
    assert summary["by_name"] == [{"name": "Memcpy HtoD (Pinned -> Device)", "ms": 0.04, "count": 1},
                                  {"name": "zs_scatter", "ms": 0.02, "count": 2}]
    assert summary["model_kernels_ms"] == 0.012  # conv 10 + 1, relu 1: the copy is not the model's
    assert summary["model_kernels_beside_loader_kernels_ms"] == 0.006
    assert (summary["loader_kernels_ms"], summary["loader_kernels"]) == (0.02, 2)


def test_the_step_profile_records_a_training_run(dataset, tmp_path):
    store, stats = dataset
    out = subprocess.run(
        [sys.executable, str(PROFILE), "--activity", "cpu", "--top", "5", "--json", str(tmp_path / "p.json"), "--",
         str(store), "--stats", str(stats), "--variables", VARIABLES, "--base-width", "8", "--depth", "2",
         "--batch-size", "4", "--device", "cpu", "--steps", "2"],
        capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "CPU activity" in out.stdout
    summary = json.loads((tmp_path / "p.json").read_text())
    assert len(summary["by_name"]) == 5 and all(row["count"] > 0 for row in summary["by_name"])
    assert any(row["name"].startswith("aten::") for row in summary["by_name"])
    bad = subprocess.run([sys.executable, str(PROFILE), str(store)], capture_output=True, text=True, timeout=60)
    assert bad.returncode != 0 and "usage: step_profile.py" in bad.stderr

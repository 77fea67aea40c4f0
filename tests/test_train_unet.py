"""examples/train_unet.py, the product's main job, on CPU: a single-process run, two real ranks
with torch.distributed (gloo) reading disjoint shards, and a run killed mid-epoch and resumed from
its checkpoint that trains on exactly the samples the uninterrupted run did."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

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


def run_example(dataset, tmp_path, *args, launcher=()):
    store, stats = dataset
    cmd = [*launcher, str(EXAMPLE), str(store), "--stats", str(stats), "--variables", VARIABLES,
           "--base-width", "8", "--depth", "2", "--batch-size", "4", "--device", "cpu", *map(str, args)]
    if not launcher:
        cmd.insert(0, sys.executable)
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=tmp_path)
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
    assert "zarrstream on cpu x1" in proc.stdout and "samples/s" in proc.stdout


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_ranks_with_torchrun_read_disjoint_shards(dataset, tmp_path):
    launcher = (sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2",
                "--master_addr", "127.0.0.1", "--master_port", str(free_port()))
    run_example(dataset, tmp_path, "--epochs", 1, "--json-out", tmp_path / "ddp.json", launcher=launcher)
    logs = [json.loads((tmp_path / name).read_text()) for name in ("ddp.json", "ddp.rank1.json")]
    shards = [{t for row in log["origins"] for t in row[1:]} for log in logs]
    assert [log["rank"] for log in logs] == [0, 1] and all(log["world_size"] == 2 for log in logs)
    # 25 samples over 2 ranks in batches of 4 (drop_last): 3 batches, 12 samples, per rank.
    assert [len(s) for s in shards] == [12, 12]
    assert not shards[0] & shards[1]


def test_a_resumed_run_continues_with_the_same_samples(dataset, tmp_path):
    common = ("--epochs", 2, "--seed", 3)
    run_example(dataset, tmp_path, *common, "--json-out", tmp_path / "whole.json")
    checkpoint = tmp_path / "run.pt"
    # Killed after step 8 (epoch 1, step 2 of 6); the last checkpoint is from step 7.
    run_example(dataset, tmp_path, *common, "--checkpoint", checkpoint, "--checkpoint-every", 7,
                "--stop-after", 8, "--json-out", tmp_path / "first.json")
    run_example(dataset, tmp_path, *common, "--checkpoint", checkpoint, "--resume",
                "--json-out", tmp_path / "rest.json")
    whole, first, rest = (json.loads((tmp_path / f"{n}.json").read_text())["origins"]
                          for n in ("whole", "first", "rest"))
    assert len(whole) == 12 and len(first) == 8 and len(rest) == 5
    assert first[:7] + rest == whole


@pytest.mark.parametrize("source", ["dataloader", "synthetic"])
def test_baseline_and_ceiling_feed_the_same_model(dataset, tmp_path, source):
    args = ["--loader", "dataloader", "--workers", 1] if source == "dataloader" else ["--synthetic"]
    # The baseline takes whole variables: 2m_temperature and the 13 levels of temperature.
    store, stats = dataset
    r = run_cli("stats", store, "--vars", "2m_temperature,temperature", "-o", tmp_path / "whole.json")
    assert r.returncode == 0, r.stderr
    run_example((store, tmp_path / "whole.json"), tmp_path, "--variables", "2m_temperature,temperature",
                *args, "--json-out", tmp_path / "log.json")
    log = json.loads((tmp_path / "log.json").read_text())
    assert log["loader"] == source and log["channels"] == 14
    assert log["samples"] == 24 and 0 < log["final_loss"] < 10

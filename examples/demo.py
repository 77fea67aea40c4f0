"""The zarrstream demo: the data-preparation path of a training job, on a generated ERA5-like store.

1. `zarrstream synth` writes a 1° ERA5-like dataset (WeatherBench2 variable names, 13 levels).
2. `zarrstream inspect` shows its layout.
3. `zarrstream stats` computes per-channel normalisation statistics over the training split only.
4. `zarrstream rechunk --stack --gpu-friendly` turns the training split into one
   (time, channel, latitude, longitude) array of 69 channels, in the layout the GPU path reads.
5. Random time steps (the training access pattern) are read from it, and checked against
   zarr-python.

6. A U-Net learns to predict the next 6-hourly state through `zarrstream.Loader`
   (examples/train_unet.py, two short epochs), ending with where the time went.

Run with `make demo`.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

import zarrstream

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "demo_data"
SOURCE = DATA / "era5_1deg.zarr"
STACKED = DATA / "era5_1deg_train.zarr"
STATS = DATA / "stats_train.json"
CLI = Path(sys.executable).parent / "zarrstream"

STEPS = 40  # 6-hourly: 10 days
TRAIN = "time=1979-01-01:1979-01-07"  # the first week; the rest is held out
VARIABLES = (
    "2m_temperature,10m_u_component_of_wind,10m_v_component_of_wind,mean_sea_level_pressure,"
    "geopotential,temperature,u_component_of_wind,v_component_of_wind,specific_humidity"
)


def run(*args: str) -> None:
    shown = [a if not a.startswith(str(ROOT)) else str(Path(a).relative_to(ROOT)) for a in args]
    print(f"\n$ zarrstream {' '.join(shown)}", flush=True)
    t0 = time.perf_counter()
    subprocess.run([str(CLI), *args], check=True)
    print(f"  ({time.perf_counter() - t0:.1f} s)")


def main() -> None:
    DATA.mkdir(exist_ok=True)
    if not (SOURCE / "zarr.json").exists():
        run("synth", str(SOURCE), "--preset", "era5-1deg", "--steps", str(STEPS), "--overwrite")
    run("inspect", str(SOURCE))
    run("stats", str(SOURCE), "--vars", VARIABLES, "--select", TRAIN, "-o", str(STATS))
    stats = json.loads(STATS.read_text())
    channels = stats["channels"]
    print(f"  {len(channels)} channels, e.g. " + ", ".join(
        f"{c['name']} mean {c['mean']:.4g} std {c['std']:.3g}" for c in channels[:2]))
    run("rechunk", str(SOURCE), str(STACKED), "--stack", "inputs", "--vars", VARIABLES,
        "--select", TRAIN, "--gpu-friendly", "--overwrite")

    inputs = zarrstream.open_group(str(STACKED))["inputs"]
    names = inputs.attrs["channel_names"]
    assert names == [c["name"] for c in channels], "stats and stacked channels disagree"
    step_bytes = inputs.nbytes // inputs.shape[0]
    print(f"\nstacked training array: {inputs.shape} {inputs.dtype}, chunks {inputs.chunks}, "
          f"shards {inputs.shard_shape}, {step_bytes / 1e6:.1f} MB per time step")

    rng = np.random.default_rng(0)
    steps = rng.integers(0, inputs.shape[0], size=100)
    inputs[0]  # warm up
    t0 = time.perf_counter()
    for t in steps:
        sample = inputs[int(t)]
    elapsed = time.perf_counter() - t0
    print(f"random time steps, zarrstream: {len(steps) / elapsed:.0f} samples/s "
          f"({len(steps) * step_bytes / elapsed / 1e9:.2f} GB/s decoded)")

    import zarr

    reference = zarr.open_group(str(STACKED), mode="r")["inputs"]
    t0 = time.perf_counter()
    for t in steps[:20]:
        expected = reference[int(t)]
    elapsed = time.perf_counter() - t0
    print(f"random time steps, zarr-python: {20 / elapsed:.0f} samples/s")
    assert np.array_equal(sample, reference[int(steps[-1])], equal_nan=True)
    assert np.array_equal(inputs[int(steps[19])], expected, equal_nan=True)
    print("check: zarrstream and zarr-python read identical samples")

    # 6. The main job: a U-Net learns the next 6-hourly state from the current one, fed by
    # zarrstream.Loader from the source store (GPU when there is one; a short run on a CPU).
    train = [sys.executable, str(ROOT / "examples" / "train_unet.py"), str(SOURCE), "--stats", str(STATS),
             "--variables", VARIABLES, "--select", TRAIN, "--epochs", "2", "--batch-size", "4",
             "--log-every", "2", "--json-out", str(DATA / "train_log.json"), "--plot", str(DATA / "train.png")]
    try:
        import torch

        on_gpu = torch.cuda.is_available()
    except ImportError:
        on_gpu = False
    if not on_gpu:
        train += ["--base-width", "16", "--depth", "3"]
    print(f"\n$ python examples/train_unet.py {SOURCE.relative_to(ROOT)} ... ({'GPU' if on_gpu else 'CPU'})",
          flush=True)
    subprocess.run(train, check=True)
    print_training_summary(json.loads((DATA / "train_log.json").read_text()))


def print_training_summary(log: dict) -> None:
    """The training run on one screen: its rate, its waiting, and where the loader's time went."""
    steps = log["steps"]
    stats = log["loader_stats"]
    step_seconds = sum(s["step_ms"] for s in steps[1:]) / 1e3
    wait_seconds = sum(s["wait_ms"] for s in steps[1:]) / 1e3
    mb = 1e6
    lines = [
        f"summary of the training run ({log['device']}, {len(steps)} steps of {log['samples'] // len(steps)} "
        f"samples, {log['channels']} channels)",
        f"  training        {log['samples_per_second']:.1f} samples/s over the steps after the first "
        f"(first step {log['first_step_seconds']:.1f} s: opening, first batch, start-up)",
        f"  waiting         {100 * log['waiting_fraction']:.1f} % of the step time blocked in next(loader): "
        f"{wait_seconds:.2f} s of {step_seconds:.1f} s (mean {log['mean_wait_ms']:.1f} ms per step)",
        *([f"  GPU idle        {100 * log['gpu_idle_fraction']:.1f} % of the time (the training stream between "
            "steps: waiting for batches and the host's work)"] if log.get("gpu_idle_fraction") is not None else []),
        f"  loader threads  plan {stats['plan_seconds']:.2f} s, read + decode {stats['read_decode_seconds']:.2f} s, "
        f"assemble {stats['assemble_seconds']:.2f} s (overlapped with training)",
        f"  bytes           read {stats['bytes_read'] / mb:.0f} MB from the store, decoded "
        f"{stats['bytes_decoded'] / mb:.0f} MB, used {stats['bytes_used'] / mb:.0f} MB in batches "
        f"({stats['bytes_decoded'] / max(stats['bytes_used'], 1):.2f} decoded per byte used)",
        f"  chunks          {stats['chunks_decoded']} decoded, {stats['cache_hits']} served from the cache "
        f"(of {stats['chunk_refs']} chunk references by samples), {stats['requests']} requests",
        f"  files           {DATA.name}/train_log.json (every step), {DATA.name}/train.png (timeline + wait histogram)",
    ]
    print("\n" + "\n".join(lines))


if __name__ == "__main__":
    main()

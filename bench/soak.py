"""Soak: many epochs through one process, with the loader's resident memory, open files and
threads measured after every epoch; fails when any of them grows.

A multi-day training run must not creep. Each cycle of the soak runs the ways a training job
drives a loader: whole epochs back to back (the pipeline runs on into the next epoch), a state
saved mid-epoch and restored (the pipeline discarded and restarted), a jump to another epoch,
and a second loader created, read and dropped (a validation loader). After a warm-up (a tenth of
the run, at least ``--warm-up`` epochs) nothing may trend up: the median of the run's last half
may not exceed the median of the half before — by more than ``--rss-slack-mb`` for the RSS and
GPU memory, by more than ``--count-slack`` for open files and threads (0; 4 on a GPU, where the
CUDA driver opens and closes descriptors of its own: 46 to 59 from epoch to epoch on the H100, and
once 47 then 50 by the halves' medians of 200 epochs; a leak of one per epoch adds 100).
Medians, because the counts move from epoch to epoch as batches and the validation loader come
and go; a leak moves the median, and a long soak shows it.

    python3 bench/soak.py                               # synth store, 200 epochs
    python3 bench/soak.py STORE --minutes 60 --device cuda --json soak.json

Prints one line per ``--report-every`` epochs and a summary; exit status 1 when something grew.
"""

from __future__ import annotations

import argparse
import array
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def process_counters(gpu: bool) -> dict[str, int]:
    """RSS (KiB), open file descriptors and threads of this process, from /proc; with a GPU, the
    device memory in use (MiB, every process's: the loader's own allocations are not torch's)."""
    status = Path("/proc/self/status").read_text().splitlines()
    fields = dict(line.split(":", 1) for line in status if ":" in line)
    out = {"rss_kib": int(fields["VmRSS"].split()[0]), "fds": len(os.listdir("/proc/self/fd")),
           "threads": int(fields["Threads"])}
    if gpu:
        import torch

        free, total = torch.cuda.mem_get_info()
        out["gpu_mib"] = (total - free) >> 20
    return out


def find_cli() -> str:
    here = Path(sys.executable).parent / "zarrstream"
    return str(here) if here.exists() else (shutil.which("zarrstream") or "zarrstream")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("store", nargs="?", help="a dataset (default: a synthesised era5-small store)")
    parser.add_argument("--epochs", type=int, default=200)
    parser.add_argument("--minutes", type=float, default=0, help="run this long instead of --epochs")
    parser.add_argument("--warm-up", type=int, default=5, help="at least this many epochs are not judged")
    parser.add_argument("--cycle", default="restore,jump,validation",
                        help="what every ten epochs add to plain epochs (comma-separated; '' for none)")
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--shuffle", default="block")
    parser.add_argument("--rss-slack-mb", type=float, default=32,
                        help="allowed rise of the RSS median (and of GPU memory), MB")
    parser.add_argument("--count-slack", type=int, default=None,
                        help="allowed rise of the open files and threads medians (0; 4 on a GPU)")
    parser.add_argument("--report-every", type=int, default=25)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    import zarrstream

    work = None
    store = args.store
    if store is None:
        work = tempfile.mkdtemp(prefix="zarrstream-soak-")
        store = os.path.join(work, "soak.zarr")
        subprocess.run([find_cli(), "synth", store, "--preset", "era5-small", "--steps", "48"],
                       check=True, stdout=subprocess.DEVNULL)

    options = dict(batch_size=args.batch_size, shuffle=args.shuffle, target_offset={"time": 1},
                   device=args.device, prefetch=3, seed=11)
    loader = zarrstream.Loader(store, **options)
    start = time.monotonic()
    # Per epoch, in flat arrays of 8-byte numbers: a list of dicts would itself grow the RSS by
    # ~0.5 KB per epoch (30 MB over a 10-minute soak) and be taken for a leak.
    series: dict[str, array.array] = {}
    batches = 0
    epoch = 0

    def done() -> bool:
        if args.minutes:
            return time.monotonic() - start >= args.minutes * 60
        return epoch >= args.epochs

    print(f"soak: {store}, {len(loader)} batches per epoch, device {args.device}, "
          f"shuffle {args.shuffle}")
    actions = set(filter(None, args.cycle.split(",")))
    while not done():
        cycle = epoch % 10
        if cycle == 3 and "restore" in actions:
            # Saved mid-epoch, the rest read, then restored and read again.
            it = iter(loader)
            next(it)
            state = loader.state_dict()
            batches += 1 + sum(1 for _ in it)
            loader.load_state_dict(state)
        elif cycle == 6 and "jump" in actions:
            loader.set_epoch(loader.epoch + 7)  # not the epoch made ahead: discarded
        elif cycle == 8 and "validation" in actions:
            validation = zarrstream.Loader(store, **{**options, "shuffle": "none"})
            batches += sum(1 for _ in validation)
            del validation
        for batch in loader:
            batches += 1
            del batch
        epoch += 1
        counters = process_counters(args.device.startswith("cuda"))
        for key, value in {"seconds": time.monotonic() - start, **counters}.items():
            series.setdefault(key, array.array("d" if key == "seconds" else "q")).append(value)
        if epoch % args.report_every == 0:
            gpu = f"  GPU {counters['gpu_mib']} MiB" if "gpu_mib" in counters else ""
            print(f"  epoch {epoch:5d}  {series['seconds'][-1]:7.1f} s  RSS {counters['rss_kib'] / 1024:7.1f} MB"
                  f"  fds {counters['fds']:3d}  threads {counters['threads']:3d}{gpu}", flush=True)
    del loader
    if work:
        shutil.rmtree(work, ignore_errors=True)

    warm_up = max(args.warm_up, epoch // 10)
    if epoch - warm_up < 4:
        print(f"soak: too short to judge ({epoch} epochs, warm-up {warm_up})")
        return 1
    keys = [k for k in ("rss_kib", "fds", "threads", "gpu_mib") if k in series]
    half = warm_up + (epoch - warm_up) // 2
    peak = {k: max(series[k][warm_up:]) for k in keys}
    first = {k: statistics.median(series[k][warm_up:half]) for k in keys}
    second = {k: statistics.median(series[k][half:]) for k in keys}
    first_mb, second_mb = first["rss_kib"] / 1024, second["rss_kib"] / 1024
    grew = []
    if second_mb - first_mb > args.rss_slack_mb:
        grew.append(f"RSS median {first_mb:.1f} -> {second_mb:.1f} MB")
    count_slack = args.count_slack
    if count_slack is None:
        count_slack = 4 if args.device.startswith("cuda") else 0
    for key in ("fds", "threads"):
        if second[key] > first[key] + count_slack:
            grew.append(f"{key} median {first[key]} -> {second[key]}")
    if "gpu_mib" in keys and second["gpu_mib"] - first["gpu_mib"] > args.rss_slack_mb:
        grew.append(f"GPU memory median {first['gpu_mib']} -> {second['gpu_mib']} MiB")
    elapsed = time.monotonic() - start
    print(f"soak: {epoch} epochs, {batches} batches in {elapsed:.0f} s; after {warm_up} warm-up "
          f"epochs: RSS median {first_mb:.1f} MB then {second_mb:.1f} MB (peak "
          f"{peak['rss_kib'] / 1024:.1f}), fds {first['fds']:g} then {second['fds']:g} (peak "
          f"{peak['fds']}), threads {first['threads']:g} then {second['threads']:g} (peak "
          f"{peak['threads']})"
          + (f", GPU memory {first['gpu_mib']:g} then {second['gpu_mib']:g} MiB (peak {peak['gpu_mib']})"
             if "gpu_mib" in keys else ""))
    if args.json:
        args.json.write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()},
                                         "batches": batches,
                                         "per_epoch": {k: list(v) for k, v in series.items()}}))
    if grew:
        print("soak: FAILED, grew: " + "; ".join(grew))
        return 1
    print("soak: flat")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Training runs side by side: examples/train_unet.py once per configuration, on the same machine
in one go, with one table of what each run trained at, against the ceiling (`--synthetic`) of the
same invocation.

A run is ``NAME=STORE:ARGS``: the run's name in the table, the store it reads (a key of
``--store KEY=PATH``) and its own train_unet.py arguments; ``--common`` arguments go to every run.
The first run with ``--synthetic`` is the ceiling the others are compared with, and the first
with ``--loader dataloader`` the baseline (xbatcher + DataLoader) whose rate each row is a
multiple of. A run that fails
(a GPU out of memory, say) is a row saying so, and the next run goes on. ``--ranks N`` among a
run's arguments starts it data-parallel under torchrun (N ranks on this machine, one GPU each on
CUDA); its samples/s is the ranks' sum, and the ceiling it is compared with is then N times the
single-process ceiling (perfect scaling). ``--env KEY=VALUE`` (repeatable) among a run's arguments
sets an environment variable for that run's processes (a knob such as
ZARRSTREAM_GPU_BLOCKS_PER_SM compared side by side).

    python3 bench/train_matrix.py --stats stats.json \\
        --store zstd=era5-v3-zstd.zarr --store gf=era5-gpu-friendly.zarr \\
        --common "--batch-size 16 --device cuda --epochs 12 --stop-after 60" \\
        --run "ceiling=zstd:--synthetic" \\
        --run "zstd, prefetch 2=zstd:--prefetch 2" \\
        --run "gpu-friendly, prefetch 2, CPU decode=gf:--prefetch 2 --no-gpu-decode" \\
        --run "gpu-friendly, 2 GPUs=gf:--prefetch 1 --ranks 2" \\
        --json matrix.json

``--repeat N`` runs every configuration N times in turn (round robin) and shows the median run
with the range of rates.

``--cold`` trains from the disk instead of the page cache: every run gets train_unet.py's
``--cold`` (its stores dropped from the page cache before every epoch), each store's cold read
rate is measured first (every file once, one thread per core), and the table adds each run's
share of the rate the disk allows: min(ceiling, the disk's bytes per second over the bytes the run
had read from the disk per sample, the page cache's not counted).

Prints a Markdown table (samples/s, share of the ceiling, multiple of the baseline, time waiting
for batches, the loader's GPU decode time, peak GPU memory) and, with ``--json``, writes every
run's train_unet log.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import re
import shlex
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from host import describe, machine  # noqa: E402
from page_cache import read_cold  # noqa: E402

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "train_unet.py"
# A line saying why a run failed: an exception (a rank's under torchrun) or train_unet's "error:".
EXCEPTION = re.compile(r"^(\[rank\d+\]:\s*)?([\w.]*(Error|Exception|Interrupt)|error):\s")


@dataclasses.dataclass
class Run:
    name: str
    store: str  # the store's path
    args: list[str]  # train_unet.py's
    ranks: int = 1
    env: dict[str, str] = dataclasses.field(default_factory=dict)  # over this process's


def parse_run(text: str, stores: dict[str, str]) -> Run:
    """The run of ``NAME=STORE:ARGS``; ``--ranks N`` and ``--env KEY=VALUE`` among ARGS are the
    matrix's, the rest train_unet.py's."""
    name, sep, rest = text.partition("=")
    key, sep2, args_text = rest.partition(":")
    if not sep or not sep2 or not name.strip():
        raise SystemExit(f"--run {text!r}: expected NAME=STORE:ARGS")
    if key not in stores:
        raise SystemExit(f"--run {text!r}: no --store named {key!r} (have: {', '.join(stores) or 'none'})")
    run = Run(name.strip(), stores[key], [])
    args = shlex.split(args_text)
    i = 0
    while i < len(args):
        if args[i] == "--ranks":
            if i + 1 >= len(args) or not args[i + 1].isdigit() or int(args[i + 1]) < 1:
                raise SystemExit(f"--run {text!r}: --ranks takes a number of ranks")
            run.ranks = int(args[i + 1])
            i += 2
        elif args[i] == "--env":
            variable, sep3, value = (args[i + 1] if i + 1 < len(args) else "").partition("=")
            if not sep3 or not variable:
                raise SystemExit(f"--run {text!r}: --env takes KEY=VALUE")
            run.env[variable] = value
            i += 2
        else:
            run.args.append(args[i])
            i += 1
    return run


def is_baseline(args: list[str]) -> bool:
    """Whether train_unet.py arguments run the xbatcher + DataLoader baseline (the last --loader counts)."""
    loader = "zarrstream"
    for i, a in enumerate(args):
        if a == "--loader" and i + 1 < len(args):
            loader = args[i + 1]
        elif a.startswith("--loader="):
            loader = a.split("=", 1)[1]
    return loader == "dataloader"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_one(run: Run, stats: str, common: list[str], timeout: float) -> dict[str, Any]:
    """The run's train_unet log (rank 0's, with every rank's under "ranks" and their summed rate),
    or {"error": ...} when it failed."""
    store, args, ranks = run.store, run.args, run.ranks
    with tempfile.TemporaryDirectory() as tmp:
        log_path = Path(tmp) / "log.json"
        launcher = [sys.executable]
        if ranks > 1:
            launcher += ["-m", "torch.distributed.run", "--nproc_per_node", str(ranks),
                         "--master_addr", "127.0.0.1", "--master_port", str(free_port())]
        cmd = [*launcher, str(EXAMPLE), store, "--stats", stats, *common, *args, "--json-out", str(log_path)]
        # Every process of the run (launcher, ranks, DataLoader workers) has the log's path, which
        # is unique to the run, on its command line.
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env={**os.environ, **run.env})
        try:
            stdout, stderr = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            left = stop_processes(str(log_path))
            proc.communicate()
            return {"error": f"did not finish in {timeout:.0f} s" + (f"; {left}" if left else "")}
        left = stop_processes(str(log_path))  # ranks or workers a failed run left behind
        paths = [log_path] + [log_path.with_name(f"log.rank{r}.json") for r in range(1, ranks)]
        if proc.returncode != 0 or not all(p.exists() for p in paths):
            errors = [l for l in stderr.splitlines() if l.strip()]
            lines = errors or [l for l in stdout.splitlines() if l.strip()]
            return {"error": f"exit {proc.returncode}: {error_line(lines)}" + (f"; {left}" if left else ""),
                    "stderr": errors[-40:]}
        logs = [json.loads(p.read_text()) for p in paths]
        log = dict(logs[0])
        if ranks > 1:
            log["ranks"] = logs
            log["samples_per_second"] = sum(l["samples_per_second"] for l in logs)
            log["waiting_fraction"] = max(l["waiting_fraction"] for l in logs)
            idle = [l["gpu_idle_fraction"] for l in logs if l.get("gpu_idle_fraction") is not None]
            log["gpu_idle_fraction"] = max(idle) if idle else None
        return log


def error_line(lines: list[str]) -> str:
    """The line saying why a run failed: the last exception or error line (a rank's, where
    torchrun's report of the failed ranks follows it), else the last line."""
    for line in reversed(lines):
        if EXCEPTION.match(line.strip()):
            return line.strip()
    return lines[-1].strip() if lines else "no output"


def stop_processes(marker: str, wait: float = 60.0) -> str:
    """Kills what is left of a run: every process with `marker` on its command line (Linux's
    /proc), waiting until they are gone, as a process on a GPU gives its memory back only as it
    exits. Returns "" or a note of those that outlived the wait."""
    deadline = time.monotonic() + wait
    while pids := processes_with(marker):
        if time.monotonic() > deadline:
            return f"processes {', '.join(map(str, pids))} of the run outlived SIGKILL for {wait:.0f} s"
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.5)
    return ""


def processes_with(marker: str) -> list[int]:
    """Processes with `marker` among their command-line arguments, this one excepted."""
    found = []
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            arguments = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:  # gone meanwhile, or not ours to read
            continue
        if marker.encode() in arguments and int(entry.name) != os.getpid():
            found.append(int(entry.name))
    return found


def median_run(logs: list[dict[str, Any]]) -> dict[str, Any]:
    """The run of median samples/s (the lower middle of an even count) among those that finished,
    with every finished run's rate under "rates" and how many failed; the first error if none
    finished."""
    finished = sorted((l for l in logs if "error" not in l), key=lambda l: l["samples_per_second"])
    if not finished:
        return logs[0]
    log = dict(finished[(len(finished) - 1) // 2])
    log["rates"] = [l["samples_per_second"] for l in logs if "error" not in l]
    log["failed_runs"] = len(logs) - len(finished)
    return log


def disk_bound(log: dict[str, Any], disk_bytes_per_second: float, ceiling: float | None) -> float | None:
    """Samples/s the run could reach with its store read from the disk at `disk_bytes_per_second`,
    no more than the ceiling for its ranks; None where the run read nothing through the loader (the
    ceiling, the baseline). What it needs from the disk per sample is what rank 0 had read from the
    disk (the log's "disk_read_bytes", /proc/self/io: a time step that is one sample's input and
    another's target in the same epoch is read from the disk once, the second time from the page
    cache); where that is unknown, the stored bytes its loader read (an upper bound)."""
    stats = log.get("loader_stats") or {}
    if not stats.get("bytes_read") or not log.get("samples"):
        return None
    limit = ceiling * log["world_size"] if ceiling else math.inf
    disk_bytes = log.get("disk_read_bytes")
    if disk_bytes is None:
        disk_bytes = stats["bytes_read"]
    if disk_bytes == 0:  # all from the page cache
        return limit if ceiling else None
    return min(disk_bytes_per_second / (disk_bytes / log["samples"]), limit)


def table(rows: list[tuple[str, dict[str, Any]]], ceiling: float | None, baseline: float | None = None,
          cold: bool = False) -> str:
    """Samples/s summed over ranks; waiting and GPU idle are the rank's that waited or idled most;
    the other GPU figures rank 0's. `cold`: a column of each run's share of its disk-bound rate
    (the log's "disk_bound_samples_per_second")."""
    out = ["| run | samples/s | of the ceiling | × the baseline | waiting | GPU idle | median step, ms | "
           "GPU decode, s | chunks decoded on the GPU | peak GPU memory, GB |"
           + (" of min(ceiling, disk) |" if cold else ""),
           "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |" + (" ---: |" if cold else "")]
    for name, log in rows:
        if "error" in log:
            out.append(f"| {name} | failed: {log['error']} | | | | | | | | |" + (" |" if cold else ""))
            continue
        rate = log["samples_per_second"]
        rates = log.get("rates", [rate])
        rate_cell = f"{rate:.1f}" if len(rates) < 2 else f"{rate:.1f} ({min(rates):.1f}–{max(rates):.1f})"
        if log.get("failed_runs"):
            rate_cell += f", {log['failed_runs']} failed"
        share = f"{100 * rate / (ceiling * log['world_size']):.0f} %" if ceiling else ""
        times = f"{rate / baseline:.1f}×" if baseline else ""
        stats = log.get("loader_stats") or {}
        memory = log.get("gpu_memory") or {}
        decode = f"{stats['gpu_decode_seconds']:.1f}" if stats.get("bytes_to_gpu") else ""
        chunks = str(stats["gpu_decoded_chunks"]) if stats.get("bytes_to_gpu") else ""
        # The share where nvCOMP decoded (gpu_decode off leaves it at 0: every chunk on the CPU).
        if chunks and log.get("cpu_decode_share") == "auto" and log.get("gpu_decode", "").startswith("nvCOMP"):
            chunks += f" (CPU share ended at {100 * stats['cpu_decode_share']:.0f} %)"
        peak = f"{memory['peak_used_bytes'] / 1e9:.1f}" if memory else ""
        if memory.get("torch_alloc_retries"):
            peak += f" (PyTorch ran short {memory['torch_alloc_retries']}×)"
        prefetch = log.get("prefetch") or {}
        if prefetch.get("ended") != prefetch.get("asked"):
            peak += f" (prefetch {prefetch['asked']} → {prefetch['ended']})"
        idle = log.get("gpu_idle_fraction")
        idle_cell = f"{100 * idle:.1f} %" if idle is not None else ""
        # Rank 0's steps after the first (start-up): set beside the ceiling's, what the loader's work
        # on the GPU costs each step, apart from the waits.
        steps = [step["step_ms"] for step in (log.get("steps") or [])[1:]]
        step_cell = f"{statistics.median(steps):.1f}" if steps else ""
        bound = log.get("disk_bound_samples_per_second")
        disk_cell = (f" {100 * rate / bound:.0f} % |" if bound else " |") if cold else ""
        out.append(f"| {name} | {rate_cell} | {share} | {times} | {100 * log['waiting_fraction']:.1f} % "
                   f"| {idle_cell} | {step_cell} | {decode} | {chunks} | {peak} |{disk_cell}")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--stats", required=True, help="normalisation file from `zarrstream stats`")
    p.add_argument("--store", action="append", default=[], metavar="KEY=PATH", help="a store runs name by KEY")
    p.add_argument("--run", action="append", default=[], metavar="NAME=STORE:ARGS", help="one run (repeatable)")
    p.add_argument("--common", default="", help="train_unet.py arguments every run gets")
    p.add_argument("--timeout", type=float, default=1800, help="seconds one run may take")
    p.add_argument("--repeat", type=int, default=1,
                   help="run every configuration this many times, in turn (round robin); rows show the median")
    p.add_argument("--cold", action="store_true",
                   help="train from the disk: --cold to every run, each store's cold read rate measured first")
    p.add_argument("--json", help="write every run's log here")
    args = p.parse_args(argv)

    stores: dict[str, str] = {}
    for item in args.store:
        key, sep, path = item.partition("=")
        if not sep or not key or not path:
            raise SystemExit(f"--store {item!r}: expected KEY=PATH")
        stores[key] = path
    runs = [parse_run(r, stores) for r in args.run]
    if not runs:
        raise SystemExit("no --run given")
    common = shlex.split(args.common)

    if args.repeat < 1:
        raise SystemExit(f"--repeat {args.repeat}: expected at least 1")
    disk: dict[str, dict[str, float]] = {}
    if args.cold:
        common.append("--cold")
        for store in dict.fromkeys(r.store for r in runs):
            if store not in disk:
                disk[store] = read_cold(store)
                print(f"disk: {store} read cold at {disk[store]['stored_gb_per_s']:.2f} GB/s "
                      f"({disk[store]['stored_bytes'] / 1e9:.2f} GB)", flush=True)

    # Round robin, so that a drift of the machine (heat, page cache, a neighbour) spreads over
    # every configuration rather than landing on one.
    repeats: list[list[dict[str, Any]]] = [[] for _ in runs]
    for round_index in range(args.repeat):
        for i, run in enumerate(runs):
            log = run_one(run, args.stats, common, args.timeout)
            repeats[i].append(log)
            state = log["error"] if "error" in log else f"{log['samples_per_second']:.1f} samples/s"
            suffix = f" (round {round_index + 1} of {args.repeat})" if args.repeat > 1 else ""
            print(f"{run.name}: {state}{suffix}", flush=True)

    rows: list[tuple[str, dict[str, Any]]] = []
    ceiling = baseline = None
    for run, logs in zip(runs, repeats):
        log = median_run(logs)
        rows.append((run.name, log))
        if ceiling is None and "--synthetic" in run.args and "error" not in log:
            ceiling = log["samples_per_second"] / log["world_size"]  # one process's
        if baseline is None and is_baseline([*common, *run.args]) and "error" not in log:
            baseline = log["samples_per_second"]
    for (_, log), run in zip(rows, runs):
        if args.cold and "error" not in log:
            log["disk_bound_samples_per_second"] = disk_bound(log, 1e9 * disk[run.store]["stored_gb_per_s"], ceiling)
    host = machine()
    print()
    print(f"machine: {describe(host)}")
    print(table(rows, ceiling, baseline, cold=args.cold))
    if args.json:
        report = {"machine": host, "common": common, "ceiling": ceiling, "baseline": baseline, "repeat": args.repeat,
                  "disk": disk,
                  "runs": [{"name": n, "env": run.env, "log": l, "repeats": logs}
                           for (n, l), logs, run in zip(rows, repeats, runs)]}
        Path(args.json).write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Where a training run's GPU time goes, the loader's beside the model's: examples/train_unet.py
under PyTorch's profiler.

    python3 bench/step_profile.py [--top 18] [--json FILE] -- STORE --stats stats.json \\
        --batch-size 16 --device cuda --stop-after 24 --base-width 8 --depth 2 --no-gpu-decode

Everything after ``--`` is train_unet.py's. The profiler records the process's CUDA activity
(CUPTI: every kernel and copy of the process, the loader's included, whichever library launched
them). Printed: each kernel's (and copy's) total time and count, the largest first; then the
other kernels in all (the model's, and nvCOMP's where the loader decodes on the GPU: run with
``--no-gpu-decode`` to have the model's alone) and how long of that they ran while one of the
loader's kernels (``zs_*``, src/gpu/kernels.cu) was on the GPU, and the loader's kernels' own
total. ``--activity cpu``
records the CPU's operators instead (for a run without a GPU; no overlap line).

The whole run is recorded, its first step (cuDNN's autotuning) included: keep it short.
"""

from __future__ import annotations

import argparse
import bisect
import collections
import json
import runpy
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "train_unet.py"
LOADER_KERNELS = "zs_"  # the prefix of the loader's kernels


def merged(intervals: list[tuple[float, float]]) -> list[list[float]]:
    """The union of `intervals` as disjoint [start, end] intervals, in order."""
    out: list[list[float]] = []
    for start, end in sorted(intervals):
        if out and start <= out[-1][1]:
            out[-1][1] = max(out[-1][1], end)
        else:
            out.append([start, end])
    return out


def overlap_with(intervals: list[tuple[float, float]], union: list[list[float]]) -> float:
    """How much of `intervals` (summed, overlaps among them counted each time) lies inside `union`."""
    ends = [end for _, end in union]
    total = 0.0
    for start, end in intervals:
        i = bisect.bisect_right(ends, start)
        while i < len(union) and union[i][0] < end:
            total += max(0.0, min(union[i][1], end) - max(union[i][0], start))
            i += 1
    return total


def summarise(events: list[tuple[str, float, float]], top: int) -> dict:
    """Totals by name and the loader/model overlap of (name, start µs, end µs) GPU events."""
    totals: dict[str, list[float]] = collections.defaultdict(lambda: [0.0, 0])
    for name, start, end in events:
        entry = totals[name]
        entry[0] += end - start
        entry[1] += 1
    ranked = sorted(totals.items(), key=lambda kv: -kv[1][0])
    loader = [(s, e) for n, s, e in events if n.startswith(LOADER_KERNELS)]
    model = [(s, e) for n, s, e in events
             if not n.startswith(LOADER_KERNELS) and not n.lower().startswith(("memcpy", "memset"))]
    return {
        "by_name": [{"name": n, "ms": round(us / 1e3, 3), "count": int(c)} for n, (us, c) in ranked[:top]],
        "model_kernels_ms": round(sum(e - s for s, e in model) / 1e3, 3),
        "model_kernels_beside_loader_kernels_ms": round(overlap_with(model, merged(loader)) / 1e3, 3),
        "loader_kernels_ms": round(sum(e - s for s, e in loader) / 1e3, 3),
        "loader_kernels": len(loader),
    }


def main() -> int:
    argv = sys.argv[1:]
    if "--" not in argv:
        raise SystemExit("usage: step_profile.py [--top N] [--json FILE] [--activity cuda|cpu] -- "
                         "TRAIN_UNET_ARGS...")
    at = argv.index("--")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--top", type=int, default=18, help="names to list, the largest first")
    parser.add_argument("--json", help="write the summary here too")
    parser.add_argument("--activity", choices=("cuda", "cpu"), default="cuda")
    args = parser.parse_args(argv[:at])

    import torch
    from torch.profiler import ProfilerActivity, profile

    if args.activity == "cuda" and not torch.cuda.is_available():
        raise SystemExit("step_profile: no CUDA device here: nothing on a GPU to record "
                         "(--activity cpu records the CPU's operators)")
    activity = ProfilerActivity.CUDA if args.activity == "cuda" else ProfilerActivity.CPU
    device_type = torch.autograd.DeviceType.CUDA if args.activity == "cuda" else torch.autograd.DeviceType.CPU
    sys.argv = [str(EXAMPLE), *argv[at + 1:]]
    with profile(activities=[activity]) as recorded:
        try:
            runpy.run_path(str(EXAMPLE), run_name="__main__")
        except SystemExit as stop:
            if stop.code not in (None, 0):
                raise
    events = [(e.name, e.time_range.start, e.time_range.end) for e in recorded.events()
              if e.device_type == device_type]
    summary = summarise(events, args.top)
    print(f"\n{args.activity.upper()} activity, {len(events)} events; the largest by total time:")
    print(f"{'ms':>11} {'count':>7}  name")
    for row in summary["by_name"]:
        print(f"{row['ms']:11.1f} {row['count']:7d}  {row['name'][:100]}")
    if args.activity == "cuda":
        print(f"\nthe other kernels (the model's; nvCOMP's where it decodes): "
              f"{summary['model_kernels_ms']:.1f} ms, of which "
              f"{summary['model_kernels_beside_loader_kernels_ms']:.1f} ms while one of the loader's ran; "
              f"the loader's kernels ({LOADER_KERNELS}*): {summary['loader_kernels_ms']:.1f} ms "
              f"in {summary['loader_kernels']}")
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

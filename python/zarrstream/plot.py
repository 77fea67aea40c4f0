"""The two views of a training loop's data loading: a timeline of each step (waiting for the batch
vs the step's own work) and the histogram of the waits, from a run's log.

    python -m zarrstream.plot RUN.json OUT.png

RUN.json is a ``zarrstream bench --json`` report or an ``examples/train_unet.py --json-out`` log:
both list ``steps`` ({"wait_ms", "step_ms"} per step, the step's time including its wait).
``zarrstream bench --plot OUT.png`` calls this. Needs matplotlib.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any


def write_plot(log: dict[str, Any], path: str | Path) -> bool:
    """Writes the plot of `log` to `path` (PNG); False when matplotlib is not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    steps = log["steps"]
    if not steps:
        raise ValueError("the log has no steps to plot")
    waits = [s["wait_ms"] for s in steps]
    work = [s["step_ms"] - s["wait_ms"] for s in steps]
    fig, (timeline, histogram) = plt.subplots(1, 2, figsize=(12, 4))
    index = range(len(steps))
    timeline.bar(index, waits, label="waiting for the batch", color="tab:red")
    timeline.bar(index, work, bottom=waits, label="training step", color="tab:blue")
    timeline.set_xlabel("step")
    timeline.set_ylabel("ms")
    timeline.legend()
    histogram.hist(waits[1:] if len(waits) > 1 else waits, bins=30, color="tab:red")
    histogram.set_xlabel("wait per step (ms), steps after the first")
    histogram.set_ylabel("steps")
    name = log.get("loader") or "zarrstream bench"
    fig.suptitle(f"{name}: {log['samples_per_second']:.1f} samples/s, "
                 f"{100 * log['waiting_fraction']:.1f} % waiting")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m zarrstream.plot", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("log", type=Path, help="a bench report or training log (JSON)")
    parser.add_argument("output", type=Path, help="the PNG to write")
    args = parser.parse_args(argv)
    try:
        log = json.loads(args.log.read_text())
        written = write_plot(log, args.output)
    except (OSError, ValueError, KeyError) as e:
        print(f"zarrstream.plot: {args.log}: {e!r}", file=sys.stderr)
        return 1
    if not written:
        print("zarrstream.plot: matplotlib is not installed (pip install matplotlib)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

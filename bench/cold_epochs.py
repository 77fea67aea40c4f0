"""Loader epochs from the disk against epochs from the page cache, with and without the file
store's read hints (docs/loader.md): each row a new process that makes one epoch to start, then
``--epochs`` more, the store dropped from the page cache before each in the cold rows
(bench/page_cache.py); CPU batches of every variable. Prints the median epoch's stored GB/s per
row, rows interleaved round by round.

    python bench/cold_epochs.py --store era5-1deg-64.zarr --store era5-1deg-64-gf.zarr --rounds 2
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def epochs(store: str, count: int, cold: bool, batch_size: int) -> list[float]:
    """In this process: stored GB/s of `count` epochs after a first."""
    sys.path.insert(0, str(HERE))
    import page_cache
    import zarrstream

    loader = zarrstream.Loader(store, target_offset={"time": 1}, batch_size=batch_size, prefetch=2, seed=1)
    for _ in loader:
        pass
    rates = []
    for epoch in range(1, count + 1):
        if cold:
            page_cache.drop_from_page_cache(store)
        loader.set_epoch(epoch)
        before, start = loader.stats()["bytes_read"], time.perf_counter()
        for _ in loader:
            pass
        rates.append((loader.stats()["bytes_read"] - before) / (time.perf_counter() - start) / 1e9)
    return rates


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--store", action="append", default=[], help="a local store (repeatable)")
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--child", nargs=2, metavar=("STORE", "MODE"), help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        rates = epochs(args.child[0], args.epochs, args.child[1] == "cold", args.batch_size)
        print(statistics.median(rates))
        return
    if not args.store:
        p.error("--store: at least one local store")
    rows: dict[tuple[str, str, str], list[float]] = {}
    for _ in range(args.rounds):
        for store in args.store:
            for mode in ("cold", "page cache"):
                for hints in ("off", "on"):
                    env = dict(os.environ, ZARRSTREAM_READ_HINTS="0" if hints == "off" else "1")
                    out = subprocess.run([sys.executable, __file__, "--epochs", str(args.epochs),
                                          "--batch-size", str(args.batch_size), "--child", store,
                                          "cold" if mode == "cold" else "warm"],
                                         env=env, capture_output=True, text=True, check=True)
                    rows.setdefault((store, mode, hints), []).append(float(out.stdout.split()[-1]))
    print(f"{os.cpu_count()} cores; median epoch of {args.epochs}, stored GB/s, one value per round")
    print("| store | from | hints off | hints on |")
    print("|---|---|---:|---:|")
    for store in args.store:
        for mode in ("cold", "page cache"):
            off = ", ".join(f"{r:.2f}" for r in rows[(store, mode, "off")])
            on = ", ".join(f"{r:.2f}" for r in rows[(store, mode, "on")])
            print(f"| {Path(store).name} | {mode} | {off} | {on} |")


if __name__ == "__main__":
    main()

"""Read benchmark: zarrstream vs tensorstore vs zarr-python on an ERA5-shaped Zarr v3 store.

Workloads (interleaved round by round, so every tool sees the same machine state):
  * random single-time-step reads: all channels, full field, one time step per read;
  * whole-array read.
The store is (time, channel, latitude, longitude) float32, zstd, one chunk per (time, channel).
Reads are from the page cache (the store is read once before timing).

    python bench/read_bench.py [--time 24 --channels 16 --lat 721 --lon 1440] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from era5_like import write_era5_like_store  # noqa: E402


def tools(path: str):
    import tensorstore as ts
    import zarr

    import zarrstream

    zs = zarrstream.open_array(path)
    tstore = ts.open({"driver": "zarr3", "kvstore": {"driver": "file", "path": path}}).result()
    zp = zarr.open_array(path, mode="r")
    return {
        "zarrstream": (lambda t: zs[t], lambda: zs.read()),
        "tensorstore": (lambda t: tstore[t].read().result(), lambda: tstore.read().result()),
        "zarr-python": (lambda t: zp[t], lambda: zp[...]),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--time", type=int, default=24)
    p.add_argument("--channels", type=int, default=16)
    p.add_argument("--lat", type=int, default=721)
    p.add_argument("--lon", type=int, default=1440)
    p.add_argument("--steps", type=int, default=12, help="random time-step reads per round")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--store", help="reuse/create the store here (default: a temporary directory)")
    p.add_argument("--json", help="write results to this file")
    args = p.parse_args()

    tmp = None
    if args.store:
        path = Path(args.store)
    else:
        tmp = tempfile.TemporaryDirectory(prefix="zarrstream-bench-")
        path = Path(tmp.name) / "era5.zarr"
    if not (path / "zarr.json").exists():
        t0 = time.perf_counter()
        write_era5_like_store(path, args.time, args.channels, args.lat, args.lon)
        print(f"wrote {path.name} in {time.perf_counter() - t0:.1f} s", file=sys.stderr)

    step_bytes = args.channels * args.lat * args.lon * 4
    total_bytes = step_bytes * args.time
    stored = sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
    impls = tools(str(path))

    # Warm the page cache and check every tool returns the same data.
    reference = impls["zarrstream"][1]()
    for name, (_, read_all) in impls.items():
        np.testing.assert_array_equal(read_all(), reference, err_msg=name)

    rng = np.random.default_rng(0)
    step_times = {name: [] for name in impls}
    whole_times = {name: [] for name in impls}
    for _ in range(args.rounds):
        steps = rng.integers(0, args.time, size=args.steps)
        for name, (read_step, read_all) in impls.items():
            t0 = time.perf_counter()
            for t in steps:
                read_step(int(t))
            step_times[name].append((time.perf_counter() - t0) / len(steps))
            t0 = time.perf_counter()
            read_all()
            whole_times[name].append(time.perf_counter() - t0)

    results = {}
    for name in impls:
        s = statistics.median(step_times[name])
        w = statistics.median(whole_times[name])
        results[name] = {
            "step_seconds": s,
            "step_gb_per_s": step_bytes / s / 1e9,
            "whole_seconds": w,
            "whole_gb_per_s": total_bytes / w / 1e9,
        }
    from importlib.metadata import version

    meta = {
        "shape": [args.time, args.channels, args.lat, args.lon],
        "logical_bytes": total_bytes,
        "stored_bytes": stored,
        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
        "versions": {name: version(name) for name in ("zarrstream", "tensorstore", "zarr")},
        "command": "python bench/read_bench.py " + " ".join(sys.argv[1:]),
    }
    zs = results["zarrstream"]
    print(f"\nERA5-shaped store {tuple(meta['shape'])} float32 zstd, "
          f"{total_bytes / 1e9:.2f} GB logical, ratio {total_bytes / stored:.2f}x; {meta['machine']}")
    print("| tool | time-step read (ms) | GB/s | zarrstream speed-up | whole array (s) | GB/s | zarrstream speed-up |")
    print("|---|---|---|---|---|---|---|")
    for name, r in results.items():
        print(f"| {name} | {r['step_seconds'] * 1e3:.1f} | {r['step_gb_per_s']:.2f} | "
              f"{r['step_seconds'] / zs['step_seconds']:.2f}x | {r['whole_seconds']:.2f} | "
              f"{r['whole_gb_per_s']:.2f} | {r['whole_seconds'] / zs['whole_seconds']:.2f}x |")
    if args.json:
        Path(args.json).write_text(json.dumps({"meta": meta, "results": results}, indent=2))
    if tmp:
        tmp.cleanup()


if __name__ == "__main__":
    main()

"""xarray benchmark: ``xr.open_dataset(store, engine=E)[var].isel(time=t).values`` for random time
steps ``t``, with E = "zarrstream" (docs/xarray.md) against E = "zarr" (zarr-python's default
codec pipeline) and, when zarrs-python is installed, "zarr" with zarrs-python's Rust codec
pipeline (codec_pipeline.path = zarrs.ZarrsCodecPipeline, strict).

Each engine runs in a fresh child process (one engine's imports, caches and threads do not weigh
on the next). Measured: opening the Dataset (chunks=None, as open_dataset's default), then
--reads random time steps of --variable, each a new `.isel(time=t).values` on the open Dataset;
ms per step, GB/s of decoded values, and each engine's ratio to zarrstream. The first and last
steps read are checked against the zarr engine's read of them with zarr-python's own pipeline (a
fast but wrong engine cannot win). Reads come from a warm page cache (every file is read once
before the first engine).

    python bench/xarray_bench.py --store era5.zarr --variable temperature [--reads 32] [--json out.json]
    python bench/xarray_bench.py --preset era5-1deg --steps 64 --store build/bench/era5-1deg-64.zarr
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ENGINES = ("zarrstream", "zarr", "zarr+zarrs")


def child(engine: str, store: str, variable: str, steps: list[int], repeats: int) -> dict:
    """Runs in a fresh process: opens the store with `engine` and reads `steps`, `repeats` times."""
    import warnings

    import xarray as xr
    import zarr

    warnings.simplefilter("ignore")
    # The reference: xarray's zarr engine with zarr-python's own pipeline, read before any timing.
    with xr.open_dataset(store, engine="zarr", chunks=None) as ref:
        expected = {t: ref[variable].isel(time=t).values for t in (steps[0], steps[-1])}
    if engine == "zarr+zarrs":
        import zarrs  # noqa: F401

        zarr.config.set({"codec_pipeline.path": "zarrs.ZarrsCodecPipeline", "codec_pipeline.strict": True})
    xr_engine = "zarrstream" if engine == "zarrstream" else "zarr"
    t0 = time.perf_counter()
    ds = xr.open_dataset(store, engine=xr_engine, chunks=None)
    da = ds[variable]
    open_s = time.perf_counter() - t0
    nbytes, seconds = 0, []
    for _ in range(repeats):
        for t in steps:
            t0 = time.perf_counter()
            values = da.isel(time=t).values
            seconds.append(time.perf_counter() - t0)
            nbytes += values.nbytes
    for t, want in expected.items():
        if not np.array_equal(da.isel(time=t).values, want, equal_nan=True):
            return {"error": f"time step {t} differs from the zarr engine's read"}
    total = sum(seconds)
    return {"open_s": open_s, "reads": len(seconds), "mean_ms": 1e3 * total / len(seconds),
            "median_ms": 1e3 * statistics.median(seconds), "gb_per_s": nbytes / total / 1e9}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--store", required=True, help="a Zarr group xarray opens (synthesized with --preset if absent)")
    p.add_argument("--preset", help="zarrstream synth preset for a missing --store: era5-small, era5-1deg, era5")
    p.add_argument("--steps", type=int, help="zarrstream synth time steps (default: the preset's)")
    p.add_argument("--variable", default="temperature")
    p.add_argument("--reads", type=int, default=32, help="random time steps read per repeat")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--engines", default=",".join(ENGINES))
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", help="write the results here")
    p.add_argument("--child", help=argparse.SUPPRESS)
    args = p.parse_args()

    if args.child:
        spec = json.loads(args.child)
        print(json.dumps(child(**spec)))
        return 0

    store = Path(args.store)
    if not store.exists():
        if not args.preset:
            p.error(f"{store} does not exist: give --preset to synthesize it")
        cli = Path(sys.executable).parent / "zarrstream"
        cmd = [str(cli), "synth", str(store), "--preset", args.preset]
        if args.steps:
            cmd += ["--steps", str(args.steps)]
        subprocess.run(cmd, check=True)
    import zarr

    array = zarr.open_group(str(store), mode="r")[args.variable]
    num_time = array.shape[0]
    steps = np.random.default_rng(args.seed).integers(0, num_time, args.reads).tolist()
    warmed = sum(len(f.read_bytes()) for f in store.rglob("*") if f.is_file())
    print(f"store {store}: '{args.variable}' {array.shape} {array.dtype}, chunks {array.chunks}; "
          f"{args.reads} random steps x {args.repeats}; page cache warm ({warmed / 1e6:.0f} MB read once); "
          f"{len(os.sched_getaffinity(0))} cores, {platform.processor() or platform.machine()}")

    results = {}
    for engine in args.engines.split(","):
        if engine == "zarr+zarrs":
            try:
                import zarrs  # noqa: F401
            except ImportError:
                results[engine] = {"error": "zarrs-python is not installed"}
                continue
        spec = json.dumps({"engine": engine, "store": str(store), "variable": args.variable,
                           "steps": steps, "repeats": args.repeats})
        out = subprocess.run([sys.executable, __file__, "--store", str(store), "--child", spec],
                             capture_output=True, text=True)
        if out.returncode != 0:
            results[engine] = {"error": out.stderr.strip().splitlines()[-1] if out.stderr else "failed"}
        else:
            results[engine] = json.loads(out.stdout.strip().splitlines()[-1])

    base = results.get("zarrstream", {}).get("gb_per_s")
    print(f"{'engine':<14}{'open s':>9}{'ms/step':>10}{'median':>10}{'GB/s':>8}{'vs zarrstream':>15}")
    for engine, r in results.items():
        if "error" in r:
            print(f"{engine:<14} {r['error']}")
            continue
        ratio = f"{r['gb_per_s'] / base:.2f}x" if base else "-"
        print(f"{engine:<14}{r['open_s']:>9.3f}{r['mean_ms']:>10.2f}{r['median_ms']:>10.2f}"
              f"{r['gb_per_s']:>8.3f}{ratio:>15}")
    print(f"load average (1, 5, 15 min): {', '.join(f'{x:.1f}' for x in os.getloadavg())}")
    if args.json:
        Path(args.json).write_text(json.dumps({"store": str(store), "variable": args.variable,
                                               "steps": steps, "results": results}, indent=2))
    return 1 if any("error" in r for r in results.values()) else 0


if __name__ == "__main__":
    sys.exit(main())

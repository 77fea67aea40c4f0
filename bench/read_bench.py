"""Read benchmark: zarrstream vs tensorstore vs zarr-python on an ERA5-shaped Zarr v3 store.

Workloads (interleaved round by round, so every tool sees the same machine state):
  * random single-time-step reads: all channels, full field, one time step per read;
  * whole-array read.
The store is (time, channel, latitude, longitude) float32, zstd, one chunk per (time, channel).
Reads are from the page cache (the store is read once before timing).

    python bench/read_bench.py [--time 24 --channels 16 --lat 721 --lon 1440] [--json out.json]

--fresh: the first pass, as a new process sees it. Every measurement (tool x workload x chunk size x
round) runs in a new child process, which times its first pass (open + the workload's reads: thread
start-up, scratch buffers and first-touch page faults included) apart from the later passes of the
same reads, with the CPU time (user + system) of each. Stores are written per chunk size
(--chunk-mb: channels per chunk grouped, or latitude rows split, to about that many MB decoded);
rounds interleave the tools, in an order that turns each round; every tool's results are checked
equal (a digest of the arrays it read).

    python bench/read_bench.py --fresh --time 16 --channels 20 --lat 361 --lon 720 --chunk-mb 1,4 \
        --steps 8 --rounds 5 --store-dir /tmp/read-bench [--json out.json]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from era5_like import write_era5_like_store  # noqa: E402
from host import describe, machine  # noqa: E402


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


# Tools of the --fresh mode: name -> (open(path) -> handle, read_step(handle, t), read_all(handle)).
# Each is imported in its child only, so no tool's threads or allocations are in another's process.
def fresh_tool(name: str):
    if name == "zarrstream":
        import zarrstream

        return zarrstream.open_array, lambda a, t: a[t], lambda a: a[...]
    if name == "tensorstore":
        import tensorstore as ts

        def open_ts(path):
            return ts.open({"driver": "zarr3", "kvstore": {"driver": "file", "path": path}}).result()

        return open_ts, lambda a, t: a[t].read().result(), lambda a: a.read().result()
    if name in ("zarr-python", "zarrs-python"):
        import zarr

        from loader_bench import use_fastest_zarr_pipeline

        if name == "zarrs-python":
            import zarrs  # noqa: F401  (registers the pipeline)

            zarr.config.set({"codec_pipeline.path": "zarrs.ZarrsCodecPipeline"})
        else:
            use_fastest_zarr_pipeline(len(os.sched_getaffinity(0)))
        return lambda path: zarr.open_array(path, mode="r"), lambda a, t: a[t], lambda a: a[...]
    raise ValueError(f"unknown tool {name!r}")


FRESH_TOOLS = ("zarrstream", "tensorstore", "zarr-python", "zarrs-python")


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def run_child(spec: dict) -> dict:
    """One measurement in this (new) process: open + `passes` passes of the workload; the first
    pass includes the open. Returns times, CPU times, minor page faults and a digest of the data."""
    t0 = time.perf_counter()
    open_array, read_step, read_all = fresh_tool(spec["tool"])
    import_seconds = time.perf_counter() - t0
    passes = []
    digest = hashlib.blake2b(digest_size=16)
    array = None
    for n in range(spec["passes"]):
        faults0, cpu0, t0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt, cpu_seconds(), time.perf_counter()
        if array is None:
            array = open_array(spec["store"])
        if spec["workload"] == "steps":
            outs = [read_step(array, t) for t in spec["steps"]]
        else:
            outs = [read_all(array)]
        seconds = time.perf_counter() - t0
        passes.append({"seconds": seconds, "cpu_seconds": cpu_seconds() - cpu0,
                       "minor_faults": resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults0})
        if n == 0:
            for out in outs:
                out = np.ascontiguousarray(out)
                digest.update(str((out.dtype.str, out.shape)).encode())
                digest.update(memoryview(out).cast("B"))
        del outs
    return {"import_seconds": import_seconds, "passes": passes, "digest": digest.hexdigest()}


def chunk_shape(channels: int, lat: int, lon: int, target_mb: float) -> tuple[int, int, int, int]:
    """A (1, c, y, lon) chunk of about `target_mb` MB decoded float32: whole fields grouped by
    channel, or a field split into latitude bands when one field is larger."""
    field = lat * lon * 4
    target = target_mb * 2**20
    if field <= target * 1.5:
        return 1, max(1, min(channels, round(target / field))), lat, lon
    return 1, 1, min(lat, -(-int(target) // (lon * 4))), lon


def warm_page_cache(path: Path) -> int:
    stored = 0
    for f in path.rglob("*"):
        if f.is_file():
            stored += len(f.read_bytes())
    return stored


def fresh_main(args) -> None:
    tools = args.tools.split(",")
    for name in tools:
        if name not in FRESH_TOOLS:
            raise SystemExit(f"--tools: unknown tool {name!r} (known: {', '.join(FRESH_TOOLS)})")
    workloads = args.workloads.split(",")
    sizes = [float(x) for x in args.chunk_mb.split(",")]
    tmp = None
    if args.store_dir:
        store_dir = Path(args.store_dir)
    else:
        tmp = tempfile.TemporaryDirectory(prefix="zarrstream-bench-")
        store_dir = Path(tmp.name)
    store_dir.mkdir(parents=True, exist_ok=True)
    shape = (args.time, args.channels, args.lat, args.lon)
    stores = {}
    for mb in sizes:
        chunks = chunk_shape(args.channels, args.lat, args.lon, mb)
        path = store_dir / f"era5-{'x'.join(map(str, shape))}-chunks-{'x'.join(map(str, chunks))}.zarr"
        if not (path / "zarr.json").exists():
            t0 = time.perf_counter()
            write_era5_like_store(path, *shape, chunks=chunks)
            print(f"wrote {path.name} in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
        stores[mb] = {"path": str(path), "chunks": chunks,
                      "chunk_mb": int(np.prod(chunks)) * 4 / 1e6,
                      "stored_bytes": sum(f.stat().st_size for f in path.rglob("*") if f.is_file())}
    step_bytes = args.channels * args.lat * args.lon * 4
    workload_bytes = {"steps": step_bytes * args.steps, "whole": step_bytes * args.time}

    rng = np.random.default_rng(0)
    rows = []
    digests: dict = {}
    load_before = os.getloadavg()
    for r in range(args.rounds):
        steps = [int(t) for t in rng.integers(0, args.time, size=args.steps)]
        order = tools[r % len(tools):] + tools[:r % len(tools)]
        for mb in sizes:
            warm_page_cache(Path(stores[mb]["path"]))
            for workload in workloads:
                for name in order:
                    spec = {"tool": name, "workload": workload, "store": stores[mb]["path"],
                            "steps": steps, "passes": args.passes}
                    proc = subprocess.run([sys.executable, __file__, "--child", json.dumps(spec)],
                                          capture_output=True, text=True)
                    if proc.returncode != 0:
                        raise SystemExit(f"{name} {workload} {mb} MB failed:\n{proc.stderr}")
                    got = json.loads(proc.stdout.strip().splitlines()[-1])
                    key = (mb, workload, r)
                    reference = digests.setdefault(key, (name, got["digest"]))
                    if got["digest"] != reference[1]:
                        raise SystemExit(f"{name} read different data than {reference[0]} "
                                         f"({workload}, {mb} MB chunks, round {r})")
                    rows.append({"tool": name, "workload": workload, "chunk_mb": mb, "round": r,
                                 "bytes": workload_bytes[workload], **got})
                    print(f"round {r} {mb:g} MB {workload:5s} {name:13s} first "
                          f"{got['passes'][0]['seconds']:.3f} s", file=sys.stderr)

    def median(values):
        return statistics.median(values) if values else float("nan")

    summary = []
    for mb in sizes:
        for workload in workloads:
            for name in tools:
                mine = [row for row in rows if row["tool"] == name and row["workload"] == workload
                        and row["chunk_mb"] == mb]
                first = [row["passes"][0]["seconds"] for row in mine]
                later = [p["seconds"] for row in mine for p in row["passes"][1:]]
                nbytes = workload_bytes[workload]
                summary.append({
                    "tool": name, "workload": workload, "chunk_mb": mb,
                    "first_seconds": first, "later_seconds": later,
                    "first_gb_per_s": nbytes / median(first) / 1e9,
                    "first_gb_per_s_range": [nbytes / max(first) / 1e9, nbytes / min(first) / 1e9],
                    "later_gb_per_s": nbytes / median(later) / 1e9 if later else None,
                    "first_cpu_seconds": median([row["passes"][0]["cpu_seconds"] for row in mine]),
                    "first_cpu_seconds_range": [min(row["passes"][0]["cpu_seconds"] for row in mine),
                                                max(row["passes"][0]["cpu_seconds"] for row in mine)],
                    "later_cpu_seconds": median([p["cpu_seconds"] for row in mine
                                                 for p in row["passes"][1:]]) if later else None,
                    "first_minor_faults": median([row["passes"][0]["minor_faults"] for row in mine]),
                })

    from importlib.metadata import PackageNotFoundError, version

    versions = {}
    for package in ("zarrstream", "tensorstore", "zarr", "zarrs", "numcodecs"):
        try:
            versions[package] = version(package)
        except PackageNotFoundError:
            pass
    meta = {
        "shape": list(shape), "stores": {str(mb): store for mb, store in stores.items()},
        "steps": args.steps, "rounds": args.rounds, "passes": args.passes,
        "workload_bytes": workload_bytes,
        "machine": describe(machine()),
        "versions": versions, "results_equal": True,
        "load_average": {"before": load_before, "after": os.getloadavg()},
        "command": "python bench/read_bench.py " + " ".join(sys.argv[1:]),
    }
    print(f"\nERA5-shaped store {shape} float32 zstd, a new process per measurement, "
          f"{args.rounds} rounds; {meta['machine']}, load average {load_before[0]:.1f} before, "
          f"{meta['load_average']['after'][0]:.1f} after; every tool's results equal")
    print(f"steps: {args.steps} random a[t] ({workload_bytes['steps'] / 1e6:.0f} MB); "
          f"whole: a[...] ({workload_bytes['whole'] / 1e6:.0f} MB). First pass = open + reads; "
          f"median (range) over rounds; CPU s = the process's user + system time in the first pass; "
          f"page faults: minor faults in it")
    print("| chunks | workload | tool | first pass GB/s | first-pass CPU s | first-pass page faults "
          "| later passes GB/s | zarrstream speed-up (first pass) | zarrstream CPU-time ratio (first pass) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for row in summary:
        zs = next((s for s in summary if s["tool"] == "zarrstream" and s["workload"] == row["workload"]
                   and s["chunk_mb"] == row["chunk_mb"]), None)
        speedup = f"{zs['first_gb_per_s'] / row['first_gb_per_s']:.2f}x" if zs else "-"
        cpu_ratio = f"{row['first_cpu_seconds'] / zs['first_cpu_seconds']:.2f}x" if zs else "-"
        later = f"{row['later_gb_per_s']:.2f}" if row["later_gb_per_s"] else "-"
        lo, hi = row["first_gb_per_s_range"]
        cpu_lo, cpu_hi = row["first_cpu_seconds_range"]
        print(f"| {stores[row['chunk_mb']]['chunk_mb']:.2f} MB | {row['workload']} | {row['tool']} | "
              f"{row['first_gb_per_s']:.2f} ({lo:.2f}-{hi:.2f}) | {row['first_cpu_seconds']:.2f} "
              f"({cpu_lo:.2f}-{cpu_hi:.2f}) | {row['first_minor_faults']:.0f} | {later} | {speedup} | "
              f"{cpu_ratio} |")
    if args.json:
        Path(args.json).write_text(json.dumps({"meta": meta, "summary": summary, "rows": rows}, indent=2))
    if tmp:
        tmp.cleanup()


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--child":
        print(json.dumps(run_child(json.loads(sys.argv[2]))))
        return
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--time", type=int, default=24)
    p.add_argument("--channels", type=int, default=16)
    p.add_argument("--lat", type=int, default=721)
    p.add_argument("--lon", type=int, default=1440)
    p.add_argument("--steps", type=int, default=12, help="random time-step reads per round")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--store", help="reuse/create the store here (default: a temporary directory)")
    p.add_argument("--json", help="write results to this file")
    p.add_argument("--fresh", action="store_true",
                   help="a new process per measurement, first pass timed apart (see above)")
    p.add_argument("--chunk-mb", default="1,4", help="--fresh: chunk sizes, MB decoded")
    p.add_argument("--workloads", default="steps,whole", help="--fresh: steps, whole")
    p.add_argument("--tools", default=",".join(FRESH_TOOLS), help="--fresh: tools to run")
    p.add_argument("--passes", type=int, default=3, help="--fresh: passes per process, the first timed apart")
    p.add_argument("--store-dir", help="--fresh: reuse/create the stores here (default: a temporary directory)")
    args = p.parse_args()
    if args.fresh:
        fresh_main(args)
        return

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
        "machine": describe(machine()),
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

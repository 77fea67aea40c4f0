#!/usr/bin/env python3
"""zarrstream rechunk against the community's rechunking tools, one store, one table.

An ERA5-like store in an archival layout (Zarr v2 as xarray writes it: many time steps per chunk,
each field cut into 2 x 2 tiles, zstd) is copied into the training layout of
``zarrstream rechunk --gpu-friendly`` (one time step of one level per chunk, the whole 2-D field,
blosc-lz4 with byte shuffle) by:

- ``zarrstream``: ``zarrstream.rechunk`` in one process (all cores);
- ``zarrstream-dask``: ``zarrstream.dask.rechunk`` on a Dask LocalCluster of N worker processes;
- ``zarrstream-ray``: ``zarrstream.ray.rechunk`` on a local Ray of N CPUs (when ray imports);
- ``rechunker``: pangeo-data's rechunker (Dask executor) on the same LocalCluster, ``max_mem`` the
  per-worker budget zarrstream gets as ``memory``. rechunker needs zarr-python 2 (``zarr<3``), so it
  runs in an environment of its own (bench/requirements-rechunker.txt, ``--rechunker-python``) and
  writes Zarr v2 with the same chunks and codec, unsharded (v2 has no shards);
- ``xarray-beam``: ``xbeam.Rechunk`` on Beam's DirectRunner (N processes), in an environment of its
  own too (bench/requirements-xarray-beam.txt, ``--xarray-beam-python``: Apache Beam's
  dependencies would replace the development environment's protobuf), writing Zarr v3 unsharded.

Every row runs in a fresh child process (its wall time excludes starting the interpreter and the
cluster, which is reported apart), the parent samples the child's process tree for peak RSS, and
every output is checked value for value against the source with zarr-python before the table is
printed. Page cache: warm by default (the source is read once before each row); ``--cold`` evicts
the source's pages (fsync + POSIX_FADV_DONTNEED) before each row instead.

    python bench/rechunk_peers.py --preset era5-1deg --steps 64 --workers 2 --json out.json

``make bench-rechunk`` makes the peers' environment and runs the documented configuration.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TOOLS = ("zarrstream", "zarrstream-dask", "zarrstream-ray", "rechunker", "xarray-beam")
# The peers run in environments of their own (bench/requirements-<tool>.txt; make bench-rechunk).
PEER_PYTHONS = {tool: REPO / "build" / "bench" / f"{tool}-venv" / "bin" / "python"
                for tool in ("rechunker", "xarray-beam")}
# The training layout: rechunk --gpu-friendly's chunks and codec (docs/rechunk.md).
TARGET_CODEC = ("lz4", 5, "shuffle")
SOURCE_DONE = ".rechunk-peers-source-complete"


# ---------------------------------------------------------------------------------------------
# The source store (main environment).


def make_source(path: Path, preset: str, steps: int, time_chunk: int, zarrstream_cli: str) -> None:
    """`zarrstream synth` data rewritten by xarray as an archival Zarr v2 store: `time_chunk` steps
    and every level per chunk, each field in 2 x 2 tiles, zstd level 3 (written once, reused)."""
    import numcodecs
    import xarray as xr

    if (path / SOURCE_DONE).exists():
        return
    shutil.rmtree(path, ignore_errors=True)
    synth = path.with_name(path.name + ".synth")
    subprocess.run([zarrstream_cli, "synth", str(synth), "--preset", preset, "--steps", str(steps),
                    "--layout", "wb2", "--overwrite"], check=True, stdout=subprocess.DEVNULL)
    ds = xr.open_zarr(synth)
    tiles = {"time": time_chunk, "level": -1,
             "latitude": math.ceil(ds.sizes["latitude"] / 2),
             "longitude": math.ceil(ds.sizes["longitude"] / 2)}
    encoding = {}
    for name, var in ds.data_vars.items():
        chunks = tuple(min(ds.sizes[d], tiles[d]) if tiles[d] > 0 else ds.sizes[d] for d in var.dims)
        encoding[name] = {"chunks": chunks, "compressors": (numcodecs.Zstd(level=3),)}
    ds = ds.chunk({d: tiles[d] for d in ds.dims})
    for var in ds.variables.values():
        var.encoding.pop("chunks", None)
        var.encoding.pop("preferred_chunks", None)
    ds.to_zarr(path, mode="w", zarr_format=2, consolidated=True, encoding=encoding)
    shutil.rmtree(synth)
    (path / SOURCE_DONE).touch()


def source_arrays(path: Path) -> dict[str, tuple[tuple[str, ...], tuple[int, ...], int]]:
    """name -> (dimension names, shape, decoded bytes) of every array of the source group."""
    import zarr

    group = zarr.open_group(str(path), mode="r")
    return {name: (tuple(a.attrs.get("_ARRAY_DIMENSIONS", ())), a.shape, a.nbytes)
            for name, a in group.arrays()}


def target_chunks(dims: tuple[str, ...], shape: tuple[int, ...]) -> tuple[int, ...]:
    """The training layout's chunk for an array: one time step and one level, whole fields."""
    return tuple(1 if d in ("time", "level") else n for d, n in zip(dims, shape))


# ---------------------------------------------------------------------------------------------
# Page cache.


def source_files(path: Path) -> list[Path]:
    return [p for p in path.rglob("*") if p.is_file()]


def warm(path: Path) -> None:
    for p in source_files(path):
        with open(p, "rb") as f:
            while f.read(1 << 24):
                pass


def evict(path: Path) -> None:
    for p in source_files(path):
        fd = os.open(p, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


# ---------------------------------------------------------------------------------------------
# The rows, each in a child process: they print one JSON line {"startup_s", "wall_s", ...}.


def local_cluster(workers: int, worker_memory_gb: float):
    import distributed

    cluster = distributed.LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                       memory_limit=int(worker_memory_gb * 1e9),
                                       dashboard_address=":0")
    return cluster, distributed.Client(cluster)


def part_threads(workers: int) -> int:
    """Each task's threads: the machine's cores shared among the workers (as on the commands' own
    LocalCluster)."""
    return max(1, (os.cpu_count() or 1) // workers)


def row_zarrstream(cfg: dict) -> dict:
    import zarrstream

    t0 = time.perf_counter()
    # One process with every core and the cluster's memory budget in total.
    report = zarrstream.rechunk(cfg["source"], cfg["dest"], gpu_friendly=True,
                                memory=cfg["max_mem_gb"] * cfg["workers"])
    wall = time.perf_counter() - t0
    assert report.job_complete
    return {"startup_s": 0.0, "wall_s": wall, "read_amplification": report.read_amplification}


def row_zarrstream_dask(cfg: dict) -> dict:
    import zarrstream.dask

    t0 = time.perf_counter()
    cluster, client = local_cluster(cfg["workers"], cfg["worker_memory_gb"])
    client.wait_for_workers(cfg["workers"])
    t1 = time.perf_counter()
    report = zarrstream.dask.rechunk(cfg["source"], cfg["dest"], client=client, gpu_friendly=True,
                                     memory=cfg["max_mem_gb"], threads=part_threads(cfg["workers"]))
    wall = time.perf_counter() - t1
    assert report.job_complete
    client.close()
    cluster.close()
    return {"startup_s": t1 - t0, "wall_s": wall, "read_amplification": report.read_amplification}


def _hold(seconds: float) -> None:
    time.sleep(seconds)


def row_zarrstream_ray(cfg: dict) -> dict:
    import ray

    import zarrstream.ray

    t0 = time.perf_counter()
    ray.init(num_cpus=cfg["workers"], include_dashboard=False, log_to_driver=False)
    # Ray starts its worker processes as tasks arrive; the Dask rows' workers are up before their
    # clock starts (wait_for_workers), so here too: one task per CPU held long enough that each
    # gets a worker of its own.
    hold = ray.remote(num_cpus=1)(_hold)
    ray.get([hold.remote(0.5) for _ in range(cfg["workers"])])
    t1 = time.perf_counter()
    report = zarrstream.ray.rechunk(cfg["source"], cfg["dest"], gpu_friendly=True,
                                    memory=cfg["max_mem_gb"], threads=part_threads(cfg["workers"]))
    wall = time.perf_counter() - t1
    assert report.job_complete
    ray.shutdown()
    return {"startup_s": t1 - t0, "wall_s": wall, "read_amplification": report.read_amplification}


def row_rechunker(cfg: dict) -> dict:
    import numcodecs
    import rechunker
    import zarr

    t0 = time.perf_counter()
    cluster, client = local_cluster(cfg["workers"], cfg["worker_memory_gb"])
    client.wait_for_workers(cfg["workers"])
    t1 = time.perf_counter()
    source = zarr.open_consolidated(cfg["source"], mode="r")
    cname, clevel, _ = TARGET_CODEC
    compressor = numcodecs.Blosc(cname=cname, clevel=clevel, shuffle=numcodecs.Blosc.SHUFFLE)
    chunks, options = {}, {}
    for name, array in source.arrays():
        dims = tuple(array.attrs.get("_ARRAY_DIMENSIONS", ()))
        chunks[name] = target_chunks(dims, array.shape)
        options[name] = {"compressor": compressor}
    plan = rechunker.rechunk(source, chunks, int(cfg["max_mem_gb"] * 1e9), cfg["dest"],
                             target_options=options, temp_store=cfg["temp"], executor="dask")
    plan.execute()
    wall = time.perf_counter() - t1
    client.close()
    cluster.close()
    return {"startup_s": t1 - t0, "wall_s": wall, "version": rechunker.__version__,
            "zarr": zarr.__version__}


def row_xarray_beam(cfg: dict) -> dict:
    import apache_beam as beam
    import xarray_beam as xbeam
    from apache_beam.options.pipeline_options import PipelineOptions
    from zarr.codecs import BloscCodec

    t0 = time.perf_counter()
    source, source_chunks = xbeam.open_zarr(cfg["source"])
    target = {d: (1 if d in ("time", "level") else n) for d, n in source.sizes.items()}
    cname, clevel, shuffle = TARGET_CODEC
    compressor = BloscCodec(cname=cname, clevel=clevel, shuffle=shuffle)
    template = xbeam.make_template(source)
    encoding = {name: {"compressors": (compressor,)} for name in source.data_vars}
    options = PipelineOptions(runner="DirectRunner", direct_num_workers=cfg["workers"],
                              direct_running_mode="multi_processing")
    with beam.Pipeline(options=options) as pipeline:
        (pipeline
         | xbeam.DatasetToChunks(source, source_chunks, split_vars=True)
         | xbeam.Rechunk(source.sizes, source_chunks, target, itemsize=4,
                         max_mem=int(cfg["max_mem_gb"] * 1e9))
         | xbeam.ChunksToZarr(cfg["dest"], template, target, encoding=encoding))
    return {"startup_s": 0.0, "wall_s": time.perf_counter() - t0, "version": xbeam.__version__}


ROWS = {"zarrstream": row_zarrstream, "zarrstream-dask": row_zarrstream_dask,
        "zarrstream-ray": row_zarrstream_ray, "rechunker": row_rechunker,
        "xarray-beam": row_xarray_beam}


# ---------------------------------------------------------------------------------------------
# The parent: runs each row in a child, samples its memory, checks its output.


class TreeRss:
    """Peak RSS of each process in a child's tree, sampled every 50 ms."""

    def __init__(self, pid: int):
        import psutil

        self.root = psutil.Process(pid)
        self.peaks: dict[int, int] = {}
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        import psutil

        while not self.stop.is_set():
            try:
                procs = [self.root, *self.root.children(recursive=True)]
            except psutil.Error:
                procs = []
            for p in procs:
                try:
                    rss = p.memory_info().rss
                except psutil.Error:
                    continue
                self.peaks[p.pid] = max(self.peaks.get(p.pid, 0), rss)
            self.stop.wait(0.05)

    def finish(self) -> tuple[int, int]:
        """(largest peak over the processes, number of processes seen)."""
        self.stop.set()
        self.thread.join()
        return max(self.peaks.values(), default=0), len(self.peaks)


def run_row(tool: str, cfg: dict, python: str, timeout: float) -> dict:
    cmd = [python, str(Path(__file__).resolve()), "--row", tool, "--row-config", json.dumps(cfg)]
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    if python != sys.executable:
        # A peer's own environment: this one's PYTHONPATH would put its packages (zarr 3) first.
        env.pop("PYTHONPATH", None)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    rss = TreeRss(proc.pid)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        rss.finish()
        return {"error": f"timed out after {timeout:.0f} s"}
    peak, processes = rss.finish()
    if proc.returncode != 0:
        lines = err.strip().splitlines()
        print("\n".join(lines[-20:]), file=sys.stderr)
        return {"error": f"exit status {proc.returncode}: {lines[-1] if lines else ''}"}
    result = json.loads(out.strip().splitlines()[-1])
    result.update(peak_rss_mb=peak / 1e6, processes=processes)
    return result


def same_times(x, x_attrs, y, y_attrs) -> bool:
    """Whether two CF time arrays stored with different units hold the same times (xarray-beam
    writes the time coordinate as xarray encodes it anew)."""
    import numpy as np
    from xarray.coding.times import decode_cf_datetime

    units = x_attrs.get("units"), y_attrs.get("units")
    if not all(isinstance(u, str) and " since " in u for u in units):
        return False
    calendars = (x_attrs.get("calendar", "standard"), y_attrs.get("calendar", "standard"))
    return np.array_equal(decode_cf_datetime(x, units[0], calendars[0]),
                          decode_cf_datetime(y, units[1], calendars[1]))


def verify(source: Path, dest: Path, arrays: dict) -> None:
    """Every array of the source equals the output's, read with zarr-python, block by block."""
    import numpy as np
    import zarr

    src = zarr.open_group(str(source), mode="r")
    out = zarr.open_group(str(dest), mode="r")
    for name, (_, shape, _) in arrays.items():
        a, b = src[name], out[name]
        if b.shape != a.shape or b.dtype != a.dtype:
            raise AssertionError(f"{dest}: {name} is {b.dtype}{b.shape}, source {a.dtype}{a.shape}")
        step = a.chunks[0] if shape else 1
        for start in range(0, shape[0] if shape else 1, step):
            region = (slice(start, start + step),) if shape else ()
            x, y = a[region], b[region]
            if not np.array_equal(x, y, equal_nan=x.dtype.kind == "f") and \
                    not same_times(x, a.attrs, y, b.attrs):
                raise AssertionError(f"{dest}: {name}[{start}:{start + step}] differs from the source")


def markdown_table(rows: list[dict]) -> str:
    base = next((r for r in rows if r["tool"] == "rechunker" and "wall_s" in r), None)
    lines = ["| tool | workers | start-up (s) | wall (s), median | rounds (s) | GB/s "
             "| peak RSS, largest process (MB) | processes | vs rechunker |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "wall_s" not in r:
            lines.append(f"| {r['tool']} | {r['workers']} | – | – | – | – | – | – | {r['error'][:120]} |")
            continue
        ratio = f"{base['wall_s'] / r['wall_s']:.2f}×" if base else "–"
        rounds = ", ".join(f"{w:.1f}" for w in r["walls_s"])
        lines.append(f"| {r['tool']} | {r['workers']} | {r['startup_s']:.2f} | {r['wall_s']:.2f} | {rounds} | "
                     f"{r['gb_per_s']:.3f} | {r['peak_rss_mb']:.0f} | {r['processes']} | {ratio} |")
    return "\n".join(lines)


def peer_python(args: argparse.Namespace, tool: str) -> str:
    return getattr(args, f"{tool.replace('-', '_')}_python")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--preset", default="era5-1deg", choices=("era5-small", "era5-1deg", "era5"))
    p.add_argument("--steps", type=int, default=64, help="6-hourly time steps of the source")
    p.add_argument("--time-chunk", type=int, default=16, help="time steps per source chunk")
    p.add_argument("--workers", type=int, default=os.cpu_count() or 1,
                   help="Dask worker processes / Ray CPUs / Beam processes (default: one per core)")
    p.add_argument("--max-mem", type=float, default=0.5,
                   help="GB per worker: rechunker's and xarray-beam's max_mem, zarrstream's memory "
                        "per part (the one-process row gets workers x this)")
    p.add_argument("--worker-memory", type=float, default=0.0,
                   help="Dask worker memory limit in GB (default: 4 x --max-mem, at least 2)")
    p.add_argument("--tools", default=",".join(TOOLS), help="comma-separated, from " + ",".join(TOOLS))
    p.add_argument("--out-dir", type=Path, default=REPO / "build" / "bench" / "rechunk")
    p.add_argument("--source", type=Path, help="an existing Zarr v2 source group (else made in --out-dir)")
    for tool, python in PEER_PYTHONS.items():
        p.add_argument(f"--{tool}-python", default=str(python),
                       help=f"the interpreter of the environment holding {tool}")
    p.add_argument("--rounds", type=int, default=1,
                   help="runs of every tool, interleaved round by round; the table shows the median")
    p.add_argument("--cold", action="store_true", help="evict the source from the page cache before each row")
    p.add_argument("--timeout", type=float, default=1800, help="seconds per row before it is abandoned")
    p.add_argument("--keep", action="store_true", help="keep the outputs (default: removed once verified)")
    p.add_argument("--json", type=Path, help="write the configuration and results here")
    p.add_argument("--row", choices=TOOLS, help=argparse.SUPPRESS)
    p.add_argument("--row-config", help=argparse.SUPPRESS)
    args = p.parse_args(argv)

    if args.row:  # a child: one row, its result as the last line of stdout
        print(json.dumps(ROWS[args.row](json.loads(args.row_config))), flush=True)
        return 0

    tools = [t for t in args.tools.split(",") if t]
    unknown = set(tools) - set(TOOLS)
    if unknown:
        p.error(f"unknown tools: {', '.join(sorted(unknown))}")
    cli = shutil.which("zarrstream", path=os.path.dirname(sys.executable)) or shutil.which("zarrstream")
    if not cli:
        p.error("no zarrstream command: run `make build` first")
    args.out_dir.mkdir(parents=True, exist_ok=True)
    source = args.source or args.out_dir / f"{args.preset}-{args.steps}-t{args.time_chunk}.zarr"
    if not args.source:
        t = time.perf_counter()
        make_source(source, args.preset, args.steps, args.time_chunk, cli)
        print(f"source {source} ready ({time.perf_counter() - t:.1f} s)", file=sys.stderr)
    arrays = source_arrays(source)
    source_bytes = sum(n for _, _, n in arrays.values())
    worker_memory = args.worker_memory or max(2.0, 4 * args.max_mem)

    skipped, runnable = {}, []
    for tool in tools:
        if tool in PEER_PYTHONS and not os.path.exists(peer_python(args, tool)):
            skipped[tool] = f"not run: no {peer_python(args, tool)} (make bench-rechunk makes it)"
        elif tool == "zarrstream-ray" and importlib.util.find_spec("ray") is None:
            skipped[tool] = "not run: ray does not import"
        else:
            runnable.append(tool)

    runs: dict[str, list[dict]] = {tool: [] for tool in runnable}
    for round_index in range(args.rounds):  # interleaved: every tool sees the machine's phases
        for tool in runnable:
            if runs[tool] and "error" in runs[tool][-1]:
                continue
            dest = args.out_dir / f"out-{tool}.zarr"
            temp = args.out_dir / f"tmp-{tool}.zarr"
            for d in (dest, temp):
                shutil.rmtree(d, ignore_errors=True)
            (evict if args.cold else warm)(source)
            cfg = {"source": str(source), "dest": str(dest), "temp": str(temp),
                   "workers": args.workers, "max_mem_gb": args.max_mem,
                   "worker_memory_gb": worker_memory}
            print(f"round {round_index + 1}: {tool} ...", file=sys.stderr, flush=True)
            python = peer_python(args, tool) if tool in PEER_PYTHONS else sys.executable
            result = run_row(tool, cfg, python, args.timeout)
            if "wall_s" in result:
                try:
                    verify(source, dest, arrays)
                except (AssertionError, KeyError) as e:
                    result = {"error": f"output wrong: {e}"}
            print(f"round {round_index + 1}: {tool}: " + (
                f"{result['wall_s']:.2f} s, output verified" if "wall_s" in result
                else result["error"]), file=sys.stderr, flush=True)
            if not args.keep:
                for d in (dest, temp):
                    shutil.rmtree(d, ignore_errors=True)
            runs[tool].append(result)

    rows = []
    for tool in tools:
        workers = 1 if tool == "zarrstream" else args.workers
        if tool in skipped:
            rows.append({"tool": tool, "workers": workers, "skipped": True, "error": skipped[tool]})
            continue
        failed = [r for r in runs[tool] if "error" in r]
        if failed:
            rows.append({"tool": tool, "workers": workers, "error": failed[0]["error"]})
            continue
        walls = [r["wall_s"] for r in runs[tool]]
        row = dict(runs[tool][0])
        row.update(tool=tool, workers=workers, verified=True, walls_s=walls,
                   wall_s=statistics.median(walls),
                   startup_s=statistics.median(r["startup_s"] for r in runs[tool]),
                   peak_rss_mb=max(r["peak_rss_mb"] for r in runs[tool]),
                   processes=max(r["processes"] for r in runs[tool]))
        row["gb_per_s"] = source_bytes / 1e9 / row["wall_s"]
        rows.append(row)

    print(f"source: {source} ({args.preset}, {args.steps} steps, {args.time_chunk} per chunk, "
          f"{len(arrays)} arrays, {source_bytes / 1e9:.3f} GB decoded); page cache: "
          f"{'evicted before each row' if args.cold else 'warm'}; median of {args.rounds} "
          f"round(s); max_mem {args.max_mem} GB per "
          f"worker, Dask worker limit {worker_memory} GB; {os.cpu_count()} cores")
    print(markdown_table(rows))
    if args.json:
        config = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()
                  if k not in ("row", "row_config")}
        args.json.write_text(json.dumps({"config": config, "source_bytes": source_bytes,
                                         "cores": os.cpu_count(), "rows": rows}, indent=1))
    return 0 if all("wall_s" in r or r.get("skipped") for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())

"""Versioned and virtual datasets against plain Zarr: the loader's batches from an Icechunk
repository and from Kerchunk references over netCDF4 files, side by side with the same data as a
plain Zarr store and with xarray + a PyTorch DataLoader reading the netCDF4 files, in one run.

One ERA5-like store (`zarrstream synth`, default 1°) is written three more ways:

  plain       the synth store itself (Zarr v3, zstd 3, one time step of a variable per chunk)
  icechunk    an Icechunk repository holding the same chunks: every key of the plain store copied
              byte for byte into one commit (native chunks; icechunk 1.x or 2.x, whichever is
              installed), so only the store differs
  references  netCDF4 files of --steps-per-file steps each (written by xarray, h5netcdf engine, or
              netCDF4 where h5netcdf is missing), one field (a time step of a level) per HDF5
              chunk, zlib level 1 with byte shuffle, as a CDS download comes; and a Kerchunk
              reference set over them (kerchunk SingleHdf5ToZarr per file, MultiZarrToZarr along
              time), read through reference://
  xarray      the same netCDF4 files through xr.open_mfdataset(engine="h5netcdf") in a map-style
              dataset (sample t: the variables at steps t and t + 1, levels stacked into channels)
              under torch DataLoader(shuffle=True, num_workers=--workers), opened once per worker

The workload is bench/loader_bench.py's: random time-step batches of the same channels, the target
one step after the input, float32 [batch, channel, latitude, longitude]; the zarrstream rows are its
zarrstream loader (exact shuffle) on each dataset's URL, the xarray row its DataLoader set-up. The
loader's chunk cache is held to --cache-mb (64 MiB), below the decoded dataset, so that every epoch
reads and decodes its chunks from the store, as with a dataset larger than memory: the loader's
default cache (1/64 of the machine's memory, up to 1 GiB) would hold a dataset of this size
decoded after the first epoch and leave the store unmeasured (--cache-mb 0 measures that).

Before timing, the first --verify-batches batches of the plain store's loader are compared value by
value with the Icechunk and the reference loaders' (same seed: the same samples) and with the
xarray dataset's samples at the same time steps; a difference is reported and the run exits 1
after the table. Then each row runs in a fresh process (loader_bench's child: time to first batch,
samples/s, CPU time of the process tree, peak RSS), the rounds alternating the order of the rows,
and the first batch of each timed run is checked against zarr-python's read of the plain store.
Every file of the datasets is read once before the first check, so all read from a warm page cache.

    python bench/virtual_bench.py --preset era5-1deg --steps 32 --rounds 3 --json virtual.json

Prints samples/s, GB/s delivered (input + target), CPU seconds per sample, peak RSS and start-up,
median and range over the rounds, the ratio Icechunk / plain Zarr and references / xarray +
DataLoader (of the medians and each round's pair), and the machine and its load.

Needs zarrstream, numpy, torch, zarr; the Icechunk row needs icechunk, the reference row kerchunk,
h5py and a netCDF writer (h5netcdf or netCDF4), the xarray row xarray, dask and h5netcdf. A row
whose packages are missing is skipped, saying which.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import importlib.util
import itertools
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import loader_bench as lb  # noqa: E402
import multistore_bench as ms  # noqa: E402

ROWS = ("plain", "icechunk", "references", "xarray")
DATASETS = {"plain": "plain Zarr (v3, zstd)", "icechunk": "Icechunk repository (native chunks)",
            "references": "Kerchunk references to netCDF4", "xarray": "netCDF4 files"}
# The tool each row runs in loader_bench's child, and the harness that runs it.
XARRAY_TOOL = "xarray-netcdf"
ROW_TOOLS = {"plain": "zarrstream", "icechunk": "zarrstream", "references": "zarrstream", "xarray": XARRAY_TOOL}
# (row, over row): the ratios of samples/s the table reports, and how the table names the other row.
RATIOS = (("icechunk", "plain"), ("references", "xarray"), ("references", "plain"))
RATIO_NAMES = {"plain": "plain Zarr", "xarray": "xarray + DataLoader"}
COMPLETE = ".virtual-complete"  # written into a dataset once it is whole, so a rerun reuses it
COORDINATES = ("level", "latitude", "longitude")  # the same in every netCDF file
VERSIONS = ("zarrstream", "torch", "xarray", "dask", "zarr", "numpy", "icechunk", "kerchunk", "h5netcdf", "h5py",
            "netCDF4")


def missing(*modules: str) -> str | None:
    """Which of `modules` cannot be imported here, as a reason, or None."""
    absent = [m for m in modules if importlib.util.find_spec(m) is None]
    return f"{', '.join(absent)} not installed" if absent else None


def netcdf_engine() -> str | None:
    """The engine xarray writes the netCDF4 files with: h5netcdf, else netCDF4."""
    for engine, module in (("h5netcdf", "h5netcdf"), ("netcdf4", "netCDF4")):
        if importlib.util.find_spec(module) is not None:
            return engine
    return None


def unavailable_rows() -> dict[str, str]:
    out = {}
    if reason := missing("icechunk", "zarr"):
        out["icechunk"] = reason
    if reason := missing("kerchunk", "h5py", "xarray") or (
            None if netcdf_engine() else "neither h5netcdf nor netCDF4 installed (to write the files)"):
        out["references"] = reason
    if reason := missing("xarray", "dask", "h5netcdf"):
        out["xarray"] = reason
    return out


# ---------------------------------------------------------------------------------------------
# The datasets: made once under the work folder, reused by later runs.


def done(path: Path) -> bool:
    return (path / COMPLETE).exists()


def make_plain(work: Path, preset: str, steps: int) -> Path:
    store = work / f"{preset}-{steps}.zarr"
    if not done(store):
        shutil.rmtree(store, ignore_errors=True)
        lb.synthesize(store, preset, "v3-zstd", steps)
        (store / COMPLETE).touch()
    return store


def make_icechunk(plain: Path, repo_path: Path) -> Path:
    """Every key of `plain` written into one commit of a new repository at `repo_path`: the
    same chunk bytes as native chunks (group metadata without its consolidated copy of the
    arrays', which Icechunk does not keep)."""
    if done(repo_path):
        return repo_path
    import icechunk
    from zarr.core.buffer import default_buffer_prototype

    if hasattr(icechunk, "set_logs_filter"):
        icechunk.set_logs_filter("error")  # its warning that local storage is not for concurrent commits
    shutil.rmtree(repo_path, ignore_errors=True)
    repo = icechunk.Repository.create(icechunk.local_filesystem_storage(str(repo_path)))
    session = repo.writable_session("main")
    files = sorted((p for p in plain.rglob("*") if p.is_file() and p.name != COMPLETE),
                   key=lambda p: (p.name != "zarr.json", len(p.parts), p))  # metadata first, parents first
    buffer = default_buffer_prototype().buffer

    async def copy() -> None:
        for path in files:
            data = path.read_bytes()
            if path.name == "zarr.json":
                document = json.loads(data)
                document.pop("consolidated_metadata", None)
                data = json.dumps(document).encode()
            await session.store.set(path.relative_to(plain).as_posix(), buffer.from_bytes(data))

    asyncio.run(copy())
    session.commit(f"the chunks of {plain.name}")
    (repo_path / COMPLETE).touch()
    return repo_path


def make_netcdf(plain: Path, out: Path, variables: list[str], steps_per_file: int) -> list[Path]:
    """The variables of `plain` as netCDF4 files of `steps_per_file` steps each (the time stored as
    the store has it), one field per HDF5 chunk, zlib level 1 with shuffle."""
    if done(out):
        return sorted(out.glob("*.nc"))
    import xarray as xr

    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    ds = xr.open_zarr(plain, decode_times=False, chunks=None)[variables]
    files = []
    for number, start in enumerate(range(0, ds.sizes["time"], steps_per_file)):
        part = ds.isel(time=slice(start, start + steps_per_file))
        encoding = {name: {"zlib": True, "complevel": 1, "shuffle": True,
                           "chunksizes": (1,) * (part[name].ndim - 2) + part[name].shape[-2:]} for name in variables}
        files.append(out / f"part-{number:04d}.nc")
        part.to_netcdf(files[-1], engine=netcdf_engine(), encoding=encoding)
    (out / COMPLETE).touch()
    return files


def make_references(files: list[Path], path: Path) -> Path:
    """kerchunk's references to each file, combined along time, written to `path` (JSON)."""
    if path.exists():
        return path
    from kerchunk.combine import MultiZarrToZarr
    from kerchunk.hdf import SingleHdf5ToZarr

    refs = [SingleHdf5ToZarr(str(f.resolve()), inline_threshold=300).translate() for f in files]
    identical = [d for d in COORDINATES if f"{d}/.zarray" in refs[0]["refs"]]
    combined = MultiZarrToZarr(refs, concat_dims=["time"], identical_dims=identical).translate()
    partial = path.with_suffix(".partial")
    partial.write_text(json.dumps(combined))
    partial.rename(path)
    return path


def disk_bytes(path: Path) -> int:
    return path.stat().st_size if path.is_file() else lb.stored_bytes(path)


# ---------------------------------------------------------------------------------------------
# The xarray row: netCDF4 files through xr.open_mfdataset under a torch DataLoader.


class NetcdfSamples:
    """Sample t: the variables at steps t (input) and t + 1 (target) of the netCDF files opened
    with xr.open_mfdataset(engine="h5netcdf"), levels stacked into channels, and t. The files are
    opened on first use in each process (a DataLoader worker opens its own: HDF5 handles do not
    survive fork). A plain class: the parent need not import torch to pickle it for workers."""

    def __init__(self, files: list[str], variables: list[str], num_samples: int):
        self.files, self.variables, self.num_samples = files, variables, num_samples
        self._dataset, self._pid = None, None

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_dataset": None, "_pid": None}

    def __len__(self) -> int:
        return self.num_samples

    def open(self):
        if self._dataset is None or self._pid != os.getpid():
            import xarray as xr

            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                self._dataset = xr.open_mfdataset(self.files, engine="h5netcdf")[self.variables]
            self._pid = os.getpid()
        return self._dataset

    def read(self, t: int) -> tuple[np.ndarray, np.ndarray]:
        """Input and target of sample t, float32 [channel, latitude, longitude]."""
        pair = self.open().isel(time=slice(t, t + 2)).load()
        fields = [pair[name].values.reshape(2, -1, *pair[name].shape[-2:]) for name in self.variables]
        return (np.ascontiguousarray(np.concatenate([f[0] for f in fields]), dtype=np.float32),
                np.ascontiguousarray(np.concatenate([f[1] for f in fields]), dtype=np.float32))

    def __getitem__(self, t: int):
        import torch

        inp, tgt = self.read(int(t))
        return torch.from_numpy(inp), torch.from_numpy(tgt), int(t)


def netcdf_files(w: lb.Workload) -> list[str]:
    return [str(p) for p in sorted(Path(w.store).glob("*.nc"))]


def xarray_batches(w: lb.Workload):
    lb.set_dask_scheduler(w.dask_threads)
    yield from lb.dataloader_batches(w, NetcdfSamples(netcdf_files(w), w.variables, w.num_samples))


def xarray_config(w: lb.Workload) -> dict:
    return {"api": 'xr.open_mfdataset(files, engine="h5netcdf")', "num_workers": w.workers,
            "prefetch_factor": w.prefetch_factor if w.workers else None, "persistent_workers": w.workers > 0,
            "multiprocessing_context": w.mp_context or "default", "dask_scheduler": "threads",
            "dask_num_workers": w.dask_threads, "shuffle": True}


def register_xarray_tool() -> None:
    """Makes loader_bench's child run the xarray row as one of its tools."""
    lb.LOADER_BATCHES[XARRAY_TOOL] = xarray_batches
    lb.LOADER_IMPORTS[XARRAY_TOOL] = ("torch", "dask", "xarray", "h5netcdf")


# ---------------------------------------------------------------------------------------------
# The check before timing: every row's first batches against the plain store's.


def row_workloads(w: lb.Workload, paths: dict[str, Path], skipped: dict[str, str]) -> dict[str, lb.Workload]:
    """The workload of each row that runs: `w` on the row's dataset."""
    urls = {"plain": str(paths["plain"].resolve())}
    if "icechunk" in paths:
        urls["icechunk"] = str(paths["icechunk"].resolve())
    if "references" in paths:
        urls["references"] = f"reference://{paths['references'].resolve()}"
    if "netcdf" in paths:
        urls["xarray"] = str(paths["netcdf"].resolve())
    return {row: dataclasses.replace(w, kind=row, store=urls[row]) for row in ROWS
            if row in urls and row not in skipped}


def first_batches(w: lb.Workload, count: int) -> list[lb.Batch]:
    batches = lb.zarrstream_batches(w)
    try:
        return list(itertools.islice(batches, count))
    finally:
        batches.close()


def compare(row: str, got: list[tuple], want: list[lb.Batch]) -> dict:
    """{"identical", "batches", "detail"} of `got` [(input, target, origins)] against `want`."""
    for index, (batch, reference) in enumerate(zip(got, want)):
        for key, a, b in (("origin", batch[2], reference.origins), ("input", batch[0], reference.input),
                          ("target", batch[1], reference.target)):
            problem = ms.first_difference(f"batch {index} {key}", np.asarray(a), np.asarray(b),
                                          labels=(row, "plain Zarr"))
            if problem:
                return {"identical": False, "batches": index, "detail": problem}
    return {"identical": len(got) > 0, "batches": len(got),
            "detail": f"the first {len(got)} batches equal the plain store's"}


def verify(workloads: dict[str, lb.Workload], count: int) -> dict[str, dict]:
    """Each row's first `count` batches against the plain store loader's (the same seed: the
    same samples); for the xarray row, its dataset's samples at the plain batches' time steps."""
    want = first_batches(workloads["plain"], count)
    checks = {}
    for row, w in workloads.items():
        if row == "plain":
            continue
        if row == "xarray":
            samples = NetcdfSamples(netcdf_files(w), w.variables, w.num_samples)
            got = []
            for batch in want:
                pairs = [samples.read(int(t)) for t in batch.origins]
                got.append((np.stack([p[0] for p in pairs]), np.stack([p[1] for p in pairs]), batch.origins))
        else:
            got = [(b.input, b.target, b.origins) for b in first_batches(w, count)]
        checks[row] = compare(row, got, want)
    return checks


# ---------------------------------------------------------------------------------------------
# Timing, summary, table.


def time_row(row: str, w: lb.Workload, plain: lb.Workload, work: Path, timeout: float) -> dict:
    tool = ROW_TOOLS[row]
    if tool == XARRAY_TOOL:
        return lb.run_child(tool, w, work, timeout, script=Path(__file__).resolve(), config=xarray_config(w),
                            reference=plain)
    return lb.run_child(tool, w, work, timeout, reference=plain)


def summarize(runs: dict[str, list[dict]]) -> dict:
    rows = {}
    for row, results in runs.items():
        good = [r for r in results if "error" not in r]
        rows[row] = {
            "samples_per_second": [r["samples_per_s"] for r in good],
            "delivered_gb_per_second": [r["gb_per_s"] for r in good],
            # The process tree's CPU time over the measured batches (DataLoader workers included).
            "cpu_seconds_per_sample": [r["cpu_cores_busy"] * r["elapsed_s"] / r["measured_samples"] for r in good],
            "peak_rss_mb": [r["peak_rss_bytes"] / 1e6 for r in good],
            "startup_seconds": [r["startup_s"] for r in good],
            "first_batch_checks": [r["check"]["ok"] for r in good],
            "errors": [r["error"] for r in results if "error" in r],
        }
    ratios = {}
    for row, over in RATIOS:
        if row in rows and over in rows and rows[row]["samples_per_second"] and rows[over]["samples_per_second"]:
            mine, theirs = rows[row]["samples_per_second"], rows[over]["samples_per_second"]
            ratios[f"{row}/{over}"] = {"of_medians": statistics.median(mine) / statistics.median(theirs),
                                       "per_round": [a / b for a, b in zip(mine, theirs)]}
    return {"rows": rows, "ratios": ratios}


def print_table(summary: dict, tools: dict[str, str], skipped: dict[str, str]) -> None:
    print("| dataset | read by | samples/s | GB/s delivered | CPU s per sample | peak RSS (MB) | start-up (s) "
          "| ratio (samples/s) |")
    print("|---|---|---|---|---|---|---|---|")
    for row in ROWS:
        if row in skipped:
            print(f"| {DATASETS[row]} | not available ({skipped[row]}) |||||||")
            continue
        r = summary["rows"][row]
        if not r["samples_per_second"]:
            print(f"| {DATASETS[row]} | {tools[row]} | failed: {'; '.join(r['errors'])} ||||||")
            continue
        ratios = [f"{ratio['of_medians']:.3f} × {RATIO_NAMES[key.split('/')[1]]} (rounds "
                  f"{min(ratio['per_round']):.3f}–{max(ratio['per_round']):.3f})"
                  for key, ratio in summary["ratios"].items() if key.startswith(row + "/")]
        print(f"| {DATASETS[row]} | {tools[row]} | {ms.spread(r['samples_per_second'], '.2f')} "
              f"| {ms.spread(r['delivered_gb_per_second'], '.3f')} | {ms.spread(r['cpu_seconds_per_sample'], '.4f')} "
              f"| {ms.spread(r['peak_rss_mb'], '.0f')} | {ms.spread(r['startup_seconds'], '.2f')} "
              f"| {'; '.join(ratios)} |")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--workdir", help="folder for the datasets, reused by later runs (default: a temporary folder, "
                                     "removed at the end)")
    p.add_argument("--preset", default="era5-1deg", help="zarrstream synth preset (era5-1deg: 181 x 360, about "
                                                         "17 MB stored per step)")
    p.add_argument("--steps", type=int, default=32, help="6-hourly time steps of the synthesized store")
    p.add_argument("--steps-per-file", type=int, default=4, help="time steps per netCDF4 file (4: a day)")
    p.add_argument("--variables", default=",".join(lb.DEFAULT_VARIABLES), help="comma-separated input variables")
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--batches", type=int, help="measured batches per epoch (default: all full batches of an epoch "
                                               "but the start-up batch)")
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--workers", type=int, default=lb.usable_cores(), help="DataLoader worker processes of the "
                                                                          "xarray row (default: the usable cores)")
    p.add_argument("--prefetch-factor", type=int, default=3, help="DataLoader batches per worker")
    p.add_argument("--dask-threads", type=int, default=4, help="dask threaded scheduler workers per process")
    p.add_argument("--mp-context", help="DataLoader multiprocessing context (default: the platform's)")
    p.add_argument("--prefetch", type=int, default=4, help="batches in flight for the zarrstream loader")
    p.add_argument("--cache-mb", type=int, default=64, help="the zarrstream loader's chunk cache (MiB; 0: its "
                                                            "default, 1/64 of the machine's memory)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--verify-batches", type=int, default=2, help="batches compared before timing")
    p.add_argument("--timeout", type=float, default=1800, help="seconds per timed run before it is killed")
    p.add_argument("--json", help="write the settings, the machine, the checks, every run and the summary here")
    p.add_argument("--run-one", help=argparse.SUPPRESS)
    p.add_argument("--spec", help=argparse.SUPPRESS)
    p.add_argument("--out", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    args.variables = [v for v in args.variables.split(",") if v]
    return args


def workload(args: argparse.Namespace, plain: Path) -> lb.Workload:
    w = lb.Workload(store=str(plain.resolve()), variables=args.variables, batch_size=args.batch_size, batches=0,
                    epochs=args.epochs, seed=args.seed, step_time=0.0, workers=args.workers,
                    prefetch_factor=args.prefetch_factor, dask_threads=args.dask_threads, mp_context=args.mp_context,
                    prefetch=args.prefetch, ts_cache_bytes=0, cores=lb.usable_cores(), cache_bytes=args.cache_mb << 20,
                    **lb.describe_store(plain, args.variables))
    full = w.num_samples // w.batch_size
    w.batches = args.batches if args.batches is not None else full - 1
    if w.batches < 1 or w.batches + 1 > full:
        sys.exit(f"virtual_bench: {w.num_samples} samples make {full} full batches of {w.batch_size} per epoch: "
                 f"--batches must be 1 ... {full - 1} (epoch 0 also yields the start-up batch)")
    return w


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.run_one:
        register_xarray_tool()
        lb.child_main(args.run_one, Path(args.spec), Path(args.out))
        return 0
    if reason := missing("torch", "zarr"):
        # The rows are timed by loader_bench's child, which hands every tool's batches over as torch tensors.
        sys.exit(f"virtual_bench: {reason}: the rows are measured as torch batches")
    skipped = unavailable_rows()
    for row, reason in skipped.items():
        print(f"virtual_bench: skipping the {row} row: {reason}", file=sys.stderr)
    ms.find_cli()  # says so if `zarrstream` is missing
    tmp = None if args.workdir else tempfile.TemporaryDirectory(prefix="virtual-bench-")
    try:
        work = Path(args.workdir or tmp.name)
        work.mkdir(parents=True, exist_ok=True)
        t0 = time.perf_counter()
        paths = {"plain": make_plain(work, args.preset, args.steps)}
        stem = paths["plain"].stem
        if "icechunk" not in skipped:
            paths["icechunk"] = make_icechunk(paths["plain"], work / f"{stem}.icechunk")
        if "references" not in skipped or "xarray" not in skipped:
            netcdf = work / f"{stem}-{args.steps_per_file}-per-file-nc"
            files = make_netcdf(paths["plain"], netcdf, args.variables, args.steps_per_file)
            paths["netcdf"] = netcdf
            if "references" not in skipped:
                paths["references"] = make_references(files, netcdf / "refs.json")
        print(f"datasets ready in {time.perf_counter() - t0:.1f} s under {work}", file=sys.stderr)

        w = workload(args, paths["plain"])
        workloads = row_workloads(w, paths, skipped)
        page_bytes, page_seconds = 0, 0.0
        for path in {paths[k] for k in ("plain", "icechunk", "netcdf") if k in paths}:
            nbytes, seconds = lb.warm_page_cache(path)
            page_bytes, page_seconds = page_bytes + nbytes, page_seconds + seconds
        page_cache = (f"warm: every file of the datasets ({page_bytes / 1e6:.0f} MB) was read once before the check "
                      f"({page_seconds:.1f} s); caches cannot be dropped without root")
        print(f"page cache: {page_cache}", file=sys.stderr)

        checks = verify(workloads, args.verify_batches)
        for row, check in checks.items():
            word = "equal" if check["identical"] else "DIFFERENT"
            print(f"check: {row} batches {word}: {check['detail']}", file=sys.stderr)

        load_before = os.getloadavg()
        runs: dict[str, list[dict]] = {row: [] for row in workloads}
        with tempfile.TemporaryDirectory(prefix="virtual-bench-runs-") as runs_dir:
            for round_index in range(args.rounds):
                order = list(workloads) if round_index % 2 == 0 else list(workloads)[::-1]
                round_dir = Path(runs_dir) / f"round-{round_index}"
                round_dir.mkdir()
                for row in order:
                    result = time_row(row, workloads[row], workloads["plain"], round_dir, args.timeout)
                    runs[row].append(result)
                    said = (f"{result['samples_per_s']:.2f} samples/s" if "error" not in result
                            else f"failed: {result['error']}")
                    print(f"round {round_index + 1}/{args.rounds} {row}: {said}", file=sys.stderr)
        load_after = os.getloadavg()
        summary = summarize(runs)

        tools = {row: "zarrstream Loader" for row in ROWS}
        tools["xarray"] = f"xarray open_mfdataset (h5netcdf) + DataLoader, {args.workers} workers"
        sizes = {k: disk_bytes(p) for k, p in paths.items()}
        m = lb.machine()
        print(f"\n{args.preset}, {args.steps} steps ({w.num_lat} x {w.num_lon}); {len(args.variables)} variables, "
              f"{w.num_channels} channels, input t and target t + 1 ({w.sample_bytes / 1e6:.1f} MB per sample); "
              f"batch {w.batch_size}, {w.batches} measured batches x {w.epochs} epochs, exact shuffle, "
              f"zarrstream chunk cache {f'{args.cache_mb} MiB' if args.cache_mb else 'default'}, {args.rounds} "
              f"rounds (median, range); stored: plain {ms.size_text(sizes['plain'])}"
              + (f", Icechunk {ms.size_text(sizes['icechunk'])}" if "icechunk" in sizes else "")
              + (f", netCDF4 {ms.size_text(sizes['netcdf'])} in {args.steps_per_file}-step files"
                 if "netcdf" in sizes else ""))
        print(f"machine: {lb.describe(m)}; load average "
              f"(1, 5, 15 min) before {', '.join(f'{x:.1f}' for x in load_before)}, after "
              f"{', '.join(f'{x:.1f}' for x in load_after)}; page cache {page_cache.split(':')[0]}\n")
        print_table(summary, tools, skipped)
        identical = all(c["identical"] for c in checks.values()) and all(
            all(r["first_batch_checks"]) for r in summary["rows"].values())
        details = "; ".join(f"{row}: {check['detail']}" for row, check in checks.items())
        print(f"\nbatches against the plain store's: {'equal' if identical else 'NOT EQUAL'} ({details}; the first "
              "batch of every timed run against zarr-python's read of the plain store)")
        if args.json:
            Path(args.json).write_text(json.dumps({
                "command": "python bench/virtual_bench.py " + " ".join(sys.argv[1:]),
                "settings": {k: v for k, v in vars(args).items() if k not in ("json", "run_one", "spec", "out")},
                "machine": m, "versions": lb.versions(VERSIONS), "page_cache": page_cache,
                "load_average_before": load_before, "load_average_after": load_after,
                "datasets": {k: str(p) for k, p in paths.items()}, "stored_bytes": sizes,
                "workload": {"variables": args.variables, "channels": w.num_channels, "batch_size": w.batch_size,
                             "samples_per_epoch": w.num_samples, "measured_batches_per_epoch": w.batches,
                             "epochs": w.epochs, "sample_bytes": w.sample_bytes, "seed": w.seed},
                "skipped": skipped, "checks": checks, "identical": identical, "summary": summary, "runs": runs},
                indent=1))
        failed = any(r["errors"] for r in summary["rows"].values())
        return 0 if identical and not failed else 1
    finally:
        if tmp is not None:
            tmp.cleanup()


if __name__ == "__main__":
    sys.exit(main())

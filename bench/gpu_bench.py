"""Decoded GB/s into GPU memory: zarrstream's GPU batches vs its CPU-decoded batches vs the peers.

The workload of issue "GPU path": an ERA5-shaped store (``zarrstream synth --preset era5``: every
variable and level, 721 x 1440 float32, one chunk per time step and channel), batches of random
time steps, every channel, landing in GPU memory as float32 [batch, channels, 721, 1440]. Each
tool's rate is the decoded bytes it put on the GPU per second of wall time (after a warm-up batch,
with the GPU synchronised at the end), from the page cache (the store is read once first).

``steady`` is the loader's own production rate once running (from its timeline: batches completed
per second after the 6th), which neither the pipeline's start (allocating and pinning its buffers)
nor a prefetch head start affects; over the same window the notes give the share of time at least
one wave was being read (CPU) and at least one was in its copy and nvCOMP decode (GPU): the stage
near 100 % is the bound. The notes end with when the first six batches were delivered (seconds
from the first ask); the JSON's ``start_up`` has, for each, when it was planned, read, decoded
and scattered.

``--cold`` reads from the disk instead: every tool's run starts with the store's files dropped from
the page cache (posix_fadvise DONTNEED, after its warm-up batch), origins are one epoch's
permutation so that no step is read twice, and a ``disk`` row reads every file of the store, cold,
on one thread per core: the raw bandwidth the loaders' stored GB/s is compared with.

Rows: ``zarrstream-gpu`` (Loader(device="cuda"): compressed bytes cross PCIe, nvCOMP decodes,
kernels assemble), ``zarrstream-cpu`` (the same loader decoding on the CPU into pinned batches,
then one copy), ``tensorstore`` (one read per time step and variable, all in flight, then a
pinned copy) and ``zarr-python`` (zarr 3's async reads per step, then a copy). Layouts: ``v3-zstd``
(Zarr v3, zstd), ``wb2`` (Zarr v2, blosc lz4 shuffle, as WeatherBench2 stores it) and
``gpu-friendly`` (the v3-zstd store after ``zarrstream rechunk --gpu-friendly``: one field per
inner chunk, levels sharded, blosc with byte shuffle: lz4 since 2026-11-25, zstd-1 before).

    python3 bench/gpu_bench.py                       # 64 steps, batch 8, 24 batches, both layouts
    python3 bench/gpu_bench.py --quick               # a smoke run (make gpu-test)
    python3 bench/gpu_bench.py --json out.json
    python3 bench/gpu_bench.py --cold --tools disk,zarrstream-gpu,tensorstore

Needs an NVIDIA GPU, torch with CUDA; tensorstore and zarr rows are skipped (with the reason) when
those are not installed. ``dali``: NVIDIA DALI's external_source fed by zarr-python reads, the NCAR
hackathon's configuration (run_dali); skipped, with the reason, without DALI (PyPI:
nvidia-dali-cuda130, a 199 MB wheel).

``zarr-python-gpu``: zarr-python 3 with GPU buffers (``zarr.config.enable_gpu()``, CuPy), the same
reads as ``zarr-python`` landing as CuPy arrays, handed to torch by DLPack. ``kvikio``: the same
with KvikIO's ``kvikio.zarr.GDSStore`` (cuFile reads into GPU memory: GPUDirect Storage where the
machine has it, else KvikIO's POSIX compat mode). Neither decodes on the GPU: zarr-python 3.1's
codecs decode on the CPU (run_zarr_gpu_buffers says what crosses PCIe). Both are checked against
the batch zarr-python reads on the CPU and skipped, with the reason, without CuPy or KvikIO
(``scripts/offline-kit.sh --with-kvikio`` carries KvikIO). A peer that fails is an error row (the
exception), not the end of the run; the zarrstream rows still stop it.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from host import describe, machine  # noqa: E402
from page_cache import drop_from_page_cache, read_cold, store_files  # noqa: E402


TOOLS = ("disk", "zarrstream-gpu", "zarrstream-cpu", "tensorstore", "zarr-python", "dali",
         "zarr-python-gpu", "kvikio")


class Skip(Exception):
    """A peer that cannot run on this machine (a package or the GPU missing): its row says why."""


def find_cli() -> str:
    here = Path(sys.executable).parent / "zarrstream"
    return str(here) if here.exists() else (shutil.which("zarrstream") or "zarrstream")


def synthesize(dst: Path, layout: str, steps: int) -> None:
    metadata = dst / ("zarr.json" if layout != "wb2" else ".zgroup")
    # A rechunk that stopped part way (a full disk) leaves its group marked unfinished: made again.
    if metadata.exists() and json.loads(metadata.read_text()).get("attributes", {}).get(
            "zarrstream_rechunk") != "unfinished":
        return
    if layout == "gpu-friendly":  # what `zarrstream doctor` recommends: the v3-zstd store rechunked
        source = dst.with_name(dst.name.replace("gpu-friendly", "v3-zstd"))
        synthesize(source, "v3-zstd", steps)
        subprocess.run([find_cli(), "rechunk", str(source), str(dst), "--gpu-friendly",
                        "--overwrite"], check=True, stdout=subprocess.DEVNULL)
        return
    subprocess.run([find_cli(), "synth", str(dst), "--preset", "era5", "--layout", layout,
                    "--steps", str(steps), "--overwrite"], check=True, stdout=subprocess.DEVNULL)


def warm(store: Path) -> int:
    total = 0
    for path in store_files(store):
        with open(path, "rb") as f:
            while chunk := f.read(1 << 24):
                total += len(chunk)
    return total


def data_variables(store: Path) -> list[str]:
    import zarr

    group = zarr.open_group(str(store), mode="r")
    # The fields that vary in time ([time, (level,) lat, lon]); static ones are not sampled.
    return sorted(k for k, a in group.arrays() if a.ndim >= 3)


def batch_origins(steps: int, batch: int, batches: int, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.choice(steps, size=batch, replace=False) for _ in range(batches)]


def timed(fn, batches: int, bytes_per_batch: int, torch, warm_up: bool = True,
          before=None) -> dict:
    """fn(i) puts batch i on the GPU; the rate is over `batches` calls, the GPU synchronised.
    `before` runs after the warm-up, untimed (--cold: the eviction)."""
    if warm_up:
        fn(0)  # allocations, threads, the CUDA context
    if before:
        before()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for i in range(1, batches + 1):
        fn(i)
    torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    return {"batches": batches, "seconds": seconds, "gb_per_s": batches * bytes_per_batch / seconds / 1e9}


def run_zarrstream(store: Path, variables, args, torch, gpu: bool) -> dict:
    """The loader from its first batch on (its pipeline filling included: a loader given a head
    start while a warm-up batch is consumed would show its prefetch, not its rate); the CUDA
    context, nvCOMP and the kernels are initialised by a loader before it."""
    import zarrstream

    def make():
        return zarrstream.Loader(store, variables, batch_size=args.batch, shuffle="exact", seed=1,
                                 device="cuda", gpu_batches=gpu, prefetch=args.prefetch,
                                 gpu_wave_bytes=int(args.wave_gb * 2**30), timeline=True,
                                 cpu_decode_share=args.cpu_decode_share)

    next(iter(make()))
    if args.cold:
        drop_from_page_cache(store)
    loader = make()
    it = iter(())
    holder = {}

    def one(_: int) -> None:
        nonlocal it
        batch = next(it, None)
        if batch is None:
            it = iter(loader)
            batch = next(it)
        holder["last"] = batch["input"]  # held until the next: as a training step would

    bytes_per_batch = int(np.prod(loader.input_shape)) * 4
    out = timed(one, args.batches, bytes_per_batch, torch, warm_up=False)
    spans = loader.timeline()
    out["steady_gb_per_s"] = steady_rate(spans, bytes_per_batch)
    out["busy"] = stage_occupancy(spans)
    out["start_up"] = start_up(spans)
    stats = loader.stats()
    out["stored_gb_per_s"] = stats["bytes_read"] / out["seconds"] / 1e9
    out["status"] = loader.gpu_decode_status
    out["stats"] = {k: v for k, v in stats.items() if not k.startswith(("wait_histogram", "estimated"))}
    return out


def steady_rate(spans: list[dict], bytes_per_batch: int) -> float | None:
    """The loader's production rate once running: batches completed per second between the 7th
    completion and the last (from its timeline, so a consumer that fell behind and a prefetch head
    start do not count), in decoded GB/s."""
    done: dict[tuple[int, int], float] = {}
    for span in spans:
        if span["stage"] in ("scatter", "assemble"):
            key = (span["epoch"], span["batch"])
            done[key] = max(done.get(key, 0.0), span["end"])
    ends = sorted(done.values())[6:]
    if len(ends) < 4:
        return None
    return (len(ends) - 1) * bytes_per_batch / (ends[-1] - ends[0]) / 1e9


def start_up(spans: list[dict], first: int = 6) -> list[dict]:
    """How the first `first` batches of the first epoch were made, in seconds from the consumer's
    first ask (the start of batch 0's wait): when each was planned, its reads' first start and
    last end, its GPU decode time summed over its waves, when its last scatter ended, and when it
    was delivered (the end of its wait). Where the rate from the first batch falls short of the
    steady one, this says whether the start was reading, decoding or the memory before either."""
    epoch = min((s["epoch"] for s in spans), default=0)
    asked = [s["start"] for s in spans if s["stage"] == "wait" and s["epoch"] == epoch and s["batch"] == 0]
    if not asked:
        return []
    t0 = asked[0]

    def when(mine: list[dict], stage: str, edge: str, pick) -> float | None:
        times = [s[edge] for s in mine if s["stage"] == stage]
        return round(pick(times) - t0, 4) if times else None

    out = []
    for index in range(first):
        mine = [s for s in spans if s["epoch"] == epoch and s["batch"] == index]
        if not mine:
            break
        out.append({"batch": index, "planned": when(mine, "plan", "start", min),
                    "read_from": when(mine, "read", "start", min), "read_to": when(mine, "read", "end", max),
                    "gpu_decode_seconds": round(sum(s["end"] - s["start"] for s in mine
                                                    if s["stage"] == "gpu decode"), 4),
                    "done": when(mine, "scatter", "end", max), "delivered": when(mine, "wait", "end", max)})
    return out


def stage_occupancy(spans: list[dict]) -> dict[str, float]:
    """Per stage ("read", "gpu decode", ...): the share of the steady window (7th batch completed
    to the last) during which at least one span of it was running."""
    done = sorted(s["end"] for s in spans if s["stage"] in ("scatter", "assemble"))
    if len(done) < 10:
        return {}
    t0, t1 = done[6], done[-1]
    out = {}
    for stage in sorted({s["stage"] for s in spans}):
        busy, reach = 0.0, t0
        for a, b in sorted((s["start"], s["end"]) for s in spans if s["stage"] == stage):
            a, b = max(a, reach), min(b, t1)
            if b > a:
                busy += b - a
                reach = b
        out[stage] = busy / (t1 - t0)
    return out


def channel_reads(store: Path, variables):
    """(variable, level index or None) per channel, in the loader's order (variables sorted, levels
    in stored order)."""
    import zarr

    group = zarr.open_group(str(store), mode="r")
    channels = []
    for v in variables:
        a = group[v]
        channels += [(v, lev) for lev in range(a.shape[1])] if a.ndim == 4 else [(v, None)]
    return channels


def first_channels(channels, variables) -> dict:
    """variable -> index of its first channel in `channels` (a variable's levels are contiguous)."""
    return {v: [c for c, (name, _) in enumerate(channels) if name == v][0] for v in variables}


def run_tensorstore(store: Path, variables, args, torch, origins) -> dict:
    import tensorstore as ts

    driver = "zarr3" if (store / "zarr.json").exists() else "zarr"
    arrays = {v: ts.open({"driver": driver, "kvstore": {"driver": "file", "path": str(store / v)},
                          "context": {"cache_pool": {"total_bytes_limit": 0}}}).result()
              for v in variables}
    channels = channel_reads(store, variables)
    ny, nx = arrays[variables[0]].shape[-2:]
    host = torch.empty((args.batch, len(channels), ny, nx), dtype=torch.float32).pin_memory()
    dev = torch.empty_like(host, device="cuda")

    def one(i: int) -> None:
        steps = origins[i % len(origins)]
        futures = []
        for s, t in enumerate(steps):
            for c, (v, lev) in enumerate(channels):
                index = (int(t), lev) if lev is not None else (int(t),)
                futures.append((s, c, arrays[v][index].read()))
        for s, c, f in futures:
            host[s, c].numpy()[...] = f.result()
        dev.copy_(host, non_blocking=True)
        torch.cuda.current_stream().synchronize()

    return timed(one, args.batches, host.numel() * 4, torch,
                 before=(lambda: drop_from_page_cache(store)) if args.cold else None)


def run_zarr_python(store: Path, variables, args, torch, origins) -> dict:
    import zarr

    group = zarr.open_group(str(store), mode="r")
    channels = channel_reads(store, variables)
    arrays = {v: group[v] for v in variables}
    ny, nx = arrays[variables[0]].shape[-2:]
    host = torch.empty((args.batch, len(channels), ny, nx), dtype=torch.float32).pin_memory()
    dev = torch.empty_like(host, device="cuda")
    first = first_channels(channels, variables)
    pool = ThreadPoolExecutor(max_workers=os.cpu_count())

    def read(s: int, t: int, v: str) -> None:
        values = arrays[v][int(t)]
        n = values.shape[0] if values.ndim == 3 else 1
        host[s, first[v]:first[v] + n].numpy()[...] = values.reshape(n, ny, nx)

    def one(i: int) -> None:
        steps = origins[i % len(origins)]
        list(pool.map(lambda sv: read(*sv), [(s, t, v) for s, t in enumerate(steps) for v in variables]))
        dev.copy_(host, non_blocking=True)
        torch.cuda.current_stream().synchronize()

    return timed(one, args.batches if args.cold else max(2, args.batches // 4), host.numel() * 4,
                 torch, before=(lambda: drop_from_page_cache(store)) if args.cold else None)


def run_dali(store: Path, variables, args, torch, origins) -> dict:
    """NVIDIA DALI fed by zarr-python, as the NCAR/NOAA hackathon built it (2025,
    pangeo-data/ncar-hackathon-xarray-on-gpus: era5_dataloader.py's SeqZarrSource and pipeline, and
    the xarray.dev write-up's ExternalSource example): a Pipeline(batch_size=B, num_threads=2,
    prefetch_queue_depth=2, device_id=0) whose fn.external_source(device="gpu", batch=True) calls
    back for each batch; the callback reads each variable's steps of the batch with one zarr-python
    orthogonal read (decoding on the CPU; the hackathon's GPU-buffer variant needs CuPy) and stacks
    them into [B, C, lat, lon]; DALI copies it to the GPU and DALIGenericIterator hands it to torch.
    Under --cold the batches DALI prefetched during the warm-up batch were read before the eviction."""
    import zarr
    from nvidia.dali import fn, pipeline_def, types
    from nvidia.dali.plugin.pytorch import DALIGenericIterator

    group = zarr.open_group(str(store), mode="r")
    arrays = {v: group[v] for v in variables}
    channels = channel_reads(store, variables)
    ny, nx = arrays[variables[0]].shape[-2:]
    # DALI copies what the callback returns (no_copy=False), so one host buffer serves every batch.
    host = np.empty((args.batch, len(channels), ny, nx), dtype=np.float32)
    first = first_channels(channels, variables)
    total = args.batches + 1  # the warm-up batch and the timed ones

    def source(i: int) -> np.ndarray:
        if i >= total:
            raise StopIteration
        steps = np.asarray(origins[i % len(origins)], dtype=np.int64)
        for v in variables:
            values = arrays[v].oindex[steps]
            n = values.shape[1] if values.ndim == 4 else 1
            host[:, first[v]:first[v] + n] = values.reshape(len(steps), n, ny, nx)
        return host

    @pipeline_def(batch_size=args.batch, num_threads=2, prefetch_queue_depth=2, device_id=0)
    def pipeline():
        return fn.external_source(source=source, batch=True, device="gpu", dtype=types.FLOAT)

    pipe = pipeline()
    pipe.build()
    batches = iter(DALIGenericIterator([pipe], ["input"]))
    holder = {}

    def one(_: int) -> None:
        holder["last"] = next(batches)[0]["input"]  # held until the next: as a training step would

    return timed(one, args.batches, host.nbytes, torch,
                 before=(lambda: drop_from_page_cache(store)) if args.cold else None)


def expected_batch(store: Path, variables, steps) -> np.ndarray:
    """The batch [steps, channels, lat, lon] as zarr-python reads it into host memory (CPU buffers,
    whatever the configuration says): what a checked row must have put on the GPU."""
    import zarr

    channels = channel_reads(store, variables)
    group = zarr.open_group(str(store), mode="r")
    arrays = {v: group[v] for v in variables}
    ny, nx = arrays[variables[0]].shape[-2:]
    first = first_channels(channels, variables)
    out = np.empty((len(steps), len(channels), ny, nx), dtype=np.float32)

    def read(s: int, t: int, v: str) -> None:
        values = np.asarray(arrays[v][int(t)])
        n = values.shape[0] if values.ndim == 3 else 1
        out[s, first[v]:first[v] + n] = values.reshape(n, ny, nx)

    with zarr.config.set({"buffer": "zarr.buffer.cpu.Buffer", "ndbuffer": "zarr.buffer.cpu.NDBuffer"}):
        with ThreadPoolExecutor(max_workers=os.cpu_count()) as pool:
            list(pool.map(lambda a: read(*a), [(s, t, v) for s, t in enumerate(steps) for v in variables]))
    return out


def check_batch(got, want: np.ndarray) -> None:
    """Raises (an error row) unless the GPU batch `got` (a torch tensor) equals `want`, NaN for NaN."""
    host = got.cpu().numpy()
    if host.shape != want.shape:
        raise AssertionError(f"batch shape {host.shape}, expected {want.shape}")
    if not np.array_equal(host, want, equal_nan=True):
        differ = int(np.count_nonzero((host != want) & ~(np.isnan(host) & np.isnan(want))))
        raise AssertionError(f"{differ} of {want.size} values differ from zarr-python's CPU read")


def run_zarr_gpu_buffers(store: Path, variables, args, torch, origins, gds: bool) -> dict:
    """zarr-python 3 reading into GPU memory the documented way (user guide, "Using GPUs with Zarr":
    ``zarr.config.enable_gpu()``, which sets ``buffer``/``ndbuffer`` to ``zarr.buffer.gpu.Buffer``/
    ``NDBuffer``; indexing then returns CuPy arrays), with the zarr-python row's reads: one read per
    time step and variable, all of a batch in flight on one thread per core; each CuPy result goes
    to torch by DLPack and is copied into the [B, C, lat, lon] batch on the GPU.

    What that mode does in zarr 3.1.6 (its source; the user guide says as much: "Data will still
    be read into or copied to host (CPU) memory for encoding and decoding"): the store's bytes
    become a GPU Buffer (LocalStore reads into host memory, Buffer.from_bytes copies them to the
    GPU: compressed bytes cross PCIe); every codec (zstd, blosc, gzip, crc32c) decodes on the CPU
    (zarr.core.buffer.cpu.as_numpy_array_wrapper: the compressed bytes are copied back to the host,
    numcodecs decodes, the decoded bytes are copied to the GPU again); only the bytes codec's
    dtype view, the assembly into the output NDBuffer and the result are on the GPU. nvCOMP zstd
    decoding (zarr.codecs.gpu.NvcompZstdCodec, needing nvCOMP's Python bindings: PyPI
    nvidia-nvcomp-cu12, for CUDA 13 nvidia-nvcomp-cu13) is zarr-python pull request #2863, not
    in 3.1.6. A Zarr v2 array (the ``wb2`` layout) hands its CuPy bytes to numcodecs, which
    cannot take them: an error row, as it is for users.

    gds=True is KvikIO's documented integration for zarr-python 3 (KvikIO's docs, "Zarr": open the
    store as ``kvikio.zarr.GDSStore(root=...)`` under ``zarr.config.enable_gpu()``): a LocalStore
    whose reads go through kvikio.CuFile.pread into a GPU buffer (GPUDirect Storage when the
    machine has it, else KvikIO's compat mode: POSIX reads and a bounce buffer); decoding is as
    above, so compressed bytes go to the GPU, back to the host to be decoded and up again.
    KvikIO 26.10 has no nvCOMP codecs for zarr-python 3 (its old kvikio.zarr nvCOMP codecs were
    for zarr-python 2). PyPI: kvikio-cu13 (0.7 MB) and libkvikio-cu13 (3.2 MB), which load
    rapids-logger (0.3 MB), cuda-pathfinder, the cuFile library (nvidia-cufile) and CuPy for CUDA
    13 (>= 14.0.1); a PyTorch (CUDA 13) + CuPy 14 image has all but rapids-logger, so the kvikio
    row needs about 4 MB more, which ``scripts/offline-kit.sh --with-kvikio`` carries.

    The last timed batch is checked against expected_batch (an error row if it differs)."""
    try:
        import cupy as cp
    except ImportError as e:
        raise Skip(f"not installed: cupy ({e})") from e
    try:
        if cp.cuda.runtime.getDeviceCount() < 1:
            raise Skip("CuPy sees no GPU")
    except cp.cuda.runtime.CUDARuntimeError as e:
        raise Skip(f"CuPy sees no GPU ({e})") from e
    import zarr

    if not hasattr(zarr.config, "enable_gpu"):
        raise Skip(f"zarr {zarr.__version__} has no GPU buffers (zarr-python 3 has)")
    note = f"zarr {zarr.__version__} GPU buffers (CuPy {cp.__version__}); decoded on the CPU"
    if gds:
        try:
            import kvikio
            import kvikio.defaults
            from kvikio.zarr import GDSStore
        except Exception as e:  # ImportError, or a library kvikio loads at import (cuFile)
            raise Skip(f"kvikio not importable ({type(e).__name__}: {e}); the kit carries it with "
                       "scripts/offline-kit.sh --with-kvikio") from e
        root = GDSStore(root=str(store), read_only=True)
        try:
            mode = "compat mode (POSIX reads)" if kvikio.defaults.is_compat_mode_preferred() else "GDS"
        except Exception:  # an older KvikIO
            mode = "mode unknown"
        note = f"kvikio {kvikio.__version__} GDSStore, cuFile {mode}; " + note
    else:
        root = str(store)

    # LocalStore's bytes are host bytes, which zarr's GPU Buffer copies (saying so once per run).
    warnings.filterwarnings("ignore", message="Creating a zarr.buffer.gpu.Buffer with an array that "
                            "does not support the __cuda_array_interface__")
    group = zarr.open_group(root, mode="r")
    channels = channel_reads(store, variables)
    arrays = {v: group[v] for v in variables}
    ny, nx = arrays[variables[0]].shape[-2:]
    first = first_channels(channels, variables)
    dev = torch.empty((args.batch, len(channels), ny, nx), dtype=torch.float32, device="cuda")
    pool = ThreadPoolExecutor(max_workers=os.cpu_count())
    last = {}

    def read(s: int, t: int, v: str) -> None:
        values = arrays[v][int(t)]
        if not isinstance(values, cp.ndarray):
            raise TypeError(f"zarr returned {type(values).__name__}, not a CuPy array: GPU buffers "
                            "are not in effect")
        n = values.shape[0] if values.ndim == 3 else 1
        dev[s, first[v]:first[v] + n].copy_(torch.from_dlpack(values).view(n, ny, nx))

    def one(i: int) -> None:
        steps = origins[i % len(origins)]
        list(pool.map(lambda a: read(*a), [(s, t, v) for s, t in enumerate(steps) for v in variables]))
        torch.cuda.synchronize()
        last["steps"] = steps

    try:
        with zarr.config.enable_gpu():
            out = timed(one, args.batches if args.cold else max(2, args.batches // 4), dev.numel() * 4,
                        torch, before=(lambda: drop_from_page_cache(store)) if args.cold else None)
        check_batch(dev, expected_batch(store, variables, last["steps"]))
    except ValueError as e:
        if (store / "zarr.json").exists():
            raise
        raise ValueError(f"Zarr v2 array: zarr {zarr.__version__} hands CuPy bytes to numcodecs, "
                         f"which fails: {e}") from e
    finally:
        pool.shutdown()
        cp.get_default_memory_pool().free_all_blocks()
        cp.get_default_pinned_memory_pool().free_all_blocks()
    out["status"] = note + "; last batch checked"
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", type=Path, default=Path(os.environ.get("TMPDIR", "/tmp")) / "zarrstream-gpu-bench")
    parser.add_argument("--steps", type=int, default=64, help="time steps in each store")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--batches", type=int, default=24, help="timed batches per tool")
    parser.add_argument("--prefetch", type=int, default=3)
    parser.add_argument("--cpu-decode-share", type=lambda v: v if v == "auto" else float(v), default=0.0,
                        help="Loader(cpu_decode_share) of the zarrstream-gpu rows: the share of "
                             "nvCOMP's chunks the worker threads decode (0 to 1, or auto)")
    parser.add_argument("--wave-gb", type=float, default=0.0,
                        help="Loader(gpu_wave_bytes) in GiB (0: the loader's default)")
    parser.add_argument("--layouts", default="v3-zstd,wb2")
    parser.add_argument("--tools", default=",".join(t for t in TOOLS if t != "disk"),
                        help=f"comma-separated, of: {', '.join(TOOLS)}")
    parser.add_argument("--quick", action="store_true", help="8 steps, batch 4, 4 batches, v3-zstd")
    parser.add_argument("--cold", action="store_true",
                        help="from the disk: the page cache dropped before each tool, one epoch")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    unknown = [t for t in args.tools.split(",") if t not in TOOLS]
    if unknown:
        parser.error(f"unknown tool(s) {', '.join(unknown)}; known: {', '.join(TOOLS)}")
    if args.quick:
        args.steps, args.batch, args.batches, args.layouts = 8, 4, 4, "v3-zstd"
    if args.cold:
        # One epoch after the warm-up batch, so that no time step is read twice.
        args.batches = min(args.batches, args.steps // args.batch - 1)

    import torch

    if not torch.cuda.is_available():
        sys.exit("gpu_bench: no CUDA device")
    results = {"machine": {**machine(), "gpu": torch.cuda.get_device_name(0)},
               "args": {k: str(v) for k, v in vars(args).items()}, "runs": []}
    print(f"machine: {describe(results['machine'])}")
    args.work.mkdir(parents=True, exist_ok=True)
    for layout in args.layouts.split(","):
        store = args.work / f"era5-{layout}-{args.steps}.zarr"
        t0 = time.perf_counter()
        synthesize(store, layout, args.steps)
        stored = sum(os.path.getsize(f) for f in store_files(store)) if args.cold else warm(store)
        variables = data_variables(store)
        if args.cold:
            order = np.random.default_rng(2).permutation(args.steps)
            origins = [order[i * args.batch:(i + 1) * args.batch] for i in range(args.batches + 1)]
        else:
            origins = batch_origins(args.steps, args.batch, args.batches + 1, seed=2)
        print(f"\n{layout}: {stored / 1e9:.2f} GB stored, {len(variables)} variables "
              f"(ready in {time.perf_counter() - t0:.0f} s); batch {args.batch}, {args.batches} batches")
        print(f"{'tool':<16}{'GB/s':>8}{'ratio':>8}{'steady':>8}  notes")
        rows = {}
        for tool in args.tools.split(","):
            try:
                if tool == "disk":
                    row = read_cold(store)  # every file once, cold, one thread per core
                elif tool == "zarrstream-gpu":
                    row = run_zarrstream(store, variables, args, torch, gpu=True)
                elif tool == "zarrstream-cpu":
                    row = run_zarrstream(store, variables, args, torch, gpu=False)
                elif tool == "tensorstore":
                    row = run_tensorstore(store, variables, args, torch, origins)
                elif tool == "zarr-python":
                    row = run_zarr_python(store, variables, args, torch, origins)
                elif tool == "dali":
                    row = run_dali(store, variables, args, torch, origins)
                elif tool == "zarr-python-gpu":
                    row = run_zarr_gpu_buffers(store, variables, args, torch, origins, gds=False)
                elif tool == "kvikio":
                    row = run_zarr_gpu_buffers(store, variables, args, torch, origins, gds=True)
            except Skip as e:
                row = {"skipped": str(e)}
            except ImportError as e:
                row = {"skipped": f"not installed: {e.name or e}"}
            except Exception as e:  # a peer's failure is its row; zarrstream's and the disk's end the run
                if tool.startswith("zarrstream") or tool == "disk":
                    raise
                row = {"error": f"{type(e).__name__}: {e}"}
            rows[tool] = row
            torch.cuda.empty_cache()
        best = rows.get("zarrstream-gpu", {}).get("gb_per_s")
        import zarr

        ny, nx = zarr.open_group(str(store), mode="r")[variables[0]].shape[-2:]
        decoded_total = args.steps * len(channel_reads(store, variables)) * ny * nx * 4
        for row in rows.values():  # the peers: stored bytes in proportion to the decoded ones
            if row.get("gb_per_s") and "stored_gb_per_s" not in row:
                row["stored_gb_per_s"] = row["gb_per_s"] * stored / decoded_total
        for tool, row in rows.items():
            if "skipped" in row:
                print(f"{tool:<16}{'-':>8}{'':>8}{'':>8}  {row['skipped']}")
                continue
            if "error" in row:  # its first line (the JSON has all of it)
                message = row["error"].splitlines()[0] if row["error"] else ""
                print(f"{tool:<16}{'error':>8}{'':>8}{'':>8}  "
                      f"{message[:200] + ('...' if len(message) > 200 else '')}")
                continue
            if tool == "disk":
                print(f"{tool:<16}{'':>8}{'':>8}{'':>8}  raw read of every file, cold: "
                      f"{row['stored_gb_per_s']:.2f} GB/s stored")
                continue
            ratio = f"{best / row['gb_per_s']:.2f}x" if best else ""
            note = row.get("status", "")
            st = row.get("stats", {})
            if st.get("gpu_seconds"):
                note += (f"; per batch: read {st['gpu_read_seconds'] / st['batches'] * 1e3:.0f} ms, "
                         f"H2D+decode {st['gpu_decode_seconds'] / st['batches'] * 1e3:.0f} ms, "
                         f"scatter {st['gpu_scatter_seconds'] / st['batches'] * 1e3:.0f} ms")
                if st.get("bytes_to_gpu"):
                    note += (f"; {st.get('bytes_staged_without_copy', 0) / st['bytes_to_gpu']:.0%} "
                             "of the bytes to the GPU staged without a copy")
            if row.get("busy"):
                note += "; steady busy: " + ", ".join(f"{k} {v:.0%}" for k, v in row["busy"].items())
            if row.get("start_up"):
                note += "; delivered at " + ", ".join(
                    f"{b['delivered']:.2f}" for b in row["start_up"] if b["delivered"] is not None) + " s"
            if args.cold and row.get("stored_gb_per_s"):
                note += f"; {row['stored_gb_per_s']:.2f} GB/s stored"
                if rows.get("disk", {}).get("stored_gb_per_s"):
                    note += f" ({row['stored_gb_per_s'] / rows['disk']['stored_gb_per_s']:.0%} of the disk)"
            steady = f"{row['steady_gb_per_s']:.2f}" if row.get("steady_gb_per_s") else ""
            print(f"{tool:<16}{row['gb_per_s']:>8.2f}{ratio:>8}{steady:>8}  {note}")
        results["runs"].append({"layout": layout, "stored_bytes": stored, "variables": len(variables),
                                "rows": rows})
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()

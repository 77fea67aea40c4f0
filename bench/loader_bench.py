"""Peer benchmark (issues 4 and 7): zarrstream vs xbatcher + PyTorch DataLoader, tensorstore,
zarr-python 3, zarrs-python and insitubatch, on the same stores in the same run, one table.

Workloads (--workloads, run in the order given; default batches, `make bench-peers` runs all three):

  batches      the training-batch workload: a sample is one time step of a fixed list of variables
               over the whole latitude/longitude grid, levels stacked into channels (default: 2
               surface variables + 3 upper-air variables at 13 levels = 41 channels); the target is
               the same channels one step later; batches are float32 [batch, channel, latitude,
               longitude], shuffled. Epoch 0 yields 1 + K batches (the first is the start-up batch),
               every later epoch K. Store: --store / --preset with --layout (default v3-zstd).
  sharded      the same batches from the store's v3-sharded twin (`zarrstream synth --layout
               v3-sharded`: inner chunks of one step and one level inside shards of several steps),
               so every sample is a partial read of its shards. Every tool but xbatcher.
  whole        whole-array read: every chunk of one variable (--whole-variable, default
               temperature) into one numpy array, --whole-repeats times after a first read; GB/s of
               decoded bytes. Store: the batches store. tensorstore, zarr-python, zarrs, zarrstream,
               and libzstd alone for reference.

Tools (each a generator of Batch(epoch, input, target, origins) for the batch workloads, origins =
the time index of each sample, so that the harness can check what it got):

  xbatcher     the published Earthmover configuration (earthmover-cloud-native-dataloader, 2024):
               xarray.open_zarr(chunks={}) + xbatcher.BatchGenerator + a thin map-style dataset whose
               __getitem__ loads one xbatcher batch and stacks its variables and levels into channels
               (to_stacked_array, as the demo does), + torch DataLoader(batch_size, shuffle=True,
               num_workers=W, prefetch_factor=3, persistent_workers=True), dask's threaded scheduler
               with 4 threads per worker. The t+1 target is expressed the way the demo expresses
               input and output steps: a time window of 2 with an overlap of 1, so xbatcher batch i
               holds steps i and i+1 (each chunk is read once per sample, as for the other loaders).
  tensorstore  what a careful tensorstore user writes: ts.open per variable with one shared context
               (cache pool, file I/O and copy concurrency limits), every read of a batch
               (variable x sample, steps t and t+1 together) issued before any is awaited, a thread
               pool assembling the next --prefetch batches; no worker processes. Whole-array read:
               one read() of the array, no cache pool (repeated reads would be served from it).
  zarr-python  zarr-python 3 as a careful user drives it: every (sample, variable) read of a batch
               submitted to a thread pool, the next --prefetch batches in flight; no worker processes.
               Its fastest codec pipeline the installed version has: from zarr 3.3 on the fused one
               (codec_pipeline.path = zarr.core.codec_pipeline.FusedCodecPipeline, with
               codec_pipeline.max_workers = the usable cores: synchronous decoding on a thread pool,
               the inner chunks a read needs from a shard fetched as coalesced byte ranges, which
               is the sharding codec's default), before it the default batched one. The row's
               config says which pipeline the arrays read through. Whole-array read: a[...].
  zarrs        zarrs-python: the same reads as zarr-python with zarr's codec pipeline set to the
               Rust one (codec_pipeline.path = zarrs.ZarrsCodecPipeline, strict: an array it cannot
               read fails instead of falling back to zarr-python's pipeline), its documented
               defaults otherwise (threading.max_workers None: rayon's threads, one per usable core;
               chunk and codec concurrency chosen by zarrs).
  insitubatch  insitubatch's InSituDataset (one event loop fetching stored chunks through obstore, a
               decode thread pool, a chunk pool that is also its cache; needs Python >= 3.12 and
               zarr >= 3.3): each variable as a view at offset 0 (input) and one at offset 1
               (target, `geometry.shift(1)`, decoded once with the input), every chunk in the train
               split, its own block-local shuffle (insitubatch has no way to take another order;
               block_chunks 16, its default), max_inflight 32 (its default), decode threads the
               usable cores + 4 (its automatic formula, over the usable cores rather than all), and
               the same cache budget as zarrstream's chunk cache; batches iterated in the process,
               variables and levels stacked into channels as for the other tools. Its batches are
               the same samples (time steps, channels, t + 1 targets) in its own order: each
               epoch's origins are checked as for every tool, and its first batch is compared in
               the row with zarrstream's read of the same time steps (and by the harness with
               zarr-python's). Batch workloads only.
  zarrstream   zarrstream.Loader (docs/loader.md), exact shuffle as the others; zarrstream-block:
               its chunk-aware block shuffle. Whole-array read: zarrstream.open_array(url).read().
  libzstd      no peer but the whole-array read's reference: the decoder alone. Every chunk's stored
               bytes read into memory before the clock, then each read decodes them with libzstd
               (the system's, through ctypes, which releases the GIL) on a thread pool of the usable
               cores straight into a new array: what decoding these chunks costs on this host with
               no reading, placing or scheduling around it. Compare its CPU time per GB (cores busy
               over GB/s) with a reader's: its rate is a Python thread pool handing out the chunks,
               which a reader in C++ or Rust can pass at many threads. Whole-array read only, on
               stores whose chunks are zstd-compressed whole slabs of the first dimension (else
               "not available").

Measured per tool and workload, each in a fresh child process (so one tool's imports, caches and
threads do not weigh on the next): time to first batch (from constructing the loader, store opening
and worker start-up included, to the first batch in hand; imports are reported apart; for the
whole-array read: opening plus the first read), steady-state samples/s and GB/s of decoded bytes
delivered (input + target) over the K x E measured batches (whole-array read: decoded bytes of the
repeated reads), mean / p99 / max wait per batch, CPU cores busy while measuring (the process
tree's CPU time / wall time), and peak memory of the process tree: RSS summed over the child and
its worker processes, read from /proc every 50 ms by a thread of this harness (the tree itself is
rescanned every 0.5 s), and PSS summed likewise every 0.25 s (RSS counts pages that forked workers
share with their parent once per process; PSS splits them). The table's last column is each tool's
GB/s over zarrstream's (exact shuffle) in the same workload. The first batch of each tool is
compared with a numpy reference read by zarr-python for the same sample origins, and the
whole-array read with zarr-python's read of every time step, so a fast but wrong tool cannot win.

Page cache: the harness cannot drop caches (no root). Before the first tool it reads every file of
the stores once, so every tool reads from a warm page cache, and says so (--no-warm: as found).

    python bench/loader_bench.py --preset era5-1deg --steps 64 [--layout v3-zstd] [--json out.json]
    python bench/loader_bench.py --preset era5-1deg --steps 64 --workloads batches,whole,sharded
    python bench/loader_bench.py --store era5.zarr --loaders xbatcher,tensorstore --batches 8 --epochs 2

Needs no network at run time: --preset synthesizes the stores with `zarrstream synth`.
"""

from __future__ import annotations

import argparse
import collections
import ctypes
import ctypes.util
import dataclasses
import functools
import importlib
import importlib.util
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Iterator, NamedTuple

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from host import describe, machine  # noqa: E402

DEFAULT_VARIABLES = [
    "2m_temperature",
    "10m_u_component_of_wind",
    "temperature",
    "geopotential",
    "specific_humidity",
]
BATCH_LOADERS = ("xbatcher", "tensorstore", "zarr-python", "zarrs", "insitubatch", "zarrstream", "zarrstream-block")
# libzstd is no peer: the decoder alone, the whole-array read's reference on this host.
LOADERS = (*BATCH_LOADERS, "libzstd")
WORKLOADS = ("batches", "whole", "sharded")
# The tools each workload runs (of those --loaders names): xbatcher + DataLoader and insitubatch are
# batch loaders only, and a whole-array read has no shuffle.
WORKLOAD_TOOLS = {
    "batches": BATCH_LOADERS,
    "sharded": tuple(n for n in BATCH_LOADERS if n != "xbatcher"),
    "whole": ("tensorstore", "zarr-python", "zarrs", "zarrstream", "libzstd"),
}
# What each loader's child imports before the clock starts (reported as import time).
LOADER_IMPORTS = {
    "xbatcher": ("torch", "dask", "xarray", "xbatcher"),
    "tensorstore": ("torch", "tensorstore"),
    "zarr-python": ("torch", "zarr"),
    "zarrs": ("torch", "zarr", "zarrs"),
    "insitubatch": ("torch", "zarr", "obstore", "insitubatch"),
    "zarrstream": ("torch", "zarrstream"),
    "zarrstream-block": ("torch", "zarrstream"),
    "libzstd": (),
}
PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")


def usable_cores() -> int:
    return len(os.sched_getaffinity(0))


# ---------------------------------------------------------------------------------------------
# The workload: identical for every loader, handed to each child process as JSON.


@dataclasses.dataclass
class Workload:
    store: str
    zarr_format: int
    variables: list[str]
    # Channels per variable, in order (1 for a surface variable, the number of levels otherwise).
    channels: list[int]
    num_time: int
    num_lat: int
    num_lon: int
    batch_size: int
    # Measured batches per epoch (epoch 0 yields one more: the start-up batch).
    batches: int
    epochs: int
    seed: int
    step_time: float
    # xbatcher + DataLoader.
    workers: int
    prefetch_factor: int
    dask_threads: int
    mp_context: str | None
    # tensorstore and zarrstream.
    prefetch: int
    ts_cache_bytes: int
    cores: int
    # Which workload this is (WORKLOADS); "whole" reads `whole_variable` whole, once and then
    # `whole_repeats` times.
    kind: str = "batches"
    whole_variable: str = ""
    whole_repeats: int = 0
    # zarrstream's chunk cache (0: the loader's default, 1/64 of the machine's memory).
    cache_bytes: int = 0

    @property
    def num_channels(self) -> int:
        return sum(self.channels)

    @property
    def num_samples(self) -> int:
        # Origins t with a target at t + 1.
        return self.num_time - 1

    @property
    def sample_bytes(self) -> int:
        """Decoded bytes one sample delivers: input and target, float32."""
        return 2 * self.num_channels * self.num_lat * self.num_lon * 4

    def batches_in_epoch(self, epoch: int) -> int:
        return self.batches + 1 if epoch == 0 else self.batches

    def channel_slices(self) -> list[tuple[int, int]]:
        out, start = [], 0
        for n in self.channels:
            out.append((start, n))
            start += n
        return out


class Batch(NamedTuple):
    epoch: int
    input: object  # torch.Tensor [B, C, lat, lon] float32
    target: object  # torch.Tensor, same shape: the same channels at t + 1
    origins: np.ndarray  # int64 [B]: each sample's time index


def describe_store(store: Path, variables: list[str]) -> dict:
    """Shapes, dimension names and channels of `variables` (zarr-python's view of the store).
    Every variable must be (time, [level,] latitude, longitude) on one grid and one time axis."""
    import zarr

    group = zarr.open_group(str(store), mode="r")
    channels, grid = [], None
    for name in variables:
        if name not in group:
            raise SystemExit(f"store {store}: no array '{name}' (variables: {sorted(group.array_keys())})")
        a = group[name]
        dims = tuple(a.metadata.dimension_names or ()) if a.metadata.zarr_format == 3 else tuple(
            a.attrs.get("_ARRAY_DIMENSIONS", ()))
        if len(dims) not in (3, 4) or dims[0] != "time" or dims[-2:] != ("latitude", "longitude"):
            raise SystemExit(f"store {store}: array '{name}' has dimensions {dims}; the benchmark needs "
                             "(time, [level,] latitude, longitude)")
        this_grid = (a.shape[0], a.shape[-2], a.shape[-1])
        if grid is not None and this_grid != grid:
            raise SystemExit(f"store {store}: array '{name}' has (time, latitude, longitude) {this_grid}, "
                             f"'{variables[0]}' has {grid}")
        grid = this_grid
        channels.append(a.shape[1] if len(dims) == 4 else 1)
    return {"zarr_format": group.metadata.zarr_format, "channels": channels, "num_time": grid[0],
            "num_lat": grid[1], "num_lon": grid[2]}


def reference_batch(w: Workload, origins: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Input and target for `origins`, read by zarr-python."""
    import zarr

    group = zarr.open_group(w.store, mode="r")
    shape = (len(origins), w.num_channels, w.num_lat, w.num_lon)
    inp, tgt = np.empty(shape, np.float32), np.empty(shape, np.float32)
    for name, (c0, nc) in zip(w.variables, w.channel_slices()):
        a = group[name]
        for b, t in enumerate(origins):
            pair = np.asarray(a[int(t):int(t) + 2])
            inp[b, c0:c0 + nc] = pair[0].reshape(nc, w.num_lat, w.num_lon)
            tgt[b, c0:c0 + nc] = pair[1].reshape(nc, w.num_lat, w.num_lon)
    return inp, tgt


# ---------------------------------------------------------------------------------------------
# Loader 1: xbatcher + PyTorch DataLoader, the published Earthmover configuration.


class XbatcherSamples:
    """The demo's thin map-style dataset: sample i is xbatcher batch i (steps i and i+1), loaded,
    stacked into [time, channel, latitude, longitude], split into input (step i) and target (step
    i+1). Returns the index too, so the harness knows which samples a DataLoader batch holds. A plain
    class (a DataLoader needs only __len__ and __getitem__) so that the parent process need not
    import torch to pickle it for spawn / forkserver workers."""

    def __init__(self, bgen):
        self.bgen = bgen

    def __len__(self) -> int:
        return len(self.bgen)

    def __getitem__(self, idx: int):
        import torch

        batch = self.bgen[idx].load()
        stacked = batch.to_stacked_array(new_dim="channel", sample_dims=("time", "latitude", "longitude"))
        data = stacked.transpose("time", "channel", "latitude", "longitude").values.astype(np.float32, copy=False)
        return torch.from_numpy(np.ascontiguousarray(data[0])), torch.from_numpy(np.ascontiguousarray(data[1])), idx


def set_dask_scheduler(dask_threads: int, worker_id: int | None = None) -> None:
    # Called in the main process and again in each worker: spawn / forkserver workers start with
    # dask's default configuration, not the parent's.
    import dask

    dask.config.set(scheduler="threads", num_workers=dask_threads)


def xbatcher_batches(w: Workload) -> Iterator[Batch]:
    import xarray as xr
    import xbatcher

    set_dask_scheduler(w.dask_threads)
    ds = xr.open_zarr(w.store, chunks={})[w.variables]
    bgen = xbatcher.BatchGenerator(
        ds,
        input_dims={"time": 2, "latitude": w.num_lat, "longitude": w.num_lon},
        input_overlap={"time": 1},
        preload_batch=False,
    )
    yield from dataloader_batches(w, XbatcherSamples(bgen))


def dataloader_batches(w: Workload, samples) -> Iterator[Batch]:
    """The epochs' batches of a PyTorch DataLoader over `samples` (a map-style dataset whose items
    are (input, target, index)), shuffled, with w.workers worker processes (each with dask's
    threaded scheduler of w.dask_threads threads) and w.prefetch_factor batches per worker."""
    import torch
    from torch.utils.data import DataLoader

    options: dict = {"batch_size": w.batch_size, "shuffle": True,
                     "generator": torch.Generator().manual_seed(w.seed)}
    if w.workers > 0:
        options.update(num_workers=w.workers, prefetch_factor=w.prefetch_factor, persistent_workers=True,
                       worker_init_fn=functools.partial(set_dask_scheduler, w.dask_threads))
        if w.mp_context:
            options["multiprocessing_context"] = w.mp_context
    loader = DataLoader(samples, **options)
    for epoch in range(w.epochs):
        # Leaving the loop early is what the demo does (--num-batches): persistent workers keep
        # running, and the next epoch's iterator first drains what they prefetched.
        for i, (x, y, idx) in enumerate(loader):
            yield Batch(epoch, x, y, idx.numpy().astype(np.int64))
            if i + 1 == w.batches_in_epoch(epoch):
                break
    del loader


# ---------------------------------------------------------------------------------------------
# Loader 2: tensorstore, as a careful user would write it.


def stacked_batch(w: Workload, epoch: int, origins: np.ndarray, reads) -> Batch:
    """The batch from `reads[sample][variable]`, futures of the variable's steps t and t + 1: levels
    stacked into channels, input at t and target at t + 1."""
    import torch

    grid = (w.num_lat, w.num_lon)
    shape = (len(origins), w.num_channels, *grid)
    inp, tgt = np.empty(shape, np.float32), np.empty(shape, np.float32)
    for b, row in enumerate(reads):
        for (c0, nc), future in zip(w.channel_slices(), row):
            pair = future.result()
            inp[b, c0:c0 + nc] = pair[0].reshape(nc, *grid)
            tgt[b, c0:c0 + nc] = pair[1].reshape(nc, *grid)
    return Batch(epoch, torch.from_numpy(inp), torch.from_numpy(tgt), origins)


def tensorstore_batches(w: Workload) -> Iterator[Batch]:
    import tensorstore as ts

    context = ts.Context({
        "cache_pool": {"total_bytes_limit": w.ts_cache_bytes},
        "data_copy_concurrency": {"limit": w.cores},
        "file_io_concurrency": {"limit": max(16, 4 * w.cores)},
    })
    driver = "zarr3" if w.zarr_format == 3 else "zarr"
    opens = [ts.open({"driver": driver, "kvstore": {"driver": "file", "path": str(Path(w.store) / name)}},
                     context=context, open=True, read=True) for name in w.variables]
    arrays = [f.result() for f in opens]

    def read_batch(epoch: int, origins: np.ndarray) -> Batch:
        # Issue every read of the batch before waiting on any: tensorstore overlaps their I/O and
        # decoding on its own threads.
        reads = [[a[int(t):int(t) + 2].read() for a in arrays] for t in origins]
        return stacked_batch(w, epoch, origins, reads)

    yield from prefetched(w, read_batch, "ts-prefetch")


def prefetched(w: Workload, read_batch, thread_name: str) -> Iterator[Batch]:
    """The epochs' batches (shuffled as the other loaders shuffle), `read_batch(epoch, origins)`
    running for the next --prefetch batches on a thread pool while the consumer holds one."""
    from concurrent.futures import ThreadPoolExecutor

    prefetch = max(1, w.prefetch)
    with ThreadPoolExecutor(max_workers=prefetch, thread_name_prefix=thread_name) as pool:
        for epoch in range(w.epochs):
            order = np.random.default_rng([w.seed, epoch]).permutation(w.num_samples).astype(np.int64)
            count = w.batches_in_epoch(epoch)
            pending: collections.deque = collections.deque()
            submitted = 0

            # The epoch's state as defaults, not loop variables: fill runs only within this epoch.
            def fill(order=order, count=count, pending=pending, epoch=epoch) -> None:
                nonlocal submitted
                while submitted < count and len(pending) < prefetch:
                    origins = order[submitted * w.batch_size:(submitted + 1) * w.batch_size]
                    pending.append(pool.submit(read_batch, epoch, origins))
                    submitted += 1

            try:
                for _ in range(count):
                    fill()
                    batch = pending.popleft().result()
                    fill()  # `prefetch` batches in flight while the consumer holds this one
                    yield batch
            finally:
                for f in pending:
                    f.cancel()


# What a tool's child found out about how it ran (the codec pipeline its arrays read through, the
# settings the tool resolved), added to the row's config.
RAN: dict = {}

# zarr-python's fused codec pipeline (zarr 3.3 and later); opt-in, its default stays the batched one.
ZARR_FUSED_PIPELINE = "zarr.core.codec_pipeline.FusedCodecPipeline"


def has_fused_zarr_pipeline() -> bool:
    from zarr.core import codec_pipeline

    return hasattr(codec_pipeline, "FusedCodecPipeline")


def use_fastest_zarr_pipeline(cores: int) -> None:
    """zarr-python's reads through the fastest codec pipeline the installed version has, from here
    on (this process; arrays take the pipeline configured when they are opened). Also read_bench's."""
    import zarr

    if has_fused_zarr_pipeline():
        # Its thread pool decodes the chunks of one read; sized to the usable cores, not
        # os.cpu_count() (its default), which ignores the process's CPU affinity.
        zarr.config.set({"codec_pipeline.path": ZARR_FUSED_PIPELINE, "codec_pipeline.max_workers": cores})


def note_pipeline(array) -> None:
    """Records (RAN) the codec pipeline `array` reads through."""
    pipeline = type(array.async_array.codec_pipeline)
    RAN["read_through"] = f"{pipeline.__module__}.{pipeline.__name__}"


def zarr_python_batches(w: Workload, pipeline_set: bool = False) -> Iterator[Batch]:
    """zarr-python 3 as a careful user drives it: the group opened once, every (sample, variable)
    read of a batch submitted to a thread pool (zarr's synchronous API over its own async I/O and
    its codec pipeline's decoding), the next --prefetch batches in flight; no worker processes.
    `pipeline_set`: the caller chose the codec pipeline (zarrs), else the fastest zarr-python has."""
    from concurrent.futures import ThreadPoolExecutor

    import zarr

    if not pipeline_set:
        use_fastest_zarr_pipeline(w.cores)
    group = zarr.open_group(w.store, mode="r")
    arrays = [group[name] for name in w.variables]
    note_pipeline(arrays[0])
    readers = ThreadPoolExecutor(max_workers=2 * w.cores, thread_name_prefix="zarr-read")

    def read_batch(epoch: int, origins: np.ndarray) -> Batch:
        reads = [[readers.submit(a.__getitem__, slice(int(t), int(t) + 2)) for a in arrays]
                 for t in origins]
        return stacked_batch(w, epoch, origins, reads)

    try:
        yield from prefetched(w, read_batch, "zarr-prefetch")
    finally:
        readers.shutdown(wait=True, cancel_futures=True)


def use_zarrs_pipeline() -> None:
    """zarr-python's reads through zarrs-python's Rust codec pipeline from here on (this process)."""
    import zarr

    # strict: an array the Rust pipeline cannot handle raises instead of falling back, unseen, to
    # zarr-python's own pipeline.
    zarr.config.set({"codec_pipeline.path": "zarrs.ZarrsCodecPipeline", "codec_pipeline.strict": True})


def check_zarrs_pipeline(array) -> None:
    name = type(array.async_array.codec_pipeline).__name__
    if name != "ZarrsCodecPipeline":
        raise RuntimeError(f"zarrs: array {array.path!r} reads through {name}, not zarrs' pipeline")


def zarrs_batches(w: Workload) -> Iterator[Batch]:
    """The zarr-python loader's reads, decoded by zarrs-python (Rust: zarrs' codecs and its own
    thread pool for the chunks of each read)."""
    import zarr

    use_zarrs_pipeline()
    group = zarr.open_group(w.store, mode="r")
    for name in w.variables:
        check_zarrs_pipeline(group[name])
    yield from zarr_python_batches(w, pipeline_set=True)


# ---------------------------------------------------------------------------------------------
# Loader 3: insitubatch's InSituDataset, at its documented defaults but for the cache budget.

# insitubatch's defaults, set here so that the row's config states them: the shuffle window in
# chunks along time and the stored chunks in flight.
INSITUBATCH_BLOCK_CHUNKS = 16
INSITUBATCH_MAX_INFLIGHT = 32
# The label of a variable's target view (the same array one step later).
TARGET_SUFFIX = "@t+1"


def zarrstream_cache_bytes(w: Workload) -> int:
    """The chunk cache zarrstream's loader gets (its default: 1/64 of the machine's memory, from
    256 MiB to 1 GiB): insitubatch's pool gets as much to keep chunks across epochs."""
    if w.cache_bytes:
        return w.cache_bytes
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return min(max(memory // 64, 256 << 20), 1 << 30)


def stack_channels(w: Workload, arrays: dict, suffix: str = "") -> np.ndarray:
    """[B, channel, lat, lon] float32 from per-variable arrays ([B, lat, lon] or [B, level, lat,
    lon]) labelled `variable + suffix`, levels stacked into channels in the order of w.variables."""
    first = arrays[w.variables[0] + suffix]
    out = np.empty((len(first), w.num_channels, w.num_lat, w.num_lon), np.float32)
    for name, (c0, nc) in zip(w.variables, w.channel_slices()):
        out[:, c0:c0 + nc] = arrays[name + suffix].reshape(len(first), nc, w.num_lat, w.num_lon)
    return out


def check_against_zarrstream(w: Workload, origins: np.ndarray, inp: np.ndarray, tgt: np.ndarray) -> str:
    """Raises unless `inp` / `tgt` equal zarrstream's read of steps t and t + 1 of every origin t
    (NaN equal to NaN); says what it compared, or why it could not."""
    try:
        import zarrstream
    except ImportError as e:
        return f"not run: zarrstream cannot be imported here ({e})"
    ref_inp, ref_tgt = np.empty_like(inp), np.empty_like(tgt)
    for name, (c0, nc) in zip(w.variables, w.channel_slices()):
        array = zarrstream.open_array(str(Path(w.store) / name))
        for b, t in enumerate(origins.tolist()):
            pair = np.asarray(array[t:t + 2])
            ref_inp[b, c0:c0 + nc] = pair[0].reshape(nc, w.num_lat, w.num_lon)
            ref_tgt[b, c0:c0 + nc] = pair[1].reshape(nc, w.num_lat, w.num_lon)
    for what, got, ref in (("input", inp, ref_inp), ("target", tgt, ref_tgt)):
        differ = ~((got == ref) | (np.isnan(got) & np.isnan(ref)))
        if differ.any():
            b, c = (int(i) for i in np.argwhere(differ)[0][:2])
            raise RuntimeError(f"insitubatch: first batch's {what}: {int(differ.sum())} of {differ.size} values "
                               f"differ from zarrstream's read of the same time steps, first at sample {b} "
                               f"(time {int(origins[b])}), channel {c}")
    return f"equal to zarrstream's read of time steps {origins.tolist()} and the next"


def insitubatch_batches(w: Workload) -> Iterator[Batch]:
    """InSituDataset over every chunk of the store (one train split), each variable read as an
    input view and a target view one step later; its own shuffle, iterated in this process (its
    torch adapter is a DataLoader with num_workers=0 around the same iterator)."""
    import dataclasses as dc

    import insitubatch
    import torch
    from insitubatch import scheduler

    store = insitubatch.obstore_store(Path(w.store).resolve().as_uri())
    arrays = insitubatch.open_geometries(store, variables=w.variables)
    # A view reads array[anchor + offset]: the two views of one array share its decoded chunks.
    views = {name: g for name, g in arrays.items()}
    views.update({name + TARGET_SUFFIX: g.shift(1) for name, g in arrays.items()})
    manifest = insitubatch.split_by_chunk(arrays[w.variables[0]], fractions=(1.0, 0.0, 0.0))
    options = dict(batch_size=w.batch_size, block_chunks=INSITUBATCH_BLOCK_CHUNKS,
                   max_inflight=INSITUBATCH_MAX_INFLIGHT, seed=w.seed, shuffle=True)
    budget = zarrstream_cache_bytes(w)
    try:
        ds = insitubatch.InSituDataset(store, manifest, geometries=views, cache_budget_bytes=budget, **options)
        RAN["cache_budget_bytes"] = ds.cache_budget_bytes
    except ValueError:  # below the pool's floor (what one pass must hold): its automatic budget, the floor
        ds = insitubatch.InSituDataset(store, manifest, geometries=views, **options)
        RAN["cache_budget_bytes"] = f"{ds.cache_budget_bytes} (its automatic budget: {budget} is below its floor)"
    # Its automatic decode pool is min(32, os.cpu_count() + 4) threads; the same over the usable cores.
    ds.scheduler_config = dc.replace(ds.scheduler_config, decode_threads=min(32, w.cores + 4))
    RAN.update(insitubatch=insitubatch.__version__, block_chunks=ds.block_chunks,
               max_inflight=ds.scheduler_config.max_inflight, samples_per_chunk=manifest.sample_chunk_size,
               shuffle="insitubatch's block-local shuffle (its own order)")
    want_offsets = {name: 0 for name in w.variables} | {name + TARGET_SUFFIX: 1 for name in w.variables}
    checked = False
    try:
        for epoch in range(w.epochs):
            ds.set_epoch(epoch)
            passes = iter(ds.train)
            try:
                for i in range(w.batches_in_epoch(epoch)):
                    batch = next(passes, None)
                    if batch is None or len(batch) != w.batch_size:
                        raise RuntimeError(f"insitubatch: epoch {epoch} ended after {i} full batches, expected "
                                           f"{w.batches_in_epoch(epoch)}")
                    origins = np.asarray(batch.sample_indices, dtype=np.int64)
                    inp = stack_channels(w, batch.arrays)
                    tgt = stack_channels(w, batch.arrays, TARGET_SUFFIX)
                    if not checked:
                        # Each label read array[anchor + offset]: the inputs at t, the targets at t + 1.
                        if batch.offsets != want_offsets:
                            raise RuntimeError(f"insitubatch: the batch's views have offsets {batch.offsets}, "
                                               f"expected {want_offsets}")
                        RAN["self_check"] = check_against_zarrstream(w, origins, inp, tgt)
                        checked = True
                    del batch
                    yield Batch(epoch, torch.from_numpy(inp), torch.from_numpy(tgt), origins)
            finally:
                passes.close()  # ends the pass: its scheduler stops before the next one starts
        RAN["decode_threads"] = scheduler.decode_pool_workers()
    finally:
        ds.close()


# ---------------------------------------------------------------------------------------------
# Loader 4: zarrstream.Loader (docs/loader.md).


# loader.stats() of the zarrstream loader run in this process, once its batches are exhausted.
ZARRSTREAM_STATS: dict = {}


def zarrstream_batches(w: Workload, shuffle: str = "exact") -> Iterator[Batch]:
    """`shuffle="exact"` is the same randomness as the other loaders; "block" (zarrstream-block) is
    the chunk-aware block shuffle, which reads each time step's chunks once for the input and the
    target of neighbouring samples."""
    import zarrstream

    loader = zarrstream.Loader(
        w.store,
        variables=w.variables,
        sample={"time": 1},
        target_offset={"time": 1},
        batch_size=w.batch_size,
        shuffle=shuffle,
        seed=w.seed,
        prefetch=w.prefetch,
        num_threads=0,
        cache_bytes=w.cache_bytes,
        dtype="float32",
    )
    for epoch in range(w.epochs):
        loader.set_epoch(epoch)
        for i, batch in enumerate(loader):
            # One sampled dimension (time): origins are [B, 1] (or [B]) time indices.
            origins = batch["origin"].numpy().astype(np.int64).reshape(len(batch["origin"]), -1)[:, 0]
            yield Batch(epoch, batch["input"], batch["target"], origins)
            if i + 1 == w.batches_in_epoch(epoch):
                break
    ZARRSTREAM_STATS.update(loader.stats())


LOADER_BATCHES = {
    "xbatcher": xbatcher_batches,
    "tensorstore": tensorstore_batches,
    "zarr-python": zarr_python_batches,
    "zarrs": zarrs_batches,
    "insitubatch": insitubatch_batches,
    "zarrstream": zarrstream_batches,
    "zarrstream-block": functools.partial(zarrstream_batches, shuffle="block"),
}


# ---------------------------------------------------------------------------------------------
# The whole-array read: every chunk of one array into one numpy array, each tool its own way.

# torch is not needed to read an array.
WHOLE_IMPORTS = {name: tuple(m for m in modules if m != "torch") for name, modules in LOADER_IMPORTS.items()}


def whole_reader(name: str, w: Workload):
    """Opens `w.whole_variable` as a user of the tool would; returns a function that reads all of
    it into a new numpy array."""
    path = str(Path(w.store) / w.whole_variable)
    if name == "tensorstore":
        import tensorstore as ts

        # No cache pool: every repeated read decodes every chunk again, as the other tools do.
        context = ts.Context({
            "cache_pool": {"total_bytes_limit": 0},
            "data_copy_concurrency": {"limit": w.cores},
            "file_io_concurrency": {"limit": max(16, 4 * w.cores)},
        })
        driver = "zarr3" if w.zarr_format == 3 else "zarr"
        array = ts.open({"driver": driver, "kvstore": {"driver": "file", "path": path}}, context=context,
                        open=True, read=True).result()
        return lambda: array.read().result()
    if name in ("zarr-python", "zarrs"):
        import zarr

        if name == "zarrs":
            use_zarrs_pipeline()
        else:
            use_fastest_zarr_pipeline(w.cores)
        array = zarr.open_array(path, mode="r")
        if name == "zarrs":
            check_zarrs_pipeline(array)
        note_pipeline(array)
        return lambda: array[...]
    if name == "zarrstream":
        import zarrstream

        return zarrstream.open_array(path).read
    if name == "libzstd":
        return libzstd_whole_reader(w)
    raise ValueError(f"{name} has no whole-array read")


def libzstd_library() -> str | None:
    return ctypes.util.find_library("zstd")


def whole_zstd_slabs(w: Workload) -> tuple[dict, str | None]:
    """The whole-array read's array as the libzstd row needs it: zstd chunks of whole slabs of the
    first dimension (every later dimension whole, so a chunk's bytes are one contiguous run of the
    array's) with no other codec than little-endian bytes. Returns (layout, why not or None)."""
    path = Path(w.store) / w.whole_variable
    if (path / "zarr.json").exists():
        meta = json.loads((path / "zarr.json").read_text())
        shape, chunks = meta["shape"], meta["chunk_grid"]["configuration"]["chunk_shape"]
        codecs = [c["name"] for c in meta["codecs"]]
        endian = next((c.get("configuration", {}).get("endian") for c in meta["codecs"] if c["name"] == "bytes"),
                      None)
        encoding = meta.get("chunk_key_encoding", {"name": "default"})
        separator = encoding.get("configuration", {}).get("separator", "/" if encoding["name"] == "default" else ".")
        prefix = "c" + separator if encoding["name"] == "default" else ""
        dtype = np.dtype(meta["data_type"])
        if codecs != ["bytes", "zstd"] or (endian not in (None, "little")):
            return {}, f"codecs {codecs}: the libzstd row reads zstd chunks with no other codec"
    else:
        meta = json.loads((path / ".zarray").read_text())
        shape, chunks = meta["shape"], meta["chunks"]
        prefix, separator = "", meta.get("dimension_separator") or "."
        dtype = np.dtype(meta["dtype"])
        compressor = (meta.get("compressor") or {}).get("id")
        if compressor != "zstd" or meta.get("filters") or meta.get("order", "C") != "C" or dtype.byteorder == ">":
            return {}, f"compressor {compressor}: the libzstd row reads zstd chunks with no filter"
    if list(chunks[1:]) != list(shape[1:]):
        return {}, f"chunks {chunks} of shape {shape}: not whole slabs of the first dimension"
    keys = [prefix + separator.join([str(i)] + ["0"] * (len(shape) - 1))
            for i in range(-(-shape[0] // chunks[0]))]
    missing = [k for k in keys if not (path / k).exists()]
    if missing:
        return {}, f"chunk {missing[0]} is not stored (fill value): the libzstd row decodes every chunk"
    return {"files": [str(path / k) for k in keys], "shape": shape, "rows": chunks[0], "dtype": dtype.str}, None


def libzstd_whole_reader(w: Workload):
    """The decoder alone: every chunk's stored bytes read into memory once (before the clock), then
    each read decodes them with libzstd (the system's, through ctypes, which releases the GIL) on a
    thread pool of the usable cores straight into a new array: the decoder's own CPU time per GB on
    this host, the least a reader of these chunks can spend."""
    from concurrent.futures import ThreadPoolExecutor

    layout, why_not = whole_zstd_slabs(w)
    if why_not:
        raise ValueError(why_not)
    lib = ctypes.CDLL(libzstd_library())
    lib.ZSTD_decompress.restype = ctypes.c_size_t
    lib.ZSTD_decompress.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t]
    lib.ZSTD_isError.argtypes = [ctypes.c_size_t]
    lib.ZSTD_isError.restype = ctypes.c_uint
    lib.ZSTD_versionString.restype = ctypes.c_char_p
    RAN.update(library=libzstd_library(), version=lib.ZSTD_versionString().decode(), threads=w.cores)
    blobs = [Path(f).read_bytes() for f in layout["files"]]
    shape, dtype, rows = layout["shape"], np.dtype(layout["dtype"]), layout["rows"]
    chunk_bytes = rows * int(np.prod(shape[1:], dtype=np.int64)) * dtype.itemsize
    pool = ThreadPoolExecutor(w.cores)

    def read() -> np.ndarray:
        out = np.empty(shape, dtype)
        flat = out.reshape(-1).view(np.uint8)

        def decode(i: int) -> None:
            # The last chunk may reach past the array's end: decoded whole, its rows inside kept.
            room = min(chunk_bytes, flat.nbytes - i * chunk_bytes)
            target = flat[i * chunk_bytes:] if room == chunk_bytes else np.empty(chunk_bytes, np.uint8)
            n = lib.ZSTD_decompress(target.ctypes.data, chunk_bytes, blobs[i], len(blobs[i]))
            if lib.ZSTD_isError(n) or n != chunk_bytes:
                raise RuntimeError(f"{layout['files'][i]}: ZSTD_decompress gave {n}, not {chunk_bytes} bytes")
            if room != chunk_bytes:
                flat[i * chunk_bytes:] = target[:room]

        list(pool.map(decode, range(len(blobs))))
        return out

    return read


def loader_unavailable(name: str) -> str | None:
    """Why `name` cannot run here, or None."""
    if name == "libzstd":
        return None if libzstd_library() else "no libzstd shared library found (ctypes.util.find_library)"
    if name.startswith("zarrstream"):
        try:
            import zarrstream
        except ImportError as e:
            return f"import zarrstream failed: {e}"
        if not hasattr(zarrstream, "Loader"):
            return "zarrstream.Loader missing"
        return None
    for module in LOADER_IMPORTS[name]:
        if importlib.util.find_spec(module) is None:
            if name == "insitubatch":
                return (f"{module} is not installed: insitubatch needs Python >= 3.12, zarr >= 3.3 and "
                        f"obstore (here Python {platform.python_version()}, zarr {versions(('zarr',))['zarr']})")
            return f"{module} is not installed"
    return None


def zarr_python_pipeline(w: Workload) -> dict:
    """The codec pipeline settings of the zarr-python row (use_fastest_zarr_pipeline)."""
    if has_fused_zarr_pipeline():
        return {"codec_pipeline": ZARR_FUSED_PIPELINE, "codec_pipeline_max_workers": w.cores}
    return {"codec_pipeline": "zarr.core.codec_pipeline.BatchedCodecPipeline (zarr < 3.3 has no fused one)"}


def loader_config(w: Workload, name: str) -> dict:
    if w.kind == "whole":
        return {
            "tensorstore": {"api": "ts.open(...).read()", "cache_pool_bytes": 0, "data_copy_concurrency": w.cores,
                            "file_io_concurrency": max(16, 4 * w.cores)},
            "zarr-python": {"api": "zarr.open_array(...)[...]", **zarr_python_pipeline(w)},
            "zarrs": {"api": "zarr.open_array(...)[...]", "codec_pipeline": "zarrs.ZarrsCodecPipeline"},
            "zarrstream": {"api": "zarrstream.open_array(...).read()"},
            "libzstd": {"api": "ZSTD_decompress per chunk through ctypes, stored bytes in memory"},
        }[name] | {"variable": w.whole_variable, "repeats": w.whole_repeats}
    if name == "xbatcher":
        return {"num_workers": w.workers, "prefetch_factor": w.prefetch_factor if w.workers else None,
                "persistent_workers": w.workers > 0, "multiprocessing_context": w.mp_context or "default",
                "dask_scheduler": "threads", "dask_num_workers": w.dask_threads, "shuffle": True}
    if name == "tensorstore":
        return {"prefetch_batches": w.prefetch, "cache_pool_bytes": w.ts_cache_bytes,
                "data_copy_concurrency": w.cores, "file_io_concurrency": max(16, 4 * w.cores)}
    if name == "zarr-python":
        return {"prefetch_batches": w.prefetch, "read_threads": 2 * w.cores, **zarr_python_pipeline(w)}
    if name == "zarrs":
        return {"prefetch_batches": w.prefetch, "read_threads": 2 * w.cores,
                "codec_pipeline": "zarrs.ZarrsCodecPipeline"}
    if name == "insitubatch":
        return {"api": "InSituDataset(...).train", "block_chunks": INSITUBATCH_BLOCK_CHUNKS,
                "max_inflight": INSITUBATCH_MAX_INFLIGHT, "decode_threads": min(32, w.cores + 4),
                "cache_budget_bytes_asked": zarrstream_cache_bytes(w), "store": "obstore (file://)"}
    return {"prefetch": w.prefetch, "num_threads": 0, "cache_bytes": w.cache_bytes or "default",
            "shuffle": "block" if name == "zarrstream-block" else "exact"}


# ---------------------------------------------------------------------------------------------
# Process-tree memory and CPU, from /proc (no psutil).


def _read_stat(pid: int) -> list[bytes] | None:
    """/proc/<pid>/stat fields after the command name (fields 3...), or None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read()
    except OSError:
        return None
    return raw[raw.rindex(b")") + 2:].split()


def process_tree(root: int) -> list[int]:
    """`root` and its descendants (one scan of /proc: this kernel may lack /proc/<pid>/task/*/children)."""
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            fields = _read_stat(int(entry.name))
            if fields is not None:
                children.setdefault(int(fields[1]), []).append(int(entry.name))
    tree, todo = [], [root]
    while todo:
        pid = todo.pop()
        tree.append(pid)
        todo.extend(children.get(pid, ()))
    return tree


def rss_bytes(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/statm", "rb") as f:
            return int(f.read().split()[1]) * PAGE_SIZE
    except (OSError, IndexError, ValueError):
        return 0


def pss_bytes(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/smaps_rollup", "rb") as f:
            for line in f:
                if line.startswith(b"Pss:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def tree_cpu_seconds(root: int) -> float:
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in process_tree(root):
        fields = _read_stat(pid)
        if fields is not None:
            # utime, stime, and cutime, cstime: the time of children that exited and were reaped.
            total += sum(int(f) for f in fields[11:15])
    return total / ticks


class TreeMemorySampler:
    """Peak RSS and PSS of a process tree, sampled by a background thread while in a `with` block."""

    def __init__(self, root: int, interval: float = 0.05, rescan_every: int = 10, pss_every: int = 5):
        self.root, self.interval = root, interval
        self.rescan_every, self.pss_every = rescan_every, pss_every
        self.peak_rss = self.peak_pss = self.peak_processes = 0
        self._tree = [root]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tree-memory", daemon=True)

    def __enter__(self) -> "TreeMemorySampler":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def sample(self, tick: int = 0) -> None:
        """One sample; tick 0 also rescans the tree and reads PSS. Only one thread may call it."""
        # Scanning all of /proc costs milliseconds; reading a few statm files, microseconds. A
        # worker is found within rescan_every ticks of its start, before it has loaded much.
        if tick % self.rescan_every == 0:
            self._tree = process_tree(self.root)
            self.peak_processes = max(self.peak_processes, len(self._tree))
        self.peak_rss = max(self.peak_rss, sum(rss_bytes(p) for p in self._tree))
        if tick % self.pss_every == 0:
            self.peak_pss = max(self.peak_pss, sum(pss_bytes(p) for p in self._tree))

    def _run(self) -> None:
        tick = 0
        while True:
            self.sample(tick)
            tick += 1
            if self._stop.wait(self.interval):
                return


# ---------------------------------------------------------------------------------------------
# The child: runs one loader and measures it.


def run_one(name: str, w: Workload, out_dir: Path) -> dict:
    t0 = time.perf_counter()
    for module in LOADER_IMPORTS[name]:
        importlib.import_module(module)
    import_s = time.perf_counter() - t0
    rss_after_import = rss_bytes(os.getpid())
    expected_shape = (w.batch_size, w.num_channels, w.num_lat, w.num_lon)

    def check_shape(batch: Batch) -> None:
        for what, t in (("input", batch.input), ("target", batch.target)):
            if tuple(t.shape) != expected_shape or str(t.dtype) != "torch.float32":
                raise RuntimeError(f"{name}: {what} is {tuple(t.shape)} {t.dtype}, expected "
                                   f"{expected_shape} torch.float32")
        if batch.origins.shape != (w.batch_size,):
            raise RuntimeError(f"{name}: origins have shape {batch.origins.shape}, expected ({w.batch_size},)")

    seen: dict[int, set] = {}

    def note_origins(batch: Batch) -> None:
        epoch = seen.setdefault(batch.epoch, set())
        for t in batch.origins.tolist():
            if not 0 <= t < w.num_samples:
                raise RuntimeError(f"{name}: epoch {batch.epoch}: sample origin {t} outside [0, {w.num_samples})")
            if t in epoch:
                raise RuntimeError(f"{name}: epoch {batch.epoch}: sample origin {t} delivered twice")
            epoch.add(t)

    batches = LOADER_BATCHES[name](w)
    t0 = time.perf_counter()
    first = next(batches)
    startup_s = time.perf_counter() - t0
    check_shape(first)
    note_origins(first)
    np.savez(out_dir / "first_batch.npz", input=first.input.numpy(), target=first.target.numpy(),
             origins=first.origins)
    del first

    waits: list[float] = []
    cpu0, wall0 = tree_cpu_seconds(os.getpid()), time.perf_counter()
    for _ in range(w.batches * w.epochs):
        w0 = time.perf_counter()
        batch = next(batches, None)
        if batch is None:
            raise RuntimeError(f"{name}: delivered {len(waits)} measured batches, expected "
                               f"{w.batches * w.epochs}")
        waits.append(time.perf_counter() - w0)
        check_shape(batch)
        note_origins(batch)
        del batch
        if w.step_time > 0:
            time.sleep(w.step_time)  # stands in for a training step
    # Before the loader shuts down: its workers' CPU time leaves the tree when they exit.
    elapsed = time.perf_counter() - wall0
    cpu_s = tree_cpu_seconds(os.getpid()) - cpu0
    # The tree with the loader still running: a short run can end between two of the parent's
    # rescans of the tree.
    processes_at_end = len(process_tree(os.getpid()))
    if next(batches, None) is not None:
        raise RuntimeError(f"{name}: delivered more than {w.batches * w.epochs} measured batches")
    del batches

    samples = len(waits) * w.batch_size
    wait_ms = np.array(waits) * 1e3
    return {
        "import_s": import_s,
        "startup_s": startup_s,
        "measured_batches": len(waits),
        "measured_samples": samples,
        "elapsed_s": elapsed,
        "samples_per_s": samples / elapsed,
        "gb_per_s": samples * w.sample_bytes / elapsed / 1e9,
        "wait_mean_ms": float(wait_ms.mean()),
        "wait_p99_ms": float(np.percentile(wait_ms, 99)),
        "wait_max_ms": float(wait_ms.max()),
        "cpu_cores_busy": cpu_s / elapsed,
        "processes_at_end": processes_at_end,
        "rss_after_import_bytes": rss_after_import,
        **({"loader_stats": dict(ZARRSTREAM_STATS)} if ZARRSTREAM_STATS else {}),
        "ran": dict(RAN),
    }


def run_whole(name: str, w: Workload, out_dir: Path) -> dict:
    """The whole-array read: open and a first read (start-up, saved for the check), then
    `w.whole_repeats` measured reads, each into a new array (the previous one freed first)."""
    t0 = time.perf_counter()
    for module in WHOLE_IMPORTS[name]:
        importlib.import_module(module)
    import_s = time.perf_counter() - t0
    rss_after_import = rss_bytes(os.getpid())

    t0 = time.perf_counter()
    read = whole_reader(name, w)
    first = np.asarray(read())
    startup_s = time.perf_counter() - t0
    shape, dtype, nbytes = first.shape, first.dtype, first.nbytes
    np.save(out_dir / "whole.npy", first)
    del first

    times: list[float] = []
    cpu0, wall0 = tree_cpu_seconds(os.getpid()), time.perf_counter()
    for _ in range(w.whole_repeats):
        r0 = time.perf_counter()
        data = read()
        times.append(time.perf_counter() - r0)
        if data.shape != shape or data.dtype != dtype:
            raise RuntimeError(f"{name}: a repeated read is {data.shape} {data.dtype}, the first {shape} {dtype}")
        del data
    elapsed = time.perf_counter() - wall0
    cpu_s = tree_cpu_seconds(os.getpid()) - cpu0
    read_ms = np.array(times) * 1e3
    return {
        "import_s": import_s,
        "startup_s": startup_s,
        "array_bytes": nbytes,
        "measured_reads": len(times),
        "elapsed_s": elapsed,
        "gb_per_s": nbytes * len(times) / elapsed / 1e9,
        "read_mean_ms": float(read_ms.mean()),
        "read_max_ms": float(read_ms.max()),
        "cpu_cores_busy": cpu_s / elapsed,
        "processes_at_end": len(process_tree(os.getpid())),
        "rss_after_import_bytes": rss_after_import,
        "ran": dict(RAN),
    }


def child_main(name: str, spec: Path, out_dir: Path) -> None:
    w = Workload(**json.loads(spec.read_text()))
    result = run_whole(name, w, out_dir) if w.kind == "whole" else run_one(name, w, out_dir)
    (out_dir / "result.json").write_text(json.dumps(result))


# ---------------------------------------------------------------------------------------------
# The parent: prepares the store, runs each loader in a child, checks, reports.


def find_cli() -> str:
    beside = Path(sys.executable).parent / "zarrstream"
    found = str(beside) if beside.exists() else shutil.which("zarrstream")
    if not found:
        raise SystemExit("no `zarrstream` command to synthesize the store with (pass --store)")
    return found


def synthesize(dst: Path, preset: str, layout: str, steps: int | None) -> float:
    cmd = [find_cli(), "synth", str(dst), "--preset", preset, "--layout", layout]
    if steps:
        cmd += ["--steps", str(steps)]
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=sys.stderr)
    return time.perf_counter() - t0


def warm_page_cache(store: Path) -> tuple[int, float]:
    """Reads every file under `store` once; returns (bytes, seconds)."""
    total, t0 = 0, time.perf_counter()
    for path in sorted(p for p in store.rglob("*") if p.is_file()):
        with open(path, "rb", buffering=0) as f:
            while chunk := f.read(1 << 22):
                total += len(chunk)
    return total, time.perf_counter() - t0


def check_first_batch(w: Workload, npz: Path) -> dict:
    got = np.load(npz)
    origins = got["origins"]
    ref_input, ref_target = reference_batch(w, origins)
    out = {"origins": origins.tolist(), "ok": True, "detail": "equal to zarr-python's read"}
    for what, ref in (("input", ref_input), ("target", ref_target)):
        value = got[what]
        if value.shape != ref.shape or value.dtype != ref.dtype:
            out.update(ok=False, detail=f"{what} is {value.shape} {value.dtype}, reference {ref.shape} {ref.dtype}")
            return out
        differ = ~((value == ref) | (np.isnan(value) & np.isnan(ref)))
        if differ.any():
            b, c = np.argwhere(differ)[0][:2]
            out.update(ok=False, detail=f"{what}: {int(differ.sum())} of {differ.size} values differ from "
                                        f"zarr-python's read, first at sample {b} (time {origins[b]}), channel {c}")
            return out
    return out


def check_whole(w: Workload, npy: Path) -> dict:
    """The whole-array read against zarr-python's read of the same array, one time step at a time."""
    import zarr

    ref = zarr.open_array(str(Path(w.store) / w.whole_variable), mode="r")
    got = np.load(npy, mmap_mode="r")
    out = {"ok": True, "detail": "equal to zarr-python's read"}
    first = np.asarray(ref[0])
    if got.shape != ref.shape or got.dtype != first.dtype:
        out.update(ok=False, detail=f"read {got.shape} {got.dtype}, reference {ref.shape} {first.dtype}")
        return out
    for t in range(ref.shape[0]):
        value, expected = got[t], (first if t == 0 else np.asarray(ref[t]))
        differ = ~((value == expected) | (np.isnan(value) & np.isnan(expected)))
        if differ.any():
            out.update(ok=False, detail=f"{int(differ.sum())} of {differ.size} values of time step {t} differ from "
                                        f"zarr-python's read, first at {tuple(int(i) for i in np.argwhere(differ)[0])}")
            return out
    return out


def run_child(name: str, w: Workload, work: Path, timeout: float, script: Path | None = None,
              config: dict | None = None, reference: Workload | None = None) -> dict:
    """Runs `name` on `w` in a child process of `script` (default: this harness; another harness
    with a --run-one of its own for tools this one does not have, described by `config`), and
    checks its first batch against zarr-python's read of `reference`'s store (default: `w`'s)."""
    out_dir = work / f"{w.kind}-{name}"
    out_dir.mkdir()
    spec = out_dir / "workload.json"
    spec.write_text(json.dumps(dataclasses.asdict(w)))
    cmd = [sys.executable, str(script or Path(__file__).resolve()), "--run-one", name, "--spec", str(spec),
           "--out", str(out_dir)]
    # Its own session, so that a timed-out child and its workers can be ended together.
    proc = subprocess.Popen(cmd, start_new_session=True)
    with TreeMemorySampler(proc.pid) as memory:
        try:
            rc = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            proc.wait()
            rc = None
    result: dict = {"available": True, "config": dict(config or loader_config(w, name))}
    if rc != 0 or not (out_dir / "result.json").exists():
        result["error"] = f"timed out after {timeout:.0f} s" if rc is None else f"child exited with status {rc}"
        return result
    result.update(json.loads((out_dir / "result.json").read_text()))
    result["config"].update(result.pop("ran", {}))
    result.update(peak_rss_bytes=memory.peak_rss, peak_pss_bytes=memory.peak_pss,
                  peak_processes=max(memory.peak_processes, result.pop("processes_at_end", 0)))
    if w.kind == "whole":
        result["check"] = check_whole(w, out_dir / "whole.npy")
        (out_dir / "whole.npy").unlink()
    else:
        result["check"] = check_first_batch(reference or w, out_dir / "first_batch.npz")
    return result


def versions(names: tuple[str, ...] = ("zarrstream", "torch", "xbatcher", "xarray", "dask", "tensorstore", "zarr",
                                       "zarrs", "insitubatch", "obstore", "numcodecs", "numpy")) -> dict:
    """The installed version of each package of `names` (None where it is not installed)."""
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for name in names:
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = None
    return out


def fmt(value, spec: str) -> str:
    return "–" if value is None else format(value, spec)


def print_table(results: dict) -> None:
    """One table: a row per (workload, tool); the last column is the tool's GB/s over zarrstream's
    (exact shuffle) in the same workload (in the batch workloads, every tool's samples carry the
    same bytes: the same ratio of samples/s)."""
    print("| workload | tool | start-up (s) | samples/s | GB/s | mean wait (ms) | p99 wait (ms) | peak RSS (MB) "
          "| peak PSS (MB) | CPU cores busy | check | vs zarrstream |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for workload, rows in results.items():
        ours = rows.get("zarrstream", {}).get("gb_per_s")
        for name, r in rows.items():
            if not r.get("available"):
                print(f"| {workload} | {name} | not available ({r['reason']}) ||||||||||")
                continue
            if "error" in r:
                print(f"| {workload} | {name} | failed: {r['error']} ||||||||||")
                continue
            check = "ok" if r["check"]["ok"] else "WRONG"
            versus = f"{r['gb_per_s'] / ours:.2f}x" if ours else "–"
            print(f"| {workload} | {name} | {r['startup_s']:.2f} | {fmt(r.get('samples_per_s'), '.1f')} | "
                  f"{r['gb_per_s']:.3f} | {fmt(r.get('wait_mean_ms'), '.1f')} | {fmt(r.get('wait_p99_ms'), '.1f')} | "
                  f"{r['peak_rss_bytes'] / 1e6:.0f} | {r['peak_pss_bytes'] / 1e6:.0f} | {r['cpu_cores_busy']:.2f} | "
                  f"{check} | {versus} |")
    for workload, rows in results.items():
        for name, r in rows.items():
            if r.get("available"):
                print(f"{workload} {name}: " + ", ".join(f"{k}={v}" for k, v in r["config"].items()))
            if r.get("available") and "error" not in r and not r["check"]["ok"]:
                print(f"{workload} {name}: WRONG: {r['check']['detail']}")


def stored_bytes(store: Path) -> int:
    return sum(f.stat().st_size for f in store.rglob("*") if f.is_file())


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--store", help="an existing store; with --preset, synthesized here if absent "
                                   "(default: synthesized into a temporary directory)")
    p.add_argument("--preset", help="zarrstream synth preset: era5-small, era5-1deg, era5")
    p.add_argument("--layout", default="v3-zstd", help="zarrstream synth layout: v3-zstd, v3-sharded, wb2")
    p.add_argument("--steps", type=int, help="zarrstream synth time steps (default: the preset's)")
    p.add_argument("--workloads", default="batches",
                   help=f"comma-separated, run in this order, of: {', '.join(WORKLOADS)}")
    p.add_argument("--sharded-store", help="the sharded workload's store; with --preset, synthesized here "
                                           "(--layout v3-sharded) if absent (default: synthesized into a "
                                           "temporary directory)")
    p.add_argument("--whole-variable", default="temperature", help="the array the whole-array read reads")
    p.add_argument("--whole-repeats", type=int, default=5, help="measured whole-array reads after the first")
    p.add_argument("--loaders", default=",".join(LOADERS), help="comma-separated tools, run in this order "
                                                                "(each workload runs those it has)")
    p.add_argument("--variables", default=",".join(DEFAULT_VARIABLES), help="comma-separated input variables")
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--batches", type=int, help="measured batches per epoch (default: all full batches of "
                                               "an epoch but the start-up batch)")
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--workers", type=int, default=usable_cores(), help="DataLoader worker processes "
                                                                       "(default: the usable cores)")
    p.add_argument("--prefetch-factor", type=int, default=3, help="DataLoader batches per worker")
    p.add_argument("--dask-threads", type=int, default=4, help="dask threaded scheduler workers")
    p.add_argument("--mp-context", help="DataLoader multiprocessing context (default: the platform's, fork "
                                        "on Linux; the published demo used forkserver)")
    p.add_argument("--prefetch", type=int, default=4, help="batches in flight for tensorstore, zarr-python, "
                                                           "zarrs and zarrstream")
    p.add_argument("--ts-cache-mb", type=int, default=256, help="tensorstore cache pool (MB)")
    p.add_argument("--step-time", type=float, default=0.0, help="seconds of simulated training per batch")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--timeout", type=float, default=3600, help="seconds per tool and workload before it is "
                                                               "killed")
    p.add_argument("--no-warm", action="store_true", help="do not read the stores into the page cache first")
    p.add_argument("--json", help="write the results here")
    p.add_argument("--run-one", help=argparse.SUPPRESS)
    p.add_argument("--spec", help=argparse.SUPPRESS)
    p.add_argument("--out", help=argparse.SUPPRESS)
    args = p.parse_args()

    if args.run_one:
        child_main(args.run_one, Path(args.spec), Path(args.out))
        return 0

    loaders = [n for n in args.loaders.split(",") if n]
    unknown = sorted(set(loaders) - set(LOADERS))
    if unknown:
        p.error(f"unknown loaders {unknown}; known: {', '.join(LOADERS)}")
    workloads = [n for n in args.workloads.split(",") if n]
    unknown = sorted(set(workloads) - set(WORKLOADS))
    if unknown or not workloads:
        p.error(f"unknown workloads {unknown}; known: {', '.join(WORKLOADS)}")
    if "whole" in workloads and args.whole_repeats < 1:
        p.error("--whole-repeats must be at least 1")
    with tempfile.TemporaryDirectory(prefix="zarrstream-loader-bench-") as tmp:
        tmp_dir = Path(tmp)
        preset = args.preset or "era5-small"
        store = Path(args.store) if args.store else tmp_dir / f"{preset}.zarr"
        synth_s = None
        if not store.exists():
            if args.store and not args.preset:
                p.error(f"--store {store} does not exist (add --preset to synthesize it)")
            synth_s = synthesize(store, preset, args.layout, args.steps)
        variables = [v for v in args.variables.split(",") if v]
        info = describe_store(store, variables)
        w = Workload(store=str(store.resolve()), variables=variables, batch_size=args.batch_size,
                     batches=0, epochs=args.epochs, seed=args.seed, step_time=args.step_time,
                     workers=args.workers, prefetch_factor=args.prefetch_factor,
                     dask_threads=args.dask_threads, mp_context=args.mp_context, prefetch=args.prefetch,
                     ts_cache_bytes=args.ts_cache_mb << 20, cores=usable_cores(), **info)
        full = w.num_samples // w.batch_size
        w.batches = args.batches if args.batches is not None else full - 1
        if w.batches < 1 or w.batches + 1 > full:
            p.error(f"{w.num_samples} samples make {full} full batches of {w.batch_size} per epoch: "
                    f"--batches must be 1 ... {full - 1} (epoch 0 also yields the start-up batch)")
        stores = [store]
        meta = {
            "command": "python bench/loader_bench.py " + " ".join(sys.argv[1:]),
            "machine": machine(),
            "versions": versions(),
            "store": {"path": str(store), "preset": args.preset, "layout": args.layout if synth_s else None,
                      "synthesized_s": synth_s, "stored_bytes": stored_bytes(store), **info},
            "workloads": workloads,
            "workload": {"variables": variables, "channels": w.num_channels, "batch_size": w.batch_size,
                         "samples_per_epoch": w.num_samples, "measured_batches_per_epoch": w.batches,
                         "epochs": w.epochs, "step_time_s": w.step_time, "sample_bytes": w.sample_bytes,
                         "seed": w.seed},
        }
        runs = {}  # workload -> its Workload
        for kind in workloads:
            if kind == "batches":
                runs[kind] = w
            elif kind == "whole":
                import zarr

                group = zarr.open_group(str(store), mode="r")
                if args.whole_variable not in group:
                    p.error(f"store {store}: no array '{args.whole_variable}' for the whole-array read")
                a = group[args.whole_variable]
                runs[kind] = dataclasses.replace(w, kind="whole", whole_variable=args.whole_variable,
                                                 whole_repeats=args.whole_repeats)
                meta["whole"] = {"variable": args.whole_variable, "shape": list(a.shape),
                                 "chunks": list(a.chunks), "decoded_bytes": int(a.nbytes),
                                 "repeats": args.whole_repeats}
            else:
                sharded = Path(args.sharded_store) if args.sharded_store else tmp_dir / f"{preset}-sharded.zarr"
                sharded_synth_s = None
                if not sharded.exists():
                    if args.store and not args.preset:
                        p.error("the sharded workload needs --sharded-store (an existing store) or --preset "
                                "(to synthesize one)")
                    sharded_synth_s = synthesize(sharded, preset, "v3-sharded", args.steps)
                sharded_info = describe_store(sharded, variables)
                ws = dataclasses.replace(w, store=str(sharded.resolve()), kind="sharded", **sharded_info)
                if ws.num_samples // ws.batch_size < ws.batches + 1:
                    p.error(f"--sharded-store {sharded} has {ws.num_samples} samples: too few for "
                            f"{ws.batches + 1} batches of {ws.batch_size}")
                runs[kind] = ws
                stores.append(sharded)
                meta["sharded_store"] = {"path": str(sharded), "synthesized_s": sharded_synth_s,
                                         "stored_bytes": stored_bytes(sharded), **sharded_info}

        page_cache = "as found (--no-warm): the first loader may read from disk"
        if not args.no_warm:
            nbytes, seconds = 0, 0.0
            for s in stores:
                b, t = warm_page_cache(s)
                nbytes, seconds = nbytes + b, seconds + t
            page_cache = (f"warm: every file of the store{'s' if len(stores) > 1 else ''} ({nbytes / 1e6:.0f} MB) "
                          f"was read once before the first tool ran ({seconds:.1f} s); caches cannot be dropped "
                          "without root")
        meta["page_cache"] = page_cache
        m = meta["machine"]
        in_flight = w.workers * w.prefetch_factor * w.batch_size * w.sample_bytes
        print(f"store {store}: zarr v{w.zarr_format}, {w.num_time} steps, {w.num_lat} x {w.num_lon}, "
              f"{meta['store']['stored_bytes'] / 1e6:.0f} MB stored; {w.num_channels} channels, "
              f"{w.sample_bytes / 1e6:.1f} MB per sample (input + target); batch {w.batch_size}, {w.batches} "
              f"measured batches x {w.epochs} epochs (+ 1 start-up batch)")
        if "sharded" in runs:
            print(f"sharded store {meta['sharded_store']['path']}: "
                  f"{meta['sharded_store']['stored_bytes'] / 1e6:.0f} MB stored; the same batches")
        if "whole" in runs:
            print(f"whole-array read: '{args.whole_variable}' {tuple(meta['whole']['shape'])}, "
                  f"{meta['whole']['decoded_bytes'] / 1e6:.0f} MB decoded per read, {args.whole_repeats} "
                  f"measured reads after the first")
        print(f"machine: {describe(m)}")
        print(f"page cache: {page_cache}")
        if ("xbatcher" in loaders and "batches" in runs and w.workers and m["dev_shm_bytes"]
                and m["dev_shm_bytes"] < 2 * in_flight):
            print(f"warning: /dev/shm holds {m['dev_shm_bytes'] / 1e6:.0f} MB; the DataLoader keeps up to "
                  f"{in_flight / 1e6:.0f} MB of batches there", file=sys.stderr)

        meta["load_average_before"] = os.getloadavg()
        unavailable = {name: loader_unavailable(name) for name in loaders}
        results: dict = {}
        for kind, wk in runs.items():
            results[kind] = {}
            for name in (n for n in loaders if n in WORKLOAD_TOOLS[kind]):
                reason = unavailable[name] or (name == "libzstd" and whole_zstd_slabs(wk)[1])
                if reason:
                    print(f"{kind} {name}: not available ({reason})")
                    results[kind][name] = {"available": False, "reason": reason}
                    continue
                print(f"{kind} {name}: running ...", file=sys.stderr, flush=True)
                results[kind][name] = run_child(name, wk, tmp_dir, args.timeout)
        # Other processes on the machine take cores from the tools: say how busy it was.
        meta["load_average_after"] = os.getloadavg()
        print()
        print_table(results)
        print(f"load average (1, 5, 15 min) before: {', '.join(f'{x:.1f}' for x in meta['load_average_before'])}; "
              f"after: {', '.join(f'{x:.1f}' for x in meta['load_average_after'])}")
        if args.json:
            Path(args.json).write_text(json.dumps({"meta": meta, "results": results}, indent=2))
    failed = [(kind, n) for kind, rows in results.items() for n, r in rows.items()
              if r.get("available") and ("error" in r or not r["check"]["ok"])]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

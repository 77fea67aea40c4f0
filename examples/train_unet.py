"""Next-step U-Net training on an ERA5-like Zarr store, fed by zarrstream (the product's main job).

A U-Net with a ResNet-style encoder learns to predict the state at t+1 (6 hours later) from the
state at t: every channel of the chosen variables and levels, normalised with a `zarrstream stats`
file. Single process, or data-parallel with `torchrun --nproc_per_node N` (each rank reads only its
shard of every epoch: the loader shards by rank). Checkpoints hold the model, the optimiser and the
loader's position, so a resumed run continues mid-epoch with exactly the samples it had left.

  python examples/train_unet.py STORE --stats stats.json --epochs 2
  python examples/train_unet.py STORE --stats stats.json --steps 100 --checkpoint run.pt [--resume]
  torchrun --nproc_per_node 2 examples/train_unet.py STORE --stats stats.json
  python examples/train_unet.py STORE --stats stats.json --loader dataloader   # the baseline
  python examples/train_unet.py STORE --stats stats.json --synthetic           # the ceiling
  python examples/train_unet.py SURFACE PRESSURE CONSTANTS --stats stats.json \
      --forcings land_sea_mask,cos_latitude,cos_solar_zenith_angle              # stores joined
  python examples/train_unet.py --dataset dataset.json --stats stats.json      # the same, from a file

Several stores are one dataset, as the loader takes them: STOREs given one after the other are
joined (each variable from the first store holding it: surface, pressure levels, constants), and
a `--dataset` file describes any form with its variables and forcings:

  {"dataset": ["surface.zarr", "pressure.zarr", "constants.zarr"],
   "variables": ["2m_temperature", "temperature@500,850"],
   "forcings": ["land_sea_mask", "cos_julian_day", "sin_julian_day", "cos_solar_zenith_angle"]}

"dataset" is a path, a list (a join), or `{"join": [...], "mode": "inner"}` / `{"concat": [...],
"dim": "time"}`, nested as the loader's forms nest; relative paths are relative to the file's
folder. `--variables` and `--forcings` given on the command line replace the file's. Forcings are
inputs only: static fields of a store (land-sea mask, orography) and computed forcings
(cos_latitude, ..., cos_solar_zenith_angle: docs/loader.md); the model predicts the variables.

`--loader dataloader` feeds the same model from xbatcher + a PyTorch DataLoader with worker
processes (the published Earthmover configuration: batch 4, workers with prefetch, persistent
workers); `--synthetic` from random tensors of the same shapes, which is what training costs with
no data loading at all. Every run reports samples/s, the time each step waited for its batch and
the fraction of the run spent waiting (on a GPU: the GPU's idle fraction), and writes them with
the loader's own statistics to `--json-out`.
"""

from __future__ import annotations

import argparse
import functools
import gc
import json
import math
import os
import sys
import time
from pathlib import Path
from typing import Any, Iterator

import numpy as np

# The loader's GPU batches and this model's activations share the GPU: PyTorch's allocator, with
# expandable segments, does not strand reserved-but-unused blocks between them (0.25° batches of
# 16 ran out of memory without it, with 9 GiB reserved and unallocated).
os.environ.setdefault("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True")
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from torch import nn  # noqa: E402
from torch.nn import functional as F  # noqa: E402

import zarrstream  # noqa: E402
from zarrstream.errors import ZarrstreamError  # noqa: E402
from zarrstream.plot import write_plot  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_VARIABLES = ("2m_temperature,10m_u_component_of_wind,10m_v_component_of_wind,mean_sea_level_pressure,"
                     "geopotential,temperature,specific_humidity")


# ---------------------------------------------------------------------------------------------
# The model: a U-Net whose encoder is made of ResNet basic blocks.


class ResidualBlock(nn.Module):
    """Two 3x3 convolutions with batch norm and a skip connection (ResNet's basic block)."""

    def __init__(self, cin: int, cout: int, stride: int = 1):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.skip = (nn.Sequential(nn.Conv2d(cin, cout, 1, stride=stride, bias=False), nn.BatchNorm2d(cout))
                     if stride != 1 or cin != cout else nn.Identity())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu(self.bn1(self.conv1(x)))
        return F.relu(self.bn2(self.conv2(y)) + self.skip(x))


class UNet(nn.Module):
    """Encoder: a stem and `depth` stages of residual blocks, each halving the grid and doubling
    the width; decoder: upsampling, concatenation with the encoder's features at that scale, and a
    residual block. Predicts the change from the input state, so an untrained model is persistence:
    output channel i is input channel `state[i]` plus its change (the inputs also hold forcings,
    which are not predicted)."""

    def __init__(self, channels: int, width: int = 32, depth: int = 3, state: list[int] | None = None):
        super().__init__()
        self.depth = depth
        state = list(range(channels)) if state is None else state
        self.register_buffer("state", torch.tensor(state, dtype=torch.int64), persistent=False)
        self.stem = ResidualBlock(channels, width)
        widths = [width * 2**i for i in range(depth + 1)]
        self.down = nn.ModuleList(ResidualBlock(widths[i], widths[i + 1], stride=2) for i in range(depth))
        self.up = nn.ModuleList(ResidualBlock(widths[i + 1] + widths[i], widths[i]) for i in reversed(range(depth)))
        self.head = nn.Conv2d(width, len(state), 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h, w = x.shape[-2:]
        multiple = 2**self.depth
        padded = F.pad(x, (0, -w % multiple, 0, -h % multiple), mode="replicate")
        skips = [self.stem(padded)]
        for block in self.down:
            skips.append(block(skips[-1]))
        y = skips.pop()
        for block in self.up:
            skip = skips.pop()
            up = F.interpolate(y, size=skip.shape[-2:], mode="bilinear", align_corners=False)
            y = block(torch.cat([up, skip], 1))
        return x.index_select(1, self.state) + self.head(y)[..., :h, :w]


# ---------------------------------------------------------------------------------------------
# Batches: zarrstream, the xbatcher + DataLoader baseline, or random tensors.


class Batches:
    """What the training loop needs of a batch source: iteration over an epoch's batches (dicts
    with "input", "target", "origin"), their number, and for resuming mid-epoch a position it can
    save and restore (`resumable`)."""

    channels: list[str]
    target_channels: list[str]
    batches_per_epoch: int
    resumable = False
    # Which data the batches come from (zarrstream.Loader.dataset_identity); empty where unknown.
    dataset_identity: list[dict[str, str]] = []

    def epoch(self, epoch: int) -> Iterator[dict[str, torch.Tensor]]:
        raise NotImplementedError

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        pass

    def stats(self) -> dict[str, Any]:
        return {}

    def timeline(self) -> list[dict[str, Any]] | None:
        """The loader's stages per batch where it records them (zarrstream's, --timeline)."""
        return None

    def close(self) -> None:
        """Stops the source's threads or worker processes now, while the process (and its process
        group) is whole, rather than whenever the interpreter's shutdown gets to them."""
        if hasattr(self, "loader"):
            self.loader = None


class ZarrstreamBatches(Batches):
    resumable = True

    def __init__(self, args: argparse.Namespace, device: torch.device):
        self.loader = zarrstream.Loader(
            args.dataset, args.variables, forcings=args.forcings, target_offset={"time": 1}, select=args.select,
            batch_size=args.batch_size, shuffle=args.shuffle, block_chunks=args.block_chunks, seed=args.seed,
            normalize=args.stats, nan=0.0, device=str(device), prefetch=args.prefetch, drop_last=True,
            gpu_decode=args.gpu_decode, cpu_decode_share=args.cpu_decode_share,
            gpu_wave_bytes=args.gpu_wave_mb << 20, num_threads=args.loader_threads, timeline=args.timeline)
        self.channels = self.loader.channels
        self.target_channels = self.loader.target_channels
        self.batches_per_epoch = len(self.loader)
        self.dataset_identity = self.loader.dataset_identity
        self.gpu_decode_status = self.loader.gpu_decode_status
        self.num_threads = self.loader.num_threads
        self.resumed = False

    def epoch(self, epoch: int) -> Iterator[dict[str, torch.Tensor]]:
        # A restored loader first finishes the epoch it was saved in.
        if not (self.resumed and self.loader.epoch == epoch):
            self.loader.set_epoch(epoch)
        self.resumed = False
        return iter(self.loader)

    def state_dict(self) -> dict[str, Any]:
        return self.loader.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.loader.load_state_dict(state)
        self.resumed = True

    def stats(self) -> dict[str, Any]:
        return self.loader.stats()

    def timeline(self) -> list[dict[str, Any]]:
        return self.loader.timeline()


class DataLoaderBatches(Batches):
    """xbatcher + DataLoader as in Earthmover's published demo (bench/loader_bench.py has the
    details), normalised with the same statistics as zarrstream's batches."""

    def __init__(self, args: argparse.Namespace, device: torch.device):
        sys.path.insert(0, str(ROOT / "bench"))
        import xarray as xr
        import xbatcher
        from loader_bench import XbatcherSamples, set_dask_scheduler

        if any("@" in v for v in args.variables):
            raise SystemExit("--loader dataloader takes whole variables (no @levels)")
        if not isinstance(args.dataset, str) or args.forcings:
            raise SystemExit("--loader dataloader reads one store and no --forcings")
        set_dask_scheduler(4)
        ds = xr.open_zarr(args.dataset, chunks={})[args.variables]
        if args.select:
            ds = ds.sel({dim: slice(start or None, stop or None) for dim, (start, stop) in args.select.items()})
        lat, lon = ds.sizes["latitude"], ds.sizes["longitude"]
        self.generator = xbatcher.BatchGenerator(ds, input_dims={"time": 2, "latitude": lat, "longitude": lon},
                                                 input_overlap={"time": 1}, preload_batch=False)
        stacked = ds.isel(time=slice(0, 1)).to_stacked_array(
            new_dim="channel", sample_dims=("time", "latitude", "longitude"))
        names = [_channel_name(v, lv) for v, lv in stacked.indexes["channel"]]
        by_name = {c["name"]: c for c in json.loads(Path(args.stats).read_text())["channels"]}
        missing = [n for n in names if n not in by_name]
        if missing:
            raise SystemExit(f"{args.stats} has no statistics for {missing}")
        self.channels = self.target_channels = names
        self.mean = torch.tensor([by_name[n]["mean"] for n in names], dtype=torch.float32)[:, None, None].to(device)
        self.std = torch.tensor([by_name[n]["std"] for n in names], dtype=torch.float32)[:, None, None].to(device)
        self.device = device
        samples = XbatcherSamples(self.generator)
        # Data-parallel: each rank its shard of every epoch, as PyTorch users shard a Dataset.
        self.sampler = (torch.utils.data.DistributedSampler(samples, shuffle=True, seed=args.seed, drop_last=True)
                        if dist.is_initialized() and dist.get_world_size() > 1 else None)
        self.loader = torch.utils.data.DataLoader(
            samples, batch_size=args.batch_size, shuffle=self.sampler is None, sampler=self.sampler, drop_last=True,
            num_workers=args.workers, prefetch_factor=3 if args.workers else None,
            persistent_workers=args.workers > 0, generator=torch.Generator().manual_seed(args.seed),
            worker_init_fn=functools.partial(set_dask_scheduler, 4) if args.workers else None,
            pin_memory=device.type == "cuda")
        self.batches_per_epoch = len(self.loader)

    def epoch(self, epoch: int) -> Iterator[dict[str, torch.Tensor]]:
        if self.sampler is not None:
            self.sampler.set_epoch(epoch)
        for x, y, idx in self.loader:
            x, y = (t.to(self.device, non_blocking=True) for t in (x, y))
            yield {"input": torch.nan_to_num((x - self.mean) / self.std),
                   "target": torch.nan_to_num((y - self.mean) / self.std), "origin": idx[:, None]}


class SyntheticBatches(Batches):
    """One random batch of the shapes zarrstream would deliver, made on the device once and fed at
    every step: training with no data loading at all, the ceiling."""

    def __init__(self, args: argparse.Namespace, device: torch.device):
        shapes = zarrstream.Loader(args.dataset, args.variables, forcings=args.forcings, target_offset={"time": 1},
                                   select=args.select, batch_size=args.batch_size, drop_last=True)
        self.channels = shapes.channels
        self.target_channels = shapes.target_channels
        self.batches_per_epoch = len(shapes)
        generator = torch.Generator(device=device).manual_seed(args.seed)
        x = torch.randn(shapes.input_shape, device=device, generator=generator)
        y = torch.randn(shapes.target_shape, device=device, generator=generator)
        self.batch = {"input": x, "target": y, "origin": torch.zeros(x.shape[0], 1, dtype=torch.int64)}

    def epoch(self, epoch: int) -> Iterator[dict[str, torch.Tensor]]:
        for _ in range(self.batches_per_epoch):
            yield self.batch


def disk_read_bytes() -> int | None:
    """Bytes this process (all its threads) has had read from storage so far, not counting what the
    page cache served: Linux's /proc/self/io `read_bytes`; None where that is not available."""
    try:
        with open("/proc/self/io") as f:
            for line in f:
                if line.startswith("read_bytes:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def _share(text: str) -> float | str:
    """'auto' or a number (the loader checks its range)."""
    if text == "auto":
        return text
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a share from 0 to 1, or auto") from None


def _selection(text: str) -> tuple[str, tuple[str, str]]:
    """'time=1979-01-01:1979-01-07' → ('time', ('1979-01-01', '1979-01-07')); an empty bound is open."""
    dim, eq, bounds = text.partition("=")
    start, colon, stop = bounds.partition(":")
    if not (dim and eq and colon):
        raise argparse.ArgumentTypeError(f"{text!r}: expected DIM=START:STOP, e.g. time=1979-01-01:1979-01-07")
    return dim, (start, stop)


def _channel_name(variable: str, level: Any) -> str:
    if isinstance(level, float) and math.isnan(level):
        return variable
    return f"{variable}@{float(level):g}"


# ---------------------------------------------------------------------------------------------
# Training.


def setup_distributed(device_arg: str) -> tuple[int, int, torch.device]:
    """(rank, world size, device); joins the process group when started by torchrun."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    use_cuda = torch.cuda.is_available() if device_arg == "auto" else device_arg == "cuda"
    if use_cuda:
        local = int(os.environ.get("LOCAL_RANK", "0"))
        torch.cuda.set_device(local)
        device = torch.device("cuda", local)
    else:
        device = torch.device("cpu")
    if world > 1:
        dist.init_process_group("nccl" if use_cuda else "gloo")
    return rank, world, device


def train(args: argparse.Namespace) -> dict[str, Any]:
    rank, world, device = setup_distributed(args.device)
    torch.manual_seed(args.seed)
    source: Batches
    if args.synthetic:
        source = SyntheticBatches(args, device)
    elif args.loader == "dataloader":
        source = DataLoaderBatches(args, device)
    else:
        source = ZarrstreamBatches(args, device)
    if source.batches_per_epoch == 0:
        raise SystemExit(f"{args.dataset_name}: not one full batch of {args.batch_size} samples per epoch on this rank "
                         f"(of {world}); use a smaller --batch-size or a longer --select")
    state = [source.channels.index(name) for name in source.target_channels]
    model = UNet(len(source.channels), width=args.base_width, depth=args.depth, state=state).to(device)
    memory_format = torch.channels_last if args.channels_last and device.type == "cuda" else torch.contiguous_format
    model = model.to(memory_format=memory_format)
    torch.backends.cudnn.benchmark = args.cudnn_benchmark and device.type == "cuda"
    if world > 1:
        model = nn.parallel.DistributedDataParallel(model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
    autocast = torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda")

    # The training step's kernels on a high-priority stream: the GPU then runs the loader's decoding
    # (on its own stream, of the default, lowest priority) in what the step leaves free.
    step_stream = None
    if args.high_priority_stream and device.type == "cuda":
        torch.cuda.synchronize(device)  # the model and any synthetic batch were made on the default stream
        step_stream = torch.cuda.Stream(device, priority=-1)
        torch.cuda.set_stream(step_stream)

    # --cpu-decode-share auto: the progress lines say where the loader has taken the share.
    adaptive_share = args.cpu_decode_share == "auto" and isinstance(source, ZarrstreamBatches) and device.type == "cuda"

    # The position of the next step: (epoch, batch in that epoch). Checkpoints record it.
    epoch, first_batch, global_step = 0, 0, 0
    if args.resume:
        checkpoint = torch.load(args.checkpoint, map_location=device, weights_only=False)
        if len(checkpoint["loader"]) != world:
            raise SystemExit(f"{args.checkpoint} was written by {len(checkpoint['loader'])} ranks; resume it with "
                             f"as many (this run has {world})")
        epoch, first_batch, global_step = checkpoint["epoch"], checkpoint["batch_in_epoch"], checkpoint["step"]
        if first_batch and not source.resumable:
            raise SystemExit(f"{args.checkpoint} was taken after batch {first_batch} of epoch {epoch}: only "
                             "--loader zarrstream resumes mid-epoch")
        (model.module if world > 1 else model).load_state_dict(checkpoint["model"])
        optimizer.load_state_dict(checkpoint["optimizer"])
        source.load_state_dict(checkpoint["loader"][rank])
    epochs = args.epochs if args.epochs is not None else (math.inf if args.steps else 1)
    at = (epoch, first_batch)

    log: dict[str, Any] = {"rank": rank, "world_size": world, "device": str(device), "channels": len(source.channels),
                           "loader": "synthetic" if args.synthetic else args.loader,
                           "dataset": source.dataset_identity, "steps": [], "origins": []}
    waits: list[float] = []
    step_times: list[float] = []
    shares: list[float] = []  # with the adaptive decode share: where it stood after each step
    # On a GPU, how long each step's kernels kept the training stream busy, from its first to its
    # last (CUDA events): the rest of the step the GPU was idle for this training.
    busy_times: list[float] = []
    step_begun = torch.cuda.Event(enable_timing=True) if device.type == "cuda" else None
    step_done = torch.cuda.Event(enable_timing=True) if device.type == "cuda" else None
    samples = 0
    loss_value = float("nan")
    start = time.perf_counter()
    killed = False
    peak_gpu_used = 0  # bytes in use on the device (every allocator's, the loader's included)
    stop = bool(args.steps) and global_step >= args.steps
    page_cache_drops = 0
    disk_read_at_start = disk_read_bytes()
    if args.cold:
        sys.path.insert(0, str(ROOT / "bench"))
        from page_cache import drop_from_page_cache
    while epoch < epochs and not stop:
        if args.cold:
            # The loader may have read the first batches of this epoch already (it reads ahead):
            # what is dropped here is read again from the disk by the batches after them.
            for store in args.cold_stores:
                drop_from_page_cache(store)
            page_cache_drops += 1
        batches = source.epoch(epoch)
        for batch_in_epoch in range(first_batch, source.batches_per_epoch):
            t0 = time.perf_counter()
            batch = next(batches)
            if device.type == "cuda":
                torch.cuda.current_stream().synchronize()  # the copy is part of the wait
            waited = time.perf_counter() - t0
            if step_begun is not None:
                step_begun.record()
            model.train()
            with autocast:
                inputs = batch["input"].contiguous(memory_format=memory_format)
                loss = F.mse_loss(model(inputs), batch["target"].contiguous(memory_format=memory_format))
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            if step_done is not None:
                step_done.record()
            loss_value = loss.item()  # synchronises: the step's compute is done
            step_time = time.perf_counter() - t0
            if step_begun is not None:
                busy_times.append(step_begun.elapsed_time(step_done) / 1e3)
            if device.type == "cuda":
                free, total = torch.cuda.mem_get_info(device)
                peak_gpu_used = max(peak_gpu_used, total - free)
            global_step += 1
            samples += batch["input"].shape[0]
            waits.append(waited)
            step_times.append(step_time)
            if adaptive_share:
                shares.append(source.stats()["cpu_decode_share"])
            log["origins"].append([epoch, *batch["origin"][:, 0].tolist()])
            if rank == 0 and (global_step % args.log_every == 0):
                share = f", CPU decode share {100 * source.stats()['cpu_decode_share']:.0f} %" if adaptive_share else ""
                print(f"epoch {epoch} step {global_step}: loss {loss_value:.4f}, waited {1e3 * waited:.1f} ms "
                      f"of {1e3 * step_time:.1f} ms{share}", flush=True)
            last_of_epoch = batch_in_epoch + 1 == source.batches_per_epoch
            at = (epoch + 1, 0) if last_of_epoch else (epoch, batch_in_epoch + 1)
            if args.checkpoint and args.checkpoint_every and global_step % args.checkpoint_every == 0:
                save_checkpoint(args.checkpoint, model, optimizer, source, at, global_step, rank, world)
            killed = bool(args.stop_after) and global_step >= args.stop_after  # no final checkpoint
            if killed or (args.steps and global_step >= args.steps):
                stop = True
                break
        else:
            epoch, first_batch = epoch + 1, 0
    elapsed = time.perf_counter() - start
    if args.checkpoint and not killed:
        save_checkpoint(args.checkpoint, model, optimizer, source, at, global_step, rank, world)

    # The first step is start-up (opening, workers, the first batch, kernel selection): the rates
    # are over the steps after it.
    measured_waits = waits[1:] or waits
    measured_time = float(np.sum(step_times[1:] or step_times))
    first_samples = len(log["origins"][0]) - 1 if log["origins"] else 0
    log.update({
        "samples": samples,
        "elapsed_seconds": elapsed,
        "samples_per_second": (samples - first_samples) / measured_time if measured_time > 0 else 0.0,
        "first_step_seconds": step_times[0] if step_times else 0.0,
        "mean_wait_ms": 1e3 * float(np.mean(measured_waits)) if measured_waits else 0.0,
        "waiting_fraction": float(np.sum(measured_waits)) / measured_time if measured_time > 0 else 0.0,
        "gpu_idle_fraction": 1 - float(np.sum(busy_times[1:] or busy_times)) / measured_time
        if busy_times and measured_time > 0 else None,
        "final_loss": loss_value,
        "loader_stats": source.stats(),
        # --timeline: the loader's stages (plan, reads, decoding, scatter, the consumer's waits) per
        # batch, in seconds since it opened.
        "loader_timeline": source.timeline() if args.timeline else None,
        "gpu_decode": getattr(source, "gpu_decode_status", ""),
        "loader_threads": getattr(source, "num_threads", 0),
        "channels_last": memory_format == torch.channels_last,
        "cudnn_benchmark": torch.backends.cudnn.benchmark,
        "high_priority_stream": step_stream is not None,
        "cpu_decode_share": args.cpu_decode_share,
        "cold": args.cold,
        # Batches prepared ahead at the end: the loader lowers --prefetch where PyTorch ran short of
        # GPU memory beside GPU batches.
        "prefetch": {"asked": args.prefetch,
                     "ended": source.loader.prefetch if isinstance(source, ZarrstreamBatches) else args.prefetch},
        "page_cache_drops": page_cache_drops,
        # What the run had read from the disk (the page cache's reads not counted); None where unknown.
        "disk_read_bytes": None if disk_read_at_start is None else disk_read_bytes() - disk_read_at_start,
        "gpu_memory": {"peak_used_bytes": peak_gpu_used,
                       "total_bytes": torch.cuda.mem_get_info(device)[1],
                       "torch_peak_reserved_bytes": torch.cuda.max_memory_reserved(device),
                       # cudaMalloc failed, PyTorch freed its cached blocks and tried again: the
                       # card ran full (such steps run slower).
                       "torch_alloc_retries": torch.cuda.memory_stats(device).get("num_alloc_retries", 0)}
        if device.type == "cuda" else None,
    })
    # The epoch's iterator may be suspended mid-epoch (--stop-after, --steps): end it and the
    # loader before the process group goes.
    batches = batch = None
    source.close()
    if step_stream is not None:
        step_stream.synchronize()
        torch.cuda.set_stream(torch.cuda.default_stream(device))
    log["steps"] = [{"wait_ms": 1e3 * w, "step_ms": 1e3 * s} for w, s in zip(waits, step_times)]
    for step, share in zip(log["steps"], shares):  # where the adaptive share stood after each step
        step["cpu_decode_share"] = share
    if world > 1:
        dist.barrier()
        dist.destroy_process_group()
    return log


def save_checkpoint(path: str, model: nn.Module, optimizer: torch.optim.Optimizer, source: Batches,
                    at: tuple[int, int], step: int, rank: int, world: int) -> None:
    """Rank 0 writes the model, the optimiser, the position of the next step (`at`: epoch, batch in
    that epoch) and every rank's loader position."""
    if world > 1:
        states: list[Any] = [None] * world
        dist.all_gather_object(states, source.state_dict())
    else:
        states = [source.state_dict()]
    if rank == 0:
        state = {"model": (model.module if world > 1 else model).state_dict(), "optimizer": optimizer.state_dict(),
                 "epoch": at[0], "batch_in_epoch": at[1], "step": step, "loader": states}
        tmp = Path(f"{path}.tmp")
        torch.save(state, tmp)
        tmp.replace(path)


def summary(log: dict[str, Any]) -> str:
    lines = [f"{log['loader']} on {log['device']} x{log['world_size']}: {log['samples_per_second']:.1f} samples/s "
             f"(this rank, after the first step), first step {log['first_step_seconds']:.2f} s, waiting "
             f"{100 * log['waiting_fraction']:.1f} % of the time (mean wait {log['mean_wait_ms']:.1f} ms), "
             f"final loss {log['final_loss']:.4f}"]
    for store in log.get("dataset") or []:
        lines.append(f"  data: {store['url']} ({store['kind']} {store['id']})")
    stats = log.get("loader_stats") or {}
    if stats:
        used = stats["bytes_used"] or 1
        lines.append(f"  loader: read {stats['bytes_read'] / 1e6:.1f} MB, "
                     f"decoded {stats['bytes_decoded'] / 1e6:.1f} MB "
                     f"({stats['bytes_decoded'] / used:.2f} per byte used), {stats['cache_hits']} cache hits, "
                     f"{stats['requests']} requests; read+decode {stats['read_decode_seconds']:.2f} s, "
                     f"assemble {stats['assemble_seconds']:.2f} s (loader threads, overlapping training)")
        if stats.get("bytes_to_gpu"):
            lines.append(f"  GPU batches ({log.get('gpu_decode', '')}): "
                         f"{stats['gpu_decoded_chunks']} chunks decoded on the GPU, "
                         f"{stats['bytes_to_gpu'] / 1e6:.1f} MB copied there; "
                         f"read {stats['gpu_read_seconds']:.2f} s, "
                         f"copy + decode {stats['gpu_decode_seconds']:.2f} s, "
                         f"scatter {stats['gpu_scatter_seconds']:.2f} s")
            if log.get("cpu_decode_share") == "auto":
                lines.append("  the CPU threads' share of nvCOMP's chunks ended at "
                             f"{100 * stats['cpu_decode_share']:.0f} %")
    if log.get("gpu_idle_fraction") is not None:
        lines.append(f"  GPU idle {100 * log['gpu_idle_fraction']:.1f} % of the time after the first step "
                     "(the training stream between one step's last kernel and the next's first: waiting for "
                     "batches, and the host's work between steps)")
    memory = log.get("gpu_memory")
    if memory:
        lines.append(f"  GPU memory: at most {memory['peak_used_bytes'] / 1e9:.1f} "
                     f"of {memory['total_bytes'] / 1e9:.1f} GB in use; "
                     f"PyTorch reserved at most {memory['torch_peak_reserved_bytes'] / 1e9:.1f} GB, the rest is "
                     "the loader's batches and workspaces, CUDA contexts and other processes")
        prefetch = log.get("prefetch") or {}
        if prefetch.get("ended") != prefetch.get("asked"):
            lines.append(f"  batches prepared ahead: lowered by the loader from {prefetch['asked']} to "
                         f"{prefetch['ended']}, PyTorch having run short of GPU memory beside them")
        if memory.get("torch_alloc_retries"):
            lines.append(f"  PyTorch's allocator ran short {memory['torch_alloc_retries']} times (it freed its cache "
                         "and allocated again, which slows the step): fewer batches in flight (--prefetch) "
                         "leave it more")
    return "\n".join(lines)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("store", nargs="*", help="Zarr group (e.g. from `zarrstream synth`); several are joined, each "
                                            "variable from the first store holding it")
    p.add_argument("--dataset", help="JSON file naming the dataset (a store, a join or a concatenation), its "
                                     "variables and forcings (see above); instead of STORE")
    p.add_argument("--variables", help="comma-separated variables (NAME, NAME@LEVEL,...; default: the --dataset "
                                       f"file's, or {DEFAULT_VARIABLES})")
    p.add_argument("--forcings", help="comma-separated inputs that are not predicted: static fields of the "
                                      "stores and computed forcings (cos_latitude, ..., cos_solar_zenith_angle)")
    p.add_argument("--stats", required=True, help="normalisation file from `zarrstream stats`")
    p.add_argument("--select", type=_selection, action="append", metavar="DIM=START:STOP",
                   help="training split by coordinate labels, e.g. time=1979-01-01:1979-01-07 (repeatable)")
    p.add_argument("--epochs", type=int, help="epochs to train (default: 1, or as many as --steps needs)")
    p.add_argument("--steps", type=int, default=0, help="stop after this many steps in all, mid-epoch if need be")
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--base-width", type=int, default=32, help="channels of the first U-Net stage")
    p.add_argument("--depth", type=int, default=3, help="U-Net stages below the first")
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    p.add_argument("--channels-last", action=argparse.BooleanOptionalAction, default=True,
                   help="the model and its inputs in channels-last (NHWC) memory format on the GPU")
    p.add_argument("--cudnn-benchmark", action=argparse.BooleanOptionalAction, default=True,
                   help="let cuDNN time its convolution algorithms for these fixed shapes (GPU)")
    p.add_argument("--high-priority-stream", action=argparse.BooleanOptionalAction, default=True,
                   help="run the training step on a high-priority CUDA stream, so the loader's GPU "
                        "decoding runs in what the step leaves free (GPU)")
    p.add_argument("--loader", choices=("zarrstream", "dataloader"), default="zarrstream")
    p.add_argument("--synthetic", action="store_true", help="random batches: the training ceiling")
    p.add_argument("--shuffle", default="block", help="zarrstream's epoch order: exact, block or none")
    p.add_argument("--block-chunks", type=int, default=0,
                   help="time chunks per block of the block shuffle (0: the loader's choice)")
    p.add_argument("--prefetch", type=int, default=2,
                   help="batches prepared ahead (on a GPU each takes GPU memory: 7 GB at 0.25°, batch 16, 43 channels; "
                        "the loader lowers it where PyTorch runs short of GPU memory beside them)")
    p.add_argument("--gpu-decode", action=argparse.BooleanOptionalAction, default=True,
                   help="GPU batches: nvCOMP decodes the chunks the CPU threads leave it (default; see "
                        "--cpu-decode-share), or (--no-gpu-decode) the threads decode them all and they cross "
                        "decoded, leaving the GPU to the model")
    p.add_argument("--cpu-decode-share", type=_share, default="auto",
                   help="GPU batches: the share (0 to 1) of nvCOMP's chunks the loader's CPU threads decode "
                        "instead, so that both decode side by side; auto (default): the loader finds the share "
                        "that makes the training step's time per batch (with its wait) shortest")
    p.add_argument("--loader-threads", type=int, default=0,
                   help="zarrstream's worker threads (0: one per core; fewer leave cores to the training loop)")
    p.add_argument("--gpu-wave-mb", type=int, default=0,
                   help="GPU batches: decoded MiB per wave (0: the loader's 512); less takes less GPU memory")
    p.add_argument("--workers", type=int, default=min(8, os.cpu_count() or 1), help="DataLoader workers")
    p.add_argument("--cold", action="store_true",
                   help="read from the disk, not the page cache: the stores' files are dropped from the page "
                        "cache (posix_fadvise DONTNEED) before every epoch (local stores only)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--checkpoint", help="checkpoint file (written at the end and every --checkpoint-every steps)")
    p.add_argument("--checkpoint-every", type=int, default=0)
    p.add_argument("--resume", action="store_true", help="continue from --checkpoint (which must exist)")
    p.add_argument("--stop-after", type=int, default=0,
                   help="stop after this many steps without the final checkpoint (as a killed job would)")
    p.add_argument("--log-every", type=int, default=10)
    p.add_argument("--json-out", help="write the run's log here (ranks > 0 add .rankN)")
    p.add_argument("--timeline", action="store_true",
                   help="zarrstream: record the loader's stages per batch (plan, read and decode, scatter, the "
                        "consumer's waits) into --json-out's log, as loader_timeline")
    p.add_argument("--plot", help="write the wait/compute timeline and wait histogram here (PNG; matplotlib)")
    args = p.parse_args(argv)
    if bool(args.store) == bool(args.dataset):
        p.error("give one or more STOREs or --dataset FILE (one of the two)")
    described: dict[str, Any] = {}
    if args.dataset:
        try:
            described = read_dataset_file(Path(args.dataset))
        except (OSError, ValueError) as e:
            p.error(f"--dataset {args.dataset}: {e}")
        args.dataset_name = args.dataset
        args.dataset = described["dataset"]
    else:
        args.dataset_name = ", ".join(args.store)
        args.dataset = args.store[0] if len(args.store) == 1 else list(args.store)
    args.variables = _split_specs(args.variables) if args.variables else described.get(
        "variables", _split_specs(DEFAULT_VARIABLES))
    args.forcings = _split_specs(args.forcings) if args.forcings else described.get("forcings", [])
    args.select = dict(args.select or [])
    if args.resume and not (args.checkpoint and Path(args.checkpoint).is_file()):
        p.error(f"--resume needs --checkpoint naming an existing file (got {args.checkpoint!r})")
    if args.synthetic and args.loader != "zarrstream":
        p.error("--synthetic replaces the loader: give it without --loader")
    args.cold_stores = _store_paths(args.dataset) if args.cold else []
    not_local = [s for s in args.cold_stores if not Path(s).is_dir()]
    if not_local:
        p.error(f"--cold drops local stores from the page cache; not a local store folder: {', '.join(not_local)}")
    return args


def _store_paths(form: Any) -> list[str]:
    """The stores a dataset form (a path, a list of them, or join/concat objects) names."""
    if isinstance(form, str):
        return [form]
    if isinstance(form, list):
        return [p for f in form for p in _store_paths(f)]
    if isinstance(form, dict):
        return [p for k in ("join", "concat") for p in _store_paths(form.get(k, []))]
    return []


def read_dataset_file(path: Path) -> dict[str, Any]:
    """{"dataset": form, "variables": [...], "forcings": [...]} of a --dataset file, with the form's
    relative paths made relative to the file's folder."""
    described = json.loads(path.read_text())
    if not isinstance(described, dict) or "dataset" not in described:
        raise ValueError('expected a JSON object with "dataset" (and optionally "variables", "forcings")')
    unknown = sorted(set(described) - {"dataset", "variables", "forcings"})
    if unknown:
        raise ValueError(f"unknown keys {unknown}: expected dataset, variables, forcings")

    def resolve(form: Any) -> Any:
        if isinstance(form, str):
            return form if "://" in form else str(path.parent / form)
        if isinstance(form, list):
            return [resolve(f) for f in form]
        if isinstance(form, dict):
            return {k: resolve(v) if k in ("join", "concat") else v for k, v in form.items()}
        raise ValueError(f"dataset: {form!r} is not a path, a list or a join/concat object")

    out = {"dataset": resolve(described["dataset"])}
    for key in ("variables", "forcings"):
        value = described.get(key)
        if value is not None:
            out[key] = _split_specs(value) if isinstance(value, str) else list(value)
    return out


def _split_specs(text: str) -> list[str]:
    """'t@500,850,z' → ['t@500,850', 'z']: commas also separate levels."""
    out: list[str] = []
    for part in text.split(","):
        if out and "@" in out[-1] and part.replace(".", "", 1).lstrip("-").isdigit():
            out[-1] += "," + part
        elif part:
            out.append(part)
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    try:
        log = train(args)
    except ZarrstreamError as e:  # a store, variable, selection or stats file the loader cannot use
        raise SystemExit(f"error: {e}") from e
    # Under torchrun the DDP model, in reference cycles, still holds the Gloo process group, whose
    # worker threads end with it: collected here, while the interpreter runs, rather than in its
    # shutdown, where a Gloo thread that needs the GIL aborts the process ("terminate called
    # without an active exception", seen in the two-rank test about once in 25 runs).
    gc.collect()
    if args.json_out:
        path = Path(args.json_out)
        if log["rank"] > 0:
            path = path.with_name(f"{path.stem}.rank{log['rank']}{path.suffix}")
        path.write_text(json.dumps(log))
    if log["rank"] == 0:
        print(summary(log))
        if args.plot and not write_plot(log, Path(args.plot)):
            print("(no plot: matplotlib is not installed)")
    return log


if __name__ == "__main__":
    main()

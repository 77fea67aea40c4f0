"""zarrstream.Loader: samples of a Zarr dataset to PyTorch batches, from one process.

The C++ pipeline plans, reads, decodes and assembles batches on its own threads (the GIL is
released while it works), ``prefetch`` batches ahead; batches arrive as torch tensors over the
loader's own buffers (DLPack, no copy). See docs/loader.md.
"""

from __future__ import annotations

import datetime
import json
import os
import sys
import threading
import warnings
from typing import Any, Callable, Iterator, Mapping, Sequence

from . import _zarrstream
from ._array import _carries_credentials, _refuse_pickling_credentials, _without_credentials
from .errors import ConfigError, InvalidArgumentError

_NAN_POLICIES = ("keep",)
_ERROR_POLICIES = ("raise", "skip")


def _label(dim: str, value: Any) -> str:
    """A label of ``select[dim]`` as the coordinates read it: a number (Python or numpy), text
    (str, or UTF-8 bytes for a numpy "S" coordinate), or a date to the second ("1979-01-01",
    "1979-01-01T06:00:00") from a string, a datetime/date, a pandas timestamp or a numpy datetime64
    of any unit (which keeps its own precision: datetime64[D] selects the whole day). Errors quote
    the one value at fault."""
    if type(value).__name__ == "ndarray" and value.ndim == 0:
        value = value[()]  # a 0-d array (an xarray DataArray's .values): its numpy scalar
    if isinstance(value, str):
        return value
    if isinstance(value, bytes):  # a label of a numpy "S" coordinate
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            raise ConfigError(f"select[{dim!r}]: {value!r} is not UTF-8 text") from None
    if type(value).__name__ == "NaTType" or (
        type(value).__name__ == "datetime64" and value != value  # NaT is unequal to itself
    ):
        raise ConfigError(f"select[{dim!r}]: NaT (not a time) is not a label; use None for an "
                          "open end of a range")
    if type(value).__name__ == "datetime64":  # numpy, without importing it here
        import numpy as np

        unit = np.datetime_data(value.dtype)[0]
        if unit in ("Y", "M", "D", "h", "m", "s"):
            return str(value)
        if unit == "W":
            return np.datetime_as_string(value, unit="D")
        if value != value.astype("datetime64[s]"):
            raise ConfigError(f"select[{dim!r}]: {value!r} has a fraction of a second; labels are "
                              "dates to the second")
        return np.datetime_as_string(value, unit="s")
    if hasattr(value, "hour") and hasattr(value, "isoformat"):  # datetime, pandas.Timestamp
        if getattr(value, "microsecond", 0) or getattr(value, "nanosecond", 0):
            raise ConfigError(f"select[{dim!r}]: {value!r} has a fraction of a second; labels are "
                              "dates to the second")
        if value.tzinfo is not None:
            from datetime import timezone

            value = value.astimezone(timezone.utc).replace(tzinfo=None)
        return value.isoformat(timespec="seconds")
    if hasattr(value, "isoformat"):  # datetime.date
        return value.isoformat()
    if hasattr(value, "dtype") and hasattr(value, "item"):
        value = value.item()  # a numpy number: its Python value
        if not isinstance(value, (int, float)):
            return _label(dim, value)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f"select[{dim!r}]: {value!r} is not a label (a number, a date or text)")
    return str(value)


def _range_end(dim: str, value: Any) -> str | None:
    """A range's end: None or "" is open."""
    # `value == ""` would ask numpy to parse "" as a date: test the type first.
    return None if value is None or (isinstance(value, str) and value == "") else _label(dim, value)


def _selection(dim: str, value: Any) -> Any:
    """``select[dim]`` as the core's LabelSelection: (start, stop) or slice(start, stop) a range
    (inclusive, None an open end), a list the labels to take, anything else one label."""
    selection = _zarrstream.LabelSelection()
    selection.dim = dim
    if isinstance(value, (slice, tuple)):
        if isinstance(value, slice):
            if value.step is not None:
                raise ConfigError(f"select[{dim!r}]: a slice with a step is not supported")
            start, stop = value.start, value.stop
        elif len(value) != 2:
            raise ConfigError(f"select[{dim!r}]: a range is a (start, stop) pair, got {value!r}")
        else:
            start, stop = value
        selection.start = _range_end(dim, start)
        selection.stop = _range_end(dim, stop)
    elif isinstance(value, list):
        if not value:
            raise ConfigError(f"select[{dim!r}]: an empty list selects nothing")
        selection.values = [_label(dim, v) for v in value]
    else:
        selection.values = [_label(dim, value)]
    return selection


def _default_rank_world() -> tuple[int, int]:
    # A process group exists only where torch.distributed was imported: never import torch here
    # (output="dlpack" needs none).
    dist = sys.modules.get("torch.distributed")
    if dist is not None and dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))


def _frequency(value: Any) -> str:
    """``frequency=`` as the C++ option's text: "6h" as given, a ``timedelta`` in whole seconds."""
    if value is None:
        return ""
    if isinstance(value, datetime.timedelta):
        seconds = value.total_seconds()
        if seconds <= 0 or seconds != int(seconds):
            raise ConfigError(f"frequency={value!r}: expected a whole number of seconds above 0")
        return f"{int(seconds)}s"
    if not isinstance(value, str):
        raise ConfigError(f"frequency={value!r}: expected text such as '6h' or a datetime.timedelta")
    return value


def _dataset_form(dataset: Any) -> Any:
    """``Loader``'s dataset as JSON values: a store's URL (a str or a path), a list of datasets to
    join, ``{"join": [...], "mode": "inner"}`` or ``{"concat": [...], "dim": "time"}``, nested as
    needed (the core checks the keys; docs/loader.md)."""
    if isinstance(dataset, (str, os.PathLike)):
        return os.fspath(dataset)
    if isinstance(dataset, (list, tuple)):
        return [_dataset_form(member) for member in dataset]
    if isinstance(dataset, Mapping) and "url" in dataset:
        return {str(key): os.fspath(value) if isinstance(value, os.PathLike) else value
                for key, value in dataset.items()}
    if isinstance(dataset, Mapping):
        return {str(key): [_dataset_form(m) for m in value]
                if key in ("join", "concat") and isinstance(value, (list, tuple)) else value
                for key, value in dataset.items()}
    raise ConfigError(f"dataset {dataset!r}: expected a URL, {{\"url\": ..., \"ref\": ...}}, a "
                      'list of datasets to join, {"join": [...]} or {"concat": [...], "dim": "time"}')


def _dataset_text(form: Any, join: str | None) -> str:
    """The dataset as the core opens it: a URL, or a JSON form of several stores."""
    if join not in (None, "exact", "inner"):
        raise ConfigError(f"join={join!r}: expected 'exact' (equal time axes) or 'inner' (the "
                          "times every store holds)")
    if join is not None:
        if not isinstance(form, list):
            raise ConfigError(f"join={join!r} joins a list of stores; the dataset is {form!r}")
        form = {"join": form, "mode": join}
    return form if isinstance(form, str) else json.dumps(form)


def _dataset_urls(form: Any) -> Iterator[str]:
    """The stores' URLs in a dataset form."""
    if isinstance(form, str):
        yield form
    elif isinstance(form, list):
        for member in form:
            yield from _dataset_urls(member)
    elif isinstance(form, dict) and isinstance(form.get("url"), str):
        yield form["url"]
    elif isinstance(form, dict):
        for key in ("join", "concat"):
            if isinstance(form.get(key), list):
                yield from _dataset_urls(form[key])


def _pinned_form(form: Any, identity: list[dict[str, str]]) -> Any:
    """``form`` with each Icechunk repository in it at the snapshot the loader read (``identity``,
    one entry per store in the form's order), so that a loader opened again reads the same data
    however its branch moved since."""
    stores = iter(identity)

    def pin(member: Any) -> Any:
        if isinstance(member, str) or (isinstance(member, dict) and "url" in member):
            store = next(stores)
            url = member if isinstance(member, str) else member["url"]
            return {"url": url, "ref": store["id"]} if store["kind"] == "icechunk" else member
        if isinstance(member, list):
            return [pin(m) for m in member]
        return {key: pin(value) if key in ("join", "concat") else value
                for key, value in member.items()}

    return pin(form)


def _unsigned(name: str, value: Any, bits: int = 64) -> int:
    """``value`` as an integer option of the core, which holds it in ``bits`` unsigned bits: a
    ConfigError naming the option for anything else (not the binding's bare type error)."""
    try:
        n = int(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{name}={value!r}: expected an integer") from None
    if not 0 <= n < 1 << bits:
        raise ConfigError(f"{name}={value!r}: expected an integer from 0 to {(1 << bits) - 1}")
    return n


def _number(name: str, value: Any) -> float:
    """``value`` as a float option: a ConfigError naming the option for anything else."""
    if isinstance(value, (str, bytes)):
        raise ConfigError(f"{name}={value!r}: expected a number")
    try:
        return float(value)
    except (TypeError, ValueError, OverflowError):
        raise ConfigError(f"{name}={value!r}: expected a number") from None


def _as_list(value: str | Sequence[str] | None, name: str = "names") -> list[str]:
    """Names given as one string or a sequence of strings; a ConfigError naming the option for
    anything else."""
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    try:
        names = list(value)
    except TypeError:
        raise ConfigError(f"{name}={value!r}: expected a name or a list of names") from None
    if not all(isinstance(n, str) for n in names):
        raise ConfigError(f"{name}={value!r}: expected a name or a list of names")
    return names


def _mapping(name: str, value: Any) -> list[tuple[Any, Any]]:
    """A dimension -> value option's items (None: none); a ConfigError for anything else."""
    if value is None:
        return []
    if not isinstance(value, Mapping):
        raise ConfigError(f"{name}={value!r}: expected a mapping of dimension names")
    return list(value.items())


def _parse_device(device: Any) -> tuple[str, int | None]:
    """("cpu" | "cuda", index or None) of "cpu", "cuda", "cuda:0" or a torch.device."""
    text = str(device)
    kind, _, index = text.partition(":")
    if kind not in ("cpu", "cuda") or (index and not index.isdigit()) or (kind == "cpu" and index):
        raise ConfigError(f"device={device!r}: expected 'cpu', 'cuda' or 'cuda:N'")
    return kind, int(index) if index else None


class _TorchMemoryWatch:
    """Lowers a GPU loader's batches ahead where PyTorch runs short of GPU memory beside them: its
    caching allocator's cudaMalloc failed, so it freed every cached block and allocated again
    (``torch.cuda.memory_stats()["num_alloc_retries"]``), which slows each such step by more than a
    batch ahead saves (an H100 with a model that filled it: 96 % of the ceiling at two batches
    ahead, the allocator short 8 times in 60 steps; 98 % at one). Called once per batch taken: the
    steps between two takes that ran short are counted (not the first step, whose kernel selection
    tries large workspaces), and every `SHORT_STEPS` of them lower the prefetch by one, down to 1,
    with a warning each time."""

    SHORT_STEPS = 2

    def __init__(self, retries: Callable[[], int], device: str) -> None:
        self._retries = retries
        self._device = device
        self._takes = 0
        self._last: int | None = None
        self._short_steps = 0

    def batch_taken(self, core: Any) -> None:
        self._takes += 1
        if self._takes < 2:  # before the first step, and the first step's own retries
            return
        retries = self._retries()
        last, self._last = self._last, retries
        if last is None or retries <= last:
            return
        self._short_steps += 1
        if self._short_steps < self.SHORT_STEPS or core.prefetch <= 1:
            return
        self._short_steps = 0
        before = core.prefetch
        core.prefetch = before - 1
        warnings.warn(
            f"zarrstream.Loader: PyTorch ran short of GPU memory on {self._device} in "
            f"{self.SHORT_STEPS} steps (its allocator freed its cache and allocated again: "
            f"num_alloc_retries {retries}); the loader now prepares {before - 1} batch"
            f"{'es' if before - 1 != 1 else ''} ahead instead of {before}, which gives one batch's "
            f"GPU memory back. Pass prefetch={before - 1} to start there.",
            RuntimeWarning, stacklevel=3)


class BatchArray:
    """One tensor of a batch, for any framework (``Loader(output="dlpack")``): a DLPack producer
    over the loader's own memory (no copy), host or GPU. ``torch.from_dlpack``,
    ``cupy.from_dlpack``, ``jax.dlpack.from_dlpack`` and (host arrays) ``numpy.from_dlpack`` take
    it.

    Streams: a GPU batch is complete when it is handed out, so the consumer need not wait for it.
    The stream the consumer names (``__dlpack__(stream=...)``, DLPack's convention: None or 1 the
    legacy default stream, 2 the per-thread default, -1 none) is the one the loader waits on
    before it reuses the memory of a released batch: keep using the array on that stream, or
    synchronise before dropping it. One consumer stream per loader: the latest named.

    The memory is the loader's until every array imported from this batch, and this object, are
    gone.
    """

    __slots__ = ("_array", "_core", "_cuda_device", "shape")

    def __init__(self, array: Any, shape: tuple[int, ...], core: Any, cuda_device: int | None) -> None:
        self._array = array
        self._core = core
        self._cuda_device = cuda_device  # None: host memory
        self.shape = shape

    @property
    def device(self) -> str:
        return "cpu" if self._cuda_device is None else f"cuda:{self._cuda_device}"

    def __dlpack__(self, *, stream: int | None = None, max_version: tuple[int, int] | None = None,
                   dl_device: tuple[int, int] | None = None, copy: bool | None = None) -> Any:
        if self._cuda_device is not None and stream != -1:
            stream = 1 if stream is None else int(stream)
            if stream == 0:
                raise BufferError("__dlpack__(stream=0) is ambiguous in DLPack: pass 1 (legacy "
                                  "default stream), 2 (per-thread default) or a stream handle")
            self._core.set_consumer_stream(stream)
        kwargs = {k: v for k, v in (("max_version", max_version), ("dl_device", dl_device),
                                    ("copy", copy)) if v is not None}
        return self._array.__dlpack__(**kwargs)

    def __dlpack_device__(self) -> tuple[int, int]:
        return self._array.__dlpack_device__()

    def __repr__(self) -> str:
        return f"BatchArray(shape={self.shape}, device={self.device})"


class Loader:
    """Batches of samples of the dataset at ``url`` (a Zarr group, or one array).

    Iterating yields dicts of torch tensors: ``"input"`` [batch, time_window x channels,
    *spatial] (time-major channels: ``loader.channels`` names one step's), ``"target"``
    [batch, leads x target channels, *spatial] when ``target_offset`` is given, ``"origin"``
    int64 [batch, len(loader.sample_dims)] (each sample's first index along each sampled
    dimension), and with ``nan=<value>`` the bool masks ``"input_mask"`` / ``"target_mask"``.

    ``url`` may name several stores: a list joins them (each variable from the first store that
    holds it; their shared dimensions must have equal coordinates, or with ``join="inner"`` the
    time axis is cut to the times all hold), ``{"concat": [url_2019, url_2020], "dim": "time"}``
    concatenates stores that follow each other in time; forms nest (docs/loader.md). A member
    ``{"url": ..., "ref": ...}`` reads that Icechunk repository at its own ref.

    A static field (a variable without the time dimension, such as ``"land_sea_mask"``) named in
    ``variables`` or ``forcings`` is an input channel broadcast over every step of the window,
    read once when the loader opens and kept; it is never a target.

    A name in ``forcings`` that is no variable of the store but a computed forcing
    (``"cos_latitude"``, ``"sin_julian_day"``, ``"cos_local_time"``,
    ``"cos_solar_zenith_angle"``, ...: docs/loader.md) is computed for each sample's valid time
    and grid point, not read; it is not normalised.

    ``frequency="6h"`` (or a ``timedelta``) samples the time dimension at that frequency, a
    whole number of the store's steps: every 6th step of an hourly store, from the selection's
    first; windows, strides and ``target_offset`` count steps of it, and ``"origin"`` stays the
    store's index.

    Global grids: a longitude going once around the circle is periodic (``periodic=[dims]``
    names the periodic dimensions instead; ``[]`` none): a selection may wrap
    (``select={"longitude": (350, 10)}``, or ``(-10, 10)``), and patches sampled along it wrap,
    with a window origin at every longitude. ``patch_padding`` (``"none"``, ``"reflect"`` or a
    number, in output units) pads the other sampled dimensions (latitude) so that windows a stride
    apart cover every row; ``"origin"`` then may lie before the selection, below 0 too.

    Ensembles: ``ensemble="sample"`` makes each member of an ensemble's member dimension
    (``number``, ``member``, ``ensemble``, ``realization``, or the one ``ensemble_dim`` names) a
    sample, with its index a column of ``"origin"``; ``ensemble="channels"`` stacks the members
    into channels (``"2m_temperature#3"``, ``"temperature@500#3"``), variable-major. A channel
    without the member dimension (a static field) is the same for every member: in every
    member's sample, or one channel.

    ``missing_dates=[labels]`` leaves out every sample whose inputs or targets touch one of those
    time steps (a date is its whole period); ``missing_dates="detect"`` those touching a step at
    which some channel read has no value in its selected box (its chunks are not stored, or hold
    only NaN after CF decoding). Detection reads every stored chunk of the channels' boxes once
    when the loader opens (a full pass, like ``zarrstream stats``): ``detect_missing_dates``
    returns the labels once, to pass as ``missing_dates=[...]`` thereafter. ``stats()`` counts the
    samples left out in ``"missing_date_samples"``.

    A loop over the loader runs the rest of the current epoch; the next loop starts the next epoch
    (or call ``set_epoch``). ``state_dict()`` / ``load_state_dict()`` resume mid-epoch with the
    identical remaining batches.

    ``device="cuda"`` (torch's current device) or ``"cuda:N"`` makes batches on that GPU (under
    ``torchrun``, each rank on the device it set with ``torch.cuda.set_device``): chunks cross PCIe
    compressed, nvCOMP decodes them
    (zstd, gzip, zlib, lz4, blosc-lz4/zstd; other codecs decode on the CPU) and CUDA kernels
    assemble, cast and normalise them into the batch, with values identical to ``device="cpu"``;
    ``"origin"`` stays on the CPU. Where this build or machine cannot (``gpu_decode_status``
    says), host batches are page-locked ("pinned") and copied to the GPU asynchronously on the
    current stream. ``gpu_batches=False`` keeps that host path with ``device="cuda"``; ``True``
    makes GPU batches required. ``gpu_wave_bytes`` (0: 512 MiB) is how many decoded bytes go
    through the GPU at once (the worker threads read the next wave while one crosses, decodes
    and scatters): more gives nvCOMP more chunks per call and takes more GPU memory.
    ``gpu_decode=False`` has the worker threads decode every compressed chunk instead, which then
    crosses decoded (the GPU only copies and assembles, with the same values): for training steps
    that keep the GPU busy, on machines with cores to spare. ``cpu_decode_share`` (0 to 1) has
    them decode that share of the chunks nvCOMP would, spread over each batch, so that the CPU
    and the GPU decode side by side: for steps where neither alone keeps up. ``"auto"`` lets the
    loader find the share as it goes, starting with every chunk on the CPU (where it stays when
    the consumer waits for none of its batches): it tries shares on a grid of tenths and keeps
    the one with the shortest time per batch taken (the consumer's step, which nvCOMP's decoding
    slows, plus its wait for the batch, where the CPU falls behind), and searches again when that
    time changes (``stats()["cpu_decode_share"]`` says where it stands). ``prefetch`` batches are
    prepared ahead, each in GPU memory of its own: where PyTorch's allocator runs short of GPU
    memory beside them (it frees its cache and allocates again, which slows the step) in two steps,
    the loader prepares one fewer (down to 1) and warns (the ``prefetch`` property says where it
    stands, and sets it).
    ``pin_memory``: ``None`` pins host batches when a CUDA device is present, ``True`` requires
    it, ``False`` never pins.

    ``ref``: for an Icechunk repository at ``url`` (docs/icechunk.md), the branch, tag or
    snapshot id to read (None: branch ``main``). ``dataset_identity`` says which data was read
    (snapshot ids; digests of plain stores' metadata and of Kerchunk reference files);
    ``state_dict()`` records it and ``load_state_dict`` refuses a state of other data unless
    ``allow_dataset_change=True``.

    Variables are CF-decoded as xarray's ``open_zarr`` decodes them by default: values equal to
    ``_FillValue`` or ``missing_value`` become NaN and packed variables are unpacked
    (``x * scale_factor + add_offset``), before ``nan=`` and ``normalize``, with the values xarray
    shows (docs/loader.md, "CF decoding"). ``decode_cf=False`` delivers the values as stored.

    ``target_normalize="tendencies"`` (with ``normalize`` and ``target_offset``) delivers each
    target as its tendency for residual prediction: ((x[target] - x[last input step]) - mean_d) /
    std_d, d being the target's distance from the window's last input step in the store's steps,
    with the tendency statistics of the stats file (``zarrstream stats --tendencies d``; a file
    without them for d is a ConfigError). The difference is taken in float64 after CF decoding,
    before ``nan=`` and the cast to ``dtype``; inputs are normalised as before. GPU batches give
    the CPU's values.

    ``output="dlpack"`` yields the batch's arrays as framework-neutral ``BatchArray`` objects
    (DLPack producers for CuPy, JAX, NumPy or PyTorch) instead of torch tensors, and needs no
    torch; with ``device="cuda"`` it needs GPU batches (the host path's copy is torch's).
    ``device="cuda"`` where there is no GPU to use (no driver, no device, none visible under
    ``CUDA_VISIBLE_DEVICES``) is a ConfigError at construction, with the reason ``zarrstream
    doctor`` gives.

    Processes: a loader makes batches in the process that opened it. In a fork()ed child (a
    DataLoader worker) iterating it is a ConfigError naming fork: open one there instead. Pickled,
    a loader is its construction arguments and its ``state_dict()``: unpickling opens the same
    loader again at the same position, each Icechunk repository at the snapshot it read, however
    its branch moved since (credentials, as for arrays, never go into the pickle; a URL with
    user:password refuses to be pickled). See docs/ecosystem.md.
    """

    def __init__(
        self,
        url: str | os.PathLike | Sequence[Any] | Mapping[str, Any],
        variables: str | Sequence[str] | None = None,
        *,
        join: str | None = None,
        forcings: str | Sequence[str] | None = None,
        target_variables: str | Sequence[str] | None = None,
        sample: Mapping[str, int] | None = None,
        stride: Mapping[str, int] | None = None,
        target_offset: Mapping[str, int | Sequence[int]] | None = None,
        frequency: str | datetime.timedelta | None = None,
        missing_dates: str | Sequence[Any] | None = None,
        select: Mapping[str, Any] | None = None,
        periodic: Sequence[str] | None = None,
        patch_padding: str | float = "none",
        ensemble: str | None = None,
        ensemble_dim: str | None = None,
        batch_size: int = 1,
        shuffle: str | bool = "exact",
        seed: int = 0,
        rank: int | None = None,
        world_size: int | None = None,
        drop_last: bool = False,
        device: str = "cpu",
        dtype: Any = "float32",
        normalize: str | os.PathLike | None = None,
        target_normalize: str | None = "values",
        nan: str | float = "keep",
        decode_cf: bool = True,
        on_error: str = "raise",
        prefetch: int = 2,
        num_threads: int = 0,
        cache_bytes: int = 0,
        block_chunks: int = 0,
        block_window: int = 4,
        missing_chunks_are_errors: bool = False,
        ref: str | None = None,
        pin_memory: bool | None = None,
        gpu_batches: bool | None = None,
        gpu_wave_bytes: int = 0,
        gpu_decode: bool = True,
        cpu_decode_share: float | str = 0.0,
        timeline: bool = False,
        output: str = "torch",
    ) -> None:
        # What pickling this loader stores (rank and world_size as resolved below).
        arguments = {k: v for k, v in locals().items() if k != "self"}
        if normalize is not None and not isinstance(normalize, (str, os.PathLike)):
            raise ConfigError(f"normalize={normalize!r}: expected a path or URL")
        arguments["url"] = _dataset_form(url)
        dataset = _dataset_text(arguments["url"], join)
        if output not in ("torch", "dlpack"):
            raise ConfigError(f"output={output!r}: expected 'torch' or 'dlpack'")
        self._output = output
        torch = None
        if output == "torch":
            import torch  # the loader hands batches to PyTorch
        self._torch = torch
        o = _zarrstream.LoaderOptions()
        o.variables = _as_list(variables, "variables")
        o.forcings = _as_list(forcings, "forcings")
        o.target_variables = _as_list(target_variables, "target_variables")
        o.sample = [(str(k), _unsigned(f"sample[{k!r}]", v)) for k, v in _mapping("sample", sample)]
        o.stride = [(str(k), _unsigned(f"stride[{k!r}]", v)) for k, v in _mapping("stride", stride)]
        if target_offset is not None and not isinstance(target_offset, Mapping):
            raise ConfigError(f"target_offset={target_offset!r}: expected {{dimension: offsets}}")
        if target_offset:
            if len(target_offset) != 1:
                raise ConfigError(
                    f"target_offset names one dimension (the time dimension), got {dict(target_offset)!r}"
                )
            (dim, offsets), = target_offset.items()
            o.target_dim = str(dim)
            if not isinstance(offsets, (int, list, tuple)):
                raise ConfigError(f"target_offset[{dim!r}]={offsets!r}: expected an offset or a "
                                  "list of offsets")
            o.target_offsets = [
                _unsigned("target_offset", x)
                for x in ([offsets] if isinstance(offsets, int) else offsets)
            ]
        o.frequency = _frequency(frequency)
        if isinstance(missing_dates, str):
            if missing_dates != "detect":
                raise ConfigError(f"missing_dates={missing_dates!r}: expected 'detect' or a list "
                                  "of time labels")
            o.detect_missing_dates = True
        elif missing_dates is not None:
            o.missing_dates = [_label("missing_dates", v) for v in missing_dates]
        o.select = [_selection(str(k), v) for k, v in _mapping("select", select)]
        if periodic is not None:
            o.periodic = _as_list(periodic, "periodic")
        if isinstance(patch_padding, str) and patch_padding in ("none", "reflect"):
            o.patch_padding = patch_padding
        elif isinstance(patch_padding, (int, float)) and not isinstance(patch_padding, bool):
            o.patch_padding = repr(float(patch_padding))
        else:
            raise ConfigError(f"patch_padding={patch_padding!r}: expected 'none', 'reflect' or a "
                              "number")
        if ensemble is not None and not isinstance(ensemble, str):
            raise ConfigError(f"ensemble={ensemble!r}: expected 'sample' or 'channels'")
        o.ensemble = "none" if ensemble is None else ensemble
        if ensemble_dim is not None:
            o.ensemble_dim = str(ensemble_dim)
        if shuffle is True:
            shuffle = "exact"
        elif shuffle is False:
            shuffle = "none"
        o.shuffle = str(shuffle)
        o.seed = _unsigned("seed", seed)
        o.block_chunks = _unsigned("block_chunks", block_chunks)
        o.block_window = _unsigned("block_window", block_window)
        o.batch_size = _unsigned("batch_size", batch_size)
        default_rank, default_world = (
            _default_rank_world() if rank is None or world_size is None else (0, 1))
        o.rank = default_rank if rank is None else _unsigned("rank", rank, bits=32)
        o.world_size = (
            default_world if world_size is None else _unsigned("world_size", world_size, bits=32)
        )
        o.drop_last = bool(drop_last)
        if type(dtype).__module__ == "torch":  # a torch.dtype
            dtype = str(dtype).removeprefix("torch.")
        o.dtype = str(dtype)
        o.normalize = os.fspath(normalize) if normalize is not None else ""
        if target_normalize not in (None, "values", "tendencies"):
            raise ConfigError(f"target_normalize={target_normalize!r}: expected 'values' or "
                              "'tendencies'")
        o.target_tendencies = target_normalize == "tendencies"
        if "\0" in o.normalize:
            # The stats file is opened by path in C, where a NUL would cut the path short.
            shown = o.normalize.replace("\0", "<NUL>")
            raise InvalidArgumentError(f"normalize='{shown}' contains a NUL byte")
        if isinstance(nan, str):
            if nan not in _NAN_POLICIES:
                raise ConfigError(f"nan={nan!r}: expected 'keep' or a fill value (a number)")
        else:
            o.fill_nan = True
            o.nan_fill = _number("nan", nan)
        o.decode_cf = bool(decode_cf)
        if on_error not in _ERROR_POLICIES:
            raise ConfigError(f"on_error={on_error!r}: expected 'raise' or 'skip'")
        o.skip_bad_samples = on_error == "skip"
        o.prefetch = _unsigned("prefetch", prefetch)
        o.num_threads = _unsigned("num_threads", num_threads)
        o.cache_bytes = _unsigned("cache_bytes", cache_bytes)
        o.missing_chunks_are_errors = bool(missing_chunks_are_errors)
        o.ref = ref or ""
        o.pin_memory = None if pin_memory is None else bool(pin_memory)
        o.record_timeline = bool(timeline)
        self._device_type, device_index = _parse_device(device)
        # "cuda" without an index is torch's current device (what torch.cuda.set_device chose,
        # as data-parallel ranks do), or device 0 without torch.
        if self._device_type == "cuda" and device_index is None:
            device_index = (torch.cuda.current_device()
                            if torch is not None and torch.cuda.is_available() else 0)
        self._cuda_device = device_index
        self._device = None if torch is None else (
            torch.device("cuda", device_index) if self._device_type == "cuda" else torch.device("cpu"))
        if (self._device_type == "cuda" and torch is not None and torch.cuda.is_available()
                and device_index >= torch.cuda.device_count()):
            raise ConfigError(f"device={device!r}: no such GPU, this machine has "
                              f"{torch.cuda.device_count()} (cuda:0 to cuda:{torch.cuda.device_count() - 1})")
        # GPU batches where this build and machine make them, else pinned host batches that
        # _to_torch copies to the GPU (torch does; DLPack consumers get no such copy).
        self._placement = _zarrstream.plan_batch_placement(
            self._device_type, device_index or 0, None if gpu_batches is None else bool(gpu_batches),
            consumer_can_copy=output == "torch")
        self._gpu_batches = self._placement.device == "cuda"
        o.device = self._placement.device
        if self._device_type == "cuda":
            o.cuda_device = int(device_index)
        o.gpu_wave_bytes = _unsigned("gpu_wave_bytes", gpu_wave_bytes)
        if isinstance(cpu_decode_share, str):
            decode = _zarrstream.parse_cpu_decode_share(cpu_decode_share)
        else:
            decode = _zarrstream.DecodePlacement()
            decode.cpu_share = _number("cpu_decode_share", cpu_decode_share)
            if not 0.0 <= decode.cpu_share <= 1.0:
                raise ConfigError(f"cpu_decode_share is {decode.cpu_share}: expected a share from 0 to 1")
        decode.gpu = bool(gpu_decode)
        o.decode = decode
        self._consumer_stream: int | None = None
        # The host batch whose copy to the GPU may still be running, and the event that says when
        # it is done: its buffer goes back to the loader's pool only then.
        self._in_transfer: tuple[dict[str, Any], Any] | None = None
        # Loops over one loader in several threads: the one that finds the epoch done starts the
        # next, the others join it (the core hands each batch to one of them).
        self._epoch_lock = threading.Lock()
        self._core = _zarrstream.Loader(dataset, o)
        self._options = o
        self._memory_watch: _TorchMemoryWatch | None = None
        if self._gpu_batches and output == "torch":
            cuda = self._device
            self._memory_watch = _TorchMemoryWatch(
                lambda: torch.cuda.memory_stats(cuda).get("num_alloc_retries", 0), str(cuda))
        arguments.update(rank=o.rank, world_size=o.world_size)
        self._arguments = arguments

    @property
    def missing_dates(self) -> list[str]:
        """The time steps no sample touches (``missing_dates`` named or detected), as labels of
        the time coordinate (ISO dates to the second), in order: after ``missing_dates="detect"``,
        what to save and pass as ``missing_dates=[...]`` to skip the detection pass next time."""
        return list(self._core.missing_dates())

    def __reduce__(self):
        for url in _dataset_urls(self._arguments["url"]):
            _refuse_pickling_credentials("the loader's dataset", _without_credentials(url),
                                         _carries_credentials(url))
        arguments = dict(self._arguments)
        if isinstance(arguments.get("missing_dates"), str):  # "detect"
            # The dates this loader found: a copy (a DataLoader worker, a spawned process) leaves
            # out the same steps without reading the stores again.
            arguments["missing_dates"] = self.missing_dates
        identity = self.dataset_identity
        if isinstance(arguments["url"], str):
            if identity[0]["kind"] == "icechunk":
                arguments["ref"] = identity[0]["id"]
        elif any(store["kind"] == "icechunk" for store in identity):
            arguments["url"] = _pinned_form(arguments["url"], identity)
        return _reopen_loader, (arguments, self.state_dict())

    # -- the sample model ---------------------------------------------------------------------

    @property
    def channels(self) -> list[str]:
        """The input channels of one time step, in order (variables, then forcings)."""
        return list(self._core.input_channels)

    @property
    def target_channels(self) -> list[str]:
        """The target channels of one lead time, in order."""
        return list(self._core.target_channels)

    @property
    def sample_dims(self) -> list[str]:
        """The sampled dimensions: the columns of ``batch["origin"]``."""
        return list(self._core.sample_dims)

    @property
    def spatial_dims(self) -> list[str]:
        """The batch tensors' dimensions after [batch, channel]."""
        return list(self._core.spatial_dims)

    @property
    def input_shape(self) -> tuple[int, ...]:
        return tuple(self._core.input_shape)

    @property
    def target_shape(self) -> tuple[int, ...] | None:
        shape = tuple(self._core.target_shape)
        return shape or None

    @property
    def num_samples(self) -> int:
        """Samples in the index space (all ranks)."""
        return self._core.num_samples

    @property
    def epoch(self) -> int:
        return self._core.epoch

    def __len__(self) -> int:
        """Batches per epoch on this rank."""
        return self._core.num_batches

    # -- iteration and resumption ---------------------------------------------------------------

    def set_epoch(self, epoch: int) -> None:
        """Starts epoch ``epoch`` from its first batch (the order depends on (seed, epoch))."""
        self._core.check_process()
        self._core.set_epoch(_unsigned("epoch", epoch))

    def __iter__(self) -> Iterator[dict[str, Any]]:
        # Before anything a fork()ed child would wait on forever (a lock held at the fork).
        self._core.check_process()
        with self._epoch_lock:
            if self._core.next_batch >= self._core.num_batches:
                self._core.set_epoch(self._core.epoch + 1)
        while True:
            # A batch counts as delivered once it is yielded: an exception before that (Ctrl-C's
            # KeyboardInterrupt as the core returns, a failed conversion) puts it back, so that
            # state_dict() and the next loop start at it. Nothing between the try block and the
            # yield checks for signals.
            taken: list[Any] = []
            try:
                batch = self._core.next(taken)
                if batch is None:
                    return
                out = self._to_torch(batch) if self._output == "torch" else self._to_dlpack(batch)
            except BaseException:
                if taken:
                    self._core.put_back(taken[0])
                raise
            yield out

    def _to_dlpack(self, batch: dict[str, Any]) -> dict[str, Any]:
        # The same keys as the torch batches.
        return {key: BatchArray(batch[key], shape, self._core,
                                self._cuda_device if self._gpu_batches and key != "origin" else None)
                for key, shape in batch["shapes"].items()}

    def _to_torch(self, batch: dict[str, Any]) -> dict[str, Any]:
        torch = self._torch
        if self._gpu_batches:
            # Complete on arrival; the loader reuses a batch's memory only after the work queued on
            # this stream before the batch was released.
            stream = torch.cuda.current_stream(self._device).cuda_stream
            if stream != self._consumer_stream:
                self._core.set_consumer_stream(stream)
                self._consumer_stream = stream
            if self._memory_watch is not None:
                self._memory_watch.batch_taken(self._core)
            return {key: torch.from_dlpack(batch[key])
                    for key in ("input", "target", "input_mask", "target_mask", "origin")
                    if key in batch}
        host = {key: torch.from_dlpack(batch[key])
                for key in ("input", "target", "input_mask", "target_mask", "origin") if key in batch}
        if self._device_type == "cpu":
            return host
        if self._in_transfer is not None:
            self._in_transfer[1].synchronize()  # usually long done: a training step ran since
            self._in_transfer = None
        pinned = self._core.pinned
        out = {key: t.to(self._device, non_blocking=pinned) for key, t in host.items()}
        if pinned:
            event = torch.cuda.Event()
            event.record()
            self._in_transfer = (host, event)
        return out

    @property
    def gpu_decode_status(self) -> str:
        """How batches are made: on the CPU, or on the GPU with nvCOMP (its version) or without
        it (why: then chunks decode on the CPU and cross decoded)."""
        if self._placement.consumer_copies:
            return f"batches are made on the CPU and copied to the GPU ({self._placement.reason})"
        return self._core.gpu_decode_status

    @property
    def prefetch(self) -> int:
        """Batches prepared ahead (``prefetch``, at least 1). Lowering it keeps the batches already
        prepared or in production, starts no new one until the loader is that close, and frees the
        memory kept for reuse beyond what the new number needs (batch blocks, GPU decode
        workspaces) as the batches are released. Raising it drops the batches prepared ahead (made
        again: the position does not move). GPU batches to PyTorch lower it by themselves where
        PyTorch runs short of GPU memory beside them (see the class's documentation)."""
        return self._core.prefetch

    @prefetch.setter
    def prefetch(self, prefetch: int) -> None:
        self._core.check_process()
        self._core.prefetch = _unsigned("prefetch", prefetch)

    @property
    def num_threads(self) -> int:
        """The loader's worker threads: ``num_threads``, or by default one per core this process may
        run on, divided among torchrun's ranks on this machine (``LOCAL_WORLD_SIZE``)."""
        return self._core.num_threads

    @property
    def pinned(self) -> bool:
        """Whether batch buffers are page-locked for fast, asynchronous copies to the GPU."""
        return self._core.pinned

    @property
    def dataset_identity(self) -> list[dict[str, str]]:
        """Which data the loader reads, fixed when it opened: per store of the dataset, in the
        order the dataset names them, ``{"url": as given, "kind": ..., "id": ...}``. Kind
        ``"icechunk"``: the snapshot id read (what the branch or tag named then); ``"kerchunk"``:
        the SHA-256 of the reference file (of a Parquet reference set: its ``.zmetadata``);
        ``"zarr"``: the SHA-256 of the metadata documents as opened (the consolidated metadata
        when there is some, else the root's and every array's documents). Chunks are not hashed
        (docs/loader.md, "Resuming")."""
        return list(self._core.dataset_identity)

    def state_dict(self) -> dict[str, Any]:
        """The position after the batches delivered so far, and the identity of the data read
        (``"dataset"``: ``dataset_identity``); JSON-serialisable."""
        self._core.check_process()
        return {"sample_plan": json.loads(self._core.state_json()),
                "dataset": self.dataset_identity}

    def load_state_dict(self, state: Mapping[str, Any], *,
                        allow_dataset_change: bool = False) -> None:
        """Continues from ``state``: the next batches are those the saved loader had left.

        A state saved while reading other data than this loader reads (another Icechunk
        snapshot, a store whose metadata changed, other stores) is a ConfigError naming the store
        and both identities, since the remaining batches would not hold the data the run started
        with; ``allow_dataset_change=True`` continues anyway. States saved before ``"dataset"``
        was recorded carry only an Icechunk snapshot (``"icechunk_snapshot"``), which is compared
        instead.
        """
        self._core.check_process()
        plan = state.get("sample_plan") if isinstance(state, Mapping) else None
        if plan is None:
            raise InvalidArgumentError(f"load_state_dict: {state!r:.200} is not a state_dict() "
                                       "of a loader (no 'sample_plan')")
        if not allow_dataset_change:
            self._check_identity(state)
        try:
            text = plan if isinstance(plan, str) else json.dumps(plan, allow_nan=False)
        except (TypeError, ValueError) as e:
            raise InvalidArgumentError(f"load_state_dict: its sample_plan is not JSON: {e}") from None
        self._core.restore_state_json(text)

    def _check_identity(self, state: Mapping[str, Any]) -> None:
        """A ConfigError when ``state`` was saved reading other data than this loader reads."""
        current = self.dataset_identity
        keyword = "pass allow_dataset_change=True to continue on this data"
        if "dataset" not in state:
            # A state from before the identity was recorded: only an Icechunk snapshot, if any.
            saved = state.get("icechunk_snapshot")
            snapshots = [store for store in current if store["kind"] == "icechunk"]
            now = snapshots[0]["id"] if len(snapshots) == 1 else None
            if saved != now:
                raise ConfigError(
                    f"load_state_dict: the state was saved reading Icechunk snapshot {saved} and "
                    f"this loader reads {now} (of {self._arguments['url']}): open the loader with "
                    f"ref={saved!r} to continue the same data, or {keyword}")
            return
        saved = state["dataset"]
        if (not isinstance(saved, list) or not all(
                isinstance(s, Mapping) and all(isinstance(s.get(k), str)
                                               for k in ("url", "kind", "id")) for s in saved)):
            raise InvalidArgumentError(f"load_state_dict: its 'dataset' is {saved!r:.200}, not a "
                                       "list of {'url', 'kind', 'id'} as state_dict() writes")
        if len(saved) != len(current):
            raise ConfigError(
                f"load_state_dict: the state was saved reading {len(saved)} stores "
                f"({', '.join(s['url'] for s in saved)}) and this loader reads {len(current)} "
                f"({', '.join(s['url'] for s in current)}); {keyword}")
        for was, now in zip(saved, current):
            if (was["kind"], was["id"]) == (now["kind"], now["id"]):
                continue
            advice = (f"open the loader with ref={was['id']!r} to continue the same data, or "
                      if was["kind"] == now["kind"] == "icechunk" else "")
            raise ConfigError(
                f"load_state_dict: store {now['url']} is {now['kind']} {now['id']} now, and the "
                f"state was saved reading {was['url']} at {was['kind']} {was['id']}: the rest of "
                f"the epoch would not be the data the run started with; {advice}{keyword}")

    def stats(self) -> dict[str, Any]:
        """What the loader did: batches, bytes read/decoded/used, cache hits, stage times, the
        consumer's wait per batch (histogram over log2 microseconds), estimated read
        amplification."""
        return dict(self._core.stats())

    def timeline(self) -> list[dict[str, Any]]:
        """With ``timeline=True``: every stage so far, in order of start, as dicts with ``stage``
        ("plan", "read+decode", "assemble", "wait"), ``epoch``, ``batch``, ``thread`` and
        ``start`` / ``end`` (seconds since the loader opened); empty otherwise."""
        return list(self._core.timeline())

    def __repr__(self) -> str:
        return (
            f"zarrstream.Loader({len(self.channels)} channels, sample_dims={self.sample_dims}, "
            f"input_shape={self.input_shape}, batches={len(self)})"
        )


def detect_missing_dates(
    dataset: str | os.PathLike | Sequence[Any] | Mapping[str, Any],
    variables: str | Sequence[str] | None = None,
    *,
    join: str | None = None,
    forcings: str | Sequence[str] | None = None,
    select: Mapping[str, Any] | None = None,
    periodic: Sequence[str] | None = None,
    ensemble: str | None = None,
    ensemble_dim: str | None = None,
    decode_cf: bool = True,
    num_threads: int = 0,
    ref: str | None = None,
) -> list[str]:
    """The time steps ``Loader(..., missing_dates="detect")`` leaves out, as labels of the time
    coordinate (ISO dates to the second, in order), found once: save them and pass them as
    ``missing_dates=[...]`` to every later loader, which then skips the detection pass.

    A step is missing where some time-dependent channel read has no value in its selected box:
    the chunks holding it are not stored (in a sharded array, the inner chunks are empty in the
    shard's index) or hold only NaN after CF decoding (``_FillValue`` / ``missing_value``
    masked). This reads every stored chunk of the channels' boxes once, on ``num_threads``
    threads (a full pass, like ``zarrstream stats``); integer variables without a fill value are
    not read, their chunks' presence is enough.

    ``dataset`` takes every form ``Loader`` takes (a URL, a list to join, ``{"join": ...}``,
    ``{"concat": [...], "dim": "time"}``, ``{"url": ..., "ref": ...}``), and the other arguments
    pick channels and boxes as ``Loader``'s do. ``variables`` names every variable whose gaps count,
    targets included (the loader's default without it: every time-dependent variable), and
    ``forcings`` the stored forcings (computed ones are never missing)."""
    form = _dataset_form(dataset)
    o = _zarrstream.LoaderOptions()
    o.variables = _as_list(variables, "variables")
    o.forcings = _as_list(forcings, "forcings")
    o.select = [_selection(str(k), v) for k, v in _mapping("select", select)]
    if periodic is not None:
        o.periodic = _as_list(periodic, "periodic")
    if ensemble is not None and not isinstance(ensemble, str):
        raise ConfigError(f"ensemble={ensemble!r}: expected 'sample' or 'channels'")
    o.ensemble = "none" if ensemble is None else ensemble
    if ensemble_dim is not None:
        o.ensemble_dim = str(ensemble_dim)
    o.decode_cf = bool(decode_cf)
    o.num_threads = _unsigned("num_threads", num_threads)
    o.ref = ref or ""
    return list(_zarrstream.detect_missing_dates(_dataset_text(form, join), o))


def _reopen_loader(arguments: dict[str, Any], state: Mapping[str, Any]) -> Loader:
    """An unpickled :class:`Loader`: opened again with its construction arguments, at the position
    its ``state_dict()`` saved."""
    import inspect

    known = set(inspect.signature(Loader.__init__).parameters) - {"self"}
    unknown = sorted(map(repr, set(arguments) - known)) if isinstance(arguments, dict) else None
    if unknown is None or unknown or "url" not in arguments:
        problem = (f"its arguments are {type(arguments).__name__}, not a dict" if unknown is None
                   else f"it has unknown arguments {', '.join(unknown):.200}" if unknown
                   else "it has no url")
        raise InvalidArgumentError(f"unpickling a zarrstream loader: {problem}, which zarrstream "
                                   "does not write (the pickle was altered or is from another "
                                   "version)")
    loader = Loader(**arguments)
    loader.load_state_dict(state)
    return loader

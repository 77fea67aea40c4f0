"""The rechunk and statistics jobs from Python, whole or in parts (docs/rechunk.md, docs/stats.md).

``rechunk`` and ``stats`` do what ``zarrstream rechunk`` and ``zarrstream stats`` do, with the same
options and semantics. ``plan_rechunk`` and ``plan_stats`` cut a job into parts: small picklable
descriptions that any process runs with one call (``part.run()``), on any machine that reaches the
source and the destination; ``plan.finalise(...)`` then finishes the job once. Engines run the parts
as their tasks (``zarrstream.dask``, ``zarrstream.ray``).

The work runs in C++ with the GIL released. Ctrl-C (KeyboardInterrupt) stops a rechunk after the
slabs in flight, with its progress saved (a rerun resumes), and is raised then; an exception raised
by a progress callback stops the job the same way.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import json
import math
import os
import threading
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any, Union

from . import _zarrstream
from .errors import InvalidArgumentError, ZarrstreamError

Progress = Callable[[int, int], Any]
"""``progress(done_bytes, total_bytes)``, called on the calling thread as the work advances."""

DimSizes = Union[str, Mapping[str, Union[int, str]], None]
Selection = Union[str, Sequence[str], Mapping[str, Any], None]


def _location(url: str | os.PathLike, absolute: bool) -> str:
    """A URL or path as the C++ side takes it; a local path made absolute for parts that run in
    other processes (which may have another working directory)."""
    text = os.fspath(url)
    if absolute and "://" not in text:
        text = os.path.abspath(text)
    return text


def _snapshot_ref(url: str, ref: str | None) -> str:
    """``ref`` as the parts read it: for an Icechunk repository the snapshot id it names now (the
    branch "main" without one), so that parts run after the branch moved read the same data."""
    if not _is_text(ref) and ref is not None:
        raise InvalidArgumentError(f"ref must be a branch, tag or snapshot id, got {ref!r}")
    try:
        try:
            core = _zarrstream.open_group(url, 1, False, ref or "")
        except InvalidArgumentError:
            core = _zarrstream.open_array(url, 1, False, ref or "")
    except ZarrstreamError:
        return ref or ""  # each part fails with this error, naming its part
    return core.icechunk_snapshot or ref or ""


def _dim_sizes(value: DimSizes, what: str) -> str:
    """``{"time": 1, "level": "all"}`` or ``"time=1,level=all"`` as the CLI's text."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        return ",".join(f"{dim}={size}" for dim, size in value.items())
    raise InvalidArgumentError(f"{what}: expected 'dim=N,...' or a dict of sizes, got {value!r}")


def _texts(value: str | Sequence[str] | None, what: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, Sequence) and all(isinstance(v, str) for v in value):
        return list(value)
    raise InvalidArgumentError(f"{what}: expected a string or a list of strings, got {value!r}")


def _tendencies(value: int | str | Sequence[int | str] | None) -> list[str]:
    """``6``, ``"6h"`` or a list of such: time steps of the store or durations, as the CLI's
    ``--tendencies``."""
    items = [value] if isinstance(value, (int, str)) else value
    if items is None:
        return []
    if isinstance(items, Sequence) and all(
            isinstance(v, str) or (isinstance(v, int) and not isinstance(v, bool)) for v in items):
        return [str(v) for v in items]
    raise InvalidArgumentError("tendencies: expected time steps (6), durations (\"6h\") or a "
                               f"list of them, got {value!r}")


def _selections(value: Selection) -> list[str]:
    """``{"time": "1979:2015"}``, ``"time=1979:2015"`` or a list of such texts, as the CLI's."""
    if isinstance(value, Mapping):
        return [f"{dim}={labels}" for dim, labels in value.items()]
    return _texts(value, "select")


# What each field of a job's picklable descriptions holds. A part may have travelled (pickled to
# a Dask or Ray worker) or been built by hand: its fields are checked where it is made and again
# where it runs (unpickling makes no call to __init__), so a bad one is an InvalidArgumentError
# naming the field rather than whatever the binding would raise on it.
def _is_text(v: Any) -> bool:
    return isinstance(v, str)


def _is_texts(v: Any) -> bool:
    return isinstance(v, tuple) and all(isinstance(x, str) for x in v)


def _is_flag(v: Any) -> bool:
    return isinstance(v, bool)


def _is_count(v: Any) -> bool:  # threads: 0 (all cores) to 65536
    return isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= 1 << 16


def _is_gb(v: Any) -> bool:  # memory in GB: positive, and in bytes within 63 bits
    return (isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
            and 0 < v and v * 1e9 < 2**63)


def _check_fields(obj: Any, checks: Sequence[tuple[str, Callable[[Any], bool], str]]) -> None:
    for name, ok, expected in checks:
        value = getattr(obj, name, None)
        if not ok(value):
            raise InvalidArgumentError(
                f"{type(obj).__name__}.{name} is {value!r:.100}: expected {expected}")


def _check_part_index(obj: Any) -> None:
    index, count = getattr(obj, "index", None), getattr(obj, "count", None)
    if not (isinstance(count, int) and not isinstance(count, bool) and 1 <= count < 2**32
            and isinstance(index, int) and not isinstance(index, bool) and 0 <= index < count):
        raise InvalidArgumentError(f"{type(obj).__name__}: part {index!r:.40} of {count!r:.40} is "
                                   "no part of a job (expected 0 <= index < count < 2^32)")


_TEXT, _TEXTS, _FLAG = "a string", "a tuple of strings", "True or False"
_THREADS = "0 (all cores) to 65536 threads"


@dataclass(frozen=True)
class RechunkOptions:
    """A rechunk job's options, normalised (the CLI's, in the CLI's text forms)."""

    chunks: str = ""
    shard: str = ""
    codec: str = ""
    vars: tuple[str, ...] = ()
    select: tuple[str, ...] = ()
    stack: str = ""
    gpu_friendly: bool = False
    threads: int = 0
    memory: float = 2.0  # GB for data in flight
    ref: str = ""  # the source's Icechunk ref (plan_rechunk pins its snapshot id)

    def __post_init__(self) -> None:
        _check_fields(self, [("chunks", _is_text, _TEXT), ("shard", _is_text, _TEXT),
                             ("codec", _is_text, _TEXT), ("vars", _is_texts, _TEXTS),
                             ("select", _is_texts, _TEXTS), ("stack", _is_text, _TEXT),
                             ("gpu_friendly", _is_flag, _FLAG), ("threads", _is_count, _THREADS),
                             ("memory", _is_gb, "a positive number of GB"),
                             ("ref", _is_text, _TEXT)])

    @classmethod
    def of(cls, chunks: DimSizes = None, shard: DimSizes = None, codec: str | None = None,
           vars: str | Sequence[str] | None = None, select: Selection = None,
           stack: str | None = None, gpu_friendly: bool = False, threads: int = 0,
           memory: float = 2.0, ref: str | None = None) -> RechunkOptions:
        if not _is_gb(memory):
            raise InvalidArgumentError(f"memory must be a positive number of GB, got {memory!r}")
        if not _is_count(threads):
            raise InvalidArgumentError(f"threads must be 0 (all cores) or more, got {threads!r}")
        if ref is not None and not _is_text(ref):
            raise InvalidArgumentError(f"ref must be a branch, tag or snapshot id, got {ref!r}")
        return cls(_dim_sizes(chunks, "chunks"), _dim_sizes(shard, "shard"), codec or "",
                   tuple(_texts(vars, "vars")), tuple(_selections(select)), stack or "",
                   bool(gpu_friendly), int(threads), float(memory), ref or "")


@dataclass(frozen=True)
class RechunkReport:
    """What a rechunk run (one part, or the job) did; the fields of the CLI's summary."""

    arrays: int
    slabs_total: int
    slabs_resumed: int
    slabs_written: int
    output_bytes: int
    source_bytes_decoded: int
    read_amplification: float
    memory_bound_bytes: int
    skipped_arrays: tuple[str, ...]
    job_complete: bool
    interrupted: bool

    @classmethod
    def _of(cls, report: dict) -> RechunkReport:
        values = {f.name: report[f.name] for f in fields(cls)}
        values["skipped_arrays"] = tuple(values["skipped_arrays"])
        return cls(**values)


def _job_report(finished: RechunkReport, parts: Sequence[RechunkReport]) -> RechunkReport:
    """The job's report from its parts' (as the engines' runners ran them) and the finalise's."""
    output_bytes = sum(r.output_bytes for r in parts)
    source_bytes = sum(r.source_bytes_decoded for r in parts)
    return replace(
        finished,
        slabs_total=sum(r.slabs_total for r in parts),
        slabs_resumed=sum(r.slabs_resumed for r in parts),
        slabs_written=sum(r.slabs_written for r in parts),
        output_bytes=output_bytes,
        source_bytes_decoded=source_bytes,
        read_amplification=source_bytes / output_bytes if output_bytes else 0.0,
        memory_bound_bytes=max((r.memory_bound_bytes for r in parts), default=0),
    )


# What the engines (zarrstream.dask, zarrstream.ray) share.

PartsProgress = Callable[[int, int], Any]
"""``progress(parts_done, parts_total)``, called on the calling process as parts finish."""

PartProgress = Callable[[int, int, int], Any]
"""``part_progress(part_index, done_bytes, total_bytes)``, called on the worker running the part
as it advances (picklable; an exception it raises fails the attempt)."""


# glibc's mallopt parameters, and the thresholds a part runs with where Dask fixed them.
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
_PART_MMAP_THRESHOLD = 32 << 20  # glibc's own ceiling for the threshold it raises by itself
_PART_TRIM_THRESHOLD = 2 * _PART_MMAP_THRESHOLD  # and the trim threshold it pairs with it
_FIXED_MMAP_THRESHOLD = 128 << 10  # glibc's default, where MALLOC_TRIM_THRESHOLD_ pins it


@functools.cache
def _fixed_heap_thresholds() -> tuple[Callable, Callable, int] | None:
    """(mallopt, malloc_trim, the environment's trim threshold) in a process whose environment set
    glibc's trim threshold without its mmap threshold (as Dask's nanny starts its workers), else
    None (not glibc, or thresholds the environment chose itself)."""
    trim = os.environ.get("MALLOC_TRIM_THRESHOLD_")
    if trim is None or "MALLOC_MMAP_THRESHOLD_" in os.environ:
        return None
    try:
        trim_bytes = int(trim)
        libc = ctypes.CDLL(None)
        return libc.mallopt, libc.malloc_trim, trim_bytes
    except (ValueError, OSError, AttributeError):
        return None


_heap_lock = threading.Lock()
_parts_running = 0  # guarded by _heap_lock


@contextlib.contextmanager
def _part_heap() -> Iterator[bool]:
    """While parts run in this process, gives glibc the thresholds it reaches by itself (blocks up
    to 32 MiB from the heap, freed memory kept up to 64 MiB), where the environment fixed them;
    yields whether it did.

    Dask's nanny starts workers with ``MALLOC_TRIM_THRESHOLD_=65536``, which pins the mmap
    threshold at 128 KiB and returns the top of a heap as soon as 64 KiB there are free. Every
    stored object read, chunk decoded and c-blosc call's scratch (about twice a chunk) then took
    fresh pages, faulted in one by one: 8 parts of the 1-degree store run one after another in a
    process so made 281,000 page faults, 146,000 with these thresholds (37,000 with the slab
    buffers kept too: ``keep_slab_buffers``). When the last part running ends, the environment's
    thresholds are restored and ``malloc_trim`` returns the main heap's free memory; the worker
    threads' heaps keep what is free at their top (tens of MB) until reused, as they do without
    the variable."""
    tuning = _fixed_heap_thresholds()
    if tuning is None:
        yield False
        return
    mallopt, malloc_trim, trim_bytes = tuning
    global _parts_running
    with _heap_lock:
        if _parts_running == 0:
            mallopt(_M_MMAP_THRESHOLD, _PART_MMAP_THRESHOLD)
            mallopt(_M_TRIM_THRESHOLD, _PART_TRIM_THRESHOLD)
        _parts_running += 1
    try:
        yield True
    finally:
        with _heap_lock:
            _parts_running -= 1
            if _parts_running == 0:
                mallopt(_M_TRIM_THRESHOLD, trim_bytes)
                mallopt(_M_MMAP_THRESHOLD, _FIXED_MMAP_THRESHOLD)
                malloc_trim(0)


def _run_part(part: RechunkPart | StatsPart, part_progress: PartProgress | None) -> Any:
    """One engine task: the part, reporting its progress to `part_progress` on the worker. A
    worker runs part after part, so a rechunk part keeps its slab buffers for the next."""
    progress = functools.partial(part_progress, part.index) if part_progress else None
    with _part_heap():
        if isinstance(part, RechunkPart):
            return part._run(progress, keep_slab_buffers=True)
        return part.run(progress)


def _refuse_part_options(function: str, options: Mapping[str, Any]) -> None:
    """An engine's rechunk runs every part of a fresh or resumed job."""
    if "part" in options or "overwrite" in options:
        raise InvalidArgumentError(f"{function} runs every part; part and overwrite are options of "
                                   "zarrstream.rechunk (clear the destination first)")


def _run_rechunk(source: str, dest: str, options: RechunkOptions, part: int, parts: int,
                 overwrite: bool, finish_only: bool, progress: Progress | None,
                 keep_slab_buffers: bool = False) -> RechunkReport:
    if not isinstance(options, RechunkOptions):
        raise InvalidArgumentError(f"rechunk options: {options!r:.100} is not a RechunkOptions")
    options.__post_init__()  # an unpickled one was never checked
    for name, value in (("source", source), ("dest", dest)):
        if not isinstance(value, str):
            raise InvalidArgumentError(f"rechunk {name}: {value!r:.100} is not a path or URL")
    if not (isinstance(parts, int) and 1 <= parts < 2**32 and isinstance(part, int)
            and 0 <= part < parts):
        raise InvalidArgumentError(f"--part {part!r:.40}/{parts!r:.40} is not a part of the job "
                                   "(expected 0 <= part < parts < 2^32)")
    report = _zarrstream._rechunk(
        source, dest, options.chunks, options.shard, options.codec, options.gpu_friendly,
        list(options.vars), list(options.select), options.stack, options.threads,
        int(options.memory * 1e9), part, parts, overwrite, finish_only, progress, options.ref,
        keep_slab_buffers)
    return RechunkReport._of(report)


def rechunk(source: str | os.PathLike, dest: str | os.PathLike, *, chunks: DimSizes = None,
            shard: DimSizes = None, codec: str | None = None, vars: str | Sequence[str] | None = None,
            select: Selection = None, stack: str | None = None, gpu_friendly: bool = False,
            threads: int = 0, memory: float = 2.0, part: int = 0, parts: int = 1,
            overwrite: bool = False, progress: Progress | None = None,
            ref: str | None = None) -> RechunkReport:
    """Copies a Zarr array or group into a Zarr v3 layout for training reads, as
    ``zarrstream rechunk`` does (docs/rechunk.md): ``chunks``/``shard`` as ``"time=1,level=all"`` or
    ``{"time": 1, "level": "all"}``, ``memory`` in GB, ``part``/``parts`` as ``--part part/parts``.
    Rerunning with the same options resumes; the report's ``job_complete`` says whether the whole
    job (every part) is done. ``ref``: for an Icechunk repository at ``source``, the branch, tag
    or snapshot id to copy (None: branch ``main``)."""
    options = RechunkOptions.of(chunks, shard, codec, vars, select, stack, gpu_friendly, threads,
                                memory, ref)
    return _run_rechunk(_location(source, False), _location(dest, False), options, int(part),
                        int(parts), bool(overwrite), False, progress)


@dataclass(frozen=True)
class RechunkPart:
    """Part ``index`` of ``count`` of a rechunk job: it writes stored objects no other part writes,
    so the parts run at once, anywhere. Rerunning a part resumes from its own progress record (a
    retry after a killed worker redoes only the slabs in flight)."""

    source: str
    dest: str
    options: RechunkOptions
    index: int
    count: int

    def __post_init__(self) -> None:
        _check_fields(self, [("source", _is_text, _TEXT), ("dest", _is_text, _TEXT),
                             ("options", lambda v: isinstance(v, RechunkOptions),
                              "a RechunkOptions")])
        _check_part_index(self)

    def run(self, progress: Progress | None = None) -> RechunkReport:
        return self._run(progress, keep_slab_buffers=False)

    __call__ = run

    def _run(self, progress: Progress | None, keep_slab_buffers: bool) -> RechunkReport:
        """``keep_slab_buffers``: leave the slab buffers allocated for the next part this process
        runs (an engine worker's; at most the part's ``memory``)."""
        self.__post_init__()  # an unpickled part was never checked
        return _run_rechunk(self.source, self.dest, self.options, self.index, self.count, False,
                            False, progress, keep_slab_buffers)


@dataclass(frozen=True)
class RechunkPlan:
    """A rechunk job cut into parts (``plan_rechunk``)."""

    source: str
    dest: str
    options: RechunkOptions
    parts: tuple[RechunkPart, ...]

    def finalise(self) -> RechunkReport:
        """Finishes the job once every part has run: consolidates the metadata and records the job
        as finished (the last part to finish does this itself; then this returns at once). Copies
        nothing; parts not completed are an error naming them. A finalise that failed can be rerun."""
        return _run_rechunk(self.source, self.dest, self.options, 0, len(self.parts), False, True,
                            None)


def plan_rechunk(source: str | os.PathLike, dest: str | os.PathLike, *, parts: int,
                 chunks: DimSizes = None, shard: DimSizes = None, codec: str | None = None,
                 vars: str | Sequence[str] | None = None, select: Selection = None,
                 stack: str | None = None, gpu_friendly: bool = False, threads: int = 0,
                 memory: float = 2.0, ref: str | None = None) -> RechunkPlan:
    """Cuts the rechunk job into ``parts`` independent parts (``--part i/parts``); together they write
    exactly what one run writes. Local paths are made absolute. The destination must be empty or
    hold this very job (``overwrite`` is for one-part runs: clear the destination first).
    ``ref``: as for ``rechunk``; the parts copy the snapshot it names when the plan is made."""
    if not isinstance(parts, int) or parts < 1:
        raise InvalidArgumentError(f"parts must be a positive integer, got {parts!r}")
    src, dst = _location(source, True), _location(dest, True)
    options = RechunkOptions.of(chunks, shard, codec, vars, select, stack, gpu_friendly, threads,
                                memory, _snapshot_ref(src, ref))
    return RechunkPlan(src, dst, options,
                       tuple(RechunkPart(src, dst, options, i, parts) for i in range(parts)))


# ---------------------------------------------------------------------------------------------
# Statistics.


@dataclass(frozen=True)
class StatsPartResult:
    """A statistics part's per-channel accumulators (count, NaN count, mean, M2, min, max), which
    merge exactly (Chan et al.) with the other parts' into the job's statistics."""

    job: str  # the stats file describing the job, the same text for every part
    index: int
    count: int
    values: tuple

    def __post_init__(self) -> None:
        _check_fields(self, [("job", _is_text, _TEXT),
                             ("values", lambda v: isinstance(v, tuple), "a tuple")])
        _check_part_index(self)


def _stats_options(vars, select, tendencies, threads,
                   decode_cf) -> tuple[list[str], list[str], list[str], int, bool]:
    if not _is_count(threads):
        raise InvalidArgumentError(f"threads must be 0 (all cores) or more, got {threads!r}")
    return (_texts(vars, "vars"), _selections(select), _tendencies(tendencies), int(threads),
            bool(decode_cf))


@dataclass(frozen=True)
class StatsPart:
    """Part ``index`` of ``count`` of a statistics job: a contiguous run of its blocks."""

    dataset: str
    vars: tuple[str, ...]
    select: tuple[str, ...]
    tendencies: tuple[str, ...]
    threads: int
    decode_cf: bool
    index: int
    count: int
    ref: str = ""  # an Icechunk repository's snapshot id, pinned by plan_stats

    def __post_init__(self) -> None:
        _check_fields(self, [("dataset", _is_text, _TEXT), ("vars", _is_texts, _TEXTS),
                             ("select", _is_texts, _TEXTS), ("tendencies", _is_texts, _TEXTS),
                             ("threads", _is_count, _THREADS),
                             ("decode_cf", _is_flag, _FLAG), ("ref", _is_text, _TEXT)])
        _check_part_index(self)

    def run(self, progress: Progress | None = None) -> StatsPartResult:
        self.__post_init__()  # an unpickled part was never checked
        job, values = _zarrstream._stats_part(self.dataset, list(self.vars), list(self.select),
                                              list(self.tendencies), self.threads, self.decode_cf,
                                              self.index, self.count, progress, self.ref)
        return StatsPartResult(job, self.index, self.count, tuple(values))

    __call__ = run


def _write_stats(text: str, output: str | os.PathLike | None) -> dict:
    """Writes the stats file to `output` (when given) and returns it, warning as the CLI does
    about channels whose statistics are undefined."""
    if output is not None and os.fspath(output) != "-":
        with open(output, "w", encoding="utf-8") as f:
            f.write(text)
    result = json.loads(text)
    for c in result["channels"]:
        if c["count"] == 0:
            warnings.warn(f"channel '{c['name']}' has no values in the selection (all NaN): its "
                          "statistics are None", RuntimeWarning, stacklevel=3)
        elif c["mean"] is None or c["std"] is None:
            warnings.warn(f"channel '{c['name']}' holds infinite values: its mean or std is None",
                          RuntimeWarning, stacklevel=3)
        for steps, t in c.get("tendencies", {}).items():
            if t["count"] == 0:
                warnings.warn(f"channel '{c['name']}' has no tendency over {steps} time steps "
                              "without NaN: its statistics are None", RuntimeWarning, stacklevel=3)
    return result


@dataclass(frozen=True)
class StatsPlan:
    """A statistics job cut into parts (``plan_stats``)."""

    dataset: str
    parts: tuple[StatsPart, ...]

    def finalise(self, results: Sequence[StatsPartResult],
                 output: str | os.PathLike | None = None) -> dict:
        """Merges the parts' results (one per part, in any order) into the stats file, written to
        ``output`` when given, and returns it as a dict (undefined statistics are None)."""
        count = len(self.parts)
        by_index = {}
        for r in results:
            if isinstance(r, StatsPartResult):
                r.__post_init__()  # an unpickled result was never checked
            if not isinstance(r, StatsPartResult) or r.count != count or not 0 <= r.index < count:
                what = f"part {r.index} of {r.count}" if isinstance(r, StatsPartResult) else type(r).__name__
                raise InvalidArgumentError(
                    f"statistics of {self.dataset}: {what} is not a result of a part of this plan "
                    f"({count} parts)")
            if r.index in by_index:
                raise InvalidArgumentError(f"statistics of {self.dataset}: part {r.index} is given twice")
            by_index[r.index] = r
        missing = [i for i in range(count) if i not in by_index]
        if missing:
            raise InvalidArgumentError(
                f"statistics of {self.dataset}: no result for part(s) {', '.join(map(str, missing))} "
                f"of {count}")
        ordered = [by_index[i] for i in range(count)]
        if any(r.job != ordered[0].job for r in ordered):
            raise InvalidArgumentError(
                f"statistics of {self.dataset}: the parts' results describe different jobs "
                "(options or dataset changed between parts)")
        try:
            text = _zarrstream._finish_stats(ordered[0].job, [r.values for r in ordered])
        except TypeError:  # values of the wrong shape: not what a part returned
            raise InvalidArgumentError(
                f"statistics of {self.dataset}: the parts' values are not what parts of this plan "
                "return") from None
        return _write_stats(text, output)


def plan_stats(dataset: str | os.PathLike, *, parts: int, vars: str | Sequence[str] | None = None,
               select: Selection = None, tendencies: int | str | Sequence[int | str] | None = None,
               threads: int = 0, decode_cf: bool = True, ref: str | None = None) -> StatsPlan:
    """Cuts the statistics of ``dataset`` into ``parts`` parts; ``plan.finalise(results)`` merges
    their results into the stats file one ``stats`` run writes (equal within rounding: the merge
    order differs). Local paths are made absolute. ``ref``: as for ``stats``; the parts read the
    snapshot it names when the plan is made."""
    if not isinstance(parts, int) or parts < 1:
        raise InvalidArgumentError(f"parts must be a positive integer, got {parts!r}")
    var_list, select_list, tendency_list, threads, decode_cf = _stats_options(
        vars, select, tendencies, threads, decode_cf)
    url = _location(dataset, True)
    pinned = _snapshot_ref(url, ref)
    return StatsPlan(url, tuple(StatsPart(url, tuple(var_list), tuple(select_list),
                                          tuple(tendency_list), threads, decode_cf, i, parts,
                                          pinned)
                                for i in range(parts)))


def stats(dataset: str | os.PathLike, *, vars: str | Sequence[str] | None = None,
          select: Selection = None, tendencies: int | str | Sequence[int | str] | None = None,
          threads: int = 0, decode_cf: bool = True, output: str | os.PathLike | None = None,
          progress: Progress | None = None, ref: str | None = None) -> dict:
    """Per-channel count, NaN count, mean, std, min and max over a label selection, as
    ``zarrstream stats`` computes them (docs/stats.md), and with ``tendencies`` (time steps of the
    store, or durations like ``"6h"``) those of x[t+N] - x[t] per N: writes the stats file to
    ``output`` when given and returns it as a dict (undefined statistics are None). ``ref``: for an
    Icechunk repository (docs/icechunk.md), the branch, tag or snapshot id to read (None: branch
    ``main``)."""
    var_list, select_list, tendency_list, threads, decode_cf = _stats_options(
        vars, select, tendencies, threads, decode_cf)
    if ref is not None and not _is_text(ref):
        raise InvalidArgumentError(f"ref must be a branch, tag or snapshot id, got {ref!r}")
    job, values = _zarrstream._stats_part(_location(dataset, False), var_list, select_list,
                                          tendency_list, threads, decode_cf, 0, 1, progress,
                                          ref or "")
    return _write_stats(_zarrstream._finish_stats(job, [values]), output)

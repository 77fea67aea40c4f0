"""Rechunk and statistics jobs as tasks on a Dask cluster (``pip install 'zarrstream[dask]'``).

>>> import zarrstream.dask
>>> zarrstream.dask.rechunk("s3://bucket/era5.zarr", "s3://bucket/era5-train.zarr",
...                         gpu_friendly=True, client="tcp://scheduler:8786")

The job is cut into parts (``zarrstream.plan_rechunk``): each part is one task, writes stored
objects no other part writes, and resumes from its own progress record when rerun, so Dask may
retry it freely: a task whose worker died is rescheduled by Dask (up to its ``allowed-failures``),
one that raised is retried ``retries`` times, and either way redoes only the slabs that were in
flight. The job is finalised once, on the calling process, after every part finished. Every worker
must reach the source and the destination (a shared file system or an object store).
"""

from __future__ import annotations

import contextlib
import os
import sys
import uuid
from collections.abc import Iterator, Sequence
from typing import Any

from ._jobs import (
    PartProgress,
    PartsProgress,
    RechunkReport,
    _job_report,
    _refuse_part_options,
    _run_part,
    plan_rechunk,
    plan_stats,
)
from .errors import InvalidArgumentError


def _distributed():
    try:
        import distributed
    except ImportError as e:
        raise ImportError("zarrstream.dask needs dask.distributed: pip install 'zarrstream[dask]'") from e
    return distributed


@contextlib.contextmanager
def _connect(client: Any, workers: int | None) -> Iterator[tuple[Any, bool]]:
    """The client to submit to, and whether it is a LocalCluster of our own (then closed after)."""
    distributed = _distributed()
    if isinstance(client, distributed.Client):
        yield client, False
    elif client is None:
        n = workers or os.cpu_count() or 1
        with distributed.LocalCluster(n_workers=n, threads_per_worker=1, processes=True,
                                      dashboard_address=":0") as cluster, \
                distributed.Client(cluster) as own:
            yield own, True
    elif isinstance(client, str):
        with distributed.Client(client) as connected:
            yield connected, False
    else:
        raise InvalidArgumentError(
            f"client: expected a dask.distributed Client, a scheduler address or None, got {client!r}")


def _default_parts(client: Any) -> int:
    """Four parts per worker thread: a retry redoes little, and the load balances."""
    return 4 * max(1, sum(client.nthreads().values()))


def _run_parts(client: Any, parts: Sequence[Any], name: str, retries: int,
               progress: bool | PartsProgress, part_progress: PartProgress | None,
               timeout: float | None) -> list[Any]:
    """Runs every part as a task and returns their results in part order; raises the first part's
    error that outlived its retries, or TimeoutError after `timeout` seconds, cancelling the
    others."""
    distributed = _distributed()
    token = uuid.uuid4().hex[:8]
    futures = [client.submit(_run_part, part, part_progress,
                             key=f"zarrstream-{name}-{token}-part-{part.index}", retries=retries,
                             pure=False) for part in parts]
    try:
        if progress is True:
            distributed.progress(futures, notebook=False)
        elif callable(progress):
            done = 0
            for _ in distributed.as_completed(futures, timeout=timeout):
                done += 1
                progress(done, len(futures))
        distributed.wait(futures, timeout=timeout)
        return client.gather(futures)
    finally:
        client.cancel(futures)


def _local_threads(threads: int, own_cluster: bool, client: Any) -> int:
    """A part's threads: on our own LocalCluster, the cores shared among its workers."""
    if threads or not own_cluster:
        return threads
    return max(1, (os.cpu_count() or 1) // max(1, len(client.nthreads())))


def rechunk(source: str | os.PathLike, dest: str | os.PathLike, *, client: Any = None,
            workers: int | None = None, parts: int | None = None, retries: int = 2,
            progress: bool | PartsProgress = False, part_progress: PartProgress | None = None,
            timeout: float | None = None, **options: Any) -> RechunkReport:
    """``zarrstream.rechunk(source, dest, **options)`` as ``parts`` Dask tasks, then finalised.

    ``client``: a ``dask.distributed.Client``, a scheduler address, or None for a ``LocalCluster``
    of ``workers`` processes (default: one per core) that lives for this call. ``parts``: default
    four per worker thread; resuming an interrupted job needs the same number. ``progress``: True
    for Dask's progress bar (the dashboard shows the tasks either way), or a callable;
    ``part_progress`` reports from the workers. ``timeout``: seconds to wait for the parts before
    cancelling them and raising TimeoutError (the parts' progress stays recorded). ``threads``
    (an option) defaults, on the call's own LocalCluster, to the cores per worker. Returns the
    parts' reports summed, ``job_complete`` from the finalise.
    """
    _refuse_part_options("zarrstream.dask.rechunk", options)
    with _connect(client, workers) as (connected, own_cluster):
        options["threads"] = _local_threads(options.get("threads", 0), own_cluster, connected)
        plan = plan_rechunk(source, dest, parts=parts or _default_parts(connected), **options)
        reports = _run_parts(connected, plan.parts, "rechunk", retries, progress, part_progress,
                             timeout)
    return _job_report(plan.finalise(), reports)


def stats(dataset: str | os.PathLike, *, client: Any = None, workers: int | None = None,
          parts: int | None = None, retries: int = 2, progress: bool | PartsProgress = False,
          part_progress: PartProgress | None = None, timeout: float | None = None,
          output: str | os.PathLike | None = None, **options: Any) -> dict:
    """``zarrstream.stats(dataset, **options)`` as ``parts`` Dask tasks whose per-channel results
    merge (Chan et al.) into the stats file one run writes; ``client``, ``workers``, ``parts``,
    ``retries``, ``progress``, ``part_progress`` and ``timeout`` as for ``rechunk``. Writes
    ``output`` when given; returns the stats file as a dict."""
    with _connect(client, workers) as (connected, own_cluster):
        options["threads"] = _local_threads(options.get("threads", 0), own_cluster, connected)
        plan = plan_stats(dataset, parts=parts or _default_parts(connected), **options)
        results = _run_parts(connected, plan.parts, "stats", retries, progress, part_progress,
                             timeout)
    return plan.finalise(results, output)


if __name__ == "__main__":
    # Through the imported modules, whose functions the workers unpickle by reference.
    from zarrstream._engine_cli import main

    sys.exit(main("dask"))

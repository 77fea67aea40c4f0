"""Rechunk and statistics jobs as Ray tasks (``pip install 'zarrstream[ray]'``).

>>> import zarrstream.ray
>>> zarrstream.ray.rechunk("s3://bucket/era5.zarr", "s3://bucket/era5-train.zarr",
...                        gpu_friendly=True, address="auto")

As ``zarrstream.dask`` (whose documentation says how parts, retries and the finalise work), on
Ray: each part is a Ray task; a task whose worker process died, or that raised, is retried
``retries`` times and resumes from its part's progress record. Ray is used as it is found: an
initialised Ray session, else ``ray.init(address)`` (None: a local Ray of ``workers`` CPUs, shut
down after the call).
"""

from __future__ import annotations

import contextlib
import os
import sys
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


def _ray():
    try:
        import ray
    except ImportError as e:
        raise ImportError("zarrstream.ray needs Ray: pip install 'zarrstream[ray]'") from e
    return ray


@contextlib.contextmanager
def _connect(address: str | None, workers: int | None) -> Iterator[bool]:
    """Yields whether the Ray session is our own local one (then shut down after)."""
    ray = _ray()
    if ray.is_initialized():
        yield False
        return
    own = address is None
    ray.init(address=address, num_cpus=(workers or os.cpu_count() or 1) if own else None,
             include_dashboard=False, log_to_driver=False)
    try:
        yield own
    finally:
        ray.shutdown()


def _run_parts(parts: Sequence[Any], retries: int, progress: PartsProgress | None,
               part_progress: PartProgress | None, timeout: float | None) -> list[Any]:
    """Runs every part as a task and returns their results in part order; raises the first part's
    error that outlived its retries, or TimeoutError after `timeout` seconds, cancelling the
    others."""
    ray = _ray()
    task = ray.remote(max_retries=retries, retry_exceptions=retries > 0)(_run_part)
    refs = [task.remote(part, part_progress) for part in parts]
    try:
        pending = list(refs)
        while pending:
            ready, pending = ray.wait(pending, num_returns=1, timeout=timeout)
            if not ready:
                raise TimeoutError(f"{len(pending)} of {len(refs)} parts still running after {timeout} s")
            ray.get(ready)  # the first failure, at once
            if progress:
                progress(len(refs) - len(pending), len(refs))
        return ray.get(refs)
    except BaseException:
        for ref in refs:
            ray.cancel(ref, force=True)
        raise


def _default_parts() -> int:
    """Four parts per CPU of the cluster, as zarrstream.dask has per worker thread."""
    return 4 * max(1, int(_ray().cluster_resources().get("CPU", 1)))


def _threads(threads: int, own: bool) -> int:
    """A part's threads: on our own local Ray, one per task (Ray runs one task per CPU)."""
    return threads if threads or not own else 1


def rechunk(source: str | os.PathLike, dest: str | os.PathLike, *, address: str | None = None,
            workers: int | None = None, parts: int | None = None, retries: int = 2,
            progress: PartsProgress | None = None, part_progress: PartProgress | None = None,
            timeout: float | None = None, **options: Any) -> RechunkReport:
    """``zarrstream.rechunk(source, dest, **options)`` as ``parts`` Ray tasks (default: four per
    CPU of the cluster), then finalised; the arguments as ``zarrstream.dask.rechunk``'s, with
    ``address`` (``"auto"``, ``"ray://head:10001"``, ...) for the Dask client."""
    _refuse_part_options("zarrstream.ray.rechunk", options)
    with _connect(address, workers) as own:
        options["threads"] = _threads(options.get("threads", 0), own)
        plan = plan_rechunk(source, dest, parts=parts or _default_parts(), **options)
        reports = _run_parts(plan.parts, retries, progress, part_progress, timeout)
    return _job_report(plan.finalise(), reports)


def stats(dataset: str | os.PathLike, *, address: str | None = None, workers: int | None = None,
          parts: int | None = None, retries: int = 2, progress: PartsProgress | None = None,
          part_progress: PartProgress | None = None, timeout: float | None = None,
          output: str | os.PathLike | None = None, **options: Any) -> dict:
    """``zarrstream.stats(dataset, **options)`` as ``parts`` Ray tasks merged into the stats file
    one run writes; the arguments as ``rechunk``'s. Writes ``output`` when given; returns the stats
    file as a dict."""
    with _connect(address, workers) as own:
        options["threads"] = _threads(options.get("threads", 0), own)
        plan = plan_stats(dataset, parts=parts or _default_parts(), **options)
        results = _run_parts(plan.parts, retries, progress, part_progress, timeout)
    return plan.finalise(results, output)


if __name__ == "__main__":
    # Through the imported modules, whose functions the workers unpickle by reference.
    from zarrstream._engine_cli import main

    sys.exit(main("ray"))

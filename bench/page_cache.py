"""A local store read from the disk rather than the page cache: its files dropped from the cache
(posix_fadvise DONTNEED: clean pages, no privileges needed) and the disk's own read rate over them.
Used by gpu_bench.py --cold, train_matrix.py --cold and examples/train_unet.py --cold."""

from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path


def store_files(store: str | Path) -> list[str]:
    """Every file below the store's folder."""
    return [os.path.join(root, name) for root, _, files in os.walk(store) for name in files]


def drop_from_page_cache(store: str | Path) -> int:
    """Drops the store's files from the page cache; returns their bytes. A store that is not a local
    folder is an error naming it (an object store has no page cache here to drop)."""
    if not Path(store).is_dir():
        raise ValueError(f"{store} is not a local store folder: only those can be dropped from the page cache")
    total = 0
    for path in store_files(store):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fdatasync(fd)  # dirty pages are not dropped: written ones first go to the disk
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            total += os.fstat(fd).st_size
        finally:
            os.close(fd)
    return total


def read_cold(store: str | Path, threads: int | None = None) -> dict:
    """Every file of the store read once from the disk (dropped from the cache first), 16 MiB at a
    time on `threads` threads (one per core): the rate the disk delivers the store at."""
    drop_from_page_cache(store)
    files = store_files(store)

    def read(path: str) -> int:
        n = 0
        with open(path, "rb", buffering=0) as f:
            while chunk := f.read(1 << 24):
                n += len(chunk)
        return n

    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=threads or os.cpu_count()) as pool:
        total = sum(pool.map(read, files))
    seconds = time.perf_counter() - start
    return {"seconds": seconds, "stored_bytes": total, "stored_gb_per_s": total / seconds / 1e9}

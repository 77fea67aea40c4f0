"""What page-locking fresh host memory costs, and how much of it is faulting the pages in.

The loader pins its decode workspaces' staging (about 0.55 GB each, two per batch in flight) when
the first batches are made, so their pinning is part of the time to the first batch
(docs/benchmarks.md, "The staging faulted in before it is pinned"). For fresh anonymous memory of
--mib MiB (advised onto transparent huge pages unless --no-huge-pages), best of --repeats:

* pinned as it is (cudaHostRegister faults every page in on the calling thread);
* faulted in first by 1 and by --threads threads (a memset per slice), then pinned;
* --ranges ranges pinned from as many threads at once, as they are and each faulted in first by
  --threads / --ranges threads (the driver pins one range at a time);
* PyTorch's own pinned allocation (``torch.empty(..., pin_memory=True)``) for reference.

    python3 bench/gpu/pin_bench.py [--mib 512] [--threads 16] [--ranges 3]

Needs PyTorch with CUDA (``torch.cuda.cudart()`` for cudaHostRegister).
"""

from __future__ import annotations

import argparse
import ctypes
import mmap
import threading
import time

HUGE_PAGE = 2 << 20
libc = ctypes.CDLL("libc.so.6")
libc.memset.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t]
libc.memset.restype = ctypes.c_void_p


def fresh(size: int, huge: bool) -> tuple[mmap.mmap, int]:
    """Anonymous memory no page of which is in yet, aligned to a huge page: (mapping, address)."""
    mapping = mmap.mmap(-1, size + HUGE_PAGE)
    address = ctypes.addressof(ctypes.c_char.from_buffer(mapping))
    aligned = (address + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1)
    if huge:
        mapping.madvise(mmap.MADV_HUGEPAGE, aligned - address, size)
    return mapping, aligned


def touch(address: int, size: int, threads: int) -> None:
    """Faults [address, address + size) in from `threads` threads (ctypes calls release the GIL)."""
    per = size // threads
    workers = [threading.Thread(target=libc.memset, args=(address + i * per, 0, per)) for i in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mib", type=int, default=512, help="size of each range")
    p.add_argument("--threads", type=int, default=16, help="threads that fault a range in")
    p.add_argument("--ranges", type=int, default=3, help="ranges pinned at once")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--no-huge-pages", action="store_true")
    args = p.parse_args()

    import torch

    torch.zeros(1, device="cuda")  # the context, before any clock
    cudart = torch.cuda.cudart()
    size, huge = args.mib << 20, not args.no_huge_pages

    def register(address: int) -> None:
        if (err := cudart.cudaHostRegister(address, size, 0)) != 0:
            raise RuntimeError(f"cudaHostRegister: {err}")

    print(f"{torch.cuda.get_device_name()}: {args.mib} MiB of fresh memory, "
          f"{'transparent huge pages (madvise)' if huge else '4 KiB pages'}, best of {args.repeats}")
    print("| how | fault in, ms | pin, ms | total, ms |")
    print("|---|---:|---:|---:|")
    for threads in (0, 1, args.threads):
        best = None
        for _ in range(args.repeats):
            mapping, address = fresh(size, huge)
            t0 = time.perf_counter()
            if threads:
                touch(address, size, threads)
            t1 = time.perf_counter()
            register(address)
            t2 = time.perf_counter()
            cudart.cudaHostUnregister(address)
            mapping.close()
            if best is None or t2 - t0 < best[0] + best[1]:
                best = (t1 - t0, t2 - t1)
        how = "pinned as it is" if not threads else f"faulted in by {threads} thread(s), then pinned"
        print(f"| {how} | {best[0] * 1e3:.0f} | {best[1] * 1e3:.0f} | {sum(best) * 1e3:.0f} |")

    per_range = max(1, args.threads // args.ranges)
    for threads in (0, per_range):
        ranges = [fresh(size, huge) for _ in range(args.ranges)]

        def one(address: int, threads: int = threads) -> None:
            if threads:
                touch(address, size, threads)
            register(address)

        workers = [threading.Thread(target=one, args=(address,)) for _, address in ranges]
        t0 = time.perf_counter()
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        total = time.perf_counter() - t0
        for mapping, address in ranges:
            cudart.cudaHostUnregister(address)
            mapping.close()
        how = f"{args.ranges} ranges from {args.ranges} threads at once, " + (
            "as they are" if not threads else f"each faulted in by {threads} threads first")
        print(f"| {how} | | | {total * 1e3:.0f} |")

    t0 = time.perf_counter()
    pinned = torch.empty(size, dtype=torch.uint8, pin_memory=True)
    print(f"| torch.empty(pin_memory=True) | | | {(time.perf_counter() - t0) * 1e3:.0f} |")
    del pinned


if __name__ == "__main__":
    main()

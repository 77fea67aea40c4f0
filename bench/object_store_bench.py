"""Reading a Zarr array over HTTP with added latency: zarrstream vs tensorstore vs zarr-python.

nginx (Debian) serves a zarr-python-written store on loopback; the fault proxy of the tests
(tests/object_servers.py) sits in front of it and delays every response by --latency-ms, standing
in for an object store's round trip. Each reader reads the whole array once per repetition (after
a warm-up read); reported are throughput of decoded bytes and HTTP requests per stored chunk (from
the proxy's log). Peers: tensorstore's http kvstore, zarr-python through obstore's HTTPStore and
through fsspec's HTTPFileSystem (aiohttp).

The proxy is Python (asyncio, one thread): on a small machine it, not the readers, may bound the
throughput; --latency-ms 0 shows that ceiling. Run:

    .venv/bin/python bench/object_store_bench.py [--latency-ms 20] [--chunks 64] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from object_servers import FaultProxy, Nginx  # noqa: E402


def make_store(root: Path, chunks: int, side: int) -> Path:
    import zarr

    path = root / "bench.zarr"
    rng = np.random.default_rng(0)
    base = np.linspace(0, 50, side * side, dtype=np.float32).reshape(side, side)
    a = zarr.create_array(path, shape=(chunks, side, side), chunks=(1, side, side),
                          dtype="float32", zarr_format=3)
    for t in range(chunks):
        a[t] = base + rng.normal(0, 1, (side, side)).astype(np.float32).round(1)
    return path


def read_zarrstream(url: str):
    import zarrstream

    return zarrstream.open_array(url).read()


def read_tensorstore(url: str):
    import tensorstore as ts

    arr = ts.open({"driver": "zarr3", "kvstore": url + "/"}).result()
    return arr.read().result()


def read_zarr_obstore(url: str):
    import obstore.store
    import zarr
    from zarr.storage import ObjectStore

    http = obstore.store.HTTPStore.from_url(url, client_options={"allow_http": True})
    store = ObjectStore(http, read_only=True)
    return zarr.open_array(store, mode="r")[...]


def read_zarr_fsspec(url: str):
    import zarr

    return zarr.open_array(url, mode="r")[...]


READERS = {
    "zarrstream": read_zarrstream,
    "tensorstore": read_tensorstore,
    "zarr-python+obstore": read_zarr_obstore,
    "zarr-python+fsspec": read_zarr_fsspec,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--latency-ms", type=float, default=20.0)
    parser.add_argument("--chunks", type=int, default=64, help="stored chunks (one per time step)")
    parser.add_argument("--side", type=int, default=256, help="chunk side (float32 side x side)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--readers", default=",".join(READERS))
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        path = make_store(tmp / "data", args.chunks, args.side)
        expected = read_zarrstream(str(path))
        stored = sum(p.stat().st_size for p in (path / "c").rglob("*") if p.is_file())
        nginx = Nginx(tmp / "data", tmp / "nginx")
        proxy = FaultProxy(nginx.port, latency=args.latency_ms / 1000)
        url = f"{proxy.url}/bench.zarr"
        results = []
        try:
            for name in args.readers.split(","):
                reader = READERS[name]
                try:
                    got = reader(url)  # warm-up (and connection set-up)
                except Exception as e:  # a peer that cannot read the store is reported, not fatal
                    results.append({"reader": name, "error": f"{type(e).__name__}: {e}"})
                    continue
                np.testing.assert_array_equal(np.asarray(got), expected)
                times = []
                proxy.configure(latency=args.latency_ms / 1000)
                for _ in range(args.repeat):
                    start = time.perf_counter()
                    reader(url)
                    times.append(time.perf_counter() - start)
                requests = len(proxy.requests()) / args.repeat
                best = min(times)
                results.append({
                    "reader": name,
                    "best_s": round(best, 3),
                    "median_s": round(sorted(times)[len(times) // 2], 3),
                    "decoded_MB_per_s": round(expected.nbytes / best / 1e6, 1),
                    "stored_MB_per_s": round(stored / best / 1e6, 1),
                    "requests": requests,
                    "requests_per_chunk": round(requests / args.chunks, 2),
                })
        finally:
            proxy.stop()
            nginx.stop()

    setup = {"latency_ms": args.latency_ms, "chunks": args.chunks,
             "chunk_bytes": args.side * args.side * 4, "stored_bytes": stored,
             "cpus": os.cpu_count()}
    if args.json:
        print(json.dumps({"setup": setup, "results": results}, indent=2))
        return
    print(f"setup: {setup}")
    print(f"{'reader':24} {'best s':>8} {'median s':>9} {'decoded MB/s':>13} {'req/chunk':>10}")
    for r in results:
        if "error" in r:
            print(f"{r['reader']:24} error: {r['error'][:100]}")
        else:
            print(f"{r['reader']:24} {r['best_s']:>8} {r['median_s']:>9} "
                  f"{r['decoded_MB_per_s']:>13} {r['requests_per_chunk']:>10}")


if __name__ == "__main__":
    main()

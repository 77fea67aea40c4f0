"""Reading a Zarr array from an HTTP server with an object store's latency: zarrstream vs peers.

nginx (Debian) serves a zarr-python-written store on loopback, one worker process per core, and
holds every response for --latency-ms before sending it (the echo module's non-blocking
echo_sleep: requests wait concurrently, as they do at S3 or GCS, and no proxy process sits in the
way). Two kinds of measurement, in the same run:

- the server's saturated throughput: wrk (Debian) fetching the stored chunks round robin over
  many keep-alive connections, nothing decoded: the most any reader could get from this server on
  this machine (wrk shares the machine's cores with nginx, as the readers do);
- each reader reading the whole array, once to warm up and then --repeat times, each in its own
  child process (so one reader's thread pools and connections never serve another's).

"zarrstream-open" opens the array once and reads it per repetition (the "zarrstream" row opens
it for every read, metadata and new connections included).

"zarrstream-transport" is zarrstream's HTTP store alone: every stored chunk fetched whole, as many
requests in flight as the zarrstream row keeps, the bytes dropped (`Store.receive`): its CPU
seconds per stored GB split the zarrstream row's into receiving and decoding.

Reported per reader: stored and decoded MB/s (best repetition; stored MB/s also as the mean),
the share of the server's saturated throughput, the ratio to zarrstream, HTTP requests per stored
chunk (nginx's access log), and the reader's CPU seconds (user + system, all its threads) per
stored GB. Peers: tensorstore's http kvstore, zarr-python 3 through obstore's HTTPStore and
through fsspec's HTTPFileSystem (aiohttp), each with its default concurrency and, as "...-tuned"
rows, with its concurrency limit raised to zarrstream's per-host limit. Where a CUDA device is
present, "zarrstream-gpu" reads the array into GPU memory through the loader's GPU batches:
nvCOMP decodes, so the reader's CPU only receives (the product's path to training); its loader is
opened once and each read is one epoch (see ZarrstreamGpuEpochs).

    python bench/object_store_bench.py [--latency-ms 20] [--chunks 512] [--repeat 3] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from host import describe, machine  # noqa: E402
from object_servers import Nginx  # noqa: E402

# zarrstream's default requests in flight per host (TransportOptions::max_in_flight_per_host in
# src/store/curl_transport.h; `zarrstream doctor` shows it): the transport row keeps as many, and
# the "-tuned" peers are given as many.
TUNED_CONCURRENCY = 256


def make_store(root: Path, chunks: int, side: int) -> Path:
    """An ERA5-like field per time step, one zstd chunk per step (zarr-python's default codec)."""
    import zarr

    path = root / "bench.zarr"
    rng = np.random.default_rng(0)
    y, x = np.meshgrid(np.linspace(0, 3, side), np.linspace(0, 6, side), indexing="ij")
    base = (280 + 20 * np.sin(y) * np.cos(x)).astype(np.float32)
    a = zarr.create_array(path, shape=(chunks, side, side), chunks=(1, side, side),
                          dtype="float32", zarr_format=3,
                          dimension_names=["time", "latitude", "longitude"])
    for t in range(chunks):
        a[t] = base + rng.normal(0, 1, (side, side)).astype(np.float32).round(2)
    return path


# ---------------------------------------------------------------------------------------------
# Readers (each runs in a child process: `object_store_bench.py --child NAME URL`).


def read_zarrstream(url: str):
    import zarrstream

    return zarrstream.open_array(url).read()


class ZarrstreamOpenArray:
    """The array opened once, each read its `read()`: a reader that keeps its array (metadata,
    HTTP connections, thread pools) between reads, as a training job or a notebook does; the
    `zarrstream` row opens the array for every read."""

    def __init__(self):
        self.array = None

    def __call__(self, url: str):
        import zarrstream

        if self.array is None:
            self.array = zarrstream.open_array(url)
        return self.array.read()


class ZarrstreamGpuEpochs:
    """The array into GPU memory through the loader's GPU batches (nvCOMP decodes; the reader's
    CPU only receives), batches of 128 time steps copied into one tensor. The loader is opened once,
    as for training (its start-up pins staging memory and allocates GPU workspaces), and each read
    is its next epoch: the pipeline runs on into the next epoch's first batches, as in training."""

    def __init__(self):
        self.loader = None
        self.epoch = 0

    def __call__(self, url: str):
        import torch
        import zarrstream

        if self.loader is None:
            # 8 batches of 128 chunks ahead: a batch's reads all finish before its decode, so
            # the per-host limit (256) stays full only with several times it requested.
            self.loader = zarrstream.Loader(url, batch_size=128, shuffle="none", device="cuda",
                                            gpu_batches=True, prefetch=8)
        self.loader.set_epoch(self.epoch)
        self.epoch += 1
        out = None
        for batch in self.loader:
            x, first = batch["input"][:, 0], int(batch["origin"][0, 0])  # shuffle "none": in order
            if out is None:
                out = torch.empty((self.loader.num_samples, *x.shape[1:]), dtype=x.dtype,
                                  device="cuda")
            out[first:first + len(x)] = x
        torch.cuda.synchronize()
        return out


def receive_zarrstream(url: str):
    """zarrstream's transport alone: every stored chunk fetched whole through the same HTTP store,
    as many requests in flight as its reads keep (the per-host limit), nothing decoded. Its CPU
    seconds per stored GB against the zarrstream row's split receiving from decoding."""
    import zarrstream
    from zarrstream import _zarrstream

    steps = zarrstream.open_array(url).shape[0]
    keys = [f"c/{t}/0/0" for t in range(steps)]  # make_store's layout: one chunk per time step
    return _zarrstream.open_store(url).receive(keys, in_flight=TUNED_CONCURRENCY)


def tensorstore_reader(concurrency: int | None):
    def read(url: str):
        import tensorstore as ts

        spec = {"driver": "zarr3", "kvstore": url + "/"}
        if concurrency is not None:
            spec["context"] = {"http_request_concurrency": {"limit": concurrency}}
        return ts.open(spec).result().read().result()

    return read


def zarr_obstore_reader(concurrency: int | None):
    def read(url: str):
        import obstore.store
        import zarr
        from zarr.storage import ObjectStore

        if concurrency is not None:
            zarr.config.set({"async.concurrency": concurrency})
        http = obstore.store.HTTPStore.from_url(url, client_options={"allow_http": True})
        return zarr.open_array(ObjectStore(http, read_only=True), mode="r")[...]

    return read


def zarr_fsspec_reader(concurrency: int | None):
    def read(url: str):
        import zarr

        if concurrency is not None:
            zarr.config.set({"async.concurrency": concurrency})
        return zarr.open_array(url, mode="r")[...]

    return read


READERS = {
    "zarrstream": read_zarrstream,
    "zarrstream-open": ZarrstreamOpenArray,  # a class: the array opened once, read per repetition
    "zarrstream-gpu": ZarrstreamGpuEpochs,  # a class: one instance per child, called per read
    "zarrstream-transport": receive_zarrstream,  # bytes received, nothing decoded
    "tensorstore": tensorstore_reader(None),
    "tensorstore-tuned": tensorstore_reader(TUNED_CONCURRENCY),
    "zarr-python+obstore": zarr_obstore_reader(None),
    "zarr-python+obstore-tuned": zarr_obstore_reader(TUNED_CONCURRENCY),
    "zarr-python+fsspec": zarr_fsspec_reader(None),
    "zarr-python+fsspec-tuned": zarr_fsspec_reader(TUNED_CONCURRENCY),
}


def default_readers() -> list[str]:
    try:
        import torch

        gpu = torch.cuda.is_available()
    except ImportError:
        gpu = False
    return [name for name in READERS if gpu or name != "zarrstream-gpu"]


def child(name: str, url: str, repeat: int, expected_path: str, stored_bytes: int) -> None:
    """Reads the array once to warm up, checks it (the transport row: the bytes received against
    `stored_bytes`), then `repeat` timed reads; prints JSON."""
    reader = READERS[name]
    stateful = isinstance(reader, type)  # a class: its instance keeps a pipeline between reads
    if stateful:
        reader = reader()
    try:
        got = reader(url)
        got = got.cpu().numpy() if hasattr(got, "cpu") else got
    except Exception as e:  # a peer that cannot read the store is reported, not fatal
        print(json.dumps({"error": f"{type(e).__name__}: {e}"}))
        return
    if name == "zarrstream-transport":
        if got != stored_bytes:
            print(json.dumps({"error": f"received {got} bytes of the {stored_bytes} stored"}))
            return
    elif not np.array_equal(np.asarray(got), np.load(expected_path)):
        print(json.dumps({"error": "read values differ from the stored array"}))
        return
    print("warm", flush=True)  # the parent clears the access log here
    sys.stdin.readline()
    untimed = 0
    if stateful:
        # A reader that keeps its pipeline running (the loader) read ahead into the next epoch
        # while this process compared the values: one more untimed read takes that head start,
        # so the timed reads are steady ones (each gets the read-ahead the one before made).
        reader(url)
        untimed = 1
    times = []
    cpu_start = resource.getrusage(resource.RUSAGE_SELF)
    for _ in range(repeat):
        start = time.perf_counter()
        reader(url)
        times.append(time.perf_counter() - start)
    cpu_end = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (cpu_end.ru_utime - cpu_start.ru_utime) + (cpu_end.ru_stime - cpu_start.ru_stime)
    print(json.dumps({"times": times, "cpu_s_per_read": cpu / repeat, "untimed_reads": untimed}))


def run_reader(name: str, url: str, repeat: int, expected_path: Path, stored_bytes: int,
               nginx: Nginx) -> dict:
    proc = subprocess.Popen(
        [sys.executable, __file__, "--child", name, url, "--repeat", str(repeat),
         "--expected", str(expected_path), "--stored-bytes", str(stored_bytes)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    if line.strip() == "warm":
        nginx.clear_log()
        proc.stdin.write("\n")
        proc.stdin.flush()
        line = proc.stdout.readline()
    proc.wait()
    if not line:
        return {"error": f"child exited with status {proc.returncode}"}
    result = json.loads(line)
    if "times" in result:
        result["requests"] = len(nginx.requests()) / (repeat + result.pop("untimed_reads"))
    return result


# ---------------------------------------------------------------------------------------------
# The server's saturated throughput.

WRK_SCRIPT = """
local paths = {%s}
local n = 0
request = function()
  n = n + 1
  return wrk.format("GET", paths[(n %% #paths) + 1])
end
"""


def saturate(url: str, paths: list[str], connections: list[int], seconds: int,
             threads: int, workdir: Path) -> list[dict]:
    """wrk over `paths` at each connection count; requests per second for each."""
    wrk = shutil.which("wrk")
    if wrk is None:
        raise SystemExit("wrk is not installed: run scripts/install-deps.sh (Debian package 'wrk')")
    script = workdir / "chunks.lua"
    script.write_text(WRK_SCRIPT % ", ".join(f'"{p}"' for p in paths))
    out = []
    for c in connections:
        text = subprocess.run(
            [wrk, "-t", str(min(threads, c)), "-c", str(c), "-d", f"{seconds}s", "-s", str(script),
             url], capture_output=True, text=True, check=True).stdout
        rate = float(re.search(r"Requests/sec:\s+([\d.]+)", text).group(1))
        errors = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
        if errors:
            raise SystemExit(f"wrk got {errors.group(1)} error responses from nginx:\n{text}")
        out.append({"connections": c, "requests_per_s": rate})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--latency-ms", type=float, default=20.0)
    parser.add_argument("--chunks", type=int, default=512, help="stored chunks (one per time step)")
    parser.add_argument("--side", type=int, default=512, help="chunk side (float32 side x side)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--readers", default=",".join(default_readers()),
                        help="default: every reader (zarrstream-gpu where a CUDA device is present)")
    parser.add_argument("--server-workers", type=int, default=os.cpu_count(),
                        help="nginx worker processes (default: one per core)")
    parser.add_argument("--wrk-connections", default="64,256",
                        help="connection counts wrk saturates the server with (best is reported)")
    parser.add_argument("--wrk-seconds", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--expected", help=argparse.SUPPRESS)
    parser.add_argument("--stored-bytes", type=int, help=argparse.SUPPRESS)
    parser.add_argument("url", nargs="?", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.url, args.repeat, args.expected, args.stored_bytes)
        return
    unknown = set(args.readers.split(",")) - set(READERS)
    if unknown:
        parser.error(f"unknown readers {sorted(unknown)}; known: {', '.join(READERS)}")

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        path = make_store(tmp / "data", args.chunks, args.side)
        expected = read_zarrstream(str(path))
        expected_path = tmp / "expected.npy"
        np.save(expected_path, expected)
        chunk_files = sorted(p for p in (path / "c").rglob("*") if p.is_file())
        stored = sum(p.stat().st_size for p in chunk_files)
        nginx = Nginx(tmp / "data", tmp / "nginx", latency_ms=args.latency_ms,
                      workers=args.server_workers)
        url = f"{nginx.url}/bench.zarr"
        try:
            paths = ["/" + p.relative_to(tmp / "data").as_posix() for p in chunk_files]
            connections = [int(c) for c in args.wrk_connections.split(",")]
            server = saturate(nginx.url, paths, connections, args.wrk_seconds,
                              threads=max(1, min(4, os.cpu_count() // 2)), workdir=tmp)
            nginx.clear_log()
            results = []
            for name in args.readers.split(","):
                r = run_reader(name, url, args.repeat, expected_path, stored, nginx)
                results.append({"reader": name, **r})
        finally:
            nginx.stop()

    mean_chunk = stored / len(chunk_files)
    saturated = max(s["requests_per_s"] for s in server) * mean_chunk
    for s in server:
        s["stored_MB_per_s"] = round(s["requests_per_s"] * mean_chunk / 1e6, 1)
    for r in results:
        if "times" not in r:
            continue
        times = r.pop("times")
        best = min(times)
        r["best_s"] = round(best, 3)
        r["stored_MB_per_s"] = round(stored / best / 1e6, 1)
        r["mean_stored_MB_per_s"] = round(stored / (sum(times) / len(times)) / 1e6, 1)
        transport = r["reader"] == "zarrstream-transport"
        r["decoded_MB_per_s"] = None if transport else round(expected.nbytes / best / 1e6, 1)
        r["of_saturated"] = round(stored / best / saturated, 3)
        r["requests_per_chunk"] = round(r.pop("requests") / len(chunk_files), 3)
        r["cpu_s_per_GB_stored"] = round(r.pop("cpu_s_per_read") / (stored / 1e9), 2)
    ours = next((r for r in results if r["reader"] == "zarrstream" and "best_s" in r), None)
    for r in results:
        if ours is not None and "best_s" in r:
            r["zarrstream_ratio"] = round(r["best_s"] / ours["best_s"], 2)

    setup = {"latency_ms": args.latency_ms, "chunks": len(chunk_files),
             "chunk_bytes": args.side * args.side * 4, "stored_bytes": stored,
             "server_workers": args.server_workers, "cpus": os.cpu_count(), "machine": machine()}
    if args.json:
        print(json.dumps({"setup": setup, "server": server, "results": results}, indent=2))
        return
    print(f"machine: {describe(setup.pop('machine'))}")
    print(f"setup: {setup}")
    for s in server:
        print(f"server saturated by wrk, {s['connections']} connections: "
              f"{s['requests_per_s']:.0f} requests/s = {s['stored_MB_per_s']} MB/s stored")
    print(f"{'reader':28} {'best s':>7} {'stored MB/s':>12} {'(mean)':>8} {'decoded MB/s':>13} "
          f"{'of server':>10} {'zarrstream x':>13} {'req/chunk':>10} {'CPU s/GB':>9}")
    for r in results:
        if "error" in r:
            print(f"{r['reader']:28} error: {r['error'][:100]}")
        else:
            print(f"{r['reader']:28} {r['best_s']:>7} {r['stored_MB_per_s']:>12} "
                  f"{r['mean_stored_MB_per_s']:>8} {r['decoded_MB_per_s'] or '–':>13} "
                  f"{r['of_saturated']:>10.0%} "
                  f"{r.get('zarrstream_ratio', '–'):>13} {r['requests_per_chunk']:>10} "
                  f"{r['cpu_s_per_GB_stored']:>9}")


if __name__ == "__main__":
    main()

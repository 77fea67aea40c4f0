"""The object-store benchmark's server and harness (bench/object_store_bench.py), end to end.

nginx with added latency must hold every response that long while serving requests concurrently
(else the benchmark measures a queue, not an object store's round trip); the harness must run
every reader on a tiny store, check what each read, and count requests from nginx's log. Asserts
what the harness reports, never a timing of a reader.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from object_servers import Nginx

BENCH = Path(__file__).resolve().parent.parent / "bench" / "object_store_bench.py"


def fetch(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=30) as r:
        return r.read()


@pytest.mark.parametrize("workers", [1, 2])
def test_nginx_latency_delays_each_response_and_overlaps_them(tmp_path, workers):
    root = tmp_path / "data"
    (root / "a").mkdir(parents=True)
    for i in range(16):
        (root / "a" / str(i)).write_bytes(bytes([i]) * 1000)
    server = Nginx(root, tmp_path / "nginx", latency_ms=200, workers=workers)
    try:
        start = time.monotonic()
        assert fetch(f"{server.url}/a/3") == bytes([3]) * 1000
        assert time.monotonic() - start >= 0.2
        # Sixteen at once: they wait together (about 0.2 s), not one after another (3.2 s).
        start = time.monotonic()
        with ThreadPoolExecutor(16) as pool:
            bodies = list(pool.map(fetch, [f"{server.url}/a/{i}" for i in range(16)]))
        elapsed = time.monotonic() - start
        assert bodies == [bytes([i]) * 1000 for i in range(16)]
        assert 0.2 <= elapsed < 1.6
        # Ranges and missing keys still behave as without latency.
        req = urllib.request.Request(f"{server.url}/a/5", headers={"Range": "bytes=10-19"})
        with urllib.request.urlopen(req, timeout=30) as r:
            assert r.status == 206 and r.read() == bytes([5]) * 10
        with pytest.raises(urllib.error.HTTPError) as e:
            fetch(f"{server.url}/a/missing")
        assert e.value.code == 404
        assert [(r.path, r.status) for r in server.requests()][-1] == ("/a/missing", 404)
    finally:
        server.stop()


def test_object_store_bench_runs_every_reader_and_counts_requests():
    out = subprocess.run(
        [sys.executable, str(BENCH), "--chunks", "8", "--side", "64", "--repeat", "1",
         "--latency-ms", "5", "--server-workers", "2", "--wrk-connections", "4",
         "--wrk-seconds", "1", "--json"],
        capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["setup"]["chunks"] == 8
    assert report["server"][0]["connections"] == 4 and report["server"][0]["requests_per_s"] > 0
    rows = {r["reader"]: r for r in report["results"]}
    assert set(rows) == {"zarrstream", "zarrstream-open", "zarrstream-transport", "tensorstore", "tensorstore-tuned",
                         "zarr-python+obstore", "zarr-python+obstore-tuned", "zarr-python+fsspec",
                         "zarr-python+fsspec-tuned"}
    for name, row in rows.items():
        assert "error" not in row, (name, row)
        # Every chunk once, plus the array's metadata (zarr.json) and at most a probe or two.
        assert 8 <= row["requests_per_chunk"] * 8 <= 8 + 3, (name, row)
        assert row["stored_MB_per_s"] > 0 and row["cpu_s_per_GB_stored"] > 0
    assert rows["zarrstream"]["zarrstream_ratio"] == 1.0
    # The transport row received every stored byte (checked in its child) and decoded none.
    assert rows["zarrstream-transport"]["decoded_MB_per_s"] is None


def test_object_store_bench_prints_a_table_without_the_zarrstream_row():
    """A subset of readers without "zarrstream" (the ratios' reference) still prints its table."""
    out = subprocess.run(
        [sys.executable, str(BENCH), "--chunks", "4", "--side", "64", "--repeat", "1",
         "--latency-ms", "1", "--server-workers", "1", "--wrk-connections", "2",
         "--wrk-seconds", "1", "--readers", "zarrstream-transport"],
        capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    row = next(line for line in out.stdout.splitlines() if line.startswith("zarrstream-transport"))
    assert "–" in row

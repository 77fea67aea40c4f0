"""Batches too large for the machine: a clean ZarrstreamError, never a crash.

A batch's byte count is a product of the batch size and the sample's shape; one that overflows
64 bits, or one larger than the memory the process may have, must be refused with an error that
says what was being allocated and how large it was. Each case runs in a subprocess, so that a crash
(heap corruption, an uncaught std::bad_alloc) fails the test instead of the test run.
"""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
import zarr

pytest.importorskip("torch")

NT, NY, NX = 4, 256, 256  # a sample of one float32 field: 256 KiB

SCRIPT = r"""
import resource, sys
import torch  # noqa: F401 (imported before the limit: the loader hands batches to PyTorch)
import zarrstream

path, batch_size, headroom = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
if headroom:
    # The address space in use now, and `headroom` bytes more.
    with open("/proc/self/status") as f:
        vm = next(int(l.split()[1]) * 1024 for l in f if l.startswith("VmSize:"))
    resource.setrlimit(resource.RLIMIT_AS, (vm + headroom, vm + headroom))
try:
    loader = zarrstream.Loader(path, "t2m", batch_size=batch_size, num_threads=1, prefetch=1)
    for batch in loader:
        pass
except zarrstream.ZarrstreamError as e:
    print(f"ERROR {type(e).__name__}: {e}")
    sys.exit(3)
print("OK")
"""


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    path = tmp_path_factory.mktemp("limits") / "big.zarr"
    g = zarr.open_group(str(path), mode="w", zarr_format=3)
    t = g.create_array("time", shape=(NT,), dtype="int64", dimension_names=["time"],
                       attributes={"units": "hours since 1979-01-01 00:00:00"})
    t[...] = 6 * np.arange(NT, dtype="int64")
    g.create_array("latitude", shape=(NY,), dtype="float32",
                   dimension_names=["latitude"])[...] = np.linspace(90, -90, NY, dtype="float32")
    g.create_array("longitude", shape=(NX,), dtype="float32",
                   dimension_names=["longitude"])[...] = np.linspace(0, 359, NX, dtype="float32")
    a = g.create_array("t2m", shape=(NT, NY, NX), chunks=(1, NY, NX), dtype="float32",
                       dimension_names=["time", "latitude", "longitude"])
    a[...] = np.ones((NT, NY, NX), dtype="float32")
    zarr.consolidate_metadata(str(path))
    return path


def run(tmp_path, store, batch_size, headroom=0):
    script = tmp_path / "limits.py"
    script.write_text(SCRIPT)
    return subprocess.run([sys.executable, str(script), str(store), str(batch_size), str(headroom)],
                          capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, MALLOC_ARENA_MAX="2"))


def expect_clean_error(proc, *words):
    # Exit 3: the script caught a ZarrstreamError (a crash exits with a signal, < 0, or an abort).
    assert proc.returncode == 3, (proc.returncode, proc.stdout, proc.stderr[-2000:])
    line = next(l for l in proc.stdout.splitlines() if l.startswith("ERROR"))
    for word in words:
        assert word in line, line


def test_a_batch_whose_bytes_overflow_is_refused(tmp_path, store):
    proc = run(tmp_path, store, 2**61)
    expect_clean_error(proc, "ConfigError", "batch_size 2305843009213693952", "bytes")


def test_a_batch_larger_than_memory_is_an_out_of_memory_error(tmp_path, store):
    proc = run(tmp_path, store, 2**32)
    expect_clean_error(proc, "out of memory", "batch", "bytes")


def test_a_modest_batch_under_an_address_space_limit_is_an_out_of_memory_error(tmp_path, store):
    # 8192 samples of 256 KiB: a 2 GiB block, with 512 MiB to spare.
    proc = run(tmp_path, store, 8192, headroom=512 << 20)
    expect_clean_error(proc, "out of memory", "batch", "bytes")


def test_a_batch_that_fits_still_loads_under_the_limit(tmp_path, store):
    proc = run(tmp_path, store, 2, headroom=512 << 20)
    assert proc.returncode == 0, (proc.stdout, proc.stderr[-2000:])
    assert "OK" in proc.stdout

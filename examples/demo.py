"""The zarrstream demo: make a small ERA5-like store with zarr-python, inspect it, and read it.

Run with `make demo`. Later stages of the product extend this into the full training job.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
from era5_like import write_era5_like_store  # noqa: E402

import zarrstream  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
STORE = ROOT / "demo_data" / "era5_demo.zarr"
SHAPE = dict(ntime=48, nchannel=12, nlat=181, nlon=360)  # 1° grid


def main() -> None:
    if not (STORE / "zarr.json").exists():
        print(f"generating an ERA5-like store at {STORE.relative_to(ROOT)} ...", flush=True)
        t0 = time.perf_counter()
        write_era5_like_store(STORE, **SHAPE)
        print(f"  written in {time.perf_counter() - t0:.1f} s")

    cli = Path(sys.executable).parent / "zarrstream"
    print(f"\n$ zarrstream inspect {STORE.relative_to(ROOT)}")
    subprocess.run([str(cli), "inspect", str(STORE)], check=True)

    a = zarrstream.open_array(str(STORE))
    step_bytes = a.nbytes // a.shape[0]
    rng = np.random.default_rng(0)
    steps = rng.integers(0, a.shape[0], size=200)
    a[0]  # warm up
    t0 = time.perf_counter()
    for t in steps:
        field = a[int(t)]
    elapsed = time.perf_counter() - t0
    print(f"\nrandom time-step reads: {len(steps)} x {field.shape} float32 in {elapsed:.2f} s "
          f"= {len(steps) / elapsed:.0f} steps/s, {len(steps) * step_bytes / elapsed / 1e9:.2f} GB/s decoded")

    t0 = time.perf_counter()
    whole = a.read()
    elapsed = time.perf_counter() - t0
    print(f"whole-array read: {whole.nbytes / 1e6:.0f} MB in {elapsed:.2f} s "
          f"= {whole.nbytes / elapsed / 1e9:.2f} GB/s decoded")

    import zarr

    expected = zarr.open_array(str(STORE), mode="r")[5]
    assert np.array_equal(a[5], expected), "zarrstream and zarr-python disagree"
    print("check: time step 5 matches zarr-python bit for bit")


if __name__ == "__main__":
    main()

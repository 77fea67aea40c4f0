"""The versioned and virtual datasets benchmark (bench/virtual_bench.py) runs end to end in its
smallest configuration, so it cannot rot: it writes the synth store into an Icechunk repository
and into netCDF4 files with Kerchunk references, finds every row's batches equal to the plain
store's, and reports every row and ratio; its check catches a repository that differs. Never a
timing.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from bench_scripts import load_bench, run_bench

import zarrstream

zarr = pytest.importorskip("zarr")
pytest.importorskip("torch")
icechunk = pytest.importorskip("icechunk")
h5py = pytest.importorskip("h5py")
pytest.importorskip("kerchunk")
pytest.importorskip("h5netcdf")
pytest.importorskip("dask")

SMALLEST = ["--preset", "era5-small", "--steps", "8", "--steps-per-file", "4", "--batch-size", "2", "--epochs", "1",
            "--rounds", "1", "--workers", "1"]
ROWS = ("plain", "icechunk", "references", "xarray")




@pytest.fixture(scope="module")
def smallest_run(tmp_path_factory) -> dict:
    out = tmp_path_factory.mktemp("virtual")
    result = run_bench("virtual_bench", [*SMALLEST, "--workdir", out / "work"], out, timeout=600)
    return result


def test_the_smallest_configuration_checks_and_reports_every_row(smallest_run):
    assert smallest_run["skipped"] == {} and smallest_run["identical"] is True
    for row in ("icechunk", "references", "xarray"):
        check = smallest_run["checks"][row]
        assert check["identical"] is True and check["batches"] == 2, (row, check)
    # 7 samples (t with a target at t + 1) make 3 batches of 2: 1 start-up batch and 2 measured.
    assert smallest_run["workload"]["channels"] == 41 and smallest_run["workload"]["measured_batches_per_epoch"] == 2
    rows = smallest_run["summary"]["rows"]
    assert set(rows) == set(ROWS)
    for row in ROWS:
        r = rows[row]
        assert r["errors"] == [] and r["first_batch_checks"] == [True], row
        for field in ("samples_per_second", "delivered_gb_per_second", "cpu_seconds_per_sample", "peak_rss_mb",
                      "startup_seconds"):
            assert len(r[field]) == 1 and r[field][0] >= 0, (row, field)
        assert r["samples_per_second"][0] > 0 and r["peak_rss_mb"][0] > 0
        (run,) = smallest_run["runs"][row]
        assert run["measured_batches"] == 2 and run["measured_samples"] == 4 and run["check"]["ok"] is True
    assert smallest_run["runs"]["xarray"][0]["config"]["num_workers"] == 1
    ratios = smallest_run["summary"]["ratios"]
    assert set(ratios) == {"icechunk/plain", "references/xarray", "references/plain"}
    for ratio in ratios.values():
        assert ratio["of_medians"] > 0 and len(ratio["per_round"]) == 1
    machine = smallest_run["machine"]
    assert machine["cores"] >= 1 and len(smallest_run["load_average_before"]) == 3
    assert smallest_run["page_cache"].startswith("warm")
    assert smallest_run["versions"]["icechunk"] == icechunk.__version__
    stdout = smallest_run["stdout"]
    for line in ("| plain Zarr (v3, zstd) | zarrstream Loader |", "| Icechunk repository (native chunks) | zarrstream "
                 "Loader |", "| Kerchunk references to netCDF4 | zarrstream Loader |",
                 "| netCDF4 files | xarray open_mfdataset (h5netcdf) + DataLoader, 1 workers |"):
        assert line in stdout
    assert "× plain Zarr (rounds" in stdout and "× xarray + DataLoader (rounds" in stdout
    assert "batches against the plain store's: equal" in stdout and "load average" in stdout


def chunk_digests(folder: Path) -> set[str]:
    return {hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.rglob("*") if p.is_file()}


def test_the_datasets_hold_the_plain_stores_data(smallest_run):
    datasets = {k: Path(v) for k, v in smallest_run["datasets"].items()}
    plain, repo = zarrstream.open_group(str(datasets["plain"])), zarrstream.open_group(str(datasets["icechunk"]))
    for name in ("2m_temperature", "temperature", "time", "level"):
        np.testing.assert_array_equal(repo[name].read(), plain[name].read())
    # The repository's native chunks are the plain store's chunk bytes.
    native = chunk_digests(datasets["icechunk"] / "chunks")
    assert native and native <= chunk_digests(datasets["plain"])

    files = sorted(datasets["netcdf"].glob("*.nc"))
    assert [f.name for f in files] == ["part-0000.nc", "part-0001.nc"]
    with h5py.File(files[1], "r") as f:
        temperature = f["temperature"]
        assert temperature.shape == (4, 13, 32, 64) and temperature.chunks == (1, 1, 32, 64)
        assert temperature.compression == "gzip" and temperature.shuffle
        np.testing.assert_array_equal(temperature[...], plain["temperature"][4:8])
    refs = json.loads(datasets["references"].read_text())["refs"]
    assert refs["temperature/7.12.0.0"][0] == str(files[1].resolve())
    assert json.loads(refs["temperature/.zarray"])["shape"] == [8, 13, 32, 64]


def test_the_check_catches_a_repository_that_differs(smallest_run, tmp_path):
    bench = load_bench("virtual_bench")
    paths = {k: Path(v) for k, v in smallest_run["datasets"].items()}
    paths["icechunk"] = tmp_path / "changed.icechunk"
    shutil.copytree(smallest_run["datasets"]["icechunk"], paths["icechunk"])
    repo = icechunk.Repository.open(icechunk.local_filesystem_storage(str(paths["icechunk"])))
    session = repo.writable_session("main")
    field = zarr.open_group(session.store, mode="r+")["2m_temperature"]
    field[:, 5, 7] = field[:, 5, 7] + 1
    session.commit("one grid point of 2m_temperature changed")

    w = bench.workload(bench.parse_args(SMALLEST), paths["plain"])
    workloads = bench.row_workloads(w, paths, {"references": "not checked here", "xarray": "not checked here"})
    checks = bench.verify(workloads, 2)
    assert checks["icechunk"]["identical"] is False
    # Both samples of the batch; 2m_temperature is channel 0 of the 41.
    assert checks["icechunk"]["detail"] == "batch 0 input: 2 of 167936 values differ, the first at index (0, 0, 5, 7)"

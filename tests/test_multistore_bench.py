"""The joined-stores benchmark (bench/multistore_bench.py) runs end to end in its smallest
configuration, so it cannot rot: it splits the synth store into surface, pressure-level and
constants stores, finds the joined and the single-store batches equal, and reports both rows; its
check catches a joined dataset that differs. Never a timing.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from bench_scripts import load_bench, run_bench

zarr = pytest.importorskip("zarr")
pytest.importorskip("torch")

SMALLEST = ["--preset", "era5-small", "--steps", "8", "--batch-size", "2", "--epochs", "1", "--rounds", "1",
            "--devices", "cpu"]




@pytest.fixture(scope="module")
def smallest_run(tmp_path_factory) -> dict:
    out = tmp_path_factory.mktemp("multistore")
    result = run_bench("multistore_bench", [*SMALLEST, "--workdir", out / "work"], out, timeout=300)
    return result


def test_the_smallest_configuration_runs_and_reports_equal_batches(smallest_run):
    check = smallest_run["checks"]["cpu"]
    assert smallest_run["identical"] is True and check["identical"] is True
    assert check["batches"] == 2
    # 5 surface + 5 x 13 pressure-level channels, 2 static fields, 9 computed forcings; 2 input steps.
    assert check["channels"] == 81 and check["input_shape"] == [2, 162, 32, 64]
    rows = smallest_run["summary"]["cpu"]
    for layout in ("joined", "single"):
        assert len(rows[layout]["samples_per_second"]) == 1 and rows[layout]["samples_per_second"][0] > 0
        assert rows[layout]["read_amplification"][0] > 0
        assert rows[layout]["cpu_seconds_per_sample"][0] > 0
    assert rows["ratio_of_medians"] > 0
    assert "| cpu | 3 stores joined |" in smallest_run["stdout"] and "| cpu | 1 store |" in smallest_run["stdout"]
    assert "batches of the two datasets: equal" in smallest_run["stdout"]


def test_the_stores_are_split_by_kind(smallest_run):
    bench = load_bench("multistore_bench")
    surface, pressure, constants = (zarr.open_group(p, mode="r") for p in smallest_run["stores"]["joined"])
    assert sorted(surface.array_keys()) == sorted(bench.SURFACE + ["latitude", "longitude", "time"])
    assert sorted(pressure.array_keys()) == sorted(bench.PRESSURE + ["latitude", "level", "longitude", "time"])
    assert sorted(constants.array_keys()) == sorted(bench.CONSTANTS + ["latitude", "longitude"])
    assert constants["land_sea_mask"].metadata.dimension_names == ("latitude", "longitude")  # a static field


def test_the_check_catches_a_joined_dataset_that_differs(smallest_run, tmp_path):
    bench = load_bench("multistore_bench")
    stores = {layout: [Path(p) for p in paths] for layout, paths in smallest_run["stores"].items()}
    wrong_surface = tmp_path / "surface.zarr"
    shutil.copytree(stores["joined"][0], wrong_surface)
    field = zarr.open_group(wrong_surface, mode="r+")["10m_v_component_of_wind"]
    field[:, 5, 7] = field[:, 5, 7] + 1
    stores["joined"][0] = wrong_surface
    check = bench.verify(stores, bench.parse_args(SMALLEST), "cpu")
    assert check["identical"] is False
    # Both samples of the batch, both input steps; 10m_v_component_of_wind is channel 2 of step 0.
    assert check["detail"] == "batch 0 input: 4 of 663552 values differ, the first at index (0, 2, 5, 7)"

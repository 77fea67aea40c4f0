"""The read benchmark's first-pass mode (bench/read_bench.py --fresh) runs end to end in its smallest
configuration, so it cannot rot: every measurement in a new process, a row per tool, workload and
chunk size, and every tool's data equal. Never a timing.
"""

from __future__ import annotations

import pytest
from bench_scripts import load_bench, run_bench

pytest.importorskip("zarr")
pytest.importorskip("tensorstore")

TOOLS = ["zarrstream", "tensorstore", "zarr-python"]


@pytest.fixture(scope="module")
def smallest_run(tmp_path_factory) -> dict:
    out = tmp_path_factory.mktemp("read_bench")
    args = ["--fresh", "--time", "4", "--channels", "3", "--lat", "16", "--lon", "32", "--chunk-mb",
            "0.002,0.004", "--steps", "2", "--rounds", "2", "--passes", "2", "--tools", ",".join(TOOLS),
            "--store-dir", out / "stores"]
    return run_bench("read_bench", args, out, timeout=300)


def test_every_measurement_has_a_row_and_equal_data(smallest_run):
    rows = smallest_run["rows"]
    # 2 rounds x 2 chunk sizes x 2 workloads x 3 tools, each from its own process.
    assert len(rows) == 24
    assert {row["tool"] for row in rows} == set(TOOLS)
    assert {row["workload"] for row in rows} == {"steps", "whole"}
    for row in rows:
        assert len(row["passes"]) == 2 and all(p["seconds"] > 0 for p in row["passes"])
    for key in {(row["chunk_mb"], row["workload"], row["round"]) for row in rows}:
        assert len({row["digest"] for row in rows if (row["chunk_mb"], row["workload"], row["round"]) == key}) == 1
    assert smallest_run["meta"]["results_equal"] is True
    assert len(smallest_run["summary"]) == 12
    assert "| steps | zarrstream |" in smallest_run["stdout"]


def test_the_two_stores_have_the_chunk_shapes_asked_for(smallest_run):
    stores = smallest_run["meta"]["stores"]
    # A 16 x 32 float32 field is 2 KiB: 0.002 MB is one field per chunk, 0.004 MB two channels.
    assert [stores[mb]["chunks"] for mb in sorted(stores)] == [[1, 1, 16, 32], [1, 2, 16, 32]]


def test_chunk_shapes_group_channels_or_split_latitude():
    bench = load_bench("read_bench")
    assert bench.chunk_shape(20, 361, 720, 1) == (1, 1, 361, 720)
    assert bench.chunk_shape(20, 361, 720, 4) == (1, 4, 361, 720)
    assert bench.chunk_shape(20, 721, 1440, 4) == (1, 1, 721, 1440)
    assert bench.chunk_shape(20, 721, 1440, 1) == (1, 1, 183, 1440)


def test_the_digest_tells_other_data_apart(tmp_path):
    bench = load_bench("read_bench")
    store = tmp_path / "a.zarr"
    bench.write_era5_like_store(store, 2, 1, 8, 8)
    spec = {"tool": "zarrstream", "workload": "whole", "store": str(store), "steps": [], "passes": 1}
    first = bench.run_child(spec)
    import zarr

    zarr.open_array(str(store), mode="r+")[0, 0, 0, 0] = -1.0
    assert bench.run_child(spec)["digest"] != first["digest"]

"""`zarrstream inspect` (the tree of a store, its --json form, layout warnings, errors), `bench` and
`doctor`."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest
import zarr
from zarr.codecs import BloscCodec, ZstdCodec

import zarrstream

from conftest import CLI, chunk_files, make_compressible, make_data, run_cli



def assert_clean_exit(proc):
    """Exited by itself (no signal, no abort, no uncaught exception)."""
    assert proc.returncode >= 0, f"killed by signal {-proc.returncode}: {proc.stderr}"
    for bad in ("terminate called", "Segmentation fault", "Traceback", "Aborted"):
        assert bad not in proc.stderr, proc.stderr


def iter_nodes(node, prefix=""):
    """(path, node) for every node of inspect's JSON tree."""
    name = node.get("name", "")
    path = f"{prefix}/{name}".strip("/") if name else prefix
    yield path, node
    for member in node.get("members", []):
        yield from iter_nodes(member, path)


def codec_names(codecs):
    for c in codecs:
        yield c["name"]
        yield from codec_names(c.get("configuration", {}).get("codecs", []))


def stored_bytes(array_dir: Path) -> int:
    return sum(f.stat().st_size for f in chunk_files(array_dir))


@pytest.fixture
def tree_store(store):
    """A v3 group with nested groups: a plain zstd array, a sharded blosc array, a v3 sub-sub-group."""
    g = zarr.open_group(str(store), mode="w", zarr_format=3, attributes={"title": "cli test"})
    t = g.create_array("temperature", shape=(20, 16, 32), chunks=(1, 16, 32), dtype="float32",
                       compressors=ZstdCodec(level=3), dimension_names=["time", "lat", "lon"])
    t[...] = make_compressible("float32", (20, 16, 32), seed=60)
    atmos = g.create_group("atmos")
    w = atmos.create_array("wind", shape=(8, 10, 12), chunks=(2, 5, 6), shards=(4, 10, 12), dtype="int16",
                           compressors=BloscCodec(cname="lz4", shuffle="shuffle"))
    w[...] = make_compressible("int16", (8, 10, 12), seed=61)
    deep = atmos.create_group("deep")
    m = deep.create_array("mask", shape=(7,), chunks=(3,), dtype="bool", compressors=None)
    m[...] = make_data("bool", (7,), seed=62)
    return store


def test_inspect_prints_tree(tree_store):
    proc = run_cli("inspect", tree_store)
    assert_clean_exit(proc)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    for name in ("temperature", "atmos", "wind", "deep", "mask"):
        assert name in out, out
    assert "float32" in out and "int16" in out and "bool" in out, out
    assert "(20, 16, 32)" in out and "(8, 10, 12)" in out and "(7,)" in out, out
    lines = out.splitlines()

    def indent(word):
        line = next(ln for ln in lines if word in ln)
        return len(line) - len(line.lstrip())

    # Members are indented under their group.
    assert indent("wind") > indent("atmos")
    assert indent("mask") > indent("deep") > indent("atmos")


def test_inspect_json(tree_store):
    proc = run_cli("inspect", tree_store, "--json")
    assert_clean_exit(proc)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    nodes = dict(iter_nodes(doc))
    arrays = {p: n for p, n in nodes.items() if n.get("kind") == "array"}
    groups = {p: n for p, n in nodes.items() if n.get("kind") == "group"}
    assert set(arrays) == {"temperature", "atmos/wind", "atmos/deep/mask"}, sorted(nodes)
    assert {"atmos", "atmos/deep"} <= set(groups), sorted(nodes)

    expected = {
        "temperature": dict(shape=[20, 16, 32], dtype="float32", chunks=[1, 16, 32], codec="zstd"),
        "atmos/wind": dict(shape=[8, 10, 12], dtype="int16", chunks=[2, 5, 6], codec="blosc"),
        "atmos/deep/mask": dict(shape=[7], dtype="bool", chunks=[3], codec="bytes"),
    }
    for path, want in expected.items():
        a = arrays[path]
        for key in ("shape", "dtype", "chunks", "codecs", "stored_bytes", "logical_bytes", "warnings"):
            assert key in a, (path, key, sorted(a))
        assert a["shape"] == want["shape"], path
        assert np.dtype(a["dtype"]) == np.dtype(want["dtype"]), path
        assert a["chunks"] == want["chunks"], path
        assert isinstance(a["codecs"], list) and want["codec"] in set(codec_names(a["codecs"])), a["codecs"]
        assert a["logical_bytes"] == int(np.prod(want["shape"])) * np.dtype(want["dtype"]).itemsize, path
        assert a["stored_bytes"] == stored_bytes(tree_store / path), path
        assert isinstance(a["warnings"], list)
    assert "sharding_indexed" in set(codec_names(arrays["atmos/wind"]["codecs"]))
    assert arrays["atmos/wind"]["shard_shape"] == [4, 10, 12]
    assert arrays["temperature"]["dims"] == ["time", "lat", "lon"]


def test_inspect_single_array(tree_store):
    proc = run_cli("inspect", tree_store / "atmos" / "wind", "--json")
    assert_clean_exit(proc)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    arrays = [n for _, n in iter_nodes(doc) if n.get("kind") == "array"]
    assert len(arrays) == 1
    assert arrays[0]["shape"] == [8, 10, 12]
    assert arrays[0]["stored_bytes"] == stored_bytes(tree_store / "atmos" / "wind")
    text = run_cli("inspect", tree_store / "atmos" / "wind")
    assert text.returncode == 0 and "(8, 10, 12)" in text.stdout


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_time_chunking_warning(store, zarr_format):
    g = zarr.open_group(str(store), mode="w", zarr_format=zarr_format)
    dims = ["time", "latitude", "longitude"]
    kw = dict(dimension_names=dims) if zarr_format == 3 else dict(attributes={"_ARRAY_DIMENSIONS": dims})
    bad = g.create_array("t2m", shape=(40, 6, 8), chunks=(10, 6, 8), dtype="float32", **kw)
    bad[...] = make_compressible("float32", (40, 6, 8), seed=63)
    good = g.create_array("z500", shape=(40, 6, 8), chunks=(1, 6, 8), dtype="float32", **kw)
    good[...] = make_compressible("float32", (40, 6, 8), seed=64)

    proc = run_cli("inspect", store, "--json")
    assert_clean_exit(proc)
    assert proc.returncode == 0, proc.stderr
    arrays = {p: n for p, n in iter_nodes(json.loads(proc.stdout)) if n.get("kind") == "array"}
    assert any("time" in w for w in arrays["t2m"]["warnings"]), arrays["t2m"]["warnings"]
    assert not any("time" in w for w in arrays["z500"]["warnings"]), arrays["z500"]["warnings"]
    assert arrays["t2m"]["dims"] == dims

    text = run_cli("inspect", store)
    assert text.returncode == 0
    warning_lines = [ln for ln in text.stdout.splitlines() if "warning" in ln.lower()]
    assert any("time" in ln for ln in warning_lines), text.stdout


@pytest.mark.parametrize("as_json", [False, True])
def test_inspect_missing_path(tmp_path, as_json):
    missing = tmp_path / "nowhere.zarr"
    proc = run_cli("inspect", missing, *(["--json"] if as_json else []))
    assert_clean_exit(proc)
    assert proc.returncode != 0
    message = proc.stderr + proc.stdout
    assert "nowhere.zarr" in message, message
    assert proc.stdout.strip() == "" or not as_json


def test_inspect_usage_errors(tmp_path):
    proc = run_cli()
    assert_clean_exit(proc)
    assert proc.returncode != 0
    proc = run_cli("inspect")
    assert_clean_exit(proc)
    assert proc.returncode != 0
    assert "url" in (proc.stderr + proc.stdout).lower()


@pytest.mark.parametrize("typed, nearest", [("inpsect", "inspect"), ("rechunks", "rechunk"),
                                             ("doctr", "doctor"), ("frobnicate", None)])
def test_unknown_command_is_named_with_the_nearest_one(typed, nearest):
    proc = run_cli(typed, "somewhere.zarr", timeout=60)
    assert_clean_exit(proc)
    assert proc.returncode == 2
    assert f"unknown command '{typed}'" in proc.stderr, proc.stderr
    if nearest:
        assert f"did you mean '{nearest}'?" in proc.stderr, proc.stderr
    else:
        assert "did you mean" not in proc.stderr, proc.stderr
    for command in ("inspect", "stats", "synth", "rechunk", "bench", "doctor"):
        assert command in proc.stderr, proc.stderr


def test_inspect_broken_member(tree_store):
    # One array's metadata is broken: the healthy part of the tree is still listed, the broken
    # array is named, and the exit status says something went wrong.
    (tree_store / "atmos" / "wind" / "zarr.json").write_text("{broken")
    for args in [(), ("--json",)]:
        proc = run_cli("inspect", tree_store, *args)
        assert_clean_exit(proc)
        assert proc.returncode != 0
        out = proc.stdout + proc.stderr
        assert "temperature" in out, out
        assert "atmos/wind" in out or "wind" in out, out


def test_inspect_v2_consolidated(store):
    g = zarr.open_group(str(store), mode="w", zarr_format=2)
    a = g.create_array("x", shape=(10, 10), chunks=(5, 5), dtype=">f8")
    a[...] = make_data(">f8", (10, 10), seed=65)
    g.create_group("sub").create_array("y", shape=(4,), chunks=(4,), dtype="uint8")[...] = 7
    zarr.consolidate_metadata(str(store))
    proc = run_cli("inspect", store, "--json")
    assert_clean_exit(proc)
    assert proc.returncode == 0, proc.stderr
    arrays = {p: n for p, n in iter_nodes(json.loads(proc.stdout)) if n.get("kind") == "array"}
    assert set(arrays) == {"x", "sub/y"}
    assert arrays["x"]["zarr_format"] == 2
    assert np.dtype(arrays["x"]["dtype"]) == np.dtype("float64")
    assert arrays["x"]["stored_bytes"] == stored_bytes(store / "x")
    assert arrays["sub/y"]["logical_bytes"] == 4


def test_bench_reports_the_loader_run(tmp_path):
    store = tmp_path / "small.zarr"
    assert_clean_exit(run_cli("synth", store, "--preset", "era5-small", "--steps", "20"))
    report_path = tmp_path / "bench.json"
    proc = run_cli("bench", store, "--variables", "2m_temperature,temperature@500,850",
                   "--target-offset", "time=1", "--batch-size", "4", "--epochs", "2",
                   "--shuffle", "block", "--train-step-ms", "1", "--json", report_path,
                   "--trace", tmp_path / "trace.json")
    assert_clean_exit(proc)
    assert proc.returncode == 0, proc.stderr
    assert "samples/s" in proc.stdout and "wait per batch" in proc.stdout
    report = json.loads(report_path.read_text())
    # 19 samples: 5 batches per epoch (the last of 3), 10 in all; the first is the start-up.
    assert report["batches"] == 10
    assert report["measured_samples"] == 2 * 19 - 4
    assert report["samples_per_second"] > 0 and report["startup_seconds"] > 0
    assert 0 <= report["waiting_fraction"] <= 1
    # Every time step is needed as an input and (but the first) as a target of 3 channels; the
    # pipeline may have prepared up to `prefetch` batches of the third epoch as well.
    sample_bytes = 2 * 3 * 32 * 64 * 4
    ahead = report["bytes_used"] - 2 * 19 * sample_bytes
    assert 0 <= ahead <= report["options"]["prefetch"] * 4 * sample_bytes
    assert ahead % sample_bytes == 0
    # The store fits in the cache: each chunk (a step of 2m_temperature, a step of all 13 levels
    # of temperature) is decoded once over both epochs.
    assert report["chunks_decoded"] == 2 * 20
    assert report["bytes_decoded"] == 20 * (1 + 13) * 32 * 64 * 4
    assert sum(report["wait_histogram_us_log2"]) == 10
    # The trace: every stage of every batch on a timeline, one "wait" per batch delivered.
    events = json.loads((tmp_path / "trace.json").read_text())["traceEvents"]
    names = [e["name"] for e in events]
    assert names.count("wait") == 10 and names.count("plan") >= 10
    assert {"plan", "read+decode", "assemble", "wait"} <= set(names)
    assert all(e["ph"] == "X" and e["dur"] >= 0 and e["ts"] >= 0 for e in events)


def test_bench_plots_each_batch_wait_and_step(tmp_path):
    store = tmp_path / "small.zarr"
    assert_clean_exit(run_cli("synth", store, "--preset", "era5-small", "--steps", "12"))
    report_path, plot = tmp_path / "bench.json", tmp_path / "bench.png"
    proc = run_cli("bench", store, "--batch-size", "2", "--epochs", "2", "--train-step-ms", "2",
                   "--json", report_path, "--plot", plot)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(report_path.read_text())
    assert len(report["steps"]) == report["batches"] == 12
    assert all(0 <= s["wait_ms"] <= s["step_ms"] and s["step_ms"] >= 2 for s in report["steps"])
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and plot.stat().st_size > 10_000
    # Without --json the report is a temporary file, gone afterwards.
    again = tmp_path / "again.png"
    proc = run_cli("bench", store, "--batch-size", "2", "--plot", again)
    assert proc.returncode == 0, proc.stderr
    assert again.exists() and not Path(str(again) + ".json").exists()


def test_bench_errors_name_what_is_wrong(tmp_path):
    store = tmp_path / "small.zarr"
    assert_clean_exit(run_cli("synth", store, "--preset", "era5-small", "--steps", "4"))
    proc = run_cli("bench", store, "--variables", "no_such_variable")
    assert proc.returncode == 1 and "no_such_variable" in proc.stderr
    proc = run_cli("bench", store, "--sample", "time")
    assert proc.returncode == 2 and "expected DIM=N, got 'time'" in proc.stderr
    proc = run_cli("bench", store, "--device", "tpu")
    assert proc.returncode == 2 and "--device tpu: expected cpu or cuda" in proc.stderr
    proc = run_cli("bench", store, "--cpu-decode")
    assert proc.returncode == 2 and "--cpu-decode: needs --device cuda" in proc.stderr
    for share in ("0.3", "auto"):
        proc = run_cli("bench", store, "--cpu-decode-share", share)
        assert proc.returncode == 2 and "--cpu-decode-share: needs --device cuda" in proc.stderr
    proc = run_cli("bench", store, "--cpu-decode-share", "most")
    assert proc.returncode == 2 and "--cpu-decode-share 'most': expected a share from 0 to 1 or 'auto'" in proc.stderr
    if zarrstream._zarrstream.gpu_batches_unavailable_reason():
        proc = run_cli("bench", store, "--device", "cuda")
        assert proc.returncode == 1 and ("batches cannot be made on that GPU here" in proc.stderr
                                         or "no GPU zarrstream can use" in proc.stderr), proc.stderr


@pytest.mark.gpu
def test_bench_on_the_gpu_reports_the_gpu_stages(tmp_path):
    store = tmp_path / "small.zarr"
    assert_clean_exit(run_cli("synth", store, "--preset", "era5-small", "--steps", "8"))
    proc = run_cli("bench", store, "--device", "cuda", "--batch-size", "2", "--json", tmp_path / "b.json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads((tmp_path / "b.json").read_text())
    assert report["device"] == "cuda" and "nvCOMP" in report["gpu_decode"]
    assert report["gpu_decoded_chunks"] > 0 and report["bytes_to_gpu"] > 0
    assert report["stages"]["gpu_decode_seconds"] > 0
    # --cpu-decode: the same batches, every chunk decoded by the worker threads.
    proc = run_cli("bench", store, "--device", "cuda", "--batch-size", "2", "--cpu-decode",
                   "--json", tmp_path / "c.json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads((tmp_path / "c.json").read_text())
    assert report["gpu_decode"] == "chunks decode on the CPU: gpu_decode is off"
    assert report["gpu_decoded_chunks"] == 0 and report["gpu_rejected_chunks"] == 0
    assert report["chunks_decoded"] > 0 and report["bytes_to_gpu"] > 0
    # --cpu-decode-share: the worker threads decode a share of them, nvCOMP the rest.
    proc = run_cli("bench", store, "--device", "cuda", "--batch-size", "2", "--cpu-decode-share", "0.5",
                   "--json", tmp_path / "s.json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads((tmp_path / "s.json").read_text())
    assert "cpu_decode_share" in report["gpu_decode"]
    assert report["gpu_decoded_chunks"] > 0 and report["chunks_decoded"] > 0
    assert report["cpu_decode_share"] == 0.5
    # auto, beside a simulated training step that leaves every batch ready early: every share is as fast
    # there, so the search ends anywhere on its grid of tenths.
    proc = run_cli("bench", store, "--device", "cuda", "--batch-size", "1", "--epochs", "3", "--cpu-decode-share",
                   "auto", "--train-step-ms", "20", "--json", tmp_path / "a.json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads((tmp_path / "a.json").read_text())
    share = report["cpu_decode_share"]
    assert "adapts to the consumer's time per batch" in report["gpu_decode"], report
    assert 0 <= share <= 1 and abs(10 * share - round(10 * share)) < 1e-9, report
    assert "share of nvCOMP's chunks ended at" in proc.stdout


def test_doctor_counts_the_cores_this_process_may_use():
    # As under taskset or a job scheduler's CPU binding: one core of the machine's.
    one = {min(os.sched_getaffinity(0))}
    proc = subprocess.run([str(CLI), "doctor"], capture_output=True, text=True, timeout=120,
                          preexec_fn=lambda: os.sched_setaffinity(0, one))
    assert proc.returncode == 0, proc.stderr
    if os.cpu_count() > 1:
        assert f"{os.cpu_count()} cores (1 usable by this process)" in proc.stdout
    proc = subprocess.run([str(CLI), "doctor", "--json"], capture_output=True, text=True, timeout=120,
                          preexec_fn=lambda: os.sched_setaffinity(0, one))
    report = json.loads(proc.stdout)
    assert report["cpu"]["usable_cores"] == 1 and report["cpu"]["cores"] == os.cpu_count()
    # Remote reads' threads are a share of the machine among torchrun's ranks: a LOCAL_WORLD_SIZE
    # that is not a number is named.
    proc = run_cli("doctor", "--json", env=dict(os.environ, LOCAL_WORLD_SIZE="two"))
    assert "LOCAL_WORLD_SIZE='two'" in json.loads(proc.stdout)["http"]["error"]


def test_doctor_reports_the_environment():
    proc = run_cli("doctor", "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["zarrstream_version"] == zarrstream.__version__
    # Kernels are built wherever nvcc was found at build time.
    assert isinstance(report["cuda_compiled"], bool)
    # NVTX comes with the CUDA toolkit that built the kernels; reads never go through cuFile.
    assert report["nvtx"] == report["cuda_compiled"]
    assert report["gds"]["used"] is False and isinstance(report["gds"]["cufile_library"], bool)
    assert report["cpu"]["cores"] == os.cpu_count() and report["memory_bytes"] > 0
    assert report["cpu"]["usable_cores"] == len(os.sched_getaffinity(0))
    assert set(report["libraries"]) == {"zstd", "lz4", "blosc", "libdeflate", "zlib", "bzip2", "curl", "openssl"}
    assert all(v.split(".")[0].isdigit() for v in report["libraries"].values())
    try:
        import torch

        has_gpu = torch.cuda.is_available()
    except ImportError:
        has_gpu = False
    if has_gpu:
        assert report["gpu"]["name"] == torch.cuda.get_device_name(0)
        assert report["gpu"]["memory_bytes"] > 1 << 30
        assert report["gpu_batches"] == report["cuda_compiled"]
        assert report["gpu_decoding"] == (report["gpu_batches"] and report["nvcomp_version"] is not None)
    else:
        assert report["gpu"] is None and report["gpu_unavailable_reason"]
        assert report["gpu_batches"] is False and report["gpu_batches_unavailable_reason"]
        assert report["nvcomp_version"] is None and report["gpu_decoding"] is False
    # Remote reads: three quarters of the cores (2 to 16) I/O threads by default, the environment over them.
    assert report["http"] == {"io_threads": min(16, max(2, os.cpu_count() * 3 // 4)),
                              "max_in_flight": 256, "max_in_flight_per_host": 256}
    assert report["buffer_cache_bytes"] == 256 << 20
    assert report["gpu_grids"] == {"blocks_per_sm": 64}
    text = run_cli("doctor")
    assert text.returncode == 0 and "gpu:" in text.stdout and "libraries:" in text.stdout
    assert "remote reads: " in text.stdout
    env = dict(os.environ, ZARRSTREAM_HTTP_IO_THREADS="3", ZARRSTREAM_HTTP_MAX_PER_HOST="32",
               ZARRSTREAM_BUFFER_CACHE_MB="0", ZARRSTREAM_GPU_BLOCKS_PER_SM="4")
    tuned = json.loads(run_cli("doctor", "--json", env=env).stdout)
    assert tuned["http"]["io_threads"] == 3 and tuned["http"]["max_in_flight_per_host"] == 32
    assert tuned["buffer_cache_bytes"] == 0
    assert tuned["gpu_grids"] == {"blocks_per_sm": 4}
    assert "grids of at most 4 blocks per multiprocessor" in run_cli("doctor", env=env).stdout
    env["ZARRSTREAM_GPU_BLOCKS_PER_SM"] = "0"
    grids = json.loads(run_cli("doctor", "--json", env=env).stdout)["gpu_grids"]
    assert "ZARRSTREAM_GPU_BLOCKS_PER_SM='0'" in grids["error"]
    env["ZARRSTREAM_GPU_BLOCKS_PER_SM"] = "64"
    env["ZARRSTREAM_HTTP_IO_THREADS"] = "many"
    bad = json.loads(run_cli("doctor", "--json", env=env).stdout)
    assert "ZARRSTREAM_HTTP_IO_THREADS" in bad["http"]["error"]


def test_inspect_and_doctor_give_one_answer_for_where_chunks_decode(tmp_path):
    """Whether the GPU path decodes an array's chunks, and how or why not, is one answer
    (PlanGpuDecode) that `inspect --json` and `doctor STORE --json` both give, for stores written
    by zarr-python: compressors nvCOMP decodes, and chains it leaves to the CPU (bitshuffle,
    blosclz, v2's order F, which becomes a transpose, a v3 transpose)."""
    import numcodecs
    from zarr.codecs import Crc32cCodec, GzipCodec, TransposeCodec

    shape, chunks = (4, 8, 16), (1, 8, 16)
    dims = ["time", "latitude", "longitude"]
    # name → (store, create_array arguments, GPU-decodable, the answer's description)
    cases = {
        "zstd": ("v2", dict(compressors=numcodecs.Zstd(level=3)), True, "zstd"),
        "gzip": ("v2", dict(compressors=numcodecs.GZip()), True, "gzip"),
        "zlib": ("v2", dict(compressors=numcodecs.Zlib()), True, "zlib"),
        "lz4": ("v2", dict(compressors=numcodecs.LZ4()), True, "lz4"),
        "blosc_lz4": ("v2", dict(compressors=numcodecs.Blosc(cname="lz4", shuffle=numcodecs.Blosc.SHUFFLE)),
                      True, "blosc with lz4 and byte shuffle"),
        "blosc_zstd": ("v2", dict(compressors=numcodecs.Blosc(cname="zstd", shuffle=numcodecs.Blosc.NOSHUFFLE)),
                       True, "blosc with zstd"),
        "blosc_bitshuffle": ("v2", dict(compressors=numcodecs.Blosc(cname="lz4", shuffle=numcodecs.Blosc.BITSHUFFLE)),
                             False, "blosc with bitshuffle"),
        "blosc_blosclz": ("v2", dict(compressors=numcodecs.Blosc(cname="blosclz")), False,
                          "blosc with blosclz (nvCOMP decodes lz4 and zstd inside blosc)"),
        "zlib_big_endian": ("v2", dict(compressors=numcodecs.Zlib(), dtype=">f8"), True, "zlib, big-endian"),
        "zlib_f_order": ("v2", dict(compressors=numcodecs.Zlib(), dtype=">f8", order="F"), False,
                         "transpose codec (v2 order F, or a v3 transpose)"),
        "crc32c": ("v3", dict(compressors=[GzipCodec(), Crc32cCodec()]), True, "gzip + crc32c"),
        "sharded": ("v3", dict(shards=(2, 8, 16), compressors=ZstdCodec(level=3)), True, "zstd"),
        "sharded_bitshuffle": ("v3", dict(shards=(2, 8, 16),
                                          compressors=BloscCodec(cname="zstd", shuffle="bitshuffle")),
                               False, "blosc with bitshuffle"),
        "transposed": ("v3", dict(filters=[TransposeCodec(order=(0, 2, 1))], compressors=ZstdCodec()), False,
                       "transpose codec (v2 order F, or a v3 transpose)"),
    }
    groups = {"v2": zarr.open_group(str(tmp_path / "v2.zarr"), mode="w", zarr_format=2),
              "v3": zarr.open_group(str(tmp_path / "v3.zarr"), mode="w", zarr_format=3)}
    for name, (where, kwargs, _, _) in cases.items():
        kwargs = dict(dtype="float32") | kwargs
        if where == "v2":
            kwargs["attributes"] = {"_ARRAY_DIMENSIONS": dims}
        else:
            kwargs["dimension_names"] = dims
        a = groups[where].create_array(name, shape=shape, chunks=chunks, **kwargs)
        a[...] = make_compressible(kwargs["dtype"], shape, seed=len(name))

    for where in groups:
        url = tmp_path / f"{where}.zarr"
        proc = run_cli("inspect", url, "--json")
        assert proc.returncode == 0, proc.stderr
        inspected = {p: n for p, n in iter_nodes(json.loads(proc.stdout)) if n.get("kind") == "array"}
        proc = run_cli("doctor", url, "--json")
        assert proc.returncode == 0, proc.stderr
        advised = {a["name"]: a for a in json.loads(proc.stdout)["store"]["arrays"]}
        names = {n for n, case in cases.items() if case[0] == where}
        assert set(inspected) == set(advised) == names
        for name in names:
            _, _, gpu, description = cases[name]
            for report in (inspected[name], advised[name]):
                assert (report["gpu_decodable"], report["gpu_decode"]) == (gpu, description), name
            findings = inspected[name]["warnings"] + inspected[name]["notes"]
            cpu_warnings = [w for w in findings if "GPU path cannot decode" in w]
            assert cpu_warnings == ([] if gpu else [f"the GPU path cannot decode these chunks ({description}): "
                                                    "the CPU decodes them"]), name
        text = run_cli("doctor", url).stdout
        for name in names:
            _, _, gpu, description = cases[name]
            line = next(ln for ln in text.splitlines() if ln.strip().startswith(name + " "))
            assert line.endswith(("GPU-decodable: " if gpu else "decoded on the CPU: ") + description), line


def test_doctor_on_a_store_names_its_layout_problems_and_the_rechunk_that_fixes_them(tmp_path):
    """A WeatherBench2-like v2 store written by zarr-python: 4 steps per chunk, no consolidated
    metadata. doctor says so and prints a rechunk command; after running that command the store
    needs no further rechunk."""
    import numcodecs

    src = tmp_path / "wb2.zarr"
    g = zarr.open_group(str(src), mode="w", zarr_format=2)
    t = g.create_array("time", shape=(16,), chunks=(16,), dtype="int64")
    t[...] = 6 * np.arange(16)
    t.attrs.update({"_ARRAY_DIMENSIONS": ["time"], "units": "hours since 2000-01-01"})
    for name, shape, dims in [("t2m", (16, 64, 128), ["time", "latitude", "longitude"]),
                              ("z", (16, 3, 64, 128), ["time", "level", "latitude", "longitude"])]:
        a = g.create_array(name, shape=shape, chunks=(4,) + shape[1:], dtype="float32",
                           compressors=numcodecs.Blosc(cname="blosclz"))
        a[...] = np.random.default_rng(0).standard_normal(shape).astype("float32")
        a.attrs["_ARRAY_DIMENSIONS"] = dims
    proc = run_cli("doctor", src, "--json")
    assert proc.returncode == 0, proc.stderr
    store = json.loads(proc.stdout)["store"]
    assert store["kind"] == "group" and store["consolidated"] is False
    assert store["open_requests"] > 2
    by_name = {a["name"]: a for a in store["arrays"]}
    assert set(by_name) == {"t2m", "z"}  # the coordinate is not a field
    assert by_name["z"]["time_steps_per_chunk"] == 4 and by_name["z"]["levels_per_chunk"] == 3
    assert by_name["t2m"]["gpu_decodable"] is False
    assert by_name["t2m"]["gpu_decode"] == "blosc with blosclz (nvCOMP decodes lz4 and zstd inside blosc)"
    messages = " ".join(f["message"] for f in store["findings"])
    assert "4 time steps per chunk" in messages and "no consolidated metadata" in messages
    command = store["rechunk_command"].split()
    assert command[:4] == ["zarrstream", "rechunk", str(src), str(tmp_path / "wb2-train.zarr")]
    text = run_cli("doctor", src)
    assert text.returncode == 0 and "fix: zarrstream rechunk" in text.stdout

    assert command[4:] == ["--gpu-friendly"]  # the README's advice, on any machine
    inspected = json.loads(run_cli("inspect", src, "--json").stdout)
    assert inspected["rechunk_command"] == store["rechunk_command"]
    members = {m["name"]: m for m in inspected["members"]}
    assert any("4 steps of 'time'" in w for w in members["t2m"]["warnings"])
    assert members["time"]["warnings"] == [] and members["time"]["notes"] == []  # a coordinate
    assert members["time"]["time_range"] == ["2000-01-01T00:00:00", "2000-01-04T18:00:00"]

    assert_clean_exit(run_cli(*command[1:]))
    again = json.loads(run_cli("doctor", tmp_path / "wb2-train.zarr", "--json").stdout)["store"]
    assert again["rechunk_command"] is None, again["findings"]
    assert all(a["time_steps_per_chunk"] == 1 for a in again["arrays"])
    assert [f for f in again["findings"] if f["severity"] == "warning"] == []
    # inspect agrees: the --gpu-friendly output's own chunks draw no warning.
    inspected = json.loads(run_cli("inspect", tmp_path / "wb2-train.zarr", "--json").stdout)
    assert inspected["rechunk_command"] is None
    assert all(m.get("warnings", []) == [] for _, m in iter_nodes(inspected)), inspected

    missing = run_cli("doctor", tmp_path / "nothing.zarr")
    assert missing.returncode == 1 and "nothing.zarr" in missing.stderr

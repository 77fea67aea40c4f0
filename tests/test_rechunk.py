"""`zarrstream rechunk`: what it writes equals the source as zarr-python, tensorstore and xarray
read it, for every option; interruption and resume; parts that together equal one run; the
memory bound; and clear errors."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numcodecs
import numpy as np
import pytest
import zarr
from zarr.codecs import ZstdCodec

from conftest import run_cli

NT, NL, NY, NX = 12, 4, 9, 16
LEVELS = np.array([250, 500, 850, 1000], dtype=np.int64)


def field(shape, seed):
    """Smooth fields with noise: compressible like real data, never constant."""
    rng = np.random.default_rng(seed)
    base = np.cumsum(rng.standard_normal(shape), axis=-1)
    return (280.0 + base).astype(np.float32)


def write_dataset(path: Path, zarr_format: int, time_chunk: int = 5) -> dict[str, np.ndarray]:
    """An ERA5-shaped dataset as xarray lays it out, written by zarr-python."""
    data = {
        "t2m": field((NT, NY, NX), 1),
        "temperature": field((NT, NL, NY, NX), 2),
        "orography": field((NY, NX), 3),
        "time": np.arange(NT, dtype=np.int64) * 6 + 692496,  # 1979-01-01 in hours since 1900
        "level": LEVELS,
        "latitude": np.linspace(80, -80, NY).astype(np.float32),
        "longitude": np.linspace(0, 337.5, NX).astype(np.float32),
    }
    dims = {
        "t2m": ("time", "latitude", "longitude"),
        "temperature": ("time", "level", "latitude", "longitude"),
        "orography": ("latitude", "longitude"),
        "time": ("time",),
        "level": ("level",),
        "latitude": ("latitude",),
        "longitude": ("longitude",),
    }
    chunks = {
        "t2m": (time_chunk, NY, NX),
        "temperature": (time_chunk, NL, NY, NX),
        "orography": (NY, NX),
    }
    root = zarr.open_group(str(path), mode="w", zarr_format=zarr_format)
    root.attrs["title"] = "rechunk fixture"
    for name, values in data.items():
        kwargs = {}
        if zarr_format == 2:
            kwargs["compressors"] = [numcodecs.Blosc(cname="lz4", clevel=5, shuffle=numcodecs.Blosc.SHUFFLE)]
            kwargs["attributes"] = {"_ARRAY_DIMENSIONS": list(dims[name])}
        else:
            kwargs["compressors"] = [ZstdCodec(level=1)]
            kwargs["dimension_names"] = dims[name]
        arr = root.create_array(name, shape=values.shape, dtype=values.dtype,
                                chunks=chunks.get(name, values.shape), **kwargs)
        arr[...] = values
        if name == "time":
            arr.attrs.update({"units": "hours since 1900-01-01 00:00:00",
                              "calendar": "proleptic_gregorian"})
        else:
            arr.attrs["units"] = "K" if name != "level" else "hPa"
    zarr.consolidate_metadata(str(path))
    return data


@pytest.fixture(params=[2, 3], ids=["v2-blosc", "v3-zstd"])
def dataset(request, tmp_path):
    src = tmp_path / "src.zarr"
    return src, write_dataset(src, request.param)


def rechunk(*args, check=True):
    proc = run_cli("rechunk", *args, timeout=120)
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


def stored_files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_rechunk_group_equals_source_for_every_reader(dataset, tmp_path):
    src, data = dataset
    dst = tmp_path / "dst.zarr"
    proc = rechunk(src, dst, "--chunks", "time=1,level=1", "--codec", "zstd:3")
    assert "complete" in proc.stdout

    group = zarr.open_group(str(dst), mode="r", use_consolidated=True)
    assert group.metadata.zarr_format == 3
    assert dict(group.attrs) == {"title": "rechunk fixture"}
    for name, values in data.items():
        arr = group[name]
        np.testing.assert_array_equal(arr[...], values, err_msg=name)
        assert arr.dtype == values.dtype
    assert group["temperature"].chunks == (1, 1, NY, NX)
    assert group["t2m"].chunks == (1, NY, NX)
    assert group["orography"].chunks == (NY, NX)  # no named dims: full extent
    assert group["temperature"].metadata.dimension_names == ("time", "level", "latitude", "longitude")
    assert "_ARRAY_DIMENSIONS" not in group["temperature"].attrs
    assert group["time"].attrs["units"] == "hours since 1900-01-01 00:00:00"
    codecs = json.loads((dst / "temperature" / "zarr.json").read_text())["codecs"]
    assert [c["name"] for c in codecs] == ["bytes", "zstd"]
    assert codecs[1]["configuration"]["level"] == 3
    # Once the job is complete its progress records give way to the record of the finished job.
    assert sorted(p.name for p in (dst / ".zarrstream-rechunk").iterdir()) == ["finished.json"]

    import xarray as xr

    ds = xr.open_zarr(str(dst), consolidated=True)
    assert ds["temperature"].dims == ("time", "level", "latitude", "longitude")
    assert str(ds["time"].values[0]).startswith("1979-01-01T00")
    np.testing.assert_array_equal(ds["t2m"].values, data["t2m"])


def test_rechunk_sharded_is_read_by_tensorstore(dataset, tmp_path):
    import tensorstore as ts

    src, data = dataset
    dst = tmp_path / "dst.zarr"
    rechunk(src, dst, "--chunks", "time=1,level=1", "--shard", "time=4", "--codec", "blosc:lz4:5:shuffle")
    meta = json.loads((dst / "temperature" / "zarr.json").read_text())
    assert meta["chunk_grid"]["configuration"]["chunk_shape"] == [4, 1, NY, NX]
    sharding = meta["codecs"][0]
    assert sharding["name"] == "sharding_indexed"
    assert sharding["configuration"]["chunk_shape"] == [1, 1, NY, NX]
    for name in ("temperature", "t2m"):
        arr = ts.open({"driver": "zarr3", "kvstore": {"driver": "file", "path": str(dst / name)}}).result()
        np.testing.assert_array_equal(arr.read().result(), data[name], err_msg=name)


def test_rechunk_select_and_vars(dataset, tmp_path):
    src, data = dataset
    dst = tmp_path / "dst.zarr"
    rechunk(src, dst, "--vars", "temperature", "--select", "time=1979-01-01T06:1979-01-02T12",
            "--select", "latitude=60:-20", "--chunks", "time=2")
    group = zarr.open_group(str(dst), mode="r")
    assert sorted(group.array_keys()) == ["latitude", "level", "longitude", "temperature", "time"]
    lat = data["latitude"]
    lat_sel = (lat <= 60) & (lat >= -20)
    expected = data["temperature"][1:7][:, :, lat_sel]
    np.testing.assert_array_equal(group["temperature"][...], expected)
    np.testing.assert_array_equal(group["time"][...], data["time"][1:7])
    np.testing.assert_array_equal(group["latitude"][...], lat[lat_sel])
    assert group["temperature"].chunks == (2, NL, int(lat_sel.sum()), NX)


def test_rechunk_stack_builds_channels(dataset, tmp_path):
    src, data = dataset
    dst = tmp_path / "dst.zarr"
    proc = rechunk(src, dst, "--stack", "inputs", "--vars", "temperature@*,t2m")
    group = zarr.open_group(str(dst), mode="r")
    inputs = group["inputs"]
    assert inputs.metadata.dimension_names == ("time", "channel", "latitude", "longitude")
    names = [f"temperature@{level}" for level in LEVELS] + ["t2m"]
    assert list(inputs.attrs["channel_names"]) == names
    expected = np.concatenate([data["temperature"], data["t2m"][:, None]], axis=1)
    np.testing.assert_array_equal(inputs[...], expected)
    assert inputs.chunks == (1, 1, NY, NX)
    assert "temperature" not in group
    # A slab takes every channel and a source chunk's time steps: each source chunk (all levels
    # of several steps) is decoded once, not once per level and step.
    assert "read amplification 1.00x" in proc.stdout, proc.stdout


def test_rechunk_stack_picks_levels(dataset, tmp_path):
    src, data = dataset
    dst = tmp_path / "dst.zarr"
    rechunk(src, dst, "--stack", "inputs", "--vars", "temperature@500,1000,t2m")
    inputs = zarr.open_group(str(dst), mode="r")["inputs"]
    assert list(inputs.attrs["channel_names"]) == ["temperature@500", "temperature@1000", "t2m"]
    expected = np.stack([data["temperature"][:, 1], data["temperature"][:, 3], data["t2m"]], axis=1)
    np.testing.assert_array_equal(inputs[...], expected)


def test_rechunk_single_array(tmp_path):
    src = tmp_path / "a.zarr"
    values = field((10, 7, 5), 4)
    zarr.create_array(str(src), shape=values.shape, dtype=values.dtype, chunks=(10, 7, 5),
                      dimension_names=("time", "y", "x"))[...] = values
    dst = tmp_path / "b.zarr"
    rechunk(src, dst, "--chunks", "time=3", "--codec", "blosc:zstd:3:bitshuffle")
    arr = zarr.open_array(str(dst), mode="r")
    assert arr.chunks == (3, 7, 5)
    np.testing.assert_array_equal(arr[...], values)


def test_rechunk_resumes_after_a_failure_and_equals_an_uninterrupted_run(tmp_path):
    src = tmp_path / "src.zarr"
    data = write_dataset(src, 3, time_chunk=1)
    # Break one source chunk late in time order: the first run fails there after writing earlier
    # slabs, and records them.
    victim = src / "t2m" / "c" / "9" / "0" / "0"
    good = victim.read_bytes()
    victim.write_bytes(b"not zstd at all")
    dst = tmp_path / "dst.zarr"
    args = ["--chunks", "time=1", "--threads", "1", "--vars", "t2m"]
    failed = rechunk(src, dst, *args, check=False)
    assert failed.returncode == 1
    assert "t2m" in failed.stderr and "c/9/0/0" in failed.stderr, failed.stderr
    state = json.loads((dst / ".zarrstream-rechunk" / "part-0-of-1.json").read_text())
    assert state["complete"] is False and state["done"], state
    # Rerunning with other options is refused rather than mixing two layouts.
    other = rechunk(src, dst, "--chunks", "time=2", "--threads", "1", "--vars", "t2m", check=False)
    assert other.returncode == 1 and "unfinished rechunk" in other.stderr

    victim.write_bytes(good)
    resumed = rechunk(src, dst, *args)
    assert "already done, skipped" in resumed.stdout
    np.testing.assert_array_equal(zarr.open_group(str(dst), mode="r")["t2m"][...], data["t2m"])

    fresh = tmp_path / "fresh.zarr"
    rechunk(src, fresh, *args)
    assert stored_files(dst) == stored_files(fresh)


def test_rechunk_parts_together_equal_one_run(tmp_path):
    src = tmp_path / "src.zarr"
    write_dataset(src, 3, time_chunk=1)
    whole = tmp_path / "whole.zarr"
    opts = ["--chunks", "time=1,level=1", "--shard", "time=2"]
    rechunk(src, whole, *opts)
    parts = tmp_path / "parts.zarr"
    for i in range(3):
        proc = rechunk(src, parts, *opts, "--part", f"{i}/3")
        done = "complete" in proc.stdout
        assert done == (i == 2), proc.stdout
        records = sorted(p.name for p in (parts / ".zarrstream-rechunk").iterdir())
        assert (records == ["finished.json"]) == (i == 2), records
    # The finished records differ only in the part count they name.
    def written(root):
        return {k: v for k, v in stored_files(root).items() if not k.startswith(".zarrstream-")}
    assert written(parts) == written(whole)


def test_rechunk_memory_stays_within_the_bound(tmp_path):
    src = tmp_path / "big.zarr"
    nt, ny, nx = 48, 512, 1024  # 100 MB of float32
    arr = zarr.create_array(str(src), shape=(nt, ny, nx), dtype="float32", chunks=(4, ny, nx),
                            dimension_names=("time", "y", "x"), compressors=[ZstdCodec(level=1)])
    for t in range(0, nt, 8):
        arr[t:t + 8] = field((8, ny, nx), t)  # zarr-python writes two source chunks at a time
    dst = tmp_path / "out.zarr"
    proc = rechunk(src, dst, "--chunks", "time=1", "--memory", "0.02", "--threads", "2")
    match = re.search(r"memory bound ([0-9.]+) MB, peak resident ([0-9.]+) MB", proc.stdout)
    assert match, proc.stdout
    bound_mb, peak_mb = float(match.group(1)), float(match.group(2))
    # Slabs in flight plus per-thread scratch for an 8 MB source chunk: well below the 100 MB
    # array; the process stays within the bound plus the program itself.
    assert bound_mb < 70, proc.stdout
    assert peak_mb < bound_mb + 30, proc.stdout
    np.testing.assert_array_equal(zarr.open_array(str(dst), mode="r")[40:48], arr[40:48])


def test_rechunk_parts_share_the_slabs_of_many_small_arrays(tmp_path):
    # Six arrays of two slabs each among four parts: cut array by array, parts 1 and 3 took every
    # slab and parts 0 and 2 none. Cut across the arrays by bytes, each part takes three slabs.
    import zarrstream

    src = tmp_path / "src.zarr"
    root = zarr.open_group(str(src), mode="w", zarr_format=3)
    expected = {}
    for i in range(6):
        values = field((4, 8, 16), 10 + i)
        root.create_array(f"v{i}", shape=values.shape, dtype="float32", chunks=(2, 8, 16),
                          dimension_names=("time", "y", "x"),
                          compressors=[ZstdCodec(level=1)])[...] = values
        expected[f"v{i}"] = values
    zarr.consolidate_metadata(str(src))
    dst = tmp_path / "out.zarr"
    plan = zarrstream.plan_rechunk(src, dst, parts=4, chunks="time=1", memory=0.001, threads=1)
    reports = [part.run() for part in plan.parts]
    slab_bytes = 2 * 8 * 16 * 4
    assert [r.slabs_written for r in reports] == [3, 3, 3, 3]
    assert [r.output_bytes for r in reports] == [3 * slab_bytes] * 4
    assert reports[-1].job_complete
    out = zarr.open_group(str(dst), mode="r")
    for name, values in expected.items():
        np.testing.assert_array_equal(out[name][...], values, err_msg=name)


def test_rechunk_reused_slab_buffers_carry_nothing_between_slabs(tmp_path):
    # Slab buffers are kept from one slab to the next: a slab after a larger one, one of another
    # array, and one whose source chunks are not stored (read as the fill value) must hold only
    # their own values. One source chunk per slab (--memory), so each array is many slabs.
    src = tmp_path / "src.zarr"
    root = zarr.open_group(str(src), mode="w", zarr_format=3)
    expected = {}
    for name, shape, chunks in (("wide", (23, 64, 96), (2, 64, 96)),
                                ("narrow", (17, 16, 24), (3, 16, 24))):
        values = field(shape, len(name))
        arr = root.create_array(name, shape=shape, dtype="float32", chunks=chunks, fill_value=-7.0,
                                dimension_names=("time", "y", "x"),
                                compressors=[ZstdCodec(level=1)])
        # Every other source chunk is left unstored: those steps read as the fill value.
        for t in range(0, shape[0], 2 * chunks[0]):
            arr[t:t + chunks[0]] = values[t:t + chunks[0]]
        expected[name] = arr[...]
        assert (expected[name] == -7.0).any() and (expected[name] != -7.0).any()
    zarr.consolidate_metadata(str(src))
    one = tmp_path / "one.zarr"
    rechunk(src, one, "--chunks", "time=1", "--memory", "0.001", "--threads", "2")
    parts = tmp_path / "parts.zarr"
    for i in range(3):
        rechunk(src, parts, "--chunks", "time=1", "--memory", "0.001", "--threads", "2",
                "--part", f"{i}/3")
    for dst in (one, parts):
        out = zarr.open_group(str(dst), mode="r")
        for name, values in expected.items():
            np.testing.assert_array_equal(out[name][...], values, err_msg=f"{dst.name}: {name}")


@pytest.mark.parametrize(
    "args, message",
    [
        (["--chunks", "height=1"], "names dimension 'height'"),
        (["--chunks", "time=0"], "positive integer"),
        (["--chunks", "time=3", "--shard", "time=4"], "not a multiple"),
        (["--vars", "nope"], "no variable 'nope'"),
        (["--vars", "temperature@500"], "needs --stack"),
        (["--stack", "x", "--vars", "temperature@123"], "123"),
        (["--select", "time=2030-01-01:2031-01-01"], "time"),
        (["--part", "3/3"], "--part"),
        (["--codec", "snappy"], "snappy"),
    ],
)
def test_rechunk_errors_are_clear(dataset, tmp_path, args, message):
    src, _ = dataset
    proc = rechunk(src, tmp_path / "dst.zarr", *args, check=False)
    assert proc.returncode != 0
    assert message in proc.stderr, proc.stderr


def test_rechunk_refuses_to_replace_without_overwrite(dataset, tmp_path):
    src, data = dataset
    dst = tmp_path / "dst.zarr"
    rechunk(src, dst)
    again = rechunk(src, dst, "--chunks", "time=2", check=False)
    assert again.returncode == 1 and "--overwrite" in again.stderr
    assert "finished rechunk with other options" in again.stderr
    other = tmp_path / "other.zarr"
    other.mkdir()
    (other / "notes.txt").write_text("not a rechunk")
    refused = rechunk(src, other, check=False)
    assert refused.returncode == 1 and "not empty" in refused.stderr
    rechunk(src, dst, "--chunks", "time=2", "--overwrite")
    group = zarr.open_group(str(dst), mode="r")
    assert group["t2m"].chunks == (2, NY, NX)
    np.testing.assert_array_equal(group["t2m"][...], data["t2m"])


def test_rechunk_gpu_friendly_preset(dataset, tmp_path):
    src, data = dataset
    dst = tmp_path / "dst.zarr"
    rechunk(src, dst, "--gpu-friendly")
    group = zarr.open_group(str(dst), mode="r", use_consolidated=True)
    # One 2-D field per chunk, one time step per shard, blosc-lz4 with byte shuffle.
    temperature = group["temperature"]
    assert temperature.chunks == (1, 1, NY, NX)
    assert temperature.shards == (1, NL, NY, NX)
    inner = json.loads((dst / "temperature" / "zarr.json").read_text())["codecs"][0]
    blosc = inner["configuration"]["codecs"][1]
    assert blosc["name"] == "blosc"
    assert blosc["configuration"]["cname"] == "lz4" and blosc["configuration"]["clevel"] == 5
    assert blosc["configuration"]["shuffle"] == "shuffle"
    # A 2-D variable's shard would be one chunk: not sharded.
    assert group["t2m"].chunks == (1, NY, NX) and group["t2m"].shards is None
    for name in ("temperature", "t2m"):
        np.testing.assert_array_equal(group[name][...], data[name], err_msg=name)


def test_rechunk_sharded_and_fortran_ordered_sources(tmp_path):
    """Sources in the other layouts readers meet: a sharded v3 array and a v2 array in F order."""
    values = field((10, 6, 8), 7)
    sharded = tmp_path / "sharded.zarr"
    zarr.create_array(str(sharded), shape=values.shape, dtype=values.dtype, chunks=(2, 3, 8),
                      shards=(4, 6, 8), dimension_names=("time", "y", "x"))[...] = values
    fortran = tmp_path / "fortran.zarr"
    arr = zarr.create_array(str(fortran), shape=values.shape, dtype=values.dtype, chunks=(3, 6, 8),
                            zarr_format=2, order="F", attributes={"_ARRAY_DIMENSIONS": ["time", "y", "x"]})
    arr[...] = values
    for src in (sharded, fortran):
        dst = tmp_path / f"{src.stem}-out.zarr"
        rechunk(src, dst, "--chunks", "time=1,y=3", "--shard", "time=5")
        out = zarr.open_array(str(dst), mode="r")
        assert out.chunks == (1, 3, 8) and out.shards == (5, 3, 8)  # y not named: chunk extent
        np.testing.assert_array_equal(out[...], values, err_msg=str(src))


def test_rechunk_killed_midway_resumes_to_the_same_result(tmp_path):
    """SIGKILL at an arbitrary point: the rerun continues from the recorded slabs and the result
    equals an uninterrupted run (atomic object writes: nothing torn)."""
    import signal

    src, arr = slow_source(tmp_path)
    dst = tmp_path / "dst.zarr"
    opts = ["--chunks", "time=1,y=64", "--codec", "gzip:9", "--threads", "1"]
    proc = start_rechunk_and_wait_for_progress([src, dst, *opts],
                                               dst / ".zarrstream-rechunk" / "part-0-of-1.json")
    proc.send_signal(signal.SIGKILL)
    proc.wait()

    resumed = rechunk(src, dst, *opts)
    assert "already done, skipped" in resumed.stdout, resumed.stdout
    fresh = tmp_path / "fresh.zarr"
    rechunk(src, fresh, *opts)
    out = zarr.open_array(str(dst), mode="r")
    np.testing.assert_array_equal(out[...], arr[...])
    # Objects a killed write left half-made never replaced a chunk, and the finished job removed
    # the temporary files they were.
    assert stored_files(dst) == stored_files(fresh)


def start_rechunk_and_wait_for_progress(args, state: Path):
    """Starts `zarrstream rechunk ARGS` and returns the process once it has recorded finished
    slabs (it must still be running: the job is large enough)."""
    import subprocess
    import time

    from conftest import CLI

    proc = subprocess.Popen([str(CLI), "rechunk", *map(str, args)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if state.exists() and json.loads(state.read_text() or "{}").get("done"):
            break
        time.sleep(0.05)
    assert proc.poll() is None, "the run finished before it could be interrupted"
    return proc


def slow_source(tmp_path: Path):
    """A source that rechunks slowly (gzip:9 on one thread, 96 slabs)."""
    src = tmp_path / "src.zarr"
    nt, ny, nx = 96, 256, 512
    arr = zarr.create_array(str(src), shape=(nt, ny, nx), dtype="float32", chunks=(1, ny, nx),
                            dimension_names=("time", "y", "x"), compressors=[ZstdCodec(level=1)])
    for t in range(0, nt, 8):
        arr[t:t + 8] = field((8, ny, nx), t)
    return src, arr


def test_rechunk_interrupted_by_sigint_saves_progress_and_resumes_to_the_same_result(tmp_path):
    """Ctrl-C: no new slab starts, the ones in flight finish, the progress is saved and the
    command says so and exits with 130; the rerun finishes and equals an uninterrupted run, and
    nothing half-written is left behind."""
    import signal

    src, arr = slow_source(tmp_path)
    dst = tmp_path / "dst.zarr"
    opts = ["--chunks", "time=1,y=64", "--codec", "gzip:9", "--threads", "1"]
    state = dst / ".zarrstream-rechunk" / "part-0-of-1.json"
    proc = start_rechunk_and_wait_for_progress([src, dst, *opts], state)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)  # a generous bound on finishing the slab in flight
    assert proc.returncode == 130, err
    assert "interrupted" in err and "progress saved" in err and str(dst) in err, err
    assert "rerun the same command" in err, err
    record = json.loads(state.read_text())
    assert record["complete"] is False and record["done"], record
    assert not [k for k in stored_files(dst) if ".zstmp." in k], "a temporary object was left"

    resumed = rechunk(src, dst, *opts)
    assert "already done, skipped" in resumed.stdout and "complete" in resumed.stdout
    assert not state.exists()
    fresh = tmp_path / "fresh.zarr"
    rechunk(src, fresh, *opts)
    np.testing.assert_array_equal(zarr.open_array(str(dst), mode="r")[...], arr[...])
    assert stored_files(dst) == stored_files(fresh)


# Runs in a user and mount namespace of its own (unshare --user --map-root-user --mount): mounts a
# small tmpfs, rechunks onto it until the disk is full, copies what is there out, makes room
# (remount with a larger size) and reruns; reports the runs as JSON. Arguments: a JSON object.
DISK_FULL_DRIVER = r"""
import json, shutil, subprocess, sys
job = json.loads(sys.argv[1])
report = {}
def mount(options):
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", job["mount"]],
                          capture_output=True, text=True)
    return proc.returncode == 0, proc.stderr.strip()
ok, why = mount("size=" + job["small"])
if not ok:
    report["mount_error"] = why
else:
    dst = job["mount"] + "/dst.zarr"
    def run():
        proc = subprocess.run([job["cli"], "rechunk", job["src"], dst, *job["options"]],
                              capture_output=True, text=True, timeout=300)
        return {"returncode": proc.returncode, "stdout": proc.stdout, "stderr": proc.stderr}
    report["full"] = run()
    shutil.copytree(dst, job["after_full"])
    ok, why = mount("remount,size=" + job["large"])
    report["remount_error"] = None if ok else why
    report["resumed"] = run()
    shutil.copytree(dst, job["after_resume"])
print(json.dumps(report))
"""


def disk_full_source(tmp_path: Path) -> tuple[Path, np.ndarray]:
    """16 time steps that compress to almost nothing, then 16 of random bits (~128 KB each, stored
    as they are): a small disk fills up part way through."""
    ny, nx = 128, 250
    values = np.full((32, ny, nx), 7, dtype=np.int32)  # not the fill value 0: stored
    values[16:] = np.random.default_rng(5).integers(-2**31, 2**31 - 1, (16, ny, nx), dtype=np.int32)
    src = tmp_path / "src.zarr"
    zarr.create_array(str(src), shape=values.shape, dtype=values.dtype, chunks=(8, ny, nx),
                      dimension_names=("time", "y", "x"),
                      compressors=[ZstdCodec(level=1)])[...] = values
    return src, values


@pytest.mark.parametrize("steps_per_object", [1, 4], ids=["chunks", "shards"])
def test_rechunk_on_a_full_disk_fails_clearly_and_resumes_to_the_same_result(tmp_path,
                                                                            steps_per_object):
    """A real ENOSPC (a 1 MiB tmpfs in a user+mount namespace) or, where namespaces are not
    allowed, EFBIG from RLIMIT_FSIZE: the command fails naming the destination object, leaves no
    torn or temporary object (zarr-python reads every chunk or shard there), keeps its progress,
    and once there is room a rerun finishes with exactly what an uninterrupted run writes."""
    import resource
    import shutil
    import subprocess
    import sys

    from conftest import CLI

    src, values = disk_full_source(tmp_path)
    opts = ["--chunks", "time=1", "--codec", "zstd:1", "--threads", "1"]
    if steps_per_object > 1:
        opts += ["--shard", f"time={steps_per_object}"]
    fresh = tmp_path / "fresh.zarr"
    rechunk(src, fresh, *opts)

    unshare = shutil.which("unshare")
    mount_dir = tmp_path / "small-disk"
    mount_dir.mkdir()
    job = {"cli": str(CLI), "src": str(src), "options": opts, "mount": str(mount_dir),
           "small": "1m", "large": "64m", "after_full": str(tmp_path / "after-full.zarr"),
           "after_resume": str(tmp_path / "after-resume.zarr")}
    report, why_not = None, ""
    if unshare:
        proc = subprocess.run([unshare, "--user", "--map-root-user", "--mount", sys.executable,
                               "-c", DISK_FULL_DRIVER, json.dumps(job)],
                              capture_output=True, text=True, timeout=600)
        if proc.returncode == 0:
            report = json.loads(proc.stdout)
            if "mount_error" in report:
                why_not, report = f"mounting a tmpfs: {report['mount_error']}", None
        else:
            why_not = f"unshare failed: {proc.stderr.strip()}"
    else:
        why_not = "no unshare command"

    if report is not None:
        full, resumed = report["full"], report["resumed"]
        assert report["remount_error"] is None, report["remount_error"]
        after_full, dst = Path(job["after_full"]), Path(job["after_resume"])
        assert "No space left on device" in full["stderr"], full["stderr"]
        dst_shown = str(mount_dir / "dst.zarr")
    else:
        # No namespaces here: a per-file size limit fails the first large object with EFBIG
        # (SIGXFSZ stays ignored, as Python leaves it, so the write returns the error).
        print(f"disk-full test: no tmpfs ({why_not}); using RLIMIT_FSIZE instead")
        dst = tmp_path / "dst.zarr"
        limit = 64 * 1024

        def limit_file_size():
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

        proc = subprocess.run([str(CLI), "rechunk", str(src), str(dst), *opts],
                              capture_output=True, text=True, timeout=300,
                              preexec_fn=limit_file_size, restore_signals=False)
        full = {"returncode": proc.returncode, "stderr": proc.stderr}
        assert "File too large" in full["stderr"], full["stderr"]
        after_full = tmp_path / "after-full.zarr"
        shutil.copytree(dst, after_full)
        resumed = {"returncode": 0, **vars(rechunk(src, dst, *opts))}
        dst_shown = str(dst)

    # The failure names the object it could not write, in the destination, and the slab.
    assert full["returncode"] == 1, full
    # Slabs of 8 steps (a source chunk each): the first two compress to nothing, the third fails.
    assert f"writing slab (16,0,0) of the array at {dst_shown} (2 of 4)" in full["stderr"], \
        full["stderr"]
    assert f"{dst_shown}/c/" in full["stderr"], full["stderr"]
    # Nothing torn: no temporary left, every stored chunk decodes to the source's values.
    written = stored_files(after_full)
    assert not [k for k in written if ".zstmp." in k], sorted(written)
    objects = sorted(int(k.split("/")[1]) for k in written if k.startswith("c/"))
    half = 16 // steps_per_object
    assert half <= len(objects) < 2 * half, objects  # the compressible half fit, not the rest
    out = zarr.open_array(str(after_full), mode="r")
    for k in objects:
        steps = slice(k * steps_per_object, (k + 1) * steps_per_object)
        np.testing.assert_array_equal(out[steps], values[steps], err_msg=f"object c/{k}/0/0")
    state = json.loads((after_full / ".zarrstream-rechunk" / "part-0-of-1.json").read_text())
    assert state["complete"] is False and state["done"], state

    assert resumed["returncode"] == 0, resumed
    assert "already done, skipped" in resumed["stdout"], resumed["stdout"]
    assert stored_files(dst) == stored_files(fresh)


def test_rechunk_rerun_of_a_finished_job_is_a_no_op(dataset, tmp_path):
    """A requeued batch job reruns a command that already finished: it succeeds, writes nothing
    and leaves the output as it was; every part of a partitioned job does the same."""
    src, data = dataset
    dst = tmp_path / "dst.zarr"
    opts = ["--chunks", "time=2", "--codec", "lz4"]
    rechunk(src, dst, *opts)
    before = stored_files(dst)
    again = rechunk(src, dst, *opts)
    assert "complete" in again.stdout and "already done, skipped" in again.stdout, again.stdout
    assert stored_files(dst) == before
    for changed in (["--chunks", "time=3", "--codec", "lz4"], ["--chunks", "time=2"],
                    [*opts, "--vars", "t2m"]):
        refused = rechunk(src, dst, *changed, check=False)
        assert refused.returncode == 1 and "--overwrite" in refused.stderr, (changed, refused.stderr)
    assert stored_files(dst) == before

    parts = tmp_path / "parts.zarr"
    for i in (0, 1, 0, 1):
        rechunk(src, parts, *opts, "--part", f"{i}/2")
    np.testing.assert_array_equal(zarr.open_group(str(parts), mode="r")["t2m"][...], data["t2m"])


def test_rechunk_finished_job_removes_abandoned_temporary_files(tmp_path):
    """A run killed while writing an object leaves its temporary file; the run that finishes the
    job removes every such file (no part is writing any more then)."""
    src = tmp_path / "src.zarr"
    data = write_dataset(src, 3)
    dst = tmp_path / "dst.zarr"
    opts = ["--chunks", "time=2", "--shard", "time=4"]
    rechunk(src, dst, *opts, "--part", "0/2")
    # What a write killed before its rename leaves (a local store's temporary-file name).
    abandoned = [dst / "t2m" / "c" / "0" / "0" / "0.zstmp.4242.0", dst / "t2m" / "zarr.json.zstmp.7.3"]
    for path in abandoned:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"half")
    rechunk(src, dst, *opts, "--part", "1/2")
    assert not [k for k in stored_files(dst) if ".zstmp." in k], sorted(stored_files(dst))
    np.testing.assert_array_equal(zarr.open_group(str(dst), mode="r")["t2m"][...], data["t2m"])


@pytest.mark.parametrize("bad", [["--codec", "snappy"], ["--codec", "zstd:99"],
                                 ["--codec", "blosc:nope"]])
def test_rechunk_failed_start_does_not_block_the_corrected_command(dataset, tmp_path, bad):
    src, data = dataset
    dst = tmp_path / "dst.zarr"
    failed = rechunk(src, dst, "--chunks", "time=2", *bad, check=False)
    assert failed.returncode == 1, failed.stderr
    assert not dst.exists() or not any(dst.rglob("*")), sorted(dst.rglob("*"))
    rechunk(src, dst, "--chunks", "time=2", "--codec", "zstd:1")
    np.testing.assert_array_equal(zarr.open_group(str(dst), mode="r")["t2m"][...], data["t2m"])


# ---------------------------------------------------------------------------------------------
# Nothing lost for xarray: CF attributes and fill semantics survive v2 -> v3 and v3 -> v3.

def write_packed_era5(path: Path, zarr_format: int):
    """ERA5 as a netCDF conversion from the CDS arrives, written by xarray: int16 variables packed
    with scale_factor/add_offset and a _FillValue at missing cells (and a whole time chunk
    missing, so never stored), a float32 variable with NaN over land, CF time."""
    import pandas as pd
    import xarray as xr

    t2m = field((NT, NY, NX), 11).astype(np.float64)
    t2m[0, 0, :3] = np.nan
    t2m[7, 4, 7] = np.nan
    t2m[10:] = np.nan  # the third time chunk (steps 10, 11): all fill, not stored
    z = field((NT, NL, NY, NX), 12).astype(np.float64) * 100
    z[3, 2, 5, 5] = np.nan
    sst = field((NT, NY, NX), 13)
    sst[:, :2] = np.nan
    ds = xr.Dataset(
        {
            "t2m": (("valid_time", "latitude", "longitude"), t2m,
                    {"units": "K", "long_name": "2 metre temperature", "GRIB_paramId": 167}),
            "z": (("valid_time", "pressure_level", "latitude", "longitude"), z,
                  {"units": "m**2 s**-2", "standard_name": "geopotential"}),
            "sst": (("valid_time", "latitude", "longitude"), sst, {"units": "K"}),
        },
        coords={
            "valid_time": pd.date_range("2024-01-01", periods=NT, freq="6h"),
            "pressure_level": ("pressure_level", LEVELS.astype(np.float64), {"units": "hPa"}),
            "latitude": ("latitude", np.linspace(80, -80, NY), {"units": "degrees_north"}),
            "longitude": ("longitude", np.linspace(0, 337.5, NX), {"units": "degrees_east"}),
        },
        attrs={"Conventions": "CF-1.7", "institution": "European Centre for Medium-Range Weather Forecasts"},
    )
    packed = {"dtype": "int16", "_FillValue": -32767}
    encoding = {
        "t2m": {**packed, "scale_factor": 0.002, "add_offset": 280.0, "chunks": (5, NY, NX)},
        "z": {**packed, "scale_factor": 1.5, "add_offset": 28000.0, "chunks": (5, NL, NY, NX)},
        "sst": {"chunks": (5, NY, NX)},
    }
    ds.to_zarr(str(path), zarr_format=zarr_format, encoding=encoding, consolidated=True)


@pytest.mark.parametrize("zarr_format", [2, 3], ids=["v2", "v3"])
def test_rechunk_keeps_what_xarray_decodes(tmp_path, zarr_format):
    import xarray as xr

    src, dst = tmp_path / "src.zarr", tmp_path / "dst.zarr"
    write_packed_era5(src, zarr_format)
    if zarr_format == 2:
        # v2: xarray's _FillValue is the array's fill_value, so the all-missing chunk is not stored.
        assert json.loads((src / "t2m" / ".zarray").read_text())["fill_value"] == -32767
        assert "_FillValue" not in json.loads((src / "t2m" / ".zattrs").read_text())
        assert not (src / "t2m" / "2.0.0").exists()
    rechunk(src, dst, "--chunks", "valid_time=2,pressure_level=1")

    source = xr.open_zarr(str(src)).load()
    copy = xr.open_zarr(str(dst)).load()
    assert int(source["t2m"].isnull().sum()) == 3 + 1 + 2 * NY * NX
    xr.testing.assert_identical(copy, source)
    # Decoded the same way: the packing and the fill value survive as xarray reads them.
    for name in ("t2m", "z"):
        assert copy[name].encoding["dtype"] == np.int16
        for key in ("scale_factor", "add_offset", "_FillValue"):
            assert copy[name].encoding[key] == source[name].encoding[key], (name, key)
    # The raw values too, and the missing chunk is still missing.
    raw_source = xr.open_zarr(str(src), mask_and_scale=False).load()
    raw_copy = xr.open_zarr(str(dst), mask_and_scale=False).load()
    xr.testing.assert_identical(raw_copy, raw_source)
    if zarr_format == 2:
        assert not (dst / "t2m" / "c" / "5" / "0" / "0").exists()
    # A copy of the copy (v3 -> v3) is the same again.
    again = tmp_path / "again.zarr"
    rechunk(dst, again, "--chunks", "valid_time=4")
    xr.testing.assert_identical(xr.open_zarr(str(again)).load(), source)



def test_rechunk_stack_carries_no_stale_attributes(tmp_path):
    src, dst = tmp_path / "era5.zarr", tmp_path / "inputs.zarr"
    synth = run_cli("synth", src, "--preset", "era5-small", "--steps", 2)
    assert synth.returncode == 0, synth.stderr
    channels = ["geopotential@500", "2m_temperature"]
    rechunk(src, dst, "--stack", "inputs", "--vars", ",".join(channels), "--codec", "blosc:lz4:5:shuffle")
    source = zarr.open_group(str(src), mode="r")
    group = zarr.open_group(str(dst), mode="r")
    # The source's storage layout is not the copy's (blosc, not synth's zstd); its provenance is.
    assert source.attrs["layout"] == "v3-zstd"
    assert "layout" not in group.attrs
    assert group.attrs["source"] == source.attrs["source"]
    assert dict(group["inputs"].attrs) == {"channel_names": channels}


def test_rechunk_stack_writes_a_channel_coordinate_xarray_selects_by(tmp_path):
    import xarray as xr

    src, dst = tmp_path / "era5.zarr", tmp_path / "inputs.zarr"
    synth = run_cli("synth", src, "--preset", "era5-small", "--steps", 3)
    assert synth.returncode == 0, synth.stderr
    channels = ["geopotential@500", "temperature@850", "2m_temperature"]
    rechunk(src, dst, "--stack", "inputs", "--vars", ",".join(channels), "--codec", "blosc:lz4:5:shuffle")

    source = xr.open_zarr(str(src))
    ds = xr.open_zarr(str(dst))
    assert list(ds["channel"].values) == channels
    assert ds["channel"].dims == ("channel",)
    np.testing.assert_array_equal(ds.inputs.sel(channel="geopotential@500").values,
                                  source.geopotential.sel(level=500).values)
    np.testing.assert_array_equal(ds.inputs.sel(channel="2m_temperature").values, source["2m_temperature"].values)
    # zarr-python reads it as the numpy str array xarray would have written.
    channel = zarr.open_group(str(dst), mode="r")["channel"]
    assert channel.dtype == np.dtype("<U16")
    np.testing.assert_array_equal(channel[...], np.array(channels))
    assert dict(ds.inputs.attrs) == {"channel_names": channels}
    # zarrstream reads its own output, channel coordinate and all.
    import zarrstream

    np.testing.assert_array_equal(zarrstream.open_group(str(dst))["inputs"][...], ds.inputs.values)

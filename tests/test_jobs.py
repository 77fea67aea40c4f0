"""zarrstream.rechunk / zarrstream.stats and their plans: the Python API writes what the CLI writes
(byte for byte for a rechunk, within 1e-12 for statistics), whole or in parts run in any order and
finalised once; parts pickle; progress, Ctrl-C and errors."""

from __future__ import annotations

import importlib
import json
import math
import os
import pickle
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import zarrstream
import zarrstream.dask
from conftest import run_cli

RECHUNK_CLI = ["--chunks", "time=1,level=1", "--shard", "time=2,level=all", "--codec", "zstd:3",
               "--memory", "0.002", "--threads", "1"]
RECHUNK_API = dict(chunks={"time": 1, "level": 1}, shard="time=2,level=all", codec="zstd:3",
                   memory=0.002, threads=1)
STATS_VARS = "2m_temperature,temperature@500,850,geopotential@*"
STATS_SELECT = "time=1979-01-01T06:00:1979-01-02T12:00"
RECORDS = ".zarrstream-rechunk"  # the job's records: they name the part count, so left out


def stored_files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and RECORDS not in p.parts}


@pytest.fixture(scope="module")
def synth_store(tmp_path_factory) -> Path:
    src = tmp_path_factory.mktemp("jobs") / "era5.zarr"
    proc = run_cli("synth", src, "--preset", "era5-small", "--steps", 8)
    assert proc.returncode == 0, proc.stderr
    return src


@pytest.fixture(scope="module")
def cli_rechunked(synth_store, tmp_path_factory) -> dict[str, bytes]:
    dst = tmp_path_factory.mktemp("cli") / "out.zarr"
    proc = run_cli("rechunk", synth_store, dst, *RECHUNK_CLI)
    assert proc.returncode == 0, proc.stderr
    return stored_files(dst)


@pytest.fixture(scope="module")
def cli_stats(synth_store, tmp_path_factory) -> dict:
    out = tmp_path_factory.mktemp("cli") / "stats.json"
    proc = run_cli("stats", synth_store, "--vars", STATS_VARS, "--select", STATS_SELECT, "-o", out)
    assert proc.returncode == 0, proc.stderr
    return json.loads(out.read_text())


def assert_stats_equal(got: dict, want: dict) -> None:
    assert {k: v for k, v in got.items() if k != "channels"} == \
        {k: v for k, v in want.items() if k != "channels"}
    assert [c["name"] for c in got["channels"]] == [c["name"] for c in want["channels"]]
    for g, w in zip(got["channels"], want["channels"]):
        for key in ("variable", "level", "count", "nan_count", "min", "max"):
            assert g[key] == w[key], (g["name"], key)
        for key in ("mean", "std"):
            assert math.isclose(g[key], w[key], rel_tol=1e-12), (g["name"], key, g[key], w[key])


def test_rechunk_writes_what_the_cli_writes(synth_store, cli_rechunked, tmp_path):
    calls = []
    report = zarrstream.rechunk(synth_store, tmp_path / "out.zarr", progress=lambda d, t: calls.append((d, t)),
                                **RECHUNK_API)
    assert report.job_complete and not report.interrupted
    assert report.slabs_written == report.slabs_total > 1
    assert stored_files(tmp_path / "out.zarr") == cli_rechunked
    assert calls and calls[-1][0] == calls[-1][1] == report.output_bytes
    assert all(b[0] >= a[0] for a, b in zip(calls, calls[1:]))
    # Rerun: the finished job writes nothing.
    again = zarrstream.rechunk(synth_store, tmp_path / "out.zarr", **RECHUNK_API)
    assert again.job_complete and again.slabs_written == 0


def test_rechunk_parts_from_a_plan_equal_one_run(synth_store, cli_rechunked, tmp_path):
    dst = tmp_path / "out.zarr"
    plan = zarrstream.plan_rechunk(synth_store, dst, parts=3, **RECHUNK_API)
    assert [p.index for p in plan.parts] == [0, 1, 2]
    parts = [pickle.loads(pickle.dumps(p)) for p in plan.parts]  # as a worker receives them
    assert parts == list(plan.parts)
    reports = [parts[2].run(), parts[0]()]
    with pytest.raises(zarrstream.InvalidArgumentError, match=r"out\.zarr: part\(s\) 1 of 3 have not completed"):
        plan.finalise()
    reports.append(parts[1].run())
    assert sum(r.slabs_written for r in reports) > 3
    assert reports[-1].job_complete  # the last part to finish finalises
    assert plan.finalise().job_complete  # and finalising again is harmless
    assert stored_files(dst) == cli_rechunked


@pytest.mark.parametrize("env, kept", [
    ({"MALLOC_TRIM_THRESHOLD_": "65536"}, True),  # as Dask's nanny starts its workers
    ({"MALLOC_TRIM_THRESHOLD_": "65536", "MALLOC_MMAP_THRESHOLD_": "131072"}, False),
    ({}, False),
])
def test_parts_in_one_worker_process_write_what_one_run_writes(synth_store, cli_rechunked,
                                                               tmp_path, env, kept):
    # An engine's tasks keep freed memory in the heap while parts run only where the environment
    # fixed glibc's thresholds without choosing them, and restore them when the last part running
    # ends. Parts run one after another in a process share their slab buffers, one of them while
    # another part runs; the output is what one run writes.
    if sys.platform != "linux":
        pytest.skip("glibc's mallopt")
    dst = tmp_path / "out.zarr"
    code = f"""
from zarrstream import _jobs
plan = _jobs.plan_rechunk({str(synth_store)!r}, {str(dst)!r}, parts=3, **{RECHUNK_API!r})
_jobs._run_part(plan.parts[0], None)
with _jobs._part_heap() as kept:
    _jobs._run_part(plan.parts[2], None)
    running = _jobs._parts_running
report = _jobs._run_part(plan.parts[1], None)
print(kept, running, _jobs._parts_running, report.job_complete)
"""
    base = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    proc = subprocess.run([sys.executable, "-c", code], env={**base, **env}, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == [str(kept), "1" if kept else "0", "0", "True"]
    assert stored_files(dst) == cli_rechunked


def test_a_failed_finalise_can_be_rerun(synth_store, cli_rechunked, tmp_path):
    # Each part's completed record, taken from a destination where only that part ran.
    records = {}
    for i in range(2):
        alone = tmp_path / f"alone-{i}.zarr"
        zarrstream.plan_rechunk(synth_store, alone, parts=2, **RECHUNK_API).parts[i].run()
        records[i] = (alone / RECORDS / f"part-{i}-of-2.json").read_bytes()
    dst = tmp_path / "out.zarr"
    plan = zarrstream.plan_rechunk(synth_store, dst, parts=2, **RECHUNK_API)
    for part in plan.parts:
        part.run()
    # As if the finishing step had failed: metadata not consolidated, the parts' records in place.
    (dst / RECORDS / "finished.json").unlink()
    root = json.loads((dst / "zarr.json").read_text())
    del root["consolidated_metadata"]
    (dst / "zarr.json").write_text(json.dumps(root))
    for i, record in records.items():
        (dst / RECORDS / f"part-{i}-of-2.json").write_bytes(record)
    assert plan.finalise().job_complete
    assert (dst / RECORDS / "finished.json").exists()
    assert stored_files(dst) == cli_rechunked


def test_the_destination_of_an_unfinished_job_is_refused_until_its_last_part_finishes(
        synth_store, cli_rechunked, tmp_path):
    # A part killed, a disk that filled up: until the job finishes, the destination's group says
    # so (an attribute zarr-python and xarray show), and the loader, `stats` and a rechunk from it
    # refuse it, since the chunks not yet written would read as fill values.
    import zarr

    dst = tmp_path / "out.zarr"
    plan = zarrstream.plan_rechunk(synth_store, dst, parts=2, **RECHUNK_API)
    assert not plan.parts[0].run().job_complete
    assert zarr.open_group(str(dst), mode="r").attrs["zarrstream_rechunk"] == "unfinished"
    with pytest.raises(zarrstream.InvalidArgumentError) as e:
        zarrstream.Loader(dst, ["2m_temperature"], batch_size=2)
    assert str(dst) in str(e.value) and "has not finished" in str(e.value)
    proc = run_cli("stats", dst, "--vars", "2m_temperature", "-o", tmp_path / "stats.json")
    assert proc.returncode != 0 and "has not finished" in proc.stderr, proc.stderr
    proc = run_cli("rechunk", dst, tmp_path / "again.zarr", "--chunks", "time=2")
    assert proc.returncode != 0 and "has not finished" in proc.stderr, proc.stderr
    proc = run_cli("inspect", dst)
    assert proc.returncode == 0 and "warning: the destination of a `zarrstream rechunk` job that " \
        "has not finished" in proc.stdout, proc.stdout
    proc = run_cli("inspect", dst, "--json")
    assert proc.returncode == 0 and json.loads(proc.stdout)["unfinished_rechunk"] is True
    xr = pytest.importorskip("xarray")
    with pytest.warns(UserWarning, match="has not finished"):
        assert xr.open_dataset(dst, engine="zarrstream").attrs["zarrstream_rechunk"] == "unfinished"

    assert plan.parts[1].run().job_complete
    assert "zarrstream_rechunk" not in zarr.open_group(str(dst), mode="r").attrs
    assert json.loads(run_cli("inspect", dst, "--json").stdout)["unfinished_rechunk"] is False
    assert stored_files(dst) == cli_rechunked
    assert len(zarrstream.Loader(dst, ["2m_temperature"], batch_size=2)) > 0


def test_a_lone_arrays_unfinished_rechunk_is_refused_until_it_finishes(synth_store, tmp_path):
    import zarr

    dst = tmp_path / "t2m.zarr"
    plan = zarrstream.plan_rechunk(synth_store / "2m_temperature", dst, parts=2, chunks={"time": 1},
                                   memory=0.002, threads=1)
    assert len(plan.parts) == 2
    plan.parts[1].run()
    assert zarr.open_array(str(dst), mode="r").attrs["zarrstream_rechunk"] == "unfinished"
    with pytest.raises(zarrstream.InvalidArgumentError, match="has not finished"):
        zarrstream.Loader(dst, batch_size=2)
    assert plan.parts[0].run().job_complete
    assert "zarrstream_rechunk" not in zarr.open_array(str(dst), mode="r").attrs
    loaded = next(iter(zarrstream.Loader(dst, batch_size=2, shuffle="none")))["input"].numpy()
    want = zarr.open_array(str(synth_store / "2m_temperature"), mode="r")[:2]
    assert (loaded[:, 0] == want).all()


def test_rechunk_progress_callback_exception_stops_and_the_rerun_resumes(synth_store, cli_rechunked, tmp_path):
    dst = tmp_path / "out.zarr"

    def stop(done, total):
        raise RuntimeError("stop here")

    with pytest.raises(RuntimeError, match="stop here"):
        zarrstream.rechunk(synth_store, dst, progress=stop, **RECHUNK_API)
    report = zarrstream.rechunk(synth_store, dst, **RECHUNK_API)
    assert report.job_complete and report.slabs_resumed > 0
    assert stored_files(dst) == cli_rechunked


def test_rechunk_ctrl_c_saves_progress_and_raises_keyboard_interrupt(synth_store, cli_rechunked, tmp_path):
    # In an interpreter of its own, as a user's script gets Ctrl-C, with Python's handler for it
    # even where the tests run with SIGINT ignored (started as a background job, which the shell
    # starts with SIGINT ignored: Python then installs no handler).
    dst = tmp_path / "out.zarr"
    script = f"""
import os, signal, sys
import zarrstream
signal.signal(signal.SIGINT, signal.default_int_handler)
sent = []
def interrupt(done, total):
    if not sent:
        sent.append(done)
        os.kill(os.getpid(), signal.SIGINT)
try:
    zarrstream.rechunk({str(synth_store)!r}, {str(dst)!r}, progress=interrupt, **{RECHUNK_API!r})
except KeyboardInterrupt:
    print("interrupted", sent)
    sys.exit(0)
print("not interrupted", sent)
sys.exit(1)
"""
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.startswith("interrupted"), (proc.stdout, proc.stderr)
    report = zarrstream.rechunk(synth_store, dst, **RECHUNK_API)
    assert report.job_complete and report.slabs_resumed > 0
    assert stored_files(dst) == cli_rechunked


def test_stats_equals_the_cli(synth_store, cli_stats, tmp_path):
    calls = []
    got = zarrstream.stats(synth_store, vars=STATS_VARS, select=STATS_SELECT, output=tmp_path / "s.json",
                           progress=lambda d, t: calls.append((d, t)))
    assert_stats_equal(got, cli_stats)
    assert json.loads((tmp_path / "s.json").read_text()) == got
    assert calls and calls[-1][0] == calls[-1][1]
    # The dict form of a selection, and a list of variable specs.
    again = zarrstream.stats(str(synth_store), vars=STATS_VARS.split(",", 1),
                             select={"time": STATS_SELECT.split("=", 1)[1]})
    assert again == got


@pytest.mark.parametrize("parts", [1, 3, 64])
def test_stats_parts_merge_into_the_one_run(synth_store, cli_stats, tmp_path, parts):
    plan = zarrstream.plan_stats(synth_store, parts=parts, vars=STATS_VARS, select=STATS_SELECT)
    results = [pickle.loads(pickle.dumps(p)).run() for p in reversed(plan.parts)]
    results = [pickle.loads(pickle.dumps(r)) for r in results]
    got = plan.finalise(results, output=tmp_path / "s.json")
    assert_stats_equal(got, cli_stats)
    assert json.loads((tmp_path / "s.json").read_text()) == got
    if parts > 1:
        with pytest.raises(zarrstream.InvalidArgumentError, match=f"no result for part\\(s\\) 0 of {parts}"):
            plan.finalise(results[:-1])
        with pytest.raises(zarrstream.InvalidArgumentError, match="given twice"):
            plan.finalise(results + results[:1])


def test_stats_warns_of_an_all_nan_channel_as_the_cli_does(tmp_path):
    import numpy as np
    import zarr

    g = zarr.open_group(str(tmp_path / "nan.zarr"), mode="w", zarr_format=3)
    a = g.create_array("x", shape=(4, 3), dtype="float32", dimension_names=["time", "y"], fill_value=np.nan)
    a[...] = np.nan
    with pytest.warns(RuntimeWarning, match="'x' has no values"):
        got = zarrstream.stats(tmp_path / "nan.zarr")
    c = got["channels"][0]
    assert (c["count"], c["nan_count"], c["mean"], c["std"], c["min"], c["max"]) == (0, 12, None, None, None, None)


def test_errors_are_zarrstream_errors_naming_the_store(synth_store, tmp_path):
    missing = tmp_path / "missing.zarr"
    with pytest.raises(zarrstream.ZarrstreamError, match="missing.zarr"):
        zarrstream.rechunk(missing, tmp_path / "out.zarr")
    with pytest.raises(zarrstream.ZarrstreamError, match="missing.zarr"):
        zarrstream.stats(missing)
    with pytest.raises(zarrstream.ZarrstreamError, match="no_such_variable"):
        zarrstream.stats(synth_store, vars="no_such_variable")
    with pytest.raises(zarrstream.InvalidArgumentError, match="level=0"):
        zarrstream.rechunk(synth_store, tmp_path / "out.zarr", chunks="level=0")
    with pytest.raises(zarrstream.InvalidArgumentError, match="memory"):
        zarrstream.rechunk(synth_store, tmp_path / "out.zarr", memory=0)
    with pytest.raises(zarrstream.InvalidArgumentError, match="parts"):
        zarrstream.plan_rechunk(synth_store, tmp_path / "out.zarr", parts=0)
    with pytest.raises(zarrstream.InvalidArgumentError, match="--part 2/2"):
        zarrstream.rechunk(synth_store, tmp_path / "out.zarr", part=2, parts=2)


# ---------------------------------------------------------------------------------------------
# zarrstream.dask on a real LocalCluster: worker processes, each part a task.

@pytest.fixture(scope="module")
def distributed():
    return pytest.importorskip("distributed", reason="dask[distributed] is in requirements-dev.txt")


@pytest.fixture(scope="module")
def client(distributed):
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=":0") as cluster, distributed.Client(cluster) as c:
        yield c


def test_dask_rechunk_equals_one_run(client, synth_store, cli_rechunked, tmp_path):
    done = []
    report = zarrstream.dask.rechunk(synth_store, tmp_path / "out.zarr", client=client, parts=4,
                                     progress=lambda d, t: done.append((d, t)), timeout=240, **RECHUNK_API)
    assert report.job_complete
    assert report.slabs_written == report.slabs_total > 4
    assert done == [(1, 4), (2, 4), (3, 4), (4, 4)]
    assert stored_files(tmp_path / "out.zarr") == cli_rechunked


def test_dask_stats_on_a_default_local_cluster_equal_the_cli(distributed, synth_store, cli_stats, tmp_path):
    got = zarrstream.dask.stats(synth_store, workers=2, parts=5, vars=STATS_VARS, select=STATS_SELECT,
                                output=tmp_path / "s.json", timeout=240)
    assert_stats_equal(got, cli_stats)
    assert json.loads((tmp_path / "s.json").read_text()) == got


def test_dask_stats_with_tendencies_equal_one_run(client, synth_store):
    options = dict(vars=STATS_VARS, select=STATS_SELECT, tendencies=[1, "12h"])
    want = zarrstream.stats(synth_store, **options)
    got = zarrstream.dask.stats(synth_store, client=client, parts=3, timeout=240, **options)
    assert got["tendency_steps"] == want["tendency_steps"] == [1, 2]
    for a, b in zip(got["channels"], want["channels"]):
        assert a.get("tendencies", {}).keys() == b.get("tendencies", {}).keys(), a["name"]
        for key, t in b.get("tendencies", {}).items():
            u = a["tendencies"][key]
            assert (u["count"], u["nan_count"], u["min"], u["max"]) == (
                t["count"], t["nan_count"], t["min"], t["max"])
            assert u["mean"] == pytest.approx(t["mean"], rel=1e-12, abs=1e-13)
            assert u["std"] == pytest.approx(t["std"], rel=1e-12)


def test_dask_part_errors_reach_the_caller(client, tmp_path):
    with pytest.raises(zarrstream.NotFoundError, match="missing.zarr"):
        zarrstream.dask.rechunk(tmp_path / "missing.zarr", tmp_path / "out.zarr", client=client, parts=2,
                                retries=0, timeout=120)


def test_cli_dask_option_runs_the_same_job(distributed, synth_store, cli_rechunked, cli_stats, tmp_path):
    proc = run_cli("rechunk", synth_store, tmp_path / "out.zarr", *RECHUNK_CLI, "--dask", "local:2")
    assert proc.returncode == 0, proc.stderr
    assert "complete:" in proc.stdout
    assert stored_files(tmp_path / "out.zarr") == cli_rechunked
    proc = run_cli("stats", synth_store, "--vars", STATS_VARS, "--select", STATS_SELECT,
                   "--dask", "local:2", "-o", tmp_path / "s.json")
    assert proc.returncode == 0, proc.stderr
    assert_stats_equal(json.loads((tmp_path / "s.json").read_text()), cli_stats)
    proc = run_cli("rechunk", synth_store, tmp_path / "other.zarr", "--part", "0/2", "--dask", "local")
    assert proc.returncode == 2 and "--part" in proc.stderr
    proc = run_cli("rechunk", synth_store, tmp_path / "other.zarr", "--dask", "local:0")
    assert proc.returncode == 1 and "local:N" in proc.stderr


# ---------------------------------------------------------------------------------------------
# zarrstream.ray on a local Ray of 2 CPUs: worker processes, each part a task.


def test_cli_ray_option_runs_the_same_job(synth_store, cli_rechunked, tmp_path):
    # Before the session below: the command starts a local Ray of its own.
    pytest.importorskip("ray", reason="ray is in requirements-dev.txt")
    proc = run_cli("rechunk", synth_store, tmp_path / "out.zarr", *RECHUNK_CLI, "--ray", "local:2")
    assert proc.returncode == 0, proc.stderr
    assert stored_files(tmp_path / "out.zarr") == cli_rechunked
    proc = run_cli("rechunk", synth_store, tmp_path / "other.zarr", "--ray", "local", "--dask", "local")
    assert proc.returncode != 0 and "--ray" in proc.stderr and "--dask" in proc.stderr


@pytest.fixture(scope="module")
def ray_session():
    ray = pytest.importorskip("ray", reason="ray is in requirements-dev.txt")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


def test_ray_rechunk_and_stats_equal_one_run(ray_session, synth_store, cli_rechunked, cli_stats, tmp_path):
    import zarrstream.ray

    done = []
    report = zarrstream.ray.rechunk(synth_store, tmp_path / "out.zarr", parts=3, timeout=240,
                                    progress=lambda d, t: done.append((d, t)), **RECHUNK_API)
    assert report.job_complete and report.slabs_written == report.slabs_total
    assert done == [(1, 3), (2, 3), (3, 3)]
    assert stored_files(tmp_path / "out.zarr") == cli_rechunked
    got = zarrstream.ray.stats(synth_store, parts=4, vars=STATS_VARS, select=STATS_SELECT, timeout=240)
    assert_stats_equal(got, cli_stats)


# ---------------------------------------------------------------------------------------------
# Both engines: a worker process killed mid-part.


@pytest.mark.parametrize("engine", ["dask", "ray"])
def test_rechunk_survives_a_worker_killed_mid_part(engine, request, synth_store, cli_rechunked, tmp_path):
    killed = tmp_path / "killed"

    def kill_worker_once(index, done, total):
        """On the worker running part 0, at its first progress report: SIGKILL its own process,
        the first time only. The report may already say done == total: updates the calling thread
        has not yet passed on are replaced by newer ones, so on a loaded machine the slabs may all
        be written before the first report reaches Python; the part has not returned then, and the
        engine must still run it again."""
        if index != 0 or done == 0:
            return
        try:
            fd = os.open(killed, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            return
        os.write(fd, str(os.getpid()).encode())
        os.close(fd)
        os.kill(os.getpid(), signal.SIGKILL)

    # The engine's own fixture: a LocalCluster's client, or the Ray session zarrstream.ray finds.
    options = {"client": request.getfixturevalue("client")} if engine == "dask" else {}
    if engine == "ray":
        request.getfixturevalue("ray_session")
    runner = importlib.import_module(f"zarrstream.{engine}")
    report = runner.rechunk(synth_store, tmp_path / "out.zarr", parts=2, part_progress=kill_worker_once,
                            timeout=240, **options, **RECHUNK_API)
    assert killed.exists(), "part 0 never reported progress"
    if engine == "dask":
        assert int(killed.read_text()) not in options["client"].run(os.getpid).values()  # that worker is gone
    assert report.job_complete
    assert report.slabs_resumed + report.slabs_written == report.slabs_total
    assert stored_files(tmp_path / "out.zarr") == cli_rechunked


# ---------------------------------------------------------------------------------------------
# zarrstream.dask against an object store: moto's S3 server, with SigV4 and IAM checking. The
# workers sign their requests with the credentials of their own environment; the parts carry URLs
# only.

S3_BUCKET = "jobs"
S3_VARS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_REGION",
           "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_NO_SIGN_REQUEST",
           "AWS_PROFILE")


@pytest.fixture(scope="module")
def moto_s3(synth_store):
    from object_servers import MotoS3

    server = MotoS3()
    server.upload_tree(S3_BUCKET, synth_store, "era5.zarr")
    server.set_auth(True)
    yield server
    server.stop()


def s3_objects(server, prefix: str) -> dict[str, bytes]:
    s3 = server.client(access_key=server.access_key, secret_key=server.secret_key)
    found = {}
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=S3_BUCKET, Prefix=prefix + "/"):
        for item in page.get("Contents", []):
            key = item["Key"][len(prefix) + 1:]
            if not key.startswith(RECORDS + "/"):
                found[key] = s3.get_object(Bucket=S3_BUCKET, Key=item["Key"])["Body"].read()
    return found


@pytest.mark.parametrize("dest,keys", [("s3", "user"), ("local", "temporary")])
def test_dask_rechunk_from_s3_with_the_workers_credentials(distributed, moto_s3, cli_rechunked, tmp_path,
                                                          monkeypatch, dest, keys):
    if keys == "user":
        credentials = {"AWS_ACCESS_KEY_ID": moto_s3.access_key, "AWS_SECRET_ACCESS_KEY": moto_s3.secret_key}
    else:
        session = moto_s3.temporary_credentials()
        credentials = {"AWS_ACCESS_KEY_ID": session["AccessKeyId"],
                       "AWS_SECRET_ACCESS_KEY": session["SecretAccessKey"],
                       "AWS_SESSION_TOKEN": session["SessionToken"]}
    credentials.update(AWS_ENDPOINT_URL=moto_s3.endpoint, AWS_REGION=moto_s3.REGION)
    for var in S3_VARS:
        monkeypatch.delenv(var, raising=False)
    # The calling process finalises the job (it reads the source and writes the destination).
    for var, value in credentials.items():
        monkeypatch.setenv(var, value)
    prefix = f"out-{tmp_path.name}.zarr"
    out = f"s3://{S3_BUCKET}/{prefix}" if dest == "s3" else tmp_path / "out.zarr"
    plan = zarrstream.plan_rechunk(f"s3://{S3_BUCKET}/era5.zarr", out, parts=3, **RECHUNK_API)
    assert credentials["AWS_SECRET_ACCESS_KEY"].encode() not in pickle.dumps(plan.parts)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0",
                                  env=credentials) as cluster, distributed.Client(cluster) as c:
        assert set(c.run(lambda: os.environ.get("AWS_ACCESS_KEY_ID")).values()) == \
            {credentials["AWS_ACCESS_KEY_ID"]}
        report = zarrstream.dask.rechunk(f"s3://{S3_BUCKET}/era5.zarr", out, client=c, parts=3, timeout=240,
                                         **RECHUNK_API)
    assert report.job_complete and report.slabs_written == report.slabs_total
    got = s3_objects(moto_s3, prefix) if dest == "s3" else stored_files(tmp_path / "out.zarr")
    assert got == cli_rechunked

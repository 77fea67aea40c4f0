"""zarrstream across processes: fork()ed children (PyTorch DataLoader workers, multiprocessing),
spawn and forkserver workers that receive pickled arrays, pickling round trips through local, HTTP
(nginx) and S3 (moto) stores, and the GPU checks a loader makes when it is opened.

Whatever could hang on a regression (a child waiting for threads the fork left behind) runs in a
subprocess with a timeout and a memory limit, so it fails instead of hanging or swapping.
"""

from __future__ import annotations

import json
import os
import pickle
import resource
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import zarr

import zarrstream
from conftest import run_cli
from object_servers import MotoS3, Nginx

NT, NY, NX = 12, 6, 8
BUCKET = "zarr-data"
# What a script's process may map: torch and numpy with room to spare, far below this machine.
SCRIPT_MEMORY_BYTES = 8 << 30


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    """An ERA5-like consolidated v3 group written by zarr-python: coordinates, and t2m chunked by
    two time steps."""
    path = tmp_path_factory.mktemp("processes") / "era5.zarr"
    g = zarr.open_group(str(path), mode="w", zarr_format=3)
    t = g.create_array("time", shape=(NT,), dtype="int64", dimension_names=["time"],
                       attributes={"units": "hours since 1979-01-01", "calendar": "proleptic_gregorian"})
    t[...] = 6 * np.arange(NT, dtype="int64")
    la = g.create_array("latitude", shape=(NY,), dtype="float32", dimension_names=["latitude"])
    la[...] = np.linspace(90, -90, NY).astype("float32")
    lo = g.create_array("longitude", shape=(NX,), dtype="float32", dimension_names=["longitude"])
    lo[...] = np.arange(NX, dtype="float32") * (360 / NX)
    v = g.create_array("t2m", shape=(NT, NY, NX), chunks=(2, NY, NX), dtype="float32",
                       dimension_names=["time", "latitude", "longitude"])
    v[...] = np.arange(NT * NY * NX, dtype="float32").reshape(NT, NY, NX)
    zarr.consolidate_metadata(str(path))
    return path


@pytest.fixture(scope="module")
def nginx(store, tmp_path_factory):
    server = Nginx(store.parent, tmp_path_factory.mktemp("nginx"))
    yield server
    server.stop()


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (SCRIPT_MEMORY_BYTES, SCRIPT_MEMORY_BYTES))


def run_script(tmp_path: Path, source: str, *args, timeout: float = 240, env: dict | None = None,
               limit_memory: bool = True) -> subprocess.CompletedProcess:
    """Runs `source` as a script (its own file, so that spawn and forkserver workers can import its
    main module) with `args`; the test fails if it has not ended within `timeout` seconds. With
    `limit_memory`, the script's processes may map SCRIPT_MEMORY_BYTES each (not where the CUDA
    driver starts: it maps far more address space than it uses)."""
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent(source))
    full_env = dict(os.environ if env is None else env)
    full_env["ZARRSTREAM_BUFFER_CACHE_MB"] = "16"
    try:
        return subprocess.run([sys.executable, str(script), *map(str, args)], capture_output=True,
                              text=True, timeout=timeout, env=full_env,
                              preexec_fn=_limit_memory if limit_memory else None)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"the script hung ({timeout} s): {e.stderr!r}")


# ---------------------------------------------------------------------------------------------
# fork()


@pytest.mark.parametrize("where", ["local", "http"])
def test_a_forked_child_reads_arrays_opened_before_the_fork_and_arrays_it_opens(
        tmp_path, store, nginx, where):
    url = str(store) if where == "local" else f"{nginx.url}/{store.name}"
    proc = run_script(tmp_path, """
        import os, sys
        import numpy as np
        import zarrstream
        url = sys.argv[1]
        own_pool = zarrstream.open_array(url + "/t2m", num_threads=2)
        shared_pool = zarrstream.open_group(url)["t2m"]
        expected = own_pool.read()  # the pools' (and HTTP I/O) threads are running
        assert np.array_equal(shared_pool.read(), expected)
        pid = os.fork()
        if pid == 0:
            ok = (np.array_equal(own_pool.read(), expected)
                  and np.array_equal(shared_pool[3:7], expected[3:7])
                  and np.array_equal(zarrstream.open_array(url + "/t2m").read(), expected))
            os._exit(0 if ok else 1)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0, status
        assert np.array_equal(own_pool.read(), expected)  # the parent's threads work on
        print("ok")
    """, url)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr


DATALOADER_SCRIPT = """
    import sys
    import torch
    import zarrstream

    class Fields(torch.utils.data.Dataset):
        \"\"\"A map-style dataset holding zarrstream arrays.\"\"\"

        def __init__(self, url):
            self.t2m = zarrstream.open_group(url)["t2m"]
            self.own = zarrstream.open_array(url + "/t2m", num_threads=2)

        def __len__(self):
            return self.t2m.shape[0]

        def __getitem__(self, i):
            return torch.from_numpy(self.t2m[i]), torch.from_numpy(self.own[i])

    if __name__ == "__main__":
        context, url = sys.argv[1:]
        data = Fields(url)
        expected = torch.from_numpy(data.t2m.read())
        # A loader running in the parent when the workers start.
        running = zarrstream.Loader(url, ["t2m"], batch_size=2, prefetch=4)
        first = next(iter(running))
        batches = torch.utils.data.DataLoader(data, batch_size=3, num_workers=2,
                                              multiprocessing_context=context, timeout=120)
        for epoch in range(2):
            shared, own = (torch.cat(parts) for parts in zip(*batches))
            assert torch.equal(shared, expected) and torch.equal(own, expected), epoch
        assert sum(1 for _ in running) == len(running) - 1
        print("ok")
"""


@pytest.mark.parametrize("context", ["fork", "spawn", "forkserver"])
def test_a_dataloader_with_workers_reads_zarrstream_arrays(tmp_path, store, context):
    pytest.importorskip("torch")
    proc = run_script(tmp_path, DATALOADER_SCRIPT, context, store)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr


def test_a_loader_from_before_a_fork_is_a_clear_error_in_the_child_which_opens_its_own(
        tmp_path, store):
    pytest.importorskip("torch")
    proc = run_script(tmp_path, """
        import os, sys
        import zarrstream
        url = sys.argv[1]
        loader = zarrstream.Loader(url, ["t2m"], batch_size=2, prefetch=4)
        expected = [b["input"] for b in loader]
        it = iter(loader)
        next(it)  # the pipeline is preparing the next batches
        pid = os.fork()
        if pid == 0:
            for use in (lambda: next(iter(loader)), lambda: loader.set_epoch(3),
                        loader.state_dict):
                try:
                    use()
                    os._exit(1)
                except zarrstream.ConfigError as e:
                    if "fork()ed child" not in str(e) or url not in str(e):
                        print(e, file=sys.stderr)
                        os._exit(2)
            own = zarrstream.Loader(url, ["t2m"], batch_size=2)
            os._exit(0 if len(list(own)) == len(expected) else 3)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0, status
        assert sum(1 for _ in it) == len(expected) - 1
        print("ok")
    """, store)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr


def test_the_iterable_dataset_refuses_worker_processes_and_says_why(tmp_path, store):
    pytest.importorskip("torch")
    proc = run_script(tmp_path, """
        import sys
        import torch
        import zarrstream, zarrstream.torch
        loader = zarrstream.Loader(sys.argv[1], ["t2m"], batch_size=2)
        data = zarrstream.torch.IterableDataset(loader)
        assert len(list(torch.utils.data.DataLoader(data, batch_size=None))) == len(loader)
        try:
            list(torch.utils.data.DataLoader(data, batch_size=None, num_workers=1, timeout=120))
        except zarrstream.ConfigError as e:
            print(e)
    """, store)
    assert proc.returncode == 0, proc.stderr
    assert "num_workers=1): use num_workers=0" in proc.stdout, proc.stdout
    assert "its own threads" in proc.stdout


# ---------------------------------------------------------------------------------------------
# Pickling


def roundtrip(obj):
    return pickle.loads(pickle.dumps(obj))


def test_local_arrays_and_groups_pickle_as_their_url_and_open_options(store):
    expected = zarr.open_array(str(store / "t2m"), mode="r")[...]
    a = zarrstream.open_array(str(store / "t2m"), num_threads=3, missing_chunks="error")
    b = roundtrip(a)
    assert b.url == a.url and b._options == a._options
    np.testing.assert_array_equal(b.read(), expected)
    g = roundtrip(zarrstream.open_group(str(store), num_threads=2))
    assert sorted(g) == ["latitude", "longitude", "t2m", "time"]
    member = roundtrip(g["t2m"])
    assert member._options["num_threads"] == 2
    np.testing.assert_array_equal(member[2:5], expected[2:5])
    decoded = roundtrip(zarrstream.open_array(str(store / "t2m"), decode_cf=True))
    assert decoded._options["decode_cf"] and decoded.dtype == np.float32


def test_http_arrays_pickle_and_a_url_with_a_password_refuses_to(store, nginx):
    url = f"{nginx.url}/{store.name}"
    expected = zarr.open_array(str(store / "t2m"), mode="r")[...]
    np.testing.assert_array_equal(roundtrip(zarrstream.open_array(url + "/t2m")).read(), expected)
    np.testing.assert_array_equal(roundtrip(zarrstream.open_group(url))["t2m"].read(), expected)
    secret = url.replace("http://", "http://reader:hunter2@")
    for opened in (zarrstream.open_array(secret + "/t2m"), zarrstream.open_group(secret),
                   zarrstream.open_group(secret)["t2m"]):
        with pytest.raises(zarrstream.UnsupportedError, match="user:password") as e:
            pickle.dumps(opened)
        assert "hunter2" not in str(e.value)


def test_s3_arrays_pickle_without_their_credentials(store, monkeypatch):
    server = MotoS3()
    try:
        server.upload_tree(BUCKET, store.parent, "")
        server.set_auth(True)
        monkeypatch.setenv("AWS_ENDPOINT_URL", server.endpoint)
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", server.access_key)
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", server.secret_key)
        monkeypatch.setenv("AWS_REGION", MotoS3.REGION)
        url = f"s3://{BUCKET}/{store.name}"
        expected = zarr.open_array(str(store / "t2m"), mode="r")[...]
        for opened in (zarrstream.open_array(url + "/t2m"), zarrstream.open_group(url)):
            data = pickle.dumps(opened)
            assert server.secret_key.encode() not in data and server.access_key.encode() not in data
            back = pickle.loads(data)  # credentials from this process's environment
            array = back if isinstance(back, zarrstream.Array) else back["t2m"]
            np.testing.assert_array_equal(array.read(), expected)
        # Without them in the environment, the unpickled array is refused by the server.
        data = pickle.dumps(zarrstream.open_array(url + "/t2m"))
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wrong")
        with pytest.raises(zarrstream.StorageError):
            pickle.loads(data)
    finally:
        server.stop()


def test_a_loader_pickles_as_its_arguments_and_position(store, nginx):
    pytest.importorskip("torch")
    loader = zarrstream.Loader(store, ["t2m"], batch_size=2, seed=4, target_offset={"time": 1})
    it = iter(loader)
    next(it)
    copy = roundtrip(loader)
    assert copy.state_dict() == loader.state_dict()
    rest = [b["input"] for b in it]
    copied = [b["input"] for b in copy]
    assert len(copied) == len(rest) > 0
    for got, want in zip(copied, rest):
        assert (got == want).all()
    secret = zarrstream.Loader(f"{nginx.url}/{store.name}".replace("http://", "http://reader:hunter2@"),
                               ["t2m"])
    with pytest.raises(zarrstream.UnsupportedError, match="user:password") as e:
        pickle.dumps(secret)
    assert "hunter2" not in str(e.value)


# ---------------------------------------------------------------------------------------------
# GPU requests without a GPU


def doctor_gpu_reason(env: dict | None = None) -> str | None:
    """The reason `zarrstream doctor` gives for having no GPU (None: it found one)."""
    proc = run_cli("doctor", "--json", env=env)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    return None if report["gpu"] is not None else report["gpu_unavailable_reason"]


def test_cuda_without_a_gpu_is_a_config_error_at_construction_with_doctors_reason(store):
    reason = doctor_gpu_reason()
    if reason is None:
        pytest.skip("a GPU is usable here: test_cuda_hidden_by_cuda_visible_devices covers it")
    for kwargs in ({}, {"gpu_batches": False}, {"output": "dlpack"}):
        with pytest.raises(zarrstream.ConfigError, match="no GPU zarrstream can use") as e:
            zarrstream.Loader(store, ["t2m"], device="cuda", **kwargs)
        assert reason in str(e.value), kwargs


@pytest.mark.gpu
def test_cuda_hidden_by_cuda_visible_devices_is_a_config_error_at_construction(tmp_path, store):
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="")
    reason = doctor_gpu_reason(env)
    assert reason, "doctor finds no GPU with CUDA_VISIBLE_DEVICES=''"
    proc = run_script(tmp_path, """
        import sys
        import zarrstream
        for kwargs in ({}, {"output": "dlpack"}):
            try:
                zarrstream.Loader(sys.argv[1], ["t2m"], device="cuda", **kwargs)
                print("constructed", kwargs)
            except zarrstream.ConfigError as e:
                print(e)
    """, store, env=env, limit_memory=False)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == 2 and all("no GPU zarrstream can use" in l and reason in l for l in lines), lines

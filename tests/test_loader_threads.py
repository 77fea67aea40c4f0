"""zarrstream.Loader with threads, signals and interpreter exit.

- Threads iterating one loader get each batch of an epoch exactly once, in that epoch.
- Ctrl-C inside ``for batch in loader`` leaves the loader (and ``state_dict()``) before the batches
  not yet handed out: resuming yields exactly the batches the interrupted loop did not receive.
- A daemon thread still iterating a loader when the interpreter exits (waiting for a batch, or
  between batches) does not abort the process.
- ``output="dlpack"`` imports no torch.

The fixture's chunks are small and many, and the loaders run one worker thread with a tiny cache,
so that a batch takes a while to make and consumers spend their time waiting in the loader.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
from collections import Counter

import numpy as np
import pytest
import zarr

import zarrstream

NT, NY, NX = 24, 96, 96
# Every batch decodes its 144 chunks again (the cache size is part of a state's geometry: the
# resumed loaders take the same).
SLOW = dict(num_threads=1, cache_bytes=1 << 16)


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("threads") / "slow.zarr"
    g = zarr.open_group(str(path), mode="w", zarr_format=3)
    t = g.create_array("time", shape=(NT,), dtype="int64", dimension_names=["time"],
                       attributes={"units": "hours since 2000-01-01", "calendar": "standard"})
    t[...] = np.arange(NT)
    a = g.create_array("t2m", shape=(NT, NY, NX), chunks=(1, 8, 8), dtype="float32",
                       dimension_names=["time", "latitude", "longitude"])
    a[...] = np.random.default_rng(1).standard_normal((NT, NY, NX)).astype("float32")
    return str(path)


def origins(batch) -> tuple:
    return tuple(map(tuple, np.from_dlpack(batch["origin"]).tolist()))


def epoch_batches(store: str, epoch: int, **kwargs) -> list[tuple]:
    loader = zarrstream.Loader(store, ["t2m"], output="dlpack", **kwargs)
    loader.set_epoch(epoch)
    return [origins(b) for b in loader]


def run_python(script: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=timeout)


# -- several threads, one loader -------------------------------------------------------------------

@pytest.mark.parametrize("num_threads", [2, 4])
def test_threads_sharing_a_loader_get_every_batch_once_per_epoch(store, num_threads):
    kwargs = dict(batch_size=3, seed=8, prefetch=3)
    loader = zarrstream.Loader(store, ["t2m"], output="dlpack", **kwargs)
    got: list[tuple] = []
    lock = threading.Lock()
    errors: list[BaseException] = []

    def pull():
        try:
            for _ in range(3):  # each loop joins the epoch in progress, or starts the next
                for batch in loader:
                    with lock:
                        got.append(origins(batch))
        except BaseException as e:  # noqa: BLE001 (reported below)
            errors.append(e)

    threads = [threading.Thread(target=pull) for _ in range(num_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not errors, errors
    epochs = loader.epoch + 1
    assert epochs >= 3
    assert loader.state_dict()["sample_plan"]["next_batch"] == len(loader)
    # Exactly the batches of epochs 0 .. epochs - 1 (each epoch has its own order), each once.
    want = Counter(b for e in range(epochs) for b in epoch_batches(store, e, **kwargs))
    assert Counter(got) == want
    assert len(got) == epochs * len(loader)


# -- Ctrl-C ------------------------------------------------------------------------------------------

def test_an_exception_before_a_batch_is_handed_out_puts_it_back(store):
    kwargs = dict(batch_size=2, seed=4, prefetch=2)
    full = epoch_batches(store, 0, **kwargs)
    loader = zarrstream.Loader(store, ["t2m"], output="dlpack", **kwargs)
    it = iter(loader)
    got = [origins(next(it)), origins(next(it))]

    def interrupted(batch):
        raise KeyboardInterrupt  # as Ctrl-C arriving while the loop takes the batch

    loader._to_dlpack = interrupted
    with pytest.raises(KeyboardInterrupt):
        next(it)
    del loader._to_dlpack
    assert loader.state_dict()["sample_plan"]["next_batch"] == 2
    resumed = zarrstream.Loader(store, ["t2m"], output="dlpack", **kwargs)
    resumed.load_state_dict(loader.state_dict())
    assert got + [origins(b) for b in resumed] == full
    # The loader itself goes on with the batch it took back.
    assert got + [origins(b) for b in loader] == full


SIGINT_SCRIPT = """
import json, signal, sys, time
import numpy as np
# Ctrl-C raises KeyboardInterrupt even where this test runs with SIGINT ignored (a background job).
signal.signal(signal.SIGINT, signal.default_int_handler)
{imports}
import zarrstream
loader = zarrstream.Loader({store!r}, ["t2m"], output={output!r}, batch_size=1, seed=2,
                           prefetch=2, num_threads=1, cache_bytes=1 << 16)
got = []
print("ready", flush=True)
try:
    for b in loader:
        got.append(b)  # received: recorded before anything that checks for signals
        got[-1] = np.from_dlpack(b["origin"]).tolist()
        del b
        time.sleep({consumer_s})
    time.sleep(60)  # the signal comes before the epoch ends; if not, it ends this
except KeyboardInterrupt:
    pass
got = [g if isinstance(g, list) else np.from_dlpack(g["origin"]).tolist() for g in got]
print(json.dumps({{"got": got, "state": loader.state_dict()}}), flush=True)
"""


@pytest.mark.parametrize("output,consumer_s", [
    ("dlpack", 0.0),    # a consumer that waits for the loader: Ctrl-C mostly lands in the wait
    ("dlpack", 0.02),   # a slow consumer: mostly in its step, sometimes as it takes a batch
    ("torch", 0.0),     # torch tensors: the conversion is more Python code to land in
])
def test_ctrl_c_in_a_loop_resumes_with_exactly_the_batches_not_received(store, output, consumer_s):
    if output == "torch":
        pytest.importorskip("torch")
    script = SIGINT_SCRIPT.format(store=store, output=output, consumer_s=consumer_s,
                                  imports="import torch" if output == "torch" else "")
    full = [list(map(list, b)) for b in epoch_batches(store, 0, batch_size=1, seed=2, **SLOW)]
    for delay in (0.05, 0.13, 0.31, 0.47):
        proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        try:
            assert proc.stdout.readline().strip() == "ready"
            threading.Event().wait(delay)
            proc.send_signal(signal.SIGINT)
            out, err = proc.communicate(timeout=120)
        finally:
            proc.kill()
        assert proc.returncode == 0, err
        result = json.loads(out)
        resumed = zarrstream.Loader(store, ["t2m"], output="dlpack", batch_size=1, seed=2, **SLOW)
        resumed.load_state_dict(result["state"])
        # A loop after the epoch's end starts the next epoch: nothing left when the loop had all.
        done = len(result["got"]) == len(full)
        rest = [] if done else [list(map(list, origins(b))) for b in resumed]
        assert result["got"] + rest == full, (delay, len(result["got"]), len(rest))


# -- interpreter exit --------------------------------------------------------------------------------

EXIT_SCRIPT = """
import threading, time
{imports}
import zarrstream
loader = zarrstream.Loader({store!r}, ["t2m"], output={output!r}, batch_size=4, prefetch=2,
                           num_threads=1, cache_bytes=1 << 16)
started = threading.Barrier({threads} + 1)
def pull():
    started.wait()
    while True:
        for b in loader:
            {work}
for _ in range({threads}):
    threading.Thread(target=pull, daemon=True).start()
started.wait()
time.sleep({delay})
"""


EXIT_COPIES = 2  # of each script at once


@pytest.mark.parametrize("with_torch", [False, True])
@pytest.mark.parametrize("threads,work", [
    (1, "pass"),                      # waiting in the loader for the next batch
    (2, "sum(range(20000))"),         # in Python between batches, and waiting for a turn
])
def test_daemon_threads_iterating_at_exit_do_not_abort_the_process(store, with_torch, threads,
                                                                   work):
    if with_torch:
        pytest.importorskip("torch")
    # Copies at once, so that exits land while the machine is busy (the race this guards against
    # showed only under load); each delay places the exit at another point of the iteration.
    procs = []
    try:
        for delay in (0.0, 0.03, 0.1, 0.25):
            script = EXIT_SCRIPT.format(store=store, output="torch" if with_torch else "dlpack",
                                        imports="import torch" if with_torch else "",
                                        threads=threads, work=work, delay=delay)
            for _ in range(EXIT_COPIES):
                procs.append((delay, subprocess.Popen([sys.executable, "-c", script],
                                                      stdout=subprocess.PIPE,
                                                      stderr=subprocess.PIPE, text=True)))
        for delay, proc in procs:
            _, stderr = proc.communicate(timeout=300)
            assert proc.returncode == 0 and "terminate" not in stderr, (delay, stderr)
            assert stderr == "", (delay, stderr)
    finally:
        for _, proc in procs:
            proc.kill()


# -- output="dlpack" ---------------------------------------------------------------------------------

@pytest.mark.parametrize("ranks", ["", "rank=0, world_size=1"])
def test_dlpack_output_imports_no_torch(store, ranks):
    script = (
        "import sys, numpy as np, zarrstream\n"
        f"loader = zarrstream.Loader({store!r}, ['t2m'], output='dlpack', batch_size=2, {ranks})\n"
        "b = next(iter(loader))\n"
        "print(np.from_dlpack(b['input']).shape, sorted(m for m in sys.modules if 'torch' in m))\n")
    proc = run_python(script)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"(2, 1, {NY}, {NX}) []"

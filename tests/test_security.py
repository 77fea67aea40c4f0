"""Hardening against hostile input: store keys that try to leave the store, symbolic links planted
in a destination, and credentials that must never be printed.

- Keys with '..' segments, absolute paths or NUL bytes are refused by every store before it
  touches storage (file here, HTTP against nginx; the S3 store in test_object_stores.py).
- Writes (Array create/write, overwrite, `zarrstream rechunk`) never follow a symbolic link below
  the destination root: a link at a chunk's path is replaced, a linked directory is refused.
- A password in a URL and the AWS / GCS credentials of the environment appear in no error, no
  `zarrstream doctor --json` report, no `zarrstream bench` report or trace.
- A decompression bomb stops at the array's declared chunk size (each decoder is bounded, see
  src/codec/decoded_size.h; here end to end).
- No shell is ever started: the one child process zarrstream runs (bench --plot) is spawned
  with an argument vector, and nothing in the library calls system() or popen().
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import zarr

import zarrstream
from zarrstream import _zarrstream

from conftest import run_cli
from object_servers import Nginx

REPO = Path(__file__).resolve().parent.parent
ESCAPING_KEYS = ["../outside", "a/../../outside", "/etc/passwd", "a\0b", "zarr.json\0.png"]


# ---------------------------------------------------------------------------------------------
# Keys.


@pytest.mark.parametrize("key", ESCAPING_KEYS)
def test_file_store_refuses_keys_that_leave_the_store(tmp_path, key):
    root = tmp_path / "store"
    root.mkdir()
    (tmp_path / "outside").write_bytes(b"secret")
    store = _zarrstream.open_store(str(root))
    with pytest.raises(zarrstream.InvalidArgumentError, match="invalid store key") as e:
        store.read(key, [("from", 0, 0)])
    assert "\0" not in str(e.value), "the NUL byte is shown escaped"
    for write in (lambda: store.put(key, b"x"), lambda: store.delete(key)):
        with pytest.raises(zarrstream.InvalidArgumentError, match="invalid store key"):
            write()
    assert (tmp_path / "outside").read_bytes() == b"secret"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["outside", "store"]
    assert not any(root.iterdir())


def test_http_store_refuses_keys_that_leave_the_store_before_any_request(tmp_path):
    root = tmp_path / "served"
    (root / "data.zarr").mkdir(parents=True)
    (root / "secret.txt").write_text("not for you")
    server = Nginx(root, tmp_path / "nginx")
    try:
        store = _zarrstream.open_store(f"{server.url}/data.zarr")
        for key in ESCAPING_KEYS + ["../secret.txt"]:
            with pytest.raises(zarrstream.InvalidArgumentError, match="invalid store key"):
                store.read(key, [("from", 0, 0)])
        assert server.requests() == [], "a refused key reached the server"
    finally:
        server.stop()


# ---------------------------------------------------------------------------------------------
# Special files and NUL bytes in paths.

SPECIAL_FILES_SCRIPT = r"""
import os, sys, zarr, numpy as np, zarrstream
root, where = sys.argv[1], sys.argv[2]
v3 = zarr.open_group(os.path.join(root, "v3.zarr"), mode="w", zarr_format=3)
v3.create_array("t", shape=(4,), chunks=(2,), dtype="int32")[...] = np.arange(4)
v2 = zarr.open_group(os.path.join(root, "v2.zarr"), mode="w", zarr_format=2)
v2.create_array("t", shape=(4,), chunks=(2,), dtype="int32")[...] = np.arange(4)
zarr.consolidate_metadata(os.path.join(root, "v2.zarr"))
target = os.path.join(root, where)
os.remove(target)
os.mkfifo(target)
try:
    if where.startswith("v3.zarr/t"):
        zarrstream.open_array(os.path.join(root, "v3.zarr/t")).read()
    elif where.startswith("v3.zarr"):
        zarrstream.open_group(os.path.join(root, "v3.zarr"))
    elif where.startswith("v2.zarr/t"):
        zarrstream.open_array(os.path.join(root, "v2.zarr/t")).read()
    else:
        zarrstream.open_group(os.path.join(root, "v2.zarr"))
except zarrstream.StorageError as e:
    print("REFUSED", e)
"""


@pytest.mark.parametrize("where", ["v3.zarr/zarr.json", "v3.zarr/t/zarr.json", "v3.zarr/t/c/1",
                                   "v2.zarr/.zmetadata", "v2.zarr/t/.zarray", "v2.zarr/t/1"])
def test_a_named_pipe_in_a_store_is_refused_not_waited_on(tmp_path, where):
    """A named pipe at a metadata document or a chunk key would block an open() for ever: it is a
    StorageError naming the key. Run in a child process with a timeout, so a regression fails."""
    script = tmp_path / "fifo.py"
    script.write_text(SPECIAL_FILES_SCRIPT)
    proc = subprocess.run([sys.executable, str(script), str(tmp_path), where],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "REFUSED" in proc.stdout, proc.stdout
    assert f"{tmp_path}/{where}: it is a named pipe, not a regular file" in proc.stdout, proc.stdout


NUL_PATHS = ["{d}/victim\0.zarr", "file://{d}/victim\0/x.zarr", "{d}/a.zarr\0"]


@pytest.mark.parametrize("template", NUL_PATHS)
def test_a_nul_byte_in_a_path_or_url_is_refused_everywhere(tmp_path, template):
    """A NUL byte would cut a path short at the C boundary ("victim\\0.zarr" opening "victim"):
    open, create (with overwrite) and the Loader refuse it before touching anything."""
    victim = tmp_path / "victim"
    zarrstream.create_array(str(victim), (4,), "int8", (2,))[...] = np.arange(4, dtype="int8")
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    url = template.format(d=tmp_path)
    calls = [
        lambda: zarrstream.open_array(url),
        lambda: zarrstream.open_group(url),
        lambda: zarrstream.create_array(url, (2,), "int8", (1,), overwrite=True),
        lambda: zarrstream.create_group(url, overwrite=True),
        lambda: zarrstream.Loader(url, batch_size=1),
        lambda: _zarrstream.open_store(url),
        lambda: zarrstream.Loader(str(victim), batch_size=1, normalize=url),
    ]
    for call in calls:
        with pytest.raises(zarrstream.InvalidArgumentError, match="NUL byte") as e:
            call()
        assert "\0" not in str(e.value), "the NUL byte is shown escaped"
    g = zarrstream.create_group(str(tmp_path / "g.zarr"))
    for call in (lambda: g.create_array("a\0b", (2,), "int8", (1,), overwrite=True),
                 lambda: g.create_group("a\0", overwrite=True)):
        with pytest.raises(zarrstream.InvalidArgumentError, match="NUL byte"):
            call()
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*") if "g.zarr" not in p.parts) \
        == before
    assert list(zarrstream.open_array(str(victim)).read()) == [0, 1, 2, 3]


# ---------------------------------------------------------------------------------------------
# Symbolic links in a destination.


def test_a_link_at_a_chunk_path_is_replaced_not_written_through(tmp_path):
    outside = tmp_path / "precious.bin"
    outside.write_bytes(b"precious")
    dst = tmp_path / "a.zarr"
    a = zarrstream.create_array(str(dst), shape=(4, 6), dtype="int32", chunks=(2, 3))
    (dst / "c" / "1").mkdir(parents=True)
    (dst / "c" / "1" / "0").symlink_to(outside)
    values = np.arange(24, dtype=np.int32).reshape(4, 6) + 1
    a[...] = values
    assert outside.read_bytes() == b"precious"
    chunk = dst / "c" / "1" / "0"
    assert chunk.is_file() and not chunk.is_symlink()
    np.testing.assert_array_equal(zarr.open_array(str(dst), mode="r")[...], values)


def test_writes_refuse_a_linked_directory_inside_the_destination(tmp_path):
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    dst = tmp_path / "a.zarr"
    a = zarrstream.create_array(str(dst), shape=(4, 6), dtype="int32", chunks=(2, 3))
    (dst / "c").symlink_to(outside, target_is_directory=True)
    with pytest.raises(zarrstream.StorageError) as e:
        a[...] = 1
    message = str(e.value)
    # The chunks are written in parallel: the error names whichever met the link first.
    assert f"{dst}/c is a symbolic link" in message and re.search(r"chunk 'c/[01]/[01]'", message), message
    assert not any(outside.iterdir()), "a chunk was written through the link"


def test_overwrite_never_removes_through_a_linked_directory(tmp_path):
    """Replacing a group member that is a link to another array removes nothing out there."""
    elsewhere = tmp_path / "elsewhere.zarr"
    kept = zarr.create_array(str(elsewhere), shape=(4,), chunks=(2,), dtype="int16")
    kept[...] = [1, 2, 3, 4]
    before = sorted(p.relative_to(elsewhere) for p in elsewhere.rglob("*"))
    group = zarrstream.create_group(str(tmp_path / "g.zarr"))
    (tmp_path / "g.zarr" / "member").symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(zarrstream.StorageError, match="is a symbolic link"):
        group.create_array("member", shape=(4,), dtype="int16", chunks=(2,), overwrite=True)
    assert sorted(p.relative_to(elsewhere) for p in elsewhere.rglob("*")) == before
    np.testing.assert_array_equal(zarr.open_array(str(elsewhere), mode="r")[...], [1, 2, 3, 4])


def rechunk_source(tmp_path: Path) -> tuple[Path, np.ndarray]:
    values = np.arange(6 * 5 * 4, dtype=np.float32).reshape(6, 5, 4)
    src = tmp_path / "src.zarr"
    g = zarr.open_group(str(src), mode="w", zarr_format=3)
    g.create_array("t2m", shape=values.shape, chunks=(3, 5, 4), dtype="float32",
                   dimension_names=("time", "y", "x"))[...] = values
    return src, values


def test_rechunk_never_writes_through_links_in_the_destination(tmp_path):
    src, values = rechunk_source(tmp_path)
    outside_dir = tmp_path / "elsewhere"
    outside_dir.mkdir()
    outside_file = tmp_path / "precious.bin"
    outside_file.write_bytes(b"precious")

    # A linked directory where an array goes: refused, naming the link; nothing written there.
    dst = tmp_path / "dst.zarr"
    dst.mkdir()
    (dst / "t2m").symlink_to(outside_dir, target_is_directory=True)
    proc = run_cli("rechunk", src, dst, "--chunks", "time=1")
    assert proc.returncode == 1, proc.stderr
    assert f"{dst}/t2m is a symbolic link" in proc.stderr, proc.stderr
    assert not any(outside_dir.iterdir())

    # A link at a chunk's path of a destination being replaced: the link goes, its target stays.
    dst2 = tmp_path / "dst2.zarr"
    (dst2 / "t2m" / "c" / "2" / "0").mkdir(parents=True)
    (dst2 / "t2m" / "c" / "2" / "0" / "0").symlink_to(outside_file)
    proc = run_cli("rechunk", src, dst2, "--chunks", "time=1", "--overwrite")
    assert proc.returncode == 0, proc.stderr
    assert outside_file.read_bytes() == b"precious"
    assert not (dst2 / "t2m" / "c" / "2" / "0" / "0").is_symlink()
    np.testing.assert_array_equal(zarr.open_group(str(dst2), mode="r")["t2m"][...], values)


# ---------------------------------------------------------------------------------------------
# Credentials.

PASSWORD = "pw-" + "7" * 12
SECRETS = {
    "AWS_ACCESS_KEY_ID": "AKIAEXAMPLEKEYID0000",
    "AWS_SECRET_ACCESS_KEY": "aws-secret-" + "s" * 20,
    "AWS_SESSION_TOKEN": "aws-session-token-" + "t" * 24,
    "GOOGLE_OAUTH_ACCESS_TOKEN": "ya29.bearer-" + "g" * 20,
    "GS_ACCESS_KEY_ID": "GOOGEXAMPLEKEYID0000",
    "GS_SECRET_ACCESS_KEY": "gs-secret-" + "h" * 20,
}
KEY_IDS = ("AWS_ACCESS_KEY_ID", "GS_ACCESS_KEY_ID")  # not secret: SigV4 sends them in the clear


def assert_no_credentials(text: str, what: str) -> None:
    for secret in (PASSWORD, *(v for k, v in SECRETS.items() if k not in KEY_IDS)):
        assert secret not in text, f"{what} shows a credential: {text[:2000]}"


@pytest.fixture
def secret_env(monkeypatch):
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    # Nothing here answers S3: fail fast rather than retrying for a minute.
    monkeypatch.setenv("ZARRSTREAM_HTTP_MAX_ATTEMPTS", "2")
    monkeypatch.setenv("ZARRSTREAM_HTTP_INITIAL_BACKOFF_MS", "10")


def test_credentials_never_appear_in_errors_reports_or_traces(tmp_path, secret_env):
    served = tmp_path / "served"
    served.mkdir()
    store = served / "small.zarr"
    assert run_cli("synth", store, "--preset", "era5-small", "--steps", "8").returncode == 0
    server = Nginx(served, tmp_path / "nginx")
    try:
        base = f"http://reader:{PASSWORD}@127.0.0.1:{server.port}"
        url = f"{base}/small.zarr"
        shown = f"{server.url}/small.zarr"

        doctor = run_cli("doctor", url, "--json")
        assert doctor.returncode == 0, doctor.stderr
        assert_no_credentials(doctor.stdout + doctor.stderr, "doctor --json")
        report = json.loads(doctor.stdout)
        assert report["store"]["url"] == shown and report["store"]["arrays"]

        trace, bench_json = tmp_path / "trace.json", tmp_path / "bench.json"
        bench = run_cli("bench", url, "--batch-size", "2", "--trace", trace, "--json", bench_json)
        assert bench.returncode == 0, bench.stderr
        assert_no_credentials(bench.stdout + bench.stderr, "bench output")
        assert_no_credentials(trace.read_text(), "bench --trace")
        assert_no_credentials(bench_json.read_text(), "bench --json")
        assert shown in bench.stdout

        # The Python API: what arrays, groups and a loader show, record and checkpoint.
        group = zarrstream.open_group(url)
        assert group.url == shown
        name = next(iter(group))
        loader = zarrstream.Loader(url, batch_size=2)
        batch = next(iter(loader))
        assert_no_credentials(" ".join([repr(group), repr(group[name]), group[name].url,
                                        repr(loader), json.dumps(loader.stats(), default=str),
                                        json.dumps(loader.timeline(), default=str),
                                        json.dumps(loader.state_dict(), default=str),
                                        repr(sorted(batch))]), "the Python API")

        # Errors: a missing dataset over HTTP with a password, from every command and the API;
        # an S3 store nobody answers, signed with the environment's keys and session token.
        missing = f"{base}/missing.zarr"
        for args in (["doctor", missing, "--json"], ["inspect", missing],
                     ["bench", missing], ["stats", missing, "--output", tmp_path / "s.json"],
                     ["rechunk", missing, tmp_path / "out.zarr"],
                     ["rechunk", url, f"{base}/out.zarr"]):
            proc = run_cli(*args)
            assert proc.returncode != 0, args
            assert "127.0.0.1" in proc.stderr, (args, proc.stderr)
            assert_no_credentials(proc.stdout + proc.stderr, " ".join(map(str, args[:1])))
        with pytest.raises(zarrstream.ZarrstreamError) as e:
            zarrstream.open_group(missing)
        assert_no_credentials(str(e.value), "open_group")
        with pytest.raises(zarrstream.ZarrstreamError) as e:
            zarrstream.Loader(missing)
        assert_no_credentials(str(e.value), "Loader")
    finally:
        server.stop()

    dead = f"http://127.0.0.1:{server.port}"  # stopped: connections are refused
    for env_url, url in (("AWS_ENDPOINT_URL", "s3://bucket/data.zarr"),
                         ("STORAGE_EMULATOR_HOST", "gs://bucket/data.zarr")):
        os.environ[env_url] = dead
        try:
            for args in (["doctor", url, "--json"], ["inspect", url]):
                proc = run_cli(*args)
                assert proc.returncode != 0 and "bucket/data.zarr" in proc.stderr, proc.stderr
                assert_no_credentials(proc.stdout + proc.stderr, f"{args[0]} {url}")
            with pytest.raises(zarrstream.StorageError) as e:
                zarrstream.open_array(url)
            assert_no_credentials(str(e.value), f"open_array({url})")
        finally:
            del os.environ[env_url]


# ---------------------------------------------------------------------------------------------
# Decompression bombs.

# VmHWM, not ru_maxrss: a child's ru_maxrss starts from its parent's peak (Linux keeps it across
# fork and exec), VmHWM is this program's own.
BOMB_READER = r"""
import re, sys, zarrstream
try:
    zarrstream.open_array(sys.argv[1]).read()
    print("READ")
except zarrstream.CorruptChunkError as e:
    print("ERROR", e)
status = open("/proc/self/status").read()
print("PEAK_KIB", re.search(r"VmHWM:\s*(\d+) kB", status).group(1))
"""


def test_a_decompression_bomb_is_stopped_at_the_declared_chunk_size(tmp_path):
    """A 64-byte chunk whose stored gzip stream (no size in its header) inflates to 1 GiB: the
    read fails naming the array and chunk, and the reader never holds the inflated bytes."""
    import subprocess
    import sys
    import zlib

    from zarr.codecs import GzipCodec

    path = tmp_path / "bomb.zarr"
    a = zarr.create_array(str(path), shape=(8, 4), chunks=(4, 4), dtype="float32",
                          compressors=[GzipCodec(level=1)])
    a[...] = 1.0
    gzip = zlib.compressobj(1, zlib.DEFLATED, 31)
    zeros = bytes(16 << 20)
    bomb = b"".join(gzip.compress(zeros) for _ in range(64)) + gzip.flush()
    assert len(bomb) < 8 << 20  # deflate tops out near 1000:1
    (path / "c" / "1" / "0").write_bytes(bomb)
    proc = subprocess.run([sys.executable, "-c", BOMB_READER, str(path)], capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    lines = dict(line.split(" ", 1) for line in proc.stdout.splitlines())
    assert "ERROR" in lines, proc.stdout
    assert "c/1/0" in lines["ERROR"] and str(path) in lines["ERROR"], lines["ERROR"]
    assert int(lines["PEAK_KIB"]) < 512 * 1024, f"peak resident {lines['PEAK_KIB']} KiB"


# ---------------------------------------------------------------------------------------------
# No shell.

SHELL_CALLS = re.compile(r"\b(system|popen|execl|execlp|execle|wordexp)\s*\(|shell\s*=\s*True|"
                         r"os\.system|os\.popen|/bin/sh")


def test_no_shell_is_ever_invoked():
    """The library, the CLI and the Python package start no shell: the child processes
    (`bench --plot` drawing with Python; a test helper's fork) are started, and the CLI's
    `--dask`/`--ray` hand-over to Python exec'd, from argument vectors."""
    sources = [p for d in ("src", "python", "include") for p in (REPO / d).rglob("*")
               if p.suffix in (".cc", ".h", ".cu", ".py") and not p.name.endswith("_test.cc")]
    assert len(sources) > 50
    offending = [f"{p.relative_to(REPO)}:{i}: {line.strip()}"
                 for p in sources
                 for i, line in enumerate(p.read_text(errors="replace").splitlines(), 1)
                 if SHELL_CALLS.search(line)]
    assert offending == [], "\n".join(offending)
    spawns = [p.relative_to(REPO).as_posix() for p in sources
              if re.search(r"posix_spawnp?\(|\bexecvp?\(|\bfork\(\)\s*;|os\.fork\(|subprocess\.",
                           p.read_text(errors="replace"))]
    assert sorted(spawns) == ["src/cli/bench_command.cc", "src/cli/engine_forward.cc",
                              "src/util/fork_test_util.h"], spawns

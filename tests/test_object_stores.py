"""The http(s)://, s3:// and gs:// stores against real servers on loopback.

nginx serves fixture stores written by zarr-python; moto's S3 server (with SigV4 and IAM checking
switched on) serves the same files from a bucket; a fault-injecting proxy (tests/object_servers.py)
sits in front of either. Reads must equal zarr-python's bit for bit whatever the faults, request
counts are asserted from the servers' logs, and no error may show a secret.

The store conformance semantics (ranges, put/replace, list, list_dir, delete, key validation) run
here against moto rather than in src/store/store_test.cc: starting and provisioning an S3 server is
a few lines of Python but a lot of C++, and the Python binding reaches the very same Store.
"""

from __future__ import annotations

import subprocess
import sys
import time
import uuid

import numpy as np
import pytest
import zarr

import zarrstream
from zarrstream import _zarrstream

from conftest import assert_bit_equal, make_compressible, zarr_read
from object_servers import FaultProxy, MotoS3, Nginx, free_port

BUCKET = "zarr-data"
PREFIX = "fixtures"
AWS_VARS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_REGION",
            "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_NO_SIGN_REQUEST",
            "GS_ACCESS_KEY_ID", "GS_SECRET_ACCESS_KEY", "GOOGLE_OAUTH_ACCESS_TOKEN",
            "STORAGE_EMULATOR_HOST", "ZARRSTREAM_S3_ADDRESSING_STYLE")


# ---------------------------------------------------------------------------------------------
# Fixtures: data, servers.


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    """Fixture stores written by zarr-python: a consolidated v3 group (plain, sharded and sparse
    arrays), a non-consolidated v3 group and a consolidated v2 group."""
    root = tmp_path_factory.mktemp("object_store_tree")
    g = zarr.open_group(root / "group.zarr", mode="w", zarr_format=3)
    t = g.create_array("temperature", shape=(8, 20, 30), chunks=(2, 10, 15), dtype="float32",
                       dimension_names=["time", "lat", "lon"])
    t[...] = make_compressible("float32", (8, 20, 30))
    s = g.create_array("sharded", shape=(16, 16), chunks=(4, 4), shards=(8, 8), dtype="int32")
    s[...] = make_compressible("int32", (16, 16), seed=3)
    sp = g.create_array("sparse", shape=(10, 10), chunks=(5, 5), dtype="float64",
                        fill_value=-1.5)
    sp[0:5, 0:5] = 7.0
    zarr.consolidate_metadata(root / "group.zarr")
    plain = zarr.open_group(root / "unconsolidated.zarr", mode="w", zarr_format=3)
    plain.create_array("x", shape=(4,), chunks=(2,), dtype="int16")[...] = np.arange(4)
    v2 = zarr.open_group(root / "v2.zarr", mode="w", zarr_format=2)
    v2.create_array("u", shape=(6, 7), chunks=(3, 3), dtype="<u2")[...] = \
        make_compressible("uint16", (6, 7))
    zarr.consolidate_metadata(root / "v2.zarr")
    return root


@pytest.fixture(scope="module")
def nginx(tree, tmp_path_factory):
    server = Nginx(tree, tmp_path_factory.mktemp("nginx"))
    yield server
    server.stop()


@pytest.fixture(scope="module")
def moto(tree):
    server = MotoS3()
    server.upload_tree(BUCKET, tree, PREFIX)
    server.set_auth(True)
    yield server
    server.stop()


@pytest.fixture(autouse=True)
def fast_retries(monkeypatch):
    """Short backoffs and timeouts so that fault tests take seconds; no ambient credentials."""
    for var in AWS_VARS:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("ZARRSTREAM_HTTP_INITIAL_BACKOFF_MS", "10")
    monkeypatch.setenv("ZARRSTREAM_HTTP_MAX_BACKOFF_MS", "200")
    monkeypatch.setenv("ZARRSTREAM_HTTP_STALL_TIMEOUT_S", "1")


@pytest.fixture
def s3_env(moto, monkeypatch):
    moto.set_auth(True)
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto.endpoint)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", moto.access_key)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", moto.secret_key)
    monkeypatch.setenv("AWS_REGION", MotoS3.REGION)
    return moto


def check_group(url: str, tree) -> None:
    """Every array of the consolidated fixture group, read through `url`, equals zarr-python's
    read of the local copy; a few slices too."""
    g = zarrstream.open_group(url)
    assert sorted(g.keys()) == ["sharded", "sparse", "temperature"]
    for name in ("temperature", "sharded", "sparse"):
        expected = zarr_read(tree / "group.zarr" / name)
        a = g[name]
        assert_bit_equal(a.read(), expected, f"{url}/{name}")
        assert_bit_equal(a[1:3, 5:7], expected[1:3, 5:7], f"{url}/{name}[1:3, 5:7]")


# ---------------------------------------------------------------------------------------------
# HTTP (nginx).


def test_http_reads_equal_zarr_python(nginx, tree):
    check_group(f"{nginx.url}/group.zarr", tree)
    v2 = zarrstream.open_group(f"{nginx.url}/v2.zarr")
    assert_bit_equal(v2["u"].read(), zarr_read(tree / "v2.zarr" / "u"))


def test_http_request_counts(nginx, tree):
    nginx.clear_log()
    g = zarrstream.open_group(f"{nginx.url}/group.zarr")
    t = g["temperature"]
    assert [(r.method, r.path) for r in nginx.requests()] == [("GET", "/group.zarr/zarr.json")], \
        "opening a consolidated group and its arrays must cost one request"

    nginx.clear_log()
    t.read()
    reqs = nginx.requests()
    chunk_paths = sorted(r.path for r in reqs)
    expected = sorted(f"/group.zarr/temperature/c/{i}/{j}/{k}"
                      for i in range(4) for j in range(2) for k in range(2))
    assert chunk_paths == expected, "a full read requests every chunk exactly once"

    s = g["sharded"]
    nginx.clear_log()
    assert_bit_equal(s[0:4, 4:8], zarr_read(tree / "group.zarr" / "sharded")[0:4, 4:8])
    reqs = nginx.requests()
    assert [r.path for r in reqs] == ["/group.zarr/sharded/c/0/0"] * 2
    suffix = [r.range for r in reqs if r.range.startswith("bytes=-")]
    bounded = [r.range for r in reqs if not r.range.startswith("bytes=-")]
    assert len(suffix) == 1, "the shard index is read as a suffix range"
    first, last = map(int, bounded[0].removeprefix("bytes=").split("-"))
    assert last - first + 1 < (tree / "group.zarr/sharded/c/0/0").stat().st_size // 2, \
        "one inner chunk of the shard is read, not the shard"


def test_http_missing_chunks_and_missing_datasets(nginx, tree):
    sparse = zarrstream.open_array(f"{nginx.url}/group.zarr/sparse")
    assert_bit_equal(sparse.read(), zarr_read(tree / "group.zarr" / "sparse"))
    assert (sparse[7:, 7:] == -1.5).all(), "a 404 chunk reads as the fill value"
    strict = zarrstream.open_array(f"{nginx.url}/group.zarr/sparse", missing_chunks="error")
    with pytest.raises(zarrstream.NotFoundError, match=r"chunk 'c/\d/\d'.*not stored"):
        strict.read()
    with pytest.raises(zarrstream.NotFoundError, match="no Zarr array or group") as e:
        zarrstream.open_array(f"{nginx.url}/nothing-here.zarr")
    assert f"{nginx.url}/nothing-here.zarr" in str(e.value)


def test_http_403_is_an_authorisation_error_without_credentials(nginx, tree):
    with pytest.raises(zarrstream.StorageError) as e:  # nginx forbids everything under /private/
        zarrstream.open_array(f"http://reader:hunter2@127.0.0.1:{nginx.port}/private")
    message = str(e.value)
    assert "403" in message and "authoris" in message
    assert f"http://127.0.0.1:{nginx.port}/private/zarr.json" in message
    assert "hunter2" not in message and "reader" not in message


def test_http_store_is_read_only_and_cannot_list(nginx):
    store = _zarrstream.open_store(f"{nginx.url}/group.zarr")
    with pytest.raises(zarrstream.UnsupportedError, match="read-only"):
        store.put("k", b"v")
    with pytest.raises(zarrstream.UnsupportedError, match="read-only"):
        store.delete("k")
    with pytest.raises(zarrstream.UnsupportedError, match="listing"):
        store.list("")
    with pytest.raises(zarrstream.UnsupportedError, match="consolidated"):
        zarrstream.open_group(f"{nginx.url}/unconsolidated.zarr")


def test_http_receive_fetches_every_key_whole_and_keeps_nothing(nginx, tree):
    """Store.receive, the object-store benchmark's transport-only row: every key once, whole, the
    bytes counted; a missing key is an error naming it; a window of one reads one key at a time."""
    files = sorted(p for p in (tree / "group.zarr" / "temperature" / "c").rglob("*") if p.is_file())
    keys = [p.relative_to(tree / "group.zarr").as_posix() for p in files]
    store = _zarrstream.open_store(f"{nginx.url}/group.zarr")
    for in_flight in (1, 3, 64):
        nginx.clear_log()
        assert store.receive(keys, in_flight=in_flight) == sum(p.stat().st_size for p in files)
        assert sorted(r.path for r in nginx.requests()) == sorted(f"/group.zarr/{k}" for k in keys)
        assert all(r.range == "" for r in nginx.requests()), "whole keys, no ranges"
    assert store.receive([]) == 0
    with pytest.raises(zarrstream.NotFoundError, match="key 'temperature/c/9/9/9'"):
        store.receive([keys[0], "temperature/c/9/9/9", keys[1]])
    with pytest.raises(zarrstream.InvalidArgumentError, match="in_flight must be at least 1"):
        store.receive(keys, in_flight=0)


def test_http_ranges_of_one_key_are_coalesced(nginx, tree):
    path = tree / "group.zarr" / "sharded" / "c" / "1" / "1"
    data = path.read_bytes()
    store = _zarrstream.open_store(f"{nginx.url}/group.zarr")
    nginx.clear_log()
    ranges = [("bounded", 0, 10), ("bounded", 20, 5), ("bounded", 12, 4), ("bounded", 3, 0)]
    got = store.read("sharded/c/1/1", ranges)
    assert got == [data[0:10], data[20:25], data[12:16], b""]
    assert [r.range for r in nginx.requests()] == ["bytes=0-24"]
    got = store.read("sharded/c/1/1", [("suffix", 7, 0), ("from", len(data) - 3, 0)])
    assert got == [data[-7:], data[-3:]]
    with pytest.raises(zarrstream.CorruptChunkError, match="outside the stored value"):
        store.read("sharded/c/1/1", [("bounded", len(data) - 2, 10)])
    with pytest.raises(zarrstream.NotFoundError):
        store.read("sharded/c/9/9", [("bounded", 0, 0)])
    assert store.read("sharded/c/1/1", [("from", len(data), 0)]) == [b""]
    assert store.metrics()["requests"] >= 5


# ---------------------------------------------------------------------------------------------
# Faults (proxy in front of nginx).


@pytest.fixture
def proxy(nginx):
    p = FaultProxy(nginx.port, stall_seconds=5)
    yield p
    p.stop()


def test_faults_are_retried_and_reads_stay_exact(proxy, tree):
    proxy.configure(faults=("503", "reset", "truncate", "slow", "stall"))
    t = zarrstream.open_array(f"{proxy.url}/group.zarr/temperature")
    assert_bit_equal(t.read(), zarr_read(tree / "group.zarr" / "temperature"))
    s = zarrstream.open_array(f"{proxy.url}/group.zarr/sharded")
    assert_bit_equal(s.read(), zarr_read(tree / "group.zarr" / "sharded"))
    reqs = proxy.requests()
    faults = [r.fault for r in reqs if r.fault]
    for kind in ("503", "reset", "truncate", "slow", "stall"):
        assert kind in faults, f"the proxy injected no '{kind}'"
    # Every injected fault but a slow body cost exactly one retry of the same request.
    by_request: dict[tuple[str, str, str], int] = {}
    for r in reqs:
        key = (r.method, r.path, r.headers.get("range", ""))
        by_request[key] = by_request.get(key, 0) + 1
    retried = {(r.method, r.path, r.headers.get("range", "")) for r in reqs
               if r.fault and r.fault != "slow"}
    for key, n in by_request.items():
        assert n == (2 if key in retried else 1), (key, n)


def test_store_metrics_count_retries(proxy, tree):
    proxy.configure(faults=("503",))
    store = _zarrstream.open_store(f"{proxy.url}/group.zarr")
    data = (tree / "group.zarr" / "zarr.json").read_bytes()
    assert store.read("zarr.json", [("from", 0, 0)]) == [data]
    m = store.metrics()
    assert (m["requests"], m["retries"], m["failed_requests"]) == (2, 1, 1)
    assert m["bytes_received"] >= len(data)
    assert sum(m["latency_us_log2"]) == 2


def test_429_retry_after_is_honoured(proxy, tree):
    proxy.configure(faults=("429",))
    proxy.retry_after_seconds = 1
    t = zarrstream.open_array(f"{proxy.url}/group.zarr/temperature")
    reqs = proxy.requests()
    assert [r.status for r in reqs] == [429, 200]
    assert reqs[1].time - reqs[0].time >= 0.95, "the retry came before Retry-After allowed"
    assert t.shape == (8, 20, 30)


def test_dead_and_failing_endpoints_fail_in_bounded_time(proxy, monkeypatch):
    monkeypatch.setenv("ZARRSTREAM_HTTP_MAX_ATTEMPTS", "4")
    start = time.monotonic()
    with pytest.raises(zarrstream.StorageError, match="gave up after 4 attempts") as e:
        zarrstream.open_array(f"http://127.0.0.1:{free_port()}/gone.zarr")
    assert "Couldn't connect" in str(e.value)
    assert time.monotonic() - start < 10

    # A server that answers 503 forever: the retry budget ends it.
    monkeypatch.setenv("ZARRSTREAM_HTTP_MAX_ATTEMPTS", "1000")
    monkeypatch.setenv("ZARRSTREAM_HTTP_RETRY_BUDGET_MS", "1500")
    proxy.configure(faults=("503",))
    proxy.every_attempt = True
    start = time.monotonic()
    with pytest.raises(zarrstream.StorageError, match="HTTP 503.*retry budget") as e:
        zarrstream.open_array(f"{proxy.url}/group.zarr/temperature")
    assert time.monotonic() - start < 5
    assert "group.zarr/temperature/zarr.json" in str(e.value)


def test_responses_that_break_http_framing_are_retried_on_a_new_connection(proxy, tree):
    """A Content-Range other than the range asked for, a Content-Length one byte short (whose
    leftover byte then precedes the next response on that connection) and a body without any
    length cut short: each is retried on a new connection, and reads stay exact."""
    expected = zarr_read(tree / "group.zarr" / "sharded")
    for faults in (("wrong-range",), ("short-length",), ("unframed",)):
        proxy.configure(faults=faults)
        s = zarrstream.open_array(f"{proxy.url}/group.zarr/sharded")
        assert_bit_equal(s.read(), expected, str(faults))
        t = zarrstream.open_array(f"{proxy.url}/group.zarr/temperature")
        assert_bit_equal(t.read(), zarr_read(tree / "group.zarr" / "temperature"), str(faults))
        injected = [r for r in proxy.requests() if r.fault == faults[0]]
        assert injected, f"the proxy injected no '{faults[0]}'"


def test_responses_no_read_can_use_are_storage_errors_naming_the_url(proxy, monkeypatch):
    monkeypatch.setenv("ZARRSTREAM_HTTP_MAX_ATTEMPTS", "2")
    url = f"{proxy.url}/group.zarr/temperature"
    # A body of unknown length cut short, every time: a storage error, never a JSON error.
    proxy.configure(broken={"temperature/zarr.json": "unframed"})
    with pytest.raises(zarrstream.StorageError, match="unknown length") as e:
        zarrstream.open_array(url)
    assert f"{url}/zarr.json" in str(e.value) and "gave up after 2 attempts" in str(e.value)
    # 204 to a GET: what it is, not "HTTP 206 with an unusable Content-Range".
    proxy.configure(broken={"temperature/zarr.json": "204"})
    with pytest.raises(zarrstream.StorageError, match="unexpected HTTP 204") as e:
        zarrstream.open_array(url)
    assert f"{url}/zarr.json" in str(e.value) and "Content-Range" not in str(e.value)
    # A redirect: not followed, and said where to, without credentials or query.
    proxy.configure(broken={"temperature/zarr.json": "301"})
    with pytest.raises(zarrstream.StorageError, match="HTTP 301 redirect to "
                       r"http://elsewhere.invalid/group.zarr/temperature/zarr.json\?\.\.\. "
                       r"\(redirects are not followed") as e:
        zarrstream.open_array(url)
    assert "hunter2" not in str(e.value) and "secret" not in str(e.value)
    assert len(proxy.requests()) == 1, "a redirect is not retried"


def test_a_416_to_a_request_without_a_range_is_a_storage_error(proxy):
    """A 416 (range not satisfiable) answers a request for a range. A read of empty ranges (or none)
    is a HEAD and a read of a whole value a GET without a Range: a 416 to either is the server's
    error, never an answer about a range. In a subprocess, so that a crash fails this test alone."""
    proxy.configure(broken={"sharded/c/1/1": "416"})
    url = f"{proxy.url}/group.zarr"
    script = (
        "import zarrstream\n"
        "from zarrstream import _zarrstream\n"
        f"store = _zarrstream.open_store({url!r})\n"
        "for ranges in ([('bounded', 3, 0)], [], [('from', 0, 0)]):\n"
        "    try:\n"
        "        print('read', store.read('sharded/c/1/1', ranges), flush=True)\n"
        "    except zarrstream.ZarrstreamError as e:\n"
        "        print(type(e).__name__, e, flush=True)\n")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, (proc.returncode, proc.stdout, proc.stderr)
    want = [f"StorageError HEAD {url}/sharded/c/1/1: HTTP 416"] * 2 + [
        f"StorageError GET {url}/sharded/c/1/1: HTTP 416"]
    assert proc.stdout.splitlines() == want
    assert [r.method for r in proxy.requests()] == ["HEAD", "HEAD", "GET"], "a 416 is not retried"


@pytest.mark.parametrize("rate", [0.2, 0.35, 0.5])
def test_sustained_error_rates_never_make_a_read_fail(proxy, tree, monkeypatch, rate):
    """Hundreds of reads against a server that fails a steady share of all attempts (503s and
    connection resets, retries included): the host's retry quota is only spent while failures
    outnumber successes, so every read succeeds. Each request may try many times here, so that
    only the quota could end a read."""
    monkeypatch.setenv("ZARRSTREAM_HTTP_MAX_ATTEMPTS", "40")
    monkeypatch.setenv("ZARRSTREAM_HTTP_INITIAL_BACKOFF_MS", "1")
    monkeypatch.setenv("ZARRSTREAM_HTTP_MAX_BACKOFF_MS", "5")
    proxy.configure(error_rate=rate, seed=11)
    store = _zarrstream.open_store(f"{proxy.url}/group.zarr")
    keys = sorted(p.relative_to(tree / "group.zarr").as_posix()
                  for p in (tree / "group.zarr" / "temperature" / "c").rglob("*") if p.is_file())
    for i in range(400):
        key = keys[i % len(keys)]
        assert store.read(key, [("from", 0, 0)]) == [(tree / "group.zarr" / key).read_bytes()], key
    m = store.metrics()
    assert m["retries"] > 400 * rate * 0.5, m
    faults = {r.fault for r in proxy.requests() if r.fault}
    assert faults == {"503", "reset"}, faults


def test_a_dead_endpoint_still_fails_every_read_fast(proxy, tree, monkeypatch):
    """Every attempt failing: after the quota's retries, reads fail at their first failure instead
    of each retrying for its whole budget (40 attempts each here)."""
    monkeypatch.setenv("ZARRSTREAM_HTTP_MAX_ATTEMPTS", "40")
    monkeypatch.setenv("ZARRSTREAM_HTTP_INITIAL_BACKOFF_MS", "1")
    monkeypatch.setenv("ZARRSTREAM_HTTP_MAX_BACKOFF_MS", "5")
    proxy.configure(error_rate=1.0, error_faults=("503",))
    store = _zarrstream.open_store(f"{proxy.url}/group.zarr")
    messages = []
    for i in range(150):
        with pytest.raises(zarrstream.StorageError) as e:
            store.read(f"temperature/c/0/0/{i % 2}", [("from", 0, 0)])
        messages.append(str(e.value))
    assert "retry quota is spent" in messages[-1]
    # The quota's 100 retries in all, then one attempt per read.
    assert len(proxy.requests()) <= 150 + 100


# ---------------------------------------------------------------------------------------------
# A long Loader run at a sustained error rate.


def write_fields(path, nt: int):
    """A consolidated group of two (time, lat, lon) arrays: `u` in one object per chunk (whole-object
    GETs), `v` sharded (range GETs); 16 + 4 objects' worth of requests per time step."""
    g = zarrstream.create_group(str(path))
    rng = np.random.default_rng(5)
    g.create_array("u", (nt, 16, 16), "float32", (1, 4, 4), dims=["time", "lat", "lon"])[...] = \
        rng.standard_normal((nt, 16, 16)).astype("float32")
    g.create_array("v", (nt, 16, 16), "float32", (1, 8, 8), shards=(2, 16, 16),
                   dims=["time", "lat", "lon"])[...] = \
        rng.standard_normal((nt, 16, 16)).astype("float32")
    g.consolidate_metadata()
    return path


@pytest.fixture(scope="module")
def loader_stores(tmp_path_factory):
    """48 time steps for the nginx run; 20 for moto, which answers far more slowly."""
    root = tmp_path_factory.mktemp("loader_stores")
    return write_fields(root / "fields.zarr", 48), write_fields(root / "small.zarr", 20)


def loader_batches(url):
    loader = zarrstream.Loader(url, ["u", "v"], batch_size=4, seed=2)
    return [{k: np.asarray(v).copy() for k, v in batch.items()} for batch in loader]


def check_loader_under_errors(url, local, proxy, min_attempts):
    remote = loader_batches(url)
    assert len(remote) == len(local)
    for r, l in zip(remote, local):
        assert r.keys() == l.keys()
        for k in r:
            assert_bit_equal(r[k], l[k], k)
    attempts = proxy.requests()
    failed = sum(1 for r in attempts if r.fault)
    assert len(attempts) > min_attempts and 0.2 < failed / len(attempts) < 0.4, \
        (len(attempts), failed)


@pytest.mark.slow
def test_a_long_loader_run_over_http_at_30_percent_errors_is_exact(loader_stores, monkeypatch):
    """About 1,300 attempts, 30 % of them failing (503s and resets, retries too): every batch
    equals the local store's, bit for bit."""
    monkeypatch.setenv("ZARRSTREAM_HTTP_MAX_ATTEMPTS", "30")
    path = loader_stores[0]
    local = loader_batches(path)
    server = Nginx(path.parent, path.parent / "nginx")
    proxy = FaultProxy(server.port)
    try:
        proxy.configure(error_rate=0.3, seed=5)
        check_loader_under_errors(f"{proxy.url}/{path.name}", local, proxy, 800)
    finally:
        proxy.stop()
        server.stop()


@pytest.mark.slow
def test_a_long_loader_run_over_s3_at_30_percent_errors_is_exact(s3_env, loader_stores,
                                                                   monkeypatch):
    monkeypatch.setenv("ZARRSTREAM_HTTP_MAX_ATTEMPTS", "30")
    # moto answers a few hundred requests at a time slowly on two cores: no stall timeouts.
    monkeypatch.setenv("ZARRSTREAM_HTTP_STALL_TIMEOUT_S", "30")
    path = loader_stores[1]
    local = loader_batches(path)
    s3_env.upload_tree(BUCKET, path, "loader/small.zarr")
    proxy = FaultProxy(s3_env.port)
    try:
        proxy.configure(error_rate=0.3, seed=6)
        monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.url)
        check_loader_under_errors(f"s3://{BUCKET}/loader/small.zarr", local, proxy, 350)
    finally:
        proxy.stop()


# ---------------------------------------------------------------------------------------------
# S3 (moto with SigV4 checking).


def test_s3_reads_equal_zarr_python(s3_env, tree):
    check_group(f"s3://{BUCKET}/{PREFIX}/group.zarr", tree)
    a = zarrstream.open_array(f"s3://{BUCKET}/{PREFIX}/v2.zarr/u")
    assert_bit_equal(a.read(), zarr_read(tree / "v2.zarr" / "u"))


def test_s3_wrong_credentials_are_a_clear_authorisation_error(s3_env, monkeypatch):
    url = f"s3://{BUCKET}/{PREFIX}/group.zarr"
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret-" + "x" * 20)
    with pytest.raises(zarrstream.StorageError) as e:
        zarrstream.open_group(url)
    message = str(e.value)
    assert "SignatureDoesNotMatch" in message and "authorisation" in message
    assert f"{url}/zarr.json" in message
    assert "not-the-secret" not in message and s3_env.secret_key not in message
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAUNKNOWNKEY000000")
    with pytest.raises(zarrstream.StorageError, match="InvalidAccessKeyId"):
        zarrstream.open_group(url)


def test_s3_temporary_credentials_with_session_token(s3_env, monkeypatch, tree):
    creds = s3_env.temporary_credentials()
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", creds["AccessKeyId"])
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", creds["SecretAccessKey"])
    monkeypatch.setenv("AWS_SESSION_TOKEN", creds["SessionToken"])
    a = zarrstream.open_array(f"s3://{BUCKET}/{PREFIX}/group.zarr/sharded")
    assert_bit_equal(a.read(), zarr_read(tree / "group.zarr" / "sharded"))
    monkeypatch.setenv("AWS_SESSION_TOKEN", "forged-token")
    with pytest.raises(zarrstream.StorageError, match="authorisation") as e:
        zarrstream.open_array(f"s3://{BUCKET}/{PREFIX}/group.zarr/sharded")
    assert "forged-token" not in str(e.value)


def test_s3_anonymous_requests_are_unsigned(moto, monkeypatch, tree):
    moto.set_auth(False)  # a public bucket
    try:
        proxy = FaultProxy(moto.port)
        monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.url)
        a = zarrstream.open_array(f"s3://{BUCKET}/{PREFIX}/group.zarr/temperature")
        assert_bit_equal(a[0], zarr_read(tree / "group.zarr" / "temperature")[0])
        reqs = proxy.requests()
        assert reqs and all("authorization" not in r.headers for r in reqs)
        proxy.configure()
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", moto.access_key)
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", moto.secret_key)
        zarrstream.open_array(f"s3://{BUCKET}/{PREFIX}/group.zarr/temperature")
        auth = proxy.requests()[0].headers["authorization"]
        assert auth.startswith(f"AWS4-HMAC-SHA256 Credential={moto.access_key}/")
        assert moto.secret_key not in auth
        proxy.stop()
    finally:
        moto.set_auth(True)


def test_s3_request_counts_and_virtual_hosted_addressing(s3_env, monkeypatch, tree):
    proxy = FaultProxy(s3_env.port)
    try:
        monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.url)
        g = zarrstream.open_group(f"s3://{BUCKET}/{PREFIX}/group.zarr")
        assert [(r.method, r.path) for r in proxy.requests()] == \
            [("GET", f"/{BUCKET}/{PREFIX}/group.zarr/zarr.json")]
        proxy.configure()
        g["sharded"][0:4, 0:4]
        assert len(proxy.requests()) == 2, "shard index + one inner chunk"

        # Virtual-hosted: the bucket moves into the host name (curl resolves *.localhost to
        # loopback itself).
        proxy.configure()
        monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://localhost:{proxy.port}")
        monkeypatch.setenv("ZARRSTREAM_S3_ADDRESSING_STYLE", "virtual")
        a = zarrstream.open_array(f"s3://{BUCKET}/{PREFIX}/group.zarr/temperature")
        assert_bit_equal(a[2:4], zarr_read(tree / "group.zarr" / "temperature")[2:4])
        first = proxy.requests()[0]
        assert first.headers["host"] == f"{BUCKET}.localhost:{proxy.port}"
        assert first.path == f"/{PREFIX}/group.zarr/temperature/zarr.json"
    finally:
        proxy.stop()


def test_s3_store_conformance(s3_env, monkeypatch):
    monkeypatch.setenv("ZARRSTREAM_S3_LIST_PAGE_SIZE", "3")  # so listings paginate
    store = _zarrstream.open_store(f"s3://{BUCKET}/conformance-{uuid.uuid4().hex}")
    with pytest.raises(zarrstream.NotFoundError):
        store.read("nope", [("from", 0, 0)])

    store.put("k", b"0123456789")
    got = store.read("k", [("bounded", 2, 3), ("suffix", 4, 0), ("from", 8, 0), ("bounded", 0, 0)])
    assert got == [b"234", b"6789", b"89", b""]
    with pytest.raises(zarrstream.CorruptChunkError):
        store.read("k", [("bounded", 2, 10)])
    with pytest.raises(zarrstream.CorruptChunkError):
        store.read("k", [("suffix", 11, 0)])
    store.put("k", b"second")
    assert store.read("k", [("from", 0, 0)]) == [b"second"]
    store.put("empty", b"")
    assert store.read("empty", [("from", 0, 0)]) == [b""]

    for key, value in [("g/zarr.json", b"{}"), ("g/a/c/0/0", b"12345"), ("g/a/c/0/1", b"1"),
                       ("g/b/zarr.json", b"{}"), ("g/a/c/1/0", b"xy"), ("g/ab", b"z")]:
        store.put(key, value)
    assert sorted(store.list("g/a")) == [("g/a/c/0/0", 5), ("g/a/c/0/1", 1), ("g/a/c/1/0", 2)]
    assert len(store.list("")) == 8
    keys, prefixes = store.list_dir("g")
    assert sorted(keys) == [("g/ab", 1), ("g/zarr.json", 2)]
    assert sorted(prefixes) == ["g/a", "g/b"]
    keys, prefixes = store.list_dir("")
    assert sorted(keys) == [("empty", 0), ("k", 6)] and prefixes == ["g"]

    store.delete("g/a/c/0/0")
    with pytest.raises(zarrstream.NotFoundError):
        store.read("g/a/c/0/0", [("from", 0, 0)])
    store.delete("g/a/c/0/0")  # deleting a missing key succeeds
    store.delete("never/stored")
    for bad in ("../x", "a/../../x", "/etc/passwd", "a//b", "./a", "a\\b", "a\0b"):
        with pytest.raises(zarrstream.InvalidArgumentError):
            store.put(bad, b"x")
        with pytest.raises(zarrstream.InvalidArgumentError):
            store.read(bad, [("from", 0, 0)])
    assert store.metrics()["bytes_sent"] > 0


# ---------------------------------------------------------------------------------------------
# GCS (gs:// URLs against the same S3-compatible server, as STORAGE_EMULATOR_HOST).


def test_gs_hmac_keys_bearer_token_and_anonymous(moto, monkeypatch, tree):
    expected = zarr_read(tree / "group.zarr" / "sparse")
    proxy = FaultProxy(moto.port)
    try:
        monkeypatch.setenv("STORAGE_EMULATOR_HOST", proxy.url)
        url = f"gs://{BUCKET}/{PREFIX}/group.zarr/sparse"
        # HMAC keys through the S3-compatible API: signed, checked by the server.
        moto.set_auth(True)
        monkeypatch.setenv("GS_ACCESS_KEY_ID", moto.access_key)
        monkeypatch.setenv("GS_SECRET_ACCESS_KEY", moto.secret_key)
        assert_bit_equal(zarrstream.open_array(url).read(), expected)
        assert proxy.requests()[0].headers["authorization"].startswith("AWS4-HMAC-SHA256")
        monkeypatch.setenv("GS_SECRET_ACCESS_KEY", "wrong-" + "y" * 30)
        with pytest.raises(zarrstream.StorageError, match="authorisation") as e:
            zarrstream.open_array(url)
        assert "wrong-" not in str(e.value) and url in str(e.value)
        monkeypatch.delenv("GS_ACCESS_KEY_ID")
        monkeypatch.delenv("GS_SECRET_ACCESS_KEY")

        moto.set_auth(False)  # moto cannot check OAuth tokens: only that it is sent is asserted
        proxy.configure()
        monkeypatch.setenv("GOOGLE_OAUTH_ACCESS_TOKEN", "ya29.test-token")
        assert_bit_equal(zarrstream.open_array(url).read(), expected)
        assert all(r.headers.get("authorization") == "Bearer ya29.test-token"
                   for r in proxy.requests())
        monkeypatch.delenv("GOOGLE_OAUTH_ACCESS_TOKEN")
        proxy.configure()
        assert_bit_equal(zarrstream.open_array(url).read(), expected)
        assert all("authorization" not in r.headers for r in proxy.requests())
    finally:
        moto.set_auth(True)
        proxy.stop()

"""Real servers on loopback for the object-store tests and benchmark, started by them.

- :class:`Nginx`: Debian's nginx serving a directory over HTTP, as the current user, from a
  generated config on a free port; its access log records every request (method, path, Range,
  status) for request-count assertions. With ``latency_ms`` every response waits that long first
  (the echo module's non-blocking ``echo_sleep``, Debian package ``libnginx-mod-http-echo``): an
  object store's round trip without a proxy in the way, so nginx's worker processes, not a Python
  thread, bound the throughput.
- :class:`MotoS3`: moto's S3 server (PyPI ``moto[server]``) in its own process, with an IAM user
  whose keys sign requests. moto checks SigV4 signatures only once IAM authentication is switched on
  (``INITIAL_NO_AUTH_ACTION_COUNT``, set at run time through ``/moto-api/reset-auth``): fixtures
  are uploaded first, then :meth:`MotoS3.require_auth` turns checking on, and from then on wrong
  keys get ``InvalidAccessKeyId`` / ``SignatureDoesNotMatch``.
- :class:`FaultProxy`: an HTTP/1.1 reverse proxy (asyncio, in a thread of the test process) in
  front of either server. It counts requests, can add latency, and injects faults into the first
  attempt of each distinct request: 503, 429 with Retry-After, connection resets, stalls, slow
  bodies and truncated bodies; and into every attempt for chosen paths (an object that fails for
  good: 500 or any other fault). Responses that break HTTP's rules: 204 to a GET, a redirect, a
  Content-Range other than the range asked for, a Content-Length one byte short (the byte left
  over lands before the next response on the connection), a body without any length cut short,
  a 416 (range not satisfiable) to any request, a HEAD or a GET without a Range among them.
  With ``error_rate``, a sustained share of all attempts fails (503 or a reset), chosen from a
  seed and each attempt's identity, so a run fails the same attempts whatever the order requests
  arrive in.

A missing server binary fails the test with the command that installs it: these tests must run in
CI (``make test`` installs nginx through scripts/install-deps.sh and moto from requirements-dev.txt).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import threading
import time
import traceback
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import pytest


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port: int, proc: subprocess.Popen | None, what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"{what} exited with status {proc.returncode} before listening")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"{what} did not listen on port {port} within {timeout} s")


def stop_process(proc: subprocess.Popen) -> None:
    """Terminates a server started by the tests, killing it if it does not exit in time."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


# ---------------------------------------------------------------------------------------------
# nginx


def nginx_binary() -> str:
    for candidate in (shutil.which("nginx"), "/usr/sbin/nginx"):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    pytest.fail("nginx is not installed: run scripts/install-deps.sh (Debian package 'nginx')")


@dataclass
class LoggedRequest:
    method: str
    path: str
    range: str
    status: int


class Nginx:
    """nginx serving `root` at http://127.0.0.1:<port>/.

    `latency_ms`: delay before every response, whole milliseconds (requests wait concurrently, as
    at an object store).
    `workers`: nginx worker processes; more than one runs a master process (which, started as
    root, keeps its workers as root so they read what the tests wrote). `log_requests`: write the
    access log that :meth:`requests` reads (a benchmark may turn it off).
    """

    def __init__(self, root: Path, workdir: Path, *, latency_ms: float = 0, workers: int = 1,
                 log_requests: bool = True):
        self.root = Path(root)
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.log_path = self.workdir / "access.log"
        self.port = free_port()
        conf = self.workdir / "nginx.conf"
        tmp = self.workdir / "tmp"
        tmp.mkdir(exist_ok=True)
        preamble = ""
        files = f"root {self.root};"
        location = f"location / {{ {files} }}"
        if latency_ms > 0:
            # Where Debian puts it beside the binary (/usr/sbin/nginx, /usr/lib/nginx/modules).
            echo_module = (Path(nginx_binary()).resolve().parent.parent /
                           "lib/nginx/modules/ngx_http_echo_module.so")
            if not echo_module.exists():
                pytest.fail("nginx's echo module is not installed: run scripts/install-deps.sh "
                            "(Debian package 'libnginx-mod-http-echo')")
            preamble += f"load_module {echo_module};\n"
            location = (f"location / {{ echo_sleep {round(latency_ms) / 1000:g}; echo_exec @files; }}\n"
                        f"        location @files {{ {files} }}")
        if workers > 1:
            # A master process and its workers; as root, the workers stay root (not nobody).
            preamble += f"master_process on;\nworker_processes {workers};\n"
            if os.geteuid() == 0:
                preamble += "user root;\n"
        else:
            # One process that never switches user, so it runs as whoever starts it and reads
            # files only that user can read.
            preamble += "master_process off;\nworker_processes 1;\n"
        access_log = f"access_log {self.log_path} requests;" if log_requests else "access_log off;"
        conf.write_text(
            f"""
{preamble}daemon off;
pid {self.workdir}/nginx.pid;
error_log {self.workdir}/error.log warn;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    client_body_temp_path {tmp}/body;
    proxy_temp_path {tmp}/proxy;
    fastcgi_temp_path {tmp}/fastcgi;
    uwsgi_temp_path {tmp}/uwsgi;
    scgi_temp_path {tmp}/scgi;
    log_format requests '$request_method $uri $status "$http_range"';
    keepalive_requests 100000;
    sendfile on;
    server {{
        listen 127.0.0.1:{self.port} backlog=4096;
        {access_log}
        {location}
        location /private/ {{ return 403; }}
    }}
}}
"""
        )
        self.proc = subprocess.Popen(
            [nginx_binary(), "-p", str(self.workdir), "-c", str(conf)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        try:
            wait_for_port(self.port, self.proc, "nginx")
        except RuntimeError as e:
            err = self.proc.stderr.read().decode() if self.proc.poll() is not None else ""
            self.stop()
            raise RuntimeError(f"{e}: {err}") from None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def requests(self) -> list[LoggedRequest]:
        """Every request logged so far. nginx logs a request after its response has gone out, so a
        client can hold the response before the line is written: the log is read once it has
        stopped growing for 0.2 s (at most 5 s)."""
        out = []
        if not self.log_path.exists():
            return out
        text = self.log_path.read_text()
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            time.sleep(0.2)
            again = self.log_path.read_text()
            if again == text:
                break
            text = again
        for line in text.splitlines():
            method, path, status, rng = line.split(" ", 3)
            rng = rng.strip('"')
            out.append(LoggedRequest(method, path, "" if rng == "-" else rng, int(status)))
        return out

    def clear_log(self) -> None:
        self.log_path.write_text("")  # nginx appends (O_APPEND), so truncating in place is safe

    def stop(self) -> None:
        stop_process(self.proc)


# ---------------------------------------------------------------------------------------------
# moto (S3)


class MotoS3:
    """moto's S3 server on loopback; `access_key`/`secret_key` are a real IAM user's keys in it."""

    REGION = "us-east-1"

    def __init__(self):
        try:
            import boto3  # noqa: F401  (moto[server] brings it)
            import moto  # noqa: F401
        except ImportError:
            pytest.fail("moto[server] is not installed: pip install -r requirements-dev.txt")
        self.port = free_port()
        env = dict(os.environ)
        env.pop("INITIAL_NO_AUTH_ACTION_COUNT", None)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=env,
        )
        wait_for_port(self.port, self.proc, "moto server")
        admin = self.client("iam")
        admin.create_user(UserName="zarrstream-test")
        admin.put_user_policy(
            UserName="zarrstream-test",
            PolicyName="all",
            PolicyDocument=json.dumps(
                {"Version": "2012-10-17",
                 "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}
            ),
        )
        key = admin.create_access_key(UserName="zarrstream-test")["AccessKey"]
        self.access_key = key["AccessKeyId"]
        self.secret_key = key["SecretAccessKey"]
        # A role whose temporary credentials (with a session token) the tests assume.
        trust = {"Version": "2012-10-17",
                 "Statement": [{"Effect": "Allow", "Principal": {"AWS": "*"},
                                "Action": "sts:AssumeRole"}]}
        role = admin.create_role(RoleName="reader", AssumeRolePolicyDocument=json.dumps(trust))
        admin.put_role_policy(
            RoleName="reader",
            PolicyName="all",
            PolicyDocument=json.dumps(
                {"Version": "2012-10-17",
                 "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}
            ),
        )
        self.role_arn = role["Role"]["Arn"]

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def client(self, service: str = "s3", **kwargs):
        import boto3

        return boto3.client(
            service,
            endpoint_url=self.endpoint,
            region_name=self.REGION,
            aws_access_key_id=kwargs.pop("access_key", "AKIAIOSFODNN7EXAMPLE"),
            aws_secret_access_key=kwargs.pop("secret_key", "fake-secret"),
            **kwargs,
        )

    def sign_from_environment(self, monkeypatch) -> None:
        """Authentication on, and the AWS_* variables (set through `monkeypatch`) naming this
        server, its region and its credentials without a session token: what a reader configured
        from its environment signs its requests with."""
        self.set_auth(True)
        for name, value in [("AWS_ACCESS_KEY_ID", self.access_key),
                            ("AWS_SECRET_ACCESS_KEY", self.secret_key),
                            ("AWS_ENDPOINT_URL_S3", self.endpoint), ("AWS_REGION", self.REGION)]:
            monkeypatch.setenv(name, value)
        monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)

    def temporary_credentials(self) -> dict:
        sts = self.client("sts", access_key=self.access_key, secret_key=self.secret_key)
        return sts.assume_role(RoleArn=self.role_arn, RoleSessionName="test")["Credentials"]

    def upload_tree(self, bucket: str, local: Path, prefix: str) -> int:
        """Uploads every file under `local` to s3://bucket/prefix/...; returns the file count."""
        s3 = self.client(access_key=self.access_key, secret_key=self.secret_key)
        existing = {b["Name"] for b in s3.list_buckets().get("Buckets", [])}
        if bucket not in existing:
            s3.create_bucket(Bucket=bucket)
        n = 0
        for path in sorted(Path(local).rglob("*")):
            if path.is_file():
                key = f"{prefix}/{path.relative_to(local).as_posix()}" if prefix else \
                    path.relative_to(local).as_posix()
                # public-read: anonymous requests may read it while moto's auth is off.
                s3.put_object(Bucket=bucket, Key=key, Body=path.read_bytes(), ACL="public-read")
                n += 1
        return n

    def set_auth(self, enabled: bool) -> None:
        """Switches moto's SigV4 and IAM checking on or off for every later request."""
        req = urllib.request.Request(
            f"{self.endpoint}/moto-api/reset-auth",
            data=b"0" if enabled else b"inf",
            method="POST",
            # Not a form: moto reads the raw body.
            headers={"Content-Type": "text/plain"},
        )
        with urllib.request.urlopen(req, timeout=10) as r:
            assert r.status == 200

    def stop(self) -> None:
        stop_process(self.proc)


# ---------------------------------------------------------------------------------------------
# The fault-injecting proxy.

FAULTS = ("500", "503", "429", "reset", "stall", "slow", "truncate", "204", "301", "wrong-range",
          "short-length", "unframed")


@dataclass
class ProxiedRequest:
    method: str
    path: str
    headers: dict[str, str]
    time: float
    fault: str | None = None
    status: int | None = None


@dataclass
class FaultProxy:
    """A reverse proxy to `upstream_port` on loopback.

    faults: the faults to inject, in rotation, into the first attempt of each distinct request
    (method, path, Range); the retry of that request passes through. Empty: no faults.
    latency: seconds added before every response (the benchmark's round trip).
    broken: path suffix -> fault injected into every attempt of every request whose path ends
    with it (a permanent failure of those objects), whatever `faults` says.
    error_rate: the share of all attempts (first or retry) that get one of `error_faults`, drawn
    from a hash of (seed, method, path, Range, attempt number): deterministic for a seed.
    """

    upstream_port: int
    faults: tuple[str, ...] = ()
    latency: float = 0.0
    retry_after_seconds: int = 1
    stall_seconds: float = 30.0
    every_attempt: bool = False  # inject into every attempt, not just the first
    broken: dict[str, str] = field(default_factory=dict)
    error_rate: float = 0.0
    error_faults: tuple[str, ...] = ("503", "reset")
    seed: int = 0
    log: list[ProxiedRequest] = field(default_factory=list)

    def __post_init__(self):
        self._seen: set[tuple[str, str, str]] = set()
        self._attempts: dict[tuple[str, str, str], int] = {}
        self._next_fault = 0
        self._lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        self._ready.wait(10)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def configure(self, faults=(), latency: float | None = None,
                  broken: dict[str, str] | None = None, error_rate: float = 0.0,
                  error_faults: tuple[str, ...] = ("503", "reset"), seed: int = 0) -> None:
        with self._lock:
            self.faults = tuple(faults)
            self.broken = dict(broken or {})
            self.error_rate = error_rate
            self.error_faults = tuple(error_faults)
            self.seed = seed
            if latency is not None:
                self.latency = latency
            self._seen.clear()
            self._attempts.clear()
            self._next_fault = 0
            self.every_attempt = False
            self.log.clear()

    def requests(self) -> list[ProxiedRequest]:
        with self._lock:
            return list(self.log)

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()

    async def _shutdown(self) -> None:
        self._server.close()
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    # -- internals ------------------------------------------------------------------------------

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._server = self._loop.run_until_complete(
            asyncio.start_server(self._handle, "127.0.0.1", 0, limit=1 << 20, backlog=1024)
        )
        self.port = self._server.sockets[0].getsockname()[1]
        self._ready.set()
        self._loop.run_forever()

    def _choose_fault(self, method: str, path: str, headers: dict[str, str]) -> str | None:
        with self._lock:
            for suffix, fault in self.broken.items():
                if path.endswith(suffix):
                    return fault
            identity = (method, path, headers.get("range", ""))
            if self.error_rate > 0:
                attempt = self._attempts.get(identity, 0)
                self._attempts[identity] = attempt + 1
                digest = hashlib.sha256(
                    f"{self.seed}|{method}|{path}|{identity[2]}|{attempt}".encode()).digest()
                if int.from_bytes(digest[:8], "big") < self.error_rate * 2**64:
                    return self.error_faults[digest[8] % len(self.error_faults)]
            if not self.faults:
                return None
            if identity in self._seen and not self.every_attempt:
                return None
            self._seen.add(identity)
            fault = self.faults[self._next_fault % len(self.faults)]
            self._next_fault += 1
            return fault

    @staticmethod
    async def _read_head(reader: asyncio.StreamReader):
        line = await reader.readline()
        if not line:
            return None
        headers: list[tuple[str, str]] = []
        while True:
            h = await reader.readline()
            if h in (b"\r\n", b"\n", b""):
                break
            name, _, value = h.decode("latin-1").partition(":")
            headers.append((name.strip(), value.strip()))
        return line.decode("latin-1").rstrip("\r\n"), headers

    @staticmethod
    async def _read_body(reader, headers: list[tuple[str, str]], no_body: bool) -> bytes:
        lower = {k.lower(): v for k, v in headers}
        if no_body:
            return b""
        if lower.get("transfer-encoding", "").lower() == "chunked":
            body = bytearray()
            while True:
                size = int((await reader.readline()).split(b";")[0].strip(), 16)
                if size == 0:
                    await reader.readline()
                    return bytes(body)
                body += await reader.readexactly(size)
                await reader.readline()
        n = int(lower.get("content-length", "0"))
        return await reader.readexactly(n) if n else b""

    async def _handle(self, client_reader, client_writer) -> None:
        upstream = None
        try:
            while True:
                head = await self._read_head(client_reader)
                if head is None:
                    return
                request_line, headers = head
                method, target, _ = request_line.split(" ", 2)
                body = await self._read_body(client_reader, headers, no_body=False)
                lower = {k.lower(): v for k, v in headers}
                entry = ProxiedRequest(method, target, lower, time.monotonic())
                entry.fault = self._choose_fault(method, target, lower)
                with self._lock:
                    self.log.append(entry)
                if self.latency:
                    await asyncio.sleep(self.latency)
                if entry.fault == "500":
                    entry.status = 500
                    self._send(client_writer, 500, [("Content-Length", "6")], b"broken")
                    await client_writer.drain()
                    continue
                if entry.fault == "503":
                    entry.status = 503
                    self._send(client_writer, 503, [("Content-Length", "11")], b"unavailable")
                    await client_writer.drain()
                    continue
                if entry.fault == "429":
                    entry.status = 429
                    self._send(client_writer, 429, [("Retry-After", str(self.retry_after_seconds)),
                                                    ("Content-Length", "4")], b"slow")
                    await client_writer.drain()
                    continue
                if entry.fault == "204":
                    entry.status = 204
                    self._send(client_writer, 204, [], b"")
                    await client_writer.drain()
                    continue
                if entry.fault == "416":
                    entry.status = 416
                    self._send(client_writer, 416, [("Content-Range", "bytes */100"),
                                                    ("Content-Length", "0")], b"")
                    await client_writer.drain()
                    continue
                if entry.fault == "301":
                    entry.status = 301
                    self._send(client_writer, 301,
                               [("Location", f"http://user:hunter2@elsewhere.invalid{target}"
                                             "?X-Amz-Signature=secret"),
                                ("Content-Length", "5")], b"moved")
                    await client_writer.drain()
                    continue
                if entry.fault == "reset":
                    sock = client_writer.get_extra_info("socket")
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    client_writer.transport.abort()
                    return
                out_headers = [(k, v) for k, v in headers if k.lower() != "connection"]
                raw = (request_line + "\r\n" + "".join(f"{k}: {v}\r\n" for k, v in out_headers)
                       + "\r\n").encode("latin-1") + body
                response_head = None
                for _ in range(2):  # the upstream may have closed an idle keep-alive connection
                    if upstream is None:
                        upstream = await asyncio.open_connection("127.0.0.1", self.upstream_port)
                    up_reader, up_writer = upstream
                    try:
                        up_writer.write(raw)
                        await up_writer.drain()
                        response_head = await self._read_head(up_reader)
                    except ConnectionError:
                        response_head = None
                    if response_head is not None:
                        break
                    upstream[1].close()
                    upstream = None
                if response_head is None:
                    raise ConnectionError("the upstream server closed the connection")
                status_line, resp_headers = response_head
                status = int(status_line.split(" ")[1])
                entry.status = status
                resp_body = await self._read_body(
                    up_reader, resp_headers, no_body=method == "HEAD" or status in (204, 304)
                )
                if any(k.lower() == "connection" and v.lower() == "close" for k, v in resp_headers):
                    upstream[1].close()  # the upstream closes after this response (moto does)
                    upstream = None
                upstream_length = next(
                    (v for k, v in resp_headers if k.lower() == "content-length"), "0")
                resp_headers = [(k, v) for k, v in resp_headers
                                if k.lower() not in ("transfer-encoding", "content-length",
                                                     "connection")]
                # HEAD keeps the upstream's length (there is no body); bodies are re-framed.
                length = upstream_length if method == "HEAD" else str(len(resp_body))
                if entry.fault == "wrong-range" and status == 206:
                    # The right bytes, announced as starting one byte later.
                    resp_headers = [(k, self._shift_range(v) if k.lower() == "content-range" else v)
                                    for k, v in resp_headers]
                if entry.fault == "short-length" and status == 206 and len(resp_body) > 1:
                    # One byte short: the last byte stays on the connection, sent once the client
                    # has taken the response, so it precedes the next response there.
                    client_writer.write(self._head(status, resp_headers + [
                        ("Content-Length", str(len(resp_body) - 1))]) + resp_body[:-1])
                    await client_writer.drain()
                    await asyncio.sleep(0.05)
                    client_writer.write(resp_body[-1:])
                    await client_writer.drain()
                    continue
                if entry.fault == "unframed" and len(resp_body) > 1:
                    # No Content-Length, no chunks: the body ends when the connection closes, here
                    # halfway through.
                    client_writer.write(self._head(status, resp_headers + [("Connection", "close")])
                                        + resp_body[: len(resp_body) // 2])
                    await client_writer.drain()
                    client_writer.close()
                    return
                resp_headers.append(("Content-Length", length))
                client_writer.write(self._head(status, resp_headers))
                if entry.fault == "stall" and resp_body:
                    await client_writer.drain()
                    await asyncio.sleep(self.stall_seconds)
                    client_writer.transport.abort()
                    return
                if entry.fault == "truncate" and len(resp_body) > 1:
                    client_writer.write(resp_body[: len(resp_body) // 2])
                    await client_writer.drain()
                    client_writer.transport.abort()
                    return
                if entry.fault == "slow" and resp_body:
                    step = max(1, len(resp_body) // 8)
                    for i in range(0, len(resp_body), step):
                        client_writer.write(resp_body[i:i + step])
                        await client_writer.drain()
                        await asyncio.sleep(0.02)
                else:
                    client_writer.write(resp_body)
                await client_writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            return
        except Exception:  # a bug in the proxy must show, not pass for a network fault
            traceback.print_exc()
            raise
        finally:
            if upstream is not None:
                upstream[1].close()
            if not client_writer.transport.is_closing():
                client_writer.close()

    @staticmethod
    def _shift_range(value: str) -> str:
        """'bytes 0-9/100' -> 'bytes 1-10/100'."""
        unit, _, rest = value.partition(" ")
        span, _, total = rest.partition("/")
        first, _, last = span.partition("-")
        return f"{unit} {int(first) + 1}-{int(last) + 1}/{total}"

    @staticmethod
    def _head(status: int, headers: list[tuple[str, str]]) -> bytes:
        return (f"HTTP/1.1 {status} X\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers)
                + "\r\n").encode("latin-1")

    def _send(self, writer, status: int, headers, body: bytes) -> None:
        writer.write(self._head(status, headers) + body)

#!/usr/bin/env python3
"""Adversarial sweep: thousands of bounded runs of the Python front, the CLI and the core on
hostile input, each classified as

  ok      the run worked (and, where the sweep knows the answer, gave the right values)
  error   a clear ZarrstreamError (or, for the CLI, an exit status with an "error:" message and no
          traceback): the expected outcome for bad input
  DEFECT  a crash or signal, a hang (over --timeout), an exception that is no ZarrstreamError (or
          is InternalError), wrong values without an error, or a memory blow-up (over
          --memory-gib of address space, or resident memory growing by over --rss-gib in one run)

Runs are generated from --seed, one class after another in turn; every run is one JSON line in
--log (class, parameters, outcome, detail), and ``--replay LINE`` reruns one of them.

Each run happens in a worker process (one per --jobs) that reads cases from a pipe and answers on
another; the parent kills a worker whose case outlives --timeout, and starts a fresh one after a
crash, a hang or every --recycle cases. Workers run under RLIMIT_AS, and runs that need a fresh
interpreter (exit with a loader thread running, Ctrl-C, the CLI) start one of their own, bounded by
a timeout and the same limit.

    .venv/bin/python fuzz/adversarial_sweep.py --runs 3000 --jobs 2 --seed 1
    .venv/bin/python fuzz/adversarial_sweep.py --classes kerchunk,normalize --runs 200
    .venv/bin/python fuzz/adversarial_sweep.py --replay '{"cls": "kerchunk", "params": {...}}'
"""

from __future__ import annotations

import argparse
import base64
import collections
import json
import math
import os
import pickle
import random
import resource
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import traceback
from pathlib import Path

# ------------------------------------------------------------------------------------------------
# Outcomes.


class WrongData(Exception):
    """A run that returned values the sweep knows to be wrong."""


class Defect(Exception):
    """A run whose child process crashed, hung or printed a traceback."""


class ClearError(Exception):
    """A child process that refused its input with a clear message."""


HUGE = [2**31, 2**32, 2**53 + 1, 2**61, 2**62, 2**63 - 1, 2**63, 2**64 - 1, 2**64, 10**30]
SMALL = [0, 1, 2, 3, 4, 7, 8]
ODD_INTS = SMALL + HUGE + [-1, -2**63, -2**64]
ODD_VALUES = [None, True, False, -1, 0, 1, 0.5, -0.0, 1e308, -1e308, 2**64, "", "x", "NaN",
              "Infinity", "\u00e9", "\udcff" * 0 + "\\ud800", [], [1], {}, {"a": 1}, [[[[]]]],
              "1", "1e999", 1.5, 3e-320]
SIGNALS = {getattr(signal, n): n for n in dir(signal) if n.startswith("SIG") and "_" not in n}


def pick(rng: random.Random, pool):
    return pool[rng.randrange(len(pool))]


# ------------------------------------------------------------------------------------------------
# Fixtures each worker makes once: an ERA5-like store (synth), its stats file, a small array.


class Fixtures:
    def __init__(self, root: Path):
        self.root = root
        self._synth = None
        self._stats = None

    @property
    def synth(self) -> Path:
        if self._synth is None:
            path = self.root / "synth.zarr"
            proc = subprocess.run([str(cli()), "synth", str(path), "--preset", "era5-small",
                                   "--steps", "12", "--threads", "1", "--overwrite"],
                                  capture_output=True, text=True, timeout=300)
            if proc.returncode != 0:
                raise RuntimeError(f"the sweep's fixture: zarrstream synth failed: {proc.stderr}")
            self._synth = path
        return self._synth

    @property
    def icechunk_repo(self) -> Path:
        """A repository written by icechunk (in a child process: icechunk's runtime stays out of
        the worker), with native, inline, sharded and virtual chunks and a tag."""
        path = self.root / "icechunk"
        if not (path / "repo").exists():
            (path / "data").mkdir(parents=True, exist_ok=True)
            proc = subprocess.run([sys.executable, "-c", ICECHUNK_FIXTURE, str(path)],
                                  capture_output=True, text=True, timeout=300)
            if proc.returncode != 0:
                raise RuntimeError(f"the sweep's fixture: icechunk failed: {proc.stderr[-2000:]}")
        return path

    @property
    def stats(self) -> Path:
        if self._stats is None:
            import zarrstream

            path = self.root / "stats.json"
            zarrstream.stats(str(self.synth), vars=["2m_temperature", "temperature"], threads=1,
                             output=str(path))
            self._stats = path
        return self._stats


ICECHUNK_FIXTURE = textwrap.dedent("""
    import sys
    import numpy as np, icechunk, zarr
    from zarr.codecs import ZstdCodec
    root = sys.argv[1]
    data = root + "/data"
    open(data + "/raw.bin", "wb").write(np.arange(8, dtype="<i4").tobytes())
    config = icechunk.RepositoryConfig.default()
    prefix = "file://" + data + "/"
    config.set_virtual_chunk_container(
        icechunk.VirtualChunkContainer(prefix, icechunk.local_filesystem_store(data + "/")))
    repo = icechunk.Repository.create(icechunk.local_filesystem_storage(root + "/repo"), config)
    session = repo.writable_session("main")
    group = zarr.group(store=session.store, attributes={"t": 1})
    group.create_array("a", shape=(8, 6), chunks=(4, 3), dtype="f4", dimension_names=("time", "x"),
                       compressors=ZstdCodec(level=1))[:] = np.arange(48, dtype="f4").reshape(8, 6)
    group.create_array("s", shape=(4,), chunks=(4,), dtype="i2")[:] = 7
    group.create_array("sh", shape=(8, 8), chunks=(2, 2), shards=(4, 4), dtype="u1")[:] = 3
    group.create_array("v", shape=(8,), chunks=(4,), dtype="<i4", compressors=None)
    session.store.set_virtual_ref("v/c/0", prefix + "raw.bin", offset=0, length=16)
    session.store.set_virtual_ref("v/c/1", prefix + "raw.bin", offset=16, length=16)
    repo.create_tag("t", session.commit("first"))
""")


def cli() -> Path:
    return Path(sys.executable).parent / "zarrstream"


# ------------------------------------------------------------------------------------------------
# Hand-written Zarr metadata.


def v3_doc(shape, chunks, dtype="int32", codecs=None, fill=0, attrs=None, dims=None):
    return {
        "zarr_format": 3, "node_type": "array", "shape": list(shape), "data_type": dtype,
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": list(chunks)}},
        "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
        "fill_value": fill,
        "codecs": codecs if codecs is not None else [
            {"name": "bytes", "configuration": {"endian": "little"}}],
        "attributes": attrs or {},
        "dimension_names": list(dims) if dims else [f"d{i}" for i in range(len(shape))],
    }


def v2_doc(shape, chunks, dtype="<i4", compressor=None, fill=0):
    return {"zarr_format": 2, "shape": list(shape), "chunks": list(chunks), "dtype": dtype,
            "compressor": compressor, "fill_value": fill, "order": "C", "filters": None}


def write_json(path: Path, doc, raw: bytes | None = None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(raw if raw is not None else json.dumps(doc).encode())


def mutate_json(rng: random.Random, doc, depth=0):
    """`doc` with one random change somewhere in it (a value replaced, a key deleted or added)."""
    if isinstance(doc, dict) and doc and (depth == 0 or rng.random() < 0.7):
        key = pick(rng, sorted(doc))
        choice = rng.random()
        out = dict(doc)
        if choice < 0.2:
            del out[key]
        elif choice < 0.3:
            out[pick(rng, ["zarr_format", "shape", "extra", "must_understand", "codecs", ""])] = \
                pick(rng, ODD_VALUES)
        elif choice < 0.75 and isinstance(doc[key], (dict, list)) and doc[key]:
            out[key] = mutate_json(rng, doc[key], depth + 1)
        else:
            out[key] = pick(rng, ODD_VALUES + ODD_INTS)
        return out
    if isinstance(doc, list) and doc:
        out = list(doc)
        i = rng.randrange(len(out))
        if rng.random() < 0.5 and isinstance(out[i], (dict, list)):
            out[i] = mutate_json(rng, out[i], depth + 1)
        elif rng.random() < 0.3:
            out.append(pick(rng, ODD_VALUES + ODD_INTS))
        else:
            out[i] = pick(rng, ODD_VALUES + ODD_INTS)
        return out
    return pick(rng, ODD_VALUES + ODD_INTS)


def mangle_text(rng: random.Random, text: bytes) -> bytes:
    """Text damaged as a file can be: truncated, invalid UTF-8, nested past any stack, NUL."""
    choice = rng.randrange(7)
    if choice == 0:
        return text[: rng.randrange(len(text) + 1)]
    if choice == 1:
        i = rng.randrange(len(text) + 1)
        return text[:i] + pick(rng, [b"\xff", b"\xc3", b"\xed\xa0\x80", b"\x00"]) + text[i:]
    if choice == 2:
        n = pick(rng, [1000, 100000, 1000000])
        return b"[" * n + b"]" * n
    if choice == 3:
        n = pick(rng, [1000, 100000])
        return b'{"a":' * n + b"1" + b"}" * n
    if choice == 4:
        return b""
    if choice == 5:
        return text.replace(b"}", b"}}", 1)
    return text + b"\x00garbage"


# ------------------------------------------------------------------------------------------------
# Classes. Each has gen(rng) -> params (JSON) and run(params, work, fixtures) -> None.


def gen_hostile_shape(rng):
    rank = pick(rng, [0, 1, 1, 2, 2, 3, 65])
    pool = SMALL[1:] * 3 + HUGE + [0, -1]
    return {
        "v": pick(rng, [2, 3]), "shape": [pick(rng, pool) for _ in range(rank)],
        "chunks": [pick(rng, pool) for _ in range(rank)],
        "dtype": pick(rng, ["uint8", "int32", "float64", "complex128", "bool"]),
        "shard": rng.random() < 0.3, "inner": [pick(rng, SMALL[1:] + HUGE) for _ in range(rank)],
        "stored": [rng.randrange(0, 64) for _ in range(rng.randrange(3))],
        "op": pick(rng, ["first", "all", "slice", "loader", "info"]),
    }


def run_hostile_shape(p, work, fx):
    import zarrstream

    root = work / "a"
    rank = len(p["shape"])
    if p["v"] == 3:
        codecs = [{"name": "bytes", "configuration": {"endian": "little"}}]
        if p["shard"]:
            codecs = [{"name": "sharding_indexed", "configuration": {
                "chunk_shape": p["inner"], "codecs": codecs,
                "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
                "index_location": "end"}}]
        write_json(root / "zarr.json", v3_doc(p["shape"], p["chunks"], p["dtype"], codecs,
                                              fill=False if p["dtype"] == "bool" else 0))
        keys = ["c/" + "/".join(["0"] * rank) if rank else "c"]
    else:
        dt = {"uint8": "|u1", "int32": "<i4", "float64": "<f8", "complex128": "<c16",
              "bool": "|b1"}[p["dtype"]]
        write_json(root / ".zarray", v2_doc(p["shape"], p["chunks"], dt))
        keys = [".".join(["0"] * rank) if rank else "0"]
    for n in p["stored"]:
        (root / keys[0]).parent.mkdir(parents=True, exist_ok=True)
        (root / keys[0]).write_bytes(bytes(range(n % 256)) * 1)
    a = zarrstream.open_array(str(root))
    try:
        _hostile_op(a, p, root, rank)
    except IndexError as e:  # numpy's contract: a[0] of an empty dimension
        raise ClearError(f"IndexError: {e}") from None


def _hostile_op(a, p, root, rank):
    import zarrstream

    if p["op"] == "first":
        a[(0,) * rank] if rank else a[()]
    elif p["op"] == "all":
        a[...]
    elif p["op"] == "slice":
        a[tuple(slice(0, 2) for _ in range(rank))]
    elif p["op"] == "info":
        repr(a), a.shape, a.chunks
    else:
        zarrstream.Loader(str(root), output="dlpack", batch_size=1).__iter__().__next__()


def gen_metadata(rng):
    return {"v": pick(rng, [2, 3]), "mutations": rng.randrange(1, 4), "seed": rng.randrange(2**32),
            "mangle": rng.random() < 0.25, "where": pick(rng, ["array", "group", "attrs"]),
            "op": pick(rng, ["array", "group", "xarray", "loader"])}


def run_metadata(p, work, fx):
    import numpy as np
    import zarrstream

    rng = random.Random(p["seed"])
    root = work / "g"
    data = np.arange(24, dtype="<i4").reshape(4, 6)
    if p["v"] == 3:
        group = {"zarr_format": 3, "node_type": "group", "attributes": {}}
        array = v3_doc([4, 6], [2, 3], "int32", dims=["time", "x"],
                       attrs={"units": "K"})
        files = {"zarr.json": group, "v/zarr.json": array}
        chunk = lambda i, j: f"v/c/{i}/{j}"  # noqa: E731
    else:
        files = {".zgroup": {"zarr_format": 2}, "v/.zarray": v2_doc([4, 6], [2, 3]),
                 "v/.zattrs": {"_ARRAY_DIMENSIONS": ["time", "x"], "units": "K"}}
        chunk = lambda i, j: f"v/{i}.{j}"  # noqa: E731
    for i in range(2):
        for j in range(2):
            (root / chunk(i, j)).parent.mkdir(parents=True, exist_ok=True)
            (root / chunk(i, j)).write_bytes(data[2 * i:2 * i + 2, 3 * j:3 * j + 3].tobytes())
    target = {"array": 1, "group": 0, "attrs": 2 if p["v"] == 2 else 1}[p["where"]]
    names = list(files)
    name = names[target]
    doc = files[name]
    for _ in range(p["mutations"]):
        doc = mutate_json(rng, doc)
    raw = None
    if p["mangle"]:
        raw = mangle_text(rng, json.dumps(doc).encode())
    for n, d in files.items():
        write_json(root / n, d, raw if n == name else None)
    if p["op"] == "array":
        a = zarrstream.open_array(str(root / "v"))
        got = a[...]
        if got.shape == data.shape and got.dtype == data.dtype and doc == files[name] and \
                not np.array_equal(got, data):
            raise WrongData("values differ from the stored ones")
    elif p["op"] == "group":
        g = zarrstream.open_group(str(root))
        for n in g.array_names():
            g[n][...]
    elif p["op"] == "xarray":
        import xarray as xr

        xr.open_dataset(str(root), engine="zarrstream").load()
    else:
        next(iter(zarrstream.Loader(str(root), ["v"], output="dlpack")))


def gen_special_files(rng):
    return {"what": pick(rng, ["fifo", "dir", "devzero", "devnull", "socket", "loop", "selfmem"]),
            "at": pick(rng, ["chunk", "metadata", "stats", "reference"])}


def run_special_files(p, work, fx):
    import socket

    import numpy as np
    import zarrstream

    root = work / "a"
    zarrstream.create_array(str(root), shape=(4,), dtype="int32", chunks=(2,))
    a = zarrstream.open_array(str(root))
    a[...] = np.arange(4, dtype="int32")
    key = {"chunk": root / "c" / "0", "metadata": root / "zarr.json", "stats": work / "stats.json",
           "reference": work / "refs.json"}[p["at"]]
    key.unlink(missing_ok=True)
    if p["what"] == "fifo":
        os.mkfifo(key)
    elif p["what"] == "dir":
        key.mkdir()
    elif p["what"] == "socket":
        s = socket.socket(socket.AF_UNIX)
        s.bind(str(key))
    elif p["what"] == "loop":
        key.symlink_to(key)
    else:
        key.symlink_to({"devzero": "/dev/zero", "devnull": "/dev/null",
                        "selfmem": "/proc/self/mem"}[p["what"]])
    if p["at"] == "stats":
        next(iter(zarrstream.Loader(str(fx.synth), ["2m_temperature"], normalize=str(key),
                                    output="dlpack")))
    elif p["at"] == "reference":
        zarrstream.open_group("reference://" + str(key))
    else:
        zarrstream.open_array(str(root))[...]


# Icechunk repositories with one file corrupted: the repo info or a ref, the snapshot, a manifest,
# config.yaml, a chunk; bit flips, truncation, appended bytes, a header field, or another file's
# bytes in its place. Each must open and read, or fail with a ZarrstreamError: the flatbuffers are
# verified before use.


def gen_icechunk(rng):
    muts = [[pick(rng, ["flip", "truncate", "append", "header", "swap", "zero"]),
             rng.randrange(2**31)] for _ in range(rng.randrange(1, 4))]
    return {"file": pick(rng, ["repo", "ref", "snapshot", "manifest", "config", "chunk"]),
            "muts": muts, "ref": pick(rng, ["main", "t", None]),
            "op": pick(rng, ["group", "inspect", "loader"])}


def run_icechunk(p, work, fx):
    import zarrstream

    shutil.copytree(fx.icechunk_repo, work / "ic")
    repo = work / "ic" / "repo"
    kinds = {"repo": ["repo"], "ref": ["refs"], "snapshot": ["snapshots"],
             "manifest": ["manifests"], "config": ["config.yaml"], "chunk": ["chunks"]}
    files = sorted(f for k in kinds[p["file"]] for f in [repo / k] if f.exists()
                   for f in ([f] if f.is_file() else f.rglob("*")) if f.is_file())
    others = sorted(f for f in repo.rglob("*") if f.is_file())
    for kind, seed in p["muts"]:
        if not files:
            break
        r = random.Random(seed)
        target = pick(r, files)
        b = bytearray(target.read_bytes())
        if kind == "flip" and b:
            for _ in range(r.randrange(1, 9)):
                b[r.randrange(len(b))] ^= 1 << r.randrange(8)
        elif kind == "truncate":
            b = b[:r.randrange(len(b) + 1)]
        elif kind == "append":
            b += bytes(r.randrange(256) for _ in range(r.randrange(1, 64)))
        elif kind == "header" and len(b) > 39:
            b[pick(r, [36, 37, 38])] = pick(r, [0, 1, 2, 3, 9, 255])
        elif kind == "swap":
            b = bytearray(pick(r, others).read_bytes())
        elif kind == "zero" and b:
            start = r.randrange(len(b))
            b[start:start + r.randrange(1, 64)] = bytes(min(len(b) - start, 64))
        target.write_bytes(bytes(b))
    ref = {} if p["ref"] is None else {"ref": p["ref"]}
    if p["op"] == "group":
        group = zarrstream.open_group(str(repo), **ref)
        for name in group.array_names():
            group[name].read()
    elif p["op"] == "inspect":
        run_child([str(cli()), "inspect", str(repo)] + (["--ref", p["ref"]] if p["ref"] else []),
                  timeout=0.75 * float(os.environ.get("ZS_SWEEP_TIMEOUT", "60")))
    else:
        loader = zarrstream.Loader(str(repo), ["a"], sample={"time": 2}, output="dlpack", **ref)
        for _ in loader:
            pass


# Kerchunk reference sets over a raw file of 4 int32 chunks of a 4 x 4 array.


def gen_kerchunk(rng):
    n = rng.randrange(0, 4)
    muts = []
    for _ in range(n):
        kind = pick(rng, ["offset", "length", "url", "inline", "b64", "version", "template",
                          "gen", "ref_type", "zarray", "key"])
        muts.append([kind, rng.randrange(2**31)])
    return {"muts": muts, "v1": rng.random() < 0.5, "op": pick(rng, ["array", "group", "xarray"])}


TEMPLATE_BOMBS = [
    "{{a}}", "{{b}}", "{{ u }}{{ u }}", "{{ 2**2**2**2**2**2 }}", "{{ 1/0 }}", "{{ 1//0 }}",
    "{{ 1%0 }}", "{{ '%d' % 'x' }}", "{{ '%s%s' % 1 }}", "{{ " + "(" * 5000 + "1" + ")" * 5000 + " }}",
    "{{ " + "~" * 10000 + "1 }}", "{{ " + "-" * 100000 + "1 }}", "{{ 'a' * 10**9 }}",
    "{{ 10**10**10 }}", "{{ u(u='x') }}", "{% for i in x %}{% endfor %}", "{{", "}}",
    "{{ 'x' ~ 'y' * 999999999 }}", "{{ 9223372036854775807 + 1 }}", "{{ -9223372036854775808 // -1 }}",
    "{{ '%0999999999d' % 1 }}", "{{ '%.999999999f' % 1.5 }}", "{{ \"\\x00\" }}",
]


def run_kerchunk(p, work, fx):
    import numpy as np
    import zarrstream

    data = np.arange(16, dtype="<i4").reshape(4, 4)
    chunks = {}
    blob = b""
    for i in range(2):
        for j in range(2):
            b = data[2 * i:2 * i + 2, 2 * j:2 * j + 2].tobytes()
            chunks[f"x/{i}.{j}"] = (len(blob), len(b))
            blob += b
    (work / "data.bin").write_bytes(blob)
    zarray = v2_doc([4, 4], [2, 2])
    refs = {".zgroup": json.dumps({"zarr_format": 2}), "x/.zarray": json.dumps(zarray),
            "x/.zattrs": json.dumps({"_ARRAY_DIMENSIONS": ["a", "b"]})}
    for k, (off, ln) in chunks.items():
        refs[k] = ["{{f}}" if p["v1"] else "data.bin", off, ln]
    top = {"version": 1, "templates": {"f": "data.bin"}, "refs": refs} if p["v1"] else refs
    changed = False
    for kind, seed in p["muts"]:
        r = random.Random(seed)
        key = pick(r, sorted(chunks))
        changed = True
        if kind in ("offset", "length", "url", "template") and not (
                isinstance(refs.get(key), list) and len(refs[key]) == 3):
            refs[key] = ["data.bin", *chunks[key]]
        if kind == "offset":
            refs[key][1] = pick(r, ODD_INTS + [len(blob), len(blob) - 1, 1.5, "8", None])
        elif kind == "length":
            refs[key][2] = pick(r, ODD_INTS + [len(blob) + 1, 15, 17, 1.5, "16", None])
        elif kind == "url":
            refs[key][0] = pick(r, ["missing.bin", "/dev/zero", "/dev/urandom", "data.bin/..",
                                    "../../../../etc/passwd", "", "http://127.0.0.1:1/x",
                                    "file:///proc/self/mem", "data.bin\x00x", "s3://", "gs://b",
                                    "https://h/x?sig=1", "ftp://x/y", "reference://refs.json",
                                    "{{f}}{{f}}", 5, None, "/"])
        elif kind == "inline":
            refs[key] = pick(r, ["", "abc", "x" * 15, "x" * 17, "x" * 16, "\u00e9" * 8, 5, None,
                                 [], {}, ["data.bin", 0], ["data.bin", 0, 16, 4], [None]])
        elif kind == "b64":
            refs[key] = pick(r, ["base64:", "base64:!!!!", "base64:AAAA=", "base64:A",
                                 "base64:" + base64.b64encode(b"x" * 16).decode(),
                                 "base64:" + base64.b64encode(b"x" * 15).decode(),
                                 "base64:" + "A" * 1000001, "base64:====", "base64:\u00e9"])
        elif kind == "version":
            top = {"version": pick(r, [0, 2, -1, "1", None, 1.5]), "refs": refs}
        elif kind == "template" and isinstance(top, dict) and "templates" in top:
            top["templates"] = {"f": pick(r, TEMPLATE_BOMBS), "a": "{{b}}", "b": "{{a}}",
                                "u": "{{ u }}"}
            refs[key][0] = pick(r, ["{{f}}", "{{a}}", "{{u}}", "{{ f(f='x') }}", "{{ g }}"])
        elif kind == "gen":
            top = {"version": 1, "templates": {"f": "data.bin"}, "refs": refs,
                   "gen": [{"key": pick(r, ["x/{{i}}.0", "{{i}}", "../{{i}}", "x/{{ 1/0 }}"]),
                            "url": pick(r, ["{{f}}", "data.bin", "{{ i ** 100 }}"]),
                            "offset": pick(r, ["{{ i * 16 }}", "{{ -i }}", "{{ i ** 64 }}", "x"]),
                            "length": pick(r, ["16", "{{ 2 ** 62 }}", "-1", "0"]),
                            "dimensions": {"i": pick(r, [
                                {"start": 0, "stop": 2, "step": 1},
                                {"start": 0, "stop": 2**40, "step": 1},
                                {"start": 0, "stop": 10, "step": 0},
                                {"start": 10, "stop": 0, "step": -1},
                                {"start": "a"}, list(range(3)), [2**70], [], None,
                                {"start": 0, "stop": 2**63 - 1, "step": 2**62}])}}]}
        elif kind == "ref_type":
            refs[key] = pick(r, [[], [1, 2, 3], {"a": 1}, True, 1.5, [["data.bin"]]])
        elif kind == "zarray":
            refs["x/.zarray"] = pick(r, [json.dumps(mutate_json(r, zarray)), "{", "",
                                         {"zarr_format": 2}, json.dumps(zarray) + "x"])
        else:
            refs[pick(r, ["../escape", "/abs", "x/../../y", "x/\x00", "", ".", "x//0.0",
                          "x/0.0/.zarray"])] = ["data.bin", 0, 16]
    (work / "refs.json").write_text(json.dumps(top))
    url = "reference://" + str(work / "refs.json")
    if p["op"] == "array":
        got = zarrstream.open_array(url + "#x")[...]
        if not changed and not np.array_equal(got, data):
            raise WrongData("reference set read wrong values")
    elif p["op"] == "group":
        g = zarrstream.open_group(url)
        for n in g.array_names():
            g[n][...]
    else:
        import xarray as xr

        xr.open_dataset(url, engine="zarrstream").load()


# CF attributes.

CF_VALUES = [1.5, 0.0, -1.0, 1e308, 1e-320, float("inf"), float("nan"), 2**64, -2**63, "2", "x",
             None, True, [], [1.5], [1, 2], {}, {"a": 1}, "NaN", 0, 7, 10**30]
UNITS = ["days since 99999-99-99", "hours since 1900-01-01", "hours since 1900-13-45",
         "seconds since -4713-01-01", "days since 1970-01-01 25:61:61", "since", "days since",
         "fortnights since 1970-01-01", "hours since 1970-01-01T00:00:00+99:99",
         "nanoseconds since 1970-01-01", "days since 1970-01-01 00:00:00.123456789123",
         "days since 2262-04-12", "days since 1677-09-21", "K", "", 5, None, ["days"],
         "days since 1970-01-01\x00", "months since 2000-01-01", "years since 0000-01-01",
         "hours since 1900-01-01 00:00:00 UTC", "days since 1970-1-1"]
CALENDARS = ["standard", "gregorian", "proleptic_gregorian", "noleap", "360_day", "julian",
             "none", "bogus", 5, None, ""]


def gen_cf_attrs(rng):
    attrs = {}
    for name in ["scale_factor", "add_offset", "_FillValue", "missing_value", "valid_min",
                 "valid_range"]:
        if rng.random() < 0.4:
            attrs[name] = pick(rng, CF_VALUES)
    tattrs = {"units": pick(rng, UNITS)}
    if rng.random() < 0.5:
        tattrs["calendar"] = pick(rng, CALENDARS)
    return {"attrs": attrs, "tattrs": tattrs, "dtype": pick(rng, ["int16", "float32", "uint8"]),
            "time": pick(rng, [[0, 1, 2, 3], [0, 2**62, -2**62, 5], [0, 1, 1, 0]]),
            "time_dtype": pick(rng, ["int64", "float64"]),
            "op": pick(rng, ["array", "loader", "xarray", "stats"])}


def run_cf_attrs(p, work, fx):
    import numpy as np
    import zarrstream

    root = work / "cf"
    g = zarrstream.create_group(str(root))
    t = g.create_array("time", shape=(4,), dtype=p["time_dtype"], chunks=(4,),
                       dims=["time"], attrs=_json_safe(p["tattrs"]))
    t[...] = np.array(p["time"], dtype=p["time_dtype"])
    x = g.create_array("x", shape=(3,), dtype="float32", chunks=(3,), dims=["x"])
    x[...] = np.arange(3, dtype="float32")
    v = g.create_array("v", shape=(4, 3), dtype=p["dtype"], chunks=(2, 3),
                       dims=["time", "x"], attrs=_json_safe(p["attrs"]))
    raw = (np.arange(12).reshape(4, 3) % 7).astype(p["dtype"])
    v[...] = raw
    if p["op"] == "array":
        got = zarrstream.open_array(str(root / "v"), decode_cf=True)[...]
        a = p["attrs"]
        plain = all(isinstance(a.get(k, 0), (int, float)) and not isinstance(a.get(k, 0), bool)
                    and abs(a.get(k, 0)) < 1e30 for k in ("scale_factor", "add_offset"))
        if plain and "_FillValue" not in a and "missing_value" not in a and \
                not any(k.startswith("valid") for k in a):
            want = raw * float(a.get("scale_factor", 1)) + float(a.get("add_offset", 0))
            if got.shape != want.shape or not np.allclose(got.astype("float64"), want, rtol=1e-5,
                                                          equal_nan=True):
                raise WrongData(f"CF decode gave {got.ravel()[:4]}, expected {want.ravel()[:4]}")
    elif p["op"] == "loader":
        loader = zarrstream.Loader(str(root), ["v"], output="dlpack", frequency=None,
                                   select={"time": slice("1900-01-01", None)}
                                   if "since" in str(p["tattrs"]["units"]) else None)
        for _ in loader:
            pass
    elif p["op"] == "stats":
        zarrstream.stats(str(root), vars=["v"], threads=1)
    else:
        import xarray as xr

        xr.open_dataset(str(root), engine="zarrstream").load()


def _json_safe(doc):
    """Attributes as JSON text can hold them (NaN and infinities as the strings zarr writes)."""
    if isinstance(doc, float) and not math.isfinite(doc):
        return "NaN" if math.isnan(doc) else ("Infinity" if doc > 0 else "-Infinity")
    if isinstance(doc, dict):
        return {k: _json_safe(v) for k, v in doc.items()}
    if isinstance(doc, list):
        return [_json_safe(v) for v in doc]
    return doc


# Loader options: forcings, static fields, frequency, selections, the decode share.

FORCINGS = ["cos_latitude", "sin_latitude", "cos_longitude", "sin_longitude", "cos_julian_day",
            "sin_julian_day", "cos_local_time", "sin_local_time", "cos_solar_zenith_angle",
            "insolation", "land_sea_mask", "geopotential_at_surface", "toa_incident_solar_radiation",
            "cos_", "cos_latitude@500", "latitude", "time", "", "insolation\x00", "2m_temperature"]
FREQUENCIES = [None, "6h", "12h", "1d", "0h", "-6h", "7h", "6", "h", "6H", "1e9h", "nan h", "6h ",
               "360m", "21600s", "1w", "99999999999999999999h", "0.5h", "6hh", "", "\u0666h",
               ["td", 0], ["td", 21600], ["td", 0.5], ["td", -21600], ["td", 10**9 * 86400],
               ["td", 3600]]
SHARES = [0.0, 0.5, 1.0, -0.0, 1e-300, 1.0000001, -1e-300, "nan", "inf", "-inf", "0.5", "auto",
          "AUTO", "", " 0.5", "1e-400", "0x1p-1", "1", "0", None, "nanx", 2, True]


def gen_loader_options(rng):
    o = {}
    variables = rng.sample(["2m_temperature", "temperature@500", "temperature", "land_sea_mask",
                            "geopotential@1000,850", "nope", "temperature@9999",
                            "temperature@", "@500", "time", "level"], rng.randrange(0, 3))
    o["variables"] = variables
    if rng.random() < 0.6:
        o["forcings"] = rng.sample(FORCINGS, rng.randrange(1, 4))
    if rng.random() < 0.4:
        o["frequency"] = pick(rng, FREQUENCIES)
    if rng.random() < 0.4:
        o["sample"] = {pick(rng, ["time", "level", "latitude", "x", ""]): pick(rng, ODD_INTS)}
    if rng.random() < 0.3:
        o["stride"] = {pick(rng, ["time", "latitude"]): pick(rng, ODD_INTS)}
    if rng.random() < 0.3:
        o["target_offset"] = pick(rng, [{"time": 1}, {"time": [1, 2]}, {"time": []},
                                        {"time": 2**63}, {"time": 1, "level": 1}, {"level": 1},
                                        {"time": [-1]}, {"time": "1"}])
    if rng.random() < 0.4:
        o["select"] = pick(rng, [
            {"time": ["1979-01-01", "1979-01-02"]}, {"time": ["slice", "1979-01-01", None, "1d"]},
            {"time": ["slice", None, None, None]}, {"level": [500, 850]}, {"level": [[]]},
            {"time": ["slice", "1979-99-99", None, None]}, {"latitude": ["slice", 60, 30, None]},
            {"time": ["slice", "2100-01-01", None, None]}, {"nope": [1]}, {"time": ["\xff"]},
            {"time": [[1.5]]}, {"level": [True]}, {"time": ["1979-01-01T00:00:00.5"]}])
    if rng.random() < 0.3:
        o["cpu_decode_share"] = pick(rng, SHARES)
    if rng.random() < 0.3:
        o["nan"] = pick(rng, ["keep", 0.0, "nan", "fill", float("inf"), None, "0", [1]])
    if rng.random() < 0.3:
        o["shuffle"] = pick(rng, ["exact", "block", "none", True, False, "", "EXACT", 3])
    if rng.random() < 0.3:
        o["batch_size"] = pick(rng, [1, 2, 3, 0, 2**32, 2**61, -1, 2.5, "2"])
    for k in ["prefetch", "num_threads", "block_chunks", "block_window", "cache_bytes",
              "gpu_wave_bytes", "seed"]:
        if rng.random() < 0.1:
            o[k] = pick(rng, ODD_INTS + [2.5, "3", None])
    if rng.random() < 0.15:
        o["on_error"] = pick(rng, ["raise", "skip", "ignore", None])
    if rng.random() < 0.15:
        o["dtype"] = pick(rng, ["float32", "float16", "bfloat16", "float64", "int8", "complex64",
                                "", None])
    if rng.random() < 0.1:
        o["device"] = pick(rng, ["cpu", "cuda", "cuda:0", "cuda:-1", "cuda:99", "tpu", "", "cpu:0"])
    if rng.random() < 0.1:
        o["rank"], o["world_size"] = pick(rng, [(0, 1), (1, 1), (3, 2), (0, 0), (0, 2**32), (-1, 2)])
    return {"options": o, "batches": rng.randrange(0, 4), "state": rng.random() < 0.3}


def _decode_options(o):
    import datetime

    o = dict(o)
    if isinstance(o.get("frequency"), list):
        o["frequency"] = datetime.timedelta(seconds=min(o["frequency"][1], 86400 * 999999999))
    if isinstance(o.get("cpu_decode_share"), str) and o["cpu_decode_share"] in ("nan", "inf", "-inf"):
        o["cpu_decode_share"] = float(o["cpu_decode_share"])
    if "select" in o:
        sel = {}
        for k, v in o["select"].items():
            if v and v[0] == "slice":
                sel[k] = slice(v[1], v[2], v[3])
            else:
                sel[k] = [x.encode("latin-1") if isinstance(x, str) and x.startswith("\xff") else x
                          for x in v]
                sel[k] = [bytes([255]) if x == [255] else x for x in sel[k]]
        o["select"] = sel
    return o


def run_loader_options(p, work, fx):
    import zarrstream

    o = _decode_options(p["options"])
    o.setdefault("output", "dlpack")
    loader = zarrstream.Loader(str(fx.synth), **o)
    shape = tuple(loader.input_shape)
    it = iter(loader)
    for _ in range(p["batches"]):
        try:
            batch = next(it)
        except StopIteration:
            break
        got = tuple(batch["input"].shape) if hasattr(batch["input"], "shape") else None
        if got is not None and (got[1:] != shape[1:] or got[0] > shape[0]):
            raise WrongData(f"batch input shape {got}, loader.input_shape {shape}")
    if p["state"]:
        loader.load_state_dict(loader.state_dict())
        next(iter(loader), None)


def gen_normalize(rng):
    return {"muts": rng.randrange(0, 3), "seed": rng.randrange(2**32), "mangle": rng.random() < 0.4,
            "vars": pick(rng, [["2m_temperature"], ["temperature@500", "2m_temperature"],
                               ["temperature"]])}


def run_normalize(p, work, fx):
    import zarrstream

    rng = random.Random(p["seed"])
    doc = json.loads(fx.stats.read_text())
    for _ in range(p["muts"]):
        if rng.random() < 0.5 and doc.get("channels"):
            ch = doc["channels"]
            i = rng.randrange(len(ch))
            ch[i] = dict(ch[i])
            field = pick(rng, ["mean", "std", "min", "max", "count", "name", "level", "variable",
                               "nan_count"])
            ch[i][field] = pick(rng, ODD_VALUES + [0.0, -1.0, 1e-320, 1e308] + ODD_INTS)
        else:
            doc = mutate_json(rng, doc)
    text = json.dumps(doc, allow_nan=True).encode()
    if p["mangle"]:
        text = mangle_text(rng, text)
    path = work / "stats.json"
    path.write_bytes(text)
    loader = zarrstream.Loader(str(fx.synth), p["vars"], normalize=str(path), output="dlpack")
    next(iter(loader))


# Rechunk's command line with hostile selections and chunks.

RECHUNK_SELECT = ["time=1979-01-01:1979-01-02", "time=:", "time=1979-99-99:", "time=a:b:c",
                  "level=500", "level=500:850", "level=850:500", "latitude=60:30", "time=",
                  "=1", "time", "nope=1", "time=1979-01-01,time=1979-01-02", "level=1e999",
                  "level=nan", "time=2100-01-01:", "level=\xff", "time=1979-01-01T00:00:00.5",
                  "level=" + "9" * 400, "latitude=-inf:inf"]
RECHUNK_CHUNKS = ["time=1", "time=0", "time=-1", "time=all", "time=" + str(2**64),
                  "time=" + str(2**63), "time=1,time=2", "nope=1", "time=", "=1", "time=1.5",
                  "time=1,level=1,latitude=16,longitude=16", "time=all,level=all", "time=0x10",
                  "latitude=" + str(2**32), "time= 1"]


def gen_rechunk(rng):
    args = []
    if rng.random() < 0.8:
        args += ["--select", pick(rng, RECHUNK_SELECT)]
    if rng.random() < 0.8:
        args += ["--chunks", pick(rng, RECHUNK_CHUNKS)]
    if rng.random() < 0.3:
        args += ["--shard", pick(rng, RECHUNK_CHUNKS)]
    if rng.random() < 0.3:
        args += ["--vars", pick(rng, ["2m_temperature", "temperature@500", "nope", "", ",",
                                      "temperature@", "land_sea_mask"])]
    if rng.random() < 0.2:
        args += ["--stack", pick(rng, ["inputs", "", "time", "../x", "a/b"])]
    if rng.random() < 0.2:
        args += ["--codec", pick(rng, ["zstd:99", "gzip:-1", "blosc:lz4:5:shuffle", "blosc:x",
                                       "lz4", "none", "zstd:", "bogus"])]
    if rng.random() < 0.2:
        args += ["--memory", pick(rng, ["0", "-1", "1e-9", "nan", "1e30", "0.001"])]
    args += ["--threads", "1"]
    return {"args": args, "api": rng.random() < 0.3}


def run_rechunk(p, work, fx):
    if p["api"]:
        import zarrstream

        kw = {}
        a = p["args"]
        for flag, name in [("--select", "select"), ("--chunks", "chunks"), ("--shard", "shard"),
                           ("--vars", "vars"), ("--stack", "stack"), ("--codec", "codec"),
                           ("--memory", "memory")]:
            if flag in a:
                v = a[a.index(flag) + 1]
                kw[name] = float(v) if name == "memory" else v
        zarrstream.rechunk(str(fx.synth), str(work / "out.zarr"), threads=1, **kw)
        return
    # Within the worker's --timeout, so that the child is ended here rather than left running.
    run_child([str(cli()), "rechunk", str(fx.synth), str(work / "out.zarr")] + p["args"],
              timeout=0.75 * float(os.environ.get("ZS_SWEEP_TIMEOUT", "60")))


def run_child(args, timeout, env=None, stdin=None):
    proc = subprocess.run(args, capture_output=True, timeout=timeout, env=env, input=stdin,
                          preexec_fn=_limit_child)
    err = proc.stderr.decode("utf-8", "replace")
    if proc.returncode < 0:
        raise Defect(f"killed by {SIGNALS.get(-proc.returncode, -proc.returncode)}: {err[-400:]}")
    if "Traceback" in err:
        if _zarrstream_traceback(err):
            raise ClearError(err.strip().splitlines()[-1])
        raise Defect(f"Traceback: {err[-600:]}")
    for marker in ("terminate called", "Fatal Python error", "Segmentation fault",
                   "AddressSanitizer", "core dumped"):
        if marker in err:
            raise Defect(f"{marker}: {err[-600:]}")
    if proc.returncode != 0:
        if not err.strip():
            raise Defect(f"exit {proc.returncode} without a message")
        raise ClearError(err.strip().splitlines()[-1][:300])
    return proc


def _zarrstream_traceback(err: str) -> bool:
    last = err.strip().splitlines()[-1] if err.strip() else ""
    return last.startswith("zarrstream.errors.") and "InternalError" not in last


# Pickled arrays, groups and loaders whose state was tampered with.


def gen_pickle(rng):
    return {"what": pick(rng, ["array", "group", "loader"]), "field": rng.randrange(8),
            "value": rng.randrange(len(ODD_VALUES) + 6)}


def run_pickle(p, work, fx):
    import zarrstream

    url = str(fx.synth)
    if p["what"] == "array":
        obj = zarrstream.open_array(url + "/2m_temperature")
    elif p["what"] == "group":
        obj = zarrstream.open_group(url)
    else:
        obj = zarrstream.Loader(url, ["2m_temperature"], output="dlpack", batch_size=2)
    fn, args = obj.__reduce__()
    args = list(args)
    extra = ["/nonexistent", url + "\x00", "x" * 100000, "reference://" + url, url + "/..",
             {"bogus": 1}]
    value = (ODD_VALUES + extra)[p["value"]]
    field = p["field"] % (len(args) + 2)
    if field < len(args) and not isinstance(args[field], dict):
        args[field] = value
    else:
        d = next((a for a in args if isinstance(a, dict)), None)
        if d is not None:
            d = dict(d)
            keys = sorted(d) + ["bogus_option"]
            d[keys[(p["field"] * 7 + p["value"]) % len(keys)]] = value
            args[args.index(next(a for a in args if isinstance(a, dict)))] = d
        if p["what"] == "loader" and len(args) > 1 and field % 2:
            state = dict(args[1]) if isinstance(args[1], dict) else {}
            keys = sorted(state) + ["bogus"]
            state[keys[p["value"] % len(keys)]] = value
            args[1] = state
    blob = pickle.dumps((fn, tuple(args)))
    fn2, args2 = pickle.loads(blob)
    obj2 = fn2(*args2)
    if p["what"] == "array":
        obj2[0]
    elif p["what"] == "loader":
        next(iter(obj2), None)


# Dask/Ray job parts with bad fields, run as a worker runs them.


def gen_job_parts(rng):
    return {"job": pick(rng, ["stats", "rechunk", "finalise_stats", "finalise_rechunk"]),
            "field": pick(rng, ["index", "count", "threads", "vars", "select", "dataset",
                                "decode_cf", "values", "job", "options", "none"]),
            "value": rng.randrange(len(ODD_VALUES) + len(ODD_INTS))}


def run_job_parts(p, work, fx):
    import dataclasses

    import zarrstream
    from zarrstream import dask as zdask

    value = (ODD_VALUES + ODD_INTS)[p["value"]]
    url = str(fx.synth)
    if p["job"] in ("stats", "finalise_stats"):
        plan = zarrstream.plan_stats(url, parts=2, vars=["2m_temperature"], threads=1)
        part = plan.parts[0]
        if p["job"] == "stats":
            fields = {f.name for f in dataclasses.fields(part)}
            if p["field"] in fields:
                part = dataclasses.replace(part, **{p["field"]: value})
            zdask._run_part(part, None)
        else:
            results = [q.run() for q in plan.parts]
            r = results[0]
            if p["field"] in ("values", "job", "index", "count"):
                results[0] = dataclasses.replace(r, **{p["field"]: value})
            plan.finalise(results)
    else:
        plan = zarrstream.plan_rechunk(url, str(work / "out.zarr"), parts=2,
                                       vars=["2m_temperature"], threads=1)
        part = plan.parts[0]
        fields = {f.name for f in dataclasses.fields(part)}
        if p["field"] in fields:
            part = dataclasses.replace(part, **{p["field"]: value})
        elif p["field"] == "options":
            o = part.options
            name = sorted(f.name for f in dataclasses.fields(o))[p["value"] % 9]
            part = dataclasses.replace(part, options=dataclasses.replace(o, **{name: value}))
        zdask._run_part(part, None)
        if p["job"] == "finalise_rechunk":
            plan.finalise()


# Indexing an array with hostile keys.

INDEX_KEYS = ["True", "False", "None", "...", "(..., ...)", "2**63", "-2**70", "1.5", "'x'",
              "[0, 0]", "np.array([True, False, True])", "np.zeros((12, 32, 64), bool)",
              "np.array([], dtype=int)", "slice(None, None, -1)", "slice(0, 2**64)",
              "slice(None, None, 0)", "(0,) * 65", "np.int64(-1)", "np.uint64(2**64 - 1)",
              "[[0, 1], [1, 0]]", "np.array(0)", "(0, 0, 0, 0)", "slice(2**63, None)",
              "np.array([2**62])", "[True] * 12", "b'0'", "complex(1, 0)", "np.float64('nan')",
              "(slice(None), None)", "{0: 1}", "range(3)", "slice('a', None)"]


def gen_index(rng):
    return {"key": pick(rng, INDEX_KEYS), "write": rng.random() < 0.2}


def run_index(p, work, fx):
    import numpy as np
    import zarrstream

    a = zarrstream.open_array(str(fx.synth / "2m_temperature"))
    key = eval(p["key"], {"np": np})  # noqa: S307 - the sweep's own table
    try:
        _index(a, key, p, work)
    except IndexError as e:  # numpy's contract for a key that indexes nothing: a clear refusal
        raise ClearError(f"IndexError: {e}") from None
    except (ValueError, TypeError) as e:
        # numpy's own refusals of a[::0] and a['a':]
        if not any(w in str(e) for w in ("slice step cannot be zero", "slice indices must be")):
            raise
        raise ClearError(f"{type(e).__name__}: {e}") from None


def _index(a, key, p, work):
    import numpy as np
    import zarrstream

    if p["write"]:
        root = work / "w"
        zarrstream.create_array(str(root), shape=(12, 32, 64), dtype="float32", chunks=(1, 32, 64))
        b = zarrstream.open_array(str(root))
        b[key] = 1.0
        return
    got = a[key]
    want = np.asarray(a[...])[key] if not isinstance(key, (float, str, bytes, dict)) else None
    if want is not None and (got.shape != want.shape or not np.array_equal(got, want,
                                                                          equal_nan=True)):
        raise WrongData(f"a[{p['key']}] has shape {got.shape}, numpy gives {want.shape}")


# Interpreter exit with loader threads running, and Ctrl-C during iteration.

EXIT_SCRIPT = textwrap.dedent("""
    import os, signal, sys, threading, time
    import zarrstream
    def make():
        return zarrstream.Loader({url!r}, {variables!r}, output="dlpack", batch_size={batch},
                                 num_threads={threads}, prefetch={prefetch},
                                 cpu_decode_share={share!r}, shuffle={shuffle!r})
    loader = make()
    def run():
        while True:
            for _ in (make() if {construct} else loader):
                pass
    for _ in range({nthreads}):
        threading.Thread(target=run, daemon=True).start()
    if {interrupt}:
        threading.Timer({delay}, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
        try:
            while True:
                for _ in loader:
                    pass
        except KeyboardInterrupt:
            print("interrupted")
    time.sleep({delay})
    if {drop}:
        del loader
    {ending}
""")


def gen_exit(rng):
    return {"variables": pick(rng, [["2m_temperature"], ["temperature", "2m_temperature"]]),
            "batch": pick(rng, [1, 2, 4]), "threads": pick(rng, [0, 1, 2]),
            "prefetch": pick(rng, [0, 1, 2, 8]), "share": pick(rng, [0.0, 0.5, 1.0, "auto"]),
            "shuffle": pick(rng, ["exact", "block", "none"]), "nthreads": pick(rng, [1, 1, 2]),
            "interrupt": rng.random() < 0.3, "delay": round(rng.random() * 0.3, 3),
            "construct": rng.random() < 0.3,
            "drop": rng.random() < 0.3,
            "ending": pick(rng, ["pass", "sys.exit(0)", "raise SystemExit(3)",
                                 "raise RuntimeError('end')", "os._exit(0)"])}


def run_exit(p, work, fx):
    code = EXIT_SCRIPT.format(url=str(fx.synth), **p)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True,
                          timeout=0.75 * float(os.environ.get("ZS_SWEEP_TIMEOUT", "60")),
                          preexec_fn=_limit_child)
    err = proc.stderr.decode("utf-8", "replace")
    expected = {"pass": 0, "sys.exit(0)": 0, "raise SystemExit(3)": 3,
                "raise RuntimeError('end')": 1, "os._exit(0)": 0}[p["ending"]]
    if p["interrupt"] and proc.returncode == -signal.SIGINT and "KeyboardInterrupt" in err:
        return  # Python ends by SIGINT on a KeyboardInterrupt nobody caught (here: before the try)
    if proc.returncode < 0:
        raise Defect(f"killed by {SIGNALS.get(-proc.returncode, -proc.returncode)}: {err[-400:]}")
    if "terminate called" in err or "Fatal Python error" in err:
        raise Defect(err[-600:])
    if proc.returncode != expected:
        raise Defect(f"exit {proc.returncode}, expected {expected}: {err[-600:]}")


# HTTP servers that misbehave (the transport's framing, status and retry checks).


def gen_http(rng):
    return {"fault": pick(rng, ["204", "301", "302", "range", "short", "truncated", "503",
                                "503-some", "slow", "garbage", "close", "huge-length", "ok",
                                "chunked-bad", "404", "416", "range-wrong-total"]),
            "rate": pick(rng, [0.2, 0.5, 1.0]), "seed": rng.randrange(2**31),
            "op": pick(rng, ["array", "loader"])}


def run_http(p, work, fx):
    import http.server
    import socketserver

    import numpy as np
    import zarrstream

    root = work / "h"
    zarrstream.create_array(str(root), shape=(8, 64), dtype="float32", chunks=(1, 64))
    a = zarrstream.open_array(str(root))
    data = np.arange(8 * 64, dtype="float32").reshape(8, 64)
    a[...] = data
    rng = random.Random(p["seed"])
    lock = threading.Lock()

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def do_HEAD(self):
            self.do_GET(head=True)

        def do_GET(self, head=False):
            path = root / self.path.lstrip("/").split("?")[0]
            with lock:
                faulty = rng.random() < p["rate"]
            body = path.read_bytes() if path.is_file() else None
            f = p["fault"] if faulty and body is not None else "ok"
            if body is None or f == "404":
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            start, end = 0, len(body) - 1
            rng_header = self.headers.get("Range")
            if rng_header and rng_header.startswith("bytes="):
                lo, _, hi = rng_header[6:].partition("-")
                if lo == "":
                    start = max(0, len(body) - int(hi))
                else:
                    start = int(lo)
                    end = min(int(hi), len(body) - 1) if hi else end
            part = body[start:end + 1]
            if f in ("204", "301", "302", "503", "503-some", "416"):
                code = int(f[:3])
                if f == "503-some" and rng.random() < 0.5:
                    code = 200
                if code != 200:
                    self.send_response(code)
                    if code in (301, 302):
                        self.send_header("Location", self.path)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
            if f == "slow":
                time.sleep(0.2)
            if f == "close":
                self.close_connection = True
                return
            if f == "garbage":
                self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Length: zz\r\n\r\n")
                self.close_connection = True
                return
            self.send_response(206 if rng_header else 200)
            length = len(part)
            if f == "short":
                length = max(0, len(part) - 3)
            elif f == "huge-length":
                length = 2**62
            if rng_header:
                total = len(body) + (5 if f == "range-wrong-total" else 0)
                s = start + (1 if f == "range" else 0)
                self.send_header("Content-Range", f"bytes {s}-{s + len(part) - 1}/{total}")
            if f == "chunked-bad":
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                self.wfile.write(b"zz\r\n" + part)
                self.close_connection = True
                return
            self.send_header("Content-Length", str(length))
            self.end_headers()
            if head:
                return
            if f == "truncated":
                self.wfile.write(part[: len(part) // 2])
                self.close_connection = True
                return
            self.wfile.write(part[:length])

    class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
        daemon_threads = True

    server = Server(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        got = zarrstream.open_array(url)[...]
        # A chunk answering 404 is a missing chunk, read as the fill value (the Zarr spec).
        if p["fault"] != "404" and not np.array_equal(got, data):
            raise WrongData(f"HTTP read with fault {p['fault']} returned other values")
    finally:
        server.shutdown()
        server.server_close()


CLASSES = {
    "hostile_shape": (gen_hostile_shape, run_hostile_shape),
    "metadata": (gen_metadata, run_metadata),
    "special_files": (gen_special_files, run_special_files),
    "kerchunk": (gen_kerchunk, run_kerchunk),
    "icechunk": (gen_icechunk, run_icechunk),
    "cf_attrs": (gen_cf_attrs, run_cf_attrs),
    "loader_options": (gen_loader_options, run_loader_options),
    "normalize": (gen_normalize, run_normalize),
    "rechunk": (gen_rechunk, run_rechunk),
    "pickle": (gen_pickle, run_pickle),
    "job_parts": (gen_job_parts, run_job_parts),
    "index": (gen_index, run_index),
    "http": (gen_http, run_http),
    "exit": (gen_exit, run_exit),
}

# ------------------------------------------------------------------------------------------------
# The worker: runs cases from a pipe, answers on another.

LIMIT_BYTES = 4 << 30


def _limit_child():
    resource.setrlimit(resource.RLIMIT_AS, (LIMIT_BYTES, LIMIT_BYTES))
    os.setsid()


def classify(exc: BaseException | None) -> tuple[str, str]:
    if exc is None:
        return "ok", ""
    text = f"{type(exc).__name__}: {str(exc)[:500]}"
    if isinstance(exc, (WrongData, Defect)):
        return "DEFECT", text
    if isinstance(exc, ClearError):
        return "error", text
    if isinstance(exc, subprocess.TimeoutExpired):
        return "DEFECT", f"hang: child ran past {exc.timeout} s"
    try:
        import zarrstream
    except ImportError:
        return "DEFECT", text
    if isinstance(exc, zarrstream.InternalError):
        return "DEFECT", text
    if isinstance(exc, zarrstream.ZarrstreamError):
        return "error", text
    # Where the exception came from: the innermost frame of the traceback.
    tb = traceback.extract_tb(exc.__traceback__)
    where = f"{Path(tb[-1].filename).name}:{tb[-1].lineno}" if tb else "?"
    return "DEFECT", f"{text} [{where}]"


def worker(result_fd: int, root: str) -> None:
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    # A request retries for 60 s by default: shorter here, so that a run past --timeout is a hang
    # and not a retry budget being spent.
    os.environ.setdefault("ZARRSTREAM_HTTP_RETRY_BUDGET_MS", "10000")
    os.environ.setdefault("ZARRSTREAM_HTTP_MAX_BACKOFF_MS", "500")
    os.environ.setdefault("ZARRSTREAM_HTTP_STALL_TIMEOUT_S", "5")
    fx = Fixtures(Path(root))
    out = os.fdopen(result_fd, "w", buffering=1)
    for line in sys.stdin:
        case = json.loads(line)
        work = Path(tempfile.mkdtemp(dir=root, prefix="case-"))
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        try:
            _, run = CLASSES[case["cls"]]
            try:
                run(case["params"], work, fx)
                outcome = classify(None)
            except BaseException as e:  # noqa: BLE001 - classifying is the point
                if isinstance(e, KeyboardInterrupt):
                    raise
                outcome = classify(e)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        grown = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024
        if grown > RSS_LIMIT and outcome[0] != "DEFECT":
            outcome = ("DEFECT", f"memory: resident size grew by {grown >> 20} MiB")
        out.write(json.dumps({"outcome": outcome[0], "detail": outcome[1]}) + "\n")


RSS_LIMIT = 1536 << 20


class WorkerSlot:
    """A worker process the parent feeds one case at a time, restarted when it dies or hangs."""

    def __init__(self, root: Path, recycle: int):
        self.root = root
        self.recycle = recycle
        self.proc = None
        self.done = 0

    def start(self):
        r, w = os.pipe()
        self.errlog = open(self.root / f"worker-{os.getpid()}-{time.monotonic_ns()}.err", "w+b")
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--worker", str(w), str(self.root)], stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL, stderr=self.errlog, pass_fds=(w,), text=True,
            preexec_fn=_limit_child)
        os.close(w)
        self.results = os.fdopen(r, "r")
        self.done = 0

    def stop(self):
        if self.proc is not None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait()
            self.results.close()
            self.errlog.close()
            self.proc = None

    def run(self, case: dict, timeout: float) -> tuple[str, str]:
        if self.proc is None or self.done >= self.recycle:
            self.stop()
            self.start()
        self.proc.stdin.write(json.dumps(case) + "\n")
        self.proc.stdin.flush()
        # The first case of a worker also makes its fixtures: give it longer.
        limit = timeout + (240 if self.done == 0 else 0)
        ready, _, _ = select.select([self.results], [], [], limit)
        line = self.results.readline() if ready else ""
        self.done += 1
        if line:
            r = json.loads(line)
            return r["outcome"], r["detail"]
        if not ready:
            self.stop()
            return "DEFECT", f"hang: no answer in {limit:.0f} s"
        code = self.proc.wait()
        self.errlog.seek(0)
        err = self.errlog.read().decode("utf-8", "replace")
        self.stop()
        what = SIGNALS.get(-code, f"signal {-code}") if code < 0 else f"exit {code}"
        return "DEFECT", f"crash: worker {what}: {err[-600:]}"


def sweep(args) -> int:
    classes = args.classes.split(",") if args.classes else list(CLASSES)
    rng = random.Random(args.seed)
    cases = []
    per_class = {c: 0 for c in classes}
    quota = {c: max(1, int(args.runs * args.weights.get(c, 1) / sum(args.weights.get(x, 1)
                                                                    for x in classes)))
             for c in classes}
    while any(per_class[c] < quota[c] for c in classes):
        for c in classes:
            if per_class[c] < quota[c]:
                cases.append({"cls": c, "params": CLASSES[c][0](rng)})
                per_class[c] += 1
    root = Path(tempfile.mkdtemp(prefix="zs-sweep-"))
    counts = collections.defaultdict(collections.Counter)
    defects = collections.defaultdict(list)
    lock = threading.Lock()
    log = open(args.log, "w") if args.log else None
    queue = list(reversed(cases))
    started = time.monotonic()

    def slot_loop(i):
        slot_root = root / f"slot{i}"
        slot_root.mkdir()
        slot = WorkerSlot(slot_root, args.recycle)
        try:
            while True:
                with lock:
                    if not queue or (args.minutes and time.monotonic() - started > 60 * args.minutes):
                        return
                    case = queue.pop()
                outcome, detail = slot.run(case, args.timeout)
                with lock:
                    counts[case["cls"]][outcome] += 1
                    if outcome == "DEFECT":
                        defects[case["cls"]].append((detail, case))
                    if log:
                        log.write(json.dumps({**case, "outcome": outcome, "detail": detail}) + "\n")
                        log.flush()
                    n = sum(sum(c.values()) for c in counts.values())
                    if args.verbose or outcome == "DEFECT":
                        print(f"[{n}/{len(cases)}] {case['cls']}: {outcome} {detail[:200]}",
                              flush=True)
        finally:
            slot.stop()

    threads = [threading.Thread(target=slot_loop, args=(i,)) for i in range(args.jobs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    shutil.rmtree(root, ignore_errors=True)
    elapsed = time.monotonic() - started
    print(f"\nseed {args.seed}, {sum(sum(c.values()) for c in counts.values())} runs in "
          f"{elapsed:.0f} s, {args.jobs} workers\n")
    print("| class | runs | ok | error | DEFECT |\n| --- | ---: | ---: | ---: | ---: |")
    total = collections.Counter()
    for c in classes:
        k = counts[c]
        total.update(k)
        print(f"| {c} | {sum(k.values())} | {k['ok']} | {k['error']} | {k['DEFECT']} |")
    print(f"| all | {sum(total.values())} | {total['ok']} | {total['error']} | {total['DEFECT']} |")
    if defects:
        print("\nDEFECTs (first 3 of each class):")
        for c, items in defects.items():
            for detail, case in items[:3]:
                print(f"- {c}: {detail[:300]}\n  replay: {json.dumps(case)[:600]}")
    return 1 if defects else 0


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        worker(int(sys.argv[2]), sys.argv[3])
        return 0
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=1000, help="runs in all (split over the classes)")
    ap.add_argument("--jobs", type=int, default=2, help="worker processes")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--classes", default="", help="comma-separated; default: all of " +
                    ",".join(CLASSES))
    ap.add_argument("--timeout", type=float, default=60, help="seconds one run may take")
    ap.add_argument("--memory-gib", type=float, default=4, help="address space of each worker")
    ap.add_argument("--rss-gib", type=float, default=1.5,
                    help="resident growth in one run that counts as a memory blow-up")
    ap.add_argument("--recycle", type=int, default=100, help="cases per worker before a fresh one")
    ap.add_argument("--minutes", type=float, default=0, help="stop starting runs after this long")
    ap.add_argument("--log", default="", help="write every run as a JSON line here")
    ap.add_argument("--replay", default="", help="one case (a --log line) to run in a worker")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args()
    global LIMIT_BYTES, RSS_LIMIT
    LIMIT_BYTES = int(args.memory_gib * (1 << 30))
    RSS_LIMIT = int(args.rss_gib * (1 << 30))
    os.environ["ZS_SWEEP_LIMIT"] = str(LIMIT_BYTES)
    os.environ["ZS_SWEEP_TIMEOUT"] = str(args.timeout)
    # Subprocess runs (exit, CLI) cost a fresh interpreter each: fewer of them.
    args.weights = {"exit": 0.5, "rechunk": 0.6, "http": 0.6}
    if args.replay:
        case = json.loads(args.replay)
        root = Path(tempfile.mkdtemp(prefix="zs-replay-"))
        slot = WorkerSlot(root, 1)
        try:
            outcome, detail = slot.run({"cls": case["cls"], "params": case["params"]}, args.timeout)
        finally:
            slot.stop()
            shutil.rmtree(root, ignore_errors=True)
        print(outcome, detail)
        return 1 if outcome == "DEFECT" else 0
    return sweep(args)


if os.environ.get("ZS_SWEEP_LIMIT"):
    LIMIT_BYTES = int(os.environ["ZS_SWEEP_LIMIT"])

if __name__ == "__main__":
    sys.exit(main())

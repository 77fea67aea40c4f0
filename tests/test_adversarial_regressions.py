"""What the adversarial sweep (fuzz/adversarial_sweep.py) found, one test per class of defect:
hostile input must give a ZarrstreamError in bounded time and memory, never an abort, a hang or
another exception. Cases that could hang or abort run in a subprocess under a timeout and an
address-space limit, so a regression fails instead of stopping the suite."""

from __future__ import annotations

import dataclasses
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

import zarrstream
from conftest import CLI

ADDRESS_SPACE_LIMIT = 6 << 30
TIMEOUT = 120


def _limit_address_space():
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE_LIMIT, ADDRESS_SPACE_LIMIT))


def run_python(code: str, env: dict | None = None) -> str:
    """Runs `code` in a fresh interpreter under the limits; returns what it printed."""
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=TIMEOUT, preexec_fn=_limit_address_space,
                          env={**os.environ, **(env or {})})
    assert proc.returncode >= 0, f"killed by signal {-proc.returncode}: {proc.stderr}"
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.fixture(scope="module")
def synth(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("synth") / "era5.zarr"
    subprocess.run([str(CLI), "synth", str(path), "--preset", "era5-small", "--steps", "8",
                    "--threads", "1"], check=True, capture_output=True, timeout=TIMEOUT)
    return path


# An HTTP server announcing a Content-Length no memory holds: the transport reserved it up front,
# and the std::bad_alloc thrown inside libcurl's callback terminated the process.
@pytest.mark.parametrize("length", [2**62, 2**40])
def test_a_huge_announced_content_length_is_a_storage_error_not_an_abort(tmp_path, length):
    root = tmp_path / "a"
    a = zarrstream.create_array(str(root), shape=(4, 8), dtype="float32", chunks=(1, 8))
    a[...] = np.arange(32, dtype="float32").reshape(4, 8)
    out = run_python(f"""
        import http.server, socketserver, threading
        from pathlib import Path
        import zarrstream
        root = Path({str(root)!r})

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            def log_message(self, *args):
                pass
            def do_GET(self):
                path = root / self.path.lstrip("/")
                if not path.is_file():
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                body = path.read_bytes()
                self.send_response(200)
                self.send_header("Content-Length", str({length}))
                self.end_headers()
                self.wfile.write(body)
                self.close_connection = True

        class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
            daemon_threads = True

        server = Server(("127.0.0.1", 0), Handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        try:
            zarrstream.open_array(f"http://127.0.0.1:{{server.server_address[1]}}")[...]
            print("read")
        except zarrstream.ZarrstreamError as e:
            print(type(e).__name__, e)
    """, env={"ZARRSTREAM_HTTP_RETRY_BUDGET_MS": "5000", "ZARRSTREAM_HTTP_MAX_BACKOFF_MS": "200"})
    assert out.startswith("StorageError"), out


# The stats file was read with an ifstream: a named pipe blocked the loader's construction for
# ever, and /dev/zero grew a string until memory ran out.
@pytest.mark.parametrize("kind", ["fifo", "dev_zero", "directory"])
def test_a_stats_file_that_is_no_regular_file_is_refused(synth, tmp_path, kind):
    path = tmp_path / "stats.json"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "dev_zero":
        path.symlink_to("/dev/zero")
    else:
        path.mkdir()
    out = run_python(f"""
        import zarrstream
        try:
            zarrstream.Loader({str(synth)!r}, ["2m_temperature"], normalize={str(path)!r},
                              output="dlpack")
            print("opened")
        except zarrstream.ZarrstreamError as e:
            print(type(e).__name__, e)
    """)
    assert "not a regular file" in out, out


# Options the Python front checks itself raised a bare ValueError/TypeError/AttributeError.
@pytest.mark.parametrize("options", [
    {"nan": "fill"}, {"nan": [1]}, {"on_error": "ignore"}, {"output": "numpy"},
    {"device": "tpu"}, {"target_offset": {"time": 1, "level": 1}}, {"target_offset": 3},
    {"target_offset": {"time": None}}, {"select": {"time": slice("1979-01-01", None, "1d")}},
    {"select": {"time": (1, 2, 3)}}, {"select": "time"}, {"sample": [("time", 1)]},
    {"stride": 5}, {"cpu_decode_share": None}, {"cpu_decode_share": [0.5]},
    {"variables": [1]}, {"forcings": 5}, {"normalize": 5},
])
def test_bad_loader_options_are_config_errors(synth, options):
    with pytest.raises(zarrstream.ConfigError):
        zarrstream.Loader(str(synth), **{"variables": ["2m_temperature"], "output": "dlpack",
                                         **options})


# A pickle's state is input: altered (or from another version), it must be refused as such.
def _tampered(obj, change):
    fn, args = obj.__reduce__()
    return pickle.dumps((fn, change(list(args))))


@pytest.mark.parametrize("change", [
    lambda a: [5, a[1]],
    lambda a: [a[0], "options"],
    lambda a: [a[0], {**a[1], "bogus": 1}],
    lambda a: [a[0], {**a[1], "num_threads": "4"}],
    lambda a: [a[0], {**a[1], "num_threads": -1}],
    lambda a: [a[0], {**a[1], "missing_chunks": 1.5}],
])
@pytest.mark.parametrize("what", ["array", "group"])
def test_tampered_pickles_of_arrays_and_groups_are_refused(synth, what, change):
    obj = (zarrstream.open_array(str(synth / "2m_temperature")) if what == "array"
           else zarrstream.open_group(str(synth)))
    fn, args = pickle.loads(_tampered(obj, change))
    with pytest.raises(zarrstream.ZarrstreamError):
        fn(*args)


@pytest.mark.parametrize("change", [
    lambda a: ["arguments", a[1]],
    lambda a: [{**a[0], "bogus": 1}, a[1]],
    lambda a: [{k: v for k, v in a[0].items() if k != "url"}, a[1]],
    lambda a: [{**a[0], "nan": "x"}, a[1]],
    lambda a: [a[0], {}],
    lambda a: [a[0], "state"],
    lambda a: [a[0], {"sample_plan": {"a": float("nan")}}],
])
def test_tampered_pickles_of_loaders_are_refused(synth, change):
    loader = zarrstream.Loader(str(synth), ["2m_temperature"], output="dlpack")
    fn, args = pickle.loads(_tampered(loader, change))
    with pytest.raises(zarrstream.ZarrstreamError):
        fn(*args)


def test_open_array_num_threads_out_of_range_is_a_config_error(synth):
    for n in (-1, 2**64, "2", 1.5, True):
        with pytest.raises(zarrstream.ConfigError):
            zarrstream.open_array(str(synth / "2m_temperature"), num_threads=n)


# Parts of Dask/Ray jobs travel and can be built by hand: a bad field is an InvalidArgumentError
# naming it (it was a TypeError from the binding, or an AttributeError deep in the runner).
@pytest.mark.parametrize("field,value", [
    ("index", -1), ("index", 2), ("count", 0), ("count", 2**32), ("threads", -1),
    ("threads", "1"), ("vars", "2m_temperature"), ("vars", (1,)), ("select", True),
    ("dataset", None), ("decode_cf", "yes"),
])
def test_stats_parts_with_bad_fields_are_refused(synth, field, value):
    part = zarrstream.plan_stats(str(synth), parts=2, vars=["2m_temperature"], threads=1).parts[0]
    with pytest.raises(zarrstream.InvalidArgumentError, match=field if field not in (
            "index", "count") else "part"):
        dataclasses.replace(part, **{field: value})
    # Unpickled, no __init__ runs: run() checks again.
    object.__setattr__(part, field, value)
    with pytest.raises(zarrstream.InvalidArgumentError):
        part.run()  # what a Dask or Ray task calls


@pytest.mark.parametrize("field,value", [
    ("options", "opts"), ("source", 5), ("dest", None), ("count", 2**31), ("index", 3),
])
def test_rechunk_parts_with_bad_fields_are_refused(synth, tmp_path, field, value):
    part = zarrstream.plan_rechunk(str(synth), str(tmp_path / "out.zarr"), parts=2,
                                   vars=["2m_temperature"], threads=1).parts[0]
    object.__setattr__(part, field, value)
    with pytest.raises(zarrstream.InvalidArgumentError):
        part.run()  # what a Dask or Ray task calls


@pytest.mark.parametrize("memory", [float("nan"), float("inf"), -1, 1e30, "2"])
def test_rechunk_memory_that_is_no_positive_number_is_refused(synth, tmp_path, memory):
    with pytest.raises(zarrstream.InvalidArgumentError, match="memory"):
        zarrstream.rechunk(str(synth), str(tmp_path / "out.zarr"), memory=memory)


def test_stats_results_with_values_of_another_shape_are_refused(synth):
    plan = zarrstream.plan_stats(str(synth), parts=2, vars=["2m_temperature"], threads=1)
    results = [p.run() for p in plan.parts]
    results[0] = dataclasses.replace(results[0], values=("x",))
    with pytest.raises(zarrstream.InvalidArgumentError):
        plan.finalise(results)


# Every run of a part reads every part's progress record: a part count of 2^31 ran for ever (and
# the CLI, which saves its progress on SIGTERM, ignored `timeout`).
def test_a_rechunk_part_count_no_job_needs_is_refused(synth, tmp_path):
    proc = subprocess.run([str(CLI), "rechunk", str(synth), str(tmp_path / "out.zarr"), "--vars",
                           "2m_temperature", "--part", "0/2147483648", "--threads", "1"],
                          capture_output=True, text=True, timeout=TIMEOUT)
    assert proc.returncode != 0
    assert "at most 65536 parts" in proc.stderr, proc.stderr


# A declared dimension of 2^63 or more could not be sliced: slice.indices raised OverflowError.
def test_slices_of_dimensions_past_2_63_are_read_or_refused_as_zarrstream_errors(tmp_path):
    root = tmp_path / "huge"
    root.mkdir()
    (root / ".zarray").write_text(json.dumps({
        "zarr_format": 2, "shape": [2**64 - 1], "chunks": [8], "dtype": "<f8", "compressor": None,
        "fill_value": 0, "order": "C", "filters": None}))
    a = zarrstream.open_array(str(root))
    np.testing.assert_array_equal(a[0:2], np.zeros(2))
    np.testing.assert_array_equal(a[-3:], np.zeros(3))
    with pytest.raises(zarrstream.OutOfMemoryError):
        a[...]


# xarray's CF decoding raised its own ValueError/TypeError/struct.error on hostile attributes, or
# numpy's error at the first read for a scale_factor that is no number.
@pytest.mark.parametrize("var_attrs,time_attrs", [
    ({}, {"units": "since"}),
    ({}, {"units": "years since 0000-01-01"}),
    ({"scale_factor": {}}, {"units": "hours since 1900-01-01"}),
    ({"scale_factor": "x"}, {"units": "hours since 1900-01-01"}),
    ({"add_offset": [1, 2]}, {"units": "hours since 1900-01-01"}),
    ({"_FillValue": []}, {"units": "hours since 1900-01-01"}),
])
def test_hostile_cf_attributes_through_xarray_are_metadata_errors(tmp_path, var_attrs, time_attrs):
    xr = pytest.importorskip("xarray")
    root = tmp_path / "cf"
    g = zarrstream.create_group(str(root))
    t = g.create_array("time", shape=(4,), dtype="int64", chunks=(4,), dims=["time"],
                       attrs=time_attrs)
    t[...] = np.arange(4)
    v = g.create_array("v", shape=(4,), dtype="int16", chunks=(2,), dims=["time"], attrs=var_attrs)
    v[...] = np.arange(4, dtype="int16")
    with pytest.raises(zarrstream.MetadataError):
        xr.open_dataset(str(root), engine="zarrstream").load()


# xarray builds a dimension coordinate's index after the backend returns: a time axis it could not
# decode (values past 64-bit nanoseconds) raised cftime's OverflowError from there, or at .load().
def test_a_time_axis_xarray_cannot_decode_is_a_metadata_error(tmp_path):
    xr = pytest.importorskip("xarray")
    root = tmp_path / "cf"
    g = zarrstream.create_group(str(root))
    t = g.create_array("time", shape=(4,), dtype="int64", chunks=(4,), dims=["time"],
                       attrs={"units": "hours since 1900-01-01"})
    t[...] = np.array([0, 2**62, -2**62, 5])
    v = g.create_array("v", shape=(4,), dtype="int16", chunks=(2,), dims=["time"])
    v[...] = np.arange(4, dtype="int16")
    with pytest.raises(zarrstream.MetadataError, match="time values"):
        xr.open_dataset(str(root), engine="zarrstream").load()

"""Kerchunk reference sets (virtual datasets) read as Zarr: netCDF4 files written by xarray
(netCDF4 engine), references made by kerchunk (SingleHdf5ToZarr; MultiZarrToZarr along time), and
zarrstream's reads through ``reference://`` (open_group, open_array with and without CF decoding,
the Loader, ``zarrstream inspect``) compared with xarray's reads of the same netCDF files. Targets
are local files, files served by nginx over HTTP, objects in moto's S3 server, and inline data.
"""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import xarray as xr

import zarrstream
from conftest import run_cli
from object_servers import MotoS3, Nginx

kerchunk_hdf = pytest.importorskip("kerchunk.hdf")
kerchunk_combine = pytest.importorskip("kerchunk.combine")
torch = pytest.importorskip("torch")

NT, NLAT, NLON = 8, 24, 36
VARIABLES = ["t2m", "raw", "counts", "packed"]


def write_netcdf(path: Path, part: int) -> None:
    """One file of a time series: part 0 and 1 hold consecutive time steps. Variables:
    t2m   float32, zlib + shuffle, chunked (2, 12, 18)
    raw   float64, contiguous, uncompressed
    counts int32, chunked (4, 24, 36), uncompressed
    packed int16 with scale_factor / add_offset / _FillValue (some cells missing), zlib, chunked
          (4, 12, 36) (MultiZarrToZarr needs chunks that divide each file along time)
    time  CF time ("hours since ..."), lat, lon coordinates.
    """
    rng = np.random.default_rng(part)
    time = pd.date_range("2020-01-01", periods=NT, freq="6h") + pd.Timedelta(hours=6 * NT * part)
    packed = 250 + 40 * rng.random((NT, NLAT, NLON))
    packed[rng.random(packed.shape) < 0.05] = np.nan
    ds = xr.Dataset(
        {
            "t2m": (("time", "lat", "lon"), (270 + 30 * rng.random((NT, NLAT, NLON))).astype("f4")),
            "raw": (("time", "lat", "lon"), rng.standard_normal((NT, NLAT, NLON))),
            "counts": (("time", "lat", "lon"), rng.integers(-1000, 1000, (NT, NLAT, NLON), dtype="i4")),
            "packed": (("time", "lat", "lon"), packed, {"units": "K"}),
        },
        coords={"time": time, "lat": np.linspace(90, -90, NLAT), "lon": np.linspace(0, 350, NLON)},
    )
    encoding = {
        "t2m": {"zlib": True, "shuffle": True, "complevel": 4, "chunksizes": (2, 12, 18)},
        "raw": {"contiguous": True},
        "counts": {"chunksizes": (4, NLAT, NLON)},
        "packed": {"dtype": "int16", "scale_factor": 0.01, "add_offset": 270.0,
                   "_FillValue": np.int16(-32767), "zlib": True, "chunksizes": (4, 12, 36)},
        "time": {"units": "hours since 2020-01-01", "dtype": "int64"},
    }
    ds.to_netcdf(path, engine="netcdf4", encoding=encoding)


def make_refs(nc: Path, url: str | None = None, inline_threshold: int = 0) -> dict:
    """kerchunk's references for `nc`, naming it as `url` (default: its path, as kerchunk does)."""
    refs = kerchunk_hdf.SingleHdf5ToZarr(str(nc), inline_threshold=inline_threshold).translate()
    for value in refs["refs"].values():
        if isinstance(value, list):
            assert value[0] == str(nc)
            value[0] = url or value[0]
    return refs


def write_refs(path: Path, refs: dict) -> str:
    path.write_text(json.dumps(refs))
    return f"reference://{path}"


def open_nc(path: Path, **kwargs) -> xr.Dataset:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return xr.open_dataset(path, engine="netcdf4", **kwargs).load()


def assert_same(got: np.ndarray, want: np.ndarray, what: str) -> None:
    assert got.dtype == want.dtype, f"{what}: {got.dtype} != {want.dtype}"
    assert got.shape == want.shape, what
    np.testing.assert_array_equal(got, want, err_msg=what)


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("kerchunk")
    for part, name in enumerate(["a.nc", "b.nc"]):
        write_netcdf(root / name, part)
    return root


@pytest.fixture(scope="module")
def refs_url(files) -> str:
    return write_refs(files / "a.json", make_refs(files / "a.nc"))


def test_kerchunk_references_what_the_test_means(files):
    """The fixture is what the tests rely on: chunk references into the file, zlib + shuffle
    filters, a contiguous variable, packing attributes."""
    refs = make_refs(files / "a.nc")["refs"]
    assert refs["t2m/0.0.0"][0] == str(files / "a.nc") and len(refs["t2m/0.0.0"]) == 3
    t2m = json.loads(refs["t2m/.zarray"])
    assert [f["id"] for f in t2m["filters"]] == ["shuffle", "zlib"]
    assert json.loads(refs["raw/.zarray"])["chunks"] == [NT, NLAT, NLON]
    assert json.loads(refs["packed/.zattrs"])["scale_factor"] == 0.01


def test_open_group_reads_equal_xarrays_raw_values(files, refs_url):
    group = zarrstream.open_group(refs_url)
    assert set(VARIABLES) <= set(group)
    raw = open_nc(files / "a.nc", decode_cf=False)
    for name in VARIABLES + ["time", "lat", "lon"]:
        assert_same(group[name].read(), raw[name].values, name)
    assert_same(group["t2m"][1:5, 3:20, 7], raw["t2m"].values[1:5, 3:20, 7], "t2m slice")


def test_open_array_decode_cf_equals_xarrays_decoded_values(files, refs_url):
    decoded = open_nc(files / "a.nc")
    assert decoded["packed"].dtype == np.float64 and int(decoded["packed"].isnull().sum()) > 0
    for name in ["t2m", "raw", "packed"]:
        array = zarrstream.open_array(f"{refs_url}#{name}", decode_cf=True)
        assert_same(array.read(), decoded[name].values, name)
    stored = zarrstream.open_array(f"{refs_url}#packed")
    assert stored.dtype == np.int16


def test_loader_batches_equal_xarrays_decoded_values(files, refs_url):
    decoded = open_nc(files / "a.nc")
    loader = zarrstream.Loader(refs_url, ["t2m", "packed"], shuffle="none", batch_size=1)
    got = np.stack([batch["input"].numpy()[0] for batch in loader])
    want = np.stack([decoded[c].values for c in loader.channels], axis=1).astype("float32")
    assert loader.channels == ["t2m", "packed"]
    assert got.shape == (NT, 2, NLAT, NLON)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(got, want)


def test_inspect_shows_the_reference_set(refs_url):
    result = run_cli("inspect", refs_url)
    assert result.returncode == 0, result.stderr
    for name in ["t2m", "packed", "raw"]:
        assert name in result.stdout
    report = run_cli("inspect", "--json", refs_url)
    assert report.returncode == 0, report.stderr
    assert refs_url in report.stdout


def test_multizarr_combines_files_along_time(files):
    refs = [make_refs(files / name) for name in ["a.nc", "b.nc"]]
    combined = kerchunk_combine.MultiZarrToZarr(refs, concat_dims=["time"],
                                                identical_dims=["lat", "lon"]).translate()
    url = write_refs(files / "combined.json", combined)
    both = xr.concat([open_nc(files / "a.nc"), open_nc(files / "b.nc")], dim="time")
    group = zarrstream.open_group(url)
    assert group["t2m"].shape == (2 * NT, NLAT, NLON)
    raw = xr.concat([open_nc(files / n, decode_cf=False) for n in ["a.nc", "b.nc"]], dim="time")
    for name in ["t2m", "counts", "time"]:
        assert_same(group[name].read(), raw[name].values, name)
    assert_same(zarrstream.open_array(f"{url}#packed", decode_cf=True).read(),
                both["packed"].values, "packed")
    loader = zarrstream.Loader(url, ["t2m"], shuffle="none", batch_size=4)
    got = np.concatenate([batch["input"].numpy()[:, 0] for batch in loader])
    assert_same(got, both["t2m"].values, "t2m batches")


def test_relative_targets_are_relative_to_the_reference_file(files, tmp_path):
    shutil.copy(files / "a.nc", tmp_path / "a.nc")
    url = write_refs(tmp_path / "refs.json", make_refs(tmp_path / "a.nc", url="a.nc"))
    assert json.loads((tmp_path / "refs.json").read_text())["refs"]["t2m/0.0.0"][0] == "a.nc"
    raw = open_nc(files / "a.nc", decode_cf=False)
    assert_same(zarrstream.open_group(url)["t2m"].read(), raw["t2m"].values, "t2m")


def test_inline_references_need_no_target(files, tmp_path):
    """With a large inline threshold kerchunk copies every chunk into the references: they read
    the same with the netCDF file gone."""
    shutil.copy(files / "a.nc", tmp_path / "a.nc")
    refs = make_refs(tmp_path / "a.nc", inline_threshold=1 << 20)
    assert all(isinstance(v, str) for v in refs["refs"].values())
    assert any(v.startswith("base64:") for v in refs["refs"].values())
    (tmp_path / "a.nc").unlink()
    url = write_refs(tmp_path / "inline.json", refs)
    raw = open_nc(files / "a.nc", decode_cf=False)
    group = zarrstream.open_group(url)
    for name in VARIABLES + ["time"]:
        assert_same(group[name].read(), raw[name].values, name)


def test_http_targets_through_nginx(files, tmp_path):
    server = Nginx(files, tmp_path / "nginx")
    try:
        refs = make_refs(files / "a.nc", url=f"{server.url}/a.nc")
        # The reference file itself is served too.
        (files / "http.json").write_text(json.dumps(refs))
        url = f"reference://{server.url}/http.json"
        server.clear_log()
        raw = open_nc(files / "a.nc", decode_cf=False)
        group = zarrstream.open_group(url)
        for name in VARIABLES:
            assert_same(group[name].read(), raw[name].values, name)
        requests = server.requests()
        assert {r.path for r in requests} == {"/http.json", "/a.nc"}
        chunk_reads = [r for r in requests if r.path == "/a.nc"]
        assert chunk_reads and all(r.range.startswith("bytes=") and r.status == 206
                                   for r in chunk_reads)
        decoded = open_nc(files / "a.nc")
        loader = zarrstream.Loader(url, ["packed"], shuffle="none", batch_size=NT)
        (batch,) = list(loader)
        np.testing.assert_array_equal(batch["input"].numpy()[:, 0],
                                      decoded["packed"].values.astype("float32"))
    finally:
        server.stop()


def test_s3_targets_through_moto(files, tmp_path, monkeypatch):
    """The reference file and the netCDF file in a bucket, read with signed requests."""
    server = MotoS3()
    try:
        bucket = tmp_path / "bucket"
        bucket.mkdir()
        shutil.copy(files / "a.nc", bucket / "a.nc")
        refs = make_refs(files / "a.nc", url="s3://virtual/era5/a.nc")
        (bucket / "refs.json").write_text(json.dumps(refs))
        server.upload_tree("virtual", bucket, "era5")
        server.sign_from_environment(monkeypatch)
        raw = open_nc(files / "a.nc", decode_cf=False)
        group = zarrstream.open_group("reference://s3://virtual/era5/refs.json")
        for name in VARIABLES:
            assert_same(group[name].read(), raw[name].values, name)
    finally:
        server.stop()


def test_dangling_and_truncated_targets_are_storage_errors(files, tmp_path):
    shutil.copy(files / "a.nc", tmp_path / "a.nc")
    url = write_refs(tmp_path / "refs.json", make_refs(tmp_path / "a.nc"))
    refs = json.loads((tmp_path / "refs.json").read_text())["refs"]
    key, (_, offset, _) = max(((k, v) for k, v in refs.items() if k.startswith("t2m/") and
                               isinstance(v, list)), key=lambda kv: kv[1][1])
    with open(tmp_path / "a.nc", "r+b") as f:
        f.truncate(offset + 1)  # t2m's last chunk in the file now reaches past its end
    group = zarrstream.open_group(url)
    with pytest.raises(zarrstream.StorageError) as e:
        group["t2m"].read()
    assert f"key '{key}'" in str(e.value) and "past the end" in str(e.value)
    assert str(tmp_path / "a.nc") in str(e.value) and "refs.json" in str(e.value)
    (tmp_path / "a.nc").unlink()
    with pytest.raises(zarrstream.StorageError, match="does not exist"):
        group["t2m"].read()
    with pytest.raises(zarrstream.NotFoundError, match="reference file"):
        zarrstream.open_group(f"reference://{tmp_path / 'none.json'}")
    (tmp_path / "bad.json").write_text('{"version": 1, "refs": {"a/0": [1, 2]}}')
    with pytest.raises(zarrstream.MetadataError, match=r"bad\.json.*key 'a/0'"):
        zarrstream.open_group(f"reference://{tmp_path / 'bad.json'}")

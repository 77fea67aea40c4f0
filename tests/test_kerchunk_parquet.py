"""Parquet reference sets (fsspec's LazyReferenceMapper directories) read as Zarr: netCDF4 files
written by xarray, references made by kerchunk (SingleHdf5ToZarr; MultiZarrToZarr along time) and
written as Parquet by kerchunk.df.refs_to_dataframe (fastparquet) and by LazyReferenceMapper with
pyarrow, with a small record_size (several record files per array), inline chunks, missing chunks
and categorical paths. zarrstream's reads through ``reference://DIRECTORY`` are compared with
xarray's reads of the netCDF files and with fsspec's ReferenceFileSystem reading the same set.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

import zarrstream
from conftest import run_cli
from test_kerchunk import NLAT, NLON, NT, VARIABLES, assert_same, make_refs, open_nc, write_netcdf

kerchunk_combine = pytest.importorskip("kerchunk.combine")
kerchunk_df = pytest.importorskip("kerchunk.df")
pd = pytest.importorskip("pandas")
fsspec_reference = pytest.importorskip("fsspec.implementations.reference")
zarr = pytest.importorskip("zarr")
torch = pytest.importorskip("torch")

ENGINES = [engine for engine in ("fastparquet", "pyarrow") if importlib.util.find_spec(engine)]
if not ENGINES:
    pytest.skip("neither fastparquet nor pyarrow is installed", allow_module_level=True)

RECORD_SIZE = 5  # t2m has 16 chunks per file: several record files, the last one part full


def write_parquet(refs: dict, directory: Path, engine: str, record_size: int = RECORD_SIZE) -> str:
    """The references as a Parquet set, the way users write one: kerchunk.df.refs_to_dataframe
    (fastparquet, fsspec's default engine), or LazyReferenceMapper with pyarrow. Paths are
    categorical wherever a record names few files (categorical_threshold=1)."""
    refs = refs.get("refs", refs)
    if engine == "fastparquet":
        kerchunk_df.refs_to_dataframe(refs, str(directory), record_size=record_size,
                                      categorical_threshold=1)
    else:
        out = fsspec_reference.LazyReferenceMapper.create(
            str(directory), record_size=record_size, engine=engine, categorical_threshold=1)
        for key in sorted(refs):
            out[key] = refs[key]
        out.flush()
    return f"reference://{directory}"


def fsspec_group(directory: Path):
    """fsspec's ReferenceFileSystem over the same set, read by zarr-python. fsspec 2026.9 reads
    only what fastparquet wrote, and no null row of a dictionary-encoded path column (it takes the
    NaN that comes back for a URL): the tests compare with it where it reads the set."""
    mapper = fsspec_reference.ReferenceFileSystem(str(directory), remote_protocol="file").get_mapper()
    return zarr.open_group(zarr.storage.FsspecStore.from_mapper(mapper, read_only=True), mode="r",
                           zarr_format=2)


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("kerchunk_parquet")
    for part, name in enumerate(["a.nc", "b.nc"]):
        write_netcdf(root / name, part)
    return root


@pytest.fixture(scope="module", params=ENGINES)
def parquet_set(request, files, tmp_path_factory) -> Path:
    """One file's references, coordinates inline (inline_threshold), written as Parquet."""
    directory = tmp_path_factory.mktemp(request.param) / "a.parq"
    write_parquet(make_refs(files / "a.nc", inline_threshold=300), directory, request.param)
    return directory


def test_the_sets_are_what_the_tests_mean(parquet_set):
    """Several record files per array, inline and referenced rows, a categorical path column."""
    meta = json.loads((parquet_set / ".zmetadata").read_text())
    assert meta["record_size"] == RECORD_SIZE and "t2m/.zarray" in meta["metadata"]
    records = sorted(p.name for p in (parquet_set / "t2m").iterdir())
    assert records == [f"refs.{i}.parq" for i in range(4)]  # 16 chunks in records of 5
    frame = pd.read_parquet(parquet_set / "t2m" / "refs.0.parq")
    assert list(frame.columns) == ["path", "offset", "size", "raw"]
    assert frame["path"].notna().all() and frame["raw"].isna().all()
    if "pyarrow" in ENGINES:  # categorical paths are stored dictionary-encoded
        import pyarrow.parquet as pq

        column = pq.ParquetFile(parquet_set / "t2m" / "refs.0.parq").metadata.row_group(0).column(0)
        assert column.path_in_schema == "path"
        assert {"PLAIN_DICTIONARY", "RLE_DICTIONARY"} & set(column.encodings), column.encodings
    lat = pd.read_parquet(parquet_set / "lat" / "refs.0.parq")
    assert lat["raw"].notna()[0] and lat["path"].isna()[0]


def test_open_group_reads_equal_xarray_and_fsspec(files, parquet_set):
    url = f"reference://{parquet_set}"
    group = zarrstream.open_group(url)
    assert set(VARIABLES) <= set(group)
    raw = open_nc(files / "a.nc", decode_cf=False)
    peer = fsspec_group(parquet_set) if "fastparquet" in parquet_set.parent.name else None
    for name in VARIABLES + ["time", "lat", "lon"]:
        assert_same(group[name].read(), raw[name].values, name)
        if peer is not None:
            assert_same(group[name].read(), peer[name][...], f"{name} (fsspec)")
    assert_same(group["t2m"][1:5, 3:20, 7], raw["t2m"].values[1:5, 3:20, 7], "t2m slice")
    # The directory with a trailing slash, and its .zmetadata named, open the same set.
    for other in [f"{url}/", f"{url}/.zmetadata"]:
        assert_same(zarrstream.open_group(other)["t2m"].read(), raw["t2m"].values, other)


def test_open_array_and_loader_decode_as_xarray(files, parquet_set):
    url = f"reference://{parquet_set}"
    decoded = open_nc(files / "a.nc")
    for name in ["t2m", "packed"]:
        array = zarrstream.open_array(f"{url}#{name}", decode_cf=True)
        assert_same(array.read(), decoded[name].values, name)
    loader = zarrstream.Loader(url, ["t2m", "packed"], shuffle="none", batch_size=1)
    got = np.stack([batch["input"].numpy()[0] for batch in loader])
    want = np.stack([decoded[c].values for c in loader.channels], axis=1).astype("float32")
    assert got.shape == (NT, 2, NLAT, NLON)
    np.testing.assert_array_equal(got, want)
    (identity,) = loader.dataset_identity
    assert identity == {"url": url, "kind": "kerchunk",
                        "id": hashlib.sha256((parquet_set / ".zmetadata").read_bytes()).hexdigest()}


def test_inspect_shows_the_parquet_set(parquet_set):
    url = f"reference://{parquet_set}"
    result = run_cli("inspect", url)
    assert result.returncode == 0, result.stderr
    for name in ["t2m", "packed", "raw"]:
        assert name in result.stdout
    report = run_cli("inspect", "--json", url)
    assert report.returncode == 0, report.stderr
    arrays = {a["path"]: a for a in json.loads(report.stdout)["members"]}
    assert arrays["t2m"]["stored_chunk_count"] == arrays["t2m"]["chunk_count"] == 16
    assert arrays["lat"]["stored_bytes"] == NLAT * 8  # an inline chunk's length


@pytest.mark.parametrize("engine", ENGINES)
def test_combined_series_with_missing_chunks(files, tmp_path, engine):
    """MultiZarrToZarr over two files (two paths in the set), one chunk's reference deleted (a
    null row) and one record file removed: both read as the fill value, as fsspec reads them;
    with missing_chunks="error" they are NotFoundErrors naming the chunk."""
    refs = [make_refs(files / name) for name in ["a.nc", "b.nc"]]
    combined = kerchunk_combine.MultiZarrToZarr(refs, concat_dims=["time"],
                                                identical_dims=["lat", "lon"]).translate()
    del combined["refs"]["t2m/0.0.1"]
    directory = tmp_path / "combined.parq"
    url = write_parquet(combined, directory, engine)
    last = pd.read_parquet(directory / "t2m" / "refs.6.parq")["path"]  # chunks 30, 31 and nulls
    assert list(last.isna()) == [False, False, True, True, True]
    assert {Path(p).name for p in last.dropna()} == {"b.nc"}
    (directory / "t2m" / "refs.2.parq").unlink()  # chunks 10-14

    group = zarrstream.open_group(url)
    assert group["t2m"].shape == (2 * NT, NLAT, NLON)
    raw = xr.concat([open_nc(files / n, decode_cf=False) for n in ["a.nc", "b.nc"]], dim="time")
    t2m = group["t2m"].read()
    if engine == "fastparquet":  # the chunks of the removed record file read as fsspec reads them
        assert_same(t2m[10:], fsspec_group(directory)["t2m"][10:], "t2m (fsspec)")
    want = raw["t2m"].values.copy()
    for number in [1, 10, 11, 12, 13, 14]:  # t2m's fill value (NaN) there
        t, y, x = np.unravel_index(number, (2 * NT // 2, 2, 2))
        want[2 * t:2 * t + 2, 12 * y:12 * y + 12, 18 * x:18 * x + 18] = np.nan
    assert_same(t2m, want, "t2m")
    for name in ["counts", "time"]:
        assert_same(group[name].read(), raw[name].values, name)

    strict = zarrstream.open_group(url, missing_chunks="error")
    with pytest.raises(zarrstream.NotFoundError, match=r"t2m/0\.0\.1"):
        strict["t2m"][0:2, 0:12, 18:36]
    with pytest.raises(zarrstream.NotFoundError, match=r"chunk 't2m/2\.1\.0'.*not stored"):
        strict["t2m"][4:6]  # time chunk 2: chunks 8-11, 10 and 11 in refs.2.parq
    assert_same(strict["t2m"][8:], raw["t2m"].values[8:], "t2m after the gaps")


def test_relative_paths_are_relative_to_the_sets_directory(files, tmp_path):
    shutil.copy(files / "a.nc", tmp_path / "a.nc")
    url = write_parquet(make_refs(tmp_path / "a.nc", url="a.nc"), tmp_path / "refs.parq",
                        ENGINES[0])
    raw = open_nc(files / "a.nc", decode_cf=False)
    assert_same(zarrstream.open_group(url)["t2m"].read(), raw["t2m"].values, "t2m")


def test_set_in_s3_is_found_by_its_zmetadata(files, tmp_path, monkeypatch):
    """An object store has no directories: s3://.../refs.parq is no object, so the set is found
    by refs.parq/.zmetadata; record files and the netCDF file are read with signed requests."""
    from object_servers import MotoS3

    server = MotoS3()
    try:
        bucket = tmp_path / "bucket"
        bucket.mkdir()
        shutil.copy(files / "a.nc", bucket / "a.nc")
        write_parquet(make_refs(files / "a.nc", url="s3://virtual/era5/a.nc", inline_threshold=300),
                      bucket / "refs.parq", ENGINES[0])
        server.upload_tree("virtual", bucket, "era5")
        server.sign_from_environment(monkeypatch)
        raw = open_nc(files / "a.nc", decode_cf=False)
        group = zarrstream.open_group("reference://s3://virtual/era5/refs.parq")
        for name in VARIABLES + ["lat"]:
            assert_same(group[name].read(), raw[name].values, name)
    finally:
        server.stop()


def test_set_over_http(files, tmp_path):
    """The set and the netCDF file served by nginx, the set's URL ending in '/': .zmetadata, record
    files and chunk ranges are all HTTP requests."""
    from object_servers import Nginx

    server = Nginx(files, tmp_path / "nginx")
    try:
        write_parquet(make_refs(files / "a.nc", url=f"{server.url}/a.nc", inline_threshold=300),
                      files / "http.parq", ENGINES[0])
        server.clear_log()
        raw = open_nc(files / "a.nc", decode_cf=False)
        group = zarrstream.open_group(f"reference://{server.url}/http.parq/")
        for name in VARIABLES + ["lat"]:
            assert_same(group[name].read(), raw[name].values, name)
        paths = {r.path for r in server.requests()}
        assert {"/http.parq/.zmetadata", "/http.parq/t2m/refs.3.parq", "/a.nc"} <= paths
        assert "/http.parq/lat/refs.0.parq" in paths  # lat's chunk is inline in its record
    finally:
        server.stop()


def _record(parquet_set: Path, tmp_path: Path) -> tuple[Path, str]:
    """A copy of the set to break, and its URL."""
    directory = tmp_path / "broken.parq"
    shutil.copytree(parquet_set, directory)
    return directory, f"reference://{directory}"


def test_truncated_and_corrupt_record_files_are_metadata_errors(parquet_set, tmp_path):
    directory, url = _record(parquet_set, tmp_path)
    record = directory / "t2m" / "refs.1.parq"
    data = record.read_bytes()
    record.write_bytes(data[:-3])  # the footer cut off
    group = zarrstream.open_group(url)
    with pytest.raises(zarrstream.MetadataError, match=r"t2m/refs\.1\.parq.*PAR1"):
        group["t2m"].read()
    # A compressed page's bytes changed.
    frame = data.index(b"\x28\xb5\x2f\xfd")  # the first ZSTD frame
    corrupt = bytearray(data)
    for i in range(frame + 4, min(frame + 24, len(data) - 8)):
        corrupt[i] ^= 0x5A
    record.write_bytes(bytes(corrupt))
    with pytest.raises(zarrstream.MetadataError, match=r"t2m/refs\.1\.parq"):
        zarrstream.open_group(url)["t2m"].read()


def test_wrong_columns_and_codecs_are_clear_errors(parquet_set, tmp_path):
    directory, url = _record(parquet_set, tmp_path)
    record = directory / "t2m" / "refs.0.parq"
    frame = pd.read_parquet(record)
    frame["offset"] = frame["offset"].astype(str)
    frame.to_parquet(record, engine=ENGINES[0], compression="zstd", index=False)
    with pytest.raises(zarrstream.MetadataError,
                       match=r"t2m/refs\.0\.parq: column 'offset' is BYTE_ARRAY, not INT64"):
        zarrstream.open_group(url)["t2m"].read()
    if "pyarrow" in ENGINES:
        pd.read_parquet(parquet_set / "t2m" / "refs.0.parq").to_parquet(
            record, engine="pyarrow", index=False)  # pyarrow's default codec, SNAPPY
        with pytest.raises(zarrstream.UnsupportedError, match=r"t2m/refs\.0\.parq.*SNAPPY"):
            zarrstream.open_group(url)["t2m"].read()


def test_bad_zmetadata_is_a_metadata_error(parquet_set, tmp_path):
    directory, url = _record(parquet_set, tmp_path)
    meta = json.loads((directory / ".zmetadata").read_text())
    meta["record_size"] = "many"
    (directory / ".zmetadata").write_text(json.dumps(meta))
    with pytest.raises(zarrstream.MetadataError, match=r"broken\.parq.*record_size"):
        zarrstream.open_group(url)
    (directory / ".zmetadata").unlink()
    with pytest.raises(zarrstream.NotFoundError, match="without a .zmetadata"):
        zarrstream.open_group(url)

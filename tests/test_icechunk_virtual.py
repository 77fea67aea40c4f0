"""A virtual dataset in an Icechunk repository: netCDF4 files written by xarray, their chunks
referenced in place through icechunk's virtual-reference API, as VirtualiZarr's ``to_icechunk``
writes them (zarr v3 arrays whose codecs are the HDF5 filters, numcodecs.shuffle and
numcodecs.zlib, and whose chunks are (file, offset, length) under a virtual chunk container),
appended along time in a second commit. zarrstream's reads at each snapshot are compared with
xarray's reads of the netCDF files and with zarr-python reading through icechunk.

Runs with icechunk 1.x (spec 1, ``config.yaml``) or 2.x (spec 2, the containers in the repo info
file), whichever is installed.
"""

from __future__ import annotations

import base64
import json
import warnings
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

import zarrstream

icechunk = pytest.importorskip("icechunk")
zarr = pytest.importorskip("zarr")
from test_icechunk import _create_repo, _open_repo  # noqa: E402
from test_kerchunk import NT, VARIABLES, make_refs, open_nc, write_netcdf  # noqa: E402
from zarr.codecs import BytesCodec  # noqa: E402
from zarr.codecs.numcodecs import Shuffle, Zlib  # noqa: E402

ARRAYS = VARIABLES + ["time", "lat", "lon"]


def v3_codecs(zarray: dict) -> dict:
    """create_array's codec arguments for kerchunk's v2 metadata of an HDF5 dataset."""
    translate = {"shuffle": lambda f: Shuffle(elementsize=f["elementsize"]),
                 "zlib": lambda f: Zlib(level=f.get("level", 1))}
    # v2 applies the filters in order, then the compressor: v3's bytes-to-bytes codecs in order.
    steps = list(zarray.get("filters") or []) + ([zarray["compressor"]] if zarray.get("compressor") else [])
    for f in steps:
        assert f["id"] in translate, f"a codec the test does not translate: {f}"
    compressors = [translate[f["id"]](f) for f in steps]
    endian = "big" if zarray["dtype"].startswith(">") else "little"
    return {"serializer": BytesCodec(endian=endian), "compressors": compressors or None}


def cf_fill_value(value, dtype: str):
    """_FillValue as xarray writes it into a zarr v3 array's attributes (floats: base64 of the
    float64, so that NaN survives JSON)."""
    if np.dtype(dtype).kind == "f":
        return base64.standard_b64encode(np.float64(value).tobytes()).decode()
    return value


def add_virtual_file(session, group, nc: Path, time_offset: int) -> None:
    """The arrays of `nc` (created at time_offset 0, else grown along time) with virtual chunks."""
    refs = make_refs(nc)["refs"]
    for name in ARRAYS:
        zarray = json.loads(refs[f"{name}/.zarray"])
        attrs = json.loads(refs.get(f"{name}/.zattrs", "{}"))
        dims = attrs.pop("_ARRAY_DIMENSIONS")
        if zarray["fill_value"] is not None:  # the HDF5 fill value is the CF _FillValue
            attrs["_FillValue"] = cf_fill_value(zarray["fill_value"], zarray["dtype"])
        on_time = dims[0] == "time"
        if time_offset == 0:
            group.create_array(
                name, shape=zarray["shape"], chunks=zarray["chunks"], dtype=zarray["dtype"],
                fill_value=0 if zarray["fill_value"] is None else zarray["fill_value"],
                dimension_names=dims, attributes=attrs, **v3_codecs(zarray))
        elif on_time:
            array = group[name]
            array.resize((time_offset + zarray["shape"][0], *zarray["shape"][1:]))
        else:
            continue
        chunk_offset = time_offset // zarray["chunks"][0] if on_time else 0
        for key, ref in refs.items():
            if not key.startswith(name + "/") or key.split("/")[-1].startswith("."):
                continue
            assert isinstance(ref, list), f"{key}: inline data (the references have none)"
            index = [int(i) for i in key.split("/")[-1].split(".")]
            if on_time:
                index[0] += chunk_offset
            location = Path(ref[0]).as_uri()
            session.store.set_virtual_ref(
                f"{name}/c/" + "/".join(map(str, index)), location, offset=ref[1], length=ref[2])


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    root = tmp_path_factory.mktemp("icechunk-virtual")
    data = root / "files"
    data.mkdir()
    for part, name in enumerate(["a.nc", "b.nc"]):
        write_netcdf(data / name, part)
    config = icechunk.RepositoryConfig.default()
    prefix = data.as_uri() + "/"
    config.set_virtual_chunk_container(
        icechunk.VirtualChunkContainer(prefix, icechunk.local_filesystem_store(str(data) + "/")))
    repository = _create_repo(root / "repo", config)
    session = repository.writable_session("main")
    group = zarr.group(store=session.store, attributes={"source": "netCDF4 files"})
    add_virtual_file(session, group, data / "a.nc", 0)
    first = session.commit("a.nc")
    session = repository.writable_session("main")
    add_virtual_file(session, zarr.open_group(session.store), data / "b.nc", NT)
    second = session.commit("b.nc appended along time")
    return {"path": root / "repo", "data": data, "first": first, "second": second}


def through_icechunk(repo, snapshot: str) -> dict[str, np.ndarray]:
    session = _open_repo(repo["path"], repo["data"]).readonly_session(snapshot_id=snapshot)
    group = zarr.open_group(session.store, mode="r")
    return {name: group[name][...] for name in ARRAYS}


def netcdf_values(repo, names: list[str], **kwargs) -> xr.Dataset:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return xr.concat([open_nc(repo["data"] / n, **kwargs) for n in names], dim="time",
                         data_vars="minimal", coords="minimal", compat="override")


@pytest.mark.parametrize("which", ["first", "second"])
def test_virtual_values_equal_the_netcdf_files_and_zarr_python(repo, which):
    files = ["a.nc"] if which == "first" else ["a.nc", "b.nc"]
    raw = netcdf_values(repo, files, decode_cf=False)
    theirs = through_icechunk(repo, repo[which])
    group = zarrstream.open_group(str(repo["path"]), ref=repo[which])
    assert group.attrs == {"source": "netCDF4 files"}
    for name in ARRAYS:
        got = group[name].read()
        assert got.dtype == raw[name].dtype, name
        np.testing.assert_array_equal(got, raw[name].values, err_msg=f"{name} at {which}")
        np.testing.assert_array_equal(got, theirs[name], err_msg=f"{name} at {which}")
    assert group["t2m"].shape[0] == NT * len(files)


def test_loader_over_the_virtual_dataset_equals_xarrays_decoded_values(repo):
    decoded = netcdf_values(repo, ["a.nc", "b.nc"])
    loader = zarrstream.Loader(str(repo["path"]), ["t2m", "packed"], shuffle="none", batch_size=1)
    assert loader.dataset_identity[0]["kind"] == "icechunk"
    assert loader.dataset_identity[0]["id"] == repo["second"]
    got = np.stack([batch["input"].numpy()[0] for batch in loader])
    want = np.stack([decoded[c].values for c in loader.channels], axis=1).astype("float32")
    assert got.shape == (2 * NT, 2, *want.shape[2:])
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(got, want)


def test_a_changed_file_is_an_error_not_a_wrong_value(repo, tmp_path):
    """A file cut short after it was referenced: the chunk reads past its end."""
    import shutil

    copy = tmp_path / "files"
    shutil.copytree(repo["data"], copy)
    config = icechunk.RepositoryConfig.default()
    config.set_virtual_chunk_container(icechunk.VirtualChunkContainer(
        copy.as_uri() + "/", icechunk.local_filesystem_store(str(copy) + "/")))
    repository = _create_repo(tmp_path / "repo", config)
    session = repository.writable_session("main")
    add_virtual_file(session, zarr.group(store=session.store), copy / "a.nc", 0)
    session.commit("a.nc")
    (copy / "a.nc").write_bytes((copy / "a.nc").read_bytes()[:4096])
    with pytest.raises(zarrstream.errors.StorageError, match="a.nc"):
        zarrstream.open_group(str(tmp_path / "repo"))["t2m"].read()

"""Icechunk repositories read as Zarr stores: repositories written by the icechunk package through
zarr-python (several commits, a tag and a branch; inline chunks, native chunks with zstd and
blosc, a sharded array, chunks never written, virtual chunks in a local file) and read by
zarrstream at each ref (open_group, open_array, the Loader, ``zarrstream inspect``, rechunk) with
the values zarr-python reads through icechunk; and the errors for a missing ref, a corrupt
snapshot, a spec version this reader does not know and a virtual chunk outside the repository's
containers.

Icechunk 1.x writes spec version 1 (installed for Python < 3.12); icechunk 2.x, spec version 2
(Python >= 3.12). Each test runs with whichever is installed; the spec 2 tests are skipped, saying
so, where icechunk 2 is not.
"""

from __future__ import annotations

import datetime
import json
import pickle
import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest

import zarrstream
from conftest import run_cli as _run_cli
from object_servers import MotoS3, Nginx

icechunk = pytest.importorskip("icechunk")
zarr = pytest.importorskip("zarr")
from zarr.codecs import BloscCodec, ZstdCodec  # noqa: E402

ICECHUNK_MAJOR = int(icechunk.__version__.split(".")[0])
SPEC_VERSION = 1 if ICECHUNK_MAJOR < 2 else 2

needs_icechunk_2 = pytest.mark.skipif(
    ICECHUNK_MAJOR < 2,
    reason=f"spec version 2 needs icechunk>=2 (Python>=3.12); installed: icechunk "
    f"{icechunk.__version__}",
)


def run_cli(*args) -> str:
    result = _run_cli(*args)
    assert result.returncode == 0, result.stderr
    return result.stdout


def _open_repo(path: Path, data: Path | None = None):
    storage = icechunk.local_filesystem_storage(str(path))
    authorize = {data.as_uri() + "/": None} if data is not None else None
    with warnings.catch_warnings():  # icechunk 2 deprecates None (no credentials) here
        warnings.simplefilter("ignore", DeprecationWarning)
        return icechunk.Repository.open(storage, authorize_virtual_chunk_access=authorize)


def _create_repo(path: Path, config=None):
    storage = icechunk.local_filesystem_storage(str(path))
    if ICECHUNK_MAJOR >= 2:
        return icechunk.Repository.create(storage, config, spec_version=SPEC_VERSION)
    return icechunk.Repository.create(storage, config)


class Repo:
    """A repository and what was written to it, by commit."""

    def __init__(self, path: Path, data: Path):
        self.path = path
        self.data = data
        self.snapshots: dict[str, str] = {}


def write_repository(path: Path, data: Path) -> Repo:
    """Commit "first": a root group with attributes, and arrays
    a      float32 (40, 30), chunks (16, 16), zstd, fill -1: native chunks
    sub/b  int16 (100,), chunks (10,), blosc lz4; only b[:50] written (chunks 5..9 missing)
    sh     float64 (64, 64), shards (32, 32) of chunks (8, 8)
    coord  float64 (6,), one 48-byte chunk (inline in the manifest)
    v      int32 (8,), chunks (4,), uncompressed; both chunks virtual, in data/raw.bin
    tag v1 and branch dev point at it. Commit "second" on main overwrites a[0:16, 0:16] with 7.
    """
    data.mkdir()
    raw = np.arange(100, 108, dtype="<i4").tobytes()
    (data / "raw.bin").write_bytes(b"HEAD" + raw)
    config = icechunk.RepositoryConfig.default()
    prefix = data.as_uri() + "/"
    config.set_virtual_chunk_container(
        icechunk.VirtualChunkContainer(prefix, icechunk.local_filesystem_store(str(data) + "/"))
    )
    repo = _create_repo(path, config)
    session = repo.writable_session("main")
    root = zarr.group(store=session.store, attributes={"title": "icechunk fixture"})
    a = root.create_array("a", shape=(40, 30), chunks=(16, 16), dtype="f4", fill_value=-1,
                          compressors=ZstdCodec(level=3), dimension_names=("time", "x"))
    a[:] = np.arange(1200, dtype="f4").reshape(40, 30)
    b = root.create_group("sub", attributes={"kind": "nested"}).create_array(
        "b", shape=(100,), chunks=(10,), dtype="i2", fill_value=-5,
        compressors=BloscCodec(cname="lz4", clevel=5))
    b[:50] = np.arange(50, dtype="i2")
    sh = root.create_array("sh", shape=(64, 64), chunks=(8, 8), shards=(32, 32), dtype="f8")
    sh[:] = np.random.default_rng(0).random((64, 64))
    root.create_array("coord", shape=(6,), chunks=(6,), dtype="f8")[:] = np.linspace(0, 1, 6)
    root.create_array("v", shape=(8,), chunks=(4,), dtype="<i4", compressors=None, fill_value=0)
    session.store.set_virtual_ref("v/c/0", prefix + "raw.bin", offset=4, length=16)
    # A last-modified checksum after the file's time: icechunk and zarrstream both accept it.
    later = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(minutes=5)
    session.store.set_virtual_ref("v/c/1", prefix + "raw.bin", offset=20, length=16,
                                  checksum=later)
    out = Repo(path, data)
    out.snapshots["first"] = session.commit("first")
    repo.create_tag("v1", out.snapshots["first"])
    repo.create_branch("dev", out.snapshots["first"])
    session = repo.writable_session("main")
    zarr.open_array(session.store, path="a")[0:16, 0:16] = 7
    out.snapshots["second"] = session.commit("second")
    return out


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> Repo:
    base = tmp_path_factory.mktemp("icechunk")
    return write_repository(base / "repo", base / "data")


def reference_values(repo: Repo, ref: dict) -> dict[str, np.ndarray]:
    """Every array as zarr-python reads it through icechunk at `ref`."""
    session = _open_repo(repo.path, repo.data).readonly_session(**ref)
    group = zarr.open_group(session.store, mode="r")
    return {name: group[name][...] for name in ("a", "sub/b", "sh", "coord", "v")}


REFS = {
    "main": ({}, {"branch": "main"}),
    "tag": ({"ref": "v1"}, {"tag": "v1"}),
    "branch": ({"ref": "dev"}, {"branch": "dev"}),
}


@pytest.mark.parametrize("which", ["main", "tag", "branch", "snapshot"])
def test_values_equal_zarr_python_through_icechunk(repo, which):
    if which == "snapshot":
        snapshot = repo.snapshots["first"]
        ours, theirs = {"ref": snapshot}, {"snapshot_id": snapshot}
    else:
        ours, theirs = REFS[which]
    expected = reference_values(repo, theirs)
    group = zarrstream.open_group(str(repo.path), **ours)
    assert group.attrs == {"title": "icechunk fixture"}
    assert sorted(group) == ["a", "coord", "sh", "sub", "v"]
    for name, values in expected.items():
        array = group[name]
        got = array.read()
        assert got.dtype == values.dtype, name
        np.testing.assert_array_equal(got, values, err_msg=f"{name} at {which}")
    # main has the second commit, the others the first.
    assert (expected["a"][0, 0] == 7) == (which == "main")
    assert group["sh"].shard_shape == (32, 32)
    assert group["a"].dims == ("time", "x")
    # Chunks never written read as the fill value.
    np.testing.assert_array_equal(group["sub/b"].read()[50:], -5)


def test_open_array_and_file_url(repo):
    session = _open_repo(repo.path, repo.data).readonly_session(branch="main")
    expected = zarr.open_array(session.store, path="a", mode="r")[...]
    # A repository whose root is a group: its arrays open from the group.
    a = zarrstream.open_group(repo.path.as_uri())["a"]
    np.testing.assert_array_equal(a.read(), expected)
    np.testing.assert_array_equal(a[3:20, 5:9], expected[3:20, 5:9])


def test_repository_over_http_and_s3(repo, tmp_path, monkeypatch):
    """The repository's refs, snapshots, manifests and chunks read through the store of its URL."""
    expected = reference_values(repo, {"tag": "v1"})
    server = Nginx(repo.path.parent, tmp_path / "nginx")
    try:
        group = zarrstream.open_group(f"{server.url}/{repo.path.name}", ref="v1")
        for name in ("a", "sub/b", "sh", "coord"):
            np.testing.assert_array_equal(group[name].read(), expected[name], err_msg=name)
        paths = {r.path.split("/")[2] for r in server.requests()}
        assert {"refs", "snapshots", "manifests", "chunks"} <= paths
    finally:
        server.stop()
    s3 = MotoS3()
    try:
        s3.upload_tree("ice", repo.path, "repo")
        s3.sign_from_environment(monkeypatch)
        group = zarrstream.open_group("s3://ice/repo", ref="v1")
        np.testing.assert_array_equal(group["a"].read(), expected["a"])
        np.testing.assert_array_equal(group["sh"].read(), expected["sh"])
    finally:
        s3.stop()


def test_root_array_repository(tmp_path):
    repo = _create_repo(tmp_path / "r")
    session = repo.writable_session("main")
    array = zarr.create_array(session.store, shape=(5, 7), chunks=(2, 3), dtype="u2")
    array[:] = np.arange(35, dtype="u2").reshape(5, 7)
    session.commit("an array at the root")
    opened = zarrstream.open_array(str(tmp_path / "r"))
    np.testing.assert_array_equal(opened.read(), np.arange(35, dtype="u2").reshape(5, 7))
    # Pickled, it reopens at the snapshot it read, not at branch main, which moves on.
    pickled = pickle.dumps(opened)
    session = repo.writable_session("main")
    zarr.open_array(session.store)[:] = 0
    session.commit("zeros")
    assert zarrstream.open_array(str(tmp_path / "r")).read().max() == 0
    np.testing.assert_array_equal(pickle.loads(pickled).read(),
                                  np.arange(35, dtype="u2").reshape(5, 7))


@pytest.mark.parametrize("ref", [None, "v1"])
def test_loader_equals_plain_store_loader(repo, tmp_path, ref):
    torch = pytest.importorskip("torch")
    # The same values in a plain Zarr store, as zarr-python reads them through icechunk.
    values = reference_values(repo, {"tag": ref} if ref else {"branch": "main"})["a"]
    plain = zarr.open_group(str(tmp_path / "plain.zarr"), mode="w")
    plain.create_array("a", shape=(40, 30), chunks=(16, 16), dtype="f4", fill_value=-1,
                       dimension_names=("time", "x"))[:] = values
    kwargs = dict(sample={"time": 3}, batch_size=4, shuffle="exact", seed=3, decode_cf=False)
    ours = list(zarrstream.Loader(str(repo.path), ["a"], ref=ref, **kwargs))
    theirs = list(zarrstream.Loader(str(tmp_path / "plain.zarr"), ["a"], **kwargs))
    assert len(ours) == len(theirs) > 0
    for x, y in zip(ours, theirs):
        torch.testing.assert_close(x["input"], y["input"], rtol=0, atol=0)
        torch.testing.assert_close(x["origin"], y["origin"], rtol=0, atol=0)


def test_state_dict_records_the_snapshot(repo, tmp_path):
    pytest.importorskip("torch")
    kwargs = dict(sample={"time": 3}, batch_size=2, shuffle="exact", seed=1, decode_cf=False)
    loader = zarrstream.Loader(str(repo.path), ["a"], **kwargs)
    assert loader.dataset_identity == [
        {"url": str(repo.path), "kind": "icechunk", "id": repo.snapshots["second"]}]
    it = iter(loader)
    next(it)
    state = loader.state_dict()
    assert state["dataset"] == loader.dataset_identity
    # The same snapshot by id: resumes.
    same = zarrstream.Loader(str(repo.path), ["a"], ref=repo.snapshots["second"], **kwargs)
    same.load_state_dict(state)
    # Another snapshot: refused, naming the store, both and the ref to continue them, unless told
    # to continue.
    other = zarrstream.Loader(str(repo.path), ["a"], ref="v1", **kwargs)
    with pytest.raises(zarrstream.errors.ConfigError) as info:
        other.load_state_dict(state)
    message = str(info.value)
    assert repo.snapshots["first"] in message and repo.snapshots["second"] in message
    assert str(repo.path) in message and f"ref={repo.snapshots['second']!r}" in message
    assert "allow_dataset_change=True" in message
    other.load_state_dict(state, allow_dataset_change=True)
    assert other._core.next_batch == 1
    # A state saved before "dataset" was recorded: its "icechunk_snapshot" is compared.
    old = {"sample_plan": state["sample_plan"], "icechunk_snapshot": repo.snapshots["second"]}
    same.load_state_dict(old)
    with pytest.raises(zarrstream.errors.ConfigError, match=repo.snapshots["first"]):
        other.load_state_dict(old)


def _moving_branch_repo(path: Path) -> tuple[object, list[str]]:
    """A repository whose branch "main" has one commit (array "a", dimensions time, x, all 1);
    the caller moves it on with _commit."""
    repo = _create_repo(path)
    session = repo.writable_session("main")
    root = zarr.group(store=session.store)
    root.create_array("a", shape=(6, 4), chunks=(2, 4), dtype="f4",
                      dimension_names=("time", "x"))[:] = 1
    return repo, [session.commit("ones")]


def _commit(repo, value: float) -> str:
    session = repo.writable_session("main")
    zarr.open_array(session.store, path="a")[:] = value
    return session.commit(f"all {value}")


def test_pickles_pin_the_snapshot_not_the_branch(tmp_path):
    torch = pytest.importorskip("torch")
    repo, snapshots = _moving_branch_repo(tmp_path / "repo")
    url = str(tmp_path / "repo")
    loader = zarrstream.Loader(url, ["a"], sample={"time": 1}, batch_size=6, shuffle="none")
    group = zarrstream.open_group(url, ref="main")
    pickles = [pickle.dumps(x) for x in (loader, group, group["a"])]
    joined = zarrstream.Loader([url, {"url": url, "ref": snapshots[0]}], ["a"],
                               sample={"time": 1}, batch_size=6, shuffle="none")
    joined_pickle = pickle.dumps(joined)
    snapshots.append(_commit(repo, 2.0))  # main moves on
    assert zarrstream.Loader(url, ["a"], sample={"time": 1}).dataset_identity[0]["id"] == snapshots[1]
    loader, group, array = map(pickle.loads, pickles)
    assert loader.dataset_identity[0]["id"] == snapshots[0]
    (batch,) = list(loader)
    torch.testing.assert_close(batch["input"], torch.ones(6, 1, 4))
    np.testing.assert_array_equal(group["a"][...], np.ones((6, 4), "f4"))
    # An array inside the repository reopens from its root, at the snapshot it read.
    np.testing.assert_array_equal(array[...], np.ones((6, 4), "f4"))
    assert array.path == "a" and array.url == group["a"].url
    assert [s["id"] for s in pickle.loads(joined_pickle).dataset_identity] == [snapshots[0]] * 2


def test_ref_in_rechunk_and_its_plans(tmp_path):
    repo, snapshots = _moving_branch_repo(tmp_path / "repo")
    url = str(tmp_path / "repo")
    plan = zarrstream.plan_rechunk(url, str(tmp_path / "plan.zarr"), parts=2, chunks="time=3")
    assert {part.options.ref for part in plan.parts} == {snapshots[0]}
    snapshots.append(_commit(repo, 4.0))  # main moves on: the plan's parts copy the ones
    for part in plan.parts:
        part.run()
    plan.finalise()
    np.testing.assert_array_equal(zarrstream.open_group(str(tmp_path / "plan.zarr"))["a"][...],
                                  np.ones((6, 4), "f4"))
    zarrstream.rechunk(url, str(tmp_path / "v.zarr"), chunks="time=3", ref=snapshots[0])
    np.testing.assert_array_equal(zarrstream.open_group(str(tmp_path / "v.zarr"))["a"][...],
                                  np.ones((6, 4), "f4"))


def test_ref_in_stats_xarray_and_the_command_line(tmp_path):
    xr = pytest.importorskip("xarray")
    repo, snapshots = _moving_branch_repo(tmp_path / "repo")
    snapshots.append(_commit(repo, 3.0))
    url = str(tmp_path / "repo")
    means = {ref: zarrstream.stats(url, vars="a", ref=ref)["channels"][0]["mean"]
             for ref in (None, "main", snapshots[0])}
    assert means == {None: 3.0, "main": 3.0, snapshots[0]: 1.0}
    # Parts of a plan read the snapshot the plan was made at, however the branch moves.
    plan = zarrstream.plan_stats(url, parts=2, vars="a")
    assert {part.ref for part in plan.parts} == {snapshots[1]}
    _commit(repo, 5.0)
    assert plan.finalise([part.run() for part in plan.parts])["channels"][0]["mean"] == 3.0
    assert zarrstream.plan_stats(url, parts=1, vars="a", ref=snapshots[0]).parts[0].ref == snapshots[0]
    with pytest.raises(zarrstream.errors.InvalidArgumentError, match="no Icechunk repository"):
        zarrstream.stats(str(tmp_path), vars="a", ref="main")
    ds = xr.open_dataset(url, engine="zarrstream", ref=snapshots[0])
    np.testing.assert_array_equal(ds["a"].values, np.ones((6, 4), "f4"))
    ds = xr.open_dataset(url, engine="zarrstream", backend_kwargs={"ref": snapshots[1]})
    np.testing.assert_array_equal(ds["a"].values, np.full((6, 4), 3, "f4"))
    assert xr.open_dataset(url, engine="zarrstream")["a"].values[0, 0] == 5
    out = json.loads(run_cli("stats", url, "--vars", "a", "--ref", snapshots[0]))
    assert out["channels"][0]["mean"] == 1.0
    report = tmp_path / "bench.json"
    run_cli("bench", url, "--variables", "a", "--sample", "time=1", "--steps", "1", "--ref",
            snapshots[1], "--json", str(report))
    assert json.loads(report.read_text())["dataset"] == [
        {"url": url, "kind": "icechunk", "id": snapshots[1]}]


def test_inspect_shows_the_snapshot(repo):
    out = run_cli("inspect", str(repo.path))
    assert repo.snapshots["second"] in out
    assert "second" in out and "branch" in out and "main" in out
    out = run_cli("inspect", str(repo.path), "--ref", "v1")
    assert repo.snapshots["first"] in out and "tag" in out


@pytest.mark.parametrize("ref", [None, "v1"])
def test_rechunk_from_a_repository(repo, tmp_path, ref):
    dest = tmp_path / "out.zarr"
    run_cli("rechunk", str(repo.path), str(dest), "--chunks", "time=8,x=8", "--vars", "a",
            *(["--ref", ref] if ref else []))
    expected = reference_values(repo, {"tag": ref} if ref else {"branch": "main"})["a"]
    copied = zarr.open_array(str(dest / "a"), mode="r")
    assert copied.chunks == (8, 8)
    np.testing.assert_array_equal(copied[...], expected)


def test_missing_ref_names_repository_and_refs(repo):
    with pytest.raises(zarrstream.errors.NotFoundError) as info:
        zarrstream.open_group(str(repo.path), ref="nope")
    message = str(info.value)
    assert "'nope'" in message and str(repo.path) in message
    assert "dev" in message and "v1" in message  # the refs it has
    # A well-formed snapshot id that the repository does not hold.
    with pytest.raises(zarrstream.errors.NotFoundError, match="snapshot 0000000000000000000"):
        zarrstream.open_group(str(repo.path), ref="0" * 20)
    # A ref for a plain Zarr store.
    plain = repo.path.parent / "plain-for-ref.zarr"
    zarr.open_group(str(plain), mode="w")
    with pytest.raises(zarrstream.errors.InvalidArgumentError, match="no Icechunk repository"):
        zarrstream.open_group(str(plain), ref="main")


def _copy(repo: Repo, tmp_path: Path) -> Path:
    copy = tmp_path / "copy"
    shutil.copytree(repo.path, copy)
    return copy


def test_corrupt_snapshot_is_an_error(repo, tmp_path):
    copy = _copy(repo, tmp_path)
    snapshot = copy / "snapshots" / repo.snapshots["second"]
    data = bytearray(snapshot.read_bytes())
    for i in range(60, min(len(data), 90)):  # inside the zstd stream
        data[i] ^= 0x5A
    snapshot.write_bytes(bytes(data))
    with pytest.raises(zarrstream.errors.CorruptChunkError) as info:
        zarrstream.open_group(str(copy))
    assert repo.snapshots["second"] in str(info.value)
    assert "main" in str(info.value) or str(copy) in str(info.value)
    # The magic.
    data = bytearray(snapshot.read_bytes())
    data[0:3] = b"XYZ"
    snapshot.write_bytes(bytes(data))
    with pytest.raises(zarrstream.errors.CorruptChunkError, match="not an Icechunk file"):
        zarrstream.open_group(str(copy))


def test_unsupported_spec_version_is_named(repo, tmp_path):
    copy = _copy(repo, tmp_path)
    snapshot = copy / "snapshots" / repo.snapshots["second"]
    data = bytearray(snapshot.read_bytes())
    assert data[36] == SPEC_VERSION
    data[36] = 9
    snapshot.write_bytes(bytes(data))
    with pytest.raises(zarrstream.errors.UnsupportedError, match="spec version 9"):
        zarrstream.open_group(str(copy))


def test_corrupt_manifest_names_array_and_chunk(repo, tmp_path):
    copy = _copy(repo, tmp_path)
    for manifest in (copy / "manifests").iterdir():
        manifest.write_bytes(manifest.read_bytes()[:50])
    group = zarrstream.open_group(str(copy))
    with pytest.raises(zarrstream.errors.ZarrstreamError) as info:
        group["a"].read()
    message = str(info.value)
    assert "a/c/" in message and "manifest" in message, message


def test_virtual_chunk_outside_containers_is_refused(repo, tmp_path):
    if SPEC_VERSION != 1:
        pytest.skip("the test edits spec 1's config.yaml; spec 2's configuration (a FlexBuffer in "
                    "the repo info file) is covered by the C++ IcechunkStoreTest")
    copy = _copy(repo, tmp_path)
    config = copy / "config.yaml"
    config.write_text(config.read_text().replace(repo.data.as_uri() + "/",
                                                 "file:///nowhere/else/"))
    group = zarrstream.open_group(str(copy))
    with pytest.raises(zarrstream.errors.ZarrstreamError) as info:
        group["v"].read()
    message = str(info.value)
    assert "raw.bin" in message and "virtual chunk container" in message
    assert "v/c/" in message and str(copy) in message


def test_virtual_chunk_modified_after_reference_is_refused(repo, tmp_path):
    data = tmp_path / "vdata"
    data.mkdir()
    (data / "f.bin").write_bytes(np.arange(4, dtype="<i4").tobytes())
    config = icechunk.RepositoryConfig.default()
    prefix = data.as_uri() + "/"
    config.set_virtual_chunk_container(
        icechunk.VirtualChunkContainer(prefix, icechunk.local_filesystem_store(str(data) + "/")))
    r = _create_repo(tmp_path / "r", config)
    session = r.writable_session("main")
    zarr.create_array(session.store, shape=(4,), chunks=(4,), dtype="<i4", compressors=None)
    earlier = datetime.datetime(2001, 1, 1, tzinfo=datetime.timezone.utc)
    session.store.set_virtual_ref("c/0", prefix + "f.bin", offset=0, length=16, checksum=earlier)
    session.commit("a virtual chunk older than its file")
    with pytest.raises(zarrstream.errors.StorageError, match="modified"):
        zarrstream.open_array(str(tmp_path / "r")).read()


@needs_icechunk_2
def test_spec_two_repository_reads_refs_from_repo_info(repo):
    # The fixture is spec 2 here: refs live in the repo info file, and every test above ran on it.
    assert (repo.path / "repo").exists()
    assert not (repo.path / "refs").exists()
    assert (repo.path / "repo").read_bytes()[36] == 2
    out = run_cli("inspect", str(repo.path), "--ref", "dev")
    assert "spec 2" in out and repo.snapshots["first"] in out



def test_nested_array_of_a_repository_pickles(repo):
    array = zarrstream.open_group(str(repo.path), ref="v1")["sub"]["b"]
    copy = pickle.loads(pickle.dumps(array))
    assert copy.path == "sub/b"
    np.testing.assert_array_equal(copy.read(), array.read())
    tampered = pickle.dumps(array).replace(b"sub/b", b"sub/x")
    with pytest.raises(zarrstream.errors.ZarrstreamError, match="sub/x"):
        pickle.loads(tampered)

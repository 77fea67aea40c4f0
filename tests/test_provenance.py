"""Dataset provenance: the identity a loader records of the data it reads (``dataset_identity``,
``state_dict()["dataset"]``), for plain Zarr stores written by zarr-python and xarray (v2 and v3,
with and without consolidated metadata), a Kerchunk reference set and several stores joined or
concatenated; resuming refuses a state saved on other data unless told to continue; ``zarrstream
bench --json`` reports it. Icechunk snapshots, and pickles pinned to them, are in test_icechunk.py.
"""

from __future__ import annotations

import base64
import hashlib
import json
import pickle
from pathlib import Path

import numpy as np
import pytest

zarr = pytest.importorskip("zarr")
xr = pytest.importorskip("xarray")
pd = pytest.importorskip("pandas")
pytest.importorskip("torch")

import zarrstream  # noqa: E402
from conftest import run_cli  # noqa: E402

KWARGS = dict(sample={"time": 2}, batch_size=2, shuffle="exact", seed=5, decode_cf=False)


def _xarray_store(path: Path, zarr_format: int, consolidated: bool, start: str = "2020-01-01",
                  steps: int = 8, variables=("t", "u")) -> Path:
    rng = np.random.default_rng(3)
    ds = xr.Dataset(
        {name: (("time", "y", "x"), rng.standard_normal((steps, 3, 4)).astype("float32"))
         for name in variables},
        coords={"time": pd.date_range(start, periods=steps, freq="6h"),
                "y": np.arange(3.0), "x": np.arange(4.0)},
    )
    ds.to_zarr(path, zarr_format=zarr_format, consolidated=consolidated)
    return path


def _identity(url, **kwargs) -> list[dict[str, str]]:
    return zarrstream.Loader(url if isinstance(url, list) else str(url), **KWARGS,
                             **kwargs).dataset_identity


@pytest.mark.parametrize("zarr_format", [2, 3])
@pytest.mark.parametrize("consolidated", [True, False])
def test_a_plain_store_is_its_metadata_digest(tmp_path, zarr_format, consolidated):
    store = _xarray_store(tmp_path / "d.zarr", zarr_format, consolidated)
    (first,) = _identity(store)
    assert first == {"url": str(store), "kind": "zarr", "id": first["id"]}
    assert len(first["id"]) == 64 and int(first["id"], 16) >= 0
    # Stable across reopening, and the same through a file:// URL (which it records as given).
    assert _identity(store) == [first]
    assert _identity(store.as_uri())[0] == {**first, "url": store.as_uri()}
    # An attribute edited with zarr-python changes it (with consolidated metadata, once
    # consolidated again: until then the loader reads, and records, the old metadata).
    group = zarr.open_group(str(store), mode="r+", zarr_format=zarr_format)
    group["t"].attrs["units"] = "K"
    if consolidated:
        assert _identity(store) == [first]
        zarr.consolidate_metadata(str(store), zarr_format=zarr_format)
    (edited,) = _identity(store)
    assert edited["id"] != first["id"]
    # Chunks are not hashed: values rewritten under the same metadata keep the identity.
    zarr.open_group(str(store), mode="r+", zarr_format=zarr_format)["u"][0] = 0
    assert _identity(store) == [edited]


def test_consolidated_v3_digest_is_sha256_of_the_root_document(tmp_path):
    store = _xarray_store(tmp_path / "d.zarr", 3, True)
    document = (store / "zarr.json").read_bytes()
    framed = b"zarr.json\0" + str(len(document)).encode() + b"\0" + document
    assert _identity(store)[0]["id"] == hashlib.sha256(framed).hexdigest()


def test_a_kerchunk_reference_set_is_the_digest_of_its_file(tmp_path):
    values = np.arange(8, dtype="<f4").reshape(4, 2)
    refs = {
        "version": 1,
        "refs": {
            ".zgroup": json.dumps({"zarr_format": 2}),
            "a/.zarray": json.dumps({"zarr_format": 2, "shape": [4, 2], "chunks": [4, 2],
                                     "dtype": "<f4", "compressor": None, "fill_value": None,
                                     "filters": None, "order": "C"}),
            "a/.zattrs": json.dumps({"_ARRAY_DIMENSIONS": ["time", "x"]}),
            "a/0.0": "base64:" + base64.b64encode(values.tobytes()).decode(),
        },
    }
    path = tmp_path / "refs.json"
    path.write_text(json.dumps(refs))
    url = "reference://" + str(path)
    (identity,) = zarrstream.Loader(url, ["a"], sample={"time": 1}).dataset_identity
    assert identity == {"url": url, "kind": "kerchunk",
                        "id": hashlib.sha256(path.read_bytes()).hexdigest()}
    path.write_text(json.dumps(refs, indent=1))  # the same references, other bytes
    assert zarrstream.Loader(url, ["a"], sample={"time": 1}).dataset_identity[0]["id"] != identity["id"]


def test_resume_is_refused_on_other_metadata_unless_allowed(tmp_path):
    store = _xarray_store(tmp_path / "d.zarr", 3, False)
    loader = zarrstream.Loader(str(store), **KWARGS)
    next(iter(loader))
    state = loader.state_dict()
    assert state["dataset"] == loader.dataset_identity
    json.dumps(state)  # serialisable as it is
    # The same store: resumes.
    zarrstream.Loader(str(store), **KWARGS).load_state_dict(state)
    zarr.open_group(str(store), mode="r+")["t"].attrs["note"] = "edited"
    changed = zarrstream.Loader(str(store), **KWARGS)
    with pytest.raises(zarrstream.errors.ConfigError) as info:
        changed.load_state_dict(state)
    message = str(info.value)
    assert str(store) in message and state["dataset"][0]["id"] in message
    assert changed.dataset_identity[0]["id"] in message and "allow_dataset_change=True" in message
    changed.load_state_dict(state, allow_dataset_change=True)
    rest = list(changed)
    assert len(rest) == len(changed) - 1


def test_states_saved_before_the_identity_was_recorded(tmp_path):
    store = _xarray_store(tmp_path / "d.zarr", 3, True)
    loader = zarrstream.Loader(str(store), **KWARGS)
    next(iter(loader))
    old = {"sample_plan": loader.state_dict()["sample_plan"]}
    resumed = zarrstream.Loader(str(store), **KWARGS)
    resumed.load_state_dict(old)  # a plain store's old state carries nothing to compare
    assert len(list(resumed)) == len(resumed) - 1
    # An old state of an Icechunk snapshot: not this plain store.
    with pytest.raises(zarrstream.errors.ConfigError, match="allow_dataset_change"):
        zarrstream.Loader(str(store), **KWARGS).load_state_dict(
            {**old, "icechunk_snapshot": "0" * 20})
    with pytest.raises(zarrstream.errors.InvalidArgumentError, match="'dataset'"):
        zarrstream.Loader(str(store), **KWARGS).load_state_dict({**old, "dataset": "x"})


def test_joined_and_concatenated_datasets_record_each_store_in_order(tmp_path):
    a = _xarray_store(tmp_path / "a.zarr", 3, True, variables=("t",))
    b = _xarray_store(tmp_path / "b.zarr", 2, False, variables=("u",))
    ids = {p: _identity(p)[0]["id"] for p in (a, b)}
    joined = _identity([str(b), str(a)])
    assert [(s["url"], s["kind"], s["id"]) for s in joined] == [
        (str(b), "zarr", ids[b]), (str(a), "zarr", ids[a])]
    c = _xarray_store(tmp_path / "c.zarr", 3, True, start="2020-01-03", variables=("t",))
    concat = zarrstream.Loader({"concat": [str(a), str(c)]}, **KWARGS)
    assert [s["url"] for s in concat.dataset_identity] == [str(a), str(c)]
    nested = zarrstream.Loader([{"concat": [str(a), str(c)]}, str(b)], join="inner", **KWARGS)
    assert [s["url"] for s in nested.dataset_identity] == [str(a), str(c), str(b)]
    # Resuming a join on stores in another order (other data per position) is refused.
    loader = zarrstream.Loader([str(b), str(a)], **KWARGS)
    state = loader.state_dict()
    with pytest.raises(zarrstream.errors.ConfigError, match=str(a)):
        zarrstream.Loader([str(a), str(b)], **KWARGS).load_state_dict(state)
    # A pickled join of plain stores opens as it was.
    again = pickle.loads(pickle.dumps(loader))
    assert again.dataset_identity == loader.dataset_identity


def test_bench_json_records_the_identity(tmp_path):
    store = _xarray_store(tmp_path / "d.zarr", 3, True)
    report = tmp_path / "bench.json"
    result = run_cli("bench", str(store), "--sample", "time=2", "--steps", "2", "--json", str(report))
    assert result.returncode == 0, result.stderr
    assert json.loads(report.read_text())["dataset"] == _identity(store)

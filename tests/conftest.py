"""Shared helpers for the Python tests.

Fixtures are written by zarr-python (and tensorstore) inside the tests, under pytest's tmp_path, and
read back with zarrstream. Comparisons are bit-exact: values first (NaN-aware, for readable failure
messages), then the raw bytes in native byte order (catches NaN payloads, -0.0, bool bytes other
than 0/1).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterable

import numpy as np
import pytest

import zarrstream


def pytest_configure(config):
    # zarr-python warns about v2 arrays, numcodecs codecs and unstable specifications; that is the
    # point of the fixtures, not a problem.
    for line in (
        "ignore::UserWarning:zarr.*",
        "ignore::FutureWarning:zarr.*",
        "ignore::DeprecationWarning:zarr.*",
        "ignore::RuntimeWarning:zarr.*",
        "ignore:.*:zarr.errors.ZarrUserWarning",
        "ignore:.*not part of the Zarr format 3 specification.*",
        "ignore:.*Consolidated metadata.*",
    ):
        config.addinivalue_line("filterwarnings", line)


# The `zarrstream` command of the environment running the tests: beside its Python (a venv), else
# on PATH (a package installed with --target, as scripts/offline-build.sh does).
CLI = Path(sys.executable).parent / "zarrstream"
if not CLI.exists() and shutil.which("zarrstream"):
    CLI = Path(shutil.which("zarrstream"))


def run_cli(*args, timeout=300, env=None) -> subprocess.CompletedProcess:
    return subprocess.run([str(CLI), *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, env=env)


# ---------------------------------------------------------------------------------------------
# Data.

ALL_DTYPES = [
    "bool",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "float16",
    "float32",
    "float64",
    "complex64",
    "complex128",
]


def make_data(dtype, shape, seed: int = 0) -> np.ndarray:
    """Random data of `dtype` covering the type's range, with NaN, ±inf, -0.0 and subnormals in
    floating-point data (so byte-order and bit-exactness problems show)."""
    dtype = np.dtype(dtype)
    rng = np.random.default_rng(seed)
    shape = tuple(shape)
    n = int(np.prod(shape, dtype=np.int64))
    if dtype.kind == "b":
        out = rng.integers(0, 2, size=n).astype(bool)
    elif dtype.kind in "iu":
        info = np.iinfo(dtype)
        out = rng.integers(info.min, info.max, size=n, dtype=dtype.newbyteorder("="), endpoint=True)
    elif dtype.kind == "f":
        native = dtype.newbyteorder("=")
        out = (rng.standard_normal(n) * 1000).astype(native)
        specials = np.array(
            [np.nan, np.inf, -np.inf, -0.0, np.finfo(native).smallest_subnormal, np.finfo(native).max],
            dtype=native,
        )
        if n >= 2 * len(specials):
            pos = rng.choice(n, size=len(specials), replace=False)
            out[pos] = specials
    elif dtype.kind == "c":
        native = dtype.newbyteorder("=")
        out = (rng.standard_normal(n) + 1j * rng.standard_normal(n)).astype(native)
        if n >= 4:
            pos = rng.choice(n, size=3, replace=False)
            out[pos[0]] = complex(np.nan, 1.0)
            out[pos[1]] = complex(-np.inf, np.nan)
            out[pos[2]] = complex(-0.0, np.inf)
    else:
        raise ValueError(f"no generator for {dtype}")
    return out.reshape(shape).astype(dtype)


def make_compressible(dtype, shape, seed: int = 0) -> np.ndarray:
    """Data that compresses well (runs and slow ramps with a little noise), so that compressors
    really compress (random data makes blosc and lz4 store blocks verbatim)."""
    dtype = np.dtype(dtype)
    rng = np.random.default_rng(seed)
    shape = tuple(shape)
    n = int(np.prod(shape, dtype=np.int64))
    base = (np.arange(n) // 7) % 61 + (rng.random(n) < 0.05) * rng.integers(0, 5, n)
    if dtype.kind == "b":
        out = (base % 2).astype(bool)
    elif dtype.kind in "iu":
        out = (base - (30 if dtype.kind == "i" else 0)).astype(dtype.newbyteorder("="))
    elif dtype.kind == "f":
        out = (base * 0.25 - 3).astype(dtype.newbyteorder("="))
        if n > 10:
            out[n // 2] = np.nan
    else:
        out = (base * 0.5 + 1j * (base % 5)).astype(dtype.newbyteorder("="))
    return out.reshape(shape).astype(dtype)


def native(a: np.ndarray) -> np.ndarray:
    a = np.asarray(a)
    return a.astype(a.dtype.newbyteorder("="), copy=False)


def assert_bit_equal(got: Any, expected: Any, what: str = "") -> None:
    """`got` (from zarrstream) equals `expected` bit for bit; `got` must be in native byte order."""
    got = np.asarray(got)
    expected = np.asarray(expected)
    msg = f" ({what})" if what else ""
    assert got.shape == expected.shape, f"shape {got.shape} != expected {expected.shape}{msg}"
    want_dtype = expected.dtype.newbyteorder("=")
    assert got.dtype == want_dtype, f"dtype {got.dtype!r} != expected {want_dtype!r}{msg}"
    assert got.dtype.isnative, f"dtype {got.dtype!r} is not in native byte order{msg}"
    exp = native(expected)
    np.testing.assert_array_equal(got, exp, err_msg=f"values differ{msg}", strict=True)
    g = np.ascontiguousarray(got).view(np.uint8).reshape(got.shape + (got.dtype.itemsize,))
    e = np.ascontiguousarray(exp).view(np.uint8).reshape(exp.shape + (exp.dtype.itemsize,))
    np.testing.assert_array_equal(g, e, err_msg=f"bytes differ (values compare equal){msg}")


# ---------------------------------------------------------------------------------------------
# Index keys.


def index_keys(shape: tuple[int, ...], chunks: tuple[int, ...] | None = None) -> list[Any]:
    """Basic-indexing keys for an array of `shape`: whole, single chunk, across chunk boundaries, the
    edge chunk, negative indices, steps (also negative), integers dropping dimensions, Ellipsis,
    None, empty slices."""
    nd = len(shape)
    keys: list[Any] = [Ellipsis, ()]
    if nd == 0:
        return keys + [None, (None, Ellipsis), (Ellipsis, None)]
    chunks = tuple(chunks) if chunks is not None else tuple(max(1, s // 2) for s in shape)
    full = tuple(slice(None) for _ in shape)
    keys.append(full)
    # Exactly the first chunk, and a region strictly inside the first chunk.
    keys.append(tuple(slice(0, min(c, s)) for s, c in zip(shape, chunks)))
    keys.append(tuple(slice(1, max(1, min(c, s) - 1)) if min(c, s) > 2 else slice(0, 1)
                      for s, c in zip(shape, chunks)))
    # Across the first chunk boundary in every dimension.
    keys.append(tuple(slice(max(0, c - 1), min(s, c + 1)) for s, c in zip(shape, chunks)))
    # The last (possibly partial, edge) chunk, addressed with negative starts.
    keys.append(tuple(slice(-(s - (s - 1) // c * c), None) for s, c in zip(shape, chunks)))
    # Interior region with negative stop.
    keys.append(tuple(slice(1, -1) if s > 2 else slice(None) for s in shape))
    # Steps.
    keys.append(tuple(slice(None, None, 2) for _ in shape))
    keys.append(tuple(slice(None, None, -3) for _ in shape))
    keys.append((slice(1, None, 3),) + full[1:])
    keys.append((slice(-2, 0, -1),) + full[1:])
    # Integers dropping dimensions.
    keys.append(0)
    keys.append(-1)
    keys.append((Ellipsis, shape[-1] // 2))
    keys.append(tuple(s // 2 for s in shape))
    keys.append(tuple(-1 for _ in shape))
    if nd >= 2:
        keys.append((slice(None), -1) + (Ellipsis,))
        keys.append((1 % shape[0], Ellipsis, slice(None, None, 2)))
    # None (new axes) and Ellipsis in different places.
    keys.append((None,) + full)
    keys.append((Ellipsis, None))
    keys.append((0, None, Ellipsis) if nd > 1 else (None, 0))
    if nd >= 2:
        keys.append((slice(None), None, Ellipsis, None, slice(0, 1)))
    # Empty selections.
    keys.append((slice(2, 1),) + full[1:])
    keys.append((Ellipsis, slice(shape[-1], None)))
    # Dedupe while keeping order (keys are not all hashable across numpy versions: use repr).
    seen, out = set(), []
    for k in keys:
        r = repr(k)
        if r not in seen:
            seen.add(r)
            out.append(k)
    return out


# ---------------------------------------------------------------------------------------------
# Reading and checking.


def check_read(
    path: Path | str,
    expected: np.ndarray,
    *,
    chunks: tuple[int, ...] | None = None,
    keys: Iterable[Any] | None = None,
    **open_kwargs,
) -> zarrstream.Array:
    """Opens `path` with zarrstream and checks shape, dtype, read() and many slices against
    `expected` bit for bit. Returns the array."""
    a = zarrstream.open_array(str(path), **open_kwargs)
    expected = np.asarray(expected)
    assert a.shape == expected.shape
    assert a.dtype == expected.dtype.newbyteorder("=")
    assert_bit_equal(a.read(), expected, "read()")
    for key in keys if keys is not None else index_keys(expected.shape, chunks or a.chunks):
        assert_bit_equal(a[key], expected[key], f"a[{key!r}]")
    return a


def zarr_read(path: Path | str) -> np.ndarray:
    """What zarr-python reads at `path` (the reference)."""
    import zarr

    return zarr.open_array(str(path), mode="r")[...]


def check_against_zarr(path: Path | str, source: np.ndarray | None = None, **kwargs) -> zarrstream.Array:
    """zarr-python reads `source` back from `path` (when given: the fixture is what we think it is),
    and zarrstream reads exactly what zarr-python reads."""
    ref = zarr_read(path)
    if source is not None:
        assert_bit_equal(native(ref), source, "zarr-python's own read of the fixture")
    return check_read(path, ref, **kwargs)


def read_json(path: Path) -> dict:
    return json.loads(Path(path).read_text())


def write_json(path: Path, doc: Any) -> None:
    Path(path).write_text(json.dumps(doc, indent=2))


def chunk_files(root: Path) -> list[Path]:
    """Stored objects (chunks / shards) under an array directory, metadata excluded."""
    meta = {"zarr.json", ".zarray", ".zattrs", ".zgroup", ".zmetadata"}
    return sorted(p for p in Path(root).rglob("*") if p.is_file() and p.name not in meta)


def chunk_key(root: Path, file: Path) -> str:
    return Path(file).relative_to(root).as_posix()


@pytest.fixture
def store(tmp_path) -> Path:
    """A fresh store path (not yet created)."""
    return tmp_path / "store.zarr"


# ---------------------------------------------------------------------------------------------
# GPU tests: marked `gpu`, skipped without a CUDA device with the reason in the summary.


def _cuda_device() -> str | None:
    """The first CUDA device's name, or None."""
    try:
        import torch
    except ImportError:
        return None
    return torch.cuda.get_device_name(0) if torch.cuda.is_available() else None


def pytest_collection_modifyitems(config, items):
    gpu_items = [item for item in items if "gpu" in item.keywords]
    if gpu_items and _cuda_device() is None:
        skip = pytest.mark.skip(reason="GPU test: no CUDA device here (torch.cuda.is_available() is False)")
        for item in gpu_items:
            item.add_marker(skip)


def pytest_terminal_summary(terminalreporter):
    # A module skipped as a whole (an optional package missing) reports without keywords.
    skipped = [r for r in terminalreporter.stats.get("skipped", []) if "gpu" in getattr(r, "keywords", ())]
    if skipped:
        reasons: dict[str, int] = {}
        for report in skipped:
            # longrepr of a skip: (file, line, "Skipped: <reason>")
            reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
            reason = reason.removeprefix("Skipped: ").removeprefix("GPU test: ")
            reasons[reason] = reasons.get(reason, 0) + 1
        for reason, count in reasons.items():
            terminalreporter.write_line(f"{count} GPU tests SKIPPED: {reason}", yellow=True)

"""Arrays and groups: numpy-friendly wrappers over the C++ core."""

from __future__ import annotations

import json
import operator
from collections.abc import Mapping
from typing import Any, Iterator

import numpy as np

from . import _zarrstream


def _normalize_key(key: Any, shape: tuple[int, ...]):
    """Turns a numpy basic-indexing key into (start, count, post_index).

    The region [start, start + count) is read from storage; ``post_index`` (applied with numpy to
    that region) takes steps, drops integer-indexed dimensions and inserts new axes.
    """
    if not isinstance(key, tuple):
        key = (key,)
    n_real = sum(1 for k in key if k is not None and k is not Ellipsis)
    if sum(1 for k in key if k is Ellipsis) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    if n_real > len(shape):
        raise IndexError(
            f"too many indices for array: array is {len(shape)}-dimensional, "
            f"but {n_real} were indexed"
        )
    expanded: list[Any] = []
    for k in key:
        if k is Ellipsis:
            expanded.extend([slice(None)] * (len(shape) - n_real))
        else:
            expanded.append(k)
    if Ellipsis not in key:
        expanded.extend([slice(None)] * (len(shape) - n_real))

    start, count, post = [], [], []
    dim = 0
    for k in expanded:
        if k is None:
            post.append(None)
            continue
        size = shape[dim]
        if isinstance(k, slice):
            s0, s1, step = k.indices(size)
            indices = range(s0, s1, step)
            if len(indices) == 0:
                start.append(0)
                count.append(0)
                post.append(slice(None))
            else:
                lo, hi = min(indices[0], indices[-1]), max(indices[0], indices[-1]) + 1
                start.append(lo)
                count.append(hi - lo)
                post.append(slice(None, None, step))
        else:
            try:
                i = operator.index(k)
            except TypeError:
                raise IndexError(
                    "only integers, slices (':'), ellipsis ('...') and None are valid indices; "
                    f"got {k!r}"
                ) from None
            if i < -size or i >= size:
                raise IndexError(f"index {i} is out of bounds for axis {dim} with size {size}")
            i %= size
            start.append(i)
            count.append(1)
            post.append(0)
        dim += 1
    return start, count, tuple(post)


class Array:
    """A Zarr array (v2 or v3) opened with :func:`open_array` or from a :class:`Group`.

    Reading (``read()``, ``a[...]``) decodes chunks in parallel in C++ with the GIL released and
    returns numpy arrays in native byte order.
    """

    def __init__(self, core: _zarrstream.Array):
        self._core = core
        self.shape: tuple[int, ...] = tuple(core.shape)
        self.dtype: np.dtype = np.dtype(core.dtype)
        self.chunks: tuple[int, ...] = tuple(core.chunks)
        shard = core.shard_shape
        self.shard_shape: tuple[int, ...] | None = None if shard is None else tuple(shard)
        dims = core.dims
        self.dims: tuple[str, ...] | None = tuple(dims) if dims else None
        self.zarr_format: int = core.zarr_format
        self.attrs: dict = json.loads(core.attributes_json)
        self.codecs: list = json.loads(core.codecs_json)

    @property
    def url(self) -> str:
        return self._core.url

    @property
    def path(self) -> str:
        return self._core.path

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    @property
    def fill_value(self):
        """The fill value as a numpy scalar (None for v2 arrays whose fill_value is null)."""
        if self._core.fill_value_is_null:
            return None
        return np.frombuffer(self._core.fill_value_bytes, dtype=self.dtype)[0]

    @property
    def metadata(self) -> dict:
        """The metadata as a v3 zarr.json document (v2 metadata normalised)."""
        return json.loads(self._core.metadata_json)

    def read(self) -> np.ndarray:
        """Reads the whole array."""
        out = np.empty(self.shape, dtype=self.dtype)
        self._core.read_into([0] * self.ndim, list(self.shape), out)
        return out

    def read_region(self, start, shape, out: np.ndarray | None = None) -> np.ndarray:
        """Reads [start, start + shape) into ``out`` (allocated when None; any strides)."""
        if out is None:
            out = np.empty(tuple(shape), dtype=self.dtype)
        elif out.dtype != self.dtype:
            raise TypeError(f"out has dtype {out.dtype}, the array {self.dtype}")
        self._core.read_into([int(s) for s in start], [int(s) for s in shape], out)
        return out

    def __getitem__(self, key) -> np.ndarray:
        start, count, post = _normalize_key(key, self.shape)
        region = np.empty(tuple(count), dtype=self.dtype)
        if region.size:
            self._core.read_into(start, count, region)
        return region[post]

    def __array__(self, dtype=None, copy=None):
        data = self.read()
        return data if dtype is None else data.astype(dtype)

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d array")
        return self.shape[0]

    def __repr__(self) -> str:
        dims = f" dims={self.dims}" if self.dims else ""
        return (
            f"<zarrstream.Array {self.url} shape={self.shape} dtype={self.dtype} "
            f"chunks={self.chunks}{dims}>"
        )


class Group(Mapping):
    """A Zarr group: a mapping of member names to :class:`Array` and :class:`Group` objects.

    Members may be looked up by relative path (``group["sub/temperature"]``).
    """

    def __init__(self, core: _zarrstream.Group):
        self._core = core
        self.zarr_format: int = core.zarr_format
        self.attrs: dict = json.loads(core.attributes_json)

    @property
    def url(self) -> str:
        return self._core.url

    @property
    def path(self) -> str:
        return self._core.path

    @property
    def consolidated(self) -> bool:
        return self._core.consolidated

    def array_names(self) -> list[str]:
        return list(self._core.array_names)

    def group_names(self) -> list[str]:
        return list(self._core.group_names)

    def arrays(self) -> Iterator[tuple[str, Array]]:
        for name in self._core.array_names:
            yield name, self[name]

    def __getitem__(self, name: str):
        from .errors import InvalidArgumentError, NotFoundError

        try:
            return Array(self._core.open_array(name))
        except InvalidArgumentError:
            return Group(self._core.open_group(name))
        except NotFoundError as e:
            raise KeyError(name) from e

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(list(self._core.array_names) + list(self._core.group_names)))

    def __len__(self) -> int:
        return len(self._core.array_names) + len(self._core.group_names)

    def __contains__(self, name) -> bool:
        if name in self._core.array_names or name in self._core.group_names:
            return True
        try:
            self[name]
        except KeyError:
            return False
        return True

    def __repr__(self) -> str:
        return f"<zarrstream.Group {self.url} members={list(self)}>"


def open_array(url: str, *, num_threads: int = 0, missing_chunks: str = "fill") -> Array:
    """Opens the Zarr array at ``url`` (a local path or file:// URL).

    ``num_threads``: decode threads (0: a shared pool sized to the machine).
    ``missing_chunks``: ``"fill"`` (the Zarr spec: read as fill_value) or ``"error"``.
    """
    return Array(_zarrstream.open_array(url, num_threads, _missing_is_error(missing_chunks)))


def open_group(url: str, *, num_threads: int = 0, missing_chunks: str = "fill") -> Group:
    """Opens the Zarr group at ``url``; consolidated metadata is used when present."""
    return Group(_zarrstream.open_group(url, num_threads, _missing_is_error(missing_chunks)))


def _missing_is_error(missing_chunks: str) -> bool:
    if missing_chunks not in ("fill", "error"):
        from .errors import ConfigError

        raise ConfigError(f"missing_chunks must be 'fill' or 'error', not {missing_chunks!r}")
    return missing_chunks == "error"

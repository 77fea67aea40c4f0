"""Arrays and groups: numpy-friendly wrappers over the C++ core."""

from __future__ import annotations

import json
import math
import operator
import os
import resource
import urllib.parse
from collections.abc import Mapping
from typing import Any, Iterator

import numpy as np

from . import _zarrstream
from .errors import InvalidArgumentError, OutOfMemoryError, UnsupportedError

# The most dimensions a numpy array has (NPY_MAXDIMS).
_NUMPY_MAX_DIMS = 64


def _memory_limit_bytes() -> int:
    """The most bytes this process can hold: physical memory, or the address-space limit when that
    is lower (as the core's MemoryLimitBytes)."""
    limit = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft != resource.RLIM_INFINITY:
        limit = min(limit, soft)
    return limit


# Linux backs anonymous memory with 2 MiB pages only where a whole aligned 2 MiB of it lies in one
# mapping (numpy asks for them on large arrays); malloc's large blocks start anywhere.
_HUGE_PAGE = 2 << 20


def _empty(shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """np.empty, with a read's output of 4 MiB or more laid on whole 2 MiB pages of memory that
    outputs before it used. Left to malloc, its unaligned head and tail (up to 2 MiB each) are
    faulted in 4 KiB at a time as the decoders first write them: hundreds of page faults per output
    where a few would do, most of a fresh process's faults when it reads time steps. The pages past
    the output are reserved, never touched. And malloc gives such blocks back to the kernel when
    they are freed, so the next output of the size takes fresh pages, which the kernel zeroes as
    they are first written (a fifth of a whole-array read's CPU time on 2 cores): the block comes
    from zarrstream's block cache instead (``ZARRSTREAM_BUFFER_CACHE_MB``, shared with remote
    reads' bodies), and returns there once no view of the output is left."""
    nbytes = math.prod(shape) * dtype.itemsize
    if nbytes < 2 * _HUGE_PAGE or dtype.hasobject:
        return np.empty(shape, dtype=dtype)
    block = _zarrstream.reusable_bytes(-(-nbytes // _HUGE_PAGE) * _HUGE_PAGE + _HUGE_PAGE)
    start = -block.ctypes.data % _HUGE_PAGE
    return block[start:start + nbytes].view(dtype).reshape(shape)


def _carries_credentials(url: Any) -> bool:
    """Whether ``url`` holds user:password (HTTP basic auth): what a pickle must never hold."""
    text = os.fspath(url) if isinstance(url, os.PathLike) else str(url)
    return "://" in text and "@" in urllib.parse.urlsplit(text).netloc


def _without_credentials(url: str) -> str:
    """``url`` with any user:password dropped, for messages."""
    parts = urllib.parse.urlsplit(url)
    return parts._replace(netloc=parts.netloc.rpartition("@")[2]).geturl() if "://" in url else url


def _refuse_pickling_credentials(what: str, url: str, credentials: bool) -> None:
    if credentials:
        raise UnsupportedError(
            f"{what} {url} was opened with user:password in its URL, which zarrstream never writes "
            f"into a pickle: open it again in the receiving process (e.g. in a DataLoader's "
            f"worker_init_fn), or serve it where credentials come from the environment (s3://, "
            f"gs://)"
        )


def _is_scalar_bool(k: Any) -> bool:
    if isinstance(k, np.ndarray):
        return k.ndim == 0 and k.dtype == np.bool_
    return isinstance(k, (bool, np.bool_))


def _refuse_array_index(k: Any) -> None:
    """Index arrays (boolean masks, integer lists) are numpy's advanced indexing, which reads an
    arbitrary set of elements: refused by name rather than misread as a scalar."""
    if isinstance(k, (np.generic, int, slice)) or k is None or k is Ellipsis:
        return
    if isinstance(k, (np.ndarray, list)) or hasattr(k, "__array__"):
        a = np.asarray(k)
        if a.ndim == 0:
            return  # a scalar: an integer or boolean index
        kind = "boolean mask" if a.dtype == np.bool_ else "index array"
        raise IndexError(
            f"zarrstream arrays take basic indices only (integers, slices, '...', None, True, "
            f"False); a {kind} is advanced indexing: read the region (a[...] or a.read()) and "
            f"index the numpy result with it"
        )


def _expand_key(key: Any, shape: tuple[int, ...]) -> list[Any]:
    """A basic-indexing key as a list with the ellipsis expanded and missing trailing dimensions
    filled with ':' (None entries, new axes, kept)."""
    if not isinstance(key, tuple):
        key = (key,)
    for k in key:
        _refuse_array_index(k)
    # Scalar booleans add an axis (of length 1 or 0), as None does: they index no dimension.
    n_real = sum(1 for k in key if k is not None and k is not Ellipsis and not _is_scalar_bool(k))
    has_ellipsis = any(k is Ellipsis for k in key)  # `in` would compare index arrays with ==
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
    if not has_ellipsis:
        expanded.extend([slice(None)] * (len(shape) - n_real))
    return expanded


def _integer_index(k: Any, size: int, dim: int, slices: str) -> int:
    """An integer index into a dimension of ``size``, negative counting from the end."""
    try:
        i = operator.index(k)
    except TypeError:
        raise IndexError(
            f"only integers, {slices}, ellipsis ('...') and None are valid indices; got {k!r}"
        ) from None
    if i < -size or i >= size:
        raise IndexError(f"index {i} is out of bounds for axis {dim} with size {size}")
    return i % size


def _slice_range(k: slice, size: int) -> range:
    """The indices ``k`` takes of a dimension of ``size``, as a range: slice.indices would need
    sizes below 2^63, and a declared shape may be larger."""
    return range(size)[k]


def _range_is_empty(r: range) -> bool:
    return r.start >= r.stop if r.step > 0 else r.start <= r.stop


def _normalize_key(key: Any, shape: tuple[int, ...]):
    """Turns a numpy basic-indexing key into (start, count, post_index, empty_axes).

    The region [start, start + count) is read from storage; ``post_index`` (applied with numpy to
    that region) takes steps, drops integer-indexed dimensions and inserts new axes; the result's
    axes ``empty_axes`` (from False indices) then have length 0.
    """
    expanded = _expand_key(key, shape)

    start, count, post, empty_axes = [], [], [], []
    dim = 0
    for k in expanded:
        if k is None or _is_scalar_bool(k):
            if _is_scalar_bool(k) and not k:
                empty_axes.append(sum(1 for p in post if not isinstance(p, int)))
            post.append(None)
            continue
        size = shape[dim]
        if isinstance(k, slice):
            indices = _slice_range(k, size)
            step = indices.step
            if _range_is_empty(indices):
                start.append(0)
                count.append(0)
                post.append(slice(None))
            else:
                lo, hi = min(indices[0], indices[-1]), max(indices[0], indices[-1]) + 1
                start.append(lo)
                count.append(hi - lo)
                post.append(slice(None, None, step))
        else:
            i = _integer_index(k, size, dim, "slices (':')")
            start.append(i)
            count.append(1)
            post.append(0)
        dim += 1
    return start, count, tuple(post), empty_axes


def _normalize_write_key(key: Any, shape: tuple[int, ...]):
    """Turns a basic-indexing key for assignment into (start, count, selection_shape).

    Only contiguous regions can be written: slices must have step 1. ``selection_shape`` is the
    shape numpy gives ``a[key]`` (integer-indexed dimensions dropped, None axes inserted): what the
    assigned value is broadcast to.
    """
    expanded = _expand_key(key, shape)

    start, count, selection = [], [], []
    dim = 0
    for k in expanded:
        if _is_scalar_bool(k):
            raise IndexError("zarrstream writes do not take boolean indices (True, False)")
        if k is None:
            selection.append(1)
            continue
        size = shape[dim]
        if isinstance(k, slice):
            indices = _slice_range(k, size)
            s0, s1, step = indices.start, indices.stop, indices.step
            if step != 1:
                raise IndexError(
                    f"zarrstream writes contiguous regions only: slice step must be 1, got {step} "
                    f"(axis {dim})"
                )
            n = max(0, s1 - s0)
            start.append(s0 if n else 0)
            count.append(n)
            selection.append(n)
        else:
            start.append(_integer_index(k, size, dim, "step-1 slices (':')"))
            count.append(1)
        dim += 1
    return start, count, tuple(selection)


def _float_json(value: Any, dtype: np.dtype):
    """A float fill value in zarr.json form: a number, "NaN", "Infinity", "-Infinity", or the
    hex bit pattern of a NaN other than the canonical one (so no payload is lost)."""
    x = np.asarray(value).astype(dtype)
    if np.isnan(x):
        uint = np.dtype(f"u{dtype.itemsize}")
        bits = int(x.view(uint))
        if bits == int(np.asarray(np.nan, dtype=dtype).view(uint)):
            return "NaN"
        return f"0x{bits:0{2 * dtype.itemsize}x}"
    if np.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    return float(x)


def _fill_value_json(value: Any, dtype: np.dtype) -> str:
    """The fill value as zarr.json JSON for ``dtype`` (None: "null", the zero of the type)."""
    if value is None:
        return "null"
    if dtype.kind == "b":
        return json.dumps(bool(value))
    if dtype.kind in "iu":
        if isinstance(value, (float, np.floating)) and float(value).is_integer():
            value = int(value)
        try:
            return json.dumps(operator.index(value))
        except TypeError:
            raise TypeError(f"fill_value {value!r} is not an integer (dtype {dtype})") from None
    if dtype.kind == "f":
        return json.dumps(_float_json(value, dtype))
    if dtype.kind == "c":
        c = complex(value)
        part = np.dtype(f"f{dtype.itemsize // 2}")
        return json.dumps([_float_json(c.real, part), _float_json(c.imag, part)])
    raise TypeError(f"unsupported dtype {dtype}")


def _create_args(shape, dtype, chunks, shards, compressor, dims, fill_value, attrs) -> dict:
    """The arguments of the core create_array calls, from Python values."""
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    chunks = (chunks,) if isinstance(chunks, (int, np.integer)) else tuple(chunks)
    if shards is not None:
        shards = (shards,) if isinstance(shards, (int, np.integer)) else tuple(shards)
    dt = np.dtype(dtype)
    if not isinstance(compressor, str):
        compressor = json.dumps(list(compressor))  # a zarr.json "codecs" list
    return dict(
        shape=[int(s) for s in shape],
        dtype=dt.name,
        chunks=[int(c) for c in chunks],
        shards=None if shards is None else [int(s) for s in shards],
        compressor=compressor,
        dims=[] if dims is None else ["" if d is None else str(d) for d in dims],
        fill_value_json=_fill_value_json(fill_value, dt),
        attributes_json=json.dumps({} if attrs is None else dict(attrs), allow_nan=False),
    )


class Array:
    """A Zarr array (v2 or v3) opened with :func:`open_array` or from a :class:`Group`, or created
    with :func:`create_array`.

    Reading (``read()``, ``a[...]``) decodes chunks in parallel in C++ with the GIL released and
    returns numpy arrays in native byte order: the values as stored (Zarr semantics). Opened with
    ``open_array(url, decode_cf=True)``, reads return the CF-decoded values the loader delivers
    and xarray shows (``_FillValue``/``missing_value`` → NaN, ``x * scale_factor + add_offset``,
    ``_Unsigned``; docs/loader.md, "CF decoding"), and ``dtype`` is the decoded type (such an
    array is read-only). Writing (``write()``, ``a[...] = values``) encodes chunks in parallel the
    same way; chunks that end up all fill value are not stored.

    Pickling an array pickles its URL and how it was opened (``num_threads``, ``missing_chunks``,
    ``decode_cf``); unpickling opens it again there, so arrays travel to spawn and forkserver
    workers (a DataLoader's) and multiprocessing pools. Credentials never go into the pickle: the
    receiving process takes them from its environment (``AWS_*``, ``GS_*``), and an array whose URL
    carried user:password refuses to be pickled. In a fork()ed child an array opened in the parent
    reads as it does there (docs/ecosystem.md).
    """

    def __init__(self, core: _zarrstream.Array, decode_cf: bool = False,
                 options: dict | None = None, credentials: bool = False):
        self._core = core
        # How it was opened, to open it again when unpickled; whether its URL had user:password.
        self._options = {"num_threads": 0, "missing_chunks": "fill", **(options or {}),
                         "decode_cf": bool(decode_cf)}
        self._credentials = credentials
        self.shape: tuple[int, ...] = tuple(core.shape)
        # numpy's type of the values as stored: a core numeric type, datetime64/timedelta64 (read
        # as their int64 storage and viewed), "U"/"S" or object (text kinds, read element by element).
        self._stored_dtype = np.dtype(core.numpy_dtype)
        self._is_text: bool = core.text_kind != ""
        numeric = not self._is_text and self._stored_dtype.kind not in "mM"
        self._cf: dict | None = core.cf_decoding() if decode_cf and numeric else None
        self.dtype: np.dtype = self._stored_dtype
        if self._cf is not None:
            self.dtype = np.dtype(self._cf["decoded"] or self._cf["source"])
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

    def __reduce__(self):
        _refuse_pickling_credentials("array", self.url, self._credentials)
        snapshot = self._core.icechunk_snapshot
        options = _pinned(self._options, snapshot)
        if snapshot and self.path:
            # An array inside an Icechunk repository opens from the repository's root, which is
            # what a ref names: its own URL is no repository.
            root = self.url[: -len(self.path)].rstrip("/")
            return _reopen_member_array, (root, self.path, options)
        return _reopen_array, (self.url, options)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)  # Python integers: a declared shape may pass 2^63

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    @property
    def fill_value(self):
        """The fill value as a numpy scalar (None for v2 arrays whose fill_value is null)."""
        if self._core.fill_value_is_null:
            return None
        if self._is_text:
            return self._elements([self._core.text_fill_value], ())[()]
        if self._stored_dtype.kind in "mM":
            return np.frombuffer(self._core.fill_value_bytes, dtype="=i8").view(self._stored_dtype)[0]
        return np.frombuffer(self._core.fill_value_bytes, dtype=self._stored_dtype)[0]

    @property
    def metadata(self) -> dict:
        """The metadata as a v3 zarr.json document (v2 metadata normalised)."""
        return json.loads(self._core.metadata_json)

    def _decoded(self, stored: np.ndarray) -> np.ndarray:
        """``stored`` CF-decoded with xarray's arithmetic (its CFMaskCoder then CFScaleOffsetCoder):
        converted to the decoded type, fill values (rounded to it) → NaN, then ``*=
        scale_factor`` and ``+= add_offset``, each rounded in that type."""
        cf = self._cf
        if cf is None:
            return stored
        values = stored.view(np.dtype(cf["source"]))
        if cf["decoded"] is None:
            return values
        values = values.astype(cf["decoded"])
        if cf["fill_values"]:
            missing = np.zeros(values.shape, dtype=bool)
            for fill in cf["fill_values"]:
                missing |= values == fill
            values[missing] = np.nan
        if cf["scale_factor"] is not None:
            values *= cf["scale_factor"]
        if cf["add_offset"] is not None:
            values += cf["add_offset"]
        return values

    def _output(self, shape: tuple[int, ...], what: str) -> np.ndarray:
        """An uninitialised numpy array of ``shape`` (of the stored type) for a read:
        ZarrstreamErrors, not numpy's, when numpy cannot have that many dimensions or the memory
        is not there."""
        if len(shape) > _NUMPY_MAX_DIMS:
            raise UnsupportedError(
                f"{what} of {self.url}: the region has {len(shape)} dimensions, numpy arrays at "
                f"most {_NUMPY_MAX_DIMS}"
            )
        nbytes = math.prod(shape) * self._stored_dtype.itemsize

        def out_of_memory(why: str = ""):
            return OutOfMemoryError(
                f"out of memory: {what} of {self.url} needs {nbytes} bytes (shape {shape}, "
                f"{self._stored_dtype}){why}; read a smaller region"
            )

        # Refused before numpy tries: with overcommit an allocation beyond memory may succeed and
        # the read then end in the OOM killer.
        limit = _memory_limit_bytes()
        if nbytes > limit:
            raise out_of_memory(f", more than this machine's {limit} bytes of memory")
        try:
            return _empty(shape, self._stored_dtype)
        except MemoryError:
            raise out_of_memory() from None

    def _elements(self, items: list, shape: tuple[int, ...]) -> np.ndarray:
        """The numpy array of a text kind's elements (``read_text``'s bytes, C order), as
        zarr-python gives it: str or bytes objects, decoded JSON values, or "U"/"S" values."""
        kind = self._core.text_kind
        if kind == "fixed_utf32":
            return np.array([b.decode("utf-8") for b in items], dtype=self.dtype).reshape(shape)
        if kind == "fixed_bytes":
            return np.array(items, dtype=self.dtype).reshape(shape)
        out = np.empty(len(items), dtype=object)
        for i, b in enumerate(items):  # one by one: a JSON list must stay one element
            out[i] = b.decode("utf-8") if kind == "string" else json.loads(b) if kind == "json" else b
        return out.reshape(shape)

    def _read_into(self, start: list[int], count: list[int], out: np.ndarray) -> None:
        """Reads [start, start + count) into ``out`` (any strides)."""
        if self._is_text:
            out[...] = self._elements(self._core.read_text(start, count), tuple(count))
        elif self._stored_dtype.kind in "mM":
            self._core.read_into(start, count, out.view("=i8"))
        else:
            self._core.read_into(start, count, out)

    def read(self) -> np.ndarray:
        """Reads the whole array."""
        out = self._output(self.shape, "reading the whole array")
        self._read_into([0] * self.ndim, list(self.shape), out)
        return self._decoded(out)

    def read_region(self, start, shape, out: np.ndarray | None = None) -> np.ndarray:
        """Reads [start, start + shape) into ``out`` (allocated when None; any strides)."""
        start, shape = [operator.index(s) for s in start], [operator.index(s) for s in shape]
        if any(s < 0 for s in start + shape):
            raise InvalidArgumentError(
                f"read of {self.url}: region start {start} and shape {shape} must not be negative"
            )
        if out is not None and out.dtype != self.dtype:
            raise TypeError(f"out has dtype {out.dtype}, the array {self.dtype}")
        if self._cf is not None:
            region = self._output(tuple(shape), "reading a region")
            self._read_into(start, shape, region)
            if out is None:
                return self._decoded(region)
            out[...] = self._decoded(region)
            return out
        if out is None:
            out = self._output(tuple(shape), "reading a region")
        self._read_into(start, shape, out)
        return out

    def __getitem__(self, key) -> np.ndarray:
        start, count, post, empty_axes = _normalize_key(key, self.shape)
        if empty_axes:
            # A False index: nothing is read; numpy's result shape, from a view that holds none.
            shape = list(np.broadcast_to(np.empty((), self.dtype), count)[post].shape)
            for axis in empty_axes:
                shape[axis] = 0
            return np.empty(shape, dtype=self.dtype)
        region = self._output(tuple(count), "reading a region")
        if region.size:
            self._read_into(start, count, region)
        return self._decoded(region)[post]

    def _refuse_decoded_write(self) -> None:
        if self._cf is not None:
            raise UnsupportedError(
                f"{self.url} was opened with decode_cf=True, which reads decoded values: "
                f"open it without decode_cf to write stored values"
            )

    def write(self, start, data) -> None:
        """Writes ``data`` (an array of the array's rank, cast to its dtype) at ``start``.

        Chunks the region covers wholly are encoded without reading; chunks it covers in part are
        read, merged and rewritten. Disjoint stored objects (chunks, or shards when sharded) may be
        written from several threads or processes at once.
        """
        self._refuse_decoded_write()
        data = np.asarray(data)
        if data.dtype != self.dtype:
            data = data.astype(self.dtype)
        self._core.write_from([int(s) for s in start], self._storage(data))

    def __setitem__(self, key, value) -> None:
        self._refuse_decoded_write()
        start, count, selection = _normalize_write_key(key, self.shape)
        value = np.asarray(value)
        if value.dtype != self.dtype:
            value = value.astype(self.dtype)
        # Broadcasting gives zero strides, not copies: a scalar fills any region without memory.
        data = np.broadcast_to(value, selection).reshape(count)
        if data.size:
            self._core.write_from(start, self._storage(data))

    def _storage(self, data: np.ndarray) -> np.ndarray:
        """``data`` as the core stores it: datetime64/timedelta64 as their int64 counts."""
        if self._is_text:
            raise UnsupportedError(f"write to {self.url}: writing {self.dtype} arrays is not supported")
        return data.view("=i8") if self.dtype.kind in "mM" else data

    def set_attrs(self, attrs: Mapping) -> None:
        """Replaces the array's attributes (a JSON-serialisable mapping) in zarr.json."""
        text = json.dumps(dict(attrs), allow_nan=False)
        self._core.set_attributes(text)
        self.attrs = json.loads(text)

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

    Members may be looked up by relative path (``group["sub/temperature"]``). Members created
    through this object (``create_array``, ``create_group``) show at once, except in a group with
    consolidated metadata: that lists what its consolidated metadata says until
    :meth:`consolidate_metadata` runs again. Members created by other writers show in a group
    opened after them.

    Pickling pickles the URL and the open options, as :class:`Array` does.
    """

    def __init__(self, core: _zarrstream.Group, options: dict | None = None,
                 credentials: bool = False):
        self._handle = core
        self._options = {"num_threads": 0, "missing_chunks": "fill", **(options or {})}
        self._credentials = credentials
        self._stale = False
        self.zarr_format: int = core.zarr_format
        self.attrs: dict = json.loads(core.attributes_json)

    @property
    def _core(self) -> _zarrstream.Group:
        # A core group is a snapshot of the members it was opened with. After this object changed
        # the hierarchy, the next look at it opens the group again: once, however many members
        # were created in between.
        if self._stale:
            self._handle = self._handle.reopen()
            self._stale = False
        return self._handle

    @property
    def url(self) -> str:
        return self._core.url

    @property
    def path(self) -> str:
        return self._core.path

    @property
    def consolidated(self) -> bool:
        return self._core.consolidated

    def __reduce__(self):
        _refuse_pickling_credentials("group", self.url, self._credentials)
        return _reopen_group, (self.url, _pinned(self._options, self._core.icechunk_snapshot))

    def array_names(self) -> list[str]:
        return list(self._core.array_names)

    def group_names(self) -> list[str]:
        return list(self._core.group_names)

    def arrays(self) -> Iterator[tuple[str, Array]]:
        for name in self._core.array_names:
            yield name, self[name]

    def __getitem__(self, name: str):
        from .errors import NotFoundError

        try:
            return Array(self._core.open_array(name), options=self._options,
                         credentials=self._credentials)
        except InvalidArgumentError:
            return Group(self._core.open_group(name), self._options, self._credentials)
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

    def create_array(
        self,
        name: str,
        shape,
        dtype,
        chunks,
        shards=None,
        compressor="zstd:3",
        dims=None,
        fill_value=None,
        attrs: Mapping | None = None,
        overwrite: bool = False,
    ) -> Array:
        """Creates a Zarr v3 array named ``name`` (a relative path) in this group; see
        :func:`create_array`."""
        args = _create_args(shape, dtype, chunks, shards, compressor, dims, fill_value, attrs)
        core = self._handle.create_array(name, overwrite=overwrite, **args)
        self._stale = True
        return Array(core, options=self._options, credentials=self._credentials)

    def create_group(self, name: str, attrs: Mapping | None = None, overwrite: bool = False) -> "Group":
        """Creates a Zarr v3 group named ``name`` (a relative path) in this group."""
        text = json.dumps({} if attrs is None else dict(attrs), allow_nan=False)
        core = self._handle.create_group(name, text, overwrite)
        self._stale = True
        return Group(core, self._options, self._credentials)

    def consolidate_metadata(self) -> None:
        """Writes the metadata of every node below this group into its zarr.json (inline
        consolidated metadata, as zarr-python writes it), so opening the hierarchy takes one read.
        Nodes created later are not in it until this runs again."""
        self._handle.consolidate_metadata()
        self._stale = True

    def __repr__(self) -> str:
        return f"<zarrstream.Group {self.url} members={list(self)}>"


def open_array(
    url: str, *, num_threads: int = 0, missing_chunks: str = "fill", decode_cf: bool = False,
    ref: str | None = None,
) -> Array:
    """Opens the Zarr array at ``url`` (a local path or file:// URL).

    ``num_threads``: decode threads (0: a shared pool sized to the machine).
    ``missing_chunks``: ``"fill"`` (the Zarr spec: read as fill_value) or ``"error"``.
    ``decode_cf``: reads return CF-decoded values, as the loader and xarray see them (fill values
    NaN, packed variables unpacked); False (the default) keeps Zarr's values as stored.
    ``ref``: for an Icechunk repository at ``url`` (docs/icechunk.md), the branch, tag or snapshot
    id to read (None: branch ``main``).
    """
    core = _zarrstream.open_array(url, _num_threads(num_threads), _missing_is_error(missing_chunks),
                                  ref or "")
    options = {"num_threads": num_threads, "missing_chunks": missing_chunks}
    if ref:
        options["ref"] = ref
    return Array(core, decode_cf=decode_cf, options=options, credentials=_carries_credentials(url))


def open_group(url: str, *, num_threads: int = 0, missing_chunks: str = "fill",
               ref: str | None = None) -> Group:
    """Opens the Zarr group at ``url``; consolidated metadata is used when present.

    ``ref``: for an Icechunk repository at ``url`` (docs/icechunk.md), the branch, tag or snapshot
    id to read (None: branch ``main``).
    """
    core = _zarrstream.open_group(url, _num_threads(num_threads), _missing_is_error(missing_chunks),
                                  ref or "")
    options = {"num_threads": num_threads, "missing_chunks": missing_chunks}
    if ref:
        options["ref"] = ref
    return Group(core, options, _carries_credentials(url))


def _checked_pickle(what: str, url: Any, options: Any, allowed: dict[str, tuple[type, ...]]) -> None:
    """Refuses the state of a pickled array or group that zarrstream did not write (tampered
    with, or from another version): an InvalidArgumentError naming the field, not whatever the
    open would raise on it."""
    problem = None
    if not isinstance(url, str):
        problem = f"its URL is {type(url).__name__} {url!r:.80}, not text"
    elif not isinstance(options, dict):
        problem = f"its options are {type(options).__name__}, not a dict"
    else:
        for key, value in options.items():
            if key not in allowed:
                problem = f"it has an unknown option {key!r:.80}"
            elif not isinstance(value, allowed[key]) or (isinstance(value, bool) and
                                                          bool not in allowed[key]):
                problem = f"its option {key} is {value!r:.80}"
            if problem:
                break
    if problem:
        raise InvalidArgumentError(f"unpickling a zarrstream {what}: {problem}, which zarrstream "
                                   "does not write (the pickle was altered or is from another "
                                   "version)")


_PICKLED_GROUP_OPTIONS = {"num_threads": (int,), "missing_chunks": (str,), "ref": (str,)}


def _pinned(options: dict, snapshot: str) -> dict:
    """The open options a pickle carries: an Icechunk repository's at the snapshot read (not the
    branch or tag it was opened by), so that a branch moved since does not change the data."""
    return {**options, "ref": snapshot} if snapshot else options


def _reopen_array(url: str, options: dict) -> Array:
    """An unpickled :class:`Array`: opened again from its URL and open options."""
    _checked_pickle("array", url, options, {**_PICKLED_GROUP_OPTIONS, "decode_cf": (bool,)})
    return open_array(url, **options)


def _reopen_member_array(root: str, path: str, options: dict) -> Array:
    """An unpickled :class:`Array` of an Icechunk repository: opened from the repository's root."""
    _checked_pickle("array", root, options, {**_PICKLED_GROUP_OPTIONS, "decode_cf": (bool,)})
    if not isinstance(path, str) or not path:
        raise InvalidArgumentError(f"a pickled array of {root} names no array path: {path!r}")
    group_options = {k: v for k, v in options.items() if k != "decode_cf"}
    group = open_group(root, **group_options)
    return Array(group._core.open_array(path), decode_cf=options.get("decode_cf", False),
                 options=group_options)


def _reopen_group(url: str, options: dict) -> Group:
    """An unpickled :class:`Group`: opened again from its URL and open options."""
    _checked_pickle("group", url, options, _PICKLED_GROUP_OPTIONS)
    return open_group(url, **options)


def create_array(
    url: str,
    shape,
    dtype,
    chunks,
    shards=None,
    compressor="zstd:3",
    dims=None,
    fill_value=None,
    attrs: Mapping | None = None,
    overwrite: bool = False,
    *,
    num_threads: int = 0,
) -> Array:
    """Creates a Zarr v3 array at ``url`` and returns it open for reading and writing.

    ``chunks``: the read-chunk shape; with ``shards``, the inner chunks of shards of that shape
    (each a multiple of ``chunks``). ``compressor``: ``"none"``, ``"zstd[:level]"``,
    ``"gzip[:level]"``, ``"lz4"``, ``"blosc[:cname[:clevel[:shuffle|bitshuffle|noshuffle]]]"``, or
    a complete zarr.json ``codecs`` list (then ``shards`` must be None). ``dims``: dimension names.
    ``fill_value``: what unwritten chunks read as (None: zero of the dtype). ``overwrite``: replace
    a node already at ``url`` and everything below it; otherwise that is an error.
    """
    args = _create_args(shape, dtype, chunks, shards, compressor, dims, fill_value, attrs)
    return Array(
        _zarrstream.create_array(url, overwrite=overwrite, num_threads=_num_threads(num_threads), **args),
        options={"num_threads": num_threads}, credentials=_carries_credentials(url),
    )


def create_group(
    url: str, attrs: Mapping | None = None, overwrite: bool = False, *, num_threads: int = 0
) -> Group:
    """Creates a Zarr v3 group at ``url`` (``overwrite`` replaces a node there and everything below
    it)."""
    text = json.dumps({} if attrs is None else dict(attrs), allow_nan=False)
    core = _zarrstream.create_group(url, text, overwrite, num_threads=_num_threads(num_threads))
    return Group(core, {"num_threads": num_threads}, _carries_credentials(url))


def _num_threads(value: Any) -> int:
    """``num_threads`` as an integer from 0 to 65536: a ConfigError for anything else."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or \
            not 0 <= value <= 1 << 16:
        from .errors import ConfigError

        raise ConfigError(f"num_threads={value!r}: expected 0 (a shared pool) or a number of threads")
    return int(value)


def _missing_is_error(missing_chunks: str) -> bool:
    if missing_chunks not in ("fill", "error"):
        from .errors import ConfigError

        raise ConfigError(f"missing_chunks must be 'fill' or 'error', not {missing_chunks!r}")
    return missing_chunks == "error"

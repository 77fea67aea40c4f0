"""xarray backend: ``xr.open_dataset(url, engine="zarrstream")``.

The store is opened with zarrstream (local paths, file://, http(s)://, s3:// ...) and every read of
a variable goes through zarrstream's C++ read path (chunks fetched and decoded in parallel, the GIL
released). The backend hands xarray the values as stored, with the attributes and encoding xarray's
own zarr backend gives, and xarray's CF decoding (masking, scaling, times, strings) runs on them as
it does for ``engine="zarr"``: the decoded Dataset is the one ``xr.open_zarr`` gives.

Registered with xarray through the ``xarray.backends`` entry point of the package (pyproject.toml);
xarray is imported only when xarray loads this module.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import operator
import os
import warnings
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np
from xarray.backends.common import (
    AbstractDataStore,
    BackendArray,
    BackendEntrypoint,
    _normalize_path,
    datatree_from_dict_with_io_cleanup,
)
from xarray.backends.store import StoreBackendEntrypoint
from xarray.backends.zarr import FillValueCoder
from xarray.coding.strings import create_vlen_dtype
from xarray.core import indexing
from xarray.core.dataset import Dataset
from xarray.core.datatree import DataTree
from xarray.core.utils import FrozenDict
from xarray.core.variable import Variable

from . import _zarrstream
from ._array import Array, Group, open_array, open_group
from .errors import (
    ConfigError,
    InvalidArgumentError,
    MetadataError,
    NotFoundError,
    ZarrstreamError,
)

# Where Zarr v2 arrays written by xarray keep their dimension names.
_V2_DIMENSIONS = "_ARRAY_DIMENSIONS"


class ZarrstreamBackendArray(BackendArray):
    """A lazily indexed zarrstream array. xarray's indexers arrive as outer indexers (integers,
    slices, sorted index arrays; xarray applies the rest of a vectorized indexer in numpy); each read
    covers only the chunks the indexer touches."""

    __slots__ = ("_array", "dtype", "shape")

    def __init__(self, array: Array):
        self._array = array
        self.shape = array.shape
        dtype = array.dtype
        # Variable-length UTF-8 is object dtype tagged with its element type, as xarray's zarr
        # backend gives it: xarray's string coding reads the tag.
        if array._core.text_kind == "string":
            dtype = create_vlen_dtype(str)
        self.dtype = dtype

    def __getitem__(self, key: indexing.ExplicitIndexer) -> np.ndarray:
        return indexing.explicit_indexing_adapter(
            key, self.shape, indexing.IndexingSupport.OUTER, self._read
        )

    async def async_getitem(self, key: indexing.ExplicitIndexer) -> np.ndarray:
        # Reads release the GIL: in a thread each, the variables of `await ds.load_async()` load
        # side by side.
        return await asyncio.to_thread(self.__getitem__, key)

    def _read(self, key: tuple) -> np.ndarray:
        # Every axis is kept through the read (an integer is a length-1 slice) and the integer-indexed
        # ones dropped at the end by a reshape, so the result is an array even where every axis is
        # dropped (numpy's a[0] of a 1-d array is a scalar, and a text element would lose its dtype).
        axes: list[list[tuple[slice, Any, Any]]] = []  # per axis: (region, output places, picks)
        shape, kept = [], []
        for k, size, chunk in zip(key, self.shape, self._array.chunks):
            if isinstance(k, slice) and (k.step or 1) > chunk:
                # Steps longer than a chunk skip chunks: read as the indices they pick.
                k = np.arange(*k.indices(size))
            if isinstance(k, slice):
                axes.append([(k, slice(None), slice(None))])
                shape.append(len(range(*k.indices(size))))
            elif isinstance(k, np.ndarray):
                axes.append(_chunk_runs(k, chunk))
                shape.append(len(k))
            else:
                i = operator.index(k) % size
                axes.append([(slice(i, i + 1), slice(None), slice(None))])
                shape.append(1)
            kept.append(not isinstance(k, (int, np.integer)))
        if all(len(runs) == 1 and isinstance(runs[0][2], slice) for runs in axes):
            out = self._array[tuple(runs[0][0] for runs in axes)]
        else:
            out = np.empty(shape, dtype=self.dtype)
            for combination in itertools.product(*axes):
                region = self._array[tuple(region for region, _, _ in combination)]
                places = []
                for axis, (_, place, picks) in enumerate(combination):
                    if isinstance(picks, np.ndarray):
                        region = np.take(region, picks, axis=axis)
                    places.append(np.arange(shape[axis])[place])
                out[np.ix_(*places)] = region
        return out.reshape([n for n, keep in zip(out.shape, kept) if keep])


def _chunk_runs(indices: np.ndarray, chunk: int) -> list[tuple[slice, np.ndarray, np.ndarray]]:
    """Sorted indices along an axis of chunk length ``chunk`` as the regions to read: one for each
    run of indices whose chunks follow one another, so the regions together cover exactly the
    chunks holding the indices. Each comes with the output places of its indices and their
    positions inside the region."""
    chunk_numbers = indices // chunk
    breaks = np.flatnonzero(np.diff(chunk_numbers) > 1) + 1
    runs = []
    for places in np.split(np.arange(len(indices)), breaks):
        lo, hi = int(indices[places[0]]), int(indices[places[-1]]) + 1
        runs.append((slice(lo, hi), places, indices[places] - lo))
    return runs


def _dimensions(array: Array, name: str) -> tuple[str, ...]:
    dims = array.dims or ()
    if len(dims) != array.ndim or any(d == "" for d in dims):
        where = "dimension_names" if array.zarr_format == 3 else f"attribute {_V2_DIMENSIONS}"
        raise MetadataError(
            f"array '{name}' of {array.url} has no name for each of its {array.ndim} dimensions "
            f"(Zarr v{array.zarr_format} {where}): xarray needs them"
        )
    return tuple(dims)


class ZarrstreamStore(AbstractDataStore):
    """The arrays of one Zarr group as xarray Variables holding their stored values."""

    def __init__(self, group: Group, arrays: dict[str, Array], use_zarr_fill_value_as_mask: bool | None):
        self._group = group
        self._arrays = arrays
        if use_zarr_fill_value_as_mask is None:
            # xarray's defaults: v2's fill_value is netCDF's _FillValue; v3 keeps _FillValue as an
            # attribute of its own.
            use_zarr_fill_value_as_mask = group.zarr_format == 2
        self._fill_value_as_mask = use_zarr_fill_value_as_mask

    @classmethod
    def of_group(cls, node: Group, *, consolidated: bool | None, use_zarr_fill_value_as_mask: bool | None,
                 drop_variables: Iterable[str], num_threads: int) -> ZarrstreamStore:
        drop = set(drop_variables)
        if consolidated is False and node.consolidated:
            arrays = _listed_arrays(node.url, drop, num_threads)
        else:
            arrays = {n: node[n] for n in node.array_names() if n not in drop}
        return cls(node, arrays, use_zarr_fill_value_as_mask)

    def get_attrs(self) -> dict:
        return {k: v for k, v in self._group.attrs.items() if not k.lower().startswith("_nc")}

    def get_variables(self) -> FrozenDict:
        return FrozenDict((name, self._variable(name, a)) for name, a in self._arrays.items())

    def _variable(self, name: str, array: Array) -> Variable:
        dims = _dimensions(array, name)
        attributes = dict(array.attrs)
        if array.zarr_format == 2:
            attributes.pop(_V2_DIMENSIONS, None)
            attributes = {k: v for k, v in attributes.items() if not k.lower().startswith("_nc")}
        data = indexing.LazilyIndexedArray(ZarrstreamBackendArray(array))
        encoding: dict[str, Any] = {
            "chunks": array.chunks,
            "preferred_chunks": dict(zip(dims, array.chunks)),
            "shards": array.shard_shape,
        }
        fill_value = None if _v2_fill_value_is_null(array) else array.fill_value
        if self._fill_value_as_mask:
            if fill_value is not None:
                attributes["_FillValue"] = fill_value
        else:
            if array.zarr_format == 3:
                encoding["fill_value"] = fill_value
            if "_FillValue" in attributes:
                # xarray writes a float _FillValue attribute base64-encoded (its FillValueCoder).
                attributes["_FillValue"] = FillValueCoder.decode(
                    attributes["_FillValue"], _fill_value_dtype(array)
                )
        return Variable(dims, data, attributes, encoding)


def _open_node(url: str, *, group: str | None, consolidated: bool | None, zarr_format: int | None,
               num_threads: int, ref: str | None) -> Group:
    """The group at ``group`` below ``url``, opened from the root (whose consolidated metadata
    covers the whole hierarchy); of an Icechunk repository, at ``ref``."""
    root = open_group(url, num_threads=num_threads, ref=ref)
    if root.attrs.get("zarrstream_rechunk") == "unfinished":
        # Opened as engine="zarr" opens it, but said: the loader refuses such a store.
        warnings.warn(f"{root.url} is the destination of a `zarrstream rechunk` job that has not "
                      f"finished: chunks not yet written read as fill values", stacklevel=4)
    if zarr_format is not None and zarr_format != root.zarr_format:
        raise NotFoundError(
            f"{root.url} is a Zarr v{root.zarr_format} group, not v{zarr_format} (zarr_format={zarr_format})"
        )
    if consolidated and not root.consolidated:
        raise NotFoundError(
            f"{root.url} has no consolidated metadata (consolidated=True); open it with "
            f"consolidated=None or False"
        )
    if not group or not group.strip("/"):
        return root
    try:
        node = root[group.strip("/")]
    except KeyError:
        raise NotFoundError(f"no group '{group}' in {root.url}") from None
    if not isinstance(node, Group):
        raise NotFoundError(f"'{group}' in {root.url} is an array, not a group")
    return node


def _walk(node: Group, path: str) -> Iterator[tuple[str, Group]]:
    """``node`` (at ``path``: "/" or ".") and every group below it, with their paths ("/sub",
    "/sub/inner" or "sub", "sub/inner")."""
    yield path, node
    prefix = "" if path == "." else path.rstrip("/") + "/"
    for name in node.group_names():
        yield from _walk(node[name], prefix + name)


def _v2_fill_value_is_null(array: Array) -> bool:
    """Whether a v2 array's fill_value is null, which zarr-python (and so xarray) reads as no fill
    value at all. zarrstream gives a text or time array with a null fill value the empty string or
    NaT (its fill for missing chunks); .zarray says which it was."""
    if array.zarr_format != 2:
        return False
    if array._core.text_kind == "" and array.dtype.kind not in "mM":
        return array.fill_value is None
    try:
        (document,) = _zarrstream.open_store(array.url).read(".zarray", [("from", 0, 0)])
    except NotFoundError:
        return False  # a store of consolidated metadata only: zarrstream's fill value stands
    return json.loads(document).get("fill_value") is None


def _fill_value_dtype(array: Array) -> str | np.dtype:
    """The data type FillValueCoder.decode expects: zarr-python's v3 names for variable-length
    text, else numpy's."""
    kind = array._core.text_kind
    if kind == "string":
        return "string"
    if kind == "bytes":
        return "bytes"
    return array.dtype


def _listed_arrays(group_url: str, drop: set[str], num_threads: int) -> dict[str, Array]:
    """The arrays of the group at ``group_url`` found by listing its store, each opened from its
    own metadata document: what the group holds now, where its consolidated metadata may be stale."""
    _, prefixes = _zarrstream.open_store(group_url).list_dir("")
    arrays = {}
    for prefix in sorted(prefixes):
        name = prefix.rstrip("/").rsplit("/", 1)[-1]
        if name in drop:
            continue
        try:
            arrays[name] = open_array(group_url.rstrip("/") + "/" + name, num_threads=num_threads)
        except (NotFoundError, InvalidArgumentError):
            continue  # a group, or a folder that holds no Zarr node
    return arrays


class ZarrstreamBackendEntrypoint(BackendEntrypoint):
    """``xr.open_dataset(url, engine="zarrstream")``: a Zarr group (v2 or v3, local or remote) read
    through zarrstream, decoded by xarray as ``xr.open_zarr`` decodes it.

    Options as ``xr.open_zarr``'s: ``group``, ``consolidated`` (None: consolidated metadata when
    present; True: required; False: each array's own metadata), ``use_zarr_fill_value_as_mask``,
    ``zarr_format`` (checked against the store's), and xarray's ``chunks``, ``drop_variables`` and
    CF decoding switches; no ``storage_options`` (credentials come from the environment).
    ``num_threads``: decode threads (0: zarrstream's shared pool).
    ``ref``: for an Icechunk repository (docs/icechunk.md), the branch, tag or snapshot id to read
    (None: branch ``main``).
    """

    description = "Open Zarr stores (v2 and v3, local or remote) with zarrstream's parallel C++ reader"
    supports_groups = True
    open_dataset_parameters = (
        "filename_or_obj",
        "mask_and_scale",
        "decode_times",
        "concat_characters",
        "decode_coords",
        "drop_variables",
        "use_cftime",
        "decode_timedelta",
        "group",
        "consolidated",
        "use_zarr_fill_value_as_mask",
        "zarr_format",
        "storage_options",
        "num_threads",
        "ref",
    )

    def guess_can_open(self, filename_or_obj) -> bool:
        # Only when asked for by name: ".zarr" paths stay zarr-python's by default.
        return False

    def open_dataset(self, filename_or_obj, **options) -> Dataset:
        """The group at ``group`` (the root by default) as a Dataset; options as the class's."""
        ((_, dataset),) = self._open(filename_or_obj, subgroups=False, **options).items()
        return dataset

    def open_groups_as_dict(self, filename_or_obj, **options) -> dict[str, Dataset]:
        """Every group at and below ``group`` as a Dataset, keyed as xarray's zarr backend keys
        them: by absolute path ("/", "/sub") from the root, relative to ``group`` (".", "sub") from
        a group. Options as :meth:`open_dataset`'s."""
        return self._open(filename_or_obj, subgroups=True, **options)

    def open_datatree(self, filename_or_obj, **kwargs) -> DataTree:
        """The hierarchy at and below ``group`` as a DataTree (``xr.open_datatree(url,
        engine="zarrstream")``); options as :meth:`open_dataset`'s."""
        return datatree_from_dict_with_io_cleanup(self.open_groups_as_dict(filename_or_obj, **kwargs))

    @staticmethod
    def _open(
        filename_or_obj,
        *,
        subgroups: bool,
        mask_and_scale=True,
        decode_times=True,
        concat_characters=True,
        decode_coords=True,
        drop_variables: str | Iterable[str] | None = None,
        use_cftime=None,
        decode_timedelta=None,
        group: str | None = None,
        consolidated: bool | None = None,
        use_zarr_fill_value_as_mask: bool | None = None,
        zarr_format: int | None = None,
        storage_options: dict | None = None,
        num_threads: int = 0,
        ref: str | None = None,
    ) -> dict[str, Dataset]:
        """The group at ``group`` and, with ``subgroups``, every group below it, as Datasets keyed
        by path (see :meth:`open_groups_as_dict`)."""
        url = _url(filename_or_obj, storage_options)
        node = _open_node(url, group=group, consolidated=consolidated, zarr_format=zarr_format,
                          num_threads=num_threads, ref=ref)
        if isinstance(drop_variables, str):
            drop_variables = [drop_variables]
        top = "." if group and group.strip("/") else "/"
        datasets = {}
        for path, member in _walk(node, top) if subgroups else [(top, node)]:
            store = ZarrstreamStore.of_group(
                member,
                consolidated=consolidated,
                use_zarr_fill_value_as_mask=use_zarr_fill_value_as_mask,
                drop_variables=drop_variables or (),
                num_threads=num_threads,
            )
            datasets[path] = _decoded_dataset(
                member.url,
                store,
                drop_variables=drop_variables,
                mask_and_scale=mask_and_scale,
                decode_times=decode_times,
                concat_characters=concat_characters,
                decode_coords=decode_coords,
                use_cftime=use_cftime,
                decode_timedelta=decode_timedelta,
            )
        return datasets


def _decoded_dataset(url: str, store: ZarrstreamStore, **options) -> Dataset:
    """The Dataset xarray's own CF decoding makes of one group's store."""
    try:
        dataset = StoreBackendEntrypoint().open_dataset(store, **options)
        # xarray builds the indexes of dimension coordinates from their decoded values after
        # this returns, outside the except below: decoded here first (a time axis xarray cannot
        # decode fails here), it reads them once more there.
        for name, variable in dataset.variables.items():
            if variable.dims == (name,):
                np.asarray(variable.data)
    except ZarrstreamError:
        raise
    except Exception as e:  # noqa: BLE001 - whatever xarray's decoders raise (struct.error too)
        # xarray's CF decoding refused the attributes (units it cannot parse, a fill value
        # of the wrong type): the store's metadata is at fault, so the error says so.
        raise MetadataError(f"{url}: xarray cannot decode its CF attributes: "
                            f"{type(e).__name__}: {e}") from e
    _check_packing(url, dataset)
    return dataset


def _check_packing(url: str, dataset: Dataset) -> None:
    """xarray unpacks with scale_factor and add_offset lazily, at the first read: a value that is
    no number would fail there with numpy's error, so it is refused here, naming the variable."""
    for name, variable in dataset.variables.items():
        for key in ("scale_factor", "add_offset"):
            if key not in variable.encoding:
                continue
            value = variable.encoding[key]
            try:
                kind = np.asarray(value).dtype.kind
            except (ValueError, TypeError):
                kind = "O"
            if kind not in "biuf":
                raise MetadataError(f"{url}: variable '{name}' has {key} {value!r:.80}, which is no "
                                    "number: it cannot be unpacked")


def _url(filename_or_obj, storage_options: dict | None) -> str:
    if storage_options:
        raise ConfigError(
            "engine='zarrstream' takes no storage_options: credentials and endpoints come from "
            "the environment (AWS_*, GS_*, GOOGLE_OAUTH_ACCESS_TOKEN; see zarrstream's "
            "docs/object-stores.md)"
        )
    url = _normalize_path(filename_or_obj)
    if isinstance(url, os.PathLike):
        url = os.fspath(url)
    if not isinstance(url, str):
        raise InvalidArgumentError(
            f"engine='zarrstream' opens a store by URL or path, not a {type(filename_or_obj).__name__}"
        )
    return url

"""The exceptions zarrstream raises. Every one is a :class:`ZarrstreamError`.

Messages name the store, the array and the chunk key involved, e.g.
``reading chunk 'temperature/c/3/0' of array 'temperature' in file:///data/era5.zarr: ...``.
"""


class ZarrstreamError(Exception):
    """Base class of every error zarrstream raises."""


class MetadataError(ZarrstreamError):
    """Malformed or inconsistent metadata (zarr.json, .zarray, .zmetadata, ...)."""


class UnsupportedError(ZarrstreamError):
    """Valid input that zarrstream does not support (an unknown codec, data type or URL scheme)."""


class NotFoundError(ZarrstreamError, FileNotFoundError):
    """An array, group, or (when missing chunks are errors) a chunk that does not exist."""


class CorruptChunkError(ZarrstreamError):
    """Stored bytes that do not decode: truncated, corrupt, or failing their checksum."""


class StorageError(ZarrstreamError, OSError):
    """The underlying storage failed."""


class ConfigError(ZarrstreamError, ValueError):
    """Invalid configuration of a zarrstream component."""


class InvalidArgumentError(ZarrstreamError, ValueError):
    """An impossible request (a region outside the array, a wrong output buffer)."""


class CudaError(ZarrstreamError):
    """A CUDA driver or library call failed; the message names the call and its error code."""


class OutOfMemoryError(ZarrstreamError, MemoryError):
    """An allocation failed, or a declared size is more than the machine holds; the message says
    what was being allocated and how many bytes."""


class InternalError(ZarrstreamError):
    """A bug in zarrstream; please report it."""


__all__ = [
    "ZarrstreamError",
    "MetadataError",
    "UnsupportedError",
    "NotFoundError",
    "CorruptChunkError",
    "StorageError",
    "ConfigError",
    "InvalidArgumentError",
    "CudaError",
    "OutOfMemoryError",
    "InternalError",
]

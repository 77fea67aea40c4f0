"""zarrstream: stream Zarr datacubes into training batches.

>>> import zarrstream
>>> a = zarrstream.open_array("era5.zarr/temperature")
>>> a.shape, a.dtype, a.dims
>>> field = a[0]            # numpy, decoded in parallel in C++
"""

from ._array import Array, Group, create_array, create_group, open_array, open_group
from ._loader import Loader
from .errors import (
    ConfigError,
    CorruptChunkError,
    CudaError,
    InternalError,
    InvalidArgumentError,
    MetadataError,
    NotFoundError,
    StorageError,
    UnsupportedError,
    ZarrstreamError,
)

__version__ = "0.1.0"

__all__ = [
    "Array",
    "Loader",
    "Group",
    "open_array",
    "open_group",
    "create_array",
    "create_group",
    "ZarrstreamError",
    "MetadataError",
    "UnsupportedError",
    "NotFoundError",
    "CorruptChunkError",
    "StorageError",
    "ConfigError",
    "InvalidArgumentError",
    "CudaError",
    "InternalError",
]

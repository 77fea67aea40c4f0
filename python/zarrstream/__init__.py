"""zarrstream: stream Zarr datacubes into training batches.

>>> import zarrstream
>>> a = zarrstream.open_array("era5.zarr/temperature")
>>> a.shape, a.dtype, a.dims
>>> field = a[0]            # numpy, decoded in parallel in C++
"""

import os as _os


def _find_nvcomp() -> None:
    """Points the GPU path at the nvCOMP of the installed ``nvidia-libnvcomp-cu13`` wheel (loaded
    at first use; without it chunks decode on the CPU)."""
    if _os.environ.get("ZARRSTREAM_NVCOMP_LIBRARY"):
        return
    try:
        import nvidia.libnvcomp as _nvcomp  # type: ignore[import-not-found]
    except ImportError:
        return
    for root in getattr(_nvcomp, "__path__", []):
        library = _os.path.join(root, "lib64", "libnvcomp.so.6")
        if _os.path.exists(library):
            _os.environ["ZARRSTREAM_NVCOMP_LIBRARY"] = library
            return


_find_nvcomp()

from ._array import Array, Group, create_array, create_group, open_array, open_group
from ._jobs import (
    RechunkPart,
    RechunkPlan,
    RechunkReport,
    StatsPart,
    StatsPartResult,
    StatsPlan,
    plan_rechunk,
    plan_stats,
    rechunk,
    stats,
)
from ._loader import BatchArray, Loader, detect_missing_dates
from .errors import (
    ConfigError,
    CorruptChunkError,
    CudaError,
    InternalError,
    InvalidArgumentError,
    MetadataError,
    NotFoundError,
    OutOfMemoryError,
    StorageError,
    UnsupportedError,
    ZarrstreamError,
)

__version__ = "0.1.0"

__all__ = [
    "Array",
    "BatchArray",
    "Loader",
    "detect_missing_dates",
    "Group",
    "open_array",
    "open_group",
    "create_array",
    "create_group",
    "rechunk",
    "stats",
    "plan_rechunk",
    "plan_stats",
    "RechunkPlan",
    "RechunkPart",
    "RechunkReport",
    "StatsPlan",
    "StatsPart",
    "StatsPartResult",
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

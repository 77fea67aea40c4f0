"""ERA5-shaped stand-in data for benchmarks and the demo (no download).

Fields are smooth at large scales with small-scale noise, so float32 chunks compress about as
well as real reanalysis (zstd ~1.1-1.3x), neither random noise nor trivially compressible.
"""

from __future__ import annotations

import numpy as np


def era5_like_field(t: int, channel: int, nlat: int, nlon: int, seed: int = 0) -> np.ndarray:
    """One (nlat, nlon) float32 field for time step ``t`` and ``channel``."""
    rng = np.random.default_rng(seed * 1_000_003 + t * 1009 + channel)
    lat = np.linspace(-np.pi / 2, np.pi / 2, nlat, dtype=np.float32)[:, None]
    lon = np.linspace(0, 2 * np.pi, nlon, endpoint=False, dtype=np.float32)[None, :]
    base = 250.0 + 10.0 * channel + 30.0 * np.cos(lat)
    waves = 5.0 * np.sin(3 * lon + 0.1 * t + channel) * np.cos(2 * lat)
    diurnal = 2.0 * np.sin(lon - 2 * np.pi * (t % 4) / 4.0)
    noise = rng.standard_normal((nlat, nlon), dtype=np.float32) * 0.5
    return (base + waves + diurnal + noise).astype(np.float32)


def write_era5_like_store(path, ntime: int, nchannel: int, nlat: int, nlon: int,
                          compressor: str = "zstd", level: int = 3, chunks=None) -> None:
    """Writes a Zarr v3 array (time, channel, latitude, longitude) using zarr-python, with one chunk
    per time step and channel unless ``chunks`` gives another shape."""
    import zarr
    from zarr.codecs import BloscCodec, ZstdCodec

    compressors = {
        "zstd": [ZstdCodec(level=level)],
        "blosc": [BloscCodec(cname="lz4", clevel=5, shuffle="shuffle")],
        "none": [],
    }[compressor]
    arr = zarr.create_array(
        store=str(path), shape=(ntime, nchannel, nlat, nlon), chunks=tuple(chunks or (1, 1, nlat, nlon)),
        dtype="float32", compressors=compressors,
        dimension_names=("time", "channel", "latitude", "longitude"), overwrite=True,
    )
    for t in range(ntime):
        arr[t] = np.stack([era5_like_field(t, c, nlat, nlon) for c in range(nchannel)])

"""ERA5-like stores written the way real ones arrive, by xarray and zarr-python, under a test's
tmp_path: the conventions are the sources', the sizes tiny.

- ``cds_era5``: the Copernicus Climate Data Store's netCDF, converted to Zarr. ``valid_time``
  (int64 seconds since 1970), ``pressure_level`` (hPa, descending pressure), a scalar ``number``
  coordinate, latitude 90 → -90; int16 variables packed with ``scale_factor``/``add_offset`` and
  ``_FillValue`` -32767 with some cells missing, a uint8 packed fraction, a float32 field with a
  ``_FillValue`` of its own, a ``missing_value`` beside an equal ``_FillValue``. Written with
  ``Dataset.to_netcdf`` (netCDF4), then ``xr.open_dataset(...).to_zarr``, as a user converts a
  download: Zarr v2 or v3, consolidated or not, v3 with or without sharding. ``with_expver`` adds
  the CDS's ``expver`` string coordinate along ``valid_time``.
- ``arco_era5``: Google's ARCO-ERA5 layout: float32, no packing, ``time`` as int64 hours since
  1900-01-01 with CF units, NaN as ``_FillValue``.
- ``weatherbench2``: a WeatherBench2-like Zarr v2 store (consolidated): ``time``, ``level``,
  latitude ascending, float32 with ``_FillValue`` NaN.
- ``surface_and_static``: a loader's store on a grid given by the caller: ``2m_temperature`` along
  ``time`` beside a static ``land_sea_mask`` (and, with levels, a static ``soil_climatology``), Zarr
  v3 unconsolidated, chunked as the caller says.

Each builder returns the store's path. Values are deterministic (seeded).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import xarray as xr

LEVELS = [1000, 850, 500]
NT, NLAT, NLON = 8, 7, 10

# Packed variables of the CDS conversion: (name, dims, physical mean, spread, units); the packing
# is ERA5's: scale and offset spreading the field's range over the int16 values.
_CDS_PACKED = [
    ("t", "level", 250.0, 25.0, "K"),
    ("z", "level", 50000.0, 3000.0, "m**2 s**-2"),
    ("t2m", "surface", 280.0, 15.0, "K"),
    ("msl", "surface", 101000.0, 900.0, "Pa"),
]


def _grid():
    latitude = np.linspace(90, -90, NLAT)
    longitude = np.arange(NLON) * (360.0 / NLON)
    return latitude, longitude


def _packing(values: np.ndarray) -> tuple[float, float]:
    """ERA5's int16 packing of a field: its range over -32766..32766 (-32767 is the fill)."""
    lo, hi = float(np.nanmin(values)), float(np.nanmax(values))
    scale = (hi - lo) / (2**16 - 4)
    return scale, (hi + lo) / 2


def cds_dataset(seed: int = 0, *, with_expver: bool = True) -> tuple[xr.Dataset, dict]:
    """The CDS-style dataset (physical values, NaN where missing) and its netCDF encoding."""
    rng = np.random.default_rng(seed)
    latitude, longitude = _grid()
    valid_time = pd.date_range("2023-01-01", periods=NT, freq="6h").values
    coords = {
        "valid_time": ("valid_time", valid_time),
        "pressure_level": ("pressure_level", np.array(LEVELS, dtype="float64"),
                           {"units": "hPa", "long_name": "pressure"}),
        "latitude": ("latitude", latitude, {"units": "degrees_north"}),
        "longitude": ("longitude", longitude, {"units": "degrees_east"}),
        "number": ((), np.int64(0), {"long_name": "ensemble member numerical id"}),
    }
    if with_expver:
        coords["expver"] = ("valid_time", np.array(["0001"] * (NT - 2) + ["0005"] * 2))
    data_vars = {}
    encoding: dict[str, dict] = {
        "valid_time": {"units": "seconds since 1970-01-01", "calendar": "proleptic_gregorian",
                       "dtype": "int64"},
    }
    for name, kind, mean, spread, units in _CDS_PACKED:
        if kind == "level":
            dims = ("valid_time", "pressure_level", "latitude", "longitude")
            shape = (NT, len(LEVELS), NLAT, NLON)
        else:
            dims = ("valid_time", "latitude", "longitude")
            shape = (NT, NLAT, NLON)
        values = mean + spread * rng.standard_normal(shape)
        values[rng.random(shape) < 0.05] = np.nan  # missing cells
        data_vars[name] = (dims, values, {"units": units})
        scale, offset = _packing(values)
        encoding[name] = {"dtype": "int16", "scale_factor": scale, "add_offset": offset,
                          "_FillValue": np.int16(-32767)}
    encoding["msl"]["missing_value"] = np.int16(-32767)  # as older ERA5 files give both
    # A fraction packed into uint8 (scale only), 255 missing.
    surface = ("valid_time", "latitude", "longitude")
    lsm = np.round(rng.random((NT, NLAT, NLON)) * 250) / 250
    lsm[0, 0, :3] = np.nan
    data_vars["lsm"] = (surface, lsm, {"units": "(0 - 1)"})
    encoding["lsm"] = {"dtype": "uint8", "scale_factor": 1 / 250, "_FillValue": np.uint8(255)}
    # A float32 field whose land cells are the netCDF fill value.
    sst = (285 + 8 * rng.standard_normal((NT, NLAT, NLON))).astype("float32")
    sst[:, :, : NLON // 3] = np.nan
    data_vars["sst"] = (surface, sst, {"units": "K"})
    encoding["sst"] = {"dtype": "float32", "_FillValue": np.float32(-32767.0)}
    return xr.Dataset(data_vars, coords=coords), encoding


def cds_era5(tmp_path: Path, *, zarr_format: int = 3, consolidated: bool = False,
             sharded: bool = False, with_expver: bool = True, seed: int = 0,
             name: str | None = None) -> Path:
    """The CDS-style download as netCDF, converted to Zarr by xarray; returns the store's path."""
    if sharded and zarr_format != 3:
        raise ValueError("sharding needs Zarr v3")
    ds, encoding = cds_dataset(seed, with_expver=with_expver)
    nc = tmp_path / f"cds-{seed}.nc"
    if not nc.exists():
        ds.to_netcdf(nc, engine="netcdf4", encoding=encoding)
    stem = name or f"cds-v{zarr_format}{'-c' if consolidated else ''}{'-s' if sharded else ''}"
    out = tmp_path / f"{stem}.zarr"
    with xr.open_dataset(nc, engine="netcdf4") as source:
        source = source.load()
        for var in source.data_vars:
            enc = source[var].encoding
            time_chunk = 2
            shape = source[var].shape
            chunks = (time_chunk,) + tuple(shape[1:-1]) + (NLON // 2,)
            if sharded:
                enc["chunks"] = (1,) + chunks[1:]
                enc["shards"] = (2 * time_chunk,) + tuple(shape[1:])
            else:
                enc["chunks"] = chunks
        source.to_zarr(out, mode="w", zarr_format=zarr_format, consolidated=consolidated)
    return out


def arco_era5(tmp_path: Path, *, zarr_format: int = 2, seed: int = 1) -> Path:
    """An ARCO-ERA5-like store: float32, unpacked, ``time`` int64 hours since 1900."""
    rng = np.random.default_rng(seed)
    latitude, longitude = _grid()
    time = pd.date_range("2020-01-01", periods=NT, freq="1h").values
    ds = xr.Dataset(
        {
            "2m_temperature": (("time", "latitude", "longitude"),
                               (280 + 10 * rng.standard_normal((NT, NLAT, NLON))).astype("float32"),
                               {"units": "K"}),
            "temperature": (("time", "level", "latitude", "longitude"),
                            (250 + 20 * rng.standard_normal((NT, 3, NLAT, NLON))).astype("float32"),
                            {"units": "K"}),
        },
        coords={"time": time, "level": ("level", np.array(LEVELS, dtype="int64")),
                "latitude": latitude.astype("float32"), "longitude": longitude.astype("float32")},
    )
    ds["2m_temperature"][0, 0, 0] = np.nan
    encoding = {"time": {"units": "hours since 1900-01-01", "calendar": "proleptic_gregorian",
                         "dtype": "int64"}}
    for var in ds.data_vars:
        encoding[var] = {"chunks": (1,) + ds[var].shape[1:]}
    out = tmp_path / f"arco-v{zarr_format}.zarr"
    ds.to_zarr(out, mode="w", zarr_format=zarr_format, consolidated=True, encoding=encoding)
    return out


def weatherbench2(tmp_path: Path, *, seed: int = 2) -> Path:
    """A WeatherBench2-like Zarr v2 store (consolidated)."""
    rng = np.random.default_rng(seed)
    time = pd.date_range("2020-01-01", periods=NT, freq="6h").values
    latitude = np.linspace(-90, 90, NLAT)
    longitude = np.arange(NLON) * (360.0 / NLON)
    ds = xr.Dataset(
        {
            "geopotential": (("time", "level", "longitude", "latitude"),
                             (50000 + 3000 * rng.standard_normal((NT, 3, NLON, NLAT))).astype("float32")),
            "2m_temperature": (("time", "longitude", "latitude"),
                               (280 + 10 * rng.standard_normal((NT, NLON, NLAT))).astype("float32")),
        },
        coords={"time": time, "level": ("level", np.array(LEVELS, dtype="int32")),
                "latitude": latitude, "longitude": longitude},
    )
    out = tmp_path / "wb2.zarr"
    encoding = {var: {"chunks": (1,) + ds[var].shape[1:]} for var in ds.data_vars}
    ds.to_zarr(out, mode="w", zarr_format=2, consolidated=True, encoding=encoding)
    return out


def surface_and_static(path: Path, *, seed: int, time: pd.DatetimeIndex, latitude: np.ndarray,
                       longitude: np.ndarray, chunks: dict[str, tuple[int, ...]],
                       levels: np.ndarray | None = None) -> tuple[Path, xr.Dataset]:
    """``2m_temperature`` (time, latitude, longitude), the static ``land_sea_mask`` (latitude,
    longitude) and, with ``levels``, the static ``soil_climatology`` (level, latitude, longitude),
    float32, written to ``path`` by ``Dataset.to_zarr`` (v3, unconsolidated) with each variable's
    ``chunks``. Returns ``path`` and the dataset xarray reads back from it, loaded."""
    rng = np.random.default_rng(seed)
    nt, ny, nx = len(time), len(latitude), len(longitude)
    data_vars = {
        "2m_temperature": (("time", "latitude", "longitude"),
                           (280 + 10 * rng.standard_normal((nt, ny, nx))).astype("float32")),
        "land_sea_mask": (("latitude", "longitude"), rng.random((ny, nx)).astype("float32")),
    }
    coords = {"time": time, "latitude": latitude, "longitude": longitude}
    if levels is not None:
        data_vars["soil_climatology"] = (
            ("level", "latitude", "longitude"),
            (5 + rng.standard_normal((len(levels), ny, nx))).astype("float32"),
        )
        coords["level"] = levels
    ds = xr.Dataset(data_vars, coords=coords)
    encoding = {name: {"chunks": chunks[name]} for name in ds.data_vars}
    ds.to_zarr(path, zarr_format=3, consolidated=False, encoding=encoding)
    return path, xr.open_zarr(path, consolidated=False).load()

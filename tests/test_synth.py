"""`zarrstream synth`: the synthetic ERA5-like dataset as its users see it.

era5-small (32x64, 13 levels) is written with the CLI in each layout, then opened with xarray (dims,
coordinates, decoded times, variables, units), read with zarr-python and compared bit for bit with
zarrstream's read, its stored bytes measured per variable against realistic compression ratios,
and regenerated to check that a seed fixes every byte and another seed changes the weather.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
import zarr

import zarrstream

from conftest import CLI, assert_bit_equal, chunk_files, native

LAYOUTS = ["v3-zstd", "v3-sharded", "wb2"]
STEPS = 8
SEED = 3

SURFACE = {
    "2m_temperature": "K",
    "10m_u_component_of_wind": "m s**-1",
    "10m_v_component_of_wind": "m s**-1",
    "mean_sea_level_pressure": "Pa",
    "surface_pressure": "Pa",
    "total_precipitation": "m",
    "toa_incident_solar_radiation": "J m**-2",
    "total_column_water_vapour": "kg m**-2",
}
LEVELS = {
    "geopotential": "m**2 s**-2",
    "temperature": "K",
    "u_component_of_wind": "m s**-1",
    "v_component_of_wind": "m s**-1",
    "specific_humidity": "kg kg**-1",
}
STATIC = {"land_sea_mask": "(0 - 1)", "geopotential_at_surface": "m**2 s**-2"}
VARIABLES = {**SURFACE, **LEVELS, **STATIC}
PRESSURE_LEVELS = [50, 100, 150, 200, 250, 300, 400, 500, 600, 700, 850, 925, 1000]

# zstd level 3 on float32 reanalysis fields: raw bytes / stored bytes. Continuous fields land in
# about 1.1-1.6 (era5-small's 13-level chunks of fields spanning orders of magnitude, such as
# specific humidity, sit at the bottom: ~1.1, so the bound is 1.08); fields with many exact zeros
# (precipitation, the night side of the solar forcing) or mostly exact 0/1 (the land-sea mask) and
# sea-level orography compress more, as in ERA5.
ZSTD_RATIO = {name: (1.08, 1.6) for name in VARIABLES}
ZSTD_RATIO.update({
    "total_precipitation": (1.5, 4.0),
    "toa_incident_solar_radiation": (1.8, 4.0),
    "land_sea_mask": (4.0, 40.0),
    "geopotential_at_surface": (1.3, 4.0),
})


def synth(dest, *args, check=True):
    proc = subprocess.run([str(CLI), "synth", str(dest), *map(str, args)], capture_output=True,
                          text=True, timeout=120)
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    """era5-small, STEPS steps from 1979-01-01, seed SEED, in every layout."""
    root = tmp_path_factory.mktemp("synth")
    out = {}
    for layout in LAYOUTS:
        out[layout] = root / f"{layout}.zarr"
        synth(out[layout], "--preset", "era5-small", "--layout", layout, "--steps", STEPS,
              "--seed", SEED)
    return out


def store_files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file()}


@pytest.mark.parametrize("layout", LAYOUTS)
def test_xarray_opens_it_as_an_era5_dataset(stores, layout):
    ds = xr.open_zarr(stores[layout])
    assert dict(ds.sizes) == {"time": STEPS, "level": 13, "latitude": 32, "longitude": 64}
    assert set(ds.data_vars) == set(VARIABLES)
    assert set(ds.coords) == {"time", "level", "latitude", "longitude"}
    # Times decode to datetime64, 6-hourly from the start date.
    assert np.issubdtype(ds.time.dtype, np.datetime64)
    expected = np.datetime64("1979-01-01T00") + np.arange(STEPS) * np.timedelta64(6, "h")
    np.testing.assert_array_equal(ds.time.values, expected.astype(ds.time.dtype))
    assert ds.level.values.tolist() == PRESSURE_LEVELS
    assert ds.level.dtype == np.int64 and ds.level.attrs["units"] == "hPa"
    lat = ds.latitude.values
    assert lat.dtype == np.float32
    assert lat[0] == 87.1875 and lat[-1] == -87.1875 and np.all(np.diff(lat) == -5.625)
    assert ds.latitude.attrs["units"] == "degrees_north"
    lon = ds.longitude.values
    assert lon[0] == 0 and lon[-1] == 354.375 and np.all(np.diff(lon) == 5.625)
    assert ds.longitude.attrs["units"] == "degrees_east"
    for name, units in VARIABLES.items():
        var = ds[name]
        assert var.attrs["units"] == units, name
        assert var.attrs["long_name"] and var.attrs["standard_name"], name
        assert var.dtype == np.float32, name
        if name in SURFACE:
            assert var.dims == ("time", "latitude", "longitude"), name
        elif name in LEVELS:
            assert var.dims == ("time", "level", "latitude", "longitude"), name
        else:
            assert var.dims == ("latitude", "longitude"), name
    assert ds.attrs["source"] == "zarrstream synth"
    assert ds.attrs["preset"] == "era5-small" and ds.attrs["seed"] == SEED
    assert ds.attrs["layout"] == layout and ds.attrs["title"]
    # Plausible physics through xarray's eyes: selections by label work and values make sense.
    t2m = ds["2m_temperature"].sel(time="1979-01-01T12").values
    assert 200 < t2m.min() < t2m.max() < 330
    z = ds.geopotential.isel(time=0).mean(("latitude", "longitude"))
    assert z.sel(level=1000) < 5e3 and 1.8e5 < z.sel(level=50) < 2.2e5
    assert (ds.total_precipitation.values >= 0).all()


@pytest.mark.parametrize("layout", LAYOUTS)
def test_zarr_python_reads_what_zarrstream_reads(stores, layout):
    root = zarr.open_group(str(stores[layout]), mode="r")
    group = zarrstream.open_group(str(stores[layout]))
    assert group.zarr_format == (2 if layout == "wb2" else 3)
    for name in [*VARIABLES, "time", "level", "latitude", "longitude"]:
        ref = native(root[name][...])
        got = group[name].read()
        assert_bit_equal(got, ref, f"{layout}/{name}")
        if name in VARIABLES:
            assert np.isfinite(ref).all(), name
    a = group["temperature"]
    if layout == "v3-sharded":
        assert a.chunks == (1, 1, 32, 64) and a.shard_shape == (STEPS, 13, 32, 64)
    else:
        assert a.chunks == (1, 13, 32, 64) and a.shard_shape is None
    if layout == "wb2":
        compressor = root["temperature"].metadata.compressor
        assert (compressor.cname, compressor.clevel, compressor.shuffle) == ("lz4", 5, 1)


def test_zstd_compression_ratios_are_those_of_real_reanalysis(stores):
    root = stores["v3-zstd"]
    ratios = {}
    for name in VARIABLES:
        stored = sum(f.stat().st_size for f in chunk_files(root / name))
        raw = zarr.open_array(str(root / name), mode="r").nbytes
        ratios[name] = raw / stored
    bad = {n: round(r, 3) for n, r in ratios.items()
           if not ZSTD_RATIO[n][0] <= r <= ZSTD_RATIO[n][1]}
    assert not bad, f"ratios outside their realistic range: {bad} (all: {ratios})"


def test_blosc_lz4_shuffle_compresses_like_zstd(stores):
    root = stores["wb2"]
    for name in [*SURFACE, *LEVELS]:
        stored = sum(f.stat().st_size for f in chunk_files(root / name))
        raw = zarr.open_array(str(root / name), mode="r").nbytes
        lo, hi = ZSTD_RATIO[name]
        assert 0.9 * lo <= raw / stored <= 1.35 * hi, (name, raw / stored)


def test_same_seed_same_bytes_whatever_the_threads_other_seed_other_weather(stores, tmp_path):
    again = tmp_path / "again.zarr"
    synth(again, "--preset", "era5-small", "--steps", STEPS, "--seed", SEED, "--threads", 1)
    assert store_files(again) == store_files(stores["v3-zstd"])

    other = tmp_path / "other.zarr"
    synth(other, "--preset", "era5-small", "--steps", STEPS, "--seed", SEED + 1)
    a = zarrstream.open_group(str(stores["v3-zstd"]))
    b = zarrstream.open_group(str(other))
    for name in VARIABLES:
        if name == "toa_incident_solar_radiation":
            # A forcing from the sun's geometry: the same whatever the seed.
            assert_bit_equal(b[name].read(), a[name].read(), name)
        else:
            assert (a[name].read() != b[name].read()).mean() > 0.25, name


def test_start_date_and_steps(tmp_path):
    dest = tmp_path / "leap.zarr"
    synth(dest, "--steps", 3, "--start", "1980-02-28T18", "--layout", "wb2")
    ds = xr.open_zarr(dest)
    expected = np.array(["1980-02-28T18", "1980-02-29T00", "1980-02-29T06"], dtype="datetime64[h]")
    np.testing.assert_array_equal(ds.time.values, expected.astype(ds.time.dtype))
    assert ds["2m_temperature"].shape == (3, 32, 64)


def test_cli_refuses_to_overwrite_and_rejects_bad_options(stores, tmp_path):
    proc = synth(stores["wb2"], "--steps", 1, check=False)
    assert proc.returncode == 1
    assert "--overwrite" in proc.stderr and str(stores["wb2"]) in proc.stderr
    for args in (["--preset", "era6"], ["--layout", "zip"], ["--start", "1979-02-30"],
                 ["--steps", 0]):
        proc = synth(tmp_path / "bad.zarr", *args, check=False)
        assert proc.returncode != 0, args
        assert "Traceback" not in proc.stderr and "terminate" not in proc.stderr
        assert proc.stderr.strip(), args
    # --overwrite replaces a store of another layout entirely.
    dest = tmp_path / "replace.zarr"
    synth(dest, "--steps", 2, "--layout", "wb2")
    synth(dest, "--steps", 1, "--overwrite")
    names = {p.name for p in dest.rglob("*") if p.is_file()}
    assert ".zarray" not in names and ".zmetadata" not in names
    assert xr.open_zarr(dest).sizes["time"] == 1

"""Label selection on coordinates with CF time decoding, through `zarrstream stats --select`.

Time coordinates are encoded as xarray writes them (numbers with `units` "<unit> since <date>" and
`calendar` attributes) and decoded with cftime as the reference. Exact-label selections make the CLI
echo, for every selected index, the label it decoded there, so one run checks hundreds of decoded
values; range selections are checked against cftime datetime comparisons.
"""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import cftime
import numpy as np
import pytest
import zarr
from conftest import run_cli

# cftime warns that year-zero conventions of some decoded dates are not CF's: they are the point.
pytestmark = pytest.mark.filterwarnings("ignore::cftime.CFWarning")

CALENDARS = [
    "standard",
    "gregorian",
    "proleptic_gregorian",
    "noleap",
    "365_day",
    "all_leap",
    "366_day",
    "360_day",
]

# (units, values generator): integer and float encodings over several spans.
UNITS = [
    "hours since 1900-01-01 00:00:00",
    "days since 1979-01-01",
    "d since 0001-01-01",
    "minutes since 2000-02-28 12:00",
    "s since 1970-01-01T00:00:00Z",
    "hr since 1850-01-01 00:00:00 UTC",
    "days since 1582-10-01",
    "min since 1990-06-15 00:00:00 +05:30",
]



def iso(d) -> str:
    return d.isoformat().split(".")[0]


def write_time_dataset(path: Path, values: np.ndarray, units: str, calendar: str | None, zarr_format=3):
    """A group with coordinate `time` (values, units, calendar) and a variable x(time)."""
    g = zarr.open_group(str(path), mode="w", zarr_format=zarr_format)
    attrs = {"units": units}
    if calendar is not None:
        attrs["calendar"] = calendar
    kw = {"dimension_names": ["time"]} if zarr_format == 3 else {}
    if zarr_format == 2:
        attrs["_ARRAY_DIMENSIONS"] = ["time"]
    t = g.create_array("time", shape=values.shape, chunks=(max(1, len(values) // 3),), dtype=values.dtype,
                       attributes=attrs, **kw)
    t[...] = values
    # fill_value NaN, as xarray writes floats: a v2 fill_value 0 would make the index 0 a missing
    # value (CF decoding reads v2's fill_value as _FillValue, as xarray does).
    x = g.create_array("x", shape=values.shape, chunks=(7,), dtype="float64", fill_value=np.nan,
                       attributes={"_ARRAY_DIMENSIONS": ["time"]} if zarr_format == 2 else {}, **kw)
    x[...] = np.arange(len(values), dtype="float64")
    return g


def encoded_values(units: str, calendar: str, seed: int, dtype) -> np.ndarray:
    """Sorted, distinct values spanning centuries (and sub-day offsets) that decode to whole seconds."""
    rng = np.random.default_rng(seed)
    unit = units.split()[0]
    per_day = {"hours": 24, "hr": 24, "days": 1, "d": 1, "minutes": 1440, "min": 1440, "s": 86400}[unit]
    days = rng.integers(-200 * 365, 300 * 365, size=300)
    if "1582" in units or "0001" in units:
        days = rng.integers(-800, 800 * 365, size=300)  # across year 1 and the Gregorian reform
    steps = days.astype(np.int64) * per_day + rng.integers(0, per_day, size=days.size)
    values = np.unique(steps)
    if dtype == "float64":
        values = values.astype("float64")
        if per_day > 1:
            values = values + 0.5 * (values % 2 == 0)  # half units: still whole seconds
    return values.astype(dtype)


@pytest.mark.parametrize("calendar", CALENDARS)
@pytest.mark.parametrize("units", UNITS)
def test_decoding_matches_cftime(tmp_path, units, calendar):
    dtype = "float64" if "minutes" in units or "hr " in units else "int64"
    values = encoded_values(units, calendar, seed=len(units) + len(calendar), dtype=dtype)
    if dtype == "float64" and units.startswith("s "):
        pytest.skip("seconds have no half units that are whole seconds")
    expected = [iso(d) for d in cftime.num2date(values, units, calendar=calendar)]
    write_time_dataset(tmp_path / "ds.zarr", values, units, calendar)
    # Every label, in reverse order: selection by exact label returns them in the order asked.
    labels = expected[::-1]
    proc = run_cli("stats", tmp_path / "ds.zarr", "--select", "time=" + ",".join(labels))
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["select"]["time"] == {"values": labels}
    assert out["channels"][0]["count"] == len(values)


def test_decoding_of_float_hours_and_int32(tmp_path):
    values = np.array([0.25, 1.5, 24.1, 1e5 + 1 / 3], dtype="float64")  # 24.1 h = 24:06:00
    units = "hours since 2000-01-01"
    expected = [d for d in cftime.num2date(values, units, calendar="standard")]
    write_time_dataset(tmp_path / "f.zarr", values, units, None)
    # Second resolution: the last value is 20 minutes past the hour (1/3 hour).
    # Reversed: not one run of consecutive indices, so the file lists each label it matched.
    labels = [iso(d) for d in expected][::-1]
    proc = run_cli("stats", tmp_path / "f.zarr", "--select", "time=" + ",".join(labels))
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["select"]["time"]["values"] == labels

    ints = np.array([0, 1, 365, 366 * 40], dtype="int32")
    write_time_dataset(tmp_path / "i.zarr", ints, "days since 1970-01-01", "noleap")
    labels = [iso(d) for d in cftime.num2date(ints, "days since 1970-01-01", calendar="noleap")][::-1]
    proc = run_cli("stats", tmp_path / "i.zarr", "--select", "time=" + ",".join(labels))
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["select"]["time"]["values"] == labels


def range_indices(dates, lo, hi):
    return [i for i, d in enumerate(dates) if lo <= d <= hi]


@pytest.mark.parametrize("calendar", ["proleptic_gregorian", "noleap", "360_day", "all_leap"])
@pytest.mark.parametrize("zarr_format", [2, 3])
def test_range_selection_matches_cftime_comparison(tmp_path, calendar, zarr_format):
    # 6-hourly over 1979-1981, as xarray encodes ERA5 time.
    units = "hours since 1900-01-01 00:00:00"
    start = cftime.date2num(cftime.datetime(1979, 1, 1, calendar=calendar), units, calendar=calendar)
    values = (int(start) + 6 * np.arange(4 * 360 * 3)).astype("int64")
    write_time_dataset(tmp_path / "ds.zarr", values, units, calendar, zarr_format=zarr_format)
    dates = list(cftime.num2date(values, units, calendar=calendar))

    def dt(*fields):
        return cftime.datetime(*fields, calendar=calendar)

    cases = [
        # (selection, lo, hi) with hi the last second of the period the stop label names.
        ("1979-01-01:1979-12", dt(1979, 1, 1), dt(1980, 1, 1) - timedelta(seconds=1)),
        ("1980:1980", dt(1980, 1, 1), dt(1981, 1, 1) - timedelta(seconds=1)),
        ("1980-02:1980-02", dt(1980, 2, 1), dt(1980, 3, 1) - timedelta(seconds=1)),
        ("1979-03-01T06:1979-03-02T06:00", dt(1979, 3, 1, 6), dt(1979, 3, 2, 6, 0, 59)),
        (":1979-01-02", dt(1, 1, 1), dt(1979, 1, 2, 23, 59, 59)),
        ("1981-06-01:", dt(1981, 6, 1), dt(9999, 1, 1)),
        ("1900:1979-01-01T12", dt(1900, 1, 1), dt(1979, 1, 1, 12, 59, 59)),
    ]
    for selection, lo, hi in cases:
        want = range_indices(dates, lo, hi)
        proc = run_cli("stats", tmp_path / "ds.zarr", "--select", f"time={selection}")
        assert proc.returncode == 0, (selection, proc.stderr)
        out = json.loads(proc.stdout)
        assert out["select"]["time"] == [iso(dates[want[0]]), iso(dates[want[-1]])], selection
        assert out["channels"][0]["count"] == len(want), selection
        # x holds the index: its min and max give the first and last index selected.
        assert out["channels"][0]["min"] == want[0] and out["channels"][0]["max"] == want[-1], selection


def test_decreasing_numeric_coordinate_and_levels(tmp_path):
    g = zarr.open_group(str(tmp_path / "ds.zarr"), mode="w", zarr_format=3)
    lat = g.create_array("latitude", shape=(181,), dtype="float32", dimension_names=["latitude"])
    lat[...] = np.linspace(90, -90, 181, dtype="float32")
    x = g.create_array("x", shape=(181,), chunks=(50,), dtype="float64", dimension_names=["latitude"])
    x[...] = np.arange(181, dtype="float64")
    lats = lat[...]

    def select(text):
        proc = run_cli("stats", tmp_path / "ds.zarr", "--select", text)
        return proc, (json.loads(proc.stdout) if proc.returncode == 0 else None)

    for text, lo, hi in [("latitude=60:30", 30, 60), ("latitude=60.5:29.5", 29.5, 60.5),
                         ("latitude=:80", 80, 90), ("latitude=-85:", -90, -85)]:
        proc, out = select(text)
        assert proc.returncode == 0, proc.stderr
        want = np.nonzero((lats >= lo) & (lats <= hi))[0]
        c = out["channels"][0]
        assert (c["count"], c["min"], c["max"]) == (len(want), want[0], want[-1]), text
        assert out["select"]["latitude"] == [float(lats[want[0]]), float(lats[want[-1]])]
    proc, _ = select("latitude=30:60")
    assert proc.returncode == 1
    assert "decrease" in proc.stderr and "latitude=60:30" in proc.stderr, proc.stderr
    proc, out = select("latitude=45,-45.0,0")
    assert proc.returncode == 0, proc.stderr
    assert out["select"]["latitude"] == {"values": [45, -45, 0]}
    proc, _ = select("latitude=45.5")
    assert proc.returncode == 1
    assert "'45.5'" in proc.stderr and "46, 45" in proc.stderr and "coordinate 'latitude'" in proc.stderr


def test_selection_errors_name_coordinate_and_label(tmp_path):
    values = (692496 + 6 * np.arange(40)).astype("int64")
    write_time_dataset(tmp_path / "ds.zarr", values, "hours since 1900-01-01 00:00:00", "proleptic_gregorian")
    url = tmp_path / "ds.zarr"
    cases = [
        ("time=2030:2031", ["selects no label", "coordinate 'time'", "1979-01-01T00:00:00", "1979-01-10T18:00:00"]),
        ("time=1979-01-01T01:1979-01-01T05", ["selects no label"]),
        ("time=1979-02-30:1979-03-01", ["1979-02-30", "proleptic_gregorian"]),
        ("time=79-01-01:80", ["invalid selection"]),
        ("time=1979-01-01T03", ["'1979-01-01T03'", "nearest available", "1979-01-01T00:00:00"]),
        ("time=1979-01-05:1979-01-02", ["against the coordinate", "time=1979-01-02:1979-01-05"]),
        ("depth=1:2", ["cannot select 'depth=1:2'", "(time)"]),
        ("time", ["invalid selection 'time'"]),
    ]
    for selection, parts in cases:
        proc = run_cli("stats", url, "--select", selection)
        assert proc.returncode == 1, selection
        for part in parts:
            assert part in proc.stderr, (selection, part, proc.stderr)
        assert str(tmp_path) in proc.stderr or selection in ("time=79-01-01:80", "depth=1:2", "time"), proc.stderr


def test_bad_units_and_calendars_are_reported(tmp_path):
    values = np.arange(3, dtype="int64")
    for units, calendar, part in [
        ("fortnights since 2000-01-01", "standard", "unsupported unit 'fortnights'"),
        ("hours since 2000-01-01", "julian", "unsupported calendar 'julian'"),
        ("hours since 2000-01-01 06", "standard", "HH:MM"),
    ]:
        write_time_dataset(tmp_path / "ds.zarr", values, units, calendar)
        proc = run_cli("stats", tmp_path / "ds.zarr", "--select", "time=2000:2001")
        assert proc.returncode == 1
        assert part in proc.stderr and "coordinate 'time'" in proc.stderr, proc.stderr

// Coordinate loading and label selection on datasets in a memory store.
// tests/test_select.py checks the same against xarray-style fixtures written by zarr-python.
#include "dataset/coordinates.h"

#include <gtest/gtest.h>

#include <limits>

#include "array/memory_dataset_test_util.h"
#include "util/status_test_util.h"

namespace zarrstream {
namespace {

using testing::MemoryDataset;

// time: 6-hourly from 1979-01-01 through 1981 (1096 days), int64 "hours since 1900-01-01" as xarray
// writes it; latitude 90 → -90 by 30 (float32); level 50..1000 (int32); a float64 "x" with a NaN; a
// non-monotonic "bad".
class CoordinatesTest : public ::testing::Test {
 protected:
  static Group OpenDataset() {
    static MemoryDataset* dataset = [] {
      auto* d = new MemoryDataset("coordinates_test");
      std::vector<int64_t> hours;
      for (int64_t h = 692496; h < 692496 + 3 * 365 * 24 + 24; h += 6) hours.push_back(h);
      d->AddArray<int64_t>(
          "time", {hours.size()}, {100}, {"time"}, hours,
          {{"units", "hours since 1900-01-01 00:00:00"}, {"calendar", "proleptic_gregorian"}});
      d->AddArray<float>("latitude", {7}, {7}, {"latitude"}, {90, 60, 30, 0, -30, -60, -90});
      d->AddArray<int32_t>("level", {5}, {2}, {"level"}, {50, 500, 700, 850, 1000});
      d->AddArray<float>("fine", {3}, {3}, {"fine"}, {0.1f, 0.2f, 0.3f});
      d->AddArray<double>("x", {3}, {3}, {"x"}, {1.0, std::nan(""), 3.0});
      d->AddArray<double>("bad", {4}, {4}, {"bad"}, {1.0, 2.0, 2.0, 3.0});
      d->AddArray<double>("grid", {2, 2}, {2, 2}, {"grid", "other"}, {1, 2, 3, 4});
      d->AddArray<float>("longitude", {12}, {12}, {"longitude"},
                         {0, 30, 60, 90, 120, 150, 180, 210, 240, 270, 300, 330});
      d->AddArray<double>("east", {4}, {4}, {"east"}, {-180, -90, 0, 90},
                          {{"units", "degrees_east"}});
      d->AddArray<double>("lon", {3}, {3}, {"lon"}, {0, 10, 20});  // regional: no wrap
      d->AddArray<double>("badtime", {2}, {2}, {"badtime"}, {0, 1},
                          {{"units", "fortnights since 2000-01-01"}});
      return d;
    }();
    auto group = Group::Open(dataset->url());
    EXPECT_TRUE(group.ok()) << group.status().ToString();
    return *group;
  }

  static Coordinate Load(std::string_view dim) {
    auto c = Coordinate::Load(OpenDataset(), dim);
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return *c;
  }
};

std::vector<uint64_t> Indices(const Coordinate& c, std::string start, std::string stop) {
  LabelSelection selection;
  selection.dim = c.dim();
  selection.start = std::move(start);
  selection.stop = std::move(stop);
  auto indices = c.Select(selection);
  EXPECT_TRUE(indices.ok()) << indices.status().ToString();
  return indices.ok() ? *indices : std::vector<uint64_t>{};
}

TEST_F(CoordinatesTest, DetectsALongitudeGoingOnceAroundTheCircle) {
  EXPECT_TRUE(Load("longitude").periodic());
  EXPECT_EQ(Load("longitude").period(), 360.0);
  EXPECT_TRUE(Load("east").periodic());  // by its units
  EXPECT_FALSE(Load("lon").periodic());  // 30° of the circle
  EXPECT_FALSE(Load("latitude").periodic());
  EXPECT_FALSE(Load("time").periodic());
}

TEST_F(CoordinatesTest, PeriodicRangesWrapAndLabelsReadModuloThePeriod) {
  const Coordinate lon = Load("longitude");
  EXPECT_EQ(Indices(lon, "300", "60"), (std::vector<uint64_t>{10, 11, 0, 1, 2}));
  EXPECT_EQ(Indices(lon, "-60", "60"), (std::vector<uint64_t>{10, 11, 0, 1, 2}));
  EXPECT_EQ(Indices(lon, "30", "90"), (std::vector<uint64_t>{1, 2, 3}));
  EXPECT_EQ(Indices(lon, "390", "450"), (std::vector<uint64_t>{1, 2, 3}));
  EXPECT_EQ(Indices(lon, "90", "450").size(), 12u);  // a whole period, from 90
  EXPECT_EQ(Indices(lon, "90", "450").front(), 3u);
  auto values = lon.SelectValues(std::vector<std::string>{"-30", "720"});
  ASSERT_TRUE(values.ok()) << values.status().ToString();
  EXPECT_EQ(*values, (std::vector<uint64_t>{11, 0}));
  const Coordinate east = Load("east");
  EXPECT_EQ(Indices(east, "90", "-90"), (std::vector<uint64_t>{3, 0, 1}));
  EXPECT_EQ(Indices(east, "180", "180"), (std::vector<uint64_t>{0}));
}

TEST_F(CoordinatesTest, PeriodicOnlyWhereAsked) {
  auto regional = Load("lon").AsPeriodic(true);
  ASSERT_TRUE(regional.ok());
  EXPECT_DOUBLE_EQ(regional->period(), 30.0);
  EXPECT_EQ(Indices(*regional, "20", "0"), (std::vector<uint64_t>{2, 0}));
  auto flat = Load("longitude").AsPeriodic(false);
  ASSERT_TRUE(flat.ok());
  LabelSelection wrapped;
  wrapped.dim = "longitude";
  wrapped.start = "300";
  wrapped.stop = "60";
  EXPECT_EQ(flat->Select(wrapped).status().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(Load("time").AsPeriodic(true).status().code(), ErrorCode::kInvalidArgument);
  EXPECT_FALSE(Load("longitude").Slice(IndexRange{0, 6}).periodic());
}

TEST_F(CoordinatesTest, DecodesTimeCoordinate) {
  Coordinate time = Load("time");
  EXPECT_TRUE(time.is_time());
  EXPECT_TRUE(time.increasing());
  EXPECT_EQ(time.size(), 3u * 365 * 4 + 4);
  EXPECT_EQ(time.FormatLabel(0), "1979-01-01T00:00:00");
  EXPECT_EQ(time.FormatLabel(1), "1979-01-01T06:00:00");
  EXPECT_EQ(time.FormatLabel(time.size() - 1), "1981-12-31T18:00:00");
  EXPECT_EQ(time.time_units()->calendar(), Calendar::kProlepticGregorian);
}

TEST_F(CoordinatesTest, SelectsTimeRangesByPeriod) {
  Coordinate time = Load("time");
  // "1980" covers the whole (leap) year: 366 days of 4 steps.
  auto year = time.SelectRange("1980", "1980");
  ASSERT_TRUE(year.ok()) << year.status().ToString();
  EXPECT_EQ(year->start, 365u * 4);
  EXPECT_EQ(year->size(), 366u * 4);
  EXPECT_EQ(time.FormatLabel(year->stop - 1), "1980-12-31T18:00:00");
  auto days = time.SelectRange("1979-01-02", "1979-01-03");
  ASSERT_TRUE(days.ok());
  EXPECT_EQ(*days, (IndexRange{4, 12}));
  auto hours = time.SelectRange("1979-01-01T06:00", "1979-01-01T12");
  ASSERT_TRUE(hours.ok());
  EXPECT_EQ(*hours, (IndexRange{1, 3}));
  // Open ends, and a start before the data (clipped, as xarray does).
  auto to_end = time.SelectRange("1981-12-31T06", std::nullopt);
  ASSERT_TRUE(to_end.ok());
  EXPECT_EQ(to_end->size(), 3u);
  auto from_start = time.SelectRange(std::nullopt, "1979-01");
  ASSERT_TRUE(from_start.ok());
  EXPECT_EQ(*from_start, (IndexRange{0, 31 * 4}));
  auto clipped = time.SelectRange("1900", "1979-01-01");
  ASSERT_TRUE(clipped.ok());
  EXPECT_EQ(*clipped, (IndexRange{0, 4}));
}

TEST_F(CoordinatesTest, TimeSelectionErrorsNameCoordinateAndLabel) {
  Coordinate time = Load("time");
  ExpectErrorContains(time.SelectRange("2030", "2031").status(), ErrorCode::kInvalidArgument,
                      {"2030:2031", "coordinate 'time'", "memory://coordinates_test",
                       "selects no label", "1979-01-01T00:00:00", "1981-12-31T18:00:00"});
  ExpectErrorContains(time.SelectRange("1981", "1980").status(), ErrorCode::kInvalidArgument,
                      {"against the coordinate", "time=1980:1981"});
  ExpectErrorContains(time.SelectRange("1979-02-30", std::nullopt).status(),
                      ErrorCode::kInvalidArgument, {"1979-02-30", "proleptic_gregorian"});
  ExpectErrorContains(time.SelectRange("yesterday", std::nullopt).status(),
                      ErrorCode::kInvalidArgument, {"'yesterday'", "time coordinate"});
  ExpectErrorContains(time.SelectValues(std::vector<std::string>{"1979-01-01T03"}).status(),
                      ErrorCode::kNotFound,
                      {"'1979-01-01T03'", "1979-01-01T00:00:00, 1979-01-01T06:00:00"});
}

TEST_F(CoordinatesTest, TimeLabelsSelectTheirPeriod) {
  Coordinate time = Load("time");
  auto indices = time.SelectValues(
      std::vector<std::string>{"1979-01-02T06", "1979-01-01", "1979-01-03T12:00:00"});
  ASSERT_TRUE(indices.ok()) << indices.status().ToString();
  EXPECT_EQ(*indices, (std::vector<uint64_t>{5, 0, 1, 2, 3, 10}));
  auto year = time.SelectValues(std::vector<std::string>{"1980"});
  ASSERT_TRUE(year.ok());
  EXPECT_EQ(year->size(), 366u * 4);
  EXPECT_EQ(year->front(), 365u * 4);
  ExpectErrorContains(time.SelectValues(std::vector<std::string>{"1979-01", "1979-01-05"}).status(),
                      ErrorCode::kInvalidArgument,
                      {"'1979-01-05'", "selects 1979-01-05T00:00:00 again"});
}

TEST_F(CoordinatesTest, DecreasingCoordinateSelectsInItsOwnOrder) {
  Coordinate lat = Load("latitude");
  EXPECT_FALSE(lat.is_time());
  EXPECT_FALSE(lat.increasing());
  auto band = lat.SelectRange("60", "-30");
  ASSERT_TRUE(band.ok()) << band.status().ToString();
  EXPECT_EQ(*band, (IndexRange{1, 5}));
  auto between = lat.SelectRange("45", "15");  // labels between grid points
  ASSERT_TRUE(between.ok());
  EXPECT_EQ(*between, (IndexRange{2, 3}));
  auto north = lat.SelectRange(std::nullopt, "30");  // from the start (90) down to 30
  ASSERT_TRUE(north.ok());
  EXPECT_EQ(*north, (IndexRange{0, 3}));
  auto south = lat.SelectRange("-60", std::nullopt);
  ASSERT_TRUE(south.ok());
  EXPECT_EQ(*south, (IndexRange{5, 7}));
  ExpectErrorContains(lat.SelectRange("30", "60").status(), ErrorCode::kInvalidArgument,
                      {"decrease", "latitude=60:30"});
  ExpectErrorContains(lat.SelectRange("100", "95").status(), ErrorCode::kInvalidArgument,
                      {"selects no label", "from 90 to -90"});
  EXPECT_EQ(*lat.SelectValues(std::vector<std::string>{"-90", "0"}), (std::vector<uint64_t>{6, 3}));
}

TEST_F(CoordinatesTest, SelectsLevelsAndListsNearbyOnes) {
  Coordinate level = Load("level");
  EXPECT_EQ(level.FormatLabel(1), "500");
  EXPECT_EQ(level.NumericValue(3), 850.0);
  auto levels = level.SelectValues(std::vector<std::string>{"850", "500"});
  ASSERT_TRUE(levels.ok());
  EXPECT_EQ(*levels, (std::vector<uint64_t>{3, 1}));
  ExpectErrorContains(level.SelectValues(std::vector<std::string>{"600"}).status(),
                      ErrorCode::kNotFound,
                      {"'600'", "coordinate 'level'", "50, 500, 700, 850", "from 50 to 1000"});
  ExpectErrorContains(level.SelectValues(std::vector<std::string>{"500", "500.0"}).status(),
                      ErrorCode::kInvalidArgument, {"selects 500 again"});
  ExpectErrorContains(level.SelectValues(std::vector<std::string>{"abc"}).status(),
                      ErrorCode::kInvalidArgument, {"'abc'", "not a number"});
  auto range = level.SelectRange("500", "850");
  ASSERT_TRUE(range.ok());
  EXPECT_EQ(*range, (IndexRange{1, 4}));
}

TEST_F(CoordinatesTest, Float32LabelsCompareInFloat32) {
  Coordinate fine = Load("fine");
  EXPECT_EQ(fine.FormatLabel(0), "0.1");
  auto indices = fine.SelectValues(std::vector<std::string>{"0.2", "0.1"});
  ASSERT_TRUE(indices.ok()) << indices.status().ToString();
  EXPECT_EQ(*indices, (std::vector<uint64_t>{1, 0}));
  auto range = fine.SelectRange("0.1", "0.2");
  ASSERT_TRUE(range.ok());
  EXPECT_EQ(*range, (IndexRange{0, 2}));
}

TEST_F(CoordinatesTest, RejectsUnusableCoordinates) {
  const Group group = OpenDataset();
  ExpectErrorContains(Coordinate::Load(group, "x").status(), ErrorCode::kInvalidArgument,
                      {"coordinate 'x'", "NaN at index 1"});
  ExpectErrorContains(Coordinate::Load(group, "bad").status(), ErrorCode::kInvalidArgument,
                      {"coordinate 'bad'", "not strictly monotonic", "index 1"});
  ExpectErrorContains(Coordinate::Load(group, "grid").status(), ErrorCode::kInvalidArgument,
                      {"coordinate 'grid'", "1-D"});
  ExpectErrorContains(Coordinate::Load(group, "height").status(), ErrorCode::kNotFound,
                      {"no coordinate array 'height'", "memory://coordinates_test"});
  ExpectErrorContains(Coordinate::Load(group, "badtime").status(), ErrorCode::kInvalidArgument,
                      {"coordinate 'badtime'", "fortnights"});
}

// Text coordinates (vlen-utf8 strings, as zarr-python writes them) and numpy datetime64 ones.
Group OpenTypedDataset() {
  static MemoryDataset* dataset = [] {
    auto* d = new MemoryDataset("coordinates_typed_test");
    d->AddStringArray("expver", {"0001", "0001", "0001", "0005", "0005"}, 2, "time");
    d->AddStringArray("name", {"a", "b", "c", "d"}, 3, "name");
    // 2000-01-01T00:00 and 6-hourly after it, in nanoseconds since 1970.
    std::vector<int64_t> ticks;
    for (int64_t i = 0; i < 5; ++i) ticks.push_back((946684800 + i * 6 * 3600) * 1000000000LL);
    d->AddDateTime64Array("time", ticks, "ns", "time");
    d->AddDateTime64Array("nat", {0, std::numeric_limits<int64_t>::min()}, "s", "nat");
    return d;
  }();
  auto group = Group::Open(dataset->url());
  EXPECT_TRUE(group.ok()) << group.status().ToString();
  return *group;
}

TEST(TypedCoordinatesTest, TextLabelsSelectEveryIndexHoldingThem) {
  auto expver = Coordinate::Load(OpenTypedDataset(), "expver");
  ASSERT_TRUE(expver.ok()) << expver.status().ToString();
  EXPECT_TRUE(expver->is_text());
  EXPECT_EQ(expver->along(), "time");
  EXPECT_EQ(expver->FormatLabel(3), "0005");
  auto indices = expver->SelectValues(std::vector<std::string>{"0005"});
  ASSERT_TRUE(indices.ok()) << indices.status().ToString();
  EXPECT_EQ(*indices, (std::vector<uint64_t>{3, 4}));
  ExpectErrorContains(expver->SelectValues(std::vector<std::string>{"0002"}).status(),
                      ErrorCode::kNotFound, {"'0002'", "available: '0001', '0005'"});
  ExpectErrorContains(expver->SelectRange("0001", "0005").status(), ErrorCode::kInvalidArgument,
                      {"sorted and distinct"});
}

TEST(TypedCoordinatesTest, SortedTextLabelsSelectRanges) {
  auto name = Coordinate::Load(OpenTypedDataset(), "name");
  ASSERT_TRUE(name.ok()) << name.status().ToString();
  EXPECT_EQ(name->along(), "name");
  auto range = name->SelectRange("b", "c");
  ASSERT_TRUE(range.ok()) << range.status().ToString();
  EXPECT_EQ(*range, (IndexRange{1, 3}));
  auto open_start = name->SelectRange(std::nullopt, "a");
  ASSERT_TRUE(open_start.ok());
  EXPECT_EQ(*open_start, (IndexRange{0, 1}));
}

TEST(TypedCoordinatesTest, DateTime64IsATimeCoordinate) {
  auto time = Coordinate::Load(OpenTypedDataset(), "time");
  ASSERT_TRUE(time.ok()) << time.status().ToString();
  EXPECT_TRUE(time->is_time());
  EXPECT_EQ(time->FormatLabel(1), "2000-01-01T06:00:00");
  auto range = time->SelectRange("2000-01-01T06:00:00", "2000-01-01T12:00:00");
  ASSERT_TRUE(range.ok()) << range.status().ToString();
  EXPECT_EQ(*range, (IndexRange{1, 3}));
  auto day = time->SelectValues(std::vector<std::string>{"2000-01-01"});
  ASSERT_TRUE(day.ok());
  EXPECT_EQ(day->size(), 4u);
  ExpectErrorContains(Coordinate::Load(OpenTypedDataset(), "nat").status(),
                      ErrorCode::kInvalidArgument, {"coordinate 'nat'", "NaT at index 1"});
}

}  // namespace
}  // namespace zarrstream

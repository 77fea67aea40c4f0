// Missing-date detection on small datasets in memory stores: steps whose selected box is all NaN
// (inside chunks of several steps and spatial chunks), all CF fill values, or held by no stored
// (inner) chunk; integers without a fill value counted by presence only. The loader's use of the
// answer (samples left out, ranks, resumption) is tested in tests/test_missing_dates.py against
// stores xarray and zarr-python write.
#include "dataset/missing_dates.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "array/memory_dataset_test_util.h"
#include "util/status_test_util.h"
#include "zarrstream/array.h"

namespace zarrstream {
namespace {

using testing::MemoryDataset;

constexpr uint64_t kTimes = 6, kY = 2, kX = 4;
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

uint64_t At(uint64_t t, uint64_t y, uint64_t x) { return (t * kY + y) * kX + x; }

// "nan": float32 chunked 3 steps × 1 row × 2 columns; all NaN at step 1, NaN at step 2 but for
// (y 1, x 3). "packed": int16, scale/offset/_FillValue, all fill at step 4. "count": int32 without
// a fill value. "sharded" (float32, inner chunks of one step × 2 columns in shards of 3 steps,
// fill value 0): zeros at step 3 (no inner chunk stored) and in row 0 of step 5 (some stored).
// "flags": int32 sharded alike, zeros at step 0.
const std::string& DatasetUrl() {
  static const std::string url = [] {
    static MemoryDataset m("missing_dates_test");
    m.AddArray<int64_t>("time", {kTimes}, {kTimes}, {"time"}, {0, 6, 12, 18, 24, 30},
                        {{"units", "hours since 2000-01-01"}, {"calendar", "standard"}});
    m.AddArray<float>("x", {kX}, {kX}, {"x"}, {0, 1, 2, 3});
    const std::vector<uint64_t> shape = {kTimes, kY, kX};
    const std::vector<std::string> dims = {"time", "y", "x"};
    std::vector<float> nan(kTimes * kY * kX, 1.0F);
    for (uint64_t y = 0; y < kY; ++y) {
      for (uint64_t x = 0; x < kX; ++x) {
        nan[At(1, y, x)] = kNaN;
        nan[At(2, y, x)] = kNaN;
      }
    }
    nan[At(2, 1, 3)] = 7.0F;
    m.AddArray<float>("nan", shape, {3, 1, 2}, dims, nan);
    std::vector<int16_t> packed(kTimes * kY * kX, 100);
    for (uint64_t i = At(4, 0, 0); i < At(5, 0, 0); ++i) packed[i] = -32767;
    m.AddArray<int16_t>("packed", shape, {1, kY, kX}, dims, packed,
                        {{"scale_factor", 0.5}, {"add_offset", 1.0}, {"_FillValue", -32767}});
    m.AddArray<int32_t>("count", shape, {2, kY, kX}, dims, std::vector<int32_t>(48, 0));

    Result<Group> group = Group::Open(m.url());
    EXPECT_TRUE(group.ok()) << group.status().ToString();
    ArraySpec spec;
    spec.shape = shape;
    spec.chunks = {1, 1, 2};
    spec.shard_shape = std::vector<uint64_t>{3, kY, kX};
    spec.compressor = "none";
    spec.dims = dims;
    spec.fill_value_json = "0";
    std::vector<float> sharded(kTimes * kY * kX, 1.0F);
    for (uint64_t y = 0; y < kY; ++y) {
      for (uint64_t x = 0; x < kX; ++x) sharded[At(3, y, x)] = 0;
    }
    for (uint64_t x = 0; x < kX; ++x) sharded[At(5, 0, x)] = 0;
    const std::vector<uint64_t> origin = {0, 0, 0};
    Result<Array> array = group->CreateArray("sharded", spec);
    EXPECT_TRUE(array.ok()) << array.status().ToString();
    EXPECT_TRUE(array->Write(origin, shape, sharded.data()).ok());
    spec.dtype = DataType::kInt32;
    std::vector<int32_t> flags(kTimes * kY * kX, 3);
    for (uint64_t i = 0; i < At(1, 0, 0); ++i) flags[i] = 0;
    Result<Array> flags_array = group->CreateArray("flags", spec);
    EXPECT_TRUE(flags_array.ok()) << flags_array.status().ToString();
    EXPECT_TRUE(flags_array->Write(origin, shape, flags.data()).ok());
    return m.url();
  }();
  return url;
}

Result<std::vector<uint64_t>> Detect(std::vector<std::string> variables,
                                     std::vector<LabelSelection> select = {}, bool threads = true,
                                     std::string frequency = "") {
  ZS_ASSIGN_OR_RETURN(Dataset dataset, Dataset::Open(DatasetUrl()));
  LoaderOptions options;
  options.variables = std::move(variables);
  options.select = std::move(select);
  options.frequency = std::move(frequency);
  ThreadPool pool(2);
  ZS_ASSIGN_OR_RETURN(LoaderGeometry g,
                      MakeLoaderGeometry(dataset, options, threads ? &pool : nullptr));
  return DetectMissingSteps(g, threads ? &pool : nullptr);
}

using Steps = std::vector<uint64_t>;

TEST(MissingDatesTest, AStepIsMissingWhereItsBoxIsAllNaNInsideChunksOfSeveralSteps) {
  EXPECT_EQ(Detect({"nan"}).value(), Steps({1}));
  // Serially too.
  EXPECT_EQ(Detect({"nan"}, {}, /*threads=*/false).value(), Steps({1}));
}

TEST(MissingDatesTest, OnlyTheSelectedBoxCounts) {
  LabelSelection x;
  x.dim = "x";
  x.start = "0";
  x.stop = "2";
  // Step 2's one value lies at x 3, outside the selection.
  EXPECT_EQ(Detect({"nan"}, {x}).value(), Steps({1, 2}));
  LabelSelection time;
  time.dim = "time";
  time.start = "2000-01-01T12:00:00";
  // Steps outside the selection are not looked at.
  EXPECT_EQ(Detect({"nan"}, {x, time}).value(), Steps({2}));
}

TEST(MissingDatesTest, StepsAFrequencySkipsAreNotLookedAt) {
  // Every other step of the 6-hourly store from the selection's first: step 1 is not sampled.
  EXPECT_EQ(Detect({"nan", "packed"}, {}, true, "12h").value(), Steps({4}));
  LabelSelection time;
  time.dim = "time";
  time.start = "2000-01-01T06:00:00";
  EXPECT_EQ(Detect({"nan", "packed"}, {time}, true, "12h").value(), Steps({1}));
}

TEST(MissingDatesTest, CfFillValuesAreMissingAndAnyChannelMissingMakesTheStepMissing) {
  EXPECT_EQ(Detect({"packed"}).value(), Steps({4}));
  EXPECT_EQ(Detect({"nan", "packed"}).value(), Steps({1, 4}));
}

TEST(MissingDatesTest, IntegersWithoutAFillValueAreNeverNaN) {
  EXPECT_EQ(Detect({"count"}).value(), Steps());
}

TEST(MissingDatesTest, EmptyInnerChunksOfAStoredShardAreAbsent) {
  // Step 3's inner chunks are empty (all fill value, not written); step 5 keeps the ones of row 1.
  EXPECT_EQ(Detect({"sharded"}).value(), Steps({3}));
  // An integer array: absence only, from the shard indexes.
  EXPECT_EQ(Detect({"flags"}).value(), Steps({0}));
  EXPECT_EQ(Detect({"flags", "sharded", "nan"}).value(), Steps({0, 1, 3}));
}

}  // namespace
}  // namespace zarrstream

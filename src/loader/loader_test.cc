// The loader's C++ surface and its assembly pieces. Batch values against peer-written stores are
// checked from Python (tests/test_loader.py); here: the rounding of reduced-precision outputs, and
// the C++ API end to end on a memory dataset whose values encode their own coordinates (the read
// plan has its own tests in read_plan_test.cc).
#include "zarrstream/loader.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <fstream>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "dataset/stats_file.h"
#include "gpu/cuda_driver.h"
#include "loader/batch_assembly.h"
#include "loader/loader_test_util.h"
#include "util/fork_test_util.h"
#include "util/status_test_util.h"

namespace zarrstream {
namespace {

using testing::AddEra5LikeArrays;
using testing::Era5LikeValue;
using testing::LabelList;
using testing::LabelRange;
using testing::MemoryDataset;

constexpr uint64_t kTimes = 6, kLat = 3, kLon = 4;

// Chunks of temperature hold two times, two levels and half the longitudes.
const std::string& Era5LikeUrl() {
  static const MemoryDataset dataset = [] {  // for the process: the store registry finds it
    MemoryDataset m("loader_test");
    AddEra5LikeArrays(&m, {kTimes, {10, 0, -10}, {0, 90, 180, 270}, 2});
    return m;
  }();
  return dataset.url();
}

// Options of a loader of t2m alone, one sample a time step.
LoaderOptions T2mOptions(uint64_t batch_size, uint64_t seed = 0,
                         size_t prefetch = LoaderOptions().prefetch) {
  LoaderOptions options;
  options.variables = {"t2m"};
  options.batch_size = batch_size;
  options.seed = seed;
  options.prefetch = prefetch;
  return options;
}

// The sample ids of the batches `loader` has left in its epoch, in order.
std::vector<uint64_t> RemainingSampleIds(Loader& loader) {
  std::vector<uint64_t> ids;
  while (auto b = loader.Next().value()) {
    ids.insert(ids.end(), (*b)->sample_ids().begin(), (*b)->sample_ids().end());
  }
  return ids;
}

TEST(BFloat16Test, RoundsToNearestEven) {
  auto bits = [](uint32_t b) { return std::bit_cast<float>(b); };
  EXPECT_EQ(FloatToBFloat16(1.0F), 0x3F80);
  EXPECT_EQ(FloatToBFloat16(bits(0x3F808000)), 0x3F80);  // halfway, even below
  EXPECT_EQ(FloatToBFloat16(bits(0x3F818000)), 0x3F82);  // halfway, even above
  EXPECT_EQ(FloatToBFloat16(bits(0x3F808001)), 0x3F81);  // above halfway
  EXPECT_EQ(FloatToBFloat16(-2.0F), 0xC000);
  EXPECT_EQ(FloatToBFloat16(std::numeric_limits<float>::infinity()), 0x7F80);
  EXPECT_EQ(FloatToBFloat16(std::numeric_limits<float>::max()), 0x7F80);  // rounds up to inf
  const uint16_t nan = FloatToBFloat16(std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(nan & 0x7F80, 0x7F80);
  EXPECT_NE(nan & 0x007F, 0);  // still a NaN, not infinity
  // A signalling NaN whose payload lives only in the low bits stays a NaN.
  EXPECT_NE(FloatToBFloat16(bits(0x7F800001)) & 0x007F, 0);
}

TEST(LoaderTest, BatchesCarryTheRequestedValuesInTheDocumentedLayout) {
  LoaderOptions options;
  options.variables = {"t2m", "temperature@850,1000"};
  options.sample = {{"time", 2}, {"longitude", 2}};
  options.stride = {{"time", 1}, {"longitude", 1}};
  options.periodic = std::vector<std::string>{};  // windows inside the grid, which is global
  options.target_dim = "time";
  options.target_offsets = {1};
  options.target_variables = {"temperature@850"};
  options.shuffle = ShuffleMode::kNone;
  options.batch_size = 4;
  options.num_threads = 2;
  auto loader = Loader::Open(Era5LikeUrl(), options);
  ASSERT_TRUE(loader.ok()) << loader.status().ToString();
  EXPECT_EQ(loader->sample_dims(), (std::vector<std::string>{"time", "longitude"}));
  EXPECT_EQ(loader->spatial_dims(), (std::vector<std::string>{"latitude", "longitude"}));
  // time origins 0..3 (window 2 + target 1 <= 6) x longitude origins 0..2.
  EXPECT_EQ(loader->num_samples(), 12U);
  EXPECT_EQ(loader->num_batches(), 3U);
  EXPECT_EQ(loader->input_shape(), (std::vector<int64_t>{4, 6, 3, 2}));
  EXPECT_EQ(loader->target_shape(), (std::vector<int64_t>{4, 1, 3, 2}));

  uint64_t samples = 0;
  for (;;) {
    auto next = loader->Next();
    ASSERT_TRUE(next.ok()) << next.status().ToString();
    if (!next->has_value()) break;
    const Batch& b = ***next;
    const auto* input = reinterpret_cast<const float*>(b.input().data.data());
    const auto* target = reinterpret_cast<const float*>(b.target().data.data());
    const auto* origins = reinterpret_cast<const int64_t*>(b.origins().data.data());
    for (size_t s = 0; s < b.size(); ++s, ++samples) {
      const auto t0 = static_cast<uint64_t>(origins[2 * s]);
      const auto x0 = static_cast<uint64_t>(origins[2 * s + 1]);
      EXPECT_EQ(t0, samples / 3);  // index order: longitude fastest
      EXPECT_EQ(x0, samples % 3);
      for (uint64_t step = 0; step < 2; ++step) {
        for (uint64_t c = 0; c < 3; ++c) {
          for (uint64_t y = 0; y < kLat; ++y) {
            for (uint64_t x = 0; x < 2; ++x) {
              // Time-major channels: step 0's three channels, then step 1's.
              const float got = input[((s * 6 + step * 3 + c) * kLat + y) * 2 + x];
              const float want = c == 0 ? -Era5LikeValue(t0 + step, 0, y, x0 + x)
                                        : Era5LikeValue(t0 + step, c, y, x0 + x);  // levels 1 and 2
              ASSERT_EQ(got, want) << "sample " << s << " step " << step << " channel " << c;
            }
          }
        }
      }
      for (uint64_t y = 0; y < kLat; ++y) {
        for (uint64_t x = 0; x < 2; ++x) {
          ASSERT_EQ(target[(s * kLat + y) * 2 + x], Era5LikeValue(t0 + 2, 1, y, x0 + x));
        }
      }
    }
  }
  EXPECT_EQ(samples, 12U);
  const LoaderStats stats = loader->stats();
  EXPECT_EQ(stats.batches, 3U);
  EXPECT_GT(stats.cache_hits, 0U);  // overlapping longitude windows share chunks
}

TEST(LoaderTest, ResumedLoaderContinuesWithTheSameBatches) {
  const LoaderOptions options = T2mOptions(/*batch_size=*/2, /*seed=*/9, /*prefetch=*/3);
  auto first = Loader::Open(Era5LikeUrl(), options);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  first->SetEpoch(1);
  ASSERT_TRUE(first->Next().ok());
  const std::string state = first->StateJson();
  const std::vector<uint64_t> rest = RemainingSampleIds(*first);

  auto second = Loader::Open(Era5LikeUrl(), options);
  ASSERT_TRUE(second.ok());
  ASSERT_TRUE(second->RestoreStateJson(state).ok());
  EXPECT_EQ(second->epoch(), 1U);
  EXPECT_EQ(second->next_batch(), 1U);
  const std::vector<uint64_t> resumed = RemainingSampleIds(*second);
  EXPECT_EQ(resumed, rest);
  EXPECT_EQ(resumed.size(), 4U);  // 6 samples, 3 batches, one delivered before the state
}

TEST(LoaderTest, APrefetchChangedMidEpochKeepsThePositionAndTheBatches) {
  const LoaderOptions options = T2mOptions(/*batch_size=*/1, /*seed=*/5, /*prefetch=*/3);
  auto whole = Loader::Open(Era5LikeUrl(), options);
  ASSERT_TRUE(whole.ok()) << whole.status().ToString();
  auto changed = Loader::Open(Era5LikeUrl(), options);
  ASSERT_TRUE(changed.ok());
  EXPECT_EQ(changed->prefetch(), 3U);
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(whole->Next().ok());
    ASSERT_TRUE(changed->Next().ok());
  }
  // Lowered: the batches made ahead are kept, and the next are the same ones, from the same
  // position.
  changed->SetPrefetch(1);
  EXPECT_EQ(changed->prefetch(), 1U);
  EXPECT_EQ(changed->next_batch(), 2U);
  ASSERT_TRUE(whole->Next().ok());
  ASSERT_TRUE(changed->Next().ok());
  changed->SetPrefetch(0);  // at least one
  EXPECT_EQ(changed->prefetch(), 1U);
  EXPECT_EQ(RemainingSampleIds(*changed), RemainingSampleIds(*whole));
  EXPECT_EQ(changed->stats().batches, whole->stats().batches);
  // And the next epochs, raised again (the batches ahead dropped and made again).
  changed->SetPrefetch(4);
  whole->StartNextEpoch();
  changed->StartNextEpoch();
  EXPECT_EQ(RemainingSampleIds(*changed), RemainingSampleIds(*whole));
}

// Threads sharing one loader: each batch of an epoch goes to one of them, none of the next epoch's
// while the loader is in this one, and every epoch starts where the previous one ended.
TEST(LoaderTest, ThreadsSharingALoaderGetEachBatchOnceInItsEpoch) {
  auto loader =
      Loader::Open(Era5LikeUrl(), T2mOptions(/*batch_size=*/1, /*seed=*/3, /*prefetch=*/3));
  ASSERT_TRUE(loader.ok()) << loader.status().ToString();
  for (uint64_t epoch = 0; epoch < 4; ++epoch) {
    std::mutex mutex;
    std::vector<std::pair<uint64_t, uint64_t>> got;  // (epoch, index)
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&] {
        while (true) {
          Result<std::optional<std::shared_ptr<const Batch>>> next = loader->Next();
          ASSERT_TRUE(next.ok()) << next.status().ToString();
          if (!*next) break;
          const uint64_t position = loader->next_batch();  // between two Next calls: whole
          std::lock_guard<std::mutex> lock(mutex);
          EXPECT_LE(position, loader->num_batches());
          got.emplace_back((**next)->epoch(), (**next)->index());
        }
      });
    }
    for (std::thread& t : threads) t.join();
    std::sort(got.begin(), got.end());
    ASSERT_EQ(got.size(), loader->num_batches());
    for (uint64_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], std::pair(epoch, i));
    EXPECT_EQ(loader->epoch(), epoch);
    EXPECT_EQ(loader->next_batch(), loader->num_batches());
    loader->StartNextEpoch();  // keeps what the pipeline made ahead
  }
}

TEST(LoaderTest, APutBackBatchIsDeliveredAgainAndTheStateIsBeforeIt) {
  const LoaderOptions options = T2mOptions(/*batch_size=*/2, /*seed=*/4);
  auto loader = Loader::Open(Era5LikeUrl(), options);
  ASSERT_TRUE(loader.ok()) << loader.status().ToString();
  const std::shared_ptr<const Batch> first = *loader->Next().value();
  const std::shared_ptr<const Batch> second = *loader->Next().value();
  const std::string state_before_second = [&] {
    auto fresh = Loader::Open(Era5LikeUrl(), options);
    EXPECT_TRUE(fresh->Next().ok());
    return fresh->StateJson();
  }();
  EXPECT_FALSE(loader->PutBack(first));  // not the last delivered
  ASSERT_TRUE(loader->PutBack(second));
  EXPECT_FALSE(loader->PutBack(second));  // already back
  EXPECT_EQ(loader->next_batch(), 1U);
  EXPECT_EQ(loader->StateJson(), state_before_second);
  EXPECT_EQ(loader->stats().batches, 1U);
  EXPECT_EQ(*loader->Next().value(), second);
  const std::shared_ptr<const Batch> third = *loader->Next().value();
  EXPECT_EQ(third->index(), 2U);
  EXPECT_FALSE(loader->Next().value().has_value());
  EXPECT_EQ(loader->stats().batches, 3U);
  // A new epoch forgets what was put back.
  ASSERT_TRUE(loader->PutBack(third));
  loader->StartNextEpoch();
  EXPECT_EQ((*loader->Next().value())->epoch(), 1U);
}

TEST(LoaderTest, MisconfigurationFailsAtOpen) {
  LoaderOptions options;
  options.variables = {"t2m"};
  options.sample = {{"time", 7}};
  const ErrorCode invalid = ErrorCode::kInvalidArgument;
  ExpectErrorContains(Loader::Open(Era5LikeUrl(), options).status(), invalid,
                      {"window 7", "'time'", "larger than", "6 selected"});
  options.sample = {{"member", 1}};
  ExpectErrorContains(Loader::Open(Era5LikeUrl(), options).status(), ErrorCode::kNotFound,
                      {"'member'", "not a dimension", "'time', 'latitude', 'longitude'"});
  options.sample = {};
  options.target_dim = "time";
  options.target_offsets = {6};
  ExpectErrorContains(Loader::Open(Era5LikeUrl(), options).status(), invalid,
                      {"target offset 6", "reaches past"});
  options.target_offsets = {};
  ExpectErrorContains(Loader::Open(Era5LikeUrl(), options).status(), invalid,
                      {"without target offsets"});
}

TEST(LoaderTest, TypedSelectionsRestrictTheirDimensionsOncePerDimension) {
  LoaderOptions options;
  options.variables = {"t2m"};
  options.select = {LabelRange("latitude", "10", "0"),
                    LabelList("time", {"2000-01-01T06:00", "2000-01-01T12"})};
  auto loader = Loader::Open(Era5LikeUrl(), options);
  ASSERT_TRUE(loader.ok()) << loader.status().ToString();
  EXPECT_EQ(loader->input_shape(), (std::vector<int64_t>{1, 1, 2, kLon}));
  EXPECT_EQ(loader->num_samples(), 2U);  // two time steps

  options.select = {LabelRange("latitude", std::nullopt, "0"), LabelList("latitude", {"10"})};
  ExpectErrorContains(Loader::Open(Era5LikeUrl(), options).status(), ErrorCode::kInvalidArgument,
                      {"dimension 'latitude' is selected twice", "loader_test"});
  options.select = {LabelList("latitude", {"twelve"})};
  EXPECT_FALSE(Loader::Open(Era5LikeUrl(), options).ok());
}

// A loader running in the parent (its pipeline preparing batches) is inherited by a fork()ed child
// without its threads: there every use is an error naming fork(), and destroying it returns at
// once. The parent's loader runs on.
TEST(LoaderTest, AForkedChildCannotUseTheParentsLoaderAndSaysWhy) {
  LoaderOptions options;
  options.variables = {"t2m"};
  options.batch_size = 1;
  options.num_threads = 2;
  options.prefetch = 4;
  auto loader = Loader::Open(Era5LikeUrl(), options);
  ASSERT_TRUE(loader.ok()) << loader.status().ToString();
  ASSERT_TRUE(loader->CheckProcess().ok());
  auto first = loader->Next();
  ASSERT_TRUE(first.ok() && first->has_value()) << first.status().ToString();
  ExpectChildSucceeds([&] {
    auto next = loader->Next();
    if (next.ok() || next.status().code() != ErrorCode::kConfig) return 1;
    const std::string m = next.status().message();
    if (m.find("fork()ed child") == std::string::npos || m.find(Era5LikeUrl()) == std::string::npos)
      return 2;
    if (loader->RestoreStateJson(loader->StateJson()).code() != ErrorCode::kConfig) return 3;
    loader->SetEpoch(1);
    loader->StartNextEpoch();
    { Loader gone = *std::move(loader); }
    return 0;
  });
  auto second = loader->Next();
  ASSERT_TRUE(second.ok() && second->has_value()) << second.status().ToString();
  EXPECT_EQ((**second)->index(), 1u);
}

// The device policy: a cuda request gets GPU batches where they can be made, else host batches
// the consumer copies, if it can; GPU batches demanded but not to be had are errors, and so is any
// cuda request where there is no GPU at all.
TEST(LoaderTest, BatchPlacementFollowsTheRequestAndWhatThisMachineCanDo) {
  Result<BatchPlacement> cpu =
      PlanBatchPlacement(BatchDevice::kCpu, 0, GpuBatches::kAuto, /*consumer_can_copy=*/false);
  ASSERT_TRUE(cpu.ok()) << cpu.status().ToString();
  EXPECT_EQ(cpu->device, BatchDevice::kCpu);
  EXPECT_FALSE(cpu->consumer_copies);
  ExpectErrorContains(PlanBatchPlacement(BatchDevice::kCpu, 0, GpuBatches::kOn, true).status(),
                      ErrorCode::kConfig, {"gpu_batches on", "need device cuda, not cpu"});

  if (!CudaDriver::Present()) {
    // No driver or no device: the reason doctor prints, whoever would copy and whatever
    // gpu_batches says.
    const std::string reason = CudaDriver::UnavailableReason();
    ASSERT_FALSE(reason.empty());
    for (GpuBatches gpu_batches : {GpuBatches::kAuto, GpuBatches::kOn, GpuBatches::kOff}) {
      for (bool consumer_can_copy : {true, false}) {
        ExpectErrorContains(
            PlanBatchPlacement(BatchDevice::kCuda, 0, gpu_batches, consumer_can_copy).status(),
            ErrorCode::kConfig, {"device is cuda:0", "no GPU zarrstream can use", reason});
      }
    }
    GTEST_SKIP() << "the part with a GPU is skipped: " << reason;
  }
  ExpectErrorContains(
      PlanBatchPlacement(BatchDevice::kCuda, 1 << 20, GpuBatches::kAuto, true).status(),
      ErrorCode::kConfig, {"no GPU zarrstream can use", "does not exist"});

  Result<BatchPlacement> off = PlanBatchPlacement(BatchDevice::kCuda, 0, GpuBatches::kOff, true);
  ASSERT_TRUE(off.ok()) << off.status().ToString();
  EXPECT_EQ(off->device, BatchDevice::kCpu);
  EXPECT_TRUE(off->consumer_copies);
  EXPECT_EQ(off->reason, "GPU batches are off (gpu_batches)");
  ExpectErrorContains(PlanBatchPlacement(BatchDevice::kCuda, 0, GpuBatches::kOff, false).status(),
                      ErrorCode::kConfig,
                      {"device is cuda:0", "needs GPU batches, which are off (gpu_batches)"});

  const std::string unavailable = GpuBatchesUnavailableReason();
  Result<BatchPlacement> automatic =
      PlanBatchPlacement(BatchDevice::kCuda, 0, GpuBatches::kAuto, true);
  ASSERT_TRUE(automatic.ok()) << automatic.status().ToString();
  if (unavailable.empty()) {
    EXPECT_EQ(automatic->device, BatchDevice::kCuda);
    EXPECT_FALSE(automatic->consumer_copies);
    EXPECT_EQ(automatic->reason, "");
    GTEST_SKIP() << "the part without GPU batches is skipped: this build makes them here";
  }
  EXPECT_EQ(automatic->device, BatchDevice::kCpu);
  EXPECT_TRUE(automatic->consumer_copies);
  EXPECT_EQ(automatic->reason, unavailable);
  ExpectErrorContains(PlanBatchPlacement(BatchDevice::kCuda, 0, GpuBatches::kOn, true).status(),
                      ErrorCode::kConfig,
                      {"need device cuda and a GPU this build can use", unavailable});
  ExpectErrorContains(PlanBatchPlacement(BatchDevice::kCuda, 0, GpuBatches::kAuto, false).status(),
                      ErrorCode::kConfig, {"batches cannot be made on that GPU here", unavailable});
}

// pin_memory: auto pins exactly when a CUDA device is present; on demands one.
TEST(LoaderTest, PinnedBatchesFollowTheCudaDriver) {
  LoaderOptions options = T2mOptions(/*batch_size=*/2);
  const CudaDriver* driver = CudaDriver::Get();
  auto automatic = Loader::Open(Era5LikeUrl(), options);
  ASSERT_TRUE(automatic.ok()) << automatic.status().ToString();
  EXPECT_EQ(automatic->pinned(), driver != nullptr);

  options.pin_memory = PinMemory::kOff;
  auto off = Loader::Open(Era5LikeUrl(), options);
  ASSERT_TRUE(off.ok());
  EXPECT_FALSE(off->pinned());

  options.pin_memory = PinMemory::kOn;
  auto on = Loader::Open(Era5LikeUrl(), options);
  if (driver == nullptr) {
    ASSERT_FALSE(on.ok());
    EXPECT_EQ(on.status().code(), ErrorCode::kConfig);
    EXPECT_NE(on.status().message().find("pin_memory is on, but batches cannot be page-locked: " +
                                         CudaDriver::UnavailableReason()),
              std::string::npos)
        << on.status().ToString();
    GTEST_SKIP() << "GPU part skipped: " << CudaDriver::UnavailableReason();
  }
  ASSERT_TRUE(on.ok()) << on.status().ToString();
  EXPECT_TRUE(on->pinned());
  auto batch = on->Next();
  ASSERT_TRUE(batch.ok() && *batch) << batch.status().ToString();
  EXPECT_TRUE(driver->IsPageLocked((**batch)->input().data.data()));
}

// device kCuda without a usable GPU fails at open and says why.
TEST(LoaderTest, GpuBatchesWithoutAGpuAreAClearError) {
  if (GpuBatchesUnavailableReason().empty()) GTEST_SKIP() << "a GPU is usable here";
  LoaderOptions options;
  options.variables = {"t2m"};
  options.device = BatchDevice::kCuda;
  auto loader = Loader::Open(Era5LikeUrl(), options);
  ASSERT_FALSE(loader.ok());
  EXPECT_EQ(loader.status().code(), ErrorCode::kConfig);
  EXPECT_NE(loader.status().message().find(GpuBatchesUnavailableReason()), std::string::npos);
}

// A CF-encoded dataset: int16 packed with a fill value (netCDF's float32 0.01 scale), uint8 with
// _Unsigned-free fill only, float32 with xarray's base64 _FillValue (-9999.0).
const std::string& CfEncodedUrl() {
  static const std::string url = [] {
    static MemoryDataset dataset("loader_cf_test");
    dataset.AddArray<int64_t>("time", {2}, {2}, {"time"}, {0, 6},
                              {{"units", "hours since 2000-01-01"}});
    dataset.AddArray<int16_t>(
        "packed", {2, 5}, {1, 5}, {"time", "x"}, {-32767, 0, 100, 2595, 32766, 1, 2, 3, -32767, 4},
        {{"scale_factor", 0.009999999776482582}, {"add_offset", 3.0}, {"_FillValue", -32767}});
    dataset.AddArray<uint8_t>("fraction", {2, 5}, {2, 5}, {"time", "x"},
                              {0, 255, 7, 8, 9, 255, 1, 2, 3, 4}, {{"_FillValue", 255}});
    dataset.AddArray<float>("sst", {2, 5}, {2, 5}, {"time", "x"},
                            {-9999, 1.5f, 2.5f, -9999, 3, 4, 5, 6, 7, -9999},
                            {{"_FillValue", "AAAAAICHw8A="}});
    return dataset.url();
  }();
  return url;
}

std::vector<float> InputValues(const Batch& batch) {
  const auto* p = reinterpret_cast<const float*>(batch.input().data.data());
  return std::vector<float>(p, p + batch.input().data.size() / sizeof(float));
}

// Loader batches hold xarray's decoded values (open_zarr printed them for these stored values),
// NaN before the NaN policy; decode_cf off gives the stored values.
TEST(LoaderTest, CfEncodedVariablesAreDecodedBeforeTheNanPolicy) {
  LoaderOptions options;
  options.variables = {"packed", "fraction", "sst"};
  options.shuffle = ShuffleMode::kNone;
  options.batch_size = 1;
  auto loader = Loader::Open(CfEncodedUrl(), options);
  ASSERT_TRUE(loader.ok()) << loader.status().ToString();
  auto batch = loader->Next();
  ASSERT_TRUE(batch.ok() && batch->has_value());
  const std::vector<float> got = InputValues(***batch);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> want = {nan,
                                   3.0f,
                                   static_cast<float>(3.999999977648258),
                                   static_cast<float>(28.9499994199723),
                                   static_cast<float>(330.6599926762283),
                                   0,
                                   nan,
                                   7,
                                   8,
                                   9,
                                   nan,
                                   1.5f,
                                   2.5f,
                                   nan,
                                   3};
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    if (std::isnan(want[i])) {
      EXPECT_EQ(std::bit_cast<uint32_t>(got[i]), 0x7FC00000u) << i;  // the one quiet NaN
    } else {
      EXPECT_EQ(got[i], want[i]) << i;
    }
  }

  options.fill_nan = true;
  options.nan_fill = -1;
  auto filled = Loader::Open(CfEncodedUrl(), options);
  ASSERT_TRUE(filled.ok());
  auto first = filled->Next();
  ASSERT_TRUE(first.ok() && first->has_value());
  const std::vector<float> values = InputValues(***first);
  const auto* mask = reinterpret_cast<const uint8_t*>((***first).input_mask().data.data());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(mask[i], std::isnan(want[i]) ? 1 : 0) << i;
    EXPECT_EQ(values[i], std::isnan(want[i]) ? -1.0f : want[i]) << i;
  }

  options.fill_nan = false;
  options.decode_cf = false;
  auto raw = Loader::Open(CfEncodedUrl(), options);
  ASSERT_TRUE(raw.ok());
  auto stored = raw->Next();
  ASSERT_TRUE(stored.ok() && stored->has_value());
  EXPECT_EQ(InputValues(***stored), (std::vector<float>{-32767, 0, 100, 2595, 32766, 0, 255, 7, 8,
                                                        9, -9999, 1.5f, 2.5f, -9999, 3}));
}

// GPU: device kCuda batches (assembled by the scatter kernel, windows cutting chunks, a reduced
// dtype, NaN masks) equal the CPU loader's, byte for byte, batch after batch: in one wave per
// batch, and in waves of one chunk (gpu_wave_bytes 1), read into one workspace while the other's
// wave decodes and scatters, half the chunks decoded by the worker threads.
TEST(LoaderGpuTest, BatchesEqualTheCpuLoadersByteForByte) {
  if (!GpuBatchesUnavailableReason().empty()) {
    GTEST_SKIP() << "GPU test skipped: " << GpuBatchesUnavailableReason();
  }
  const CudaDriver* driver = CudaDriver::Get();
  for (auto [dtype, wave_bytes] :
       {std::pair{BatchDType::kFloat32, uint64_t{0}}, std::pair{BatchDType::kBFloat16, uint64_t{0}},
        std::pair{BatchDType::kFloat16, uint64_t{0}}, std::pair{BatchDType::kFloat32, uint64_t{1}},
        std::pair{BatchDType::kBFloat16, uint64_t{1}}}) {
    SCOPED_TRACE("gpu_wave_bytes " + std::to_string(wave_bytes));
    LoaderOptions options;
    options.gpu_wave_bytes = wave_bytes;
    if (wave_bytes != 0) options.decode.cpu_share = 0.5;
    options.variables = {"t2m", "temperature@850,1000"};
    options.sample = {{"time", 2}, {"longitude", 3}};
    options.stride = {{"time", 1}, {"longitude", 1}};
    options.target_dim = "time";
    options.target_offsets = {1};
    options.batch_size = 3;
    options.dtype = dtype;
    options.fill_nan = true;
    options.nan_fill = -1;
    options.prefetch = 3;
    auto cpu = Loader::Open(Era5LikeUrl(), options);
    ASSERT_TRUE(cpu.ok()) << cpu.status().ToString();
    options.device = BatchDevice::kCuda;
    auto gpu = Loader::Open(Era5LikeUrl(), options);
    ASSERT_TRUE(gpu.ok()) << gpu.status().ToString();
    uint64_t batches = 0;
    for (;;) {
      auto want = cpu->Next();
      auto got = gpu->Next();
      ASSERT_TRUE(want.ok() && got.ok()) << got.status().ToString();
      ASSERT_EQ(want->has_value(), got->has_value());
      if (!got->has_value()) break;
      const Batch& w = ***want;
      const Batch& g = ***got;
      EXPECT_EQ(g.device(), BatchDevice::kCuda);
      for (auto [gt, wt] : {std::pair{&g.input(), &w.input()},
                            {&g.target(), &w.target()},
                            {&g.input_mask(), &w.input_mask()}}) {
        ASSERT_EQ(gt->shape, wt->shape);
        std::vector<std::byte> back(gt->data.size());
        ASSERT_TRUE(driver
                        ->CopyToHost(back.data(), reinterpret_cast<uint64_t>(gt->data.data()),
                                     back.size(), nullptr)
                        .ok());
        ASSERT_TRUE(driver->SynchronizeStream(nullptr).ok());
        ASSERT_TRUE(std::equal(back.begin(), back.end(), wt->data.begin())) << "batch " << batches;
      }
      ASSERT_TRUE(
          std::equal(g.origins().data.begin(), g.origins().data.end(), w.origins().data.begin()));
      ++batches;
      // Fewer batches ahead from the second on: the pipeline restarts, the idle device blocks
      // and decode workspaces are freed, and the batches stay the same.
      if (batches == 2) gpu->SetPrefetch(1);
    }
    EXPECT_EQ(batches, cpu->num_batches());
    EXPECT_GT(gpu->stats().bytes_to_gpu, 0u);
  }
}

// GPU: CF decoding fused into the scatter kernel (packed int16 in float64, uint8 and float32 fill
// values in float32) gives the CPU loader's batches byte for byte, normalised or not.
TEST(LoaderGpuTest, CfDecodedBatchesEqualTheCpuLoadersByteForByte) {
  if (!GpuBatchesUnavailableReason().empty()) {
    GTEST_SKIP() << "GPU test skipped: " << GpuBatchesUnavailableReason();
  }
  const CudaDriver* driver = CudaDriver::Get();
  for (BatchDType dtype : {BatchDType::kFloat32, BatchDType::kBFloat16, BatchDType::kFloat16}) {
    for (bool fill_nan : {false, true}) {
      LoaderOptions options;
      options.variables = {"packed", "fraction", "sst"};
      options.shuffle = ShuffleMode::kNone;
      options.batch_size = 2;
      options.dtype = dtype;
      options.fill_nan = fill_nan;
      options.nan_fill = -2;
      auto cpu = Loader::Open(CfEncodedUrl(), options);
      ASSERT_TRUE(cpu.ok()) << cpu.status().ToString();
      options.device = BatchDevice::kCuda;
      auto gpu = Loader::Open(CfEncodedUrl(), options);
      ASSERT_TRUE(gpu.ok()) << gpu.status().ToString();
      auto want = cpu->Next();
      auto got = gpu->Next();
      ASSERT_TRUE(want.ok() && got.ok()) << got.status().ToString();
      ASSERT_TRUE(want->has_value() && got->has_value());
      for (auto [gt, wt] : {std::pair{&(***got).input(), &(***want).input()},
                            {&(***got).input_mask(), &(***want).input_mask()}}) {
        ASSERT_EQ(gt->shape, wt->shape);
        std::vector<std::byte> back(gt->data.size());
        ASSERT_TRUE(driver
                        ->CopyToHost(back.data(), reinterpret_cast<uint64_t>(gt->data.data()),
                                     back.size(), nullptr)
                        .ok());
        ASSERT_TRUE(driver->SynchronizeStream(nullptr).ok());
        ASSERT_TRUE(std::equal(back.begin(), back.end(), wt->data.begin()));
      }
    }
  }
}

// GPU: tendency targets (decoded aside into device memory by the scatter kernel, then differenced
// by zs_tendencies) give the CPU loader's batches byte for byte: t2m from float64 chunks of one
// time step, temperature@850 from float32 chunks of two, windows crossing them, every batch dtype,
// NaN filled or kept.
TEST(LoaderGpuTest, TendencyTargetsEqualTheCpuLoadersByteForByte) {
  ChannelStatsFile stats;
  stats.source = Era5LikeUrl();
  stats.tendency_steps = {1, 2};
  for (const char* name : {"t2m", "temperature@850"}) {
    ChannelStats c;
    c.name = name;
    c.variable = c.name == "t2m" ? "t2m" : "temperature";
    if (c.name != "t2m") c.level = 850;
    c.count = 1;
    c.mean = 1234.5;
    c.std = 3.7;
    // Means and stds that leave digits to round: the tendencies are ±1000 per step.
    c.tendencies = {{1, 1, 0, 990.3, 7.1, 0, 0}, {2, 1, 0, -1987.9, 13.3, 0, 0}};
    stats.channels.push_back(c);
  }
  const std::string path = ::testing::TempDir() + "loader_test_tendency_stats.json";
  std::ofstream(path) << FormatChannelStats(stats);
  for (BatchDType dtype : {BatchDType::kFloat32, BatchDType::kBFloat16, BatchDType::kFloat16}) {
    for (bool fill_nan : {false, true}) {
      LoaderOptions options;
      // Waves of one chunk with NaNs filled: targets and bases decoded aside by both workspaces.
      options.gpu_wave_bytes = fill_nan ? 1 : 0;
      options.variables = {"t2m", "temperature@850"};
      options.sample = {{"time", 2}, {"longitude", 3}};
      options.stride = {{"time", 1}, {"longitude", 1}};
      options.target_dim = "time";
      options.target_offsets = {1, 2};
      options.normalize = path;
      options.target_tendencies = true;
      options.batch_size = 2;
      options.dtype = dtype;
      options.fill_nan = fill_nan;
      options.nan_fill = -1;
      auto cpu = Loader::Open(Era5LikeUrl(), options);
      ASSERT_TRUE(cpu.ok()) << cpu.status().ToString();
      if (!GpuBatchesUnavailableReason().empty()) {
        GTEST_SKIP() << "GPU test skipped: " << GpuBatchesUnavailableReason();
      }
      const CudaDriver* driver = CudaDriver::Get();
      options.device = BatchDevice::kCuda;
      auto gpu = Loader::Open(Era5LikeUrl(), options);
      ASSERT_TRUE(gpu.ok()) << gpu.status().ToString();
      uint64_t batches = 0;
      for (;;) {
        auto want = cpu->Next();
        auto got = gpu->Next();
        ASSERT_TRUE(want.ok() && got.ok()) << got.status().ToString();
        ASSERT_EQ(want->has_value(), got->has_value());
        if (!got->has_value()) break;
        const Batch& w = ***want;
        const Batch& g = ***got;
        std::vector<std::pair<const BatchTensor*, const BatchTensor*>> tensors = {
            {&g.input(), &w.input()}, {&g.target(), &w.target()}};
        if (fill_nan) tensors.emplace_back(&g.target_mask(), &w.target_mask());
        for (auto [gt, wt] : tensors) {
          ASSERT_EQ(gt->shape, wt->shape);
          std::vector<std::byte> back(gt->data.size());
          ASSERT_TRUE(driver
                          ->CopyToHost(back.data(), reinterpret_cast<uint64_t>(gt->data.data()),
                                       back.size(), nullptr)
                          .ok());
          ASSERT_TRUE(driver->SynchronizeStream(nullptr).ok());
          ASSERT_TRUE(std::equal(back.begin(), back.end(), wt->data.begin()))
              << "batch " << batches;
        }
        ++batches;
      }
      EXPECT_EQ(batches, cpu->num_batches());
    }
  }
}

}  // namespace
}  // namespace zarrstream

// The loader's NVTX ranges, seen by a tool: this test runs with NVTX_INJECTION64_PATH naming
// counting_injection.cc's library (CMake's test registration sets it), as Nsight Systems would
// inject itself, and checks that every stage of every batch was a range in the "zarrstream"
// domain, with the batch index as its payload, and that every range ended.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "array/memory_dataset_test_util.h"
#include "zarrstream/loader.h"

namespace zarrstream {
namespace {

using PayloadsFn = size_t (*)(const char*, uint64_t*, size_t);
using OpenRangesFn = int64_t (*)();

TEST(NvtxRangesTest, EveryStageOfEveryBatchIsARangeWithItsBatchIndex) {
  const char* injection = std::getenv("NVTX_INJECTION64_PATH");
  ASSERT_NE(injection, nullptr) << "run through ctest: it sets NVTX_INJECTION64_PATH";

  testing::MemoryDataset dataset("nvtx_ranges");
  constexpr uint64_t kTimes = 10, kLat = 4, kLon = 6;
  std::vector<int64_t> hours(kTimes);
  for (uint64_t t = 0; t < kTimes; ++t) hours[t] = static_cast<int64_t>(6 * t);
  dataset.AddArray<int64_t>("time", {kTimes}, {kTimes}, {"time"}, hours,
                            {{"units", "hours since 2000-01-01"}, {"calendar", "standard"}});
  dataset.AddArray<float>("t2m", {kTimes, kLat, kLon}, {1, kLat, kLon},
                          {"time", "latitude", "longitude"},
                          std::vector<float>(kTimes * kLat * kLon, 1.5F));
  LoaderOptions options;
  options.batch_size = 3;  // 4 batches per epoch
  options.prefetch = 2;
  {
    auto loader = Loader::Open(dataset.url(), options);
    ASSERT_TRUE(loader.ok()) << loader.status().ToString();
    for (int epoch = 0; epoch < 2; ++epoch) {
      if (epoch > 0) loader->StartNextEpoch();
      for (;;) {
        auto next = loader->Next();
        ASSERT_TRUE(next.ok()) << next.status().ToString();
        if (!next->has_value()) break;
      }
    }
  }  // the loader's threads are joined: every range has ended

  void* library = dlopen(injection, RTLD_NOW | RTLD_NOLOAD);
  ASSERT_NE(library, nullptr) << "NVTX did not load the injection library " << injection;
  auto payloads = reinterpret_cast<PayloadsFn>(dlsym(library, "NvtxCountingPayloads"));
  auto open_ranges = reinterpret_cast<OpenRangesFn>(dlsym(library, "NvtxCountingOpenRanges"));
  ASSERT_TRUE(payloads != nullptr && open_ranges != nullptr);
  auto ranges = [&](const char* name) {
    std::vector<uint64_t> out(256);
    out.resize(std::min<size_t>(payloads(name, out.data(), out.size()), out.size()));
    std::sort(out.begin(), out.end());
    return out;
  };
  // The consumer waited once per batch delivered: batches 0..3 of each epoch.
  EXPECT_EQ(ranges("zarrstream/wait"), (std::vector<uint64_t>{0, 0, 1, 1, 2, 2, 3, 3}));
  // Every delivered batch was planned and assembled (the pipeline may have prepared the third
  // epoch's first batches too); its chunks were read and decoded in the first epoch (the second
  // finds them in the chunk cache).
  for (const char* stage : {"zarrstream/plan", "zarrstream/read+decode", "zarrstream/assemble"}) {
    const std::vector<uint64_t> got = ranges(stage);
    const bool every_epoch = std::string(stage) != "zarrstream/read+decode";
    for (uint64_t b = 0; b < 4; ++b) {
      EXPECT_GE(std::count(got.begin(), got.end(), b), every_epoch ? 2 : 1)
          << stage << " batch " << b;
    }
    EXPECT_TRUE(std::all_of(got.begin(), got.end(), [](uint64_t b) { return b < 4; })) << stage;
  }
  EXPECT_EQ(open_ranges(), 0);
}

}  // namespace
}  // namespace zarrstream

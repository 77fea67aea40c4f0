#include "loader/decode_share.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <deque>
#include <functional>
#include <string>

#include "util/status_test_util.h"
#include "zarrstream/loader.h"

namespace zarrstream {
namespace {

using Controller = DecodeShareController;
using Setting = Controller::Setting;
constexpr double kStep = Controller::kStep;
constexpr double kInterval = 0.1;  // seconds between the consumer's takes

// Reports a window of batches of the current generation, each having waited `waited` seconds.
void ObserveWindow(Controller& c, double waited) {
  const uint64_t generation = c.Current().generation;
  for (int i = 0; i < Controller::kWindow; ++i) c.Observe(generation, waited, kInterval);
}

TEST(ParseCpuDecodeShareTest, AutoAdaptsFromHalfwayAndAShareIsFixed) {
  Result<DecodePlacement> automatic = ParseCpuDecodeShare("auto");
  ASSERT_TRUE(automatic.ok()) << automatic.status().ToString();
  EXPECT_TRUE(automatic->gpu);
  EXPECT_TRUE(automatic->adaptive);
  EXPECT_EQ(automatic->cpu_share, DecodePlacement::kAutoStart);
  for (const auto& [text, share] : {std::pair{"0", 0.0}, {"0.25", 0.25}, {"1", 1.0}, {".5", 0.5}}) {
    Result<DecodePlacement> fixed = ParseCpuDecodeShare(text);
    ASSERT_TRUE(fixed.ok()) << text << ": " << fixed.status().ToString();
    EXPECT_TRUE(fixed->gpu);
    EXPECT_FALSE(fixed->adaptive);
    EXPECT_EQ(fixed->cpu_share, share) << text;
  }
}

TEST(ParseCpuDecodeShareTest, AnythingElseIsAnErrorQuotingTheText) {
  for (std::string_view bad : {"", "half", "Auto", "1.5", "-0.1", "nan", "0.5 ", "0.5x", "inf"}) {
    ExpectErrorContains(ParseCpuDecodeShare(bad).status(), ErrorCode::kInvalidArgument,
                        {"'" + std::string(bad) + "': expected a share from 0 to 1 or 'auto'"});
  }
}

TEST(DecodeShareControllerTest, StartsAtTheGivenShareWithinZeroToOne) {
  EXPECT_EQ(Controller(0.3).Current().share, 0.3);
  EXPECT_EQ(Controller(-1).Current().share, 0.0);
  EXPECT_EQ(Controller(2).Current().share, 1.0);
}

TEST(DecodeShareControllerTest, AWindowOfBatchesTheConsumerDidNotWaitForRaisesTheShareUpToOne) {
  Controller c(0.75);
  const Setting before = c.Current();
  for (int i = 0; i + 1 < Controller::kWindow; ++i) c.Observe(before.generation, 0, kInterval);
  EXPECT_EQ(c.Current().generation, before.generation);  // not a whole window yet
  c.Observe(before.generation, 0, kInterval);
  const Setting after = c.Current();
  EXPECT_DOUBLE_EQ(after.share, 0.75 + kStep);
  EXPECT_NE(after.generation, before.generation);
  for (int i = 0; i < 5; ++i) ObserveWindow(c, 0);
  EXPECT_EQ(c.Current().share, 1.0);
}

TEST(DecodeShareControllerTest, WaitingMoreThanTheBudgetLowersTheShareByAStepDownToZero) {
  Controller c(0.15);
  ObserveWindow(c, 3 * Controller::kWaitBudget * kInterval);  // each batch 6 % of its interval
  EXPECT_DOUBLE_EQ(c.Current().share, 0.15 - kStep);
  ObserveWindow(c, 3 * Controller::kWaitBudget * kInterval);
  EXPECT_EQ(c.Current().share, 0.0);
  const Setting floor = c.Current();
  ObserveWindow(c, 3 * Controller::kWaitBudget * kInterval);  // nothing left to hand to the GPU
  EXPECT_EQ(c.Current().share, 0.0);
  EXPECT_EQ(c.Current().generation, floor.generation);
}

TEST(DecodeShareControllerTest, WaitsWithinTheBudgetHoldTheShare) {
  Controller c(0.5);
  const Setting start = c.Current();
  for (int window = 0; window < 4; ++window) ObserveWindow(c, 0.01 * kInterval);  // 1 % waiting
  EXPECT_EQ(c.Current().share, 0.5);
  EXPECT_EQ(c.Current().generation, start.generation);
}

TEST(DecodeShareControllerTest, OneLongWaitLowersTheShareAtOnce) {
  Controller c(0.5);
  const Setting start = c.Current();
  c.Observe(start.generation, Controller::kOverload * kInterval, kInterval);
  EXPECT_DOUBLE_EQ(c.Current().share, 0.5 - Controller::kOverloadStep);
  EXPECT_NE(c.Current().generation, start.generation);
}

TEST(DecodeShareControllerTest, BatchesProducedUnderAnEarlierShareDoNotMoveIt) {
  Controller c(0.5);
  const Setting old = c.Current();
  c.Observe(old.generation, kInterval, kInterval);  // an overload: lowered to 0.3
  // The batches in flight when it changed were produced at 0.5: their waits are the old share's.
  for (int i = 0; i < 2 * Controller::kWindow; ++i) c.Observe(old.generation, kInterval, kInterval);
  EXPECT_DOUBLE_EQ(c.Current().share, 0.5 - Controller::kOverloadStep);
}

TEST(DecodeShareControllerTest, TheFirstBatchWithNoIntervalToCompareWithDoesNotCount) {
  Controller c(0.5);
  const uint64_t generation = c.Current().generation;
  c.Observe(generation, 5.0, 0);
  EXPECT_EQ(c.Current().share, 0.5);
}

// A closed loop with three batches in flight between the share a batch is produced with and its
// being taken. `waited(share, batch)` is how long the consumer waits for a batch produced at it.
struct LoopResult {
  double lowest = 1, highest = 0, mean_share = 0, waiting = 0;  // over the last 200 batches
};
LoopResult RunLoop(const std::function<double(double, int)>& waited) {
  Controller c(0);
  std::deque<Setting> in_flight;
  LoopResult r;
  int observed = 0;
  for (int batch = 0; batch < 400; ++batch) {
    in_flight.push_back(c.Current());
    if (in_flight.size() < 4) continue;
    const Setting produced = in_flight.front();
    in_flight.pop_front();
    const double wait = waited(produced.share, batch);
    c.Observe(produced.generation, wait, kInterval + wait);
    if (batch >= 200) {
      ++observed;
      r.lowest = std::min(r.lowest, produced.share);
      r.highest = std::max(r.highest, produced.share);
      r.mean_share += produced.share;
      r.waiting += wait / (kInterval + wait);
    }
  }
  r.mean_share /= observed;
  r.waiting /= observed;
  return r;
}

// The CPU keeps up with shares up to 0.45; beyond, the consumer waits the more the further.
TEST(DecodeShareControllerTest, SettlesAboutTheMostTheCpuCarries) {
  constexpr double kKnee = 0.45;
  const LoopResult r =
      RunLoop([&](double share, int) { return share > kKnee ? (share - kKnee) * kInterval : 0; });
  EXPECT_GE(r.lowest, kKnee - kStep - 1e-9);
  EXPECT_LE(r.highest, kKnee + kStep + 1e-9);
  EXPECT_LE(r.waiting, Controller::kWaitBudget);
  EXPECT_GT(r.highest, kKnee);  // it keeps probing for more
}

// Where the CPU carries every chunk but the consumer now and then waits a little (the machine's
// noise: one batch in eight, 2 % of its interval), the share still reaches one and stays there.
TEST(DecodeShareControllerTest, OccasionalShortWaitsDoNotKeepTheShareFromOne) {
  const LoopResult r =
      RunLoop([](double, int batch) { return batch % 8 == 0 ? 0.02 * kInterval : 0; });
  EXPECT_EQ(r.lowest, 1.0);
}

// The placement rule: of the chunks nvCOMP could decode, the CPU takes `share`, spread evenly.
std::vector<uint8_t> OnGpu(std::vector<uint8_t> decodable, double share) {
  return ChunksDecodedOnGpu(decodable, share);
}

TEST(ChunksDecodedOnGpuTest, NoShareLeavesEveryDecodableChunkToTheGpu) {
  EXPECT_EQ(OnGpu({1, 0, 1, 1}, 0), (std::vector<uint8_t>{1, 0, 1, 1}));
}

TEST(ChunksDecodedOnGpuTest, AWholeShareLeavesTheGpuNothing) {
  EXPECT_EQ(OnGpu({1, 0, 1, 1}, 1), (std::vector<uint8_t>{0, 0, 0, 0}));
}

TEST(ChunksDecodedOnGpuTest, AShareIsSpreadEvenlyOverTheDecodableChunks) {
  // Every second decodable chunk goes to the CPU; chunks nvCOMP cannot decode do not count.
  EXPECT_EQ(OnGpu({1, 1, 0, 1, 1, 0, 1, 1}, 0.5), (std::vector<uint8_t>{1, 0, 0, 1, 0, 0, 1, 0}));
  // A quarter: one of each four, the fourth.
  const std::vector<uint8_t> quarter = OnGpu(std::vector<uint8_t>(8, 1), 0.25);
  EXPECT_EQ(quarter, (std::vector<uint8_t>{1, 1, 1, 0, 1, 1, 1, 0}));
}

TEST(ChunksDecodedOnGpuTest, TheCpuTakesItsShareRoundedDown) {
  for (const double share : {0.1, 0.3, 0.7, 0.9}) {
    const std::vector<uint8_t> on_gpu = OnGpu(std::vector<uint8_t>(100, 1), share);
    const auto cpu = std::count(on_gpu.begin(), on_gpu.end(), 0);
    EXPECT_EQ(cpu, static_cast<long>(100 * share)) << share;
  }
}

TEST(CurrentDecodeShareTest, TheAdaptiveShareWhereThereIsOne) {
  EXPECT_EQ(CurrentDecodeShare(nullptr, 0.4).share, 0.4);
  EXPECT_EQ(CurrentDecodeShare(nullptr, 0.4).generation, 0u);
  Controller adaptive(0.7);
  EXPECT_EQ(CurrentDecodeShare(&adaptive, 0.4).share, 0.7);
}

}  // namespace
}  // namespace zarrstream

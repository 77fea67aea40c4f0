#include "loader/decode_share.h"

#include <gtest/gtest.h>

#include <deque>

namespace zarrstream {
namespace {

using Setting = DecodeShareController::Setting;
constexpr double kUp = DecodeShareController::kStepUp;
constexpr double kDown = DecodeShareController::kStepDown;

TEST(DecodeShareControllerTest, StartsAtTheGivenShareWithinZeroToOne) {
  EXPECT_EQ(DecodeShareController(0.3).Current().share, 0.3);
  EXPECT_EQ(DecodeShareController(-1).Current().share, 0.0);
  EXPECT_EQ(DecodeShareController(2).Current().share, 1.0);
}

TEST(DecodeShareControllerTest, BatchesReadyEarlyRaiseTheShareUpToOne) {
  DecodeShareController c(0.75);
  Setting before = c.Current();
  c.Observe(before.generation, 0, 0.05, 0.1);  // ready half an interval early
  Setting after = c.Current();
  EXPECT_DOUBLE_EQ(after.share, 0.75 + kUp);
  EXPECT_NE(after.generation, before.generation);
  for (int i = 0; i < 5; ++i) c.Observe(c.Current().generation, 0, 0.05, 0.1);
  EXPECT_EQ(c.Current().share, 1.0);
}

TEST(DecodeShareControllerTest, AWaitLowersTheShareDownToZero) {
  DecodeShareController c(0.3);
  c.Observe(c.Current().generation, 0.002, 0, 0.1);
  EXPECT_DOUBLE_EQ(c.Current().share, 0.3 - kDown);
  c.Observe(c.Current().generation, 0.002, 0, 0.1);
  EXPECT_EQ(c.Current().share, 0.0);
  const Setting floor = c.Current();
  c.Observe(floor.generation, 0.002, 0, 0.1);  // nothing left to hand back to the GPU
  EXPECT_EQ(c.Current().share, 0.0);
  EXPECT_EQ(c.Current().generation, floor.generation);
}

TEST(DecodeShareControllerTest, HoldsWhenABatchIsReadyJustInTimeOrThereIsNoInterval) {
  DecodeShareController c(0.5);
  const Setting start = c.Current();
  c.Observe(start.generation, 0, 0.01, 0.1);  // ready, but less than a quarter interval early
  c.Observe(start.generation, 0, 5.0, 0);     // the first batch: no interval to compare with
  EXPECT_EQ(c.Current().share, 0.5);
  EXPECT_EQ(c.Current().generation, start.generation);
}

TEST(DecodeShareControllerTest, BatchesProducedUnderAnEarlierShareDoNotMoveIt) {
  DecodeShareController c(0.5);
  const Setting old = c.Current();
  c.Observe(old.generation, 0.01, 0, 0.1);  // lowered to 0.3
  // The batches in flight when it changed were produced at 0.5: their waits are the old share's.
  c.Observe(old.generation, 0.01, 0, 0.1);
  c.Observe(old.generation, 0, 1.0, 0.1);
  EXPECT_DOUBLE_EQ(c.Current().share, 0.5 - kDown);
}

// A closed loop: the CPU keeps up with shares up to 0.45 (beyond, every batch is late), and three
// batches are in flight between the share a batch is produced with and its being taken. From
// nvCOMP alone the share climbs, then stays about the knee: at most a third of the batches late.
TEST(DecodeShareControllerTest, SettlesAboutTheMostTheCpuCarries) {
  constexpr double kKnee = 0.45;
  DecodeShareController c(0);
  std::deque<Setting> in_flight;
  int late = 0, observed = 0;
  double lowest = 1, highest = 0;
  for (int batch = 0; batch < 300; ++batch) {
    in_flight.push_back(c.Current());
    if (in_flight.size() < 4) continue;
    const Setting produced = in_flight.front();
    in_flight.pop_front();
    const bool is_late = produced.share > kKnee + 1e-9;
    c.Observe(produced.generation, is_late ? 0.01 : 0, is_late ? 0 : 0.05, 0.1);
    if (batch >= 100) {
      ++observed;
      late += is_late ? 1 : 0;
      lowest = std::min(lowest, produced.share);
      highest = std::max(highest, produced.share);
    }
  }
  EXPECT_GE(lowest, kKnee - kDown - 1e-9);
  EXPECT_LE(highest, kKnee + kUp + 1e-9);
  EXPECT_LE(late * 3, observed);
  EXPECT_GT(late, 0);  // it keeps probing for more
}

}  // namespace
}  // namespace zarrstream

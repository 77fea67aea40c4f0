#include "loader/decode_share.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <deque>
#include <functional>
#include <map>
#include <random>
#include <string>

#include "util/status_test_util.h"
#include "zarrstream/loader.h"

namespace zarrstream {
namespace {

using Controller = DecodeShareController;
using Setting = Controller::Setting;
constexpr double kInterval = 0.1;  // seconds between the consumer's takes

// Reports batches of the current generation, `interval` seconds apart, each waited for `waited`
// seconds (0: ready when taken), until the share moves (at most `most` of them); returns how many
// were reported.
int TakeUntilMoved(Controller& c, double interval, double waited = 0, int most = 100) {
  const uint64_t generation = c.Current().generation;
  int taken = 0;
  while (taken < most && c.Current().generation == generation) {
    c.Observe(generation, waited, interval);
    ++taken;
  }
  return taken;
}

TEST(ParseCpuDecodeShareTest, AutoAdaptsFromEveryChunkOnTheCpuAndAShareIsFixed) {
  Result<DecodePlacement> automatic = ParseCpuDecodeShare("auto");
  ASSERT_TRUE(automatic.ok()) << automatic.status().ToString();
  EXPECT_TRUE(automatic->gpu);
  EXPECT_TRUE(automatic->adaptive);
  EXPECT_EQ(automatic->cpu_share, DecodePlacement::kAutoStart);
  EXPECT_EQ(DecodePlacement::kAutoStart, 1.0);
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

TEST(DecodeShareControllerTest, StartsAtTheGivenShareOnTheGridWithinZeroToOne) {
  EXPECT_EQ(Controller(0.3).Current().share, 0.3);
  EXPECT_EQ(Controller(0.37).Current().share, 0.4);
  EXPECT_EQ(Controller(-1).Current().share, 0.0);
  EXPECT_EQ(Controller(2).Current().share, 1.0);
}

TEST(DecodeShareControllerTest, AWindowAfterTheFirstBatchJudgesAShareThenASpanAboveAndBelow) {
  Controller c(0.5);
  const Setting start = c.Current();
  // The first batch is passed over, then kWindow batches judge the share.
  for (int i = 0; i < Controller::kWindow; ++i) c.Observe(start.generation, 0, kInterval);
  EXPECT_EQ(c.Current().generation, start.generation);
  c.Observe(start.generation, 0, kInterval);
  const Setting above = c.Current();
  EXPECT_DOUBLE_EQ(above.share, 1.0);  // from the middle, the first span reaches both ends
  EXPECT_NE(above.generation, start.generation);
  // The consumer waits a little there (a wait-free window would end the search at the CPU end).
  EXPECT_EQ(TakeUntilMoved(c, kInterval, 0.05 * kInterval), Controller::kWindow + 1);
  EXPECT_DOUBLE_EQ(c.Current().share, 0.0);
}

TEST(DecodeShareControllerTest, FromTheCpuEndTheFirstSpanReachesTheOtherEnd) {
  Controller c(1.0);
  const Setting start = c.Current();
  c.Observe(start.generation, 0, kInterval);  // passed over
  // The consumer waited for batches made with every chunk on the CPU: the search goes on.
  for (int i = 0; i < Controller::kWindow; ++i) {
    c.Observe(start.generation, 0.05 * kInterval, kInterval);
  }
  EXPECT_DOUBLE_EQ(c.Current().share, 0.0);
}

TEST(DecodeShareControllerTest, ACpuEndTheConsumerNeverWaitsForEndsTheSearchAndIsNeverProbed) {
  Controller c(1.0);
  // Passed over, one window settles at once; windows without a wait never lead to a probe.
  const int many = 1 + 10 * Controller::kWindow * Controller::kMaxHoldWindows;  // whole windows
  EXPECT_EQ(TakeUntilMoved(c, kInterval, 0, many), many);
  EXPECT_DOUBLE_EQ(c.Current().share, 1.0);
  // Windows in which the consumer waited a little (less than kChanged slower) lead to one after
  // kMaxHoldWindows of them.
  EXPECT_EQ(TakeUntilMoved(c, 1.02 * kInterval, 0.02 * kInterval, many),
            Controller::kWindow * Controller::kMaxHoldWindows);
  EXPECT_DOUBLE_EQ(c.Current().share, 0.9);
}

TEST(DecodeShareControllerTest, TheStartupBatchesJudgeNothing) {
  Controller c(1.0, /*startup_batches=*/3);
  const Setting start = c.Current();
  // The pipeline's first batches wait long (its memory is being allocated), then none does.
  for (int i = 0; i < 3; ++i) c.Observe(start.generation, kInterval, 2 * kInterval);
  // Then one window settles at the CPU end, as without them: a wait judged would have searched.
  EXPECT_EQ(TakeUntilMoved(c, kInterval, 0, 1 + Controller::kWindow), 1 + Controller::kWindow);
  EXPECT_DOUBLE_EQ(c.Current().share, 1.0);
  EXPECT_EQ(c.Current().generation, start.generation);
}

TEST(DecodeShareControllerTest, ACpuEndSettledWithoutWaitsSearchesAgainWhenTheConsumerWaits) {
  Controller c(1.0);
  const Setting start = c.Current();
  for (int i = 0; i < 1 + Controller::kWindow; ++i) c.Observe(start.generation, 0, kInterval);
  EXPECT_DOUBLE_EQ(c.Current().share, 1.0);  // settled
  // Waits of a few per cent (less than a probe costs here) leave it where it is...
  for (int i = 0; i < Controller::kWindow; ++i) {
    c.Observe(start.generation, 0.05 * kInterval, 1.05 * kInterval);
  }
  EXPECT_EQ(c.Current().generation, start.generation);
  // ...a consumer kChanged slower than the window before starts a search: a span of two below.
  for (int i = 0; i < Controller::kWindow; ++i) {
    c.Observe(start.generation, 0.2 * kInterval, 1.2 * kInterval);
  }
  EXPECT_DOUBLE_EQ(c.Current().share, 0.8);
}

TEST(DecodeShareControllerTest, BatchesPassedOverAfterARestartJudgeNothing) {
  Controller c(1.0);
  const Setting start = c.Current();
  for (int i = 0; i < 1 + Controller::kWindow; ++i) c.Observe(start.generation, 0, kInterval);
  ASSERT_DOUBLE_EQ(c.Current().share, 1.0);  // settled
  c.PassOver(3);
  // Three slow batches (the restarted pipeline allocating) do not start a search.
  for (int i = 0; i < 3; ++i) c.Observe(start.generation, kInterval, 3 * kInterval);
  for (int i = 0; i < Controller::kWindow; ++i) c.Observe(start.generation, 0, kInterval);
  EXPECT_EQ(c.Current().generation, start.generation);
}

TEST(DecodeShareControllerTest, StayingAtTheCpuEndEndsEverySearchAndProbe) {
  Controller c(0.5);
  const uint64_t before = c.Current().generation;
  c.StayAtCpuEnd();
  const Setting stay = c.Current();
  EXPECT_DOUBLE_EQ(stay.share, 1.0);
  EXPECT_NE(stay.generation, before);
  // Waits that would have moved it, and windows enough for any probe: it stays.
  for (int i = 0; i < 10 * Controller::kWindow * Controller::kMaxHoldWindows; ++i) {
    c.Observe(stay.generation, 0.5 * kInterval, kInterval);
  }
  EXPECT_EQ(c.Current().generation, stay.generation);
}

TEST(DecodeShareControllerTest, OneLongWaitEndsTheWindowAtOnce) {
  Controller c(0.5);
  const Setting start = c.Current();
  c.Observe(start.generation, 0, kInterval);  // passed over
  c.Observe(start.generation, Controller::kOverload * kInterval, kInterval);
  EXPECT_DOUBLE_EQ(c.Current().share, 1.0);
}

TEST(DecodeShareControllerTest, BatchesProducedUnderAnEarlierShareDoNotCount) {
  Controller c(0.5);
  const Setting old = c.Current();
  TakeUntilMoved(c, kInterval);
  const Setting now = c.Current();
  for (int i = 0; i < 4 * Controller::kWindow; ++i) c.Observe(old.generation, kInterval, kInterval);
  EXPECT_EQ(c.Current().generation, now.generation);
}

TEST(DecodeShareControllerTest, ABatchWithNoIntervalToCompareWithDoesNotCount) {
  Controller c(0.5);
  const uint64_t generation = c.Current().generation;
  for (int i = 0; i < 4 * Controller::kWindow; ++i) c.Observe(generation, 0, 0);
  EXPECT_EQ(c.Current().generation, generation);
}

// A closed loop with three batches in flight between the share a batch is produced with and its
// being taken. `seconds(share, batch)` is the consumer's time for a batch produced at `share`:
// its step (which nvCOMP's decoding beside it slows) plus its wait (where the CPU falls behind).
struct CostModel {
  std::function<double(double)> step;
  std::function<double(double)> wait;
};
struct LoopResult {
  double mean_seconds = 0;           // per batch over the last `judged` batches
  std::map<double, int> batches_at;  // of those, how many each share produced
  double most_used = -1;             // the share that produced the most of them
};
// `alternate`: the consumer waits for every second batch only, twice as long (two coordinators
// taking turns). `wait_noise`: the waits' own spread (default: `noise`).
LoopResult RunLoop(const std::function<const CostModel&(int)>& model, int batches, int judged,
                   double noise = 0, bool alternate = false, double wait_noise = -1) {
  Controller c(DecodePlacement::kAutoStart);
  std::deque<Setting> in_flight;
  std::minstd_rand random(7);
  std::uniform_real_distribution<double> jitter(1 - noise, 1 + noise);
  if (wait_noise < 0) wait_noise = noise;
  std::uniform_real_distribution<double> wait_jitter(1 - wait_noise, 1 + wait_noise);
  LoopResult r;
  for (int batch = 0; batch < batches; ++batch) {
    in_flight.push_back(c.Current());
    if (in_flight.size() < 4) continue;
    const Setting produced = in_flight.front();
    in_flight.pop_front();
    const CostModel& m = model(batch);
    double wait = m.wait(produced.share) * wait_jitter(random);
    if (alternate) wait = batch % 2 == 0 ? 2 * wait : 0;
    const double seconds = m.step(produced.share) * jitter(random) + wait;
    c.Observe(produced.generation, wait, seconds);
    if (batch >= batches - judged) {
      r.mean_seconds += seconds / judged;
      ++r.batches_at[produced.share];
    }
  }
  int most = 0;
  for (const auto& [share, n] : r.batches_at) {
    if (n > most) most = n, r.most_used = share;
  }
  return r;
}
// The least time per batch the model allows at any share of the grid.
double Best(const CostModel& m) {
  double best = 1e9;
  for (int level = 0; level <= Controller::kLevels; ++level) {
    const double share = static_cast<double>(level) / Controller::kLevels;
    best = std::min(best, m.step(share) + m.wait(share));
  }
  return best;
}

// One GPU with cores to spare: the CPU carries every chunk, and nvCOMP's decoding slows the step
// by up to 10 % (as the light model on one H100 with 32 cores).
const CostModel kCoresToSpare{[](double share) { return kInterval * (1 + 0.10 * (1 - share)); },
                              [](double) { return 0.0; }};
// Few cores per GPU: beyond a tenth of the chunks the consumer waits, and nvCOMP costs the step
// little (two H100 with 16 cores each).
const CostModel kFewCores{
    [](double share) { return kInterval * (1 + 0.03 * (1 - share)); },
    [](double share) { return std::max(0.0, (share - 0.1) * 3 * kInterval); }};
// In between: nvCOMP costs the step up to 14 %, the CPU falls behind beyond 70 % and waits grow
// from there (one H100 with 16 cores): the fastest share is 0.7, neither end.
const CostModel kInBetween{
    [](double share) { return kInterval * (1 + 0.14 * (1 - share)); },
    [](double share) { return std::max(0.0, kInterval * (1.1 * share - 0.8)); }};

TEST(DecodeShareControllerTest, EveryChunkGoesToTheCpuWhereItCarriesThemAll) {
  LoopResult r = RunLoop([](int) -> const CostModel& { return kCoresToSpare; }, 600, 400);
  EXPECT_EQ(r.most_used, 1.0);
  EXPECT_EQ(r.batches_at[1.0], 400);  // never a probe
  EXPECT_NEAR(r.mean_seconds, Best(kCoresToSpare), 1e-9);
}

TEST(DecodeShareControllerTest, AShortRunWhereTheCpuCarriesEveryChunkMeasuresNoOtherShare) {
  // 60 batches, the first few filling the pipeline: no search, and no probe yet.
  LoopResult r = RunLoop([](int) -> const CostModel& { return kCoresToSpare; }, 60, 56);
  EXPECT_EQ(r.batches_at[1.0], 56);
  EXPECT_NEAR(r.mean_seconds, Best(kCoresToSpare), 1e-9);
}

TEST(DecodeShareControllerTest, NvcompDecodesNearlyAllWhereTheCoresFallFarShort) {
  const LoopResult r = RunLoop([](int) -> const CostModel& { return kFewCores; }, 600, 400);
  EXPECT_EQ(r.most_used, 0.1);
  EXPECT_LE(r.mean_seconds, 1.02 * Best(kFewCores));
}

TEST(DecodeShareControllerTest, FindsTheFastestShareBetweenTheEnds) {
  const LoopResult r = RunLoop([](int) -> const CostModel& { return kInBetween; }, 600, 400);
  EXPECT_EQ(r.most_used, 0.7);
  EXPECT_LE(r.mean_seconds, 1.02 * Best(kInBetween));
}

TEST(DecodeShareControllerTest, FindsItThroughTheNoiseOfRealSteps) {
  // Every step and wait off by up to 3 % either way.
  const LoopResult r =
      RunLoop([](int) -> const CostModel& { return kInBetween; }, 1000, 600, /*noise=*/0.03);
  EXPECT_NEAR(r.most_used, 0.7, 0.1 + 1e-9);
  EXPECT_LE(r.mean_seconds, 1.03 * Best(kInBetween));
}

TEST(DecodeShareControllerTest, FindsItWhereTheConsumerWaitsForEverySecondBatch) {
  const LoopResult r = RunLoop([](int) -> const CostModel& { return kInBetween; }, 600, 400,
                               /*noise=*/0, /*alternate=*/true);
  EXPECT_EQ(r.most_used, 0.7);
  EXPECT_LE(r.mean_seconds, 1.02 * Best(kInBetween));
}

// Every chunk on the CPU is fastest, every chunk on nvCOMP next, and a mix slower than either
// (each wave waits for both decoders), as measured on one H100 with 16 cores.
const CostModel kEndsFastest{[](double share) { return kInterval * (1 + 0.06 * (1 - share)); },
                             [](double share) { return kInterval * 0.5 * share * (1 - share); }};

TEST(DecodeShareControllerTest, FindsAnEndFasterThanEveryMix) {
  const LoopResult r = RunLoop([](int) -> const CostModel& { return kEndsFastest; }, 600, 400,
                               /*noise=*/0.02, /*alternate=*/true);
  EXPECT_EQ(r.most_used, 1.0);
  EXPECT_LE(r.mean_seconds, 1.02 * Best(kEndsFastest));
}

// As measured on one H100 with 16 cores and two batches in flight: every chunk on the CPU fastest
// though the consumer waits about 8 % there, by amounts that swing from batch to batch (here up
// to 90 % either way), nvCOMP alone next, a mix slower than either.
const CostModel kCpuAtItsLimit{
    [](double share) { return kInterval * (1 + 0.13 * (1 - share)); },
    [](double share) { return kInterval * (0.076 * share + 0.6 * share * (1 - share)); }};

TEST(DecodeShareControllerTest, SwingingWaitsAtTheLimitDoNotKeepItSearching) {
  const LoopResult r = RunLoop([](int) -> const CostModel& { return kCpuAtItsLimit; }, 1000, 600,
                               /*noise=*/0.02, /*alternate=*/true, /*wait_noise=*/0.9);
  EXPECT_EQ(r.most_used, 1.0);
  EXPECT_LE(r.mean_seconds, 1.03 * Best(kCpuAtItsLimit));
}

TEST(DecodeShareControllerTest, SearchesAgainWhenTheConditionsChange) {
  // The cores become scarce half-way (another job takes them): the share follows.
  const LoopResult r =
      RunLoop([](int batch) -> const CostModel& { return batch < 500 ? kCoresToSpare : kFewCores; },
              1000, 300);
  EXPECT_EQ(r.most_used, 0.1);
  EXPECT_LE(r.mean_seconds, 1.03 * Best(kFewCores));
}

TEST(DecodeShareControllerTest, ASlowStepNowAndThenDoesNotMoveIt) {
  // Every tenth step takes three times as long (a checkpoint, a log line).
  const CostModel spiky{[](double share) { return kInterval * (1 + 0.10 * (1 - share)); },
                        [](double) { return 0.0; }};
  int batch_seen = 0;
  const CostModel every_tenth{
      [&](double share) { return spiky.step(share) * (++batch_seen % 10 == 0 ? 3 : 1); },
      spiky.wait};
  LoopResult r = RunLoop([&](int) -> const CostModel& { return every_tenth; }, 600, 400);
  EXPECT_EQ(r.most_used, 1.0);
  EXPECT_GE(r.batches_at[1.0], 0.8 * 400);
}

// The ranks of a data-parallel job: two controllers and one step for both: each rank's time per
// batch is the slower rank's step and wait (the gradients' all-reduce), off by up to 0.1 % per
// rank. The ranks' pipelines are a batch apart (three and four batches in flight), so a share
// reaches their batches at different steps. The steps vary by `step_noise` either way, each
// rank's waits (its own) by `wait_noise`. Returns each rank's share at the end and the mean time
// per batch over the last `judged` batches, with how many batches each share produced there.
struct RanksResult {
  double shares[2] = {-1, -1};
  double mean_seconds = 0;
  std::map<double, int> batches_at;
};
RanksResult RunRanks(const CostModel& m, Controller::Steps steps, int batches, int judged,
                     double step_noise, double wait_noise) {
  Controller ranks[2] = {Controller(DecodePlacement::kAutoStart, 0, steps),
                         Controller(DecodePlacement::kAutoStart, 0, steps)};
  const size_t in_flight_at[2] = {3, 4};
  std::deque<Setting> in_flight[2];
  std::minstd_rand random(11);
  std::uniform_real_distribution<double> step_jitter(1 - step_noise, 1 + step_noise);
  std::uniform_real_distribution<double> wait_jitter(1 - wait_noise, 1 + wait_noise);
  std::uniform_real_distribution<double> rank_jitter(0.999, 1.001);
  RanksResult r;
  for (int batch = 0; batch < batches; ++batch) {
    double wait[2] = {0, 0}, slowest = 0;
    const double step_factor = step_jitter(random);
    Setting produced[2];
    bool both_full = true;  // each rank's pipeline holds its batches in flight
    for (int k = 0; k < 2; ++k) {
      in_flight[k].push_back(ranks[k].Current());
      if (in_flight[k].size() < in_flight_at[k]) {
        both_full = false;
        continue;
      }
      produced[k] = in_flight[k].front();
      in_flight[k].pop_front();
      wait[k] = m.wait(produced[k].share) * wait_jitter(random);
      slowest = std::max(slowest, m.step(produced[k].share) * step_factor + wait[k]);
    }
    if (!both_full) continue;
    for (int k = 0; k < 2; ++k) {
      ranks[k].Observe(produced[k].generation, wait[k], slowest * rank_jitter(random));
      if (batch >= batches - judged) ++r.batches_at[produced[k].share];
    }
    if (batch >= batches - judged) r.mean_seconds += slowest / judged;
  }
  for (int k = 0; k < 2; ++k) r.shares[k] = ranks[k].Current().share;
  return r;
}

// Two GPUs with 16 cores each, shaped as measured on two H200s: nvCOMP decoding every chunk slows
// the step by 17.5 %, the CPU carries a tenth of the chunks without a wait, and a rank waits more
// the more it takes beyond that; the fastest share (0.1) is 1.5 % faster than nvCOMP alone.
const CostModel kTwoRanksFewCores{
    [](double share) { return kInterval * (1 + 0.175 * (1 - share)); },
    [](double share) { return std::max(0.0, (share - 0.1) * 0.5 * kInterval); }};

TEST(DecodeShareControllerTest, RanksSteppingTogetherMeasureTheEndsAndSettleAtTheSameOne) {
  // Independent searches (Steps::kOwn) in this loop come near the best mix over 1,000 quiet
  // batches (0.7 % faster than nvCOMP alone), but over 100 they cost more than they find (1.4-4.5 %
  // behind it, more the noisier the steps) and with noisy steps the ranks part ways. Ranks that
  // measure only the ends agree, whatever the noise, within 2.5 % of the best mix.
  for (const auto& [step_noise, wait_noise] : {std::pair{0.0, 0.5}, {0.03, 0.9}, {0.08, 0.9}}) {
    RanksResult r = RunRanks(kTwoRanksFewCores, Controller::Steps::kSharedWithRanks, 1000, 600,
                             step_noise, wait_noise);
    EXPECT_EQ(r.shares[0], 0.0) << step_noise;
    EXPECT_EQ(r.shares[1], 0.0) << step_noise;
    EXPECT_EQ(r.batches_at[0.0], 2 * 600) << step_noise;  // settled, and never a probe
    // nvCOMP alone's time (the steps' noise averages out), 1.5 % above the best mix's.
    EXPECT_LE(r.mean_seconds, 1.01 * kTwoRanksFewCores.step(0)) << step_noise;
    EXPECT_LE(r.mean_seconds, 1.025 * Best(kTwoRanksFewCores)) << step_noise;
  }
}

TEST(DecodeShareControllerTest, RanksWithCoresToSpareSettleAtTheCpuEnd) {
  RanksResult r = RunRanks(kCoresToSpare, Controller::Steps::kSharedWithRanks, 600, 400,
                           /*step_noise=*/0.03, /*wait_noise=*/0.5);
  EXPECT_EQ(r.shares[0], 1.0);
  EXPECT_EQ(r.shares[1], 1.0);
  EXPECT_EQ(r.batches_at[1.0], 2 * 400);
}

TEST(DecodeShareControllerTest, ARankMeasuresOnlyTheEndsAndItsOwnWaitsJudgeNothing) {
  // At the CPU end with no wait a rank still measures nvCOMP: another rank may have waited.
  Controller ready(DecodePlacement::kAutoStart, 0, Controller::Steps::kSharedWithRanks);
  EXPECT_EQ(TakeUntilMoved(ready, kInterval), Controller::kWindow + 1);
  EXPECT_DOUBLE_EQ(ready.Current().share, 0.0);

  Controller c(DecodePlacement::kAutoStart, 0, Controller::Steps::kSharedWithRanks);
  // A long wait of its own ends no window early (alone, the first would: OneLongWaitEnds...).
  EXPECT_EQ(TakeUntilMoved(c, kInterval, 0.5 * kInterval), Controller::kWindow + 1);
  EXPECT_DOUBLE_EQ(c.Current().share, 0.0);
  // Faster there: settled, and no neighbour probed for as long as its time per batch holds.
  EXPECT_EQ(TakeUntilMoved(c, 0.9 * kInterval, 0, 200), 200);
  EXPECT_DOUBLE_EQ(c.Current().share, 0.0);
  // 10 % slower than when settled: both ends are measured again, the other end first...
  EXPECT_EQ(TakeUntilMoved(c, 1.2 * kInterval), Controller::kWindow + 1);
  EXPECT_DOUBLE_EQ(c.Current().share, 1.0);
  // ...which is now the faster: it stays.
  EXPECT_EQ(TakeUntilMoved(c, 1.1 * kInterval, 0, 200), 200);
  EXPECT_DOUBLE_EQ(c.Current().share, 1.0);
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

TEST(ChunksDecodedOnGpuTest, TheInnerChunksOfAShardGoTogether) {
  // Four shards of four inner chunks, half to the CPU: whole shards, every other one.
  std::vector<uint64_t> shards;
  for (uint64_t s = 0; s < 4; ++s) shards.insert(shards.end(), 4, 100 + s);
  const std::vector<uint8_t> half = ChunksDecodedOnGpu(std::vector<uint8_t>(16, 1), 0.5, shards);
  EXPECT_EQ(half, (std::vector<uint8_t>{0, 0, 0, 0, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1}));
  // Shards of 13 (an ERA5 field's levels) at a fifth: the CPU's count stays within half a shard
  // of the share at every shard, and no shard is split.
  std::vector<uint64_t> levels;
  for (uint64_t s = 0; s < 40; ++s) levels.insert(levels.end(), 13, s);
  const std::vector<uint8_t> fifth = ChunksDecodedOnGpu(std::vector<uint8_t>(520, 1), 0.2, levels);
  uint64_t cpu = 0;
  for (size_t s = 0; s < 40; ++s) {
    const auto first = fifth.begin() + static_cast<std::ptrdiff_t>(13 * s);
    EXPECT_TRUE(std::all_of(first, first + 13, [&](uint8_t v) { return v == *first; })) << s;
    cpu += *first == 0 ? 13 : 0;
    EXPECT_LE(std::abs(static_cast<double>(cpu) - 0.2 * 13 * (s + 1)), 6.5 + 1) << s;
  }
  EXPECT_EQ(cpu, 104u);  // a fifth of 520
  // Chunks nvCOMP cannot decode end a run; unsharded neighbours (distinct objects) are placed
  // one by one, as without objects.
  const std::vector<uint64_t> distinct = {1, 2, 3, 4, 5, 6, 7, 8};
  EXPECT_EQ(ChunksDecodedOnGpu(std::vector<uint8_t>(8, 1), 0.25, distinct),
            OnGpu(std::vector<uint8_t>(8, 1), 0.25));
}

TEST(CurrentDecodeShareTest, TheAdaptiveShareWhereThereIsOne) {
  EXPECT_EQ(CurrentDecodeShare(nullptr, 0.4).share, 0.4);
  EXPECT_EQ(CurrentDecodeShare(nullptr, 0.4).generation, 0u);
  Controller adaptive(0.7);
  EXPECT_EQ(CurrentDecodeShare(&adaptive, 0.4).share, 0.7);
}

}  // namespace
}  // namespace zarrstream

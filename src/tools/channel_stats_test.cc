// The statistics pass on datasets in a memory store, checked against a direct long-double
// computation; the merge on ill-conditioned data. tests/test_stats.py checks the CLI against numpy
// on zarr-python-written datasets.
#include "tools/channel_stats.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "array/memory_dataset_test_util.h"

namespace zarrstream {
namespace {

using testing::MemoryDataset;

constexpr uint64_t kTimes = 10, kLevels = 3, kLat = 5, kLon = 6;

// Exact-as-possible reference statistics of a list of values (NaN skipped).
struct Reference {
  uint64_t count = 0, nan_count = 0;
  double mean = 0, std = 0, min = 0, max = 0;
};

Reference Compute(const std::vector<double>& values) {
  Reference r;
  long double sum = 0;
  r.min = INFINITY;
  r.max = -INFINITY;
  for (double v : values) {
    if (std::isnan(v)) {
      ++r.nan_count;
      continue;
    }
    ++r.count;
    sum += v;
    r.min = std::min(r.min, v);
    r.max = std::max(r.max, v);
  }
  const long double mean = sum / r.count;
  long double m2 = 0;
  for (double v : values) {
    if (!std::isnan(v)) m2 += (v - mean) * (v - mean);
  }
  r.mean = static_cast<double>(mean);
  r.std = static_cast<double>(std::sqrt(m2 / r.count));
  return r;
}

void ExpectMatches(const ChannelStats& got, const Reference& want, double rtol = 1e-12) {
  EXPECT_EQ(got.count, want.count) << got.name;
  EXPECT_EQ(got.nan_count, want.nan_count) << got.name;
  EXPECT_NEAR(got.mean, want.mean, rtol * std::abs(want.mean)) << got.name;
  EXPECT_NEAR(got.std, want.std, rtol * std::abs(want.std)) << got.name;
  EXPECT_EQ(got.min, want.min) << got.name;
  EXPECT_EQ(got.max, want.max) << got.name;
}

// time: daily from 2000-01-01 (int64 days); level 500, 850, 1000 (chunked by 2, so one chunk holds
// two levels); t2m(time, lat, lon) float32 with NaNs; z(time, level, lat, lon) float64 near 1e5
// with a variance near 1; chunks that do not divide the shape (edge chunks).
class ChannelStatsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dataset_ = new MemoryDataset("channel_stats_test");
    std::vector<int64_t> days(kTimes);
    for (uint64_t t = 0; t < kTimes; ++t) days[t] = static_cast<int64_t>(t);
    dataset_->AddArray<int64_t>("time", {kTimes}, {kTimes}, {"time"}, days,
                                {{"units", "days since 2000-01-01"}, {"calendar", "noleap"}});
    dataset_->AddArray<int32_t>("level", {kLevels}, {kLevels}, {"level"}, {500, 850, 1000});
    dataset_->AddArray<float>("latitude", {kLat}, {kLat}, {"latitude"}, {40, 20, 0, -20, -40});
    dataset_->AddArray<float>("longitude", {kLon}, {kLon}, {"longitude"},
                              {0, 60, 120, 180, 240, 300});
    std::mt19937_64 rng(7);
    std::normal_distribution<double> normal(0.0, 1.0);
    t2m_.resize(kTimes * kLat * kLon);
    for (size_t i = 0; i < t2m_.size(); ++i) {
      t2m_[i] = static_cast<float>(280.0 + 15.0 * normal(rng));
      if (i % 17 == 3) t2m_[i] = NAN;
    }
    dataset_->AddArray<float>("t2m", {kTimes, kLat, kLon}, {3, 2, 4},
                              {"time", "latitude", "longitude"}, t2m_);
    z_.resize(kTimes * kLevels * kLat * kLon);
    for (size_t i = 0; i < z_.size(); ++i) z_[i] = 1e5 + 1e-3 * normal(rng);
    dataset_->AddArray<double>("z", {kTimes, kLevels, kLat, kLon}, {4, 2, 5, 6},
                               {"time", "level", "latitude", "longitude"}, z_);
  }

  static Dataset Open() {
    auto d = Dataset::Open(dataset_->url());
    EXPECT_TRUE(d.ok()) << d.status().ToString();
    return *d;
  }

  static std::vector<Channel> Resolve(const Dataset& d, std::vector<std::string> vars) {
    auto specs = ParseVariableSpecs(vars);
    EXPECT_TRUE(specs.ok());
    auto channels = d.ResolveChannels(*specs);
    EXPECT_TRUE(channels.ok()) << channels.status().ToString();
    return *channels;
  }

  // Values of t2m (level < 0) or z at `level` over times [t0, t1).
  static std::vector<double> Values(int level, uint64_t t0, uint64_t t1) {
    std::vector<double> out;
    for (uint64_t t = t0; t < t1; ++t) {
      for (uint64_t i = 0; i < kLat * kLon; ++i) {
        out.push_back(level < 0 ? t2m_[t * kLat * kLon + i]
                                : z_[(t * kLevels + level) * kLat * kLon + i]);
      }
    }
    return out;
  }

  static MemoryDataset* dataset_;
  static std::vector<float> t2m_;
  static std::vector<double> z_;
};

MemoryDataset* ChannelStatsTest::dataset_ = nullptr;
std::vector<float> ChannelStatsTest::t2m_;
std::vector<double> ChannelStatsTest::z_;

TEST_F(ChannelStatsTest, MatchesDirectComputationOverASelection) {
  Dataset d = Open();
  std::vector<Channel> channels = Resolve(d, {"t2m,z@1000,500"});
  ChannelStatsOptions options;
  options.select = *ParseLabelSelections(std::vector<std::string>{"time=2000-01-02:2000-01-08"});
  options.num_threads = 3;
  std::vector<std::pair<uint64_t, uint64_t>> progress;
  options.progress = [&](uint64_t done, uint64_t total) { progress.emplace_back(done, total); };
  auto stats = ComputeChannelStats(d, channels, options);
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  EXPECT_EQ(stats->source, d.url());
  ASSERT_EQ(stats->select.size(), 1u);
  EXPECT_EQ(stats->select[0].dim, "time");
  EXPECT_EQ(stats->select[0].labels,
            (std::vector<std::string>{"2000-01-02T00:00:00", "2000-01-08T00:00:00"}));
  ASSERT_EQ(stats->channels.size(), 3u);
  EXPECT_EQ(stats->channels[0].name, "t2m");
  EXPECT_EQ(stats->channels[1].name, "z@1000");
  EXPECT_EQ(stats->channels[1].level, 1000.0);
  EXPECT_EQ(stats->channels[2].name, "z@500");
  ExpectMatches(stats->channels[0], Compute(Values(-1, 1, 8)));
  EXPECT_GT(stats->channels[0].nan_count, 0u);
  // z: values 1e5 ± 1e-3. The merged std keeps ~10 significant digits (a sum of squares would
  // keep none: 1e10 · 2^-52 is far above the variance 1e-6).
  ExpectMatches(stats->channels[1], Compute(Values(2, 1, 8)), 1e-9);
  ExpectMatches(stats->channels[2], Compute(Values(0, 1, 8)), 1e-9);
  ASSERT_FALSE(progress.empty());
  // Bytes of the selection: t2m (7 days), and z's levels 500 and 1000, which sit in different
  // level chunks and are read separately.
  EXPECT_EQ(progress.back().second, 7 * kLat * kLon * (sizeof(float) + 2 * sizeof(double)));
  EXPECT_EQ(progress.back().first, progress.back().second);
  for (size_t i = 1; i < progress.size(); ++i) EXPECT_GT(progress[i].first, progress[i - 1].first);
}

TEST_F(ChannelStatsTest, ResultsDoNotDependOnThreads) {
  Dataset d = Open();
  std::vector<Channel> channels = Resolve(d, {"z@*"});
  ChannelStatsOptions one, many;
  one.num_threads = 1;
  many.num_threads = 5;
  auto a = ComputeChannelStats(d, channels, one);
  auto b = ComputeChannelStats(d, channels, many);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(FormatChannelStats(*a), FormatChannelStats(*b));
  for (int level = 0; level < 3; ++level) {
    ExpectMatches(a->channels[level], Compute(Values(level, 0, kTimes)), 1e-9);
  }
}

// Tendencies over a selection (steps and a duration) are those of the differences of the values
// n steps apart inside it, NaN at either end counted; parts merge into one pass's, each pair once.
TEST_F(ChannelStatsTest, TendenciesMatchDirectComputationAndMergeAcrossParts) {
  Dataset d = Open();
  std::vector<Channel> channels = Resolve(d, {"t2m,z@1000"});
  ChannelStatsOptions options;
  options.select = *ParseLabelSelections(std::vector<std::string>{"time=2000-01-02:2000-01-09"});
  options.tendencies = {"1", "2d"};
  options.num_threads = 2;
  auto stats = ComputeChannelStats(d, channels, options);
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  EXPECT_EQ(stats->tendency_steps, (std::vector<uint64_t>{1, 2}));
  EXPECT_EQ(stats->time_step_seconds, 86400);
  for (size_t c = 0; c < 2; ++c) {
    const int level = c == 0 ? -1 : 2;
    ASSERT_EQ(stats->channels[c].tendencies.size(), 2u);
    for (uint64_t n : {1u, 2u}) {
      // Selected times 1..8: pairs (t, t + n) with both inside.
      const std::vector<double> early = Values(level, 1, 9 - n), late = Values(level, 1 + n, 9);
      std::vector<double> diffs(early.size());
      for (size_t i = 0; i < diffs.size(); ++i) diffs[i] = late[i] - early[i];
      const Reference want = Compute(diffs);
      const TendencyStats& got = stats->channels[c].tendencies[n - 1];
      EXPECT_EQ(got.steps, n);
      EXPECT_EQ(got.count, want.count);
      EXPECT_EQ(got.nan_count, want.nan_count);
      EXPECT_NEAR(got.mean, want.mean, 1e-12 * std::abs(want.std));
      EXPECT_NEAR(got.std, want.std, 1e-9 * want.std);
      EXPECT_EQ(got.min, want.min);
      EXPECT_EQ(got.max, want.max);
    }
  }
  EXPECT_GT(stats->channels[0].tendencies[0].nan_count, 0u);
  for (uint32_t count : {2u, 5u, 1000u}) {
    ChannelStatsPart merged;
    for (uint32_t i = 0; i < count; ++i) {
      ChannelStatsOptions part_options = options;
      part_options.part_index = i;
      part_options.part_count = count;
      auto part = ComputeChannelStatsPart(d, channels, part_options);
      ASSERT_TRUE(part.ok()) << part.status().ToString();
      if (i == 0) {
        merged = *part;
        continue;
      }
      for (size_t c = 0; c < channels.size(); ++c) {
        merged.channels[c].Merge(part->channels[c]);
        for (size_t t = 0; t < 2; ++t) merged.tendencies[t][c].Merge(part->tendencies[t][c]);
      }
    }
    const ChannelStatsFile got = FinishChannelStats(std::move(merged));
    for (size_t c = 0; c < channels.size(); ++c) {
      for (size_t t = 0; t < 2; ++t) {
        const TendencyStats& a = got.channels[c].tendencies[t];
        const TendencyStats& b = stats->channels[c].tendencies[t];
        EXPECT_EQ(a.count, b.count) << count;
        EXPECT_EQ(a.nan_count, b.nan_count) << count;
        EXPECT_EQ(a.min, b.min) << count;
        EXPECT_EQ(a.max, b.max) << count;
        EXPECT_NEAR(a.mean, b.mean, 1e-12 * b.std) << count;
        EXPECT_NEAR(a.std, b.std, 1e-12 * b.std) << count;
      }
    }
  }
  // A tendency as long as the selection (8 steps) is refused.
  options.tendencies = {"8"};
  auto too_long = ComputeChannelStats(d, channels, options);
  ASSERT_FALSE(too_long.ok());
  EXPECT_NE(too_long.status().message().find("has 8 step(s) along 'time'"), std::string::npos)
      << too_long.status().message();
}

// Parts of the blocks, merged in part order, give the one pass's statistics (within rounding: the
// merge tree differs), whatever the number of parts, more parts than blocks included; every part
// describes the same job.
TEST_F(ChannelStatsTest, PartsMergeIntoTheWholePass) {
  Dataset d = Open();
  std::vector<Channel> channels = Resolve(d, {"t2m", "z@*"});
  ChannelStatsOptions whole;
  whole.num_threads = 2;
  auto expected = ComputeChannelStats(d, channels, whole);
  ASSERT_TRUE(expected.ok()) << expected.status().ToString();
  for (uint32_t count : {2u, 3u, 7u, 1000u}) {
    ChannelStatsPart merged;
    uint64_t progress_total = 0;
    for (uint32_t i = 0; i < count; ++i) {
      ChannelStatsOptions options = whole;
      options.part_index = i;
      options.part_count = count;
      options.progress = [&](uint64_t, uint64_t total) { progress_total = total; };
      auto part = ComputeChannelStatsPart(d, channels, options);
      ASSERT_TRUE(part.ok()) << part.status().ToString();
      if (i == 0) {
        merged = *part;
      } else {
        EXPECT_EQ(FormatChannelStats(part->job), FormatChannelStats(merged.job));
        for (size_t c = 0; c < channels.size(); ++c) merged.channels[c].Merge(part->channels[c]);
      }
    }
    ChannelStatsFile got = FinishChannelStats(std::move(merged));
    ASSERT_EQ(got.channels.size(), expected->channels.size());
    for (size_t c = 0; c < got.channels.size(); ++c) {
      const ChannelStats& want = expected->channels[c];
      SCOPED_TRACE(want.name + " in " + std::to_string(count) + " parts");
      EXPECT_EQ(got.channels[c].name, want.name);
      EXPECT_EQ(got.channels[c].count, want.count);
      EXPECT_EQ(got.channels[c].nan_count, want.nan_count);
      EXPECT_NEAR(got.channels[c].mean, want.mean, 1e-12 * std::abs(want.mean));
      EXPECT_NEAR(got.channels[c].std, want.std, 1e-9 * std::abs(want.std));
      EXPECT_EQ(got.channels[c].min, want.min);
      EXPECT_EQ(got.channels[c].max, want.max);
    }
  }
  ChannelStatsOptions outside = whole;
  outside.part_index = 2;
  outside.part_count = 2;
  auto refused = ComputeChannelStatsPart(d, channels, outside);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("part 2/2"), std::string::npos);
}

TEST_F(ChannelStatsTest, InterruptStopsThePass) {
  Dataset d = Open();
  std::vector<Channel> channels = Resolve(d, {"t2m"});
  const std::atomic<bool> interrupt{true};
  ChannelStatsOptions options;
  options.interrupt = &interrupt;
  auto stats = ComputeChannelStats(d, channels, options);
  ASSERT_FALSE(stats.ok());
  EXPECT_NE(stats.status().message().find("interrupted"), std::string::npos);
}

TEST_F(ChannelStatsTest, SelectionErrors) {
  Dataset d = Open();
  std::vector<Channel> channels = Resolve(d, {"z@500"});
  auto run = [&](const char* select) {
    ChannelStatsOptions options;
    options.select = *ParseLabelSelections(std::vector<std::string>{select});
    return ComputeChannelStats(d, channels, options).status();
  };
  Status s = run("level=500");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("name@500,850"), std::string::npos) << s.message();
  s = run("member=1:2");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("(time, latitude, longitude)"), std::string::npos) << s.message();
  s = run("time=2001:2002");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("selects no label"), std::string::npos) << s.message();
  s = run("time=2000-02-29");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("noleap"), std::string::npos) << s.message();
}

TEST_F(ChannelStatsTest, AllNaNChannelHasUndefinedStatistics) {
  Dataset d = Open();
  // One point, selected by exact labels, whose value is NaN.
  std::vector<Channel> channels = Resolve(d, {"t2m"});
  ChannelStatsOptions options;
  options.select = *ParseLabelSelections(
      std::vector<std::string>{"time=2000-01-01", "latitude=40", "longitude=180"});
  auto stats = ComputeChannelStats(d, channels, options);
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  // Element 3 (time 0, lat 0, lon 3) is NaN (i % 17 == 3).
  EXPECT_EQ(stats->channels[0].count, 0u);
  EXPECT_EQ(stats->channels[0].nan_count, 1u);
  EXPECT_TRUE(std::isnan(stats->channels[0].mean));
  EXPECT_TRUE(std::isnan(stats->channels[0].std));
  EXPECT_TRUE(stats->select[1].is_range);
  EXPECT_EQ(stats->select[1].labels, (std::vector<std::string>{"40", "40"}));
  const std::string text = FormatChannelStats(*stats);
  EXPECT_NE(text.find("\"mean\": null"), std::string::npos) << text;
  EXPECT_NE(text.find("\"latitude\": [\n      40,\n      40\n    ]"), std::string::npos) << text;
}

TEST(MomentsTest, MergeEqualsDirectComputation) {
  std::vector<double> values;
  for (int i = 0; i < 1000; ++i) values.push_back(1e5 + (i % 7) * 0.25 + i * 1e-4);
  Moments all;
  for (size_t start = 0; start < values.size(); start += 37) {
    // Exact block moments (long double two-pass); the merge across blocks is what is tested.
    const size_t stop = std::min(values.size(), start + 37);
    const std::vector<double> part(values.begin() + start, values.begin() + stop);
    const Reference r = Compute(part);
    Moments block;
    block.count = r.count;
    block.mean = r.mean;
    block.m2 = r.std * r.std * static_cast<double>(r.count);
    all.Merge(block);
  }
  const Reference want = Compute(values);
  EXPECT_EQ(all.count, values.size());
  EXPECT_NEAR(all.mean, want.mean, 1e-15 * want.mean);
  EXPECT_NEAR(std::sqrt(all.Variance()), want.std, 1e-9 * want.std);
  EXPECT_TRUE(std::isnan(Moments{}.Variance()));
}

}  // namespace
}  // namespace zarrstream

// The sample plan's index space, validation, epoch orders, sharding over simulated ranks, resume
// and read estimates. Pure arithmetic: every test runs in memory, no store.
#include "loader/sample_plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <set>

#include "util/status_test_util.h"

namespace zarrstream {
namespace {

SampledDim Dim(std::string name, uint64_t start, uint64_t stop, uint64_t window,
               std::optional<uint64_t> stride = std::nullopt, uint64_t reach = 0,
               uint64_t chunk = 1) {
  SampledDim dim;
  dim.name = std::move(name);
  dim.range = {start, stop};
  dim.window = window;
  dim.stride = stride;
  dim.reach = reach;
  dim.chunk = chunk;
  return dim;
}

SamplePlan MakePlan(std::vector<SampledDim> dims, const SamplePlanOptions& options) {
  auto plan = SamplePlan::Create(std::move(dims), options);
  EXPECT_TRUE(plan.ok()) << plan.status().ToString();
  return std::move(plan).value();
}

// This rank's whole epoch, batch by batch, through Batch(i).
std::vector<SampleBatch> AllBatches(const SamplePlan& plan) {
  std::vector<SampleBatch> batches;
  for (uint64_t i = 0; i < plan.num_batches(); ++i) {
    auto batch = plan.Batch(i);
    EXPECT_TRUE(batch.ok()) << batch.status().ToString();
    batches.push_back(std::move(batch).value());
  }
  return batches;
}

std::vector<uint64_t> EpochIds(const SamplePlan& plan) {
  std::vector<uint64_t> ids;
  for (const SampleBatch& batch : AllBatches(plan)) {
    ids.insert(ids.end(), batch.sample_ids.begin(), batch.sample_ids.end());
  }
  return ids;
}

SamplePlanOptions Options(ShuffleMode shuffle, uint64_t seed = 7, uint64_t batch_size = 4) {
  SamplePlanOptions options;
  options.shuffle = shuffle;
  options.seed = seed;
  options.batch_size = batch_size;
  return options;
}

// ---- index space ----

TEST(SamplePlanTest, OneDimensionWindowStrideAndReach) {
  // Window 3, stride defaulting to the window, one step of target reach: origins o with
  // o + 3 + 1 <= 10.
  SamplePlan plan = MakePlan({Dim("time", 0, 10, 3, std::nullopt, 1)}, Options(ShuffleMode::kNone));
  EXPECT_EQ(plan.num_samples(), 3u);
  EXPECT_EQ(plan.SampleOrigin(0), std::vector<uint64_t>{0});
  EXPECT_EQ(plan.SampleOrigin(2), std::vector<uint64_t>{6});

  // Overlapping windows (stride 1 < window 2) over a selection that does not start at 0.
  plan = MakePlan({Dim("time", 5, 9, 2, 1)}, Options(ShuffleMode::kNone));
  EXPECT_EQ(plan.num_samples(), 3u);
  EXPECT_EQ(plan.SampleOrigin(0), std::vector<uint64_t>{5});
  EXPECT_EQ(plan.SampleOrigin(2), std::vector<uint64_t>{7});

  // The window exactly fills the selection: one sample.
  plan = MakePlan({Dim("time", 3, 7, 3, 2, 1)}, Options(ShuffleMode::kNone));
  EXPECT_EQ(plan.num_samples(), 1u);
  EXPECT_EQ(plan.SampleOrigin(0), std::vector<uint64_t>{3});
}

TEST(SamplePlanTest, ThreeDimensionsInCOrder) {
  SamplePlan plan = MakePlan({Dim("time", 2, 8, 1, std::nullopt, 1), Dim("latitude", 0, 10, 4, 3),
                              Dim("longitude", 0, 6, 6)},
                             Options(ShuffleMode::kNone));
  EXPECT_EQ(plan.origin_counts(), (std::vector<uint64_t>{5, 3, 1}));
  EXPECT_EQ(plan.num_samples(), 15u);
  EXPECT_EQ(plan.SampleOrigin(0), (std::vector<uint64_t>{2, 0, 0}));
  EXPECT_EQ(plan.SampleOrigin(1), (std::vector<uint64_t>{2, 3, 0}));
  EXPECT_EQ(plan.SampleOrigin(3), (std::vector<uint64_t>{3, 0, 0}));
  EXPECT_EQ(plan.SampleOrigin(14), (std::vector<uint64_t>{6, 6, 0}));

  // Batches carry ids and origins in the [batch, num_dims] layout of the loader's "origin".
  SampleBatch batch = plan.Batch(1).value();
  ASSERT_EQ(batch.size(), 4u);
  EXPECT_EQ(batch.sample_ids, (std::vector<uint64_t>{4, 5, 6, 7}));
  EXPECT_EQ(batch.num_dims, 3u);
  EXPECT_EQ(std::vector<uint64_t>(batch.origin(0).begin(), batch.origin(0).end()),
            (std::vector<uint64_t>{3, 3, 0}));
  EXPECT_EQ(batch.origins.size(), 12u);
  EXPECT_EQ(batch.num_padding, 0u);
}

TEST(SamplePlanTest, ValidationErrorsNameTheDimensionAndNumbers) {
  const SamplePlanOptions options = Options(ShuffleMode::kExact);
  ExpectErrorContains(SamplePlan::Create({Dim("time", 0, 4, 5)}, options).status(),
                      ErrorCode::kConfig, {"'time'", "window 5", "[0, 4)", "4 indices"});
  ExpectErrorContains(
      SamplePlan::Create({Dim("time", 10, 14, 3, std::nullopt, 2)}, options).status(),
      ErrorCode::kConfig, {"'time'", "window 3 plus target reach 2", "[10, 14)"});
  ExpectErrorContains(SamplePlan::Create({Dim("latitude", 0, 4, 0)}, options).status(),
                      ErrorCode::kConfig, {"'latitude'", "window must be at least 1"});
  ExpectErrorContains(SamplePlan::Create({Dim("time", 0, 4, 1, 0)}, options).status(),
                      ErrorCode::kConfig, {"'time'", "stride must be at least 1"});
  ExpectErrorContains(SamplePlan::Create({Dim("time", 0, 4, 1, 1, 0, 0)}, options).status(),
                      ErrorCode::kConfig, {"'time'", "chunk extent"});
  ExpectErrorContains(SamplePlan::Create({Dim("time", 6, 6, 1)}, options).status(),
                      ErrorCode::kConfig, {"'time'", "[6, 6)", "empty"});
  ExpectErrorContains(SamplePlan::Create({}, options).status(), ErrorCode::kConfig,
                      {"no sampled dimensions"});
  ExpectErrorContains(
      SamplePlan::Create({Dim("time", 0, 4, 1), Dim("time", 0, 4, 1)}, options).status(),
      ErrorCode::kConfig, {"'time' is sampled twice"});

  SamplePlanOptions bad = options;
  bad.world_size = 2;
  bad.rank = 2;
  ExpectErrorContains(SamplePlan::Create({Dim("time", 0, 4, 1)}, bad).status(), ErrorCode::kConfig,
                      {"rank 2", "world_size 2"});
  bad = options;
  bad.batch_size = 0;
  ExpectErrorContains(SamplePlan::Create({Dim("time", 0, 4, 1)}, bad).status(), ErrorCode::kConfig,
                      {"batch_size"});
  bad = options;
  bad.block_window = 0;
  ExpectErrorContains(SamplePlan::Create({Dim("time", 0, 4, 1)}, bad).status(), ErrorCode::kConfig,
                      {"block_window"});
  bad = options;
  bad.drop_last = true;
  bad.world_size = 2;
  bad.batch_size = 3;
  ExpectErrorContains(SamplePlan::Create({Dim("time", 0, 5, 1)}, bad).status(), ErrorCode::kConfig,
                      {"drop_last", "5 samples", "batch of 3", "2 ranks"});
  // 2^31 × 2^31 samples is past the 2^62 limit.
  const uint64_t big = uint64_t{1} << 31;
  ExpectErrorContains(
      SamplePlan::Create({Dim("a", 0, big + 1, 1), Dim("b", 0, big + 1, 1)}, options).status(),
      ErrorCode::kConfig, {"more than 2^62 samples", "'b'"});
  ExpectErrorContains(ParseShuffleMode("random").status(), ErrorCode::kConfig,
                      {"'random'", "none, exact or block"});
}

TEST(SamplePlanTest, ShuffleModesParseFromTheirNamesOnly) {
  for (ShuffleMode mode : {ShuffleMode::kNone, ShuffleMode::kExact, ShuffleMode::kBlock}) {
    Result<ShuffleMode> parsed = ParseShuffleMode(ShuffleModeName(mode));
    ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
    EXPECT_EQ(*parsed, mode);
  }
  EXPECT_EQ(ShuffleModeName(ShuffleMode::kBlock), "block");
  for (std::string_view bad : {"", "Exact", " none", "true"}) {
    ExpectErrorContains(
        ParseShuffleMode(bad).status(), ErrorCode::kConfig,
        {"unknown shuffle mode '" + std::string(bad) + "'", "none, exact or block"});
  }
}

// ---- epoch order ----

TEST(SamplePlanTest, FeistelPermutationIsABijection) {
  for (uint64_t size : {1, 2, 3, 4, 5, 16, 17, 100, 255, 256, 257, 1000}) {
    for (uint64_t key : {0ULL, 1ULL, 0xdeadbeefULL}) {
      FeistelPermutation permutation(size, key);
      std::vector<bool> seen(size);
      for (uint64_t i = 0; i < size; ++i) {
        const uint64_t image = permutation(i);
        ASSERT_LT(image, size);
        ASSERT_FALSE(seen[image]) << "size " << size << " key " << key;
        seen[image] = true;
      }
    }
  }
}

TEST(SamplePlanTest, OrdersAreDeterministicPerSeedAndEpoch) {
  for (ShuffleMode mode : {ShuffleMode::kExact, ShuffleMode::kBlock}) {
    SCOPED_TRACE(ShuffleModeName(mode));
    const std::vector<SampledDim> dims = {Dim("time", 0, 50, 1, std::nullopt, 1, 4),
                                          Dim("latitude", 0, 8, 2, 1, 0, 4)};
    SamplePlan a = MakePlan(dims, Options(mode, 11));
    SamplePlan b = MakePlan(dims, Options(mode, 11));
    EXPECT_EQ(EpochIds(a), EpochIds(b));
    const std::vector<uint64_t> epoch0 = EpochIds(a);
    a.SetEpoch(1);
    EXPECT_NE(EpochIds(a), epoch0);
    a.SetEpoch(0);
    EXPECT_EQ(EpochIds(a), epoch0);
    EXPECT_NE(EpochIds(MakePlan(dims, Options(mode, 12))), epoch0);
    // Each order is a permutation of the index space.
    std::vector<uint64_t> sorted = epoch0;
    std::sort(sorted.begin(), sorted.end());
    for (uint64_t i = 0; i < sorted.size(); ++i) ASSERT_EQ(sorted[i], i);
  }
  // Without shuffle: index order, whatever the seed and epoch.
  SamplePlan none = MakePlan({Dim("time", 0, 9, 1)}, Options(ShuffleMode::kNone, 3));
  none.SetEpoch(5);
  EXPECT_EQ(EpochIds(none), (std::vector<uint64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8}));
}

TEST(SamplePlanTest, EveryRankSeesTheSameGlobalOrder) {
  // Ranks take contiguous slices of one global order: concatenated, they are world size 1's order.
  for (ShuffleMode mode : {ShuffleMode::kExact, ShuffleMode::kBlock}) {
    const std::vector<SampledDim> dims = {Dim("time", 0, 61, 1, std::nullopt, 0, 5)};
    SamplePlanOptions options = Options(mode, 5, 3);
    options.pad_to_equal = false;
    const std::vector<uint64_t> global = EpochIds(MakePlan(dims, options));
    std::vector<uint64_t> joined;
    options.world_size = 4;
    for (uint32_t rank = 0; rank < 4; ++rank) {
      options.rank = rank;
      const std::vector<uint64_t> ids = EpochIds(MakePlan(dims, options));
      joined.insert(joined.end(), ids.begin(), ids.end());
    }
    EXPECT_EQ(joined, global) << ShuffleModeName(mode);
  }
}

TEST(SamplePlanTest, ExactShuffleHasNoObviousBias) {
  // The first sample takes every value across seeds (1000 seeds, 10 samples: 100 each expected).
  std::map<uint64_t, int> first_counts;
  for (uint64_t seed = 0; seed < 1000; ++seed) {
    SamplePlan plan = MakePlan({Dim("time", 0, 10, 1)}, Options(ShuffleMode::kExact, seed, 1));
    ++first_counts[plan.Batch(0)->sample_ids[0]];
  }
  ASSERT_EQ(first_counts.size(), 10u);
  for (const auto& [id, count] : first_counts) EXPECT_GT(count, 60) << "sample " << id;

  // Position × value: 10 × 10 buckets over 200 seeds of a 100-sample space; a chi-square far
  // above its 81 degrees of freedom would mean positions keep memory of the index order.
  std::vector<double> cells(100, 0.0);
  for (uint64_t seed = 0; seed < 200; ++seed) {
    SamplePlan plan = MakePlan({Dim("time", 0, 100, 1)}, Options(ShuffleMode::kExact, seed, 100));
    const std::vector<uint64_t> ids = EpochIds(plan);
    for (uint64_t position = 0; position < 100; ++position) {
      cells[position / 10 * 10 + ids[position] / 10] += 1;
    }
  }
  double chi_square = 0;
  for (double observed : cells) chi_square += (observed - 200) * (observed - 200) / 200;
  EXPECT_LT(chi_square, 140) << "positions are not spread over values";

  // Mean displacement |position - value| of a uniform permutation of n is about n / 3.
  SamplePlan plan = MakePlan({Dim("time", 0, 3000, 1)}, Options(ShuffleMode::kExact, 1, 3000));
  const std::vector<uint64_t> ids = EpochIds(plan);
  double displacement = 0;
  for (uint64_t i = 0; i < ids.size(); ++i) {
    displacement += std::abs(static_cast<double>(ids[i]) - static_cast<double>(i));
  }
  EXPECT_NEAR(displacement / 3000, 1000, 60);
}

// ---- sharding ----

TEST(SamplePlanTest, EverySampleExactlyOncePerEpochAcrossRanks) {
  int combinations = 0;
  for (ShuffleMode mode : {ShuffleMode::kNone, ShuffleMode::kExact, ShuffleMode::kBlock}) {
    for (uint64_t n : {1, 2, 7, 10, 64, 97, 100}) {
      for (uint32_t world : {1, 2, 3, 4, 8}) {
        for (uint64_t batch_size : {1, 3, 8}) {
          for (int policy = 0; policy < 3; ++policy) {
            SCOPED_TRACE(std::string(ShuffleModeName(mode)) + " n=" + std::to_string(n) +
                         " world=" + std::to_string(world) + " batch=" +
                         std::to_string(batch_size) + " policy=" + std::to_string(policy));
            SamplePlanOptions options = Options(mode, n * 31 + world, batch_size);
            options.world_size = world;
            options.drop_last = policy == 0;
            options.pad_to_equal = policy == 1;
            const std::vector<SampledDim> dims = {Dim("time", 0, n, 1, std::nullopt, 0, 3)};
            if (options.drop_last && n < world * batch_size) {
              EXPECT_FALSE(SamplePlan::Create(dims, options).ok());
              continue;
            }
            ++combinations;
            std::vector<int> seen(n, 0);
            uint64_t padding = 0;
            std::set<uint64_t> batch_counts;
            for (uint32_t rank = 0; rank < world; ++rank) {
              options.rank = rank;
              const SamplePlan plan = MakePlan(dims, options);
              batch_counts.insert(plan.num_batches());
              const std::vector<SampleBatch> batches = AllBatches(plan);
              for (const SampleBatch& batch : batches) {
                if (options.drop_last || batch.index + 1 < batches.size()) {
                  ASSERT_EQ(batch.size(), batch_size);
                }
                ASSERT_LE(batch.size(), batch_size);
                const size_t real = batch.size() - batch.num_padding;
                for (size_t i = 0; i < batch.size(); ++i) {
                  ASSERT_LT(batch.sample_ids[i], n);
                  if (i < real) ++seen[batch.sample_ids[i]];
                }
                padding += batch.num_padding;
              }
            }
            const uint64_t total = static_cast<uint64_t>(std::count(seen.begin(), seen.end(), 1));
            ASSERT_EQ(std::count_if(seen.begin(), seen.end(), [](int c) { return c > 1; }), 0);
            if (options.drop_last) {
              // Equal full batches; only the global remainder is dropped.
              EXPECT_EQ(batch_counts.size(), 1u);
              EXPECT_EQ(*batch_counts.begin(), n / (world * batch_size));
              EXPECT_EQ(total, n / (world * batch_size) * world * batch_size);
            } else if (options.pad_to_equal) {
              EXPECT_EQ(total, n);
              EXPECT_EQ(batch_counts.size(), 1u);
              EXPECT_EQ(padding, (n + world - 1) / world * world - n);
            } else {
              EXPECT_EQ(total, n);
              EXPECT_EQ(padding, 0u);
              EXPECT_LE(*batch_counts.rbegin() - *batch_counts.begin(), 1u);
            }
          }
        }
      }
    }
  }
  EXPECT_GT(combinations, 500);
}

TEST(SamplePlanTest, PaddingRepeatsTheStartOfTheOrder) {
  // 3 samples on 8 ranks: every rank gets one; ranks 3..7 repeat positions 0, 1, 2, 0, 1.
  SamplePlanOptions options = Options(ShuffleMode::kExact, 9, 2);
  options.world_size = 8;
  std::vector<uint64_t> order;
  for (uint32_t rank = 0; rank < 8; ++rank) {
    options.rank = rank;
    SamplePlan plan = MakePlan({Dim("time", 0, 3, 1)}, options);
    ASSERT_EQ(plan.num_batches(), 1u);
    SampleBatch batch = plan.Batch(0).value();
    ASSERT_EQ(batch.size(), 1u);
    EXPECT_EQ(batch.num_padding, rank >= 3 ? 1u : 0u);
    order.push_back(batch.sample_ids[0]);
  }
  for (size_t rank = 3; rank < 8; ++rank) EXPECT_EQ(order[rank], order[(rank - 3) % 3]);
}

// ---- block shuffle ----

// Mean distinct chunk cells per full batch, measured on a plan's batches.
double MeasuredChunksPerBatch(const SamplePlan& plan) {
  double sum = 0;
  uint64_t batches = 0;
  for (const SampleBatch& batch : AllBatches(plan)) {
    if (batch.size() < plan.options().batch_size) continue;
    std::set<std::vector<uint64_t>> cells;
    for (size_t s = 0; s < batch.size(); ++s) {
      // Enumerate the cells of this sample's footprint (at most 2 per dimension here).
      std::vector<std::vector<uint64_t>> boxes = {{}};
      for (size_t d = 0; d < batch.num_dims; ++d) {
        const SampledDim& dim = plan.dims()[d];
        const uint64_t low = batch.origin(s)[d] / dim.chunk;
        const uint64_t high = (batch.origin(s)[d] + dim.window + dim.reach - 1) / dim.chunk;
        std::vector<std::vector<uint64_t>> next;
        for (const auto& prefix : boxes) {
          for (uint64_t c = low; c <= high; ++c) {
            next.push_back(prefix);
            next.back().push_back(c);
          }
        }
        boxes = std::move(next);
      }
      cells.insert(boxes.begin(), boxes.end());
    }
    sum += static_cast<double>(cells.size());
    ++batches;
  }
  return sum / static_cast<double>(batches);
}

TEST(SamplePlanTest, BlockShuffleKeepsLocalityAndMatchesTheEstimate) {
  // Hourly time in daily chunks, next-step targets, 40 days; a 2-D case with latitude patches.
  const std::vector<std::vector<SampledDim>> cases = {
      {Dim("time", 0, 960, 1, std::nullopt, 1, 24)},
      {Dim("time", 0, 240, 1, std::nullopt, 1, 24), Dim("latitude", 0, 64, 8, 4, 0, 16)},
  };
  for (const std::vector<SampledDim>& dims : cases) {
    SCOPED_TRACE(dims.size());
    SamplePlanOptions options = Options(ShuffleMode::kBlock, 3, 32);
    options.block_window = 2;
    const SamplePlan block = MakePlan(dims, options);
    options.shuffle = ShuffleMode::kExact;
    const SamplePlan exact = MakePlan(dims, options);

    const double block_chunks = MeasuredChunksPerBatch(block);
    const double exact_chunks = MeasuredChunksPerBatch(exact);
    EXPECT_LT(block_chunks * 4, exact_chunks);

    // With world size 1, measuring every batch, the estimate sees the same batches: exact. The
    // default 64 evenly spaced batches (of 29 and 112 here) stay close.
    const ReadEstimate block_estimate = block.EstimateReads(ShuffleMode::kBlock, UINT64_MAX);
    const ReadEstimate exact_estimate = block.EstimateReads(ShuffleMode::kExact, UINT64_MAX);
    EXPECT_NEAR(block_estimate.chunks_per_batch, block_chunks, 1e-9);
    EXPECT_NEAR(exact_estimate.chunks_per_batch, exact_chunks, 1e-9);
    EXPECT_NEAR(block.EstimateReads(ShuffleMode::kBlock).chunks_per_batch, block_chunks,
                0.1 * block_chunks);
    EXPECT_NEAR(block.EstimateReads(ShuffleMode::kExact).chunks_per_batch, exact_chunks,
                0.1 * exact_chunks);
    EXPECT_LT(block_estimate.read_amplification * 4, exact_estimate.read_amplification);
    EXPECT_GE(block_estimate.chunk_refs_per_batch, block_estimate.chunks_per_batch);
    // Index order reads each chunk about once; anything below 1 would be arithmetic gone wrong.
    const ReadEstimate none_estimate = block.EstimateReads(ShuffleMode::kNone);
    EXPECT_GE(none_estimate.read_amplification, 0.99);
    EXPECT_LT(none_estimate.read_amplification, block_estimate.read_amplification);
  }
  // The 1-D case's selection: 40 daily chunks, each read once per epoch in index order.
  SamplePlan plan =
      MakePlan({Dim("time", 0, 960, 1, std::nullopt, 1, 24)}, Options(ShuffleMode::kNone, 0, 24));
  EXPECT_EQ(plan.EstimateReads(ShuffleMode::kNone).chunks_in_selection, 40);
}

TEST(SamplePlanTest, BlockShuffleBatchesComeFromFewBlocks) {
  // 1-D, chunk 10, stride 3 (blocks of 10 indices hold 3 or 4 origins), 4 blocks per group.
  SamplePlanOptions options = Options(ShuffleMode::kBlock, 1, 8);
  options.block_window = 4;
  options.world_size = 3;
  const std::vector<SampledDim> dims = {Dim("time", 7, 1000, 1, 3, 0, 10)};
  for (uint32_t rank = 0; rank < 3; ++rank) {
    options.rank = rank;
    const SamplePlan plan = MakePlan(dims, options);
    for (const SampleBatch& batch : AllBatches(plan)) {
      std::set<uint64_t> blocks;
      for (size_t s = 0; s < batch.size(); ++s) blocks.insert(batch.origin(s)[0] / 10);
      // A batch lies within one group of 4 blocks or straddles two groups.
      EXPECT_LE(blocks.size(), 8u);
    }
  }
  // Samples of a block appear shuffled, not in index order.
  options.world_size = 1;
  options.rank = 0;
  const std::vector<uint64_t> ids = EpochIds(MakePlan(dims, options));
  uint64_t ascending = 0;
  for (size_t i = 1; i < ids.size(); ++i) ascending += ids[i] == ids[i - 1] + 1 ? 1 : 0;
  EXPECT_LT(ascending, ids.size() / 4);
}

// ---- cursor, resume ----

TEST(SamplePlanTest, NextWalksTheEpochAndSetEpochRestarts) {
  SamplePlan plan = MakePlan({Dim("time", 0, 10, 1)}, Options(ShuffleMode::kExact, 2, 4));
  ASSERT_EQ(plan.num_batches(), 3u);
  std::vector<uint64_t> ids;
  while (auto batch = plan.Next()) {
    ids.insert(ids.end(), batch->sample_ids.begin(), batch->sample_ids.end());
  }
  EXPECT_EQ(ids, EpochIds(plan));
  EXPECT_EQ(plan.next_batch(), 3u);
  EXPECT_FALSE(plan.Next().has_value());
  ExpectErrorContains(plan.Batch(3).status(), ErrorCode::kInvalidArgument,
                      {"batch 3", "3 batches"});
  plan.SetEpoch(4);
  EXPECT_EQ(plan.epoch(), 4u);
  EXPECT_EQ(plan.next_batch(), 0u);
  EXPECT_EQ(plan.Next()->epoch, 4u);
}

TEST(SamplePlanTest, RestoreMidEpochYieldsTheRemainingBatches) {
  for (ShuffleMode mode : {ShuffleMode::kNone, ShuffleMode::kExact, ShuffleMode::kBlock}) {
    SCOPED_TRACE(ShuffleModeName(mode));
    const std::vector<SampledDim> dims = {Dim("time", 0, 200, 2, 1, 1, 8),
                                          Dim("latitude", 0, 12, 4, 4, 0, 4)};
    SamplePlanOptions options = Options(mode, 42, 5);
    options.world_size = 3;
    options.rank = 1;
    SamplePlan original = MakePlan(dims, options);
    original.SetEpoch(2);
    for (int i = 0; i < 7; ++i) ASSERT_TRUE(original.Next().has_value());
    const std::string saved = original.State().ToJson();

    SamplePlan restored = MakePlan(dims, options);
    auto state = SamplePlanState::FromJson(saved);
    ASSERT_TRUE(state.ok()) << state.status().ToString();
    EXPECT_EQ(*state, original.State());
    ASSERT_TRUE(restored.Restore(*state).ok());
    EXPECT_EQ(restored.epoch(), 2u);
    EXPECT_EQ(restored.next_batch(), 7u);
    uint64_t remaining = 0;
    while (auto expected = original.Next()) {
      auto actual = restored.Next();
      ASSERT_TRUE(actual.has_value());
      EXPECT_EQ(actual->sample_ids, expected->sample_ids);
      EXPECT_EQ(actual->origins, expected->origins);
      ++remaining;
    }
    EXPECT_FALSE(restored.Next().has_value());
    EXPECT_EQ(remaining, original.num_batches() - 7);
  }
}

TEST(SamplePlanTest, RestoreFailsClearlyOnADifferentPlan) {
  const std::vector<SampledDim> dims = {Dim("time", 0, 100, 1, std::nullopt, 1, 4)};
  SamplePlanOptions options = Options(ShuffleMode::kBlock, 1, 4);
  options.world_size = 4;
  SamplePlan saved = MakePlan(dims, options);
  ASSERT_TRUE(saved.Next().has_value());
  const SamplePlanState state = saved.State();

  SamplePlanOptions other = options;
  other.world_size = 2;
  SamplePlan plan = MakePlan(dims, other);
  ExpectErrorContains(plan.Restore(state), ErrorCode::kInvalidArgument,
                      {"world_size 4", "world_size 2"});
  EXPECT_EQ(plan.next_batch(), 0u);  // a failed restore leaves the cursor alone

  other = options;
  other.seed = 2;
  ExpectErrorContains(MakePlan(dims, other).Restore(state), ErrorCode::kInvalidArgument,
                      {"seed 1", "seed 2"});
  other = options;
  other.shuffle = ShuffleMode::kExact;
  ExpectErrorContains(MakePlan(dims, other).Restore(state), ErrorCode::kInvalidArgument,
                      {"shuffle block", "shuffle exact"});
  ExpectErrorContains(
      MakePlan({Dim("time", 0, 101, 1, std::nullopt, 1, 4)}, options).Restore(state),
      ErrorCode::kInvalidArgument, {"different geometry"});
  other = options;
  other.block_window = 8;
  ExpectErrorContains(MakePlan(dims, other).Restore(state), ErrorCode::kInvalidArgument,
                      {"different geometry"});

  // Another rank's state is accepted (lock-step ranks); a position past the batches is not.
  other = options;
  other.rank = 3;
  EXPECT_TRUE(MakePlan(dims, other).Restore(state).ok());
  SamplePlanState past = state;
  past.next_batch = 1000;
  ExpectErrorContains(MakePlan(dims, options).Restore(past), ErrorCode::kInvalidArgument,
                      {"batch 1000", "past the 7 batches"});
}

TEST(SamplePlanTest, StateJson) {
  SamplePlanState state;
  state.seed = UINT64_MAX;
  state.epoch = 3;
  state.next_batch = 120;
  state.world_size = 8;
  state.rank = 2;
  state.batch_size = 16;
  state.shuffle = ShuffleMode::kBlock;
  state.fingerprint = 0x00ab00cd00ef0012ULL;
  const std::string json = state.ToJson();
  EXPECT_NE(json.find("\"fingerprint\":\"00ab00cd00ef0012\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"format\":\"zarrstream.sample_plan/1\""), std::string::npos) << json;
  auto parsed = SamplePlanState::FromJson(json);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(*parsed, state);

  ExpectErrorContains(SamplePlanState::FromJson("[1").status(), ErrorCode::kInvalidArgument,
                      {"not a JSON object"});
  ExpectErrorContains(SamplePlanState::FromJson(R"({"format": "other"})").status(),
                      ErrorCode::kInvalidArgument, {"\"format\""});
  std::string no_epoch = json;
  no_epoch.replace(no_epoch.find("\"epoch\""), 7, "\"epoc\"");
  ExpectErrorContains(SamplePlanState::FromJson(no_epoch).status(), ErrorCode::kInvalidArgument,
                      {"\"epoch\" is missing"});
}

// ---- scale ----

TEST(SamplePlanTest, MissingIndicesLeaveOutTheSamplesTouchingThem) {
  // Time 0..29, window 2, reach 2 (targets at +2 and +3), stride 1; latitude 2 origins. Missing
  // 5 and 20: origins touching {o, o+1, o+2, o+3} ∩ {5, 20} go.
  SampledDim time = Dim("time", 0, 30, 2, 1, 2, 4);
  time.missing = {5, 20};
  time.touched = {0, 1, 2, 3};
  std::set<uint64_t> expected;
  for (uint64_t o = 0; o + 4 <= 30; ++o) {
    if (!(o <= 5 && 5 <= o + 3) && !(o <= 20 && 20 <= o + 3)) expected.insert(o);
  }
  for (ShuffleMode mode : {ShuffleMode::kNone, ShuffleMode::kExact, ShuffleMode::kBlock}) {
    SamplePlanOptions options = Options(mode, 3, 5);
    options.world_size = 2;
    std::multiset<std::pair<uint64_t, uint64_t>> seen;
    for (uint32_t rank = 0; rank < 2; ++rank) {
      options.rank = rank;
      SamplePlan plan = MakePlan({time, Dim("latitude", 0, 4, 2)}, options);
      EXPECT_EQ(plan.num_samples(), expected.size() * 2);
      EXPECT_EQ(plan.num_missing_samples(), (27 - expected.size()) * 2);
      for (const SampleBatch& batch : AllBatches(plan)) {
        for (size_t i = 0; i < batch.size() - batch.num_padding; ++i) {
          seen.emplace(batch.origin(i)[0], batch.origin(i)[1]);
        }
      }
    }
    ASSERT_EQ(seen.size(), expected.size() * 2) << ShuffleModeName(mode);
    for (const auto& [t, y] : seen) {
      EXPECT_TRUE(expected.count(t)) << t;
      EXPECT_EQ(seen.count({t, y}), 1u);
    }
  }
  time.missing.clear();
  for (uint64_t t = 0; t < 30; t += 3) time.missing.push_back(t);
  ExpectErrorContains(SamplePlan::Create({time}, Options(ShuffleMode::kNone)).status(),
                      ErrorCode::kConfig, {"every sample touches a missing date"});
}

TEST(SamplePlanTest, BillionSamplesWithoutAllocatingThem) {
  const uint64_t n = 1'000'000'000;
  for (ShuffleMode mode : {ShuffleMode::kExact, ShuffleMode::kBlock}) {
    SCOPED_TRACE(ShuffleModeName(mode));
    SamplePlanOptions options = Options(mode, 17, 1024);
    options.world_size = 8;
    options.rank = 5;
    // Chunks of 10^4 indices: 10^5 blocks, a 13 kB block table per epoch.
    SamplePlan plan = MakePlan({Dim("time", 0, n + 1, 1, std::nullopt, 1, 10'000)}, options);
    EXPECT_EQ(plan.num_samples(), n);
    EXPECT_EQ(plan.samples_per_rank(), n / 8);
    EXPECT_EQ(plan.num_batches(), (n / 8 + 1023) / 1024);
    for (uint64_t index : {uint64_t{0}, plan.num_batches() / 2, plan.num_batches() - 1}) {
      SampleBatch batch = plan.Batch(index).value();
      EXPECT_EQ(batch.size(), index + 1 == plan.num_batches() ? n / 8 % 1024 : 1024u);
      std::set<uint64_t> distinct(batch.sample_ids.begin(), batch.sample_ids.end());
      EXPECT_EQ(distinct.size(), batch.size());
      for (uint64_t id : batch.sample_ids) ASSERT_LT(id, n);
    }
    plan.SetEpoch(1);
    EXPECT_EQ(plan.Batch(3)->size(), 1024u);
    const ReadEstimate estimate = plan.EstimateReads(mode, 8);
    EXPECT_EQ(estimate.batches_measured, 8u);
    // 10^5 chunks of inputs, plus the chunk holding the last target (index 10^9).
    EXPECT_EQ(estimate.chunks_in_selection, 100'001);
  }
}

}  // namespace
}  // namespace zarrstream

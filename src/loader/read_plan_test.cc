// The read plan against geometries of a small dataset in a memory store: the chunks a batch needs,
// each read once, and the boxes that carry each chunk's values to the right place in the batch's
// slabs; the sampled dimensions and block sizes it hands the sample plan.
#include "loader/read_plan.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "loader/loader_test_util.h"

namespace zarrstream {
namespace {

using testing::AddEra5LikeArrays;
using testing::LabelRange;
using testing::MemoryDataset;

constexpr uint64_t kLat = 4, kLon = 6;

// 8 time steps; temperature in chunks of 2 times, 2 levels, all latitudes and 4 longitudes (the
// last level and longitude chunks are partial); t2m in chunks of one time step; a static lsm
// (latitude, longitude) in chunks of 2 × 4.
const std::string& DatasetUrl() {
  static const MemoryDataset dataset = [] {  // for the process: the store registry finds it
    MemoryDataset m("read_plan_test");
    AddEra5LikeArrays(&m, {8, {30, 10, -10, -30}, {0, 60, 120, 180, 240, 300}, 4});
    m.AddArray<float>("lsm", {kLat, kLon}, {2, 4}, {"latitude", "longitude"},
                      std::vector<float>(kLat * kLon, 1.0F));
    return m;
  }();
  return dataset.url();
}

Result<LoaderGeometry> Geometry(const LoaderOptions& options) {
  ZS_ASSIGN_OR_RETURN(Dataset dataset, Dataset::Open(DatasetUrl()));
  return MakeLoaderGeometry(dataset, options);
}

// A batch of samples at `origins` (one origin per sampled dimension each).
SampleBatch Batch(const std::vector<std::vector<uint64_t>>& origins) {
  SampleBatch batch;
  batch.num_dims = origins.front().size();
  for (size_t s = 0; s < origins.size(); ++s) {
    batch.sample_ids.push_back(s);
    batch.origins.insert(batch.origins.end(), origins[s].begin(), origins[s].end());
  }
  return batch;
}

// Checks that every copy of `plan` lies inside its chunk and its slab, takes its values from the
// array index the slab needs there, and that the copies of each (sample, slab) cover the slab
// exactly once.
void ExpectCopiesTileTheSlabs(const LoaderGeometry& g, const SampleBatch& batch,
                              const BatchReadPlan& plan) {
  // (sample, target, slab, position in the slab) of every value copied.
  std::set<std::tuple<uint32_t, bool, uint32_t, std::vector<uint64_t>>> covered;
  uint64_t copied = 0;
  std::vector<const PlannedChunk*> sources;
  for (const PlannedChunk& chunk : plan.chunks) sources.push_back(&chunk);
  for (const PlannedChunk& kept : plan.resident) sources.push_back(&kept);
  for (const PlannedChunk* source : sources) {
    const PlannedChunk& chunk = *source;
    const internal::ArrayState& array = *g.arrays[chunk.array];
    // A static field's copies come from its kept box, which stands for its one chunk.
    const std::optional<ResidentBox>& kept = g.resident[chunk.array];
    const std::vector<uint64_t>& extent = kept ? kept->shape : array.read_chunk_shape;
    for (const PlannedCopy& copy : chunk.copies) {
      const Slab& slab = copy.target ? g.target_slabs[copy.slab] : g.input_slabs[copy.slab];
      const Channel& channel = g.channels[slab.channel];
      ASSERT_EQ(g.arrays[g.channel_array[slab.channel]], &array);
      ASSERT_EQ(size_t{copy.rank}, array.metadata.shape.size());
      // The slab's first index per array dimension (the loader's index, from the sample's
      // origin), and the geometry's dimension it is (none for the level).
      std::vector<uint64_t> lo;
      std::vector<uint64_t> slab_extent;
      std::vector<std::optional<size_t>> dim_of;
      for (size_t d = 0, k = 0; d < g.dims.size(); ++d) {
        if (channel.level_dim && lo.size() == *channel.level_dim) {
          lo.push_back(channel.level_index);
          slab_extent.push_back(1);
          dim_of.emplace_back();
        }
        const bool time = g.time_dim && *g.time_dim == d;
        uint64_t start = g.ranges[d].start;
        if (g.sampled[d]) start = batch.origin(copy.sample)[k++];
        if (time && channel.broadcast) continue;  // a static field has no time dimension
        lo.push_back(start + (time ? slab.step : 0));
        slab_extent.push_back(time ? 1 : g.window[d]);
        dim_of.push_back(time ? std::nullopt : std::optional(d));
      }
      if (channel.level_dim && lo.size() == *channel.level_dim) {
        lo.push_back(channel.level_index);
        slab_extent.push_back(1);
        dim_of.emplace_back();
      }
      ASSERT_EQ(lo.size(), size_t{copy.rank});
      uint64_t volume = 1;
      for (size_t a = 0; a < copy.rank; ++a) {
        EXPECT_GT(copy.shape[a], 0U);
        EXPECT_LE(copy.within_chunk[a] + copy.shape[a], extent[a]) << "dimension " << a;
        EXPECT_LE(copy.within_slab[a] + copy.shape[a], slab_extent[a]) << "dimension " << a;
        // Each index of the box reads the store index the loader's index there stands for
        // (wrapped around a periodic dimension, mirrored in reflected padding).
        for (uint64_t i = 0; i < copy.shape[a]; ++i) {
          const uint64_t index = lo[a] + copy.within_slab[a] + i;
          EXPECT_EQ(
              (kept ? kept->start[a] : chunk.coords[a] * extent[a]) + copy.within_chunk[a] + i,
              dim_of[a] ? SourceIndex(g, *dim_of[a], index) : index)
              << "dimension " << a << ", index " << i;
        }
        volume *= copy.shape[a];
      }
      copied += volume;
      for (uint64_t i = 0; i < volume; ++i) {
        std::vector<uint64_t> position(copy.rank);
        for (size_t a = copy.rank, rest = i; a-- > 0;) {
          position[a] = copy.within_slab[a] + rest % copy.shape[a];
          rest /= copy.shape[a];
        }
        EXPECT_TRUE(covered.emplace(copy.sample, copy.target, copy.slab, position).second)
            << "a value of slab " << copy.slab << " of sample " << copy.sample << " copied twice";
      }
    }
  }
  // Padding with a value is no copy: its boxes cover the rest of every slab.
  uint64_t padded = 0;
  for (const PlannedPadding& box : plan.padding) {
    uint64_t volume = 1;
    for (size_t k = 0; k < g.spatial_shape.size(); ++k) volume *= box.shape[k];
    padded += volume * (g.input_slabs.size() + g.target_slabs.size());  // its sample's slabs
  }
  const uint64_t slabs = batch.size() * (g.input_slabs.size() + g.target_slabs.size());
  EXPECT_EQ(copied + padded, slabs * g.slab_elements);
  EXPECT_EQ(covered.size(), copied);
}

TEST(ReadPlanTest, CopiesCarryEachSlabFromTheChunksThatHoldIt) {
  LoaderOptions options;
  // Level 1000 sits alone in the partial second level chunk.
  options.variables = {"temperature@850,1000", "t2m"};
  options.target_variables = {"t2m"};
  options.sample = {{"time", 2}, {"longitude", 3}};
  options.select = {LabelRange("latitude", "10", "-30")};
  options.target_dim = "time";
  options.target_offsets = {1, 2};
  auto geometry = Geometry(options);
  ASSERT_TRUE(geometry.ok()) << geometry.status().ToString();
  EXPECT_EQ(geometry->spatial_shape, (std::vector<uint64_t>{3, 3}));
  // Windows across time and longitude chunk boundaries, and inside one chunk.
  const SampleBatch batch = Batch({{1, 2}, {4, 0}, {3, 3}});
  const BatchReadPlan plan = PlanBatchReads(*geometry, batch);
  ExpectCopiesTileTheSlabs(*geometry, batch, plan);
  uint64_t refs = 0;
  for (const PlannedChunk& chunk : plan.chunks) refs += chunk.copies.size();
  EXPECT_EQ(refs, plan.chunk_refs);
}

TEST(ReadPlanTest, WindowsWrapAroundAPeriodicLongitude) {
  LoaderOptions options;
  options.variables = {"temperature@850,1000", "t2m", "lsm"};
  options.target_variables = {"t2m"};
  options.sample = {{"time", 2}, {"longitude", 3}};
  options.target_dim = "time";
  options.target_offsets = {1};
  auto geometry = Geometry(options);
  ASSERT_TRUE(geometry.ok()) << geometry.status().ToString();
  EXPECT_EQ(geometry->axes[2].period, kLon);
  // Longitudes 4, 5, 0 and 5, 0, 1 (crossing the chunk edge at 4 too), and one inside.
  const SampleBatch batch = Batch({{1, 4}, {4, 5}, {2, 1}});
  const BatchReadPlan plan = PlanBatchReads(*geometry, batch);
  ExpectCopiesTileTheSlabs(*geometry, batch, plan);
  // The static field's kept box is every longitude.
  const ResidentBox& box = *geometry->resident[geometry->channel_array[3]];
  EXPECT_EQ(box.shape, (std::vector<uint64_t>{kLat, kLon}));
  EXPECT_EQ(ReportedIndex(*geometry, 2, 7), 1);
  // periodic: none, and windows stay inside.
  options.periodic = std::vector<std::string>{};
  auto flat = Geometry(options);
  ASSERT_TRUE(flat.ok()) << flat.status().ToString();
  EXPECT_EQ(flat->axes[2].period, 0U);
  EXPECT_EQ(flat->ranges[2], (IndexRange{0, kLon}));
}

TEST(ReadPlanTest, ReflectPaddingMirrorsTheRowsAtTheEdges) {
  LoaderOptions options;
  options.variables = {"temperature@500", "lsm"};
  options.sample = {{"latitude", 3}};
  options.stride = {{"latitude", 3}};
  options.patch_padding.mode = PatchPadding::Mode::kReflect;
  auto geometry = Geometry(options);
  ASSERT_TRUE(geometry.ok()) << geometry.status().ToString();
  // 4 rows in windows of 3, stride 3: 2 windows need 6 rows, one mirrored at each edge.
  const AxisIndexing& axis = geometry->axes[1];
  EXPECT_TRUE(axis.padded);
  EXPECT_EQ(axis.pad_before, 1U);
  EXPECT_EQ(geometry->ranges[1], (IndexRange{0, kLat + 2}));
  EXPECT_EQ(SourceIndex(*geometry, 1, 0), 1U);  // row -1 mirrors row 1
  EXPECT_EQ(SourceIndex(*geometry, 1, 5), 2U);  // row 4 mirrors row 2
  EXPECT_EQ(ReportedIndex(*geometry, 1, 0), -1);
  const SampleBatch batch = Batch({{0, 0}, {5, 3}});
  const BatchReadPlan plan = PlanBatchReads(*geometry, batch);
  EXPECT_TRUE(plan.padding.empty());
  ExpectCopiesTileTheSlabs(*geometry, batch, plan);
  // A value instead: no copy reaches the padding rows; a box per sample says where they are.
  options.patch_padding = PatchPadding{PatchPadding::Mode::kValue, 0.5};
  auto valued = Geometry(options);
  ASSERT_TRUE(valued.ok()) << valued.status().ToString();
  const BatchReadPlan filled = PlanBatchReads(*valued, batch);
  ASSERT_EQ(filled.padding.size(), 2U);
  EXPECT_EQ(filled.padding[0].offset[0], 0U);  // sample 0: its first row
  EXPECT_EQ(filled.padding[1].offset[0], 2U);  // sample 1: its last row
  for (const PlannedPadding& box : filled.padding) {
    EXPECT_EQ(box.shape[0], 1U);
    EXPECT_EQ(box.shape[1], kLon);
  }
  ExpectCopiesTileTheSlabs(*valued, batch, filled);
  // Too little to mirror: 4 rows cannot give 4 mirrored ones.
  options.patch_padding.mode = PatchPadding::Mode::kReflect;
  options.sample = {{"latitude", 12}};
  options.stride = {{"latitude", 12}};
  EXPECT_EQ(Geometry(options).status().code(), ErrorCode::kConfig);
}

TEST(ReadPlanTest, StaticFieldsAreCopiedFromTheirKeptBoxAtEveryStep) {
  LoaderOptions options;
  options.variables = {"t2m", "lsm"};
  options.sample = {{"time", 2}, {"longitude", 3}};
  options.select = {LabelRange("latitude", "10", "-30")};  // rows 1 to 3
  options.frequency = "12h";                               // every other 6-hourly step
  auto geometry = Geometry(options);
  ASSERT_TRUE(geometry.ok()) << geometry.status().ToString();
  ASSERT_EQ(geometry->channels[0].array_name, "t2m");
  const SampleBatch batch = Batch({{0, 2}, {3, 1}});
  const BatchReadPlan plan = PlanBatchReads(*geometry, batch);
  // t2m's chunks only: steps origin and origin + 2 of the store.
  std::set<uint64_t> times;
  for (const PlannedChunk& chunk : plan.chunks) {
    EXPECT_EQ(chunk.array, geometry->channel_array[0]);
    times.insert(chunk.coords[0]);
  }
  EXPECT_EQ(times, (std::set<uint64_t>{0, 2, 3, 5}));
  // lsm: one kept box (the selected rows, every column), a copy per sample and step.
  ASSERT_EQ(plan.resident.size(), 1U);
  EXPECT_EQ(plan.resident[0].array, geometry->channel_array[1]);
  const ResidentBox& box = *geometry->resident[plan.resident[0].array];
  EXPECT_EQ(box.start, (std::vector<uint64_t>{1, 0}));
  EXPECT_EQ(box.shape, (std::vector<uint64_t>{3, kLon}));
  ASSERT_EQ(plan.resident[0].copies.size(), 4U);
  for (const PlannedCopy& copy : plan.resident[0].copies) {
    const uint64_t longitude = batch.origin(copy.sample)[1];
    EXPECT_EQ(copy.within_chunk[0], 0U);
    EXPECT_EQ(copy.within_chunk[1], longitude);
    EXPECT_EQ(copy.shape[0], 3U);
    EXPECT_EQ(copy.shape[1], 3U);
    EXPECT_EQ(geometry->input_slabs[copy.slab].channel, 1U);
  }
}

TEST(ReadPlanTest, ChunksSharedBySamplesAndLevelsAreReadOnce) {
  LoaderOptions options;
  options.variables = {"temperature@500,850"};
  options.target_dim = "time";
  options.target_offsets = {1};
  auto geometry = Geometry(options);
  ASSERT_TRUE(geometry.ok()) << geometry.status().ToString();
  // Samples at times 0 and 1 (one time chunk); targets at 1 and 2 (times 0-1 and 2-3).
  const SampleBatch batch = Batch({{0}, {1}});
  const BatchReadPlan plan = PlanBatchReads(*geometry, batch);
  // Inputs: time chunk 0, level chunk 0 (levels 500 and 850), 2 longitude chunks. Targets add
  // time chunk 1 for the sample at time 1 (its target at time 2).
  EXPECT_EQ(plan.chunks.size(), 4U);
  // 2 samples x (2 input + 2 target channels) x 2 longitude chunks.
  EXPECT_EQ(plan.chunk_refs, 16U);
  EXPECT_EQ(plan.bytes_used, uint64_t{2} * 4 * kLat * kLon * sizeof(float));
  for (const PlannedChunk& chunk : plan.chunks) {
    EXPECT_EQ(chunk.array, 0U);
    EXPECT_EQ(chunk.coords[1], 0U);  // both levels from the first level chunk
    // C order over the (4, 2, 1, 2) chunk grid.
    EXPECT_EQ(chunk.linear, ((chunk.coords[0] * 2 + chunk.coords[1]) * 1 + chunk.coords[2]) * 2 +
                                chunk.coords[3]);
  }
  ExpectCopiesTileTheSlabs(*geometry, batch, plan);
}

TEST(ReadPlanTest, PlanDimsCarryWindowsStridesTargetReachAndChunks) {
  LoaderOptions options;
  options.variables = {"temperature@500"};
  options.sample = {{"time", 2}, {"longitude", 3}};
  options.stride = {{"longitude", 2}};
  options.select = {LabelRange("time", "2000-01-01T06:00", "2000-01-02T18:00")};
  options.target_dim = "time";
  options.target_offsets = {3, 1};
  auto geometry = Geometry(options);
  ASSERT_TRUE(geometry.ok()) << geometry.status().ToString();
  const std::vector<SampledDim> dims = PlanDims(*geometry);
  ASSERT_EQ(dims.size(), 2U);
  EXPECT_EQ(dims[0].name, "time");
  EXPECT_EQ(dims[0].range, (IndexRange{1, 8}));
  EXPECT_EQ(dims[0].window, 2U);
  EXPECT_EQ(dims[0].stride, 2U);  // the window, when no stride is given
  EXPECT_EQ(dims[0].reach, 3U);   // the largest offset
  EXPECT_EQ(dims[0].chunk, 2U);
  EXPECT_EQ(dims[1].name, "longitude");
  // A periodic longitude sampled whole: a window from every index, the last two wrapping.
  EXPECT_EQ(dims[1].range, (IndexRange{0, kLon + 2}));
  EXPECT_EQ(dims[1].window, 3U);
  EXPECT_EQ(dims[1].stride, 2U);
  EXPECT_EQ(dims[1].reach, 0U);
  EXPECT_EQ(dims[1].chunk, 4U);
}

// An ensemble: t2m (time, number, latitude, longitude) of 4 steps and 3 members, in chunks of 2
// members, and a static lsm without members.
Result<LoaderGeometry> EnsembleGeometry(const LoaderOptions& options) {
  static const MemoryDataset dataset = [] {
    MemoryDataset m("read_plan_ensemble_test");
    m.AddArray<int64_t>("time", {4}, {4}, {"time"}, {0, 6, 12, 18},
                        {{"units", "hours since 2000-01-01"}, {"calendar", "standard"}});
    m.AddArray<int64_t>("number", {3}, {3}, {"number"}, {0, 1, 2});
    m.AddArray<float>("t2m", {4, 3, kLat, kLon}, {1, 2, kLat, kLon},
                      {"time", "number", "latitude", "longitude"},
                      std::vector<float>(4 * 3 * kLat * kLon, 1.0F));
    m.AddArray<float>("lsm", {kLat, kLon}, {kLat, kLon}, {"latitude", "longitude"},
                      std::vector<float>(kLat * kLon, 1.0F));
    return m;
  }();
  ZS_ASSIGN_OR_RETURN(Dataset opened, Dataset::Open(dataset.url()));
  return MakeLoaderGeometry(opened, options);
}

// Each member's box: the chunk holding the member, one index of it, at the slab's start.
TEST(ReadPlanTest, MembersAreReadFromTheChunkThatHoldsThem) {
  LoaderOptions options;
  options.variables = {"t2m"};
  options.forcings = {"lsm"};
  options.ensemble = EnsembleMode::kSample;
  auto sampled = EnsembleGeometry(options);
  ASSERT_TRUE(sampled.ok()) << sampled.status().ToString();
  EXPECT_EQ(PlanDims(*sampled)[1].chunk, 2U);  // the member dimension's chunks
  // Samples (time 1, member 2) and (time 3, member 1).
  BatchReadPlan plan = PlanBatchReads(*sampled, Batch({{1, 2}, {3, 1}}));
  ASSERT_EQ(plan.chunks.size(), 2U);
  for (const PlannedChunk& chunk : plan.chunks) {
    ASSERT_EQ(chunk.copies.size(), 1U);
    const PlannedCopy& copy = chunk.copies[0];
    const uint64_t member = copy.sample == 0 ? 2 : 1;
    EXPECT_EQ(chunk.coords[1], member / 2);
    EXPECT_EQ(copy.within_chunk[1], member % 2);
    EXPECT_EQ(copy.shape[1], 1U);
    EXPECT_EQ(copy.within_slab[1], 0U);
  }
  ASSERT_EQ(plan.resident.size(), 1U);  // lsm, in every member's sample
  EXPECT_EQ(plan.resident[0].copies.size(), 2U);

  options.ensemble = EnsembleMode::kChannels;
  auto stacked = EnsembleGeometry(options);
  ASSERT_TRUE(stacked.ok()) << stacked.status().ToString();
  ASSERT_EQ(stacked->input_slabs.size(), 4U);  // t2m#0, t2m#1, t2m#2, lsm
  plan = PlanBatchReads(*stacked, Batch({{2}}));
  ASSERT_EQ(plan.chunks.size(), 2U);                // members 0 and 1 share a chunk
  std::set<std::pair<uint32_t, uint64_t>> members;  // (slab, member) of every copy
  for (const PlannedChunk& chunk : plan.chunks) {
    for (const PlannedCopy& copy : chunk.copies) {
      EXPECT_EQ(copy.shape[1], 1U);
      members.emplace(copy.slab, chunk.coords[1] * 2 + copy.within_chunk[1]);
    }
  }
  EXPECT_EQ(members, (std::set<std::pair<uint32_t, uint64_t>>{{0, 0}, {1, 1}, {2, 2}}));
}

// Block sizes the loader picks for shuffle "block": CPU batches size blocks by the chunk cache,
// GPU batches by the batch (the plan reads a chunk once per batch; GPU batches have no cache).
TEST(ReadPlanTest, AutoBlockChunksFollowsWhereDecodedChunksAreShared) {
  LoaderOptions options;
  options.variables = {"t2m"};  // one time step per chunk
  options.target_dim = "time";
  options.target_offsets = {1};
  options.block_window = 2;
  auto geometry = Geometry(options);
  ASSERT_TRUE(geometry.ok()) << geometry.status().ToString();
  const std::vector<SampledDim> dims = PlanDims(*geometry);
  // One sample reads two steps of kLat x kLon doubles.
  const uint64_t step_bytes = kLat * kLon * sizeof(double);
  EXPECT_EQ(AutoBlockChunks(*geometry, dims, options, /*cache_bytes=*/1), 1U);
  EXPECT_EQ(AutoBlockChunks(*geometry, dims, options, uint64_t{1} << 30), 8U);
  // Blocks of 3 steps span 4 steps: two blocks in play hold 8 steps, 0.75 of a 11-step cache.
  EXPECT_EQ(AutoBlockChunks(*geometry, dims, options, 11 * step_bytes), 3U);

  options.device = BatchDevice::kCuda;  // the cache size no longer matters
  for (uint64_t cache : {uint64_t{1}, uint64_t{1} << 30}) {
    options.batch_size = 8;  // 2 blocks of 4 samples
    EXPECT_EQ(AutoBlockChunks(*geometry, dims, options, cache), 4U);
    options.batch_size = 9;
    EXPECT_EQ(AutoBlockChunks(*geometry, dims, options, cache), 4U);
    options.batch_size = 3;  // not even two blocks of 2 fit: single steps
    EXPECT_EQ(AutoBlockChunks(*geometry, dims, options, cache), 1U);
    options.batch_size = 64;
    EXPECT_EQ(AutoBlockChunks(*geometry, dims, options, cache), 8U);
  }
  // Origins every second step: a block of 4 chunks holds 2 samples.
  options.stride = {{"time", 2}};
  auto strided = Geometry(options);
  ASSERT_TRUE(strided.ok()) << strided.status().ToString();
  options.batch_size = 8;
  EXPECT_EQ(AutoBlockChunks(*strided, PlanDims(*strided), options, 1), 8U);
}

}  // namespace
}  // namespace zarrstream

// The sample plan: the first stage of the loader (docs/architecture.md, "The life of a batch"). It
// turns the sampled dimensions of a dataset into an index space of sample origins, orders that
// space for an epoch (deterministic for (seed, epoch), identical on every rank), shards it over
// data-parallel ranks and hands the read planner this rank's batches of origins, one after another,
// from a resumable cursor. Pure index arithmetic: no I/O, no allocation proportional to the number
// of samples.
//
// Index space. Each sampled dimension d has a selected index range [start, stop) (label selection,
// already resolved), a window, a stride and a reach (the indices after the window that targets
// need: target_offset time=1 with window 1 is reach 1; several lead times: the largest). Its
// origins are start + j * stride for j = 0, 1, ... while origin + window + reach <= stop, so
// inputs and targets stay inside the selection and a validation split never feeds a training
// target. A sample is one origin per sampled dimension; sample ids run over the combinations in C
// order (the last dimension fastest). Dimensions that are not sampled are taken whole by the
// caller and are not part of the plan.
//
// Epoch order (ShuffleMode), a bijection from positions [0, n) to sample ids:
//   kNone   index order.
//   kExact  a uniformly scrambled global permutation: a keyed Feistel network over the smallest
//           even power of two >= n, cycle-walked back into [0, n). Any position is computed in
//           O(1) time and memory (about 4 × 6 hash rounds), so a 1e9-sample space costs nothing
//           and ranks, resumes and Batch(i) seek directly. A Fisher–Yates vector would be exactly
//           uniform but costs 8 bytes per sample per epoch (800 MB at 1e8 samples, rebuilt on every
//           rank every epoch); the Feistel permutation is not uniform over all n! orders, but it is
//           a keyed pseudo-random bijection, which is all SGD needs.
//   kBlock  chunk-aware block shuffle. Origins are grouped into blocks: along each dimension a
//           block spans `block_chunks` source chunks (aligned to the chunk grid, widened to at
//           least one stride so no block is empty). The blocks are permuted (Feistel), consecutive
//           runs of `block_window` permuted blocks form a group, and each group's samples are
//           permuted together (blocks shuffled, samples shuffled within blocks, k blocks
//           interleaved). A batch then touches the chunks of about k blocks instead of one chunk
//           per sample. Seeking needs each group's start position: one uint64 per 64 groups is kept
//           per epoch (the rest are summed on the fly), built in O(number of blocks) by SetEpoch.
//
// Sharding. The epoch order is cut into `world_size` contiguous slices, rank r takes slice r
// (contiguous, not strided: a rank's batches then come from its own groups of blocks, so block
// shuffle keeps its locality per rank; strided assignment would make every rank read every
// block's chunks). Remainders (n not divisible by world_size × batch_size):
//   drop_last = true   every rank gets floor(n / (world_size × batch_size)) full batches; the tail
//                      of the epoch order is dropped (a different tail each shuffled epoch), so
//                      ranks stay in lock-step for DDP.
//   drop_last = false, pad_to_equal = true (the default; PyTorch DistributedSampler's behaviour)
//                      every rank gets ceil(n / world_size) samples: the order is extended by
//                      repeating its first samples; only the last batch of a rank may be short and
//                      every rank has the same number of batches. SampleBatch::num_padding counts
//                      the repeats (at the end of the last rank's last batches) so evaluation can
//                      drop them.
//   drop_last = false, pad_to_equal = false
//                      every sample exactly once; rank sizes differ by at most one sample and batch
//                      counts by at most one batch (not usable with DDP, which needs equal steps).
// With world_size 1 padding never happens.
//
// Threads. A SamplePlan is a value (copyable, movable). Its geometry and options never change after
// Create. The cursor (epoch, next batch) and the epoch's block table change only in SetEpoch, Next
// and Restore: those must not run concurrently with any other call on the same plan. All const
// methods may run concurrently with each other.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "dataset/coordinates.h"
#include "zarrstream/loader.h"
#include "zarrstream/status.h"

namespace zarrstream {

// One sampled dimension, in array index space.
struct SampledDim {
  std::string name;
  // The selected indices along the dimension (label selection, resolved).
  IndexRange range;
  uint64_t window = 1;
  // Distance between consecutive origins; nullopt is `window` (no overlap). Overlap when < window.
  std::optional<uint64_t> stride;
  // Indices after the window that targets need (the largest target offset past the window).
  uint64_t reach = 0;
  // The source's (read) chunk extent along the dimension, for block shuffle and read estimates.
  // Several arrays with different chunks: pass the one that dominates the bytes read.
  uint64_t chunk = 1;
  // Indices no sample may touch (missing dates), sorted, and the offsets from a sample's origin
  // of the indices it touches (its window's and its targets' steps). An origin whose sample
  // touches a missing index is left out of the index space; the others keep their order.
  std::vector<uint64_t> missing;
  std::vector<uint64_t> touched;
};

struct SamplePlanOptions {
  ShuffleMode shuffle = ShuffleMode::kExact;
  uint64_t seed = 0;
  uint64_t batch_size = 1;
  uint32_t world_size = 1;
  uint32_t rank = 0;
  // See the overview: equal full batches on every rank, dropping the global remainder.
  bool drop_last = false;
  // Only when drop_last is false: pad every rank to the same length (DistributedSampler).
  bool pad_to_equal = true;
  // kBlock: chunks per block along each sampled dimension, and blocks interleaved per group.
  // Larger values are more random and read more bytes per batch.
  uint64_t block_chunks = 1;
  uint64_t block_window = 4;
};

// One batch of this rank: samples in epoch order.
struct SampleBatch {
  uint64_t epoch = 0;
  uint64_t index = 0;  // within this rank's epoch
  size_t num_dims = 0;
  std::vector<uint64_t> sample_ids;  // global ids (C order over the index space)
  // Row-major [size(), num_dims]: each sample's origin (absolute array index) along each sampled
  // dimension, in the plan's dimension order: the loader's "origin" tensor.
  std::vector<uint64_t> origins;
  // The last num_padding samples repeat samples from the start of the epoch order (padding, see
  // the overview); zero except at the end of a padded epoch.
  uint64_t num_padding = 0;

  size_t size() const { return sample_ids.size(); }
  std::span<const uint64_t> origin(size_t sample) const {
    return std::span<const uint64_t>(origins).subspan(sample * num_dims, num_dims);
  }
};

// The resumable cursor and what it is only valid with. JSON (format "zarrstream.sample_plan/1"):
//   {"format": "zarrstream.sample_plan/1", "seed": 0, "epoch": 3, "next_batch": 120,
//    "world_size": 8, "rank": 2, "batch_size": 16, "shuffle": "block",
//    "fingerprint": "9f0c...16 hex digits"}
// The fingerprint hashes the geometry (dimensions, ranges, windows, strides, reaches, chunks) and
// the block and remainder settings; it is hex text because JSON readers lose integers above 2^53.
struct SamplePlanState {
  uint64_t seed = 0;
  uint64_t epoch = 0;
  uint64_t next_batch = 0;
  uint32_t world_size = 1;
  uint32_t rank = 0;
  uint64_t batch_size = 1;
  ShuffleMode shuffle = ShuffleMode::kNone;
  uint64_t fingerprint = 0;

  std::string ToJson() const;
  static Result<SamplePlanState> FromJson(std::string_view json);
  bool operator==(const SamplePlanState&) const = default;
};

// What an epoch order costs in chunk reads, from the plan's geometry. A "chunk" here is one cell
// of the sampled dimensions' chunk grid; a sample touches the cells its window plus reach overlaps.
// Each cell stands for the same number of stored chunks (variables × chunks of the unsampled
// dimensions) in every mode, so ratios between modes are ratios of bytes read.
struct ReadEstimate {
  ShuffleMode mode = ShuffleMode::kNone;
  uint64_t batches_measured = 0;  // batches of the global epoch order the means come from
  // Mean distinct cells one batch touches: what a read planner that reads each chunk once per
  // batch (deduplicated, no cache across batches) fetches per batch.
  double chunks_per_batch = 0;
  // Mean over batches of the sum over samples of cells touched: reads without deduplication.
  double chunk_refs_per_batch = 0;
  // Distinct cells the whole index space touches: one epoch's bytes if each chunk were read once.
  double chunks_in_selection = 0;
  // chunks_per_batch × batches per epoch / chunks_in_selection: how many times each chunk is read
  // per epoch without a cache across batches (1 is ideal; a chunk cache brings it closer).
  double read_amplification = 0;
};

// A keyed pseudo-random bijection of [0, size): a balanced Feistel network over the smallest even
// power of two >= size, cycle-walked (re-encrypted until the value falls inside [0, size), which
// terminates because the value's cycle contains the start). O(1) memory; size <= 2^62. Immutable.
class FeistelPermutation {
 public:
  FeistelPermutation() = default;  // the permutation of the empty set
  FeistelPermutation(uint64_t size, uint64_t key);

  uint64_t size() const { return size_; }
  // The image of `index` (< size()).
  uint64_t operator()(uint64_t index) const;

 private:
  static constexpr int kRounds = 6;
  uint64_t Encrypt(uint64_t x) const;

  uint64_t size_ = 0;
  int half_bits_ = 0;
  uint64_t half_mask_ = 0;
  std::array<uint64_t, kRounds> round_keys_{};
};

class SamplePlan {
 public:
  // Validates the dimensions and options (errors name the dimension and the numbers) and positions
  // the cursor at batch 0 of epoch 0.
  static Result<SamplePlan> Create(std::vector<SampledDim> dims, const SamplePlanOptions& options);

  const std::vector<SampledDim>& dims() const { return dims_; }
  const SamplePlanOptions& options() const { return options_; }
  // Origins along each sampled dimension; num_samples() is their product.
  const std::vector<uint64_t>& origin_counts() const { return origin_counts_; }
  uint64_t num_samples() const { return num_samples_; }
  // Samples left out of the index space because they touch a missing index (SampledDim::missing).
  uint64_t num_missing_samples() const { return num_missing_samples_; }
  // The origin of sample `sample_id` (< num_samples()) along each dimension (absolute indices).
  void SampleOrigin(uint64_t sample_id, std::span<uint64_t> origin) const;
  std::vector<uint64_t> SampleOrigin(uint64_t sample_id) const;
  uint64_t fingerprint() const { return fingerprint_; }

  // This rank's share of every epoch: samples (padding included) and batches. The same every
  // epoch.
  uint64_t samples_per_rank() const { return rank_size_; }
  uint64_t num_batches() const { return num_batches_; }

  // Batch `index` (< num_batches()) of this rank in the current epoch; does not move the cursor.
  Result<SampleBatch> Batch(uint64_t index) const;
  // The batch at the cursor, advancing it; nullopt once the epoch is exhausted (call SetEpoch).
  std::optional<SampleBatch> Next();

  // Starts epoch `epoch` at batch 0 (block shuffle: rebuilds the block table).
  void SetEpoch(uint64_t epoch);
  uint64_t epoch() const { return epoch_; }
  uint64_t next_batch() const { return next_batch_; }

  SamplePlanState State() const;
  // Continues from `state`: the remaining batches are exactly those the saved plan had left. Fails
  // when the seed, world size, batch size, shuffle mode or geometry differ, or the position is
  // past this rank's batches. A different rank is accepted (ranks move in lock-step, so rank 0's
  // state restores every rank).
  Status Restore(const SamplePlanState& state);

  // The chunk reads of `mode`'s order in the current epoch (same seed and geometry), measured on
  // up to `max_batches` evenly spaced batches of the global epoch order (all of them when there are
  // fewer, making the estimate exact for world_size 1). Cost: max_batches × batch_size samples,
  // plus one pass over the origins of each dimension whose stride exceeds its chunk; for another
  // mode than the plan's, block shuffle's table too. Meant for start-up reporting, not per batch.
  ReadEstimate EstimateReads(ShuffleMode mode, uint64_t max_batches = 64) const;

 private:
  // Derived per-dimension numbers.
  struct DimGeometry {
    uint64_t stride = 0;
    uint64_t block_span = 0;   // array indices per block: a multiple of the chunk, >= stride
    uint64_t first_block = 0;  // range.start / block_span
    uint64_t num_blocks = 0;
  };
  // Position → sample id for one (mode, seed, epoch).
  struct EpochOrder {
    ShuffleMode mode = ShuffleMode::kNone;
    FeistelPermutation samples;  // kExact
    FeistelPermutation blocks;   // kBlock: permuted rank → block id
    uint64_t group_key = 0;      // kBlock: keys each group's permutation
    uint64_t num_groups = 0;
    // kBlock: the start position of groups 0, kCheckpointGroups, 2 × kCheckpointGroups, ...
    std::vector<uint64_t> checkpoints;
  };
  static constexpr uint64_t kCheckpointGroups = 64;

  SamplePlan() = default;
  EpochOrder MakeOrder(ShuffleMode mode, uint64_t epoch) const;
  // Sample ids at positions [begin, begin + ids.size()) of `order` (all < num_samples()).
  void FillOrder(const EpochOrder& order, uint64_t begin, std::span<uint64_t> ids) const;
  void FillBlockOrder(const EpochOrder& order, uint64_t begin, std::span<uint64_t> ids) const;
  uint64_t BlockBegin(size_t dim, uint64_t block) const;  // first origin index of a dim's block
  // The origin number (start + j × stride) of kept origin `index` along `dim`.
  uint64_t OriginNumber(size_t dim, uint64_t index) const {
    return kept_[dim].empty() ? index : kept_[dim][index];
  }
  uint64_t BlockSize(uint64_t block_id) const;
  uint64_t GroupSize(const EpochOrder& order, uint64_t group) const;
  SampleBatch MakeBatch(uint64_t index) const;

  std::vector<SampledDim> dims_;
  SamplePlanOptions options_;
  std::vector<DimGeometry> geometry_;
  std::vector<uint64_t> origin_counts_;
  // Per dimension with missing indices: the origin numbers (j of start + j × stride) kept, sorted;
  // empty where every origin is kept. Origin counts and sample ids run over the kept ones.
  std::vector<std::vector<uint64_t>> kept_;
  uint64_t num_samples_ = 0;
  uint64_t num_missing_samples_ = 0;
  uint64_t num_blocks_ = 0;
  uint64_t fingerprint_ = 0;
  uint64_t rank_begin_ = 0;  // position of this rank's first sample in the (padded) epoch order
  uint64_t rank_size_ = 0;
  uint64_t num_batches_ = 0;

  uint64_t epoch_ = 0;
  uint64_t next_batch_ = 0;
  EpochOrder order_;
};

}  // namespace zarrstream

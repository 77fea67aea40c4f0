// The loader's geometry and read planning (DESIGN.md §2): how a sample origin becomes regions of
// the channels' arrays, which read chunks those regions touch, and where each chunk's values go in
// the batch.
//
// LoaderGeometry is resolved once at open from the dataset and the options (the sample model of
// include/zarrstream/loader.h); it validates everything that can be wrong in a configuration, so a
// running loader only meets I/O and data errors. PlanBatchReads turns one batch of sample origins
// into a BatchReadPlan: the distinct read chunks the batch needs (a chunk shared by several
// samples, channels (levels of one array) or by an input and a target appears once), each with
// the copies it feeds: boxes of the decoded chunk → a slab of the batch (one sample, one output
// channel, the spatial dimensions).
//
// Both are plain values: a geometry is immutable after Create and shared by the pipeline's
// threads; a plan belongs to the thread building its batch.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "array/array_state.h"
#include "dataset/channel_spec.h"
#include "dataset/coordinates.h"
#include "loader/sample_plan.h"
#include "zarrstream/loader.h"
#include "zarrstream/status.h"

namespace zarrstream {

// Arrays the loader reads have at most this many dimensions (ERA5-like data has 3-4).
inline constexpr size_t kLoaderMaxRank = 8;
using DimArray = std::array<uint64_t, kLoaderMaxRank>;

// One output channel's source: a channel of the dataset at a step along the time dimension.
struct Slab {
  size_t channel = 0;  // index into LoaderGeometry::channels
  uint64_t step = 0;   // time index relative to the sample's origin (0 without a time dim)
  uint32_t out_channel = 0;
  bool target = false;
};

struct LoaderGeometry {
  // Inputs then targets; a channel that is both appears twice (normalised alike, read once).
  std::vector<Channel> channels;
  size_t num_inputs = 0;  // channels[0, num_inputs) are inputs (variables, then forcings)
  std::vector<std::string> input_names, target_names;

  // The channels' dimensions (level/channel dimension removed) and, per dimension, the selected
  // range, whether it is sampled and its window (the range's size when not sampled).
  std::vector<std::string> dims;
  std::vector<IndexRange> ranges;
  std::vector<uint8_t> sampled;
  std::vector<uint64_t> window;
  std::vector<uint64_t> stride;
  std::optional<size_t> time_dim;
  // Output channel steps: inputs at 0..window-1 of the time dimension; targets at
  // window - 1 + offset per offset.
  uint64_t time_window = 1;
  std::vector<uint64_t> target_steps;
  std::vector<Slab> input_slabs, target_slabs;

  std::vector<std::string> sample_dims;  // names of the sampled dims, in dims order
  std::vector<size_t> sampled_index;     // their indices in dims
  std::vector<std::string> spatial_dims;
  std::vector<size_t> spatial_index;  // dims of the batch after [batch, channel]
  std::vector<uint64_t> spatial_shape;
  uint64_t slab_elements = 1;  // product of spatial_shape

  // The distinct arrays behind the channels; channel_array[c] indexes them.
  std::vector<const internal::ArrayState*> arrays;
  std::vector<size_t> channel_array;

  // Normalisation per channel: out = (x - mean) * inv_std (0 and 1 without a stats file).
  std::vector<double> mean, inv_std;

  std::vector<SampledDim> PlanDims() const;
};

// Resolves `options` against `dataset` (see include/zarrstream/loader.h). Errors are
// kInvalidArgument (kNotFound for unknown names) and name the dataset and what is available.
Result<LoaderGeometry> MakeLoaderGeometry(const Dataset& dataset, const LoaderOptions& options);

// A box of one decoded chunk copied into one slab of the batch.
struct PlannedCopy {
  uint32_t sample = 0;  // position in the batch
  uint32_t slab = 0;    // index into input_slabs (or target_slabs when `target`)
  bool target = false;
  uint8_t rank = 0;
  DimArray within_chunk{};  // box offset inside the chunk, per array dimension
  DimArray within_slab{};   // box offset inside the slab, per array dimension (0 on collapsed dims)
  DimArray shape{};         // box extent per array dimension
};

struct PlannedChunk {
  size_t array = 0;  // index into LoaderGeometry::arrays
  std::vector<uint64_t> coords;
  uint64_t linear = 0;  // C-order index in the array's read-chunk grid
  std::vector<PlannedCopy> copies;
};

struct BatchReadPlan {
  std::vector<PlannedChunk> chunks;  // in order of first use
  uint64_t chunk_refs = 0;           // chunk uses before deduplication
  uint64_t bytes_used = 0;           // decoded bytes copied into the batch (source dtype)
};

BatchReadPlan PlanBatchReads(const LoaderGeometry& geometry, const SampleBatch& batch);

// Chunks per block along each sampled dimension for shuffle "block" when the options leave it to
// the loader (block_chunks 0): the largest block, up to 8 chunks, whose samples can share decoded
// chunks (overlapping windows; one step's target is the next step's input). Where that sharing
// happens decides the size:
// - CPU batches share through the chunk cache (`cache_bytes`): the `block_window` blocks in play
//   fit in three quarters of it, so a chunk decoded for one sample of a block is still cached when
//   the block's other samples need it.
// - GPU batches (options.device kCuda) do not use the chunk cache; they share within a batch, whose
//   plan reads each chunk once. The `block_window` blocks of a group (which the epoch order
//   interleaves into consecutive samples) hold at most `batch_size` samples, so a group falls in
//   one or two batches and its shared chunks are decoded once there.
uint64_t AutoBlockChunks(const LoaderGeometry& geometry, const std::vector<SampledDim>& dims,
                         const LoaderOptions& options, uint64_t cache_bytes);

}  // namespace zarrstream

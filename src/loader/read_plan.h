// The loader's read planning (docs/architecture.md, "The life of a batch"): how a batch of sample
// origins becomes regions of the channels' arrays, which read chunks those regions touch, and where
// each chunk's values go in the batch.
//
// PlanBatchReads turns one batch of sample origins into a BatchReadPlan against a LoaderGeometry
// (dataset/loader_geometry.h): the distinct read chunks the batch needs (a chunk shared by several
// samples, channels (levels of one array) or by an input and a target appears once), each with
// the copies it feeds: boxes of the decoded chunk → a slab of the batch (one sample, one output
// channel, the spatial dimensions); the static fields' slabs are copied from the boxes the loader
// keeps instead. PlanDims and AutoBlockChunks feed the sample plan.
//
// A plan is a plain value and belongs to the thread building its batch.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "dataset/loader_geometry.h"
#include "loader/sample_plan.h"
#include "zarrstream/loader.h"
#include "zarrstream/status.h"

namespace zarrstream {

// One value per array dimension (box offsets and extents).
using DimArray = std::array<uint64_t, kLoaderMaxRank>;

// The sampled dimensions of `geometry` as the sample plan takes them (in dims order): selected
// range, window, stride, the reach of the targets along the time dimension, and the chunk extent
// of the first channel's array.
std::vector<SampledDim> PlanDims(const LoaderGeometry& geometry);

// A box of one decoded chunk copied into one slab of the batch.
struct PlannedCopy {
  uint32_t sample = 0;  // position in the batch
  uint32_t slab = 0;  // index into input_slabs (target_slabs when `target`, base_slabs when `base`)
  bool target = false;
  // A tendency target's base value (LoaderGeometry::base_slabs): kept aside by the assembly, never
  // put into the batch itself.
  bool base = false;
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

// One slab of a computed forcing (LoaderGeometry::computed_slabs) for one sample: nothing is read.
struct PlannedForcing {
  uint32_t sample = 0;
  uint32_t slab = 0;      // index into computed_slabs
  int64_t seconds = 0;    // the valid time (seconds since 1970) where the forcing needs one
  uint64_t latitude = 0;  // store index of the slab's first latitude (and longitude)
  uint64_t longitude = 0;
};

// A box of one sample's spatial dimensions that lies in padding with a value (PatchPadding::
// kValue): every channel of the sample (inputs, computed forcings, targets) holds the value there,
// written after everything else.
struct PlannedPadding {
  uint32_t sample = 0;
  DimArray offset{};  // per spatial dimension (LoaderGeometry::spatial_index order)
  DimArray shape{};
};

struct BatchReadPlan {
  std::vector<PlannedChunk> chunks;  // in order of first use
  uint64_t chunk_refs = 0;           // chunk uses before deduplication
  uint64_t bytes_used = 0;           // decoded bytes copied into the batch (source dtype)
  // The copies from the static fields the loader keeps (LoaderGeometry::resident): one entry per
  // array, its box standing for the chunk (coords and linear 0). Nothing is read for them, so
  // they count in neither chunk_refs nor bytes_used.
  std::vector<PlannedChunk> resident;
  std::vector<PlannedForcing> computed;
  std::vector<PlannedPadding> padding;
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

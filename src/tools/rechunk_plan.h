// The plan of a rechunk: each output array's spec (chunks, shards, codec) and its slabs, the
// regions the copy reads and writes as one unit, with the share of them that one part of the job
// copies.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <span>
#include <vector>

#include "tools/rechunk.h"
#include "tools/rechunk_sources.h"
#include "util/checked_size.h"
#include "zarrstream/array.h"

namespace zarrstream::tools {

// One output array with its slab layout.
struct OutputPlan {
  OutputArraySource source;
  ArraySpec spec;
  std::vector<uint64_t> unit;  // stored object shape (shard, or chunk when not sharded)
  std::vector<uint64_t> slab;  // slab shape: a multiple of `unit` along each dimension
  std::vector<uint64_t> slab_grid;
  uint64_t slab_count = 0;
  uint64_t first_slab = 0;  // global index of this array's slab 0
  uint64_t slab_bytes = 0;
  // This part's slabs of this array: [part_begin, part_end).
  uint64_t part_begin = 0;
  uint64_t part_end = 0;
};

// a rounded up to a multiple of b, saturating (a bound, compared against extents).
inline uint64_t RoundUp(uint64_t a, uint64_t b) { return SaturatingMul(CeilDiv(a, b), b); }
// The bytes of a box of `shape`, saturating: only compared against budgets and limits, and a
// saturated value is refused before anything of that size is allocated.
inline uint64_t BoxBytes(std::span<const uint64_t> shape, size_t element_size) {
  return CheckedProduct(shape, element_size).value_or(~uint64_t{0});
}

// The output arrays' specs and slab layouts, with this part's share of the job's slabs (a run of
// about 1/part_count of the decoded bytes, the arrays' slabs taken in a row); takes the outputs
// from `layout`.
Result<std::vector<OutputPlan>> PlanOutputs(const RechunkOptions& options, SourceLayout& layout);

// Refuses a plan with more slabs in this part than memory can keep a record of.
Status CheckSlabRecordsFit(const std::vector<OutputPlan>& plans);

// The region of slab `index` of `plan`, clipped to the array.
void SlabRegion(const OutputPlan& plan, uint64_t index, std::vector<uint64_t>* start,
                std::vector<uint64_t>* shape);

// The plan as JSON: what a resumed part must agree on with the run that recorded progress.
nlohmann::json PlanJson(const RechunkOptions& options, const std::vector<OutputPlan>& plans);

}  // namespace zarrstream::tools

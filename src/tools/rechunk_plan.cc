// The rechunk plan: output chunking, slab shapes and parts (see rechunk_plan.h).
#include "tools/rechunk_plan.h"

#include <algorithm>
#include <numeric>
#include <optional>
#include <string>

#include "util/format.h"

namespace zarrstream::tools {
namespace {

using nlohmann::json;

// What the run keeps per slab of its part: an entry of the work list and one of the set of
// finished slabs (a tree node), with their allocation overhead.
constexpr uint64_t kBytesPerSlabRecord = 64;

// The first slab of part `part` of `count` among `slabs` (part `count`: the end): slabs * part /
// count without the product, which may pass 2^64 (the remainder's product is below count^2).
uint64_t PartBoundary(uint64_t slabs, uint32_t part, uint32_t count) {
  return slabs / count * part + slabs % count * part / count;
}

std::optional<uint64_t> Lookup(const std::vector<std::pair<std::string, uint64_t>>& sizes,
                               const std::string& dim) {
  for (const auto& [name, size] : sizes) {
    if (name == dim) return size;
  }
  return std::nullopt;
}

// The output chunk and shard shapes of `out` from the options (see RechunkOptions).
Status ChooseChunking(const RechunkOptions& options, const OutputArraySource& out,
                      std::vector<uint64_t>* chunks, std::optional<std::vector<uint64_t>>* shard) {
  const size_t rank = out.shape.size();
  chunks->assign(rank, 1);
  for (size_t d = 0; d < rank; ++d) {
    const uint64_t extent = std::max<uint64_t>(out.shape[d], 1);
    std::optional<uint64_t> named = Lookup(options.chunks, out.dims[d]);
    if (named) {
      (*chunks)[d] = std::min(*named, extent);
    } else if (!options.chunks.empty()) {
      (*chunks)[d] = extent;
    } else {
      (*chunks)[d] = std::min(out.default_chunks[d], extent);
    }
  }
  if (options.shards.empty()) {
    shard->reset();
    return Status::Ok();
  }
  std::vector<uint64_t> shape(rank);
  for (size_t d = 0; d < rank; ++d) {
    std::optional<uint64_t> named = Lookup(options.shards, out.dims[d]);
    if (!named) {
      shape[d] = (*chunks)[d];
      continue;
    }
    // A shard longer than the dimension only adds empty inner chunks: cap it.
    const uint64_t wanted = std::min(*named, RoundUp(out.shape[d], (*chunks)[d]));
    if (wanted % (*chunks)[d] != 0) {
      return InvalidArgumentError("--shard " + out.dims[d] + "=" + std::to_string(wanted) +
                                  " is not a multiple of the chunk extent " +
                                  std::to_string((*chunks)[d]) + " of array '" + out.path + "'");
    }
    shape[d] = wanted;
  }
  if (shape == *chunks) {
    shard->reset();  // one chunk per shard: sharding would only add an index
  } else {
    *shard = std::move(shape);
  }
  return Status::Ok();
}

// Grows the slab from one stored object along dimensions where a source chunk spans several
// objects, so each source chunk is decoded once, while the slab stays within `slab_budget`.
void ChooseSlab(OutputPlan* plan, size_t element_size, uint64_t slab_budget) {
  const size_t rank = plan->unit.size();
  plan->slab = plan->unit;
  auto try_grow = [&](size_t d, uint64_t extent) {
    std::vector<uint64_t> candidate = plan->slab;
    candidate[d] = std::min(extent, RoundUp(plan->source.shape[d], plan->unit[d]));
    if (BoxBytes(candidate, element_size) > slab_budget) return false;
    plan->slab = std::move(candidate);
    return true;
  };
  // A stacked array's channels: source chunks holding several levels feed neighbouring
  // channels, and a variable's levels start anywhere along the channel axis, so take all
  // channels at once when they fit (each level chunk is then decoded once per slab).
  if (plan->source.channel_dim >= 0) {
    const auto d = static_cast<size_t>(plan->source.channel_dim);
    if (plan->source.source_chunk_extent(d) > 1) try_grow(d, plan->source.shape[d]);
  }
  for (size_t d = 0; d < rank; ++d) {
    const uint64_t source_chunk = plan->source.source_chunk_extent(d);
    if (plan->slab[d] % source_chunk == 0) continue;
    const uint64_t gcd = std::gcd(plan->slab[d], source_chunk);
    if (std::optional<uint64_t> lcm = CheckedMul(plan->slab[d] / gcd, source_chunk)) {
      try_grow(d, *lcm);
    }
  }
  plan->slab_grid.resize(rank);
  for (size_t d = 0; d < rank; ++d) {
    plan->slab_grid[d] = CeilDiv(plan->source.shape[d], plan->slab[d]);
  }
  // Slabs are at least one element each and the array's elements fit in 64 bits: no overflow.
  plan->slab_count = CheckedProduct(plan->slab_grid).value_or(~uint64_t{0});
  plan->slab_bytes = BoxBytes(plan->slab, element_size);
}

// Sets each plan's run of slabs for this part. The job's slabs, array after array, are cut into
// part_count runs of about equal decoded bytes: slab s of an array belongs to the part whose byte
// range holds the slab's first byte. Cutting each array on its own instead gave every array's
// slabs to the same parts (an array of 4 slabs among 8 parts filled parts 1, 3, 5 and 7 only, and
// so did every other array of 4 slabs), leaving half the parts empty.
void AssignPartSlabs(const RechunkOptions& options, std::vector<OutputPlan>& plans) {
  uint64_t total = 0;
  for (const OutputPlan& plan : plans) {
    total = SaturatingAdd(total, SaturatingMul(plan.slab_count, plan.slab_bytes));
  }
  const uint64_t begin = PartBoundary(total, options.part_index, options.part_count);
  const uint64_t end = PartBoundary(total, options.part_index + 1, options.part_count);
  const bool last_part = options.part_index + 1 == options.part_count;
  uint64_t offset = 0;  // bytes of the arrays before this one
  for (OutputPlan& plan : plans) {
    const uint64_t slab_bytes = std::max<uint64_t>(plan.slab_bytes, 1);
    auto first_slab_at = [&](uint64_t boundary) {
      if (boundary <= offset) return uint64_t{0};
      return std::min(plan.slab_count, CeilDiv(boundary - offset, slab_bytes));
    };
    plan.part_begin = first_slab_at(begin);
    // The last part takes every slab to the end, even where the byte total saturated.
    plan.part_end = last_part ? plan.slab_count : first_slab_at(end);
    offset = SaturatingAdd(offset, SaturatingMul(plan.slab_count, plan.slab_bytes));
  }
}

}  // namespace

Result<std::vector<OutputPlan>> PlanOutputs(const RechunkOptions& options, SourceLayout& layout) {
  const uint64_t slab_budget = std::max<uint64_t>(options.memory_limit_bytes / 4, 1);
  std::vector<OutputPlan> plans;
  uint64_t next_slab = 0;
  for (auto& out : layout.outputs) {
    OutputPlan plan;
    plan.source = std::move(out);
    const OutputArraySource& src = plan.source;
    plan.spec.shape = src.shape;
    plan.spec.dtype = src.dtype;
    plan.spec.dims = src.dims;
    plan.spec.fill_value_json = src.fill_value_json;
    plan.spec.attributes_json = src.attributes_json;
    plan.spec.compressor = src.is_coordinate ? "zstd:3" : options.codec;
    if (src.is_coordinate) {
      plan.spec.chunks = src.shape;
      for (auto& extent : plan.spec.chunks) extent = std::max<uint64_t>(extent, 1);
    } else {
      ZS_RETURN_IF_ERROR_CTX(
          ChooseChunking(options, src, &plan.spec.chunks, &plan.spec.shard_shape),
          "planning array '" + src.path + "'");
    }
    plan.unit = plan.spec.shard_shape ? *plan.spec.shard_shape : plan.spec.chunks;
    ChooseSlab(&plan, DataTypeSize(src.dtype), slab_budget);
    // A slab holds at least one output stored object: one that no machine could hold is refused
    // here, before anything is written.
    ZS_RETURN_IF_ERROR_CTX(
        CheckAllocation("a slab of shape " + FormatIndex(plan.slab) + " (one output " +
                            (plan.spec.shard_shape ? "shard" : "chunk") +
                            " at least; choose smaller --chunks or --shard)",
                        plan.slab_bytes),
        "planning array '" + src.path + "'");
    plan.first_slab = next_slab;
    next_slab += plan.slab_count;
    plans.push_back(std::move(plan));
  }
  AssignPartSlabs(options, plans);
  return plans;
}

Status CheckSlabRecordsFit(const std::vector<OutputPlan>& plans) {
  uint64_t part_slabs = 0;
  for (const OutputPlan& plan : plans) {
    part_slabs = SaturatingAdd(part_slabs, plan.part_end - plan.part_begin);
  }
  ZS_RETURN_IF_ERROR_CTX(
      CheckAllocation("tracking the " + std::to_string(part_slabs) + " slabs of this run",
                      SaturatingMul(part_slabs, kBytesPerSlabRecord)),
      "planning the copy (larger --chunks or --shard make fewer slabs)");
  return Status::Ok();
}

void SlabRegion(const OutputPlan& plan, uint64_t index, std::vector<uint64_t>* start,
                std::vector<uint64_t>* shape) {
  const size_t rank = plan.slab.size();
  start->assign(rank, 0);
  shape->assign(rank, 0);
  for (size_t d = rank; d-- > 0;) {
    const uint64_t coord = index % plan.slab_grid[d];
    index /= plan.slab_grid[d];
    (*start)[d] = coord * plan.slab[d];
    (*shape)[d] = std::min(plan.slab[d], plan.source.shape[d] - (*start)[d]);
  }
}

json PlanJson(const RechunkOptions& options, const std::vector<OutputPlan>& plans) {
  json arrays = json::array();
  for (const auto& plan : plans) {
    json sources = json::array();
    for (const auto& channel : plan.source.channels) {
      sources.push_back({{"array", channel.array.url()},
                         {"out_dim", channel.out_dim},
                         {"offset", channel.offset}});
    }
    arrays.push_back({{"path", plan.source.path},
                      {"shape", plan.source.shape},
                      {"dims", plan.source.dims},
                      {"dtype", DataTypeName(plan.spec.dtype)},
                      {"chunks", plan.spec.chunks},
                      {"shard", plan.spec.shard_shape ? json(*plan.spec.shard_shape) : json()},
                      {"compressor", plan.spec.compressor},
                      {"slab", plan.slab},
                      {"sources", std::move(sources)}});
  }
  // The ref is part of the plan, so that a rerun at another ref is not taken for a resume.
  // "part_split" names how slabs are cut into parts: a part recorded under another cut is not
  // resumed as if it had written this one's slabs.
  json plan_json = {{"source", options.source_url},
                    {"part_count", options.part_count},
                    {"part_split", "bytes"},
                    {"arrays", std::move(arrays)}};
  if (!options.source_ref.empty()) plan_json["source_ref"] = options.source_ref;
  return plan_json;
}

}  // namespace zarrstream::tools

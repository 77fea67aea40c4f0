// Rechunk: plan output arrays and their slabs, then copy slab by slab (see rechunk.h).
#include "tools/rechunk.h"

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cstring>
#include <mutex>
#include <nlohmann/json.hpp>
#include <numeric>
#include <optional>
#include <set>
#include <thread>

#include "array/array_state.h"
#include "codec/compressor_spec.h"
#include "store/curl_transport.h"
#include "store/store_registry.h"
#include "tools/rechunk_sources.h"
#include "util/byte_buffer.h"
#include "util/checked_size.h"
#include "util/format.h"
#include "util/strided_copy.h"
#include "util/thread_pool.h"
#include "zarrstream/array.h"

namespace zarrstream::tools {
namespace {

using nlohmann::json;

// Where the parts of a job record their finished slabs, inside the destination.
constexpr std::string_view kStatePrefix = ".zarrstream-rechunk";

// In the name of the temporary file a local store writes an object to before renaming it into
// place ("<key>.zstmp.<pid>.<n>", FileStore::Put).
constexpr std::string_view kTemporaryObjectMarker = ".zstmp.";

// a rounded up to a multiple of b, saturating (a bound, compared against extents).
uint64_t RoundUp(uint64_t a, uint64_t b) { return SaturatingMul(CeilDiv(a, b), b); }
// The bytes of a box of `shape`, saturating: only compared against budgets and limits, and a
// saturated value is refused before anything of that size is allocated.
uint64_t BoxBytes(std::span<const uint64_t> shape, size_t element_size) {
  return CheckedProduct(shape, element_size).value_or(~uint64_t{0});
}

// What the run keeps per slab of its part: an entry of the work list and one of the set of
// finished slabs (a tree node), with their allocation overhead.
constexpr uint64_t kBytesPerSlabRecord = 64;

// The first slab of part `part` of `count` among `slabs` (part `count`: the end): slabs * part /
// count without the product, which may pass 2^64 (the remainder's product is below count^2).
uint64_t PartBoundary(uint64_t slabs, uint32_t part, uint32_t count) {
  return slabs / count * part + slabs % count * part / count;
}

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

std::optional<uint64_t> Lookup(const std::vector<std::pair<std::string, uint64_t>>& sizes,
                               const std::string& dim) {
  for (const auto& [name, size] : sizes) {
    if (name == dim) return size;
  }
  return std::nullopt;
}

// Checks that every named dimension exists in at least one output array.
Status CheckDimsExist(const std::vector<std::pair<std::string, uint64_t>>& sizes,
                      const std::vector<OutputArraySource>& outputs, const char* option) {
  for (const auto& [name, size] : sizes) {
    bool found = false;
    std::set<std::string> known;
    for (const auto& out : outputs) {
      for (const auto& dim : out.dims) {
        known.insert(dim);
        found = found || dim == name;
      }
    }
    if (!found) {
      std::string message = std::string(option) + " names dimension '" + name +
                            "', which no array to copy has (dimensions:";
      for (const auto& dim : known) message += " " + dim;
      message += ")";
      return InvalidArgumentError(message);
    }
  }
  return Status::Ok();
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

// The region of slab `index` of `plan`, clipped to the array.
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

// The plan as JSON: what a resumed part must agree on with the run that recorded progress.
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
  return {{"source", options.source_url},
          {"part_count", options.part_count},
          {"arrays", std::move(arrays)}};
}

// What the last part of a finished job leaves in place of the parts' records: the job's plan, so
// that a rerun with the same options (a requeued batch job) finds the work done.
std::string FinishedKey() { return std::string(kStatePrefix) + "/finished.json"; }

std::string StateKey(uint32_t part, uint32_t count) {
  std::string key(kStatePrefix);
  key += "/part-" + std::to_string(part) + "-of-" + std::to_string(count) + ".json";
  return key;
}

// A part's record of finished slabs (global slab indices), kept as sorted disjoint ranges.
class SlabProgress {
 public:
  void MarkDone(uint64_t slab) {
    std::lock_guard<std::mutex> lock(mutex_);
    done_.insert(slab);
  }
  bool IsDone(uint64_t slab) const {
    std::lock_guard<std::mutex> lock(mutex_);
    return done_.count(slab) != 0;
  }
  json RangesJson() const {
    std::lock_guard<std::mutex> lock(mutex_);
    json ranges = json::array();
    for (auto it = done_.begin(); it != done_.end();) {
      uint64_t begin = *it;
      uint64_t end = begin + 1;
      for (++it; it != done_.end() && *it == end; ++it) ++end;
      ranges.push_back({begin, end});
    }
    return ranges;
  }
  Status LoadRanges(const json& ranges) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!ranges.is_array()) return MetadataError("\"done\" is not a list");
    for (const auto& range : ranges) {
      if (!range.is_array() || range.size() != 2 || !range[0].is_number_unsigned() ||
          !range[1].is_number_unsigned() || range[0].get<uint64_t>() > range[1].get<uint64_t>()) {
        return MetadataError("\"done\" holds a malformed range " + range.dump());
      }
      for (uint64_t s = range[0].get<uint64_t>(); s < range[1].get<uint64_t>(); ++s)
        done_.insert(s);
    }
    return Status::Ok();
  }

 private:
  mutable std::mutex mutex_;
  std::set<uint64_t> done_;
};

// Reads the destination's progress record of one part; nullopt when there is none.
Result<std::optional<json>> ReadState(Store& store, uint32_t part, uint32_t count) {
  ZS_ASSIGN_OR_RETURN(std::optional<ByteBuffer> bytes, store.ReadIfExists(StateKey(part, count)));
  if (!bytes) return std::optional<json>();
  json state = json::parse(bytes->view(), nullptr, /*allow_exceptions=*/false);
  if (!state.is_object() || !state.contains("plan") || !state.contains("done")) {
    return MetadataError("the rechunk progress record " + store.url() + "/" +
                         StateKey(part, count) + " is malformed; remove it (or use --overwrite)");
  }
  return std::optional<json>(std::move(state));
}

// Checks what Array::Create would refuse of `spec`'s codec (an unknown compressor, a level out of
// range) without writing anything.
Status ValidateArraySpec(const ArraySpec& spec) {
  std::optional<std::span<const uint64_t>> inner;
  if (spec.shard_shape) inner = std::span<const uint64_t>(spec.chunks);
  return MakeCodecChainSpecs(spec.compressor, spec.dtype, inner).status();
}

// The plan of the finished job recorded in the destination; nullopt when there is none.
Result<std::optional<json>> ReadFinishedPlan(Store& store) {
  ZS_ASSIGN_OR_RETURN(std::optional<ByteBuffer> bytes, store.ReadIfExists(FinishedKey()));
  if (!bytes) return std::optional<json>();
  json finished = json::parse(bytes->view(), nullptr, /*allow_exceptions=*/false);
  if (!finished.is_object() || !finished.contains("plan")) {
    return MetadataError("the rechunk record " + store.url() + "/" + FinishedKey() +
                         " is malformed; remove it (or use --overwrite)");
  }
  return std::optional<json>(std::move(finished["plan"]));
}

// Removes the temporary objects of writes that never completed (a run killed while it wrote an
// object leaves one beside the object; the rerun writes the object again under another name).
// Only when the whole job is done: before that, another part may be writing one of them.
Status RemoveAbandonedTemporaries(Store& store) {
  Result<std::vector<KeyInfo>> keys = store.List("");
  if (keys.status().code() == ErrorCode::kUnsupported) return Status::Ok();
  ZS_RETURN_IF_ERROR_CTX(keys.status(), "listing the destination for abandoned temporary files");
  for (const KeyInfo& key : *keys) {
    const size_t slash = key.key.rfind('/');
    const std::string_view leaf =
        std::string_view(key.key).substr(slash == std::string::npos ? 0 : slash + 1);
    if (leaf.find(kTemporaryObjectMarker) != std::string_view::npos) {
      ZS_RETURN_IF_ERROR(store.Delete(key.key));
    }
  }
  return Status::Ok();
}

Status WriteState(Store& store, uint32_t part, uint32_t count, const json& plan,
                  const SlabProgress& progress, bool complete) {
  json state = {{"plan", plan}, {"done", progress.RangesJson()}, {"complete", complete}};
  std::string text = state.dump();
  return store.Put(StateKey(part, count),
                   {reinterpret_cast<const std::byte*>(text.data()), text.size()});
}

// One Array::Read of a slab: a region of one source array and where it lands in the slab buffer.
struct SourceRead {
  const ChannelSource* source;
  std::vector<uint64_t> start;
  std::vector<uint64_t> shape;
  std::vector<int64_t> byte_strides;  // in the slab buffer
  int64_t byte_offset = 0;            // of the region's first element in the slab buffer
};

// True when `next` is the level after `first`'s `run`-th of the same array: channels that read
// as one region along the level dimension.
bool ContinuesLevelRun(const ChannelSource& first, const ChannelSource& next, size_t level_dim,
                       uint64_t run) {
  if (next.array.url() != first.array.url() || next.out_dim != first.out_dim) return false;
  for (size_t j = 0; j < first.offset.size(); ++j) {
    const uint64_t expected = j == level_dim ? first.offset[j] + run : first.offset[j];
    if (next.offset[j] != expected) return false;
  }
  return true;
}

// The reads that fill slab [start, shape) of `plan` (C order, `element_size`-byte elements).
// Channels that are consecutive levels of one array become one read, so a source chunk holding
// several levels is decoded once per slab rather than once per level.
std::vector<SourceRead> PlanSourceReads(const OutputPlan& plan, std::span<const uint64_t> start,
                                        std::span<const uint64_t> shape) {
  const OutputArraySource& out = plan.source;
  const std::vector<int64_t> strides = CStrides(shape, DataTypeSize(plan.spec.dtype));
  const int channel_dim = out.channel_dim;
  const uint64_t channel_begin = channel_dim >= 0 ? start[channel_dim] : 0;
  const uint64_t channel_end = channel_dim >= 0 ? channel_begin + shape[channel_dim] : 1;
  std::vector<SourceRead> reads;
  for (uint64_t c = channel_begin; c < channel_end;) {
    const ChannelSource& source = out.channels[channel_dim >= 0 ? c : 0];
    const size_t source_rank = source.out_dim.size();
    SourceRead read{&source, std::vector<uint64_t>(source_rank), std::vector<uint64_t>(source_rank),
                    std::vector<int64_t>(source_rank), 0};
    if (channel_dim >= 0) {
      read.byte_offset = static_cast<int64_t>(c - channel_begin) * strides[channel_dim];
    }
    uint64_t run = 1;
    for (size_t j = 0; j < source_rank; ++j) {
      const int k = source.out_dim[j];
      if (k >= 0) {
        read.start[j] = source.offset[j] + start[k];
        read.shape[j] = shape[k];
        read.byte_strides[j] = strides[k];
        continue;
      }
      // The channel's level: extend over the following channels that are the next levels.
      while (c + run < channel_end && ContinuesLevelRun(source, out.channels[c + run], j, run)) {
        ++run;
      }
      read.start[j] = source.offset[j];
      read.shape[j] = run;
      read.byte_strides[j] = strides[channel_dim];
    }
    reads.push_back(std::move(read));
    c += run;
  }
  return reads;
}

// Reads slab [start, shape) of `plan` from its sources into `buffer` (C order).
Status ReadSlab(const OutputPlan& plan, std::span<const uint64_t> start,
                std::span<const uint64_t> shape, std::byte* buffer) {
  for (const SourceRead& read : PlanSourceReads(plan, start, shape)) {
    ZS_RETURN_IF_ERROR(read.source->array.Read(read.start, read.shape, buffer + read.byte_offset,
                                               read.byte_strides));
  }
  return Status::Ok();
}

// Source bytes a read of slab [start, shape) decodes: the whole source chunks it touches
// (the part inside the array, so edge chunks do not count their padding).
uint64_t SourceBytesTouched(const OutputPlan& plan, std::span<const uint64_t> start,
                            std::span<const uint64_t> shape) {
  uint64_t total = 0;
  for (const SourceRead& read : PlanSourceReads(plan, start, shape)) {
    const Array& array = read.source->array;
    const std::vector<uint64_t> chunk = array.chunks();
    uint64_t elements = 1;
    for (size_t j = 0; j < chunk.size(); ++j) {
      const uint64_t first = read.start[j] / chunk[j] * chunk[j];
      const uint64_t last = RoundUp(read.start[j] + read.shape[j], chunk[j]);
      elements *= std::min(last, array.shape()[j]) - first;
    }
    total += elements * DataTypeSize(array.dtype());
  }
  return total;
}

// Creates (or, for a job in progress, checks) the destination's arrays.
Status PrepareDestination(const RechunkOptions& options, const SourceLayout& layout,
                          std::vector<OutputPlan>& plans, std::vector<Array>* arrays) {
  CreateOptions create;
  create.overwrite = options.overwrite;
  OpenOptions open;
  open.num_threads = options.threads;
  std::optional<Group> group;
  if (layout.is_group) {
    auto created = Group::Create(options.dest_url, layout.group_attributes_json, create, open);
    if (created.ok()) {
      group = std::move(*created);
    } else {
      auto existing = Group::Open(options.dest_url, open);
      if (!existing.ok()) return created.status();
      group = std::move(*existing);
    }
  }
  for (auto& plan : plans) {
    auto created = group ? group->CreateArray(plan.source.path, plan.spec, create)
                         : Array::Create(options.dest_url, plan.spec, create, open);
    if (created.ok()) {
      arrays->push_back(std::move(*created));
      continue;
    }
    // Another part of the job created it first: use it if it is the array this plan writes.
    auto existing =
        group ? group->OpenArray(plan.source.path) : Array::Open(options.dest_url, open);
    if (!existing.ok()) return created.status();
    if (existing->shape() != plan.spec.shape || existing->dtype() != plan.spec.dtype ||
        existing->chunks() != plan.spec.chunks ||
        existing->shard_shape() != plan.spec.shard_shape || existing->dims() != plan.spec.dims) {
      return created.status();
    }
    arrays->push_back(std::move(*existing));
  }
  return Status::Ok();
}

// Fills what the options leave empty from the --gpu-friendly preset, for the dimensions the
// outputs have.
Status ApplyGpuFriendlyPreset(const SourceLayout& layout, RechunkOptions* options) {
  std::set<std::string> dims;
  for (const auto& out : layout.outputs) dims.insert(out.dims.begin(), out.dims.end());
  auto present = [&](const char* spec) -> Result<std::vector<std::pair<std::string, uint64_t>>> {
    ZS_ASSIGN_OR_RETURN(auto sizes, ParseDimSizes(spec));
    std::erase_if(sizes, [&](const auto& entry) { return !dims.count(entry.first); });
    return sizes;
  };
  if (options->chunks.empty()) {
    ZS_ASSIGN_OR_RETURN(options->chunks, present(kGpuFriendlyChunks));
  }
  if (options->shards.empty()) {
    ZS_ASSIGN_OR_RETURN(options->shards, present(kGpuFriendlyShards));
  }
  if (options->codec.empty()) options->codec = kGpuFriendlyCodec;
  return Status::Ok();
}

Result<RechunkReport> RunPlan(const RechunkOptions& options, SourceLayout layout) {
  const size_t threads = options.threads ? options.threads : UsableCores();
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
    plan.part_begin = PartBoundary(plan.slab_count, options.part_index, options.part_count);
    plan.part_end = PartBoundary(plan.slab_count, options.part_index + 1, options.part_count);
    plans.push_back(std::move(plan));
  }
  // The run keeps a record of each of its slabs (the work list, the finished set): a declared
  // shape with more slabs than memory can track is refused before any is made.
  uint64_t part_slabs = 0;
  for (const OutputPlan& plan : plans) {
    part_slabs = SaturatingAdd(part_slabs, plan.part_end - plan.part_begin);
  }
  ZS_RETURN_IF_ERROR_CTX(
      CheckAllocation("tracking the " + std::to_string(part_slabs) + " slabs of this run",
                      SaturatingMul(part_slabs, kBytesPerSlabRecord)),
      "planning the copy (larger --chunks or --shard make fewer slabs)");

  ZS_ASSIGN_OR_RETURN(std::shared_ptr<Store> dest_store, OpenStore(options.dest_url));
  const json plan_json = PlanJson(options, plans);
  SlabProgress progress;
  RechunkReport report;
  if (options.overwrite) {
    for (uint32_t p = 0; p < options.part_count; ++p) {
      ZS_RETURN_IF_ERROR(dest_store->Delete(StateKey(p, options.part_count)));
    }
    ZS_RETURN_IF_ERROR(dest_store->Delete(FinishedKey()));
  } else {
    // A finished job rerun with the same options (a requeued batch job) has nothing to do.
    ZS_ASSIGN_OR_RETURN(std::optional<json> finished, ReadFinishedPlan(*dest_store));
    if (finished) {
      if (*finished != plan_json) {
        return InvalidArgumentError(options.dest_url +
                                    " holds a finished rechunk with other options; use "
                                    "--overwrite to replace it");
      }
      report.arrays = plans.size();
      for (const OutputPlan& plan : plans) report.slabs_total += plan.part_end - plan.part_begin;
      report.slabs_resumed = report.slabs_total;
      report.job_complete = true;
      return report;
    }
    ZS_ASSIGN_OR_RETURN(std::optional<json> state,
                        ReadState(*dest_store, options.part_index, options.part_count));
    bool joining = state.has_value();
    if (state) {
      if ((*state)["plan"] != plan_json) {
        return InvalidArgumentError(
            options.dest_url +
            " holds an unfinished rechunk with other options; rerun with the same options to "
            "resume it, or use --overwrite to start again");
      }
      ZS_RETURN_IF_ERROR_CTX(progress.LoadRanges((*state)["done"]),
                             "reading the progress record in " + options.dest_url);
    }
    for (uint32_t p = 0; p < options.part_count && !joining; ++p) {
      ZS_ASSIGN_OR_RETURN(std::optional<json> other, ReadState(*dest_store, p, options.part_count));
      joining = other && (*other)["plan"] == plan_json;
    }
    if (!joining) {
      ZS_ASSIGN_OR_RETURN(std::vector<KeyInfo> existing, dest_store->List(""));
      if (!existing.empty()) {
        return InvalidArgumentError(options.dest_url +
                                    " is not empty and holds no unfinished rechunk with these "
                                    "options; use --overwrite to replace it");
      }
    }
  }
  // What can be refused without writing is refused before the job is recorded: a record of a job
  // that could never start would block the corrected command.
  for (const OutputPlan& plan : plans) {
    ZS_RETURN_IF_ERROR_CTX(ValidateArraySpec(plan.spec),
                           "planning array '" + plan.source.path + "'");
  }
  // Record the job before creating anything, so a rerun after an interruption at any point
  // recognises the destination as this job's.
  ZS_RETURN_IF_ERROR(
      WriteState(*dest_store, options.part_index, options.part_count, plan_json, progress, false));
  std::vector<Array> arrays;
  ZS_RETURN_IF_ERROR(PrepareDestination(options, layout, plans, &arrays));

  // This part's slabs, in order, as (plan index, slab index).
  std::vector<std::pair<size_t, uint64_t>> work;
  uint64_t total_bytes = 0;
  uint64_t max_slab_bytes = 1;
  for (size_t a = 0; a < plans.size(); ++a) {
    for (uint64_t s = plans[a].part_begin; s < plans[a].part_end; ++s) {
      ++report.slabs_total;
      std::vector<uint64_t> start, shape;
      SlabRegion(plans[a], s, &start, &shape);
      const uint64_t bytes = BoxBytes(shape, DataTypeSize(plans[a].spec.dtype));
      if (progress.IsDone(plans[a].first_slab + s)) {
        ++report.slabs_resumed;
        continue;
      }
      work.emplace_back(a, s);
      total_bytes += bytes;
      max_slab_bytes = std::max(max_slab_bytes, plans[a].slab_bytes);
    }
  }
  const size_t in_flight = static_cast<size_t>(std::clamp<uint64_t>(
      options.memory_limit_bytes / max_slab_bytes, 1, std::max<size_t>(threads, 1)));
  report.arrays = plans.size();
  // Besides the slabs, each thread that decodes or encodes keeps scratch for one stored object
  // (its encoded and decoded bytes): a source chunk when reading, an output chunk or shard when
  // writing. Reads and writes each run on `threads` workers plus the calling thread.
  uint64_t max_source_chunk = 0;
  uint64_t max_unit = 0;
  for (const auto& plan : plans) {
    for (const auto& channel : plan.source.channels) {
      max_source_chunk = std::max(
          max_source_chunk, BoxBytes(channel.array.chunks(), DataTypeSize(channel.array.dtype())));
    }
    max_unit = std::max(max_unit, BoxBytes(plan.unit, DataTypeSize(plan.spec.dtype)));
  }
  report.memory_bound_bytes =
      SaturatingAdd(SaturatingMul(in_flight, max_slab_bytes),
                    SaturatingMul((threads + 1) * 2, SaturatingAdd(max_source_chunk, max_unit)));

  std::mutex report_mutex;
  uint64_t done_bytes = 0;
  auto last_save = std::chrono::steady_clock::now();
  std::atomic<size_t> not_started{0};  // slabs skipped because of an interrupt
  ThreadPool* pool = arrays.empty() ? nullptr : arrays.front().state().pool.get();
  Status status = ParallelFor(
      pool, work.size(),
      [&](size_t i) -> Status {
        if (options.interrupt != nullptr && options.interrupt->load(std::memory_order_relaxed)) {
          not_started.fetch_add(1, std::memory_order_relaxed);
          return Status::Ok();  // the rerun does it
        }
        const auto [a, s] = work[i];
        const OutputPlan& plan = plans[a];
        std::vector<uint64_t> start, shape;
        SlabRegion(plan, s, &start, &shape);
        const uint64_t bytes = BoxBytes(shape, DataTypeSize(plan.spec.dtype));
        const std::string array = plan.source.path.empty()
                                      ? "the array at " + RedactUrl(options.dest_url)
                                      : "array '" + plan.source.path + "'";
        std::string where = "slab " + FormatIndex(start) + " of " + array + " (" +
                            std::to_string(s) + " of " + std::to_string(plan.slab_count) + ")";
        ByteBuffer buffer;
        ZS_RETURN_IF_ERROR_CTX(AllocateBytes(&buffer, bytes, "a slab buffer"), "reading " + where);
        ZS_RETURN_IF_ERROR_CTX(ReadSlab(plan, start, shape, buffer.data()), "reading " + where);
        ZS_RETURN_IF_ERROR_CTX(arrays[a].Write(start, shape, buffer.data()), "writing " + where);
        progress.MarkDone(plan.first_slab + s);
        std::lock_guard<std::mutex> lock(report_mutex);
        ++report.slabs_written;
        report.output_bytes += bytes;
        report.source_bytes_decoded += SourceBytesTouched(plan, start, shape);
        done_bytes += bytes;
        const auto now = std::chrono::steady_clock::now();
        if (now - last_save > std::chrono::milliseconds(250)) {
          last_save = now;
          ZS_RETURN_IF_ERROR(WriteState(*dest_store, options.part_index, options.part_count,
                                        plan_json, progress, false));
        }
        if (options.on_progress) options.on_progress(done_bytes, total_bytes);
        return Status::Ok();
      },
      in_flight);
  report.interrupted = not_started.load() > 0;
  // Save what finished even when a slab failed, so the rerun resumes after it. When that fails
  // too (a full disk fails both), the slab's error is the one to report; the record of an
  // earlier save stays in place (records are replaced atomically), so less is skipped on rerun.
  Status saved = WriteState(*dest_store, options.part_index, options.part_count, plan_json,
                            progress, status.ok() && !report.interrupted);
  if (!status.ok()) {
    if (saved.ok()) return status;
    return Status(status.code(), status.message() + " (saving the progress record failed too: " +
                                     saved.message() + ")");
  }
  ZS_RETURN_IF_ERROR(saved);
  if (report.interrupted) return report;

  // The last part to finish consolidates the metadata and removes the progress records.
  for (uint32_t p = 0; p < options.part_count; ++p) {
    ZS_ASSIGN_OR_RETURN(std::optional<json> state, ReadState(*dest_store, p, options.part_count));
    if (!state || !(*state)["complete"].is_boolean() || !(*state)["complete"].get<bool>()) {
      return report;
    }
  }
  if (layout.is_group) {
    ZS_ASSIGN_OR_RETURN(Group group, Group::Open(options.dest_url));
    ZS_RETURN_IF_ERROR(group.ConsolidateMetadata());
  }
  ZS_RETURN_IF_ERROR(RemoveAbandonedTemporaries(*dest_store));
  // The finished record first: a job whose part records are gone is then still known as done.
  const std::string finished = json{{"plan", plan_json}}.dump();
  ZS_RETURN_IF_ERROR(dest_store->Put(
      FinishedKey(), std::as_bytes(std::span<const char>(finished.data(), finished.size()))));
  for (uint32_t p = 0; p < options.part_count; ++p) {
    ZS_RETURN_IF_ERROR(dest_store->Delete(StateKey(p, options.part_count)));
  }
  report.job_complete = true;
  return report;
}

}  // namespace

Result<std::vector<std::pair<std::string, uint64_t>>> ParseDimSizes(std::string_view spec) {
  std::vector<std::pair<std::string, uint64_t>> sizes;
  while (!spec.empty()) {
    const size_t comma = spec.find(',');
    std::string_view item = spec.substr(0, comma);
    spec = comma == std::string_view::npos ? std::string_view() : spec.substr(comma + 1);
    const size_t eq = item.find('=');
    std::string_view name = item.substr(0, eq);
    std::string_view value =
        eq == std::string_view::npos ? std::string_view() : item.substr(eq + 1);
    uint64_t size = kWholeDimension;
    if (value != "all") {
      auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), size);
      if (name.empty() || value.empty() || ec != std::errc() ||
          end != value.data() + value.size() || size == 0) {
        return InvalidArgumentError("expected dim=N with N a positive integer or 'all', got '" +
                                    std::string(item) + "'");
      }
    }
    if (name.empty())
      return InvalidArgumentError("expected dim=N, got '" + std::string(item) + "'");
    for (const auto& [known, unused] : sizes) {
      if (known == name) return InvalidArgumentError("dimension '" + known + "' is given twice");
    }
    sizes.emplace_back(std::string(name), size);
  }
  return sizes;
}

Result<RechunkReport> Rechunk(const RechunkOptions& options) {
  if (options.part_count == 0 || options.part_index >= options.part_count) {
    return InvalidArgumentError("--part " + std::to_string(options.part_index) + "/" +
                                std::to_string(options.part_count) + " is not a part of the job");
  }
  if (options.overwrite && options.part_count > 1) {
    return InvalidArgumentError(
        "--overwrite cannot be combined with --part: parts would delete each other's output; "
        "clear the destination before starting the parts");
  }
  ZS_ASSIGN_OR_RETURN(SourceLayout layout, ResolveSources(options));
  ZS_RETURN_IF_ERROR(CheckDimsExist(options.chunks, layout.outputs, "--chunks"));
  ZS_RETURN_IF_ERROR(CheckDimsExist(options.shards, layout.outputs, "--shard"));
  RechunkOptions resolved = options;
  if (resolved.gpu_friendly) {
    ZS_RETURN_IF_ERROR(ApplyGpuFriendlyPreset(layout, &resolved));
  }
  if (resolved.codec.empty()) resolved.codec = "zstd:3";
  return RunPlan(resolved, std::move(layout));
}

}  // namespace zarrstream::tools

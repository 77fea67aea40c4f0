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
#include "codec/codec_registry.h"
#include "codec/compressor_spec.h"
#include "dataset/channel_spec.h"
#include "store/curl_transport.h"
#include "store/store_registry.h"
#include "tools/extended_array_copy.h"
#include "tools/rechunk_job_record.h"
#include "tools/rechunk_plan.h"
#include "tools/rechunk_sources.h"
#include "util/byte_buffer.h"
#include "util/checked_size.h"
#include "util/fork_safety.h"
#include "util/format.h"
#include "util/strided_copy.h"
#include "util/thread_pool.h"
#include "zarrstream/array.h"

namespace zarrstream::tools {
namespace {

using nlohmann::json;

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

// Checks what Array::Create would refuse of `spec`'s codec (an unknown compressor, a level out of
// range) without writing anything.
Status ValidateArraySpec(const ArraySpec& spec) {
  std::optional<std::span<const uint64_t>> inner;
  if (spec.shard_shape) inner = std::span<const uint64_t>(spec.chunks);
  return MakeCodecChainSpecs(spec.compressor, spec.dtype, inner).status();
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

// `attributes_json` with the unfinished-job marker (kUnfinishedRechunkAttribute) added.
std::string MarkedUnfinished(std::string_view attributes_json) {
  json attributes = json::parse(attributes_json, nullptr, /*allow_exceptions=*/false);
  if (!attributes.is_object()) attributes = json::object();
  attributes[std::string(kUnfinishedRechunkAttribute)] = std::string(kUnfinishedRechunkValue);
  return attributes.dump();
}

// Removes the unfinished-job marker from the attributes of the finished job's destination (a job
// begun by a version that set none has nothing to remove).
Status ClearUnfinishedMark(const RechunkOptions& options, const SourceLayout& layout) {
  const auto without = [](const json& attributes) -> std::optional<std::string> {
    if (!IsUnfinishedRechunk(attributes)) return std::nullopt;
    json kept = attributes;
    kept.erase(std::string(kUnfinishedRechunkAttribute));
    return kept.dump();
  };
  if (layout.is_group) {
    ZS_ASSIGN_OR_RETURN(Group group, Group::Open(options.dest_url));
    const std::optional<std::string> attributes = without(group.state().metadata.attributes);
    return attributes ? group.SetAttributes(*attributes) : Status::Ok();
  }
  ZS_ASSIGN_OR_RETURN(Array array, Array::Open(options.dest_url));
  const std::optional<std::string> attributes = without(array.state().metadata.attributes);
  return attributes ? array.SetAttributes(*attributes) : Status::Ok();
}

// Creates (or, for a job in progress, checks) the destination's arrays, the group (or the lone
// array) marked unfinished until the job finishes (ClearUnfinishedMark).
Status PrepareDestination(const RechunkOptions& options, const SourceLayout& layout,
                          Store& dest_store, std::vector<OutputPlan>& plans,
                          std::vector<Array>* arrays) {
  CreateOptions create;
  create.overwrite = options.overwrite;
  OpenOptions open;
  open.num_threads = options.threads;
  std::optional<Group> group;
  if (layout.is_group) {
    auto created = Group::Create(options.dest_url, MarkedUnfinished(layout.group_attributes_json),
                                 create, open);
    if (created.ok()) {
      group = std::move(*created);
    } else {
      auto existing = Group::Open(options.dest_url, open);
      if (!existing.ok()) return created.status();
      group = std::move(*existing);
    }
  }
  // Arrays written whole by every part alike (the same bytes), before the metadata is
  // consolidated: stacked channels' label coordinates and the text and time arrays.
  for (const OutputPlan& plan : plans) {
    const OutputArraySource& out = plan.source;
    if (out.channel_dim < 0 || !group) continue;
    ZS_RETURN_IF_ERROR(WriteLabelArray(dest_store, out.dims[static_cast<size_t>(out.channel_dim)],
                                       out.channel_names));
  }
  for (const ExtendedArrayCopy& copy : layout.extended_copies) {
    ZS_RETURN_IF_ERROR(WriteExtendedArray(dest_store, copy));
  }
  for (auto& plan : plans) {
    ArraySpec spec = plan.spec;
    if (!group) spec.attributes_json = MarkedUnfinished(spec.attributes_json);
    auto created = group ? group->CreateArray(plan.source.path, spec, create)
                         : Array::Create(options.dest_url, spec, create, open);
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

// What the destination holds of this job before the run starts.
enum class DestinationState {
  kStartOrResume,  // empty, or holding this job unfinished (the progress was loaded)
  kFinished,       // this job, finished: nothing to do
};

// Clears the destination's records for --overwrite; otherwise checks that the destination is
// empty or holds this very job (same plan), and loads this part's progress when resuming.
Result<DestinationState> ClaimDestination(const RechunkOptions& options, Store& dest_store,
                                          const json& plan_json, SlabProgress* progress) {
  if (options.overwrite) {
    for (uint32_t p = 0; p < options.part_count; ++p) {
      ZS_RETURN_IF_ERROR(dest_store.Delete(StateKey(p, options.part_count)));
    }
    ZS_RETURN_IF_ERROR(dest_store.Delete(FinishedKey()));
    return DestinationState::kStartOrResume;
  }
  // A finished job rerun with the same options (a requeued batch job) has nothing to do.
  ZS_ASSIGN_OR_RETURN(std::optional<json> finished, ReadFinishedPlan(dest_store));
  if (finished) {
    if (*finished != plan_json) {
      return InvalidArgumentError(options.dest_url +
                                  " holds a finished rechunk with other options; use "
                                  "--overwrite to replace it");
    }
    return DestinationState::kFinished;
  }
  ZS_ASSIGN_OR_RETURN(std::optional<json> state,
                      ReadState(dest_store, options.part_index, options.part_count));
  bool joining = state.has_value();
  if (state) {
    if ((*state)["plan"] != plan_json) {
      return InvalidArgumentError(
          options.dest_url +
          " holds an unfinished rechunk with other options; rerun with the same options to "
          "resume it, or use --overwrite to start again");
    }
    ZS_RETURN_IF_ERROR_CTX(progress->LoadRanges((*state)["done"]),
                           "reading the progress record in " + options.dest_url);
  }
  for (uint32_t p = 0; p < options.part_count && !joining; ++p) {
    ZS_ASSIGN_OR_RETURN(std::optional<json> other, ReadState(dest_store, p, options.part_count));
    joining = other && (*other)["plan"] == plan_json;
  }
  if (!joining) {
    ZS_ASSIGN_OR_RETURN(std::vector<KeyInfo> existing, dest_store.List(""));
    if (!existing.empty()) {
      return InvalidArgumentError(options.dest_url +
                                  " is not empty and holds no unfinished rechunk with these "
                                  "options; use --overwrite to replace it");
    }
  }
  return DestinationState::kStartOrResume;
}

// This part's slabs still to copy, in order.
struct PartWork {
  std::vector<std::pair<size_t, uint64_t>> slabs;  // (plan index, slab index)
  uint64_t total_bytes = 0;
  uint64_t max_slab_bytes = 1;
};

// Lists the slabs of this part that `progress` does not hold, counting all of them and the
// resumed ones in `report`.
PartWork ListPartWork(const std::vector<OutputPlan>& plans, const SlabProgress& progress,
                      RechunkReport* report) {
  PartWork work;
  for (size_t a = 0; a < plans.size(); ++a) {
    for (uint64_t s = plans[a].part_begin; s < plans[a].part_end; ++s) {
      ++report->slabs_total;
      std::vector<uint64_t> start, shape;
      SlabRegion(plans[a], s, &start, &shape);
      const uint64_t bytes = BoxBytes(shape, DataTypeSize(plans[a].spec.dtype));
      if (progress.IsDone(plans[a].first_slab + s)) {
        ++report->slabs_resumed;
        continue;
      }
      work.slabs.emplace_back(a, s);
      work.total_bytes += bytes;
      work.max_slab_bytes = std::max(work.max_slab_bytes, plans[a].slab_bytes);
    }
  }
  return work;
}

// The most memory the copy holds: `in_flight` slabs, and besides them, for each thread that
// decodes or encodes, scratch for one stored object (its encoded and decoded bytes): a source
// chunk when reading, an output chunk or shard when writing. Reads and writes each run on
// `threads` workers plus the calling thread.
uint64_t CopyMemoryBound(const std::vector<OutputPlan>& plans, size_t threads, size_t in_flight,
                         uint64_t max_slab_bytes) {
  uint64_t max_source_chunk = 0;
  uint64_t max_unit = 0;
  for (const auto& plan : plans) {
    for (const auto& channel : plan.source.channels) {
      max_source_chunk = std::max(
          max_source_chunk, BoxBytes(channel.array.chunks(), DataTypeSize(channel.array.dtype())));
    }
    max_unit = std::max(max_unit, BoxBytes(plan.unit, DataTypeSize(plan.spec.dtype)));
  }
  return SaturatingAdd(SaturatingMul(in_flight, max_slab_bytes),
                       SaturatingMul((threads + 1) * 2, SaturatingAdd(max_source_chunk, max_unit)));
}

// Slab buffers kept from one slab to the next. A fresh buffer per slab costs a fresh mapping and a
// page fault per page of every slab (glibc maps large blocks; with MALLOC_TRIM_THRESHOLD_ set, as
// Dask's workers have it, every block over 128 KiB): most of a copy's page faults. At most
// `in_flight` slabs are copied at once, so at most that many buffers exist, each at most the
// largest slab: the slab term of CopyMemoryBound.
//
// The set is the process's (ProcessSlabBuffers), and a run with RechunkOptions::keep_slab_buffers
// leaves its buffers there for the next run: an engine worker runs part after part, and each part's
// first slabs would otherwise fault in their buffers again (on the 1-degree store a slab is 54 MB:
// 8 parts run one after another in a process made 182,000 page faults, 84,000 keeping the buffers).
class SlabBuffers {
 public:
  // A buffer lent to one slab copy, given back when the lease ends (on errors too).
  class Lease {
   public:
    Lease(SlabBuffers& owner, uint64_t bytes) : owner_(owner), buffer_(owner.Take(bytes)) {}
    ~Lease() { owner_.Give(std::move(buffer_)); }
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    ByteBuffer* buffer() { return &buffer_; }

   private:
    SlabBuffers& owner_;
    ByteBuffer buffer_;
  };

  // Frees all but `count` of the buffers not lent now, the largest kept.
  void KeepAtMost(size_t count) {
    std::lock_guard<ForkSafeMutex> lock(mutex_);
    if (free_.size() <= count) return;
    std::sort(free_.begin(), free_.end(),
              [](const ByteBuffer& a, const ByteBuffer& b) { return a.capacity() > b.capacity(); });
    free_.resize(count);
  }

 private:
  // The smallest free buffer that holds `bytes`, else the largest (grown by AllocateBytes).
  ByteBuffer Take(uint64_t bytes) {
    std::lock_guard<ForkSafeMutex> lock(mutex_);
    if (free_.empty()) return ByteBuffer();  // AllocateBytes sizes it
    const auto by_capacity = [](const ByteBuffer& a, const ByteBuffer& b) {
      return a.capacity() < b.capacity();
    };
    auto best = free_.end();
    for (auto it = free_.begin(); it != free_.end(); ++it) {
      if (it->capacity() >= bytes && (best == free_.end() || by_capacity(*it, *best))) best = it;
    }
    if (best == free_.end()) best = std::max_element(free_.begin(), free_.end(), by_capacity);
    ByteBuffer buffer = std::move(*best);
    free_.erase(best);
    return buffer;
  }
  void Give(ByteBuffer buffer) {
    buffer.Clear();  // growing it for a larger slab then copies nothing
    std::lock_guard<ForkSafeMutex> lock(mutex_);
    free_.push_back(std::move(buffer));
  }

  ForkSafeMutex mutex_;  // process-wide state: a run's thread may hold it when the process forks
  std::vector<ByteBuffer> free_;
};

// The slab buffers of every run in the process. A run ends by freeing those not lent, but for its
// in-flight count of the largest with keep_slab_buffers (at most its memory budget).
SlabBuffers& ProcessSlabBuffers() {
  // Never destroyed: a run on another thread may hold a lease when the process exits.
  static SlabBuffers* buffers = new SlabBuffers();
  return *buffers;
}

// The copy of this part's slabs: what each slab copy needs and shares with the others.
struct SlabCopier {
  const RechunkOptions& options;
  const std::vector<OutputPlan>& plans;
  std::vector<Array>& arrays;
  Store& dest_store;
  const json& plan_json;
  SlabProgress& progress;
  RechunkReport& report;  // guarded by report_mutex
  const uint64_t total_bytes;
  SlabBuffers& buffers;

  std::mutex report_mutex;
  uint64_t done_bytes;                              // guarded by report_mutex
  std::chrono::steady_clock::time_point last_save;  // guarded by report_mutex

  // Reads slab `s` of plan `a` from its sources and writes it to the destination, then records it
  // (saving the progress record at most every 250 ms).
  Status CopySlab(size_t a, uint64_t s) {
    const OutputPlan& plan = plans[a];
    std::vector<uint64_t> start, shape;
    SlabRegion(plan, s, &start, &shape);
    const uint64_t bytes = BoxBytes(shape, DataTypeSize(plan.spec.dtype));
    const std::string array = plan.source.path.empty()
                                  ? "the array at " + RedactUrl(options.dest_url)
                                  : "array '" + plan.source.path + "'";
    std::string where = "slab " + FormatIndex(start) + " of " + array + " (" + std::to_string(s) +
                        " of " + std::to_string(plan.slab_count) + ")";
    SlabBuffers::Lease lease(buffers, bytes);
    ByteBuffer& buffer = *lease.buffer();
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
      ZS_RETURN_IF_ERROR(WriteState(dest_store, options.part_index, options.part_count, plan_json,
                                    progress, false));
    }
    if (options.on_progress) options.on_progress(done_bytes, total_bytes);
    return Status::Ok();
  }
};

// The parts whose record does not say they completed this job (an absent record, one of other
// options, one in progress).
Result<std::vector<uint32_t>> UnfinishedParts(const RechunkOptions& options, Store& dest_store,
                                              const json& plan_json) {
  std::vector<uint32_t> unfinished;
  for (uint32_t p = 0; p < options.part_count; ++p) {
    ZS_ASSIGN_OR_RETURN(std::optional<json> state, ReadState(dest_store, p, options.part_count));
    if (!state || (*state)["plan"] != plan_json || !(*state)["complete"].is_boolean() ||
        !(*state)["complete"].get<bool>()) {
      unfinished.push_back(p);
    }
  }
  return unfinished;
}

// When every part's record says complete, consolidates the metadata and replaces the progress
// records with the finished record; returns whether it did (the job is then complete). Run by the
// last part to finish, and by FinishRechunk; two runs at once write the same.
Result<bool> FinishJobIfAllPartsDone(const RechunkOptions& options, const SourceLayout& layout,
                                     Store& dest_store, const json& plan_json) {
  ZS_ASSIGN_OR_RETURN(std::vector<uint32_t> unfinished,
                      UnfinishedParts(options, dest_store, plan_json));
  if (!unfinished.empty()) return false;
  if (layout.is_group) {
    ZS_ASSIGN_OR_RETURN(Group group, Group::Open(options.dest_url));
    ZS_RETURN_IF_ERROR(group.ConsolidateMetadata());
  }
  // After the consolidation, which rewrites the group's document with the attributes it opened
  // with.
  ZS_RETURN_IF_ERROR(ClearUnfinishedMark(options, layout));
  ZS_RETURN_IF_ERROR(RemoveAbandonedTemporaries(dest_store));
  // The finished record first: a job whose part records are gone is then still known as done.
  const std::string finished = json{{"plan", plan_json}}.dump();
  ZS_RETURN_IF_ERROR(dest_store.Put(
      FinishedKey(), std::as_bytes(std::span<const char>(finished.data(), finished.size()))));
  for (uint32_t p = 0; p < options.part_count; ++p) {
    ZS_RETURN_IF_ERROR(dest_store.Delete(StateKey(p, options.part_count)));
  }
  return true;
}

Result<RechunkReport> RunPlan(const RechunkOptions& options, SourceLayout layout) {
  const size_t threads = options.threads ? options.threads : UsableCores();
  ZS_ASSIGN_OR_RETURN(std::vector<OutputPlan> plans, PlanOutputs(options, layout));
  ZS_RETURN_IF_ERROR(CheckSlabRecordsFit(plans));

  ZS_ASSIGN_OR_RETURN(std::shared_ptr<Store> dest_store, OpenStore(options.dest_url));
  const json plan_json = PlanJson(options, plans);
  SlabProgress progress;
  RechunkReport report;
  report.arrays = plans.size() + layout.extended_copies.size();
  report.skipped_arrays = layout.skipped;
  ZS_ASSIGN_OR_RETURN(DestinationState destination,
                      ClaimDestination(options, *dest_store, plan_json, &progress));
  if (destination == DestinationState::kFinished) {
    for (const OutputPlan& plan : plans) report.slabs_total += plan.part_end - plan.part_begin;
    report.slabs_resumed = report.slabs_total;
    report.job_complete = true;
    return report;
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
  ZS_RETURN_IF_ERROR(PrepareDestination(options, layout, *dest_store, plans, &arrays));

  const PartWork work = ListPartWork(plans, progress, &report);
  const size_t in_flight = static_cast<size_t>(
      std::clamp<uint64_t>(options.memory_limit_bytes / std::max<uint64_t>(work.max_slab_bytes, 1),
                           1, std::max<size_t>(threads, 1)));
  report.memory_bound_bytes = CopyMemoryBound(plans, threads, in_flight, work.max_slab_bytes);

  SlabBuffers& slab_buffers = ProcessSlabBuffers();
  SlabCopier copier{options,
                    plans,
                    arrays,
                    *dest_store,
                    plan_json,
                    progress,
                    report,
                    work.total_bytes,
                    slab_buffers,
                    /*report_mutex=*/{},
                    /*done_bytes=*/0,
                    /*last_save=*/std::chrono::steady_clock::now()};
  std::atomic<size_t> not_started{0};  // slabs skipped because of an interrupt
  ThreadPool* pool = arrays.empty() ? nullptr : arrays.front().state().pool.get();
  Status status = ParallelFor(
      pool, work.slabs.size(),
      [&](size_t i) -> Status {
        if (options.interrupt != nullptr && options.interrupt->load(std::memory_order_relaxed)) {
          not_started.fetch_add(1, std::memory_order_relaxed);
          return Status::Ok();  // the rerun does it
        }
        return copier.CopySlab(work.slabs[i].first, work.slabs[i].second);
      },
      in_flight);
  report.interrupted = not_started.load() > 0;
  slab_buffers.KeepAtMost(options.keep_slab_buffers ? in_flight : 0);
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
  ZS_ASSIGN_OR_RETURN(report.job_complete,
                      FinishJobIfAllPartsDone(options, layout, *dest_store, plan_json));
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

namespace {

// The options with the preset and the default codec applied, and the source's layout.
Result<std::pair<RechunkOptions, SourceLayout>> Resolve(const RechunkOptions& options) {
  if (options.part_count == 0 || options.part_index >= options.part_count) {
    return InvalidArgumentError("--part " + std::to_string(options.part_index) + "/" +
                                std::to_string(options.part_count) + " is not a part of the job");
  }
  // Starting, resuming and finishing a part read every part's progress record: a count no job
  // needs would have each run read millions of them.
  if (options.part_count > kMaxRechunkParts) {
    return InvalidArgumentError("--part " + std::to_string(options.part_index) + "/" +
                                std::to_string(options.part_count) + ": a job has at most " +
                                std::to_string(kMaxRechunkParts) + " parts");
  }
  ZS_ASSIGN_OR_RETURN(SourceLayout layout, ResolveSources(options));
  ZS_RETURN_IF_ERROR(CheckDimsExist(options.chunks, layout.outputs, "--chunks"));
  ZS_RETURN_IF_ERROR(CheckDimsExist(options.shards, layout.outputs, "--shard"));
  RechunkOptions resolved = options;
  if (resolved.gpu_friendly) {
    ZS_RETURN_IF_ERROR(ApplyGpuFriendlyPreset(layout, &resolved));
  }
  if (resolved.codec.empty()) resolved.codec = "zstd:3";
  return std::pair{std::move(resolved), std::move(layout)};
}

}  // namespace

Result<RechunkReport> Rechunk(const RechunkOptions& options) {
  if (options.overwrite && options.part_count > 1) {
    return InvalidArgumentError(
        "--overwrite cannot be combined with --part: parts would delete each other's output; "
        "clear the destination before starting the parts");
  }
  ZS_ASSIGN_OR_RETURN(auto resolved, Resolve(options));
  return RunPlan(resolved.first, std::move(resolved.second));
}

Result<RechunkReport> FinishRechunk(const RechunkOptions& options) {
  ZS_ASSIGN_OR_RETURN(auto resolved, Resolve(options));
  const RechunkOptions& resolved_options = resolved.first;
  ZS_ASSIGN_OR_RETURN(std::vector<OutputPlan> plans,
                      PlanOutputs(resolved_options, resolved.second));
  ZS_ASSIGN_OR_RETURN(std::shared_ptr<Store> dest_store, OpenStore(options.dest_url));
  const json plan_json = PlanJson(resolved_options, plans);
  RechunkReport report;
  report.arrays = plans.size() + resolved.second.extended_copies.size();
  report.skipped_arrays = resolved.second.skipped;
  ZS_ASSIGN_OR_RETURN(std::optional<json> finished, ReadFinishedPlan(*dest_store));
  if (finished) {
    if (*finished != plan_json) {
      return InvalidArgumentError(options.dest_url +
                                  " holds a finished rechunk with other options");
    }
    report.job_complete = true;
    return report;
  }
  ZS_ASSIGN_OR_RETURN(std::vector<uint32_t> unfinished,
                      UnfinishedParts(resolved_options, *dest_store, plan_json));
  if (!unfinished.empty()) {
    return InvalidArgumentError("cannot finish the rechunk into " + options.dest_url +
                                ": part(s) " + Join(unfinished) + " of " +
                                std::to_string(options.part_count) +
                                " have not completed; run them with the same options first");
  }
  ZS_ASSIGN_OR_RETURN(
      report.job_complete,
      FinishJobIfAllPartsDone(resolved_options, resolved.second, *dest_store, plan_json));
  return report;
}

}  // namespace zarrstream::tools

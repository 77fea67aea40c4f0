#include "tools/store_advice.h"

#include <algorithm>

#include "array/array_state.h"
#include "dataset/channel_spec.h"
#include "gpu/gpu_decoder.h"
#include "store/curl_transport.h"
#include "util/format.h"
#include "zarrstream/array.h"
#include "zarrstream/loader.h"

namespace zarrstream::tools {

namespace {

// Chunks smaller than this cost more in per-request and per-call overhead than in bytes; larger
// than this, one chunk is much of a batch's memory and latency.
constexpr uint64_t kSmallChunkBytes = uint64_t{256} << 10;
constexpr uint64_t kLargeChunkBytes = uint64_t{64} << 20;

struct ArrayFacts {
  std::string name;
  Array array;
};

// What a random-time-step read of one array costs; `sampled` false for arrays without a time
// dimension or of one dimension (coordinates, static fields), which the rest leaves unset.
struct ArrayLayout {
  bool sampled = false;
  size_t time_dim = 0;
  std::optional<size_t> level_dim;
  uint64_t chunk_bytes = 0;  // decoded
  uint64_t field_bytes = 0;  // one step of one level
  uint64_t steps = 1;        // time steps per chunk
  std::optional<uint64_t> levels;
  bool sharded = false;
  GpuDecodePlan decode;
};

ArrayLayout LayoutOf(const Array& a) {
  ArrayLayout layout;
  const std::vector<std::string>& dims = a.dims();
  std::optional<size_t> time_dim;
  for (size_t d = 0; d < dims.size(); ++d) {
    if (IsTimeDimension(dims[d]) && !time_dim) time_dim = d;
    if (IsLevelDimension(dims[d]) && !layout.level_dim) layout.level_dim = d;
  }
  if (!time_dim || a.shape().size() < 2) return layout;
  layout.sampled = true;
  layout.time_dim = *time_dim;
  const std::vector<uint64_t> chunks = a.chunks();
  layout.chunk_bytes = DataTypeSize(a.dtype());
  layout.field_bytes = DataTypeSize(a.dtype());
  for (size_t d = 0; d < chunks.size(); ++d) {
    layout.chunk_bytes *= chunks[d];
    if (d != *time_dim && (!layout.level_dim || d != *layout.level_dim))
      layout.field_bytes *= a.shape()[d];
  }
  layout.steps = chunks[*time_dim];
  if (layout.level_dim) layout.levels = chunks[*layout.level_dim];
  layout.sharded = a.shard_shape().has_value();
  layout.decode = PlanGpuDecode(*a.state().chain);
  return layout;
}

// The kinds of finding: each array's and the store's gathered ones test these alike.
bool ManySteps(const ArrayLayout& l) { return l.sampled && l.steps > 1; }
bool ManyLevels(const ArrayLayout& l) { return l.sampled && l.levels && *l.levels > 1; }
// Small chunks that cut a field into pieces: a sample takes several requests. A chunk of one whole
// field (the --gpu-friendly layout) is as large as it usefully gets, however small the field.
bool SmallChunks(const ArrayLayout& l) {
  return l.sampled && l.chunk_bytes < kSmallChunkBytes && l.chunk_bytes < l.field_bytes &&
         !l.sharded;
}
bool LargeChunks(const ArrayLayout& l) { return l.sampled && l.chunk_bytes > kLargeChunkBytes; }
bool CpuDecoded(const ArrayLayout& l) { return l.sampled && !l.decode.gpu(); }

nlohmann::json Finding(const char* severity, std::vector<std::string> arrays, std::string message) {
  return {{"severity", severity}, {"arrays", std::move(arrays)}, {"message", std::move(message)}};
}

// One finding per kind, naming the arrays it concerns (message: the kind's, with the worst value).
struct Kind {
  const char* severity;
  std::vector<std::string> arrays;
  uint64_t worst = 0;
};

// "era5.zarr" → "era5-train.zarr": where the suggested rechunk writes.
std::string DestinationFor(std::string_view url) {
  std::string base(url);
  while (!base.empty() && base.back() == '/') base.pop_back();
  const size_t dot = base.rfind(".zarr");
  if (dot != std::string::npos && dot + 5 == base.size())
    return base.substr(0, dot) + "-train.zarr";
  return base + "-train.zarr";
}

// What the survey of a store's time-dependent arrays found: each kind of finding with the
// arrays it concerns, and what the suggested rechunk needs.
struct Survey {
  nlohmann::json listed = nlohmann::json::array();  // one entry per array with a time dimension
  Kind steps_kind{"warning", {}, 1}, levels_kind{"info", {}, 1}, small_kind{"warning", {}, ~0ULL},
      large_kind{"warning", {}, 0}, cpu_kind{"info", {}, 0};
  uint64_t field_bytes = 0;  // one step of one level, the smallest a chunk can usefully be
  std::vector<std::string> cpu_reasons;  // why the CPU decodes arrays' chunks, each reason once
};

// Opens the group or array at `url` (`shown`: without credentials) and its arrays, recording in
// `report` what it is; `open_requests`: the reads opening it takes.
Result<std::vector<ArrayFacts>> OpenArrays(std::string_view url, const std::string& shown,
                                           nlohmann::json* report, uint64_t* open_requests) {
  std::vector<ArrayFacts> arrays;
  if (Result<Group> group = Group::Open(url); group.ok()) {
    (*report)["kind"] = "group";
    (*report)["consolidated"] = group->consolidated();
    // Consolidated: the group's metadata document holds every array's. Otherwise one read per
    // array (and a listing to find them).
    *open_requests = group->consolidated() ? 1 : 2 + group->array_names().size();
    nlohmann::json skipped = nlohmann::json::array();
    for (const std::string& name : group->array_names()) {
      Result<Array> array = group->OpenArray(name);
      if (!array.ok() && array.status().code() == ErrorCode::kUnsupported) {
        // A member of a type this reader does not know says nothing of how the rest reads.
        skipped.push_back({{"name", name}, {"reason", array.status().message()}});
        continue;
      }
      ZS_RETURN_IF_ERROR(array.status());
      // Strings and datetime64 are coordinates and labels, read on the CPU: no training layout.
      if (!array->is_numeric()) continue;
      arrays.push_back({name, std::move(array).value()});
    }
    (*report)["skipped_arrays"] = std::move(skipped);
  } else if (Result<Array> array = Array::Open(url); array.ok()) {
    (*report)["kind"] = "array";
    (*report)["consolidated"] = nullptr;
    *open_requests = 1;
    arrays.push_back({"", std::move(*array)});
  } else {
    return std::move(group).status().WithContext("doctor: opening " + shown);
  }
  return arrays;
}

// Lists each array with a time dimension (coordinates and static fields are skipped) and notes
// which kinds of finding concern it.
Survey SurveyArrays(const std::vector<ArrayFacts>& arrays) {
  Survey survey;
  for (const ArrayFacts& facts : arrays) {
    const Array& a = facts.array;
    const ArrayLayout layout = LayoutOf(a);
    if (!layout.sampled) continue;  // coordinates and static fields
    const std::vector<std::string>& dims = a.dims();
    survey.field_bytes = std::max(survey.field_bytes, layout.field_bytes);
    survey.listed.push_back({{"name", facts.name},
                             {"shape", a.shape()},
                             {"dims", dims},
                             {"chunks", a.chunks()},
                             {"shard_shape", a.shard_shape() ? nlohmann::json(*a.shard_shape())
                                                             : nlohmann::json(nullptr)},
                             {"dtype", std::string(DataTypeName(a.dtype()))},
                             {"codecs", nlohmann::json::parse(a.codecs_json())},
                             {"chunk_bytes", layout.chunk_bytes},
                             {"time_steps_per_chunk", layout.steps},
                             {"levels_per_chunk", layout.levels ? nlohmann::json(*layout.levels)
                                                                : nlohmann::json(nullptr)},
                             {"gpu_decodable", layout.decode.gpu()},
                             {"gpu_decode", layout.decode.description}});
    auto note = [&](Kind& kind, bool when, uint64_t value, bool larger_is_worse) {
      if (!when) return;
      kind.arrays.push_back(facts.name);
      kind.worst = larger_is_worse ? std::max(kind.worst, value) : std::min(kind.worst, value);
    };
    note(survey.steps_kind, ManySteps(layout), layout.steps, true);
    note(survey.levels_kind, ManyLevels(layout), layout.levels.value_or(1), true);
    note(survey.small_kind, SmallChunks(layout), layout.chunk_bytes, false);
    note(survey.large_kind, LargeChunks(layout), layout.chunk_bytes, true);
    note(survey.cpu_kind, CpuDecoded(layout), 0, true);
    if (CpuDecoded(layout) && std::ranges::find(survey.cpu_reasons, layout.decode.description) ==
                                  survey.cpu_reasons.end()) {
      survey.cpu_reasons.push_back(layout.decode.description);
    }
  }
  return survey;
}

// The findings of `survey`, and of the store's metadata (`report`: what OpenArrays recorded),
// worded for the reader.
nlohmann::json Findings(const Survey& survey, bool gpu, const nlohmann::json& report,
                        uint64_t open_requests) {
  nlohmann::json findings = nlohmann::json::array();
  if (!survey.steps_kind.arrays.empty()) {
    findings.push_back(Finding(
        "warning", survey.steps_kind.arrays,
        "up to " + std::to_string(survey.steps_kind.worst) +
            " time steps per chunk: a sample of one step decodes them all (read amplification "
            "up to that with an exact shuffle; block shuffle recovers part of it)"));
  }
  if (!survey.levels_kind.arrays.empty()) {
    findings.push_back(Finding("info", survey.levels_kind.arrays,
                               "up to " + std::to_string(survey.levels_kind.worst) +
                                   " levels per chunk: selecting some levels decodes them all"));
  }
  if (!survey.small_kind.arrays.empty()) {
    findings.push_back(Finding("warning", survey.small_kind.arrays,
                               "unsharded chunks as small as " +
                                   FormatBytes(static_cast<double>(survey.small_kind.worst)) +
                                   " cut fields into pieces: per-request and per-chunk overhead "
                                   "dominates; chunks of whole fields read faster"));
  }
  if (!survey.large_kind.arrays.empty()) {
    findings.push_back(Finding("warning", survey.large_kind.arrays,
                               "chunks as large as " +
                                   FormatBytes(static_cast<double>(survey.large_kind.worst)) +
                                   ": one chunk is a large share of a batch's memory and latency"));
  }
  if (!survey.cpu_kind.arrays.empty()) {
    findings.push_back(
        Finding(gpu ? "warning" : "info", survey.cpu_kind.arrays,
                "chunks the GPU path leaves to the CPU (" + Join(survey.cpu_reasons, "; ") + ")"));
  }
  if (report["kind"] == "group" && !report["consolidated"].get<bool>()) {
    findings.push_back(Finding("warning", {},
                               "no consolidated metadata: opening takes " +
                                   std::to_string(open_requests) +
                                   " requests (one per array); consolidate it (rechunk writes "
                                   "consolidated metadata)"));
  }
  if (survey.listed.empty()) {
    findings.push_back(
        Finding("warning", {}, "no array with a time dimension: nothing for the loader to sample"));
  }
  return findings;
}

// The rechunk that fixes what was found, as a command line; null when nothing needs it. Always
// --gpu-friendly (one step and level per chunk, levels sharded together, blosc-lz4): the layout
// the README recommends, which both the CPU and nvCOMP decode fastest (docs/rechunk.md). Levels
// per chunk alone call for it only where a field is big enough to be a chunk of its own; chunks
// the GPU path leaves to the CPU only where there is a GPU.
nlohmann::json RechunkCommand(const Survey& survey, bool gpu, const std::string& shown) {
  const bool needs_rechunk =
      !survey.listed.empty() &&
      (!survey.steps_kind.arrays.empty() || !survey.small_kind.arrays.empty() ||
       !survey.large_kind.arrays.empty() || (gpu && !survey.cpu_kind.arrays.empty()) ||
       (!survey.levels_kind.arrays.empty() && survey.field_bytes >= kSmallChunkBytes));
  if (!needs_rechunk) return nullptr;
  return Join({"zarrstream", "rechunk", shown, DestinationFor(shown), "--gpu-friendly"}, " ");
}

}  // namespace

nlohmann::json ArrayFindings(const Array& array, bool gpu) {
  const ArrayLayout l = LayoutOf(array);
  nlohmann::json findings = nlohmann::json::array();
  auto add = [&](const char* severity, std::string message) {
    findings.push_back({{"severity", severity}, {"message", std::move(message)}});
  };
  if (!l.sampled) return findings;
  const std::string time_name = array.dims()[l.time_dim];
  if (ManySteps(l)) {
    add("warning", "each chunk holds " + std::to_string(l.steps) + " steps of '" + time_name +
                       "': a sample of one step decodes them all");
  }
  if (ManyLevels(l)) {
    add("info", "each chunk holds " + std::to_string(*l.levels) + " levels of '" +
                    array.dims()[*l.level_dim] + "': selecting some levels decodes them all");
  }
  if (SmallChunks(l)) {
    add("warning", "unsharded chunks of " + FormatBytes(static_cast<double>(l.chunk_bytes)) +
                       " cut each field into pieces: per-request and per-chunk overhead "
                       "dominates; chunks of whole fields read faster");
  }
  if (LargeChunks(l)) {
    add("warning", "chunks of " + FormatBytes(static_cast<double>(l.chunk_bytes)) +
                       ": one chunk is a large share of a batch's memory and latency");
  }
  if (CpuDecoded(l)) {
    add(gpu ? "warning" : "info", "the GPU path cannot decode these chunks (" +
                                      l.decode.description + "): the CPU decodes them");
  }
  return findings;
}

Result<nlohmann::json> StoreAdvice(std::string_view url) {
  nlohmann::json report;
  // The report is printed and shared: the URL without a user:password it may carry.
  const std::string shown = RedactUrl(url);
  report["url"] = shown;
  uint64_t open_requests = 0;
  ZS_ASSIGN_OR_RETURN(std::vector<ArrayFacts> arrays,
                      OpenArrays(url, shown, &report, &open_requests));
  report["open_requests"] = open_requests;
  const bool gpu = GpuBatchesUnavailableReason().empty();
  report["gpu"] = gpu;
  const Survey survey = SurveyArrays(arrays);
  report["arrays"] = survey.listed;
  report["findings"] = Findings(survey, gpu, report, open_requests);
  report["rechunk_command"] = RechunkCommand(survey, gpu, shown);
  return report;
}

}  // namespace zarrstream::tools

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
  std::optional<size_t> time_dim, level_dim;
};

nlohmann::json Finding(const char* severity, std::vector<std::string> arrays, std::string message) {
  return {{"severity", severity}, {"arrays", std::move(arrays)}, {"message", std::move(message)}};
}

// One finding per kind, naming the arrays it concerns (message: the kind's, with the worst value).
struct Kind {
  const char* severity;
  std::vector<std::string> arrays;
  uint64_t worst = 0;
};

std::string Join(const std::vector<std::string>& items, const char* separator) {
  std::string out;
  for (const std::string& item : items) out += (out.empty() ? "" : separator) + item;
  return out;
}

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
  std::string time_name = "time", level_name;
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
      arrays.push_back({name, std::move(array).value(), std::nullopt, std::nullopt});
    }
    (*report)["skipped_arrays"] = std::move(skipped);
  } else if (Result<Array> array = Array::Open(url); array.ok()) {
    (*report)["kind"] = "array";
    (*report)["consolidated"] = nullptr;
    *open_requests = 1;
    arrays.push_back({"", std::move(*array), std::nullopt, std::nullopt});
  } else {
    return std::move(group).status().WithContext("doctor: opening " + shown);
  }
  return arrays;
}

// Lists each array with a time dimension (coordinates and static fields are skipped) and notes
// which kinds of finding concern it.
Survey SurveyArrays(std::vector<ArrayFacts>& arrays) {
  Survey survey;
  for (ArrayFacts& facts : arrays) {
    const Array& a = facts.array;
    const std::vector<std::string>& dims = a.dims();
    for (size_t d = 0; d < dims.size(); ++d) {
      if (IsTimeDimension(dims[d]) && !facts.time_dim) facts.time_dim = d;
      if (IsLevelDimension(dims[d]) && !facts.level_dim) facts.level_dim = d;
    }
    if (!facts.time_dim || a.shape().size() < 2) continue;  // coordinates and static fields
    survey.time_name = dims[*facts.time_dim];
    if (facts.level_dim) survey.level_name = dims[*facts.level_dim];
    const std::vector<uint64_t> chunks = a.chunks();
    uint64_t chunk_bytes = DataTypeSize(a.dtype());
    uint64_t field = DataTypeSize(a.dtype());
    for (size_t d = 0; d < chunks.size(); ++d) {
      chunk_bytes *= chunks[d];
      if (d != *facts.time_dim && (!facts.level_dim || d != *facts.level_dim))
        field *= a.shape()[d];
    }
    survey.field_bytes = std::max(survey.field_bytes, field);
    const uint64_t steps = chunks[*facts.time_dim];
    const std::optional<uint64_t> levels =
        facts.level_dim ? std::optional<uint64_t>(chunks[*facts.level_dim]) : std::nullopt;
    const GpuDecodePlan decode = PlanGpuDecode(*a.state().chain);
    survey.listed.push_back(
        {{"name", facts.name},
         {"shape", a.shape()},
         {"dims", dims},
         {"chunks", chunks},
         {"shard_shape",
          a.shard_shape() ? nlohmann::json(*a.shard_shape()) : nlohmann::json(nullptr)},
         {"dtype", std::string(DataTypeName(a.dtype()))},
         {"codecs", nlohmann::json::parse(a.codecs_json())},
         {"chunk_bytes", chunk_bytes},
         {"time_steps_per_chunk", steps},
         {"levels_per_chunk", levels ? nlohmann::json(*levels) : nlohmann::json(nullptr)},
         {"gpu_decodable", decode.gpu()},
         {"gpu_decode", decode.description}});
    auto note = [&](Kind& kind, bool when, uint64_t value, bool larger_is_worse) {
      if (!when) return;
      kind.arrays.push_back(facts.name);
      kind.worst = larger_is_worse ? std::max(kind.worst, value) : std::min(kind.worst, value);
    };
    note(survey.steps_kind, steps > 1, steps, true);
    note(survey.levels_kind, levels && *levels > 1, levels.value_or(1), true);
    // A chunk smaller than one field cannot grow without more steps per chunk: shards fix that.
    note(survey.small_kind, chunk_bytes < kSmallChunkBytes && !a.shard_shape(), chunk_bytes, false);
    note(survey.large_kind, chunk_bytes > kLargeChunkBytes, chunk_bytes, true);
    note(survey.cpu_kind, !decode.gpu(), 0, true);
    if (!decode.gpu() &&
        std::ranges::find(survey.cpu_reasons, decode.description) == survey.cpu_reasons.end()) {
      survey.cpu_reasons.push_back(decode.description);
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
                                   ": per-request and per-chunk overhead dominates; shards of "
                                   "several steps read faster"));
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

// The rechunk that fixes what was found, as a command line; null when nothing needs it.
nlohmann::json RechunkCommand(const Survey& survey, bool gpu, const std::string& shown) {
  // The rechunk that fixes what was found: one step per chunk; one level per chunk when a field is
  // big enough to be a chunk, else shards of several steps; on a GPU machine --gpu-friendly (one
  // step and level per chunk, levels sharded together, blosc-lz4: measured fastest there).
  const bool needs_rechunk =
      !survey.listed.empty() &&
      (!survey.steps_kind.arrays.empty() || !survey.small_kind.arrays.empty() ||
       !survey.large_kind.arrays.empty() || (gpu && !survey.cpu_kind.arrays.empty()) ||
       (!survey.levels_kind.arrays.empty() && survey.field_bytes >= kSmallChunkBytes));
  if (needs_rechunk) {
    std::vector<std::string> command = {"zarrstream", "rechunk", shown, DestinationFor(shown)};
    if (gpu) {
      command.push_back("--gpu-friendly");
    } else if (survey.field_bytes >= kSmallChunkBytes || survey.level_name.empty()) {
      command.push_back("--chunks");
      command.push_back(survey.time_name + "=1" +
                        (survey.level_name.empty() ? "" : "," + survey.level_name + "=1"));
      command.push_back("--codec");
      command.push_back("zstd:3");
    } else {
      const uint64_t steps_per_shard = std::clamp<uint64_t>(
          (uint64_t{4} << 20) / std::max<uint64_t>(survey.field_bytes, 1), 2, 64);
      command.push_back("--chunks");
      command.push_back(survey.time_name + "=1");
      command.push_back("--shard");
      command.push_back(survey.time_name + "=" + std::to_string(steps_per_shard));
      command.push_back("--codec");
      command.push_back("zstd:3");
    }
    return Join(command, " ");
  }
  return nullptr;
}

}  // namespace

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

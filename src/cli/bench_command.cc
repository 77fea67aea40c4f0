#include "cli/bench_command.h"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "array/array_state.h"
#include "dataset/channel_spec.h"
#include "gpu/gpu_decoder.h"
#include "store/curl_transport.h"
#include "util/format.h"
#include "zarrstream/array.h"
#include "zarrstream/loader.h"

namespace zarrstream::cli {

namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// Splits "a,b" items (and repeated options) into one list.
std::vector<std::string> SplitCommas(const std::vector<std::string>& items) {
  std::vector<std::string> out;
  for (const std::string& item : items) {
    size_t begin = 0;
    while (begin <= item.size()) {
      const size_t comma = std::min(item.find(',', begin), item.size());
      if (comma > begin) out.push_back(item.substr(begin, comma - begin));
      begin = comma + 1;
    }
  }
  return out;
}

// Variable specs: commas separate specs, except inside a level list ("t@500,850,z@500").
std::vector<std::string> SplitSpecs(const std::vector<std::string>& items) {
  std::vector<std::string> out;
  for (const std::string& part : SplitCommas(items)) {
    const bool is_level = !out.empty() && out.back().find('@') != std::string::npos &&
                          std::all_of(part.begin(), part.end(), [](char c) {
                            return (c >= '0' && c <= '9') || c == '.' || c == '-';
                          });
    if (is_level) {
      out.back() += "," + part;
    } else {
      out.push_back(part);
    }
  }
  return out;
}

Result<uint64_t> ParseCount(const std::string& text, const std::string& what) {
  uint64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size()) {
    return InvalidArgumentError(what + ": '" + text + "' is not a non-negative integer");
  }
  return value;
}

// "time=2,latitude=64" (or repeated) → {(time, 2), (latitude, 64)}.
Result<std::vector<std::pair<std::string, uint64_t>>> ParseDimCounts(
    const std::vector<std::string>& items, const std::string& option) {
  std::vector<std::pair<std::string, uint64_t>> out;
  for (const std::string& item : SplitCommas(items)) {
    const size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0) {
      std::string message = option;
      message.append(": expected DIM=N, got '").append(item).append("'");
      return InvalidArgumentError(message);
    }
    std::string what = option;
    what.append(" ").append(item);
    ZS_ASSIGN_OR_RETURN(uint64_t n, ParseCount(item.substr(eq + 1), what));
    out.emplace_back(item.substr(0, eq), n);
  }
  return out;
}

Result<LoaderOptions> MakeLoaderOptions(const BenchCommandOptions& o) {
  LoaderOptions options;
  options.variables = SplitSpecs(o.variables);
  options.forcings = SplitSpecs(o.forcings);
  ZS_ASSIGN_OR_RETURN(options.sample, ParseDimCounts(o.sample, "--sample"));
  ZS_ASSIGN_OR_RETURN(options.stride, ParseDimCounts(o.stride, "--stride"));
  if (!o.target_offset.empty()) {
    const size_t eq = o.target_offset.find('=');
    if (eq == std::string::npos || eq == 0) {
      return InvalidArgumentError("--target-offset: expected DIM=K[,K...], got '" +
                                  o.target_offset + "'");
    }
    options.target_dim = o.target_offset.substr(0, eq);
    for (const std::string& k : SplitCommas({o.target_offset.substr(eq + 1)})) {
      ZS_ASSIGN_OR_RETURN(uint64_t offset, ParseCount(k, "--target-offset"));
      options.target_offsets.push_back(offset);
    }
  }
  ZS_ASSIGN_OR_RETURN(options.select, ParseLabelSelections(o.select));
  options.frequency = o.frequency;
  for (const std::string& label : SplitCommas(o.missing_dates)) {
    if (label == "detect") {
      options.detect_missing_dates = true;
    } else {
      options.missing_dates.push_back(label);
    }
  }
  if (!o.periodic.empty()) {
    options.periodic = SplitCommas(o.periodic);
    std::erase(*options.periodic, "none");
  }
  Result<PatchPadding> padding = ParsePatchPadding(o.patch_padding);
  if (!padding.ok()) return InvalidArgumentError("--patch-padding " + padding.status().message());
  options.patch_padding = *padding;
  Result<EnsembleMode> ensemble = ParseEnsembleMode(o.ensemble);
  if (!ensemble.ok()) return InvalidArgumentError("--ensemble " + ensemble.status().message());
  options.ensemble = *ensemble;
  options.ensemble_dim = o.ensemble_dim;
  options.batch_size = o.batch_size;
  ZS_ASSIGN_OR_RETURN(options.shuffle, ParseShuffleMode(o.shuffle));
  options.seed = o.seed;
  ZS_ASSIGN_OR_RETURN(options.dtype, ParseBatchDType(o.dtype));
  options.normalize = o.normalize;
  options.target_tendencies = o.target_normalize == "tendencies";
  options.decode_cf = o.decode_cf;
  options.prefetch = o.prefetch;
  options.num_threads = o.threads;
  options.cache_bytes = o.cache_mb << 20;
  options.ref = o.ref;
  if (o.device != "cpu" && o.device != "cuda") {
    return InvalidArgumentError("--device " + o.device + ": expected cpu or cuda");
  }
  // cpu: host batches, not pinned (nothing copies them); cuda: GPU batches (loader.h).
  options.device = o.device == "cuda" ? BatchDevice::kCuda : BatchDevice::kCpu;
  options.pin_memory = PinMemory::kOff;
  options.gpu_wave_bytes = o.gpu_wave_mb << 20;
  if (o.cpu_decode && options.device != BatchDevice::kCuda) {
    return InvalidArgumentError(
        "--cpu-decode: needs --device cuda (batches on the CPU are always "
        "decoded there)");
  }
  if (!o.cpu_decode_share.empty()) {
    Result<DecodePlacement> decode = ParseCpuDecodeShare(o.cpu_decode_share);
    if (!decode.ok()) {
      return InvalidArgumentError("--cpu-decode-share " + decode.status().message());
    }
    options.decode = *decode;
  }
  options.decode.gpu = !o.cpu_decode;
  if (!o.cpu_decode_share.empty() && options.device != BatchDevice::kCuda) {
    return InvalidArgumentError("--cpu-decode-share: needs --device cuda");
  }
  options.record_timeline = !o.trace.empty();
  return options;
}

std::string Bar(uint64_t count, uint64_t max, size_t width) {
  const size_t n = max == 0 ? 0 : static_cast<size_t>((count * width + max - 1) / max);
  return std::string(n, '#');
}

// "[2^b, 2^(b+1)) us" as a readable range.
std::string BucketLabel(size_t b) {
  auto format = [](double us) {
    char text[32];
    if (us < 1e3) {
      std::snprintf(text, sizeof(text), "%.0f us", us);
    } else if (us < 1e6) {
      std::snprintf(text, sizeof(text), "%.3g ms", us / 1e3);
    } else {
      std::snprintf(text, sizeof(text), "%.3g s", us / 1e6);
    }
    return std::string(text);
  };
  if (b == 0) return "< " + format(2);
  return format(static_cast<double>(uint64_t{1} << b)) + " - " +
         format(static_cast<double>(uint64_t{1} << (b + 1)));
}

// Chrome's trace event format: one complete ("X") event per span, microseconds, one row per thread.
Status WriteTrace(const std::vector<TimelineSpan>& spans, const std::string& path) {
  nlohmann::json events = nlohmann::json::array();
  for (const TimelineSpan& span : spans) {
    events.push_back({{"name", span.stage},
                      {"cat", "loader"},
                      {"ph", "X"},
                      {"ts", span.start_seconds * 1e6},
                      {"dur", (span.end_seconds - span.start_seconds) * 1e6},
                      {"pid", 1},
                      {"tid", span.thread},
                      {"args", {{"epoch", span.epoch}, {"batch", span.batch}}}});
  }
  std::ofstream out(path);
  out << nlohmann::json{{"traceEvents", events}, {"displayTimeUnit", "ms"}}.dump() << "\n";
  if (!out) return InvalidArgumentError("cannot write the trace to " + path);
  return Status::Ok();
}

// The Python next to this executable (a pip install puts both in one bin/), else python3 on PATH.
std::string PythonInterpreter() {
  std::error_code error;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", error);
  if (!error) {
    for (const char* name : {"python3", "python"}) {
      const std::filesystem::path candidate = self.parent_path() / name;
      if (::access(candidate.c_str(), X_OK) == 0) return candidate.string();
    }
  }
  return "python3";
}

// `python -m zarrstream.plot JSON PNG`, run directly (no shell), waited for.
Status RunPlot(const std::string& json_path, const std::string& png_path) {
  const std::string python = PythonInterpreter();
  std::vector<std::string> args = {python, "-m", "zarrstream.plot", json_path, png_path};
  std::vector<char*> argv;
  argv.reserve(args.size() + 1);
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  if (const int e = posix_spawnp(&pid, python.c_str(), nullptr, nullptr, argv.data(), environ);
      e != 0) {
    return InvalidArgumentError("cannot run " + python +
                                " (plots are drawn by Python with "
                                "matplotlib): " +
                                std::strerror(e));
  }
  int wstatus = 0;
  if (waitpid(pid, &wstatus, 0) < 0 || !WIFEXITED(wstatus) || WEXITSTATUS(wstatus) != 0) {
    return InvalidArgumentError(python + " -m zarrstream.plot " + json_path + " " + png_path +
                                " failed (its message is above)");
  }
  return Status::Ok();
}

// Where the chunks of the benchmarked arrays decode on the GPU path (PlanGpuDecode's answer, as
// `inspect` and `doctor` give it): the arrays --variables and --forcings name, else every array of
// the store with more than one dimension (the coordinates are left out).
nlohmann::json GpuDecodePlans(const std::string& url, const LoaderOptions& options) {
  nlohmann::json plans = nlohmann::json::array();
  auto add = [&plans](const std::string& name, const Array& array) {
    const GpuDecodePlan plan = PlanGpuDecode(*array.state().chain);
    plans.push_back(
        {{"array", name}, {"gpu_decodable", plan.gpu()}, {"gpu_decode", plan.description}});
  };
  Result<Dataset> dataset = Dataset::Open(url);
  if (!dataset.ok()) return plans;
  std::vector<std::string> names;
  for (const std::vector<std::string>* specs : {&options.variables, &options.forcings}) {
    for (const std::string& spec : *specs) names.push_back(spec.substr(0, spec.find('@')));
  }
  const bool named = !names.empty();
  if (!named) names = dataset->variable_names();
  for (const std::string& name : names) {
    Result<Array> array = dataset->OpenVariable(name);
    if (array.ok() && array->is_numeric() && (named || array->rank() >= 2)) {
      add(dataset->is_single_array() ? "" : name, *array);
    }
  }
  return plans;
}

// What the training loop measured. The first batch is the start-up; the rates are over the
// batches after it.
struct LoopMeasurement {
  double startup_s = 0;
  uint64_t batches = 0;
  uint64_t samples = 0;                            // after the first batch
  uint64_t bytes = 0;                              // after the first batch
  double wait_s = 0;                               // after the first batch
  double elapsed_s = 0;                            // from the end of the first batch
  nlohmann::json steps = nlohmann::json::array();  // per batch: its wait and the whole step
};

// Takes --epochs epochs of (up to --steps) batches as a training loop would, with a simulated
// training step of --train-step-ms after each batch. `open_start`: when the loader was opened.
Result<LoopMeasurement> RunTrainingLoop(Loader& loader, const BenchCommandOptions& o,
                                        Clock::time_point open_start) {
  const uint64_t per_epoch =
      o.steps ? std::min<uint64_t>(*o.steps, loader.num_batches()) : loader.num_batches();
  const auto step = std::chrono::duration<double, std::milli>(o.train_step_ms);
  LoopMeasurement m;
  Clock::time_point measure_start = Clock::now();
  for (uint64_t epoch = 0; epoch < o.epochs; ++epoch) {
    loader.SetEpoch(epoch);
    for (uint64_t k = 0; k < per_epoch; ++k) {
      const Clock::time_point wait_start = Clock::now();
      ZS_ASSIGN_OR_RETURN(auto batch, loader.Next());
      if (!batch) break;
      if (m.batches++ == 0) {
        m.startup_s = Seconds(Clock::now() - open_start);
        measure_start = Clock::now();
      } else {
        m.wait_s += Seconds(Clock::now() - wait_start);
        m.samples += (*batch)->size();
        m.bytes += (*batch)->input().data.size() + (*batch)->target().data.size();
      }
      const double waited_ms = 1e3 * Seconds(Clock::now() - wait_start);
      if (o.train_step_ms > 0) std::this_thread::sleep_for(step);
      m.steps.push_back(
          {{"wait_ms", waited_ms}, {"step_ms", 1e3 * Seconds(Clock::now() - wait_start)}});
    }
  }
  m.elapsed_s = std::max(Seconds(Clock::now() - measure_start), 1e-9);
  return m;
}

// The loop's measurement with the loader's counters and what follows from them.
struct BenchResult {
  LoopMeasurement loop;
  LoaderStats stats;
  std::string gpu_decode_status;
  nlohmann::json gpu_decode_plans;  // --device cuda: GpuDecodePlans
  double amplification = 0;         // bytes decoded per byte used
  double waiting_fraction = 0;      // of each training step, with --train-step-ms
  // Reports and traces are shared: the URL without a user:password it may carry.
  std::string shown_url;
  // Loader::dataset_identity, its URLs shown as shown_url: which data was measured.
  nlohmann::json dataset = nlohmann::json::array();
  // Loader::missing_dates: the time steps no sample touched (named or detected).
  std::vector<std::string> missing_dates;

  double samples_per_second() const { return static_cast<double>(loop.samples) / loop.elapsed_s; }
  double bytes_per_second() const { return static_cast<double>(loop.bytes) / loop.elapsed_s; }
};

BenchResult Summarize(const BenchCommandOptions& o, const LoaderOptions& options,
                      const Loader& loader, LoopMeasurement loop) {
  BenchResult r;
  r.loop = std::move(loop);
  r.stats = loader.stats();
  r.gpu_decode_status = loader.gpu_decode_status();
  r.gpu_decode_plans =
      o.device == "cuda" ? GpuDecodePlans(o.url, options) : nlohmann::json::array();
  const LoaderStats& stats = r.stats;
  r.amplification = stats.bytes_used > 0 ? static_cast<double>(stats.bytes_decoded) /
                                               static_cast<double>(stats.bytes_used)
                                         : 0;
  const double step_s = o.train_step_ms / 1e3;
  const uint64_t batches = r.loop.batches;
  r.waiting_fraction =
      batches > 1 && step_s > 0
          ? r.loop.wait_s / (r.loop.wait_s + step_s * static_cast<double>(batches - 1))
          : 0;
  r.shown_url = RedactUrl(o.url);
  for (const StoreIdentity& store : loader.dataset_identity()) {
    r.dataset.push_back({{"url", RedactUrl(store.url)}, {"kind", store.kind}, {"id", store.id}});
  }
  Result<std::vector<std::string>> missing = loader.missing_dates();
  if (missing.ok()) r.missing_dates = std::move(*missing);
  return r;
}

nlohmann::json StageSeconds(const LoaderStats& stats) {
  return {{"plan_seconds", stats.plan_seconds},
          {"read_decode_seconds", stats.read_decode_seconds},
          {"assemble_seconds", stats.assemble_seconds},
          {"gpu_read_seconds", stats.gpu_read_seconds},
          {"gpu_decode_seconds", stats.gpu_decode_seconds},
          {"gpu_scatter_seconds", stats.gpu_scatter_seconds},
          {"wait_seconds", stats.wait_seconds}};
}

// The report --json writes (and --plot draws from).
nlohmann::json MakeReport(const BenchCommandOptions& o, const BenchResult& r) {
  const LoaderStats& stats = r.stats;
  return {{"url", r.shown_url},
          {"dataset", r.dataset},
          {"batches", r.loop.batches},
          {"measured_samples", r.loop.samples},
          {"epochs", o.epochs},
          {"startup_seconds", r.loop.startup_s},
          {"elapsed_seconds", r.loop.elapsed_s},
          {"samples_per_second", r.samples_per_second()},
          {"delivered_bytes_per_second", r.bytes_per_second()},
          {"read_amplification", r.amplification},
          {"estimated_read_amplification", stats.estimated_read_amplification},
          {"block_chunks", stats.block_chunks},
          {"train_step_ms", o.train_step_ms},
          {"waiting_fraction", r.waiting_fraction},
          {"device", o.device},
          {"gpu_decode", r.gpu_decode_status},
          {"gpu_decode_plans", r.gpu_decode_plans},
          {"stages", StageSeconds(stats)},
          {"gpu_decoded_chunks", stats.gpu_decoded_chunks},
          {"cpu_decode_share", stats.cpu_decode_share},
          {"gpu_rejected_chunks", stats.gpu_rejected_chunks},
          {"bytes_to_gpu", stats.bytes_to_gpu},
          {"bytes_staged_without_copy", stats.bytes_staged_without_copy},
          {"requests", stats.requests},
          {"retries", stats.retries},
          {"failed_requests", stats.failed_requests},
          {"request_latency_us_log2", stats.request_latency_histogram},
          {"chunks_decoded", stats.chunks_decoded},
          {"cache_hits", stats.cache_hits},
          {"missing_chunks", stats.missing_chunks},
          {"skipped_samples", stats.skipped_samples},
          {"missing_date_samples", stats.missing_date_samples},
          {"missing_dates", r.missing_dates},
          {"bytes_read", stats.bytes_read},
          {"bytes_decoded", stats.bytes_decoded},
          {"bytes_used", stats.bytes_used},
          {"wait_histogram_us_log2", stats.wait_histogram},
          {"steps", r.loop.steps},
          {"options",
           {{"batch_size", o.batch_size},
            {"shuffle", o.shuffle},
            {"prefetch", o.prefetch},
            {"threads", o.threads},
            {"cache_mb", o.cache_mb},
            {"dtype", o.dtype}}}};
}

// The rates, volumes and stage times.
void PrintThroughput(const BenchCommandOptions& o, const BenchResult& r) {
  const LoaderStats& stats = r.stats;
  std::printf(
      "%s: %llu batches of up to %llu samples over %llu epoch(s); rates over the %llu "
      "samples after the first batch\n",
      r.shown_url.c_str(), static_cast<unsigned long long>(r.loop.batches),
      static_cast<unsigned long long>(o.batch_size), static_cast<unsigned long long>(o.epochs),
      static_cast<unsigned long long>(r.loop.samples));
  std::printf("  start-up (open + first batch)  %.3f s\n", r.loop.startup_s);
  std::printf("  samples/s                      %.1f\n", r.samples_per_second());
  std::printf("  delivered                      %s/s\n", FormatBytes(r.bytes_per_second()).c_str());
  std::printf("  read / decoded in all          %s / %s\n",
              FormatBytes(static_cast<double>(stats.bytes_read)).c_str(),
              FormatBytes(static_cast<double>(stats.bytes_decoded)).c_str());
  std::printf(
      "  read amplification             %.2f bytes decoded per byte used (below 1: chunks "
      "served again from the cache; estimated at open, without a cache: %.2f)\n",
      r.amplification, stats.estimated_read_amplification);
  std::printf("  requests %llu, chunks decoded %llu, cache hits %llu, missing %llu\n",
              static_cast<unsigned long long>(stats.requests),
              static_cast<unsigned long long>(stats.chunks_decoded),
              static_cast<unsigned long long>(stats.cache_hits),
              static_cast<unsigned long long>(stats.missing_chunks));
  std::printf(
      "  stages: plan %.3f s, read+decode %.3f s (wall, per wave), assemble %.3f s, "
      "waiting %.3f s\n",
      stats.plan_seconds, stats.read_decode_seconds, stats.assemble_seconds, r.loop.wait_s);
}

// --device cuda: where chunks decoded and what the GPU's stages took.
void PrintGpuDecode(const LoaderOptions& options, const BenchResult& r) {
  const LoaderStats& stats = r.stats;
  std::printf("  %s\n", r.gpu_decode_status.c_str());
  for (const nlohmann::json& plan : r.gpu_decode_plans) {
    std::printf("    %s: %s (%s)\n", plan["array"].get<std::string>().c_str(),
                plan["gpu_decodable"].get<bool>() ? "GPU-decodable" : "decoded on the CPU",
                plan["gpu_decode"].get<std::string>().c_str());
  }
  if (options.decode.adaptive) {
    std::printf("  the worker threads' share of nvCOMP's chunks ended at %.0f %%\n",
                100 * stats.cpu_decode_share);
  }
  std::printf(
      "  gpu: %llu chunks decoded there (%llu rejected, decoded again on the CPU), %s copied; "
      "stages read %.3f s, copy + decode %.3f s, scatter %.3f s (wall, per wave)\n",
      static_cast<unsigned long long>(stats.gpu_decoded_chunks),
      static_cast<unsigned long long>(stats.gpu_rejected_chunks),
      FormatBytes(static_cast<double>(stats.bytes_to_gpu)).c_str(), stats.gpu_read_seconds,
      stats.gpu_decode_seconds, stats.gpu_scatter_seconds);
}

void PrintWaitHistogram(const std::vector<uint64_t>& histogram) {
  std::printf("  wait per batch (the first included):\n");
  const uint64_t most = *std::max_element(histogram.begin(), histogram.end());
  for (size_t b = 0; b < histogram.size(); ++b) {
    if (histogram[b] == 0) continue;
    std::printf("    %-20s %6llu %s\n", BucketLabel(b).c_str(),
                static_cast<unsigned long long>(histogram[b]), Bar(histogram[b], most, 40).c_str());
  }
}

void PrintReport(const BenchCommandOptions& o, const LoaderOptions& options, const BenchResult& r) {
  PrintThroughput(o, r);
  if (o.device == "cuda") PrintGpuDecode(options, r);
  if (o.train_step_ms > 0) {
    std::printf("  waiting for data: %.1f %% of each %.1f ms step\n", 100 * r.waiting_fraction,
                o.train_step_ms);
  }
  PrintWaitHistogram(r.stats.wait_histogram);
  if (!r.missing_dates.empty()) {
    // One per line: what --missing-dates takes (comma-separated) to skip detecting them again.
    std::printf("  missing dates: %zu step(s), %llu sample(s) left out per epoch\n",
                r.missing_dates.size(),
                static_cast<unsigned long long>(r.stats.missing_date_samples));
    for (const std::string& label : r.missing_dates) std::printf("    %s\n", label.c_str());
  }
}

// --trace, --json and --plot. The plot is drawn by Python (matplotlib) from the JSON report:
// --json's, or a temporary one.
Status WriteReportFiles(const BenchCommandOptions& o, const Loader& loader,
                        const nlohmann::json& report) {
  if (!o.trace.empty()) ZS_RETURN_IF_ERROR(WriteTrace(loader.Timeline(), o.trace));
  std::string json_path = o.json;
  if (json_path.empty() && !o.plot.empty()) json_path = o.plot + ".json";
  if (!json_path.empty()) {
    std::ofstream out(json_path);
    out << report.dump(2) << "\n";
    if (!out) return InvalidArgumentError("cannot write " + json_path);
  }
  if (!o.plot.empty()) {
    const Status plotted = RunPlot(json_path, o.plot);
    if (o.json.empty()) std::remove(json_path.c_str());
    if (!plotted.ok()) return InvalidArgumentError("--plot: " + plotted.message());
    std::printf("  plot: %s\n", o.plot.c_str());
  }
  return Status::Ok();
}

}  // namespace

CLI::App* AddBenchCommand(CLI::App& app, BenchCommandOptions* options) {
  CLI::App* command = app.add_subcommand(
      "bench",
      "Run the loader over a dataset as a training job would and report samples/s, GB/s, time "
      "per stage, read amplification, cache hits and the wait per step");
  command
      ->add_option("url", options->urls,
                   "Dataset: a group (or a single array) URL or path; several are joined (each "
                   "variable from the first that holds it); a JSON object such as "
                   "'{\"concat\": [\"a.zarr\", \"b.zarr\"]}' combines stores otherwise "
                   "(docs/loader.md)")
      ->required();
  command
      ->add_option("--join", options->join,
                   "Several URLs: 'exact' (the default) asks their time axes to be equal, "
                   "'inner' takes the times all hold")
      ->check(CLI::IsMember({"exact", "inner"}));
  command->add_option("--variables", options->variables,
                      "Input variables: NAME, NAME@LEVEL[,LEVEL...] or NAME@*, comma-separated "
                      "or repeated (default: every data variable with a time dimension)");
  command->add_option("--forcings", options->forcings,
                      "Inputs that are never targets: variables of the store, or computed "
                      "forcings (cos_latitude, sin_julian_day, cos_solar_zenith_angle, ...: "
                      "docs/loader.md), comma-separated");
  command->add_option("--sample", options->sample, "Sample window DIM=N[,DIM=N...]");
  command->add_option("--stride", options->stride, "Distance between origins DIM=N[,DIM=N...]");
  command->add_option("--target-offset", options->target_offset,
                      "Targets DIM=K[,K...] steps after the window (default: none)");
  command->add_option("--select", options->select,
                      "Label selection, as `stats --select` (time=1979:2015)");
  command->add_option("--frequency", options->frequency,
                      "Time steps at this frequency (6h; units s, min, h, d), a whole number of "
                      "the store's steps");
  command->add_option("--missing-dates", options->missing_dates,
                      "Time labels no sample may touch (a date is its whole period), "
                      "comma-separated or repeated; 'detect': steps some channel has no value at "
                      "(chunks absent or all NaN; reads the channels' chunks once at open)");
  command->add_option("--periodic", options->periodic,
                      "Dimensions that wrap around, comma-separated; 'none' for none (default: a "
                      "longitude going once around the circle)");
  command
      ->add_option("--patch-padding", options->patch_padding,
                   "Sampled dimensions that do not wrap are padded until windows cover every "
                   "index: none, reflect or a value (output units)")
      ->capture_default_str();
  command
      ->add_option("--ensemble", options->ensemble,
                   "An ensemble's members: none (a dimension like the others), sample (each "
                   "member a sample) or channels (stacked into channels)")
      ->capture_default_str();
  command->add_option("--ensemble-dim", options->ensemble_dim,
                      "The member dimension (default: number, member, ensemble or realization)");
  command->add_option("--batch-size", options->batch_size)->capture_default_str();
  command->add_option("--steps", options->steps, "Batches per epoch (default: the whole epoch)");
  command->add_option("--epochs", options->epochs)->capture_default_str();
  command->add_option("--shuffle", options->shuffle, "exact, block or none")->capture_default_str();
  command->add_option("--seed", options->seed)->capture_default_str();
  command->add_option("--dtype", options->dtype, "float32, bfloat16 or float16")
      ->capture_default_str();
  command->add_option("--normalize", options->normalize, "Stats file of `zarrstream stats`");
  command
      ->add_option("--target-normalize", options->target_normalize,
                   "Targets as 'values' (normalised as inputs) or 'tendencies' (x[target] - x[last "
                   "input], with the stats file's tendency statistics: stats --tendencies)")
      ->check(CLI::IsMember({"values", "tendencies"}));
  command->add_flag_callback(
      "--no-decode-cf", [options] { options->decode_cf = false; },
      "Values as stored: no CF decoding (_FillValue/missing_value to NaN, scale_factor, "
      "add_offset)");
  command->add_option("--prefetch", options->prefetch, "Batches prepared ahead")
      ->capture_default_str();
  command->add_option("--threads", options->threads, "Worker threads (default: one per core)");
  command->add_option("--cache-mb", options->cache_mb,
                      "Chunk cache in MiB (default: 1/64 of memory, 256 to 1024)");
  command->add_option("--train-step-ms", options->train_step_ms,
                      "Simulated training step after each batch (the loader works meanwhile)");
  command
      ->add_option("--device", options->device,
                   "cpu, or cuda: batches made on the GPU (nvCOMP decodes, kernels assemble)")
      ->capture_default_str();
  command->add_option("--gpu-wave-mb", options->gpu_wave_mb,
                      "With --device cuda: decoded MiB per GPU wave (default 512)");
  command->add_flag("--cpu-decode", options->cpu_decode,
                    "With --device cuda: the worker threads decode every chunk, which crosses "
                    "decoded (leaves the GPU to the training step)");
  command->add_option(
      "--cpu-decode-share", options->cpu_decode_share,
      "With --device cuda: the share (0 to 1) of the chunks nvCOMP would decode "
      "that the worker threads decode instead (the CPU and the GPU side by side), "
      "or auto: the loader searches for the share that gives the consumer the shortest time "
      "per batch, from 0.5 (with --train-step-ms)");
  command->add_option("--ref", options->ref,
                      "Icechunk repository: the branch, tag or snapshot id to read (default: "
                      "branch main)");
  command->add_option("--json", options->json, "Write the report as JSON here");
  command->add_option("--plot", options->plot,
                      "Draw each batch's wait vs step timeline and the wait histogram here (PNG; "
                      "Python with matplotlib)");
  command->add_option("--trace", options->trace,
                      "Write a trace of every stage (plan, read+decode waves, assemble, the "
                      "loop's waits) here, for chrome://tracing or ui.perfetto.dev");
  return command;
}

int RunBench(const BenchCommandOptions& o) {
  Result<LoaderOptions> options = MakeLoaderOptions(o);
  if (!options.ok()) {
    std::cerr << "zarrstream bench: " << options.status().message() << "\n";
    return 2;
  }
  // The loop takes batches where they are made: --device cuda needs GPU batches.
  Result<BatchPlacement> placement =
      PlanBatchPlacement(options->device, options->cuda_device, GpuBatches::kAuto,
                         /*consumer_can_copy=*/false);
  if (!placement.ok()) {
    std::cerr << "zarrstream bench: " << placement.status().ToString() << "\n";
    return 1;
  }
  const Clock::time_point open_start = Clock::now();
  Result<Loader> loader = Loader::Open(o.url, *options);
  if (!loader.ok()) {
    std::cerr << "zarrstream bench: " << loader.status().ToString() << "\n";
    return 1;
  }
  Result<LoopMeasurement> loop = RunTrainingLoop(*loader, o, open_start);
  if (!loop.ok()) {
    std::cerr << "zarrstream bench: " << loop.status().ToString() << "\n";
    return 1;
  }
  const BenchResult result = Summarize(o, *options, *loader, *std::move(loop));
  PrintReport(o, *options, result);
  if (Status written = WriteReportFiles(o, *loader, MakeReport(o, result)); !written.ok()) {
    std::cerr << "zarrstream bench: " << written.message() << "\n";
    return 1;
  }
  return 0;
}

}  // namespace zarrstream::cli

// The C++ job runs on a thread of its own while the calling thread waits with the GIL released.
// The waiting thread wakes at each progress update and every 100 ms: it calls the Python progress
// callback and, on Python's main thread, runs the signal handlers. Ctrl-C (or an exception from the
// callback) sets the job's interrupt flag; the job winds down (a rechunk saves its progress, so a
// rerun resumes) and the exception is raised once it has.
#include "job_bindings.h"

#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>

#include "dataset/channel_spec.h"
#include "errors.h"
#include "gil.h"
#include "tools/channel_stats.h"
#include "tools/rechunk.h"
#include "zarrstream/label_selection.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace zarrstream::python {
namespace {

using ProgressFn = std::function<void(uint64_t done, uint64_t total)>;

// Runs `work(interrupt, progress)` as described in the overview and returns its result; raises
// what interrupted it (KeyboardInterrupt, the callback's exception) once it has returned.
template <typename T>
T RunInterruptibly(nb::handle callback,
                   const std::function<T(const std::atomic<bool>&, const ProgressFn&)>& work) {
  std::atomic<bool> interrupt{false};
  std::mutex mutex;
  std::condition_variable changed;
  uint64_t done = 0, total = 0;
  bool updated = false, finished = false;
  std::optional<T> result;
  std::exception_ptr failed;  // an allocation failure in the binding's own code
  std::thread worker([&] {
    std::optional<T> value;
    std::exception_ptr error;
    try {
      value.emplace(work(interrupt, [&](uint64_t d, uint64_t t) {
        std::lock_guard<std::mutex> lock(mutex);
        done = d;
        total = t;
        updated = true;
        changed.notify_one();
      }));
    } catch (...) {
      error = std::current_exception();
    }
    std::lock_guard<std::mutex> lock(mutex);
    result = std::move(value);
    failed = error;
    finished = true;
    changed.notify_one();
  });
  std::exception_ptr raised;
  for (bool last = false; !last;) {
    bool report = false, signal = false;
    uint64_t report_done = 0, report_total = 0;
    {
      GilRelease release;
      std::unique_lock<std::mutex> lock(mutex);
      changed.wait_for(lock, std::chrono::milliseconds(100), [&] { return finished || updated; });
      last = finished;
      report = std::exchange(updated, false);
      report_done = done;
      report_total = total;
      lock.unlock();
      if (!raised && !last) signal = release.SignalRaised();
    }
    if (signal) {
      try {
        throw nb::python_error();  // takes the error the signal handler set
      } catch (...) {
        raised = std::current_exception();
      }
      interrupt.store(true);
    }
    if (report && !raised && callback.is_valid() && !callback.is_none()) {
      try {
        callback(report_done, report_total);
      } catch (...) {
        raised = std::current_exception();
        interrupt.store(true);
      }
    }
  }
  WithoutGil([&] { worker.join(); });
  if (raised) std::rethrow_exception(raised);
  if (failed) std::rethrow_exception(failed);
  return std::move(*result);
}

nb::dict ReportDict(const tools::RechunkReport& r) {
  nb::dict out;
  out["arrays"] = r.arrays;
  out["slabs_total"] = r.slabs_total;
  out["slabs_resumed"] = r.slabs_resumed;
  out["slabs_written"] = r.slabs_written;
  out["output_bytes"] = r.output_bytes;
  out["source_bytes_decoded"] = r.source_bytes_decoded;
  out["read_amplification"] = r.read_amplification();
  out["memory_bound_bytes"] = r.memory_bound_bytes;
  out["skipped_arrays"] = r.skipped_arrays;
  out["job_complete"] = r.job_complete;
  out["interrupted"] = r.interrupted;
  return out;
}

tools::RechunkOptions MakeRechunkOptions(std::string source, std::string dest,
                                         const std::string& chunks, const std::string& shards,
                                         std::string codec, bool gpu_friendly,
                                         std::vector<std::string> variables,
                                         std::vector<std::string> select, std::string stack,
                                         size_t threads, uint64_t memory_bytes, uint32_t part_index,
                                         uint32_t part_count, bool overwrite) {
  tools::RechunkOptions options;
  options.source_url = std::move(source);
  options.dest_url = std::move(dest);
  if (!chunks.empty()) options.chunks = ValueOrThrow(tools::ParseDimSizes(chunks));
  if (!shards.empty()) options.shards = ValueOrThrow(tools::ParseDimSizes(shards));
  options.codec = std::move(codec);
  options.gpu_friendly = gpu_friendly;
  options.variables = std::move(variables);
  options.selections = std::move(select);
  options.stack_name = std::move(stack);
  options.threads = threads;
  if (memory_bytes == 0) ThrowIfError(InvalidArgumentError("memory must be positive"));
  options.memory_limit_bytes = memory_bytes;
  options.part_index = part_index;
  options.part_count = part_count;
  options.overwrite = overwrite;
  return options;
}

// A part's accumulators, one list per field, one entry per channel: the values', then each
// tendency's in the order of the job's tendency_steps (picklable as they are).
using StatsPartValues =
    std::tuple<std::vector<uint64_t>, std::vector<uint64_t>, std::vector<double>,
               std::vector<double>, std::vector<double>, std::vector<double>>;

}  // namespace

void RegisterJobBindings(nb::module_& m) {
  m.def(
      "_rechunk",
      [](std::string source, std::string dest, const std::string& chunks, const std::string& shards,
         std::string codec, bool gpu_friendly, std::vector<std::string> variables,
         std::vector<std::string> select, std::string stack, size_t threads, uint64_t memory_bytes,
         uint32_t part_index, uint32_t part_count, bool overwrite, bool finish_only,
         nb::object progress, std::string source_ref, bool keep_slab_buffers) {
        tools::RechunkOptions options = MakeRechunkOptions(
            std::move(source), std::move(dest), chunks, shards, std::move(codec), gpu_friendly,
            std::move(variables), std::move(select), std::move(stack), threads, memory_bytes,
            part_index, part_count, overwrite);
        options.source_ref = std::move(source_ref);
        options.keep_slab_buffers = keep_slab_buffers;
        Result<tools::RechunkReport> report = RunInterruptibly<Result<tools::RechunkReport>>(
            progress, [&](const std::atomic<bool>& interrupt, const ProgressFn& on_progress) {
              if (finish_only) return tools::FinishRechunk(options);
              tools::RechunkOptions run = options;
              run.interrupt = &interrupt;
              run.on_progress = on_progress;
              return tools::Rechunk(run);
            });
        return ReportDict(ValueOrThrow(std::move(report)));
      },
      "source"_a, "dest"_a, "chunks"_a, "shards"_a, "codec"_a, "gpu_friendly"_a, "variables"_a,
      "select"_a, "stack"_a, "threads"_a, "memory_bytes"_a, "part_index"_a, "part_count"_a,
      "overwrite"_a, "finish_only"_a, "progress"_a.none(), "source_ref"_a = "",
      "keep_slab_buffers"_a = false);

  // Returns (job, values): the stats file describing the job (its statistics not filled in; the
  // same text for every part) and the part's accumulators.
  m.def(
      "_stats_part",
      [](const std::string& url, const std::vector<std::string>& variables,
         const std::vector<std::string>& select, const std::vector<std::string>& tendencies,
         size_t threads, bool decode_cf, uint32_t part_index, uint32_t part_count,
         nb::object progress, const std::string& ref) {
        Result<ChannelStatsPart> part = RunInterruptibly<Result<ChannelStatsPart>>(
            progress,
            [&](const std::atomic<bool>& interrupt,
                const ProgressFn& on_progress) -> Result<ChannelStatsPart> {
              ZS_ASSIGN_OR_RETURN(std::vector<VariableSpec> specs, ParseVariableSpecs(variables));
              ZS_ASSIGN_OR_RETURN(std::vector<LabelSelection> selections,
                                  ParseLabelSelections(select));
              OpenOptions open;
              open.num_threads = threads;
              open.ref = ref;
              ZS_ASSIGN_OR_RETURN(Dataset dataset, Dataset::Open(url, open));
              ZS_ASSIGN_OR_RETURN(std::vector<Channel> channels, dataset.ResolveChannels(specs));
              ChannelStatsOptions options;
              options.select = std::move(selections);
              options.num_threads = threads;
              options.decode_cf = decode_cf;
              options.tendencies = tendencies;
              options.part_index = part_index;
              options.part_count = part_count;
              options.progress = on_progress;
              options.interrupt = &interrupt;
              return ComputeChannelStatsPart(dataset, channels, options);
            });
        ChannelStatsPart value = ValueOrThrow(std::move(part));
        StatsPartValues values;
        std::vector<const std::vector<ChannelAccumulator>*> tables = {&value.channels};
        for (const auto& tendency : value.tendencies) tables.push_back(&tendency);
        for (const std::vector<ChannelAccumulator>* table : tables) {
          for (const ChannelAccumulator& c : *table) {
            std::get<0>(values).push_back(c.moments.count);
            std::get<1>(values).push_back(c.nan_count);
            std::get<2>(values).push_back(c.moments.mean);
            std::get<3>(values).push_back(c.moments.m2);
            std::get<4>(values).push_back(c.min);
            std::get<5>(values).push_back(c.max);
          }
        }
        return std::make_pair(FormatChannelStats(value.job), std::move(values));
      },
      "url"_a, "variables"_a, "select"_a, "tendencies"_a, "threads"_a, "decode_cf"_a,
      "part_index"_a, "part_count"_a, "progress"_a.none(), "ref"_a = "");

  // Merges parts' accumulators, in the order given, into the stats file's text.
  m.def(
      "_finish_stats",
      [](const std::string& job, const std::vector<StatsPartValues>& parts) {
        ChannelStatsPart merged;
        merged.job = ValueOrThrow(ParseChannelStats(job));
        const size_t n = merged.job.channels.size();
        const size_t num_tables = 1 + merged.job.tendency_steps.size();
        merged.channels.resize(n);
        merged.tendencies.assign(num_tables - 1, std::vector<ChannelAccumulator>(n));
        for (size_t p = 0; p < parts.size(); ++p) {
          const auto& [count, nan_count, mean, m2, min, max] = parts[p];
          const size_t all = n * num_tables;
          if (count.size() != all || nan_count.size() != all || mean.size() != all ||
              m2.size() != all || min.size() != all || max.size() != all) {
            ThrowIfError(InvalidArgumentError(
                "statistics part " + std::to_string(p) + " of " + merged.job.source + " has " +
                std::to_string(count.size()) + " accumulators, the job " + std::to_string(all) +
                " (" + std::to_string(n) + " channels, " + std::to_string(num_tables - 1) +
                " tendencies)"));
          }
          for (size_t i = 0; i < all; ++i) {
            ChannelAccumulator a;
            a.moments = Moments{count[i], mean[i], m2[i]};
            a.nan_count = nan_count[i];
            a.min = min[i];
            a.max = max[i];
            const size_t table = i / n, c = i % n;
            (table == 0 ? merged.channels[c] : merged.tendencies[table - 1][c]).Merge(a);
          }
        }
        return FormatChannelStats(FinishChannelStats(std::move(merged)));
      },
      "job"_a, "parts"_a);
}

}  // namespace zarrstream::python

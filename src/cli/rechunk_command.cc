#include "cli/rechunk_command.h"

#include <atomic>
#include <csignal>
#include <cstdio>
#include <iostream>

#include "cli/progress_bar.h"
#include "store/curl_transport.h"
#include "tools/rechunk.h"
#include "util/format.h"

namespace zarrstream::cli {
namespace {

// The process's peak resident memory (Linux VmHWM), or 0 where the system does not say.
uint64_t PeakResidentBytes() {
  std::FILE* status = std::fopen("/proc/self/status", "r");
  if (!status) return 0;
  char line[256];
  uint64_t kib = 0;
  while (std::fgets(line, sizeof(line), status)) {
    if (std::sscanf(line, "VmHWM: %lu kB", &kib) == 1) break;
  }
  std::fclose(status);
  return kib * 1024;
}

// Set by SIGINT or SIGTERM: the rechunk stops starting slabs, finishes the ones in flight and
// saves its progress. The handler is installed with SA_RESETHAND, so a second signal ends the
// process at once (what it wrote is still consistent: objects are replaced atomically).
std::atomic<bool> interrupt_requested{false};
static_assert(std::atomic<bool>::is_always_lock_free, "set from a signal handler");

extern "C" void RequestInterrupt(int /*signal*/) { interrupt_requested.store(true); }

void InstallInterruptHandlers() {
  struct sigaction action {};
  action.sa_handler = RequestInterrupt;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESETHAND | SA_RESTART;
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
}

Status ParseArgs(RechunkCommandOptions& args) {
  auto& options = args.job;
  if (!args.chunks.empty()) {
    ZS_ASSIGN_OR_RETURN(options.chunks, tools::ParseDimSizes(args.chunks));
  }
  if (!args.shards.empty()) {
    ZS_ASSIGN_OR_RETURN(options.shards, tools::ParseDimSizes(args.shards));
  }
  if (!args.part.empty()) {
    unsigned index = 0;
    unsigned count = 0;
    char extra = 0;
    if (std::sscanf(args.part.c_str(), "%u/%u%c", &index, &count, &extra) != 2 || count == 0 ||
        index >= count) {
      return InvalidArgumentError("--part expects i/N with 0 <= i < N, got '" + args.part + "'");
    }
    options.part_index = index;
    options.part_count = count;
  }
  if (args.memory_gb <= 0) return InvalidArgumentError("--memory must be positive");
  options.memory_limit_bytes = static_cast<uint64_t>(args.memory_gb * 1e9);
  return Status::Ok();
}

}  // namespace

int RunRechunk(RechunkCommandOptions& args) {
  Status parsed = ParseArgs(args);
  if (!parsed.ok()) {
    std::cerr << "zarrstream rechunk: " << parsed.ToString() << "\n";
    return 2;
  }
  std::string label = "rechunk";
  if (args.job.part_count > 1) {
    label +=
        " part " + std::to_string(args.job.part_index) + "/" + std::to_string(args.job.part_count);
  }
  ProgressBar bar(label);
  args.job.on_progress = [&bar](uint64_t done, uint64_t total) { bar.Update(done, total); };
  args.job.interrupt = &interrupt_requested;
  InstallInterruptHandlers();
  const auto start = std::chrono::steady_clock::now();
  auto report = tools::Rechunk(args.job);
  bar.Finish();
  if (!report.ok()) {
    std::cerr << "zarrstream rechunk: " << report.status().ToString() << "\n";
    if (interrupt_requested.load()) return 130;
    return 1;
  }
  if (report->interrupted) {
    std::cerr << "zarrstream rechunk: interrupted; "
              << (report->slabs_total - report->slabs_resumed - report->slabs_written)
              << " slab(s) of " << report->slabs_total << " left to do, progress saved in "
              << RedactUrl(args.job.dest_url) << "; rerun the same command to finish\n";
    return 130;  // 128 + SIGINT, as shells report an interrupted command
  }
  for (const std::string& skipped : report->skipped_arrays) {
    std::cerr << "zarrstream rechunk: not copied: " << skipped << "\n";
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("rechunked %zu arrays: %s written in %.1f s (%s/s), %zu slabs", report->arrays,
              FormatBytes(static_cast<double>(report->output_bytes)).c_str(), seconds,
              FormatBytes(seconds > 0 ? report->output_bytes / seconds : 0).c_str(),
              report->slabs_total);
  if (report->slabs_resumed) std::printf(" (%zu already done, skipped)", report->slabs_resumed);
  std::printf("; read amplification %.2fx; memory bound %s", report->read_amplification(),
              FormatBytes(static_cast<double>(report->memory_bound_bytes)).c_str());
  if (const uint64_t peak = PeakResidentBytes()) {
    std::printf(", peak resident %s", FormatBytes(static_cast<double>(peak)).c_str());
  }
  std::printf("\n");
  if (report->job_complete) {
    std::printf("complete: %s\n", RedactUrl(args.job.dest_url).c_str());
  } else {
    std::printf("this part is done; the last part to finish consolidates the metadata\n");
  }
  return 0;
}

CLI::App* AddRechunkCommand(CLI::App& app, RechunkCommandOptions* args) {
  CLI::App* cmd = app.add_subcommand(
      "rechunk",
      "Copy a Zarr array or group (v2 or v3) into a Zarr v3 layout for training reads.\n"
      "Streams slab by slab with bounded memory (--memory), resumes when rerun with the same "
      "options, and splits into --part i/N runs that write disjoint shards of one destination.");
  cmd->add_option("src", args->job.source_url, "Source array or group URL")->required();
  cmd->add_option("dst", args->job.dest_url, "Destination URL")->required();
  cmd->add_option("--ref", args->job.source_ref,
                  "Source is an Icechunk repository: its branch, tag or snapshot id (default: "
                  "main)");
  cmd->add_option("--chunks", args->chunks,
                  "Chunk extents by dimension name, e.g. time=1,level=1 ('all': the full extent; "
                  "dimensions not named keep their full extent; default: the source's chunks)");
  cmd->add_option("--shard", args->shards,
                  "Shard extents by dimension name, e.g. time=16 (multiples of the chunks)");
  cmd->add_option("--codec", args->job.codec,
                  "none, zstd[:level], gzip[:level], lz4, blosc[:cname[:clevel[:shuffle]]] "
                  "(default zstd:3)");
  cmd->add_option("--vars", args->job.variables,
                  "Variables to copy, comma-separated (with --stack: channel specs such as "
                  "temperature@500,850)");
  cmd->add_option("--select", args->job.selections,
                  "Label selection dim=lo:hi, inclusive, e.g. time=1979-01-01:2015-12-31")
      ->take_all();
  cmd->add_option("--stack", args->job.stack_name,
                  "Stack the variables and levels into one (time, channel, ...) array of this "
                  "name, with channel names in its attributes");
  cmd->add_flag("--gpu-friendly", args->job.gpu_friendly,
                std::string("The layout the GPU decode path reads fastest (measured with nvCOMP; "
                            "see docs/benchmarks.md): --chunks ") +
                    tools::kGpuFriendlyChunks + " --shard " + tools::kGpuFriendlyShards +
                    " --codec " + tools::kGpuFriendlyCodec + " (explicit options win)");
  cmd->add_option("--threads", args->job.threads, "Threads (default: all cores)");
  cmd->add_option("--memory", args->memory_gb,
                  "Memory budget for data in flight, in GB (default 2)");
  cmd->add_option("--part", args->part, "This run's part i/N of the job (0 <= i < N)");
  cmd->add_flag("--overwrite", args->job.overwrite, "Replace the destination");
  CLI::Option* dask =
      cmd->add_option("--dask", args->dask,
                      "Run the parts as tasks on a Dask cluster: local[:N] (a LocalCluster of N "
                      "worker processes) or a scheduler address; through Python's zarrstream.dask, "
                      "with --memory and --threads per part");
  cmd->add_option("--ray", args->ray,
                  "Run the parts as Ray tasks: local[:N] (a local Ray of N CPUs) or a Ray "
                  "address (auto, ray://head:10001); through Python's zarrstream.ray")
      ->excludes(dask);
  return cmd;
}

}  // namespace zarrstream::cli

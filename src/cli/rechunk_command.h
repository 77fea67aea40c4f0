// `zarrstream rechunk SRC DST ...`: copies a Zarr array or group into a training-friendly v3
// layout (see tools/rechunk.h and docs/rechunk.md).
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "tools/rechunk.h"

namespace zarrstream::cli {

struct RechunkCommandOptions {
  tools::RechunkOptions job;
  std::string chunks;  // "time=1,level=1"
  std::string shards;  // "time=16"
  std::string part;    // "i/N"
  double memory_gb = 2.0;
  // "local[:N]" or an address: run as Dask or Ray tasks (engine_forward.h).
  std::string dask;
  std::string ray;
};

// Registers the `rechunk` subcommand on `app`, filling `options` when it is parsed.
CLI::App* AddRechunkCommand(CLI::App& app, RechunkCommandOptions* options);

// Runs the job with a progress bar on stderr when it is a terminal and a summary on stdout;
// returns the process exit code.
int RunRechunk(RechunkCommandOptions& options);

}  // namespace zarrstream::cli

#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace zarrstream::cli {

struct StatsOptions {
  std::string url;
  std::vector<std::string> vars;    // variable specs (each may hold several, comma-separated)
  std::vector<std::string> select;  // label selections
  size_t threads = 0;               // 0: one per core
  std::string output;               // the stats file; empty: standard output
  bool decode_cf = true;            // off: statistics of the values as stored (--no-decode-cf)
  // Tendency distances: time steps of the store ("6") or durations ("6h"), comma-separated or
  // repeated (ChannelStatsOptions::tendencies).
  std::vector<std::string> tendencies;
  std::string ref;  // an Icechunk repository's branch, tag or snapshot id
  // "local[:N]" or an address: run as Dask or Ray tasks (engine_forward.h).
  std::string dask;
  std::string ray;
};

// Computes per-channel statistics and writes the stats file; returns the process exit code.
int RunStats(const StatsOptions& options);

}  // namespace zarrstream::cli

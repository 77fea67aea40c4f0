// `zarrstream bench URL [loader options]`: runs the loader over a dataset the way a training job
// would and reports where the time goes (issue 7): samples/s, GB/s delivered, decoded and read,
// time per stage, read amplification, requests, cache hits, and the training loop's wait per step
// as a histogram; with --train-step-ms, how much of each step is spent waiting for data.
#pragma once

#include <CLI/CLI.hpp>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace zarrstream::cli {

struct BenchCommandOptions {
  // The dataset: one store's URL, or several joined (JoinedDatasetText), as `url`.
  std::vector<std::string> urls;
  std::string join = "exact";
  std::string url;
  std::vector<std::string> variables;  // each may hold several specs, comma-separated
  std::vector<std::string> forcings;
  std::vector<std::string> sample;         // DIM=N, comma-separated or repeated
  std::vector<std::string> stride;         // DIM=N
  std::string target_offset;               // DIM=K[,K...]
  std::vector<std::string> select;         // label selections, as `stats --select`
  std::string frequency;                   // "6h": time steps at this frequency
  std::vector<std::string> missing_dates;  // time labels, or "detect"
  std::vector<std::string> periodic;       // periodic dimensions, "none" (empty: detected)
  std::string patch_padding = "none";      // "none", "reflect" or a number
  std::string ensemble = "none";           // "none", "sample" or "channels"
  std::string ensemble_dim;                // the member dimension (empty: detected)
  uint64_t batch_size = 4;
  std::optional<uint64_t> steps;  // batches per epoch to measure (default: all)
  uint64_t epochs = 1;
  std::string shuffle = "exact";
  uint64_t seed = 0;
  std::string dtype = "float32";
  std::string normalize;
  std::string target_normalize = "values";  // or "tendencies" (LoaderOptions::target_tendencies)
  bool decode_cf = true;  // off: values as stored, not CF-decoded (--no-decode-cf)
  size_t prefetch = 4;
  size_t threads = 0;
  uint64_t cache_mb = 0;
  double train_step_ms = 0;  // simulated training step after each batch
  std::string device = "cpu";
  uint64_t gpu_wave_mb = 0;  // 0: the loader's default
  bool cpu_decode = false;   // GPU batches of chunks the worker threads decode (gpu_decode off)
  // GPU batches: the share of nvCOMP's chunks the threads decode ("" for none), or "auto".
  std::string cpu_decode_share;
  std::string ref;    // an Icechunk repository's branch, tag or snapshot id
  std::string json;   // write the report here
  std::string trace;  // write a Chrome/Perfetto trace of the stages here
  std::string plot;   // draw the wait/step timeline and wait histogram here (PNG)
};

// Registers the `bench` subcommand on `app`, filling `options` when it is parsed.
CLI::App* AddBenchCommand(CLI::App& app, BenchCommandOptions* options);

// Runs it and prints the report; returns the process exit code (2: bad options).
int RunBench(const BenchCommandOptions& options);

}  // namespace zarrstream::cli

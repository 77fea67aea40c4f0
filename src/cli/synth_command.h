// `zarrstream synth DST --preset NAME ...`: writes a synthetic ERA5-like dataset (see
// tools/synth_dataset.h).
#pragma once

#include <CLI/CLI.hpp>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace zarrstream::cli {

struct SynthCommandOptions {
  std::string dest;
  std::string preset = "era5-small";
  uint64_t seed = 0;
  std::string layout = "v3-zstd";
  std::optional<uint64_t> steps;
  std::string start = "1979-01-01";
  size_t threads = 0;  // 0: one per core
  bool overwrite = false;
};

// Registers the `synth` subcommand on `app`, filling `options` when it is parsed.
CLI::App* AddSynthCommand(CLI::App& app, SynthCommandOptions* options);

// Writes the dataset, with a progress bar on stderr when it is a terminal and a summary on
// stdout; returns the process exit code.
int RunSynth(const SynthCommandOptions& options);

}  // namespace zarrstream::cli

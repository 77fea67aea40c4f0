#include "cli/synth_command.h"

#include <cstdio>
#include <iostream>

#include "cli/progress_bar.h"
#include "tools/synth_dataset.h"
#include "util/format.h"

namespace zarrstream::cli {

CLI::App* AddSynthCommand(CLI::App& app, SynthCommandOptions* options) {
  std::string presets;
  for (const tools::SynthPreset& preset : tools::SynthPresets()) {
    presets += "\n  ";
    presets += preset.name;
    presets += ": ";
    presets += preset.description;
  }
  CLI::App* command = app.add_subcommand(
      "synth",
      "Write a realistic synthetic ERA5-like dataset (WeatherBench2 names and units), with no "
      "download. Presets:" +
          presets);
  command->add_option("dest", options->dest, "Destination store URL or local path")->required();
  command->add_option("--preset", options->preset, "era5-small, era5-1deg or era5")
      ->capture_default_str();
  command->add_option("--seed", options->seed, "Random seed of the weather")->capture_default_str();
  command
      ->add_option("--layout", options->layout,
                   "v3-zstd (one time step per chunk), v3-sharded (zstd chunks of one level "
                   "and step in shards of several steps) or wb2 (Zarr v2, blosc lz4, as "
                   "WeatherBench2)")
      ->capture_default_str();
  command->add_option("--steps", options->steps,
                      "Number of 6-hourly time steps (default: the preset's)");
  command->add_option("--start", options->start, "First time step (YYYY-MM-DD[THH])")
      ->capture_default_str();
  command->add_option("--threads", options->threads, "Threads (default: one per core)");
  command->add_flag("--overwrite", options->overwrite,
                    "Replace a Zarr store already at the destination");
  return command;
}

int RunSynth(const SynthCommandOptions& options) {
  tools::SynthOptions synth;
  synth.dest_url = options.dest;
  synth.preset = options.preset;
  synth.seed = options.seed;
  synth.steps = options.steps;
  synth.start = options.start;
  synth.threads = options.threads;
  synth.overwrite = options.overwrite;
  Result<tools::SynthLayout> layout = tools::ParseSynthLayout(options.layout);
  if (!layout.ok()) {
    std::cerr << "zarrstream synth: " << layout.status().message() << "\n";
    return 2;
  }
  synth.layout = *layout;
  ProgressBar progress("synth " + options.preset);
  synth.on_progress = [&progress](uint64_t done, uint64_t total) { progress.Update(done, total); };
  Result<tools::SynthReport> report = tools::WriteSynthDataset(synth);
  progress.Finish();
  if (!report.ok()) {
    std::cerr << "zarrstream synth: " << report.status().ToString() << "\n";
    return 1;
  }
  const double fields = static_cast<double>(report->fields);
  std::printf(
      "wrote %s: preset %s, layout %s, %llu time steps, %zu arrays, %zu stored objects, %s of "
      "float32 in %.2f s (%s/s) with %zu threads\n"
      "  generation %.2f ms per field, encoding and storing %.2f ms per field (thread time); "
      "memory bound ~%s\n",
      options.dest.c_str(), report->preset.c_str(),
      std::string(tools::SynthLayoutName(report->layout)).c_str(),
      static_cast<unsigned long long>(report->steps), report->arrays, report->stored_objects,
      FormatBytes(static_cast<double>(report->data_bytes)).c_str(), report->wall_seconds,
      FormatBytes(static_cast<double>(report->data_bytes) / report->wall_seconds).c_str(),
      report->threads, 1e3 * report->generate_seconds / fields,
      1e3 * report->write_seconds / fields,
      FormatBytes(static_cast<double>(report->memory_bound_bytes)).c_str());
  return 0;
}

}  // namespace zarrstream::cli

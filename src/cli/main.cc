// The `zarrstream` command.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <exception>
#include <iostream>
#include <string>
#include <string_view>
#include <vector>

#include "cli/bench_command.h"
#include "cli/doctor_command.h"
#include "cli/engine_forward.h"
#include "cli/inspect.h"
#include "cli/rechunk_command.h"
#include "cli/stats_command.h"
#include "cli/synth_command.h"
#include "dataset/channel_spec.h"

namespace {

// Levenshtein distance: how far a mistyped command is from a real one.
size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t substitute = diagonal + (a[i - 1] == b[j - 1] ? 0 : 1);
      diagonal = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, substitute});
    }
  }
  return row[b.size()];
}

// The first argument when it is meant as a command (not an option) and names none of `app`'s:
// CLI11 would only say that a subcommand is required. Says which it is and the nearest command.
bool ReportUnknownCommand(const CLI::App& app, int argc, char** argv) {
  if (argc < 2 || argv[1][0] == '-') return false;
  const std::string_view given = argv[1];
  std::vector<std::string> names;
  for (const CLI::App* command : app.get_subcommands({})) {
    if (command->get_name() == given) return false;
    names.push_back(command->get_name());
  }
  std::string nearest;
  size_t best = ~size_t{0};
  for (const std::string& name : names) {
    const size_t distance = EditDistance(given, name);
    if (distance < best) {
      best = distance;
      nearest = name;
    }
  }
  std::cerr << "zarrstream: unknown command '" << given << "'";
  // Suggest only what is plausibly a typo: at most a third of the name's letters differ.
  if (!nearest.empty() && best <= std::max<size_t>(1, nearest.size() / 3)) {
    std::cerr << "; did you mean '" << nearest << "'?";
  }
  std::cerr << "\nCommands:";
  for (const std::string& name : names) std::cerr << " " << name;
  std::cerr << "\nRun 'zarrstream --help' for their descriptions.\n";
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  // Errors travel as Status values; this catch is only for what a library throws (CLI11 setup,
  // allocation failure), so the command reports it and fails instead of aborting.
  try {
    CLI::App app{"zarrstream: stream Zarr datacubes into training batches"};
    app.require_subcommand(1);

    zarrstream::cli::InspectOptions inspect;
    CLI::App* inspect_cmd = app.add_subcommand(
        "inspect", "Show a store's arrays, chunking, codecs and layout warnings");
    inspect_cmd->add_option("url", inspect.url, "Store URL or local path")->required();
    inspect_cmd->add_flag("--json", inspect.json, "Machine-readable output");
    inspect_cmd->add_option("--ref", inspect.ref,
                            "Icechunk repository: the branch, tag or snapshot id (default: main)");

    zarrstream::cli::StatsOptions stats;
    std::vector<std::string> stats_urls;
    std::string stats_join = "exact";
    CLI::App* stats_cmd = app.add_subcommand(
        "stats",
        "Per-channel count, NaN count, mean, std (population, ddof=0), min and max over a "
        "label selection, in one streaming pass, written as the loader's normalisation file. "
        "Memory stays below about 3 x threads x one chunk's decoded size.");
    stats_cmd
        ->add_option("url", stats_urls,
                     "Dataset: a group (or a single array) URL or path; several are joined, a "
                     "JSON form combines stores otherwise, as for `zarrstream bench`")
        ->required();
    stats_cmd->add_option("--join", stats_join, "Several URLs: 'exact' or 'inner' (as bench)")
        ->check(CLI::IsMember({"exact", "inner"}));
    stats_cmd
        ->add_option("--vars", stats.vars,
                     "Variables: NAME, NAME@LEVEL[,LEVEL...] or NAME@*, comma-separated or "
                     "repeated (default: every data variable with a time dimension, all "
                     "levels, as the loader takes; name static fields to include them)")
        ->allow_extra_args(false);
    stats_cmd
        ->add_option("--select", stats.select,
                     "Label selection DIM=START:STOP (inclusive; either end may be empty; "
                     "dates cover their whole period: time=1979:2015) or DIM=LABEL[,LABEL...]; "
                     "comma-separated or repeated")
        ->allow_extra_args(false);
    stats_cmd
        ->add_option("--tendencies", stats.tendencies,
                     "Also the statistics of x[t+N] - x[t] per channel (static fields have none): "
                     "N in time steps of the store (6) or a duration (6h) that is a whole number "
                     "of them; comma-separated or repeated")
        ->allow_extra_args(false);
    stats_cmd->add_option("--threads", stats.threads, "Threads (default: one per core)");
    stats_cmd->add_option("--ref", stats.ref,
                          "Icechunk repository: the branch, tag or snapshot id to read (default: "
                          "branch main)");
    stats_cmd->add_option("-o,--output", stats.output, "Stats file to write (default: stdout)");
    stats_cmd->add_flag_callback(
        "--no-decode-cf", [&stats] { stats.decode_cf = false; },
        "Statistics of the values as stored: no CF decoding (_FillValue/missing_value to NaN, "
        "scale_factor, add_offset), as the loader's decode_cf=False");
    CLI::Option* stats_dask = stats_cmd->add_option(
        "--dask", stats.dask,
        "Run as tasks on a Dask cluster: local[:N] (a LocalCluster of N worker processes) or a "
        "scheduler address; through Python's zarrstream.dask");
    stats_cmd
        ->add_option("--ray", stats.ray,
                     "Run as Ray tasks: local[:N] (a local Ray of N CPUs) or a Ray address; "
                     "through Python's zarrstream.ray")
        ->excludes(stats_dask);

    zarrstream::cli::SynthCommandOptions synth;
    CLI::App* synth_cmd = zarrstream::cli::AddSynthCommand(app, &synth);

    zarrstream::cli::RechunkCommandOptions rechunk;
    CLI::App* rechunk_cmd = zarrstream::cli::AddRechunkCommand(app, &rechunk);

    zarrstream::cli::BenchCommandOptions bench;
    CLI::App* bench_cmd = zarrstream::cli::AddBenchCommand(app, &bench);

    bool doctor_json = false;
    std::string doctor_url;
    CLI::App* doctor_cmd = app.add_subcommand(
        "doctor",
        "What zarrstream finds on this machine: GPU and driver, GPU decoding, GPUDirect "
        "Storage, CPU, library versions; given a dataset, whether its layout and codecs suit "
        "training reads here, and the rechunk command that would fix them");
    doctor_cmd->add_option("url", doctor_url, "A dataset (group or array) to check");
    doctor_cmd->add_flag("--json", doctor_json, "Machine-readable output");

    if (ReportUnknownCommand(app, argc, argv)) return 2;
    CLI11_PARSE(app, argc, argv);
    if (app.got_subcommand(inspect_cmd)) return zarrstream::cli::RunInspect(inspect);
    if (app.got_subcommand(stats_cmd)) {
      if (!stats.dask.empty()) return zarrstream::cli::ForwardToEngine("dask", argc, argv);
      if (!stats.ray.empty()) return zarrstream::cli::ForwardToEngine("ray", argc, argv);
      stats.url = zarrstream::JoinedDatasetText(stats_urls, stats_join == "inner"
                                                                ? zarrstream::JoinDates::kInner
                                                                : zarrstream::JoinDates::kExact);
      return zarrstream::cli::RunStats(stats);
    }
    if (app.got_subcommand(synth_cmd)) return zarrstream::cli::RunSynth(synth);
    if (app.got_subcommand(rechunk_cmd)) {
      const std::string engine = !rechunk.dask.empty() ? "dask" : !rechunk.ray.empty() ? "ray" : "";
      if (engine.empty()) return zarrstream::cli::RunRechunk(rechunk);
      if (!rechunk.part.empty() || rechunk.job.overwrite) {
        std::cerr << "zarrstream rechunk: --" << engine
                  << " runs every part of the job: it takes neither --part nor --overwrite (clear "
                     "the destination first)\n";
        return 2;
      }
      return zarrstream::cli::ForwardToEngine(engine, argc, argv);
    }
    if (app.got_subcommand(bench_cmd)) {
      bench.url = zarrstream::JoinedDatasetText(bench.urls, bench.join == "inner"
                                                                ? zarrstream::JoinDates::kInner
                                                                : zarrstream::JoinDates::kExact);
      return zarrstream::cli::RunBench(bench);
    }
    if (app.got_subcommand(doctor_cmd)) return zarrstream::cli::RunDoctor(doctor_url, doctor_json);
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "zarrstream: " << e.what() << "\n";
  } catch (...) {
    std::cerr << "zarrstream: unknown error\n";
  }
  return 1;
}

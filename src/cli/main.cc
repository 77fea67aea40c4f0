// The `zarrstream` command.
#include <CLI/CLI.hpp>
#include <exception>
#include <iostream>

#include "cli/bench_command.h"
#include "cli/doctor_command.h"
#include "cli/inspect.h"
#include "cli/rechunk_command.h"
#include "cli/stats_command.h"
#include "cli/synth_command.h"

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

    zarrstream::cli::StatsOptions stats;
    CLI::App* stats_cmd = app.add_subcommand(
        "stats",
        "Per-channel count, NaN count, mean, std (population, ddof=0), min and max over a "
        "label selection, in one streaming pass, written as the loader's normalisation file. "
        "Memory stays below about 3 x threads x one chunk's decoded size.");
    stats_cmd->add_option("url", stats.url, "Dataset: a group (or a single array) URL or path")
        ->required();
    stats_cmd
        ->add_option("--vars", stats.vars,
                     "Variables: NAME, NAME@LEVEL[,LEVEL...] or NAME@*, comma-separated or "
                     "repeated (default: every data variable, all levels)")
        ->allow_extra_args(false);
    stats_cmd
        ->add_option("--select", stats.select,
                     "Label selection DIM=START:STOP (inclusive; either end may be empty; "
                     "dates cover their whole period: time=1979:2015) or DIM=LABEL[,LABEL...]; "
                     "comma-separated or repeated")
        ->allow_extra_args(false);
    stats_cmd->add_option("--threads", stats.threads, "Threads (default: one per core)");
    stats_cmd->add_option("-o,--output", stats.output, "Stats file to write (default: stdout)");

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

    CLI11_PARSE(app, argc, argv);
    if (app.got_subcommand(inspect_cmd)) return zarrstream::cli::RunInspect(inspect);
    if (app.got_subcommand(stats_cmd)) return zarrstream::cli::RunStats(stats);
    if (app.got_subcommand(synth_cmd)) return zarrstream::cli::RunSynth(synth);
    if (app.got_subcommand(rechunk_cmd)) return zarrstream::cli::RunRechunk(rechunk);
    if (app.got_subcommand(bench_cmd)) return zarrstream::cli::RunBench(bench);
    if (app.got_subcommand(doctor_cmd)) return zarrstream::cli::RunDoctor(doctor_url, doctor_json);
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "zarrstream: " << e.what() << "\n";
  } catch (...) {
    std::cerr << "zarrstream: unknown error\n";
  }
  return 1;
}

// The `zarrstream` command.
#include <CLI/CLI.hpp>
#include <exception>
#include <iostream>

#include "cli/inspect.h"

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

    CLI11_PARSE(app, argc, argv);
    if (app.got_subcommand(inspect_cmd)) return zarrstream::cli::RunInspect(inspect);
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "zarrstream: " << e.what() << "\n";
  } catch (...) {
    std::cerr << "zarrstream: unknown error\n";
  }
  return 1;
}

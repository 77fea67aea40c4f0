// The `zarrstream` command.
#include <CLI/CLI.hpp>

#include "cli/inspect.h"

int main(int argc, char** argv) {
  CLI::App app{"zarrstream: stream Zarr datacubes into training batches"};
  app.require_subcommand(1);

  zarrstream::cli::InspectOptions inspect;
  CLI::App* inspect_cmd =
      app.add_subcommand("inspect", "Show a store's arrays, chunking, codecs and layout warnings");
  inspect_cmd->add_option("url", inspect.url, "Store URL or local path")->required();
  inspect_cmd->add_flag("--json", inspect.json, "Machine-readable output");

  CLI11_PARSE(app, argc, argv);
  if (app.got_subcommand(inspect_cmd)) return zarrstream::cli::RunInspect(inspect);
  return 1;
}

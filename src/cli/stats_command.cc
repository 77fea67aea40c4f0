// `zarrstream stats URL [--vars ...] [--select ...] [--tendencies N,...] [--threads N]
// [-o stats.json]`: per-channel count, NaN count, mean, std, min and max over a label selection
// (and of the differences between time steps N apart), in one streaming pass, written
// as the stats file the loader normalises with (format in src/dataset/stats_file.h and
// docs/stats.md).
#include "cli/stats_command.h"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>

#include "cli/progress_bar.h"
#include "dataset/channel_spec.h"
#include "tools/channel_stats.h"
#include "zarrstream/label_selection.h"

namespace zarrstream::cli {

namespace {

// "1,4" and repeated options → {"1", "4"}.
std::vector<std::string> SplitTendencies(const std::vector<std::string>& texts) {
  std::vector<std::string> out;
  for (const std::string& text : texts) {
    size_t begin = 0;
    for (;;) {
      const size_t comma = text.find(',', begin);
      out.push_back(text.substr(begin, comma - begin));
      if (comma == std::string::npos) break;
      begin = comma + 1;
    }
  }
  return out;
}

Status Run(const StatsOptions& options) {
  ZS_ASSIGN_OR_RETURN(std::vector<VariableSpec> specs, ParseVariableSpecs(options.vars));
  ZS_ASSIGN_OR_RETURN(std::vector<LabelSelection> select, ParseLabelSelections(options.select));
  OpenOptions open;
  open.num_threads = options.threads;
  open.ref = options.ref;
  ZS_ASSIGN_OR_RETURN(Dataset dataset, Dataset::Open(options.url, open));
  ZS_ASSIGN_OR_RETURN(std::vector<Channel> channels, dataset.ResolveChannels(specs));

  ChannelStatsOptions stats_options;
  stats_options.select = std::move(select);
  stats_options.num_threads = options.threads;
  stats_options.decode_cf = options.decode_cf;
  stats_options.tendencies = SplitTendencies(options.tendencies);
  ProgressBar progress("stats");
  stats_options.progress = [&](uint64_t done, uint64_t total) { progress.Update(done, total); };
  ZS_ASSIGN_OR_RETURN(ChannelStatsFile stats,
                      ComputeChannelStats(dataset, channels, stats_options));
  progress.Finish();
  for (const ChannelStats& c : stats.channels) {
    if (c.count == 0) {
      std::cerr << "zarrstream stats: warning: channel '" << c.name
                << "' has no values in the selection (all NaN): its statistics are null\n";
    } else if (!std::isfinite(c.mean) || !std::isfinite(c.std)) {
      std::cerr << "zarrstream stats: warning: channel '" << c.name
                << "' holds infinite values: its mean or std is null\n";
    }
    for (const TendencyStats& t : c.tendencies) {
      if (t.count == 0) {
        std::cerr << "zarrstream stats: warning: channel '" << c.name << "' has no tendency over "
                  << t.steps << " time steps without NaN: its statistics are null\n";
      }
    }
  }
  const std::string text = FormatChannelStats(stats);
  if (options.output.empty() || options.output == "-") {
    std::cout << text;
    return Status::Ok();
  }
  std::ofstream out(options.output, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) return StorageError("cannot write the stats file " + options.output);
  return Status::Ok();
}

}  // namespace

int RunStats(const StatsOptions& options) {
  Status status = Run(options);
  if (status.ok()) return 0;
  std::cerr << "zarrstream stats: " << status.message() << "\n";
  return 1;
}

}  // namespace zarrstream::cli

// The stats file: per-channel statistics of a dataset (written by `zarrstream stats`, see
// tools/channel_stats.h) that the loader reads to normalise its channels.
//
// Format (JSON, "zarrstream.stats/1"):
//   {"format": "zarrstream.stats/1",
//    "source": "<dataset URL>",
//    "decode_cf": true,        // values were CF-decoded as xarray shows them (absent: not known)
//    "select": {"time": ["1979-01-01T00:00:00", "2015-12-31T18:00:00"],   // range: first, last
//               "level": {"values": [500, 850]}},                          // a list of labels
//    "channels": [{"name": "temperature@500", "variable": "temperature", "level": 500,
//                  "count": N, "nan_count": K, "mean": m, "std": s, "min": lo, "max": hi}, ...]}
// "select" records the labels actually selected: the first and last label when they are one run
// of consecutive indices (a range, or a date naming a period: the labels it matched, not the
// bounds as written), else every label; numeric labels are JSON numbers, times ISO strings. "level"
// is null for a channel without one. A statistic that is undefined (no values, or infinities in the
// data) is null. Channels appear in the order they were resolved: the loader's channel order.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "zarrstream/status.h"

namespace zarrstream {

struct ChannelStats {
  std::string name;
  std::string variable;
  std::optional<double> level;
  uint64_t count = 0;      // values that are not NaN
  uint64_t nan_count = 0;  // NaN values (excluded from the rest)
  // NaN when undefined (count == 0; infinite values for mean and std).
  double mean = 0;
  double std = 0;
  double min = 0;
  double max = 0;
};

// The labels a selection resolved to, as recorded in the stats file.
struct SelectedLabels {
  std::string dim;
  bool is_range = true;
  // One run of consecutive indices: its first and last label; otherwise each label. Numbers as
  // written by Coordinate::FormatLabel.
  std::vector<std::string> labels;
  bool numeric = false;  // labels are numbers (else ISO dates)
};

struct ChannelStatsFile {
  std::string source;
  // Whether the statistics are of CF-decoded values (Loader's decode_cf); nullopt in files written
  // before it was recorded.
  std::optional<bool> decode_cf;
  std::vector<SelectedLabels> select;
  std::vector<ChannelStats> channels;
};

// The stats file's JSON text (see the overview), pretty-printed.
std::string FormatChannelStats(const ChannelStatsFile& stats);
// Parses a stats file; errors name the offending field ("channels[2].mean").
Result<ChannelStatsFile> ParseChannelStats(std::string_view json_text);

}  // namespace zarrstream

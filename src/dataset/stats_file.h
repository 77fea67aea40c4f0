// The stats file: per-channel statistics of a dataset (written by `zarrstream stats`, see
// tools/channel_stats.h) that the loader reads to normalise its channels.
//
// Format (JSON, "zarrstream.stats/1"):
//   {"format": "zarrstream.stats/1",
//    "source": "<dataset URL>",
//    "decode_cf": true,        // values were CF-decoded as xarray shows them (absent: not known)
//    "select": {"time": ["1979-01-01T00:00:00", "2015-12-31T18:00:00"],   // range: first, last
//               "level": {"values": [500, 850]}},                          // a list of labels
//    "tendency_steps": [1, 4],     // optional: the tendencies computed (see below)
//    "time_step_seconds": 21600,   // optional: the selected times' step, where evenly spaced
//    "channels": [{"name": "temperature@500", "variable": "temperature", "level": 500,
//                  "count": N, "nan_count": K, "mean": m, "std": s, "min": lo, "max": hi,
//                  "tendencies": {"1": {"count": N, "nan_count": K, "mean": m, "std": s,
//                                       "min": lo, "max": hi}, "4": {...}}}, ...]}
// "select" records the labels actually selected: the first and last label when they are one run
// of consecutive indices (a range, or a date naming a period: the labels it matched, not the
// bounds as written), else every label; numeric labels are JSON numbers, times ISO strings. "level"
// is null for a channel without one. A statistic that is undefined (no values, or infinities in the
// data) is null. Channels appear in the order they were resolved: the loader's channel order.
// Tendencies (`zarrstream stats --tendencies`) are the statistics of x[t + n] - x[t] over the
// pairs of selected time steps n steps of the store apart, keyed by n; a static field (no time
// dimension) has none. Files without them (written before they existed, or without
// --tendencies) parse with no tendencies.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "zarrstream/status.h"

namespace zarrstream {

// The statistics of one channel's tendency over `steps` time steps of the store.
struct TendencyStats {
  uint64_t steps = 0;
  uint64_t count = 0;
  uint64_t nan_count = 0;
  double mean = 0;
  double std = 0;
  double min = 0;
  double max = 0;
};

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
  // In the order of ChannelStatsFile::tendency_steps; empty for a static field.
  std::vector<TendencyStats> tendencies;
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
  // The tendencies computed, in store time steps (empty: none).
  std::vector<uint64_t> tendency_steps;
  // The step of the selected times in seconds where they are evenly spaced (recorded with
  // tendencies); nullopt otherwise.
  std::optional<int64_t> time_step_seconds;
};

// The stats file's JSON text (see the overview), pretty-printed.
std::string FormatChannelStats(const ChannelStatsFile& stats);
// Parses a stats file; errors name the offending field ("channels[2].mean",
// "channels[0].tendencies.6.std").
Result<ChannelStatsFile> ParseChannelStats(std::string_view json_text);

}  // namespace zarrstream

// Label selections: which labels of a dimension's coordinate to use ("time" from 1979-01-01 to
// 2015-12-31, "level" 500 and 850), as the loader (LoaderOptions::select), `zarrstream stats` and
// `rechunk` take them. A selection is built directly (the Python front does, from its `select`
// dict) or parsed once from the command line's text (ParseLabelSelections). Labels stay text until
// they meet a coordinate: a number ("500", "-10.5"), a date with its period ("1981",
// "1979-01-01T06:00") or the text of a text coordinate's label; what a label selects, and the error
// for one that is neither, are the coordinate's business (the dataset's coordinates).
#pragma once

#include <optional>
#include <span>
#include <string>
#include <vector>

#include "zarrstream/status.h"

namespace zarrstream {

// One dimension's selection: a range of labels, or a list of them.
struct LabelSelection {
  std::string dim;
  // Exact labels to select, in order; empty for a range.
  std::vector<std::string> values;
  // The range [start, stop] when `values` is empty; nullopt is an open end.
  std::optional<std::string> start;
  std::optional<std::string> stop;

  bool is_range() const { return values.empty(); }
  // "time=1979-01-01:2015-12-31", "level=500,850": the form ParseLabelSelections reads.
  std::string ToString() const;
};

// Parses the command line's selection syntax (`--select`, shared by `stats` and `rechunk`):
//   DIM=START:STOP   a range; either end may be empty ("time=:2015", "latitude=60:")
//   DIM=LABEL[,LABEL...]   labels: exact numbers ("level=500,850"), dates with their period
//                          ("time=1981", "time=1979-01-01T06:00"), text for a text coordinate
//                          ("expver=0001", "level_name=low"; without ',' or ':')
// Several selections go in one argument separated by commas or in several arguments
// ("time=1979:2015,latitude=60:30"); a comma-separated piece without '=' is one more label of the
// selection before it. Dates contain ':' too: the range separator is the one ':' with a number or
// a date of the same kind on each side (years have four digits, so "1979-01-01T06:00" is one
// label, not the range "1979-01-01T06" to "00"). A dimension selected twice is an error.
Result<std::vector<LabelSelection>> ParseLabelSelections(std::span<const std::string> args);

}  // namespace zarrstream

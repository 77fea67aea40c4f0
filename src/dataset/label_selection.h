// Label selections as the command line and the loader's options write them, before they meet a
// coordinate: "time=1979-01-01:2015-12-31", "level=500,850". Parsing only tells labels from ranges
// and numbers from dates; what a label selects is the coordinate's business (coordinates.h).
#pragma once

#include <optional>
#include <span>
#include <string>
#include <vector>

#include "zarrstream/status.h"

namespace zarrstream {

// One dimension's selection as written, before it meets a coordinate.
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
//                          ("time=1981", "time=1979-01-01T06:00")
// Several selections go in one argument separated by commas or in several arguments
// ("time=1979:2015,latitude=60:30"); a comma-separated piece without '=' is one more label of the
// selection before it. Dates contain ':' too: the range separator is the one ':' with a number or
// a date of the same kind on each side (years have four digits, so "1979-01-01T06:00" is one
// label, not the range "1979-01-01T06" to "00"). A dimension selected twice is an error.
Result<std::vector<LabelSelection>> ParseLabelSelections(std::span<const std::string> args);

}  // namespace zarrstream

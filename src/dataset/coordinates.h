// Label-based selection on coordinates: the 1-D array named after a dimension gives each index
// along that dimension a label (a number, or a date for CF time coordinates), and users select by
// label ("time=1979-01-01:2015-12-31", levels 500 and 850) instead of by index.
//
// Semantics follow xarray's .sel: a range [start, stop] is inclusive on both ends and written in
// the coordinate's own order (a latitude running 90 → -90 is selected with "latitude=60:30"); a
// date's stop end covers the whole period the date names ("2015" runs to 2015-12-31T23:59:59,
// xarray's partial-string indexing). A list of labels selects exact matches. Unlike xarray, a
// selection that matches nothing, or a range written against the coordinate's order, is an error
// naming the coordinate's extent rather than an empty result. A single date names its whole period
// too ("time=1981" is the year 1981), as in xarray.
//
// Labels are text and are read against the coordinate they select on: a time coordinate (CF
// encoded, or numpy datetime64 read as its seconds since 1970) reads dates (see cf_time.h), a text
// coordinate (strings, numpy "U"/"S") matches labels exactly, any other reads numbers. A numeric
// label is compared in the coordinate's data type (so "0.1" matches a float32 coordinate's 0.1f).
// Text coordinates need not be sorted or distinct (a label selects every index holding it), and
// may run along another dimension (ERA5's `expver` along `valid_time`): along() says which.
//
// Coordinate is an immutable value: copy it, share it between threads.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "dataset/cf_time.h"
#include "zarrstream/array.h"
#include "zarrstream/label_selection.h"
#include "zarrstream/status.h"

namespace zarrstream {

// Indices [start, stop) along one dimension.
struct IndexRange {
  uint64_t start = 0;
  uint64_t stop = 0;
  uint64_t size() const { return stop - start; }
  bool operator==(const IndexRange&) const = default;
};

class Coordinate {
 public:
  // The coordinate of dimension `dim` in `group`: the member array named `dim`, which must be 1-D
  // (and, when it names its dimension, name it `dim`) and strictly monotonic. Its values are read
  // whole: coordinates are small. A `units` attribute of the form "<unit> since <date>" makes it
  // a CF time coordinate, decoded with its `calendar` attribute.
  static Result<Coordinate> Load(const Group& group, std::string_view dim);
  // The same for an array already open; `where` names its group in messages ("group at <url>").
  static Result<Coordinate> FromArray(const Array& array, std::string_view dim,
                                      std::string_view where);

  const std::string& dim() const { return dim_; }
  // The dimension the labels run along: dim(), or for a non-dimension text coordinate (ERA5's
  // `expver` along `valid_time`) the dimension of its array.
  const std::string& along() const { return along_; }
  // True for text labels (strings, numpy "U"/"S"): selected by exact match, in any order.
  bool is_text() const { return text_; }
  uint64_t size() const { return size_; }
  bool is_time() const { return time_units_.has_value(); }
  // The CF time units of a time coordinate.
  const std::optional<CfTimeUnits>& time_units() const { return time_units_; }
  // True when labels increase with the index (a single label counts as increasing).
  bool increasing() const { return increasing_; }
  // A periodic coordinate's indices wrap: index size() is index 0 again. Detected for a longitude
  // (a dimension named "longitude" or "lon", or units "degrees_east") whose labels are evenly
  // spaced and go once around the circle (size() × step = 360°), or set by AsPeriodic. Its numeric
  // labels are read modulo period() (-10 is 350 on a 0 to 359.75 grid), and a range whose start
  // comes after its stop wraps ("350:10" is 350 to 359.75, then 0 to 10; see Select).
  bool periodic() const { return periodic_; }
  double period() const { return period_; }
  // This coordinate, periodic or not (the loader's `periodic` option overriding the detection). A
  // numeric coordinate made periodic takes size() × its mean step as its period; a time
  // coordinate cannot be periodic (InvalidArgument).
  Result<Coordinate> AsPeriodic(bool periodic) const;
  // "coordinate 'time' of group at file:///data/era5.zarr", for messages.
  std::string Describe() const;

  // The label at `index`: "1979-01-01T06:00:00" for time; for numbers the shortest text that
  // reads back to the same value in the coordinate's data type ("500", "0.25").
  std::string FormatLabel(uint64_t index) const;
  // The numeric value at `index` (not for time coordinates, whose labels are dates).
  double NumericValue(uint64_t index) const { return numbers_[index]; }
  // The time at `index` of a time coordinate, in calendar seconds (cf_time.h): differences are
  // durations.
  int64_t TimeSeconds(uint64_t index) const { return seconds_[index]; }

  // The labels [range.start, range.stop) as a coordinate of their own (a joined dataset's
  // common times).
  Coordinate Slice(IndexRange range) const;
  // The labels of `parts` one after the other, as a coordinate of dimension `parts[0].dim()`
  // described as of `where` (a dataset concatenated along time). The parts must be of one kind
  // (times of one calendar, numbers or text), else an InvalidArgument error; their order is the
  // caller's to check.
  static Result<Coordinate> Concat(std::span<const Coordinate> parts, std::string_view where);
  // The first index at which this coordinate's labels and `other`'s differ (a time compared as
  // its instant, a number as its value, text exactly), min(size(), other.size()) where one runs
  // out first; nullopt where they are the same labels. Coordinates of different kinds (times and
  // numbers, or two calendars) differ at index 0.
  std::optional<uint64_t> FirstDifference(const Coordinate& other) const;
  // Whether the label at `index` is the same as `other`'s label at `other_index` (as above).
  bool SameLabel(uint64_t index, const Coordinate& other, uint64_t other_index) const;

  // The indices whose labels lie in [start, stop] (see the overview); nullopt ends are open.
  // Errors: a label that does not parse, a range against the coordinate's order, and a range that
  // selects nothing; each names the coordinate, its group, the label and the coordinate's extent.
  Result<IndexRange> SelectRange(std::optional<std::string_view> start,
                                 std::optional<std::string_view> stop) const;
  // The indices each label names, label by label in the order given: the exact match of a
  // number; every label inside a date's period (like xarray's partial-string indexing: "1979-01"
  // is all of January, "1979-01-01T06:00:00" one instant). A label that names nothing is a
  // kNotFound error listing the available labels nearest to it; one index named twice is an error.
  Result<std::vector<uint64_t>> SelectValues(std::span<const std::string> labels) const;
  // The indices `selection` picks: a range's indices in order, or SelectValues. On a periodic
  // coordinate a range whose start comes after its stop in the coordinate's order wraps: its
  // indices run from the start's to the end and on from 0 to the stop's ("longitude=350:10"); a
  // range of a whole period or more is every index once, from the start's.
  Result<std::vector<uint64_t>> Select(const LabelSelection& selection) const;

 private:
  // A label's position on the coordinate's axis: calendar seconds for time, else the value.
  struct Key {
    double number = 0;
    int64_t seconds = 0;
  };
  // The first and last key of what a label names: a date's period, or a number itself.
  struct LabelBounds {
    Key first, last;
  };
  Result<LabelBounds> Bounds(std::string_view label) const;
  // Sets periodic_ for a longitude that goes once around the circle (see periodic()).
  void DetectPeriod(bool degrees_east);
  // Sets the time labels of a numpy datetime64 coordinate from its int64 values `raw`.
  Status DecodeDateTime64(const ExtendedType& type, const std::vector<std::byte>& raw);
  Result<IndexRange> SelectTextRange(std::optional<std::string_view> start,
                                     std::optional<std::string_view> stop,
                                     std::string_view range) const;
  Result<std::vector<uint64_t>> SelectTextValues(std::span<const std::string> labels) const;
  Result<DateLabel> ParseTimeLabel(std::string_view label) const;
  Result<double> ParseNumberLabel(std::string_view label) const;
  // A periodic coordinate's numeric label moved by whole periods into the coordinate's span (from
  // its first label on, in its order); other labels as they are.
  double Unwrap(double value) const;
  // Select's wrapping range on a periodic coordinate; nullopt where the range does not wrap.
  Result<std::optional<std::vector<uint64_t>>> SelectWrappedRange(
      const LabelSelection& selection) const;
  // Three-way comparison of the label at `index` with a key.
  int Compare(uint64_t index, const Key& key) const;
  // First index whose label is not before `key` in the coordinate's order (`after`: strictly
  // after), i.e. std::lower_bound / std::upper_bound along the index.
  uint64_t Position(const Key& key, bool after) const;
  std::string Extent() const;
  Status LabelError(ErrorCode code, std::string_view label, std::string_view why) const;

  std::string dim_;
  std::string where_;
  uint64_t size_ = 0;
  DataType dtype_ = DataType::kFloat64;
  bool increasing_ = true;
  bool periodic_ = false;
  double period_ = 0;  // numeric periodic coordinates: labels are read modulo this
  std::optional<CfTimeUnits> time_units_;
  bool text_ = false;
  std::string along_;
  std::vector<std::string> labels_;  // text coordinates
  std::vector<double> numbers_;      // numeric coordinates
  std::vector<int64_t> seconds_;     // time coordinates: calendar seconds
};

// A duration ("6h") in seconds: a whole number above 0 of s, min, h or d (LoaderOptions::frequency,
// the tendencies of `zarrstream stats`). Errors are kConfig and read "<what> '<text>': ...".
Result<int64_t> ParseDuration(std::string_view what, const std::string& text);

}  // namespace zarrstream

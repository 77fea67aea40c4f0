// Coordinates: loading a dimension's labels and selecting by label.
#include "dataset/coordinates.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <utility>

#include "array/array_state.h"
#include "metadata/float16.h"

namespace zarrstream {

namespace {

template <typename T>
void AppendAs(const std::byte* data, uint64_t n, std::vector<double>* out) {
  for (uint64_t i = 0; i < n; ++i) {
    T v;
    std::memcpy(&v, data + i * sizeof(T), sizeof(T));
    out->push_back(static_cast<double>(v));
  }
}

// The values of a numeric array as doubles (int64 beyond 2^53 rounds: coordinates never get there).
Result<std::vector<double>> ValuesAsDoubles(DataType dtype, const std::vector<std::byte>& raw,
                                            uint64_t n) {
  std::vector<double> out;
  out.reserve(n);
  const std::byte* p = raw.data();
  switch (dtype) {
    case DataType::kInt8:
      AppendAs<int8_t>(p, n, &out);
      break;
    case DataType::kInt16:
      AppendAs<int16_t>(p, n, &out);
      break;
    case DataType::kInt32:
      AppendAs<int32_t>(p, n, &out);
      break;
    case DataType::kInt64:
      AppendAs<int64_t>(p, n, &out);
      break;
    case DataType::kUInt8:
      AppendAs<uint8_t>(p, n, &out);
      break;
    case DataType::kUInt16:
      AppendAs<uint16_t>(p, n, &out);
      break;
    case DataType::kUInt32:
      AppendAs<uint32_t>(p, n, &out);
      break;
    case DataType::kUInt64:
      AppendAs<uint64_t>(p, n, &out);
      break;
    case DataType::kFloat32:
      AppendAs<float>(p, n, &out);
      break;
    case DataType::kFloat64:
      AppendAs<double>(p, n, &out);
      break;
    case DataType::kFloat16:
      for (uint64_t i = 0; i < n; ++i) {
        uint16_t bits;
        std::memcpy(&bits, p + i * 2, 2);
        out.push_back(Float16BitsToDouble(bits));
      }
      break;
    default: {
      std::string s = "data type ";
      s += DataTypeName(dtype);
      s += " cannot label a dimension (numbers or CF times only)";
      return UnsupportedError(std::move(s));
    }
  }
  return out;
}

// `value` rounded to what the coordinate's data type can hold, so labels compare as the stored
// values do.
double RoundToDataType(double value, DataType dtype) {
  if (dtype == DataType::kFloat32) return static_cast<double>(static_cast<float>(value));
  if (dtype == DataType::kFloat16) return Float16BitsToDouble(DoubleToFloat16Bits(value));
  return value;
}

std::string FormatNumber(double value, DataType dtype) {
  char buf[64];
  std::to_chars_result r;
  if (dtype == DataType::kFloat32 || dtype == DataType::kFloat16) {
    r = std::to_chars(buf, buf + sizeof(buf), static_cast<float>(value));
  } else {
    r = std::to_chars(buf, buf + sizeof(buf), value);
  }
  return std::string(buf, r.ptr);
}

}  // namespace

Result<Coordinate> Coordinate::Load(const Group& group, std::string_view dim) {
  std::string where = "group at ";
  where += group.url();
  const auto& names = group.array_names();
  if (std::find(names.begin(), names.end(), dim) == names.end()) {
    std::string s = "no coordinate array '";
    s += dim;
    s += "' in ";
    s += where;
    s += " (a dimension's labels are the 1-D array named after it)";
    return NotFoundError(std::move(s));
  }
  ZS_ASSIGN_OR_RETURN(Array array, group.OpenArray(dim));
  return FromArray(array, dim, where);
}

Result<Coordinate> Coordinate::FromArray(const Array& array, std::string_view dim,
                                         std::string_view where) {
  Coordinate c;
  c.dim_ = std::string(dim);
  c.where_ = std::string(where);
  c.dtype_ = array.dtype();
  const std::string what = c.Describe();
  if (array.rank() != 1) {
    return InvalidArgumentError(what + " has shape " + nlohmann::json(array.shape()).dump() +
                                "; a coordinate must be 1-D");
  }
  c.size_ = array.shape()[0];
  c.along_ = c.dim_;
  const std::optional<ExtendedType>& extended = array.extended_type();
  if (extended && extended->is_text()) {
    if (extended->kind == ExtendedType::Kind::kJson) {
      return InvalidArgumentError(what + " holds JSON objects, which cannot label a dimension");
    }
    c.text_ = true;
    if (!array.dims().empty()) c.along_ = array.dims()[0];
    const uint64_t start = 0;
    ZS_ASSIGN_OR_RETURN_CTX(c.labels_, array.ReadText({&start, 1}, {&c.size_, 1}),
                            "reading " + what);
    return c;
  }
  if (!array.dims().empty() && array.dims()[0] != dim) {
    return InvalidArgumentError(what + " runs along dimension '" + array.dims()[0] + "', not '" +
                                std::string(dim) + "'");
  }
  std::vector<std::byte> raw(c.size_ * DataTypeSize(c.dtype_));
  ZS_RETURN_IF_ERROR_CTX(array.ReadAll(raw.data()), "reading " + what);

  const nlohmann::json& attributes = array.state().metadata.attributes;
  const auto units = attributes.find("units");
  if (extended) {
    ZS_RETURN_IF_ERROR_CTX(c.DecodeDateTime64(*extended, raw), what);
  } else {
    ZS_ASSIGN_OR_RETURN_CTX(c.numbers_, ValuesAsDoubles(c.dtype_, raw, c.size_), what);
  }
  if (!extended && units != attributes.end() && units->is_string() &&
      units->get_ref<const std::string&>().find(" since ") != std::string::npos) {
    std::string calendar;
    const auto cal = attributes.find("calendar");
    if (cal != attributes.end() && cal->is_string()) calendar = cal->get<std::string>();
    ZS_ASSIGN_OR_RETURN_CTX(
        c.time_units_, CfTimeUnits::Parse(units->get_ref<const std::string&>(), calendar), what);
    c.seconds_.reserve(c.size_);
    for (uint64_t i = 0; i < c.size_; ++i) {
      // Integers decode exactly; float coordinates (and uint64 beyond int64) go through double.
      int64_t integer = 0;
      bool exact = false;
      if (c.dtype_ == DataType::kInt64) {
        std::memcpy(&integer, raw.data() + i * 8, 8);
        exact = true;
      } else if (c.dtype_ == DataType::kUInt64) {
        uint64_t u;
        std::memcpy(&u, raw.data() + i * 8, 8);
        exact = u <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
        integer = static_cast<int64_t>(u);
      } else if (!IsFloatingPoint(c.dtype_)) {
        integer = static_cast<int64_t>(c.numbers_[i]);  // 32 bits or fewer: exact in a double
        exact = true;
      }
      Result<int64_t> seconds = exact ? c.time_units_->DecodeSeconds(integer)
                                      : c.time_units_->DecodeSeconds(c.numbers_[i]);
      ZS_RETURN_IF_ERROR_CTX(seconds, what + ", index " + std::to_string(i));
      c.seconds_.push_back(*seconds);
    }
    c.numbers_.clear();
  }

  // Strict monotonicity: the direction is set by the first pair, every pair must agree.
  for (uint64_t i = 0; i < c.size_; ++i) {
    const bool nan = !c.is_time() && c.numbers_[i] != c.numbers_[i];
    if (nan) return InvalidArgumentError(what + " has NaN at index " + std::to_string(i));
  }
  if (c.size_ >= 2) {
    c.increasing_ = c.is_time() ? c.seconds_[1] > c.seconds_[0] : c.numbers_[1] > c.numbers_[0];
    for (uint64_t i = 0; i + 1 < c.size_; ++i) {
      const bool up =
          c.is_time() ? c.seconds_[i + 1] > c.seconds_[i] : c.numbers_[i + 1] > c.numbers_[i];
      const bool down =
          c.is_time() ? c.seconds_[i + 1] < c.seconds_[i] : c.numbers_[i + 1] < c.numbers_[i];
      if (up != c.increasing_ || (!up && !down)) {
        std::string s = what;
        s += " is not strictly monotonic (";
        s += c.FormatLabel(i);
        s += " at index ";
        s += std::to_string(i);
        s += ", then ";
        s += c.FormatLabel(i + 1);
        s += "); selecting by label needs sorted, distinct labels";
        return InvalidArgumentError(std::move(s));
      }
    }
  }
  c.DetectPeriod(units != attributes.end() && units->is_string() &&
                 (*units == "degrees_east" || *units == "degree_east"));
  return c;
}

void Coordinate::DetectPeriod(bool degrees_east) {
  if (text_ || is_time() || size_ < 2 || !(dim_ == "longitude" || dim_ == "lon" || degrees_east)) {
    return;
  }
  // Evenly spaced (within float32 rounding of the labels) and once around: size × step = 360.
  const double step = (numbers_.back() - numbers_.front()) / static_cast<double>(size_ - 1);
  const double tolerance = 1e-3 * std::abs(step);
  for (uint64_t i = 0; i + 1 < size_; ++i) {
    if (std::abs(numbers_[i + 1] - numbers_[i] - step) > tolerance) return;
  }
  if (std::abs(static_cast<double>(size_) * std::abs(step) - 360.0) > tolerance) return;
  periodic_ = true;
  period_ = 360.0;
}

Result<Coordinate> Coordinate::AsPeriodic(bool periodic) const {
  Coordinate c = *this;
  c.periodic_ = periodic;
  c.period_ = 0;
  if (!periodic) return c;
  if (is_time()) {
    return InvalidArgumentError(Describe() + " holds times, which cannot wrap around");
  }
  if (!text_ && size_ >= 2) {
    c.period_ = std::abs(numbers_.back() - numbers_.front()) / static_cast<double>(size_ - 1) *
                static_cast<double>(size_);
  }
  return c;
}

Status Coordinate::DecodeDateTime64(const ExtendedType& type, const std::vector<std::byte>& raw) {
  if (type.kind != ExtendedType::Kind::kDateTime64) {
    return InvalidArgumentError("holds " + type.Name() + " values, which cannot label a dimension");
  }
  // Seconds per tick, or ticks per second for the units below a second.
  static constexpr std::pair<std::string_view, int64_t> kSeconds[] = {
      {"W", 604800}, {"D", 86400}, {"h", 3600}, {"m", 60}, {"s", 1}};
  static constexpr std::pair<std::string_view, int64_t> kPerSecond[] = {
      {"ms", 1000}, {"us", 1000000}, {"ns", 1000000000}};
  int64_t multiply = 0, divide = 1;
  for (const auto& [unit, seconds] : kSeconds) {
    if (type.unit == unit) multiply = seconds;
  }
  for (const auto& [unit, per_second] : kPerSecond) {
    if (type.unit == unit) {
      multiply = 1;
      divide = per_second;
    }
  }
  if (multiply == 0) {
    return UnsupportedError("datetime64 unit '" + type.unit +
                            "' is not supported for labels (W, D, h, m, s, ms, us, ns are)");
  }
  multiply *= type.scale_factor;
  ZS_ASSIGN_OR_RETURN(CfTimeUnits units,
                      CfTimeUnits::Parse("seconds since 1970-01-01", "proleptic_gregorian"));
  time_units_ = units;
  seconds_.reserve(size_);
  for (uint64_t i = 0; i < size_; ++i) {
    int64_t ticks = 0;
    std::memcpy(&ticks, raw.data() + i * 8, 8);
    if (ticks == std::numeric_limits<int64_t>::min()) {
      return InvalidArgumentError("has NaT at index " + std::to_string(i));
    }
    int64_t scaled = 0;
    if (__builtin_mul_overflow(ticks, multiply, &scaled)) {
      return InvalidArgumentError("value at index " + std::to_string(i) + " is out of range");
    }
    // Floor division: a time before 1970 with a fraction of a second belongs to the second before.
    int64_t seconds = scaled / divide;
    if (scaled % divide != 0 && scaled < 0) --seconds;
    ZS_ASSIGN_OR_RETURN_CTX(int64_t decoded, time_units_->DecodeSeconds(seconds),
                            "index " + std::to_string(i));
    seconds_.push_back(decoded);
  }
  return Status::Ok();
}

Coordinate Coordinate::Slice(IndexRange range) const {
  Coordinate c = *this;
  c.size_ = range.size();
  if (c.size_ != size_) c.periodic_ = false, c.period_ = 0;  // no longer once around
  const auto cut = [&](auto& values) {
    if (values.empty()) return;
    values.assign(values.begin() + static_cast<ptrdiff_t>(range.start),
                  values.begin() + static_cast<ptrdiff_t>(range.stop));
  };
  cut(c.labels_);
  cut(c.numbers_);
  cut(c.seconds_);
  return c;
}

bool Coordinate::SameLabel(uint64_t index, const Coordinate& other, uint64_t other_index) const {
  if (text_ != other.text_ || is_time() != other.is_time()) return false;
  if (text_) return labels_[index] == other.labels_[other_index];
  if (is_time()) {
    return time_units_->calendar() == other.time_units_->calendar() &&
           seconds_[index] == other.seconds_[other_index];
  }
  return numbers_[index] == other.numbers_[other_index];
}

std::optional<uint64_t> Coordinate::FirstDifference(const Coordinate& other) const {
  const uint64_t common = std::min(size_, other.size_);
  for (uint64_t i = 0; i < common; ++i) {
    if (!SameLabel(i, other, i)) return i;
  }
  if (size_ != other.size_) return common;
  return std::nullopt;
}

Result<Coordinate> Coordinate::Concat(std::span<const Coordinate> parts, std::string_view where) {
  if (parts.empty()) return InvalidArgumentError("concatenating no coordinates");
  Coordinate c = parts.front();
  c.where_ = std::string(where);
  for (size_t k = 1; k < parts.size(); ++k) {
    const Coordinate& part = parts[k];
    const bool same_kind =
        part.text_ == c.text_ && part.is_time() == c.is_time() &&
        (!c.is_time() || part.time_units_->calendar() == c.time_units_->calendar());
    if (!same_kind) {
      return InvalidArgumentError(part.Describe() + " holds other labels than " +
                                  parts.front().Describe() +
                                  " (times of another calendar, numbers or text): they cannot "
                                  "be concatenated");
    }
    c.labels_.insert(c.labels_.end(), part.labels_.begin(), part.labels_.end());
    c.numbers_.insert(c.numbers_.end(), part.numbers_.begin(), part.numbers_.end());
    c.seconds_.insert(c.seconds_.end(), part.seconds_.begin(), part.seconds_.end());
    c.size_ += part.size_;
  }
  return c;
}

std::string Coordinate::Describe() const {
  std::string s = "coordinate '";
  s += dim_;
  s += "' of ";
  s += where_;
  return s;
}

std::string Coordinate::FormatLabel(uint64_t index) const {
  if (text_) return labels_[index];
  if (is_time())
    return FormatDateTime(FromCalendarSeconds(seconds_[index], time_units_->calendar()));
  return FormatNumber(numbers_[index], dtype_);
}

std::string Coordinate::Extent() const {
  if (size_ == 0) return "it is empty";
  std::string s = "its ";
  s += std::to_string(size_);
  s += size_ == 1 ? " label is " : " labels run from ";
  s += FormatLabel(0);
  if (size_ > 1) {
    s += " to ";
    s += FormatLabel(size_ - 1);
  }
  return s;
}

Status Coordinate::LabelError(ErrorCode code, std::string_view label, std::string_view why) const {
  std::string s = "selecting '";
  s += label;
  s += "' on ";
  s += Describe();
  s += ": ";
  s += why;
  return {code, std::move(s)};
}

Result<DateLabel> Coordinate::ParseTimeLabel(std::string_view label) const {
  Result<DateLabel> parsed = ParseDateLabel(label);
  if (!parsed.ok()) {
    return LabelError(ErrorCode::kInvalidArgument, label,
                      parsed.status().message() + " (this is a time coordinate, in the '" +
                          std::string(CalendarName(time_units_->calendar())) + "' calendar)");
  }
  Status exists = ToCalendarSeconds(parsed->start, time_units_->calendar()).status();
  if (!exists.ok()) return LabelError(ErrorCode::kInvalidArgument, label, exists.message());
  return parsed;
}

Result<double> Coordinate::ParseNumberLabel(std::string_view label) const {
  double value = 0;
  auto [end, ec] = std::from_chars(label.data(), label.data() + label.size(), value);
  if (ec != std::errc() || end != label.data() + label.size() || label.empty() || value != value) {
    return LabelError(ErrorCode::kInvalidArgument, label, "not a number");
  }
  return RoundToDataType(Unwrap(value), dtype_);
}

double Coordinate::Unwrap(double value) const {
  if (period_ <= 0 || numbers_.empty()) return value;
  const double turns = (value - numbers_[0]) / period_;
  return value - (increasing_ ? std::floor(turns) : std::ceil(turns)) * period_;
}

Result<std::optional<std::vector<uint64_t>>> Coordinate::SelectWrappedRange(
    const LabelSelection& selection) const {
  if (!periodic_ || text_ || is_time() || !selection.start || !selection.stop) {
    return std::optional<std::vector<uint64_t>>();
  }
  const std::string range = *selection.start + ":" + *selection.stop;
  double raw[2] = {0, 0};
  for (int i = 0; i < 2; ++i) {
    const std::string& label = i == 0 ? *selection.start : *selection.stop;
    auto [end, ec] = std::from_chars(label.data(), label.data() + label.size(), raw[i]);
    if (ec != std::errc() || end != label.data() + label.size() || label.empty() ||
        raw[i] != raw[i]) {
      return LabelError(ErrorCode::kInvalidArgument, label, "not a number");
    }
  }
  Key from, to;
  from.number = RoundToDataType(Unwrap(raw[0]), dtype_);
  to.number = RoundToDataType(Unwrap(raw[1]), dtype_);
  const uint64_t first = Position(from, false);
  std::vector<uint64_t> indices;
  const double span = increasing_ ? raw[1] - raw[0] : raw[0] - raw[1];
  if (period_ > 0 && span >= period_) {
    // A whole period or more: every index once, from the start's on.
    for (uint64_t i = 0; i < size_; ++i) indices.push_back((first + i) % size_);
    return std::optional(std::move(indices));
  }
  const bool wraps = increasing_ ? from.number > to.number : from.number < to.number;
  if (!wraps) return std::optional<std::vector<uint64_t>>();
  const uint64_t stop = Position(to, true);
  for (uint64_t i = first; i < size_; ++i) indices.push_back(i);
  for (uint64_t i = 0; i < stop; ++i) indices.push_back(i);
  if (indices.empty()) {
    return LabelError(ErrorCode::kInvalidArgument, range, "selects no label (" + Extent() + ")");
  }
  return std::optional(std::move(indices));
}

int Coordinate::Compare(uint64_t index, const Key& key) const {
  int sign = 0;
  if (is_time()) {
    sign = seconds_[index] < key.seconds ? -1 : (seconds_[index] > key.seconds ? 1 : 0);
  } else {
    sign = numbers_[index] < key.number ? -1 : (numbers_[index] > key.number ? 1 : 0);
  }
  return increasing_ ? sign : -sign;
}

uint64_t Coordinate::Position(const Key& key, bool after) const {
  uint64_t lo = 0, hi = size_;
  while (lo < hi) {
    const uint64_t mid = lo + (hi - lo) / 2;
    const int c = Compare(mid, key);
    if (c < 0 || (after && c == 0)) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

Result<Coordinate::LabelBounds> Coordinate::Bounds(std::string_view label) const {
  LabelBounds b;
  if (is_time()) {
    ZS_ASSIGN_OR_RETURN(DateLabel date, ParseTimeLabel(label));
    ZS_ASSIGN_OR_RETURN(b.first.seconds, ToCalendarSeconds(date.start, time_units_->calendar()));
    ZS_ASSIGN_OR_RETURN(b.last.seconds, LabelEndSeconds(date, time_units_->calendar()));
  } else {
    ZS_ASSIGN_OR_RETURN(b.first.number, ParseNumberLabel(label));
    b.last = b.first;
  }
  return b;
}

Result<IndexRange> Coordinate::SelectRange(std::optional<std::string_view> start,
                                           std::optional<std::string_view> stop) const {
  std::string range = std::string(start.value_or("")) + ":" + std::string(stop.value_or(""));
  if (text_) return SelectTextRange(start, stop, range);
  std::optional<LabelBounds> from, to;
  if (start) {
    ZS_ASSIGN_OR_RETURN(from, Bounds(*start));
  }
  if (stop) {
    ZS_ASSIGN_OR_RETURN(to, Bounds(*stop));
  }
  // In coordinate order the start end begins with the part of its period that comes first: its
  // first instant on an increasing axis, its last on a decreasing one.
  const Key* begin_key = from ? (increasing_ ? &from->first : &from->last) : nullptr;
  const Key* end_key = to ? (increasing_ ? &to->last : &to->first) : nullptr;
  if (begin_key && end_key) {
    const bool reversed = is_time() ? (increasing_ ? begin_key->seconds > end_key->seconds
                                                   : begin_key->seconds < end_key->seconds)
                                    : (increasing_ ? begin_key->number > end_key->number
                                                   : begin_key->number < end_key->number);
    if (reversed) {
      std::string why = "the range runs against the coordinate, whose labels ";
      why += increasing_ ? "increase" : "decrease";
      why += " (";
      why += Extent();
      why += "); write it as ";
      why += dim_;
      why += "=";
      why += *stop;
      why += ":";
      why += *start;
      return LabelError(ErrorCode::kInvalidArgument, range, why);
    }
  }
  IndexRange r;
  r.start = begin_key ? Position(*begin_key, false) : 0;
  r.stop = end_key ? Position(*end_key, true) : size_;
  if (r.stop <= r.start) {
    return LabelError(ErrorCode::kInvalidArgument, range, "selects no label (" + Extent() + ")");
  }
  return r;
}

Result<IndexRange> Coordinate::SelectTextRange(std::optional<std::string_view> start,
                                               std::optional<std::string_view> stop,
                                               std::string_view range) const {
  // A range of text labels is lexicographic, as xarray slices a sorted string index: only for
  // distinct labels in increasing order.
  for (uint64_t i = 0; i + 1 < size_; ++i) {
    if (!(labels_[i] < labels_[i + 1])) {
      return LabelError(ErrorCode::kInvalidArgument, range,
                        "a range of text labels needs labels sorted and distinct, and '" +
                            labels_[i] + "' at index " + std::to_string(i) + " is followed by '" +
                            labels_[i + 1] + "'; select the labels by name instead");
    }
  }
  IndexRange r;
  r.start = start ? std::lower_bound(labels_.begin(), labels_.end(), *start) - labels_.begin() : 0;
  r.stop = stop ? std::upper_bound(labels_.begin(), labels_.end(), *stop) - labels_.begin() : size_;
  if (r.stop <= r.start) {
    return LabelError(ErrorCode::kInvalidArgument, range, "selects no label (" + Extent() + ")");
  }
  return r;
}

Result<std::vector<uint64_t>> Coordinate::SelectTextValues(
    std::span<const std::string> labels) const {
  std::vector<uint64_t> indices;
  std::vector<bool> taken(size_, false);
  for (const std::string& label : labels) {
    bool found = false;
    for (uint64_t i = 0; i < size_; ++i) {
      if (labels_[i] != label) continue;
      if (taken[i]) return LabelError(ErrorCode::kInvalidArgument, label, "is selected twice");
      taken[i] = true;
      found = true;
      indices.push_back(i);
    }
    if (!found) {
      std::vector<std::string> distinct;
      for (const std::string& l : labels_) {
        if (std::find(distinct.begin(), distinct.end(), l) == distinct.end()) distinct.push_back(l);
        if (distinct.size() > 20) break;
      }
      std::string why = "no such label; available: ";
      for (size_t k = 0; k < distinct.size() && k < 20; ++k) {
        if (k > 0) why += ", ";
        why += "'" + distinct[k] + "'";
      }
      if (distinct.size() > 20) why += ", ...";
      return LabelError(ErrorCode::kNotFound, label, why);
    }
  }
  return indices;
}

Result<std::vector<uint64_t>> Coordinate::SelectValues(std::span<const std::string> labels) const {
  if (text_) return SelectTextValues(labels);
  std::vector<uint64_t> indices;
  indices.reserve(labels.size());
  for (const std::string& label : labels) {
    ZS_ASSIGN_OR_RETURN(LabelBounds bounds, Bounds(label));
    // The labels inside what `label` names, in coordinate order (one for a number or a time to
    // the second; every step of the day for "1979-01-01").
    const Key& begin = increasing_ ? bounds.first : bounds.last;
    const Key& end = increasing_ ? bounds.last : bounds.first;
    const uint64_t first = Position(begin, false);
    const uint64_t stop = Position(end, true);
    if (first < stop) {
      for (uint64_t i = first; i < stop; ++i) {
        if (std::find(indices.begin(), indices.end(), i) != indices.end()) {
          return LabelError(ErrorCode::kInvalidArgument, label,
                            "selects " + FormatLabel(i) + " again");
        }
        indices.push_back(i);
      }
      continue;
    }
    // The labels on either side of where it would be: what the user probably meant.
    std::string why = "no such label; nearest available: ";
    const uint64_t near_first = first >= 2 ? first - 2 : 0;
    const uint64_t near_last = std::min(size_, first + 2);
    for (uint64_t i = near_first; i < near_last; ++i) {
      if (i > near_first) why += ", ";
      why += FormatLabel(i);
    }
    why += " (";
    why += Extent();
    why += ")";
    return LabelError(ErrorCode::kNotFound, label, why);
  }
  return indices;
}

Result<std::vector<uint64_t>> Coordinate::Select(const LabelSelection& selection) const {
  if (!selection.is_range()) return SelectValues(selection.values);
  ZS_ASSIGN_OR_RETURN(std::optional<std::vector<uint64_t>> wrapped, SelectWrappedRange(selection));
  if (wrapped) return std::move(*wrapped);
  std::optional<std::string_view> start, stop;
  if (selection.start) start = *selection.start;
  if (selection.stop) stop = *selection.stop;
  ZS_ASSIGN_OR_RETURN(IndexRange range, SelectRange(start, stop));
  std::vector<uint64_t> indices(range.size());
  for (uint64_t i = 0; i < range.size(); ++i) indices[i] = range.start + i;
  return indices;
}

Result<int64_t> ParseDuration(std::string_view what, const std::string& text) {
  size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  const std::string unit = text.substr(digits);
  static const std::map<std::string, int64_t> kUnits = {{"s", 1},    {"min", 60},  {"h", 3600},
                                                        {"H", 3600}, {"d", 86400}, {"D", 86400}};
  const auto it = kUnits.find(unit);
  int64_t count = 0;
  if (digits == 0 || digits > 9 || it == kUnits.end() ||
      (count = std::stoll(text.substr(0, digits))) == 0) {
    return ConfigError(std::string(what) + " '" + text +
                       "': expected a whole number of s, min, h or d above 0 (\"6h\")");
  }
  return count * it->second;
}

}  // namespace zarrstream

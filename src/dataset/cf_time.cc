// CF time units, calendars and date labels. Day counts per calendar:
//   proleptic_gregorian  days since 1970-01-01 (Hinnant's days_from_civil, exact for any year);
//   standard             the same count for Gregorian dates, and the Julian Day Number formulas
//                        for Julian ones, so both halves share one axis;
//   noleap, all_leap, 360_day   days since year 0 (every year the same length).
#include "dataset/cf_time.h"

#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>

namespace zarrstream {

namespace {

constexpr int64_t kSecondsPerDay = 86'400;
constexpr int64_t kMicrosecondsPerSecond = 1'000'000;
// Julian Day Number of 1970-01-01 (the zero of the Gregorian day count) and of 1582-10-15 (the
// first Gregorian day of the standard calendar).
constexpr int64_t kJdnOfUnixEpoch = 2'440'588;
constexpr int64_t kJdnOfGregorianStart = 2'299'161;
// |year| stays below this so that no day or second count can overflow int64; decoded times stay
// within kMaxAbsSeconds (about 950 million years) of the calendar's epoch.
constexpr int64_t kMaxAbsYear = 999'999'999;
constexpr int64_t kMaxAbsSeconds = 30'000'000'000'000'000;

constexpr std::array<int, 13> kCumulativeDays = {0,   31,  59,  90,  120, 151, 181,
                                                 212, 243, 273, 304, 334, 365};
constexpr std::array<int, 13> kCumulativeDaysLeap = {0,   31,  60,  91,  121, 152, 182,
                                                     213, 244, 274, 305, 335, 366};

int64_t FloorDiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

bool IsGregorianLeap(int64_t y) { return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0; }
bool IsJulianLeap(int64_t y) { return FloorDiv(y, 4) * 4 == y; }

int DaysInMonth(int64_t astronomical_year, int month, bool julian) {
  static constexpr std::array<int, 12> kDays = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  if (month != 2) return kDays[month - 1];
  const bool leap = julian ? IsJulianLeap(astronomical_year) : IsGregorianLeap(astronomical_year);
  return leap ? 29 : 28;
}

// Hinnant's days_from_civil: days since 1970-01-01 of a proleptic Gregorian date.
int64_t DaysFromCivil(int64_t y, int m, int d) {
  y -= m <= 2 ? 1 : 0;
  const int64_t era = FloorDiv(y, 400);
  const int64_t yoe = y - era * 400;
  const int64_t doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
  const int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

DateTime CivilFromDays(int64_t z) {
  z += 719468;
  const int64_t era = FloorDiv(z, 146097);
  const int64_t doe = z - era * 146097;
  const int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const int64_t mp = (5 * doy + 2) / 153;
  DateTime t;
  t.day = static_cast<int>(doy - (153 * mp + 2) / 5 + 1);
  t.month = static_cast<int>(mp < 10 ? mp + 3 : mp - 9);
  t.year = yoe + era * 400 + (t.month <= 2 ? 1 : 0);
  return t;
}

int64_t JdnFromJulian(int64_t y, int m, int d) {
  const int64_t a = (14 - m) / 12;
  const int64_t yy = y + 4800 - a;
  const int64_t mm = m + 12 * a - 3;
  return d + FloorDiv(153 * mm + 2, 5) + 365 * yy + FloorDiv(yy, 4) - 32083;
}

DateTime JulianFromJdn(int64_t jdn) {
  const int64_t c = jdn + 32082;
  const int64_t d = FloorDiv(4 * c + 3, 1461);
  const int64_t e = c - FloorDiv(1461 * d, 4);
  const int64_t m = FloorDiv(5 * e + 2, 153);
  DateTime t;
  t.day = static_cast<int>(e - FloorDiv(153 * m + 2, 5) + 1);
  t.month = static_cast<int>(m + 3 - 12 * (m / 10));
  t.year = d - 4800 + m / 10;
  return t;
}

// Month and day of day-of-year `doy` (0-based) in a year of fixed length.
void MonthDayFromDayOfYear(int doy, const std::array<int, 13>& cumulative, DateTime* t) {
  int month = 1;
  while (doy >= cumulative[month]) ++month;
  t->month = month;
  t->day = doy - cumulative[month - 1] + 1;
}

std::string DateError(const DateTime& time, Calendar calendar, std::string_view why) {
  std::string s = "date ";
  s += FormatDateTime(time);
  s += " does not exist in the '";
  s += CalendarName(calendar);
  s += "' calendar (";
  s += why;
  s += ")";
  return s;
}

Result<int64_t> DaysInCalendar(const DateTime& t, Calendar calendar) {
  if (t.year < -kMaxAbsYear || t.year > kMaxAbsYear)
    return InvalidArgumentError(DateError(t, calendar, "year out of range"));
  if (t.month < 1 || t.month > 12) return InvalidArgumentError(DateError(t, calendar, "month"));
  if (t.day < 1) return InvalidArgumentError(DateError(t, calendar, "day"));
  switch (calendar) {
    case Calendar::kProlepticGregorian:
      if (t.day > DaysInMonth(t.year, t.month, false))
        return InvalidArgumentError(DateError(t, calendar, "no such day in that month"));
      return DaysFromCivil(t.year, t.month, t.day);
    case Calendar::kStandard: {
      if (t.year == 0) return InvalidArgumentError(DateError(t, calendar, "it has no year 0"));
      const int64_t astronomical = t.year < 0 ? t.year + 1 : t.year;
      const bool julian = t < DateTime{1582, 10, 15, 0, 0, 0};
      if (t.day > DaysInMonth(astronomical, t.month, julian))
        return InvalidArgumentError(DateError(t, calendar, "no such day in that month"));
      if (!julian) return DaysFromCivil(t.year, t.month, t.day);
      if (t >= DateTime{1582, 10, 5, 0, 0, 0}) {
        return InvalidArgumentError(DateError(t, calendar, "1582-10-04 is followed by 1582-10-15"));
      }
      return JdnFromJulian(astronomical, t.month, t.day) - kJdnOfUnixEpoch;
    }
    case Calendar::kNoLeap:
      if (t.day > DaysInMonth(1, t.month, false))
        return InvalidArgumentError(DateError(t, calendar, "no such day in that month"));
      return t.year * 365 + kCumulativeDays[t.month - 1] + t.day - 1;
    case Calendar::kAllLeap:
      if (t.day > DaysInMonth(4, t.month, false))
        return InvalidArgumentError(DateError(t, calendar, "no such day in that month"));
      return t.year * 366 + kCumulativeDaysLeap[t.month - 1] + t.day - 1;
    case Calendar::kDay360:
      if (t.day > 30) return InvalidArgumentError(DateError(t, calendar, "months have 30 days"));
      return t.year * 360 + int64_t{t.month - 1} * 30 + t.day - 1;
  }
  return InternalError("unknown calendar");
}

DateTime DateFromDays(int64_t days, Calendar calendar) {
  DateTime t;
  switch (calendar) {
    case Calendar::kProlepticGregorian:
      t = CivilFromDays(days);
      break;
    case Calendar::kStandard:
      if (days + kJdnOfUnixEpoch >= kJdnOfGregorianStart) {
        t = CivilFromDays(days);
      } else {
        t = JulianFromJdn(days + kJdnOfUnixEpoch);
        if (t.year <= 0) t.year -= 1;  // historical numbering: 1 BC is year -1
      }
      break;
    case Calendar::kNoLeap:
      t.year = FloorDiv(days, 365);
      MonthDayFromDayOfYear(static_cast<int>(days - t.year * 365), kCumulativeDays, &t);
      break;
    case Calendar::kAllLeap:
      t.year = FloorDiv(days, 366);
      MonthDayFromDayOfYear(static_cast<int>(days - t.year * 366), kCumulativeDaysLeap, &t);
      break;
    case Calendar::kDay360: {
      t.year = FloorDiv(days, 360);
      const int64_t doy = days - t.year * 360;
      t.month = static_cast<int>(doy / 30 + 1);
      t.day = static_cast<int>(doy % 30 + 1);
      break;
    }
  }
  return t;
}

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// A cursor over a string for the small hand-written grammars below.
class Scanner {
 public:
  explicit Scanner(std::string_view text) : text_(text) {}

  bool done() const { return pos_ >= text_.size(); }
  char peek() const { return done() ? '\0' : text_[pos_]; }
  std::string_view rest() const { return text_.substr(pos_); }
  bool Consume(char c) {
    if (peek() != c) return false;
    ++pos_;
    return true;
  }
  size_t SkipSpaces() {
    const size_t start = pos_;
    while (!done() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
    return pos_ - start;
  }
  // Reads between `min_digits` and `max_digits` decimal digits; false (nothing consumed) if fewer.
  bool Digits(size_t min_digits, size_t max_digits, int64_t* value) {
    size_t n = 0;
    while (pos_ + n < text_.size() && n < max_digits &&
           std::isdigit(static_cast<unsigned char>(text_[pos_ + n]))) {
      ++n;
    }
    if (n < min_digits) return false;
    std::from_chars(text_.data() + pos_, text_.data() + pos_ + n, *value);
    pos_ += n;
    return true;
  }
  bool AtDigit() const { return std::isdigit(static_cast<unsigned char>(peek())) != 0; }

 private:
  std::string_view text_;
  size_t pos_ = 0;
};

Status CheckFieldRanges(const DateTime& t, std::string_view text) {
  const char* field = nullptr;
  if (t.month < 1 || t.month > 12) {
    field = "month";
  } else if (t.day < 1 || t.day > 31) {
    field = "day";
  } else if (t.hour > 23) {
    field = "hour";
  } else if (t.minute > 59) {
    field = "minute";
  } else if (t.second > 59) {
    field = "second";
  }
  if (field == nullptr) return Status::Ok();
  std::string s = "invalid date '";
  s += text;
  s += "': ";
  s += field;
  s += " out of range";
  return InvalidArgumentError(std::move(s));
}

Status BadDateLabel(std::string_view text) {
  std::string s = "invalid date '";
  s += text;
  s += "' (expected YYYY, YYYY-MM, YYYY-MM-DD, YYYY-MM-DDTHH, YYYY-MM-DDTHH:MM or ";
  s += "YYYY-MM-DDTHH:MM:SS)";
  return InvalidArgumentError(std::move(s));
}

struct UnitName {
  const char* name;
  int64_t microseconds;
};

// cftime's unit spellings (months and years are not supported: their length varies).
constexpr UnitName kUnitNames[] = {
    {"microseconds", 1},
    {"microsecond", 1},
    {"microsecs", 1},
    {"microsec", 1},
    {"us", 1},
    {"milliseconds", 1000},
    {"millisecond", 1000},
    {"millisecs", 1000},
    {"millisec", 1000},
    {"msecs", 1000},
    {"msec", 1000},
    {"ms", 1000},
    {"seconds", 1'000'000},
    {"second", 1'000'000},
    {"secs", 1'000'000},
    {"sec", 1'000'000},
    {"s", 1'000'000},
    {"minutes", 60'000'000},
    {"minute", 60'000'000},
    {"mins", 60'000'000},
    {"min", 60'000'000},
    {"hours", 3'600'000'000},
    {"hour", 3'600'000'000},
    {"hrs", 3'600'000'000},
    {"hr", 3'600'000'000},
    {"h", 3'600'000'000},
    {"days", 86'400'000'000},
    {"day", 86'400'000'000},
    {"d", 86'400'000'000},
};

Status BadUnits(std::string_view units, std::string_view why) {
  std::string s = "invalid CF time units '";
  s += units;
  s += "': ";
  s += why;
  return InvalidArgumentError(std::move(s));
}

// The reference date of CF units: lenient as cftime is ("1-1-1 00:00:0.0", "1900-1-1"), with an
// optional time zone. Returns the reference and its UTC offset in seconds.
Status ParseReference(std::string_view units, std::string_view text, DateTime* reference,
                      int64_t* utc_offset_seconds) {
  Scanner in(text);
  const bool negative_year = in.Consume('-');
  int64_t year = 0, month = 1, day = 1, hour = 0, minute = 0, second = 0;
  if (!in.Digits(1, 9, &year)) return BadUnits(units, "expected a date after 'since'");
  if (in.Consume('-')) {
    if (!in.Digits(1, 2, &month)) return BadUnits(units, "bad month");
    if (in.Consume('-') && !in.Digits(1, 2, &day)) return BadUnits(units, "bad day");
  }
  const bool t_separator = in.Consume('T');
  const size_t spaces = t_separator ? 0 : in.SkipSpaces();
  if ((t_separator || spaces > 0) && in.AtDigit()) {
    Scanner probe = in;
    int64_t digits = 0;
    probe.Digits(1, 2, &digits);
    if (probe.peek() != ':') {
      // cftime silently ignores an hour without minutes ("1900-01-01 06"), which would decode
      // six hours off from what the units say: refuse it.
      return BadUnits(units, "the time of day must be HH:MM or HH:MM:SS");
    }
    in.Digits(1, 2, &hour);
    in.Consume(':');
    if (!in.Digits(1, 2, &minute)) return BadUnits(units, "bad minute");
    if (in.Consume(':')) {
      if (!in.Digits(1, 2, &second)) return BadUnits(units, "bad second");
      if (in.Consume('.')) {
        int64_t fraction = 0;
        if (!in.Digits(1, 18, &fraction)) return BadUnits(units, "bad fraction of a second");
        if (fraction != 0) {
          return BadUnits(units, "a reference time with a fraction of a second is not supported");
        }
      }
    }
  }
  in.SkipSpaces();
  int64_t offset = 0;
  const std::string zone = Lower(in.rest());
  const bool utc = zone == "z" || zone == "utc" || zone == "gmt";
  if (!utc && (in.peek() == '+' || in.peek() == '-')) {
    const int64_t sign = in.Consume('-') ? -1 : 1;
    in.Consume('+');
    int64_t hh = 0, mm = 0;
    if (!in.Digits(1, 2, &hh)) return BadUnits(units, "bad time zone offset");
    in.Consume(':');
    if (in.AtDigit() && !in.Digits(2, 2, &mm)) return BadUnits(units, "bad time zone offset");
    if (hh > 23 || mm > 59) return BadUnits(units, "bad time zone offset");
    offset = sign * (hh * 3600 + mm * 60);
  }
  if (!utc && !in.done()) {
    std::string why = "unexpected '";
    why += in.rest();
    why += "'";
    return BadUnits(units, why);
  }
  reference->year = negative_year ? -year : year;
  reference->month = static_cast<int>(month);
  reference->day = static_cast<int>(day);
  reference->hour = static_cast<int>(hour);
  reference->minute = static_cast<int>(minute);
  reference->second = static_cast<int>(second);
  Status ranges = CheckFieldRanges(*reference, text);
  if (!ranges.ok()) return BadUnits(units, ranges.message());
  *utc_offset_seconds = offset;
  return Status::Ok();
}

Status DecodeOverflow(const CfTimeUnits& units, std::string_view value) {
  std::string s = "time value ";
  s += value;
  s += " in '";
  s += units.text();
  s += "' is outside the range of representable dates";
  return InvalidArgumentError(std::move(s));
}

}  // namespace

Result<Calendar> ParseCalendar(std::string_view name) {
  const std::string n = Lower(name);
  if (n.empty() || n == "standard" || n == "gregorian") return Calendar::kStandard;
  if (n == "proleptic_gregorian") return Calendar::kProlepticGregorian;
  if (n == "noleap" || n == "365_day") return Calendar::kNoLeap;
  if (n == "all_leap" || n == "366_day") return Calendar::kAllLeap;
  if (n == "360_day") return Calendar::kDay360;
  std::string s = "unsupported calendar '";
  s += name;
  s += "' (supported: standard, gregorian, proleptic_gregorian, noleap, 365_day, all_leap, ";
  s += "366_day, 360_day)";
  return UnsupportedError(std::move(s));
}

std::string_view CalendarName(Calendar calendar) {
  switch (calendar) {
    case Calendar::kStandard:
      return "standard";
    case Calendar::kProlepticGregorian:
      return "proleptic_gregorian";
    case Calendar::kNoLeap:
      return "noleap";
    case Calendar::kAllLeap:
      return "all_leap";
    case Calendar::kDay360:
      return "360_day";
  }
  return "unknown";
}

std::string FormatDateTime(const DateTime& time) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%s%04lld-%02d-%02dT%02d:%02d:%02d", time.year < 0 ? "-" : "",
                static_cast<long long>(time.year < 0 ? -time.year : time.year), time.month,
                time.day, time.hour, time.minute, time.second);
  return buf;
}

Result<DateLabel> ParseDateLabel(std::string_view text) {
  Scanner in(text);
  DateLabel label;
  DateTime& t = label.start;
  const bool negative = in.Consume('-');
  int64_t field = 0;
  if (!in.Digits(4, 9, &field) || in.AtDigit()) return BadDateLabel(text);
  t.year = negative ? -field : field;
  label.precision = DatePrecision::kYear;
  struct Step {
    char separator;
    DatePrecision precision;
  };
  // Each further field is optional, but only in order: month, day, hour, minute, second.
  constexpr Step kSteps[] = {{'-', DatePrecision::kMonth},
                             {'-', DatePrecision::kDay},
                             {'T', DatePrecision::kHour},
                             {':', DatePrecision::kMinute},
                             {':', DatePrecision::kSecond}};
  int* fields[] = {&t.month, &t.day, &t.hour, &t.minute, &t.second};
  for (size_t i = 0; i < 5 && !in.done(); ++i) {
    const bool separated = kSteps[i].separator == 'T' ? (in.Consume('T') || in.Consume(' '))
                                                      : in.Consume(kSteps[i].separator);
    if (!separated) break;
    if (!in.Digits(2, 2, &field) || in.AtDigit()) return BadDateLabel(text);
    *fields[i] = static_cast<int>(field);
    label.precision = kSteps[i].precision;
  }
  if (in.Consume('Z') && label.precision < DatePrecision::kHour) return BadDateLabel(text);
  if (!in.done()) return BadDateLabel(text);
  ZS_RETURN_IF_ERROR(CheckFieldRanges(t, text));
  return label;
}

Result<int64_t> ToCalendarSeconds(const DateTime& time, Calendar calendar) {
  ZS_ASSIGN_OR_RETURN(int64_t days, DaysInCalendar(time, calendar));
  return days * kSecondsPerDay + int64_t{time.hour} * 3600 + int64_t{time.minute} * 60 +
         time.second;
}

DateTime FromCalendarSeconds(int64_t seconds, Calendar calendar) {
  const int64_t days = FloorDiv(seconds, kSecondsPerDay);
  const int64_t in_day = seconds - days * kSecondsPerDay;
  DateTime t = DateFromDays(days, calendar);
  t.hour = static_cast<int>(in_day / 3600);
  t.minute = static_cast<int>(in_day % 3600 / 60);
  t.second = static_cast<int>(in_day % 60);
  return t;
}

Result<int64_t> LabelEndSeconds(const DateLabel& label, Calendar calendar) {
  ZS_ASSIGN_OR_RETURN(int64_t start, ToCalendarSeconds(label.start, calendar));
  DateTime next{label.start.year, 1, 1, 0, 0, 0};
  switch (label.precision) {
    case DatePrecision::kYear:
      next.year += 1;
      if (calendar == Calendar::kStandard && next.year == 0) next.year = 1;
      break;
    case DatePrecision::kMonth:
      next.month = label.start.month + 1;
      if (next.month == 13) {
        next.month = 1;
        next.year += 1;
        if (calendar == Calendar::kStandard && next.year == 0) next.year = 1;
      }
      break;
    case DatePrecision::kDay:
      return start + kSecondsPerDay - 1;
    case DatePrecision::kHour:
      return start + 3600 - 1;
    case DatePrecision::kMinute:
      return start + 60 - 1;
    case DatePrecision::kSecond:
      return start;
  }
  ZS_ASSIGN_OR_RETURN(int64_t next_start, ToCalendarSeconds(next, calendar));
  return next_start - 1;
}

Result<CfTimeUnits> CfTimeUnits::Parse(std::string_view units, std::string_view calendar) {
  CfTimeUnits parsed;
  parsed.text_ = std::string(units);
  ZS_ASSIGN_OR_RETURN(parsed.calendar_, ParseCalendar(calendar));
  Scanner in(units);
  in.SkipSpaces();
  std::string_view rest = in.rest();
  const size_t word_end = rest.find_first_of(" \t");
  if (word_end == std::string_view::npos) {
    return BadUnits(units, "expected '<unit> since <date>'");
  }
  const std::string unit = Lower(rest.substr(0, word_end));
  rest.remove_prefix(word_end);
  rest.remove_prefix(std::min(rest.find_first_not_of(" \t"), rest.size()));
  if (Lower(rest.substr(0, 6)) != "since ")
    return BadUnits(units, "expected '<unit> since <date>'");
  rest.remove_prefix(6);
  rest.remove_prefix(std::min(rest.find_first_not_of(" \t"), rest.size()));
  while (!rest.empty() && std::isspace(static_cast<unsigned char>(rest.back()))) {
    rest.remove_suffix(1);
  }
  bool known = false;
  for (const UnitName& u : kUnitNames) {
    if (unit == u.name) {
      parsed.microseconds_per_unit_ = u.microseconds;
      known = true;
      break;
    }
  }
  if (!known) {
    std::string why = "unsupported unit '";
    why += unit;
    why += "' (supported: days, hours, minutes, seconds, milliseconds, microseconds and their ";
    why += "abbreviations d, h, hr, min, s, sec, ms, us)";
    return BadUnits(units, why);
  }
  DateTime reference;
  int64_t utc_offset = 0;
  ZS_RETURN_IF_ERROR(ParseReference(units, rest, &reference, &utc_offset));
  ZS_ASSIGN_OR_RETURN_CTX(int64_t local, ToCalendarSeconds(reference, parsed.calendar_),
                          "CF time units '" + parsed.text_ + "'");
  parsed.reference_seconds_ = local - utc_offset;
  parsed.reference_ = FromCalendarSeconds(parsed.reference_seconds_, parsed.calendar_);
  return parsed;
}

Result<int64_t> CfTimeUnits::DecodeSeconds(int64_t value) const {
  int64_t offset = 0;
  bool overflow = false;
  if (microseconds_per_unit_ % kMicrosecondsPerSecond == 0) {
    overflow =
        __builtin_mul_overflow(value, microseconds_per_unit_ / kMicrosecondsPerSecond, &offset);
  } else {
    int64_t micros = 0;
    overflow = __builtin_mul_overflow(value, microseconds_per_unit_, &micros) ||
               __builtin_add_overflow(micros, kMicrosecondsPerSecond / 2, &micros);
    offset = FloorDiv(micros, kMicrosecondsPerSecond);
  }
  int64_t seconds = 0;
  if (overflow || __builtin_add_overflow(reference_seconds_, offset, &seconds) ||
      seconds >= kMaxAbsSeconds || seconds <= -kMaxAbsSeconds) {
    return DecodeOverflow(*this, std::to_string(value));
  }
  return seconds;
}

Result<int64_t> CfTimeUnits::DecodeSeconds(double value) const {
  const double offset = std::floor(value * static_cast<double>(microseconds_per_unit_) /
                                       static_cast<double>(kMicrosecondsPerSecond) +
                                   0.5);
  // NaN fails both comparisons.
  const double seconds = static_cast<double>(reference_seconds_) + offset;
  constexpr auto kLimit = static_cast<double>(kMaxAbsSeconds);
  if (!(seconds > -kLimit && seconds < kLimit)) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.17g", value);
    return DecodeOverflow(*this, buf);
  }
  return reference_seconds_ + static_cast<int64_t>(offset);
}

Result<DateTime> CfTimeUnits::Decode(double value) const {
  ZS_ASSIGN_OR_RETURN(int64_t seconds, DecodeSeconds(value));
  return FromCalendarSeconds(seconds, calendar_);
}

}  // namespace zarrstream

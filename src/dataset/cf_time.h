// CF time: the "<unit> since <reference date>" encoding of time coordinates, its calendars, and the
// date strings users select by.
//
// xarray writes a time coordinate as numbers (usually int64) with attributes `units` ("hours since
// 1900-01-01 00:00:00") and `calendar` ("proleptic_gregorian"). Decoding turns each number into
// calendar fields (year, month, day, hour, minute, second) at one-second resolution, as cftime
// does. Inside zarrstream a time is a count of seconds in its calendar (CalendarSeconds), which
// orders and compares times of one calendar with plain integer arithmetic.
//
// Calendars:
//   standard / gregorian     the mixed calendar cftime uses: Julian before 1582-10-15, Gregorian
//                            from then on (1582-10-04 is followed by 1582-10-15), no year 0. For
//                            dates from 1582-10-15 on it is the proleptic Gregorian calendar.
//   proleptic_gregorian      Gregorian rules extended backwards, year 0 exists (ISO 8601).
//   noleap / 365_day         every year has 365 days.
//   all_leap / 366_day       every year has 366 days.
//   360_day                  twelve months of 30 days.
// Names are matched case-insensitively; a missing calendar attribute means "standard" (CF).
//
// Everything here is a pure function of its arguments: thread-safe, no I/O.
#pragma once

#include <compare>
#include <cstdint>
#include <string>
#include <string_view>

#include "zarrstream/status.h"

namespace zarrstream {

enum class Calendar : uint8_t {
  kStandard,            // "standard", "gregorian"
  kProlepticGregorian,  // "proleptic_gregorian"
  kNoLeap,              // "noleap", "365_day"
  kAllLeap,             // "all_leap", "366_day"
  kDay360,              // "360_day"
};

// Parses a CF calendar name; an empty name is "standard".
Result<Calendar> ParseCalendar(std::string_view name);
// The canonical CF name ("standard", "proleptic_gregorian", "noleap", "all_leap", "360_day").
std::string_view CalendarName(Calendar calendar);

// Calendar fields at one-second resolution. Years are astronomical in every calendar except
// standard, whose years are historical (…, -1, 1, …: there is no year 0), as in cftime.
struct DateTime {
  int64_t year = 1970;
  int month = 1;   // 1..12
  int day = 1;     // 1..31 (1..30 in the 360_day calendar)
  int hour = 0;    // 0..23
  int minute = 0;  // 0..59
  int second = 0;  // 0..59

  // NOLINTNEXTLINE(modernize-use-nullptr): clang-tidy 14 misreads a defaulted <=>.
  auto operator<=>(const DateTime&) const = default;
};

// "1979-01-01T06:00:00" (years outside 0..9999 keep their sign and digits: "-0001", "12000").
std::string FormatDateTime(const DateTime& time);

// The unit of the last field a date string gave: "1979" names a year, "1979-01-01T06" an hour.
enum class DatePrecision : uint8_t { kYear, kMonth, kDay, kHour, kMinute, kSecond };

// A date string as the user wrote it: its first instant and how much of the date it gave.
struct DateLabel {
  DateTime start;
  DatePrecision precision = DatePrecision::kSecond;
};

// Parses "1979", "1979-01", "1979-01-01", "1979-01-01T06", "1979-01-01T06:00",
// "1979-01-01T06:00:00" ('T' or one space between date and time; a trailing 'Z' is allowed).
// The year has at least four digits (an optional leading '-'), the other fields two (so that
// "1979-01-01T06:00" cannot be mistaken for a range "1979-01-01T06" to "00"). Field ranges are
// checked against the widest calendar; whether the day exists is checked when the date is placed
// in a calendar (ToCalendarSeconds).
Result<DateLabel> ParseDateLabel(std::string_view text);

// Seconds from the calendar's epoch to `time`: an opaque, strictly increasing count that only
// compares with counts of the same calendar. Fails when the date does not exist in `calendar`
// (2001-02-29 in noleap, 1582-10-10 and year 0 in standard, 31st days in 360_day).
Result<int64_t> ToCalendarSeconds(const DateTime& time, Calendar calendar);
// The inverse of ToCalendarSeconds.
DateTime FromCalendarSeconds(int64_t seconds, Calendar calendar);

// The last second of the period a label names, in `calendar`: "2015" → 2015-12-31T23:59:59,
// "2015-02" → the last second of February (28th, 29th or 30th by calendar), "…T06" → 06:59:59.
// A range "1979:2015" is [start of 1979, end of 2015], as xarray's partial-string indexing reads
// it.
Result<int64_t> LabelEndSeconds(const DateLabel& label, Calendar calendar);

// Parsed CF time units: "<unit> since <date>[ <time>][ <time zone>]" plus the calendar.
// Units: microseconds (us, microsec, …), milliseconds (ms, msec, …), seconds (s, sec, secs),
// minutes (min, mins), hours (h, hr, hrs), days (d), singular or plural, as cftime accepts them.
// The time zone is "Z", "UTC", "GMT" or an offset "+05:00" / "-0530" / "+5", which shifts the
// reference to UTC as cftime does. Values decode to the nearest second (halves round up).
class CfTimeUnits {
 public:
  static Result<CfTimeUnits> Parse(std::string_view units, std::string_view calendar);

  Calendar calendar() const { return calendar_; }
  // The reference instant in UTC.
  const DateTime& reference() const { return reference_; }
  int64_t microseconds_per_unit() const { return microseconds_per_unit_; }

  // Calendar seconds of the instant `value` units after the reference. Integer values are
  // decoded exactly (no detour through double); fails on overflow and on NaN / infinity.
  Result<int64_t> DecodeSeconds(int64_t value) const;
  Result<int64_t> DecodeSeconds(double value) const;
  Result<DateTime> Decode(double value) const;

  // The units string it was parsed from, for messages.
  const std::string& text() const { return text_; }

 private:
  std::string text_;
  Calendar calendar_ = Calendar::kStandard;
  DateTime reference_;
  int64_t reference_seconds_ = 0;
  int64_t microseconds_per_unit_ = 1'000'000;
};

}  // namespace zarrstream

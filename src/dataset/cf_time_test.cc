// CF time units, calendars and date labels. Expected dates were computed with cftime 1.6
// (cftime.num2date); tests/test_select.py compares many more values against cftime directly.
#include "dataset/cf_time.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

namespace zarrstream {
namespace {

std::string DecodeToString(std::string_view units, std::string_view calendar, double value) {
  auto parsed = CfTimeUnits::Parse(units, calendar);
  if (!parsed.ok()) return "parse error: " + parsed.status().message();
  auto decoded = parsed->Decode(value);
  if (!decoded.ok()) return "decode error: " + decoded.status().message();
  return FormatDateTime(*decoded);
}

TEST(CfTimeTest, DecodesLikeCftime) {
  struct Case {
    const char* units;
    const char* calendar;
    double value;
    const char* expected;
  };
  const Case cases[] = {
      {"hours since 1900-01-01 00:00:00", "proleptic_gregorian", 692496, "1979-01-01T00:00:00"},
      {"hours since 1900-01-01 00:00:00", "proleptic_gregorian", 1008000, "2014-12-29T00:00:00"},
      {"hours since 1900-01-01 00:00:00", "proleptic_gregorian", -100000, "1888-08-04T08:00:00"},
      {"days since 0001-01-01", "standard", 0, "0001-01-01T00:00:00"},
      {"days since 0001-01-01", "standard", 577460, "1582-01-01T00:00:00"},
      {"days since 0001-01-01", "standard", 577736, "1582-10-04T00:00:00"},
      {"days since 0001-01-01", "standard", 577737, "1582-10-15T00:00:00"},
      {"days since 0001-01-01", "gregorian", 738000, "2021-07-28T00:00:00"},
      {"days since 0001-01-01", "standard", -1, "-0001-12-31T00:00:00"},
      {"days since 0001-01-01", "standard", -400, "-0002-11-28T00:00:00"},
      {"days since 0001-01-01", "proleptic_gregorian", -1, "0000-12-31T00:00:00"},
      {"days since 0001-01-01", "proleptic_gregorian", -366, "0000-01-01T00:00:00"},
      {"days since 0001-01-01", "proleptic_gregorian", 738000, "2021-07-30T00:00:00"},
      {"days since 2000-01-01", "noleap", 59, "2000-03-01T00:00:00"},
      {"days since 2000-01-01", "365_day", 365, "2001-01-01T00:00:00"},
      {"days since 2000-01-01", "noleap", -1, "1999-12-31T00:00:00"},
      {"days since 2000-01-01", "noleap", 1000000, "4739-09-23T00:00:00"},
      {"days since 2000-01-01", "all_leap", 59, "2000-02-29T00:00:00"},
      {"days since 2000-01-01", "366_day", 366, "2001-01-01T00:00:00"},
      {"days since 2000-01-01", "360_day", 29, "2000-01-30T00:00:00"},
      {"days since 2000-01-01", "360_day", 30, "2000-02-01T00:00:00"},
      {"days since 2000-01-01", "360_day", 359, "2000-12-30T00:00:00"},
      {"days since 2000-01-01", "360_day", -1, "1999-12-30T00:00:00"},
      {"minutes since 1970-01-01 00:00:00 +05:30", "standard", 1, "1969-12-31T18:31:00"},
      {"seconds since 1970-01-01", "standard", 1700000000, "2023-11-14T22:13:20"},
      {"sec since 1970-01-01T00:00:00Z", "", 61, "1970-01-01T00:01:01"},
      {"h since 1900-1-1", "Standard", 1.5, "1900-01-01T01:30:00"},
      {"hr since 1-1-1 00:00:0.0", "standard", 24, "0001-01-02T00:00:00"},
      {"d since 2000-01-01 UTC", "standard", 0.25, "2000-01-01T06:00:00"},
      {"Hours Since 2000-01-01 00:00", "standard", 0.1, "2000-01-01T00:06:00"},
      {"ms since 2000-01-01", "standard", 1500, "2000-01-01T00:00:02"},
      {"ms since 2000-01-01", "standard", 1499, "2000-01-01T00:00:01"},
      {"microseconds since 2000-01-01", "standard", -1500000, "1999-12-31T23:59:59"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(DecodeToString(c.units, c.calendar, c.value), c.expected)
        << c.units << " / " << c.calendar << " / " << c.value;
  }
}

TEST(CfTimeTest, IntegerValuesDecodeExactly) {
  auto units = CfTimeUnits::Parse("seconds since 1970-01-01", "proleptic_gregorian");
  ASSERT_TRUE(units.ok());
  // 2^53 + 1 seconds is not a double; the integer path must keep the last second.
  const int64_t big = (int64_t{1} << 53) + 1;
  auto seconds = units->DecodeSeconds(big);
  ASSERT_TRUE(seconds.ok());
  auto epoch = ToCalendarSeconds({1970, 1, 1, 0, 0, 0}, Calendar::kProlepticGregorian);
  ASSERT_TRUE(epoch.ok());
  EXPECT_EQ(*seconds - *epoch, big);
  auto us = CfTimeUnits::Parse("microseconds since 1970-01-01", "standard");
  ASSERT_TRUE(us.ok());
  EXPECT_EQ(*us->DecodeSeconds(int64_t{2'500'000}) - *us->DecodeSeconds(int64_t{0}), 3);
  EXPECT_EQ(*us->DecodeSeconds(int64_t{-2'500'000}) - *us->DecodeSeconds(int64_t{0}), -2);
}

TEST(CfTimeTest, DecodeRejectsOverflowAndNaN) {
  auto units = CfTimeUnits::Parse("days since 2000-01-01", "standard");
  ASSERT_TRUE(units.ok());
  EXPECT_FALSE(units->DecodeSeconds(std::numeric_limits<int64_t>::max()).ok());
  EXPECT_FALSE(units->DecodeSeconds(std::nan("")).ok());
  EXPECT_FALSE(units->DecodeSeconds(std::numeric_limits<double>::infinity()).ok());
  auto err = units->DecodeSeconds(1e300);
  ASSERT_FALSE(err.ok());
  EXPECT_NE(err.status().message().find("days since 2000-01-01"), std::string::npos);
}

TEST(CfTimeTest, RoundTripsEveryDayOfEveryCalendar) {
  for (Calendar calendar : {Calendar::kStandard, Calendar::kProlepticGregorian, Calendar::kNoLeap,
                            Calendar::kAllLeap, Calendar::kDay360}) {
    // Four centuries around the Gregorian reform, and around year 0 / 1.
    for (int64_t start : {int64_t{-800'000}, int64_t{-200'000}}) {
      int64_t previous = 0;
      for (int64_t day = 0; day < 160'000; day += 1) {
        const int64_t seconds = (start + day) * 86'400 + 3'661;
        DateTime t = FromCalendarSeconds(seconds, calendar);
        auto back = ToCalendarSeconds(t, calendar);
        ASSERT_TRUE(back.ok()) << FormatDateTime(t) << " " << CalendarName(calendar) << ": "
                               << back.status().message();
        ASSERT_EQ(*back, seconds) << FormatDateTime(t) << " " << CalendarName(calendar);
        ASSERT_EQ(t.hour * 3600 + t.minute * 60 + t.second, 3'661);
        if (day > 0) {
          ASSERT_GT(seconds, previous);
        }
        previous = seconds;
      }
    }
  }
}

TEST(CfTimeTest, CalendarsRejectDaysThatDoNotExist) {
  EXPECT_TRUE(ToCalendarSeconds({2000, 2, 29}, Calendar::kProlepticGregorian).ok());
  EXPECT_FALSE(ToCalendarSeconds({1900, 2, 29}, Calendar::kProlepticGregorian).ok());
  EXPECT_TRUE(ToCalendarSeconds({1500, 2, 29}, Calendar::kStandard).ok());  // Julian leap year
  EXPECT_FALSE(ToCalendarSeconds({1500, 2, 29}, Calendar::kProlepticGregorian).ok());
  EXPECT_FALSE(ToCalendarSeconds({2000, 2, 29}, Calendar::kNoLeap).ok());
  EXPECT_TRUE(ToCalendarSeconds({2001, 2, 29}, Calendar::kAllLeap).ok());
  EXPECT_TRUE(ToCalendarSeconds({2001, 2, 30}, Calendar::kDay360).ok());
  EXPECT_FALSE(ToCalendarSeconds({2001, 1, 31}, Calendar::kDay360).ok());
  EXPECT_FALSE(ToCalendarSeconds({0, 6, 1}, Calendar::kStandard).ok());
  EXPECT_TRUE(ToCalendarSeconds({0, 6, 1}, Calendar::kProlepticGregorian).ok());
  auto gap = ToCalendarSeconds({1582, 10, 10}, Calendar::kStandard);
  ASSERT_FALSE(gap.ok());
  EXPECT_NE(gap.status().message().find("1582-10-15"), std::string::npos);
  // The day before the reform and the first Gregorian day are adjacent.
  EXPECT_EQ(*ToCalendarSeconds({1582, 10, 15}, Calendar::kStandard) -
                *ToCalendarSeconds({1582, 10, 4}, Calendar::kStandard),
            86'400);
}

TEST(CfTimeTest, ParsesCalendarNames) {
  EXPECT_EQ(*ParseCalendar(""), Calendar::kStandard);
  EXPECT_EQ(*ParseCalendar("gregorian"), Calendar::kStandard);
  EXPECT_EQ(*ParseCalendar("PROLEPTIC_GREGORIAN"), Calendar::kProlepticGregorian);
  EXPECT_EQ(*ParseCalendar("365_day"), Calendar::kNoLeap);
  EXPECT_EQ(*ParseCalendar("366_day"), Calendar::kAllLeap);
  EXPECT_EQ(*ParseCalendar("360_day"), Calendar::kDay360);
  auto julian = ParseCalendar("julian");
  ASSERT_FALSE(julian.ok());
  EXPECT_EQ(julian.status().code(), ErrorCode::kUnsupported);
  EXPECT_NE(julian.status().message().find("'julian'"), std::string::npos);
}

TEST(CfTimeTest, RejectsBadUnits) {
  for (const char* bad :
       {"hours", "hours after 1900-01-01", "fortnights since 1900-01-01", "months since 1900-01-01",
        "hours since", "hours since yesterday", "hours since 1900-13-01",
        "hours since 1900-01-01 06", "hours since 1900-01-01 00:00:00.5",
        "hours since 1900-01-01 00:00 +25", "hours since 1900-01-01 00:00:00 CET"}) {
    auto parsed = CfTimeUnits::Parse(bad, "standard");
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_NE(parsed.status().message().find(bad), std::string::npos) << parsed.status().message();
  }
  // A reference date that does not exist in the calendar.
  EXPECT_FALSE(CfTimeUnits::Parse("days since 2001-02-29", "proleptic_gregorian").ok());
  EXPECT_TRUE(CfTimeUnits::Parse("days since 2001-02-30", "360_day").ok());
}

TEST(CfTimeTest, ParsesDateLabels) {
  struct Case {
    const char* text;
    DateTime start;
    DatePrecision precision;
  };
  const Case cases[] = {
      {"1979", {1979, 1, 1, 0, 0, 0}, DatePrecision::kYear},
      {"1979-02", {1979, 2, 1, 0, 0, 0}, DatePrecision::kMonth},
      {"1979-02-03", {1979, 2, 3, 0, 0, 0}, DatePrecision::kDay},
      {"1979-02-03T06", {1979, 2, 3, 6, 0, 0}, DatePrecision::kHour},
      {"1979-02-03T06:30", {1979, 2, 3, 6, 30, 0}, DatePrecision::kMinute},
      {"1979-02-03 06:30:15", {1979, 2, 3, 6, 30, 15}, DatePrecision::kSecond},
      {"1979-02-03T06:30:15Z", {1979, 2, 3, 6, 30, 15}, DatePrecision::kSecond},
      {"-0044-03-15", {-44, 3, 15, 0, 0, 0}, DatePrecision::kDay},
      {"12000", {12000, 1, 1, 0, 0, 0}, DatePrecision::kYear},
  };
  for (const Case& c : cases) {
    auto label = ParseDateLabel(c.text);
    ASSERT_TRUE(label.ok()) << c.text << ": " << label.status().message();
    EXPECT_EQ(label->start, c.start) << c.text;
    EXPECT_EQ(label->precision, c.precision) << c.text;
  }
  for (const char* bad : {"", "79", "1979-1-1", "1979-01-01T6", "1979-13", "1979-01-32",
                          "1979-01-01T24", "1979-01-01T06:60", "1979/01/01", "1979-01-01T",
                          "1979-01-01x", "1979Z", "00", "1979-01-01T06:00:00:00"}) {
    auto label = ParseDateLabel(bad);
    ASSERT_FALSE(label.ok()) << bad;
    EXPECT_EQ(label.status().code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(label.status().message().find(std::string("'") + bad + "'"), std::string::npos)
        << label.status().message();
  }
}

TEST(CfTimeTest, LabelEndIsTheLastSecondOfThePeriod) {
  auto end = [](const char* text, Calendar calendar) {
    auto label = ParseDateLabel(text);
    EXPECT_TRUE(label.ok()) << text;
    auto seconds = LabelEndSeconds(*label, calendar);
    EXPECT_TRUE(seconds.ok()) << text << ": " << seconds.status().message();
    return FormatDateTime(FromCalendarSeconds(*seconds, calendar));
  };
  EXPECT_EQ(end("2015", Calendar::kProlepticGregorian), "2015-12-31T23:59:59");
  EXPECT_EQ(end("2016-02", Calendar::kProlepticGregorian), "2016-02-29T23:59:59");
  EXPECT_EQ(end("2016-02", Calendar::kNoLeap), "2016-02-28T23:59:59");
  EXPECT_EQ(end("2015-02", Calendar::kDay360), "2015-02-30T23:59:59");
  EXPECT_EQ(end("2015-12", Calendar::kStandard), "2015-12-31T23:59:59");
  EXPECT_EQ(end("2015-12-31", Calendar::kStandard), "2015-12-31T23:59:59");
  EXPECT_EQ(end("2015-12-31T18", Calendar::kStandard), "2015-12-31T18:59:59");
  EXPECT_EQ(end("2015-12-31T18:30", Calendar::kStandard), "2015-12-31T18:30:59");
  EXPECT_EQ(end("2015-12-31T18:30:05", Calendar::kStandard), "2015-12-31T18:30:05");
  EXPECT_EQ(end("1582-10-04", Calendar::kStandard), "1582-10-04T23:59:59");
  EXPECT_EQ(end("-0001", Calendar::kStandard), "-0001-12-31T23:59:59");
  // A label naming a day the calendar lacks is an error, not a silent neighbour.
  auto label = ParseDateLabel("2015-02-30");
  ASSERT_TRUE(label.ok());
  EXPECT_FALSE(LabelEndSeconds(*label, Calendar::kProlepticGregorian).ok());
}

TEST(CfTimeTest, FormatsDates) {
  EXPECT_EQ(FormatDateTime({1979, 1, 2, 3, 4, 5}), "1979-01-02T03:04:05");
  EXPECT_EQ(FormatDateTime({5, 1, 1, 0, 0, 0}), "0005-01-01T00:00:00");
  EXPECT_EQ(FormatDateTime({-5, 1, 1, 0, 0, 0}), "-0005-01-01T00:00:00");
  EXPECT_EQ(FormatDateTime({123456, 1, 1, 0, 0, 0}), "123456-01-01T00:00:00");
}

}  // namespace
}  // namespace zarrstream

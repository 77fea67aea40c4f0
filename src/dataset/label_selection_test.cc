// The `--select` syntax, before any coordinate is involved.
#include "zarrstream/label_selection.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace zarrstream {
namespace {

TEST(LabelSelectionTest, ParsesRangesListsAndSeveralSelections) {
  auto parsed = ParseLabelSelections(std::vector<std::string>{
      "time=1979-01-01:2015-12-31, latitude=60:30", "level=500,850", "longitude=:10",
      "x=-5:", "valid_time=1979-01-01T06:00:2015-12-31T18:00", "init_time=1979-01-01T06:00:00"});
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  ASSERT_EQ(parsed->size(), 7u);
  const auto& s = *parsed;
  EXPECT_EQ(s[0].dim, "time");
  EXPECT_TRUE(s[0].is_range());
  EXPECT_EQ(s[0].start, "1979-01-01");
  EXPECT_EQ(s[0].stop, "2015-12-31");
  EXPECT_EQ(s[1].dim, "latitude");
  EXPECT_EQ(s[1].start, "60");
  EXPECT_EQ(s[1].stop, "30");
  EXPECT_EQ(s[2].dim, "level");
  EXPECT_EQ(s[2].values, (std::vector<std::string>{"500", "850"}));
  EXPECT_EQ(s[3].start, std::nullopt);
  EXPECT_EQ(s[3].stop, "10");
  EXPECT_EQ(s[4].start, "-5");
  EXPECT_EQ(s[4].stop, std::nullopt);
  EXPECT_EQ(s[5].start, "1979-01-01T06:00");
  EXPECT_EQ(s[5].stop, "2015-12-31T18:00");
  EXPECT_EQ(s[6].values, (std::vector<std::string>{"1979-01-01T06:00:00"}));
  EXPECT_EQ(s[0].ToString(), "time=1979-01-01:2015-12-31");
  EXPECT_EQ(s[2].ToString(), "level=500,850");
  EXPECT_EQ(s[3].ToString(), "longitude=:10");
}

TEST(LabelSelectionTest, RejectsMalformedSelections) {
  for (const char* bad : {"time", "=1979:2015", "time=", "time=abc:def", "time=1979:2015,850",
                          "time=1979:2015,time=1980", "level=500,a:b", "time=1979::2015",
                          "time=1979-13-01", "level=500,"}) {
    auto parsed = ParseLabelSelections(std::vector<std::string>{bad});
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_EQ(parsed.status().code(), ErrorCode::kInvalidArgument) << bad;
  }
}

}  // namespace
}  // namespace zarrstream

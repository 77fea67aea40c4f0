#include "util/format.h"

#include <gtest/gtest.h>

#include <array>
#include <string>
#include <string_view>
#include <vector>

namespace zarrstream {
namespace {

TEST(FormatTest, JoinPutsTheSeparatorBetweenItems) {
  EXPECT_EQ(Join(std::vector<std::string>{"time", "latitude", "longitude"}),
            "time, latitude, longitude");
  EXPECT_EQ(Join(std::array<std::string_view, 2>{"a", "b"}, "; "), "a; b");
  EXPECT_EQ(Join({"zarrstream", "rechunk", "--gpu-friendly"}, " "),
            "zarrstream rechunk --gpu-friendly");
  EXPECT_EQ(Join(std::vector<uint32_t>{0, 3, 12}), "0, 3, 12");
  EXPECT_EQ(Join(std::vector<std::string>{"only"}), "only");
  EXPECT_EQ(Join(std::vector<std::string>{}), "");
}

TEST(FormatTest, FormatIndexAndBytes) {
  const std::vector<uint64_t> index = {3, 0, 12};
  EXPECT_EQ(FormatIndex(index), "(3,0,12)");
  EXPECT_EQ(FormatBytes(512), "512 B");
  EXPECT_EQ(FormatBytes(1.5e9), "1.5 GB");
}

}  // namespace
}  // namespace zarrstream

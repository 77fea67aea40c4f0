#include "util/checked_size.h"

#include <gtest/gtest.h>

#include <new>
#include <vector>

namespace zarrstream {
namespace {

TEST(CheckedSizeTest, ProductsThatFitAreExactAndOnesThatDoNotAreNullopt) {
  EXPECT_EQ(CheckedMul(uint64_t{1} << 32, (uint64_t{1} << 32) - 1),
            ~uint64_t{0} - ((uint64_t{1} << 32) - 1));
  EXPECT_FALSE(CheckedMul(uint64_t{1} << 32, uint64_t{1} << 32));
  const std::vector<uint64_t> fits = {8, uint64_t{1} << 30, uint64_t{1} << 30};
  EXPECT_EQ(CheckedProduct(fits), uint64_t{1} << 63);
  // 8 x 2^30 x 2^30 two-byte elements: 2^64 bytes.
  EXPECT_FALSE(CheckedProduct(fits, 2));
  EXPECT_EQ(CheckedProduct({}), 1u);
  // A zero extent makes any product zero, even after a factor that alone would overflow later.
  const std::vector<uint64_t> with_zero = {0, ~uint64_t{0}, ~uint64_t{0}};
  EXPECT_EQ(CheckedProduct(with_zero), 0u);
}

TEST(CheckedSizeTest, CeilDivAndSaturatingArithmeticNear2To64) {
  EXPECT_EQ(CeilDiv(~uint64_t{0}, uint64_t{1} << 63), 2u);
  EXPECT_EQ(CeilDiv(10, 5), 2u);
  EXPECT_EQ(CeilDiv(11, 5), 3u);
  EXPECT_EQ(CeilDiv(0, 7), 0u);
  EXPECT_EQ(SaturatingAdd(~uint64_t{0} - 1, 5), ~uint64_t{0});
  EXPECT_EQ(SaturatingMul(uint64_t{1} << 40, uint64_t{1} << 40), ~uint64_t{0});
  EXPECT_EQ(SaturatingMul(3, 4), 12u);
}

TEST(CheckedSizeTest, AllocationsBeyondMemoryAreErrorsNamingWhatAndHowMuch) {
  ByteBuffer buffer;
  const uint64_t huge = uint64_t{1} << 62;
  ASSERT_LT(MemoryLimitBytes(), huge);
  const Status refused =
      AllocateBytes(&buffer, huge, "decoding a chunk of shape (4611686018427387904)");
  EXPECT_EQ(refused.code(), ErrorCode::kOutOfMemory);
  EXPECT_EQ(refused.message().rfind("out of memory: ", 0), 0u) << refused.message();
  EXPECT_NE(refused.message().find("decoding a chunk of shape"), std::string::npos)
      << refused.message();
  EXPECT_NE(refused.message().find(std::to_string(huge) + " bytes"), std::string::npos)
      << refused.message();
  EXPECT_TRUE(buffer.empty());
  ASSERT_TRUE(AllocateBytes(&buffer, 4096, "a small buffer").ok());
  EXPECT_EQ(buffer.size(), 4096u);
  EXPECT_TRUE(CheckAllocation("anything", MemoryLimitBytes()).ok());
  EXPECT_EQ(CheckAllocation("anything", MemoryLimitBytes() + 1).code(), ErrorCode::kOutOfMemory);
}

TEST(CheckedSizeTest, BadAllocBecomesAnErrorValue) {
  const Status status =
      CatchOutOfMemory("decoding a chunk", []() -> Status { throw std::bad_alloc(); });
  EXPECT_EQ(status.code(), ErrorCode::kOutOfMemory);
  EXPECT_NE(status.message().find("decoding a chunk"), std::string::npos) << status.message();
  const Result<int> result = CatchOutOfMemory("a count", []() -> Result<int> { return 7; });
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(*result, 7);
}

}  // namespace
}  // namespace zarrstream

#include "store/range_coalescing.h"

#include <gtest/gtest.h>

#include <random>

namespace zarrstream {
namespace {

TEST(RangeCoalescingTest, MergesRangesWithSmallGapsInAnyOrder) {
  std::vector<ByteRange> ranges = {ByteRange::Bounded(100, 10), ByteRange::Bounded(0, 10),
                                   ByteRange::Bounded(15, 5), ByteRange::Bounded(1000, 1)};
  CoalescedRanges c = CoalesceRanges(ranges, {/*max_gap_bytes=*/5, /*max_merged_bytes=*/1 << 20});
  ASSERT_EQ(c.reads.size(), 3u);
  EXPECT_EQ(c.reads[0], ByteRange::Bounded(0, 20));
  EXPECT_EQ(c.reads[1], ByteRange::Bounded(100, 10));
  EXPECT_EQ(c.reads[2], ByteRange::Bounded(1000, 1));
  EXPECT_EQ(c.slices[0].read, 1u);
  EXPECT_EQ(c.slices[1].read, 0u);
  EXPECT_EQ(c.slices[1].offset, 0u);
  EXPECT_EQ(c.slices[2].read, 0u);
  EXPECT_EQ(c.slices[2].offset, 15u);
  EXPECT_EQ(c.slices[2].length, 5u);
}

TEST(RangeCoalescingTest, GapOneByteTooLargeSplits) {
  std::vector<ByteRange> ranges = {ByteRange::Bounded(0, 10), ByteRange::Bounded(16, 4)};
  EXPECT_EQ(CoalesceRanges(ranges, {6, 1 << 20}).reads.size(), 1u);
  EXPECT_EQ(CoalesceRanges(ranges, {5, 1 << 20}).reads.size(), 2u);
}

TEST(RangeCoalescingTest, MergedSizeIsCapped) {
  std::vector<ByteRange> ranges;
  for (uint64_t i = 0; i < 10; ++i) ranges.push_back(ByteRange::Bounded(i * 100, 100));
  CoalescedRanges c = CoalesceRanges(ranges, {0, 300});
  ASSERT_EQ(c.reads.size(), 4u);  // 300 + 300 + 300 + 100
  for (const ByteRange& r : c.reads) EXPECT_LE(r.length, 300u);
  // A range larger than the cap on its own stays one read.
  std::vector<ByteRange> big = {ByteRange::Bounded(0, 1000)};
  EXPECT_EQ(CoalesceRanges(big, {0, 300}).reads.size(), 1u);
}

TEST(RangeCoalescingTest, OverlappingAndDuplicateRangesShareOneRead) {
  std::vector<ByteRange> ranges = {ByteRange::Bounded(10, 20), ByteRange::Bounded(15, 5),
                                   ByteRange::Bounded(10, 20)};
  CoalescedRanges c = CoalesceRanges(ranges, {0, 1 << 20});
  ASSERT_EQ(c.reads.size(), 1u);
  EXPECT_EQ(c.reads[0], ByteRange::Bounded(10, 20));
  EXPECT_EQ(c.slices[1].offset, 5u);
  EXPECT_EQ(c.slices[2].offset, 0u);
  EXPECT_EQ(c.slices[2].length, 20u);
}

TEST(RangeCoalescingTest, SuffixFromOffsetAndEmptyRangesPassThrough) {
  std::vector<ByteRange> ranges = {ByteRange::Suffix(8), ByteRange::Bounded(0, 4),
                                   ByteRange::FromOffset(3), ByteRange::Bounded(2, 0)};
  CoalescedRanges c = CoalesceRanges(ranges, {1 << 20, 1 << 20});
  ASSERT_EQ(c.reads.size(), 3u);
  EXPECT_EQ(c.reads[0], ByteRange::Bounded(0, 4));
  EXPECT_TRUE(c.slices[0].whole_read);
  EXPECT_EQ(c.reads[c.slices[0].read], ByteRange::Suffix(8));
  EXPECT_EQ(c.reads[c.slices[2].read], ByteRange::FromOffset(3));
  EXPECT_EQ(c.slices[3].read, RangeSlice::kNoRead);
}

// Property: slicing the merged reads of a value gives exactly the requested bytes.
TEST(RangeCoalescingTest, SlicesReproduceTheRequestedBytes) {
  std::mt19937 rng(7);
  std::string value(4096, '\0');
  for (char& c : value) c = static_cast<char>(rng());
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<ByteRange> ranges;
    const int n = 1 + static_cast<int>(rng() % 12);
    for (int i = 0; i < n; ++i) {
      uint64_t offset = rng() % 4000;
      ranges.push_back(ByteRange::Bounded(offset, 1 + rng() % 96));
    }
    CoalescingOptions options{rng() % 200, 64 + rng() % 1024};
    CoalescedRanges c = CoalesceRanges(ranges, options);
    for (const ByteRange& r : c.reads) {
      ASSERT_LE(r.offset + r.length, value.size());
    }
    for (size_t i = 0; i < ranges.size(); ++i) {
      const RangeSlice& s = c.slices[i];
      ASSERT_NE(s.read, RangeSlice::kNoRead);
      const ByteRange& read = c.reads[s.read];
      ASSERT_LE(s.offset + s.length, read.length);
      EXPECT_EQ(value.substr(read.offset + s.offset, s.length),
                value.substr(ranges[i].offset, ranges[i].length));
    }
  }
}

}  // namespace
}  // namespace zarrstream

#include "util/strided_copy.h"

#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <vector>

namespace zarrstream {
namespace {

TEST(StridedCopyTest, CopiesASubBlockOfA3DArray) {
  // src: 4x5x6 int32, copy the block [1:3, 2:5, 1:4] into a 2x3x3 destination.
  std::vector<int32_t> src(4 * 5 * 6);
  std::iota(src.begin(), src.end(), 0);
  std::vector<uint64_t> src_shape = {4, 5, 6}, block = {2, 3, 3};
  auto src_strides = CStrides(src_shape, 4);
  auto dst_strides = CStrides(block, 4);
  std::vector<int32_t> dst(18, -1);
  const std::byte* origin = reinterpret_cast<const std::byte*>(src.data()) + 1 * src_strides[0] +
                            2 * src_strides[1] + 1 * src_strides[2];
  CopyStrided(origin, src_strides, reinterpret_cast<std::byte*>(dst.data()), dst_strides, block, 4);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 3; ++k)
        EXPECT_EQ(dst[(i * 3 + j) * 3 + k], src[((1 + i) * 5 + (2 + j)) * 6 + (1 + k)]);
}

TEST(StridedCopyTest, TransposedDestination) {
  std::vector<int16_t> src = {1, 2, 3, 4, 5, 6};  // 2x3
  std::vector<int16_t> dst(6, 0);                 // 3x2, written through transposed strides
  std::vector<uint64_t> shape = {2, 3};
  std::vector<int64_t> src_strides = {6, 2}, dst_strides = {2, 4};
  CopyStrided(reinterpret_cast<const std::byte*>(src.data()), src_strides,
              reinterpret_cast<std::byte*>(dst.data()), dst_strides, shape, 2);
  EXPECT_EQ(dst, (std::vector<int16_t>{1, 4, 2, 5, 3, 6}));
}

TEST(StridedCopyTest, FillWritesOnlyTheRegion) {
  std::vector<double> dst(4 * 4, 0.0);
  std::vector<uint64_t> region = {2, 2};
  double v = 7.5;
  std::vector<std::byte> value(8);
  std::memcpy(value.data(), &v, 8);
  std::vector<uint64_t> full = {4, 4};
  FillStrided(reinterpret_cast<std::byte*>(dst.data()) + (1 * 4 + 1) * 8, CStrides(full, 8), region,
              value);
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j)
      EXPECT_EQ(dst[i * 4 + j], (i >= 1 && i < 3 && j >= 1 && j < 3) ? 7.5 : 0.0);
}

TEST(StridedCopyTest, ZeroDimensionalCopiesOneElement) {
  int64_t a = 42, b = 0;
  CopyStrided(reinterpret_cast<const std::byte*>(&a), {}, reinterpret_cast<std::byte*>(&b), {}, {},
              8);
  EXPECT_EQ(b, 42);
}

TEST(StridedCopyTest, ContiguityCheck) {
  std::vector<uint64_t> shape = {1, 3, 4};
  EXPECT_TRUE(IsCContiguous(CStrides(shape, 4), shape, 4));
  // A 1x3x4 block inside a 2x3x4 array is contiguous; a 2x3x2 block is not.
  std::vector<uint64_t> big_shape = {2, 3, 4};
  auto big = CStrides(big_shape, 4);
  EXPECT_TRUE(IsCContiguous(big, shape, 4));
  std::vector<uint64_t> half = {2, 3, 2};
  EXPECT_FALSE(IsCContiguous(big, half, 4));
}

TEST(StridedCopyTest, ContiguityOfShapesWhoseBytesPassInt64) {
  // Chunk shapes from metadata may declare more than 2^63 bytes (the array region fuzzer found
  // the product overflowing): the answer still follows the strides, without overflow.
  const std::vector<int64_t> strides = {24, 12, 4};
  const std::vector<uint64_t> outermost_huge = {uint64_t{1} << 62, 2, 3};
  EXPECT_TRUE(IsCContiguous(strides, outermost_huge, 4));
  const std::vector<uint64_t> past_it = {2, uint64_t{1} << 62, 3};  // no stride reaches 2^64 bytes
  EXPECT_FALSE(IsCContiguous(std::vector<int64_t>{12, 12, 4}, past_it, 4));
  const std::vector<uint64_t> beyond_int64 = {2, UINT64_MAX, 3};
  EXPECT_FALSE(IsCContiguous(strides, beyond_int64, 4));
  const std::vector<uint64_t> ones_outside = {1, UINT64_MAX, 3};
  EXPECT_TRUE(IsCContiguous(std::vector<int64_t>{0, 12, 4}, ones_outside, 4));
}

TEST(StridedCopyTest, StridesOfShapesWhoseBytesPassInt64Saturate) {
  // The same shapes give CStrides no signed overflow: the strides that fit are exact and the
  // ones past INT64_MAX bytes stop there.
  EXPECT_EQ(CStrides(std::vector<uint64_t>{uint64_t{1} << 62, 2, 3}, 4),
            (std::vector<int64_t>{24, 12, 4}));
  EXPECT_EQ(CStrides(std::vector<uint64_t>{2, 2, uint64_t{1} << 62, 3}, 4),
            (std::vector<int64_t>{INT64_MAX, INT64_MAX, 12, 4}));
  EXPECT_EQ(CStrides(std::vector<uint64_t>{2, UINT64_MAX, 3}, 4),
            (std::vector<int64_t>{INT64_MAX, 12, 4}));
}

}  // namespace
}  // namespace zarrstream

// The scatter kernel's descriptors: boxes simplified without changing which elements go where.
#include "loader/gpu_assembly.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

namespace zarrstream {
namespace {

// Every (source, target) element offset pair a descriptor visits, in order.
std::vector<std::pair<int64_t, int64_t>> Visit(const gpu_abi::CopyDescriptor& d,
                                               uint64_t source_size, uint64_t target_size) {
  std::vector<std::pair<int64_t, int64_t>> out;
  for (uint64_t e = 0; e < d.elements; ++e) {
    uint64_t rest = e;
    int64_t s = static_cast<int64_t>(d.source / source_size);
    int64_t t = static_cast<int64_t>(d.target / target_size);
    for (int a = static_cast<int>(d.rank) - 1; a >= 0; --a) {
      const uint64_t i = rest % d.shape[a];
      rest /= d.shape[a];
      s += static_cast<int64_t>(i) * d.source_strides[a];
      t += static_cast<int64_t>(i) * d.target_strides[a];
    }
    out.emplace_back(s, t);
  }
  return out;
}

TEST(MakeCopyDescriptorTest, MergesContiguousRunsAndKeepsTheMapping) {
  // A (time 1, lat 4, lon 6) chunk; the box is lat 1..3, lon 0..5 (whole rows) into a slab of
  // (lat 4, lon 6) at lat 0: one contiguous run of 18 elements.
  const std::vector<uint64_t> chunk_shape = {1, 4, 6};
  PlannedCopy copy;
  copy.rank = 3;
  copy.within_chunk = {0, 1, 0};
  copy.within_slab = {0, 0, 0};
  copy.shape = {1, 3, 6};
  DimArray slab_strides{};
  slab_strides[0] = 0;  // the time dimension collapses
  slab_strides[1] = 6;
  slab_strides[2] = 1;
  const SlabTransform transform;
  auto d = MakeCopyDescriptor(4000, DataType::kFloat32, chunk_shape, copy, 8000,
                              BatchDType::kFloat32, slab_strides, transform, 0, false, {});
  EXPECT_EQ(d.rank, 1u);
  EXPECT_EQ(d.elements, 18u);
  EXPECT_EQ(d.shape[0], 18u);
  EXPECT_EQ(d.source, 4000u + 6 * 4);
  EXPECT_EQ(d.flags, 0u);

  // Part of each row (lon 2..4) into a slab at lon 1: two dimensions remain, same mapping as the
  // unsimplified box.
  copy.within_chunk = {0, 0, 2};
  copy.within_slab = {0, 1, 1};
  copy.shape = {1, 4, 3};
  DimArray wide_strides = slab_strides;
  d = MakeCopyDescriptor(0, DataType::kInt16, chunk_shape, copy, 0, BatchDType::kBFloat16,
                         wide_strides, transform, 0, true, {});
  EXPECT_EQ(d.rank, 2u);
  EXPECT_EQ(d.flags, gpu_abi::kByteSwap);
  std::vector<std::pair<int64_t, int64_t>> expected;
  for (int64_t lat = 0; lat < 4; ++lat) {
    for (int64_t lon = 0; lon < 3; ++lon) {
      expected.emplace_back(lat * 6 + 2 + lon, (1 + lat) * 6 + 1 + lon);
    }
  }
  EXPECT_EQ(Visit(d, 2, 2), expected);
}

TEST(MakeCopyDescriptorTest, AMissingChunkCopiesItsFillValue) {
  const std::vector<uint64_t> chunk_shape = {2, 2};
  PlannedCopy copy;
  copy.rank = 2;
  copy.shape = {2, 2};
  DimArray slab_strides{};
  slab_strides[0] = 2;
  slab_strides[1] = 1;
  const float fill = 1.5f;
  SlabTransform transform;
  transform.fill_nan = true;
  auto d = MakeCopyDescriptor(0, DataType::kFloat32, chunk_shape, copy, 64, BatchDType::kFloat16,
                              slab_strides, transform, 128, true,
                              std::as_bytes(std::span<const float>(&fill, 1)));
  EXPECT_EQ(d.flags, gpu_abi::kFromFill | gpu_abi::kFillNan);  // no byte swap for a fill value
  uint32_t bits = 0;
  std::memcpy(&bits, &fill, 4);
  EXPECT_EQ(d.fill_value, bits);
  EXPECT_EQ(d.mask, 128u);
  EXPECT_EQ(d.elements, 4u);
  EXPECT_EQ(d.rank, 1u);
}

TEST(MakeDecodedCopyDescriptorTest, DecodesIntoFloat64WithTheSameMappingAndNoBatchTransform) {
  // A packed int16 (_Unsigned) chunk of (lat 4, lon 6); the box lat 0..3, lon 2..4 into a float64
  // slab at lon 1, as MakeCopyDescriptor maps it, but with 8-byte target elements.
  const std::vector<uint64_t> chunk_shape = {4, 6};
  PlannedCopy copy;
  copy.rank = 2;
  copy.within_chunk = {0, 2};
  copy.within_slab = {0, 1};
  copy.shape = {4, 3};
  copy.target = true;
  copy.base = true;
  DimArray slab_strides{};
  slab_strides[0] = 6;
  slab_strides[1] = 1;
  CfDecoding cf;
  cf.source = DataType::kUInt16;
  cf.decode = true;
  cf.decoded = DataType::kFloat64;
  cf.has_scale_factor = true;
  cf.scale_factor = 0.5;
  cf.num_fill_values = 1;
  cf.fill_values[0] = 65535;
  const uint64_t values = 1 << 20;
  auto d = MakeDecodedCopyDescriptor(2000, DataType::kInt16, chunk_shape, copy, values,
                                     slab_strides, &cf, /*byte_swap=*/true, {});
  EXPECT_EQ(d.flags, gpu_abi::kDecodedFloat64 | gpu_abi::kByteSwap | gpu_abi::kCfDecode |
                         gpu_abi::kCfWide | gpu_abi::kCfScale);
  EXPECT_EQ(d.source_type, static_cast<uint32_t>(DataType::kUInt16));
  EXPECT_EQ(d.target, values + 1 * sizeof(double));
  EXPECT_EQ(d.mask, 0u);
  EXPECT_EQ(d.cf_scale_factor, 0.5);
  EXPECT_EQ(d.cf_num_fill_values, 1u);
  std::vector<std::pair<int64_t, int64_t>> expected;
  for (int64_t lat = 0; lat < 4; ++lat) {
    for (int64_t lon = 0; lon < 3; ++lon) {
      expected.emplace_back(1000 + lat * 6 + 2 + lon, (1 << 17) + lat * 6 + 1 + lon);
    }
  }
  EXPECT_EQ(Visit(d, 2, 8), expected);
}

}  // namespace
}  // namespace zarrstream

// The batch layout's shapes, offsets and sizes for CPU and GPU batches: each tensor where the
// previous ends (64-byte aligned), absent tensors taking no room.
#include "loader/batch_layout.h"

#include <gtest/gtest.h>

#include "util/status_test_util.h"

namespace zarrstream::internal {
namespace {

BatchLayout Make(const BatchLayoutSpec& spec) {
  Result<BatchLayout> layout = BatchLayout::Make(spec);
  EXPECT_TRUE(layout.ok()) << layout.status().ToString();
  return layout.ok() ? *layout : BatchLayout();
}

BatchLayoutSpec Spec() {
  BatchLayoutSpec spec;
  spec.batch_size = 3;
  spec.input_channels = 2;
  spec.target_channels = 1;
  spec.spatial_shape = {5, 7};
  spec.slab_elements = 35;
  spec.origin_dims = 1;
  spec.element_bytes = 4;
  return spec;
}

TEST(BatchLayoutTest, CpuBatchIsOneAlignedHostBlock) {
  BatchLayoutSpec spec = Spec();
  spec.masks = true;
  const BatchLayout layout = Make(spec);
  EXPECT_EQ(layout.input.sample_shape, (std::vector<int64_t>{2, 5, 7}));
  EXPECT_EQ(layout.input.sample_bytes, 2u * 35 * 4);
  EXPECT_EQ(layout.input.offset, 0u);
  // 3 * 280 = 840 bytes, aligned up to 896.
  EXPECT_EQ(layout.target.sample_shape, (std::vector<int64_t>{1, 5, 7}));
  EXPECT_EQ(layout.target.offset, 896u);
  EXPECT_EQ(layout.input_mask.sample_bytes, 2u * 35);
  EXPECT_EQ(layout.input_mask.offset, 896u + 448);    // 3 * 140 = 420 → 448
  EXPECT_EQ(layout.target_mask.offset, 1344u + 256);  // 3 * 70 = 210 → 256
  EXPECT_EQ(layout.target_mask.sample_bytes, 35u);
  EXPECT_EQ(layout.origins.offset, 1600u + 128);  // 3 * 35 = 105 → 128
  EXPECT_EQ(layout.origins.sample_shape, (std::vector<int64_t>{1}));
  EXPECT_EQ(layout.origins.sample_bytes, 8u);
  EXPECT_EQ(layout.host_bytes, 1728u + 64);
  EXPECT_EQ(layout.device_bytes, 0u);
}

TEST(BatchLayoutTest, AbsentTensorsTakeNoRoom) {
  BatchLayoutSpec spec = Spec();
  spec.target_channels = 0;
  const BatchLayout layout = Make(spec);
  EXPECT_FALSE(layout.target.present);
  EXPECT_FALSE(layout.input_mask.present);
  EXPECT_FALSE(layout.target_mask.present);
  EXPECT_EQ(layout.origins.offset, 896u);
  EXPECT_EQ(layout.host_bytes, 896u + 64);
}

TEST(BatchLayoutTest, GpuBatchKeepsItsOriginsOnTheHost) {
  BatchLayoutSpec spec = Spec();
  spec.tensors_on_device = true;
  const BatchLayout layout = Make(spec);
  EXPECT_EQ(layout.input.offset, 0u);
  EXPECT_EQ(layout.target.offset, 896u);
  EXPECT_EQ(layout.device_bytes, 896u + 448);  // input, target (3 * 140 = 420 → 448)
  EXPECT_EQ(layout.origins.offset, 0u);        // in the host block
  EXPECT_EQ(layout.host_bytes, 64u);           // 3 * 8 = 24 → 64
}

TEST(BatchLayoutTest, AnEmptyBatchStillHasABlock) {
  BatchLayoutSpec spec = Spec();
  spec.batch_size = 0;
  spec.tensors_on_device = true;
  const BatchLayout layout = Make(spec);
  EXPECT_EQ(layout.device_bytes, BatchLayout::kAlignment);
  EXPECT_EQ(layout.host_bytes, BatchLayout::kAlignment);
}

TEST(BatchLayoutTest, ABatchWhoseBytesOverflowIsRefused) {
  BatchLayoutSpec spec = Spec();
  spec.batch_size = uint64_t{1} << 61;  // 2^61 samples of 280 input bytes: wraps a 64-bit count
  ExpectErrorContains(BatchLayout::Make(spec).status(), ErrorCode::kConfig,
                      {"batch_size 2305843009213693952", "input tensor", "overflow"});
}

TEST(BatchLayoutTest, ASampleWhoseBytesOverflowIsRefused) {
  BatchLayoutSpec spec = Spec();
  spec.slab_elements = uint64_t{1} << 62;  // 2 channels of 4-byte elements
  ExpectErrorContains(BatchLayout::Make(spec).status(), ErrorCode::kConfig,
                      {"input sample", "overflow"});
}

TEST(BatchLayoutTest, TensorsThatFitOneByOneButNotTogetherAreRefused) {
  BatchLayoutSpec spec = Spec();
  spec.input_channels = 1;
  spec.target_channels = 1;
  spec.slab_elements = 1;
  spec.element_bytes = 1;
  spec.batch_size = (uint64_t{1} << 63) + 64;  // each tensor fits, the two do not
  ExpectErrorContains(BatchLayout::Make(spec).status(), ErrorCode::kConfig,
                      {"target tensor", "overflow"});
  // Aligning up past the largest count overflows too.
  spec.target_channels = 0;
  spec.origin_dims = 0;
  spec.batch_size = ~uint64_t{0} - 1;
  ExpectErrorContains(BatchLayout::Make(spec).status(), ErrorCode::kConfig,
                      {"input tensor", "overflow"});
}

TEST(BatchLayoutTest, OriginsThatOverflowAreRefused) {
  BatchLayoutSpec spec = Spec();
  spec.input_channels = 0;
  spec.target_channels = 0;
  spec.batch_size = uint64_t{1} << 61;  // 8 bytes an origin
  ExpectErrorContains(BatchLayout::Make(spec).status(), ErrorCode::kConfig,
                      {"origins", "overflow"});
  spec.tensors_on_device = true;
  ExpectErrorContains(BatchLayout::Make(spec).status(), ErrorCode::kConfig,
                      {"origins", "overflow"});
}

}  // namespace
}  // namespace zarrstream::internal

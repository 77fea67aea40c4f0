#include "metadata/array_metadata.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace zarrstream {
namespace {

TEST(ChunkKeyEncodingTest, DefaultEncodingPrefixesC) {
  const std::vector<uint64_t> index = {1, 0, 3};
  EXPECT_EQ((ChunkKeyEncoding{ChunkKeyEncoding::Kind::kDefault, '/'}.EncodeKey(index)), "c/1/0/3");
  EXPECT_EQ((ChunkKeyEncoding{ChunkKeyEncoding::Kind::kDefault, '.'}.EncodeKey(index)), "c.1.0.3");
}

TEST(ChunkKeyEncodingTest, V2EncodingJoinsIndices) {
  const std::vector<uint64_t> index = {1, 0, 3};
  EXPECT_EQ((ChunkKeyEncoding{ChunkKeyEncoding::Kind::kV2, '.'}.EncodeKey(index)), "1.0.3");
  EXPECT_EQ((ChunkKeyEncoding{ChunkKeyEncoding::Kind::kV2, '/'}.EncodeKey(index)), "1/0/3");
}

TEST(ChunkKeyEncodingTest, ZeroDimensionalArrays) {
  EXPECT_EQ((ChunkKeyEncoding{ChunkKeyEncoding::Kind::kDefault, '/'}.EncodeKey({})), "c");
  EXPECT_EQ((ChunkKeyEncoding{ChunkKeyEncoding::Kind::kV2, '.'}.EncodeKey({})), "0");
}

TEST(ChunkKeyEncodingTest, LargeIndices) {
  const std::vector<uint64_t> index = {UINT64_MAX, 12345678901234};
  EXPECT_EQ((ChunkKeyEncoding{}.EncodeKey(index)), "c/18446744073709551615/12345678901234");
}

TEST(ArrayMetadataTest, GridCountsEdgeChunks) {
  ArrayMetadata m;
  m.shape = {10, 6, 1};
  m.chunk_shape = {3, 6, 5};
  EXPECT_EQ(m.num_elements(), 60u);
  EXPECT_EQ(m.grid_shape(), (std::vector<uint64_t>{4, 1, 1}));
  EXPECT_EQ(m.num_chunks(), 4u);
}

TEST(ArrayMetadataTest, ZeroDimensionalArrayHasOneElementAndOneChunk) {
  ArrayMetadata m;
  EXPECT_EQ(m.num_elements(), 1u);
  EXPECT_TRUE(m.grid_shape().empty());
  EXPECT_EQ(m.num_chunks(), 1u);
}

TEST(ArrayMetadataTest, EmptyDimensionMeansNoChunks) {
  ArrayMetadata m;
  m.shape = {0, 5};
  m.chunk_shape = {2, 2};
  EXPECT_EQ(m.num_elements(), 0u);
  EXPECT_EQ(m.grid_shape(), (std::vector<uint64_t>{0, 3}));
  EXPECT_EQ(m.num_chunks(), 0u);
}

TEST(ArrayMetadataTest, GridShapeDoesNotOverflowNearTwoToThe64) {
  ArrayMetadata m;
  m.shape = {UINT64_MAX};
  m.chunk_shape = {2};
  EXPECT_EQ(m.grid_shape(), (std::vector<uint64_t>{UINT64_MAX / 2 + 1}));
}

TEST(ArrayMetadataTest, HandBuiltZeroChunkSizeDoesNotDivideByZero) {
  ArrayMetadata m;
  m.shape = {4};
  m.chunk_shape = {0};
  EXPECT_EQ(m.grid_shape(), (std::vector<uint64_t>{0}));
  EXPECT_EQ(m.num_chunks(), 0u);
}

}  // namespace
}  // namespace zarrstream

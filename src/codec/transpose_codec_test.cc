#include "codec/transpose_codec.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>

#include "codec/codec_test_harness.h"

namespace zarrstream {
namespace {

using testing::IsMetadataError;
using testing::Representation;

// np.transpose(src, order), the slow obvious way.
std::vector<std::byte> ReferenceTranspose(std::span<const std::byte> src,
                                          const std::vector<uint64_t>& shape,
                                          const std::vector<size_t>& order, size_t elem) {
  const size_t rank = shape.size();
  std::vector<uint64_t> src_strides(rank, 1), dst_shape(rank);
  for (size_t d = rank; d-- > 1;) src_strides[d - 1] = src_strides[d] * shape[d];
  for (size_t i = 0; i < rank; ++i) dst_shape[i] = shape[order[i]];
  std::vector<std::byte> dst(src.size());
  const uint64_t n = src.size() / elem;
  std::vector<uint64_t> index(rank);
  for (uint64_t linear = 0; linear < n; ++linear) {
    uint64_t rest = linear, src_offset = 0;
    for (size_t i = rank; i-- > 0;) {
      index[i] = rest % dst_shape[i];
      rest /= dst_shape[i];
      src_offset += index[i] * src_strides[order[i]];
    }
    std::copy_n(src.data() + src_offset * elem, elem, dst.data() + linear * elem);
  }
  return dst;
}

void CheckTranspose(DataType type, const std::vector<uint64_t>& shape,
                    const std::vector<size_t>& order) {
  SCOPED_TRACE("type " + std::string(DataTypeName(type)) + " shape " +
               nlohmann::json(shape).dump() + " order " + nlohmann::json(order).dump());
  ChunkRepresentation decoded = Representation(type, shape);
  auto codec = MakeTransposeCodec({{"order", order}}, decoded);
  ASSERT_TRUE(codec.ok()) << codec.status().ToString();
  const ChunkRepresentation& encoded_rep = (*codec)->encoded_representation();
  for (size_t i = 0; i < shape.size(); ++i) ASSERT_EQ(encoded_rep.shape[i], shape[order[i]]);
  EXPECT_EQ(encoded_rep.data_type, type);

  const size_t elem = DataTypeSize(type);
  std::vector<std::byte> data = testing::RandomBytes(decoded.num_bytes(), 3);
  std::vector<std::byte> encoded(data.size()), decoded_back(data.size());
  ASSERT_TRUE((*codec)->Encode(data, encoded).ok());
  ASSERT_EQ(encoded, ReferenceTranspose(data, shape, order, elem));
  ASSERT_TRUE((*codec)->Decode(encoded, decoded_back).ok());
  ASSERT_EQ(decoded_back, data);
}

TEST(TransposeCodecTest, MatchesReferenceForManyShapesAndOrders) {
  CheckTranspose(DataType::kFloat32, {}, {});
  CheckTranspose(DataType::kFloat32, {7}, {0});
  CheckTranspose(DataType::kFloat32, {3, 5}, {1, 0});
  CheckTranspose(DataType::kFloat64, {100, 37}, {1, 0});
  CheckTranspose(DataType::kUInt8, {65, 130}, {1, 0});
  CheckTranspose(DataType::kInt16, {9, 1, 33}, {2, 1, 0});
  CheckTranspose(DataType::kFloat32, {17, 19, 23}, {2, 1, 0});
  CheckTranspose(DataType::kFloat32, {4, 5, 6}, {0, 2, 1});
  CheckTranspose(DataType::kFloat32, {4, 5, 6}, {1, 0, 2});
  CheckTranspose(DataType::kComplex128, {6, 7, 8}, {2, 0, 1});
  CheckTranspose(DataType::kFloat32, {4, 0, 6}, {2, 1, 0});
  CheckTranspose(DataType::kFloat32, {1, 1, 1}, {2, 1, 0});
  std::mt19937 rng(42);
  const DataType types[] = {DataType::kUInt8, DataType::kInt16, DataType::kFloat32,
                            DataType::kFloat64, DataType::kComplex128};
  for (int trial = 0; trial < 200; ++trial) {
    const size_t rank = 1 + rng() % 6;
    std::vector<uint64_t> shape(rank);
    for (auto& extent : shape) extent = 1 + rng() % 7;
    std::vector<size_t> order(rank);
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    CheckTranspose(types[rng() % 5], shape, order);
  }
}

TEST(TransposeCodecTest, LegacyOrderStrings) {
  ChunkRepresentation decoded = Representation(DataType::kInt32, {2, 3, 4});
  auto f = MakeTransposeCodec({{"order", "F"}}, decoded);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ((*f)->encoded_representation().shape, (std::vector<uint64_t>{4, 3, 2}));
  EXPECT_EQ((*f)->ToJson(),
            nlohmann::json::parse(R"({"name":"transpose","configuration":{"order":[2,1,0]}})"));
  auto c = MakeTransposeCodec({{"order", "C"}}, decoded);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ((*c)->encoded_representation().shape, decoded.shape);
}

TEST(TransposeCodecTest, Configuration) {
  ChunkRepresentation decoded = Representation(DataType::kInt32, {2, 3, 4});
  for (const char* bad : {R"({})", R"({"order":[0,1]})", R"({"order":[0,1,1]})",
                          R"({"order":[0,1,3]})", R"({"order":[0,1,-1]})", R"({"order":"K"})",
                          R"({"order":[0,1,2],"x":1})", R"({"order":[0,1,2.0]})"}) {
    SCOPED_TRACE(bad);
    auto codec = MakeTransposeCodec(nlohmann::json::parse(bad), decoded);
    EXPECT_TRUE(IsMetadataError(codec.status()));
    EXPECT_NE(codec.status().message().find("transpose"), std::string::npos);
  }
}

TEST(TransposeCodecTest, WrongBufferSizesAreErrors) {
  auto codec = MakeTransposeCodec({{"order", {1, 0}}}, Representation(DataType::kInt32, {2, 3}));
  ASSERT_TRUE(codec.ok());
  std::vector<std::byte> small(20), right(24);
  EXPECT_FALSE((*codec)->Decode(small, right).ok());
  EXPECT_FALSE((*codec)->Encode(right, small).ok());
}

}  // namespace
}  // namespace zarrstream

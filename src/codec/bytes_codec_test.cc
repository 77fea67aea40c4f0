#include "codec/bytes_codec.h"

#include <gtest/gtest.h>

#include <bit>

#include "codec/codec_test_harness.h"

namespace zarrstream {
namespace {

using testing::IsMetadataError;
using testing::Representation;

constexpr bool kLittle = std::endian::native == std::endian::little;

std::unique_ptr<ArrayToBytesCodec> Bytes(const nlohmann::json& config,
                                         const ChunkRepresentation& representation) {
  auto codec = MakeBytesCodec(config, representation);
  EXPECT_TRUE(codec.ok()) << codec.status().ToString();
  return std::move(codec).value();
}

TEST(BytesCodecTest, NativeOrderIsIdentity) {
  auto representation = Representation(DataType::kFloat32, {3, 4});
  auto codec = Bytes({{"endian", kLittle ? "little" : "big"}}, representation);
  EXPECT_TRUE(codec->is_identity());
  EXPECT_EQ(codec->encoded_size(), 48u);
  std::vector<std::byte> data = testing::RandomBytes(48);
  ByteBuffer encoded;
  ASSERT_TRUE(codec->Encode(data, &encoded).ok());
  EXPECT_TRUE(std::equal(data.begin(), data.end(), encoded.data()));
  std::vector<std::byte> decoded(48);
  CodecScratch scratch;
  ASSERT_TRUE(codec->Decode(encoded.span(), decoded, &scratch).ok());
  EXPECT_EQ(decoded, data);
}

TEST(BytesCodecTest, SwapsEachComponent) {
  const char* foreign = kLittle ? "big" : "little";
  struct Case {
    DataType type;
    size_t unit;
  };
  for (Case c : {Case{DataType::kInt16, 2}, Case{DataType::kUInt32, 4}, Case{DataType::kFloat64, 8},
                 Case{DataType::kFloat16, 2}, Case{DataType::kComplex64, 4},
                 Case{DataType::kComplex128, 8}}) {
    SCOPED_TRACE(DataTypeName(c.type));
    auto representation = Representation(c.type, {5, 3});
    auto codec = Bytes({{"endian", foreign}}, representation);
    EXPECT_FALSE(codec->is_identity());
    const size_t n = representation.num_bytes();
    std::vector<std::byte> data = testing::RandomBytes(n);
    ByteBuffer encoded;
    ASSERT_TRUE(codec->Encode(data, &encoded).ok());
    ASSERT_EQ(encoded.size(), n);
    for (size_t i = 0; i < n; ++i) {
      const size_t unit_start = i - i % c.unit;
      ASSERT_EQ(encoded.data()[i], data[unit_start + (c.unit - 1 - i % c.unit)]) << i;
    }
    std::vector<std::byte> decoded(n);
    CodecScratch scratch;
    ASSERT_TRUE(codec->Decode(encoded.span(), decoded, &scratch).ok());
    EXPECT_EQ(decoded, data);
  }
}

TEST(BytesCodecTest, BigEndianValues) {
  auto codec = Bytes({{"endian", "big"}}, Representation(DataType::kUInt32, {2}));
  const uint8_t stored[] = {0x01, 0x02, 0x03, 0x04, 0xA0, 0xB0, 0xC0, 0xD0};
  std::vector<uint32_t> values(2);
  CodecScratch scratch;
  ASSERT_TRUE(codec
                  ->Decode(std::as_bytes(std::span(stored)),
                           std::as_writable_bytes(std::span(values)), &scratch)
                  .ok());
  EXPECT_EQ(values[0], 0x01020304u);
  EXPECT_EQ(values[1], 0xA0B0C0D0u);
}

TEST(BytesCodecTest, WrongSizeIsCorrupt) {
  auto codec = Bytes({{"endian", "little"}}, Representation(DataType::kInt32, {4}));
  std::vector<std::byte> out(16);
  CodecScratch scratch;
  Status status = codec->Decode(testing::RandomBytes(15), out, &scratch);
  EXPECT_TRUE(testing::IsCorrupt(status));
  EXPECT_NE(status.message().find("15 bytes, expected 16"), std::string::npos);
  EXPECT_TRUE(testing::IsCorrupt(codec->Decode(testing::RandomBytes(17), out, &scratch)));
}

TEST(BytesCodecTest, Configuration) {
  auto u8 = Representation(DataType::kUInt8, {4});
  auto f32 = Representation(DataType::kFloat32, {4});
  EXPECT_TRUE(MakeBytesCodec(nlohmann::json::object(), u8).ok());
  EXPECT_TRUE(MakeBytesCodec(nullptr, Representation(DataType::kBool, {4})).ok());
  auto missing = MakeBytesCodec(nlohmann::json::object(), f32);
  EXPECT_TRUE(IsMetadataError(missing.status()));
  EXPECT_NE(missing.status().message().find("'endian' is required for float32"), std::string::npos)
      << missing.status().message();
  EXPECT_TRUE(IsMetadataError(MakeBytesCodec({{"endian", "middle"}}, f32).status()));
  EXPECT_TRUE(IsMetadataError(MakeBytesCodec({{"endian", 1}}, f32).status()));
  EXPECT_TRUE(IsMetadataError(MakeBytesCodec({{"order", "C"}}, f32).status()));
  EXPECT_EQ(Bytes({{"endian", "big"}}, f32)->ToJson(),
            nlohmann::json::parse(R"({"name":"bytes","configuration":{"endian":"big"}})"));
  EXPECT_EQ(Bytes({}, u8)->ToJson(),
            nlohmann::json::parse(R"({"name":"bytes","configuration":{}})"));
}

}  // namespace
}  // namespace zarrstream

#include "codec/crc32c_codec.h"

#include <gtest/gtest.h>

#include "codec/codec_test_harness.h"

namespace zarrstream {
namespace {

using testing::AsBytes;
using testing::IsCorrupt;

std::unique_ptr<BytesToBytesCodec> Codec() {
  auto codec =
      MakeCrc32cCodec(nlohmann::json::object(), testing::Representation(DataType::kUInt8, {1}));
  EXPECT_TRUE(codec.ok());
  return std::move(codec).value();
}

TEST(Crc32cTest, KnownVectors) {
  EXPECT_EQ(Crc32c(AsBytes("123456789")), 0xE3069283u);
  EXPECT_EQ(Crc32c({}), 0u);
  EXPECT_EQ(Crc32c(AsBytes("a")), 0xC1D04330u);
  // RFC 3720 (iSCSI) B.4: 32 bytes of zeros, of 0xFF, and an incrementing sequence.
  std::vector<std::byte> zeros(32, std::byte{0}), ones(32, std::byte{0xFF}), up(32);
  for (size_t i = 0; i < 32; ++i) up[i] = static_cast<std::byte>(i);
  EXPECT_EQ(Crc32c(zeros), 0x8A9136AAu);
  EXPECT_EQ(Crc32c(ones), 0x62A8AB43u);
  EXPECT_EQ(Crc32c(up), 0x46DD794Eu);
  EXPECT_EQ(internal::Crc32cPortable(AsBytes("123456789")), 0xE3069283u);
  EXPECT_EQ(internal::Crc32cPortable(up), 0x46DD794Eu);
}

TEST(Crc32cTest, HardwareAndTablesAgreeOnEveryLengthAndAlignment) {
  // Lengths around the 3 x 256 and 3 x 8192 block boundaries of the hardware path.
  std::vector<std::byte> data = testing::RandomBytes(3 * 8192 * 2 + 100, 7);
  std::vector<size_t> lengths;
  for (size_t n = 0; n < 100; ++n) lengths.push_back(n);
  for (size_t n :
       {767, 768, 769, 3 * 8192 - 1, 3 * 8192, 3 * 8192 + 1, 3 * 8192 + 771, 2 * 3 * 8192 + 99}) {
    lengths.push_back(n);
  }
  for (size_t offset = 0; offset < 8; ++offset) {
    for (size_t n : lengths) {
      if (offset + n > data.size()) continue;
      std::span<const std::byte> part(data.data() + offset, n);
      ASSERT_EQ(Crc32c(part), internal::Crc32cPortable(part)) << offset << "+" << n;
    }
  }
}

TEST(Crc32cCodecTest, RoundTripAppendsLittleEndianCrc) {
  auto codec = Codec();
  std::vector<std::byte> encoded = testing::ExpectRoundTrip(*codec, AsBytes("123456789"));
  ASSERT_EQ(encoded.size(), 13u);
  EXPECT_EQ(encoded[9], std::byte{0x83});
  EXPECT_EQ(encoded[12], std::byte{0xE3});
  EXPECT_EQ(codec->EncodedSize(100), 104u);
  testing::ExpectRoundTrip(*codec, testing::FieldBytes(100000));
  testing::ExpectRoundTrip(*codec, {});
}

TEST(Crc32cCodecTest, CorruptInput) {
  auto codec = Codec();
  std::vector<std::byte> data = testing::FieldBytes(1000);
  std::vector<std::byte> encoded = testing::ExpectRoundTrip(*codec, data);
  testing::ExpectTruncationFails(*codec, encoded, data.size());
  for (size_t i : {size_t{0}, size_t{500}, encoded.size() - 1}) {
    std::vector<std::byte> damaged = encoded;
    damaged[i] ^= std::byte{0x10};
    ByteBuffer decoded;
    Status status = codec->Decode(damaged, data.size(), &decoded);
    EXPECT_TRUE(IsCorrupt(status));
    EXPECT_NE(status.message().find("crc32c checksum mismatch"), std::string::npos);
    status = codec->Decode(damaged, DecodedSize::AtMost(data.size()), &decoded);
    EXPECT_NE(status.message().find("crc32c checksum mismatch"), std::string::npos);
  }
  testing::FuzzDecode(*codec, encoded, data.size());
}

TEST(Crc32cCodecTest, Configuration) {
  auto representation = testing::Representation(DataType::kUInt8, {1});
  EXPECT_TRUE(MakeCrc32cCodec(nullptr, representation).ok());
  EXPECT_TRUE(testing::IsMetadataError(MakeCrc32cCodec({{"seed", 1}}, representation).status()));
  EXPECT_EQ(Codec()->ToJson(), nlohmann::json::parse(R"({"name":"crc32c","configuration":{}})"));
}

}  // namespace
}  // namespace zarrstream

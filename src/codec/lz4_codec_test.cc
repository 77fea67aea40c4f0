#include "codec/lz4_codec.h"

#include <gtest/gtest.h>
#include <lz4.h>

#include "codec/codec_test_harness.h"

namespace zarrstream {
namespace {

using testing::AsBytes;
using testing::FieldBytes;
using testing::IsCorrupt;

std::unique_ptr<BytesToBytesCodec> Lz4(const nlohmann::json& config = {{"acceleration", 1}}) {
  auto codec = MakeLz4Codec(config, testing::Representation(DataType::kFloat32, {1}));
  EXPECT_TRUE(codec.ok()) << codec.status().ToString();
  return std::move(codec).value();
}

TEST(Lz4CodecTest, RoundTrip) {
  for (int acceleration : {1, 10}) {
    auto codec = Lz4({{"acceleration", acceleration}});
    for (size_t size : {0, 1, 1000, 1 << 20}) {
      SCOPED_TRACE(size);
      testing::ExpectRoundTrip(*codec, FieldBytes(size));
    }
  }
  testing::ExpectRoundTrip(*Lz4(), testing::RandomBytes(70000));
}

TEST(Lz4CodecTest, DecodesNumcodecsOutput) {
  // numcodecs.LZ4().encode(b"hello hello hello hello hello")
  const uint8_t encoded[] = {0x1d, 0x00, 0x00, 0x00, 0x6e, 0x68, 0x65, 0x6c, 0x6c, 0x6f,
                             0x20, 0x06, 0x00, 0x50, 0x68, 0x65, 0x6c, 0x6c, 0x6f};
  ByteBuffer decoded;
  ASSERT_TRUE(
      Lz4()->Decode(std::as_bytes(std::span(encoded)), DecodedSize::AtMost(1000), &decoded).ok());
  EXPECT_EQ(decoded.view(), "hello hello hello hello hello");
}

TEST(Lz4CodecTest, DecodesLz4LibraryBlock) {
  std::vector<std::byte> data = FieldBytes(100000);
  std::vector<std::byte> encoded(4 + LZ4_compressBound(static_cast<int>(data.size())));
  const uint32_t size = static_cast<uint32_t>(data.size());
  for (int i = 0; i < 4; ++i) encoded[i] = static_cast<std::byte>(size >> (8 * i));
  int n = LZ4_compress_default(reinterpret_cast<const char*>(data.data()),
                               reinterpret_cast<char*>(encoded.data() + 4),
                               static_cast<int>(data.size()), static_cast<int>(encoded.size() - 4));
  ASSERT_GT(n, 0);
  encoded.resize(4 + static_cast<size_t>(n));
  std::vector<std::byte> into;
  ASSERT_TRUE(testing::DecodeIntoGuarded(*Lz4(), encoded, data.size(), &into).ok());
  EXPECT_EQ(into, data);
}

TEST(Lz4CodecTest, CorruptInput) {
  auto codec = Lz4();
  std::vector<std::byte> data = FieldBytes(50000);
  std::vector<std::byte> encoded = testing::ExpectRoundTrip(*codec, data);
  testing::ExpectTruncationFails(*codec, encoded, data.size());
  testing::FuzzDecode(*codec, encoded, data.size(), 1000);
  // A header claiming far more than the block can hold is refused before allocating.
  std::vector<std::byte> bomb = {std::byte{0xFF}, std::byte{0xFF}, std::byte{0xFF}, std::byte{0x7F},
                                 std::byte{0x00}};
  ByteBuffer decoded;
  Status status = codec->Decode(bomb, DecodedSize::AtMost(~uint64_t{0}), &decoded);
  EXPECT_TRUE(IsCorrupt(status));
  EXPECT_NE(status.message().find("impossible"), std::string::npos) << status.message();
  // With a bound (behind a variable-size codec), a plausible header above it is refused too.
  testing::ExpectBombRefused(
      *codec, encoded, 1000,
      "numcodecs.lz4: header declares 50000 bytes, more than 1000 bytes, the "
      "most this chunk's declared size allows here");
  status = codec->Decode(encoded, 7, &decoded);
  EXPECT_NE(status.message().find("numcodecs.lz4: data decodes to 50000 bytes, expected 7"),
            std::string::npos)
      << status.message();
}

TEST(Lz4CodecTest, Configuration) {
  auto representation = testing::Representation(DataType::kUInt8, {1});
  EXPECT_TRUE(MakeLz4Codec(nlohmann::json::object(), representation).ok());
  EXPECT_TRUE(
      testing::IsMetadataError(MakeLz4Codec({{"acceleration", "fast"}}, representation).status()));
  EXPECT_TRUE(testing::IsMetadataError(MakeLz4Codec({{"level", 1}}, representation).status()));
  EXPECT_EQ(
      Lz4({{"acceleration", 3}})->ToJson(),
      nlohmann::json::parse(R"({"name":"numcodecs.lz4","configuration":{"acceleration":3}})"));
}

TEST(Lz4CodecTest, ConcurrentDecodes) {
  auto codec = Lz4();
  std::vector<std::byte> data = testing::FieldBytes(200000);
  std::vector<std::byte> encoded = testing::ExpectRoundTrip(*codec, data);
  testing::ExpectConcurrentDecode(*codec, encoded, data);
}

}  // namespace
}  // namespace zarrstream

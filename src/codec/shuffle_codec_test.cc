#include "codec/shuffle_codec.h"

#include <gtest/gtest.h>

#include "codec/codec_test_harness.h"

namespace zarrstream {
namespace {

std::unique_ptr<BytesToBytesCodec> Shuffle(const nlohmann::json& config,
                                           DataType type = DataType::kFloat32) {
  auto codec = MakeShuffleCodec(config, testing::Representation(type, {1}));
  EXPECT_TRUE(codec.ok()) << codec.status().ToString();
  return std::move(codec).value();
}

TEST(ShuffleCodecTest, MatchesNumcodecs) {
  // numcodecs.Shuffle(elementsize=4).encode(np.arange(6, dtype="<u4"))
  std::vector<uint8_t> expected(24, 0);
  for (int i = 0; i < 6; ++i) expected[i] = static_cast<uint8_t>(i);
  std::vector<uint32_t> values = {0, 1, 2, 3, 4, 5};
  ByteBuffer encoded;
  ASSERT_TRUE(Shuffle({{"elementsize", 4}})->Encode(testing::AsBytes(values), &encoded).ok());
  EXPECT_TRUE(std::equal(encoded.span().begin(), encoded.span().end(),
                         std::as_bytes(std::span(expected)).begin()));
}

TEST(ShuffleCodecTest, RoundTripEveryElementSize) {
  for (int size : {0, 1, 2, 3, 4, 8, 16, 24}) {
    SCOPED_TRACE(size);
    auto codec = Shuffle({{"elementsize", size}});
    for (size_t n : {0, 1, 7, 48, 1001, 100000})
      testing::ExpectRoundTrip(*codec, testing::RandomBytes(n));
  }
}

TEST(ShuffleCodecTest, TrailingPartialElementIsLeftAsIs) {
  std::vector<uint8_t> data = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};  // two 4-byte elements + 2 bytes
  ByteBuffer encoded;
  ASSERT_TRUE(Shuffle({{"elementsize", 4}})->Encode(std::as_bytes(std::span(data)), &encoded).ok());
  const std::vector<uint8_t> expected = {1, 5, 2, 6, 3, 7, 4, 8, 9, 10};
  EXPECT_TRUE(std::equal(encoded.span().begin(), encoded.span().end(),
                         std::as_bytes(std::span(expected)).begin()));
}

TEST(ShuffleCodecTest, SizeMismatchIsCorrupt) {
  auto codec = Shuffle({});
  ByteBuffer decoded;
  EXPECT_TRUE(testing::IsCorrupt(codec->Decode(testing::RandomBytes(16), 20, &decoded)));
  std::vector<std::byte> into;
  EXPECT_TRUE(
      testing::IsCorrupt(testing::DecodeIntoGuarded(*codec, testing::RandomBytes(16), 12, &into)));
}

TEST(ShuffleCodecTest, Configuration) {
  EXPECT_EQ(
      Shuffle({}, DataType::kFloat64)->ToJson(),
      nlohmann::json::parse(R"({"name":"numcodecs.shuffle","configuration":{"elementsize":8}})"));
  auto representation = testing::Representation(DataType::kUInt8, {1});
  EXPECT_TRUE(
      testing::IsMetadataError(MakeShuffleCodec({{"elementsize", -1}}, representation).status()));
  EXPECT_TRUE(
      testing::IsMetadataError(MakeShuffleCodec({{"element_size", 4}}, representation).status()));
}

}  // namespace
}  // namespace zarrstream

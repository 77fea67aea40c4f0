#include "codec/bz2_codec.h"

#include <bzlib.h>
#include <gtest/gtest.h>

#include "codec/codec_test_harness.h"

namespace zarrstream {
namespace {

using testing::FieldBytes;
using testing::IsCorrupt;

std::unique_ptr<BytesToBytesCodec> Bz2(const nlohmann::json& config = {{"level", 1}}) {
  auto codec = MakeBz2Codec(config, testing::Representation(DataType::kFloat32, {1}));
  EXPECT_TRUE(codec.ok()) << codec.status().ToString();
  return std::move(codec).value();
}

std::vector<std::byte> LibraryCompress(std::span<const std::byte> data, int level) {
  unsigned int size = static_cast<unsigned int>(data.size() + data.size() / 100 + 600);
  std::vector<std::byte> out(size);
  EXPECT_EQ(BZ2_bzBuffToBuffCompress(reinterpret_cast<char*>(out.data()), &size,
                                     const_cast<char*>(reinterpret_cast<const char*>(data.data())),
                                     static_cast<unsigned int>(data.size()), level, 0, 0),
            BZ_OK);
  out.resize(size);
  return out;
}

TEST(Bz2CodecTest, RoundTrip) {
  auto codec = Bz2();
  for (size_t size : {0, 1, 1000, 300000}) {
    SCOPED_TRACE(size);
    testing::ExpectRoundTrip(*codec, FieldBytes(size));
  }
  // Unknown size and a ratio far above the first guess: the output grows.
  std::vector<std::byte> zeros(2 << 20, std::byte{0});
  testing::ExpectRoundTrip(*Bz2({{"level", 9}}), zeros);
}

TEST(Bz2CodecTest, DecodesNumcodecsOutputAndConcatenatedStreams) {
  // numcodecs.BZ2(level=1).encode(b"hello hello hello hello hello")
  const uint8_t numcodecs[] = {0x42, 0x5a, 0x68, 0x31, 0x31, 0x41, 0x59, 0x26, 0x53, 0x59,
                               0x89, 0xe4, 0xcb, 0x41, 0x00, 0x00, 0x04, 0x91, 0x00, 0x40,
                               0x00, 0x02, 0x44, 0xa0, 0x00, 0x30, 0xcd, 0x00, 0x54, 0x86,
                               0x94, 0xe8, 0xcd, 0x3a, 0x2a, 0x3c, 0x5d, 0xc9, 0x14, 0xe1,
                               0x42, 0x42, 0x27, 0x93, 0x2d, 0x04};
  auto codec = Bz2();
  ByteBuffer decoded;
  ASSERT_TRUE(codec->Decode(std::as_bytes(std::span(numcodecs)), 29, &decoded).ok());
  EXPECT_EQ(decoded.view(), "hello hello hello hello hello");

  std::vector<std::byte> a = FieldBytes(5000, 1), b = FieldBytes(9000, 2);
  std::vector<std::byte> encoded = LibraryCompress(a, 9);
  std::vector<std::byte> second = LibraryCompress(b, 1);
  encoded.insert(encoded.end(), second.begin(), second.end());
  std::vector<std::byte> both = a;
  both.insert(both.end(), b.begin(), b.end());
  ASSERT_TRUE(codec->Decode(encoded, both.size(), &decoded).ok());
  EXPECT_TRUE(std::equal(both.begin(), both.end(), decoded.data()));
  ASSERT_TRUE(codec->Decode(encoded, DecodedSize::AtMost(both.size() + 100), &decoded).ok());
  EXPECT_EQ(decoded.size(), both.size());
  // Garbage after the last stream is not another stream.
  encoded.push_back(std::byte{0x42});
  EXPECT_TRUE(IsCorrupt(codec->Decode(encoded, both.size(), &decoded)));
}

TEST(Bz2CodecTest, CorruptInput) {
  auto codec = Bz2();
  std::vector<std::byte> data = FieldBytes(20000);
  std::vector<std::byte> encoded = testing::ExpectRoundTrip(*codec, data);
  testing::ExpectTruncationFails(*codec, encoded, data.size());
  testing::FuzzDecode(*codec, encoded, data.size(), 100);
}

// bzip2 declares no size and expands a few dozen bytes into megabytes: behind a variable-size codec
// the output grows only up to the bound the chunk's declared size gives (issue 9).
TEST(Bz2CodecTest, BombsStopAtTheBound) {
  const std::vector<std::byte> zeros(16 << 20, std::byte{0});
  std::vector<std::byte> encoded = LibraryCompress(zeros, 9);
  ASSERT_LT(encoded.size(), 1000u);
  testing::ExpectBombRefused(*Bz2(), encoded, 64 << 10,
                             "numcodecs.bz2: data decodes to more than 65536 bytes, the most this "
                             "chunk's declared size allows here");
}

TEST(Bz2CodecTest, Configuration) {
  auto representation = testing::Representation(DataType::kUInt8, {1});
  EXPECT_TRUE(testing::IsMetadataError(MakeBz2Codec({{"level", 0}}, representation).status()));
  EXPECT_TRUE(testing::IsMetadataError(MakeBz2Codec({{"clevel", 1}}, representation).status()));
  EXPECT_EQ(Bz2({})->ToJson(),
            nlohmann::json::parse(R"({"name":"numcodecs.bz2","configuration":{"level":1}})"));
}

}  // namespace
}  // namespace zarrstream

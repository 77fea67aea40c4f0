#include "codec/deflate_codec.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include "codec/codec_test_harness.h"

namespace zarrstream {
namespace {

using testing::AsBytes;
using testing::FieldBytes;
using testing::IsCorrupt;
using testing::IsMetadataError;

const ChunkRepresentation kRepresentation = testing::Representation(DataType::kFloat32, {16});

std::unique_ptr<BytesToBytesCodec> Gzip(const nlohmann::json& config = {{"level", 5}}) {
  auto codec = MakeGzipCodec(config, kRepresentation);
  EXPECT_TRUE(codec.ok()) << codec.status().ToString();
  return std::move(codec).value();
}

std::unique_ptr<BytesToBytesCodec> Zlib(const nlohmann::json& config = {{"level", 1}}) {
  auto codec = MakeZlibCodec(config, kRepresentation);
  EXPECT_TRUE(codec.ok()) << codec.status().ToString();
  return std::move(codec).value();
}

// zlib's gzip writer (deflateInit2 with windowBits 31), as Python's gzip module uses.
std::vector<std::byte> ZlibGzip(std::span<const std::byte> data, int level = 6) {
  z_stream s{};
  EXPECT_EQ(deflateInit2(&s, level, Z_DEFLATED, 31, 8, Z_DEFAULT_STRATEGY), Z_OK);
  std::vector<std::byte> out(deflateBound(&s, data.size()) + 64);
  s.next_in = reinterpret_cast<Bytef*>(const_cast<std::byte*>(data.data()));
  s.avail_in = static_cast<uInt>(data.size());
  s.next_out = reinterpret_cast<Bytef*>(out.data());
  s.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&s, Z_FINISH), Z_STREAM_END);
  out.resize(s.total_out);
  deflateEnd(&s);
  return out;
}

// zlib's compress2 (RFC 1950), as numcodecs' Zlib writes.
std::vector<std::byte> ZlibCompress2(std::span<const std::byte> data, int level = 6) {
  uLongf size = compressBound(data.size());
  std::vector<std::byte> out(size);
  EXPECT_EQ(compress2(reinterpret_cast<Bytef*>(out.data()), &size,
                      reinterpret_cast<const Bytef*>(data.data()), data.size(), level),
            Z_OK);
  out.resize(size);
  return out;
}

TEST(GzipCodecTest, RoundTrip) {
  for (int level : {0, 1, 5, 9}) {
    auto codec = Gzip({{"level", level}});
    for (size_t size : {0, 1, 1000, 1 << 20}) {
      SCOPED_TRACE(std::to_string(level) + "/" + std::to_string(size));
      testing::ExpectRoundTrip(*codec, FieldBytes(size));
    }
  }
  testing::ExpectRoundTrip(*Gzip(), testing::RandomBytes(50000));
}

TEST(GzipCodecTest, DecodesZlibOutput) {
  auto codec = Gzip();
  std::vector<std::byte> data = FieldBytes(200000);
  std::vector<std::byte> encoded = ZlibGzip(data);
  ByteBuffer decoded;
  ASSERT_TRUE(codec->Decode(encoded, data.size(), &decoded).ok());
  EXPECT_TRUE(std::equal(data.begin(), data.end(), decoded.data()));
  ASSERT_TRUE(codec->Decode(encoded, DecodedSize::AtMost(2 * data.size()), &decoded).ok());
  EXPECT_EQ(decoded.size(), data.size());
  std::vector<std::byte> into;
  ASSERT_TRUE(testing::DecodeIntoGuarded(*codec, encoded, data.size(), &into).ok());
  EXPECT_EQ(into, data);
}

TEST(GzipCodecTest, DecodesConcatenatedMembersAndZeroPadding) {
  auto codec = Gzip();
  std::vector<std::byte> a = FieldBytes(3000, 1), b = FieldBytes(5000, 2);
  std::vector<std::byte> encoded = ZlibGzip(a);
  std::vector<std::byte> second = ZlibGzip(b);
  encoded.insert(encoded.end(), second.begin(), second.end());
  encoded.insert(encoded.end(), 7, std::byte{0});
  std::vector<std::byte> both = a;
  both.insert(both.end(), b.begin(), b.end());
  ByteBuffer decoded;
  ASSERT_TRUE(codec->Decode(encoded, both.size(), &decoded).ok());
  EXPECT_TRUE(std::equal(both.begin(), both.end(), decoded.data()));
  // Bounded size: the ISIZE guess (the last member's) is too small and the output must grow.
  ASSERT_TRUE(codec->Decode(encoded, DecodedSize::AtMost(both.size()), &decoded).ok());
  ASSERT_EQ(decoded.size(), both.size());
  EXPECT_TRUE(std::equal(both.begin(), both.end(), decoded.data()));
  // Anything but zeros after a member must be another member.
  encoded.push_back(std::byte{1});
  EXPECT_TRUE(IsCorrupt(codec->Decode(encoded, both.size(), &decoded)));
}

TEST(GzipCodecTest, CorruptInput) {
  auto codec = Gzip();
  std::vector<std::byte> data = FieldBytes(30000);
  std::vector<std::byte> encoded = testing::ExpectRoundTrip(*codec, data);
  testing::ExpectTruncationFails(*codec, encoded, data.size());
  testing::FuzzDecode(*codec, encoded, data.size());
  ByteBuffer decoded;
  Status status = codec->Decode(AsBytes("definitely not gzip"), 10, &decoded);
  EXPECT_TRUE(IsCorrupt(status));
  EXPECT_NE(status.message().find("gzip"), std::string::npos);
  // A zlib stream is not a gzip member.
  EXPECT_TRUE(IsCorrupt(codec->Decode(ZlibCompress2(data), data.size(), &decoded)));
}

TEST(ZlibCodecTest, RoundTrip) {
  for (int level : {0, 1, 9}) {
    auto codec = Zlib({{"level", level}});
    for (size_t size : {0, 1, 1000, 1 << 20}) {
      SCOPED_TRACE(std::to_string(level) + "/" + std::to_string(size));
      testing::ExpectRoundTrip(*codec, FieldBytes(size));
    }
  }
}

TEST(ZlibCodecTest, DecodesCompress2Output) {
  auto codec = Zlib();
  std::vector<std::byte> data = FieldBytes(200000);
  std::vector<std::byte> encoded = ZlibCompress2(data, 9);
  ByteBuffer decoded;
  ASSERT_TRUE(codec->Decode(encoded, data.size(), &decoded).ok());
  EXPECT_TRUE(std::equal(data.begin(), data.end(), decoded.data()));
  ASSERT_TRUE(codec->Decode(encoded, DecodedSize::AtMost(2 * data.size()), &decoded).ok());
  ASSERT_EQ(decoded.size(), data.size());
  EXPECT_TRUE(std::equal(data.begin(), data.end(), decoded.data()));
  // Bytes after the stream are corruption.
  encoded.push_back(std::byte{0});
  Status status = codec->Decode(encoded, data.size(), &decoded);
  EXPECT_TRUE(IsCorrupt(status));
  EXPECT_NE(status.message().find("after the zlib stream"), std::string::npos);
}

TEST(ZlibCodecTest, BoundedSizeGrowsItsOutput) {
  // ~1000:1, so the first guess (a few times the input) has to double many times.
  std::vector<std::byte> data(1 << 20, std::byte{7});
  std::vector<std::byte> encoded = ZlibCompress2(data, 9);
  ByteBuffer decoded;
  ASSERT_TRUE(Zlib()->Decode(encoded, DecodedSize::AtMost(data.size()), &decoded).ok());
  ASSERT_EQ(decoded.size(), data.size());
  EXPECT_TRUE(std::equal(data.begin(), data.end(), decoded.data()));
}

TEST(ZlibCodecTest, CorruptInput) {
  auto codec = Zlib();
  std::vector<std::byte> data = FieldBytes(30000);
  std::vector<std::byte> encoded = testing::ExpectRoundTrip(*codec, data);
  testing::ExpectTruncationFails(*codec, encoded, data.size());
  testing::FuzzDecode(*codec, encoded, data.size());
  ByteBuffer decoded;
  Status status = codec->Decode(encoded, data.size() * 2, &decoded);
  EXPECT_TRUE(IsCorrupt(status));
  EXPECT_NE(status.message().find("numcodecs.zlib: data decodes to 30000 bytes, expected 60000"),
            std::string::npos)
      << status.message();
}

// Behind a variable-size codec the decoder knows only the bound the chunk's declared size gives
// (issue 9): 16 MiB of zeros (16 KiB of DEFLATE) must stop at a 64 KiB bound, whatever the gzip
// trailer claims.
TEST(DeflateCodecTest, BombsStopAtTheBound) {
  const std::vector<std::byte> zeros(16 << 20, std::byte{0});
  constexpr uint64_t kLimit = 64 << 10;
  testing::ExpectBombRefused(*Gzip(), ZlibGzip(zeros), kLimit,
                             "gzip: data decodes to more than 65536 bytes, the most this chunk's "
                             "declared size allows here");
  testing::ExpectBombRefused(*Zlib(), ZlibCompress2(zeros), kLimit,
                             "numcodecs.zlib: data decodes to more than 65536 bytes");
  // An ISIZE trailer of 4 GiB - 1 is only a guess: the output never grows past the bound.
  std::vector<std::byte> lying = ZlibGzip(FieldBytes(1000));
  std::fill(lying.end() - 4, lying.end(), std::byte{0xFF});
  testing::ExpectBombRefused(*Gzip(), lying, kLimit, "gzip: corrupt or truncated gzip member");
}

TEST(DeflateCodecTest, Configuration) {
  EXPECT_TRUE(MakeGzipCodec(nlohmann::json::object(), kRepresentation).ok());
  EXPECT_TRUE(IsMetadataError(MakeGzipCodec({{"level", 10}}, kRepresentation).status()));
  EXPECT_TRUE(IsMetadataError(MakeGzipCodec({{"level", 1.5}}, kRepresentation).status()));
  EXPECT_TRUE(IsMetadataError(MakeZlibCodec({{"lvl", 1}}, kRepresentation).status()));
  auto status = MakeZlibCodec({{"level", -1}}, kRepresentation).status();
  EXPECT_TRUE(IsMetadataError(status));
  EXPECT_NE(status.message().find("numcodecs.zlib: configuration field 'level'"),
            std::string::npos);
  EXPECT_EQ(Gzip({{"level", 3}})->ToJson(),
            nlohmann::json::parse(R"({"name":"gzip","configuration":{"level":3}})"));
  EXPECT_EQ(Zlib({})->ToJson(),
            nlohmann::json::parse(R"({"name":"numcodecs.zlib","configuration":{"level":1}})"));
}

TEST(GzipCodecTest, ConcurrentDecodes) {
  auto codec = Gzip();
  std::vector<std::byte> data = testing::FieldBytes(200000);
  std::vector<std::byte> encoded = testing::ExpectRoundTrip(*codec, data);
  testing::ExpectConcurrentDecode(*codec, encoded, data);
}

}  // namespace
}  // namespace zarrstream

#include "codec/blosc_codec.h"

#include <blosc.h>
#include <gtest/gtest.h>

#include "codec/codec_test_harness.h"

namespace zarrstream {
namespace {

using testing::FieldBytes;
using testing::IsCorrupt;
using testing::IsMetadataError;

const ChunkRepresentation kFloat32 = testing::Representation(DataType::kFloat32, {1000});

std::unique_ptr<BytesToBytesCodec> Blosc(const nlohmann::json& config) {
  auto codec = MakeBloscCodec(config, kFloat32);
  EXPECT_TRUE(codec.ok()) << codec.status().ToString();
  return std::move(codec).value();
}

TEST(BloscCodecTest, RoundTripEveryCompressorAndShuffle) {
  std::vector<std::byte> data = FieldBytes(300000);
  for (const char* cname : {"lz4", "lz4hc", "zstd", "zlib", "blosclz", "snappy"}) {
    for (const char* shuffle : {"noshuffle", "shuffle", "bitshuffle"}) {
      SCOPED_TRACE(std::string(cname) + "/" + shuffle);
      auto codec = Blosc({{"cname", cname},
                          {"clevel", 5},
                          {"shuffle", shuffle},
                          {"typesize", 4},
                          {"blocksize", 0}});
      std::vector<std::byte> encoded = testing::ExpectRoundTrip(*codec, data);
      EXPECT_LE(encoded.size(), data.size() + BLOSC_MAX_OVERHEAD);
      // Noisy float bits: the fast compressors need the shuffle to find anything.
      if (std::string(shuffle) != "noshuffle") {
        EXPECT_LT(encoded.size(), data.size() * 3 / 4);
      }
      testing::ExpectRoundTrip(*codec, FieldBytes(13));  // below blosc's minimum block: memcpy
      testing::ExpectRoundTrip(*codec, FieldBytes(0));
    }
  }
}

TEST(BloscCodecTest, DecodesBloscCompressOutput) {
  ASSERT_EQ(blosc_set_compressor("zstd"), BLOSC_ZSTD);
  std::vector<std::byte> data = FieldBytes(100000);
  std::vector<std::byte> encoded(data.size() + BLOSC_MAX_OVERHEAD);
  int n =
      blosc_compress(5, BLOSC_SHUFFLE, 4, data.size(), data.data(), encoded.data(), encoded.size());
  ASSERT_GT(n, 0);
  encoded.resize(static_cast<size_t>(n));
  // The decoder needs nothing from the configuration: the header says it all.
  auto codec = Blosc({{"cname", "lz4"}, {"clevel", 1}, {"shuffle", "noshuffle"}});
  ByteBuffer decoded;
  ASSERT_TRUE(codec->Decode(encoded, data.size(), &decoded).ok());
  EXPECT_TRUE(std::equal(data.begin(), data.end(), decoded.data()));
  ASSERT_TRUE(codec->Decode(encoded, DecodedSize::AtMost(data.size()), &decoded).ok());
  EXPECT_EQ(decoded.size(), data.size());
  std::vector<std::byte> into;
  ASSERT_TRUE(testing::DecodeIntoGuarded(*codec, encoded, data.size(), &into).ok());
  EXPECT_EQ(into, data);
}

TEST(BloscCodecTest, CorruptInput) {
  auto codec = Blosc({{"cname", "lz4"}, {"clevel", 5}, {"shuffle", "shuffle"}});
  std::vector<std::byte> data = FieldBytes(200000);
  std::vector<std::byte> encoded = testing::ExpectRoundTrip(*codec, data);
  testing::ExpectTruncationFails(*codec, encoded, data.size());
  testing::FuzzDecode(*codec, encoded, data.size(), 1000);
  auto zstd = Blosc({{"cname", "zstd"}, {"clevel", 5}, {"shuffle", "bitshuffle"}});
  testing::FuzzDecode(*zstd, testing::ExpectRoundTrip(*zstd, data), data.size(), 500);

  ByteBuffer decoded;
  Status status = codec->Decode(encoded, 12345, &decoded);
  EXPECT_TRUE(IsCorrupt(status));
  EXPECT_NE(status.message().find("blosc: data decodes to 200000 bytes, expected 12345"),
            std::string::npos)
      << status.message();
  std::vector<std::byte> padded = encoded;
  padded.push_back(std::byte{0});
  EXPECT_TRUE(IsCorrupt(codec->Decode(padded, data.size(), &decoded)));
}

// A blosc header is 16 bytes that may declare up to 2 GiB. Behind a variable-size codec (issue 9)
// a declared size above the bound the chunk's declared size gives is refused before allocating.
TEST(BloscCodecTest, BombsStopAtTheBound) {
  auto codec = Blosc({{"cname", "lz4"}, {"clevel", 5}, {"shuffle", "shuffle"}});
  std::vector<std::byte> data = FieldBytes(200000);
  std::vector<std::byte> encoded = testing::ExpectRoundTrip(*codec, data);
  testing::ExpectBombRefused(*codec, encoded, 1000,
                             "blosc: header declares 200000 bytes, more than 1000 bytes, the most "
                             "this chunk's declared size allows here");
  // The same header claiming 2,000,000,000 bytes (nbytes, bytes 4-7, little endian).
  const uint32_t huge = 2000000000;
  for (int i = 0; i < 4; ++i) encoded[4 + i] = static_cast<std::byte>(huge >> (8 * i));
  testing::ExpectBombRefused(*codec, encoded, 1 << 20,
                             "blosc: header declares 2000000000 bytes, more than 1048576 bytes");
}

TEST(BloscCodecTest, TypesizeDefaultsToElementSize) {
  auto codec = MakeBloscCodec({{"cname", "lz4"}, {"clevel", 5}, {"shuffle", "shuffle"}},
                              testing::Representation(DataType::kFloat64, {10}));
  ASSERT_TRUE(codec.ok());
  EXPECT_EQ((*codec)->ToJson()["configuration"]["typesize"], 8);
  ByteBuffer encoded;
  ASSERT_TRUE((*codec)->Encode(FieldBytes(4096), &encoded).ok());
  size_t typesize = 0;
  int flags = 0;
  blosc_cbuffer_metainfo(encoded.data(), &typesize, &flags);
  EXPECT_EQ(typesize, 8u);
  EXPECT_TRUE(flags & BLOSC_DOSHUFFLE);
}

TEST(BloscCodecTest, Configuration) {
  EXPECT_TRUE(IsMetadataError(MakeBloscCodec({{"cname", "lzma"}}, kFloat32).status()));
  EXPECT_TRUE(IsMetadataError(MakeBloscCodec({{"clevel", 10}}, kFloat32).status()));
  EXPECT_TRUE(IsMetadataError(MakeBloscCodec({{"shuffle", 1}}, kFloat32).status()));
  EXPECT_TRUE(IsMetadataError(MakeBloscCodec({{"shuffle", "byteshuffle"}}, kFloat32).status()));
  EXPECT_TRUE(IsMetadataError(MakeBloscCodec({{"typesize", 0}}, kFloat32).status()));
  EXPECT_TRUE(IsMetadataError(MakeBloscCodec({{"blocksize", -1}}, kFloat32).status()));
  auto status = MakeBloscCodec({{"cname", "lz4"}, {"level", 5}}, kFloat32).status();
  EXPECT_TRUE(IsMetadataError(status));
  EXPECT_NE(status.message().find("blosc: unknown configuration field \"level\""),
            std::string::npos)
      << status.message();
  const auto json = nlohmann::json::parse(
      R"({"name":"blosc","configuration":{"cname":"zstd","clevel":3,"shuffle":"bitshuffle",
          "typesize":2,"blocksize":65536}})");
  EXPECT_EQ(Blosc(json["configuration"])->ToJson(), json);
}

TEST(BloscCodecTest, ConcurrentDecodes) {
  auto codec = Blosc({{"cname", "zstd"}, {"clevel", 3}, {"shuffle", "shuffle"}});
  std::vector<std::byte> data = testing::FieldBytes(200000);
  std::vector<std::byte> encoded = testing::ExpectRoundTrip(*codec, data);
  testing::ExpectConcurrentDecode(*codec, encoded, data);
}

}  // namespace
}  // namespace zarrstream

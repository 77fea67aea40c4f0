#include "codec/zstd_codec.h"

#include <gtest/gtest.h>
#include <zstd.h>

#include "codec/codec_test_harness.h"

namespace zarrstream {
namespace {

using testing::AsBytes;
using testing::FieldBytes;
using testing::IsCorrupt;
using testing::IsMetadataError;

std::unique_ptr<BytesToBytesCodec> MakeCodec(const nlohmann::json& config) {
  auto codec = MakeZstdCodec(config, testing::Representation(DataType::kFloat32, {16}));
  EXPECT_TRUE(codec.ok()) << codec.status().ToString();
  return std::move(codec).value();
}

// What the reference library writes, with the content-size field on or off.
std::vector<std::byte> ReferenceFrame(std::span<const std::byte> data, bool content_size,
                                      int level = 3) {
  ZSTD_CCtx* cctx = ZSTD_createCCtx();
  ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, level);
  ZSTD_CCtx_setParameter(cctx, ZSTD_c_contentSizeFlag, content_size ? 1 : 0);
  std::vector<std::byte> out(ZSTD_compressBound(data.size()));
  // Streaming end-to-end, as a writer that does not know the size up front would.
  ZSTD_inBuffer in{data.data(), data.size(), 0};
  ZSTD_outBuffer o{out.data(), out.size(), 0};
  if (!content_size) {
    size_t rc;
    do {
      rc = ZSTD_compressStream2(cctx, &o, &in, ZSTD_e_end);
    } while (rc != 0 && !ZSTD_isError(rc));
    EXPECT_FALSE(ZSTD_isError(rc));
    out.resize(o.pos);
  } else {
    size_t n = ZSTD_compress2(cctx, out.data(), out.size(), data.data(), data.size());
    EXPECT_FALSE(ZSTD_isError(n));
    out.resize(n);
  }
  ZSTD_freeCCtx(cctx);
  return out;
}

TEST(ZstdCodecTest, RoundTrip) {
  auto codec = MakeCodec({{"level", 3}, {"checksum", false}});
  for (size_t size : {0, 1, 100, 4096, 1 << 20}) {
    SCOPED_TRACE(size);
    testing::ExpectRoundTrip(*codec, FieldBytes(size));
  }
  testing::ExpectRoundTrip(*codec, testing::RandomBytes(100000));
}

TEST(ZstdCodecTest, EncodeWritesContentSizeAndChecksum) {
  auto codec = MakeCodec({{"level", 1}, {"checksum", true}});
  std::vector<std::byte> data = FieldBytes(5000);
  ByteBuffer encoded;
  ASSERT_TRUE(codec->Encode(data, &encoded).ok());
  EXPECT_EQ(ZSTD_getFrameContentSize(encoded.data(), encoded.size()), 5000u);
  // The checksum is the last 4 bytes; damaging it must be detected.
  encoded.data()[encoded.size() - 1] ^= std::byte{1};
  ByteBuffer decoded;
  EXPECT_TRUE(IsCorrupt(codec->Decode(encoded.span(), 5000, &decoded)));
}

TEST(ZstdCodecTest, DecodesFrameWithoutContentSize) {
  auto codec = MakeCodec({});
  std::vector<std::byte> data = FieldBytes(300000);
  std::vector<std::byte> frame = ReferenceFrame(data, /*content_size=*/false);
  ASSERT_EQ(ZSTD_getFrameContentSize(frame.data(), frame.size()), ZSTD_CONTENTSIZE_UNKNOWN);
  ByteBuffer decoded;
  ASSERT_TRUE(codec->Decode(frame, data.size(), &decoded).ok());
  EXPECT_TRUE(std::equal(data.begin(), data.end(), decoded.data()));
  // Bounded size: the streaming path grows its output.
  ASSERT_TRUE(codec->Decode(frame, DecodedSize::AtMost(data.size()), &decoded).ok());
  ASSERT_EQ(decoded.size(), data.size());
  EXPECT_TRUE(std::equal(data.begin(), data.end(), decoded.data()));
  std::vector<std::byte> into;
  ASSERT_TRUE(testing::DecodeIntoGuarded(*codec, frame, data.size(), &into).ok());
  EXPECT_EQ(into, data);
  testing::ExpectTruncationFails(*codec, frame, data.size());
}

TEST(ZstdCodecTest, DecodesConcatenatedFrames) {
  auto codec = MakeCodec({});
  std::vector<std::byte> a = FieldBytes(10000, 1), b = FieldBytes(7000, 2);
  for (bool content_size : {true, false}) {
    SCOPED_TRACE(content_size);
    std::vector<std::byte> frames = ReferenceFrame(a, content_size);
    std::vector<std::byte> second = ReferenceFrame(b, !content_size);
    frames.insert(frames.end(), second.begin(), second.end());
    std::vector<std::byte> both = a;
    both.insert(both.end(), b.begin(), b.end());
    ByteBuffer decoded;
    ASSERT_TRUE(codec->Decode(frames, both.size(), &decoded).ok());
    EXPECT_TRUE(std::equal(both.begin(), both.end(), decoded.data()));
    ASSERT_TRUE(codec->Decode(frames, DecodedSize::AtMost(both.size()), &decoded).ok());
    ASSERT_EQ(decoded.size(), both.size());
    EXPECT_TRUE(std::equal(both.begin(), both.end(), decoded.data()));
    std::vector<std::byte> into;
    ASSERT_TRUE(testing::DecodeIntoGuarded(*codec, frames, both.size(), &into).ok());
    EXPECT_EQ(into, both);
  }
}

TEST(ZstdCodecTest, SizeMismatchNamesBothSizes) {
  auto codec = MakeCodec({});
  std::vector<std::byte> frame = ReferenceFrame(FieldBytes(1000), /*content_size=*/true);
  ByteBuffer decoded;
  Status status = codec->Decode(frame, 4000, &decoded);
  EXPECT_TRUE(IsCorrupt(status));
  EXPECT_NE(status.message().find("zstd: data decodes to 1000 bytes, expected 4000"),
            std::string::npos)
      << status.message();
  status = codec->Decode(frame, 500, &decoded);
  EXPECT_TRUE(IsCorrupt(status));
  EXPECT_NE(status.message().find("frame decodes to 1000 bytes, expected 500"), std::string::npos)
      << status.message();
  // Without the content size the decoder finds out only when the output is full.
  frame = ReferenceFrame(FieldBytes(1000), /*content_size=*/false);
  status = codec->Decode(frame, 500, &decoded);
  EXPECT_TRUE(IsCorrupt(status));
  EXPECT_NE(status.message().find("more than 500 bytes"), std::string::npos) << status.message();
}

TEST(ZstdCodecTest, CorruptInput) {
  auto codec = MakeCodec({});
  std::vector<std::byte> data = FieldBytes(20000);
  std::vector<std::byte> encoded = testing::ExpectRoundTrip(*codec, data);
  testing::ExpectTruncationFails(*codec, encoded, data.size());
  testing::FuzzDecode(*codec, encoded, data.size());
  testing::FuzzDecode(*codec, ReferenceFrame(data, false), data.size());
  ByteBuffer decoded;
  EXPECT_TRUE(IsCorrupt(codec->Decode(AsBytes("not zstd at all"), 15, &decoded)));
  EXPECT_TRUE(
      IsCorrupt(codec->Decode(AsBytes("not zstd at all"), DecodedSize::AtMost(100), &decoded)));
  // A frame header claiming 2^40 bytes (then one empty raw block) is refused before allocating.
  const uint8_t bomb[] = {0x28, 0xB5, 0x2F, 0xFD, 0xC0, 0x00, 0, 0, 0, 0, 0, 1, 0, 0, 0x01, 0, 0};
  std::span<const std::byte> bomb_bytes = std::as_bytes(std::span(bomb));
  ASSERT_EQ(ZSTD_getFrameContentSize(bomb, sizeof(bomb)), uint64_t{1} << 40);
  ByteBuffer untouched;
  Status status = codec->Decode(bomb_bytes, DecodedSize::AtMost(~uint64_t{0}), &untouched);
  EXPECT_TRUE(IsCorrupt(status));
  EXPECT_NE(status.message().find("more than a frame of 17 bytes can hold"), std::string::npos)
      << status.message();
  EXPECT_EQ(untouched.capacity(), 0u);
  EXPECT_TRUE(IsCorrupt(codec->Decode(bomb_bytes, 10, &decoded)));
}

// Behind a variable-size codec the decoder knows only the bound the chunk's declared size gives
// (issue 9): a frame that declares or produces more fails with the bound in the message, having
// allocated nothing past it.
TEST(ZstdCodecTest, BombsStopAtTheBound) {
  auto codec = MakeCodec({});
  const std::vector<std::byte> zeros(1 << 20, std::byte{0});
  constexpr uint64_t kLimit = 64 << 10;
  // 1 MiB of zeros is a few dozen bytes of RLE blocks, so the declared size is plausible for the
  // frame; only the bound stops it, before anything is allocated.
  std::vector<std::byte> declared = ReferenceFrame(zeros, /*content_size=*/true);
  testing::ExpectBombRefused(
      *codec, declared, kLimit,
      "zstd: frame header declares 1048576 bytes, more than 65536 bytes, the "
      "most this chunk's declared size allows here");
  ByteBuffer decoded;
  EXPECT_FALSE(codec->Decode(declared, DecodedSize::AtMost(kLimit), &decoded).ok());
  EXPECT_EQ(decoded.capacity(), 0u);
  // Without a content size the stream decodes until it passes the bound.
  testing::ExpectBombRefused(*codec, ReferenceFrame(zeros, /*content_size=*/false), kLimit,
                             "zstd: data decodes to more than 65536 bytes, the most this chunk's "
                             "declared size allows here");
  // What the fuzzer found (fuzz/regressions/codec_decode_fuzzer): 14 bytes whose header declares
  // 3.4 GiB, which the decoder used to allocate whenever the size was not known exactly.
  const uint8_t found[] = {0x28, 0xb5, 0x2f, 0xfd, 0xb2, 0x00, 0x0d,
                           0x6d, 0x94, 0x1a, 0xda, 0x01, 0x00, 0x00};
  testing::ExpectBombRefused(*codec, std::as_bytes(std::span(found)), ~uint64_t{0},
                             "zstd: frame header declares 3659175021 bytes, more than a frame of "
                             "14 bytes can hold");
}

TEST(ZstdCodecTest, Configuration) {
  auto representation = testing::Representation(DataType::kUInt8, {4});
  EXPECT_TRUE(MakeZstdCodec(nullptr, representation).ok());
  EXPECT_TRUE(MakeZstdCodec({{"level", -5}}, representation).ok());
  auto bad_level = MakeZstdCodec({{"level", 99}}, representation);
  EXPECT_TRUE(IsMetadataError(bad_level.status()));
  EXPECT_NE(bad_level.status().message().find("zstd: configuration field 'level'"),
            std::string::npos)
      << bad_level.status().message();
  EXPECT_TRUE(IsMetadataError(MakeZstdCodec({{"level", "high"}}, representation).status()));
  EXPECT_TRUE(IsMetadataError(MakeZstdCodec({{"checksum", 1}}, representation).status()));
  auto unknown = MakeZstdCodec({{"levle", 3}}, representation);
  EXPECT_TRUE(IsMetadataError(unknown.status()));
  EXPECT_NE(unknown.status().message().find("levle"), std::string::npos);
  EXPECT_TRUE(IsMetadataError(MakeZstdCodec(nlohmann::json::array(), representation).status()));
  EXPECT_EQ(
      MakeCodec({{"level", 7}, {"checksum", true}})->ToJson(),
      nlohmann::json::parse(R"({"name":"zstd","configuration":{"level":7,"checksum":true}})"));
}

TEST(ZstdCodecTest, ConcurrentDecodes) {
  auto codec = MakeCodec({});
  std::vector<std::byte> data = testing::FieldBytes(200000);
  std::vector<std::byte> encoded = testing::ExpectRoundTrip(*codec, data);
  testing::ExpectConcurrentDecode(*codec, encoded, data);
}

}  // namespace
}  // namespace zarrstream

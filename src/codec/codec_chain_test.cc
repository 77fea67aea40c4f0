// CodecChain's decoded-size bounds (issue 9): what each bytes->bytes decoder is told of its output
// where the chain does not know it exactly, and that a decompression bomb behind a variable-size
// codec stops there. And what the prepared codecs say they are (CodecTraits).
#include "codec/codec_chain.h"

#include <gtest/gtest.h>
#include <zstd.h>

#include "codec/codec_test_harness.h"

namespace zarrstream {
namespace {

using testing::IsCorrupt;

// A float32 chunk of 16 elements: 64 bytes.
const ChunkRepresentation kChunk = testing::Representation(DataType::kFloat32, {16});

CodecSpec Bytes() { return {"bytes", {{"endian", "little"}}}; }
CodecSpec Gzip() { return {"numcodecs.gzip", {{"level", 1}}}; }
CodecSpec Zstd() { return {"zstd", {{"level", 1}, {"checksum", false}}}; }
CodecSpec Crc32c() { return {"crc32c", nlohmann::json::object()}; }

std::shared_ptr<const CodecChain> Chain(const std::vector<CodecSpec>& specs,
                                        const ChunkRepresentation& chunk = kChunk) {
  auto chain = CodecChain::Make(specs, chunk);
  EXPECT_TRUE(chain.ok()) << chain.status().ToString();
  return chain.ok() ? *chain : nullptr;
}

std::vector<std::byte> ZstdFrame(std::span<const std::byte> data) {
  std::vector<std::byte> out(ZSTD_compressBound(data.size()));
  const size_t n = ZSTD_compress(out.data(), out.size(), data.data(), data.size(), 1);
  EXPECT_FALSE(ZSTD_isError(n));
  out.resize(n);
  return out;
}

TEST(CodecChainTest, MaxEncodedSizeFollowsEachCodecsWorstCase) {
  EXPECT_EQ(Chain({Bytes()})->max_encoded_size(), 64u);
  EXPECT_EQ(Chain({Bytes(), Crc32c()})->max_encoded_size(), 68u);
  EXPECT_EQ(Chain({Bytes(), Gzip()})->max_encoded_size(), MaxCompressedSize(64));
  EXPECT_EQ(Chain({Bytes(), Gzip(), Crc32c()})->max_encoded_size(), MaxCompressedSize(64) + 4);
  EXPECT_EQ(Chain({Bytes(), Gzip(), Zstd()})->max_encoded_size(),
            MaxCompressedSize(MaxCompressedSize(64)));
  // A shard: its index (4 inner chunks x 16 bytes + crc32c) and each inner chunk at its bound.
  const nlohmann::json inner_codecs =
      nlohmann::json::array({{{"name", "bytes"}, {"configuration", {{"endian", "little"}}}},
                             {{"name", "numcodecs.gzip"}, {"configuration", {{"level", 1}}}}});
  const CodecSpec sharding{
      "sharding_indexed", {{"chunk_shape", nlohmann::json::array({4u})}, {"codecs", inner_codecs}}};
  EXPECT_EQ(Chain({sharding})->max_encoded_size(), 4 * 16 + 4 + 4 * MaxCompressedSize(16));
}

// The fuzzer's find (fuzz/regressions/codec_decode_fuzzer): zstd behind gzip, so zstd's decoded
// size is not known, and a 14-byte frame whose header declares 3.4 GiB. The chain now refuses it
// without the allocation, as it refuses a real frame larger than the chunk could have been.
TEST(CodecChainTest, BombBehindAVariableSizeCodecIsRefused) {
  auto chain = Chain({Bytes(), Gzip(), Zstd()});
  std::vector<std::byte> out(64);
  CodecScratch scratch;
  const uint8_t found[] = {0x28, 0xb5, 0x2f, 0xfd, 0xb2, 0x00, 0x0d,
                           0x6d, 0x94, 0x1a, 0xda, 0x01, 0x00, 0x00};
  Status status = chain->Decode(std::as_bytes(std::span(found)), out, &scratch);
  EXPECT_TRUE(IsCorrupt(status));
  EXPECT_NE(status.message().find("zstd: frame header declares 3659175021 bytes"),
            std::string::npos)
      << status.ToString();

  const std::vector<std::byte> zeros(1 << 20, std::byte{0});
  status = chain->Decode(ZstdFrame(zeros), out, &scratch);
  EXPECT_TRUE(IsCorrupt(status));
  const std::string expected = "zstd: frame header declares 1048576 bytes, more than " +
                               std::to_string(MaxCompressedSize(64)) +
                               " bytes, the most this chunk's declared size allows here";
  EXPECT_NE(status.message().find(expected), std::string::npos) << status.ToString();
  for (const ByteBuffer& buffer : scratch.buffers) EXPECT_LT(buffer.capacity(), 1u << 20);

  // What the chain itself writes still decodes.
  std::vector<std::byte> data = testing::FieldBytes(64);
  ByteBuffer encoded;
  ASSERT_TRUE(chain->Encode(data, &encoded).ok());
  ASSERT_TRUE(chain->Decode(encoded.span(), out, &scratch).ok());
  EXPECT_EQ(out, data);
}

// Prepared codecs say what they are as values (CodecTraits), whatever name the metadata gave them.
TEST(CodecChainTest, PreparedCodecsSayWhatTheyAre) {
  const ChunkRepresentation matrix = testing::Representation(DataType::kFloat64, {4, 4});
  auto chain = Chain({{"transpose", {{"order", {1, 0}}}},
                      {"bytes", {{"endian", "big"}}},
                      {"numcodecs.blosc", {{"cname", "zstd"}, {"shuffle", 2}}},
                      Crc32c()},
                     matrix);
  ASSERT_NE(chain, nullptr);
  ASSERT_EQ(chain->array_to_array().size(), 1u);
  EXPECT_EQ(chain->array_to_array()[0]->traits().type, CodecTraits::Type::kTranspose);
  const CodecTraits bytes = chain->array_to_bytes().traits();
  EXPECT_EQ(bytes.type, CodecTraits::Type::kBytes);
  EXPECT_TRUE(bytes.big_endian);
  ASSERT_EQ(chain->bytes_to_bytes().size(), 2u);
  const CodecTraits blosc = chain->bytes_to_bytes()[0]->traits();
  EXPECT_EQ(blosc.type, CodecTraits::Type::kBlosc);
  EXPECT_EQ(blosc.blosc_compressor, CodecTraits::BloscCompressor::kZstd);
  EXPECT_EQ(blosc.blosc_shuffle, CodecTraits::BloscShuffle::kBit);
  EXPECT_EQ(chain->bytes_to_bytes()[1]->traits().type, CodecTraits::Type::kCrc32c);

  EXPECT_FALSE(Chain({Bytes()})->array_to_bytes().traits().big_endian);
  EXPECT_EQ(Chain({Bytes(), Gzip()})->bytes_to_bytes()[0]->traits().type, CodecTraits::Type::kGzip);
  EXPECT_EQ(
      Chain({Bytes(), {"numcodecs.zlib", {{"level", 1}}}})->bytes_to_bytes()[0]->traits().type,
      CodecTraits::Type::kZlib);
  EXPECT_TRUE(Chain({Bytes(), {"numcodecs.zstd", {{"level", 1}, {"checksum", true}}}})
                  ->bytes_to_bytes()[0]
                  ->traits()
                  .checksum);
  EXPECT_FALSE(Chain({Bytes(), Zstd()})->bytes_to_bytes()[0]->traits().checksum);
}

}  // namespace
}  // namespace zarrstream

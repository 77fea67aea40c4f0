#include "codec/codec_registry.h"

#include <gtest/gtest.h>

#include "codec/codec_test_harness.h"

namespace zarrstream {
namespace {

TEST(CodecRegistryTest, BuiltinCodecs) {
  struct Expected {
    const char* name;
    CodecKind kind;
    bool gpu;
  };
  for (Expected e : {Expected{"transpose", CodecKind::kArrayToArray, false},
                     Expected{"numcodecs.delta", CodecKind::kArrayToArray, false},
                     Expected{"numcodecs.fixedscaleoffset", CodecKind::kArrayToArray, false},
                     Expected{"bytes", CodecKind::kArrayToBytes, false},
                     Expected{"sharding_indexed", CodecKind::kArrayToBytes, false},
                     Expected{"zstd", CodecKind::kBytesToBytes, true},
                     Expected{"gzip", CodecKind::kBytesToBytes, true},
                     Expected{"numcodecs.zlib", CodecKind::kBytesToBytes, true},
                     Expected{"numcodecs.lz4", CodecKind::kBytesToBytes, true},
                     Expected{"blosc", CodecKind::kBytesToBytes, true},
                     Expected{"crc32c", CodecKind::kBytesToBytes, false},
                     Expected{"numcodecs.bz2", CodecKind::kBytesToBytes, false},
                     Expected{"numcodecs.shuffle", CodecKind::kBytesToBytes, false}}) {
    SCOPED_TRACE(e.name);
    const CodecRegistration* registration = FindCodec(e.name);
    ASSERT_NE(registration, nullptr);
    EXPECT_EQ(registration->name, e.name);
    EXPECT_EQ(registration->kind, e.kind);
    EXPECT_EQ(registration->gpu_decodable, e.gpu);
    EXPECT_EQ(static_cast<bool>(registration->array_to_array), e.kind == CodecKind::kArrayToArray);
    EXPECT_EQ(static_cast<bool>(registration->array_to_bytes), e.kind == CodecKind::kArrayToBytes);
    EXPECT_EQ(static_cast<bool>(registration->bytes_to_bytes), e.kind == CodecKind::kBytesToBytes);
  }
  EXPECT_EQ(FindCodec("lzma"), nullptr);
  EXPECT_EQ(FindCodec(""), nullptr);
}

TEST(CodecRegistryTest, FactoriesPrepareCodecs) {
  auto representation = testing::Representation(DataType::kFloat32, {4, 4});
  auto bytes = FindCodec("bytes")->array_to_bytes({{"endian", "little"}}, representation);
  ASSERT_TRUE(bytes.ok());
  auto zstd = FindCodec("zstd")->bytes_to_bytes({{"level", 1}}, representation);
  ASSERT_TRUE(zstd.ok());
  testing::ExpectRoundTrip(**zstd, testing::FieldBytes(64));
}

TEST(CodecRegistryTest, RegisterAddsAndReplacesWithoutInvalidating) {
  const CodecRegistration* before = FindCodec("crc32c");
  ASSERT_NE(before, nullptr);
  CodecRegistration custom{"test.custom_codec",
                           CodecKind::kBytesToBytes,
                           {},
                           {},
                           FindCodec("crc32c")->bytes_to_bytes,
                           false};
  RegisterCodec(custom);
  const CodecRegistration* found = FindCodec("test.custom_codec");
  ASSERT_NE(found, nullptr);
  EXPECT_EQ(found->kind, CodecKind::kBytesToBytes);
  custom.gpu_decodable = true;
  RegisterCodec(custom);
  EXPECT_TRUE(FindCodec("test.custom_codec")->gpu_decodable);
  EXPECT_FALSE(found->gpu_decodable);  // the old registration is still alive
  EXPECT_EQ(FindCodec("crc32c"), before);
}

}  // namespace
}  // namespace zarrstream

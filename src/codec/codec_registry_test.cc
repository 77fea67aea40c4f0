#include "codec/codec_registry.h"

#include <gtest/gtest.h>

#include "codec/codec_test_harness.h"

namespace zarrstream {
namespace {

TEST(CodecRegistryTest, BuiltinCodecs) {
  struct Expected {
    const char* name;
    CodecKind kind;
  };
  for (Expected e :
       {Expected{"transpose", CodecKind::kArrayToArray},
        Expected{"numcodecs.delta", CodecKind::kArrayToArray},
        Expected{"numcodecs.fixedscaleoffset", CodecKind::kArrayToArray},
        Expected{"bytes", CodecKind::kArrayToBytes},
        Expected{"sharding_indexed", CodecKind::kArrayToBytes},
        Expected{"zstd", CodecKind::kBytesToBytes}, Expected{"gzip", CodecKind::kBytesToBytes},
        Expected{"numcodecs.zlib", CodecKind::kBytesToBytes},
        Expected{"numcodecs.lz4", CodecKind::kBytesToBytes},
        Expected{"blosc", CodecKind::kBytesToBytes}, Expected{"crc32c", CodecKind::kBytesToBytes},
        Expected{"numcodecs.bz2", CodecKind::kBytesToBytes},
        Expected{"numcodecs.shuffle", CodecKind::kBytesToBytes}}) {
    SCOPED_TRACE(e.name);
    const CodecRegistration* registration = FindCodec(e.name);
    ASSERT_NE(registration, nullptr);
    EXPECT_EQ(registration->name, e.name);
    EXPECT_EQ(registration->kind, e.kind);
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
  CodecRegistration custom{
      "test.custom_codec", CodecKind::kBytesToBytes, {}, {}, FindCodec("crc32c")->bytes_to_bytes};
  RegisterCodec(custom);
  const CodecRegistration* found = FindCodec("test.custom_codec");
  ASSERT_NE(found, nullptr);
  EXPECT_EQ(found->kind, CodecKind::kBytesToBytes);
  custom.bytes_to_bytes = FindCodec("zstd")->bytes_to_bytes;
  RegisterCodec(custom);
  const auto representation = testing::Representation(DataType::kFloat32, {4});
  EXPECT_EQ(
      (*FindCodec("test.custom_codec")->bytes_to_bytes(nlohmann::json::object(), representation))
          ->traits()
          .type,
      CodecTraits::Type::kZstd);
  // The old registration is still alive.
  EXPECT_EQ((*found->bytes_to_bytes(nlohmann::json::object(), representation))->traits().type,
            CodecTraits::Type::kCrc32c);
  EXPECT_EQ(FindCodec("crc32c"), before);
}

}  // namespace
}  // namespace zarrstream

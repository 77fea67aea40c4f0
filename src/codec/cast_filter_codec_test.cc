#include "codec/cast_filter_codec.h"

#include <gtest/gtest.h>

#include <cstring>

#include "codec/codec_registry.h"
#include "codec/codec_test_harness.h"

namespace zarrstream {
namespace {

using testing::ExpectFilterDecodes;
using testing::ExpectFilterEncodes;
using testing::Representation;
using testing::TypeOf;

// Produced by numcodecs 0.16 with numpy 2.4: codec.encode(x) == enc and codec.decode(enc) == dec,
// with the codec's get_config() as configuration. 12 values each, little-endian hex; x holds a
// tie (0.1875), a third and a value outside float16's and int16's range.
struct CastCase {
  const char* name;
  const char* configuration;
  const char* dtype;  // x and dec
  const char* encoded_type;
  const char* x;
  const char* enc;
  const char* dec;
};

const CastCase kCases[] = {
    {"numcodecs.quantize", R"({"digits": 2, "dtype": "<f8", "astype": "<f4"})", "<f8", "<f4",
     "000000000000c83f000000000000e0bf555555555555d53f23dbf93e80842e418040688d27baf5bfc2c4b71084b2e"
     "4bfa0bb44bb653d18c0fd115359f843e6bf66230080dec304c075aef39320f023403019e28aeeace53fa1763c9020"
     "edf0bf",
     "0000403e000000bf0000ac3e022474490000aebf000026bf0000c2c0000032bf000026c000801f4100002e3f00008"
     "7bf",
     "000000000000c83f000000000000e0bf000000000080d53f0000004080842e410000000000c0f5bf0000000000c0e"
     "4bf00000000004018c0000000000040e6bf0000000000c004c00000000000f023400000000000c0e53f0000000000"
     "e0f0bf"},
    {"numcodecs.quantize", R"({"digits": 1, "dtype": "<f4", "astype": "<f4"})", "<f4", "<f4",
     "0000403e000000bfabaaaa3e022474493cd1adbf219425bf2eebc1c0c31f32bff41e26c005811f4174672d3f05698"
     "7bf",
     "0000403e000000bf0000a03e022474490000b0bf000020bf0000c2c0000030bf000028c0000020410000303f00008"
     "8bf",
     "0000403e000000bf0000a03e022474490000b0bf000020bf0000c2c0000030bf000028c0000020410000303f00008"
     "8bf"},
    {"numcodecs.quantize", R"({"digits": 3, "dtype": "<f4", "astype": "<f2"})", "<f4", "<f2",
     "0000403e000000bfabaaaa3e022474493cd1adbf219425bf2eebc1c0c31f32bff41e26c005811f4174672d3f05698"
     "7bf",
     "003200b85435007c6fbd2cb90fc690b931c1fc486c393bbc",
     "0000403e000000bf0080aa3e0000807f00e0adbf008025bf00e0c1c0000032bf002026c000801f4100802d3f00608"
     "7bf"},
    {"numcodecs.bitround", R"({"keepbits": 5})", "<f4", "<f4",
     "0000403e000000bfabaaaa3e022474493cd1adbf219425bf2eebc1c0c31f32bff41e26c005811f4174672d3f05698"
     "7bf",
     "0000403e000000bf0000ac3e000074490000acbf000024bf0000c0c0000034bf000028c00000204100002c3f00008"
     "8bf",
     "0000403e000000bf0000ac3e000074490000acbf000024bf0000c0c0000034bf000028c00000204100002c3f00008"
     "8bf"},
    {"numcodecs.bitround", R"({"keepbits": 12})", "<f8", "<f8",
     "000000000000c83f000000000000e0bf555555555555d53f23dbf93e80842e418040688d27baf5bfc2c4b71084b2e"
     "4bfa0bb44bb653d18c0fd115359f843e6bf66230080dec304c075aef39320f023403019e28aeeace53fa1763c9020"
     "edf0bf",
     "000000000000c83f000000000000e0bf000000000055d53f0000000000852e410000000000baf5bf0000000000b3e"
     "4bf00000000003d18c0000000000044e6bf0000000000c404c00000000000f023400000000000ade53f0000000000"
     "edf0bf",
     "000000000000c83f000000000000e0bf000000000055d53f0000000000852e410000000000baf5bf0000000000b3e"
     "4bf00000000003d18c0000000000044e6bf0000000000c404c00000000000f023400000000000ade53f0000000000"
     "edf0bf"},
    {"numcodecs.bitround", R"({"keepbits": 3})", "<f2", "<f2",
     "003200b85535007c6fbd2db90fc691b931c1fc486b393bbc",
     "003200b88035007c80bd00b900c680b900c10049803900bc",
     "003200b88035007c80bd00b900c680b900c10049803900bc"},
    {"numcodecs.bitround", R"({"keepbits": 0})", "<f4", "<f4",
     "0000403e000000bfabaaaa3e022474493cd1adbf219425bf2eebc1c0c31f32bff41e26c005811f4174672d3f05698"
     "7bf",
     "0000003e000000bf0000803e00008049000080bf000000bf000000c1000000bf000000c0000000410000003f00008"
     "0bf",
     "0000003e000000bf0000803e00008049000080bf000000bf000000c1000000bf000000c0000000410000003f00008"
     "0bf"},
    {"numcodecs.astype", R"({"encode_dtype": "<i2", "decode_dtype": "<f8"})", "<f8", "<i2",
     "000000000000c83f000000000000e0bf555555555555d53f23dbf93e80842e418040688d27baf5bfc2c4b71084b2e"
     "4bfa0bb44bb653d18c0fd115359f843e6bf66230080dec304c075aef39320f023403019e28aeeace53fa1763c9020"
     "edf0bf",
     "0000000000004042ffff0000faff0000feff09000000ffff",
     "000000000000000000000000000000000000000000000000000000000090d040000000000000f0bf0000000000000"
     "00000000000000018c0000000000000000000000000000000c0000000000000224000000000000000000000000000"
     "00f0bf"},
    {"numcodecs.astype", R"({"encode_dtype": "<f2", "decode_dtype": "<f4"})", "<f4", "<f2",
     "0000403e000000bfabaaaa3e022474493cd1adbf219425bf2eebc1c0c31f32bff41e26c005811f4174672d3f05698"
     "7bf",
     "003200b85535007c6fbd2db90fc691b931c1fc486b393bbc",
     "0000403e000000bf00a0aa3e0000807f00e0adbf00a025bf00e0c1c0002032bf002026c000801f4100602d3f00608"
     "7bf"},
    {"numcodecs.astype", R"({"encode_dtype": "<i4", "decode_dtype": "|i1"})", "<i1", "<i4",
     "07ec0d04cae70ee5998e1bd6",
     "07000000ecffffff0d00000004000000caffffffe7ffffff0e000000e5ffffff99ffffff8effffff1b000000d6fff"
     "fff",
     "07ec0d04cae70ee5998e1bd6"},
    {"numcodecs.astype", R"({"encode_dtype": "|u1", "decode_dtype": "<i8"})", "<i8", "|u1",
     "0700000000000000ecffffffffffffff0d00000000000000045a620200000000caffffffffffffffe7fffffffffff"
     "fff0effffffffffffffe5ffffffffffffff99ffffffffffffff8e010000000000001b00000000000000d6ffffffff"
     "ffffff",
     "07ec0d04cae70ee5998e1bd6",
     "0700000000000000ec000000000000000d000000000000000400000000000000ca00000000000000e700000000000"
     "0000e00000000000000e50000000000000099000000000000008e000000000000001b00000000000000d600000000"
     "000000"},
};

std::unique_ptr<ArrayToArrayCodec> Make(const std::string& name,
                                        const nlohmann::json& configuration, DataType type,
                                        uint64_t n = 12) {
  const CodecRegistration* registration = FindCodec(name);
  EXPECT_NE(registration, nullptr) << name;
  if (registration == nullptr) return nullptr;
  auto codec = registration->array_to_array(configuration, Representation(type, {n}));
  EXPECT_TRUE(codec.ok()) << codec.status().ToString();
  return codec.ok() ? std::move(*codec) : nullptr;
}

TEST(CastFilterCodecTest, EncodesAndDecodesAsNumcodecs) {
  for (const CastCase& c : kCases) {
    SCOPED_TRACE(std::string(c.name) + " " + c.configuration);
    const DataType type = TypeOf(c.dtype), encoded_type = TypeOf(c.encoded_type);
    auto codec = Make(c.name, nlohmann::json::parse(c.configuration), type);
    ASSERT_NE(codec, nullptr);
    EXPECT_EQ(codec->encoded_representation().data_type, encoded_type);
    ExpectFilterEncodes(*codec, type, c.x, c.enc);
    ExpectFilterDecodes(*codec, type, c.enc, c.dec);
    // Decoding is the identity exactly when it keeps the type; the GPU path relies on it.
    EXPECT_EQ(codec->traits().identity_decode, type == encoded_type);
  }
}

TEST(CastFilterCodecTest, TakesTheTypeNamesZarrPythonWritesInV3) {
  // zarr-python 3 writes str(numpy dtype) for quantize's dtype and the user's spelling for astype.
  auto quantize =
      Make("numcodecs.quantize", {{"digits", 2}, {"dtype", "float32"}}, DataType::kFloat32);
  ASSERT_NE(quantize, nullptr);
  EXPECT_EQ(quantize->encoded_representation().data_type, DataType::kFloat32);
  auto astype = Make("numcodecs.astype", {{"encode_dtype", "f2"}, {"decode_dtype", "f4"}},
                     DataType::kFloat32);
  ASSERT_NE(astype, nullptr);
  EXPECT_EQ(astype->encoded_representation().data_type, DataType::kFloat16);
  auto bytes = Make("numcodecs.astype", {{"encode_dtype", "u1"}}, DataType::kInt16);
  ASSERT_NE(bytes, nullptr);
  EXPECT_EQ(bytes->encoded_representation().data_type, DataType::kUInt8);
  EXPECT_EQ(bytes->ToJson()["configuration"]["decode_dtype"], "<i2");
}

TEST(CastFilterCodecTest, RefusesConfigurationsNumcodecsCannotHaveWritten) {
  const ChunkRepresentation f4 = Representation(DataType::kFloat32, {4});
  const ChunkRepresentation i2 = Representation(DataType::kInt16, {4});
  auto make = [](const char* name, const nlohmann::json& configuration,
                 const ChunkRepresentation& decoded) {
    return FindCodec(name)->array_to_array(configuration, decoded).status();
  };
  // Metadata errors name the field.
  for (const auto& [name, configuration, message] :
       std::vector<std::tuple<const char*, nlohmann::json, const char*>>{
           {"numcodecs.bitround", {{"keepbits", 24}}, "'keepbits' must be an integer in [0, 23]"},
           {"numcodecs.bitround", nlohmann::json::object(), "'keepbits' is required"},
           {"numcodecs.quantize", {{"dtype", "<f4"}}, "'digits' is required"},
           {"numcodecs.quantize", {{"digits", 2}, {"dtype", "<f8"}}, "'dtype' must match"},
           {"numcodecs.astype",
            {{"encode_dtype", "<f2"}, {"decode_dtype", "<f8"}},
            "'decode_dtype' must match"},
           {"numcodecs.astype", {{"encode_dtype", "float128"}}, "'encode_dtype' must be a numpy"},
       }) {
    const Status status = make(name, configuration, f4);
    EXPECT_EQ(status.code(), ErrorCode::kMetadata) << status.ToString();
    EXPECT_NE(status.message().find(message), std::string::npos) << status.ToString();
  }
  // Types numcodecs refuses to encode are unsupported.
  EXPECT_EQ(make("numcodecs.bitround", {{"keepbits", 3}}, i2).code(), ErrorCode::kUnsupported);
  EXPECT_EQ(make("numcodecs.quantize", {{"digits", 2}, {"dtype", "<i2"}}, i2).code(),
            ErrorCode::kUnsupported);
  EXPECT_EQ(make("numcodecs.astype", {{"encode_dtype", "<c8"}}, f4).code(),
            ErrorCode::kUnsupported);
}

}  // namespace
}  // namespace zarrstream

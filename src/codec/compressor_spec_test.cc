// Short compressor specs → the exact v3 codec JSON zarr-python writes, and the errors for bad ones.
#include "codec/compressor_spec.h"

#include <gtest/gtest.h>

namespace zarrstream {
namespace {

using nlohmann::json;

json ToJson(const std::vector<CodecSpec>& codecs) {
  json list = json::array();
  for (const CodecSpec& codec : codecs) {
    list.push_back({{"name", codec.name}, {"configuration", codec.configuration}});
  }
  return list;
}

json Parsed(std::string_view spec, DataType type = DataType::kFloat32) {
  Result<std::vector<CodecSpec>> codecs = ParseCompressorSpec(spec, type);
  EXPECT_TRUE(codecs.ok()) << spec << ": " << codecs.status().ToString();
  return codecs.ok() ? ToJson(*codecs) : json();
}

Status ParseError(std::string_view spec, DataType type = DataType::kFloat32) {
  return ParseCompressorSpec(spec, type).status();
}

TEST(CompressorSpecTest, ShortSpecsBecomeV3Codecs) {
  EXPECT_EQ(Parsed("none"), json::array());
  EXPECT_EQ(Parsed("zstd"), json::parse(R"([{"name": "zstd",
      "configuration": {"level": 3, "checksum": false}}])"));
  EXPECT_EQ(Parsed("zstd:-5"), json::parse(R"([{"name": "zstd",
      "configuration": {"level": -5, "checksum": false}}])"));
  EXPECT_EQ(Parsed("gzip"), json::parse(R"([{"name": "gzip", "configuration": {"level": 5}}])"));
  EXPECT_EQ(Parsed("gzip:9"), json::parse(R"([{"name": "gzip", "configuration": {"level": 9}}])"));
  EXPECT_EQ(Parsed("lz4"), json::parse(R"([{"name": "numcodecs.lz4",
      "configuration": {"acceleration": 1}}])"));
}

TEST(CompressorSpecTest, BloscTakesItsTypesizeFromTheDataType) {
  EXPECT_EQ(Parsed("blosc", DataType::kFloat64), json::parse(R"([{"name": "blosc",
      "configuration": {"typesize": 8, "cname": "zstd", "clevel": 5, "shuffle": "shuffle",
                        "blocksize": 0}}])"));
  // zarr-python's default for 1-byte types: bit-shuffle.
  EXPECT_EQ(Parsed("blosc", DataType::kUInt8)[0]["configuration"]["shuffle"], "bitshuffle");
  EXPECT_EQ(Parsed("blosc:lz4:9:noshuffle", DataType::kComplex64), json::parse(R"([{
      "name": "blosc", "configuration": {"typesize": 8, "cname": "lz4", "clevel": 9,
                                         "shuffle": "noshuffle", "blocksize": 0}}])"));
  EXPECT_EQ(Parsed("blosc:blosclz:1", DataType::kInt16)[0]["configuration"]["cname"], "blosclz");
}

TEST(CompressorSpecTest, BadSpecsAreInvalidArgumentsQuotingTheSpec) {
  for (std::string_view spec : {"", "zst", "zstd:", "zstd:fast", "zstd:3:1", "zstd:99", "gzip:10",
                                "gzip:-1", "lz4:1", "blosc:nope", "blosc:lz4:x", "blosc:lz4:10",
                                "blosc:lz4:5:weird", "blosc:lz4:5:shuffle:1", "none:1"}) {
    Status s = ParseError(spec);
    EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument) << spec << ": " << s.ToString();
    EXPECT_NE(s.message().find("compressor '" + std::string(spec) + "'"), std::string::npos)
        << s.message();
  }
  EXPECT_NE(ParseError("brotli").message().find("unknown compressor 'brotli'"), std::string::npos);
  EXPECT_NE(ParseError("zstd:99").message().find("level"), std::string::npos);
  EXPECT_NE(ParseError("blosc:nope").message().find("cname"), std::string::npos);
}

TEST(CompressorSpecTest, ChainsAreWhatZarrPythonWrites) {
  auto chain = MakeCodecChainSpecs("zstd:3", DataType::kFloat32);
  ASSERT_TRUE(chain.ok()) << chain.status().ToString();
  ASSERT_EQ(chain->size(), 2u);
  EXPECT_EQ((*chain)[0].name, "bytes");
  EXPECT_EQ((*chain)[0].configuration, json::parse(R"({"endian": "little"})"));
  EXPECT_EQ((*chain)[1].name, "zstd");

  // Byte order means nothing for 1-byte types: zarr-python writes a bare {"name": "bytes"}.
  chain = MakeCodecChainSpecs("none", DataType::kBool);
  ASSERT_TRUE(chain.ok());
  ASSERT_EQ(chain->size(), 1u);
  EXPECT_EQ((*chain)[0].name, "bytes");
  EXPECT_TRUE((*chain)[0].configuration.empty());

  const std::vector<uint64_t> inner = {2, 3};
  chain = MakeCodecChainSpecs("gzip:1", DataType::kInt16, std::span<const uint64_t>(inner));
  ASSERT_TRUE(chain.ok()) << chain.status().ToString();
  ASSERT_EQ(chain->size(), 1u);
  EXPECT_EQ((*chain)[0].name, "sharding_indexed");
  EXPECT_EQ((*chain)[0].configuration, json::parse(R"({
      "chunk_shape": [2, 3],
      "codecs": [{"name": "bytes", "configuration": {"endian": "little"}},
                 {"name": "gzip", "configuration": {"level": 1}}],
      "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}},
                       {"name": "crc32c"}],
      "index_location": "end"})"));

  EXPECT_EQ(MakeCodecChainSpecs("zstd:x", DataType::kInt16).status().code(),
            ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace zarrstream

#include "metadata/v2_metadata.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "metadata/v3_metadata.h"
#include "util/status_test_util.h"

namespace zarrstream {
namespace {

using ::nlohmann::json;
using ::testing::HasSubstr;

// Written by zarr-python 3.1 (zarr_format=2): dtype=">f8", fill_value=np.inf, order="F",
// compressors=Blosc(cname="zstd", shuffle=-1), filters=[Delta(">f8")], separator "/".
constexpr const char* kZarrPythonZarray = R"({
  "shape": [4, 6],
  "chunks": [2, 3],
  "dtype": ">f8",
  "fill_value": "Infinity",
  "order": "F",
  "filters": [{"id": "delta", "dtype": ">f8", "astype": ">f8"}],
  "dimension_separator": "/",
  "compressor": {"id": "blosc", "cname": "zstd", "clevel": 5, "shuffle": -1, "blocksize": 0},
  "zarr_format": 2
})";

// zarr.consolidate_metadata of a zarr-python 3.1 v2 group with arrays c, n, x and group s/z.
constexpr const char* kZarrPythonZmetadata = R"({"metadata": {
  ".zgroup": {"zarr_format": 2}, ".zattrs": {"title": "t"},
  "c/.zattrs": {}, "c/.zarray": {"shape": [4], "chunks": [2], "dtype": "<c16",
    "fill_value": [1.0, -1.0], "order": "C", "filters": null, "dimension_separator": ".",
    "compressor": {"id": "zstd", "level": 3}, "zarr_format": 2},
  "n/.zattrs": {}, "n/.zarray": {"shape": [4], "chunks": [2], "dtype": "<i2", "fill_value": null,
    "order": "C", "filters": null, "dimension_separator": ".", "compressor": null,
    "zarr_format": 2},
  "s/.zattrs": {}, "s/.zgroup": {"zarr_format": 2, "consolidated_metadata":
    {"metadata": {}, "must_understand": false, "kind": "inline"}},
  "x/.zattrs": {"_ARRAY_DIMENSIONS": ["y", "x"], "u": 1},
  "x/.zarray": {"shape": [4, 6], "chunks": [2, 3], "dtype": ">f8", "fill_value": "Infinity",
    "order": "F", "filters": [{"id": "delta", "dtype": ">f8", "astype": ">f8"}],
    "dimension_separator": "/", "compressor": {"id": "blosc", "cname": "zstd", "clevel": 5,
    "shuffle": -1, "blocksize": 0}, "zarr_format": 2},
  "s/z/.zattrs": {}, "s/z/.zarray": {"shape": [2], "chunks": [2], "dtype": "|b1",
    "fill_value": true, "order": "C", "filters": null, "dimension_separator": ".",
    "compressor": {"id": "blosc", "cname": "lz4", "clevel": 5, "shuffle": 1, "blocksize": 0},
    "zarr_format": 2}},
  "zarr_consolidated_format": 1})";

json BaseZarray() {
  return json::parse(R"({"zarr_format": 2, "shape": [10, 20], "chunks": [5, 5], "dtype": "<f4",
                         "fill_value": 0.0, "order": "C", "filters": null, "compressor": null})");
}

Result<ArrayMetadata> Parse(const json& zarray, std::optional<json> zattrs = std::nullopt) {
  std::optional<std::string> attrs_text;
  if (zattrs) attrs_text = zattrs->dump();
  return ParseV2ArrayMetadata(
      zarray.dump(), attrs_text ? std::optional<std::string_view>(*attrs_text) : std::nullopt);
}

void ExpectError(const Status& status, ErrorCode code, std::initializer_list<std::string> needles) {
  ASSERT_FALSE(status.ok()) << "expected an error";
  EXPECT_EQ(status.code(), code) << status.ToString();
  for (const std::string& needle : needles) EXPECT_THAT(status.message(), HasSubstr(needle));
}

template <typename T>
T BytesAs(const std::vector<std::byte>& bytes, size_t offset = 0) {
  T value;
  EXPECT_GE(bytes.size(), offset + sizeof(T));
  std::memcpy(&value, bytes.data() + offset, sizeof(T));
  return value;
}

// The codec chain of an array with `filters` and `compressor`, or the error.
Result<std::vector<CodecSpec>> Chain(const std::string& dtype, json filters, json compressor,
                                     const std::string& order = "C") {
  json zarray = BaseZarray();
  zarray["dtype"] = dtype;
  zarray["fill_value"] = nullptr;
  zarray["filters"] = std::move(filters);
  zarray["compressor"] = std::move(compressor);
  zarray["order"] = order;
  ZS_ASSIGN_OR_RETURN(ArrayMetadata m, Parse(zarray));
  return m.codecs;
}

// ----------------------------------------------------------------------------------------------
// Arrays

TEST(V2MetadataTest, ParsesZarrPythonArray) {
  Result<ArrayMetadata> parsed = ParseV2ArrayMetadata(
      kZarrPythonZarray, std::string_view(R"({"_ARRAY_DIMENSIONS": ["y", "x"], "u": 1})"));
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  const ArrayMetadata& m = *parsed;
  EXPECT_EQ(m.zarr_format, 2);
  EXPECT_EQ(m.shape, (std::vector<uint64_t>{4, 6}));
  EXPECT_EQ(m.chunk_shape, (std::vector<uint64_t>{2, 3}));
  EXPECT_EQ(m.data_type, DataType::kFloat64);
  EXPECT_EQ(m.chunk_key_encoding.kind, ChunkKeyEncoding::Kind::kV2);
  EXPECT_EQ(m.chunk_key_encoding.separator, '/');
  EXPECT_EQ(BytesAs<double>(m.fill_value), INFINITY);
  EXPECT_FALSE(m.fill_value_is_null);
  const std::vector<CodecSpec> expected = {
      {"transpose", {{"order", {1, 0}}}},
      {"numcodecs.delta", {{"dtype", ">f8"}, {"astype", ">f8"}}},
      {"bytes", {{"endian", "big"}}},
      {"blosc",
       {{"cname", "zstd"},
        {"clevel", 5},
        {"shuffle", "shuffle"},
        {"blocksize", 0},
        {"typesize", 8}}},
  };
  EXPECT_EQ(m.codecs, expected);
  EXPECT_EQ(m.dimension_names, (std::vector<std::string>{"y", "x"}));
  EXPECT_EQ(m.attributes, json({{"u", 1}}));
}

TEST(V2MetadataTest, DataTypes) {
  struct Case {
    const char* dtype;
    DataType type;
    bool big_endian;
  };
  const Case cases[] = {
      {"<f4", DataType::kFloat32, false},     {">f8", DataType::kFloat64, true},
      {"|u1", DataType::kUInt8, false},       {"|b1", DataType::kBool, false},
      {"|i1", DataType::kInt8, false},        {"<f2", DataType::kFloat16, false},
      {">f2", DataType::kFloat16, true},      {"<c8", DataType::kComplex64, false},
      {"<c16", DataType::kComplex128, false}, {">c16", DataType::kComplex128, true},
      {">i2", DataType::kInt16, true},        {"<i4", DataType::kInt32, false},
      {"<i8", DataType::kInt64, false},       {"<u2", DataType::kUInt16, false},
      {">u4", DataType::kUInt32, true},       {"<u8", DataType::kUInt64, false},
      {">u1", DataType::kUInt8, false},  // byte order means nothing for one byte
  };
  for (const Case& c : cases) {
    Result<std::pair<DataType, bool>> parsed = ParseV2DataType(c.dtype);
    ASSERT_TRUE(parsed.ok()) << c.dtype << ": " << parsed.status().ToString();
    EXPECT_EQ(parsed->first, c.type) << c.dtype;
    EXPECT_EQ(parsed->second, c.big_endian) << c.dtype;
  }
}

TEST(V2MetadataTest, UnsupportedDataTypesAreNamed) {
  for (const char* dtype :
       {"|O", "<U10", "|S5", "|V8", "<M8[ns]", "<m8[s]", "<f16", "<c32", "|b2", "<i16"}) {
    ExpectError(ParseV2DataType(dtype).status(), ErrorCode::kUnsupported,
                {"field 'dtype'", std::string(dtype)});
  }
  // Strings and times are extended types (extended_type_test.cc); these are read by nobody.
  for (const char* dtype : {"|O", "|V8", "<M8", "<f16", "<c32", "|b2", "<i16"}) {
    json zarray = BaseZarray();
    zarray["dtype"] = dtype;
    ExpectError(Parse(zarray).status(), ErrorCode::kUnsupported, {"dtype", std::string(dtype)});
  }
  json zarray = BaseZarray();
  zarray["dtype"] = json::array({json::array({"a", "<f4"}), json::array({"b", "<i4"})});
  ExpectError(Parse(zarray).status(), ErrorCode::kUnsupported, {"field 'dtype'", "structured"});
}

TEST(V2MetadataTest, MalformedDataTypes) {
  for (const char* dtype : {"", "f", "f4", "=f4", "<q4", "|f4", "<f", "<fx", "<f4 ", "<f004"}) {
    ExpectError(ParseV2DataType(dtype).status(), ErrorCode::kMetadata, {"field 'dtype'"});
  }
  json zarray = BaseZarray();
  zarray["dtype"] = 4;
  ExpectError(Parse(zarray).status(), ErrorCode::kMetadata, {"field 'dtype'"});
}

TEST(V2MetadataTest, Order) {
  json zarray = BaseZarray();
  Result<ArrayMetadata> parsed = Parse(zarray);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed->codecs, (std::vector<CodecSpec>{{"bytes", {{"endian", "little"}}}}));

  zarray["order"] = "F";
  zarray["shape"] = {2, 3, 4};
  zarray["chunks"] = {1, 1, 1};
  parsed = Parse(zarray);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed->codecs, (std::vector<CodecSpec>{{"transpose", {{"order", {2, 1, 0}}}},
                                                    {"bytes", {{"endian", "little"}}}}));

  for (json bad : {json("c"), json("A"), json(nullptr), json(0)}) {
    zarray["order"] = bad;
    ExpectError(Parse(zarray).status(), ErrorCode::kMetadata, {"field 'order'"});
  }
}

TEST(V2MetadataTest, FillValues) {
  struct Case {
    const char* dtype;
    json fill;
    std::vector<std::byte> expected;
  };
  auto bytes_of = [](auto value) {
    std::vector<std::byte> b(sizeof(value));
    std::memcpy(b.data(), &value, sizeof(value));
    return b;
  };
  const Case cases[] = {
      {"<f4", "NaN", bytes_of(uint32_t{0x7fc00000})},
      {"<f4", "Infinity", bytes_of(INFINITY)},
      {"<f8", "-Infinity", bytes_of(-static_cast<double>(INFINITY))},
      {"<f8", 1.25, bytes_of(1.25)},
      {"<f8", 3, bytes_of(3.0)},
      {"<f2", 1.0, bytes_of(uint16_t{0x3c00})},
      {"<i4", 42, bytes_of(int32_t{42})},
      {"<i4", -7.0, bytes_of(int32_t{-7})},  // a whole float, as some v2 writers store it
      {"|u1", 255, bytes_of(uint8_t{255})},
      {"|b1", true, bytes_of(uint8_t{1})},
      {"|b1", false, bytes_of(uint8_t{0})},
      {"<c16", json::array({1.0, -1.0}),
       [&] {
         auto b = bytes_of(1.0);
         auto im = bytes_of(-1.0);
         b.insert(b.end(), im.begin(), im.end());
         return b;
       }()},
      {"<c8", json::array({"NaN", "Infinity"}),
       [&] {
         auto b = bytes_of(uint32_t{0x7fc00000});
         auto im = bytes_of(static_cast<float>(INFINITY));
         b.insert(b.end(), im.begin(), im.end());
         return b;
       }()},
  };
  for (const Case& c : cases) {
    json zarray = BaseZarray();
    zarray["dtype"] = c.dtype;
    zarray["fill_value"] = c.fill;
    Result<ArrayMetadata> parsed = Parse(zarray);
    ASSERT_TRUE(parsed.ok()) << c.dtype << " " << c.fill.dump() << ": "
                             << parsed.status().ToString();
    EXPECT_EQ(parsed->fill_value, c.expected) << c.dtype << " " << c.fill.dump();
    EXPECT_FALSE(parsed->fill_value_is_null);
  }
}

TEST(V2MetadataTest, NullFillValueIsFlaggedAndZero) {
  for (const char* dtype : {"<f8", "|b1", "<c8", ">i2"}) {
    json zarray = BaseZarray();
    zarray["dtype"] = dtype;
    zarray["fill_value"] = nullptr;
    Result<ArrayMetadata> parsed = Parse(zarray);
    ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
    EXPECT_TRUE(parsed->fill_value_is_null);
    EXPECT_EQ(parsed->fill_value, std::vector<std::byte>(DataTypeSize(parsed->data_type)));
  }
}

TEST(V2MetadataTest, BadFillValuesNameTheField) {
  struct Case {
    const char* dtype;
    json fill;
  };
  const Case cases[] = {
      {"|u1", 300},   {"|u1", -1},   {"<i4", 1.5}, {"<i4", "NaN"}, {"|b1", 1},
      {"<f4", "nan"}, {"<f4", 1e39}, {"<c8", 1.0}, {"<i8", 1e19},  {"<f8", json::object()}};
  for (const Case& c : cases) {
    json zarray = BaseZarray();
    zarray["dtype"] = c.dtype;
    zarray["fill_value"] = c.fill;
    SCOPED_TRACE(zarray.dump());
    ExpectError(Parse(zarray).status(), ErrorCode::kMetadata, {"field 'fill_value'"});
  }
}

TEST(V2MetadataTest, DimensionSeparator) {
  json zarray = BaseZarray();
  Result<ArrayMetadata> parsed = Parse(zarray);
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(parsed->chunk_key_encoding.kind, ChunkKeyEncoding::Kind::kV2);
  EXPECT_EQ(parsed->chunk_key_encoding.separator, '.');
  zarray["dimension_separator"] = "/";
  parsed = Parse(zarray);
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(parsed->chunk_key_encoding.separator, '/');
  EXPECT_EQ(parsed->chunk_key_encoding.EncodeKey(std::vector<uint64_t>{1, 2}), "1/2");
  zarray["dimension_separator"] = ".";
  parsed = Parse(zarray);
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(parsed->chunk_key_encoding.separator, '.');
  for (json bad : {json("-"), json(1), json("//")}) {
    zarray["dimension_separator"] = bad;
    ExpectError(Parse(zarray).status(), ErrorCode::kMetadata, {"field 'dimension_separator'"});
  }
}

TEST(V2MetadataTest, Compressors) {
  struct Case {
    const char* dtype;
    json compressor;
    CodecSpec expected;
  };
  const Case cases[] = {
      {"<f4", {{"id", "zstd"}, {"level", 3}}, {"zstd", {{"level", 3}, {"checksum", false}}}},
      {"<f4",
       {{"id", "zstd"}, {"level", -5}, {"checksum", true}},
       {"zstd", {{"level", -5}, {"checksum", true}}}},
      {"<f4", {{"id", "gzip"}, {"level", 6}}, {"gzip", {{"level", 6}}}},
      {"<f4", {{"id", "zlib"}, {"level", 9}}, {"numcodecs.zlib", {{"level", 9}}}},
      {"<f4", {{"id", "bz2"}, {"level", 9}}, {"numcodecs.bz2", {{"level", 9}}}},
      {"<f4", {{"id", "lz4"}, {"acceleration", 1}}, {"numcodecs.lz4", {{"acceleration", 1}}}},
      {"<f4", {{"id", "lz4"}}, {"numcodecs.lz4", {{"acceleration", 1}}}},
      {"<f4",
       {{"id", "blosc"}, {"cname", "lz4"}, {"clevel", 5}, {"shuffle", 1}, {"blocksize", 0}},
       {"blosc",
        {{"cname", "lz4"},
         {"clevel", 5},
         {"shuffle", "shuffle"},
         {"blocksize", 0},
         {"typesize", 4}}}},
      {"<i2",
       {{"id", "blosc"}, {"cname", "zstd"}, {"clevel", 1}, {"shuffle", 0}, {"blocksize", 256}},
       {"blosc",
        {{"cname", "zstd"},
         {"clevel", 1},
         {"shuffle", "noshuffle"},
         {"blocksize", 256},
         {"typesize", 2}}}},
      {"<f8",
       {{"id", "blosc"}, {"cname", "blosclz"}, {"clevel", 9}, {"shuffle", 2}, {"blocksize", 0}},
       {"blosc",
        {{"cname", "blosclz"},
         {"clevel", 9},
         {"shuffle", "bitshuffle"},
         {"blocksize", 0},
         {"typesize", 8}}}},
      // AUTOSHUFFLE: bit shuffle for 1-byte items, byte shuffle otherwise.
      {"|u1",
       {{"id", "blosc"}, {"cname", "lz4"}, {"clevel", 5}, {"shuffle", -1}, {"blocksize", 0}},
       {"blosc",
        {{"cname", "lz4"},
         {"clevel", 5},
         {"shuffle", "bitshuffle"},
         {"blocksize", 0},
         {"typesize", 1}}}},
      {"<c16",
       {{"id", "blosc"}, {"cname", "lz4"}, {"clevel", 5}, {"shuffle", -1}, {"blocksize", 0}},
       {"blosc",
        {{"cname", "lz4"},
         {"clevel", 5},
         {"shuffle", "shuffle"},
         {"blocksize", 0},
         {"typesize", 16}}}},
      // numcodecs' defaults fill in missing options.
      {"<f4",
       {{"id", "blosc"}},
       {"blosc",
        {{"cname", "lz4"},
         {"clevel", 5},
         {"shuffle", "shuffle"},
         {"blocksize", 0},
         {"typesize", 4}}}},
  };
  for (const Case& c : cases) {
    Result<std::vector<CodecSpec>> chain = Chain(c.dtype, nullptr, c.compressor);
    ASSERT_TRUE(chain.ok()) << c.compressor.dump() << ": " << chain.status().ToString();
    ASSERT_EQ(chain->size(), 2u);
    EXPECT_EQ(chain->back(), c.expected) << c.compressor.dump();
  }
  Result<std::vector<CodecSpec>> chain = Chain("|u1", nullptr, nullptr);
  ASSERT_TRUE(chain.ok());
  EXPECT_EQ(*chain, (std::vector<CodecSpec>{{"bytes", json::object()}}));
}

TEST(V2MetadataTest, BadCompressorsNameTheField) {
  struct Case {
    json compressor;
    ErrorCode code;
    std::vector<std::string> needles;
  };
  const Case cases[] = {
      {{{"id", "lzma"}}, ErrorCode::kUnsupported, {"field 'compressor.id'", "lzma"}},
      {{{"id", "blosc2"}}, ErrorCode::kUnsupported, {"field 'compressor.id'", "blosc2"}},
      {{{"id", "zfpy"}, {"mode", 4}}, ErrorCode::kUnsupported, {"zfpy"}},
      {{{"level", 1}}, ErrorCode::kMetadata, {"field 'compressor.id'", "missing"}},
      {{{"id", 3}}, ErrorCode::kMetadata, {"field 'compressor.id'"}},
      {"zstd", ErrorCode::kMetadata, {"field 'compressor'"}},
      {json::array(), ErrorCode::kMetadata, {"field 'compressor'"}},
      {{{"id", "zstd"}, {"level", "3"}}, ErrorCode::kMetadata, {"field 'compressor.level'"}},
      {{{"id", "zstd"}, {"level", 1.5}}, ErrorCode::kMetadata, {"field 'compressor.level'"}},
      {{{"id", "zstd"}, {"checksum", 1}}, ErrorCode::kMetadata, {"field 'compressor.checksum'"}},
      {{{"id", "blosc"}, {"shuffle", 3}}, ErrorCode::kMetadata, {"field 'compressor.shuffle'"}},
      {{{"id", "blosc"}, {"cname", 1}}, ErrorCode::kMetadata, {"field 'compressor.cname'"}},
      {{{"id", "blosc"}, {"blocksize", -1}},
       ErrorCode::kMetadata,
       {"field 'compressor.blocksize'"}},
      {{{"id", "gzip"}, {"level", json::parse("18446744073709551615")}},
       ErrorCode::kMetadata,
       {"field 'compressor.level'"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.compressor.dump());
    Status status = Chain("<f4", nullptr, c.compressor).status();
    ASSERT_FALSE(status.ok());
    EXPECT_EQ(status.code(), c.code) << status.ToString();
    for (const std::string& needle : c.needles) EXPECT_THAT(status.message(), HasSubstr(needle));
  }
  json zarray = BaseZarray();
  zarray.erase("compressor");
  ExpectError(Parse(zarray).status(), ErrorCode::kMetadata, {"field 'compressor'", "missing"});
}

TEST(V2MetadataTest, Filters) {
  // delta: astype defaults to dtype.
  Result<std::vector<CodecSpec>> chain =
      Chain("<i4", json::array({{{"id", "delta"}, {"dtype", "<i4"}}}), nullptr);
  ASSERT_TRUE(chain.ok()) << chain.status().ToString();
  EXPECT_EQ(*chain,
            (std::vector<CodecSpec>{{"numcodecs.delta", {{"dtype", "<i4"}, {"astype", "<i4"}}},
                                    {"bytes", {{"endian", "little"}}}}));

  // fixedscaleoffset to one byte: the bytes codec and blosc see the astype.
  chain =
      Chain("<f8",
            json::array({{{"id", "fixedscaleoffset"},
                          {"scale", 10},
                          {"offset", 0},
                          {"dtype", "<f8"},
                          {"astype", "|u1"}}}),
            {{"id", "blosc"}, {"cname", "lz4"}, {"clevel", 5}, {"shuffle", -1}, {"blocksize", 0}});
  ASSERT_TRUE(chain.ok()) << chain.status().ToString();
  EXPECT_EQ(*chain, (std::vector<CodecSpec>{
                        {"numcodecs.fixedscaleoffset",
                         {{"dtype", "<f8"}, {"astype", "|u1"}, {"scale", 10}, {"offset", 0}}},
                        {"bytes", json::object()},
                        {"blosc",
                         {{"cname", "lz4"},
                          {"clevel", 5},
                          {"shuffle", "bitshuffle"},
                          {"blocksize", 0},
                          {"typesize", 1}}}}));

  // A delta that narrows to big-endian int16: the bytes codec takes the astype's byte order.
  chain = Chain("<i4", json::array({{{"id", "delta"}, {"dtype", "<i4"}, {"astype", ">i2"}}}),
                {{"id", "zstd"}, {"level", 1}});
  ASSERT_TRUE(chain.ok()) << chain.status().ToString();
  EXPECT_EQ(*chain,
            (std::vector<CodecSpec>{{"numcodecs.delta", {{"dtype", "<i4"}, {"astype", ">i2"}}},
                                    {"bytes", {{"endian", "big"}}},
                                    {"zstd", {{"level", 1}, {"checksum", false}}}}));

  // shuffle works on bytes, so it goes after the bytes codec; elementsize defaults to the item
  // size. The full order: transpose, array filters, bytes, byte filters, compressor.
  chain = Chain(">i8",
                json::array({{{"id", "delta"}, {"dtype", ">i8"}},
                             {{"id", "shuffle"}},
                             {{"id", "shuffle"}, {"elementsize", 2}}}),
                {{"id", "gzip"}, {"level", 1}}, "F");
  ASSERT_TRUE(chain.ok()) << chain.status().ToString();
  EXPECT_EQ(*chain,
            (std::vector<CodecSpec>{{"transpose", {{"order", {1, 0}}}},
                                    {"numcodecs.delta", {{"dtype", ">i8"}, {"astype", ">i8"}}},
                                    {"bytes", {{"endian", "big"}}},
                                    {"numcodecs.shuffle", {{"elementsize", 8}}},
                                    {"numcodecs.shuffle", {{"elementsize", 2}}},
                                    {"gzip", {{"level", 1}}}}));

  // The lossy filters and astype: quantize and astype change the type the bytes codec sees,
  // bitround keeps it. zarr-python 3 names them the same in v3 metadata.
  chain =
      Chain("<f8",
            json::array({{{"id", "quantize"}, {"digits", 2}, {"dtype", "<f8"}, {"astype", "<f4"}},
                         {{"id", "bitround"}, {"keepbits", 5}},
                         {{"id", "astype"}, {"encode_dtype", ">f2"}, {"decode_dtype", "<f4"}}}),
            {{"id", "zlib"}, {"level", 1}});
  ASSERT_TRUE(chain.ok()) << chain.status().ToString();
  EXPECT_EQ(*chain,
            (std::vector<CodecSpec>{
                {"numcodecs.quantize", {{"digits", 2}, {"dtype", "<f8"}, {"astype", "<f4"}}},
                {"numcodecs.bitround", {{"keepbits", 5}}},
                {"numcodecs.astype", {{"decode_dtype", "<f4"}, {"encode_dtype", ">f2"}}},
                {"bytes", {{"endian", "big"}}},
                {"numcodecs.zlib", {{"level", 1}}}}));

  // Compressors as filters (kerchunk's form of an HDF5 dataset's shuffle + deflate), before a
  // compressor too; an array filter cannot follow one.
  chain = Chain(
      "<f4", json::array({{{"id", "shuffle"}, {"elementsize", 4}}, {{"id", "zlib"}, {"level", 4}}}),
      nullptr);
  ASSERT_TRUE(chain.ok()) << chain.status().ToString();
  EXPECT_EQ(*chain, (std::vector<CodecSpec>{{"bytes", {{"endian", "little"}}},
                                            {"numcodecs.shuffle", {{"elementsize", 4}}},
                                            {"numcodecs.zlib", {{"level", 4}}}}));
  chain = Chain("<i2", json::array({{{"id", "gzip"}, {"level", 1}}}), {{"id", "zstd"}});
  ASSERT_TRUE(chain.ok()) << chain.status().ToString();
  EXPECT_EQ(*chain, (std::vector<CodecSpec>{{"bytes", {{"endian", "little"}}},
                                            {"gzip", {{"level", 1}}},
                                            {"zstd", {{"level", 0}, {"checksum", false}}}}));
  ExpectErrorContains(
      Chain("<f8", json::array({{{"id", "zlib"}}, {{"id", "delta"}, {"dtype", "<f8"}}}), nullptr)
          .status(),
      ErrorCode::kUnsupported, {"filters[1].id", "after"});
  ExpectErrorContains(
      Chain("<f8", json::array({{{"id", "zlib"}, {"level", "x"}}}), nullptr).status(),
      ErrorCode::kMetadata, {"filters[0]"});

  // Empty filter lists mean no filters.
  chain = Chain("<f4", json::array(), nullptr);
  ASSERT_TRUE(chain.ok());
  EXPECT_EQ(chain->size(), 1u);
}

TEST(V2MetadataTest, BadFiltersNameTheField) {
  struct Case {
    const char* dtype;
    json filters;
    ErrorCode code;
    std::vector<std::string> needles;
  };
  const Case cases[] = {
      {"|b1",
       json::array({{{"id", "packbits"}}}),
       ErrorCode::kUnsupported,
       {"field 'filters[0].id'", "packbits"}},
      {"<f4",
       json::array({{{"id", "astype"}, {"encode_dtype", "<f2"}, {"decode_dtype", "<f8"}}}),
       ErrorCode::kUnsupported,
       {"field 'filters[0].decode_dtype'", "<f8"}},
      {"<f4",
       json::array({{{"id", "bitround"}}}),
       ErrorCode::kMetadata,
       {"field 'filters[0].keepbits'", "missing"}},
      {"<f4",
       json::array({{{"id", "shuffle"}}, {{"id", "categorize"}}}),
       ErrorCode::kUnsupported,
       {"field 'filters[1].id'", "categorize"}},
      {"<i4",
       json::array({{{"id", "shuffle"}}, {{"id", "delta"}, {"dtype", "<i4"}}}),
       ErrorCode::kUnsupported,
       {"field 'filters[1].id'", "delta"}},
      {"<f4",
       json::array({{{"dtype", "<f4"}}}),
       ErrorCode::kMetadata,
       {"field 'filters[0].id'", "missing"}},
      {"<f4", json::array({"delta"}), ErrorCode::kMetadata, {"field 'filters[0]'"}},
      {"<f4", json::object(), ErrorCode::kMetadata, {"field 'filters'"}},
      {"<f4",
       json::array({{{"id", "delta"}}}),
       ErrorCode::kMetadata,
       {"field 'filters[0].dtype'", "missing"}},
      {"<f4",
       json::array({{{"id", "delta"}, {"dtype", "<i4"}}}),
       ErrorCode::kUnsupported,
       {"field 'filters[0].dtype'", "<i4"}},
      {"<f4",
       json::array({{{"id", "delta"}, {"dtype", ">f4"}}}),
       ErrorCode::kUnsupported,
       {"field 'filters[0].dtype'"}},
      {"<f4",
       json::array({{{"id", "delta"}, {"dtype", "<f4"}, {"astype", "|O"}}}),
       ErrorCode::kUnsupported,
       {"field 'filters[0].astype'", "|O"}},
      {"<f4",
       json::array({{{"id", "delta"}, {"dtype", "<f4"}, {"extra", 1}}}),
       ErrorCode::kUnsupported,
       {"field 'filters[0]'", "extra"}},
      {"<f8",
       json::array({{{"id", "fixedscaleoffset"}, {"offset", 0}, {"dtype", "<f8"}}}),
       ErrorCode::kMetadata,
       {"field 'filters[0].scale'", "missing"}},
      {"<f8",
       json::array(
           {{{"id", "fixedscaleoffset"}, {"scale", "10"}, {"offset", 0}, {"dtype", "<f8"}}}),
       ErrorCode::kMetadata,
       {"field 'filters[0].scale'"}},
      {"<f4",
       json::array({{{"id", "shuffle"}, {"elementsize", 0}}}),
       ErrorCode::kMetadata,
       {"field 'filters[0].elementsize'"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.filters.dump());
    Status status = Chain(c.dtype, c.filters, nullptr).status();
    ASSERT_FALSE(status.ok());
    EXPECT_EQ(status.code(), c.code) << status.ToString();
    for (const std::string& needle : c.needles) EXPECT_THAT(status.message(), HasSubstr(needle));
  }
}

TEST(V2MetadataTest, StructuralErrorsNameTheField) {
  struct Case {
    std::string field;
    json value;  // null deletes the field
    ErrorCode code;
    std::string needle;
  };
  const Case cases[] = {
      {"zarr_format", 3, ErrorCode::kUnsupported, "field 'zarr_format'"},
      {"zarr_format", "2", ErrorCode::kMetadata, "field 'zarr_format'"},
      {"zarr_format", nullptr, ErrorCode::kMetadata, "field 'zarr_format'"},
      {"shape", nullptr, ErrorCode::kMetadata, "field 'shape'"},
      {"shape", {10, -1}, ErrorCode::kMetadata, "field 'shape[1]'"},
      {"chunks", nullptr, ErrorCode::kMetadata, "field 'chunks'"},
      {"chunks", {5}, ErrorCode::kMetadata, "field 'chunks'"},
      {"chunks", {5, 0}, ErrorCode::kMetadata, "field 'chunks[1]'"},
      {"dtype", nullptr, ErrorCode::kMetadata, "field 'dtype'"},
      {"fill_value", nullptr, ErrorCode::kMetadata, "field 'fill_value'"},
      {"order", nullptr, ErrorCode::kMetadata, "field 'order'"},
      {"filters", nullptr, ErrorCode::kMetadata, "field 'filters'"},
  };
  for (const Case& c : cases) {
    json zarray = BaseZarray();
    if (c.value.is_null()) {
      zarray.erase(c.field);
    } else {
      zarray[c.field] = c.value;
    }
    SCOPED_TRACE(zarray.dump());
    ExpectError(Parse(zarray).status(), c.code, {c.needle});
  }
  // v2 has no extension rules: unknown keys are ignored, as zarr-python does.
  json zarray = BaseZarray();
  zarray["something_else"] = {1, 2};
  EXPECT_TRUE(Parse(zarray).ok());
}

TEST(V2MetadataTest, MalformedDocuments) {
  ExpectError(ParseV2ArrayMetadata("{", std::nullopt).status(), ErrorCode::kMetadata, {".zarray"});
  ExpectError(ParseV2ArrayMetadata("[1]", std::nullopt).status(), ErrorCode::kMetadata,
              {".zarray"});
  ExpectError(ParseV2ArrayMetadata(BaseZarray().dump(), std::string_view("{")).status(),
              ErrorCode::kMetadata, {".zattrs"});
  ExpectError(ParseV2ArrayMetadata(BaseZarray().dump(), std::string_view("[]")).status(),
              ErrorCode::kMetadata, {".zattrs"});
  ExpectError(ParseV2GroupMetadata("nope", std::nullopt).status(), ErrorCode::kMetadata,
              {".zgroup"});
  const std::string deep = std::string(5000, '[') + std::string(5000, ']');
  ExpectError(ParseV2ConsolidatedMetadata(deep).status(), ErrorCode::kMetadata, {"nested"});
}

TEST(V2MetadataTest, ArrayDimensions) {
  Result<ArrayMetadata> parsed =
      Parse(BaseZarray(), json({{"_ARRAY_DIMENSIONS", {"lat", "lon"}}, {"units", "m"}}));
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed->dimension_names, (std::vector<std::string>{"lat", "lon"}));
  EXPECT_EQ(parsed->attributes, json({{"units", "m"}}));

  parsed = Parse(BaseZarray(), json::object());
  ASSERT_TRUE(parsed.ok());
  EXPECT_TRUE(parsed->dimension_names.empty());
  EXPECT_EQ(parsed->attributes, json::object());

  for (json bad : {json({"lat"}), json("lat"), json({"lat", "lon", "x"})}) {
    ExpectError(Parse(BaseZarray(), json({{"_ARRAY_DIMENSIONS", bad}})).status(),
                ErrorCode::kMetadata, {"field '_ARRAY_DIMENSIONS'"});
  }
  ExpectError(Parse(BaseZarray(), json({{"_ARRAY_DIMENSIONS", {"lat", 1}}})).status(),
              ErrorCode::kMetadata, {"field '_ARRAY_DIMENSIONS[1]'"});
}

TEST(V2MetadataTest, NormalisedArrayWritesAValidV3Document) {
  Result<ArrayMetadata> v2 = ParseV2ArrayMetadata(
      kZarrPythonZarray, std::string_view(R"({"_ARRAY_DIMENSIONS": ["y", "x"]})"));
  ASSERT_TRUE(v2.ok());
  Result<NodeMetadata> v3 = ParseV3Metadata(ArrayMetadataToV3Json(*v2).dump());
  ASSERT_TRUE(v3.ok()) << v3.status().ToString();
  const auto& m = std::get<ArrayMetadata>(*v3);
  EXPECT_EQ(m.shape, v2->shape);
  EXPECT_EQ(m.chunk_shape, v2->chunk_shape);
  EXPECT_EQ(m.data_type, v2->data_type);
  EXPECT_EQ(m.chunk_key_encoding.kind, ChunkKeyEncoding::Kind::kV2);
  EXPECT_EQ(m.chunk_key_encoding.separator, '/');
  EXPECT_EQ(m.fill_value, v2->fill_value);
  EXPECT_EQ(m.codecs, v2->codecs);
  EXPECT_EQ(m.dimension_names, v2->dimension_names);
}

// ----------------------------------------------------------------------------------------------
// Groups and consolidated metadata

TEST(V2MetadataTest, Groups) {
  Result<GroupMetadata> group =
      ParseV2GroupMetadata(R"({"zarr_format": 2})", std::string_view(R"({"title": "t"})"));
  ASSERT_TRUE(group.ok()) << group.status().ToString();
  EXPECT_EQ(group->zarr_format, 2);
  EXPECT_EQ(group->attributes, json({{"title", "t"}}));
  EXPECT_EQ(group->consolidated, nullptr);

  group = ParseV2GroupMetadata(R"({"zarr_format": 2})", std::nullopt);
  ASSERT_TRUE(group.ok());
  EXPECT_EQ(group->attributes, json::object());

  ExpectError(ParseV2GroupMetadata(R"({"zarr_format": 3})", std::nullopt).status(),
              ErrorCode::kUnsupported, {"field 'zarr_format'"});
  ExpectError(ParseV2GroupMetadata(R"({})", std::nullopt).status(), ErrorCode::kMetadata,
              {"field 'zarr_format'"});
  ExpectError(ParseV2GroupMetadata(R"({"zarr_format": 2})", std::string_view("3")).status(),
              ErrorCode::kMetadata, {".zattrs"});
}

TEST(V2MetadataTest, ParsesZarrPythonConsolidatedMetadata) {
  Result<ConsolidatedMetadata> parsed = ParseV2ConsolidatedMetadata(kZarrPythonZmetadata);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  std::vector<std::string> keys;
  for (const auto& [key, node] : *parsed) keys.push_back(key);
  EXPECT_EQ(keys, (std::vector<std::string>{"", "c", "n", "s", "s/z", "x"}));

  const auto& root = std::get<GroupMetadata>(parsed->at(""));
  EXPECT_EQ(root.attributes, json({{"title", "t"}}));
  EXPECT_EQ(root.zarr_format, 2);

  const auto& x = std::get<ArrayMetadata>(parsed->at("x"));
  EXPECT_EQ(x.dimension_names, (std::vector<std::string>{"y", "x"}));
  EXPECT_EQ(x.attributes, json({{"u", 1}}));
  EXPECT_EQ(x.codecs.size(), 4u);

  const auto& n = std::get<ArrayMetadata>(parsed->at("n"));
  EXPECT_TRUE(n.fill_value_is_null);
  EXPECT_EQ(n.codecs, (std::vector<CodecSpec>{{"bytes", {{"endian", "little"}}}}));

  const auto& c = std::get<ArrayMetadata>(parsed->at("c"));
  EXPECT_EQ(c.data_type, DataType::kComplex128);
  EXPECT_EQ(BytesAs<double>(c.fill_value, 8), -1.0);

  const auto& s = std::get<GroupMetadata>(parsed->at("s"));
  ASSERT_NE(s.consolidated, nullptr);
  ASSERT_EQ(s.consolidated->size(), 1u);
  const auto& z = std::get<ArrayMetadata>(s.consolidated->at("z"));
  EXPECT_EQ(z.data_type, DataType::kBool);
  EXPECT_EQ(z.fill_value, std::vector<std::byte>{std::byte{1}});
  EXPECT_EQ(z.codecs.back().configuration["typesize"], 1);
}

TEST(V2MetadataTest, UnsupportedConsolidatedMemberKeepsItsError) {
  json unsupported = BaseZarray();
  unsupported["dtype"] = "|V8";
  json document = {{"zarr_consolidated_format", 1},
                   {"metadata", {{"a/b/.zarray", unsupported}, {"a/c/.zarray", BaseZarray()}}}};
  auto nodes = ParseV2ConsolidatedMetadata(document.dump());
  ASSERT_TRUE(nodes.ok()) << nodes.status().ToString();
  const auto& b = std::get<ArrayMetadata>(nodes->at("a/b"));
  ASSERT_TRUE(b.unsupported.has_value());
  ExpectError(*b.unsupported, ErrorCode::kUnsupported, {"field 'dtype'", "|V8"});
  EXPECT_FALSE(std::get<ArrayMetadata>(nodes->at("a/c")).unsupported.has_value());
}

TEST(V2MetadataTest, BadConsolidatedMetadata) {
  json zarray = BaseZarray();
  struct Case {
    json document;
    ErrorCode code;
    std::vector<std::string> needles;
  };
  const Case cases[] = {
      {json({{"metadata", json::object()}}),
       ErrorCode::kMetadata,
       {"field 'zarr_consolidated_format'", "missing"}},
      {json({{"zarr_consolidated_format", 2}, {"metadata", json::object()}}),
       ErrorCode::kUnsupported,
       {"field 'zarr_consolidated_format'"}},
      {json({{"zarr_consolidated_format", 1}}),
       ErrorCode::kMetadata,
       {"field 'metadata'", "missing"}},
      {json({{"zarr_consolidated_format", 1}, {"metadata", json::array()}}),
       ErrorCode::kMetadata,
       {"field 'metadata'"}},
      {json({{"zarr_consolidated_format", 1}, {"metadata", {{"a/data.bin", 1}}}}),
       ErrorCode::kMetadata,
       {"a/data.bin"}},
      {json({{"zarr_consolidated_format", 1}, {"metadata", {{"../a/.zarray", zarray}}}}),
       ErrorCode::kMetadata,
       {"../a/.zarray"}},
      {json({{"zarr_consolidated_format", 1}, {"metadata", {{"a//.zarray", zarray}}}}),
       ErrorCode::kMetadata,
       {"a//.zarray"}},
      {json({{"zarr_consolidated_format", 1}, {"metadata", {{"a/.zattrs", json::object()}}}}),
       ErrorCode::kMetadata,
       {"a/.zattrs"}},
      {json({{"zarr_consolidated_format", 1},
             {"metadata", {{"a/.zarray", zarray}, {"a/.zgroup", {{"zarr_format", 2}}}}}}),
       ErrorCode::kMetadata,
       {"a/.zarray", ".zgroup"}},
      {json({{"zarr_consolidated_format", 1},
             {"metadata", {{"a/.zarray", zarray}, {"a/.zattrs", json::array()}}}}),
       ErrorCode::kMetadata,
       {"a/.zarray", ".zattrs"}},
      {json({{"zarr_consolidated_format", 1}, {"metadata", {{".zgroup", {{"zarr_format", 3}}}}}}),
       ErrorCode::kUnsupported,
       {".zgroup", "zarr_format"}},
      {json::array(), ErrorCode::kMetadata, {".zmetadata"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.document.dump());
    Status status = ParseV2ConsolidatedMetadata(c.document.dump()).status();
    ASSERT_FALSE(status.ok());
    EXPECT_EQ(status.code(), c.code) << status.ToString();
    for (const std::string& needle : c.needles) EXPECT_THAT(status.message(), HasSubstr(needle));
  }
}

TEST(V2MetadataTest, HostileVariationsNeverCrash) {
  const json values[] = {nullptr,
                         true,
                         0,
                         -1,
                         1.5,
                         "x",
                         "<f4",
                         json::array(),
                         json::array({1, "a"}),
                         json::object(),
                         json({{"id", 1}})};
  const json base = json::parse(kZarrPythonZarray);
  for (const auto& [key, unused] : base.items()) {
    for (const json& value : values) {
      json doc = base;
      doc[key] = value;
      (void)ParseV2ArrayMetadata(doc.dump(), std::nullopt);
      (void)ParseV2ArrayMetadata(base.dump(),
                                 std::string_view(json({{"_ARRAY_DIMENSIONS", value}}).dump()));
    }
  }
  const std::string text = std::string(kZarrPythonZmetadata);
  for (size_t n = 0; n < text.size(); ++n) {
    EXPECT_FALSE(ParseV2ConsolidatedMetadata(text.substr(0, n)).ok());
  }
}

}  // namespace
}  // namespace zarrstream

#include "metadata/v3_metadata.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

namespace zarrstream {
namespace {

using ::nlohmann::json;
using ::testing::HasSubstr;

// Written by zarr-python 3.1: create_array(shape=(4, 6), chunks=(2, 3), dtype="float32",
// fill_value=np.nan, dimension_names=["lat", None], attributes={"units": "K"}).
constexpr const char* kZarrPythonArray = R"({
  "shape": [4, 6],
  "data_type": "float32",
  "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [2, 3]}},
  "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
  "fill_value": "NaN",
  "codecs": [
    {"name": "bytes", "configuration": {"endian": "little"}},
    {"name": "zstd", "configuration": {"level": 0, "checksum": false}}
  ],
  "attributes": {"units": "K"},
  "dimension_names": ["lat", null],
  "zarr_format": 3,
  "node_type": "array",
  "storage_transformers": []
})";

// A zarr-python 3.1 group after zarr.consolidate_metadata (trimmed to the interesting entries).
constexpr const char* kZarrPythonConsolidatedGroup = R"({
  "attributes": {"title": "t"},
  "zarr_format": 3,
  "consolidated_metadata": {
    "kind": "inline",
    "must_understand": false,
    "metadata": {
      "h": {
        "shape": [10], "data_type": "float16",
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [10]}},
        "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
        "fill_value": 0.0999755859375,
        "codecs": [{"name": "sharding_indexed", "configuration": {
          "chunk_shape": [5],
          "codecs": [{"name": "bytes", "configuration": {"endian": "little"}},
                     {"name": "zstd", "configuration": {"level": 0, "checksum": false}}],
          "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}},
                           {"name": "crc32c"}],
          "index_location": "end"}}],
        "attributes": {}, "zarr_format": 3, "node_type": "array", "storage_transformers": []
      },
      "sub": {
        "attributes": {"level": 1}, "zarr_format": 3,
        "consolidated_metadata": {"kind": "inline", "must_understand": false, "metadata": {}},
        "node_type": "group"
      },
      "sub/b": {
        "shape": [3], "data_type": "complex64",
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [2]}},
        "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
        "fill_value": [1.0, 2.0],
        "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
        "attributes": {}, "zarr_format": 3, "node_type": "array", "storage_transformers": []
      }
    }
  },
  "node_type": "group"
})";

json BaseArrayJson() {
  return json::parse(R"({
    "zarr_format": 3, "node_type": "array", "shape": [4, 6], "data_type": "float32",
    "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [2, 3]}},
    "chunk_key_encoding": {"name": "default"},
    "fill_value": 0,
    "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}]
  })");
}

Result<ArrayMetadata> ParseArray(const std::string& text) {
  ZS_ASSIGN_OR_RETURN(NodeMetadata node, ParseV3Metadata(text));
  if (!std::holds_alternative<ArrayMetadata>(node)) return InternalError("not an array");
  return std::get<ArrayMetadata>(std::move(node));
}

Result<ArrayMetadata> ParseArray(const json& document) { return ParseArray(document.dump()); }

Result<GroupMetadata> ParseGroup(const std::string& text) {
  ZS_ASSIGN_OR_RETURN(NodeMetadata node, ParseV3Metadata(text));
  if (!std::holds_alternative<GroupMetadata>(node)) return InternalError("not a group");
  return std::get<GroupMetadata>(std::move(node));
}

// Expects `status` to carry `code` and a message containing each of `needles`.
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

std::vector<std::byte> Fill(const json& value, DataType type) {
  Result<std::vector<std::byte>> bytes = ParseV3FillValue(value, type);
  EXPECT_TRUE(bytes.ok()) << value.dump() << ": " << bytes.status().ToString();
  if (!bytes.ok()) return {};
  EXPECT_EQ(bytes->size(), DataTypeSize(type));
  return *bytes;
}

Status FillError(const json& value, DataType type) {
  return ParseV3FillValue(value, type).status();
}

// ----------------------------------------------------------------------------------------------
// Arrays

TEST(V3MetadataTest, ParsesZarrPythonArray) {
  Result<ArrayMetadata> parsed = ParseArray(std::string(kZarrPythonArray));
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  const ArrayMetadata& m = *parsed;
  EXPECT_EQ(m.zarr_format, 3);
  EXPECT_EQ(m.shape, (std::vector<uint64_t>{4, 6}));
  EXPECT_EQ(m.chunk_shape, (std::vector<uint64_t>{2, 3}));
  EXPECT_EQ(m.data_type, DataType::kFloat32);
  EXPECT_EQ(m.chunk_key_encoding.kind, ChunkKeyEncoding::Kind::kDefault);
  EXPECT_EQ(m.chunk_key_encoding.separator, '/');
  EXPECT_EQ(BytesAs<uint32_t>(m.fill_value), 0x7fc00000u);
  EXPECT_FALSE(m.fill_value_is_null);
  ASSERT_EQ(m.codecs.size(), 2u);
  EXPECT_EQ(m.codecs[0], (CodecSpec{"bytes", {{"endian", "little"}}}));
  EXPECT_EQ(m.codecs[1], (CodecSpec{"zstd", {{"level", 0}, {"checksum", false}}}));
  EXPECT_EQ(m.dimension_names, (std::vector<std::string>{"lat", ""}));
  EXPECT_EQ(m.attributes, json({{"units", "K"}}));
  EXPECT_EQ(m.num_chunks(), 4u);
}

TEST(V3MetadataTest, EveryCoreDataTypeByNameAndAsObject) {
  const char* names[] = {"bool",    "int8",    "int16",     "int32",     "int64",
                         "uint8",   "uint16",  "uint32",    "uint64",    "float16",
                         "float32", "float64", "complex64", "complex128"};
  for (const char* name : names) {
    SCOPED_TRACE(name);
    Result<DataType> expected = ParseDataTypeName(name);
    ASSERT_TRUE(expected.ok());
    json fill = 0;
    if (*expected == DataType::kBool) fill = false;
    if (IsComplex(*expected)) fill = json::array({0, 0});
    for (json data_type : {json(name), json({{"name", name}}),
                           json({{"name", name}, {"configuration", json::object()}})}) {
      json doc = BaseArrayJson();
      doc["data_type"] = data_type;
      doc["fill_value"] = fill;
      Result<ArrayMetadata> parsed = ParseArray(doc);
      ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
      EXPECT_EQ(parsed->data_type, *expected);
      EXPECT_EQ(parsed->fill_value, std::vector<std::byte>(DataTypeSize(*expected)));
    }
  }
}

TEST(V3MetadataTest, UnsupportedDataTypesAreNamed) {
  for (json data_type : {json("future.float7"), json("numpy.datetime128"), json({{"name", "r16"}}),
                         json({{"name", "raw_bytes"}, {"configuration", {{"length_bytes", 4}}}})}) {
    json doc = BaseArrayJson();
    doc["data_type"] = data_type;
    const std::string name =
        data_type.is_string() ? data_type.get<std::string>() : data_type["name"].get<std::string>();
    ExpectError(ParseArray(doc).status(), ErrorCode::kUnsupported, {"data_type", name});
  }
  json doc = BaseArrayJson();
  doc["data_type"] = {{"name", "float32"}, {"configuration", {{"endian", "big"}}}};
  ExpectError(ParseArray(doc).status(), ErrorCode::kUnsupported, {"data_type.configuration"});
}

TEST(V3MetadataTest, MalformedDataTypeIsMetadataError) {
  for (json data_type : {json(5), json(nullptr), json::array({"float32"}), json::object(),
                         json({{"name", 3}}), json({{"name", "float32"}, {"foo", 1}}),
                         json({{"name", "float32"}, {"configuration", 1}})}) {
    json doc = BaseArrayJson();
    doc["data_type"] = data_type;
    ExpectError(ParseArray(doc).status(), ErrorCode::kMetadata, {"data_type"});
  }
}

TEST(V3MetadataTest, ChunkKeyEncodings) {
  struct Case {
    json encoding;
    ChunkKeyEncoding::Kind kind;
    char separator;
  };
  using Kind = ChunkKeyEncoding::Kind;
  const Case cases[] = {
      {json({{"name", "default"}}), Kind::kDefault, '/'},
      {json("default"), Kind::kDefault, '/'},
      {json({{"name", "default"}, {"configuration", {{"separator", "."}}}}), Kind::kDefault, '.'},
      {json({{"name", "default"}, {"configuration", {{"separator", "/"}}}}), Kind::kDefault, '/'},
      {json({{"name", "v2"}}), Kind::kV2, '.'},
      {json("v2"), Kind::kV2, '.'},
      {json({{"name", "v2"}, {"configuration", json::object()}}), Kind::kV2, '.'},
      {json({{"name", "v2"}, {"configuration", {{"separator", "/"}}}}), Kind::kV2, '/'},
  };
  for (const Case& c : cases) {
    json doc = BaseArrayJson();
    doc["chunk_key_encoding"] = c.encoding;
    Result<ArrayMetadata> parsed = ParseArray(doc);
    ASSERT_TRUE(parsed.ok()) << c.encoding.dump() << ": " << parsed.status().ToString();
    EXPECT_EQ(parsed->chunk_key_encoding.kind, c.kind) << c.encoding.dump();
    EXPECT_EQ(parsed->chunk_key_encoding.separator, c.separator) << c.encoding.dump();
  }
}

TEST(V3MetadataTest, BadChunkKeyEncodings) {
  json doc = BaseArrayJson();
  doc["chunk_key_encoding"] = {{"name", "default"}, {"configuration", {{"separator", "-"}}}};
  ExpectError(ParseArray(doc).status(), ErrorCode::kMetadata,
              {"chunk_key_encoding.configuration.separator", "\"-\""});
  doc["chunk_key_encoding"] = {{"name", "default"}, {"configuration", {{"separator", 1}}}};
  ExpectError(ParseArray(doc).status(), ErrorCode::kMetadata,
              {"chunk_key_encoding.configuration.separator"});
  doc["chunk_key_encoding"] = {{"name", "v2"}, {"configuration", {{"sep", "/"}}}};
  ExpectError(ParseArray(doc).status(), ErrorCode::kMetadata,
              {"chunk_key_encoding.configuration", "sep"});
  doc["chunk_key_encoding"] = {{"name", "hashed"}};
  ExpectError(ParseArray(doc).status(), ErrorCode::kUnsupported, {"chunk_key_encoding", "hashed"});
  doc["chunk_key_encoding"] = 7;
  ExpectError(ParseArray(doc).status(), ErrorCode::kMetadata, {"chunk_key_encoding"});
}

TEST(V3MetadataTest, CodecForms) {
  json doc = BaseArrayJson();
  doc["codecs"] = json::array(
      {"bytes",
       {{"name", "crc32c"}},
       {{"name", "zstd"}, {"configuration", {{"level", 3}}}},
       {{"name", "gzip"}, {"configuration", {{"level", 1}}}, {"must_understand", true}}});
  Result<ArrayMetadata> parsed = ParseArray(doc);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  ASSERT_EQ(parsed->codecs.size(), 4u);
  EXPECT_EQ(parsed->codecs[0], (CodecSpec{"bytes", json::object()}));
  EXPECT_EQ(parsed->codecs[1], (CodecSpec{"crc32c", json::object()}));
  EXPECT_EQ(parsed->codecs[2], (CodecSpec{"zstd", {{"level", 3}}}));
  EXPECT_EQ(parsed->codecs[3], (CodecSpec{"gzip", {{"level", 1}}}));
}

TEST(V3MetadataTest, BadCodecsNameTheField) {
  struct Case {
    json codecs;
    std::string field;
  };
  const Case cases[] = {
      {json::array(), "codecs"},
      {json("bytes"), "codecs"},
      {json::object(), "codecs"},
      {json::array({json::object()}), "codecs[0].name"},
      {json::array({"bytes", {{"configuration", json::object()}}}), "codecs[1].name"},
      {json::array({{{"name", ""}}}), "codecs[0].name"},
      {json::array({{{"name", 5}}}), "codecs[0].name"},
      {json::array({{{"name", "zstd"}, {"configuration", json::array()}}}),
       "codecs[0].configuration"},
      {json::array({{{"name", "zstd"}, {"extra", 1}}}), "codecs[0]"},
      {json::array({42}), "codecs[0]"},
  };
  for (const Case& c : cases) {
    json doc = BaseArrayJson();
    doc["codecs"] = c.codecs;
    ExpectError(ParseArray(doc).status(), ErrorCode::kMetadata, {"field '" + c.field + "'"});
  }
}

TEST(V3MetadataTest, ExtensionFields) {
  json doc = BaseArrayJson();
  doc["my_extension"] = {{"must_understand", false}, {"anything", {1, 2}}};
  EXPECT_TRUE(ParseArray(doc).ok()) << ParseArray(doc).status().ToString();

  doc = BaseArrayJson();
  doc["my_extension"] = {{"must_understand", true}};
  ExpectError(ParseArray(doc).status(), ErrorCode::kUnsupported, {"my_extension"});

  doc = BaseArrayJson();
  doc["my_extension"] = {{"name", "x"}};
  ExpectError(ParseArray(doc).status(), ErrorCode::kUnsupported, {"my_extension"});

  doc = BaseArrayJson();
  doc["my_extension"] = 1;
  ExpectError(ParseArray(doc).status(), ErrorCode::kUnsupported, {"my_extension"});

  doc = BaseArrayJson();
  doc["my_extension"] = {{"must_understand", "false"}};  // a string is not false
  ExpectError(ParseArray(doc).status(), ErrorCode::kUnsupported, {"my_extension"});
}

TEST(V3MetadataTest, StorageTransformers) {
  json doc = BaseArrayJson();
  doc["storage_transformers"] = json::array();
  EXPECT_TRUE(ParseArray(doc).ok());
  doc["storage_transformers"] = json::array({{{"name", "chunk-manifest-json"}}});
  ExpectError(ParseArray(doc).status(), ErrorCode::kUnsupported,
              {"storage_transformers", "chunk-manifest-json"});
  doc["storage_transformers"] = json::object();
  ExpectError(ParseArray(doc).status(), ErrorCode::kMetadata, {"storage_transformers"});
}

TEST(V3MetadataTest, MissingRequiredFieldsAreNamed) {
  for (const char* field : {"zarr_format", "node_type", "shape", "data_type", "chunk_grid",
                            "chunk_key_encoding", "fill_value", "codecs"}) {
    json doc = BaseArrayJson();
    doc.erase(field);
    ExpectError(ParseArray(doc).status(), ErrorCode::kMetadata,
                {"field '" + std::string(field) + "'", "missing"});
  }
}

TEST(V3MetadataTest, FormatAndNodeType) {
  json doc = BaseArrayJson();
  doc["zarr_format"] = 2;
  ExpectError(ParseArray(doc).status(), ErrorCode::kUnsupported, {"zarr_format", "2"});
  doc["zarr_format"] = "3";
  ExpectError(ParseArray(doc).status(), ErrorCode::kMetadata, {"zarr_format"});
  doc["zarr_format"] = 3.0;
  ExpectError(ParseArray(doc).status(), ErrorCode::kMetadata, {"zarr_format"});
  doc = BaseArrayJson();
  doc["node_type"] = "dataset";
  ExpectError(ParseArray(doc).status(), ErrorCode::kMetadata, {"node_type", "dataset"});
  doc["node_type"] = 1;
  ExpectError(ParseArray(doc).status(), ErrorCode::kMetadata, {"node_type"});
}

TEST(V3MetadataTest, ShapeAndChunkGridValidation) {
  struct Case {
    json shape;
    json chunk_grid;
    ErrorCode code;
    std::string field;
  };
  auto regular = [](json chunk_shape) {
    return json({{"name", "regular"}, {"configuration", {{"chunk_shape", chunk_shape}}}});
  };
  const Case cases[] = {
      {json({4, 6}), regular({2}), ErrorCode::kMetadata, "chunk_grid.configuration.chunk_shape"},
      {json({4, 6}), regular({2, 0}), ErrorCode::kMetadata,
       "chunk_grid.configuration.chunk_shape[1]"},
      {json({4, 6}), regular({2, -3}), ErrorCode::kMetadata,
       "chunk_grid.configuration.chunk_shape[1]"},
      {json({4, 6}), regular({2, 1.5}), ErrorCode::kMetadata,
       "chunk_grid.configuration.chunk_shape[1]"},
      {json({4, 6}), regular("2,3"), ErrorCode::kMetadata, "chunk_grid.configuration.chunk_shape"},
      {json({-4, 6}), regular({2, 3}), ErrorCode::kMetadata, "shape[0]"},
      {json({4, "6"}), regular({2, 3}), ErrorCode::kMetadata, "shape[1]"},
      {json(4), regular({2}), ErrorCode::kMetadata, "shape"},
      {json({4, 6}), json({{"name", "regular"}}), ErrorCode::kMetadata,
       "chunk_grid.configuration.chunk_shape"},
      {json({4, 6}),
       json({{"name", "regular"}, {"configuration", {{"chunk_shape", {2, 3}}, {"x", 1}}}}),
       ErrorCode::kMetadata, "chunk_grid.configuration"},
      {json({4, 6}), json({{"name", "rectilinear"}, {"configuration", json::object()}}),
       ErrorCode::kUnsupported, "chunk_grid"},
      {json({4, 6}), json("regular"), ErrorCode::kMetadata, "chunk_grid.configuration.chunk_shape"},
      // Sizes whose products do not fit in 64 bits.
      {json({uint64_t{1} << 32, uint64_t{1} << 32, 2}), regular({1, 1, 1}), ErrorCode::kUnsupported,
       "shape"},
      {json({4, 6}), regular({uint64_t{1} << 62, 2}), ErrorCode::kUnsupported,
       "chunk_grid.configuration.chunk_shape"},
  };
  for (const Case& c : cases) {
    json doc = BaseArrayJson();
    doc["shape"] = c.shape;
    doc["chunk_grid"] = c.chunk_grid;
    SCOPED_TRACE(doc.dump());
    ExpectError(ParseArray(doc).status(), c.code, {"field '" + c.field + "'"});
  }
}

TEST(V3MetadataTest, EmptyAndZeroDimensionalArrays) {
  json doc = BaseArrayJson();
  doc["shape"] = {0, 6};
  Result<ArrayMetadata> parsed = ParseArray(doc);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed->num_chunks(), 0u);

  doc["shape"] = json::array();
  doc["chunk_grid"]["configuration"]["chunk_shape"] = json::array();
  parsed = ParseArray(doc);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_TRUE(parsed->shape.empty());
  EXPECT_EQ(parsed->num_chunks(), 1u);
}

TEST(V3MetadataTest, DimensionNames) {
  json doc = BaseArrayJson();
  doc["dimension_names"] = {nullptr, nullptr};
  Result<ArrayMetadata> parsed = ParseArray(doc);
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(parsed->dimension_names, (std::vector<std::string>{"", ""}));

  doc["dimension_names"] = nullptr;
  parsed = ParseArray(doc);
  ASSERT_TRUE(parsed.ok());
  EXPECT_TRUE(parsed->dimension_names.empty());

  doc["dimension_names"] = {"y"};
  ExpectError(ParseArray(doc).status(), ErrorCode::kMetadata, {"dimension_names", "1 names"});
  doc["dimension_names"] = {"y", 3};
  ExpectError(ParseArray(doc).status(), ErrorCode::kMetadata, {"dimension_names[1]"});
  doc["dimension_names"] = "yx";
  ExpectError(ParseArray(doc).status(), ErrorCode::kMetadata, {"dimension_names"});
}

TEST(V3MetadataTest, Attributes) {
  json doc = BaseArrayJson();
  Result<ArrayMetadata> parsed = ParseArray(doc);
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(parsed->attributes, json::object());
  doc["attributes"] = {{"a", {1, 2}}, {"b", {{"c", nullptr}}}};
  parsed = ParseArray(doc);
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(parsed->attributes, doc["attributes"]);
  doc["attributes"] = json::array();
  ExpectError(ParseArray(doc).status(), ErrorCode::kMetadata, {"field 'attributes'"});
}

TEST(V3MetadataTest, FillValueErrorsInDocumentNameTheField) {
  json doc = BaseArrayJson();
  doc["fill_value"] = nullptr;
  ExpectError(ParseArray(doc).status(), ErrorCode::kMetadata, {"field 'fill_value'"});
  doc["data_type"] = "uint8";
  doc["fill_value"] = 256;
  ExpectError(ParseArray(doc).status(), ErrorCode::kMetadata,
              {"field 'fill_value'", "256", "out of range", "uint8"});
}

TEST(V3MetadataTest, MalformedDocuments) {
  for (std::string text :
       {std::string(""), std::string("{"), std::string("[]"), std::string("null"),
        std::string("{\"zarr_format\": 3,}"), std::string("\"zarr.json\""),
        std::string("{\"zarr_format\": 3, \"node_type\": \"group\", \"attributes\": \"\xff\"}")}) {
    ExpectError(ParseV3Metadata(text).status(), ErrorCode::kMetadata, {});
  }
  ExpectError(ParseV3Metadata("{").status(), ErrorCode::kMetadata, {"zarr.json"});
}

TEST(V3MetadataTest, DeepNestingIsRejectedWithoutRecursion) {
  const std::string deep =
      "{\"zarr_format\": 3, \"node_type\": \"group\", \"attributes\": {\"a\": " +
      std::string(100000, '[') + std::string(100000, ']') + "}}";
  ExpectError(ParseV3Metadata(deep).status(), ErrorCode::kMetadata, {"nested"});
  // Brackets inside strings do not count.
  const std::string in_string =
      "{\"zarr_format\": 3, \"node_type\": \"group\", \"attributes\": "
      "{\"a\": \"" +
      std::string(1000, '[') + "\\\"\"}}";
  EXPECT_TRUE(ParseV3Metadata(in_string).ok());
}

// Every field replaced by every JSON type, every truncation of the document: errors, no crash.
TEST(V3MetadataTest, HostileVariationsNeverCrash) {
  const json values[] = {nullptr,
                         true,
                         0,
                         -1,
                         1.5,
                         "x",
                         "NaN",
                         json::array(),
                         json::array({1, "a"}),
                         json::object(),
                         json({{"name", 1}})};
  const json base = json::parse(kZarrPythonArray);
  for (const auto& [key, unused] : base.items()) {
    for (const json& value : values) {
      json doc = base;
      doc[key] = value;
      (void)ParseV3Metadata(doc.dump());
    }
  }
  const std::string text = base.dump();
  for (size_t n = 0; n < text.size(); ++n) {
    EXPECT_FALSE(ParseV3Metadata(text.substr(0, n)).ok());
  }
  const std::string group = json::parse(kZarrPythonConsolidatedGroup).dump();
  for (size_t n = 0; n < group.size(); n += 7) (void)ParseV3Metadata(group.substr(0, n));
}

// ----------------------------------------------------------------------------------------------
// Fill values

TEST(V3MetadataFillValueTest, Bool) {
  EXPECT_EQ(Fill(true, DataType::kBool), std::vector<std::byte>{std::byte{1}});
  EXPECT_EQ(Fill(false, DataType::kBool), std::vector<std::byte>{std::byte{0}});
  for (json bad : {json(1), json(0), json("true"), json(nullptr)}) {
    ExpectError(FillError(bad, DataType::kBool), ErrorCode::kMetadata, {"field 'fill_value'"});
  }
}

TEST(V3MetadataFillValueTest, IntegersAtTheirLimits) {
  EXPECT_EQ(BytesAs<int8_t>(Fill(-128, DataType::kInt8)), -128);
  EXPECT_EQ(BytesAs<int8_t>(Fill(127, DataType::kInt8)), 127);
  EXPECT_EQ(BytesAs<int16_t>(Fill(-32768, DataType::kInt16)), -32768);
  EXPECT_EQ(BytesAs<int32_t>(Fill(-2147483648LL, DataType::kInt32)), INT32_MIN);
  EXPECT_EQ(BytesAs<int64_t>(Fill(json::parse("-9223372036854775808"), DataType::kInt64)),
            INT64_MIN);
  EXPECT_EQ(BytesAs<int64_t>(Fill(json::parse("9223372036854775807"), DataType::kInt64)),
            INT64_MAX);
  EXPECT_EQ(BytesAs<uint8_t>(Fill(255, DataType::kUInt8)), 255);
  EXPECT_EQ(BytesAs<uint16_t>(Fill(65535, DataType::kUInt16)), 65535);
  EXPECT_EQ(BytesAs<uint32_t>(Fill(4294967295u, DataType::kUInt32)), UINT32_MAX);
  EXPECT_EQ(BytesAs<uint64_t>(Fill(json::parse("18446744073709551615"), DataType::kUInt64)),
            UINT64_MAX);
}

TEST(V3MetadataFillValueTest, IntegersOutOfRangeOrNotIntegers) {
  struct Case {
    json value;
    DataType type;
  };
  const Case cases[] = {
      {json(128), DataType::kInt8},
      {json(-129), DataType::kInt8},
      {json(-1), DataType::kUInt8},
      {json(256), DataType::kUInt8},
      {json(65536), DataType::kUInt16},
      {json(-32769), DataType::kInt16},
      {json(2147483648LL), DataType::kInt32},
      {json(4294967296LL), DataType::kUInt32},
      {json::parse("9223372036854775808"), DataType::kInt64},
      {json(-1), DataType::kUInt64},
      {json::parse("18446744073709551616"), DataType::kUInt64},  // parses as a float
  };
  for (const Case& c : cases) {
    ExpectError(FillError(c.value, c.type), ErrorCode::kMetadata,
                {"field 'fill_value'", std::string(DataTypeName(c.type))});
  }
  ExpectError(FillError(128, DataType::kInt8), ErrorCode::kMetadata, {"128", "out of range"});
  for (json bad : {json(1.5), json(1.0), json("1"), json("NaN"), json(true), json(nullptr),
                   json::array({1})}) {
    ExpectError(FillError(bad, DataType::kInt32), ErrorCode::kMetadata,
                {"field 'fill_value'", "integer"});
  }
}

TEST(V3MetadataFillValueTest, Float32Forms) {
  EXPECT_EQ(BytesAs<float>(Fill(1.5, DataType::kFloat32)), 1.5f);
  EXPECT_EQ(BytesAs<float>(Fill(-3, DataType::kFloat32)), -3.0f);
  EXPECT_EQ(BytesAs<float>(Fill(0.1, DataType::kFloat32)), 0.1f);
  EXPECT_EQ(BytesAs<uint32_t>(Fill("NaN", DataType::kFloat32)), 0x7fc00000u);
  EXPECT_EQ(BytesAs<uint32_t>(Fill("Infinity", DataType::kFloat32)), 0x7f800000u);
  EXPECT_EQ(BytesAs<uint32_t>(Fill("-Infinity", DataType::kFloat32)), 0xff800000u);
  EXPECT_EQ(BytesAs<uint32_t>(Fill("0x7fc00001", DataType::kFloat32)), 0x7fc00001u);
  EXPECT_EQ(BytesAs<uint32_t>(Fill("0x3F800000", DataType::kFloat32)), 0x3f800000u);
  EXPECT_EQ(BytesAs<uint32_t>(Fill(-0.0, DataType::kFloat32)), 0x80000000u);
  EXPECT_EQ(BytesAs<float>(Fill(3.4028235e38, DataType::kFloat32)),
            std::numeric_limits<float>::max());
  EXPECT_EQ(BytesAs<float>(Fill(1e-46, DataType::kFloat32)), 0.0f);
}

TEST(V3MetadataFillValueTest, Float64Forms) {
  EXPECT_EQ(BytesAs<double>(Fill(0.1, DataType::kFloat64)), 0.1);
  EXPECT_EQ(BytesAs<double>(Fill(json::parse("1e308"), DataType::kFloat64)), 1e308);
  EXPECT_EQ(BytesAs<uint64_t>(Fill("NaN", DataType::kFloat64)), 0x7ff8000000000000u);
  EXPECT_EQ(BytesAs<uint64_t>(Fill("-Infinity", DataType::kFloat64)), 0xfff0000000000000u);
  EXPECT_EQ(BytesAs<uint64_t>(Fill("0x7ff8000000000001", DataType::kFloat64)), 0x7ff8000000000001u);
  EXPECT_EQ(BytesAs<double>(Fill(json::parse("18446744073709551615"), DataType::kFloat64)),
            18446744073709551615.0);
}

TEST(V3MetadataFillValueTest, Float16Forms) {
  EXPECT_EQ(BytesAs<uint16_t>(Fill(1.0, DataType::kFloat16)), 0x3c00);
  EXPECT_EQ(BytesAs<uint16_t>(Fill(0.1, DataType::kFloat16)), 0x2e66);
  // zarr-python writes the float16 value 0.1 as its exact decimal expansion.
  EXPECT_EQ(BytesAs<uint16_t>(Fill(0.0999755859375, DataType::kFloat16)), 0x2e66);
  EXPECT_EQ(BytesAs<uint16_t>(Fill(65504, DataType::kFloat16)), 0x7bff);
  EXPECT_EQ(BytesAs<uint16_t>(Fill(6e-8, DataType::kFloat16)), 0x0001);
  EXPECT_EQ(BytesAs<uint16_t>(Fill(2.98023223876953125e-8, DataType::kFloat16)), 0x0000);
  EXPECT_EQ(BytesAs<uint16_t>(Fill("NaN", DataType::kFloat16)), 0x7e00);
  EXPECT_EQ(BytesAs<uint16_t>(Fill("Infinity", DataType::kFloat16)), 0x7c00);
  EXPECT_EQ(BytesAs<uint16_t>(Fill("-Infinity", DataType::kFloat16)), 0xfc00);
  EXPECT_EQ(BytesAs<uint16_t>(Fill("0x7e01", DataType::kFloat16)), 0x7e01);
  EXPECT_EQ(BytesAs<uint16_t>(Fill(-0.0, DataType::kFloat16)), 0x8000);
}

TEST(V3MetadataFillValueTest, FloatErrors) {
  struct Case {
    json value;
    DataType type;
    std::string needle;
  };
  const Case cases[] = {
      {json(65520), DataType::kFloat16, "out of range for float16"},
      {json(-1e6), DataType::kFloat16, "out of range for float16"},
      {json(1e39), DataType::kFloat32, "out of range for float32"},
      {json(-3.5e38), DataType::kFloat32, "out of range for float32"},
      {json("0x7fc0"), DataType::kFloat32, "8 hex digits"},
      {json("0x7fc000000"), DataType::kFloat32, "8 hex digits"},
      {json("0x7fc0000g"), DataType::kFloat32, "hex"},
      {json("0x7e00"), DataType::kFloat64, "16 hex digits"},
      {json("nan"), DataType::kFloat32, "\"nan\""},
      {json("-NaN"), DataType::kFloat32, "\"-NaN\""},
      {json("inf"), DataType::kFloat64, "\"inf\""},
      {json("1.5"), DataType::kFloat64, "\"1.5\""},
      {json(true), DataType::kFloat32, "true"},
      {json(nullptr), DataType::kFloat32, "null"},
      {json::array({1.0, 2.0}), DataType::kFloat64, "array"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.value.dump());
    ExpectError(FillError(c.value, c.type), ErrorCode::kMetadata, {"field 'fill_value'", c.needle});
  }
}

TEST(V3MetadataFillValueTest, Complex) {
  std::vector<std::byte> c64 = Fill(json::array({1.0, "NaN"}), DataType::kComplex64);
  EXPECT_EQ(BytesAs<float>(c64, 0), 1.0f);
  EXPECT_EQ(BytesAs<uint32_t>(c64, 4), 0x7fc00000u);
  c64 = Fill(json::array({"0x3f800000", "-Infinity"}), DataType::kComplex64);
  EXPECT_EQ(BytesAs<float>(c64, 0), 1.0f);
  EXPECT_EQ(BytesAs<float>(c64, 4), -INFINITY);
  std::vector<std::byte> c128 = Fill(json::array({1, -2.5}), DataType::kComplex128);
  EXPECT_EQ(BytesAs<double>(c128, 0), 1.0);
  EXPECT_EQ(BytesAs<double>(c128, 8), -2.5);
  c128 = Fill(json::array({"Infinity", "0x7ff8000000000001"}), DataType::kComplex128);
  EXPECT_EQ(BytesAs<double>(c128, 0), INFINITY);
  EXPECT_EQ(BytesAs<uint64_t>(c128, 8), 0x7ff8000000000001u);

  ExpectError(FillError(json::array({1.0, "x"}), DataType::kComplex64), ErrorCode::kMetadata,
              {"field 'fill_value'", "imaginary part"});
  ExpectError(FillError(json::array({1e39, 0}), DataType::kComplex64), ErrorCode::kMetadata,
              {"field 'fill_value'", "real part", "out of range"});
  for (json bad : {json(1.0), json::array({1.0}), json::array({1, 2, 3}), json("NaN"),
                   json({{"re", 1}, {"im", 2}})}) {
    ExpectError(FillError(bad, DataType::kComplex128), ErrorCode::kMetadata,
                {"field 'fill_value'", "[real, imaginary]"});
  }
}

// ----------------------------------------------------------------------------------------------
// Groups and consolidated metadata

TEST(V3MetadataTest, ParsesPlainGroup) {
  Result<GroupMetadata> group =
      ParseGroup(R"({"zarr_format": 3, "node_type": "group", "attributes": {"a": [1]}})");
  ASSERT_TRUE(group.ok()) << group.status().ToString();
  EXPECT_EQ(group->zarr_format, 3);
  EXPECT_EQ(group->attributes, json({{"a", {1}}}));
  EXPECT_EQ(group->consolidated, nullptr);

  group = ParseGroup(R"({"zarr_format": 3, "node_type": "group"})");
  ASSERT_TRUE(group.ok());
  EXPECT_EQ(group->attributes, json::object());

  group = ParseGroup(R"({"zarr_format": 3, "node_type": "group", "consolidated_metadata": null})");
  ASSERT_TRUE(group.ok());
  EXPECT_EQ(group->consolidated, nullptr);
}

TEST(V3MetadataTest, GroupRejectsArrayFieldsAndUnknownFields) {
  ExpectError(ParseV3Metadata(R"({"zarr_format": 3, "node_type": "group", "shape": [1]})").status(),
              ErrorCode::kUnsupported, {"shape"});
  ExpectError(
      ParseV3Metadata(R"({"zarr_format": 3, "node_type": "group", "attributes": 1})").status(),
      ErrorCode::kMetadata, {"attributes"});
  EXPECT_TRUE(ParseV3Metadata(R"({"zarr_format": 3, "node_type": "group",
                                  "ext": {"must_understand": false}})")
                  .ok());
}

TEST(V3MetadataTest, ParsesZarrPythonConsolidatedMetadata) {
  Result<GroupMetadata> group = ParseGroup(kZarrPythonConsolidatedGroup);
  ASSERT_TRUE(group.ok()) << group.status().ToString();
  EXPECT_EQ(group->attributes, json({{"title", "t"}}));
  ASSERT_NE(group->consolidated, nullptr);
  const ConsolidatedMetadata& nodes = *group->consolidated;
  ASSERT_EQ(nodes.size(), 3u);

  const auto& h = std::get<ArrayMetadata>(nodes.at("h"));
  EXPECT_EQ(h.data_type, DataType::kFloat16);
  EXPECT_EQ(BytesAs<uint16_t>(h.fill_value), 0x2e66);
  ASSERT_EQ(h.codecs.size(), 1u);
  EXPECT_EQ(h.codecs[0].name, "sharding_indexed");
  EXPECT_EQ(h.codecs[0].configuration["index_location"], "end");

  const auto& b = std::get<ArrayMetadata>(nodes.at("sub/b"));
  EXPECT_EQ(b.data_type, DataType::kComplex64);
  EXPECT_EQ(BytesAs<float>(b.fill_value, 4), 2.0f);

  // zarr-python stores the tree flat and leaves subgroups' own "metadata" empty; a subgroup gets
  // the entries below it, relative to it.
  const auto& sub = std::get<GroupMetadata>(nodes.at("sub"));
  EXPECT_EQ(sub.attributes, json({{"level", 1}}));
  ASSERT_NE(sub.consolidated, nullptr);
  ASSERT_EQ(sub.consolidated->size(), 1u);
  EXPECT_EQ(std::get<ArrayMetadata>(sub.consolidated->at("b")).shape, (std::vector<uint64_t>{3}));
}

TEST(V3MetadataTest, NestedSubgroupsGetTheirSubtrees) {
  json group = {{"zarr_format", 3}, {"node_type", "group"}};
  json array = BaseArrayJson();
  json doc = group;
  doc["consolidated_metadata"] = {
      {"kind", "inline"},
      {"must_understand", false},
      {"metadata",
       {{"a", group}, {"a/b", group}, {"a/b/x", array}, {"a/y", array}, {"ab", array}}}};
  Result<GroupMetadata> parsed = ParseGroup(doc.dump());
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  const auto& a = std::get<GroupMetadata>(parsed->consolidated->at("a"));
  ASSERT_NE(a.consolidated, nullptr);
  std::vector<std::string> keys;
  for (const auto& [key, node] : *a.consolidated) keys.push_back(key);
  EXPECT_EQ(keys, (std::vector<std::string>{"b", "b/x", "y"}));
  const auto& b = std::get<GroupMetadata>(a.consolidated->at("b"));
  ASSERT_NE(b.consolidated, nullptr);
  EXPECT_EQ(b.consolidated->size(), 1u);
  EXPECT_TRUE(b.consolidated->contains("x"));
}

TEST(V3MetadataTest, AnUnsupportedMemberIsWrittenBackAsItCame) {
  // A member this reader cannot parse (an unknown data type, an extension key) is listed, and a
  // group written back (its attributes changed) keeps its document as stored; writing it from the
  // unparsed placeholder once gave an array without codecs, which no reader takes (the v3
  // metadata fuzzer found it).
  json odd_type = BaseArrayJson();
  odd_type["data_type"] = "a_type_of_the_future";
  json odd_key = BaseArrayJson();
  odd_key["an_extension"] = {{"must_understand", true}};
  json doc = {{"zarr_format", 3}, {"node_type", "group"}, {"attributes", {{"title", "t"}}}};
  doc["consolidated_metadata"] = {
      {"kind", "inline"},
      {"must_understand", false},
      {"metadata", {{"good", BaseArrayJson()}, {"odd_type", odd_type}, {"odd_key", odd_key}}}};
  Result<GroupMetadata> parsed = ParseGroup(doc.dump());
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  for (const char* name : {"odd_type", "odd_key"}) {
    EXPECT_TRUE(std::get<ArrayMetadata>(parsed->consolidated->at(name)).unsupported) << name;
  }
  const json written = GroupMetadataToV3Json(*parsed);
  const json& members = written["consolidated_metadata"]["metadata"];
  EXPECT_EQ(members["odd_type"], odd_type);
  EXPECT_EQ(members["odd_key"], odd_key);
  Result<GroupMetadata> reparsed = ParseGroup(written.dump());
  ASSERT_TRUE(reparsed.ok()) << reparsed.status().ToString();
  EXPECT_FALSE(std::get<ArrayMetadata>(reparsed->consolidated->at("good")).unsupported);
  EXPECT_TRUE(std::get<ArrayMetadata>(reparsed->consolidated->at("odd_type")).unsupported);
}

TEST(V3MetadataTest, BadConsolidatedMetadata) {
  struct Case {
    json consolidated;
    ErrorCode code;
    std::vector<std::string> needles;
  };
  json array = BaseArrayJson();
  json bad_array = BaseArrayJson();
  bad_array["shape"] = {4};
  const Case cases[] = {
      {json(1), ErrorCode::kMetadata, {"consolidated_metadata"}},
      {json({{"kind", "remote"}, {"metadata", json::object()}}),
       ErrorCode::kUnsupported,
       {"consolidated_metadata.kind", "remote"}},
      {json({{"metadata", json::object()}}), ErrorCode::kMetadata, {"consolidated_metadata.kind"}},
      {json({{"kind", "inline"}}), ErrorCode::kMetadata, {"consolidated_metadata.metadata"}},
      {json({{"kind", "inline"}, {"metadata", json::array()}}),
       ErrorCode::kMetadata,
       {"consolidated_metadata.metadata"}},
      {json({{"kind", "inline"}, {"metadata", json::object()}, {"must_understand", "no"}}),
       ErrorCode::kMetadata,
       {"consolidated_metadata.must_understand"}},
      {json({{"kind", "inline"}, {"metadata", json::object()}, {"other", 1}}),
       ErrorCode::kMetadata,
       {"consolidated_metadata", "other"}},
      {json({{"kind", "inline"}, {"metadata", {{"../x", array}}}}), ErrorCode::kMetadata, {"../x"}},
      {json({{"kind", "inline"}, {"metadata", {{"a//b", array}}}}), ErrorCode::kMetadata, {"a//b"}},
      {json({{"kind", "inline"}, {"metadata", {{"/a", array}}}}), ErrorCode::kMetadata, {"/a"}},
      {json({{"kind", "inline"}, {"metadata", {{"", array}}}}), ErrorCode::kMetadata, {"empty"}},
      {json({{"kind", "inline"}, {"metadata", {{"a", 1}}}}),
       ErrorCode::kMetadata,
       {"consolidated_metadata.metadata[\"a\"]"}},
      {json({{"kind", "inline"}, {"metadata", {{"sub/a", bad_array}}}}),
       ErrorCode::kMetadata,
       {"consolidated_metadata.metadata[\"sub/a\"]", "chunk_grid.configuration.chunk_shape"}},
  };
  for (const Case& c : cases) {
    json doc = {
        {"zarr_format", 3}, {"node_type", "group"}, {"consolidated_metadata", c.consolidated}};
    SCOPED_TRACE(doc.dump());
    Status status = ParseV3Metadata(doc.dump()).status();
    ASSERT_FALSE(status.ok());
    EXPECT_EQ(status.code(), c.code) << status.ToString();
    for (const std::string& needle : c.needles) EXPECT_THAT(status.message(), HasSubstr(needle));
  }
  std::string deep_path;
  for (int i = 0; i < 100; ++i) deep_path += (i ? "/g" : "g");
  json doc = {{"zarr_format", 3},
              {"node_type", "group"},
              {"consolidated_metadata", {{"kind", "inline"}, {"metadata", {{deep_path, array}}}}}};
  ExpectError(ParseV3Metadata(doc.dump()).status(), ErrorCode::kUnsupported, {"deeper"});
}

// ----------------------------------------------------------------------------------------------
// Writing

TEST(V3MetadataTest, WritesSpecFormAndRoundTrips) {
  ArrayMetadata m;
  m.shape = {10, 20};
  m.chunk_shape = {5, 7};
  m.data_type = DataType::kFloat64;
  m.chunk_key_encoding = {ChunkKeyEncoding::Kind::kV2, '/'};
  const uint64_t nan = 0x7ff8000000000000;
  m.fill_value.resize(8);
  std::memcpy(m.fill_value.data(), &nan, 8);
  m.codecs = {{"transpose", {{"order", {1, 0}}}},
              {"bytes", {{"endian", "little"}}},
              {"crc32c", json::object()}};
  m.dimension_names = {"time", ""};
  m.attributes = {{"units", "K"}};

  json written = ArrayMetadataToV3Json(m);
  EXPECT_EQ(written["zarr_format"], 3);
  EXPECT_EQ(written["node_type"], "array");
  EXPECT_EQ(written["data_type"], "float64");
  EXPECT_EQ(written["fill_value"], "NaN");
  EXPECT_EQ(written["chunk_key_encoding"],
            json({{"name", "v2"}, {"configuration", {{"separator", "/"}}}}));
  EXPECT_EQ(written["chunk_grid"],
            json({{"name", "regular"}, {"configuration", {{"chunk_shape", {5, 7}}}}}));
  EXPECT_EQ(written["codecs"][2], json({{"name", "crc32c"}}));
  EXPECT_EQ(written["dimension_names"], json({"time", nullptr}));

  Result<ArrayMetadata> parsed = ParseArray(written.dump());
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed->shape, m.shape);
  EXPECT_EQ(parsed->chunk_shape, m.chunk_shape);
  EXPECT_EQ(parsed->data_type, m.data_type);
  EXPECT_EQ(parsed->chunk_key_encoding.kind, m.chunk_key_encoding.kind);
  EXPECT_EQ(parsed->chunk_key_encoding.separator, m.chunk_key_encoding.separator);
  EXPECT_EQ(parsed->fill_value, m.fill_value);
  EXPECT_EQ(parsed->codecs, m.codecs);
  EXPECT_EQ(parsed->dimension_names, m.dimension_names);
  EXPECT_EQ(parsed->attributes, m.attributes);
}

TEST(V3MetadataTest, FillValuesRoundTripBitExactly) {
  struct Case {
    DataType type;
    json fill;
    json written;  // the expected spec form
  };
  const Case cases[] = {
      {DataType::kBool, true, true},
      {DataType::kInt8, -5, -5},
      {DataType::kInt64, json::parse("-9223372036854775808"), json::parse("-9223372036854775808")},
      {DataType::kUInt64, json::parse("18446744073709551615"), json::parse("18446744073709551615")},
      {DataType::kFloat16, "NaN", "NaN"},
      {DataType::kFloat16, "0x7e01", "0x7e01"},
      {DataType::kFloat16, "0xfe00", "0xfe00"},  // a negative NaN keeps its sign
      {DataType::kFloat16, 0.1, 0.0999755859375},
      {DataType::kFloat16, "-Infinity", "-Infinity"},
      {DataType::kFloat32, "NaN", "NaN"},
      {DataType::kFloat32, "0x7fc00001", "0x7fc00001"},
      {DataType::kFloat32, "Infinity", "Infinity"},
      {DataType::kFloat32, 0.1, static_cast<double>(0.1f)},
      {DataType::kFloat32, -0.0, -0.0},
      {DataType::kFloat64, 1e-310, 1e-310},
      {DataType::kFloat64, "0x7ff0000000000001", "0x7ff0000000000001"},
      {DataType::kComplex64, json::array({"NaN", 1.5}), json::array({"NaN", 1.5})},
      {DataType::kComplex128, json::array({"-Infinity", "0x7ff8000000000001"}),
       json::array({"-Infinity", "0x7ff8000000000001"})},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(DataTypeName(c.type)) + " " + c.fill.dump());
    ArrayMetadata m;
    m.shape = {4};
    m.chunk_shape = {2};
    m.data_type = c.type;
    m.fill_value = Fill(c.fill, c.type);
    m.codecs = {{"bytes", json::object()}};
    json written = ArrayMetadataToV3Json(m);
    EXPECT_EQ(written["fill_value"], c.written);
    if (c.written.is_number_float()) {
      EXPECT_EQ(std::signbit(written["fill_value"].get<double>()),
                std::signbit(c.written.get<double>()));
    }
    Result<ArrayMetadata> parsed = ParseArray(written.dump());
    ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
    EXPECT_EQ(parsed->fill_value, m.fill_value);
  }
}

}  // namespace
}  // namespace zarrstream

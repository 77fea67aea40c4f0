// The extended data types in v3 and v2 metadata, in the forms zarr-python 3 and zarrs write.
// tests/test_string_types.py reads arrays that zarr-python and xarray wrote.
#include "metadata/extended_type.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <limits>

#include "metadata/v2_metadata.h"
#include "metadata/v3_metadata.h"
#include "util/status_test_util.h"

namespace zarrstream {
namespace {

using nlohmann::json;
using Kind = ExtendedType::Kind;

json V3Array(json data_type, json fill_value, json codecs) {
  return {{"zarr_format", 3},
          {"node_type", "array"},
          {"shape", {5}},
          {"data_type", std::move(data_type)},
          {"chunk_grid", {{"name", "regular"}, {"configuration", {{"chunk_shape", {2}}}}}},
          {"chunk_key_encoding", {{"name", "default"}}},
          {"fill_value", std::move(fill_value)},
          {"codecs", std::move(codecs)}};
}

ArrayMetadata ParseV3(const json& document) {
  auto node = ParseV3Metadata(document.dump());
  EXPECT_TRUE(node.ok()) << node.status().ToString();
  return node.ok() ? std::get<ArrayMetadata>(*node) : ArrayMetadata();
}

int64_t FillTicks(const ArrayMetadata& m) {
  int64_t ticks = 0;
  EXPECT_EQ(m.fill_value.size(), 8u);
  std::memcpy(&ticks, m.fill_value.data(), 8);
  return ticks;
}

TEST(ExtendedTypeTest, V3FormsOfZarrPython) {
  ArrayMetadata s = ParseV3(V3Array("string", "", {{{"name", "vlen-utf8"}}, {{"name", "zstd"}}}));
  ASSERT_TRUE(s.extended_type);
  EXPECT_EQ(s.extended_type->kind, Kind::kString);
  EXPECT_EQ(s.extended_type->NumpyTypeString(), "|O");

  ArrayMetadata u =
      ParseV3(V3Array({{"name", "fixed_length_utf32"}, {"configuration", {{"length_bytes", 16}}}},
                      "ab", {{{"name", "bytes"}, {"configuration", {{"endian", "little"}}}}}));
  ASSERT_TRUE(u.extended_type);
  EXPECT_EQ(u.extended_type->NumpyTypeString(), "<U4");
  EXPECT_EQ(u.text_fill_value, "ab");

  ArrayMetadata t = ParseV3(V3Array(
      {{"name", "numpy.datetime64"}, {"configuration", {{"unit", "s"}, {"scale_factor", 10}}}},
      "NaT", {{{"name", "bytes"}, {"configuration", {{"endian", "little"}}}}}));
  ASSERT_TRUE(t.extended_type);
  EXPECT_EQ(t.data_type, DataType::kInt64);
  EXPECT_EQ(t.extended_type->NumpyTypeString(), "<M8[10s]");
  EXPECT_EQ(FillTicks(t), std::numeric_limits<int64_t>::min());
  // Written back as zarr-python writes it.
  const json written = ArrayMetadataToV3Json(t);
  EXPECT_EQ(written["data_type"]["name"], "numpy.datetime64");
  EXPECT_EQ(written["data_type"]["configuration"]["scale_factor"], 10);

  ArrayMetadata b =
      ParseV3(V3Array({{"name", "null_terminated_bytes"}, {"configuration", {{"length_bytes", 3}}}},
                      "YQA=", {{{"name", "bytes"}}}));
  EXPECT_EQ(b.text_fill_value, "a");  // base64 of "a\0", trailing NUL dropped as numpy does
  EXPECT_EQ(ArrayMetadataToV3Json(b)["fill_value"], "YQ==");
}

TEST(ExtendedTypeTest, ZarrsBytesWithListFill) {
  ArrayMetadata m = ParseV3(V3Array("bytes", json::array({0, 255}), {{{"name", "vlen-bytes"}}}));
  ASSERT_TRUE(m.extended_type);
  EXPECT_EQ(m.extended_type->kind, Kind::kBytes);
  EXPECT_EQ(m.text_fill_value, std::string("\x00\xff", 2));
}

TEST(ExtendedTypeTest, BadFormsAreNamedErrors) {
  auto error = [](json data_type, json fill) {
    return ParseV3Metadata(
               V3Array(std::move(data_type), std::move(fill), {{{"name", "bytes"}}}).dump())
        .status();
  };
  ExpectErrorContains(error({{"name", "numpy.datetime64"},
                             {"configuration", {{"unit", "fortnight"}, {"scale_factor", 1}}}},
                            0),
                      ErrorCode::kUnsupported, {"data_type.configuration.unit", "fortnight"});
  ExpectErrorContains(
      error({{"name", "fixed_length_utf32"}, {"configuration", {{"length_bytes", 6}}}}, ""),
      ErrorCode::kMetadata, {"length_bytes", "multiple of 4"});
  ExpectErrorContains(error("string", 5), ErrorCode::kMetadata, {"fill_value", "string"});
  ExpectErrorContains(
      error({{"name", "null_terminated_bytes"}, {"configuration", {{"length_bytes", 1}}}}, "YWJj"),
      ErrorCode::kMetadata, {"fill_value", "longer"});
  ExpectErrorContains(error({{"name", "numpy.timedelta64"},
                             {"configuration", {{"unit", "s"}, {"scale_factor", 1}}}},
                            "soon"),
                      ErrorCode::kMetadata, {"fill_value", "NaT"});
}

json V2Array(const std::string& dtype, json fill, json filters) {
  return {{"zarr_format", 2},   {"shape", {4}},
          {"chunks", {2}},      {"dtype", dtype},
          {"fill_value", fill}, {"order", "C"},
          {"filters", filters}, {"compressor", {{"id", "zstd"}, {"level", 1}}}};
}

ArrayMetadata ParseV2(const json& zarray) {
  auto m = ParseV2ArrayMetadata(zarray.dump(), std::nullopt);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return m.ok() ? *m : ArrayMetadata();
}

TEST(ExtendedTypeTest, V2FormsOfZarrPython) {
  ArrayMetadata s = ParseV2(V2Array("|O", "", json::array({{{"id", "vlen-utf8"}}})));
  ASSERT_TRUE(s.extended_type);
  EXPECT_EQ(s.extended_type->kind, Kind::kString);
  ASSERT_EQ(s.codecs.size(), 2u);
  EXPECT_EQ(s.codecs[0].name, "vlen-utf8");
  EXPECT_EQ(s.codecs[1].name, "zstd");

  EXPECT_EQ(
      ParseV2(V2Array("|O", nullptr, json::array({{{"id", "vlen-bytes"}}}))).extended_type->kind,
      Kind::kBytes);
  ArrayMetadata j = ParseV2(V2Array("|O", nullptr, json::array({{{"id", "json2"}}})));
  EXPECT_EQ(j.extended_type->kind, Kind::kJson);
  EXPECT_EQ(j.codecs[0].name, "numcodecs.json2");

  ArrayMetadata u = ParseV2(V2Array(">U3", "x", nullptr));
  EXPECT_EQ(u.extended_type->length_bytes, 12u);
  EXPECT_EQ(u.codecs[0].configuration["endian"], "big");

  ArrayMetadata t = ParseV2(V2Array("<M8[ns]", -9223372036854775807LL - 1, nullptr));
  EXPECT_EQ(t.extended_type->unit, "ns");
  EXPECT_EQ(FillTicks(t), std::numeric_limits<int64_t>::min());
  ArrayMetadata td = ParseV2(V2Array("<m8[15m]", 3, nullptr));
  EXPECT_EQ(td.extended_type->kind, Kind::kTimeDelta64);
  EXPECT_EQ(td.extended_type->scale_factor, 15u);
  EXPECT_EQ(FillTicks(td), 3);

  ExpectErrorContains(ParseV2ArrayMetadata(
                          V2Array("|O", "", json::array({{{"id", "pickle"}}})).dump(), std::nullopt)
                          .status(),
                      ErrorCode::kUnsupported, {"object codec", "pickle"});
}

}  // namespace
}  // namespace zarrstream

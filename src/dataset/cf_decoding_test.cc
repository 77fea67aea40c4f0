// CF decoding's parameters from attributes, and its arithmetic. Expected decoded values are the
// ones xarray 2026.9 (open_zarr) printed for the same stored values and attributes; the Python
// tests (tests/test_cf_decoding.py) compare whole stores against xarray.
#include "dataset/cf_decoding.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "array/memory_dataset_test_util.h"
#include "util/status_test_util.h"

namespace zarrstream {
namespace {

using nlohmann::json;
using testing::MemoryDataset;

MemoryDataset& Dataset() {
  static MemoryDataset dataset("cf_decoding_test");
  return dataset;
}

template <typename T>
Array AddArray(const std::string& name, const json& attributes) {
  Dataset().AddArray<T>(name, {2}, {2}, {"x"}, std::vector<T>(2, T{}), attributes);
  auto group = Group::Open(Dataset().url());
  EXPECT_TRUE(group.ok()) << group.status().ToString();
  auto array = group->OpenArray(name);
  EXPECT_TRUE(array.ok()) << array.status().ToString();
  return *array;
}

TEST(CfDecodingTest, PackedIntegersDecodeInFloat64LikeXarray) {
  // netCDF's float32 scale_factor 0.01, as xarray writes it to Zarr attributes (a JSON number).
  const Array t = AddArray<int16_t>(
      "packed",
      {{"scale_factor", 0.009999999776482582}, {"add_offset", 3.0}, {"_FillValue", -32767}});
  auto cf = CfDecodingOf(t);
  ASSERT_TRUE(cf.ok()) << cf.status().ToString();
  EXPECT_TRUE(cf->decode);
  EXPECT_EQ(cf->source, DataType::kInt16);
  EXPECT_EQ(cf->decoded, DataType::kFloat64);
  ASSERT_EQ(cf->num_fill_values, 1u);
  EXPECT_TRUE(std::isnan(CfDecode<double>(int16_t{-32767}, *cf)));
  // xarray: [nan, 3.0, 3.999999977648258, 28.9499994199723, 330.6599926762283].
  EXPECT_EQ(CfDecode<double>(int16_t{0}, *cf), 3.0);
  EXPECT_EQ(CfDecode<double>(int16_t{100}, *cf), 3.999999977648258);
  EXPECT_EQ(CfDecode<double>(int16_t{2595}, *cf), 28.9499994199723);
  EXPECT_EQ(CfDecode<double>(int16_t{32766}, *cf), 330.6599926762283);
  EXPECT_NE(DescribeCfDecoding(*cf, DataType::kInt16).find("packed int16"), std::string::npos);
}

TEST(CfDecodingTest, FillValuesAloneDecodeToXarraysPromotedType) {
  auto narrow = CfDecodingOf(AddArray<int16_t>("fill16", {{"_FillValue", -32767}}));
  ASSERT_TRUE(narrow.ok());
  EXPECT_EQ(narrow->decoded, DataType::kFloat32);
  EXPECT_FALSE(narrow->wide());
  EXPECT_EQ(CfDecode<float>(int16_t{2595}, *narrow), 2595.0f);
  auto wide = CfDecodingOf(AddArray<int32_t>("fill32", {{"_FillValue", -1}}));
  ASSERT_TRUE(wide.ok());
  EXPECT_EQ(wide->decoded, DataType::kFloat64);
  // v3: xarray writes a float _FillValue as the base64 of its float64 bytes (-9999.0 here).
  auto floats = CfDecodingOf(AddArray<float>("fill_f32", {{"_FillValue", "AAAAAICHw8A="}}));
  ASSERT_TRUE(floats.ok()) << floats.status().ToString();
  EXPECT_EQ(floats->decoded, DataType::kFloat32);
  ASSERT_EQ(floats->num_fill_values, 1u);
  EXPECT_EQ(floats->fill_values[0], -9999.0);
  EXPECT_TRUE(std::isnan(CfDecode<float>(-9999.0f, *floats)));
  // Nothing is added where add_offset is absent: a stored -0.0 keeps its sign, as in xarray.
  EXPECT_TRUE(std::signbit(CfDecode<float>(-0.0f, *floats)));
  // NaN fill values mask nothing: nothing to decode.
  auto nan = CfDecodingOf(AddArray<float>("fill_nan", {{"_FillValue", "AAAAAAAA+H8="}}));
  ASSERT_TRUE(nan.ok());
  EXPECT_FALSE(nan->decode);
  auto none = CfDecodingOf(AddArray<float>("plain", {{"units", "K"}}));
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->decode);
  EXPECT_EQ(none->source, DataType::kFloat32);
}

TEST(CfDecodingTest, UnsignedAndMissingValueLists) {
  auto cf = CfDecodingOf(AddArray<int8_t>(
      "unsigned", {{"_Unsigned", "true"}, {"_FillValue", -1}, {"missing_value", {1, 2}}}));
  ASSERT_TRUE(cf.ok()) << cf.status().ToString();
  EXPECT_EQ(cf->source, DataType::kUInt8);
  EXPECT_EQ(cf->decoded, DataType::kFloat32);
  ASSERT_EQ(cf->num_fill_values, 3u);
  EXPECT_EQ(cf->fill_values[0], 255.0);  // -1 read as uint8
  EXPECT_TRUE(std::isnan(CfDecode<float>(uint8_t{255}, *cf)));
  EXPECT_TRUE(std::isnan(CfDecode<float>(uint8_t{2}, *cf)));
  EXPECT_EQ(CfDecode<float>(uint8_t{200}, *cf), 200.0f);
}

TEST(CfDecodingTest, CorruptAttributesNameTheArrayAndTheAttribute) {
  const json cases[] = {
      {{"scale_factor", "0.1"}},
      {{"add_offset", {{"value", 1}}}},
      {{"_FillValue", "-32767"}},
      {{"_FillValue", 1.5}},
      {{"_FillValue", 40000}},
      {{"missing_value", {"a"}}},
      {{"missing_value", {1, 2, 3, 4, 5, 6, 7, 8}}, {"_FillValue", 9}},
  };
  int i = 0;
  for (const json& attributes : cases) {
    const std::string name = "bad" + std::to_string(i++);
    auto cf = CfDecodingOf(AddArray<int16_t>(name, attributes));
    // Too many fill values are blamed on missing_value, which adds to _FillValue's.
    const std::string attribute =
        attributes.contains("missing_value") ? "missing_value" : attributes.begin().key();
    ExpectErrorContains(cf.status(), ErrorCode::kMetadata,
                        {"'" + name + "'", "cf_decoding_test", "attribute '" + attribute + "'"});
  }
}

}  // namespace
}  // namespace zarrstream

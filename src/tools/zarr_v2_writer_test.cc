// The v2 writer against zarrstream's own v2 reader, in memory stores. What zarr-python and xarray
// read of it is tested in tests/test_synth.py.
#include "tools/zarr_v2_writer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "store/store_registry.h"
#include "zarrstream/array.h"

namespace zarrstream::tools {
namespace {

using nlohmann::json;

std::shared_ptr<Store> FreshStore(const std::string& name) {
  auto store = OpenStore("memory://v2-writer-" + name);
  EXPECT_TRUE(store.ok());
  return *store;
}

json StoredJson(Store& store, const std::string& key) {
  auto bytes = store.ReadAll(key);
  EXPECT_TRUE(bytes.ok()) << key;
  return bytes.ok() ? json::parse(bytes->view()) : json();
}

V2ArraySpec BloscSpec() {
  V2ArraySpec spec;
  spec.shape = {4, 6, 5};
  spec.chunks = {1, 6, 5};
  spec.dtype = DataType::kFloat32;
  spec.compressor = {
      {"id", "blosc"}, {"cname", "lz4"}, {"clevel", 5}, {"shuffle", 1}, {"blocksize", 0}};
  spec.fill_value = "NaN";
  spec.dims = {"time", "latitude", "longitude"};
  spec.attributes = {{"units", "K"}};
  return spec;
}

TEST(ZarrV2WriterTest, ChunksReadBackThroughTheV2Reader) {
  std::shared_ptr<Store> store = FreshStore("roundtrip");
  ASSERT_TRUE(WriteV2Group(*store, "", {{"title", "t"}}).ok());
  auto writer = V2ArrayWriter::Create(store, "temperature", BloscSpec());
  ASSERT_TRUE(writer.ok()) << writer.status().ToString();
  std::vector<float> values(4 * 6 * 5);
  std::iota(values.begin(), values.end(), 250.5f);
  for (uint64_t t = 0; t < 4; ++t) {
    const uint64_t index[] = {t, 0, 0};
    std::span<const float> chunk(values.data() + t * 30, 30);
    ASSERT_TRUE(writer->WriteChunk(index, std::as_bytes(chunk)).ok());
  }
  EXPECT_TRUE(store->ReadAll("temperature/3.0.0").ok());

  const json zarray = StoredJson(*store, "temperature/.zarray");
  EXPECT_EQ(zarray["zarr_format"], 2);
  EXPECT_EQ(zarray["dtype"], "<f4");
  EXPECT_EQ(zarray["compressor"]["cname"], "lz4");
  EXPECT_EQ(zarray["fill_value"], "NaN");
  EXPECT_EQ(StoredJson(*store, "temperature/.zattrs")["_ARRAY_DIMENSIONS"],
            json({"time", "latitude", "longitude"}));

  auto group = Group::Open("memory://v2-writer-roundtrip");
  ASSERT_TRUE(group.ok()) << group.status().ToString();
  auto array = group->OpenArray("temperature");
  ASSERT_TRUE(array.ok()) << array.status().ToString();
  EXPECT_EQ(array->zarr_format(), 2);
  EXPECT_EQ(array->dims(), (std::vector<std::string>{"time", "latitude", "longitude"}));
  EXPECT_TRUE(std::isnan(*reinterpret_cast<const float*>(array->fill_value().data())));
  std::vector<float> read(values.size());
  ASSERT_TRUE(array->ReadAll(read.data()).ok());
  EXPECT_EQ(read, values);
}

TEST(ZarrV2WriterTest, ConsolidatesEveryNodeRelativeToTheGroup) {
  std::shared_ptr<Store> store = FreshStore("consolidate");
  ASSERT_TRUE(WriteV2Group(*store, "", {{"title", "root"}}).ok());
  ASSERT_TRUE(V2ArrayWriter::Create(store, "a", BloscSpec()).ok());
  V2ArraySpec plain = BloscSpec();
  plain.compressor = nullptr;
  plain.dtype = DataType::kInt64;
  plain.fill_value = nullptr;
  ASSERT_TRUE(V2ArrayWriter::Create(store, "b", plain).ok());
  ASSERT_TRUE(ConsolidateV2Metadata(*store, "").ok());

  const json zmetadata = StoredJson(*store, ".zmetadata");
  EXPECT_EQ(zmetadata["zarr_consolidated_format"], 1);
  const json& metadata = zmetadata["metadata"];
  for (const char* key :
       {".zgroup", ".zattrs", "a/.zarray", "a/.zattrs", "b/.zarray", "b/.zattrs"}) {
    EXPECT_TRUE(metadata.contains(key)) << key;
  }
  EXPECT_EQ(metadata.size(), 6u);
  EXPECT_EQ(metadata["b/.zarray"]["dtype"], "<i8");

  auto group = Group::Open("memory://v2-writer-consolidate");
  ASSERT_TRUE(group.ok()) << group.status().ToString();
  EXPECT_TRUE(group->consolidated());
  EXPECT_EQ(group->array_names(), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(json::parse(group->attributes_json())["title"], "root");
}

TEST(ZarrV2WriterTest, RejectsChunksOutsideTheGridOrOfTheWrongSize) {
  std::shared_ptr<Store> store = FreshStore("reject");
  auto writer = V2ArrayWriter::Create(store, "x", BloscSpec());
  ASSERT_TRUE(writer.ok());
  std::vector<float> chunk(30);
  const uint64_t outside[] = {4, 0, 0};
  Status s = writer->WriteChunk(outside, std::as_bytes(std::span<const float>(chunk)));
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(s.message().find("'x/4.0.0'"), std::string::npos) << s.message();
  const uint64_t first[] = {0, 0, 0};
  chunk.resize(29);
  s = writer->WriteChunk(first, std::as_bytes(std::span<const float>(chunk)));
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("array 'x'"), std::string::npos) << s.message();
  EXPECT_FALSE(store->ReadAll("x/0.0.0").ok());
}

TEST(ZarrV2WriterTest, UnsupportedCompressorIsAnErrorBeforeAnythingIsWritten) {
  std::shared_ptr<Store> store = FreshStore("unsupported");
  V2ArraySpec spec = BloscSpec();
  spec.compressor = {{"id", "no-such-codec"}};
  auto writer = V2ArrayWriter::Create(store, "y", spec);
  EXPECT_FALSE(writer.ok());
  EXPECT_FALSE(store->ReadAll("y/.zarray").ok());
}

}  // namespace
}  // namespace zarrstream::tools

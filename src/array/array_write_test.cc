// Creating arrays and groups and writing regions, in memory stores: spec validation, write → read
// round trips for every compressor with and without sharding, edge chunks, read-modify-write,
// fill-valued chunks left unstored, overwrite, consolidated metadata, concurrent writers.
// What peers (zarr-python, tensorstore, xarray) read of zarrstream's output is tested in
// tests/test_write_roundtrip.py.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <thread>

#include "array/array_state.h"
#include "codec/sharding_codec.h"
#include "metadata/v3_metadata.h"
#include "store/memory_store.h"
#include "store/store_registry.h"
#include "util/format.h"
#include "zarrstream/array.h"

namespace zarrstream {
namespace {

using nlohmann::json;

uint64_t Product(const std::vector<uint64_t>& v) {
  return std::accumulate(v.begin(), v.end(), uint64_t{1}, std::multiplies<>());
}

// A fresh memory store per test: memory:// names a process-wide store.
std::string FreshUrl() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name = std::string(info->test_suite_name()) + "-" + info->name();
  std::replace(name.begin(), name.end(), '/', '-');  // parameterised tests: "Suite/Name/Param"
  return "memory://write-" + name;
}

// The registry keeps memory stores alive for the process.
MemoryStore& StoreOf(const std::string& url) {
  auto store = OpenStore(url);
  EXPECT_TRUE(store.ok());
  return static_cast<MemoryStore&>(**store);
}

std::vector<std::string> StoredKeys(const std::string& url, const std::string& prefix = "") {
  auto keys = StoreOf(url).List(prefix);
  EXPECT_TRUE(keys.ok());
  std::vector<std::string> out;
  for (const KeyInfo& k : *keys) out.push_back(k.key);
  std::sort(out.begin(), out.end());
  return out;
}

json StoredJson(const std::string& url, const std::string& key) {
  auto bytes = StoreOf(url).ReadAll(key);
  EXPECT_TRUE(bytes.ok()) << key;
  return bytes.ok() ? json::parse(bytes->view()) : json();
}

ArraySpec Int32Spec(std::vector<uint64_t> shape, std::vector<uint64_t> chunks,
                    std::string compressor = "zstd:1") {
  ArraySpec spec;
  spec.shape = std::move(shape);
  spec.dtype = DataType::kInt32;
  spec.chunks = std::move(chunks);
  spec.compressor = std::move(compressor);
  spec.fill_value_json = "-1";
  return spec;
}

std::vector<int32_t> RandomValues(uint64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> v(n);
  for (auto& x : v) x = static_cast<int32_t>(rng() % 1000);
  return v;
}

std::vector<int32_t> ReadAll(const Array& a) {
  std::vector<int32_t> out(a.num_elements(), 12345);
  Status s = a.ReadAll(out.data());
  EXPECT_TRUE(s.ok()) << s.ToString();
  return out;
}

// Copies `region` (C order, `shape` at `start`) into `model` (C order, `array_shape`).
void Paste(std::vector<int32_t>* model, const std::vector<uint64_t>& array_shape,
           const std::vector<uint64_t>& start, const std::vector<uint64_t>& shape,
           const std::vector<int32_t>& region) {
  for (uint64_t i = 0; i < region.size(); ++i) {
    uint64_t rest = i, flat = 0;
    std::vector<uint64_t> at(shape.size());
    for (size_t d = shape.size(); d-- > 0;) {
      at[d] = start[d] + rest % shape[d];
      rest /= shape[d];
    }
    for (size_t d = 0; d < shape.size(); ++d) flat = flat * array_shape[d] + at[d];
    (*model)[flat] = region[i];
  }
}

// ---------------------------------------------------------------------------------------------
// Create.

TEST(ArrayCreateTest, WritesZarrJsonAndOpens) {
  const std::string url = FreshUrl();
  ArraySpec spec;
  spec.shape = {10, 20};
  spec.dtype = DataType::kFloat32;
  spec.chunks = {4, 5};
  spec.shard_shape = std::vector<uint64_t>{8, 10};
  spec.compressor = "zstd:5";
  spec.dims = {"time", ""};
  spec.fill_value_json = "\"NaN\"";
  spec.attributes_json = R"({"units": "K"})";
  auto a = Array::Create(url, spec);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->chunks(), (std::vector<uint64_t>{4, 5}));
  EXPECT_EQ(a->shard_shape(), (std::vector<uint64_t>{8, 10}));

  const json doc = StoredJson(url, "zarr.json");
  EXPECT_EQ(doc["zarr_format"], 3);
  EXPECT_EQ(doc["node_type"], "array");
  EXPECT_EQ(doc["shape"], json::parse("[10, 20]"));
  EXPECT_EQ(doc["data_type"], "float32");
  EXPECT_EQ(doc["chunk_grid"]["configuration"]["chunk_shape"], json::parse("[8, 10]"));
  EXPECT_EQ(doc["chunk_key_encoding"]["name"], "default");
  EXPECT_EQ(doc["fill_value"], "NaN");
  EXPECT_EQ(doc["dimension_names"], json::parse(R"(["time", null])"));
  EXPECT_EQ(doc["attributes"], json::parse(R"({"units": "K"})"));
  EXPECT_EQ(doc["codecs"][0]["name"], "sharding_indexed");
  EXPECT_EQ(doc["codecs"][0]["configuration"]["codecs"][1],
            json::parse(R"({"name": "zstd", "configuration": {"level": 5, "checksum": false}})"));

  auto reopened = Array::Open(url);
  ASSERT_TRUE(reopened.ok()) << reopened.status().ToString();
  EXPECT_EQ(reopened->dims(), (std::vector<std::string>{"time", ""}));
  EXPECT_EQ(reopened->metadata_json(), a->metadata_json());
  // Nothing written yet: everything reads as the fill value.
  std::vector<float> out(200, 0.0f);
  ASSERT_TRUE(reopened->ReadAll(out.data()).ok());
  EXPECT_TRUE(std::all_of(out.begin(), out.end(), [](float v) { return std::isnan(v); }));
}

TEST(ArrayCreateTest, AcceptsAFullCodecsList) {
  const std::string url = FreshUrl();
  ArraySpec spec = Int32Spec({6}, {3});
  spec.compressor = R"([{"name": "bytes", "configuration": {"endian": "big"}},
                        {"name": "crc32c"}])";
  auto a = Array::Create(url, spec);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  const std::vector<int32_t> values = {1, 2, 3, 4, 5, 6};
  const std::vector<uint64_t> start = {0}, shape = {6};
  ASSERT_TRUE(a->Write(start, shape, values.data()).ok());
  EXPECT_EQ(ReadAll(*a), values);
  // Big-endian bytes + 4 checksum bytes.
  auto chunk = StoreOf(url).ReadAll("c/0");
  ASSERT_TRUE(chunk.ok());
  ASSERT_EQ(chunk->size(), 16u);
  EXPECT_EQ(chunk->data()[3], std::byte{1});
}

TEST(ArrayCreateTest, BadSpecsAreErrorsNamingTheUrl) {
  const std::string url = FreshUrl();
  struct Case {
    std::string what;
    std::function<void(ArraySpec*)> change;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {"rank", [](ArraySpec* s) { s->chunks = {2}; }, "chunks (2) has 1 dimensions"},
      {"zero chunk",
       [](ArraySpec* s) {
         s->chunks = {2, 0};
       },
       "zero in dimension 1"},
      {"shard rank", [](ArraySpec* s) { s->shard_shape = std::vector<uint64_t>{4}; },
       "shard shape (4) has 1 dimensions"},
      {"shard multiple",
       [](ArraySpec* s) {
         s->shard_shape = std::vector<uint64_t>{4, 5};
       },
       "not a multiple of the chunks (2,2) in dimension 1"},
      {"dims", [](ArraySpec* s) { s->dims = {"x"}; }, "1 dimension names for an array of 2"},
      {"compressor", [](ArraySpec* s) { s->compressor = "snappy"; }, "unknown compressor 'snappy'"},
      {"level", [](ArraySpec* s) { s->compressor = "gzip:12"; }, "compressor 'gzip:12'"},
      {"fill json", [](ArraySpec* s) { s->fill_value_json = "{nope"; }, "fill_value"},
      {"fill range", [](ArraySpec* s) { s->fill_value_json = "3000000000"; }, "out of range"},
      {"attributes", [](ArraySpec* s) { s->attributes_json = "[1]"; }, "JSON object"},
      {"codecs + shards",
       [](ArraySpec* s) {
         s->shard_shape = std::vector<uint64_t>{4, 4};
         s->compressor = R"([{"name": "bytes"}])";
       },
       "replaces the whole chain"},
      {"bad codec", [](ArraySpec* s) { s->compressor = R"([{"name": "zstd"}])"; }, "array->bytes"},
  };
  for (const Case& c : cases) {
    ArraySpec spec = Int32Spec({5, 6}, {2, 2});
    c.change(&spec);
    auto a = Array::Create(url, spec);
    ASSERT_FALSE(a.ok()) << c.what;
    EXPECT_NE(a.status().message().find("creating array at " + url), std::string::npos)
        << c.what << ": " << a.status().message();
    EXPECT_NE(a.status().message().find(c.expected), std::string::npos)
        << c.what << ": " << a.status().message();
  }
  // Nothing was written by the failed attempts.
  EXPECT_TRUE(StoredKeys(url).empty());
}

TEST(ArrayCreateTest, ExistingNodeNeedsOverwriteWhichRemovesStaleChunks) {
  const std::string url = FreshUrl();
  auto a = Array::Create(url, Int32Spec({8}, {2}));
  ASSERT_TRUE(a.ok());
  const std::vector<int32_t> values = RandomValues(8, 1);
  const std::vector<uint64_t> start = {0}, shape = {8};
  ASSERT_TRUE(a->Write(start, shape, values.data()).ok());
  EXPECT_EQ(StoredKeys(url).size(), 5u);

  auto again = Array::Create(url, Int32Spec({4}, {4}));
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(again.status().message().find("already exists"), std::string::npos);
  EXPECT_EQ(Group::Create(url).status().code(), ErrorCode::kInvalidArgument);

  CreateOptions overwrite;
  overwrite.overwrite = true;
  auto replaced = Array::Create(url, Int32Spec({4}, {4}), overwrite);
  ASSERT_TRUE(replaced.ok()) << replaced.status().ToString();
  EXPECT_EQ(StoredKeys(url), (std::vector<std::string>{"zarr.json"}));
  EXPECT_EQ(ReadAll(*replaced), (std::vector<int32_t>{-1, -1, -1, -1}));
}

TEST(ArrayCreateTest, NoNodeInsideAnArrayAtAnyDepthAndItsChunksSurvive) {
  const std::string url = FreshUrl();
  auto root = Group::Create(url);
  ASSERT_TRUE(root.ok());
  auto t = root->CreateArray("t", Int32Spec({8}, {2}));
  ASSERT_TRUE(t.ok());
  const std::vector<int32_t> values = RandomValues(8, 2);
  const std::vector<uint64_t> start = {0}, shape = {8};
  ASSERT_TRUE(t->Write(start, shape, values.data()).ok());
  // A v2 array beside it, written as zarr-python does (chunk keys "0", "1").
  const std::string zarray =
      R"({"zarr_format": 2, "shape": [4], "chunks": [2], "dtype": "<i4", "compressor": null,
          "fill_value": 0, "order": "C", "filters": null})";
  ASSERT_TRUE(StoreOf(url).Put("v2/.zarray", std::as_bytes(std::span(zarray))).ok());
  const std::vector<std::string> t_keys = StoredKeys(url, "t");
  const std::vector<std::string> v2_keys = StoredKeys(url, "v2");

  CreateOptions overwrite;
  overwrite.overwrite = true;
  for (const std::string path : {"t/c", "t/c/0", "t/x/y/z", "v2/0", "v2/a/b"}) {
    for (const CreateOptions& options : {CreateOptions{}, overwrite}) {
      auto array = root->CreateArray(path, Int32Spec({2}, {1}), options);
      ASSERT_FALSE(array.ok()) << path;
      EXPECT_EQ(array.status().code(), ErrorCode::kInvalidArgument);
      EXPECT_NE(array.status().message().find("is an array: no node can be made inside it"),
                std::string::npos)
          << array.status().ToString();
      auto group = root->CreateGroup(path, "{}", options);
      ASSERT_FALSE(group.ok()) << path;
      EXPECT_EQ(group.status().code(), ErrorCode::kInvalidArgument);
    }
  }
  EXPECT_EQ(StoredKeys(url, "t"), t_keys);
  EXPECT_EQ(StoredKeys(url, "v2"), v2_keys);
  EXPECT_EQ(ReadAll(*t), values);
  // Groups (explicit or implicit) on the way are no obstacle.
  auto sub = root->CreateGroup("g");
  ASSERT_TRUE(sub.ok());
  EXPECT_TRUE(sub->CreateArray("inner/leaf", Int32Spec({2}, {1})).ok());
}

TEST(ArrayCreateTest, AnArrayOverKeysNeedsOverwriteWhichRemovesOnlyThatNode) {
  const std::string url = FreshUrl();
  auto root = Group::Create(url);
  ASSERT_TRUE(root.ok());
  // "m" is an implicit group (no zarr.json of its own) with a member array.
  auto member = root->CreateArray("m/x", Int32Spec({2}, {1}));
  ASSERT_TRUE(member.ok());
  auto sibling = root->CreateArray("m2", Int32Spec({2}, {1}));
  ASSERT_TRUE(sibling.ok());
  const std::vector<int32_t> values = {5, 6};
  const std::vector<uint64_t> start = {0}, shape = {2};
  ASSERT_TRUE(sibling->Write(start, shape, values.data()).ok());

  auto over = root->CreateArray("m", Int32Spec({2}, {1}));
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(over.status().message().find("keys below it"), std::string::npos)
      << over.status().ToString();
  EXPECT_TRUE(root->CreateGroup("m").ok()) << "a group over its members makes them its own";
  // Names starting with '.' are never chunk keys: a tool's state there is no obstacle.
  const std::string state = "{}";
  ASSERT_TRUE(StoreOf(url).Put("h/.tool-state", std::as_bytes(std::span(state))).ok());
  EXPECT_TRUE(root->CreateArray("h", Int32Spec({2}, {1})).ok());

  CreateOptions overwrite;
  overwrite.overwrite = true;
  ASSERT_TRUE(root->CreateArray("m", Int32Spec({2}, {1}), overwrite).ok());
  EXPECT_EQ(StoredKeys(url, "m"), (std::vector<std::string>{"m/zarr.json"}));
  EXPECT_EQ(ReadAll(*sibling), values) << "overwriting 'm' touched 'm2'";
}

// ---------------------------------------------------------------------------------------------
// Write → read round trips.

struct RoundTripCase {
  std::string compressor;
  bool sharded;
};

class WriteRoundTripTest : public ::testing::TestWithParam<RoundTripCase> {};

TEST_P(WriteRoundTripTest, WholeArrayThenRegionsReadBack) {
  const std::string url = FreshUrl();
  const std::vector<uint64_t> shape = {11, 7, 9};  // edge chunks in every dimension
  ArraySpec spec = Int32Spec(shape, {3, 2, 4}, GetParam().compressor);
  if (GetParam().sharded) spec.shard_shape = std::vector<uint64_t>{6, 4, 8};
  auto a = Array::Create(url, spec);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  std::vector<int32_t> model = RandomValues(Product(shape), 7);
  const std::vector<uint64_t> origin = {0, 0, 0};
  Status s = a->Write(origin, shape, model.data());
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(ReadAll(*a), model);
  EXPECT_EQ(StoredKeys(url).size(), 1 + Product(a->grid_shape()));

  // Partial writes across chunk (and shard) boundaries: read-modify-write.
  for (auto [start, extent] : std::vector<std::pair<std::vector<uint64_t>, std::vector<uint64_t>>>{
           {{1, 1, 1}, {5, 3, 6}},
           {{10, 6, 8}, {1, 1, 1}},
           {{0, 0, 0}, {6, 4, 8}},
           {{4, 0, 3}, {7, 7, 2}}}) {
    std::vector<int32_t> region = RandomValues(Product(extent), static_cast<uint32_t>(start[0]));
    s = a->Write(start, extent, region.data());
    ASSERT_TRUE(s.ok()) << s.ToString();
    Paste(&model, shape, start, extent, region);
    ASSERT_EQ(ReadAll(*a), model) << FormatIndex(start);
  }
  auto reopened = Array::Open(url);
  ASSERT_TRUE(reopened.ok());
  EXPECT_EQ(ReadAll(*reopened), model);
}

INSTANTIATE_TEST_SUITE_P(
    Compressors, WriteRoundTripTest,
    ::testing::Values(RoundTripCase{"none", false}, RoundTripCase{"zstd:3", false},
                      RoundTripCase{"gzip:1", false}, RoundTripCase{"lz4", false},
                      RoundTripCase{"blosc:lz4:5:shuffle", false}, RoundTripCase{"none", true},
                      RoundTripCase{"zstd", true}, RoundTripCase{"gzip", true},
                      RoundTripCase{"lz4", true}, RoundTripCase{"blosc:zstd:3:bitshuffle", true}),
    [](const ::testing::TestParamInfo<RoundTripCase>& param_info) {
      std::string name = param_info.param.compressor + (param_info.param.sharded ? "_sharded" : "");
      for (char& c : name) {
        if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
      }
      return name;
    });

TEST(ArrayWriteTest, EdgeChunksAreStoredFullShapeWithFillPastTheEdge) {
  const std::string url = FreshUrl();
  auto a = Array::Create(url, Int32Spec({5, 3}, {4, 2}, "none"));
  ASSERT_TRUE(a.ok());
  std::vector<int32_t> values(15);
  std::iota(values.begin(), values.end(), 100);
  const std::vector<uint64_t> start = {0, 0}, shape = {5, 3};
  ASSERT_TRUE(a->Write(start, shape, values.data()).ok());
  // Chunk (1, 1) holds array element (4, 2) only; the rest of its 4x2 is the fill value.
  auto chunk = StoreOf(url).ReadAll("c/1/1");
  ASSERT_TRUE(chunk.ok());
  ASSERT_EQ(chunk->size(), 8 * sizeof(int32_t));
  std::vector<int32_t> stored(8);
  std::memcpy(stored.data(), chunk->data(), chunk->size());
  EXPECT_EQ(stored, (std::vector<int32_t>{114, -1, -1, -1, -1, -1, -1, -1}));
}

TEST(ArrayWriteTest, FillValuedChunksAreNotStoredAndStoredOnesAreDeleted) {
  const std::string url = FreshUrl();
  auto a = Array::Create(url, Int32Spec({4, 4}, {2, 2}));
  ASSERT_TRUE(a.ok());
  std::vector<int32_t> values(16, -1);
  values[0] = 5;
  const std::vector<uint64_t> start = {0, 0}, shape = {4, 4};
  ASSERT_TRUE(a->Write(start, shape, values.data()).ok());
  EXPECT_EQ(StoredKeys(url), (std::vector<std::string>{"c/0/0", "zarr.json"}));

  // Writing the fill value over the only non-fill element deletes the chunk.
  const int32_t fill = -1;
  const std::vector<uint64_t> one = {1, 1};
  ASSERT_TRUE(a->Write(start, one, &fill).ok());
  EXPECT_EQ(StoredKeys(url), (std::vector<std::string>{"zarr.json"}));
}

TEST(ArrayWriteTest, FillComparisonIsBitwise) {
  const std::string url = FreshUrl();
  ArraySpec spec;
  spec.shape = {4};
  spec.chunks = {2};
  spec.dtype = DataType::kFloat32;
  spec.fill_value_json = "0.0";
  auto a = Array::Create(url, spec);
  ASSERT_TRUE(a.ok());
  // -0.0 equals 0.0 as a value but not in bits: it must be stored to read back exactly.
  const std::vector<float> values = {-0.0f, 0.0f, 0.0f, 0.0f};
  const std::vector<uint64_t> start = {0}, shape = {4};
  ASSERT_TRUE(a->Write(start, shape, values.data()).ok());
  EXPECT_EQ(StoredKeys(url), (std::vector<std::string>{"c/0", "zarr.json"}));
  std::vector<float> out(4);
  ASSERT_TRUE(a->ReadAll(out.data()).ok());
  EXPECT_TRUE(std::signbit(out[0]));
}

TEST(ArrayWriteTest, ShardsIndexEmptyInnerChunksAndEmptyShardsAreDeleted) {
  const std::string url = FreshUrl();
  ArraySpec spec = Int32Spec({8}, {2}, "none");
  spec.shard_shape = std::vector<uint64_t>{4};
  auto a = Array::Create(url, spec);
  ASSERT_TRUE(a.ok());
  // Inner chunk 1 of shard 0 is all fill; shard 1 is all fill.
  const std::vector<int32_t> values = {7, 8, -1, -1, -1, -1, -1, -1};
  const std::vector<uint64_t> start = {0}, shape = {8};
  ASSERT_TRUE(a->Write(start, shape, values.data()).ok());
  EXPECT_EQ(StoredKeys(url), (std::vector<std::string>{"c/0", "zarr.json"}));

  const ShardingCodec& sharding = *a->state().chain->sharding();
  auto shard = StoreOf(url).ReadAll("c/0");
  ASSERT_TRUE(shard.ok());
  // One stored inner chunk of 8 bytes, then the index (2 entries x 16 bytes + crc32c).
  ASSERT_EQ(shard->size(), 8 + sharding.index_size());
  CodecScratch scratch;
  auto index = sharding.DecodeIndex(shard->span().subspan(8), shard->size(), &scratch);
  ASSERT_TRUE(index.ok()) << index.status().ToString();
  EXPECT_EQ(index->offset(0), 0u);
  EXPECT_EQ(index->nbytes(0), 8u);
  EXPECT_TRUE(index->is_empty(1));
  EXPECT_EQ(ReadAll(*a), values);

  // Filling the remaining inner chunk empties the shard: it is deleted.
  const std::vector<int32_t> fill = {-1, -1};
  const std::vector<uint64_t> two = {2};
  ASSERT_TRUE(a->Write(start, two, fill.data()).ok());
  EXPECT_EQ(StoredKeys(url), (std::vector<std::string>{"zarr.json"}));
}

TEST(ArrayWriteTest, PartialShardWriteKeepsUntouchedInnerChunksVerbatim) {
  const std::string url = FreshUrl();
  ArraySpec spec = Int32Spec({8}, {2}, "zstd:1");
  spec.shard_shape = std::vector<uint64_t>{8};
  auto a = Array::Create(url, spec);
  ASSERT_TRUE(a.ok());
  std::vector<int32_t> values = RandomValues(8, 3);
  const std::vector<uint64_t> start = {0}, shape = {8};
  ASSERT_TRUE(a->Write(start, shape, values.data()).ok());
  auto before = StoreOf(url).ReadAll("c/0");
  ASSERT_TRUE(before.ok());

  // Rewrite inner chunk 3 only (elements 6, 7): chunks 0..2 keep their bytes at their offsets.
  const std::vector<int32_t> tail = {41, 42};
  const std::vector<uint64_t> at = {6}, two = {2};
  ASSERT_TRUE(a->Write(at, two, tail.data()).ok());
  auto after = StoreOf(url).ReadAll("c/0");
  ASSERT_TRUE(after.ok());
  const ShardingCodec& sharding = *a->state().chain->sharding();
  CodecScratch scratch;
  auto index_before = sharding.DecodeIndex(
      before->span().subspan(before->size() - sharding.index_size()), before->size(), &scratch);
  auto index_after = sharding.DecodeIndex(
      after->span().subspan(after->size() - sharding.index_size()), after->size(), &scratch);
  ASSERT_TRUE(index_before.ok() && index_after.ok());
  const uint64_t prefix = index_before->offset(3);
  ASSERT_GE(after->size(), prefix);
  EXPECT_EQ(std::memcmp(before->data(), after->data(), prefix), 0);
  values[6] = 41;
  values[7] = 42;
  EXPECT_EQ(ReadAll(*a), values);
}

TEST(ArrayWriteTest, StridedAndBroadcastInput) {
  const std::string url = FreshUrl();
  auto a = Array::Create(url, Int32Spec({4, 6}, {3, 4}));
  ASSERT_TRUE(a.ok());
  // Fortran-ordered input: element (i, j) at i + 4 * j.
  std::vector<int32_t> fortran(24), model(24);
  for (int i = 0; i < 4; ++i) {
    for (int j = 0; j < 6; ++j) {
      fortran[i + 4 * j] = 10 * i + j;
      model[6 * i + j] = 10 * i + j;
    }
  }
  const std::vector<uint64_t> start = {0, 0}, shape = {4, 6};
  const std::vector<int64_t> fortran_strides = {4, 16};
  ASSERT_TRUE(a->Write(start, shape, fortran.data(), fortran_strides).ok());
  EXPECT_EQ(ReadAll(*a), model);

  // A scalar broadcast over a region: zero strides.
  const int32_t seven = 7;
  const std::vector<uint64_t> at = {1, 2}, extent = {3, 3};
  const std::vector<int64_t> zero = {0, 0};
  ASSERT_TRUE(a->Write(at, extent, &seven, zero).ok());
  for (uint64_t i = 1; i < 4; ++i) {
    for (uint64_t j = 2; j < 5; ++j) model[6 * i + j] = 7;
  }
  EXPECT_EQ(ReadAll(*a), model);
}

TEST(ArrayWriteTest, BadRegionsAndCorruptStoredChunksAreErrors) {
  const std::string url = FreshUrl();
  auto a = Array::Create(url, Int32Spec({4, 4}, {2, 2}));
  ASSERT_TRUE(a.ok());
  const std::vector<int32_t> values(16, 1);
  const std::vector<uint64_t> origin = {0, 0}, too_big = {5, 1}, rank1 = {4};
  Status s = a->Write(origin, too_big, values.data());
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(s.message().find("exceeds the array shape"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find(url), std::string::npos) << s.message();
  EXPECT_EQ(a->Write(rank1, rank1, values.data()).code(), ErrorCode::kInvalidArgument);

  // A partial write must read the stored chunk; a corrupt one is an error naming its key.
  ASSERT_TRUE(StoreOf(url).Put("c/1/0", std::string_view("not zstd")).ok());
  const std::vector<uint64_t> at = {2, 0}, one = {1, 1};
  s = a->Write(at, one, values.data());
  EXPECT_EQ(s.code(), ErrorCode::kCorruptChunk);
  EXPECT_NE(s.message().find("writing chunk 'c/1/0'"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find(url), std::string::npos) << s.message();
  // A whole-chunk write does not read: it replaces the corrupt chunk.
  const std::vector<uint64_t> chunk = {2, 2};
  ASSERT_TRUE(a->Write(at, chunk, values.data()).ok());
}

TEST(ArrayWriteTest, ThreadsWritingDisjointShardsConcurrently) {
  const std::string url = FreshUrl();
  ArraySpec spec = Int32Spec({16, 12}, {2, 3}, "zstd:1");
  spec.shard_shape = std::vector<uint64_t>{4, 6};
  auto a = Array::Create(url, spec);
  ASSERT_TRUE(a.ok());
  const std::vector<uint64_t> shape = {16, 12};
  const std::vector<int32_t> model = RandomValues(Product(shape), 11);
  // Thread t writes shard rows t, t + 2 (each 4 array rows), one shard at a time, several passes,
  // so the writers' shard tasks interleave on the shared pool.
  auto writer = [&](uint64_t parity) {
    for (int pass = 0; pass < 5; ++pass) {
      for (uint64_t shard_row = parity; shard_row < 4; shard_row += 2) {
        for (uint64_t shard_col = 0; shard_col < 2; ++shard_col) {
          const std::vector<uint64_t> start = {4 * shard_row, 6 * shard_col}, extent = {4, 6};
          const std::vector<int64_t> strides = {12 * 4, 4};
          const int32_t* data = model.data() + 12 * start[0] + start[1];
          Status s = a->Write(start, extent, data, strides);
          ASSERT_TRUE(s.ok()) << s.ToString();
        }
      }
    }
  };
  std::thread t0(writer, 0), t1(writer, 1);
  t0.join();
  t1.join();
  EXPECT_EQ(ReadAll(*a), model);
}

// ---------------------------------------------------------------------------------------------
// Groups.

TEST(GroupCreateTest, MembersAndInlineConsolidatedMetadata) {
  const std::string url = FreshUrl();
  auto root = Group::Create(url, R"({"title": "test"})");
  ASSERT_TRUE(root.ok()) << root.status().ToString();
  EXPECT_TRUE(root->array_names().empty());
  ArraySpec time = Int32Spec({4}, {4});
  time.dims = {"time"};
  ArraySpec field = Int32Spec({4, 3}, {2, 3});
  field.dims = {"time", "x"};
  ASSERT_TRUE(root->CreateArray("time", time).ok());
  ASSERT_TRUE(root->CreateArray("field", field).ok());
  auto sub = root->CreateGroup("sub", R"({"level": 1})");
  ASSERT_TRUE(sub.ok()) << sub.status().ToString();
  ASSERT_TRUE(sub->CreateArray("deep", Int32Spec({2}, {1})).ok());
  EXPECT_EQ(root->CreateArray("time", time).status().code(), ErrorCode::kInvalidArgument);
  EXPECT_FALSE(root->CreateArray("../escape", time).ok());

  ASSERT_TRUE(root->ConsolidateMetadata().ok());
  const json doc = StoredJson(url, "zarr.json");
  EXPECT_EQ(doc["node_type"], "group");
  EXPECT_EQ(doc["attributes"], json::parse(R"({"title": "test"})"));
  const json& consolidated = doc["consolidated_metadata"];
  EXPECT_EQ(consolidated["kind"], "inline");
  EXPECT_EQ(consolidated["must_understand"], false);
  std::vector<std::string> keys;
  for (const auto& [key, value] : consolidated["metadata"].items()) keys.push_back(key);
  EXPECT_EQ(keys, (std::vector<std::string>{"field", "sub", "sub/deep", "time"}));
  EXPECT_EQ(consolidated["metadata"]["field"], StoredJson(url, "field/zarr.json"));
  EXPECT_EQ(consolidated["metadata"]["sub"]["consolidated_metadata"]["metadata"], json::object());
  EXPECT_EQ(consolidated["metadata"]["sub"]["attributes"], json::parse(R"({"level": 1})"));

  // A handle is a snapshot; the reopened group sees members and consolidated metadata.
  EXPECT_FALSE(root->consolidated());
  auto reopened = root->Reopen();
  ASSERT_TRUE(reopened.ok());
  EXPECT_TRUE(reopened->consolidated());
  EXPECT_EQ(reopened->array_names(), (std::vector<std::string>{"field", "time"}));
  EXPECT_EQ(reopened->group_names(), (std::vector<std::string>{"sub"}));
  auto opened = Group::Open(url);
  ASSERT_TRUE(opened.ok());
  auto deep = opened->OpenGroup("sub");
  ASSERT_TRUE(deep.ok());
  EXPECT_TRUE(deep->consolidated());
  EXPECT_EQ(deep->array_names(), (std::vector<std::string>{"deep"}));
  auto field_array = opened->OpenArray("field");
  ASSERT_TRUE(field_array.ok());
  EXPECT_EQ(field_array->dims(), (std::vector<std::string>{"time", "x"}));
}

TEST(GroupCreateTest, OverwriteReplacesTheWholeHierarchy) {
  const std::string url = FreshUrl();
  auto root = Group::Create(url);
  ASSERT_TRUE(root.ok());
  auto a = root->CreateArray("a", Int32Spec({2}, {1}));
  ASSERT_TRUE(a.ok());
  const std::vector<int32_t> values = {3, 4};
  const std::vector<uint64_t> start = {0}, shape = {2};
  ASSERT_TRUE(a->Write(start, shape, values.data()).ok());
  CreateOptions overwrite;
  overwrite.overwrite = true;
  ASSERT_TRUE(Group::Create(url, "{}", overwrite).ok());
  EXPECT_EQ(StoredKeys(url), (std::vector<std::string>{"zarr.json"}));
}

TEST(ArraySetAttributesTest, ReplacesOnlyTheAttributes) {
  const std::string url = FreshUrl();
  ArraySpec spec = Int32Spec({3}, {3});
  spec.attributes_json = R"({"a": 1})";
  spec.dims = {"x"};
  auto a = Array::Create(url, spec);
  ASSERT_TRUE(a.ok());
  json before = StoredJson(url, "zarr.json");
  ASSERT_TRUE(a->SetAttributes(R"({"b": [1, 2], "units": "m"})").ok());
  json after = StoredJson(url, "zarr.json");
  EXPECT_EQ(after["attributes"], json::parse(R"({"b": [1, 2], "units": "m"})"));
  after.erase("attributes");
  before.erase("attributes");
  EXPECT_EQ(after, before);
  EXPECT_EQ(a->SetAttributes("[]").code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(a->SetAttributes("{oops").code(), ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace zarrstream

// ReferenceStore over reference sets written by hand (tests/test_kerchunk.py reads the ones
// kerchunk writes for netCDF4 files).
#include "store/reference_store.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "store/http_store.h"
#include "store/memory_store.h"
#include "store/store_registry.h"
#include "util/status_test_util.h"

namespace zarrstream {
namespace {

using nlohmann::json;

std::string Text(const ByteBuffer& b) {
  return std::string(reinterpret_cast<const char*>(b.data()), b.size());
}

// A process-wide memory store `name` holding "data.bin" = "0123456789abcdefghij".
std::shared_ptr<MemoryStore> TargetStore(const std::string& name) {
  std::shared_ptr<Store> store = OpenStore("memory://" + name).value();
  auto memory = std::dynamic_pointer_cast<MemoryStore>(store);
  EXPECT_TRUE(memory->Put("data.bin", "0123456789abcdefghij").ok());
  return memory;
}

std::shared_ptr<ReferenceStore> FromJson(const json& set) {
  Result<std::shared_ptr<ReferenceStore>> store =
      ReferenceStore::FromJson("memory://refs/refs.json", set.dump());
  EXPECT_TRUE(store.ok()) << store.status().ToString();
  return store.ok() ? *store : nullptr;
}

Status FromJsonError(const json& set) {
  return ReferenceStore::FromJson("memory://refs/refs.json", set.dump()).status();
}

std::string ReadRange(Store& store, std::string_view key, ByteRange range) {
  ByteBuffer out;
  Status s = store.ReadInto(key, range, &out);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return Text(out);
}

TEST(ReferenceStoreTest, VersionZeroInlineAndRangeReferences) {
  TargetStore("refs-v0");
  auto store = FromJson({
      {".zgroup", "{\"zarr_format\":2}"},
      {"a/.zattrs", {{"units", "K"}}},
      {"a/0", "base64:AAEC/w=="},
      {"a/1", json::array({"memory://refs-v0/data.bin", 3, 5})},
      {"whole", json::array({"memory://refs-v0/data.bin"})},
  });
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->url(), "reference://memory://refs/refs.json");
  EXPECT_EQ(store->num_keys(), 5u);
  EXPECT_EQ(Text(store->ReadAll(".zgroup").value()), "{\"zarr_format\":2}");
  EXPECT_EQ(json::parse(Text(store->ReadAll("a/.zattrs").value())), json({{"units", "K"}}));
  EXPECT_EQ(Text(store->ReadAll("a/0").value()), std::string("\x00\x01\x02\xff", 4));
  EXPECT_EQ(Text(store->ReadAll("a/1").value()), "34567");
  EXPECT_EQ(Text(store->ReadAll("whole").value()), "0123456789abcdefghij");
  // A key's ranges are ranges inside the referenced bytes.
  EXPECT_EQ(ReadRange(*store, "a/1", ByteRange::Bounded(1, 2)), "45");
  EXPECT_EQ(ReadRange(*store, "a/1", ByteRange::FromOffset(3)), "67");
  EXPECT_EQ(ReadRange(*store, "a/1", ByteRange::Suffix(2)), "67");
  EXPECT_EQ(ReadRange(*store, "a/0", ByteRange::Suffix(1)), "\xff");
  EXPECT_EQ(ReadRange(*store, "whole", ByteRange::Bounded(18, 2)), "ij");
  // Several ranges of one key in one read.
  std::vector<ByteRange> ranges = {ByteRange::Bounded(0, 1), ByteRange::Bounded(4, 1)};
  std::vector<ByteBuffer> outs(2);
  Result<uint64_t> n = store->Read("a/1", ranges, outs).Wait();
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(*n, 2u);
  EXPECT_EQ(Text(outs[0]) + Text(outs[1]), "37");
  // Not past the referenced bytes, though the target has more.
  ByteBuffer out;
  ExpectErrorContains(store->ReadInto("a/1", ByteRange::Bounded(4, 2), &out),
                      ErrorCode::kCorruptChunk, {"a/1", "refs.json"});
}

TEST(ReferenceStoreTest, MissingKeysAreNotFoundAndBadTargetsAreStorageErrors) {
  TargetStore("refs-bad");
  auto store = FromJson({
      {"dangling", json::array({"memory://refs-bad/gone.bin", 0, 4})},
      {"past_end", json::array({"memory://refs-bad/data.bin", 18, 4})},
  });
  ASSERT_NE(store, nullptr);
  ExpectErrorContains(store->ReadAll("a/0").status(), ErrorCode::kNotFound,
                      {"'a/0'", "memory://refs/refs.json"});
  ExpectErrorContains(store->ReadAll("../x").status(), ErrorCode::kInvalidArgument, {"../x"});
  ExpectErrorContains(store->ReadAll("dangling").status(), ErrorCode::kStorage,
                      {"key 'dangling'", "memory://refs/refs.json", "memory://refs-bad/gone.bin",
                       "does not exist"});
  ExpectErrorContains(
      store->ReadAll("past_end").status(), ErrorCode::kStorage,
      {"key 'past_end'", "bytes 18..22 of memory://refs-bad/data.bin", "past the end"});
}

TEST(ReferenceStoreTest, ListsTheKeysOfTheSet) {
  TargetStore("refs-list");
  auto store = FromJson({
      {".zgroup", "{}"},
      {"t/.zarray", "{}"},
      {"t/0.0", json::array({"memory://refs-list/data.bin", 0, 7})},
      {"t/0.1", "abc"},
      {"g/u/.zarray", "{}"},
  });
  ASSERT_NE(store, nullptr);
  Result<DirectoryListing> root = store->ListDirectory("");
  ASSERT_TRUE(root.ok());
  ASSERT_EQ(root->keys.size(), 1u);
  EXPECT_EQ(root->keys[0].key, ".zgroup");
  EXPECT_EQ(root->prefixes, (std::vector<std::string>{"g", "t"}));
  Result<std::vector<KeyInfo>> t = store->List("t");
  ASSERT_TRUE(t.ok());
  ASSERT_EQ(t->size(), 3u);
  EXPECT_EQ((*t)[1].key, "t/0.0");
  EXPECT_EQ((*t)[1].size, 7u);
  EXPECT_EQ((*t)[2].size, 3u);
  EXPECT_EQ(store->List("").value().size(), 5u);
  EXPECT_EQ(store->ListDirectory("g").value().prefixes, (std::vector<std::string>{"g/u"}));
  ExpectErrorContains(store->Put("t/0.0", {}), ErrorCode::kUnsupported, {"read-only"});
  ExpectErrorContains(store->Delete("t/0.0"), ErrorCode::kUnsupported, {"read-only"});
}

// The example of the Kerchunk reference specification, version 1, with its targets in memory.
TEST(ReferenceStoreTest, VersionOneTemplatesAndGeneratedKeys) {
  std::shared_ptr<MemoryStore> target = TargetStore("refs-v1");
  std::string big(6000, 'x');
  for (int i = 0; i < 5; ++i) {
    std::string file = big;
    file.replace(static_cast<size_t>(i + 1) * 1000, 4, "key" + std::to_string(i));
    ASSERT_TRUE(target->Put("path_" + std::to_string(i), file).ok());
  }
  ASSERT_TRUE(target->Put("text", "0123456789").ok());
  auto store = FromJson({
      {"version", 1},
      {"templates", {{"u", "memory://refs-v1/path"}, {"f", "{{c}}"}}},
      {"gen", json::array({{{"key", "gen_key{{i}}"},
                            {"url", "{{u}}_{{i}}"},
                            {"offset", "{{(i + 1) * 1000}}"},
                            {"length", "1000"},
                            {"dimensions", {{"i", {{"stop", 5}}}}}}})},
      {"refs",
       {{"key0", "data"},
        {"key1", json::array({"memory://refs-v1/data.bin", 10, 3})},
        {"key2", json::array({"{{u}}_4", 5000, 4})},
        {"key3", json::array({"memory://refs-v1/{{f(c='text')}}", 2, 2})}}},
  });
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->num_keys(), 9u);
  EXPECT_EQ(Text(store->ReadAll("key0").value()), "data");
  EXPECT_EQ(Text(store->ReadAll("key1").value()), "abc");
  EXPECT_EQ(Text(store->ReadAll("key2").value()), "key4");
  EXPECT_EQ(Text(store->ReadAll("key3").value()), "23");
  for (int i = 0; i < 5; ++i) {
    const std::string key = "gen_key" + std::to_string(i);
    Result<ByteBuffer> value = store->ReadAll(key);
    ASSERT_TRUE(value.ok()) << value.status().ToString();
    EXPECT_EQ(value->size(), 1000u);
    EXPECT_EQ(Text(*value).substr(0, 4), "key" + std::to_string(i)) << key;
  }
}

TEST(ReferenceStoreTest, GeneratedKeysFromListsRangesAndSeveralDimensions) {
  TargetStore("refs-gen");
  auto store = FromJson({
      {"version", 1},
      {"gen",
       json::array({
           // Whole-file references; a list and a range with a negative step, the last
           // dimension varying fastest.
           {{"key", "v/{{t}}.{{y}}"},
            {"url", "memory://refs-gen/data.bin"},
            {"dimensions",
             {{"t", json::array({4, 7})}, {"y", {{"start", 2}, {"stop", 0}, {"step", -1}}}}}},
           {{"key", "w/{{ '%02d' % j }}"},
            {"url", "memory://refs-gen/data.bin"},
            {"offset", "{{ j * 2 }}"},
            {"length", 2},
            {"dimensions", {{"j", {{"start", 1}, {"stop", 10}, {"step", 4}}}}}},
       })},
  });
  ASSERT_NE(store, nullptr);
  Result<std::vector<KeyInfo>> listed = store->List("");
  ASSERT_TRUE(listed.ok());
  std::vector<std::string> keys;
  for (const KeyInfo& k : *listed) keys.push_back(k.key);
  EXPECT_EQ(keys,
            (std::vector<std::string>{"v/4.1", "v/4.2", "v/7.1", "v/7.2", "w/01", "w/05", "w/09"}));
  EXPECT_EQ(Text(store->ReadAll("v/7.1").value()), "0123456789abcdefghij");
  EXPECT_EQ(Text(store->ReadAll("w/05").value()), "ab");
  EXPECT_EQ(Text(store->ReadAll("w/09").value()), "ij");
}

TEST(ReferenceStoreTest, MalformedSetsNameTheFileAndTheKey) {
  const char* file = "reference file memory://refs/refs.json";
  ExpectErrorContains(ReferenceStore::FromJson("memory://refs/refs.json", "{not json").status(),
                      ErrorCode::kMetadata, {file, "invalid JSON"});
  ExpectErrorContains(FromJsonError(json::array()), ErrorCode::kMetadata, {file, "JSON object"});
  ExpectErrorContains(FromJsonError({{"version", 2}}), ErrorCode::kUnsupported,
                      {file, "version 2"});
  ExpectErrorContains(FromJsonError({{"a/0", 5}}), ErrorCode::kMetadata,
                      {file, "key 'a/0'", "[url, offset, length]"});
  ExpectErrorContains(FromJsonError({{"a/0", json::array({"memory://x/y", 1})}}),
                      ErrorCode::kMetadata, {"key 'a/0'"});
  ExpectErrorContains(FromJsonError({{"a/0", json::array({"memory://x/y", -1, 4})}}),
                      ErrorCode::kMetadata, {"key 'a/0'", "byte counts"});
  ExpectErrorContains(FromJsonError({{"a/0", json::array({nullptr, 1, 4})}}), ErrorCode::kMetadata,
                      {"key 'a/0'", "null URL"});
  ExpectErrorContains(FromJsonError({{"a/0", "base64:!!"}}), ErrorCode::kMetadata,
                      {"key 'a/0'", "base64"});
  ExpectErrorContains(FromJsonError({{"a/../b", "x"}}), ErrorCode::kMetadata, {"key 'a/../b'"});
  ExpectErrorContains(FromJsonError({{"a/0", json::array({"nosuch://host/f", 0, 1})}}),
                      ErrorCode::kUnsupported, {"key 'a/0'", "nosuch://"});
  ExpectErrorContains(FromJsonError({{"a/0", json::array({"http://host/f.nc?sig=1", 0, 1})}}),
                      ErrorCode::kUnsupported, {"key 'a/0'", "query"});
  ExpectErrorContains(FromJsonError({{"a/0", json::array({"https://host", 0, 1})}}),
                      ErrorCode::kInvalidArgument, {"key 'a/0'", "names no file"});
  ExpectErrorContains(
      FromJsonError({{"version", 1}, {"refs", {{"k", json::array({"{{missing}}/f", 0, 1})}}}}),
      ErrorCode::kInvalidArgument, {file, "key 'k'", "'missing'"});
  const json gen = {{"key", "k{{i}}"}, {"url", "memory://refs/f"}};
  auto with_gen = [](json entry) {
    return json({{"version", 1}, {"gen", json::array({std::move(entry)})}});
  };
  ExpectErrorContains(FromJsonError(with_gen(gen)), ErrorCode::kMetadata,
                      {file, "gen[0]", "\"dimensions\""});
  json e = gen;
  e["dimensions"] = {{"i", {{"start", 0}}}};
  ExpectErrorContains(FromJsonError(with_gen(e)), ErrorCode::kMetadata, {"gen[0]", "\"stop\""});
  e["dimensions"] = {{"i", {{"stop", 3}, {"step", 0}}}};
  ExpectErrorContains(FromJsonError(with_gen(e)), ErrorCode::kMetadata, {"\"step\""});
  e["dimensions"] = {{"i", {{"stop", 1}}}, {"j", {{"stop", int64_t{1} << 40}}}};
  ExpectErrorContains(FromJsonError(with_gen(e)), ErrorCode::kMetadata, {"more"});
  e["dimensions"] = {{"i", {{"stop", 1 << 14}}}, {"j", {{"stop", 1 << 14}}}};
  ExpectErrorContains(FromJsonError(with_gen(e)), ErrorCode::kMetadata, {"more keys"});
  e["dimensions"] = {{"i", {{"stop", 3}}}};
  e["offset"] = "{{i}}";
  ExpectErrorContains(FromJsonError(with_gen(e)), ErrorCode::kMetadata,
                      {"\"offset\" and \"length\""});
  e["length"] = "{{ i - 1 }}";
  ExpectErrorContains(FromJsonError(with_gen(e)), ErrorCode::kMetadata,
                      {"gen[0]", "with i=0", "rendered '-1'", "not a byte count"});
}

TEST(ReferenceStoreTest, OpensLocalFilesThroughTheRegistryWithRelativeTargets) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() /
      ("zarrstream_reference_store_test_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir / "data");
  std::ofstream(dir / "data" / "a.nc") << "netcdf-bytes";
  std::ofstream(dir / "refs.json")
      << json({{"x/0", json::array({"data/a.nc", 7, 5})},
               {"x/1", json::array({(dir / "data" / "a.nc").string(), 0, 6})},
               {"x/2", json::array({"data/a.nc", 20, 5})}})
             .dump();
  Result<std::shared_ptr<Store>> store = OpenStore("reference://" + (dir / "refs.json").string());
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  EXPECT_FALSE(IsRemoteStore(**store));
  EXPECT_EQ(Text((*store)->ReadAll("x/0").value()), "bytes");
  EXPECT_EQ(Text((*store)->ReadAll("x/1").value()), "netcdf");
  ExpectErrorContains((*store)->ReadAll("x/2").status(), ErrorCode::kStorage,
                      {"key 'x/2'", (dir / "refs.json").string(),
                       "file://" + (dir / "data" / "a.nc").string(), "past the end"});
  // "#path" roots the store at a group or array of the set.
  Result<std::shared_ptr<Store>> x =
      OpenStore("reference://" + (dir / "refs.json").string() + "#x/");
  ASSERT_TRUE(x.ok()) << x.status().ToString();
  EXPECT_EQ((*x)->url(), "reference://" + (dir / "refs.json").string() + "#x");
  EXPECT_EQ(Text((*x)->ReadAll("0").value()), "bytes");
  EXPECT_EQ((*x)->List("").value().size(), 3u);
  EXPECT_EQ((*x)->ListDirectory("").value().keys[1].key, "1");
  ExpectErrorContains((*x)->ReadAll("x/0").status(), ErrorCode::kNotFound, {"'x/x/0'"});
  ExpectErrorContains(OpenStore("reference://" + (dir / "refs.json").string() + "#a/../b").status(),
                      ErrorCode::kInvalidArgument, {"after '#'"});
  std::filesystem::remove(dir / "data" / "a.nc");
  ExpectErrorContains((*store)->ReadAll("x/0").status(), ErrorCode::kStorage,
                      {"key 'x/0'", "does not exist"});
  ExpectErrorContains(OpenStore("reference://" + (dir / "none.json").string()).status(),
                      ErrorCode::kNotFound, {"reference file", "none.json", "does not exist"});
  ExpectErrorContains(OpenStore("reference://").status(), ErrorCode::kInvalidArgument,
                      {"names no reference file"});
  std::filesystem::remove_all(dir);
}

// Reads from HTTP targets complete on I/O threads: the chunk reader must issue them all first.
TEST(ReferenceStoreTest, RemoteTargetsMakeARemoteStore) {
  auto store = FromJson({{"a", json::array({"http://127.0.0.1:9/f.nc", 0, 4})}});
  ASSERT_NE(store, nullptr);
  EXPECT_TRUE(store->has_remote_targets());
  EXPECT_TRUE(IsRemoteStore(*store));
}

}  // namespace
}  // namespace zarrstream

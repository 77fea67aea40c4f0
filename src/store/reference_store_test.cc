// ReferenceStore over reference sets written by hand, JSON and Parquet (tests/test_kerchunk.py
// and tests/test_kerchunk_parquet.py read the ones kerchunk and fsspec write for netCDF4 files).
#include "store/reference_store.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "store/http_store.h"
#include "store/memory_store.h"
#include "store/parquet_test_util.h"
#include "store/sigv4.h"
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

// One row of a Parquet record file: path, offset, size, raw (nullopt: null).
struct Row {
  std::optional<std::string> path;
  int64_t offset = 0;
  int64_t size = 0;
  std::optional<std::string> raw;
};

// A record file as fsspec writes one (ZSTD, the text columns with nulls).
std::string RecordFile(const std::vector<Row>& rows, bool offsets_as_text = false) {
  using parquet::test_files::ByteArrays;
  using parquet::test_files::Column;
  using parquet::test_files::Int64s;
  using parquet::test_files::LevelsV1;
  using parquet::test_files::Page;
  std::string path_levels, paths, raw_levels, raws, offsets, sizes;
  for (const Row& row : rows) {
    path_levels += std::string("\x02") + (row.path ? '\x01' : '\x00');
    if (row.path) paths += ByteArrays({*row.path});
    raw_levels += std::string("\x02") + (row.raw ? '\x01' : '\x00');
    if (row.raw) raws += ByteArrays({*row.raw});
    offsets += offsets_as_text ? ByteArrays({std::to_string(row.offset)}) : Int64s({row.offset});
    sizes += Int64s({row.size});
  }
  const int32_t n = static_cast<int32_t>(rows.size());
  return parquet::test_files::BuildFile(
      {Column("path", 6, true, {Page(0, n, 0, 0, LevelsV1(path_levels), paths)}, 6),
       Column("offset", offsets_as_text ? 6 : 2, false, {Page(0, n, 0, 0, "", offsets)}, 6),
       Column("size", 2, false, {Page(0, n, 0, 0, "", sizes)}, 6),
       Column("raw", 6, true, {Page(0, n, 0, 0, LevelsV1(raw_levels), raws)}, 6)},
      n);
}

// A Parquet set in memory store `name`: array "a" of 2 x 3 chunks in records of 4 (refs.0 holds
// chunks 0-3, refs.1 chunks 4 and 5) and a scalar "s"; `records` by file name.
std::shared_ptr<MemoryStore> ParquetSet(const std::string& name,
                                        const std::map<std::string, std::string>& records,
                                        json zmetadata = nullptr) {
  auto store = std::dynamic_pointer_cast<MemoryStore>(OpenStore("memory://" + name).value());
  if (zmetadata.is_null()) {
    const json array = {{"zarr_format", 2},   {"shape", {4, 6}}, {"chunks", {2, 2}},
                        {"dtype", "|u1"},     {"order", "C"},    {"compressor", nullptr},
                        {"filters", nullptr}, {"fill_value", 0}};
    json scalar = array;
    scalar["shape"] = json::array();
    scalar["chunks"] = json::array();
    zmetadata = {{"metadata",
                  {{".zgroup", {{"zarr_format", 2}}}, {"a/.zarray", array}, {"s/.zarray", scalar}}},
                 {"record_size", 4}};
  }
  EXPECT_TRUE(store->Put(".zmetadata", zmetadata.dump()).ok());
  for (const auto& [file, bytes] : records) EXPECT_TRUE(store->Put(file, bytes).ok());
  return store;
}

Result<std::shared_ptr<ReferenceStore>> OpenParquetSet(const std::shared_ptr<MemoryStore>& set) {
  ZS_ASSIGN_OR_RETURN(ByteBuffer zmetadata, set->ReadAll(".zmetadata"));
  return ReferenceStore::FromParquet(set->url(), set, zmetadata.view());
}

TEST(ReferenceStoreTest, ParquetSetsMapChunkKeysToRecordRows) {
  TargetStore("pq-targets");
  const std::string target = "memory://pq-targets/data.bin";
  auto set = ParquetSet(
      "pq-set",
      {{"a/refs.0.parq",
        RecordFile(
            {{target, 3, 5, {}}, {target, 1, 1, "inline"}, {{}, 0, 0, {}}, {target, 0, 0, {}}})},
       {"s/refs.0.parq", RecordFile({{{}, 0, 0, "x"}})}});
  Result<std::shared_ptr<ReferenceStore>> opened = OpenParquetSet(set);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  ReferenceStore& store = **opened;
  EXPECT_TRUE(store.is_parquet());
  ByteBuffer zmetadata = set->ReadAll(".zmetadata").value();
  EXPECT_EQ(store.content_sha256(), Sha256Hex(zmetadata.span()));

  EXPECT_EQ(Text(store.ReadAll("a/0.0").value()), "34567");
  EXPECT_EQ(Text(store.ReadAll("a/0.1").value()), "inline") << "raw wins over path";
  EXPECT_EQ(Text(store.ReadAll("a/1.0").value()), "0123456789abcdefghij") << "0, 0: whole file";
  EXPECT_EQ(ReadRange(store, "a/0.0", ByteRange::Bounded(1, 2)), "45");
  EXPECT_EQ(Text(store.ReadAll("s/0").value()), "x");
  EXPECT_EQ(json::parse(Text(store.ReadAll("a/.zarray").value()))["chunks"], json({2, 2}));
  ExpectErrorContains(store.ReadAll("a/0.2").status(), ErrorCode::kNotFound,
                      {"'a/0.2'", "its row is empty"});
  ExpectErrorContains(store.ReadAll("a/1.1").status(), ErrorCode::kNotFound,
                      {"'a/1.1'", "a/refs.1.parq does not exist"});
  for (const char* key : {"a/2.0", "a/0.3", "a/0", "a/0.0.0", "a/x.0", "a/zarr.json", "b/0.0"}) {
    ExpectErrorContains(store.ReadAll(key).status(), ErrorCode::kNotFound, {"no such key"});
  }

  Result<std::vector<KeyInfo>> keys = store.List("a");
  ASSERT_TRUE(keys.ok()) << keys.status().ToString();
  std::vector<std::pair<std::string, uint64_t>> listed;
  for (const KeyInfo& k : *keys) listed.emplace_back(k.key, k.size);
  ASSERT_EQ(listed.size(), 4u);
  EXPECT_EQ(listed[0].first, "a/.zarray");
  EXPECT_EQ(
      std::vector(listed.begin() + 1, listed.end()),
      (std::vector<std::pair<std::string, uint64_t>>{{"a/0.0", 5}, {"a/0.1", 6}, {"a/1.0", 0}}));
  Result<DirectoryListing> root = store.ListDirectory("");
  ASSERT_TRUE(root.ok());
  EXPECT_EQ(root->prefixes, (std::vector<std::string>{"a", "s"}));
  ASSERT_EQ(root->keys.size(), 1u);
  EXPECT_EQ(root->keys[0].key, ".zgroup");
}

TEST(ReferenceStoreTest, BadParquetSetsNameTheRecordFileAndRow) {
  const auto open_error = [](const std::string& name, const std::string& record) {
    return OpenParquetSet(ParquetSet(name, {{"a/refs.0.parq", record}})).status();
  };
  ExpectErrorContains(open_error("pq-bad-1", RecordFile({{"{{u}}/f.nc", 0, 4, {}}})),
                      ErrorCode::kMetadata, {"a/refs.0.parq, row 0 (chunk 0 of 'a')", "template"});
  ExpectErrorContains(open_error("pq-bad-2", RecordFile({{{}, 0, 0, {}}, {"f.nc", -1, 4, {}}})),
                      ErrorCode::kMetadata, {"row 1 (chunk 1 of 'a')", "byte counts"});
  ExpectErrorContains(open_error("pq-bad-3", RecordFile({{"f.nc", 0, 4, {}}}, true)),
                      ErrorCode::kMetadata, {"column 'offset' is BYTE_ARRAY, not INT64"});
  ExpectErrorContains(open_error("pq-bad-4", RecordFile({{"f.nc", 0, 4, {}}}).substr(0, 40)),
                      ErrorCode::kMetadata, {"pq-bad-4/a/refs.0.parq", "no PAR1 magic"});
  // A record file shorter than the chunk's row.
  auto short_set = ParquetSet("pq-bad-5", {{"a/refs.0.parq", RecordFile({{{}, 0, 0, "x"}})}});
  Result<std::shared_ptr<ReferenceStore>> opened = OpenParquetSet(short_set);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  ExpectErrorContains((*opened)->ReadAll("a/0.1").status(), ErrorCode::kMetadata,
                      {"a/refs.0.parq has 1 rows, and the chunk is in row 1"});

  const json array = {{"shape", {4}}, {"chunks", {2}}, {"dimension_separator", "/"}};
  ExpectErrorContains(
      OpenParquetSet(
          ParquetSet("pq-bad-6", {}, {{"metadata", {{"a/.zarray", array}}}, {"record_size", 4}}))
          .status(),
      ErrorCode::kUnsupported, {"array 'a' has dimension_separator \"/\""});
  ExpectErrorContains(
      OpenParquetSet(ParquetSet("pq-bad-7", {}, {{"metadata", json::object()}})).status(),
      ErrorCode::kMetadata, {"no \"record_size\" and \"metadata\""});
  ExpectErrorContains(
      OpenParquetSet(
          ParquetSet("pq-bad-8", {}, {{"metadata", json::object()}, {"record_size", 1 << 21}}))
          .status(),
      ErrorCode::kUnsupported, {"a record_size of 2097152"});
}

}  // namespace
}  // namespace zarrstream

// Reading text arrays: vlen-utf8 chunks, numpy "U" in either byte order, missing chunks, and
// corrupt chunks. tests/test_string_types.py compares reads of peer-written stores with
// zarr-python's.
#include "array/text_read.h"

#include <gtest/gtest.h>

#include "array/memory_dataset_test_util.h"
#include "util/status_test_util.h"
#include "zarrstream/array.h"

namespace zarrstream {
namespace {

using testing::MemoryDataset;

Result<Array> OpenMember(const MemoryDataset& d, const std::string& name) {
  ZS_ASSIGN_OR_RETURN(Group group, Group::Open(d.url()));
  return group.OpenArray(name);
}

TEST(TextReadTest, ReadsRegionsAcrossChunks) {
  MemoryDataset d("text_read_regions");
  d.AddStringArray("s", {"a", "bé", "", "ccc", "d"}, 2, "x");
  auto array = OpenMember(d, "s");
  ASSERT_TRUE(array.ok()) << array.status().ToString();
  EXPECT_EQ(array->numpy_dtype(), "|O");
  EXPECT_FALSE(array->is_numeric());
  const uint64_t start = 1, count = 4;
  auto values = array->ReadText({&start, 1}, {&count, 1});
  ASSERT_TRUE(values.ok()) << values.status().ToString();
  EXPECT_EQ(*values, (std::vector<std::string>{"bé", "", "ccc", "d"}));
  std::vector<std::byte> out(8);
  ExpectErrorContains(array->ReadAll(out.data()), ErrorCode::kInvalidArgument,
                      {"array 's' in memory://text_read_regions", "string", "ReadText"});
}

TEST(TextReadTest, MissingChunksReadAsTheFillValueAndCorruptOnesNameTheChunk) {
  MemoryDataset d("text_read_fill");
  d.AddStringArray("s", {"a", "b", "c", "d"}, 2, "x");
  d.Put("s/c/1", std::string("\x02\x00\x00\x00\x09\x00\x00\x00x", 9));
  auto array = OpenMember(d, "s");
  ASSERT_TRUE(array.ok());
  const uint64_t start = 0, count = 4;
  ExpectErrorContains(array->ReadText({&start, 1}, {&count, 1}).status(), ErrorCode::kCorruptChunk,
                      {"chunk 's/c/1'", "runs past the end"});
  const uint64_t two = 2;
  auto head = array->ReadText({&start, 1}, {&two, 1});
  ASSERT_TRUE(head.ok());
  EXPECT_EQ(*head, (std::vector<std::string>{"a", "b"}));

  MemoryDataset missing("text_read_missing");
  missing.AddStringArray("s", {"a", "b"}, 2, "x");
  auto meta = nlohmann::json::parse(R"({"zarr_format": 3, "node_type": "array", "shape": [4],
      "data_type": "string", "chunk_grid": {"name": "regular",
      "configuration": {"chunk_shape": [2]}}, "chunk_key_encoding": {"name": "default"},
      "fill_value": "-", "codecs": [{"name": "vlen-utf8"}]})");
  missing.Put("s/zarr.json", meta.dump());
  auto filled = OpenMember(missing, "s");
  ASSERT_TRUE(filled.ok()) << filled.status().ToString();
  auto all = filled->ReadText({&start, 1}, {&count, 1});
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  EXPECT_EQ(*all, (std::vector<std::string>{"a", "b", "-", "-"}));
}

TEST(TextReadTest, FixedLengthUtf32InEitherByteOrder) {
  for (const char* endian : {"little", "big"}) {
    MemoryDataset d(std::string("text_read_utf32_") + endian);
    nlohmann::json meta = {
        {"zarr_format", 3},
        {"node_type", "array"},
        {"shape", {2}},
        {"data_type", {{"name", "fixed_length_utf32"}, {"configuration", {{"length_bytes", 8}}}}},
        {"chunk_grid", {{"name", "regular"}, {"configuration", {{"chunk_shape", {2}}}}}},
        {"chunk_key_encoding", {{"name", "default"}}},
        {"fill_value", ""},
        {"codecs", {{{"name", "bytes"}, {"configuration", {{"endian", endian}}}}}},
    };
    d.Put("u/zarr.json", meta.dump());
    // "a€" and "b" (NUL-padded), as UTF-32 code units.
    const uint32_t units[4] = {'a', 0x20AC, 'b', 0};
    std::string chunk;
    for (uint32_t u : units) {
      for (int k = 0; k < 4; ++k) {
        const int shift = std::string(endian) == "big" ? 8 * (3 - k) : 8 * k;
        chunk.push_back(static_cast<char>((u >> shift) & 0xFF));
      }
    }
    d.Put("u/c/0", chunk);
    auto array = OpenMember(d, "u");
    ASSERT_TRUE(array.ok()) << array.status().ToString();
    EXPECT_EQ(array->numpy_dtype(), "<U2");
    const uint64_t start = 0, count = 2;
    auto values = array->ReadText({&start, 1}, {&count, 1});
    ASSERT_TRUE(values.ok()) << values.status().ToString();
    EXPECT_EQ(*values, (std::vector<std::string>{"a\xE2\x82\xAC", "b"})) << endian;
  }
}

}  // namespace
}  // namespace zarrstream

// The Parquet reader on files built here byte by byte (a small Thrift compact-protocol writer),
// so each edge case is exactly what the test says; tests/test_kerchunk_parquet.py reads the files
// that pyarrow and fastparquet write.
#include "store/parquet_file.h"

#include <gtest/gtest.h>

#include <cstring>

#include "store/parquet_test_util.h"
#include "util/status_test_util.h"

namespace zarrstream::parquet {
namespace {

using test_files::BuildFile;
using test_files::ByteArrays;
using test_files::Column;
using test_files::Compact;
using test_files::FileOptions;
using test_files::Int64s;
using test_files::LevelsV1;
using test_files::Page;

std::span<const std::byte> Bytes(const std::string& s) { return std::as_bytes(std::span(s)); }

Result<ColumnValues> ReadOnly(const std::string& file, uint64_t max_rows = 100) {
  ZS_ASSIGN_OR_RETURN(ParquetFile parsed, ParquetFile::Parse(Bytes(file), "t.parq", max_rows));
  return parsed.ReadColumn(0);
}

// The three encodings a reference record uses: an INT64 column PLAIN, a text column
// dictionary-encoded with nulls (v1 page), a bytes column with nulls in a v2 page, ZSTD.
TEST(ParquetFileTest, ReadsPlainDictionaryAndV2PagesWithNulls) {
  Column offset{"offset", 2, false, {{0, 4, 0, 0, "", Int64s({10, 20, 0, 40})}}};
  // Dictionary {"a.nc", "b.nc"}; rows b, null, a, b: levels bit-packed 1,0,1,1; indices 1,0,1
  // bit-packed (bit width 1).
  Column path{"path",
              6,
              true,
              {{2, 2, 0, 0, "", ByteArrays({"a.nc", "b.nc"})},
               {0, 4, 0, 8, LevelsV1(std::string("\x03\x0d", 2)), std::string("\x01\x03\x05", 3)}}};
  // Rows null, "xy", null, "": levels RLE runs 0, 1, 0, 1.
  Column raw{
      "raw",
      6,
      true,
      {{3, 4, 2, 0, std::string("\x02\x00\x02\x01\x02\x00\x02\x01", 8), ByteArrays({"xy", ""})}},
      6};
  const std::string file =
      BuildFile({offset, path, raw}, 4, {.extra_fields = true, .nested = false, .num_rows = {}});
  Result<ParquetFile> parsed_or = ParquetFile::Parse(Bytes(file), "t.parq", 4);
  ASSERT_TRUE(parsed_or.ok()) << parsed_or.status().ToString();
  const ParquetFile& parsed = *parsed_or;
  ASSERT_EQ(parsed.num_rows(), 4u);
  ASSERT_EQ(parsed.columns().size(), 3u);
  EXPECT_EQ(parsed.FindColumn("raw"), 2);
  EXPECT_EQ(parsed.FindColumn("nope"), -1);
  EXPECT_TRUE(parsed.columns()[1].optional);

  Result<ColumnValues> offsets_or = parsed.ReadColumn(0);
  ASSERT_TRUE(offsets_or.ok()) << offsets_or.status().ToString();
  const ColumnValues& offsets = *offsets_or;
  EXPECT_EQ(offsets.ints, (std::vector<int64_t>{10, 20, 0, 40}));
  Result<ColumnValues> paths_or = parsed.ReadColumn(1);
  ASSERT_TRUE(paths_or.ok()) << paths_or.status().ToString();
  const ColumnValues& paths = *paths_or;
  EXPECT_EQ(paths.present, (std::vector<uint8_t>{1, 0, 1, 1}));
  EXPECT_EQ(paths.bytes_of(0), "b.nc");
  EXPECT_EQ(paths.bytes_of(2), "a.nc");
  EXPECT_EQ(paths.bytes_of(3), "b.nc");
  EXPECT_EQ(paths.bytes.size(), 8u) << "dictionary values are stored once";
  Result<ColumnValues> raws_or = parsed.ReadColumn(2);
  ASSERT_TRUE(raws_or.ok()) << raws_or.status().ToString();
  const ColumnValues& raws = *raws_or;
  EXPECT_EQ(raws.present, (std::vector<uint8_t>{0, 1, 0, 1}));
  EXPECT_EQ(raws.bytes_of(1), "xy");
  EXPECT_EQ(raws.bytes_of(3), "");
}

TEST(ParquetFileTest, ReadsInt32AndSeveralPages) {
  std::string first(8, '\0'), second(4, '\0');
  const int32_t values[] = {-5, 7, 9};
  std::memcpy(first.data(), values, 8);
  std::memcpy(second.data(), values + 2, 4);
  Column column{"size", 1, false, {{0, 2, 0, 0, "", first}, {0, 1, 0, 0, "", second}}, 6};
  Result<ColumnValues> got_or = ReadOnly(BuildFile({column}, 3));
  ASSERT_TRUE(got_or.ok()) << got_or.status().ToString();
  const ColumnValues& got = *got_or;
  EXPECT_EQ(got.ints, (std::vector<int64_t>{-5, 7, 9}));
}

TEST(ParquetFileTest, ReadsGzipPagesV1AndV2) {
  const std::string levels("\x02\x01\x02\x00\x02\x01", 6);  // RLE runs 1, 0, 1
  for (int32_t type : {0, 3}) {
    Column column(
        "path", 6, true,
        {Page(type, 3, 1, 0, type == 0 ? LevelsV1(levels) : levels, ByteArrays({"gz", "ip"}))}, 2);
    Result<ColumnValues> got = ReadOnly(BuildFile({column}, 3));
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_EQ(got->present, (std::vector<uint8_t>{1, 0, 1})) << type;
    EXPECT_EQ(got->bytes_of(0), "gz");
    EXPECT_EQ(got->bytes_of(2), "ip");
  }
}

TEST(ParquetFileTest, BadFootersAreMetadataErrors) {
  Column column{"offset", 2, false, {{0, 1, 0, 0, "", Int64s({1})}}};
  const std::string good = BuildFile({column}, 1);
  ASSERT_TRUE(ReadOnly(good).ok());
  // Cut off anywhere: never a crash, always an error.
  for (size_t n = 0; n < good.size(); ++n) {
    Result<ParquetFile> cut = ParquetFile::Parse(Bytes(good.substr(0, n)), "t.parq", 10);
    EXPECT_FALSE(cut.ok()) << n;
  }
  ExpectErrorContains(
      ParquetFile::Parse(Bytes(good.substr(0, good.size() - 1)), "t.parq", 10).status(),
      ErrorCode::kMetadata, {"t.parq: no PAR1 magic"});
  std::string long_footer = good;
  long_footer[long_footer.size() - 6] = '\x7f';
  ExpectErrorContains(ParquetFile::Parse(Bytes(long_footer), "t.parq", 10).status(),
                      ErrorCode::kMetadata, {"a footer of"});
  // Every byte of the footer flipped: an error or a file, never a crash.
  const size_t footer_length = static_cast<uint8_t>(good[good.size() - 8]);
  for (size_t i = good.size() - 8 - footer_length; i < good.size() - 8; ++i) {
    for (uint8_t flip : {0x01, 0x80, 0xff}) {
      std::string bad = good;
      bad[i] = static_cast<char>(bad[i] ^ flip);
      Result<ParquetFile> parsed = ParquetFile::Parse(Bytes(bad), "t.parq", 10);
      if (parsed.ok()) (void)parsed->ReadColumn(0);
    }
  }
  ExpectErrorContains(ReadOnly(good, 0).status(), ErrorCode::kMetadata,
                      {"more than the 0 expected"});
  ExpectErrorContains(
      ReadOnly(BuildFile({column}, 1, {.extra_fields = false, .nested = false, .num_rows = 2}))
          .status(),
      ErrorCode::kMetadata, {"row groups hold 1 rows, the file says 2"});
}

TEST(ParquetFileTest, HostileThriftIsBounded) {
  // A list claiming 2^40 schema elements in a few bytes, and structs nested 100 deep.
  Compact m;
  m.Field(2, 9);
  m.Byte(0xfc);
  m.Varint(uint64_t{1} << 40);
  std::string file = "PAR1" + m.out;
  uint32_t n = static_cast<uint32_t>(m.out.size());
  file.append(reinterpret_cast<const char*>(&n), 4);
  file += "PAR1";
  ExpectErrorContains(ParquetFile::Parse(Bytes(file), "t.parq", 10).status(), ErrorCode::kMetadata,
                      {"a Thrift list of 1099511627776 elements"});
  Compact deep;
  for (int i = 0; i < 100; ++i) deep.Begin(50);
  for (int i = 0; i < 100; ++i) deep.End();
  deep.Byte(0);
  file = "PAR1" + deep.out;
  n = static_cast<uint32_t>(deep.out.size());
  file.append(reinterpret_cast<const char*>(&n), 4);
  file += "PAR1";
  ExpectErrorContains(ParquetFile::Parse(Bytes(file), "t.parq", 10).status(), ErrorCode::kMetadata,
                      {"nest too deep"});
}

TEST(ParquetFileTest, WhatIsNotReadIsNamed) {
  Column column{"path", 6, true, {{0, 1, 0, 0, LevelsV1("\x02\x01"), ByteArrays({"a"})}}};
  ExpectErrorContains(
      ReadOnly(BuildFile({column}, 1, {.extra_fields = false, .nested = true, .num_rows = {}}))
          .status(),
      ErrorCode::kMetadata, {"nested schema"});
  Column delta = column;
  delta.pages[0].encoding = 6;  // DELTA_LENGTH_BYTE_ARRAY
  ExpectErrorContains(ReadOnly(BuildFile({delta}, 1)).status(), ErrorCode::kUnsupported,
                      {"t.parq, row group 0, column 'path': the page at offset 4: values in "
                       "DELTA_LENGTH_BYTE_ARRAY"});
  Column snappy = column;
  snappy.codec = 1;
  ExpectErrorContains(ReadOnly(BuildFile({snappy}, 1)).status(), ErrorCode::kUnsupported,
                      {"SNAPPY compression"});
  Column doubles{"x", 5, false, {{0, 1, 0, 0, "", Int64s({1})}}};
  ExpectErrorContains(ReadOnly(BuildFile({doubles}, 1)).status(), ErrorCode::kUnsupported,
                      {"column 'x': type DOUBLE"});
}

TEST(ParquetFileTest, CorruptPagesAreMetadataErrors) {
  // A dictionary index past the dictionary.
  Column index{
      "path",
      6,
      false,
      {{2, 1, 0, 0, "", ByteArrays({"a"})}, {0, 1, 0, 8, "", std::string("\x01\x02\x01", 3)}}};
  ExpectErrorContains(ReadOnly(BuildFile({index}, 1)).status(), ErrorCode::kMetadata,
                      {"dictionary index 1 of a dictionary of 1"});
  // Dictionary-encoded values with no dictionary.
  Column no_dictionary{"path", 6, false, {{0, 1, 0, 8, "", std::string("\x01\x02\x00", 3)}}};
  ExpectErrorContains(ReadOnly(BuildFile({no_dictionary}, 1)).status(), ErrorCode::kMetadata,
                      {"with no dictionary"});
  // A byte array longer than its page.
  Column long_value{"path",
                    6,
                    false,
                    {{0, 1, 0, 0, "",
                      std::string("\x09\x00\x00\x00"
                                  "ab",
                                  6)}}};
  ExpectErrorContains(ReadOnly(BuildFile({long_value}, 1)).status(), ErrorCode::kMetadata,
                      {"reaches past its page"});
  // Fewer values than rows.
  Column short_page{"offset", 2, false, {{0, 1, 0, 0, "", Int64s({1})}}};
  ExpectErrorContains(ReadOnly(BuildFile({short_page}, 2)).status(), ErrorCode::kMetadata,
                      {"pages end after 1 of 2 values"});
  // Definition levels that end early.
  Column levels{"path", 6, true, {{0, 3, 0, 0, LevelsV1("\x02\x01"), ByteArrays({"a"})}}};
  ExpectErrorContains(ReadOnly(BuildFile({levels}, 3)).status(), ErrorCode::kMetadata,
                      {"definition levels: RLE/bit-packed data ends after 1 of 3 values"});
  // A page that says it decompresses to more than a page may.
  Page huge(0, 1, 0, 0, "", Int64s({1}));
  huge.uncompressed_size_override = INT32_MAX;
  Column big{"offset", 2, false, {huge}, 6};
  ExpectErrorContains(ReadOnly(BuildFile({big}, 1)).status(), ErrorCode::kMetadata,
                      {"at most 268435456 are read"});
  // Compressed bytes that are not ZSTD.
  std::string file = BuildFile({Column{"offset", 2, false, {{0, 1, 0, 0, "", Int64s({1})}}, 6}}, 1);
  const size_t body = file.find("\x28\xb5\x2f\xfd", 4);  // the ZSTD frame's magic
  ASSERT_NE(body, std::string::npos);
  file[body + 6] = static_cast<char>(file[body + 6] ^ 0x55);
  file[body + 7] = static_cast<char>(file[body + 7] ^ 0x55);
  ExpectErrorContains(ReadOnly(file).status(), ErrorCode::kMetadata, {"ZSTD data"});
}

}  // namespace
}  // namespace zarrstream::parquet

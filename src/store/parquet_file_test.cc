// The Parquet reader on files built here byte by byte (a small Thrift compact-protocol writer),
// so each edge case is exactly what the test says; tests/test_kerchunk_parquet.py reads the files
// that pyarrow and fastparquet write.
#include "store/parquet_file.h"

#include <gtest/gtest.h>
#include <zstd.h>

#include <cstring>
#include <optional>

#include "util/status_test_util.h"

namespace zarrstream::parquet {
namespace {

// Thrift compact protocol, as much as the tests write.
class Compact {
 public:
  std::string out;

  void Byte(uint8_t b) { out.push_back(static_cast<char>(b)); }
  void Varint(uint64_t v) {
    while (v >= 0x80) {
      Byte(static_cast<uint8_t>(v | 0x80));
      v >>= 7;
    }
    Byte(static_cast<uint8_t>(v));
  }
  void ZigZag(int64_t v) {
    Varint((static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63));
  }
  void Field(int16_t id, uint8_t type) {
    const int delta = id - last_.back();
    if (delta > 0 && delta <= 15) {
      Byte(static_cast<uint8_t>(delta << 4 | type));
    } else {
      Byte(type);
      ZigZag(id);
    }
    last_.back() = id;
  }
  void I32(int16_t id, int32_t v) {
    Field(id, 5);
    ZigZag(v);
  }
  void I64(int16_t id, int64_t v) {
    Field(id, 6);
    ZigZag(v);
  }
  void Bool(int16_t id, bool v) { Field(id, v ? 1 : 2); }
  void Binary(int16_t id, std::string_view s) {
    Field(id, 8);
    Varint(s.size());
    out += s;
  }
  void Begin(int16_t id) {  // a struct field
    Field(id, 12);
    last_.push_back(0);
  }
  void BeginElement() { last_.push_back(0); }  // a struct in a list
  void End() {
    Byte(0);
    last_.pop_back();
  }
  void List(int16_t id, uint8_t element_type, uint64_t size) {
    Field(id, 9);
    if (size < 15) {
      Byte(static_cast<uint8_t>(size << 4 | element_type));
    } else {
      Byte(static_cast<uint8_t>(0xf0 | element_type));
      Varint(size);
    }
  }

 private:
  std::vector<int16_t> last_{0};
};

struct Page {
  Page(int32_t type_, int32_t num_values_, int32_t num_nulls_, int32_t encoding_,
       std::string levels_, std::string values_)
      : type(type_),
        num_values(num_values_),
        num_nulls(num_nulls_),
        encoding(encoding_),
        levels(std::move(levels_)),
        values(std::move(values_)) {}
  int32_t type;  // 0 data v1, 2 dictionary, 3 data v2
  int32_t num_values;
  int32_t num_nulls;
  int32_t encoding;
  std::string levels;  // v1: with its 4-byte length; v2: the bare levels
  std::string values;
  int32_t codec = 0;  // 0 uncompressed, 6 zstd
  std::optional<int32_t> uncompressed_size_override;
};

std::string Compress(int32_t codec, const std::string& data) {
  if (codec == 0) return data;
  std::string out(ZSTD_compressBound(data.size()), '\0');
  out.resize(ZSTD_compress(out.data(), out.size(), data.data(), data.size(), 3));
  return out;
}

std::string EncodePage(const Page& page) {
  std::string body;
  int32_t uncompressed = 0;
  if (page.type == 3) {
    body = page.levels + Compress(page.codec, page.values);
    uncompressed = static_cast<int32_t>(page.levels.size() + page.values.size());
  } else {
    body = Compress(page.codec, page.levels + page.values);
    uncompressed = static_cast<int32_t>(page.levels.size() + page.values.size());
  }
  Compact h;
  h.I32(1, page.type);
  h.I32(2, page.uncompressed_size_override.value_or(uncompressed));
  h.I32(3, static_cast<int32_t>(body.size()));
  h.I32(4, 12345);  // crc: skipped
  if (page.type == 0) {
    h.Begin(5);
    h.I32(1, page.num_values);
    h.I32(2, page.encoding);
    h.I32(3, 3);  // definition levels: RLE
    h.I32(4, 3);
    h.End();
  } else if (page.type == 2) {
    h.Begin(7);
    h.I32(1, page.num_values);
    h.I32(2, page.encoding);
    h.Bool(3, false);
    h.End();
  } else {
    h.Begin(8);
    h.I32(1, page.num_values);
    h.I32(2, page.num_nulls);
    h.I32(3, page.num_values);
    h.I32(4, page.encoding);
    h.I32(5, static_cast<int32_t>(page.levels.size()));
    h.I32(6, 0);
    h.Bool(7, page.codec != 0);
    h.End();
  }
  h.Byte(0);
  return h.out + body;
}

struct Column {
  Column(std::string name_, int32_t type_, bool optional_, std::vector<Page> pages_,
         int32_t codec_ = 0)
      : name(std::move(name_)),
        type(type_),
        optional(optional_),
        pages(std::move(pages_)),
        codec(codec_) {}
  std::string name;
  int32_t type;  // 1 INT32, 2 INT64, 5 DOUBLE, 6 BYTE_ARRAY
  bool optional;
  std::vector<Page> pages;
  int32_t codec;
};

struct FileOptions {
  bool extra_fields = false;  // unknown fields of every wire type, which the reader skips
  bool nested = false;        // a column that is a group
  std::optional<int64_t> num_rows;
};

std::string BuildFile(const std::vector<Column>& columns, int64_t rows,
                      const FileOptions& options = {}) {
  std::string file = "PAR1";
  struct Placed {
    int64_t start, size;
    bool dictionary;
  };
  std::vector<Placed> placed;
  for (const Column& column : columns) {
    const int64_t start = static_cast<int64_t>(file.size());
    for (Page page : column.pages) {
      page.codec = column.codec;
      file += EncodePage(page);
    }
    placed.push_back({start, static_cast<int64_t>(file.size()) - start,
                      !column.pages.empty() && column.pages[0].type == 2});
  }
  Compact m;
  m.I32(1, 1);
  m.List(2, 12, columns.size() + 1 + (options.nested ? 1 : 0));
  m.BeginElement();
  m.Binary(4, "schema");
  m.I32(5, static_cast<int32_t>(columns.size()));
  m.End();
  for (const Column& column : columns) {
    m.BeginElement();
    m.I32(1, column.type);
    m.I32(3, column.optional ? 1 : 0);
    m.Binary(4, column.name);
    if (column.type == 6) m.I32(6, 0);  // UTF8
    m.End();
  }
  if (options.nested) {
    m.BeginElement();
    m.I32(1, 2);
    m.Binary(4, "child");
    m.End();
  }
  m.I64(3, options.num_rows.value_or(rows));
  m.List(4, 12, 1);
  m.BeginElement();
  m.List(1, 12, columns.size());
  for (size_t c = 0; c < columns.size(); ++c) {
    m.BeginElement();
    m.I64(2, placed[c].start);
    m.Begin(3);
    m.I32(1, columns[c].type);
    m.List(2, 5, 1);
    m.ZigZag(0);
    m.List(3, 8, 1);
    m.Varint(columns[c].name.size());
    m.out += columns[c].name;
    m.I32(4, columns[c].codec);
    m.I64(5, rows);
    m.I64(6, placed[c].size);
    m.I64(7, placed[c].size);
    m.I64(9, placed[c].start);
    if (placed[c].dictionary) m.I64(11, placed[c].start);
    m.End();
    m.End();
  }
  m.I64(2, 0);
  m.I64(3, rows);
  m.End();
  if (options.extra_fields) {
    // key_value_metadata: list<struct{1: key, 2: value}>; created_by; a field from the future
    // holding a map, a double, a byte, a set of bools and a nested struct.
    m.List(5, 12, 1);
    m.BeginElement();
    m.Binary(1, "pandas");
    m.Binary(2, "{\"x\": 1}");
    m.End();
    m.Binary(6, "a test");
    m.Begin(40);
    m.Field(1, 11);  // map<string, i32> of 2
    m.Varint(2);
    m.Byte(0x85);
    m.Varint(1);
    m.out += "a";
    m.ZigZag(7);
    m.Varint(1);
    m.out += "b";
    m.ZigZag(-7);
    m.Field(2, 7);
    m.out += std::string(8, '\x01');
    m.Field(3, 3);
    m.Byte(0xff);
    m.Field(4, 10);  // set<bool> of 3: a byte each
    m.Byte(0x31);
    m.Byte(1);
    m.Byte(2);
    m.Byte(1);
    m.Begin(5);
    m.Bool(1, true);
    m.I64(300, -1);  // an id that does not fit the 4-bit delta
    m.End();
    m.End();
  }
  m.Byte(0);
  file += m.out;
  const uint32_t length = static_cast<uint32_t>(m.out.size());
  file.append(reinterpret_cast<const char*>(&length), 4);
  file += "PAR1";
  return file;
}

std::string Int64s(std::initializer_list<int64_t> values) {
  std::string out;
  for (int64_t v : values) out.append(reinterpret_cast<const char*>(&v), 8);
  return out;
}

std::string ByteArrays(std::initializer_list<std::string_view> values) {
  std::string out;
  for (std::string_view v : values) {
    const uint32_t n = static_cast<uint32_t>(v.size());
    out.append(reinterpret_cast<const char*>(&n), 4);
    out += v;
  }
  return out;
}

// Definition levels of a v1 page: the 4-byte length, then the hybrid data.
std::string LevelsV1(const std::string& hybrid) {
  const uint32_t n = static_cast<uint32_t>(hybrid.size());
  return std::string(reinterpret_cast<const char*>(&n), 4) + hybrid;
}

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

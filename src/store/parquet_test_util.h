// Parquet files built byte by byte for tests (tests only): a small Thrift compact-protocol writer
// and a file builder whose pages say exactly what each test needs, valid or not.
#pragma once

#include <zlib.h>
#include <zstd.h>

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace zarrstream::parquet::test_files {

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
  int32_t codec = 0;  // as Compress takes it
  std::optional<int32_t> uncompressed_size_override;
};

// `data` compressed with Parquet codec `codec`: 0 none, 2 GZIP, 6 ZSTD.
inline std::string Compress(int32_t codec, const std::string& data) {
  if (codec == 0) return data;
  if (codec == 2) {
    z_stream stream{};
    deflateInit2(&stream, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);  // gzip framing
    std::string out(deflateBound(&stream, data.size()) + 32, '\0');
    stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
    stream.avail_in = static_cast<uInt>(data.size());
    stream.next_out = reinterpret_cast<Bytef*>(out.data());
    stream.avail_out = static_cast<uInt>(out.size());
    deflate(&stream, Z_FINISH);
    out.resize(stream.total_out);
    deflateEnd(&stream);
    return out;
  }
  std::string out(ZSTD_compressBound(data.size()), '\0');
  out.resize(ZSTD_compress(out.data(), out.size(), data.data(), data.size(), 3));
  return out;
}

inline std::string EncodePage(const Page& page) {
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

inline std::string BuildFile(const std::vector<Column>& columns, int64_t rows,
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

inline std::string Int64s(std::initializer_list<int64_t> values) {
  std::string out;
  for (int64_t v : values) out.append(reinterpret_cast<const char*>(&v), 8);
  return out;
}

inline std::string ByteArrays(std::initializer_list<std::string_view> values) {
  std::string out;
  for (std::string_view v : values) {
    const uint32_t n = static_cast<uint32_t>(v.size());
    out.append(reinterpret_cast<const char*>(&n), 4);
    out += v;
  }
  return out;
}

// Definition levels of a v1 page: the 4-byte length, then the hybrid data.
inline std::string LevelsV1(const std::string& hybrid) {
  const uint32_t n = static_cast<uint32_t>(hybrid.size());
  return std::string(reinterpret_cast<const char*>(&n), 4) + hybrid;
}

}  // namespace zarrstream::parquet::test_files

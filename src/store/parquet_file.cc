// The footer is FileMetaData in Thrift's compact protocol; each page starts with a PageHeader in
// the same protocol. The fields read (Parquet's parquet.thrift numbers them):
//   FileMetaData     2 schema (list<SchemaElement>), 3 num_rows, 4 row_groups (list<RowGroup>)
//   SchemaElement    1 type, 3 repetition_type, 4 name, 5 num_children
//   RowGroup         1 columns (list<ColumnChunk>), 3 num_rows
//   ColumnChunk      1 file_path (data in another file: refused), 3 meta_data,
//                    8 and 9 (encrypted columns: refused)
//   ColumnMetaData   1 type, 3 path_in_schema, 4 codec, 5 num_values, 7 total_compressed_size,
//                    9 data_page_offset, 11 dictionary_page_offset
//   PageHeader       1 type, 2 uncompressed_page_size, 3 compressed_page_size,
//                    5 data_page_header, 7 dictionary_page_header, 8 data_page_header_v2
//   DataPageHeader   1 num_values, 2 encoding, 3 definition_level_encoding
//   DictionaryPageHeader  1 num_values, 2 encoding
//   DataPageHeaderV2 1 num_values, 2 num_nulls, 4 encoding, 5 definition_levels_byte_length,
//                    6 repetition_levels_byte_length, 7 is_compressed
// Every other field, of any type, is skipped.
#include "store/parquet_file.h"

#include <zlib.h>
#include <zstd.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <utility>

namespace zarrstream::parquet {

namespace {

constexpr std::string_view kMagic = "PAR1";
// Structs nest this deep at most (FileMetaData > RowGroup > ColumnChunk > ColumnMetaData >
// Statistics is 5; unknown fields may nest a little more).
constexpr int kMaxThriftDepth = 32;

// Thrift compact protocol wire types.
enum WireType : uint8_t {
  kStop = 0,
  kTrue = 1,
  kFalse = 2,
  kByte = 3,
  kI16 = 4,
  kI32 = 5,
  kI64 = 6,
  kDouble = 7,
  kBinary = 8,
  kList = 9,
  kSet = 10,
  kMap = 11,
  kStruct = 12,
};

enum Codec : int32_t { kUncompressed = 0, kSnappy = 1, kGzip = 2, kZstd = 6 };
enum Encoding : int32_t {
  kPlain = 0,
  kPlainDictionary = 2,
  kRle = 3,
  kBitPacked = 4,
  kRleDictionary = 8,
};
enum PageType : int32_t { kDataPage = 0, kIndexPage = 1, kDictionaryPage = 2, kDataPageV2 = 3 };

std::string CodecName(int32_t codec) {
  static constexpr const char* kNames[] = {"UNCOMPRESSED", "SNAPPY", "GZIP", "LZO",
                                           "BROTLI",       "LZ4",    "ZSTD", "LZ4_RAW"};
  if (codec >= 0 && codec < 8) return kNames[codec];
  return "codec " + std::to_string(codec);
}

std::string EncodingName(int32_t encoding) {
  static constexpr const char* kNames[] = {
      "PLAIN",          "GROUP_VAR_INT",       "PLAIN_DICTIONARY",        "RLE",
      "BIT_PACKED",     "DELTA_BINARY_PACKED", "DELTA_LENGTH_BYTE_ARRAY", "DELTA_BYTE_ARRAY",
      "RLE_DICTIONARY", "BYTE_STREAM_SPLIT"};
  if (encoding >= 0 && encoding < 10) return kNames[encoding];
  return "encoding " + std::to_string(encoding);
}

// Reads Thrift's compact protocol from [p, end). Errors say what was being read; the caller adds
// the file.
class ThriftReader {
 public:
  ThriftReader(const uint8_t* p, const uint8_t* end) : begin_(p), p_(p), end_(end) {}

  size_t consumed() const { return static_cast<size_t>(p_ - begin_); }
  size_t remaining() const { return static_cast<size_t>(end_ - p_); }

  Result<uint64_t> Varint() {
    uint64_t value = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (p_ == end_) return Truncated();
      const uint8_t b = *p_++;
      value |= uint64_t{b & 0x7fu} << shift;
      if ((b & 0x80) == 0) return value;
    }
    return MetadataError("a Thrift varint is longer than 10 bytes");
  }

  // An integer field of wire type byte, i16, i32 or i64.
  Result<int64_t> Integer(uint8_t type) {
    if (type == kByte) {
      if (p_ == end_) return Truncated();
      return static_cast<int8_t>(*p_++);
    }
    if (type != kI16 && type != kI32 && type != kI64) {
      return MetadataError("expected an integer, found Thrift wire type " + std::to_string(type));
    }
    ZS_ASSIGN_OR_RETURN(uint64_t zigzag, Varint());
    return static_cast<int64_t>(zigzag >> 1) ^ -static_cast<int64_t>(zigzag & 1);
  }

  Result<int32_t> Int32(uint8_t type) {
    ZS_ASSIGN_OR_RETURN(int64_t value, Integer(type));
    if (value < INT32_MIN || value > INT32_MAX) {
      return MetadataError("the value " + std::to_string(value) + " is out of range for an i32");
    }
    return static_cast<int32_t>(value);
  }

  Result<std::string> Binary(uint8_t type) {
    if (type != kBinary) {
      return MetadataError("expected a string, found Thrift wire type " + std::to_string(type));
    }
    ZS_ASSIGN_OR_RETURN(uint64_t size, Varint());
    if (size > remaining()) return Truncated();
    std::string out(reinterpret_cast<const char*>(p_), size);
    p_ += size;
    return out;
  }

  // A list's (or set's) element count and element type. Every element takes at least one byte,
  // so the count is checked against the bytes left before anyone reserves memory for it.
  Result<std::pair<uint64_t, uint8_t>> ListHeader(uint8_t type) {
    if (type != kList && type != kSet) {
      return MetadataError("expected a list, found Thrift wire type " + std::to_string(type));
    }
    if (p_ == end_) return Truncated();
    const uint8_t b = *p_++;
    uint64_t size = b >> 4;
    if (size == 15) {
      ZS_ASSIGN_OR_RETURN(size, Varint());
    }
    if (size > remaining()) {
      return MetadataError("a Thrift list of " + std::to_string(size) + " elements in " +
                           std::to_string(remaining()) + " bytes");
    }
    return std::make_pair(size, static_cast<uint8_t>(b & 0x0f));
  }

  // Reads a struct, calling on_field(id, type) for each field; on_field reads the field's value
  // (or skips it with Skip).
  template <typename OnField>
  Status Struct(OnField&& on_field) {
    if (++depth_ > kMaxThriftDepth) return MetadataError("Thrift structs nest too deep");
    int16_t last_id = 0;
    while (true) {
      if (p_ == end_) return Truncated();
      const uint8_t b = *p_++;
      if (b == kStop) break;
      const uint8_t type = b & 0x0f;
      const uint8_t delta = b >> 4;
      int16_t id = 0;
      if (delta != 0) {
        id = static_cast<int16_t>(last_id + delta);
      } else {
        ZS_ASSIGN_OR_RETURN(int64_t explicit_id, Integer(kI16));
        if (explicit_id < INT16_MIN || explicit_id > INT16_MAX) {
          return MetadataError("a Thrift field id out of range");
        }
        id = static_cast<int16_t>(explicit_id);
      }
      last_id = id;
      if (type == kTrue || type == kFalse) bool_value_ = type == kTrue;
      ZS_RETURN_IF_ERROR(on_field(id, type));
    }
    --depth_;
    return Status::Ok();
  }

  // The value of the boolean field just announced.
  Result<bool> Bool(uint8_t type) {
    if (type != kTrue && type != kFalse) {
      return MetadataError("expected a bool, found Thrift wire type " + std::to_string(type));
    }
    return bool_value_;
  }

  // Skips a value of wire type `type` (a field's value; in_collection: an element of a list,
  // set or map, where booleans take a byte).
  Status Skip(uint8_t type, bool in_collection = false) {
    switch (type) {
      case kTrue:
      case kFalse:
        if (in_collection) return Advance(1);
        return Status::Ok();
      case kByte:
        return Advance(1);
      case kI16:
      case kI32:
      case kI64:
        return Varint().status();
      case kDouble:
        return Advance(8);
      case kBinary: {
        ZS_ASSIGN_OR_RETURN(uint64_t size, Varint());
        return Advance(size);
      }
      case kList:
      case kSet: {
        ZS_ASSIGN_OR_RETURN(auto header, ListHeader(type));
        if (++depth_ > kMaxThriftDepth) return MetadataError("Thrift values nest too deep");
        for (uint64_t i = 0; i < header.first; ++i) ZS_RETURN_IF_ERROR(Skip(header.second, true));
        --depth_;
        return Status::Ok();
      }
      case kMap: {
        ZS_ASSIGN_OR_RETURN(uint64_t size, Varint());
        if (size == 0) return Status::Ok();
        if (size > remaining()) return MetadataError("a Thrift map larger than its bytes");
        if (p_ == end_) return Truncated();
        const uint8_t types = *p_++;
        if (++depth_ > kMaxThriftDepth) return MetadataError("Thrift values nest too deep");
        for (uint64_t i = 0; i < size; ++i) {
          ZS_RETURN_IF_ERROR(Skip(types >> 4, true));
          ZS_RETURN_IF_ERROR(Skip(types & 0x0f, true));
        }
        --depth_;
        return Status::Ok();
      }
      case kStruct:
        return Struct([this](int16_t, uint8_t field_type) { return Skip(field_type); });
      default:
        return MetadataError("unknown Thrift wire type " + std::to_string(type));
    }
  }

 private:
  Status Advance(uint64_t n) {
    if (n > remaining()) return Truncated();
    p_ += n;
    return Status::Ok();
  }
  static Status Truncated() { return MetadataError("Thrift data ends early"); }

  const uint8_t* begin_;
  const uint8_t* p_;
  const uint8_t* end_;
  int depth_ = 0;
  bool bool_value_ = false;
};

struct SchemaElement {
  std::optional<int32_t> type;
  std::optional<int32_t> repetition;
  std::string name;
  int32_t num_children = 0;
};

Result<SchemaElement> ReadSchemaElement(ThriftReader& r) {
  SchemaElement e;
  ZS_RETURN_IF_ERROR(r.Struct([&](int16_t id, uint8_t type) -> Status {
    switch (id) {
      case 1: {
        ZS_ASSIGN_OR_RETURN(e.type, r.Int32(type));
        return Status::Ok();
      }
      case 3: {
        ZS_ASSIGN_OR_RETURN(e.repetition, r.Int32(type));
        return Status::Ok();
      }
      case 4: {
        ZS_ASSIGN_OR_RETURN(e.name, r.Binary(type));
        return Status::Ok();
      }
      case 5: {
        ZS_ASSIGN_OR_RETURN(e.num_children, r.Int32(type));
        return Status::Ok();
      }
      default:
        return r.Skip(type);
    }
  }));
  return e;
}

struct ColumnMeta {
  std::optional<int32_t> type;
  std::vector<std::string> path;
  std::optional<int32_t> codec;
  std::optional<int64_t> num_values;
  std::optional<int64_t> total_compressed_size;
  std::optional<int64_t> data_page_offset;
  std::optional<int64_t> dictionary_page_offset;
};

Result<ColumnMeta> ReadColumnMeta(ThriftReader& r) {
  ColumnMeta m;
  ZS_RETURN_IF_ERROR(r.Struct([&](int16_t id, uint8_t type) -> Status {
    switch (id) {
      case 1: {
        ZS_ASSIGN_OR_RETURN(m.type, r.Int32(type));
        return Status::Ok();
      }
      case 3: {
        ZS_ASSIGN_OR_RETURN(auto header, r.ListHeader(type));
        for (uint64_t i = 0; i < header.first; ++i) {
          ZS_ASSIGN_OR_RETURN(std::string part, r.Binary(header.second));
          m.path.push_back(std::move(part));
        }
        return Status::Ok();
      }
      case 4: {
        ZS_ASSIGN_OR_RETURN(m.codec, r.Int32(type));
        return Status::Ok();
      }
      case 5: {
        ZS_ASSIGN_OR_RETURN(m.num_values, r.Integer(type));
        return Status::Ok();
      }
      case 7: {
        ZS_ASSIGN_OR_RETURN(m.total_compressed_size, r.Integer(type));
        return Status::Ok();
      }
      case 9: {
        ZS_ASSIGN_OR_RETURN(m.data_page_offset, r.Integer(type));
        return Status::Ok();
      }
      case 11: {
        ZS_ASSIGN_OR_RETURN(m.dictionary_page_offset, r.Integer(type));
        return Status::Ok();
      }
      default:
        return r.Skip(type);
    }
  }));
  return m;
}

struct ColumnChunk {
  std::optional<std::string> file_path;
  std::optional<ColumnMeta> meta;
  bool encrypted = false;
};

Result<ColumnChunk> ReadColumnChunk(ThriftReader& r) {
  ColumnChunk c;
  ZS_RETURN_IF_ERROR(r.Struct([&](int16_t id, uint8_t type) -> Status {
    switch (id) {
      case 1: {
        ZS_ASSIGN_OR_RETURN(c.file_path, r.Binary(type));
        return Status::Ok();
      }
      case 3: {
        if (type != kStruct) return MetadataError("ColumnChunk.meta_data is not a struct");
        ZS_ASSIGN_OR_RETURN(c.meta, ReadColumnMeta(r));
        return Status::Ok();
      }
      case 8:
      case 9:
        c.encrypted = true;
        return r.Skip(type);
      default:
        return r.Skip(type);
    }
  }));
  return c;
}

struct RowGroup {
  std::vector<ColumnChunk> columns;
  std::optional<int64_t> num_rows;
};

Result<RowGroup> ReadRowGroup(ThriftReader& r) {
  RowGroup g;
  ZS_RETURN_IF_ERROR(r.Struct([&](int16_t id, uint8_t type) -> Status {
    switch (id) {
      case 1: {
        ZS_ASSIGN_OR_RETURN(auto header, r.ListHeader(type));
        if (header.second != kStruct) return MetadataError("RowGroup.columns holds no structs");
        for (uint64_t i = 0; i < header.first; ++i) {
          ZS_ASSIGN_OR_RETURN(ColumnChunk chunk, ReadColumnChunk(r));
          g.columns.push_back(std::move(chunk));
        }
        return Status::Ok();
      }
      case 3: {
        ZS_ASSIGN_OR_RETURN(g.num_rows, r.Integer(type));
        return Status::Ok();
      }
      default:
        return r.Skip(type);
    }
  }));
  return g;
}

struct FileMetaData {
  std::vector<SchemaElement> schema;
  std::optional<int64_t> num_rows;
  std::vector<RowGroup> row_groups;
};

Result<FileMetaData> ReadFileMetaData(ThriftReader& r) {
  FileMetaData f;
  ZS_RETURN_IF_ERROR(r.Struct([&](int16_t id, uint8_t type) -> Status {
    switch (id) {
      case 2: {
        ZS_ASSIGN_OR_RETURN(auto header, r.ListHeader(type));
        if (header.second != kStruct) return MetadataError("FileMetaData.schema holds no structs");
        for (uint64_t i = 0; i < header.first; ++i) {
          ZS_ASSIGN_OR_RETURN(SchemaElement element, ReadSchemaElement(r));
          f.schema.push_back(std::move(element));
        }
        return Status::Ok();
      }
      case 3: {
        ZS_ASSIGN_OR_RETURN(f.num_rows, r.Integer(type));
        return Status::Ok();
      }
      case 4: {
        ZS_ASSIGN_OR_RETURN(auto header, r.ListHeader(type));
        if (header.second != kStruct) {
          return MetadataError("FileMetaData.row_groups holds no structs");
        }
        for (uint64_t i = 0; i < header.first; ++i) {
          ZS_ASSIGN_OR_RETURN(RowGroup group, ReadRowGroup(r));
          f.row_groups.push_back(std::move(group));
        }
        return Status::Ok();
      }
      default:
        return r.Skip(type);
    }
  }));
  return f;
}

struct PageHeader {
  int32_t type = -1;
  int32_t uncompressed_size = -1;
  int32_t compressed_size = -1;
  // DataPageHeader, DictionaryPageHeader or DataPageHeaderV2, whichever the type says.
  int32_t num_values = -1;
  int32_t num_nulls = 0;
  int32_t encoding = -1;
  int32_t definition_level_encoding = kRle;
  int32_t definition_levels_length = 0;
  int32_t repetition_levels_length = 0;
  bool is_compressed = true;
  bool has_data_header = false, has_dictionary_header = false, has_v2_header = false;
};

Status ReadDataPageHeader(ThriftReader& r, PageHeader& h, int version) {
  return r.Struct([&](int16_t id, uint8_t type) -> Status {
    if (id == 1) {
      ZS_ASSIGN_OR_RETURN(h.num_values, r.Int32(type));
    } else if (version == 0 && id == 2) {
      ZS_ASSIGN_OR_RETURN(h.encoding, r.Int32(type));
    } else if (version == 0 && id == 3) {
      ZS_ASSIGN_OR_RETURN(h.definition_level_encoding, r.Int32(type));
    } else if (version == 1 && id == 2) {  // DictionaryPageHeader
      ZS_ASSIGN_OR_RETURN(h.encoding, r.Int32(type));
    } else if (version == 2 && id == 2) {
      ZS_ASSIGN_OR_RETURN(h.num_nulls, r.Int32(type));
    } else if (version == 2 && id == 4) {
      ZS_ASSIGN_OR_RETURN(h.encoding, r.Int32(type));
    } else if (version == 2 && id == 5) {
      ZS_ASSIGN_OR_RETURN(h.definition_levels_length, r.Int32(type));
    } else if (version == 2 && id == 6) {
      ZS_ASSIGN_OR_RETURN(h.repetition_levels_length, r.Int32(type));
    } else if (version == 2 && id == 7) {
      ZS_ASSIGN_OR_RETURN(h.is_compressed, r.Bool(type));
    } else {
      return r.Skip(type);
    }
    return Status::Ok();
  });
}

Result<PageHeader> ReadPageHeader(ThriftReader& r) {
  PageHeader h;
  ZS_RETURN_IF_ERROR(r.Struct([&](int16_t id, uint8_t type) -> Status {
    switch (id) {
      case 1: {
        ZS_ASSIGN_OR_RETURN(h.type, r.Int32(type));
        return Status::Ok();
      }
      case 2: {
        ZS_ASSIGN_OR_RETURN(h.uncompressed_size, r.Int32(type));
        return Status::Ok();
      }
      case 3: {
        ZS_ASSIGN_OR_RETURN(h.compressed_size, r.Int32(type));
        return Status::Ok();
      }
      case 5:
      case 7:
      case 8: {
        if (type != kStruct) return MetadataError("a page's header is not a struct");
        const int version = id == 5 ? 0 : id == 7 ? 1 : 2;
        (id == 5 ? h.has_data_header : id == 7 ? h.has_dictionary_header : h.has_v2_header) = true;
        return ReadDataPageHeader(r, h, version);
      }
      default:
        return r.Skip(type);
    }
  }));
  return h;
}

// Decodes `count` values of the RLE/bit-packed hybrid of `bit_width` bits from [p, end) into
// `out`. Runs reaching past `count` are cut (a writer pads the last bit-packed group).
Status DecodeHybrid(const uint8_t* p, const uint8_t* end, int bit_width, uint64_t count,
                    std::vector<uint32_t>* out) {
  if (bit_width < 0 || bit_width > 32) {
    return MetadataError("a bit width of " + std::to_string(bit_width) + " (0 to 32 allowed)");
  }
  out->clear();
  out->reserve(count);
  const uint64_t max_value = bit_width == 32 ? UINT32_MAX : (uint64_t{1} << bit_width) - 1;
  while (out->size() < count) {
    ThriftReader header_reader(p, end);  // the same varint
    ZS_ASSIGN_OR_RETURN(uint64_t header, header_reader.Varint());
    p += header_reader.consumed();
    const uint64_t wanted = count - out->size();
    if (header & 1) {  // bit-packed groups of 8 values, least significant bit first
      const uint64_t groups = header >> 1;
      if (bit_width > 0 && groups > static_cast<uint64_t>(end - p) / bit_width) {
        return MetadataError("a bit-packed run longer than its bytes");
      }
      const uint64_t bytes = groups * static_cast<uint64_t>(bit_width);
      const uint64_t n = groups > wanted / 8 ? wanted : groups * 8;
      for (uint64_t i = 0; i < n; ++i) {
        uint64_t value = 0;
        for (int bit = 0; bit < bit_width; ++bit) {
          const uint64_t position = i * static_cast<uint64_t>(bit_width) + bit;
          value |= uint64_t{(p[position / 8] >> (position % 8)) & 1u} << bit;
        }
        out->push_back(static_cast<uint32_t>(value));
      }
      p += bytes;
    } else {  // one value repeated
      const uint64_t run = header >> 1;
      const int value_bytes = (bit_width + 7) / 8;
      if (value_bytes > end - p) return MetadataError("an RLE run's value is cut off");
      uint64_t value = 0;
      for (int i = 0; i < value_bytes; ++i) value |= uint64_t{p[i]} << (8 * i);
      p += value_bytes;
      if (value > max_value) {
        return MetadataError("an RLE value " + std::to_string(value) + " wider than " +
                             std::to_string(bit_width) + " bits");
      }
      out->insert(out->end(), std::min(run, wanted), static_cast<uint32_t>(value));
    }
    if (p == end && out->size() < count) {
      return MetadataError("RLE/bit-packed data ends after " + std::to_string(out->size()) +
                           " of " + std::to_string(count) + " values");
    }
  }
  return Status::Ok();
}

// PLAIN values of one page: `count` values from [p, end) appended to `out` (ints or byte spans).
struct PlainValues {
  std::vector<int64_t> ints;
  std::vector<ColumnValues::Span> spans;  // into the column's bytes
};

Status DecodePlain(PhysicalType type, const uint8_t* p, const uint8_t* end, uint64_t count,
                   PlainValues* out, std::string* bytes) {
  const uint64_t available = static_cast<uint64_t>(end - p);
  if (type == PhysicalType::kInt32 || type == PhysicalType::kInt64) {
    const uint64_t width = type == PhysicalType::kInt32 ? 4 : 8;
    if (count > available / width) {
      return MetadataError(std::to_string(count) + " PLAIN values need more than the page's " +
                           std::to_string(available) + " bytes");
    }
    out->ints.reserve(out->ints.size() + count);
    for (uint64_t i = 0; i < count; ++i, p += width) {
      if (width == 4) {
        int32_t v;
        std::memcpy(&v, p, 4);
        out->ints.push_back(v);
      } else {
        int64_t v;
        std::memcpy(&v, p, 8);
        out->ints.push_back(v);
      }
    }
    return Status::Ok();
  }
  // BYTE_ARRAY: a 4-byte length, then the bytes, for each value.
  if (count > available / 4) {
    return MetadataError(std::to_string(count) + " PLAIN byte arrays need more than the page's " +
                         std::to_string(available) + " bytes");
  }
  out->spans.reserve(out->spans.size() + count);
  for (uint64_t i = 0; i < count; ++i) {
    if (end - p < 4) return MetadataError("a PLAIN byte array's length is cut off");
    uint32_t size;
    std::memcpy(&size, p, 4);
    p += 4;
    if (size > static_cast<uint64_t>(end - p)) {
      return MetadataError("a PLAIN byte array of " + std::to_string(size) +
                           " bytes reaches past its page");
    }
    out->spans.push_back({bytes->size(), size});
    bytes->append(reinterpret_cast<const char*>(p), size);
    p += size;
  }
  return Status::Ok();
}

// Decompresses `in` (codec `codec`) into exactly `size` bytes.
Result<std::vector<uint8_t>> Decompress(int32_t codec, std::span<const uint8_t> in, uint64_t size) {
  std::vector<uint8_t> out;
  if (codec == kUncompressed) {
    if (in.size() != size) {
      return MetadataError("an uncompressed page of " + std::to_string(in.size()) +
                           " bytes says it holds " + std::to_string(size));
    }
    out.assign(in.begin(), in.end());
    return out;
  }
  out.resize(size);
  if (codec == kZstd) {
    const size_t n = ZSTD_decompress(out.data(), out.size(), in.data(), in.size());
    if (ZSTD_isError(n)) {
      return MetadataError(std::string("ZSTD data does not decompress: ") + ZSTD_getErrorName(n));
    }
    if (n != size) {
      return MetadataError("ZSTD data decompresses to " + std::to_string(n) + " bytes, not " +
                           std::to_string(size));
    }
    return out;
  }
  if (codec == kGzip) {
    z_stream stream{};
    if (inflateInit2(&stream, 15 + 32) != Z_OK) return InternalError("inflateInit2 failed");
    stream.next_in = const_cast<uint8_t*>(in.data());
    stream.avail_in = static_cast<uInt>(in.size());
    stream.next_out = out.data();
    stream.avail_out = static_cast<uInt>(out.size());
    const int rc = inflate(&stream, Z_FINISH);
    const uint64_t produced = stream.total_out;
    inflateEnd(&stream);
    if (rc != Z_STREAM_END || produced != size) {
      return MetadataError("GZIP data does not decompress to the " + std::to_string(size) +
                           " bytes the page says it holds");
    }
    return out;
  }
  if (codec == kSnappy) {
    return UnsupportedError(
        "SNAPPY compression: no Snappy decoder is built in (write the references with "
        "compression='zstd', as fsspec and kerchunk do)");
  }
  return UnsupportedError(CodecName(codec) + " compression (UNCOMPRESSED, ZSTD and GZIP are read)");
}

}  // namespace

std::string PhysicalTypeName(PhysicalType type) {
  static constexpr const char* kNames[] = {
      "BOOLEAN", "INT32",  "INT64",      "INT96",
      "FLOAT",   "DOUBLE", "BYTE_ARRAY", "FIXED_LEN_BYTE_ARRAY"};
  const int32_t index = static_cast<int32_t>(type);
  if (index >= 0 && index < 8) return kNames[index];
  return "type " + std::to_string(index);
}

Result<ParquetFile> ParquetFile::Parse(std::span<const std::byte> file, std::string name,
                                       uint64_t max_rows) {
  const auto error = [&](const std::string& what) {
    return MetadataError("Parquet file " + name + ": " + what);
  };
  const auto* bytes = reinterpret_cast<const uint8_t*>(file.data());
  if (file.size() < 12 || std::memcmp(bytes, kMagic.data(), 4) != 0 ||
      std::memcmp(bytes + file.size() - 4, kMagic.data(), 4) != 0) {
    return error("no PAR1 magic at its start and end (not Parquet, or cut off: " +
                 std::to_string(file.size()) + " bytes)");
  }
  uint32_t footer_length;
  std::memcpy(&footer_length, bytes + file.size() - 8, 4);
  if (footer_length > file.size() - 12) {
    return error("a footer of " + std::to_string(footer_length) + " bytes in a file of " +
                 std::to_string(file.size()));
  }
  ParquetFile out;
  out.file_ = file;
  out.name_ = std::move(name);
  out.footer_start_ = file.size() - 8 - footer_length;
  ThriftReader reader(bytes + out.footer_start_, bytes + file.size() - 8);
  Result<FileMetaData> metadata = ReadFileMetaData(reader);
  if (!metadata.ok()) return error("footer: " + metadata.status().message());

  // The schema: a root group, then its columns, none with children.
  const std::vector<SchemaElement>& schema = metadata->schema;
  if (schema.empty()) return error("the footer has no schema");
  if (static_cast<uint64_t>(schema[0].num_children) != schema.size() - 1) {
    return error("a nested schema (the root has " + std::to_string(schema[0].num_children) +
                 " children among " + std::to_string(schema.size() - 1) +
                 " elements; flat tables are read)");
  }
  for (size_t i = 1; i < schema.size(); ++i) {
    const SchemaElement& e = schema[i];
    if (e.num_children != 0 || !e.type) {
      return UnsupportedError("Parquet file " + out.name_ + ": column '" + e.name +
                              "' is a group (nested schemas are not read)");
    }
    const int32_t repetition = e.repetition.value_or(0);
    if (repetition != 0 && repetition != 1) {
      return UnsupportedError("Parquet file " + out.name_ + ": column '" + e.name +
                              "' is REPEATED (flat REQUIRED or OPTIONAL columns are read)");
    }
    out.columns_.push_back({e.name, static_cast<PhysicalType>(*e.type), repetition == 1});
  }

  if (!metadata->num_rows || *metadata->num_rows < 0) return error("no row count");
  if (static_cast<uint64_t>(*metadata->num_rows) > max_rows) {
    return error(std::to_string(*metadata->num_rows) + " rows, more than the " +
                 std::to_string(max_rows) + " expected");
  }
  out.num_rows_ = static_cast<uint64_t>(*metadata->num_rows);
  uint64_t rows = 0;
  for (size_t g = 0; g < metadata->row_groups.size(); ++g) {
    const RowGroup& group = metadata->row_groups[g];
    const std::string where = "row group " + std::to_string(g);
    if (!group.num_rows || *group.num_rows < 0) return error(where + " has no row count");
    if (group.columns.size() != out.columns_.size()) {
      return error(where + " has " + std::to_string(group.columns.size()) + " columns, not " +
                   std::to_string(out.columns_.size()));
    }
    RowGroupInfo info;
    info.num_rows = static_cast<uint64_t>(*group.num_rows);
    rows += info.num_rows;
    if (rows > out.num_rows_) return error("its row groups hold more rows than the file");
    for (size_t c = 0; c < group.columns.size(); ++c) {
      const ColumnChunk& chunk = group.columns[c];
      const std::string column = where + ", column '" + out.columns_[c].name + "'";
      if (chunk.file_path && !chunk.file_path->empty()) {
        return UnsupportedError("Parquet file " + out.name_ + ": " + column +
                                " is in another file (" + *chunk.file_path + ")");
      }
      if (chunk.encrypted) {
        return UnsupportedError("Parquet file " + out.name_ + ": " + column + " is encrypted");
      }
      if (!chunk.meta) return error(column + " has no metadata");
      const ColumnMeta& meta = *chunk.meta;
      if (meta.path.size() != 1 || meta.path[0] != out.columns_[c].name) {
        return error(column + " names another column in its metadata");
      }
      if (!meta.type || *meta.type != static_cast<int32_t>(out.columns_[c].type)) {
        return error(column + ": its type differs from the schema's");
      }
      if (!meta.codec || !meta.num_values || !meta.total_compressed_size ||
          !meta.data_page_offset) {
        return error(column +
                     ": codec, num_values, total_compressed_size or data_page_offset "
                     "is missing");
      }
      ChunkInfo chunk_info;
      chunk_info.codec = *meta.codec;
      int64_t start = *meta.data_page_offset;
      // Some writers record 0 for "no dictionary page".
      if (meta.dictionary_page_offset && *meta.dictionary_page_offset > 0) {
        start = std::min(start, *meta.dictionary_page_offset);
      }
      const uint64_t limit = out.footer_start_;
      if (start < 4 || static_cast<uint64_t>(start) > limit || *meta.total_compressed_size < 0 ||
          static_cast<uint64_t>(*meta.total_compressed_size) > limit - start) {
        return error(column + ": its pages (" + std::to_string(*meta.total_compressed_size) +
                     " bytes from offset " + std::to_string(start) + ") lie outside the file's " +
                     std::to_string(limit) + " bytes of data");
      }
      if (*meta.num_values < 0 || static_cast<uint64_t>(*meta.num_values) != info.num_rows) {
        return error(column + " has " + std::to_string(*meta.num_values) + " values for " +
                     std::to_string(info.num_rows) + " rows");
      }
      chunk_info.start = static_cast<uint64_t>(start);
      chunk_info.end = chunk_info.start + static_cast<uint64_t>(*meta.total_compressed_size);
      chunk_info.num_values = static_cast<uint64_t>(*meta.num_values);
      info.chunks.push_back(chunk_info);
    }
    out.row_groups_.push_back(std::move(info));
  }
  if (rows != out.num_rows_) {
    return error("its row groups hold " + std::to_string(rows) + " rows, the file says " +
                 std::to_string(out.num_rows_));
  }
  return out;
}

int ParquetFile::FindColumn(std::string_view name) const {
  for (size_t i = 0; i < columns_.size(); ++i) {
    if (columns_[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

Result<ColumnValues> ParquetFile::ReadColumn(size_t column) const {
  const ColumnSchema& schema = columns_.at(column);
  if (schema.type != PhysicalType::kInt32 && schema.type != PhysicalType::kInt64 &&
      schema.type != PhysicalType::kByteArray) {
    return UnsupportedError("Parquet file " + name_ + ", column '" + schema.name + "': type " +
                            PhysicalTypeName(schema.type) +
                            " (INT32, INT64 and BYTE_ARRAY are read)");
  }
  ColumnValues values;
  values.present.reserve(num_rows_);
  uint64_t decoded_bytes = 0;
  for (size_t g = 0; g < row_groups_.size(); ++g) {
    ZS_RETURN_IF_ERROR_CTX(ReadChunk(column, row_groups_[g], &values, &decoded_bytes),
                           "Parquet file " + name_ + ", row group " + std::to_string(g) +
                               ", column '" + schema.name + "'");
  }
  return values;
}

Status ParquetFile::ReadChunk(size_t column, const RowGroupInfo& group, ColumnValues* out,
                              uint64_t* decoded_bytes) const {
  const ColumnSchema& schema = columns_[column];
  const ChunkInfo& chunk = group.chunks[column];
  const auto* bytes = reinterpret_cast<const uint8_t*>(file_.data());
  const bool ints = schema.type != PhysicalType::kByteArray;
  std::optional<PlainValues> dictionary;
  PlainValues page_values;
  std::vector<uint32_t> levels, indices;
  uint64_t read = 0;  // values (rows) of this chunk read so far
  uint64_t position = chunk.start;
  while (read < chunk.num_values) {
    if (position >= chunk.end) {
      return MetadataError("its pages end after " + std::to_string(read) + " of " +
                           std::to_string(chunk.num_values) + " values");
    }
    ThriftReader reader(bytes + position, bytes + chunk.end);
    Result<PageHeader> header = ReadPageHeader(reader);
    if (!header.ok()) {
      return header.status().WithContext("the page header at offset " + std::to_string(position));
    }
    const PageHeader& h = *header;
    const std::string page = "the page at offset " + std::to_string(position);
    position += reader.consumed();
    if (h.compressed_size < 0 || static_cast<uint64_t>(h.compressed_size) > chunk.end - position) {
      return MetadataError(page + ": " + std::to_string(h.compressed_size) +
                           " bytes reach past the column chunk");
    }
    if (h.uncompressed_size < 0 || static_cast<uint64_t>(h.uncompressed_size) > kMaxPageBytes) {
      return MetadataError(page + " says it holds " + std::to_string(h.uncompressed_size) +
                           " bytes (at most " + std::to_string(kMaxPageBytes) + " are read)");
    }
    const std::span<const uint8_t> body(bytes + position, static_cast<size_t>(h.compressed_size));
    position += static_cast<uint64_t>(h.compressed_size);
    if (h.type == kIndexPage) continue;
    if (h.type != kDataPage && h.type != kDictionaryPage && h.type != kDataPageV2) {
      return MetadataError(page + " has page type " + std::to_string(h.type));
    }
    *decoded_bytes += static_cast<uint64_t>(h.uncompressed_size);
    if (*decoded_bytes > kMaxDecodedBytes) {
      return MetadataError("its pages decompress to more than " + std::to_string(kMaxDecodedBytes) +
                           " bytes");
    }
    if (h.type == kDictionaryPage) {
      if (!h.has_dictionary_header || h.num_values < 0) {
        return MetadataError(page + ": a dictionary page without its header");
      }
      if (dictionary || read > 0) {
        return MetadataError(page + ": a dictionary page after the first page");
      }
      if (h.encoding != kPlain && h.encoding != kPlainDictionary) {
        return UnsupportedError(page + ": a dictionary page in " + EncodingName(h.encoding) +
                                " (PLAIN is read)");
      }
      ZS_ASSIGN_OR_RETURN_CTX(
          std::vector<uint8_t> data,
          Decompress(chunk.codec, body, static_cast<uint64_t>(h.uncompressed_size)), page);
      dictionary.emplace();
      ZS_RETURN_IF_ERROR_CTX(
          DecodePlain(schema.type, data.data(), data.data() + data.size(),
                      static_cast<uint64_t>(h.num_values), &*dictionary, &out->bytes),
          page);
      continue;
    }
    const bool v2 = h.type == kDataPageV2;
    if (!(v2 ? h.has_v2_header : h.has_data_header) || h.num_values < 0) {
      return MetadataError(page + ": a data page without its header");
    }
    const uint64_t count = static_cast<uint64_t>(h.num_values);
    if (count > chunk.num_values - read) {
      return MetadataError(page + " holds " + std::to_string(count) + " values, past the " +
                           std::to_string(chunk.num_values) + " of its column chunk");
    }
    // The page's bytes: v1 compresses levels and values together; v2 stores the levels
    // uncompressed before the (maybe compressed) values.
    std::vector<uint8_t> data;
    const uint8_t* levels_begin = nullptr;
    const uint8_t* levels_end = nullptr;
    const uint8_t* values_begin = nullptr;
    const uint8_t* values_end = nullptr;
    if (!v2) {
      ZS_ASSIGN_OR_RETURN_CTX(
          data, Decompress(chunk.codec, body, static_cast<uint64_t>(h.uncompressed_size)), page);
      values_begin = data.data();
      values_end = data.data() + data.size();
      if (schema.optional) {
        if (h.definition_level_encoding != kRle) {
          return UnsupportedError(page + ": definition levels in " +
                                  EncodingName(h.definition_level_encoding) + " (RLE is read)");
        }
        if (values_end - values_begin < 4) return MetadataError(page + ": no definition levels");
        uint32_t length;
        std::memcpy(&length, values_begin, 4);
        if (length > static_cast<uint64_t>(values_end - values_begin - 4)) {
          return MetadataError(page + ": definition levels reach past the page");
        }
        levels_begin = values_begin + 4;
        levels_end = levels_begin + length;
        values_begin = levels_end;
      }
    } else {
      if (h.repetition_levels_length != 0) {
        return UnsupportedError(page + ": repetition levels (flat columns are read)");
      }
      if (h.definition_levels_length < 0 || h.definition_levels_length > h.compressed_size ||
          h.definition_levels_length > h.uncompressed_size) {
        return MetadataError(page + ": definition levels reach past the page");
      }
      const size_t level_bytes = static_cast<size_t>(h.definition_levels_length);
      const std::span<const uint8_t> compressed = body.subspan(level_bytes);
      const uint64_t values_size = static_cast<uint64_t>(h.uncompressed_size) - level_bytes;
      if (h.is_compressed) {
        ZS_ASSIGN_OR_RETURN_CTX(data, Decompress(chunk.codec, compressed, values_size), page);
      } else {
        ZS_ASSIGN_OR_RETURN_CTX(data, Decompress(kUncompressed, compressed, values_size), page);
      }
      values_begin = data.data();
      values_end = data.data() + data.size();
      levels_begin = body.data();
      levels_end = body.data() + level_bytes;
      if (schema.optional && level_bytes == 0 && h.num_nulls != 0) {
        return MetadataError(page + ": nulls without definition levels");
      }
    }
    // Which rows have a value.
    uint64_t non_null = count;
    const size_t first_row = out->present.size();
    if (schema.optional && levels_begin != levels_end) {
      ZS_RETURN_IF_ERROR_CTX(DecodeHybrid(levels_begin, levels_end, 1, count, &levels),
                             page + ": definition levels");
      non_null = 0;
      for (uint32_t level : levels) {
        out->present.push_back(static_cast<uint8_t>(level));
        non_null += level;
      }
    } else {
      out->present.insert(out->present.end(), count, 1);
    }
    // The values of those rows.
    page_values.ints.clear();
    page_values.spans.clear();
    if (h.encoding == kPlain) {
      ZS_RETURN_IF_ERROR_CTX(
          DecodePlain(schema.type, values_begin, values_end, non_null, &page_values, &out->bytes),
          page);
    } else if (h.encoding == kPlainDictionary || h.encoding == kRleDictionary) {
      if (!dictionary) return MetadataError(page + " is dictionary-encoded, with no dictionary");
      if (non_null > 0) {
        if (values_begin == values_end) return MetadataError(page + ": no dictionary indices");
        const int bit_width = *values_begin;
        ZS_RETURN_IF_ERROR_CTX(
            DecodeHybrid(values_begin + 1, values_end, bit_width, non_null, &indices),
            page + ": dictionary indices");
        const uint64_t size = ints ? dictionary->ints.size() : dictionary->spans.size();
        for (uint32_t index : indices) {
          if (index >= size) {
            return MetadataError(page + ": dictionary index " + std::to_string(index) +
                                 " of a dictionary of " + std::to_string(size));
          }
          if (ints) {
            page_values.ints.push_back(dictionary->ints[index]);
          } else {
            page_values.spans.push_back(dictionary->spans[index]);
          }
        }
      }
    } else {
      return UnsupportedError(page + ": values in " + EncodingName(h.encoding) +
                              " (PLAIN and dictionary encodings are read)");
    }
    // Spread the values over the rows, nulls getting zeros.
    size_t next = 0;
    for (size_t row = first_row; row < out->present.size(); ++row) {
      const bool present = out->present[row] != 0;
      if (ints) {
        out->ints.push_back(present ? page_values.ints[next] : 0);
      } else {
        out->spans.push_back(present ? page_values.spans[next] : ColumnValues::Span{});
      }
      next += present ? 1 : 0;
    }
    read += count;
  }
  return Status::Ok();
}

}  // namespace zarrstream::parquet

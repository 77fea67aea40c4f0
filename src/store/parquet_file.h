// A reader of the part of Apache Parquet that fsspec's Parquet reference sets use
// (reference_store.h): flat tables whose columns are read whole.
//
// What is read, and nothing else (anything beyond it is an error naming the file, the column and
// what was found):
//   - the footer: "PAR1", then FileMetaData in Thrift's compact protocol (a decoder of just the
//     structs and fields needed here; unknown fields are skipped), its length and "PAR1";
//   - flat schemas: a root group of REQUIRED or OPTIONAL columns (no nesting, no REPEATED);
//   - physical types INT32, INT64 and BYTE_ARRAY;
//   - data pages v1 and v2 and dictionary pages; values PLAIN or dictionary-encoded
//     (PLAIN_DICTIONARY, RLE_DICTIONARY); definition levels in the RLE/bit-packed hybrid;
//   - codecs UNCOMPRESSED, ZSTD and GZIP (SNAPPY, pyarrow's default, is refused: no Snappy
//     decoder is built in; fsspec and kerchunk write ZSTD).
//
// Hostile files: every offset, length and count is checked against the bytes that hold it, so a
// corrupt file is a kMetadata error, never a read outside the file; allocations are bounded by
// the file's size, by `max_rows` (the caller's bound on the table's rows) and by a cap on the
// bytes that decompression may produce (kMaxPageBytes per page, kMaxDecodedBytes per file).
//
// Threads: a ParquetFile is immutable once parsed; ReadColumn may be called from any thread.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "zarrstream/status.h"

namespace zarrstream::parquet {

// Parquet's physical types (the Thrift enum's values).
enum class PhysicalType : int32_t {
  kBoolean = 0,
  kInt32 = 1,
  kInt64 = 2,
  kInt96 = 3,
  kFloat = 4,
  kDouble = 5,
  kByteArray = 6,
  kFixedLenByteArray = 7,
};
std::string PhysicalTypeName(PhysicalType type);

// Bounds on what decompression may produce: one page, and all pages of one file.
inline constexpr uint64_t kMaxPageBytes = uint64_t{256} << 20;
inline constexpr uint64_t kMaxDecodedBytes = uint64_t{1} << 30;

struct ColumnSchema {
  std::string name;
  PhysicalType type = PhysicalType::kBoolean;
  bool optional = false;  // OPTIONAL: values may be null (definition levels are stored)
};

// The values of one column, a value or a null for every row of the file.
struct ColumnValues {
  struct Span {
    uint64_t offset = 0;
    uint32_t size = 0;
  };
  std::vector<uint8_t> present;  // per row: 0 for a null
  std::vector<int64_t> ints;     // INT32 and INT64: per row (0 for a null)
  // BYTE_ARRAY: per row, where its bytes are in `bytes` (empty for a null). The rows of a
  // dictionary-encoded column share the dictionary's bytes.
  std::vector<Span> spans;
  std::string bytes;

  bool is_null(size_t row) const { return present[row] == 0; }
  std::string_view bytes_of(size_t row) const {
    return std::string_view(bytes).substr(spans[row].offset, spans[row].size);
  }
  // The memory the values hold, for caches.
  uint64_t memory_bytes() const {
    return present.size() + ints.size() * sizeof(int64_t) + spans.size() * sizeof(Span) +
           bytes.size();
  }
};

class ParquetFile {
 public:
  // Parses the footer of `file`, whose bytes must outlive the ParquetFile. `name` names the file
  // in messages. A table of more than `max_rows` rows is a kMetadata error.
  static Result<ParquetFile> Parse(std::span<const std::byte> file, std::string name,
                                   uint64_t max_rows);

  uint64_t num_rows() const { return num_rows_; }
  const std::vector<ColumnSchema>& columns() const { return columns_; }
  // The index of the column called `name`, or -1.
  int FindColumn(std::string_view name) const;
  // Decodes column `column` (an index into columns()) of every row group.
  Result<ColumnValues> ReadColumn(size_t column) const;

  // Where a column's pages are in one row group (public for the footer parser).
  struct ChunkInfo {
    int32_t codec = 0;
    uint64_t start = 0;  // the first page: the dictionary page's offset, else the data page's
    uint64_t end = 0;    // start + total_compressed_size
    uint64_t num_values = 0;
  };
  struct RowGroupInfo {
    uint64_t num_rows = 0;
    std::vector<ChunkInfo> chunks;  // one per column, in schema order
  };

 private:
  ParquetFile() = default;
  Status ReadChunk(size_t column, const RowGroupInfo& group, ColumnValues* out,
                   uint64_t* decoded_bytes) const;

  std::span<const std::byte> file_;
  std::string name_;
  uint64_t footer_start_ = 0;
  uint64_t num_rows_ = 0;
  std::vector<ColumnSchema> columns_;
  std::vector<RowGroupInfo> row_groups_;
};

}  // namespace zarrstream::parquet

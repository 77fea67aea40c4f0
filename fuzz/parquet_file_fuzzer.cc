// libFuzzer target: Parquet files, as the record files of a Parquet reference set.
//
// The input is one whole file. ParquetFile::Parse reads its footer (Thrift compact protocol) and
// every column is decoded (pages, levels, dictionaries, ZSTD and GZIP). Bad input must come back
// as an error (kMetadata, or kUnsupported for what is not read), never kInternal, a crash or an
// allocation beyond the run's memory limit.
#include <cstddef>
#include <cstdint>
#include <span>

#include "fuzz/fuzz_check.h"
#include "store/parquet_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace zarrstream;
  auto file = parquet::ParquetFile::Parse(std::as_bytes(std::span(data, size)), "fuzz.parq",
                                          uint64_t{1} << 16);
  if (!file.ok()) {
    fuzz::CheckNotInternal(file.status(), "ParquetFile::Parse");
    return 0;
  }
  for (size_t c = 0; c < file->columns().size(); ++c) {
    auto values = file->ReadColumn(c);
    if (!values.ok()) {
      fuzz::CheckNotInternal(values.status(), "ParquetFile::ReadColumn");
      continue;
    }
    // Every row has a value or a null, and a byte array's bytes lie in the column's buffer.
    if (values->present.size() != file->num_rows()) fuzz::FuzzFail("rows lost");
    for (size_t row = 0; row < values->spans.size(); ++row) {
      const auto& span = values->spans[row];
      if (span.offset > values->bytes.size() || span.size > values->bytes.size() - span.offset) {
        fuzz::FuzzFail("a byte array outside the column's bytes");
      }
    }
  }
  return 0;
}

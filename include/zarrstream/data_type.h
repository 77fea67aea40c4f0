// The Zarr core data types, shared by the metadata model, codecs and the public API.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "zarrstream/status.h"

namespace zarrstream {

enum class DataType : uint8_t {
  kBool,
  kInt8,
  kInt16,
  kInt32,
  kInt64,
  kUInt8,
  kUInt16,
  kUInt32,
  kUInt64,
  kFloat16,
  kFloat32,
  kFloat64,
  kComplex64,
  kComplex128,
};

// Size of one element in bytes.
size_t DataTypeSize(DataType type);

// Size of the unit byte order applies to: the element size, or half of it for complex types.
size_t DataTypeComponentSize(DataType type);

// The Zarr v3 name ("float32", "complex64", "bool").
std::string_view DataTypeName(DataType type);

// Parses a Zarr v3 data type name.
Result<DataType> ParseDataTypeName(std::string_view name);

// The numpy type string of the native-endian type ("<f4", "|u1", "|b1", "<c8").
std::string NumpyTypeString(DataType type);

bool IsFloatingPoint(DataType type);  // float16/32/64
bool IsComplex(DataType type);
bool IsSignedInteger(DataType type);
bool IsUnsignedInteger(DataType type);

// A data type beyond Zarr's numeric core, as zarr-python and xarray write them: strings, bytes,
// JSON objects, and numpy's datetime64/timedelta64. Arrays of these are read on the CPU only
// (Array::Read for the time types, Array::ReadText for the others); the loader, the GPU path and
// `stats` take numeric arrays only.
struct ExtendedType {
  enum class Kind : uint8_t {
    // numpy datetime64/timedelta64: int64 counts of `scale_factor` `unit`s (since 1970-01-01 for
    // datetime64), stored and read as int64 (the array's DataType); INT64_MIN is NaT.
    kDateTime64,
    kTimeDelta64,
    // Variable-length UTF-8 text (v3 "string", v2 "|O" with the vlen-utf8 codec).
    kString,
    // Variable-length bytes (v3 "variable_length_bytes" or "bytes", v2 "|O" with vlen-bytes).
    kBytes,
    // Any JSON value per element (v2 "|O" with numcodecs' json2 codec).
    kJson,
    // numpy "<U*": length_bytes / 4 UTF-32 code points, NUL-padded (v3 "fixed_length_utf32").
    kFixedUtf32,
    // numpy "|S*": length_bytes bytes, NUL-padded (v3 "null_terminated_bytes").
    kFixedBytes,
  };
  Kind kind = Kind::kString;
  std::string unit;           // time kinds: numpy's unit ("ns", "s", "D", ...)
  uint32_t scale_factor = 1;  // time kinds: "<M8[10s]" has unit "s" and scale_factor 10
  uint64_t length_bytes = 0;  // fixed-length kinds: bytes per element

  bool is_time() const { return kind == Kind::kDateTime64 || kind == Kind::kTimeDelta64; }
  // Text kinds are read as their elements' bytes (Array::ReadText), not as fixed-size values.
  bool is_text() const { return !is_time(); }
  // numpy's type string: "<M8[ns]", "<m8[10s]", "|O" (vlen kinds), "<U4", "|S3".
  std::string NumpyTypeString() const;
  // The name for messages and `inspect`: the v3 name ("string", "numpy.datetime64[ns]").
  std::string Name() const;
  bool operator==(const ExtendedType&) const = default;
};

}  // namespace zarrstream

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

}  // namespace zarrstream

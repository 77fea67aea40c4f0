#include "zarrstream/data_type.h"

#include <array>
#include <bit>

namespace zarrstream {
namespace {

struct DataTypeInfo {
  DataType type;
  std::string_view name;  // Zarr v3 name
  size_t size;
  char numpy_kind;  // numpy's kind character: b, i, u, f, c
};

// Indexed by the enum's value; the static_assert in DataTypeInfoOf keeps the two in step.
constexpr std::array<DataTypeInfo, 14> kDataTypes = {{
    {DataType::kBool, "bool", 1, 'b'},
    {DataType::kInt8, "int8", 1, 'i'},
    {DataType::kInt16, "int16", 2, 'i'},
    {DataType::kInt32, "int32", 4, 'i'},
    {DataType::kInt64, "int64", 8, 'i'},
    {DataType::kUInt8, "uint8", 1, 'u'},
    {DataType::kUInt16, "uint16", 2, 'u'},
    {DataType::kUInt32, "uint32", 4, 'u'},
    {DataType::kUInt64, "uint64", 8, 'u'},
    {DataType::kFloat16, "float16", 2, 'f'},
    {DataType::kFloat32, "float32", 4, 'f'},
    {DataType::kFloat64, "float64", 8, 'f'},
    {DataType::kComplex64, "complex64", 8, 'c'},
    {DataType::kComplex128, "complex128", 16, 'c'},
}};

constexpr bool TableMatchesEnum() {
  for (size_t i = 0; i < kDataTypes.size(); ++i) {
    if (static_cast<size_t>(kDataTypes[i].type) != i) return false;
  }
  return true;
}
static_assert(TableMatchesEnum(), "kDataTypes must list DataType in enum order");

const DataTypeInfo& InfoOf(DataType type) {
  size_t index = static_cast<size_t>(type);
  // An out-of-range value can only come from a bad cast; map it somewhere harmless rather than
  // reading past the table.
  return kDataTypes[index < kDataTypes.size() ? index : 0];
}

}  // namespace

size_t DataTypeSize(DataType type) { return InfoOf(type).size; }

size_t DataTypeComponentSize(DataType type) {
  return IsComplex(type) ? DataTypeSize(type) / 2 : DataTypeSize(type);
}

std::string_view DataTypeName(DataType type) { return InfoOf(type).name; }

Result<DataType> ParseDataTypeName(std::string_view name) {
  for (const DataTypeInfo& info : kDataTypes) {
    if (info.name == name) return info.type;
  }
  return UnsupportedError("unsupported data type '" + std::string(name) + "'");
}

std::string NumpyTypeString(DataType type) {
  const DataTypeInfo& info = InfoOf(type);
  char order = '|';
  if (info.size > 1) order = std::endian::native == std::endian::little ? '<' : '>';
  return std::string(1, order) + info.numpy_kind + std::to_string(info.size);
}

bool IsFloatingPoint(DataType type) { return InfoOf(type).numpy_kind == 'f'; }
bool IsComplex(DataType type) { return InfoOf(type).numpy_kind == 'c'; }
bool IsSignedInteger(DataType type) { return InfoOf(type).numpy_kind == 'i'; }
bool IsUnsignedInteger(DataType type) { return InfoOf(type).numpy_kind == 'u'; }

namespace {

// "ns", or "10s" for a scale factor other than 1: numpy's spelling inside "M8[...]".
std::string TimeUnitText(const ExtendedType& type) {
  return type.scale_factor == 1 ? type.unit : std::to_string(type.scale_factor) + type.unit;
}

}  // namespace

std::string ExtendedType::NumpyTypeString() const {
  const char order = std::endian::native == std::endian::little ? '<' : '>';
  switch (kind) {
    case Kind::kDateTime64:
      return std::string(1, order) + "M8[" + TimeUnitText(*this) + "]";
    case Kind::kTimeDelta64:
      return std::string(1, order) + "m8[" + TimeUnitText(*this) + "]";
    case Kind::kFixedUtf32:
      return std::string(1, order) + "U" + std::to_string(length_bytes / 4);
    case Kind::kFixedBytes:
      return "|S" + std::to_string(length_bytes);
    case Kind::kString:
    case Kind::kBytes:
    case Kind::kJson:
      break;
  }
  return "|O";
}

std::string ExtendedType::Name() const {
  switch (kind) {
    case Kind::kDateTime64:
      return "numpy.datetime64[" + TimeUnitText(*this) + "]";
    case Kind::kTimeDelta64:
      return "numpy.timedelta64[" + TimeUnitText(*this) + "]";
    case Kind::kString:
      return "string";
    case Kind::kBytes:
      return "variable_length_bytes";
    case Kind::kJson:
      return "object (json2)";
    case Kind::kFixedUtf32:
      return "fixed_length_utf32[" + std::to_string(length_bytes) + "]";
    case Kind::kFixedBytes:
      return "null_terminated_bytes[" + std::to_string(length_bytes) + "]";
  }
  return "unknown";
}

}  // namespace zarrstream

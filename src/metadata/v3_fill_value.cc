// Zarr v3 fill values: the JSON forms of the spec (numbers, "NaN"/"Infinity", hex bit patterns,
// [real, imaginary] pairs, byte lists) to the bytes of one element, and back.
#include "metadata/v3_fill_value.h"

#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <string>

#include "metadata/float16.h"
#include "metadata/metadata_parsing.h"
#include "metadata/v3_metadata.h"

namespace zarrstream {
namespace {

using nlohmann::json;

// The bit patterns the spec's "NaN" stands for: the canonical quiet NaN of each width.
constexpr uint16_t kFloat16NaN = 0x7e00;
constexpr uint32_t kFloat32NaN = 0x7fc00000;
constexpr uint64_t kFloat64NaN = 0x7ff8000000000000;

// Appends the low `size` bytes of `bits` in native byte order.
void AppendBits(uint64_t bits, size_t size, std::vector<std::byte>* out) {
  auto append = [out](auto value) {
    std::array<std::byte, sizeof(value)> bytes;
    std::memcpy(bytes.data(), &value, sizeof(value));
    out->insert(out->end(), bytes.begin(), bytes.end());
  };
  switch (size) {
    case 1:
      append(static_cast<uint8_t>(bits));
      break;
    case 2:
      append(static_cast<uint16_t>(bits));
      break;
    case 4:
      append(static_cast<uint32_t>(bits));
      break;
    default:
      append(bits);
      break;
  }
}

// Reads `size` bytes of native byte order as an unsigned integer.
uint64_t ReadBits(const std::byte* data, size_t size) {
  switch (size) {
    case 1: {
      uint8_t v;
      std::memcpy(&v, data, 1);
      return v;
    }
    case 2: {
      uint16_t v;
      std::memcpy(&v, data, 2);
      return v;
    }
    case 4: {
      uint32_t v;
      std::memcpy(&v, data, 4);
      return v;
    }
    default: {
      uint64_t v;
      std::memcpy(&v, data, 8);
      return v;
    }
  }
}

uint64_t CanonicalNaNBits(size_t size) {
  switch (size) {
    case 2:
      return kFloat16NaN;
    case 4:
      return kFloat32NaN;
    default:
      return kFloat64NaN;
  }
}

uint64_t InfinityBits(size_t size, bool negative) {
  uint64_t sign = negative ? uint64_t{1} << (8 * size - 1) : 0;
  switch (size) {
    case 2:
      return sign | 0x7c00;
    case 4:
      return sign | 0x7f800000;
    default:
      return sign | 0x7ff0000000000000;
  }
}

std::string_view FloatTypeName(size_t size) {
  switch (size) {
    case 2:
      return "float16";
    case 4:
      return "float32";
    default:
      return "float64";
  }
}

// "0x" followed by exactly 2 * size hex digits: the value's bit pattern, most significant first.
std::optional<uint64_t> ParseHexBits(std::string_view text, size_t size) {
  if (text.size() != 2 + 2 * size || text.substr(0, 2) != "0x") return std::nullopt;
  uint64_t bits = 0;
  for (char c : text.substr(2)) {
    int digit = 0;
    if (c >= '0' && c <= '9') {
      digit = c - '0';
    } else if (c >= 'a' && c <= 'f') {
      digit = c - 'a' + 10;
    } else if (c >= 'A' && c <= 'F') {
      digit = c - 'A' + 10;
    } else {
      return std::nullopt;
    }
    bits = (bits << 4) | static_cast<uint64_t>(digit);
  }
  return bits;
}

std::string FormatHexBits(uint64_t bits, size_t size) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string text = "0x";
  for (int shift = static_cast<int>(8 * size) - 4; shift >= 0; shift -= 4) {
    text += kDigits[(bits >> shift) & 0xf];
  }
  return text;
}

// Rounds a double to float32 bits. Converting a double beyond float's range is undefined
// behaviour in C++, so out-of-range values are handled here: those that round to FLT_MAX
// (below FLT_MAX + half an ulp, 2^103) are clamped, the rest are errors.
std::optional<uint32_t> DoubleToFloat32Bits(double value) {
  constexpr double kMax = std::numeric_limits<float>::max();
  const double overflow_threshold = kMax + std::ldexp(1.0, 103);
  if (std::isnan(value)) return kFloat32NaN;
  if (std::isinf(value)) return static_cast<uint32_t>(InfinityBits(4, value < 0));
  if (std::fabs(value) >= overflow_threshold) return std::nullopt;
  constexpr float kFloatMax = std::numeric_limits<float>::max();
  float rounded =
      std::fabs(value) <= kMax ? static_cast<float>(value) : (value > 0 ? kFloatMax : -kFloatMax);
  return std::bit_cast<uint32_t>(rounded);
}

// One floating-point value (a float fill value or a complex part) in any spec form, as the bits of
// a `size`-byte IEEE float.
Result<uint64_t> ParseFloatBits(const json& value, size_t size) {
  const std::string_view type_name = FloatTypeName(size);
  if (value.is_string()) {
    const std::string& text = value.get_ref<const std::string&>();
    if (text == "NaN") return CanonicalNaNBits(size);
    if (text == "Infinity") return InfinityBits(size, false);
    if (text == "-Infinity") return InfinityBits(size, true);
    if (text.starts_with("0x")) {
      std::optional<uint64_t> bits = ParseHexBits(text, size);
      if (!bits) {
        return MetadataError("hex value " + DescribeJson(value) + " for " + std::string(type_name) +
                             " must be \"0x\" and exactly " + std::to_string(2 * size) +
                             " hex digits");
      }
      return *bits;
    }
  } else if (value.is_number()) {
    const double number = value.get<double>();
    switch (size) {
      case 2: {
        uint16_t bits = DoubleToFloat16Bits(number);
        if (std::isfinite(number) && (bits & 0x7fff) == 0x7c00) break;
        return bits;
      }
      case 4: {
        std::optional<uint32_t> bits = DoubleToFloat32Bits(number);
        if (!bits) break;
        return *bits;
      }
      default:
        return std::bit_cast<uint64_t>(number);
    }
    return MetadataError("value " + DescribeJson(value) + " is out of range for " +
                         std::string(type_name));
  }
  return MetadataError(
      "expected a number, \"NaN\", \"Infinity\", \"-Infinity\" or a hex string "
      "for " +
      std::string(type_name) + ", got " + DescribeJson(value));
}

struct IntegerRange {
  int64_t min;
  uint64_t max;
};

IntegerRange RangeOf(DataType type) {
  switch (type) {
    case DataType::kInt8:
      return {INT8_MIN, INT8_MAX};
    case DataType::kInt16:
      return {INT16_MIN, INT16_MAX};
    case DataType::kInt32:
      return {INT32_MIN, INT32_MAX};
    case DataType::kInt64:
      return {INT64_MIN, INT64_MAX};
    case DataType::kUInt8:
      return {0, UINT8_MAX};
    case DataType::kUInt16:
      return {0, UINT16_MAX};
    case DataType::kUInt32:
      return {0, UINT32_MAX};
    default:
      return {0, UINT64_MAX};
  }
}

// The integer's two's complement bits (truncated to the type's size by AppendBits).
Result<uint64_t> ParseIntegerBits(const json& value, DataType type) {
  const std::string type_name(DataTypeName(type));
  if (!value.is_number_integer()) {
    return MetadataError("expected an integer for " + type_name + ", got " + DescribeJson(value));
  }
  const IntegerRange range = RangeOf(type);
  // nlohmann stores non-negative literals as unsigned and negative ones as signed.
  if (!value.is_number_unsigned() && value.get<int64_t>() < 0) {
    const int64_t v = value.get<int64_t>();
    if (v >= range.min) return static_cast<uint64_t>(v);
  } else {
    const uint64_t v = value.is_number_unsigned() ? value.get<uint64_t>()
                                                  : static_cast<uint64_t>(value.get<int64_t>());
    if (v <= range.max) return v;
  }
  return MetadataError("value " + DescribeJson(value) + " is out of range for " + type_name);
}

json FloatBitsToJson(uint64_t bits, size_t size) {
  double value = 0;
  switch (size) {
    case 2:
      value = Float16BitsToDouble(static_cast<uint16_t>(bits));
      break;
    case 4:
      value = std::bit_cast<float>(static_cast<uint32_t>(bits));
      break;
    default:
      value = std::bit_cast<double>(bits);
      break;
  }
  if (std::isnan(value)) {
    // "NaN" means the canonical NaN; any other payload or sign is kept exactly as a hex pattern.
    return bits == CanonicalNaNBits(size) ? json("NaN") : json(FormatHexBits(bits, size));
  }
  if (std::isinf(value)) return value > 0 ? "Infinity" : "-Infinity";
  return value;
}

}  // namespace

Result<std::vector<std::byte>> ParseFillValueBytes(const json& value, DataType type) {
  std::vector<std::byte> bytes;
  bytes.reserve(DataTypeSize(type));
  if (type == DataType::kBool) {
    if (!value.is_boolean())
      return MetadataError("expected true or false, got " + DescribeJson(value));
    AppendBits(value.get<bool>() ? 1 : 0, 1, &bytes);
  } else if (IsSignedInteger(type) || IsUnsignedInteger(type)) {
    ZS_ASSIGN_OR_RETURN(uint64_t bits, ParseIntegerBits(value, type));
    AppendBits(bits, DataTypeSize(type), &bytes);
  } else if (IsFloatingPoint(type)) {
    ZS_ASSIGN_OR_RETURN(uint64_t bits, ParseFloatBits(value, DataTypeSize(type)));
    AppendBits(bits, DataTypeSize(type), &bytes);
  } else {
    const size_t part_size = DataTypeComponentSize(type);
    if (!value.is_array() || value.size() != 2) {
      return MetadataError("expected [real, imaginary] for " + std::string(DataTypeName(type)) +
                           ", got " + DescribeJson(value));
    }
    ZS_ASSIGN_OR_RETURN_CTX(uint64_t real, ParseFloatBits(value[0], part_size), "real part");
    ZS_ASSIGN_OR_RETURN_CTX(uint64_t imag, ParseFloatBits(value[1], part_size), "imaginary part");
    AppendBits(real, part_size, &bytes);
    AppendBits(imag, part_size, &bytes);
  }
  return bytes;
}

json FillValueToJson(std::vector<std::byte> bytes, DataType type) {
  // A hand-built model may carry the wrong number of bytes; missing ones read as zero.
  bytes.resize(DataTypeSize(type));
  if (type == DataType::kBool) return bytes[0] != std::byte{0};
  if (IsSignedInteger(type)) {
    const uint64_t bits = ReadBits(bytes.data(), bytes.size());
    switch (type) {
      case DataType::kInt8:
        return static_cast<int8_t>(bits);
      case DataType::kInt16:
        return static_cast<int16_t>(bits);
      case DataType::kInt32:
        return static_cast<int32_t>(bits);
      default:
        return static_cast<int64_t>(bits);
    }
  }
  if (IsUnsignedInteger(type)) return ReadBits(bytes.data(), bytes.size());
  if (IsFloatingPoint(type))
    return FloatBitsToJson(ReadBits(bytes.data(), bytes.size()), bytes.size());
  const size_t part = DataTypeComponentSize(type);
  return json::array({FloatBitsToJson(ReadBits(bytes.data(), part), part),
                      FloatBitsToJson(ReadBits(bytes.data() + part, part), part)});
}

Result<std::vector<std::byte>> ParseV3FillValue(const json& value, DataType type) {
  try {
    Result<std::vector<std::byte>> bytes = ParseFillValueBytes(value, type);
    if (!bytes.ok()) return bytes.status().WithContext("field 'fill_value'");
    return bytes;
  } catch (const json::exception& e) {
    return MetadataError(std::string("field 'fill_value': ") + e.what());
  }
}

}  // namespace zarrstream

#include "dataset/cf_decoding.h"

#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "array/array_state.h"
#include "metadata/float16.h"
#include "util/base64.h"

namespace zarrstream {

namespace {

using nlohmann::json;

// CF decoding reads a single view of the attributes: the array's name for messages and the JSON.
struct CfSource {
  const internal::ArrayState& state;
  const json& attributes;

  Status Error(const std::string& attribute, const std::string& what) const {
    return MetadataError(state.Describe() + ": attribute '" + attribute + "' " + what);
  }
};

std::string Quote(const json& value) {
  std::string text = value.dump();
  if (text.size() > 60) text = text.substr(0, 57) + "...";
  return text;
}

// A scale_factor or add_offset: a number, or a list of one number (netCDF attributes are arrays;
// xarray takes the item). null counts as absent.
Result<std::optional<double>> PackingNumber(const CfSource& source, const char* attribute) {
  auto it = source.attributes.find(attribute);
  if (it == source.attributes.end() || it->is_null()) return std::optional<double>();
  const json* value = &*it;
  if (value->is_array() && value->size() == 1) value = &(*value)[0];
  if (!value->is_number()) {
    return source.Error(attribute, "is " + Quote(*it) + ", not a number");
  }
  return std::optional<double>(value->get<double>());
}

// The float64 whose 8 little-endian bytes `text` encodes in base64: how xarray writes a float
// _FillValue into Zarr v3 attributes. nullopt for other text.
std::optional<double> Base64Double(const std::string& text) {
  Result<std::string> bytes = DecodeBase64(text);
  if (!bytes.ok() || bytes->size() != sizeof(double)) return std::nullopt;
  uint64_t little = 0;
  for (size_t i = 0; i < sizeof(double); ++i) {
    little |= static_cast<uint64_t>(static_cast<unsigned char>((*bytes)[i])) << (8 * i);
  }
  return std::bit_cast<double>(little);
}

// One stored element (native order) as a double: the zarr v2 fill_value.
double ElementAsDouble(const std::byte* p, DataType type) {
  auto load = [p]<typename T>(T) {
    T v;
    std::memcpy(&v, p, sizeof(T));
    return static_cast<double>(v);
  };
  switch (type) {
    case DataType::kInt8:
      return load(int8_t{});
    case DataType::kInt16:
      return load(int16_t{});
    case DataType::kInt32:
      return load(int32_t{});
    case DataType::kInt64:
      return load(int64_t{});
    case DataType::kUInt8:
      return load(uint8_t{});
    case DataType::kUInt16:
      return load(uint16_t{});
    case DataType::kUInt32:
      return load(uint32_t{});
    case DataType::kUInt64:
      return load(uint64_t{});
    case DataType::kFloat16: {
      uint16_t bits;
      std::memcpy(&bits, p, 2);
      return Float16BitsToDouble(bits);
    }
    case DataType::kFloat32:
      return load(float{});
    default:
      return load(double{});
  }
}

// The range of an integer type's values, as doubles (exact at the ends that matter: 2^63 and
// 2^64 are powers of two).
bool InIntegerRange(double v, DataType type) {
  const auto bits = static_cast<int>(DataTypeSize(type) * 8);
  if (IsSignedInteger(type)) {
    return v >= -std::ldexp(1.0, bits - 1) && v < std::ldexp(1.0, bits - 1);
  }
  return v >= 0 && v < std::ldexp(1.0, bits);
}

DataType Twin(DataType type, bool to_unsigned) {
  switch (type) {
    case DataType::kInt8:
      return to_unsigned ? DataType::kUInt8 : type;
    case DataType::kInt16:
      return to_unsigned ? DataType::kUInt16 : type;
    case DataType::kInt32:
      return to_unsigned ? DataType::kUInt32 : type;
    case DataType::kInt64:
      return to_unsigned ? DataType::kUInt64 : type;
    case DataType::kUInt8:
      return to_unsigned ? type : DataType::kInt8;
    case DataType::kUInt16:
      return to_unsigned ? type : DataType::kInt16;
    case DataType::kUInt32:
      return to_unsigned ? type : DataType::kInt32;
    case DataType::kUInt64:
      return to_unsigned ? type : DataType::kInt64;
    default:
      return type;
  }
}

// An integer value of the signed/unsigned twin read as the other (two's complement).
double Reinterpret(double v, DataType from, DataType to) {
  if (from == to) return v;
  const double span = std::ldexp(1.0, static_cast<int>(DataTypeSize(from) * 8));
  if (IsSignedInteger(from)) return v < 0 ? v + span : v;
  return v >= span / 2 ? v - span : v;
}

// One fill value attribute's numbers (a number or a list; null entries skipped, as xarray drops
// NaN-like ones). `stored`: the array's type, which an integer array's fill values must be values
// of.
Status AddAttributeFills(const CfSource& source, const char* attribute, DataType stored,
                         bool v3_float_text, std::vector<double>& out) {
  auto it = source.attributes.find(attribute);
  if (it == source.attributes.end()) return Status::Ok();
  std::vector<const json*> values;
  if (it->is_array()) {
    for (const json& v : *it) values.push_back(&v);
  } else {
    values.push_back(&*it);
  }
  for (const json* v : values) {
    if (v->is_null()) continue;
    double number = 0;
    if (v->is_string() && v3_float_text) {
      std::optional<double> decoded = Base64Double(v->get<std::string>());
      if (!decoded) {
        return source.Error(
            attribute, "is " + Quote(*v) + ", neither a number nor the base64 text of a float64");
      }
      number = *decoded;
    } else if (v->is_number()) {
      number = v->get<double>();
      if (v->is_number_integer()) {
        number = v->is_number_unsigned() ? static_cast<double>(v->get<uint64_t>())
                                         : static_cast<double>(v->get<int64_t>());
      }
    } else {
      return source.Error(attribute, "is " + Quote(*v) + ", not a number");
    }
    if (std::isnan(number)) continue;
    if (IsSignedInteger(stored) || IsUnsignedInteger(stored)) {
      if (number != std::floor(number) || !InIntegerRange(number, stored)) {
        return source.Error(attribute, "is " + Quote(*v) + ", not a value of the array's type " +
                                           std::string(DataTypeName(stored)));
      }
    }
    out.push_back(number);
  }
  return Status::Ok();
}

// The type xarray decodes to (see the overview).
DataType DecodedType(DataType source, bool packed) {
  if (packed) return DataType::kFloat64;
  if (IsFloatingPoint(source)) return source;
  return DataTypeSize(source) <= 2 ? DataType::kFloat32 : DataType::kFloat64;
}

double RoundTo(double v, DataType type) {
  if (type == DataType::kFloat32) return static_cast<double>(static_cast<float>(v));
  if (type == DataType::kFloat16) return Float16BitsToDouble(DoubleToFloat16Bits(v));
  return v;
}

std::string FormatNumber(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%.7g", v);
  return text;
}

}  // namespace

CfDecoding StoredValues(DataType type) {
  CfDecoding cf;
  cf.source = type;
  return cf;
}

Result<CfDecoding> CfDecodingOf(const Array& array) {
  const internal::ArrayState& state = array.state();
  const ArrayMetadata& metadata = state.metadata;
  const DataType stored = metadata.data_type;
  CfDecoding cf = StoredValues(stored);
  const bool integer = IsSignedInteger(stored) || IsUnsignedInteger(stored);
  if (!integer && !IsFloatingPoint(stored)) return cf;
  if (!metadata.attributes.is_object()) return cf;
  const CfSource source{state, metadata.attributes};

  // _Unsigned: "true" on signed integers, "false" on unsigned ones (other values do nothing).
  auto unsigned_it = metadata.attributes.find("_Unsigned");
  bool reinterpret_fill = false;
  if (integer && unsigned_it != metadata.attributes.end() && unsigned_it->is_string()) {
    const std::string& text = unsigned_it->get_ref<const std::string&>();
    if (text == "true" && IsSignedInteger(stored)) cf.source = Twin(stored, true);
    if (text == "false" && IsUnsignedInteger(stored)) cf.source = Twin(stored, false);
    reinterpret_fill = cf.source != stored;
  }

  ZS_ASSIGN_OR_RETURN(std::optional<double> scale, PackingNumber(source, "scale_factor"));
  ZS_ASSIGN_OR_RETURN(std::optional<double> offset, PackingNumber(source, "add_offset"));

  std::vector<double> fill_values;
  if (metadata.zarr_format == 2 && !metadata.fill_value_is_null &&
      metadata.fill_value.size() == DataTypeSize(stored)) {
    const double fill = ElementAsDouble(metadata.fill_value.data(), stored);
    if (!std::isnan(fill)) fill_values.push_back(fill);
  } else {
    ZS_RETURN_IF_ERROR(AddAttributeFills(source, "_FillValue", stored,
                                         metadata.zarr_format == 3 && !integer, fill_values));
  }
  if (reinterpret_fill) {
    for (double& v : fill_values) v = Reinterpret(v, stored, cf.source);
  }
  std::vector<double> missing;
  ZS_RETURN_IF_ERROR(AddAttributeFills(source, "missing_value", stored, false, missing));
  fill_values.insert(fill_values.end(), missing.begin(), missing.end());

  cf.has_scale_factor = scale.has_value();
  cf.has_add_offset = offset.has_value();
  cf.scale_factor = scale.value_or(1.0);
  cf.add_offset = offset.value_or(0.0);
  if (!cf.packed() && fill_values.empty()) return cf;
  cf.decode = true;
  cf.decoded = DecodedType(cf.source, cf.packed());
  for (double v : fill_values) {
    const double rounded = RoundTo(v, cf.decoded);
    bool seen = false;
    for (uint32_t k = 0; k < cf.num_fill_values; ++k) seen = seen || cf.fill_values[k] == rounded;
    if (seen) continue;
    if (cf.num_fill_values == kMaxCfFillValues) {
      return source.Error("missing_value", "gives more than " + std::to_string(kMaxCfFillValues) +
                                               " distinct fill values with _FillValue");
    }
    cf.fill_values[cf.num_fill_values++] = rounded;
  }
  return cf;
}

std::string DescribeCfDecoding(const CfDecoding& cf, DataType stored) {
  if (!cf.decode) return "";
  std::string out = cf.packed() ? "packed " : "";
  out += DataTypeName(cf.source);
  if (cf.source != stored) out += " (_Unsigned)";
  if (cf.packed()) {
    out += " (";
    if (cf.has_scale_factor) out += "× " + FormatNumber(cf.scale_factor);
    if (cf.has_add_offset) {
      out += cf.has_scale_factor ? " + " : "+ ";
      out += FormatNumber(cf.add_offset);
    }
    out += ")";
  }
  if (cf.num_fill_values > 0) {
    out += cf.num_fill_values == 1 ? ", fill " : ", fills ";
    for (uint32_t k = 0; k < cf.num_fill_values; ++k) {
      if (k > 0) out += " ";
      out += FormatNumber(cf.fill_values[k]);
    }
  }
  out += " → ";
  out += DataTypeName(cf.decoded);
  return out;
}

}  // namespace zarrstream

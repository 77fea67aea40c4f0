#include "metadata/extended_type.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <limits>

#include "metadata/metadata_parsing.h"
#include "util/base64.h"

namespace zarrstream {
namespace {

using nlohmann::json;
using Kind = ExtendedType::Kind;

// numpy's datetime units, coarsest first.
constexpr std::array<std::string_view, 13> kTimeUnits = {"Y",  "M",  "W",  "D",  "h",  "m", "s",
                                                         "ms", "us", "ns", "ps", "fs", "as"};

bool IsTimeUnit(std::string_view unit) {
  return std::find(kTimeUnits.begin(), kTimeUnits.end(), unit) != kTimeUnits.end();
}

Status CheckKeys(const json& configuration, std::initializer_list<std::string_view> keys) {
  for (const auto& [key, value] : configuration.items()) {
    if (std::find(keys.begin(), keys.end(), key) == keys.end()) {
      return FieldError(ErrorCode::kMetadata, "data_type.configuration",
                        "unexpected key " + DescribeJson(json(key)));
    }
  }
  return Status::Ok();
}

Result<uint64_t> PositiveInteger(const json& configuration, std::string_view key) {
  const std::string field = "data_type.configuration." + std::string(key);
  ZS_ASSIGN_OR_RETURN(const json* value, RequiredField(configuration, key, field));
  if (!value->is_number_unsigned() || value->get<uint64_t>() == 0 ||
      value->get<uint64_t>() > std::numeric_limits<uint32_t>::max()) {
    return FieldError(ErrorCode::kMetadata, field,
                      "expected a positive integer, got " + DescribeJson(*value));
  }
  return value->get<uint64_t>();
}

// "ns", "10s": an optional count then a unit, as inside numpy's "M8[...]".
Result<ExtendedType> ParseV2TimeUnit(std::string_view text, Kind kind, std::string_view dtype) {
  auto bad = [&] {
    return FieldError(ErrorCode::kUnsupported, "dtype",
                      "unsupported dtype " + DescribeJson(json(std::string(dtype))) +
                          " (a datetime64/timedelta64 needs a unit such as [ns] or [10s])");
  };
  ExtendedType type;
  type.kind = kind;
  size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  if (digits > 0) {
    if (digits > 9) return bad();
    type.scale_factor = static_cast<uint32_t>(std::stoul(std::string(text.substr(0, digits))));
    if (type.scale_factor == 0) return bad();
  }
  type.unit = std::string(text.substr(digits));
  if (!IsTimeUnit(type.unit)) return bad();
  return type;
}

// The number of code points in valid UTF-8 `text`; nullopt when it is not valid UTF-8.
std::optional<uint64_t> CountUtf8(std::string_view text) {
  uint64_t count = 0;
  for (size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    const size_t n = c < 0x80           ? 1
                     : (c >> 5) == 0x6  ? 2
                     : (c >> 4) == 0xE  ? 3
                     : (c >> 3) == 0x1E ? 4
                                        : 0;
    if (n == 0 || i + n > text.size()) return std::nullopt;
    for (size_t k = 1; k < n; ++k) {
      if ((static_cast<unsigned char>(text[i + k]) & 0xC0) != 0x80) return std::nullopt;
    }
    i += n;
    ++count;
  }
  return count;
}

Status FillError(std::string_view why, const json& value) {
  return FieldError(ErrorCode::kMetadata, "fill_value",
                    std::string(why) + ", got " + DescribeJson(value));
}

}  // namespace

Result<std::optional<ExtendedType>> ParseV3ExtendedType(std::string_view name,
                                                        const json& configuration) {
  ExtendedType type;
  if (name == "string" || name == "variable_length_bytes" || name == "bytes") {
    type.kind = name == "string" ? Kind::kString : Kind::kBytes;
    ZS_RETURN_IF_ERROR(CheckKeys(configuration, {}));
  } else if (name == "fixed_length_utf32" || name == "null_terminated_bytes") {
    type.kind = name == "fixed_length_utf32" ? Kind::kFixedUtf32 : Kind::kFixedBytes;
    ZS_RETURN_IF_ERROR(CheckKeys(configuration, {"length_bytes"}));
    ZS_ASSIGN_OR_RETURN(type.length_bytes, PositiveInteger(configuration, "length_bytes"));
    if (type.kind == Kind::kFixedUtf32 && type.length_bytes % 4 != 0) {
      return FieldError(ErrorCode::kMetadata, "data_type.configuration.length_bytes",
                        "must be a multiple of 4 for fixed_length_utf32, got " +
                            std::to_string(type.length_bytes));
    }
  } else if (name == "numpy.datetime64" || name == "numpy.timedelta64") {
    type.kind = name == "numpy.datetime64" ? Kind::kDateTime64 : Kind::kTimeDelta64;
    ZS_RETURN_IF_ERROR(CheckKeys(configuration, {"unit", "scale_factor"}));
    ZS_ASSIGN_OR_RETURN(const json* unit,
                        RequiredField(configuration, "unit", "data_type.configuration.unit"));
    if (!unit->is_string() || !IsTimeUnit(unit->get_ref<const std::string&>())) {
      return FieldError(ErrorCode::kUnsupported, "data_type.configuration.unit",
                        "expected one of numpy's time units (\"ns\", \"s\", \"D\", ...), got " +
                            DescribeJson(*unit));
    }
    type.unit = unit->get<std::string>();
    ZS_ASSIGN_OR_RETURN(uint64_t scale, PositiveInteger(configuration, "scale_factor"));
    type.scale_factor = static_cast<uint32_t>(scale);
  } else {
    return std::optional<ExtendedType>();
  }
  return std::optional<ExtendedType>(std::move(type));
}

Result<std::optional<ExtendedType>> ParseV2ExtendedType(std::string_view dtype,
                                                        std::string_view object_codec_id) {
  if (dtype.size() < 2) return std::optional<ExtendedType>();
  const char kind = dtype[1];
  const std::string_view rest = dtype.substr(2);
  const std::string quoted = DescribeJson(json(std::string(dtype)));
  ExtendedType type;
  if (kind == 'M' || kind == 'm') {
    if (rest.size() < 4 || rest[0] != '8' || rest[1] != '[' || rest.back() != ']') {
      return FieldError(ErrorCode::kUnsupported, "dtype",
                        "unsupported dtype " + quoted + " (datetime64/timedelta64 need a unit)");
    }
    ZS_ASSIGN_OR_RETURN(
        type, ParseV2TimeUnit(rest.substr(2, rest.size() - 3),
                              kind == 'M' ? Kind::kDateTime64 : Kind::kTimeDelta64, dtype));
  } else if (kind == 'U' || kind == 'S') {
    if (rest.empty() || rest.size() > 9 ||
        !std::all_of(rest.begin(), rest.end(), [](char c) { return c >= '0' && c <= '9'; }) ||
        std::stoul(std::string(rest)) == 0) {
      return FieldError(ErrorCode::kMetadata, "dtype",
                        "invalid dtype " + quoted + ": expected a positive length after the kind");
    }
    type.kind = kind == 'U' ? Kind::kFixedUtf32 : Kind::kFixedBytes;
    type.length_bytes = std::stoul(std::string(rest)) * (kind == 'U' ? 4 : 1);
  } else if (kind == 'O') {
    if (object_codec_id == "vlen-utf8") {
      type.kind = Kind::kString;
    } else if (object_codec_id == "vlen-bytes") {
      type.kind = Kind::kBytes;
    } else if (object_codec_id == "json2") {
      type.kind = Kind::kJson;
    } else {
      return FieldError(
          ErrorCode::kUnsupported, "dtype",
          "object dtype " + quoted +
              (object_codec_id.empty()
                   ? std::string(" without an object codec as its first filter")
                   : " with object codec " + DescribeJson(json(std::string(object_codec_id)))) +
              " (vlen-utf8, vlen-bytes and json2 are supported)");
    }
  } else {
    return std::optional<ExtendedType>();
  }
  return std::optional<ExtendedType>(std::move(type));
}

Status ParseExtendedFillValue(const json& value, ArrayMetadata* metadata) {
  const ExtendedType& type = *metadata->extended_type;
  if (type.is_time()) {
    int64_t ticks = std::numeric_limits<int64_t>::min();  // NaT
    if (value.is_number_integer()) {
      if (value.is_number_unsigned() &&
          value.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return FillError("expected an int64 or \"NaT\"", value);
      }
      ticks = value.get<int64_t>();
    } else if (!value.is_null() && value != "NaT") {
      return FillError("expected an integer or \"NaT\"", value);
    }
    metadata->fill_value.resize(sizeof(ticks));
    std::memcpy(metadata->fill_value.data(), &ticks, sizeof(ticks));
    return Status::Ok();
  }
  std::string& fill = metadata->text_fill_value;
  fill.clear();
  switch (type.kind) {
    case Kind::kString:
    case Kind::kFixedUtf32:
      if (value.is_null()) return Status::Ok();
      if (!value.is_string()) return FillError("expected a string", value);
      fill = value.get<std::string>();
      if (type.kind == Kind::kFixedUtf32 && CountUtf8(fill).value_or(0) > type.length_bytes / 4) {
        return FillError(
            "longer than the type's " + std::to_string(type.length_bytes / 4) + " characters",
            value);
      }
      return Status::Ok();
    case Kind::kBytes:
    case Kind::kFixedBytes:
      if (value.is_null()) return Status::Ok();
      if (value.is_string()) {
        Result<std::string> bytes = DecodeBase64(value.get_ref<const std::string&>());
        if (!bytes.ok()) {
          return FillError("expected base64 text (" + bytes.status().message() + ")", value);
        }
        fill = std::move(*bytes);
      } else if (value.is_array()) {
        for (const json& byte : value) {
          if (!byte.is_number_unsigned() || byte.get<uint64_t>() > 255) {
            return FillError("expected a list of byte values 0..255", value);
          }
          fill.push_back(static_cast<char>(byte.get<uint64_t>()));
        }
      } else {
        return FillError("expected base64 text or a list of byte values", value);
      }
      if (type.kind == Kind::kFixedBytes) {
        if (fill.size() > type.length_bytes) {
          return FillError("longer than the type's " + std::to_string(type.length_bytes) + " bytes",
                           value);
        }
        // numpy drops the trailing NULs of an "S" value, as reads do.
        while (!fill.empty() && fill.back() == '\0') fill.pop_back();
      }
      return Status::Ok();
    case Kind::kJson:
      fill = value.dump();
      return Status::Ok();
    default:
      break;
  }
  return Status::Ok();
}

json ExtendedTypeToV3Json(const ExtendedType& type) {
  switch (type.kind) {
    case Kind::kDateTime64:
    case Kind::kTimeDelta64:
      return {{"name", type.kind == Kind::kDateTime64 ? "numpy.datetime64" : "numpy.timedelta64"},
              {"configuration", {{"unit", type.unit}, {"scale_factor", type.scale_factor}}}};
    case Kind::kString:
      return "string";
    case Kind::kBytes:
      return "variable_length_bytes";
    case Kind::kJson:
      // v3 has no JSON object type; the name says what it is.
      return "numcodecs.json2";
    case Kind::kFixedUtf32:
    case Kind::kFixedBytes:
      return {
          {"name", type.kind == Kind::kFixedUtf32 ? "fixed_length_utf32" : "null_terminated_bytes"},
          {"configuration", {{"length_bytes", type.length_bytes}}}};
  }
  return nullptr;
}

json ExtendedFillValueToJson(const ArrayMetadata& metadata) {
  const ExtendedType& type = *metadata.extended_type;
  if (type.is_time()) {
    int64_t ticks = std::numeric_limits<int64_t>::min();
    if (metadata.fill_value.size() == sizeof(ticks)) {
      std::memcpy(&ticks, metadata.fill_value.data(), sizeof(ticks));
    }
    return ticks;
  }
  if (type.kind == Kind::kBytes || type.kind == Kind::kFixedBytes) {
    return EncodeBase64(metadata.text_fill_value);  // zarr-python's form
  }
  if (type.kind == Kind::kJson) {
    return json::parse(metadata.text_fill_value, nullptr, /*allow_exceptions=*/false);
  }
  return metadata.text_fill_value;
}

}  // namespace zarrstream

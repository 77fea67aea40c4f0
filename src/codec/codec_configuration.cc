#include "codec/codec_configuration.h"

#include <algorithm>

#include "metadata/v2_metadata.h"

namespace zarrstream {
namespace {

// Metadata is hostile: cap what a value may add to an error message.
std::string Describe(const nlohmann::json& value) {
  if (value.is_object()) return "an object";
  if (value.is_array()) return "an array";
  std::string text = value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  constexpr size_t kMaxLength = 64;
  if (text.size() > kMaxLength) text = text.substr(0, kMaxLength) + "...";
  return text;
}

}  // namespace

Result<CodecConfiguration> CodecConfiguration::Parse(
    std::string_view codec, const nlohmann::json& configuration,
    std::initializer_list<std::string_view> fields) {
  if (configuration.is_null()) return CodecConfiguration(codec, nullptr);
  if (!configuration.is_object()) {
    return MetadataError(std::string(codec) + ": configuration must be a JSON object, got " +
                         Describe(configuration));
  }
  for (const auto& [key, value] : configuration.items()) {
    if (std::find(fields.begin(), fields.end(), key) == fields.end()) {
      std::string known;
      for (std::string_view field : fields) {
        known += known.empty() ? "" : ", ";
        known += field;
      }
      return MetadataError(std::string(codec) + ": unknown configuration field " +
                           Describe(nlohmann::json(key)) +
                           (known.empty() ? " (it takes none)" : " (known: " + known + ")"));
    }
  }
  return CodecConfiguration(codec, &configuration);
}

const nlohmann::json* CodecConfiguration::Find(std::string_view field) const {
  if (configuration_ == nullptr) return nullptr;
  auto it = configuration_->find(field);
  return it == configuration_->end() ? nullptr : &*it;
}

Result<std::optional<int64_t>> CodecConfiguration::Integer(std::string_view field, int64_t min,
                                                           int64_t max) const {
  const nlohmann::json* value = Find(field);
  if (value == nullptr) return std::optional<int64_t>();
  const std::string problem =
      "must be an integer in [" + std::to_string(min) + ", " + std::to_string(max) + "]";
  if (value->is_number_unsigned()) {
    uint64_t v = value->get<uint64_t>();
    if (max < 0 || v > static_cast<uint64_t>(max)) return FieldError(field, problem);
    return std::optional<int64_t>(static_cast<int64_t>(v));
  }
  if (!value->is_number_integer()) return FieldError(field, problem);
  int64_t v = value->get<int64_t>();
  if (v < min || v > max) return FieldError(field, problem);
  return std::optional<int64_t>(v);
}

Result<std::optional<bool>> CodecConfiguration::Boolean(std::string_view field) const {
  const nlohmann::json* value = Find(field);
  if (value == nullptr) return std::optional<bool>();
  if (!value->is_boolean()) return FieldError(field, "must be true or false");
  return std::optional<bool>(value->get<bool>());
}

Result<std::optional<std::string>> CodecConfiguration::String(std::string_view field) const {
  const nlohmann::json* value = Find(field);
  if (value == nullptr) return std::optional<std::string>();
  if (!value->is_string()) return FieldError(field, "must be a string");
  return std::optional<std::string>(value->get<std::string>());
}

Result<std::optional<double>> CodecConfiguration::Number(std::string_view field) const {
  const nlohmann::json* value = Find(field);
  if (value == nullptr) return std::optional<double>();
  if (!value->is_number()) return FieldError(field, "must be a number");
  return std::optional<double>(value->get<double>());
}

Result<DataType> CodecConfiguration::NumpyDataType(std::string_view field) const {
  ZS_ASSIGN_OR_RETURN(std::optional<std::string> text, String(field));
  if (!text) return Error("configuration field '" + std::string(field) + "' is required");
  // zarr-python writes what numpy accepts, as the user gave it or as str(dtype) gives it: "<f4",
  // but also "f4", "=f4" and "float32". Codecs see native-endian values, so the order is moot.
  if (Result<DataType> named = ParseDataTypeName(*text); named.ok()) return *named;
  std::string type_string = *text;
  if (!type_string.empty() && type_string[0] == '=') type_string[0] = '<';
  if (!type_string.empty() && std::string_view("<>|").find(type_string[0]) == std::string::npos) {
    type_string.insert(0, "<");
  }
  Result<std::pair<DataType, bool>> parsed = ParseV2DataType(type_string);
  if (!parsed.ok() && type_string[0] == '<') parsed = ParseV2DataType("|" + type_string.substr(1));
  if (!parsed.ok()) {
    return FieldError(field, "must be a numpy type of a supported type, such as \"<f8\"");
  }
  return parsed->first;
}

Result<CodecConfiguration::Conversion> CodecConfiguration::DtypeAndAstype(DataType decoded) const {
  Conversion conversion;
  ZS_ASSIGN_OR_RETURN(conversion.dtype, NumpyDataType("dtype"));
  conversion.astype = conversion.dtype;
  if (Find("astype") != nullptr) {
    ZS_ASSIGN_OR_RETURN(conversion.astype, NumpyDataType("astype"));
  }
  if (conversion.dtype != decoded) {
    return FieldError("dtype",
                      "must match the array's data type " + std::string(DataTypeName(decoded)));
  }
  return conversion;
}

Status CodecConfiguration::FieldError(std::string_view field, std::string_view problem) const {
  const nlohmann::json* value = Find(field);
  std::string message =
      codec_ + ": configuration field '" + std::string(field) + "' " + std::string(problem);
  if (value != nullptr) message += ", got " + Describe(*value);
  return MetadataError(std::move(message));
}

Status CodecConfiguration::Error(std::string_view message) const {
  return MetadataError(codec_ + ": " + std::string(message));
}

nlohmann::json CodecJson(std::string_view name, nlohmann::json configuration) {
  return nlohmann::json{{"name", name}, {"configuration", std::move(configuration)}};
}

}  // namespace zarrstream

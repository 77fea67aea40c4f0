// CodecConfiguration: reads a codec's "configuration" object from metadata, which is hostile until
// checked. Every problem is a kMetadata error naming the codec and the field, e.g.
//   "zstd: configuration field 'level' must be an integer in [-131072, 22], got \"high\"".
#pragma once

#include <cstdint>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "zarrstream/data_type.h"
#include "zarrstream/status.h"

namespace zarrstream {

class CodecConfiguration {
 public:
  // Checks that `configuration` is an object (null counts as {}) whose members are all in `fields`.
  // `configuration` must outlive the returned reader.
  static Result<CodecConfiguration> Parse(std::string_view codec,
                                          const nlohmann::json& configuration,
                                          std::initializer_list<std::string_view> fields);

  // The member `field`, or null when absent.
  const nlohmann::json* Find(std::string_view field) const;

  // Typed members; nullopt when absent, an error when present with another type or out of range.
  Result<std::optional<int64_t>> Integer(std::string_view field, int64_t min, int64_t max) const;
  Result<std::optional<bool>> Boolean(std::string_view field) const;
  Result<std::optional<std::string>> String(std::string_view field) const;
  Result<std::optional<double>> Number(std::string_view field) const;
  // A required numpy type ("<f8", "|u1", "f4", "float32") as a data type; its byte order is
  // dropped.
  Result<DataType> NumpyDataType(std::string_view field) const;

  // The "dtype" (required; must be `decoded`'s type) and "astype" (defaults to dtype) of the
  // numcodecs filters that convert values (delta, fixedscaleoffset).
  struct Conversion {
    DataType dtype;
    DataType astype;
  };
  Result<Conversion> DtypeAndAstype(DataType decoded) const;

  // kMetadata "<codec>: configuration field '<field>' <problem>, got <value>".
  Status FieldError(std::string_view field, std::string_view problem) const;
  // kMetadata "<codec>: <message>".
  Status Error(std::string_view message) const;

  std::string_view codec() const { return codec_; }

 private:
  CodecConfiguration(std::string_view codec, const nlohmann::json* configuration)
      : codec_(codec), configuration_(configuration) {}

  std::string codec_;
  const nlohmann::json* configuration_;  // an object, or null for an empty configuration
};

// {"name": name, "configuration": configuration}, the form codecs take in zarr.json.
nlohmann::json CodecJson(std::string_view name, nlohmann::json configuration);

}  // namespace zarrstream

// The extended data types (zarrstream/data_type.h: ExtendedType) in metadata: their v3
// "data_type" forms and v2 dtype strings, and their fill values, as zarr-python 3 reads and
// writes them:
//
//   v3 "string"                                            v2 "|O" + filter vlen-utf8
//   v3 "variable_length_bytes" (zarr-python), "bytes" (zarrs)  v2 "|O" + filter vlen-bytes
//                                                          v2 "|O" + filter json2
//   v3 {"name": "fixed_length_utf32",
//       "configuration": {"length_bytes": 16}}             v2 "<U4"
//   v3 {"name": "null_terminated_bytes", ...length_bytes}  v2 "|S3"
//   v3 {"name": "numpy.datetime64",
//       "configuration": {"unit": "ns", "scale_factor": 1}}  v2 "<M8[ns]" (timedelta64 alike)
//
// Fill values: text as a JSON string; bytes as base64 text (zarr-python) or a list of byte
// values (zarrs); times as an integer or "NaT".
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>

#include "metadata/array_metadata.h"
#include "zarrstream/data_type.h"
#include "zarrstream/status.h"

namespace zarrstream {

// The extended type a v3 data_type name and configuration name; nullopt for any other name (a
// core type, or one nobody supports). Errors name the field "data_type".
Result<std::optional<ExtendedType>> ParseV3ExtendedType(std::string_view name,
                                                        const nlohmann::json& configuration);

// The extended type a v2 dtype string names ("<M8[ns]", "<U4", "|S3", "|O"); nullopt for the
// numeric kinds. `object_codec_id` is the id of the array's first filter ("vlen-utf8"), which
// decides what an "|O" array holds; empty when it has none. Errors name the field "dtype".
Result<std::optional<ExtendedType>> ParseV2ExtendedType(std::string_view dtype,
                                                        std::string_view object_codec_id);

// Sets the fill value of an array of metadata->extended_type from its JSON form (`value` null:
// the type's default: "" for text, NaT for times, as zarr-python reads a v2 null).
// Errors name the field "fill_value".
Status ParseExtendedFillValue(const nlohmann::json& value, ArrayMetadata* metadata);

// The zarr.json forms of an extended type and of an array's fill value of that type.
nlohmann::json ExtendedTypeToV3Json(const ExtendedType& type);
nlohmann::json ExtendedFillValueToJson(const ArrayMetadata& metadata);

}  // namespace zarrstream

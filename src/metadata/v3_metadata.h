// Parser for Zarr v3 zarr.json documents (arrays and groups).
#pragma once

#include <string_view>

#include "metadata/array_metadata.h"

namespace zarrstream {

// Parses a zarr.json document. Validates: zarr_format == 3, node_type, data_type (core types),
// shape, chunk_grid "regular", chunk_key_encoding ("default" / "v2", separator "/" or "."),
// fill_value in every form the spec allows (numbers, "NaN", "Infinity", "-Infinity", hex bit
// patterns "0x7fc00000", [re, im] pairs for complex, true/false for bool), codecs (present; names
// and configurations are checked later by the codec layer), dimension_names (length = rank),
// attributes; storage_transformers must be absent or empty; unknown extension fields are errors
// unless they are objects with "must_understand": false. A group's "consolidated_metadata"
// (zarr-python's extension) is parsed into GroupMetadata::consolidated.
// Errors are kMetadata (malformed) or kUnsupported (valid but not supported here) and name the
// offending field.
Result<NodeMetadata> ParseV3Metadata(std::string_view zarr_json);

// Parses a v3 codec list (entries {"name", "configuration"} or bare names; non-empty). `field`
// names the list in errors ("codecs", "sharding_indexed.index_codecs").
Result<std::vector<CodecSpec>> ParseV3Codecs(const nlohmann::json& value, std::string_view field);

// Parses a fill value given as JSON for `type` into DataTypeSize(type) native-endian bytes.
Result<std::vector<std::byte>> ParseV3FillValue(const nlohmann::json& value, DataType type);

// Serialises array metadata as a v3 zarr.json document (for writers and `inspect --json`).
nlohmann::json ArrayMetadataToV3Json(const ArrayMetadata& metadata);

// Serialises group metadata as a v3 zarr.json document. Consolidated metadata, when present, is
// written inline in zarr-python's form: {"kind": "inline", "must_understand": false, "metadata":
// {path: node}} with every node below the group keyed by its path relative to the group (flat,
// "sub/temperature"), and each member group carrying an empty inline "metadata" of its own (readers
// give member groups their part of the flat map, as ParseV3Metadata does).
nlohmann::json GroupMetadataToV3Json(const GroupMetadata& metadata);

}  // namespace zarrstream

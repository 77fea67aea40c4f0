// Pieces shared by the v3 and v2 metadata parsers (internal to src/metadata).
//
// Every document from a store is hostile until checked: these helpers never throw, bound the work a
// document can cause, and report errors that name the offending field.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "metadata/array_metadata.h"
#include "util/json_document.h"
#include "zarrstream/data_type.h"
#include "zarrstream/status.h"

namespace zarrstream {

// Consolidated metadata keys deeper than this are rejected: each group in consolidated metadata
// carries a copy of the nodes below it, so depth multiplies the memory a document can cost.
inline constexpr int kMaxNodePathDepth = 64;

// Checks that document[field] is the integer `expected` ("zarr_format": 3). Missing or not an
// integer is kMetadata; another version is kUnsupported.
Status CheckFormatVersion(const nlohmann::json& document, std::string_view field, int expected);

// An error "field '<field>': <message>".
Status FieldError(ErrorCode code, std::string_view field, std::string_view message);

// The member `key` of `object`, or a kMetadata "required but missing" error naming `field` (the
// member's full path when nested, "consolidated_metadata.kind"; `key` when empty).
Result<const nlohmann::json*> RequiredField(const nlohmann::json& object, std::string_view key,
                                            std::string_view field = {});

// A short description of a JSON value for error messages: `3`, `"abc"`, `an object`. Long strings
// are cut so that a hostile document cannot make huge messages.
std::string DescribeJson(const nlohmann::json& value);

// A JSON array of non-negative integers (positive unless `allow_zero`).
Result<std::vector<uint64_t>> ParseExtents(const nlohmann::json& value, std::string_view field,
                                           bool allow_zero);

// Checks a regular grid: chunk rank equals array rank, and element counts and a chunk's byte size
// fit in 64 bits (so that later arithmetic on them cannot overflow).
Status ValidateRegularGrid(const std::vector<uint64_t>& shape,
                           const std::vector<uint64_t>& chunk_shape, DataType data_type,
                           std::string_view shape_field, std::string_view chunk_field);

// Checks a consolidated metadata key: a relative path of at most kMaxNodePathDepth non-empty
// segments, none "." or "..", so that the nodes it names cannot escape the group.
Status ValidateNodePath(std::string_view path, std::string_view field);

// Gives each group in `nodes` (flat, keyed by path relative to a root group; the root itself, if
// present under "", is left alone) the consolidated metadata of the nodes below it, keyed relative
// to that group, as ConsolidatedMetadata documents.
void AttachSubgroupConsolidatedMetadata(ConsolidatedMetadata* nodes);

}  // namespace zarrstream

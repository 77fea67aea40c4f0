// Parsing JSON documents read from stores (metadata, reference sets), which are hostile until
// checked: never throws, and bounds the nesting before nlohmann builds the value.
#pragma once

#include <nlohmann/json.hpp>
#include <string_view>

#include "zarrstream/status.h"

namespace zarrstream {

// Deeper documents are rejected before nlohmann builds them: copying or destroying a value recurses
// once per level, so a hostile "[[[[..." could otherwise exhaust a thread's stack.
inline constexpr int kMaxJsonNesting = 256;

// Parses `text` as one JSON document. Syntax errors, invalid UTF-8 and excessive nesting are
// kMetadata errors naming `document` (".zarray", "zarr.json", a reference file).
Result<nlohmann::json> ParseJsonDocument(std::string_view text, std::string_view document);

}  // namespace zarrstream

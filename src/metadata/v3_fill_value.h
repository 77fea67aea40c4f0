// Zarr v3 fill values between their zarr.json forms and the bytes of one element (native byte
// order), used by the v3 metadata parser and writer (v3_metadata.h).
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <vector>

#include "zarrstream/data_type.h"
#include "zarrstream/status.h"

namespace zarrstream {

// The bytes of `value`, a fill value of `type`. Errors are plain messages (the caller names the
// field); may throw nlohmann::json::exception for a malformed value.
Result<std::vector<std::byte>> ParseFillValueBytes(const nlohmann::json& value, DataType type);

// The zarr.json form of the fill value `bytes` of `type` (wrong-sized `bytes` are padded or cut).
nlohmann::json FillValueToJson(std::vector<std::byte> bytes, DataType type);

}  // namespace zarrstream

// Base64 (RFC 4648 section 4: standard alphabet, '=' padding): fill values in metadata (bytes
// types, and xarray's float _FillValue attributes in v3), inline data in reference sets. Every
// layer that reads or writes base64 goes through these two functions.
#pragma once

#include <string>
#include <string_view>

#include "zarrstream/status.h"

namespace zarrstream {

// The bytes that `text` encodes. Padding is required (the length is a multiple of 4); an
// InvalidArgument error names what is wrong otherwise: the length, a character outside the
// alphabet and its offset, or padding that is not at the end. Callers add what the text was.
Result<std::string> DecodeBase64(std::string_view text);

// `bytes` as base64 text, padded with '='.
std::string EncodeBase64(std::string_view bytes);

}  // namespace zarrstream

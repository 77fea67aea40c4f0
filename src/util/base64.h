// Base64 (RFC 4648, standard alphabet, '=' padding): fill values in metadata, inline data in
// reference sets.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace zarrstream {

// The bytes of `text`; nullopt when `text` is not base64 (wrong length, a character outside the
// alphabet, misplaced padding).
std::optional<std::string> DecodeBase64(std::string_view text);
std::string EncodeBase64(std::string_view bytes);

}  // namespace zarrstream

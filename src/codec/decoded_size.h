// Limits and messages shared by the decoders about how many bytes a chunk decodes to.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "zarrstream/status.h"

namespace zarrstream {

// When the caller cannot say how large a decoded chunk is (a bytes→bytes codec behind another
// variable-size one), a decoder grows its output up to this many bytes and then gives up, so that a
// few hostile bytes cannot claim all memory. Real chunks are far smaller (c-blosc cannot exceed
// 2 GiB at all).
inline constexpr uint64_t kMaxUnknownDecodedSize = uint64_t{4} << 30;

// "<codec>: data decodes to <actual> bytes, expected <expected>".
inline Status DecodedSizeMismatch(std::string_view codec, uint64_t actual, uint64_t expected) {
  return CorruptChunkError(std::string(codec) + ": data decodes to " + std::to_string(actual) +
                           " bytes, expected " + std::to_string(expected));
}

// "<codec>: data decodes to more than <expected> bytes".
inline Status DecodedSizeTooLarge(std::string_view codec, uint64_t expected) {
  return CorruptChunkError(std::string(codec) + ": data decodes to more than " +
                           std::to_string(expected) + " bytes, the expected size");
}

}  // namespace zarrstream

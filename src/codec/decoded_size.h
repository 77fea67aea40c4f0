// Bounds and messages shared by the decoders about how many bytes a chunk decodes to.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "codec/codec.h"
#include "util/checked_size.h"
#include "zarrstream/status.h"

namespace zarrstream {

// The most bytes a compressor writes for `decoded_size` bytes. The worst cases, on incompressible
// data, are all under 1% plus a header: zstd n/256 + 64, DEFLATE 5 bytes per 64 KiB stored block
// + 18 (gzip), LZ4 n/255 + 16 (+ numcodecs' 4-byte size), bzip2 n/100 + 600, blosc n + 16. The
// bound is far more generous (n/32 + 64 KiB) so that no real encoder's output, headers with file
// names or comments included, is ever refused: it exists to stop decompression bombs, whose
// declared sizes are orders of magnitude larger, not to check encoders.
inline uint64_t MaxCompressedSize(uint64_t decoded_size) {
  return SaturatingAdd(decoded_size, decoded_size / 32 + (uint64_t{64} << 10));
}

// "<codec>: data decodes to <actual> bytes, expected <expected>".
inline Status DecodedSizeMismatch(std::string_view codec, uint64_t actual, uint64_t expected) {
  return CorruptChunkError(std::string(codec) + ": data decodes to " + std::to_string(actual) +
                           " bytes, expected " + std::to_string(expected));
}

// The data decodes to more than `size` allows: "<codec>: data decodes to more than <n> bytes, the
// expected size" or "..., the most this chunk's declared size allows here".
inline Status DecodedSizeTooLarge(std::string_view codec, DecodedSize size) {
  std::string message(codec);
  message += ": data decodes to more than ";
  message += std::to_string(size.bytes());
  message += size.exact() ? " bytes, the expected size"
                          : " bytes, the most this chunk's declared size allows here";
  return CorruptChunkError(std::move(message));
}

// A header declares a decoded size that `size` does not allow: a mismatch with an exact size, or
// "<codec>: <what> declares <n> bytes, more than <limit> bytes, the most this chunk's declared size
// allows here" (a decompression bomb, refused before anything is allocated).
inline Status DeclaredSizeTooLarge(std::string_view codec, std::string_view what, uint64_t declared,
                                   DecodedSize size) {
  if (size.exact()) return DecodedSizeMismatch(codec, declared, size.bytes());
  std::string message(codec);
  message += ": ";
  message += what;
  message += " declares ";
  message += std::to_string(declared);
  message += " bytes, more than ";
  message += std::to_string(size.bytes());
  message += " bytes, the most this chunk's declared size allows here";
  return CorruptChunkError(std::move(message));
}

}  // namespace zarrstream

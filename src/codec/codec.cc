#include "codec/codec.h"

#include <cstring>
#include <string>

namespace zarrstream {

uint64_t ChunkRepresentation::num_elements() const {
  uint64_t n = 1;
  for (uint64_t extent : shape) n *= extent;
  return n;
}

// The fallback decodes into the nested level of the scratch, which the chain never uses itself
// (see CodecScratch), then copies.
Status BytesToBytesCodec::DecodeInto(std::span<const std::byte> encoded,
                                     std::span<std::byte> decoded, CodecScratch* scratch) const {
  ByteBuffer local;
  ByteBuffer& buffer = scratch != nullptr ? scratch->nested().buffers[0] : local;
  ZS_RETURN_IF_ERROR(Decode(encoded, decoded.size(), &buffer));
  if (buffer.size() != decoded.size()) {
    // Decode was told the size; a codec that ignores it is a bug, not a corrupt chunk.
    return InternalError("bytes->bytes codec decoded " + std::to_string(buffer.size()) +
                         " bytes where " + std::to_string(decoded.size()) + " were expected");
  }
  if (!decoded.empty()) std::memcpy(decoded.data(), buffer.data(), decoded.size());
  return Status::Ok();
}

}  // namespace zarrstream

#include "codec/codec.h"

#include <cstring>
#include <string>

#include "codec/decoded_size.h"

namespace zarrstream {

uint64_t ChunkRepresentation::num_elements() const {
  uint64_t n = 1;
  for (uint64_t extent : shape) n *= extent;
  return n;
}

bool IsAllFill(std::span<const std::byte> chunk, std::span<const std::byte> fill_value) {
  const size_t element_size = fill_value.size();
  if (chunk.size() < element_size) return chunk.empty();
  if (std::memcmp(chunk.data(), fill_value.data(), element_size) != 0) return false;
  // The first element is the fill value; every element equals the one before it exactly when the
  // buffer equals itself shifted by one element (one memcmp instead of one per element).
  return std::memcmp(chunk.data(), chunk.data() + element_size, chunk.size() - element_size) == 0;
}

uint64_t BytesToBytesCodec::MaxEncodedSize(uint64_t decoded_size) const {
  if (std::optional<uint64_t> fixed = EncodedSize(decoded_size)) return *fixed;
  return MaxCompressedSize(decoded_size);
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

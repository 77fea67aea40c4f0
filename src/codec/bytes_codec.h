// bytes: the Zarr v3 array→bytes codec that stores a chunk's elements in C order with a given byte
// order. Complex numbers are swapped per component (real and imaginary parts separately).
#pragma once

#include <memory>

#include "codec/codec.h"

namespace zarrstream {

// Configuration: {"endian": "little"|"big"}; endian may be left out only for 1-byte types.
// Registered as "bytes".
Result<std::unique_ptr<ArrayToBytesCodec>> MakeBytesCodec(const nlohmann::json& configuration,
                                                          const ChunkRepresentation& decoded);

}  // namespace zarrstream

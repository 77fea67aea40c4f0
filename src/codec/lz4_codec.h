// numcodecs.lz4: numcodecs' LZ4 framing, a 4-byte little-endian decoded size followed by one raw
// LZ4 block (not the LZ4 frame format).
#pragma once

#include <memory>

#include "codec/codec.h"

namespace zarrstream {

// Configuration: {"acceleration": int (default 1; values below 1 mean 1, as in LZ4)}.
// Registered as "numcodecs.lz4".
Result<std::unique_ptr<BytesToBytesCodec>> MakeLz4Codec(
    const nlohmann::json& configuration, const ChunkRepresentation& array_representation);

}  // namespace zarrstream

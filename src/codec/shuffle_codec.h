// numcodecs.shuffle: numcodecs' Shuffle filter, a byte transposition that stores byte 0 of every
// element, then byte 1 of every element, and so on, so that compressors see similar bytes together.
// It works on bytes (after the "bytes" codec), so v2 shuffle filters are placed there.
#pragma once

#include <memory>

#include "codec/codec.h"

namespace zarrstream {

// Configuration: {"elementsize": int >= 0 (default: the array's element size)}. An element size of
// 0 or 1 leaves the bytes as they are. A trailing partial element is left as it is (numcodecs
// itself refuses such buffers, so only other writers produce them). Registered as
// "numcodecs.shuffle".
Result<std::unique_ptr<BytesToBytesCodec>> MakeShuffleCodec(
    const nlohmann::json& configuration, const ChunkRepresentation& array_representation);

}  // namespace zarrstream

// numcodecs.bz2: bzip2 streams, as numcodecs' BZ2 writes them. Several concatenated streams
// decode to their concatenation (as Python's bz2 module does). libbz2 allocates its state per
// call; bzip2 is slow enough that this does not show.
#pragma once

#include <memory>

#include "codec/codec.h"

namespace zarrstream {

// Configuration: {"level": 1-9 (default 1, numcodecs' default)}. Registered as "numcodecs.bz2".
Result<std::unique_ptr<BytesToBytesCodec>> MakeBz2Codec(
    const nlohmann::json& configuration, const ChunkRepresentation& array_representation);

}  // namespace zarrstream

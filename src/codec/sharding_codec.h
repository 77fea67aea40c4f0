// sharding_indexed: an array→bytes codec that stores a grid of inner chunks in one object (a shard),
// followed or preceded by an index of (offset, nbytes) pairs. Reading a region of a shard needs only
// its index and the byte ranges of the inner chunks the region touches (see array/chunk_reader.h).
#pragma once

#include <memory>

#include "codec/codec.h"

namespace zarrstream {

// Registered as "sharding_indexed".
Result<std::unique_ptr<ArrayToBytesCodec>> MakeShardingCodec(const nlohmann::json& configuration,
                                                             const ChunkRepresentation& decoded);

}  // namespace zarrstream

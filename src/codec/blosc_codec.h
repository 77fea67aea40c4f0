// blosc: the Zarr v3 "blosc" bytes→bytes codec (and v2 "blosc" compressors), with c-blosc 1.x.
//
// Decoding validates the 16-byte header against the input (c-blosc then bounds every block by the
// header's compressed size) and its decoded size against the expected size before decompressing;
// it uses the context API with one internal thread, so concurrent decodes share no global state.
#pragma once

#include <memory>

#include "codec/codec.h"

namespace zarrstream {

// Configuration: {"cname": "lz4"|"lz4hc"|"zstd"|"zlib"|"blosclz"|"snappy" (default "lz4"),
// "clevel": 0-9 (default 5), "shuffle": "noshuffle"|"shuffle"|"bitshuffle" (default "noshuffle"),
// "typesize": 1-255 (default: the array's element size), "blocksize": bytes, 0 = automatic
// (default 0)}. Registered as "blosc".
Result<std::unique_ptr<BytesToBytesCodec>> MakeBloscCodec(
    const nlohmann::json& configuration, const ChunkRepresentation& array_representation);

}  // namespace zarrstream

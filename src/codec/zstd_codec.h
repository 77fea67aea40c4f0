// zstd: the Zarr v3 "zstd" bytes→bytes codec (also what v2 "zstd" compressors become).
//
// Decoding accepts everything zstd writes: one or several concatenated frames, with or without a
// content-size field, skippable frames. Each thread reuses one ZSTD_DCtx, so decoding a chunk
// allocates nothing once the thread has decoded its first.
#pragma once

#include <memory>

#include "codec/codec.h"

namespace zarrstream {

// Configuration: {"level": int (default 0, zstd's default level), "checksum": bool (default
// false)}. Registered as "zstd".
Result<std::unique_ptr<BytesToBytesCodec>> MakeZstdCodec(
    const nlohmann::json& configuration, const ChunkRepresentation& array_representation);

}  // namespace zarrstream

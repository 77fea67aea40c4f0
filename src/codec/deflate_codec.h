// DEFLATE in its two wrappers: "gzip" (RFC 1952, the Zarr v3 codec and numcodecs' GZip) and
// "numcodecs.zlib" (RFC 1950, numcodecs' Zlib). Both decode and encode with libdeflate, which
// decodes whole buffers about twice as fast as zlib; each thread reuses one decompressor.
//
// libdeflate decodes in one shot into a buffer of known size. When the caller knows only a bound
// (DecodedSize::AtMost), the decoder starts from a guess (gzip: the member's ISIZE trailer) and
// doubles it on failure, up to DEFLATE's maximum ratio of 1032:1 and the bound.
#pragma once

#include <memory>

#include "codec/codec.h"

namespace zarrstream {

// Configuration: {"level": 0-9 (default 5)}. Several concatenated gzip members decode to their
// concatenation, and zero bytes after the last member are ignored (as gzip and Python do).
// Registered as "gzip".
Result<std::unique_ptr<BytesToBytesCodec>> MakeGzipCodec(
    const nlohmann::json& configuration, const ChunkRepresentation& array_representation);

// Configuration: {"level": 0-9 (default 1, numcodecs' default)}. Exactly one zlib stream; bytes
// after it are a kCorruptChunk error. Registered as "numcodecs.zlib".
Result<std::unique_ptr<BytesToBytesCodec>> MakeZlibCodec(
    const nlohmann::json& configuration, const ChunkRepresentation& array_representation);

}  // namespace zarrstream

// Parsers for Zarr v2 metadata: .zarray, .zgroup, .zattrs and consolidated .zmetadata, normalised
// into the v3-style model of array_metadata.h.
//
// Normalisation of a v2 array into a v3 codec chain, in order:
//   1. order "F"  →  {"transpose", {"order": [n-1, ..., 0]}}
//   2. each filter: delta → "numcodecs.delta", fixedscaleoffset → "numcodecs.fixedscaleoffset"
//      (configurations as numcodecs writes them: dtype, astype, scale, offset); a shuffle filter
//      becomes "numcodecs.shuffle" placed after the bytes codec (it works on bytes).
//   3. {"bytes", {"endian": "little"|"big"}} from the dtype's byte order (omitted endian for 1-byte
//      types).
//   4. compressor: zstd → "zstd" {level, checksum:false}; blosc → "blosc" {cname, clevel, shuffle
//      ("noshuffle"|"shuffle"|"bitshuffle"), blocksize, typesize}; gzip → "gzip" {level};
//      zlib → "numcodecs.zlib" {level}; lz4 → "numcodecs.lz4" {acceleration}; bz2 →
//      "numcodecs.bz2" {level}.
// Anything else (other filters, object dtypes, structured dtypes) is a kUnsupported error naming
// it. Chunk key encoding is {kV2, dimension_separator (default '.')}. _ARRAY_DIMENSIONS in .zattrs
// becomes dimension_names and is removed from attributes.
#pragma once

#include <optional>
#include <string_view>

#include "metadata/array_metadata.h"

namespace zarrstream {

// `zattrs` is the .zattrs document when present.
Result<ArrayMetadata> ParseV2ArrayMetadata(std::string_view zarray,
                                           std::optional<std::string_view> zattrs);
Result<GroupMetadata> ParseV2GroupMetadata(std::string_view zgroup,
                                           std::optional<std::string_view> zattrs);

// Parses a consolidated .zmetadata document into every node below the group it sits in (keys
// relative to it; the root itself under ""). Arrays and groups get their .zattrs merged in.
Result<ConsolidatedMetadata> ParseV2ConsolidatedMetadata(std::string_view zmetadata);

// Parses a numpy-style v2 dtype string ("<f4", ">i8", "|u1", "|b1", "<c16") into a data type and
// whether it is big-endian (1-byte types: false).
Result<std::pair<DataType, bool>> ParseV2DataType(std::string_view dtype);

}  // namespace zarrstream

// Short compressor specs ("zstd:3", "blosc:lz4:5:bitshuffle") and the codec chains zarrstream
// writes from them. Shared by Array::Create and the rechunk tool (`--codec zstd:3`), so that both
// accept the same spellings and write the same zarr.json.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "metadata/array_metadata.h"
#include "zarrstream/data_type.h"
#include "zarrstream/status.h"

namespace zarrstream {

// Parses a short compressor spec into the v3 bytes→bytes codecs it stands for (none for "none"):
//   none
//   zstd[:level]                   → zstd {level (default 3), checksum: false}
//   gzip[:level]                   → gzip {level (default 5)}
//   lz4                            → numcodecs.lz4 {acceleration: 1}
//   blosc[:cname[:clevel[:shuffle]]] → blosc {cname (default zstd), clevel (default 5),
//                                     shuffle: shuffle|bitshuffle|noshuffle (default: bitshuffle
//                                     for 1-byte types, else shuffle, as zarr-python does),
//                                     typesize: the size of `data_type`, blocksize: 0}
// Each codec's configuration is checked by the codec itself, so a level out of range or an unknown
// blosc cname fails here, not when the first chunk is written. Errors are kInvalidArgument and
// quote the spec.
Result<std::vector<CodecSpec>> ParseCompressorSpec(std::string_view spec, DataType data_type);

// The codec chain for chunks of `data_type` compressed as `compressor` (a short spec):
//   unsharded: [bytes, <compressor>]
//   sharded (inner_chunk_shape set): [sharding_indexed {chunk_shape: inner_chunk_shape,
//       codecs: [bytes, <compressor>], index_codecs: [bytes, crc32c], index_location: "end"}]
// "bytes" is little-endian, its endian left out for 1-byte types (as zarr-python writes it).
Result<std::vector<CodecSpec>> MakeCodecChainSpecs(
    std::string_view compressor, DataType data_type,
    std::optional<std::span<const uint64_t>> inner_chunk_shape = std::nullopt);

}  // namespace zarrstream

// transpose: the Zarr v3 array→array codec that permutes a chunk's dimensions; v2 arrays with
// order "F" become a transpose with the reversed order.
//
// The permutation is planned once per chunk shape: unit dimensions are dropped and dimensions that
// stay adjacent are merged, so most permutations become either a copy, a loop of contiguous row
// copies, or a 2-D transpose (repeated over the remaining dimensions) done in cache-sized tiles.
// The loops step through offsets by adding strides: no per-element index arithmetic.
#pragma once

#include <memory>

#include "codec/codec.h"

namespace zarrstream {

// Configuration: {"order": [permutation of 0..rank-1]}, or the legacy strings "C" (identity) and
// "F" (reversed). Encoding gives np.transpose(chunk, order). Registered as "transpose".
Result<std::unique_ptr<ArrayToArrayCodec>> MakeTransposeCodec(const nlohmann::json& configuration,
                                                              const ChunkRepresentation& decoded);

}  // namespace zarrstream

// numcodecs.delta: numcodecs' Delta filter. Encoding stores the first element and then the
// differences of neighbours (in `dtype` arithmetic), cast to `astype`; decoding is numpy's
// np.cumsum(encoded, out=decoded): the running sum is kept in numpy's result_type(astype, dtype)
// (wrapping for integers) and each partial sum cast to `dtype`. The chunk is treated as flat.
#pragma once

#include <memory>

#include "codec/codec.h"

namespace zarrstream {

// Configuration: {"dtype": numpy type string, "astype": numpy type string (default: dtype)}.
// `dtype` must be the chunk's data type; the encoded representation has data type `astype`. The
// strings' byte order is ignored: filters see native-endian values. Integer and float types only.
// Registered as "numcodecs.delta".
Result<std::unique_ptr<ArrayToArrayCodec>> MakeDeltaCodec(const nlohmann::json& configuration,
                                                          const ChunkRepresentation& decoded);

}  // namespace zarrstream

// numcodecs.fixedscaleoffset: numcodecs' FixedScaleOffset filter, which stores values as
// round((x - offset) * scale) in a (usually narrower) integer type.
//
// Both directions follow numpy 2's rules, with scale and offset as Python scalars: decoding
// computes (enc / scale) + offset in `astype` if that is a float type, else in float64, then casts
// to `dtype`; encoding computes in `dtype` if that is a float type, else in integer arithmetic
// while the scalars are integers and float64 from the first float scalar on, rounds half to even
// (np.around) and casts to `astype`.
#pragma once

#include <memory>

#include "codec/codec.h"

namespace zarrstream {

// Configuration: {"scale": number, "offset": number, "dtype": numpy type string, "astype": numpy
// type string (default: dtype)}. `dtype` must be the chunk's data type; the encoded
// representation has data type `astype`. Integer and float types only. Registered as
// "numcodecs.fixedscaleoffset".
Result<std::unique_ptr<ArrayToArrayCodec>> MakeFixedScaleOffsetCodec(
    const nlohmann::json& configuration, const ChunkRepresentation& decoded);

}  // namespace zarrstream

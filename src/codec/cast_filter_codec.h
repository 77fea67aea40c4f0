// numcodecs.quantize, numcodecs.bitround and numcodecs.astype: numcodecs' filters whose decoding is
// at most a numpy cast of each value.
//
// quantize and bitround are lossy on encode (they round values so that compressors do better) and
// numcodecs' decoders undo nothing: quantize casts its `astype` back to `dtype`, bitround returns
// the stored floats as they are. astype casts `encode_dtype` back to `decode_dtype`. Casts are
// numpy's astype (numpy_arithmetic.h: Cast); encoders reproduce numcodecs' rounding bit for bit.
//
// A filter whose decoding leaves the bytes as they are (bitround; quantize or astype between equal
// types) says so in its traits (CodecTraits::identity_decode), so that decoders of the rest of the
// chain (the GPU path) may skip it.
#pragma once

#include <memory>

#include "codec/codec.h"

namespace zarrstream {

// Configuration: {"digits": integer, "dtype": numpy type, "astype": numpy type (default: dtype)};
// float types only. Encoding rounds to a power-of-two fraction finer than 10^-digits. Registered as
// "numcodecs.quantize".
Result<std::unique_ptr<ArrayToArrayCodec>> MakeQuantizeCodec(const nlohmann::json& configuration,
                                                             const ChunkRepresentation& decoded);

// Configuration: {"keepbits": integer in [0, mantissa bits]}; float16, float32 and float64 chunks.
// Encoding rounds the mantissa to `keepbits` bits (half to even); decoding is the identity.
// Registered as "numcodecs.bitround".
Result<std::unique_ptr<ArrayToArrayCodec>> MakeBitRoundCodec(const nlohmann::json& configuration,
                                                             const ChunkRepresentation& decoded);

// Configuration: {"encode_dtype": numpy type, "decode_dtype": numpy type (default: the chunk's)};
// integer and float types. Registered as "numcodecs.astype".
Result<std::unique_ptr<ArrayToArrayCodec>> MakeAsTypeCodec(const nlohmann::json& configuration,
                                                           const ChunkRepresentation& decoded);

}  // namespace zarrstream

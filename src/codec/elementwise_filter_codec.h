// An array → array filter that maps each element of a chunk to one element of the encoded chunk
// (numcodecs' fixedscaleoffset, quantize, bitround and astype): the shape stays, the data type may
// change. Each filter supplies its element kernels; this checks the buffers and encodes the fill
// value.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "codec/codec.h"

namespace zarrstream {

// Converts `n` elements from `in` to `out` (unaligned bytes, native endian). Called from any
// thread, concurrently: kernels only read what they captured.
using ElementKernel = std::function<void(const std::byte* in, std::byte* out, uint64_t n)>;

struct ElementwiseFilter {
  std::string name;                // the registered name ("numcodecs.quantize")
  CodecTraits traits;              // what ArrayToArrayCodec::traits says
  DataType encoded_type;           // the encoded chunk's data type
  nlohmann::json configuration;    // what ToJson writes (with defaults filled in)
  ElementKernel encode = nullptr;  // decoded type → encoded_type
  ElementKernel decode = nullptr;  // encoded_type → decoded type
};

// The codec of `filter` over chunks of `decoded`. The encoded fill value is `encode` of the
// decoded one.
std::unique_ptr<ArrayToArrayCodec> MakeElementwiseFilterCodec(ElementwiseFilter filter,
                                                              const ChunkRepresentation& decoded);

// The error of a filter named `name` that cannot convert between `decoded` and `encoded`;
// `supported` says which types it takes ("float types").
Status UnsupportedElementTypes(std::string_view name, DataType decoded, DataType encoded,
                               std::string_view supported);

}  // namespace zarrstream

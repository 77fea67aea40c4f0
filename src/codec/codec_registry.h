// The codec registry: codec name → factory that prepares the codec for a chunk representation.
//
// Built-in codecs are listed in codec_registry.cc (one line each, next to the file implementing
// them); RegisterCodec adds more at run time.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "codec/codec.h"

namespace zarrstream {

enum class CodecKind : uint8_t { kArrayToArray, kArrayToBytes, kBytesToBytes };

// Factories take the codec's configuration object and the representation the codec sees on its
// decoded side (for bytes→bytes codecs: the representation entering the chain's array→bytes codec,
// which blosc and shuffle use for their default type size). They validate the configuration and
// return kMetadata errors naming the offending field.
using ArrayToArrayFactory = std::function<Result<std::unique_ptr<ArrayToArrayCodec>>(
    const nlohmann::json& configuration, const ChunkRepresentation& decoded)>;
using ArrayToBytesFactory = std::function<Result<std::unique_ptr<ArrayToBytesCodec>>(
    const nlohmann::json& configuration, const ChunkRepresentation& decoded)>;
using BytesToBytesFactory = std::function<Result<std::unique_ptr<BytesToBytesCodec>>(
    const nlohmann::json& configuration, const ChunkRepresentation& array_representation)>;

struct CodecRegistration {
  std::string name;
  CodecKind kind;
  ArrayToArrayFactory array_to_array;  // set for kArrayToArray
  ArrayToBytesFactory array_to_bytes;  // set for kArrayToBytes
  BytesToBytesFactory bytes_to_bytes;  // set for kBytesToBytes
};

void RegisterCodec(CodecRegistration registration);

// The registration for `name`, or null when no codec of that name is known.
const CodecRegistration* FindCodec(std::string_view name);

}  // namespace zarrstream

// CodecChain: a prepared v3 codec pipeline (array→array*, array→bytes, bytes→bytes*) for one chunk
// representation. Built once when an array is opened; then decodes chunks from any number of
// threads.
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "codec/codec.h"
#include "metadata/array_metadata.h"

namespace zarrstream {

class ShardingCodec;

class CodecChain {
 public:
  // Prepares `specs` for chunks of `decoded`. Errors name the codec that could not be prepared.
  static Result<std::shared_ptr<const CodecChain>> Make(std::span<const CodecSpec> specs,
                                                        const ChunkRepresentation& decoded);

  const ChunkRepresentation& decoded_representation() const { return decoded_; }

  // Decodes one whole chunk into `out` (decoded_representation().num_bytes(), C order, native
  // endian). When the chain allows it (no array→array codecs, an identity array→bytes codec) the
  // last bytes→bytes codec decompresses straight into `out`. Thread-safe; `scratch` is the
  // caller's.
  Status Decode(std::span<const std::byte> encoded, std::span<std::byte> out,
                CodecScratch* scratch) const;

  // Encodes one whole chunk (decoded_representation().num_bytes() bytes) into `out`, which is
  // resized and its memory reused. Intermediate stages use `scratch` (the caller's, as for Decode),
  // so a writer encoding chunk after chunk allocates nothing once its buffers have grown.
  // `out` must not alias `decoded` or the scratch buffers. Thread-safe.
  Status Encode(std::span<const std::byte> decoded, ByteBuffer* out, CodecScratch* scratch) const;
  // The same with a scratch of its own: for one-off encodes (a shard index, tests).
  Status Encode(std::span<const std::byte> decoded, ByteBuffer* out) const;

  // The encoded size when it does not depend on the values (e.g. [bytes, crc32c]).
  std::optional<uint64_t> encoded_size() const;
  // The most bytes an encoded chunk can take: encoded_size() when fixed, else the bound each
  // codec's worst-case expansion gives (ArrayToBytesCodec::max_encoded_size,
  // BytesToBytesCodec::MaxEncodedSize).
  uint64_t max_encoded_size() const { return max_encoded_size_; }

  // The sharding codec when the chain is exactly [sharding_indexed], so reads can fetch a shard's
  // index and then only the inner chunks they need. Null otherwise.
  const ShardingCodec* sharding() const { return sharding_; }

  // The chain as zarr.json's "codecs" list.
  nlohmann::json ToJson() const;

  // The prepared codecs, in the chain's order: array→array codecs, the array→bytes codec,
  // bytes→bytes codecs. For layers that plan around what a chain's codecs are (their traits()).
  std::span<const std::unique_ptr<ArrayToArrayCodec>> array_to_array() const {
    return array_to_array_;
  }
  const ArrayToBytesCodec& array_to_bytes() const { return *array_to_bytes_; }
  std::span<const std::unique_ptr<BytesToBytesCodec>> bytes_to_bytes() const {
    return bytes_to_bytes_;
  }

 private:
  CodecChain() = default;

  ChunkRepresentation decoded_;
  std::vector<std::unique_ptr<ArrayToArrayCodec>> array_to_array_;
  std::unique_ptr<ArrayToBytesCodec> array_to_bytes_;
  std::vector<std::unique_ptr<BytesToBytesCodec>> bytes_to_bytes_;
  // What each bytes→bytes codec's decoder is told of its output's size (index i: the input of
  // codec i's encode): exact when every codec before it has a fixed-size output, else the bound
  // that the chunk's declared size and the worst-case expansions of the codecs before it give.
  std::vector<DecodedSize> bytes_sizes_;
  uint64_t max_encoded_size_ = 0;
  const ShardingCodec* sharding_ = nullptr;
};

}  // namespace zarrstream

// sharding_indexed: an array→bytes codec that stores a grid of inner chunks in one object (a shard)
// with an index of (offset, nbytes) pairs at its start or end. The array layer reads a region of a
// shard with partial reads: the index first (index_range()), then only the byte ranges of the inner
// chunks the region touches, each decoded with inner_chain(). Decode() handles a whole shard held
// in memory, which is how nested sharding and chains with other codecs around sharding are read.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "codec/codec.h"
#include "codec/codec_chain.h"
#include "store/store.h"

namespace zarrstream {

// A decoded shard index: for each inner chunk (C order over the chunks-per-shard grid) where its
// bytes lie in the shard, or that it is empty (reads as the fill value).
class ShardIndex {
 public:
  static constexpr uint64_t kEmpty = ~uint64_t{0};

  ShardIndex() = default;
  explicit ShardIndex(std::vector<uint64_t> entries) : entries_(std::move(entries)) {}

  uint64_t num_chunks() const { return entries_.size() / 2; }
  bool is_empty(uint64_t i) const {
    return entries_[2 * i] == kEmpty && entries_[2 * i + 1] == kEmpty;
  }
  uint64_t offset(uint64_t i) const { return entries_[2 * i]; }
  uint64_t nbytes(uint64_t i) const { return entries_[2 * i + 1]; }

 private:
  std::vector<uint64_t> entries_;
};

class ShardingCodec final : public ArrayToBytesCodec {
 public:
  static Result<std::unique_ptr<ShardingCodec>> Make(const nlohmann::json& configuration,
                                                     const ChunkRepresentation& decoded);

  const std::vector<uint64_t>& inner_chunk_shape() const { return inner_chunk_shape_; }
  const std::vector<uint64_t>& chunks_per_shard() const { return chunks_per_shard_; }
  uint64_t num_inner_chunks() const { return num_inner_chunks_; }
  const CodecChain& inner_chain() const { return *inner_chain_; }

  // Where the encoded index lies in a shard, and its size.
  ByteRange index_range() const;
  uint64_t index_size() const { return index_size_; }

  // Decodes an encoded index (index_size() bytes). With `shard_size`, also checks that every
  // entry lies inside the shard and outside the index; without it, that entries do not overflow.
  Result<ShardIndex> DecodeIndex(std::span<const std::byte> encoded,
                                 std::optional<uint64_t> shard_size, CodecScratch* scratch) const;

  // Lays out a shard from its encoded inner chunks: `inner_chunks[i]` holds inner chunk i (C order
  // over chunks_per_shard()); an empty span is an empty chunk (index entry offset = nbytes =
  // 2^64-1; no codec encodes a chunk to zero bytes). The chunks are stored back to back in index
  // order and the index at the configured end, the layout zarr-python and tensorstore write.
  // Writers encode inner chunks in parallel (or keep the bytes of untouched ones) and assemble
  // here; `shard` is resized and its memory reused.
  Status AssembleShard(std::span<const std::span<const std::byte>> inner_chunks, ByteBuffer* shard,
                       CodecScratch* scratch) const;

  Status Decode(std::span<const std::byte> encoded, std::span<std::byte> decoded,
                CodecScratch* scratch) const override;
  // The index plus every inner chunk at its chain's bound.
  uint64_t max_encoded_size() const override;
  // Inner chunks whose values all equal the fill value are not stored (marked empty).
  Status Encode(std::span<const std::byte> decoded, ByteBuffer* encoded) const override;
  nlohmann::json ToJson() const override;
  CodecTraits traits() const override { return {.type = CodecTraits::Type::kSharding}; }

 private:
  // nlohmann::json's noexcept default constructor holds a throw that cannot run for a null value.
  ShardingCodec() = default;  // NOLINT(bugprone-exception-escape)

  // Encode, whose allocations may throw std::bad_alloc (Encode makes that an error).
  Status EncodeShard(std::span<const std::byte> decoded, ByteBuffer* encoded) const;

  ChunkRepresentation decoded_;
  std::vector<uint64_t> inner_chunk_shape_;
  std::vector<uint64_t> chunks_per_shard_;
  uint64_t num_inner_chunks_ = 0;
  bool index_at_end_ = true;
  uint64_t index_size_ = 0;
  std::shared_ptr<const CodecChain> inner_chain_;
  std::shared_ptr<const CodecChain> index_chain_;
  nlohmann::json configuration_;
};

// Registered as "sharding_indexed".
Result<std::unique_ptr<ArrayToBytesCodec>> MakeShardingCodec(const nlohmann::json& configuration,
                                                             const ChunkRepresentation& decoded);

}  // namespace zarrstream

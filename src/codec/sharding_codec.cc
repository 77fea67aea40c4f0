#include "codec/sharding_codec.h"

#include <cstring>

#include "codec/decoded_size.h"
#include "metadata/v3_metadata.h"
#include "util/checked_size.h"
#include "util/format.h"
#include "util/strided_copy.h"

namespace zarrstream {

namespace {

// Inner chunk `linear` (C order over `grid`) → its grid coordinates.
void Unravel(uint64_t linear, std::span<const uint64_t> grid, std::span<uint64_t> coords) {
  for (size_t d = grid.size(); d-- > 0;) {
    coords[d] = linear % grid[d];
    linear /= grid[d];
  }
}

}  // namespace

Result<std::unique_ptr<ShardingCodec>> ShardingCodec::Make(const nlohmann::json& configuration,
                                                           const ChunkRepresentation& decoded) {
  std::unique_ptr<ShardingCodec> codec(new ShardingCodec());
  codec->decoded_ = decoded;
  codec->configuration_ = configuration;
  if (!configuration.is_object())
    return MetadataError("sharding_indexed: configuration must be an object");
  for (const auto& [key, value] : configuration.items()) {
    if (key != "chunk_shape" && key != "codecs" && key != "index_codecs" &&
        key != "index_location") {
      return MetadataError("sharding_indexed: unknown configuration field '" + key + "'");
    }
  }
  const auto chunk_shape = configuration.find("chunk_shape");
  if (chunk_shape == configuration.end() || !chunk_shape->is_array() ||
      chunk_shape->size() != decoded.shape.size()) {
    return MetadataError("sharding_indexed: 'chunk_shape' must be a list of " +
                         std::to_string(decoded.shape.size()) + " positive integers");
  }
  codec->num_inner_chunks_ = 1;
  for (size_t d = 0; d < decoded.shape.size(); ++d) {
    const auto& v = (*chunk_shape)[d];
    if (!v.is_number_unsigned() || v.get<uint64_t>() == 0) {
      return MetadataError("sharding_indexed: 'chunk_shape' must be a list of positive integers");
    }
    uint64_t inner = v.get<uint64_t>();
    if (decoded.shape[d] % inner != 0) {
      return MetadataError("sharding_indexed: inner chunk_shape " + chunk_shape->dump() +
                           " does not divide the shard shape " + FormatIndex(decoded.shape));
    }
    codec->inner_chunk_shape_.push_back(inner);
    codec->chunks_per_shard_.push_back(decoded.shape[d] / inner);
    std::optional<uint64_t> chunks = CheckedMul(codec->num_inner_chunks_, decoded.shape[d] / inner);
    if (!chunks) return UnsupportedError("sharding_indexed: a shard has 2^64 or more inner chunks");
    codec->num_inner_chunks_ = *chunks;
  }
  // Two uint64 entries per inner chunk: an index that cannot be addressed cannot be read.
  if (!CheckedMul(codec->num_inner_chunks_, 16)) {
    return UnsupportedError("sharding_indexed: the shard index of " +
                            std::to_string(codec->num_inner_chunks_) +
                            " inner chunks has 2^64 or more bytes");
  }
  if (auto loc = configuration.find("index_location"); loc != configuration.end()) {
    if (*loc == "start") {
      codec->index_at_end_ = false;
    } else if (*loc != "end") {
      return MetadataError("sharding_indexed: 'index_location' must be \"start\" or \"end\"");
    }
  }
  auto codecs = configuration.find("codecs");
  if (codecs == configuration.end()) return MetadataError("sharding_indexed: 'codecs' is missing");
  ZS_ASSIGN_OR_RETURN(auto inner_specs, ParseV3Codecs(*codecs, "sharding_indexed.codecs"));
  ChunkRepresentation inner = decoded;
  inner.shape = codec->inner_chunk_shape_;
  ZS_ASSIGN_OR_RETURN_CTX(codec->inner_chain_, CodecChain::Make(inner_specs, inner),
                          "sharding_indexed inner codecs");

  std::vector<CodecSpec> index_specs;
  if (auto it = configuration.find("index_codecs"); it != configuration.end()) {
    ZS_ASSIGN_OR_RETURN(index_specs, ParseV3Codecs(*it, "sharding_indexed.index_codecs"));
  } else {
    index_specs = {CodecSpec{"bytes", {{"endian", "little"}}}, CodecSpec{"crc32c", {}}};
  }
  ChunkRepresentation index_repr;
  index_repr.data_type = DataType::kUInt64;
  index_repr.shape = codec->chunks_per_shard_;
  index_repr.shape.push_back(2);
  index_repr.fill_value.assign(8, std::byte{0xff});
  ZS_ASSIGN_OR_RETURN_CTX(codec->index_chain_, CodecChain::Make(index_specs, index_repr),
                          "sharding_indexed index_codecs");
  auto size = codec->index_chain_->encoded_size();
  if (!size) {
    return MetadataError(
        "sharding_indexed: 'index_codecs' must give a fixed-size index "
        "(compressing codecs are not allowed there)");
  }
  codec->index_size_ = *size;
  return codec;
}

uint64_t ShardingCodec::max_encoded_size() const {
  return SaturatingAdd(index_size_,
                       SaturatingMul(num_inner_chunks_, inner_chain_->max_encoded_size()));
}

ByteRange ShardingCodec::index_range() const {
  return index_at_end_ ? ByteRange::Suffix(index_size_) : ByteRange::Bounded(0, index_size_);
}

Result<ShardIndex> ShardingCodec::DecodeIndex(std::span<const std::byte> encoded,
                                              std::optional<uint64_t> shard_size,
                                              CodecScratch* scratch) const {
  if (encoded.size() != index_size_) {
    return CorruptChunkError("shard index is " + std::to_string(encoded.size()) +
                             " bytes, expected " + std::to_string(index_size_));
  }
  // The index's declared size, not the stored bytes, sizes the entries (they matched above).
  ZS_RETURN_IF_ERROR(CheckAllocation("decoding a shard index", num_inner_chunks_ * 16));
  std::vector<uint64_t> entries;
  try {
    entries.resize(num_inner_chunks_ * 2);
  } catch (const std::bad_alloc&) {
    return OutOfMemoryFor("decoding a shard index", num_inner_chunks_ * 16);
  }
  ZS_RETURN_IF_ERROR_CTX(
      index_chain_->Decode(encoded, std::as_writable_bytes(std::span<uint64_t>(entries)), scratch),
      "decoding shard index");
  ShardIndex index(std::move(entries));
  const uint64_t data_begin = index_at_end_ ? 0 : index_size_;
  for (uint64_t i = 0; i < num_inner_chunks_; ++i) {
    if (index.is_empty(i)) continue;
    const uint64_t offset = index.offset(i), nbytes = index.nbytes(i);
    bool bad = offset > ~uint64_t{0} - nbytes || offset < data_begin;
    if (!bad && shard_size) {
      const uint64_t data_end = index_at_end_ ? *shard_size - index_size_ : *shard_size;
      bad = *shard_size < index_size_ || offset + nbytes > data_end;
    }
    if (bad) {
      std::vector<uint64_t> coords(chunks_per_shard_.size());
      Unravel(i, chunks_per_shard_, coords);
      return CorruptChunkError("shard index entry for inner chunk " + FormatIndex(coords) +
                               " points outside the shard (offset " + std::to_string(offset) +
                               ", nbytes " + std::to_string(nbytes) +
                               (shard_size ? ", shard size " + std::to_string(*shard_size) : "") +
                               ")");
    }
  }
  return index;
}

Status ShardingCodec::Decode(std::span<const std::byte> encoded, std::span<std::byte> decoded,
                             CodecScratch* scratch) const {
  if (encoded.size() < index_size_) {
    return CorruptChunkError("shard of " + std::to_string(encoded.size()) +
                             " bytes is smaller than its index (" + std::to_string(index_size_) +
                             " bytes)");
  }
  CodecScratch& mine = scratch->nested();
  std::span<const std::byte> index_bytes =
      index_at_end_ ? encoded.subspan(encoded.size() - index_size_, index_size_)
                    : encoded.subspan(0, index_size_);
  ZS_ASSIGN_OR_RETURN(ShardIndex index, DecodeIndex(index_bytes, encoded.size(), &mine.nested()));

  const size_t element_size = DataTypeSize(decoded_.data_type);
  const std::vector<int64_t> shard_strides = CStrides(decoded_.shape, element_size);
  const std::vector<int64_t> inner_strides = CStrides(inner_chunk_shape_, element_size);
  const bool inner_contiguous = IsCContiguous(shard_strides, inner_chunk_shape_, element_size);
  const uint64_t inner_bytes = inner_chain_->decoded_representation().num_bytes();
  std::vector<uint64_t> coords(chunks_per_shard_.size());
  for (uint64_t i = 0; i < num_inner_chunks_; ++i) {
    Unravel(i, chunks_per_shard_, coords);
    int64_t offset = 0;
    for (size_t d = 0; d < coords.size(); ++d) {
      offset += static_cast<int64_t>(coords[d] * inner_chunk_shape_[d]) * shard_strides[d];
    }
    std::byte* target = decoded.data() + offset;
    if (index.is_empty(i)) {
      FillStrided(target, shard_strides, inner_chunk_shape_, decoded_.fill_value);
      continue;
    }
    auto bytes = encoded.subspan(index.offset(i), index.nbytes(i));
    Status s;
    if (inner_contiguous) {
      s = inner_chain_->Decode(bytes, std::span<std::byte>(target, inner_bytes), &mine.nested());
    } else {
      s = AllocateBytes(&mine.buffers[0], inner_bytes, "decoding an inner chunk");
      if (s.ok()) s = inner_chain_->Decode(bytes, mine.buffers[0].span(), &mine.nested());
      if (s.ok()) {
        CopyStrided(mine.buffers[0].data(), inner_strides, target, shard_strides,
                    inner_chunk_shape_, element_size);
      }
    }
    ZS_RETURN_IF_ERROR_CTX(s, "inner chunk " + FormatIndex(coords));
  }
  return Status::Ok();
}

Status ShardingCodec::AssembleShard(std::span<const std::span<const std::byte>> inner_chunks,
                                    ByteBuffer* shard, CodecScratch* scratch) const {
  if (inner_chunks.size() != num_inner_chunks_) {
    return InternalError("AssembleShard: " + std::to_string(inner_chunks.size()) +
                         " inner chunks for a shard of " + std::to_string(num_inner_chunks_));
  }
  uint64_t data_size = 0;
  for (std::span<const std::byte> chunk : inner_chunks) data_size += chunk.size();
  const uint64_t data_begin = index_at_end_ ? 0 : index_size_;
  shard->Resize(data_size + index_size_);
  std::vector<uint64_t> entries(2 * num_inner_chunks_, ShardIndex::kEmpty);
  uint64_t offset = data_begin;
  for (uint64_t i = 0; i < num_inner_chunks_; ++i) {
    std::span<const std::byte> chunk = inner_chunks[i];
    if (chunk.empty()) continue;
    entries[2 * i] = offset;
    entries[2 * i + 1] = chunk.size();
    std::memcpy(shard->data() + offset, chunk.data(), chunk.size());
    offset += chunk.size();
  }
  // As a codec handed the caller's scratch, only its nested levels are ours to use.
  CodecScratch& mine = scratch->nested();
  ByteBuffer& index_bytes = mine.buffers[0];
  ZS_RETURN_IF_ERROR(index_chain_->Encode(std::as_bytes(std::span<const uint64_t>(entries)),
                                          &index_bytes, &mine.nested()));
  if (index_bytes.size() != index_size_) {
    return InternalError("shard index encoded to " + std::to_string(index_bytes.size()) +
                         " bytes, expected " + std::to_string(index_size_));
  }
  std::memcpy(shard->data() + (index_at_end_ ? data_size : 0), index_bytes.data(), index_size_);
  return Status::Ok();
}

Status ShardingCodec::Encode(std::span<const std::byte> decoded, ByteBuffer* encoded) const {
  return CatchOutOfMemory("encoding a shard", [&] { return EncodeShard(decoded, encoded); });
}

Status ShardingCodec::EncodeShard(std::span<const std::byte> decoded, ByteBuffer* encoded) const {
  const size_t element_size = DataTypeSize(decoded_.data_type);
  const std::vector<int64_t> shard_strides = CStrides(decoded_.shape, element_size);
  const std::vector<int64_t> inner_strides = CStrides(inner_chunk_shape_, element_size);
  const uint64_t inner_bytes = inner_chain_->decoded_representation().num_bytes();
  std::vector<ByteBuffer> encoded_inner(num_inner_chunks_);
  std::vector<std::span<const std::byte>> inner_chunks(num_inner_chunks_);
  CodecScratch scratch;
  ByteBuffer inner(inner_bytes);
  std::vector<uint64_t> coords(chunks_per_shard_.size());
  for (uint64_t i = 0; i < num_inner_chunks_; ++i) {
    Unravel(i, chunks_per_shard_, coords);
    int64_t offset = 0;
    for (size_t d = 0; d < coords.size(); ++d) {
      offset += static_cast<int64_t>(coords[d] * inner_chunk_shape_[d]) * shard_strides[d];
    }
    CopyStrided(decoded.data() + offset, shard_strides, inner.data(), inner_strides,
                inner_chunk_shape_, element_size);
    if (IsAllFill(inner.span(), decoded_.fill_value)) continue;
    ZS_RETURN_IF_ERROR(inner_chain_->Encode(inner.span(), &encoded_inner[i], &scratch));
    inner_chunks[i] = encoded_inner[i].span();
  }
  return AssembleShard(inner_chunks, encoded, &scratch);
}

nlohmann::json ShardingCodec::ToJson() const {
  nlohmann::json config = {
      {"chunk_shape", inner_chunk_shape_},
      {"codecs", inner_chain_->ToJson()},
      {"index_codecs", index_chain_->ToJson()},
      {"index_location", index_at_end_ ? "end" : "start"},
  };
  return {{"name", "sharding_indexed"}, {"configuration", config}};
}

Result<std::unique_ptr<ArrayToBytesCodec>> MakeShardingCodec(const nlohmann::json& configuration,
                                                             const ChunkRepresentation& decoded) {
  ZS_ASSIGN_OR_RETURN(auto codec, ShardingCodec::Make(configuration, decoded));
  return std::unique_ptr<ArrayToBytesCodec>(std::move(codec));
}

}  // namespace zarrstream

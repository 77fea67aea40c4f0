// The CPU write path: a region of caller data → the stored objects (chunks, or shards) it touches →
// encoded and stored, one task per object on the array's pool.
//
// A chunk is built in full chunk shape, as zarr-python writes it: the region's values where the
// region covers it, the stored values elsewhere (read-modify-write, only for chunks the region
// covers in part), and the fill value past the array's edge. A chunk whose values all equal the
// fill value is not stored, and a stored one is deleted (zarr-python's write_empty_chunks=False).
//
// A shard is rebuilt from its inner chunks, encoded in parallel: those the region covers are built
// from the region alone; those it does not touch keep their stored bytes verbatim (no decode and
// re-encode); those it covers in part are decoded, merged and re-encoded. All-fill inner chunks are
// empty in the index, and a shard left with no stored inner chunk is deleted. Only shards the
// region covers in part are read, whole, once.
//
// Workers keep their buffers across chunks (thread_local), so the steady state allocates nothing
// per chunk beyond small index vectors.
#include <algorithm>

#include "array/array_state.h"
#include "codec/sharding_codec.h"
#include "util/format.h"
#include "util/strided_copy.h"

namespace zarrstream {

namespace {

// Buffers for building and encoding one chunk (or inner chunk).
struct ChunkScratch {
  CodecScratch codec;
  ByteBuffer stored;   // the stored bytes of a chunk written in part
  ByteBuffer values;   // the chunk's decoded values
  ByteBuffer encoded;  // what is stored (unsharded chunks)
};

// Buffers of one shard task. Its inner chunks are encoded by other threads (each with its own
// ChunkScratch) into `inner_encoded`, which this thread owns for the whole task.
struct ShardScratch {
  CodecScratch codec;
  ByteBuffer stored;
  ByteBuffer assembled;
  std::vector<ByteBuffer> inner_encoded;
  std::vector<std::span<const std::byte>> inner_chunks;
};

ChunkScratch& ThreadChunkScratch() {
  thread_local ChunkScratch scratch;
  return scratch;
}

ShardScratch& ThreadShardScratch() {
  thread_local ShardScratch scratch;
  return scratch;
}

int64_t ByteOffset(std::span<const uint64_t> index, std::span<const int64_t> strides) {
  int64_t offset = 0;
  for (size_t d = 0; d < index.size(); ++d) offset += static_cast<int64_t>(index[d]) * strides[d];
  return offset;
}

// Where a chunk of the array stands relative to the write region.
struct ChunkPlacement {
  std::vector<uint64_t> in_array;      // extent of the chunk inside the array (edge chunks: less)
  std::vector<uint64_t> within_chunk;  // offset of the region's part inside the chunk
  std::vector<uint64_t> within_data;   // offset of that part inside the caller's data
  std::vector<uint64_t> overlap;       // extent of that part
  bool touched = true;                 // the region covers some of the chunk
  bool covered = true;                 // the region covers all of the chunk inside the array
};

ChunkPlacement Place(std::span<const uint64_t> origin, std::span<const uint64_t> chunk_shape,
                     std::span<const uint64_t> array_shape, std::span<const uint64_t> start,
                     std::span<const uint64_t> shape) {
  const size_t rank = origin.size();
  ChunkPlacement p;
  p.in_array.resize(rank);
  p.within_chunk.resize(rank);
  p.within_data.resize(rank);
  p.overlap.resize(rank);
  for (size_t d = 0; d < rank; ++d) {
    p.in_array[d] = std::min(chunk_shape[d], array_shape[d] - origin[d]);
    const uint64_t lo = std::max(origin[d], start[d]);
    const uint64_t hi = std::min(origin[d] + p.in_array[d], start[d] + shape[d]);
    if (hi <= lo) {
      p.touched = p.covered = false;
      p.overlap[d] = 0;
      continue;
    }
    p.within_chunk[d] = lo - origin[d];
    p.within_data[d] = lo - start[d];
    p.overlap[d] = hi - lo;
    p.covered &= p.overlap[d] == p.in_array[d];
  }
  return p;
}

// Fills the part of a C-order chunk of `chunk_shape` that lies past the array's edge (outside
// [0, in_array)), as disjoint boxes: for each dimension d cut by the edge, the slab past the edge
// in d, inside the edge in the dimensions before d, and whole in those after.
void FillPastEdge(std::byte* chunk, std::span<const int64_t> strides,
                  std::span<const uint64_t> chunk_shape, std::span<const uint64_t> in_array,
                  std::span<const std::byte> fill) {
  std::vector<uint64_t> box(chunk_shape.begin(), chunk_shape.end());
  std::vector<uint64_t> corner(chunk_shape.size(), 0);
  for (size_t d = 0; d < chunk_shape.size(); ++d) {
    if (in_array[d] < chunk_shape[d]) {
      corner[d] = in_array[d];
      box[d] = chunk_shape[d] - in_array[d];
      FillStrided(chunk + ByteOffset(corner, strides), strides, box, fill);
      corner[d] = 0;
    }
    box[d] = in_array[d];
  }
}

// The caller's data: the region and its byte strides.
struct Input {
  const std::byte* data;
  std::vector<int64_t> strides;
  std::span<const uint64_t> start;
  std::span<const uint64_t> shape;
};

class RegionWriter {
 public:
  RegionWriter(const internal::ArrayState& array, const Input& in)
      : array_(array),
        in_(in),
        element_size_(DataTypeSize(array.metadata.data_type)),
        fill_(array.metadata.fill_value) {}

  Status Run() {
    const auto& grid_cell = array_.metadata.chunk_shape;
    std::vector<uint64_t> first(in_.start.size()), extent(in_.start.size());
    uint64_t count = 1;
    for (size_t d = 0; d < first.size(); ++d) {
      first[d] = in_.start[d] / grid_cell[d];
      extent[d] = (in_.start[d] + in_.shape[d] - 1) / grid_cell[d] - first[d] + 1;
      count *= extent[d];
    }
    return ParallelFor(array_.pool.get(), count, [&](size_t i) -> Status {
      std::vector<uint64_t> coords(first.size());
      uint64_t linear = i;
      for (size_t d = coords.size(); d-- > 0;) {
        coords[d] = first[d] + linear % extent[d];
        linear /= extent[d];
      }
      const std::string key = array_.ChunkKey(coords);
      Status s = array_.chain->sharding() ? WriteShard(coords, key) : WriteChunk(coords, key);
      if (s.ok()) return s;  // the context string is built for errors only
      return std::move(s).WithContext("writing chunk '" + key + "' of " + array_.Describe());
    });
  }

 private:
  // Builds the values of one chunk of `chain` (of `chunk_shape`, placed against the region by
  // `place`) in scratch.values: the region's values where the region covers it, elsewhere the
  // chunk `stored` holds (fill values when null), and fill values past the array's edge. Sets
  // `*all_fill`.
  // The chunk's values as they are to be encoded: in the caller's data where the region covers the
  // whole chunk, inside the array, and holds it C-contiguous there (no copy: a slab written chunk
  // by chunk, as rechunk does), else assembled in `scratch.values`.
  Result<std::span<const std::byte>> BuildChunk(const CodecChain& chain,
                                                std::span<const uint64_t> chunk_shape,
                                                const ChunkPlacement& place,
                                                std::optional<std::span<const std::byte>> stored,
                                                ChunkScratch& scratch, bool* all_fill) const {
    const uint64_t chunk_bytes = chain.decoded_representation().num_bytes();
    const std::vector<int64_t> strides = CStrides(chunk_shape, element_size_);
    if (place.covered && ContiguousInData(chunk_shape, place, strides)) {
      const std::span<const std::byte> values(in_.data + ByteOffset(place.within_data, in_.strides),
                                              chunk_bytes);
      *all_fill = IsAllFill(values, fill_);
      return values;
    }
    scratch.values.Resize(chunk_bytes);
    std::byte* values = scratch.values.data();
    if (!place.covered) {
      if (stored) {
        ZS_RETURN_IF_ERROR_CTX(chain.Decode(*stored, scratch.values.span(), &scratch.codec),
                               "decoding the stored chunk to merge the write into it");
      } else {
        FillStrided(values, strides, chunk_shape, fill_);
      }
    }
    if (place.touched) {
      CopyStrided(in_.data + ByteOffset(place.within_data, in_.strides), in_.strides,
                  values + ByteOffset(place.within_chunk, strides), strides, place.overlap,
                  element_size_);
    }
    FillPastEdge(values, strides, chunk_shape, place.in_array, fill_);
    *all_fill = IsAllFill(scratch.values.span(), fill_);
    return std::span<const std::byte>(scratch.values.span());
  }

  // Whether the whole chunk (of C strides `chunk_strides`), inside the array, lies in the caller's
  // data with those same strides: every dimension of more than one element strided alike.
  bool ContiguousInData(std::span<const uint64_t> chunk_shape, const ChunkPlacement& place,
                        std::span<const int64_t> chunk_strides) const {
    for (size_t d = 0; d < chunk_shape.size(); ++d) {
      if (place.in_array[d] != chunk_shape[d]) return false;  // an edge chunk: filled past it
      if (chunk_shape[d] > 1 && in_.strides[d] != chunk_strides[d]) return false;
    }
    return true;
  }

  Status WriteChunk(std::span<const uint64_t> coords, const std::string& key) const {
    const auto& chunk_shape = array_.metadata.chunk_shape;
    std::vector<uint64_t> origin(coords.size());
    for (size_t d = 0; d < coords.size(); ++d) origin[d] = coords[d] * chunk_shape[d];
    const ChunkPlacement place =
        Place(origin, chunk_shape, array_.metadata.shape, in_.start, in_.shape);
    ChunkScratch& scratch = ThreadChunkScratch();
    std::optional<std::span<const std::byte>> stored;
    bool maybe_stored = true;
    if (!place.covered) {
      Status s = array_.store->ReadInto(key, ByteRange::Full(), &scratch.stored);
      if (s.code() == ErrorCode::kNotFound) {
        maybe_stored = false;
      } else {
        ZS_RETURN_IF_ERROR_CTX(s, "reading the stored chunk to merge the write into it");
        stored = scratch.stored.span();
      }
    }
    bool all_fill = false;
    ZS_ASSIGN_OR_RETURN(const std::span<const std::byte> values,
                        BuildChunk(*array_.chain, chunk_shape, place, stored, scratch, &all_fill));
    if (all_fill) return maybe_stored ? array_.store->Delete(key) : Status::Ok();
    ZS_RETURN_IF_ERROR(array_.chain->Encode(values, &scratch.encoded, &scratch.codec));
    return array_.store->Put(key, scratch.encoded.span());
  }

  Status WriteShard(std::span<const uint64_t> coords, const std::string& key) const {
    const ShardingCodec& sharding = *array_.chain->sharding();
    const CodecChain& inner_chain = sharding.inner_chain();
    const auto& shard_shape = array_.metadata.chunk_shape;
    const auto& inner_shape = sharding.inner_chunk_shape();
    const auto& per_shard = sharding.chunks_per_shard();
    const auto& array_shape = array_.metadata.shape;
    std::vector<uint64_t> shard_origin(coords.size());
    for (size_t d = 0; d < coords.size(); ++d) shard_origin[d] = coords[d] * shard_shape[d];
    const ChunkPlacement shard_place =
        Place(shard_origin, shard_shape, array_shape, in_.start, in_.shape);

    ShardScratch& scratch = ThreadShardScratch();
    std::optional<ShardIndex> stored_index;
    bool maybe_stored = true;
    if (!shard_place.covered) {
      Status s = array_.store->ReadInto(key, ByteRange::Full(), &scratch.stored);
      if (s.code() == ErrorCode::kNotFound) {
        maybe_stored = false;
      } else {
        ZS_RETURN_IF_ERROR_CTX(s, "reading the stored shard to merge the write into it");
        const std::span<const std::byte> shard = scratch.stored.span();
        if (shard.size() < sharding.index_size()) {
          return CorruptChunkError("stored shard of " + std::to_string(shard.size()) +
                                   " bytes is smaller than its index (" +
                                   std::to_string(sharding.index_size()) + " bytes)");
        }
        uint64_t begin = 0, end = 0;
        ZS_RETURN_IF_ERROR(ResolveByteRange(sharding.index_range(), shard.size(), &begin, &end));
        ZS_ASSIGN_OR_RETURN_CTX(
            stored_index,
            sharding.DecodeIndex(shard.subspan(begin, end - begin), shard.size(), &scratch.codec),
            "reading the stored shard to merge the write into it");
      }
    }

    const uint64_t n = sharding.num_inner_chunks();
    if (scratch.inner_encoded.size() < n) scratch.inner_encoded.resize(n);
    scratch.inner_chunks.assign(n, {});
    const std::span<const std::byte> stored_shard = scratch.stored.span();
    Status inner_status = ParallelFor(array_.pool.get(), n, [&](size_t i) -> Status {
      std::vector<uint64_t> inner(per_shard.size()), origin(per_shard.size());
      uint64_t linear = i;
      for (size_t d = per_shard.size(); d-- > 0;) {
        inner[d] = linear % per_shard[d];
        linear /= per_shard[d];
        origin[d] = shard_origin[d] + inner[d] * inner_shape[d];
      }
      for (size_t d = 0; d < origin.size(); ++d) {
        if (origin[d] >= array_shape[d]) return Status::Ok();  // wholly past the edge: empty
      }
      const ChunkPlacement place = Place(origin, inner_shape, array_shape, in_.start, in_.shape);
      std::optional<std::span<const std::byte>> stored;
      if (stored_index && !stored_index->is_empty(i)) {
        stored = stored_shard.subspan(stored_index->offset(i), stored_index->nbytes(i));
      }
      if (!place.touched) {
        if (stored) scratch.inner_chunks[i] = *stored;
        return Status::Ok();
      }
      ChunkScratch& chunk = ThreadChunkScratch();
      bool all_fill = false;
      Result<std::span<const std::byte>> values =
          BuildChunk(inner_chain, inner_shape, place, stored, chunk, &all_fill);
      Status s = values.status();
      if (s.ok() && !all_fill) {
        s = inner_chain.Encode(*values, &scratch.inner_encoded[i], &chunk.codec);
        scratch.inner_chunks[i] = scratch.inner_encoded[i].span();
      }
      if (s.ok()) return s;
      return std::move(s).WithContext("inner chunk " + FormatIndex(inner));
    });
    ZS_RETURN_IF_ERROR(inner_status);

    const bool empty = std::all_of(scratch.inner_chunks.begin(), scratch.inner_chunks.end(),
                                   [](std::span<const std::byte> c) { return c.empty(); });
    if (empty) return maybe_stored ? array_.store->Delete(key) : Status::Ok();
    ZS_RETURN_IF_ERROR(
        sharding.AssembleShard(scratch.inner_chunks, &scratch.assembled, &scratch.codec));
    return array_.store->Put(key, scratch.assembled.span());
  }

  const internal::ArrayState& array_;
  const Input& in_;
  const size_t element_size_;
  std::span<const std::byte> fill_;
};

}  // namespace

Status Array::Write(std::span<const uint64_t> start, std::span<const uint64_t> shape,
                    const void* data, std::span<const int64_t> data_byte_strides) const {
  if (state_->text) {
    return UnsupportedError("write to " + state_->Describe() + ": writing " +
                            state_->metadata.extended_type->Name() + " arrays is not supported");
  }
  const auto& array_shape = state_->metadata.shape;
  if (start.size() != rank() || shape.size() != rank() ||
      (!data_byte_strides.empty() && data_byte_strides.size() != rank())) {
    return InvalidArgumentError("write to " + state_->Describe() + ": region has rank " +
                                std::to_string(start.size()) + ", the array " +
                                std::to_string(rank()));
  }
  for (size_t d = 0; d < rank(); ++d) {
    if (start[d] > array_shape[d] || shape[d] > array_shape[d] - start[d]) {
      return InvalidArgumentError("write to " + state_->Describe() + ": region " +
                                  FormatIndex(start) + " + " + FormatIndex(shape) +
                                  " exceeds the array shape " + FormatIndex(array_shape));
    }
  }
  for (size_t d = 0; d < rank(); ++d) {
    if (shape[d] == 0) return Status::Ok();
  }
  Input input{static_cast<const std::byte*>(data),
              data_byte_strides.empty()
                  ? CStrides(shape, DataTypeSize(dtype()))
                  : std::vector<int64_t>(data_byte_strides.begin(), data_byte_strides.end()),
              start, shape};
  return RegionWriter(*state_, input).Run();
}

}  // namespace zarrstream

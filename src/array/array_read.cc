// The CPU read path: a region of an array → the chunks (or shards) it touches → decoded straight
// into the caller's output.
//
// Each stored object the region touches is one task on the array's pool. A chunk wholly inside the
// region whose place in the output is contiguous is decoded directly there (the last decompressor
// writes into the output; no copy). Other chunks decode into the worker's scratch buffer and are
// copied into place. For sharded arrays a task reads the shard's index, then only the byte ranges
// of the inner chunks the region needs (adjacent ranges merged into one read), and decodes those
// inner chunks in parallel. Workers keep their scratch buffers across chunks (thread_local), so
// the steady state allocates nothing per chunk.
#include <algorithm>

#include "array/array_state.h"
#include "codec/sharding_codec.h"
#include "store/http_store.h"
#include "store/range_coalescing.h"
#include "util/format.h"
#include "util/strided_copy.h"

namespace zarrstream {

namespace {

// Reusable per-thread buffers of the read path.
struct ReadScratch {
  CodecScratch codec;
  ByteBuffer encoded;
  ByteBuffer decoded;
};

ReadScratch& ThreadScratch() {
  thread_local ReadScratch scratch;
  return scratch;
}

// Inner-chunk reads of one shard closer than this are merged into one read: a local read of a few
// hundred KiB extra costs less than another request. Remote stores merge further by their own
// latency (HttpStoreOptions::coalescing).
constexpr CoalescingOptions kShardCoalescing{uint64_t{256} * 1024, uint64_t{64} * 1024 * 1024};

// The part of one chunk (of `chunk_shape` at `origin`, array coordinates) that a request region
// [req_start, req_start + req_shape) covers.
struct ChunkOverlap {
  std::vector<uint64_t> within_chunk;  // offset of the overlap inside the chunk
  std::vector<uint64_t> within_out;    // offset of the overlap inside the request
  std::vector<uint64_t> shape;         // extent of the overlap
  bool whole_chunk = true;             // the overlap is the entire chunk
};

ChunkOverlap Overlap(std::span<const uint64_t> origin, std::span<const uint64_t> chunk_shape,
                     std::span<const uint64_t> req_start, std::span<const uint64_t> req_shape) {
  ChunkOverlap o;
  const size_t rank = origin.size();
  o.within_chunk.resize(rank);
  o.within_out.resize(rank);
  o.shape.resize(rank);
  for (size_t d = 0; d < rank; ++d) {
    uint64_t lo = std::max(origin[d], req_start[d]);
    uint64_t hi = std::min(origin[d] + chunk_shape[d], req_start[d] + req_shape[d]);
    o.within_chunk[d] = lo - origin[d];
    o.within_out[d] = lo - req_start[d];
    o.shape[d] = hi - lo;
    o.whole_chunk &= o.shape[d] == chunk_shape[d];
  }
  return o;
}

int64_t ByteOffset(std::span<const uint64_t> index, std::span<const int64_t> strides) {
  int64_t offset = 0;
  for (size_t d = 0; d < index.size(); ++d) offset += static_cast<int64_t>(index[d]) * strides[d];
  return offset;
}

// Iterates the grid cells [first, last] (inclusive per dim) in C order.
class GridRange {
 public:
  GridRange(std::vector<uint64_t> first, std::vector<uint64_t> last)
      : first_(std::move(first)), extent_(first_.size()) {
    count_ = 1;
    for (size_t d = 0; d < first_.size(); ++d) {
      extent_[d] = last[d] - first_[d] + 1;
      count_ *= extent_[d];
    }
  }
  uint64_t size() const { return count_; }
  std::vector<uint64_t> at(uint64_t linear) const {
    std::vector<uint64_t> coords(first_.size());
    for (size_t d = first_.size(); d-- > 0;) {
      coords[d] = first_[d] + linear % extent_[d];
      linear /= extent_[d];
    }
    return coords;
  }

 private:
  std::vector<uint64_t> first_;
  std::vector<uint64_t> extent_;
  uint64_t count_ = 0;
};

// The grid cells of `cell_shape` touched by [start, start + shape) (relative to `origin`).
GridRange CellsTouched(std::span<const uint64_t> start, std::span<const uint64_t> shape,
                       std::span<const uint64_t> cell_shape) {
  std::vector<uint64_t> first(start.size()), last(start.size());
  for (size_t d = 0; d < start.size(); ++d) {
    first[d] = start[d] / cell_shape[d];
    last[d] = (start[d] + shape[d] - 1) / cell_shape[d];
  }
  return GridRange(std::move(first), std::move(last));
}

// Where decoded values go: the output buffer of the whole request and its byte strides.
struct Output {
  std::byte* data;
  std::vector<int64_t> strides;
  std::span<const uint64_t> start;  // the request region
  std::span<const uint64_t> shape;
};

class RegionReader {
 public:
  RegionReader(const internal::ArrayState& array, const Output& out)
      : array_(array),
        out_(out),
        element_size_(DataTypeSize(array.metadata.data_type)),
        fill_(array.metadata.fill_value) {}

  Status Run() {
    const auto& chunk_shape = array_.metadata.chunk_shape;
    GridRange chunks = CellsTouched(out_.start, out_.shape, chunk_shape);
    if (!array_.chain->sharding() && IsRemoteStore(*array_.store)) return RunPrefetched(chunks);
    return ParallelFor(array_.pool.get(), chunks.size(), [&](size_t i) -> Status {
      std::vector<uint64_t> coords = chunks.at(i);
      const std::string key = array_.ChunkKey(coords);
      Status s = array_.chain->sharding() ? ReadShard(coords, key) : ReadChunk(coords, key);
      return std::move(s).WithContext("reading chunk '" + key + "' of " + array_.Describe());
    });
  }

 private:
  // Remote stores: a window of chunk requests goes out before any decode waits on one, so the
  // store's in-flight limit, not the number of decode threads, bounds the requests in flight (a
  // blocking read per thread would leave a 20 ms round trip per chunk and thread).
  Status RunPrefetched(const GridRange& chunks) const {
    constexpr uint64_t kWindow = 256;
    const auto& chunk_shape = array_.metadata.chunk_shape;
    const ByteRange full = ByteRange::Full();
    for (uint64_t first = 0; first < chunks.size(); first += kWindow) {
      const size_t n = static_cast<size_t>(std::min(kWindow, chunks.size() - first));
      std::vector<std::string> keys(n);
      std::vector<ByteBuffer> encoded(n);
      std::vector<Future<uint64_t>> reads(n);
      std::vector<uint8_t> waited(n, 0);
      for (size_t i = 0; i < n; ++i) {
        keys[i] = array_.ChunkKey(chunks.at(first + i));
        reads[i] = array_.store->Read(keys[i], std::span<const ByteRange>(&full, 1),
                                      std::span<ByteBuffer>(&encoded[i], 1));
      }
      Status status = ParallelFor(array_.pool.get(), n, [&](size_t i) -> Status {
        std::vector<uint64_t> coords = chunks.at(first + i);
        ChunkOverlap overlap =
            Overlap(Origin(coords, chunk_shape), chunk_shape, out_.start, out_.shape);
        Status s = reads[i].Wait().status();
        waited[i] = 1;
        if (s.code() == ErrorCode::kNotFound) {
          s = MissingChunk(overlap);
        } else if (s.ok()) {
          s = DecodeInto(*array_.chain, encoded[i].span(), chunk_shape, overlap, ThreadScratch());
        }
        return std::move(s).WithContext("reading chunk '" + keys[i] + "' of " + array_.Describe());
      });
      // The reads still in flight write into `encoded`: let them finish before it goes.
      for (size_t i = 0; i < n; ++i) {
        if (!waited[i]) (void)reads[i].Wait();
      }
      ZS_RETURN_IF_ERROR(status);
    }
    return Status::Ok();
  }

  std::vector<uint64_t> Origin(std::span<const uint64_t> coords,
                               std::span<const uint64_t> cell_shape) const {
    std::vector<uint64_t> origin(coords.size());
    for (size_t d = 0; d < coords.size(); ++d) origin[d] = coords[d] * cell_shape[d];
    return origin;
  }

  std::byte* Destination(const ChunkOverlap& overlap) const {
    return out_.data + ByteOffset(overlap.within_out, out_.strides);
  }

  Status MissingChunk(const ChunkOverlap& overlap) const {
    if (array_.options.missing_chunks_are_errors) {
      return NotFoundError("chunk is not stored (missing chunks are errors for this array)");
    }
    FillStrided(Destination(overlap), out_.strides, overlap.shape, fill_);
    return Status::Ok();
  }

  // Decodes one chunk's `encoded` bytes with `chain` into the part of the output `overlap` names.
  Status DecodeInto(const CodecChain& chain, std::span<const std::byte> encoded,
                    std::span<const uint64_t> chunk_shape, const ChunkOverlap& overlap,
                    ReadScratch& scratch) const {
    const uint64_t chunk_bytes = chain.decoded_representation().num_bytes();
    if (overlap.whole_chunk && IsCContiguous(out_.strides, chunk_shape, element_size_)) {
      return chain.Decode(encoded, std::span<std::byte>(Destination(overlap), chunk_bytes),
                          &scratch.codec);
    }
    scratch.decoded.Resize(chunk_bytes);
    ZS_RETURN_IF_ERROR(chain.Decode(encoded, scratch.decoded.span(), &scratch.codec));
    std::vector<int64_t> chunk_strides = CStrides(chunk_shape, element_size_);
    CopyStrided(scratch.decoded.data() + ByteOffset(overlap.within_chunk, chunk_strides),
                chunk_strides, Destination(overlap), out_.strides, overlap.shape, element_size_);
    return Status::Ok();
  }

  Status ReadChunk(std::span<const uint64_t> coords, const std::string& key) const {
    const auto& chunk_shape = array_.metadata.chunk_shape;
    ChunkOverlap overlap =
        Overlap(Origin(coords, chunk_shape), chunk_shape, out_.start, out_.shape);
    ReadScratch& scratch = ThreadScratch();
    Status s = array_.store->ReadInto(key, ByteRange::Full(), &scratch.encoded);
    if (s.code() == ErrorCode::kNotFound) return MissingChunk(overlap);
    ZS_RETURN_IF_ERROR(s);
    return DecodeInto(*array_.chain, scratch.encoded.span(), chunk_shape, overlap, scratch);
  }

  Status ReadShard(std::span<const uint64_t> coords, const std::string& key) const {
    const ShardingCodec& sharding = *array_.chain->sharding();
    const auto& shard_shape = array_.metadata.chunk_shape;
    const auto& inner_shape = sharding.inner_chunk_shape();
    const std::vector<uint64_t> shard_origin = Origin(coords, shard_shape);
    ChunkOverlap shard_overlap = Overlap(shard_origin, shard_shape, out_.start, out_.shape);

    ShardIndex index;
    {
      ReadScratch& scratch = ThreadScratch();
      Status s = array_.store->ReadInto(key, sharding.index_range(), &scratch.encoded);
      if (s.code() == ErrorCode::kNotFound) return MissingChunk(shard_overlap);
      ZS_RETURN_IF_ERROR(s);
      ZS_ASSIGN_OR_RETURN(
          index, sharding.DecodeIndex(scratch.encoded.span(), std::nullopt, &scratch.codec));
    }

    // The inner chunks the request touches, relative to the shard.
    GridRange inner = CellsTouched(shard_overlap.within_chunk, shard_overlap.shape, inner_shape);
    struct InnerChunk {
      std::vector<uint64_t> coords;  // within the shard
      uint64_t linear;               // index into the shard index
      RangeSlice slice;              // where its bytes lie among the merged reads
    };
    std::vector<InnerChunk> chunks;
    chunks.reserve(inner.size());
    for (uint64_t i = 0; i < inner.size(); ++i) {
      InnerChunk c{inner.at(i), 0, {}};
      for (size_t d = 0; d < c.coords.size(); ++d) {
        c.linear = c.linear * sharding.chunks_per_shard()[d] + c.coords[d];
      }
      chunks.push_back(std::move(c));
    }

    // Merge the byte ranges of stored inner chunks that lie close together into few reads.
    std::vector<ByteRange> wanted;
    std::vector<size_t> stored;
    for (size_t i = 0; i < chunks.size(); ++i) {
      if (index.is_empty(chunks[i].linear)) continue;
      stored.push_back(i);
      wanted.push_back(
          ByteRange::Bounded(index.offset(chunks[i].linear), index.nbytes(chunks[i].linear)));
    }
    CoalescedRanges merged = CoalesceRanges(wanted, kShardCoalescing);
    for (size_t j = 0; j < stored.size(); ++j) chunks[stored[j]].slice = merged.slices[j];
    const std::vector<ByteRange>& ranges = merged.reads;
    std::vector<ByteBuffer> reads(ranges.size());
    if (!ranges.empty()) {
      auto read = array_.store->Read(key, ranges, reads).Wait();
      ZS_RETURN_IF_ERROR_CTX(read.status(), "reading the inner chunks its index points to");
    }

    const std::vector<uint64_t> shard_start_in_array = shard_origin;
    return ParallelFor(array_.pool.get(), chunks.size(), [&](size_t i) -> Status {
      const InnerChunk& c = chunks[i];
      std::vector<uint64_t> origin(c.coords.size());
      for (size_t d = 0; d < origin.size(); ++d) {
        origin[d] = shard_start_in_array[d] + c.coords[d] * inner_shape[d];
      }
      ChunkOverlap overlap = Overlap(origin, inner_shape, out_.start, out_.shape);
      Status s;
      if (index.is_empty(c.linear)) {
        s = MissingChunk(overlap);
        if (s.code() == ErrorCode::kNotFound) s = NotFoundError("inner chunk is empty");
      } else {
        auto bytes = c.slice.read == RangeSlice::kNoRead
                         ? std::span<const std::byte>()
                         : reads[c.slice.read].span().subspan(c.slice.offset, c.slice.length);
        s = DecodeInto(sharding.inner_chain(), bytes, inner_shape, overlap, ThreadScratch());
      }
      return std::move(s).WithContext("inner chunk " + FormatIndex(c.coords));
    });
  }

  const internal::ArrayState& array_;
  const Output& out_;
  const size_t element_size_;
  std::span<const std::byte> fill_;
};

}  // namespace

Status Array::Read(std::span<const uint64_t> start, std::span<const uint64_t> shape, void* out,
                   std::span<const int64_t> out_byte_strides) const {
  const auto& array_shape = state_->metadata.shape;
  if (start.size() != rank() || shape.size() != rank() ||
      (!out_byte_strides.empty() && out_byte_strides.size() != rank())) {
    return InvalidArgumentError("read of " + state_->Describe() + ": region has rank " +
                                std::to_string(start.size()) + ", the array " +
                                std::to_string(rank()));
  }
  for (size_t d = 0; d < rank(); ++d) {
    if (start[d] > array_shape[d] || shape[d] > array_shape[d] - start[d]) {
      return InvalidArgumentError("read of " + state_->Describe() + ": region " +
                                  FormatIndex(start) + " + " + FormatIndex(shape) +
                                  " exceeds the array shape " + FormatIndex(array_shape));
    }
    if (shape[d] == 0) return Status::Ok();
  }
  Output output{static_cast<std::byte*>(out),
                out_byte_strides.empty()
                    ? CStrides(shape, DataTypeSize(dtype()))
                    : std::vector<int64_t>(out_byte_strides.begin(), out_byte_strides.end()),
                start, shape};
  return RegionReader(*state_, output).Run();
}

}  // namespace zarrstream

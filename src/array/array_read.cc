// The CPU read path: a region of an array → the read chunks (inner chunks when sharded) it touches
// → ReadChunks (chunk_reader.h), which fetches and decodes them.
//
// A chunk wholly inside the region whose place in the output is C-contiguous is decoded directly
// there (the last decompressor writes into the output; no copy). Other chunks are decoded into the
// worker's scratch buffer and copied into place (PartialChunkOutput), and a missing chunk's part of
// the region is filled with the fill value.
#include <algorithm>

#include "array/array_state.h"
#include "array/chunk_reader.h"
#include "util/checked_size.h"
#include "util/format.h"
#include "util/strided_copy.h"

namespace zarrstream {

namespace {

// The part of one chunk (of `chunk_shape` at `origin`, array coordinates) that a request region
// [req_start, req_start + req_shape) covers.
struct ChunkOverlap {
  std::vector<uint64_t> within_chunk;  // offset of the overlap inside the chunk
  std::vector<uint64_t> within_out;    // offset of the overlap inside the request
  std::vector<uint64_t> shape;         // extent of the overlap
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
    uint64_t hi = std::min(SaturatingAdd(origin[d], chunk_shape[d]), req_start[d] + req_shape[d]);
    o.within_chunk[d] = lo - origin[d];
    o.within_out[d] = lo - req_start[d];
    o.shape[d] = hi - lo;
  }
  return o;
}

int64_t ByteOffset(std::span<const uint64_t> index, std::span<const int64_t> strides) {
  int64_t offset = 0;
  for (size_t d = 0; d < index.size(); ++d) offset += static_cast<int64_t>(index[d]) * strides[d];
  return offset;
}

// Chunks handed to one ReadChunks call: a region touching more (tiny chunks of a huge array) is
// read in runs of this many, so the bookkeeping per chunk stays bounded whatever the chunk count.
constexpr uint64_t kChunksPerCall = uint64_t{1} << 16;

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
        chunk_shape_(array.read_chunk_shape),
        element_size_(DataTypeSize(array.metadata.data_type)) {}

  Status Run() {
    const size_t rank = chunk_shape_.size();
    // The read chunks the region touches: [first, last] per dim, in C order.
    std::vector<uint64_t> first(rank), extent(rank);
    for (size_t d = 0; d < rank; ++d) {
      // start + shape is within the array's shape (Array::Read checked it): no overflow.
      first[d] = out_.start[d] / chunk_shape_[d];
      extent[d] = (out_.start[d] + out_.shape[d] - 1) / chunk_shape_[d] - first[d] + 1;
    }
    const std::optional<uint64_t> count = CheckedProduct(extent);
    if (!count) {
      return InvalidArgumentError("read of " + array_.Describe() + ": region " +
                                  FormatIndex(out_.start) + " + " + FormatIndex(out_.shape) +
                                  " touches 2^64 or more chunks");
    }
    // Whether a whole chunk's place in the output is C-contiguous does not depend on where it is.
    const bool contiguous = IsCContiguous(out_.strides, chunk_shape_, element_size_);
    const uint64_t chunk_bytes = ReadChunkBytes(array_);
    std::vector<ChunkRead> reads;
    PartialChunkOutput partial;
    partial.copy = [&](size_t i, std::span<const std::byte> decoded) {
      ChunkOverlap overlap = OverlapOf(reads[i]);
      const std::vector<int64_t> chunk_strides = CStrides(chunk_shape_, element_size_);
      CopyStrided(decoded.data() + ByteOffset(overlap.within_chunk, chunk_strides), chunk_strides,
                  Destination(overlap), out_.strides, overlap.shape, element_size_);
    };
    partial.fill = [&](size_t i) {
      ChunkOverlap overlap = OverlapOf(reads[i]);
      FillStrided(Destination(overlap), out_.strides, overlap.shape, array_.metadata.fill_value);
    };
    for (uint64_t begin = 0; begin < *count; begin += kChunksPerCall) {
      reads.clear();
      reads.resize(std::min(kChunksPerCall, *count - begin));
      for (uint64_t i = 0; i < reads.size(); ++i) {
        ChunkRead& read = reads[i];
        read.array = &array_;
        read.coords.resize(rank);
        bool whole = true;
        int64_t offset = 0;
        uint64_t rest = begin + i;
        for (size_t d = rank; d-- > 0;) {
          read.coords[d] = first[d] + rest % extent[d];
          rest /= extent[d];
          const uint64_t origin = read.coords[d] * chunk_shape_[d];
          whole &= origin >= out_.start[d] &&
                   SaturatingAdd(origin, chunk_shape_[d]) <= out_.start[d] + out_.shape[d];
          if (whole) offset += static_cast<int64_t>(origin - out_.start[d]) * out_.strides[d];
        }
        if (whole && contiguous) read.out = std::span<std::byte>(out_.data + offset, chunk_bytes);
      }
      ReadChunks(reads, partial, array_.pool.get());
      for (ChunkRead& read : reads) ZS_RETURN_IF_ERROR(read.status);
    }
    return Status::Ok();
  }

 private:
  ChunkOverlap OverlapOf(const ChunkRead& read) const {
    std::vector<uint64_t> origin(read.coords.size());
    for (size_t d = 0; d < origin.size(); ++d) origin[d] = read.coords[d] * chunk_shape_[d];
    return Overlap(origin, chunk_shape_, out_.start, out_.shape);
  }

  std::byte* Destination(const ChunkOverlap& overlap) const {
    return out_.data + ByteOffset(overlap.within_out, out_.strides);
  }

  const internal::ArrayState& array_;
  const Output& out_;
  const std::vector<uint64_t>& chunk_shape_;
  const size_t element_size_;
};

}  // namespace

Status Array::Read(std::span<const uint64_t> start, std::span<const uint64_t> shape, void* out,
                   std::span<const int64_t> out_byte_strides) const {
  if (state_->text) {
    return InvalidArgumentError("read of " + state_->Describe() + ": it holds " +
                                state_->metadata.extended_type->Name() +
                                " values, read as text (ReadText)");
  }
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
  }
  // An empty region is read only once every dimension is in bounds (as Write checks).
  for (size_t d = 0; d < rank(); ++d) {
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

// Codec interfaces: the three kinds of the Zarr v3 codec model.
//
//   array → array   (transpose, numcodecs.delta, ...): change the layout or type of a chunk's
//   values array → bytes   (bytes, sharding_indexed): serialise an array; exactly one per chain
//   bytes → bytes   (zstd, gzip, blosc, crc32c, ...): transform a byte stream
//
// A codec is *prepared* once for the chunk representation it will see (shape, data type), when an
// array is opened; then it decodes many chunks, from many threads at once. Decode methods are const
// and thread-safe; anything a call needs beyond its arguments comes from the caller's
// CodecScratch, so the hot path makes no allocations once a worker's scratch has grown.
//
// Decoders never trust stored bytes: a truncated or corrupt input, or one that decodes to a size
// other than the one expected, is a kCorruptChunk error; a decoder never writes past its output.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "util/byte_buffer.h"
#include "zarrstream/data_type.h"
#include "zarrstream/status.h"

namespace zarrstream {

// What a chunk looks like at one point of a codec chain: a C-order array of `shape` elements of
// `data_type`, in native byte order.
struct ChunkRepresentation {
  DataType data_type = DataType::kFloat32;
  std::vector<uint64_t> shape;
  std::vector<std::byte> fill_value;  // DataTypeSize(data_type) bytes

  uint64_t num_elements() const;
  uint64_t num_bytes() const { return num_elements() * DataTypeSize(data_type); }
};

// True when every element of `chunk` (elements of fill_value.size() bytes) equals `fill_value`
// bit for bit. Writers leave such chunks unstored. Bitwise, unlike zarr-python's value comparison,
// so that -0.0 under a 0.0 fill value, or a NaN with another payload, is stored and reads back
// exactly.
bool IsAllFill(std::span<const std::byte> chunk, std::span<const std::byte> fill_value);

// Per-thread reusable buffers for decoding. Not thread-safe: one per worker.
// Ownership of levels: a CodecChain uses the buffers of the scratch it is given; a codec the chain
// hands that scratch to uses only scratch->nested() (and deeper), so no two users share a buffer.
struct CodecScratch {
  ByteBuffer buffers[4];

  CodecScratch& nested() {
    if (!nested_) nested_ = std::make_unique<CodecScratch>();
    return *nested_;
  }

 private:
  std::unique_ptr<CodecScratch> nested_;
};

class ArrayToArrayCodec {
 public:
  virtual ~ArrayToArrayCodec() = default;
  // The representation produced by encoding (what the next codec in the chain sees).
  virtual const ChunkRepresentation& encoded_representation() const = 0;
  // Decodes `encoded` (encoded_representation(), C order) into `decoded` (the representation the
  // codec was prepared with). Sizes must match exactly.
  virtual Status Decode(std::span<const std::byte> encoded, std::span<std::byte> decoded) const = 0;
  virtual Status Encode(std::span<const std::byte> decoded, std::span<std::byte> encoded) const = 0;
  // JSON naming the codec and its configuration, as it would appear in zarr.json.
  virtual nlohmann::json ToJson() const = 0;
};

class ArrayToBytesCodec {
 public:
  virtual ~ArrayToBytesCodec() = default;
  // Decodes `encoded` into `decoded` (the prepared representation's bytes, C order, native endian).
  virtual Status Decode(std::span<const std::byte> encoded, std::span<std::byte> decoded,
                        CodecScratch* scratch) const = 0;
  virtual Status Encode(std::span<const std::byte> decoded, ByteBuffer* encoded) const = 0;
  // The encoded size when it does not depend on the values (bytes: the array's byte size).
  virtual std::optional<uint64_t> encoded_size() const { return std::nullopt; }
  // True when Decode is a plain copy, so a chain can decompress straight into the output.
  virtual bool is_identity() const { return false; }
  virtual nlohmann::json ToJson() const = 0;
};

class BytesToBytesCodec {
 public:
  virtual ~BytesToBytesCodec() = default;
  // Decodes `encoded` into `decoded`, which is resized to the decoded size and reused.
  // `expected_size`, when known, is the exact decoded size: the decoder allocates no more than it
  // (a decompression bomb stops there) and fails when the data decodes to another size.
  virtual Status Decode(std::span<const std::byte> encoded, std::optional<uint64_t> expected_size,
                        ByteBuffer* decoded) const = 0;
  // Decodes into caller memory of exactly the decoded size (the chain's fast path: decompress
  // straight into the output array). Default: Decode into a scratch buffer, then copy.
  virtual Status DecodeInto(std::span<const std::byte> encoded, std::span<std::byte> decoded,
                            CodecScratch* scratch) const;
  virtual Status Encode(std::span<const std::byte> decoded, ByteBuffer* encoded) const = 0;
  // The encoded size for a decoded size, when it does not depend on the bytes (crc32c: +4).
  virtual std::optional<uint64_t> EncodedSize(uint64_t /*decoded_size*/) const {
    return std::nullopt;
  }
  virtual nlohmann::json ToJson() const = 0;
};

// A bytes→bytes codec whose decoder writes into caller memory of a known size (zstd, deflate):
// Decode and DecodeInto both come down to DecodeExact when the size is known.
class ExactSizeBytesToBytesCodec : public BytesToBytesCodec {
 public:
  Status Decode(std::span<const std::byte> encoded, std::optional<uint64_t> expected_size,
                ByteBuffer* decoded) const final {
    if (!expected_size) return DecodeUnknownSize(encoded, decoded);
    decoded->Resize(*expected_size);
    return DecodeExact(encoded, decoded->span());
  }
  Status DecodeInto(std::span<const std::byte> encoded, std::span<std::byte> decoded,
                    CodecScratch* /*scratch*/) const final {
    return DecodeExact(encoded, decoded);
  }

 protected:
  // Decodes into exactly `out.size()` bytes; any other decoded size is kCorruptChunk.
  virtual Status DecodeExact(std::span<const std::byte> encoded,
                             std::span<std::byte> out) const = 0;
  // Decodes when the size is not known, growing `decoded` up to a bound.
  virtual Status DecodeUnknownSize(std::span<const std::byte> encoded,
                                   ByteBuffer* decoded) const = 0;
};

}  // namespace zarrstream

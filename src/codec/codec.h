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

// What a prepared codec is, as values: its type and the settings that decide which decoders its
// bytes can go to. Layers that plan around a chain (the GPU path, gpu/gpu_chunk_codec.h:
// PlanGpuDecode) read these once per prepared chain, without reading its JSON back or comparing
// codec names.
struct CodecTraits {
  enum class Type : uint8_t {
    kOther,  // a codec registered at run time (RegisterCodec): nothing is known of it
    // array → array
    kTranspose,
    kDelta,
    kFixedScaleOffset,
    kQuantize,  // numcodecs.quantize
    kBitRound,  // numcodecs.bitround
    kAsType,    // numcodecs.astype
    // array → bytes
    kBytes,
    kSharding,
    // bytes → bytes
    kZstd,
    kGzip,
    kZlib,  // numcodecs.zlib
    kLz4,   // numcodecs.lz4: a size prefix and one LZ4 block
    kBlosc,
    kCrc32c,
    kBz2,
    kShuffle,  // numcodecs.shuffle
  };
  enum class BloscCompressor : uint8_t { kBloscLz, kLz4, kLz4hc, kSnappy, kZlib, kZstd };
  enum class BloscShuffle : uint8_t { kNone, kByte, kBit };

  Type type = Type::kOther;
  bool big_endian = false;  // kBytes: elements stored big-endian
  bool checksum = false;    // kZstd: frames written with content checksums
  BloscCompressor blosc_compressor = BloscCompressor::kBloscLz;  // kBlosc
  BloscShuffle blosc_shuffle = BloscShuffle::kNone;              // kBlosc
  // Array → array: decoding leaves every byte as it is (lossy filters, whose encoders round and
  // whose decoders undo nothing), so a decoder of the rest of the chain may skip the codec.
  bool identity_decode = false;
};

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
  virtual CodecTraits traits() const { return {}; }
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
  // The most bytes an encoded chunk of the prepared representation can take (sharding: its inner
  // chunks' and its index's bounds). What bounds the decoders of bytes→bytes codecs after a
  // variable-size array→bytes codec (see DecodedSize).
  virtual uint64_t max_encoded_size() const = 0;
  // True when Decode is a plain copy, so a chain can decompress straight into the output.
  virtual bool is_identity() const { return false; }
  virtual nlohmann::json ToJson() const = 0;
  virtual CodecTraits traits() const { return {}; }
};

// What a bytes→bytes decoder knows of its output's size. Exact when every codec before it in the
// chain has a fixed-size output ([bytes, zstd]). Otherwise ([bytes, gzip, zstd]: zstd decodes to
// whatever gzip's encoder wrote; or bytes→bytes codecs after sharding) only a bound: the chunk's
// declared size grown by the worst-case expansion of each codec in between (MaxEncodedSize). A
// decoder allocates no more than bytes() either way and fails with kCorruptChunk when the data
// decodes to more, so a few hostile bytes (a frame header declaring gigabytes) cannot claim more
// memory than a real chunk of the array could.
class DecodedSize {
 public:
  // A plain size is an exact one, so that `codec.Decode(encoded, n, &out)` reads as it means.
  DecodedSize(uint64_t exact) : bytes_(exact), exact_(true) {}  // NOLINT(*-explicit-*)
  static DecodedSize AtMost(uint64_t limit) {
    DecodedSize size(limit);
    size.exact_ = false;
    return size;
  }

  // The exact size, or the limit.
  uint64_t bytes() const { return bytes_; }
  bool exact() const { return exact_; }
  // Whether data of `n` bytes (or a header declaring `n`) fits: n == an exact size, n <= a limit.
  bool admits(uint64_t n) const { return exact_ ? n == bytes_ : n <= bytes_; }

 private:
  uint64_t bytes_;
  bool exact_;
};

class BytesToBytesCodec {
 public:
  virtual ~BytesToBytesCodec() = default;
  // Decodes `encoded` into `decoded`, which is resized to the decoded size and reused. A decoded
  // size other than an exact `size`, or above a bounding one, is kCorruptChunk; the decoder never
  // allocates more than size.bytes() for the output.
  virtual Status Decode(std::span<const std::byte> encoded, DecodedSize size,
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
  // The most bytes any encoder of this codec writes for `decoded_size` bytes: EncodedSize when it
  // is fixed, else MaxCompressedSize (decoded_size.h), generous enough for every compressor's worst
  // case on incompressible data.
  virtual uint64_t MaxEncodedSize(uint64_t decoded_size) const;
  virtual nlohmann::json ToJson() const = 0;
  virtual CodecTraits traits() const { return {}; }
};

// A bytes→bytes codec whose decoder writes into caller memory of a known size (zstd, deflate):
// Decode and DecodeInto both come down to DecodeExact when the size is known.
class ExactSizeBytesToBytesCodec : public BytesToBytesCodec {
 public:
  Status Decode(std::span<const std::byte> encoded, DecodedSize size,
                ByteBuffer* decoded) const final {
    if (!size.exact()) return DecodeAtMost(encoded, size.bytes(), decoded);
    decoded->Resize(size.bytes());
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
  // Decodes data of unknown size, growing `decoded` as output appears, up to `limit` bytes (more
  // is kCorruptChunk).
  virtual Status DecodeAtMost(std::span<const std::byte> encoded, uint64_t limit,
                              ByteBuffer* decoded) const = 0;
};

}  // namespace zarrstream

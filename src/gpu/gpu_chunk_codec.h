// What the GPU decodes of a chunk's stored bytes (docs/architecture.md, "On the GPU"): the plan
// per codec chain (PlanGpuDecode: can the GPU path decode this array's chunks, and how), and per
// chunk the parse of its stored bytes into the streams nvCOMP decodes (GpuChunkCodec::Parse), with
// the framing, sizes and checksums checked on the CPU first. No CUDA here: the workspace that
// decodes the streams is gpu/gpu_decoder.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "codec/codec_chain.h"
#include "gpu/nvcomp.h"
#include "zarrstream/status.h"

namespace zarrstream {

// A checksum of a stream's decoded bytes that its stored bytes carry, verified on the GPU once the
// stream is decoded: zlib's Adler-32 (zs_adler32), gzip's CRC-32 (nvCOMP's batched CRC-32).
struct GpuChecksum {
  enum class Kind : uint8_t { kAdler32, kCrc32 } kind = Kind::kAdler32;
  uint32_t expected = 0;  // as stored
};

// One compressed (or stored) stream of a chunk and where its decoded bytes go in the chunk.
struct GpuStream {
  std::optional<GpuCompression> compression;  // none: `payload` is the output as it is
  std::span<const std::byte> payload;
  uint64_t output_offset = 0;
  uint64_t output_bytes = 0;
  std::optional<GpuChecksum> checksum;
};

// A chunk's stored bytes as the GPU decodes them: streams, then (blosc's byte shuffle) each block
// of `block_bytes` (the last may be shorter) unshuffled for elements of `unshuffle_typesize`
// bytes (0: no shuffle).
struct GpuChunkParse {
  std::vector<GpuStream> streams;
  uint32_t unshuffle_typesize = 0;
  uint64_t block_bytes = 0;
};

// How the GPU decodes a codec chain's chunks: stored bytes → payload (framing removed on the CPU:
// numcodecs' LZ4 size prefix, a zlib header, a crc32c checksum, checked; gzip's trailer size
// checked) → `compression` (none: the payload is the chunk) → elements, byte-swapped when stored
// big-endian. zlib's Adler-32 and gzip's CRC-32 of the decoded bytes are verified on the GPU
// (GpuStream::checksum): a mismatch rejects the chunk. Blosc frames (`blosc`)
// are parsed on the CPU into their blocks' LZ4 or zstd streams, decoded by nvCOMP and unshuffled
// by a kernel.
struct GpuChunkCodec {
  std::optional<GpuCompression> compression;
  enum class Framing : uint8_t { kNone, kLz4SizePrefix, kZlib } framing = Framing::kNone;
  bool blosc = false;
  bool crc32c = false;  // the stored bytes end with a crc32c of the rest
  bool big_endian = false;
  uint64_t decoded_bytes = 0;

  // The payload of `stored` (a view into it), or a kCorruptChunk error naming the problem. Not
  // for blosc. A zlib payload is followed in `stored` by its Adler-32; a gzip payload is the whole
  // member, its trailer included.
  Result<std::span<const std::byte>> Payload(std::span<const std::byte> stored) const;
  // The streams of `stored` (views into it), with the checksums they carry: kCorruptChunk for a
  // malformed frame, kUnsupported for a blosc frame the GPU does not decode (bitshuffle, another
  // inner codec, a block split older writers made): the CPU decodes those.
  Result<GpuChunkParse> Parse(std::span<const std::byte> stored) const;
};

// The one answer to "can the GPU path decode the chunks of this chain's array, and how": decided
// once per prepared chain from its codecs' traits (codec.h: CodecTraits), and asked by everything
// that says where chunks decode (the loader, `inspect`, `doctor`, `bench`).
//
// The GPU decodes [bytes (little- or big-endian: the scatter swaps)] then at most one of zstd,
// gzip, zlib, lz4, or blosc with lz4/lz4hc/zstd inside and no or byte shuffle, then optionally
// crc32c. A sharded array ([sharding_indexed] alone) is read by inner chunk, so the answer is its
// inner chain's (gzip only where nvCOMP has its batched CRC-32: Nvcomp::has_crc32, which the
// caller asks). Everything else is decoded on the CPU, for the reason `description` names:
// array→array codecs (transpose, as v2's order F becomes; filters), bz2, blosc with blosclz, zlib,
// snappy or bitshuffle, zstd with content checksums (nvCOMP does not verify them), a second
// compressor, nested sharding, codecs around sharding.
//
// Frames of an accepted chain the GPU cannot take are still found per chunk (GpuChunkCodec::Parse:
// a blosc frame with bitshuffle or an old block split, a malformed frame) and decoded on the CPU.
struct GpuDecodePlan {
  std::optional<GpuChunkCodec> codec;  // set when the GPU decodes: how
  // What the GPU decodes ("blosc/lz4 with byte shuffle + crc32c, big-endian") or, without
  // `codec`, why the CPU decodes instead ("transpose codec (v2 order F)").
  std::string description;

  bool gpu() const { return codec.has_value(); }
};

GpuDecodePlan PlanGpuDecode(const CodecChain& chain);

}  // namespace zarrstream

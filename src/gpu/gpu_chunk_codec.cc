#include "gpu/gpu_chunk_codec.h"

#include <zstd.h>

#include <algorithm>
#include <optional>
#include <string>

#include "codec/crc32c_codec.h"
#include "codec/sharding_codec.h"

namespace zarrstream {

namespace {

uint32_t LoadLittle32(const std::byte* p) {
  return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 |
         static_cast<uint32_t>(p[2]) << 16 | static_cast<uint32_t>(p[3]) << 24;
}

uint32_t LoadBig32(const std::byte* p) {
  return static_cast<uint32_t>(p[0]) << 24 | static_cast<uint32_t>(p[1]) << 16 |
         static_cast<uint32_t>(p[2]) << 8 | static_cast<uint32_t>(p[3]);
}

// `stored` without its trailing crc32c, once the checksum matches.
Result<std::span<const std::byte>> WithoutCrc32c(std::span<const std::byte> stored) {
  if (stored.size() < 4) return CorruptChunkError("crc32c: fewer than 4 bytes stored");
  const std::span<const std::byte> data = stored.first(stored.size() - 4);
  if (LoadLittle32(stored.data() + data.size()) != Crc32c(data)) {
    return CorruptChunkError("crc32c checksum mismatch");
  }
  return data;
}

// A zstd payload nvCOMP may be given: exactly one frame whose block headers fit the bytes, whose
// declared content size (when present) is the chunk's, and whose blocks are no more than full
// 128 KiB blocks of the chunk need. nvCOMP sizes its scratch from the chunk size and trusts the
// frame's structure: a truncated or forged frame made it write past its scratch (compute-sanitizer
// showed it), so such frames never reach it; the CPU decodes them and names the error. A frame
// with a content checksum is left to the CPU too (kUnsupported), which verifies it: nvCOMP does
// not.
Status CheckZstdFrame(std::span<const std::byte> payload, uint64_t decoded_bytes) {
  const size_t frame = ZSTD_findFrameCompressedSize(payload.data(), payload.size());
  if (ZSTD_isError(frame) || frame != payload.size()) {
    return CorruptChunkError("zstd: not exactly one well-formed frame");
  }
  const unsigned long long content = ZSTD_getFrameContentSize(payload.data(), payload.size());
  if (content != ZSTD_CONTENTSIZE_UNKNOWN && content != decoded_bytes) {
    return CorruptChunkError("zstd: the frame's content size is not the chunk's");
  }
  // The frame header (RFC 8878 3.1.1.1): magic, descriptor, window, dictionary id, content size.
  const auto descriptor = static_cast<unsigned>(payload[4]);
  if ((descriptor >> 2) & 1) {
    return UnsupportedError("zstd: a frame with a content checksum (the CPU decoder verifies it)");
  }
  const bool single_segment = (descriptor >> 5) & 1;
  static constexpr size_t kDictionaryIdBytes[4] = {0, 1, 2, 4};
  static constexpr size_t kContentSizeBytes[4] = {0, 2, 4, 8};
  const size_t content_bytes =
      (descriptor >> 6) == 0 ? (single_segment ? 1 : 0) : kContentSizeBytes[descriptor >> 6];
  const size_t header =
      5 + (single_segment ? 0 : 1) + kDictionaryIdBytes[descriptor & 3] + content_bytes;
  constexpr uint64_t kBlockBytes = uint64_t{1} << 17;
  const uint64_t max_blocks = (decoded_bytes + kBlockBytes - 1) / kBlockBytes + 1;
  uint64_t blocks = 0;
  for (size_t at = header; at + 3 <= payload.size();) {
    const uint32_t word = static_cast<uint32_t>(payload[at]) |
                          static_cast<uint32_t>(payload[at + 1]) << 8 |
                          static_cast<uint32_t>(payload[at + 2]) << 16;
    const uint32_t type = (word >> 1) & 3;
    const uint32_t size = word >> 3;
    if (++blocks > max_blocks) {
      return CorruptChunkError("zstd: more blocks than the chunk's size needs");
    }
    if (word & 1) break;               // the last block
    at += 3 + (type == 1 ? 1 : size);  // an RLE block stores one byte
  }
  return Status::Ok();
}

}  // namespace

Result<std::span<const std::byte>> GpuChunkCodec::Payload(std::span<const std::byte> stored) const {
  if (crc32c) {
    ZS_ASSIGN_OR_RETURN(stored, WithoutCrc32c(stored));
  }
  switch (framing) {
    case Framing::kNone:
      break;
    case Framing::kLz4SizePrefix:
      if (stored.size() < 4 || LoadLittle32(stored.data()) != decoded_bytes) {
        return CorruptChunkError("lz4: the size prefix is not the chunk's size");
      }
      stored = stored.subspan(4);
      break;
    case Framing::kZlib: {
      // RFC 1950: CMF (deflate, a window of at most 32 KiB), FLG (no preset dictionary), checked;
      // then deflate, then Adler-32.
      if (stored.size() < 6) return CorruptChunkError("zlib: stream too short");
      const auto cmf = static_cast<unsigned>(stored[0]);
      const auto flg = static_cast<unsigned>(stored[1]);
      if ((cmf & 0x0F) != 8 || (cmf >> 4) > 7 || (cmf * 256 + flg) % 31 != 0 || (flg & 0x20) != 0) {
        return CorruptChunkError("zlib: not a zlib stream without a preset dictionary");
      }
      stored = stored.subspan(2, stored.size() - 6);
      break;
    }
  }
  if (compression == GpuCompression::kZstd)
    ZS_RETURN_IF_ERROR(CheckZstdFrame(stored, decoded_bytes));
  if (compression == GpuCompression::kGzip) {
    // RFC 1952: a 10-byte header, deflate, then CRC-32 and ISIZE (the size mod 2^32), both
    // little-endian. The CRC-32 is verified on the GPU once decoded; ISIZE here.
    if (stored.size() < 18) return CorruptChunkError("gzip: member too short");
    if (LoadLittle32(stored.data() + stored.size() - 4) != static_cast<uint32_t>(decoded_bytes)) {
      return CorruptChunkError("gzip: the trailer's size is not the chunk's");
    }
  }
  if (!compression && stored.size() != decoded_bytes) {
    return CorruptChunkError("stored " + std::to_string(stored.size()) + " bytes, expected " +
                             std::to_string(decoded_bytes));
  }
  return stored;
}

namespace {

// A blosc1 frame (c-blosc's format, which numcodecs and zarr-python write): a 16-byte header
// (version, codec version, flags, typesize, decoded size, block size, frame size), then the start
// of each block, then the blocks; a block is `typesize` streams of `block / typesize` bytes when
// split (else one), each a 32-bit size and that many bytes: stored as they are when the size is the
// stream's, else compressed. Flags: 0x1 byte shuffle, 0x2 the data stored whole after the header,
// 0x4 bit shuffle, 0x8 the delta filter, 0x10 blocks not split, bits 5-7 the codec (1 LZ4, 4 zstd).
Result<GpuChunkParse> ParseBlosc(std::span<const std::byte> frame, uint64_t decoded_bytes) {
  constexpr size_t kHeader = 16;
  if (frame.size() < kHeader) return CorruptChunkError("blosc: frame shorter than its header");
  const auto flags = static_cast<unsigned>(frame[2]);
  const auto typesize = static_cast<uint32_t>(frame[3]);
  const uint64_t nbytes = LoadLittle32(frame.data() + 4);
  const uint64_t blocksize = LoadLittle32(frame.data() + 8);
  const uint64_t cbytes = LoadLittle32(frame.data() + 12);
  if (nbytes != decoded_bytes) {
    return CorruptChunkError("blosc: the frame decodes to " + std::to_string(nbytes) +
                             " bytes, not the chunk's " + std::to_string(decoded_bytes));
  }
  if (cbytes != frame.size()) return CorruptChunkError("blosc: the frame's size is not its length");
  // What c-blosc (1.21, which the CPU path decodes with) refuses, refused here too: a frame the
  // CPU calls corrupt must not decode on the GPU.
  if (static_cast<unsigned>(frame[0]) != 2) {
    return CorruptChunkError("blosc: format version " + std::to_string(static_cast<int>(frame[0])) +
                             ", not 2");
  }
  if (nbytes > 0 && (typesize == 0 || blocksize == 0 || blocksize > nbytes)) {
    return CorruptChunkError("blosc: bad type or block size");
  }
  if ((flags & 0x4) || (flags & 0x8)) {
    return UnsupportedError("blosc: bit shuffle or the delta filter");
  }
  GpuChunkParse parse;
  if (flags & 0x2) {  // stored whole
    if (frame.size() != kHeader + nbytes) {
      return CorruptChunkError("blosc: the stored data is not the frame's size");
    }
    parse.streams.push_back(
        GpuStream{std::nullopt, frame.subspan(kHeader, nbytes), 0, nbytes, std::nullopt});
    return parse;
  }
  const unsigned codec = flags >> 5;
  if (codec != 1 && codec != 4)
    return UnsupportedError("blosc: an inner codec other than lz4, zstd");
  if (static_cast<unsigned>(frame[1]) != 1) {  // lz4's and zstd's format version in blosc
    return CorruptChunkError("blosc: inner codec format version " +
                             std::to_string(static_cast<int>(frame[1])) + ", not 1");
  }
  if (typesize == 0 || blocksize == 0 || blocksize % typesize != 0) {
    return CorruptChunkError("blosc: bad type or block size");
  }
  const bool split = (flags & 0x10) == 0;
  if (split && !(typesize <= 16 && blocksize / typesize >= 128)) {
    return UnsupportedError("blosc: a block split the GPU path does not parse");
  }
  const GpuCompression compression = codec == 1 ? GpuCompression::kLz4 : GpuCompression::kZstd;
  const uint64_t nblocks = (nbytes + blocksize - 1) / blocksize;
  if (kHeader + 4 * nblocks > frame.size())
    return CorruptChunkError("blosc: block starts truncated");
  for (uint64_t b = 0; b < nblocks; ++b) {
    const uint64_t bsize = std::min(blocksize, nbytes - b * blocksize);
    const uint64_t streams = split && bsize == blocksize ? typesize : 1;
    const uint64_t neblock = bsize / streams;
    uint64_t at = LoadLittle32(frame.data() + kHeader + 4 * b);
    for (uint64_t j = 0; j < streams; ++j) {
      if (at + 4 > frame.size()) return CorruptChunkError("blosc: block truncated");
      const uint64_t size = LoadLittle32(frame.data() + at);
      at += 4;
      if (size == 0 || size > neblock || at + size > frame.size()) {
        return CorruptChunkError("blosc: bad stream size");
      }
      GpuStream stream{std::nullopt, frame.subspan(at, size), b * blocksize + j * neblock, neblock,
                       std::nullopt};
      if (size != neblock) {
        stream.compression = compression;
        if (compression == GpuCompression::kZstd) {
          ZS_RETURN_IF_ERROR(CheckZstdFrame(stream.payload, neblock));
        }
      }
      parse.streams.push_back(stream);
      at += size;
    }
  }
  if ((flags & 0x1) && typesize > 1) {
    parse.unshuffle_typesize = typesize;
    parse.block_bytes = blocksize;
  }
  return parse;
}

}  // namespace

Result<GpuChunkParse> GpuChunkCodec::Parse(std::span<const std::byte> stored) const {
  if (!blosc) {
    ZS_ASSIGN_OR_RETURN(std::span<const std::byte> payload, Payload(stored));
    GpuStream stream{compression, payload, 0, decoded_bytes, std::nullopt};
    if (framing == Framing::kZlib) {  // big-endian, right after the deflate stream
      stream.checksum =
          GpuChecksum{GpuChecksum::Kind::kAdler32, LoadBig32(payload.data() + payload.size())};
    } else if (compression == GpuCompression::kGzip) {  // little-endian, before ISIZE
      stream.checksum =
          GpuChecksum{GpuChecksum::Kind::kCrc32, LoadLittle32(payload.data() + payload.size() - 8)};
    }
    GpuChunkParse parse;
    parse.streams.push_back(stream);
    return parse;
  }
  if (crc32c) {
    ZS_ASSIGN_OR_RETURN(stored, WithoutCrc32c(stored));
  }
  return ParseBlosc(stored, decoded_bytes);
}

namespace {

using CodecType = CodecTraits::Type;

// A codec's name in descriptions: zarr.json's, but numcodecs' codecs by what they are.
std::string CodecName(CodecTraits traits) {
  switch (traits.type) {
    case CodecType::kOther:
      return "a codec registered at run time";
    case CodecType::kTranspose:
      return "transpose";
    case CodecType::kDelta:
      return "delta";
    case CodecType::kFixedScaleOffset:
      return "fixedscaleoffset";
    case CodecType::kQuantize:
      return "quantize";
    case CodecType::kBitRound:
      return "bitround";
    case CodecType::kAsType:
      return "astype";
    case CodecType::kBytes:
      return "bytes";
    case CodecType::kSharding:
      return "sharding";
    case CodecType::kZstd:
      return "zstd";
    case CodecType::kGzip:
      return "gzip";
    case CodecType::kZlib:
      return "zlib";
    case CodecType::kLz4:
      return "lz4";
    case CodecType::kBlosc:
      return "blosc";
    case CodecType::kCrc32c:
      return "crc32c";
    case CodecType::kBz2:
      return "bz2";
    case CodecType::kShuffle:
      return "shuffle";
  }
  return "?";
}

std::string_view BloscCompressorName(CodecTraits::BloscCompressor compressor) {
  static constexpr std::string_view kNames[] = {"blosclz", "lz4",  "lz4hc",
                                                "snappy",  "zlib", "zstd"};
  return kNames[static_cast<size_t>(compressor)];
}

GpuDecodePlan OnTheCpu(std::string reason) { return {std::nullopt, std::move(reason)}; }

// Sets how `codec` decompresses a chunk compressed as `traits` says, and `how` to name it; the
// reason the CPU decodes instead, for a compressor the GPU takes only in some settings. Leaves
// `codec` as it is for a codec that is no compressor of the GPU's.
std::optional<std::string> TakeCompressor(const CodecTraits& traits, GpuChunkCodec* codec,
                                          std::string* how) {
  switch (traits.type) {
    case CodecType::kZstd:
      if (traits.checksum) return "zstd with content checksums (nvCOMP does not verify them)";
      codec->compression = GpuCompression::kZstd;
      break;
    case CodecType::kGzip:
      codec->compression = GpuCompression::kGzip;
      break;
    case CodecType::kZlib:
      codec->compression = GpuCompression::kDeflate;
      codec->framing = GpuChunkCodec::Framing::kZlib;
      break;
    case CodecType::kLz4:
      codec->compression = GpuCompression::kLz4;
      codec->framing = GpuChunkCodec::Framing::kLz4SizePrefix;
      break;
    case CodecType::kBlosc: {
      using Compressor = CodecTraits::BloscCompressor;
      const Compressor compressor = traits.blosc_compressor;
      const std::string name = "blosc with " + std::string(BloscCompressorName(compressor));
      if (compressor != Compressor::kLz4 && compressor != Compressor::kLz4hc &&
          compressor != Compressor::kZstd) {
        return name + " (nvCOMP decodes lz4 and zstd inside blosc)";
      }
      if (traits.blosc_shuffle == CodecTraits::BloscShuffle::kBit) return "blosc with bitshuffle";
      codec->blosc = true;
      *how = traits.blosc_shuffle == CodecTraits::BloscShuffle::kByte ? name + " and byte shuffle"
                                                                      : name;
      return std::nullopt;
    }
    default:
      return std::nullopt;
  }
  *how = CodecName(traits);
  return std::nullopt;
}

// The plan for chunks stored as `chain` encodes them; `inner`: the chain of a shard's inner chunks.
GpuDecodePlan PlanChunks(const CodecChain& chain, bool inner) {
  if (const ShardingCodec* sharding = chain.sharding(); sharding != nullptr) {
    // Reads fetch a shard's inner chunks one by one (array/chunk_reader.h): those are the chunks.
    if (inner) return OnTheCpu("nested sharding (shards inside inner chunks)");
    return PlanChunks(sharding->inner_chain(), /*inner=*/true);
  }
  // Filters whose decoding leaves the bytes as they are (bitround, quantize) need no GPU kernel.
  for (const std::unique_ptr<ArrayToArrayCodec>& codec : chain.array_to_array()) {
    const CodecTraits traits = codec->traits();
    if (traits.identity_decode) continue;
    if (traits.type == CodecType::kTranspose) {
      return OnTheCpu("transpose codec (v2 order F, or a v3 transpose)");
    }
    if (traits.type == CodecType::kQuantize || traits.type == CodecType::kAsType) {
      return OnTheCpu(CodecName(traits) + " filter between two data types (a cast)");
    }
    return OnTheCpu(CodecName(traits) + " filter (an array-to-array codec)");
  }
  const CodecTraits layout = chain.array_to_bytes().traits();
  if (layout.type == CodecType::kSharding) {
    return OnTheCpu("sharding with codecs after it (each shard decodes whole)");
  }
  if (layout.type != CodecType::kBytes)
    return OnTheCpu(CodecName(layout) + " array-to-bytes codec");
  GpuChunkCodec codec;
  codec.decoded_bytes = chain.decoded_representation().num_bytes();
  codec.big_endian = layout.big_endian;
  std::string how = "stored";
  const std::span<const std::unique_ptr<BytesToBytesCodec>> stages = chain.bytes_to_bytes();
  size_t i = 0;
  if (i < stages.size()) {
    if (std::optional<std::string> reason = TakeCompressor(stages[i]->traits(), &codec, &how)) {
      return OnTheCpu(*std::move(reason));
    }
    if (codec.compression || codec.blosc) ++i;
  }
  if (i < stages.size() && stages[i]->traits().type == CodecType::kCrc32c) {
    codec.crc32c = true;
    how += " + crc32c";
    ++i;
  }
  if (i < stages.size()) {
    const std::string name = CodecName(stages[i]->traits());
    if (i == 0) return OnTheCpu(name + " (no GPU decoder)");
    return OnTheCpu(name + " after " + CodecName(stages[i - 1]->traits()) +
                    " (the GPU decodes one compressor, then crc32c)");
  }
  if (codec.big_endian) how += ", big-endian";
  return {codec, how};
}

}  // namespace

GpuDecodePlan PlanGpuDecode(const CodecChain& chain) { return PlanChunks(chain, /*inner=*/false); }

}  // namespace zarrstream

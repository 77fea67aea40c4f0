#include "gpu/gpu_decoder.h"

#include <sys/mman.h>
#include <zstd.h>

#include <algorithm>
#include <cstring>
#include <new>

#include "codec/crc32c_codec.h"
#include "codec/sharding_codec.h"
#include "gpu/cuda_driver.h"
#include "gpu/gpu_kernels.h"

namespace zarrstream {

namespace {

constexpr uint64_t kPayloadAlignment = 16;  // nvCOMP's input alignment, with room to spare
constexpr uint64_t kOutputAlignment = 256;  // decoded chunks and uploads
constexpr uint64_t kPageBytes = 4096;
// Pinned buffers from this size up are aligned to, and advised onto, transparent huge pages:
// pinning (cuMemHostRegister faults in and locks every page) then handles 512× fewer pages.
constexpr uint64_t kHugePageBytes = uint64_t{2} << 20;

uint64_t AlignUp(uint64_t n, uint64_t alignment) {
  return (n + alignment - 1) / alignment * alignment;
}

// A device address (the driver API's CUdeviceptr is an integer) as the typed pointer nvCOMP takes.
template <typename T>
T* DevicePointer(uint64_t address) {
  return reinterpret_cast<T*>(address);  // NOLINT(performance-no-int-to-ptr): a device address
}

// Where the decoded sizes start in the results of `chunks` chunks: after their int32 statuses.
uint64_t SizesOffset(uint64_t chunks) { return AlignUp(chunks * 4, 8); }

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
    const CodecTraits traits = stages[i]->traits();
    switch (traits.type) {
      case CodecType::kZstd:
        if (traits.checksum) {
          return OnTheCpu("zstd with content checksums (nvCOMP does not verify them)");
        }
        codec.compression = GpuCompression::kZstd;
        break;
      case CodecType::kGzip:
        codec.compression = GpuCompression::kGzip;
        break;
      case CodecType::kZlib:
        codec.compression = GpuCompression::kDeflate;
        codec.framing = GpuChunkCodec::Framing::kZlib;
        break;
      case CodecType::kLz4:
        codec.compression = GpuCompression::kLz4;
        codec.framing = GpuChunkCodec::Framing::kLz4SizePrefix;
        break;
      case CodecType::kBlosc: {
        using Compressor = CodecTraits::BloscCompressor;
        const Compressor compressor = traits.blosc_compressor;
        const std::string name = "blosc with " + std::string(BloscCompressorName(compressor));
        if (compressor != Compressor::kLz4 && compressor != Compressor::kLz4hc &&
            compressor != Compressor::kZstd) {
          return OnTheCpu(name + " (nvCOMP decodes lz4 and zstd inside blosc)");
        }
        if (traits.blosc_shuffle == CodecTraits::BloscShuffle::kBit) {
          return OnTheCpu("blosc with bitshuffle");
        }
        codec.blosc = true;
        how = traits.blosc_shuffle == CodecTraits::BloscShuffle::kByte ? name + " and byte shuffle"
                                                                       : name;
        break;
      }
      default:
        break;
    }
    if (codec.compression || codec.blosc) {
      if (!codec.blosc) how = CodecName(traits);
      ++i;
    }
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

GpuDecodeWorkspace::GpuDecodeWorkspace(const CudaDriver* driver, const Nvcomp* nvcomp)
    : driver_(driver), nvcomp_(nvcomp) {}

Result<std::unique_ptr<GpuDecodeWorkspace>> GpuDecodeWorkspace::Create(const CudaDriver* driver,
                                                                       const Nvcomp* nvcomp) {
  std::unique_ptr<GpuDecodeWorkspace> workspace(new GpuDecodeWorkspace(driver, nvcomp));
  ZS_ASSIGN_OR_RETURN(workspace->stream_, driver->CreateStream());
  return workspace;
}

GpuDecodeWorkspace::~GpuDecodeWorkspace() {
  (void)driver_->SynchronizeStream(stream_);
  for (Mirror& m : retired_) Release(m);
  Release(staging_);
  Release(uploads_);
  Release(results_);
  driver_->FreeDevice(arena_);
  driver_->FreeDevice(temp_);
  driver_->DestroyStream(stream_);
}

void GpuDecodeWorkspace::Release(Mirror& mirror) {
  if (mirror.host != nullptr) {
    (void)driver_->UnregisterHost(mirror.host);
    ::operator delete (mirror.host, std::align_val_t{mirror.alignment});
  }
  driver_->FreeDevice(mirror.device);
  mirror = Mirror{};
}

Status GpuDecodeWorkspace::Reserve(Mirror& mirror, uint64_t bytes, uint64_t keep_host_bytes) {
  if (bytes <= mirror.capacity) return Status::Ok();
  Mirror grown;
  const uint64_t wanted = std::max(bytes, mirror.capacity + mirror.capacity / 2);
  grown.alignment = wanted >= kHugePageBytes ? kHugePageBytes : kPageBytes;
  grown.capacity = AlignUp(wanted, grown.alignment);
  grown.host =
      static_cast<std::byte*>(::operator new (grown.capacity, std::align_val_t{grown.alignment}));
  if (grown.alignment == kHugePageBytes) {
    (void)::madvise(grown.host, grown.capacity, MADV_HUGEPAGE);  // advice: fine if refused
  }
  if (Status s = driver_->RegisterHost(grown.host, grown.capacity); !s.ok()) {
    ::operator delete (grown.host, std::align_val_t{grown.alignment});
    return s;
  }
  Result<uint64_t> device = driver_->AllocateDevice(grown.capacity);
  if (!device.ok()) {
    grown.device = 0;
    Release(grown);
    return device.status();
  }
  grown.device = *device;
  if (keep_host_bytes > 0) std::memcpy(grown.host, mirror.host, keep_host_bytes);
  Release(mirror);
  mirror = grown;
  return Status::Ok();
}

Status GpuDecodeWorkspace::ReserveDevice(uint64_t* address, uint64_t* capacity, uint64_t needed,
                                         uint64_t reserve) {
  if (needed <= *capacity) return Status::Ok();
  driver_->FreeDevice(*address);
  *address = 0;
  *capacity = 0;
  const uint64_t grown = AlignUp(std::max(needed, reserve), kPageBytes);
  ZS_ASSIGN_OR_RETURN(*address, driver_->AllocateDevice(grown));
  *capacity = grown;
  return Status::Ok();
}

Status GpuDecodeWorkspace::Synchronize() const { return driver_->SynchronizeStream(stream_); }

void GpuDecodeWorkspace::ExpectWaves(uint64_t decoded_bytes, bool unshuffle) {
  expected_wave_bytes_ = decoded_bytes;
  expected_arena_bytes_ = unshuffle ? 2 * decoded_bytes : decoded_bytes;  // landing + unshuffled
}

Status GpuDecodeWorkspace::Begin(size_t chunks, uint64_t host_bytes, uint64_t gpu_bytes) {
  ZS_RETURN_IF_ERROR(Synchronize());  // the previous wave's copies have read the host buffers
  for (Mirror& m : retired_) Release(m);
  retired_.clear();
  chunks_.clear();
  chunks_.resize(chunks);
  host_bytes_ = AlignUp(host_bytes + chunks * kPayloadAlignment, kPayloadAlignment);
  // Room for the host outputs and the payloads: at most about the decoded size (blosc and zstd
  // store incompressible data with a few bytes per block of overhead). Pinning memory is slow
  // (about 0.3 s per GB), so the staging is sized once, for the largest wave expected (or this
  // one), not grown in steps.
  const uint64_t wave = std::max(host_bytes + gpu_bytes, expected_wave_bytes_);
  const uint64_t alignment = host_bytes_ - host_bytes;
  ZS_RETURN_IF_ERROR(Reserve(staging_, alignment + wave + wave / 16 + (uint64_t{1} << 20), 0));
  staged_end_.store(host_bytes_);
  uploads_used_ = 0;
  host_used_ = 0;
  return Status::Ok();
}

std::span<std::byte> GpuDecodeWorkspace::HostOutput(size_t i, uint64_t bytes) {
  Chunk& chunk = chunks_[i];
  chunk.host_offset = host_used_;
  chunk.decoded_bytes = bytes;
  host_used_ = AlignUp(host_used_ + bytes, kPayloadAlignment);
  return {staging_.host + chunk.host_offset, bytes};
}

void GpuDecodeWorkspace::Stage(size_t i, const GpuChunkParse& parse, uint64_t decoded_bytes) {
  Chunk& chunk = chunks_[i];
  chunk.staged = true;
  chunk.decoded_bytes = decoded_bytes;
  chunk.unshuffle_typesize = parse.unshuffle_typesize;
  chunk.block_bytes = parse.block_bytes;
  chunk.streams.resize(parse.streams.size());
  uint64_t total = 0;
  for (const GpuStream& g : parse.streams) total += AlignUp(g.payload.size(), kPayloadAlignment);
  // One reservation for all the chunk's streams, each at an aligned offset (nvCOMP's inputs).
  uint64_t offset = staged_end_.fetch_add(total);
  const bool fits = offset + total <= staging_.capacity;
  for (size_t k = 0; k < parse.streams.size(); ++k) {
    const GpuStream& g = parse.streams[k];
    Stream& stream = chunk.streams[k];
    stream.compression = g.compression;
    stream.payload_bytes = g.payload.size();
    stream.output_offset = g.output_offset;
    stream.output_bytes = g.output_bytes;
    stream.checksum = g.checksum;
    if (fits) {
      stream.staging_offset = offset;
      std::memcpy(staging_.host + offset, g.payload.data(), g.payload.size());
      offset += AlignUp(g.payload.size(), kPayloadAlignment);
    } else {
      stream.staging_offset = kUnplaced;  // placed by Decode, after growing the staging
      stream.overflow.Resize(g.payload.size());
      std::memcpy(stream.overflow.data(), g.payload.data(), g.payload.size());
    }
  }
}

Result<uint64_t> GpuDecodeWorkspace::Upload(std::span<const std::byte> bytes) {
  uint64_t offset = AlignUp(uploads_used_, kOutputAlignment);
  if (offset + bytes.size() > uploads_.capacity) {
    // Work queued before may still read the old buffer: it lives until the next Begin.
    if (uploads_.capacity > 0) retired_.push_back(uploads_);
    const uint64_t capacity = std::max<uint64_t>(2 * uploads_.capacity, bytes.size() + (1 << 20));
    uploads_ = Mirror{};
    ZS_RETURN_IF_ERROR(Reserve(uploads_, capacity, 0));
    offset = 0;
  }
  std::memcpy(uploads_.host + offset, bytes.data(), bytes.size());
  ZS_RETURN_IF_ERROR(driver_->CopyToDevice(uploads_.device + offset, uploads_.host + offset,
                                           bytes.size(), stream_));
  uploads_used_ = offset + bytes.size();
  bytes_uploaded_ += bytes.size();
  return uploads_.device + offset;
}

Status GpuDecodeWorkspace::Decode() {
  // Place payloads that did not fit, growing the staging (its contents so far kept).
  uint64_t end = std::min(staged_end_.load(), staging_.capacity);
  uint64_t overflow_bytes = 0, kept = host_bytes_;
  for (const Chunk& c : chunks_) {
    for (const Stream& st : c.streams) {
      if (st.staging_offset == kUnplaced) {
        overflow_bytes += AlignUp(st.payload_bytes, kPayloadAlignment);
      } else {
        kept = std::max(kept, st.staging_offset + st.payload_bytes);
      }
    }
  }
  if (overflow_bytes > 0) {
    end = AlignUp(kept, kPayloadAlignment);
    ZS_RETURN_IF_ERROR(Reserve(staging_, end + overflow_bytes, end));
    for (Chunk& c : chunks_) {
      for (Stream& st : c.streams) {
        if (st.staging_offset != kUnplaced) continue;
        st.staging_offset = end;
        std::memcpy(staging_.host + end, st.overflow.data(), st.payload_bytes);
        st.overflow = ByteBuffer();
        end += AlignUp(st.payload_bytes, kPayloadAlignment);
      }
    }
  }
  ZS_RETURN_IF_ERROR(driver_->CopyToDevice(staging_.device, staging_.host, end, stream_));
  bytes_uploaded_ += end;

  // Where each chunk lands. Host outputs, and one uncompressed stream that is the whole chunk, are
  // used where they were copied; other chunks get a slot of the arena (and one more to land in
  // before unshuffling).
  uint64_t arena_bytes = 0;
  auto slot = [&](uint64_t bytes) {
    const uint64_t at = arena_bytes;
    arena_bytes = AlignUp(arena_bytes + bytes, kOutputAlignment);
    return at;
  };
  std::vector<size_t> in_arena;
  for (size_t i = 0; i < chunks_.size(); ++i) {
    Chunk& c = chunks_[i];
    if (c.rejected || c.decoded_bytes == 0) continue;
    if (!c.staged) {
      c.device = staging_.device + c.host_offset;
      continue;
    }
    bool compressed = false, crc32 = false;
    for (const Stream& st : c.streams) {
      compressed |= st.compression.has_value();
      crc32 |= st.checksum && st.checksum->kind == GpuChecksum::Kind::kCrc32;
    }
    // Without nvCOMP, or without its CRC-32 for a gzip chunk, the CPU decodes (and verifies).
    if ((compressed && nvcomp_ == nullptr) || (crc32 && !nvcomp_->has_crc32())) {
      c.rejected = true;
      continue;
    }
    if (c.streams.size() == 1 && !compressed && c.unshuffle_typesize == 0) {
      c.device = c.landing = staging_.device + c.streams[0].staging_offset;
      continue;
    }
    c.device = slot(c.decoded_bytes);
    c.landing = c.unshuffle_typesize != 0 ? slot(c.decoded_bytes) : c.device;
    in_arena.push_back(i);
  }
  ZS_RETURN_IF_ERROR(ReserveDevice(&arena_, &arena_capacity_, arena_bytes,
                                   std::max(arena_bytes + arena_bytes / 4, expected_arena_bytes_)));
  // Streams by compression (nvCOMP), stored streams copied, blocks to unshuffle.
  std::vector<std::pair<size_t, size_t>> groups[4];
  std::vector<std::pair<size_t, size_t>> checksummed;
  std::vector<gpu_abi::UnshuffleDescriptor> copies, unshuffles;
  for (size_t i : in_arena) {
    Chunk& c = chunks_[i];
    c.device += arena_;
    c.landing += arena_;
    for (size_t k = 0; k < c.streams.size(); ++k) {
      const Stream& st = c.streams[k];
      if (st.checksum) checksummed.emplace_back(i, k);
      if (st.compression) {
        groups[static_cast<size_t>(*st.compression)].emplace_back(i, k);
      } else {
        copies.push_back({staging_.device + st.staging_offset, c.landing + st.output_offset,
                          static_cast<uint32_t>(st.output_bytes), 1});
      }
    }
    if (c.unshuffle_typesize != 0) {
      for (uint64_t at = 0; at < c.decoded_bytes; at += c.block_bytes) {
        const uint64_t bytes = std::min(c.block_bytes, c.decoded_bytes - at);
        unshuffles.push_back(
            {c.landing + at, c.device + at, static_cast<uint32_t>(bytes), c.unshuffle_typesize});
      }
    }
  }
  size_t compressed = 0;
  for (const auto& g : groups) compressed += g.size();
  const uint64_t checksums_offset = SizesOffset(compressed) + compressed * 8;
  const uint64_t results_bytes = checksums_offset + checksummed.size() * 4;
  if (compressed > 0) {
    // Statuses (int32) then decoded sizes (uint64), per stream in group order; then the checksums
    // (uint32) of the decoded streams that carry one (see Checksum).
    ZS_RETURN_IF_ERROR(Reserve(results_, results_bytes, 0));
    uint64_t results_offset = 0;
    for (size_t g = 0; g < 4; ++g) {
      if (groups[g].empty()) continue;
      ZS_RETURN_IF_ERROR(
          DecodeGroup(static_cast<GpuCompression>(g), groups[g], results_offset, compressed));
      results_offset += groups[g].size();
    }
    ZS_RETURN_IF_ERROR(Checksum(checksummed, results_.device + checksums_offset));
  }
  ZS_RETURN_IF_ERROR(Unshuffle(copies));      // stored streams into place (typesize 1: a copy)
  ZS_RETURN_IF_ERROR(Unshuffle(unshuffles));  // then blosc's shuffle undone
  if (compressed == 0) return Status::Ok();
  ZS_RETURN_IF_ERROR(driver_->CopyToHost(results_.host, results_.device, results_bytes, stream_));
  ZS_RETURN_IF_ERROR(Synchronize());
  const auto* statuses = reinterpret_cast<const int32_t*>(results_.host);
  const auto* sizes = reinterpret_cast<const uint64_t*>(results_.host + SizesOffset(compressed));
  size_t k = 0;
  for (const auto& g : groups) {
    for (const auto& [i, s] : g) {
      Chunk& c = chunks_[i];
      c.rejected |= statuses[k] != 0 || sizes[k] != c.streams[s].output_bytes;
      ++k;
    }
  }
  // A checksum that does not match what the stored bytes say rejects the chunk: the CPU's decode
  // then names it (a bit flip in stored or literal data can leave a deflate stream decodable).
  const auto* checksums = reinterpret_cast<const uint32_t*>(results_.host + checksums_offset);
  k = 0;
  for (const GpuChecksum::Kind kind : {GpuChecksum::Kind::kAdler32, GpuChecksum::Kind::kCrc32}) {
    for (const auto& [i, s] : checksummed) {
      const GpuChecksum& checksum = *chunks_[i].streams[s].checksum;
      if (checksum.kind != kind) continue;
      chunks_[i].rejected |= checksums[k] != checksum.expected;
      ++k;
    }
  }
  for (size_t i : in_arena) chunks_decoded_ += chunks_[i].rejected ? 0 : 1;
  return Status::Ok();
}

Result<const GpuKernels*> GpuDecodeWorkspace::Kernels() {
  if (kernels_ == nullptr) {
    ZS_ASSIGN_OR_RETURN(kernels_, GpuKernels::ForDevice(driver_));
  }
  return kernels_;
}

Status GpuDecodeWorkspace::Unshuffle(const std::vector<gpu_abi::UnshuffleDescriptor>& blocks) {
  if (blocks.empty()) return Status::Ok();
  ZS_ASSIGN_OR_RETURN(const GpuKernels* kernels, Kernels());
  uint64_t max_bytes = 0;
  for (const auto& b : blocks) max_bytes = std::max<uint64_t>(max_bytes, b.bytes);
  ZS_ASSIGN_OR_RETURN(const uint64_t descriptors,
                      Upload(std::as_bytes(std::span<const gpu_abi::UnshuffleDescriptor>(blocks))));
  return kernels->Unshuffle(descriptors, static_cast<uint32_t>(blocks.size()), max_bytes, stream_);
}

Status GpuDecodeWorkspace::Checksum(const std::vector<std::pair<size_t, size_t>>& members,
                                    uint64_t results) {
  std::vector<gpu_abi::ChecksumDescriptor> adler32;
  std::vector<uint64_t> crc32_addresses, crc32_bytes;
  for (const auto& [i, s] : members) {
    const Chunk& c = chunks_[i];
    const Stream& st = c.streams[s];
    const uint64_t address = c.landing + st.output_offset;
    if (st.checksum->kind == GpuChecksum::Kind::kAdler32) {
      adler32.push_back({address, st.output_bytes});
    } else {
      crc32_addresses.push_back(address);
      crc32_bytes.push_back(st.output_bytes);
    }
  }
  if (!adler32.empty()) {
    ZS_ASSIGN_OR_RETURN(const GpuKernels* kernels, Kernels());
    ZS_ASSIGN_OR_RETURN(
        const uint64_t descriptors,
        Upload(std::as_bytes(std::span<const gpu_abi::ChecksumDescriptor>(adler32))));
    ZS_RETURN_IF_ERROR(
        kernels->Adler32(descriptors, static_cast<uint32_t>(adler32.size()), results, stream_));
  }
  if (crc32_addresses.empty()) return Status::Ok();
  // nvCOMP's arguments: the addresses, then the sizes (Decode rejected gzip chunks before they got
  // here where nvCOMP has no CRC-32).
  const size_t n = crc32_addresses.size();
  crc32_addresses.insert(crc32_addresses.end(), crc32_bytes.begin(), crc32_bytes.end());
  ZS_ASSIGN_OR_RETURN(const uint64_t arguments,
                      Upload(std::as_bytes(std::span<const uint64_t>(crc32_addresses))));
  const auto* args = DevicePointer<const uint64_t>(arguments);
  return nvcomp_->Crc32Async(*driver_, args, args + n, n,
                             *std::max_element(crc32_bytes.begin(), crc32_bytes.end()),
                             DevicePointer<uint32_t>(results) + adler32.size(), stream_);
}

Status GpuDecodeWorkspace::DecodeGroup(GpuCompression compression,
                                       const std::vector<std::pair<size_t, size_t>>& members,
                                       uint64_t results_offset, uint64_t results_total) {
  const size_t n = members.size();
  // Four device arrays of n entries: inputs, input sizes, output sizes, outputs.
  std::vector<uint64_t> arguments(4 * n);
  uint64_t max_decoded = 0, total_decoded = 0;
  for (size_t j = 0; j < n; ++j) {
    const Chunk& c = chunks_[members[j].first];
    const Stream& st = c.streams[members[j].second];
    arguments[j] = staging_.device + st.staging_offset;
    arguments[n + j] = st.payload_bytes;
    arguments[2 * n + j] = st.output_bytes;
    arguments[3 * n + j] = c.landing + st.output_offset;
    max_decoded = std::max(max_decoded, st.output_bytes);
    total_decoded += st.output_bytes;
  }
  ZS_ASSIGN_OR_RETURN(const uint64_t device_arguments,
                      Upload(std::as_bytes(std::span<const uint64_t>(arguments))));
  ZS_ASSIGN_OR_RETURN(
      const size_t temp_bytes,
      nvcomp_->TempBytes(*driver_, compression, n, max_decoded, total_decoded, stream_));
  if (temp_bytes > temp_capacity_) {
    // The scratch may still be in use by the previous group's decode.
    ZS_RETURN_IF_ERROR(Synchronize());
    // A quarter more than nvCOMP asks for: its estimate comes from the chunk sizes alone (frames
    // whose structure disagrees with them never get here: CheckZstdFrame).
    ZS_RETURN_IF_ERROR(
        ReserveDevice(&temp_, &temp_capacity_, temp_bytes, temp_bytes + temp_bytes / 4));
  }
  const auto* args = DevicePointer<const uint64_t>(device_arguments);
  // The results (see Decode): every stream's status, then every decoded size.
  auto* statuses = DevicePointer<int32_t>(results_.device) + results_offset;
  auto* sizes =
      DevicePointer<uint64_t>(results_.device + SizesOffset(results_total)) + results_offset;
  return nvcomp_->DecompressAsync(*driver_, compression, args, args + n, args + 2 * n, sizes, n,
                                  temp_, temp_capacity_, args + 3 * n, statuses, stream_);
}

}  // namespace zarrstream

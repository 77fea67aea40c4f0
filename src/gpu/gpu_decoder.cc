#include "gpu/gpu_decoder.h"

#include <algorithm>
#include <cstring>
#include <new>

#include <zstd.h>

#include "codec/crc32c_codec.h"
#include "gpu/cuda_driver.h"

namespace zarrstream {

namespace {

constexpr uint64_t kPayloadAlignment = 16;   // nvCOMP's input alignment, with room to spare
constexpr uint64_t kOutputAlignment = 256;   // decoded chunks and uploads
constexpr uint64_t kPageBytes = 4096;

uint64_t AlignUp(uint64_t n, uint64_t alignment) {
  return (n + alignment - 1) / alignment * alignment;
}

// Where the decoded sizes start in the results of `chunks` chunks: after their int32 statuses.
uint64_t SizesOffset(uint64_t chunks) { return AlignUp(chunks * 4, 8); }

uint32_t LoadLittle32(const std::byte* p) {
  return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 |
         static_cast<uint32_t>(p[2]) << 16 | static_cast<uint32_t>(p[3]) << 24;
}

std::optional<GpuCompression> CompressionOf(const std::string& name,
                                            GpuChunkCodec::Framing* framing) {
  *framing = GpuChunkCodec::Framing::kNone;
  if (name == "zstd" || name == "numcodecs.zstd") return GpuCompression::kZstd;
  if (name == "gzip" || name == "numcodecs.gzip") return GpuCompression::kGzip;
  if (name == "numcodecs.zlib") {
    *framing = GpuChunkCodec::Framing::kZlib;
    return GpuCompression::kDeflate;
  }
  if (name == "numcodecs.lz4") {
    *framing = GpuChunkCodec::Framing::kLz4SizePrefix;
    return GpuCompression::kLz4;
  }
  return std::nullopt;
}

// A zstd payload nvCOMP may be given: exactly one frame whose block headers fit the bytes, whose
// declared content size (when present) is the chunk's, and whose blocks are no more than full
// 128 KiB blocks of the chunk need. nvCOMP sizes its scratch from the chunk size and trusts the
// frame's structure: a truncated or forged frame made it write past its scratch (compute-sanitizer
// showed it), so such frames never reach it; the CPU decodes them and names the error.
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
    if (word & 1) break;  // the last block
    at += 3 + (type == 1 ? 1 : size);  // an RLE block stores one byte
  }
  return Status::Ok();
}

}  // namespace

Result<std::span<const std::byte>> GpuChunkCodec::Payload(
    std::span<const std::byte> stored) const {
  if (crc32c) {
    if (stored.size() < 4) return CorruptChunkError("crc32c: fewer than 4 bytes stored");
    const std::span<const std::byte> data = stored.first(stored.size() - 4);
    if (LoadLittle32(stored.data() + data.size()) != Crc32c(data)) {
      return CorruptChunkError("crc32c checksum mismatch");
    }
    stored = data;
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
      // RFC 1950: CMF (deflate), FLG (no preset dictionary), checked; then deflate, then Adler-32.
      if (stored.size() < 6) return CorruptChunkError("zlib: stream too short");
      const auto cmf = static_cast<unsigned>(stored[0]);
      const auto flg = static_cast<unsigned>(stored[1]);
      if ((cmf & 0x0F) != 8 || (cmf * 256 + flg) % 31 != 0 || (flg & 0x20) != 0) {
        return CorruptChunkError("zlib: not a zlib stream without a preset dictionary");
      }
      stored = stored.subspan(2, stored.size() - 6);
      break;
    }
  }
  if (compression == GpuCompression::kZstd) ZS_RETURN_IF_ERROR(CheckZstdFrame(stored, decoded_bytes));
  if (!compression && stored.size() != decoded_bytes) {
    return CorruptChunkError("stored " + std::to_string(stored.size()) + " bytes, expected " +
                             std::to_string(decoded_bytes));
  }
  return stored;
}

std::string GpuChunkCodec::Describe() const {
  std::string out = !compression                         ? "none"
                    : framing == Framing::kZlib          ? "zlib"
                                                         : std::string(GpuCompressionName(*compression));
  if (crc32c) out += " + crc32c";
  return out;
}

std::optional<GpuChunkCodec> PlanGpuDecode(const CodecChain& chain) {
  if (chain.sharding() != nullptr) return std::nullopt;
  const nlohmann::json codecs = chain.ToJson();
  if (!codecs.is_array() || codecs.empty()) return std::nullopt;
  GpuChunkCodec plan;
  plan.decoded_bytes = chain.decoded_representation().num_bytes();
  size_t i = 0;
  // The array→bytes codec comes first when there are no array→array codecs: it must be `bytes`.
  const nlohmann::json& first = codecs[i++];
  if (first.value("name", "") != "bytes") return std::nullopt;
  if (first.contains("configuration") && first["configuration"].value("endian", "little") == "big") {
    plan.big_endian = true;
  }
  if (i < codecs.size()) {
    GpuChunkCodec::Framing framing;
    if (auto compression = CompressionOf(codecs[i].value("name", ""), &framing)) {
      plan.compression = compression;
      plan.framing = framing;
      ++i;
    }
  }
  if (i < codecs.size() && codecs[i].value("name", "") == "crc32c") {
    plan.crc32c = true;
    ++i;
  }
  if (i != codecs.size()) return std::nullopt;
  return plan;
}

std::vector<std::string> GpuDecodableCodecs() {
  return {"bytes", "zstd", "gzip", "numcodecs.zlib", "numcodecs.lz4", "crc32c"};
}

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
    ::operator delete(mirror.host, std::align_val_t{kPageBytes});
  }
  driver_->FreeDevice(mirror.device);
  mirror = Mirror{};
}

Status GpuDecodeWorkspace::Reserve(Mirror& mirror, uint64_t bytes, uint64_t keep_host_bytes) {
  if (bytes <= mirror.capacity) return Status::Ok();
  Mirror grown;
  grown.capacity = AlignUp(std::max(bytes, mirror.capacity + mirror.capacity / 2), kPageBytes);
  grown.host = static_cast<std::byte*>(::operator new(grown.capacity, std::align_val_t{kPageBytes}));
  if (Status s = driver_->RegisterHost(grown.host, grown.capacity); !s.ok()) {
    ::operator delete(grown.host, std::align_val_t{kPageBytes});
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

Status GpuDecodeWorkspace::ReserveDevice(uint64_t* address, uint64_t* capacity, uint64_t bytes) {
  if (bytes <= *capacity) return Status::Ok();
  driver_->FreeDevice(*address);
  *address = 0;
  *capacity = 0;
  const uint64_t grown = AlignUp(bytes + bytes / 4, kPageBytes);
  ZS_ASSIGN_OR_RETURN(*address, driver_->AllocateDevice(grown));
  *capacity = grown;
  return Status::Ok();
}

Status GpuDecodeWorkspace::Synchronize() const { return driver_->SynchronizeStream(stream_); }

Status GpuDecodeWorkspace::Begin(size_t chunks, uint64_t host_bytes) {
  ZS_RETURN_IF_ERROR(Synchronize());  // the previous wave's copies have read the host buffers
  for (Mirror& m : retired_) Release(m);
  retired_.clear();
  chunks_.clear();
  chunks_.resize(chunks);
  host_bytes_ = AlignUp(host_bytes + chunks * kPayloadAlignment, kPayloadAlignment);
  // Room for the host outputs and, at first, as much again for payloads; later waves find the
  // capacity the largest one needed.
  ZS_RETURN_IF_ERROR(Reserve(staging_, 2 * host_bytes_ + (uint64_t{16} << 20), 0));
  staged_end_.store(host_bytes_);
  uploads_used_ = 0;
  host_used_ = 0;
  return Status::Ok();
}

std::span<std::byte> GpuDecodeWorkspace::HostOutput(size_t i, uint64_t bytes) {
  Chunk& chunk = chunks_[i];
  chunk.staging_offset = host_used_;
  chunk.decoded_bytes = bytes;
  host_used_ = AlignUp(host_used_ + bytes, kPayloadAlignment);
  return {staging_.host + chunk.staging_offset, bytes};
}

void GpuDecodeWorkspace::Stage(size_t i, std::optional<GpuCompression> compression,
                               std::span<const std::byte> payload, uint64_t decoded_bytes) {
  Chunk& chunk = chunks_[i];
  chunk.compression = compression;
  chunk.staged = true;
  chunk.payload_bytes = payload.size();
  chunk.decoded_bytes = decoded_bytes;
  const uint64_t size = AlignUp(payload.size(), kPayloadAlignment);
  const uint64_t offset = staged_end_.fetch_add(size);
  if (offset + size <= staging_.capacity) {
    chunk.staging_offset = offset;
    std::memcpy(staging_.host + offset, payload.data(), payload.size());
  } else {
    chunk.staging_offset = ~uint64_t{0};  // placed by Decode, after growing the staging
    chunk.overflow.Resize(payload.size());
    std::memcpy(chunk.overflow.data(), payload.data(), payload.size());
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
  ZS_RETURN_IF_ERROR(
      driver_->CopyToDevice(uploads_.device + offset, uploads_.host + offset, bytes.size(), stream_));
  uploads_used_ = offset + bytes.size();
  bytes_uploaded_ += bytes.size();
  return uploads_.device + offset;
}

Status GpuDecodeWorkspace::Decode() {
  // Place payloads that did not fit, growing the staging (its contents so far kept).
  uint64_t end = std::min(staged_end_.load(), staging_.capacity);
  uint64_t overflow_bytes = 0;
  for (const Chunk& c : chunks_) {
    if (c.staged && c.staging_offset == ~uint64_t{0}) {
      overflow_bytes += AlignUp(c.payload_bytes, kPayloadAlignment);
    }
  }
  if (overflow_bytes > 0) {
    uint64_t kept = 0;
    for (const Chunk& c : chunks_) {
      if (c.staged && c.staging_offset != ~uint64_t{0}) {
        kept = std::max(kept, c.staging_offset + c.payload_bytes);
      }
    }
    end = AlignUp(std::max(kept, host_bytes_), kPayloadAlignment);
    ZS_RETURN_IF_ERROR(Reserve(staging_, end + overflow_bytes, end));
    for (Chunk& c : chunks_) {
      if (!c.staged || c.staging_offset != ~uint64_t{0}) continue;
      c.staging_offset = end;
      std::memcpy(staging_.host + end, c.overflow.data(), c.payload_bytes);
      c.overflow = ByteBuffer();
      end += AlignUp(c.payload_bytes, kPayloadAlignment);
    }
  }
  ZS_RETURN_IF_ERROR(driver_->CopyToDevice(staging_.device, staging_.host, end, stream_));
  bytes_uploaded_ += end;

  // Host outputs and uncompressed payloads are used where they landed; compressed ones decode
  // into the arena, grouped by compression.
  std::vector<size_t> groups[4];
  uint64_t arena_bytes = 0;
  for (size_t i = 0; i < chunks_.size(); ++i) {
    Chunk& c = chunks_[i];
    if (c.rejected || c.decoded_bytes == 0) continue;
    if (!c.staged || !c.compression) {
      c.device = staging_.device + c.staging_offset;
      continue;
    }
    if (nvcomp_ == nullptr) {
      c.rejected = true;
      continue;
    }
    c.device = arena_bytes;  // an offset until the arena is reserved
    arena_bytes = AlignUp(arena_bytes + c.decoded_bytes, kOutputAlignment);
    groups[static_cast<size_t>(*c.compression)].push_back(i);
  }
  ZS_RETURN_IF_ERROR(ReserveDevice(&arena_, &arena_capacity_, arena_bytes));
  size_t compressed = 0;
  for (const std::vector<size_t>& g : groups) {
    for (size_t i : g) chunks_[i].device += arena_;
    compressed += g.size();
  }
  if (compressed == 0) return Status::Ok();
  // Statuses (int32) then decoded sizes (uint64), per chunk in group order.
  const uint64_t results_bytes = SizesOffset(compressed) + compressed * 8;
  ZS_RETURN_IF_ERROR(Reserve(results_, results_bytes, 0));
  uint64_t results_offset = 0;
  for (size_t g = 0; g < 4; ++g) {
    if (groups[g].empty()) continue;
    ZS_RETURN_IF_ERROR(DecodeGroup(static_cast<GpuCompression>(g), groups[g], results_offset,
                                   compressed));
    results_offset += groups[g].size();
  }
  ZS_RETURN_IF_ERROR(driver_->CopyToHost(results_.host, results_.device, results_bytes, stream_));
  ZS_RETURN_IF_ERROR(Synchronize());
  const auto* statuses = reinterpret_cast<const int32_t*>(results_.host);
  const auto* sizes = reinterpret_cast<const uint64_t*>(results_.host + SizesOffset(compressed));
  size_t k = 0;
  for (const std::vector<size_t>& g : groups) {
    for (size_t i : g) {
      Chunk& c = chunks_[i];
      c.rejected = statuses[k] != 0 || sizes[k] != c.decoded_bytes;
      if (!c.rejected) ++chunks_decoded_;
      ++k;
    }
  }
  return Status::Ok();
}

Status GpuDecodeWorkspace::DecodeGroup(GpuCompression compression,
                                       const std::vector<size_t>& members,
                                       uint64_t results_offset, uint64_t results_total) {
  const size_t n = members.size();
  // Four device arrays of n entries: inputs, input sizes, output sizes, outputs.
  std::vector<uint64_t> arguments(4 * n);
  uint64_t max_decoded = 0, total_decoded = 0;
  for (size_t j = 0; j < n; ++j) {
    const Chunk& c = chunks_[members[j]];
    arguments[j] = staging_.device + c.staging_offset;
    arguments[n + j] = c.payload_bytes;
    arguments[2 * n + j] = c.decoded_bytes;
    arguments[3 * n + j] = c.device;
    max_decoded = std::max(max_decoded, c.decoded_bytes);
    total_decoded += c.decoded_bytes;
  }
  ZS_ASSIGN_OR_RETURN(const uint64_t device_arguments,
                      Upload(std::as_bytes(std::span<const uint64_t>(arguments))));
  ZS_ASSIGN_OR_RETURN(const size_t temp_bytes,
                      nvcomp_->TempBytes(compression, n, max_decoded, total_decoded, stream_));
  if (temp_bytes > temp_capacity_) {
    // The scratch may still be in use by the previous group's decode.
    ZS_RETURN_IF_ERROR(Synchronize());
    // A quarter more than nvCOMP asks for: its estimate comes from the chunk sizes alone (frames
    // whose structure disagrees with them never get here: CheckZstdFrame).
    ZS_RETURN_IF_ERROR(ReserveDevice(&temp_, &temp_capacity_, temp_bytes + temp_bytes / 4));
  }
  const auto* args = reinterpret_cast<const uint64_t*>(device_arguments);
  // The results (see Decode): every chunk's status, then every decoded size.
  auto* statuses = reinterpret_cast<int32_t*>(results_.device) + results_offset;
  auto* sizes = reinterpret_cast<uint64_t*>(results_.device + SizesOffset(results_total)) +
                results_offset;
  return nvcomp_->DecompressAsync(compression, args, args + n, args + 2 * n, sizes, n, temp_,
                                  temp_capacity_, args + 3 * n, statuses, stream_);
}

}  // namespace zarrstream

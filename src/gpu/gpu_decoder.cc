#include "gpu/gpu_decoder.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstring>
#include <new>

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

// Where the decoded sizes start in the results of `chunks` chunks: after their int32 statuses.
uint64_t SizesOffset(uint64_t chunks) { return AlignUp(chunks * 4, 8); }

}  // namespace

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
  driver_->FreeDevice(scratch_);
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

void GpuDecodeWorkspace::ReleaseGpuDecodeMemory() {
  if (arena_ == 0 && temp_ == 0) return;
  (void)Synchronize();  // a failed stream's work is over too
  driver_->FreeDevice(arena_);
  driver_->FreeDevice(temp_);
  arena_ = temp_ = 0;
  arena_capacity_ = temp_capacity_ = 0;
}

Result<uint64_t> GpuDecodeWorkspace::Scratch(uint64_t bytes) {
  ZS_RETURN_IF_ERROR(ReserveDevice(&scratch_, &scratch_capacity_, bytes, bytes));
  return scratch_;
}

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

std::span<std::byte> GpuDecodeWorkspace::StagingFor(uint64_t bytes) {
  if (bytes > staging_.capacity) return {};  // (a corrupt shard index's length, say)
  const uint64_t total = AlignUp(bytes, kPayloadAlignment);
  const uint64_t offset = staged_end_.fetch_add(total);
  if (offset + total > staging_.capacity) return {};  // Stage's copies overflow from here on too
  return {staging_.host + offset, bytes};
}

bool GpuDecodeWorkspace::InStaging(std::span<const std::byte> payload) const {
  const auto at = reinterpret_cast<uintptr_t>(payload.data());
  const auto begin = reinterpret_cast<uintptr_t>(staging_.host);
  return staging_.host != nullptr && at >= begin && at - begin <= staging_.capacity &&
         payload.size() <= staging_.capacity - (at - begin);
}

bool GpuDecodeWorkspace::Misaligned(const Stream& stream) const {
  const uint64_t alignment =
      stream.compression ? nvcomp_->InputAlignment(*stream.compression) : kPayloadAlignment;
  return stream.staging_offset % alignment != 0;
}

void GpuDecodeWorkspace::Stage(size_t i, const GpuChunkParse& parse, uint64_t decoded_bytes) {
  Chunk& chunk = chunks_[i];
  chunk.staged = true;
  chunk.decoded_bytes = decoded_bytes;
  chunk.unshuffle_typesize = parse.unshuffle_typesize;
  chunk.block_bytes = parse.block_bytes;
  chunk.streams.resize(parse.streams.size());
  uint64_t total = 0, in_place = 0;
  for (const GpuStream& g : parse.streams) {
    if (InStaging(g.payload)) {
      in_place += g.payload.size();
    } else {
      total += AlignUp(g.payload.size(), kPayloadAlignment);
    }
  }
  payload_bytes_in_place_.fetch_add(in_place, std::memory_order_relaxed);
  // One reservation for the chunk's streams to copy, each at an aligned offset (nvCOMP's inputs).
  uint64_t offset = total > 0 ? staged_end_.fetch_add(total) : 0;
  const bool fits = offset + total <= staging_.capacity;
  for (size_t k = 0; k < parse.streams.size(); ++k) {
    const GpuStream& g = parse.streams[k];
    Stream& stream = chunk.streams[k];
    stream.compression = g.compression;
    stream.payload_bytes = g.payload.size();
    stream.output_offset = g.output_offset;
    stream.output_bytes = g.output_bytes;
    stream.checksum = g.checksum;
    if (InStaging(g.payload)) {
      stream.staging_offset = static_cast<uint64_t>(g.payload.data() - staging_.host);
    } else if (fits) {
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
  ZS_ASSIGN_OR_RETURN(const uint64_t staged_end, PlaceOverflowPayloads());
  ZS_RETURN_IF_ERROR(driver_->CopyToDevice(staging_.device, staging_.host, staged_end, stream_));
  bytes_uploaded_ += staged_end;
  ZS_ASSIGN_OR_RETURN(const std::vector<size_t> in_arena, AssignLandings(staged_end));
  const WaveWork work = SortStreams(in_arena);
  ZS_RETURN_IF_ERROR(Unshuffle(work.realigned));  // streams nvCOMP cannot read where they lie
  ZS_RETURN_IF_ERROR(QueueDecodes(work));
  ZS_RETURN_IF_ERROR(Unshuffle(work.copies));      // stored streams into place (typesize 1: a copy)
  ZS_RETURN_IF_ERROR(Unshuffle(work.unshuffles));  // then blosc's shuffle undone
  if (work.compressed == 0) return Status::Ok();
  ZS_RETURN_IF_ERROR(RejectFailedStreams(work));
  for (size_t i : in_arena) chunks_decoded_ += chunks_[i].rejected ? 0 : 1;
  return Status::Ok();
}

Result<uint64_t> GpuDecodeWorkspace::PlaceOverflowPayloads() {
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
  if (overflow_bytes == 0) return end;
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
  return end;
}

Result<std::vector<size_t>> GpuDecodeWorkspace::AssignLandings(uint64_t staged_end) {
  // Host outputs, and one uncompressed stream that is the whole chunk (aligned), are used where
  // they were copied; other chunks get a slot of the arena (and one more to land in before
  // unshuffling). A compressed stream read into the staging at an address nvCOMP does not take
  // is copied on the GPU to one it does: into the device staging past what was staged where
  // there is room (it is sized for the decoded wave, the stored bytes take less), else into the
  // arena.
  uint64_t arena_bytes = 0;
  auto slot = [&](uint64_t bytes) {
    const uint64_t at = arena_bytes;
    arena_bytes = AlignUp(arena_bytes + bytes, kOutputAlignment);
    return at;
  };
  uint64_t spare = AlignUp(staged_end, kPayloadAlignment);  // in the device staging
  std::vector<Stream*> realigned_in_arena;
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
    if (c.streams.size() == 1 && !compressed && c.unshuffle_typesize == 0 &&
        !Misaligned(c.streams[0])) {
      c.device = c.landing = staging_.device + c.streams[0].staging_offset;
      continue;
    }
    c.device = slot(c.decoded_bytes);
    c.landing = c.unshuffle_typesize != 0 ? slot(c.decoded_bytes) : c.device;
    in_arena.push_back(i);
    for (Stream& st : c.streams) {
      st.input = staging_.device + st.staging_offset;
      st.realigned = st.compression && Misaligned(st);
      if (!st.realigned) continue;
      if (spare + st.payload_bytes <= staging_.capacity) {
        st.input = staging_.device + spare;
        spare = AlignUp(spare + st.payload_bytes, kPayloadAlignment);
      } else {
        st.input = slot(st.payload_bytes);
        realigned_in_arena.push_back(&st);
      }
    }
  }
  ZS_RETURN_IF_ERROR(ReserveDevice(&arena_, &arena_capacity_, arena_bytes,
                                   std::max(arena_bytes + arena_bytes / 4, expected_arena_bytes_)));
  for (size_t i : in_arena) {
    chunks_[i].device += arena_;
    chunks_[i].landing += arena_;
  }
  for (Stream* st : realigned_in_arena) st->input += arena_;
  return in_arena;
}

GpuDecodeWorkspace::WaveWork GpuDecodeWorkspace::SortStreams(
    const std::vector<size_t>& in_arena) const {
  WaveWork work;
  for (size_t i : in_arena) {
    const Chunk& c = chunks_[i];
    for (size_t k = 0; k < c.streams.size(); ++k) {
      const Stream& st = c.streams[k];
      if (st.checksum) work.checksummed.emplace_back(i, k);
      if (st.compression) {
        work.groups[static_cast<size_t>(*st.compression)].emplace_back(i, k);
        if (st.realigned) {
          work.realigned.push_back({staging_.device + st.staging_offset, st.input,
                                    static_cast<uint32_t>(st.payload_bytes), 1});
        }
      } else {
        work.copies.push_back({staging_.device + st.staging_offset, c.landing + st.output_offset,
                               static_cast<uint32_t>(st.output_bytes), 1});
      }
    }
    if (c.unshuffle_typesize != 0) {
      for (uint64_t at = 0; at < c.decoded_bytes; at += c.block_bytes) {
        const uint64_t bytes = std::min(c.block_bytes, c.decoded_bytes - at);
        work.unshuffles.push_back(
            {c.landing + at, c.device + at, static_cast<uint32_t>(bytes), c.unshuffle_typesize});
      }
    }
  }
  for (const auto& g : work.groups) work.compressed += g.size();
  work.checksums_offset = SizesOffset(work.compressed) + work.compressed * 8;
  work.results_bytes = work.checksums_offset + work.checksummed.size() * 4;
  return work;
}

Status GpuDecodeWorkspace::QueueDecodes(const WaveWork& work) {
  if (work.compressed == 0) return Status::Ok();
  ZS_RETURN_IF_ERROR(Reserve(results_, work.results_bytes, 0));
  uint64_t results_offset = 0;
  for (size_t g = 0; g < work.groups.size(); ++g) {
    if (work.groups[g].empty()) continue;
    ZS_RETURN_IF_ERROR(DecodeGroup(static_cast<GpuCompression>(g), work.groups[g], results_offset,
                                   work.compressed));
    results_offset += work.groups[g].size();
  }
  return Checksum(work.checksummed, results_.device + work.checksums_offset);
}

Status GpuDecodeWorkspace::RejectFailedStreams(const WaveWork& work) {
  ZS_RETURN_IF_ERROR(
      driver_->CopyToHost(results_.host, results_.device, work.results_bytes, stream_));
  ZS_RETURN_IF_ERROR(Synchronize());
  const auto* statuses = reinterpret_cast<const int32_t*>(results_.host);
  const auto* sizes =
      reinterpret_cast<const uint64_t*>(results_.host + SizesOffset(work.compressed));
  size_t k = 0;
  for (const auto& g : work.groups) {
    for (const auto& [i, s] : g) {
      Chunk& c = chunks_[i];
      c.rejected |= statuses[k] != 0 || sizes[k] != c.streams[s].output_bytes;
      ++k;
    }
  }
  // A checksum that does not match what the stored bytes say rejects the chunk: the CPU's decode
  // then names it (a bit flip in stored or literal data can leave a deflate stream decodable).
  const auto* checksums = reinterpret_cast<const uint32_t*>(results_.host + work.checksums_offset);
  k = 0;
  for (const GpuChecksum::Kind kind : {GpuChecksum::Kind::kAdler32, GpuChecksum::Kind::kCrc32}) {
    for (const auto& [i, s] : work.checksummed) {
      const GpuChecksum& checksum = *chunks_[i].streams[s].checksum;
      if (checksum.kind != kind) continue;
      chunks_[i].rejected |= checksums[k] != checksum.expected;
      ++k;
    }
  }
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
    arguments[j] = st.input;
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
  // The results (see WaveWork): every stream's status, then every decoded size.
  auto* statuses = DevicePointer<int32_t>(results_.device) + results_offset;
  auto* sizes =
      DevicePointer<uint64_t>(results_.device + SizesOffset(results_total)) + results_offset;
  return nvcomp_->DecompressAsync(*driver_, compression, args, args + n, args + 2 * n, sizes, n,
                                  DevicePointer<void>(temp_), temp_capacity_, args + 3 * n,
                                  statuses, stream_);
}

}  // namespace zarrstream

// Decoding chunks on the GPU (docs/architecture.md, "On the GPU"): the per-batch workspace that
// stages a wave of chunks' compressed bytes in pinned host memory, copies them to the GPU in one
// transfer and decodes them there. Which chains the GPU decodes, and how a chunk's stored bytes
// become the streams staged here: gpu/gpu_chunk_codec.h.
//
// A wave, on one workspace:
//   1. Begin(chunks, host_bytes, gpu_bytes): the chunks of the wave, and room for those decoded on
//      the CPU (HostOutput(i, bytes) hands out their pinned buffers);
//   2. Stage(i, parse, ...) for each chunk the GPU decodes: its streams (one payload; a blosc
//      frame's block streams), copied into pinned staging (any threads, concurrently: the read
//      engine calls it as bytes arrive), or left where they are when the read put the stored
//      bytes into the staging itself (StagingFor: a shard's inner chunks, read with no copy);
//   3. Decode(): one host→device copy of everything staged, the batched decodes (one nvCOMP call
//      per codec), the checksums the streams carry (one zs_adler32 launch for zlib's, one nvCOMP
//      CRC-32 call for gzip's), stored streams copied into place and blosc's shuffle undone
//      (zs_unshuffle), and a wait; then DeviceAddress(i) is each chunk's decoded bytes in device
//      memory and Rejected(i) says which chunks the GPU could not decode or whose checksum did not
//      match (the caller decodes those on the CPU, so that the error names the chunk and nothing
//      the GPU produced from a corrupt frame is trusted);
//   4. Upload(bytes) for descriptors and chunks decoded on the CPU after a rejection.
// The addresses stay valid until the next Begin. Memory grows to the largest wave (or what
// ExpectWaves announced) and is reused.
//
// Threads: one wave at a time; Stage and HostOutput may be called concurrently within a wave,
// everything else from the thread that owns the workspace. All GPU work is queued on stream().
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "gpu/gpu_chunk_codec.h"
#include "gpu/kernel_abi.h"
#include "gpu/nvcomp.h"
#include "util/byte_buffer.h"
#include "zarrstream/status.h"

namespace zarrstream {

class CudaDriver;
class GpuKernels;

class GpuDecodeWorkspace {
 public:
  // Needs the CUDA driver; `nvcomp` may be null (then every compressed chunk is rejected and
  // decoded on the CPU by the caller; so is every gzip chunk where nvCOMP has no batched CRC-32).
  static Result<std::unique_ptr<GpuDecodeWorkspace>> Create(const CudaDriver* driver,
                                                            const Nvcomp* nvcomp);
  ~GpuDecodeWorkspace();
  GpuDecodeWorkspace(const GpuDecodeWorkspace&) = delete;
  GpuDecodeWorkspace& operator=(const GpuDecodeWorkspace&) = delete;

  void* stream() const { return stream_; }

  // The largest wave to come, in decoded bytes, and whether its chunks may be blosc-shuffled (they
  // decode into a landing slot, then unshuffle). The next Begin and Decode reserve for it at once,
  // so the memory is pinned and allocated once rather than grown wave by wave: pinning costs
  // about 0.3 s per GB, and freeing device memory waits for the whole GPU.
  void ExpectWaves(uint64_t decoded_bytes, bool unshuffle);
  // Starts a wave of `chunks` chunks: `host_bytes` of them decoded on the CPU, `gpu_bytes` (their
  // decoded size) on the GPU, which sizes the staging.
  Status Begin(size_t chunks, uint64_t host_bytes, uint64_t gpu_bytes);
  // Pinned host memory for chunk i decoded on the CPU (`bytes` of the Begin's host_bytes).
  // Single-threaded, before the chunks are read.
  std::span<std::byte> HostOutput(size_t i, uint64_t bytes);
  // Chunk i cannot be staged (its framing is wrong): Decode reports it rejected.
  void Reject(size_t i) { chunks_[i].rejected = true; }
  // `bytes` of the pinned staging (any threads, concurrently), for a chunk's stored bytes to be
  // read into before their Stage: its streams are then decoded where they lie, with no copy, when
  // their addresses suit the decoder (Nvcomp::InputAlignment). Empty when the staging has no room
  // left (the caller reads into memory of its own; Stage copies). Valid until the next Begin.
  std::span<std::byte> StagingFor(uint64_t bytes);
  // Chunk i for the GPU from its parse (GpuChunkCodec::Parse): its streams are copied into the
  // staging, except those StagingFor's memory already holds.
  void Stage(size_t i, const GpuChunkParse& parse, uint64_t decoded_bytes);
  // Copies everything staged to the GPU, decodes it and waits. Errors are the CUDA calls'.
  Status Decode();
  // After Decode: chunk i's decoded bytes in device memory (0 for a chunk neither staged nor
  // given a HostOutput), and whether the GPU rejected it.
  uint64_t DeviceAddress(size_t i) const { return chunks_[i].device; }
  bool Rejected(size_t i) const { return chunks_[i].rejected; }

  // Copies `bytes` to device memory valid until the next Begin (queued on stream(); the host
  // memory is copied first, so it may be reused at once).
  Result<uint64_t> Upload(std::span<const std::byte> bytes);
  Status Synchronize() const;
  // Device memory of at least `bytes` for the caller's own values (a batch's intermediate
  // results), kept by the workspace and handed out again by the next call: the work on stream()
  // that used it must be done before then (grown, it is freed). Contents undefined.
  Result<uint64_t> Scratch(uint64_t bytes);

  // Frees the device memory only chunks decoded (or copied) on the GPU use: their arena and
  // nvCOMP's scratch (after the work queued on stream() is done). A later wave of such chunks
  // allocates them again.
  void ReleaseGpuDecodeMemory();

  // Bytes copied to the GPU and chunks decoded there, since creation.
  uint64_t bytes_uploaded() const { return bytes_uploaded_; }
  uint64_t chunks_decoded() const { return chunks_decoded_; }
  // Payload bytes Stage found already in the staging (read there), since creation.
  uint64_t payload_bytes_in_place() const {
    return payload_bytes_in_place_.load(std::memory_order_relaxed);
  }

 private:
  GpuDecodeWorkspace(const CudaDriver* driver, const Nvcomp* nvcomp);

  // A pinned host buffer and a device buffer of the same capacity.
  struct Mirror {
    std::byte* host = nullptr;
    uint64_t device = 0;
    uint64_t capacity = 0;
    uint64_t alignment = 0;  // of `host`
  };
  Status Reserve(Mirror& mirror, uint64_t bytes, uint64_t keep_host_bytes);
  // Whether `payload` lies in the staging (StagingFor's memory).
  bool InStaging(std::span<const std::byte> payload) const;
  void Release(Mirror& mirror);
  // Grows a device buffer to hold `needed` bytes (to `reserve` when it must grow).
  Status ReserveDevice(uint64_t* address, uint64_t* capacity, uint64_t needed, uint64_t reserve);
  // Decode's steps. The work of a wave's chunks in the arena: their compressed streams grouped by
  // compression (one nvCOMP call per group), the streams that carry a checksum, the stored streams
  // to copy into place and the blocks to unshuffle; and where the results of the decodes and
  // checksums go in results_: every compressed stream's status (int32), then every decoded size
  // (uint64), in group order; then the checksums (uint32) (see Checksum).
  struct WaveWork {
    std::array<std::vector<std::pair<size_t, size_t>>, 4> groups;  // (chunk, stream)
    std::vector<std::pair<size_t, size_t>> checksummed;
    std::vector<gpu_abi::UnshuffleDescriptor> copies, unshuffles;
    std::vector<gpu_abi::UnshuffleDescriptor> realigned;  // compressed streams moved for nvCOMP
    size_t compressed = 0;                                // streams in all groups
    uint64_t checksums_offset = 0;
    uint64_t results_bytes = 0;
  };
  // Places the payloads Stage could not fit, growing the staging (its contents so far kept);
  // returns the end of what is staged.
  Result<uint64_t> PlaceOverflowPayloads();
  // Sets where each chunk's streams land and its decoded bytes end up (the arena grown to hold
  // them); returns the chunks in the arena, which the GPU decodes, copies or unshuffles.
  Result<std::vector<size_t>> AssignLandings(uint64_t staged_end);
  WaveWork SortStreams(const std::vector<size_t>& in_arena) const;
  // Queues the batched decodes and the checksums of `work`.
  Status QueueDecodes(const WaveWork& work);
  // Waits for the results, and rejects the chunks whose decode failed, came out the wrong size or
  // whose checksum does not match.
  Status RejectFailedStreams(const WaveWork& work);
  // Queues nvCOMP's decode of chunks `members`; their results go at index results_offset of
  // results_total (see WaveWork).
  Status DecodeGroup(GpuCompression compression,
                     const std::vector<std::pair<size_t, size_t>>& members, uint64_t results_offset,
                     uint64_t results_total);
  // Queues zs_unshuffle over `blocks` (nothing when empty).
  Status Unshuffle(const std::vector<gpu_abi::UnshuffleDescriptor>& blocks);
  // Queues the checksums of the decoded streams `members` (chunk, stream) carry, into the device
  // array of uint32 at `results`: the Adler-32s first, then the CRC-32s, each kind in the order
  // of `members`.
  Status Checksum(const std::vector<std::pair<size_t, size_t>>& members, uint64_t results);
  Result<const GpuKernels*> Kernels();

  struct Stream {
    std::optional<GpuCompression> compression;
    uint64_t staging_offset = 0;  // of the payload in staging_ (kUnplaced: in `overflow`)
    uint64_t payload_bytes = 0;
    uint64_t output_offset = 0;  // in the chunk's landing buffer
    uint64_t output_bytes = 0;
    std::optional<GpuChecksum> checksum;
    ByteBuffer overflow;  // a payload that did not fit the staging capacity
    // Set by Decode: the device address nvCOMP reads a compressed stream from: where it was
    // staged, or (`realigned`: read into the staging at an address nvCOMP does not take) a copy
    // the GPU makes first.
    uint64_t input = 0;
    bool realigned = false;
  };
  // Whether `stream`, staged, lies at an address its decoder does not take: nvCOMP's input
  // alignment for a compressed stream, the kernels' 16 bytes for a stored chunk used in place.
  bool Misaligned(const Stream& stream) const;
  struct Chunk {
    bool staged = false;  // Stage was called: decoded (or copied) on the GPU from its streams
    bool rejected = false;
    uint64_t host_offset = 0;  // of a host output in staging_
    uint64_t decoded_bytes = 0;
    uint64_t device = 0;   // the decoded chunk
    uint64_t landing = 0;  // where its streams decode (== device unless unshuffled after)
    uint32_t unshuffle_typesize = 0;
    uint64_t block_bytes = 0;
    std::vector<Stream> streams;
  };
  static constexpr uint64_t kUnplaced = ~uint64_t{0};

  const CudaDriver* driver_;
  const Nvcomp* nvcomp_;
  const GpuKernels* kernels_ = nullptr;  // the driver's device's, found at the first launch
  void* stream_ = nullptr;
  Mirror staging_;  // host-decoded chunks, then staged payloads
  Mirror uploads_;  // Upload's bytes (nvCOMP's arguments, descriptors)
  uint64_t uploads_used_ = 0;
  std::vector<Mirror> retired_;  // outgrown upload buffers, freed at the next Begin
  Mirror results_;               // nvCOMP's statuses and decoded sizes, then checksums
  uint64_t arena_ = 0;           // decoded chunks (device)
  uint64_t arena_capacity_ = 0;
  uint64_t expected_wave_bytes_ = 0;  // ExpectWaves
  uint64_t expected_arena_bytes_ = 0;
  uint64_t temp_ = 0;  // nvCOMP scratch (device)
  uint64_t temp_capacity_ = 0;
  uint64_t scratch_ = 0;  // Scratch (device)
  uint64_t scratch_capacity_ = 0;
  std::vector<Chunk> chunks_;
  uint64_t host_bytes_ = 0;  // the host outputs' region at the start of staging_
  uint64_t host_used_ = 0;
  std::atomic<uint64_t> staged_end_{0};  // bump allocator over staging_ after the host region
  uint64_t bytes_uploaded_ = 0;
  uint64_t chunks_decoded_ = 0;
  std::atomic<uint64_t> payload_bytes_in_place_{0};
};

}  // namespace zarrstream

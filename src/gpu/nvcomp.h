// nvCOMP's batched decompressors (PyPI `nvidia-libnvcomp-cu13`), loaded at run time so that
// zarrstream builds and runs without it: the GPU path decodes a whole wave's chunks of one codec
// in one call (docs/architecture.md, "On the GPU").
//
// Where the library is found: the file named by ZARRSTREAM_NVCOMP_LIBRARY (the Python package sets
// it to the installed wheel's copy before first use), else `libnvcomp.so.6` on the loader's search
// path, else the wheel's copy beside the running program (WheelLibraryBesideCommand: the
// `zarrstream` command a zarrstream wheel installs, which no Python import prepares). Only the
// entry points used are declared here (nvCOMP's C API); nothing includes its headers.
//
// Threads: every member is thread-safe; calls run with the CUDA driver's device 0 primary context
// current (CudaDriver::InContext), on the caller's stream.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "zarrstream/status.h"

namespace zarrstream {

class CudaDriver;

// The compressed formats nvCOMP decodes for zarrstream: zstd frames, raw LZ4 blocks, raw deflate
// streams and gzip members.
enum class GpuCompression : uint8_t { kZstd, kLz4, kDeflate, kGzip };
std::string_view GpuCompressionName(GpuCompression compression);

class Nvcomp {
 public:
  // The loaded library, or null; UnavailableReason() then says why. Needs the CUDA driver.
  static const Nvcomp* Get();
  static std::string UnavailableReason();

  // "6.0.0", and where the library was loaded from.
  const std::string& version() const { return version_; }
  const std::string& library() const { return library_; }

  // Device scratch bytes a DecompressAsync call of `chunks` chunks needs, each decoding to at
  // most `max_chunk_bytes`, `total_bytes` in all. Both calls run in `driver`'s device's context;
  // `stream` belongs to that device.
  Result<size_t> TempBytes(const CudaDriver& driver, GpuCompression compression, size_t chunks,
                           size_t max_chunk_bytes, size_t total_bytes, void* stream) const;

  // Queues the decode of `chunks` chunks on `stream`, with `temp_bytes` of device scratch at
  // `temp` (at least TempBytes). Every other pointer argument is a device array of `chunks`
  // entries: the compressed chunks and their sizes, the output buffers and their sizes, and what
  // the call sets: each chunk's decoded size and nvcompStatus_t (0: success). The
  // returned status is the call's; chunks fail through `statuses`. Inputs must be aligned to
  // InputAlignment(compression), outputs to 16 bytes.
  Status DecompressAsync(const CudaDriver& driver, GpuCompression compression,
                         const uint64_t* compressed, const uint64_t* compressed_bytes,
                         const uint64_t* output_bytes, uint64_t* decoded_bytes, size_t chunks,
                         void* temp, size_t temp_bytes, const uint64_t* outputs, int32_t* statuses,
                         void* stream) const;

  // The alignment DecompressAsync needs of each compressed input of `compression`, as this
  // library reports it (a power of two, at most kMaxInputAlignment; kMaxInputAlignment where it
  // cannot say), so that a stream inside a blosc frame read straight into pinned memory is decoded
  // where it lies whenever its address allows.
  static constexpr size_t kMaxInputAlignment = 16;
  size_t InputAlignment(GpuCompression compression) const;

  // Whether this nvCOMP computes batched CRC-32s (nvcompBatchedCRC32Async, nvCOMP 6.0 on): without
  // it gzip chunks decode on the CPU, since nvCOMP's gzip decoder does not verify the CRC-32 gzip
  // stores.
  bool has_crc32() const;
  // Queues the CRC-32 (gzip's and zlib's crc32()) of `chunks` byte ranges on `stream`: `inputs` and
  // `input_bytes` are device arrays of `chunks` addresses and sizes (no alignment needed), `crcs`
  // a device array nvCOMP fills; `max_input_bytes` is the largest size, from which nvCOMP picks its
  // kernel. Needs has_crc32(). Runs in `driver`'s device's context.
  Status Crc32Async(const CudaDriver& driver, const uint64_t* inputs, const uint64_t* input_bytes,
                    size_t chunks, size_t max_input_bytes, uint32_t* crcs, void* stream) const;

  // "nvcompErrorCannotDecompress" for a status value.
  static std::string StatusName(int32_t status);

  // Where `pip install zarrstream[gpu]` put nvCOMP, seen from the program at `executable`: a
  // zarrstream wheel installs its command as site-packages/zarrstream.scripts/zarrstream (behind a
  // Python launcher in bin/), and the `nvidia-libnvcomp-cu13` wheel its library under
  // site-packages/nvidia/libnvcomp/lib64/.
  static std::string WheelLibraryBesideCommand(std::string_view executable);

  struct Api;  // the resolved entry points (nvcomp.cc)

 private:
  friend class NvcompLoader;  // nvcomp.cc
  Nvcomp() = default;
  const Api* api_ = nullptr;
  std::string version_;
  std::string library_;
};

}  // namespace zarrstream

// The loader's CUDA kernels (kernels.cu), built by nvcc into a fatbin embedded in the library when
// nvcc is present at build time, and loaded through the CUDA driver at first use. Each call is one
// launch over all of a batch's descriptors (kernel_abi.h), queued on the caller's stream.
//
// Threads: thread-safe. Launches go to the device the kernels were loaded on, on the caller's
// stream (of that device). The descriptor arrays are device memory that must stay valid until the
// stream passes the launch.
//
// Grids: a launch has at most ZARRSTREAM_GPU_BLOCKS_PER_SM blocks per multiprocessor in all (1 to
// 64; read when the kernels are loaded; default 64, which fills the GPU). A training step runs its
// kernels beside these, and the blocks of a grid that fills the GPU hold multiprocessors the step's
// next kernel then waits for; a smaller grid leaves them room and takes longer itself.
#pragma once

#include <cstdint>

#include "zarrstream/status.h"

namespace zarrstream {

class CudaDriver;

class GpuKernels {
 public:
  // The kernels loaded on `driver`'s device (once per device, kept for the process); kCuda errors
  // say why they cannot be (no driver or device, a build without nvcc, the module's error).
  static Result<const GpuKernels*> ForDevice(const CudaDriver* driver);
  // Whether this build carries the kernels at all.
  static bool Compiled();
  // The grid budget where ZARRSTREAM_GPU_BLOCKS_PER_SM is unset: a grid that fills the GPU.
  static constexpr uint32_t kDefaultBlocksPerSm = 64;
  // ZARRSTREAM_GPU_BLOCKS_PER_SM's value (64 where unset); a kConfig error naming it where it is
  // not a whole number from 1 to 64.
  static Result<uint32_t> BlocksPerSmFromEnvironment();

  // zs_scatter over `count` CopyDescriptors at `descriptors`, the largest `max_elements` long.
  Status Scatter(uint64_t descriptors, uint32_t count, uint64_t max_elements, void* stream) const;
  // zs_forcings over `count` ForcingDescriptors, the largest slab `max_elements` long.
  Status Forcings(uint64_t descriptors, uint32_t count, uint64_t max_elements, void* stream) const;
  // zs_tendencies over `count` TendencyDescriptors, the largest slab `max_elements` long.
  Status Tendencies(uint64_t descriptors, uint32_t count, uint64_t max_elements,
                    void* stream) const;
  // zs_unshuffle over `count` UnshuffleDescriptors, the largest block `max_bytes` long.
  Status Unshuffle(uint64_t descriptors, uint32_t count, uint64_t max_bytes, void* stream) const;
  // zs_adler32 over `count` ChecksumDescriptors, each stream's Adler-32 into the device array of
  // `count` uint32 at `results`.
  Status Adler32(uint64_t descriptors, uint32_t count, uint64_t results, void* stream) const;

 private:
  friend class GpuKernelsLoader;  // gpu_kernels.cc
  GpuKernels() = default;
  const CudaDriver* driver_ = nullptr;            // the device the module is loaded on
  void* scatter_ = nullptr;                       // CUfunction
  void* forcings_ = nullptr;                      // CUfunction
  void* tendencies_ = nullptr;                    // CUfunction
  void* unshuffle_ = nullptr;                     // CUfunction
  void* adler32_ = nullptr;                       // CUfunction
  uint32_t blocks_per_sm_ = kDefaultBlocksPerSm;  // a grid's budget per multiprocessor
};

}  // namespace zarrstream

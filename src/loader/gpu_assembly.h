// The assemble stage on the GPU (LoaderOptions::device kCuda): copy descriptors for the scatter
// kernel, and the pool of device memory that GPU batches live in.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "gpu/kernel_abi.h"
#include "loader/batch_assembly.h"
#include "loader/read_plan.h"
#include "zarrstream/data_type.h"
#include "zarrstream/loader.h"
#include "zarrstream/status.h"

namespace zarrstream {

class CudaDriver;

// AssembleCopy's arguments as one descriptor for the scatter kernel, with the same meaning:
// `chunk` is the decoded chunk's device address, `slab` and `mask` the slab's (mask 0 unless
// transform.fill_nan). `byte_swap`: the chunk's elements are big-endian. A non-empty `fill_value`
// (one element, native order) stands for a chunk that is not stored. The box is simplified first:
// extent-1 dimensions dropped and runs contiguous in both chunk and slab merged, so the kernel
// indexes as few dimensions as it can.
gpu_abi::CopyDescriptor MakeCopyDescriptor(uint64_t chunk, DataType source,
                                           std::span<const uint64_t> chunk_shape,
                                           const PlannedCopy& copy, uint64_t slab, BatchDType dtype,
                                           const DimArray& slab_strides,
                                           const SlabTransform& transform, uint64_t mask,
                                           bool byte_swap, std::span<const std::byte> fill_value);

// Recycles the device allocations behind GPU batches' tensors (one per batch, `bytes` each). A
// block comes back when its batch is released, with an event recorded on the consumer's stream
// then; the next producer's stream waits on that event before writing the block. Batches may
// outlive the loader: they hold the pool by shared_ptr. Thread-safe.
class DeviceBatchPool : public std::enable_shared_from_this<DeviceBatchPool> {
 public:
  struct Block {
    uint64_t address = 0;
    void* released = nullptr;  // CUevent
  };

  DeviceBatchPool(const CudaDriver* driver, uint64_t bytes, size_t max_free);
  ~DeviceBatchPool();

  // A block, and the storage handle whose destruction returns it (a Batch's storage).
  Result<std::pair<Block, std::shared_ptr<void>>> Acquire();
  void SetConsumerStream(uintptr_t stream) { consumer_stream_.store(stream); }

 private:
  void Return(Block block);

  const CudaDriver* const driver_;
  const uint64_t bytes_;
  const size_t max_free_;
  std::atomic<uintptr_t> consumer_stream_{0};
  std::mutex mutex_;
  std::vector<Block> free_;
};

}  // namespace zarrstream

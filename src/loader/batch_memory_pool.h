// The memory batches live in: one block per batch, recycled. HostBatchPool hands out host blocks
// (a CPU batch's tensors, or a GPU batch's origins), page-locked when batches go to a GPU;
// DeviceBatchPool hands out device blocks (a GPU batch's tensors) and orders their reuse after the
// consumer's stream. Apart from the producers because both paths, and the loader's accounting of
// its memory, use them alike.
//
// Batches may outlive the loader: a batch's storage handle holds its pool by shared_ptr, and
// destroying the handle returns the block. Both pools are thread-safe. A block that cannot be had
// is an error that says so (out of memory, which block, how many bytes), never an exception.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <new>
#include <string_view>
#include <utility>
#include <vector>

#include "zarrstream/status.h"

namespace zarrstream {

class CudaDriver;

// Host blocks of `bytes` each (64-byte aligned). A block that comes back is kept for reuse while
// the pool holds at most `max_kept` blocks (in use and idle), and freed otherwise: a consumer that
// holds on to many batches gets them, and the pool shrinks back to `max_kept` as they return. With
// `pin` the blocks are whole pages, page-locked for the GPU (registered once, when allocated, and
// unregistered when freed).
class HostBatchPool : public std::enable_shared_from_this<HostBatchPool> {
 public:
  HostBatchPool(uint64_t bytes, size_t max_kept, const CudaDriver* pin);
  ~HostBatchPool();

  bool pinned() const { return pin_ != nullptr; }
  // A block, as the storage handle whose destruction returns it; out of memory is an error.
  Result<std::shared_ptr<void>> Acquire();
  // From now on at most `max_kept` blocks are kept: idle ones beyond it are freed now, blocks in
  // use as they come back.
  void SetMaxKept(size_t max_kept);
  // The blocks the pool holds: in use and idle.
  size_t blocks() const;

 private:
  static constexpr uint64_t kPageBytes = 4096;

  void Free(std::byte* p) const;
  void Return(std::byte* p);

  const uint64_t bytes_;
  const std::align_val_t alignment_;
  const CudaDriver* const pin_;
  mutable std::mutex mutex_;
  size_t max_kept_;
  size_t blocks_ = 0;
  std::vector<std::byte*> free_;
};

// Device blocks of `bytes` each, kept for reuse as HostBatchPool's (at most `max_kept`). A block
// comes back when its batch is released, with an event recorded on the consumer's stream then; the
// next producer's stream waits on that event before writing the block, and a block is freed only
// once its last consumer is done with it.
class DeviceBatchPool : public std::enable_shared_from_this<DeviceBatchPool> {
 public:
  struct Block {
    uint64_t address = 0;
    void* released = nullptr;  // CUevent
  };

  DeviceBatchPool(const CudaDriver* driver, uint64_t bytes, size_t max_kept);
  ~DeviceBatchPool();

  // A block, and the storage handle whose destruction returns it (a Batch's storage).
  Result<std::pair<Block, std::shared_ptr<void>>> Acquire();
  // As HostBatchPool::SetMaxKept and blocks().
  void SetMaxKept(size_t max_kept);
  size_t blocks() const;
  void SetConsumerStream(void* stream) { consumer_stream_.store(stream); }

 private:
  void Return(Block block);
  void Free(const Block& block) const;

  const CudaDriver* const driver_;
  const uint64_t bytes_;
  std::atomic<void*> consumer_stream_{nullptr};  // CUstream
  mutable std::mutex mutex_;
  size_t max_kept_;
  size_t blocks_ = 0;
  std::vector<Block> free_;
};

}  // namespace zarrstream

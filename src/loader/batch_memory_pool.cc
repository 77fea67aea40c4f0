#include "loader/batch_memory_pool.h"

#include <limits>
#include <string>

#include "gpu/cuda_driver.h"
#include "loader/batch_layout.h"
#include "util/checked_size.h"
#include "util/format.h"

namespace zarrstream {
namespace {

// `bytes` in whole pages; where that overflows, more than any allocation can have (it fails).
uint64_t WholePages(uint64_t bytes, uint64_t page) {
  const uint64_t max = std::numeric_limits<uint64_t>::max();
  return bytes > max - (page - 1) ? max : (bytes + page - 1) / page * page;
}

// Under the pool's lock: sets its limit and takes out the idle blocks beyond it (`blocks` counts
// them no more), for the caller to free after unlocking.
template <typename Block>
std::vector<Block> TakeSurplus(std::vector<Block>& idle, size_t& blocks, size_t& max_kept,
                               size_t new_max_kept) {
  max_kept = new_max_kept;
  std::vector<Block> surplus;
  while (blocks > max_kept && !idle.empty()) {
    surplus.push_back(idle.back());
    idle.pop_back();
    --blocks;
  }
  return surplus;
}

}  // namespace

HostBatchPool::HostBatchPool(uint64_t bytes, size_t max_kept, const CudaDriver* pin)
    : bytes_(pin ? WholePages(bytes, kPageBytes) : bytes),
      alignment_(std::align_val_t{pin ? kPageBytes : internal::BatchLayout::kAlignment}),
      pin_(pin),
      max_kept_(max_kept) {}

HostBatchPool::~HostBatchPool() {
  for (std::byte* p : free_) Free(p);
}

void HostBatchPool::SetMaxKept(size_t max_kept) {
  std::vector<std::byte*> surplus;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    surplus = TakeSurplus(free_, blocks_, max_kept_, max_kept);
  }
  for (std::byte* p : surplus) Free(p);
}

size_t HostBatchPool::blocks() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return blocks_;
}

Result<std::shared_ptr<void>> HostBatchPool::Acquire() {
  std::byte* block = nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!free_.empty()) {
      block = free_.back();
      free_.pop_back();
    }
  }
  if (block == nullptr) {
    block = static_cast<std::byte*>(::operator new(bytes_, alignment_, std::nothrow));
    if (block == nullptr) {
      return OutOfMemoryFor(
          pin_ != nullptr ? "a batch's page-locked host block" : "a batch's host block", bytes_,
          "a smaller batch_size or prefetch takes less");
    }
    if (pin_ != nullptr) {
      if (Status status = pin_->RegisterHost(block, bytes_); !status.ok()) {
        ::operator delete(block, alignment_);
        return status;
      }
    }
    std::lock_guard<std::mutex> lock(mutex_);
    ++blocks_;
  }
  std::shared_ptr<HostBatchPool> self = shared_from_this();
  return std::shared_ptr<void>(block,
                               [self](void* p) { self->Return(static_cast<std::byte*>(p)); });
}

void HostBatchPool::Free(std::byte* p) const {
  if (pin_ != nullptr) (void)pin_->UnregisterHost(p);  // nothing to do about a failure here
  ::operator delete(p, alignment_);
}

void HostBatchPool::Return(std::byte* p) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (blocks_ <= max_kept_) {
      free_.push_back(p);
      return;
    }
    --blocks_;
  }
  Free(p);
}

DeviceBatchPool::DeviceBatchPool(const CudaDriver* driver, uint64_t bytes, size_t max_kept)
    : driver_(driver), bytes_(bytes), max_kept_(max_kept) {}

DeviceBatchPool::~DeviceBatchPool() {
  for (const Block& b : free_) Free(b);
}

void DeviceBatchPool::Free(const Block& block) const {
  // The last consumer's work must be done before the memory goes.
  (void)driver_->SynchronizeEvent(block.released);
  driver_->DestroyEvent(block.released);
  driver_->FreeDevice(block.address);
}

size_t DeviceBatchPool::blocks() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return blocks_;
}

void DeviceBatchPool::SetMaxKept(size_t max_kept) {
  std::vector<Block> surplus;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    surplus = TakeSurplus(free_, blocks_, max_kept_, max_kept);
  }
  for (const Block& b : surplus) Free(b);
}

Result<std::pair<DeviceBatchPool::Block, std::shared_ptr<void>>> DeviceBatchPool::Acquire() {
  Block block;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!free_.empty()) {
      block = free_.back();
      free_.pop_back();
    }
  }
  if (block.address == 0) {
    ZS_ASSIGN_OR_RETURN(block.address, driver_->AllocateDevice(bytes_));
    Result<void*> event = driver_->CreateEvent();
    if (!event.ok()) {
      driver_->FreeDevice(block.address);
      return event.status();
    }
    block.released = *event;
    std::lock_guard<std::mutex> lock(mutex_);
    ++blocks_;
  }
  std::shared_ptr<DeviceBatchPool> self = shared_from_this();
  auto* handle = new Block(block);
  std::shared_ptr<void> storage(handle, [self](void* p) {
    auto* b = static_cast<Block*>(p);
    self->Return(*b);
    delete b;
  });
  return std::make_pair(block, std::move(storage));
}

void DeviceBatchPool::Return(Block block) {
  void* stream = consumer_stream_.load();
  if (!driver_->RecordEvent(block.released, stream).ok()) {
    // Without the event the next writer cannot wait for the consumer: wait here instead.
    (void)driver_->SynchronizeStream(stream);
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (blocks_ <= max_kept_) {
      free_.push_back(block);
      return;
    }
    --blocks_;
  }
  Free(block);
}

}  // namespace zarrstream

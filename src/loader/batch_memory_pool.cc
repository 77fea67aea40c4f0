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

}  // namespace

HostBatchPool::HostBatchPool(uint64_t bytes, size_t max_free, const CudaDriver* pin)
    : bytes_(pin ? WholePages(bytes, kPageBytes) : bytes),
      alignment_(std::align_val_t{pin ? kPageBytes : internal::BatchLayout::kAlignment}),
      max_free_(max_free),
      pin_(pin) {}

HostBatchPool::~HostBatchPool() { ReleaseIdle(); }

void HostBatchPool::ReleaseIdle() {
  std::vector<std::byte*> idle;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    idle.swap(free_);
  }
  for (std::byte* p : idle) Free(p);
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
    if (free_.size() < max_free_) {
      free_.push_back(p);
      return;
    }
  }
  Free(p);
}

DeviceBatchPool::DeviceBatchPool(const CudaDriver* driver, uint64_t bytes, size_t max_free)
    : driver_(driver), bytes_(bytes), max_free_(max_free) {}

DeviceBatchPool::~DeviceBatchPool() { ReleaseIdle(); }

void DeviceBatchPool::ReleaseIdle() {
  std::vector<Block> idle;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    idle.swap(free_);
  }
  for (const Block& b : idle) {
    // The last consumer's work must be done before the memory goes.
    (void)driver_->SynchronizeEvent(b.released);
    driver_->DestroyEvent(b.released);
    driver_->FreeDevice(b.address);
  }
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
    if (free_.size() < max_free_) {
      free_.push_back(block);
      return;
    }
  }
  (void)driver_->SynchronizeEvent(block.released);
  driver_->DestroyEvent(block.released);
  driver_->FreeDevice(block.address);
}

}  // namespace zarrstream

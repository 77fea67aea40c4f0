#include "loader/chunk_cache.h"

namespace zarrstream {

struct ChunkCache::IdleBuffers {
  explicit IdleBuffers(uint64_t capacity) : capacity_bytes(capacity) {}

  // Takes an entry of exactly `size` bytes, or null.
  std::unique_ptr<Entry> Take(uint64_t size) {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = by_size.find(size);
    if (it == by_size.end() || it->second.empty()) return nullptr;
    std::unique_ptr<Entry> entry = std::move(it->second.back());
    it->second.pop_back();
    bytes -= size;
    return entry;
  }

  // Keeps `entry` for reuse while the idle bytes stay within the capacity; frees it otherwise.
  void Give(std::unique_ptr<Entry> entry) {
    const uint64_t size = entry->bytes.size();
    std::lock_guard<std::mutex> lock(mutex);
    if (bytes + size > capacity_bytes) return;
    bytes += size;
    entry->missing = false;
    by_size[size].push_back(std::move(entry));
  }

  const uint64_t capacity_bytes;
  std::mutex mutex;
  uint64_t bytes = 0;
  std::unordered_map<uint64_t, std::vector<std::unique_ptr<Entry>>> by_size;
};

ChunkCache::ChunkCache(uint64_t capacity_bytes, uint64_t idle_capacity_bytes)
    : capacity_bytes_(capacity_bytes), idle_(std::make_shared<IdleBuffers>(idle_capacity_bytes)) {}

std::shared_ptr<const ChunkCache::Entry> ChunkCache::Find(size_t array, uint64_t linear) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = by_key_.find(Key{array, linear});
  if (it == by_key_.end()) return nullptr;
  lru_.splice(lru_.begin(), lru_, it->second);
  return it->second->second;
}

std::shared_ptr<ChunkCache::Entry> ChunkCache::Allocate(uint64_t size) {
  std::unique_ptr<Entry> entry = idle_->Take(size);
  if (!entry) {
    entry = std::make_unique<Entry>();
    entry->bytes.Resize(size);
  }
  return std::shared_ptr<Entry>(entry.release(), [idle = idle_](Entry* released) {
    idle->Give(std::unique_ptr<Entry>(released));
  });
}

void ChunkCache::Insert(size_t array, uint64_t linear, std::shared_ptr<Entry> entry) {
  std::lock_guard<std::mutex> lock(mutex_);
  const uint64_t size = entry->bytes.size();
  if (size > capacity_bytes_) return;  // the caller's reference is the only one
  const Key key{array, linear};
  if (auto it = by_key_.find(key); it != by_key_.end()) {
    bytes_ -= it->second->second->bytes.size();
    lru_.erase(it->second);
    by_key_.erase(it);
  }
  while (!lru_.empty() && bytes_ + size > capacity_bytes_) {
    auto& [old_key, old_entry] = lru_.back();
    bytes_ -= old_entry->bytes.size();
    by_key_.erase(old_key);
    lru_.pop_back();
  }
  lru_.emplace_front(key, std::move(entry));
  by_key_.emplace(key, lru_.begin());
  bytes_ += size;
}

uint64_t ChunkCache::bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return bytes_;
}

uint64_t ChunkCache::idle_bytes() const {
  std::lock_guard<std::mutex> lock(idle_->mutex);
  return idle_->bytes;
}

}  // namespace zarrstream

#include "loader/chunk_cache.h"

namespace zarrstream {

std::shared_ptr<const ChunkCache::Entry> ChunkCache::Find(size_t array, uint64_t linear) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = by_key_.find(Key{array, linear});
  if (it == by_key_.end()) return nullptr;
  lru_.splice(lru_.begin(), lru_, it->second);
  return it->second->second;
}

std::shared_ptr<ChunkCache::Entry> ChunkCache::Allocate() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (free_.empty()) return std::make_shared<Entry>();
  std::shared_ptr<Entry> entry = std::move(free_.back());
  free_.pop_back();
  free_bytes_ -= entry->bytes.size();
  entry->missing = false;
  return entry;
}

void ChunkCache::Insert(size_t array, uint64_t linear, std::shared_ptr<Entry> entry) {
  std::lock_guard<std::mutex> lock(mutex_);
  const uint64_t size = entry->bytes.size();
  if (size > capacity_bytes_) return;  // the caller's reference is the only one
  const Key key{array, linear};
  if (auto it = by_key_.find(key); it != by_key_.end()) {
    bytes_ -= it->second->second->bytes.size();
    Recycle(std::move(it->second->second));
    lru_.erase(it->second);
    by_key_.erase(it);
  }
  while (!lru_.empty() && bytes_ + size > capacity_bytes_) {
    auto& [old_key, old_entry] = lru_.back();
    bytes_ -= old_entry->bytes.size();
    by_key_.erase(old_key);
    Recycle(std::move(old_entry));
    lru_.pop_back();
  }
  lru_.emplace_front(key, std::move(entry));
  by_key_.emplace(key, lru_.begin());
  bytes_ += size;
}

void ChunkCache::Release(std::shared_ptr<Entry> entry) {
  std::lock_guard<std::mutex> lock(mutex_);
  Recycle(std::move(entry));
}

uint64_t ChunkCache::bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return bytes_;
}

void ChunkCache::Recycle(std::shared_ptr<Entry> entry) {
  // Held elsewhere (a batch still copying from it): it goes when they let go.
  // Idle buffers are bounded like the cache, so the two together stay within twice its capacity.
  if (entry.use_count() == 1 && free_bytes_ + entry->bytes.size() <= capacity_bytes_) {
    free_bytes_ += entry->bytes.size();
    free_.push_back(std::move(entry));
  }
}

}  // namespace zarrstream

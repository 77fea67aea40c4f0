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

class ChunkCache::Decode {
 public:
  void Finish(std::shared_ptr<const Entry> entry) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      entry_ = std::move(entry);
      done_ = true;
    }
    done_cv_.notify_all();
  }
  std::shared_ptr<const Entry> Wait() {
    std::unique_lock<std::mutex> lock(mutex_);
    done_cv_.wait(lock, [&] { return done_; });
    return entry_;
  }

 private:
  std::mutex mutex_;
  std::condition_variable done_cv_;
  bool done_ = false;
  std::shared_ptr<const Entry> entry_;  // null: abandoned
};

ChunkCache::ChunkCache(uint64_t capacity_bytes, uint64_t idle_capacity_bytes)
    : capacity_bytes_(capacity_bytes), idle_(std::make_shared<IdleBuffers>(idle_capacity_bytes)) {}

std::shared_ptr<const ChunkCache::Entry> ChunkCache::FindLocked(const Key& key) {
  auto it = by_key_.find(key);
  if (it == by_key_.end()) return nullptr;
  lru_.splice(lru_.begin(), lru_, it->second);
  return it->second->second;
}

std::shared_ptr<const ChunkCache::Entry> ChunkCache::Find(size_t array, uint64_t linear) {
  std::lock_guard<std::mutex> lock(mutex_);
  return FindLocked(Key{array, linear});
}

ChunkCache::Lookup ChunkCache::FindOrClaim(size_t array, uint64_t linear) {
  std::lock_guard<std::mutex> lock(mutex_);
  const Key key{array, linear};
  Lookup lookup;
  lookup.entry = FindLocked(key);
  if (lookup.entry) return lookup;
  auto [it, claimed] = decoding_.try_emplace(key);
  if (claimed) it->second = std::make_shared<Decode>();
  lookup.decode = it->second;
  lookup.claimed = claimed;
  return lookup;
}

void ChunkCache::Abandon(size_t array, uint64_t linear) {
  std::shared_ptr<Decode> decode;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = decoding_.find(Key{array, linear});
    if (it == decoding_.end()) return;
    decode = std::move(it->second);
    decoding_.erase(it);
  }
  decode->Finish(nullptr);
}

std::shared_ptr<const ChunkCache::Entry> ChunkCache::WaitFor(
    const std::shared_ptr<Decode>& decode) {
  return decode->Wait();
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
  const Key key{array, linear};
  std::shared_ptr<Decode> decode;
  {
    // Findable before the claim goes, so that no batch claims the chunk again in between.
    std::lock_guard<std::mutex> lock(mutex_);
    if (auto it = decoding_.find(key); it != decoding_.end()) {
      decode = std::move(it->second);
      decoding_.erase(it);
    }
    InsertLocked(key, entry);
  }
  if (decode) decode->Finish(std::move(entry));
}

void ChunkCache::InsertLocked(const Key& key, const std::shared_ptr<Entry>& entry) {
  const uint64_t size = entry->bytes.size();
  if (size > capacity_bytes_) return;
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
  lru_.emplace_front(key, entry);
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

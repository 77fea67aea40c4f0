#include "util/block_cache.h"

#include <cstdlib>
#include <map>
#include <mutex>

#include "util/fork_safety.h"

namespace zarrstream::internal {
namespace {

size_t CacheLimitFromEnvironment() {
  constexpr size_t kDefaultMiB = 256;
  const char* value = std::getenv("ZARRSTREAM_BUFFER_CACHE_MB");
  if (value == nullptr || *value == '\0') return kDefaultMiB << 20;
  char* end = nullptr;
  const unsigned long long mib = std::strtoull(value, &end, 10);
  // A malformed value keeps the default: this is a tuning knob read inside an allocator, with no
  // caller to hand an error to.
  if (end == value || *end != '\0' || mib > (size_t{1} << 24)) return kDefaultMiB << 20;
  return static_cast<size_t>(mib) << 20;
}

class BlockCache {
 public:
  BlockCache() : limit_(CacheLimitFromEnvironment()) {}

  std::byte* Take(size_t bytes, size_t& block_bytes) {
    {
      std::lock_guard lock(mu_);
      auto it = blocks_.lower_bound(bytes);
      if (it != blocks_.end() && it->first <= bytes + bytes / 4) {
        block_bytes = it->first;
        std::byte* block = it->second;
        cached_ -= it->first;
        blocks_.erase(it);
        return block;
      }
    }
    block_bytes = bytes;
    return new std::byte[bytes];
  }

  void Give(std::byte* block, size_t block_bytes) {
    {
      std::lock_guard lock(mu_);
      if (cached_ + block_bytes <= limit_) {
        blocks_.emplace(block_bytes, block);
        cached_ += block_bytes;
        return;
      }
    }
    delete[] block;
  }

  size_t limit() const { return limit_; }

  size_t cached() {
    std::lock_guard lock(mu_);
    return cached_;
  }

 private:
  const size_t limit_;
  ForkSafeMutex mu_;                          // any thread may hold it when the process forks
  std::multimap<size_t, std::byte*> blocks_;  // by size
  size_t cached_ = 0;
};

BlockCache& Cache() {
  // Never destroyed: ByteBuffers in other static objects may be freed after it would be.
  static BlockCache* cache = new BlockCache();
  return *cache;
}

}  // namespace

std::byte* AllocateBlock(size_t bytes, size_t& block_bytes) {
  if (bytes < kMinCachedBlockBytes) {
    block_bytes = bytes;
    return new std::byte[bytes];
  }
  return Cache().Take(bytes, block_bytes);
}

void FreeBlock(std::byte* block, size_t block_bytes) {
  if (block == nullptr) return;
  if (block_bytes < kMinCachedBlockBytes) {
    delete[] block;
    return;
  }
  Cache().Give(block, block_bytes);
}

size_t CachedBlockBytes() { return Cache().cached(); }

size_t BlockCacheLimitBytes() { return Cache().limit(); }

}  // namespace zarrstream::internal

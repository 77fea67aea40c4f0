// The loader's chunk cache: decoded read chunks kept for reuse by later batches (overlapping
// windows, block shuffle, a target step that is a later sample's input), bounded in bytes, least
// recently used out. It also recycles buffers: an evicted entry nobody else holds keeps its memory
// for the next chunk decoded, so a steady state of misses allocates nothing.
//
// Entries are shared: a batch being assembled holds the entries it uses, so an entry evicted
// meanwhile stays alive until the batch lets go (memory can exceed the bound by what batches in
// flight hold: at most a wave of chunks each, see loader.cc). Two batches in flight that miss the
// same chunk both decode it; the second insert replaces the first.
//
// Thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "util/byte_buffer.h"

namespace zarrstream {

class ChunkCache {
 public:
  struct Entry {
    ByteBuffer bytes;
    bool missing = false;  // not stored: `bytes` holds the fill value
  };

  explicit ChunkCache(uint64_t capacity_bytes) : capacity_bytes_(capacity_bytes) {}

  // The entry for chunk `linear` of array `array`, or null; a hit becomes the most recent.
  std::shared_ptr<const Entry> Find(size_t array, uint64_t linear);
  // An entry to decode into: a recycled one (its buffer's memory reused) or a new one.
  std::shared_ptr<Entry> Allocate();
  // Makes `entry` (decoded) findable, evicting the least recently used entries beyond capacity.
  // An entry larger than the whole capacity is not kept.
  void Insert(size_t array, uint64_t linear, std::shared_ptr<Entry> entry);
  // Gives back an entry that was allocated but not inserted (its decode failed).
  void Release(std::shared_ptr<Entry> entry);

  uint64_t bytes() const;

 private:
  struct Key {
    size_t array;
    uint64_t linear;
    bool operator==(const Key&) const = default;
  };
  struct KeyHash {
    size_t operator()(const Key& k) const {
      return std::hash<uint64_t>()(k.linear * 0x9E3779B97F4A7C15ULL + k.array);
    }
  };
  using Lru = std::list<std::pair<Key, std::shared_ptr<Entry>>>;

  // Keeps `entry` for reuse when nobody else holds it. Caller holds mutex_.
  void Recycle(std::shared_ptr<Entry> entry);

  mutable std::mutex mutex_;
  const uint64_t capacity_bytes_;
  uint64_t bytes_ = 0;
  Lru lru_;  // most recent first
  std::unordered_map<Key, Lru::iterator, KeyHash> by_key_;
  std::vector<std::shared_ptr<Entry>> free_;
  uint64_t free_bytes_ = 0;
};

}  // namespace zarrstream

// The loader's chunk cache: decoded read chunks kept for reuse by later batches (overlapping
// windows, block shuffle, a target step that is a later sample's input), bounded in bytes, least
// recently used out. It also recycles buffers: an entry's buffer, once the cache has evicted it and
// the last batch using it has let go, is kept (up to `idle_capacity_bytes`) for the next chunk of
// the same decoded size, so a steady state of misses allocates nothing and touches no
// fresh pages (allocating and freeing chunk-sized buffers made the kernel zero about as many
// pages as the loader decoded).
//
// Entries are shared: a batch being assembled holds the entries it uses, so an entry evicted
// meanwhile stays alive until the batch lets go (memory can exceed the bound by what batches in
// flight hold: at most a wave of chunks each, see loader.cc). Two batches in flight that miss the
// same chunk both decode it; the second insert replaces the first.
//
// Thread-safe. Entries may outlive the cache.
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

  ChunkCache(uint64_t capacity_bytes, uint64_t idle_capacity_bytes);

  // The entry for chunk `linear` of array `array`, or null; a hit becomes the most recent.
  std::shared_ptr<const Entry> Find(size_t array, uint64_t linear);
  // An entry of `size` bytes to decode into, reusing an idle buffer of that size when there is
  // one. Dropping the last reference recycles it (a failed decode just drops it).
  std::shared_ptr<Entry> Allocate(uint64_t size);
  // Makes `entry` (decoded) findable, evicting the least recently used entries beyond capacity.
  // An entry larger than the whole capacity is not kept.
  void Insert(size_t array, uint64_t linear, std::shared_ptr<Entry> entry);

  uint64_t bytes() const;       // held by cached entries
  uint64_t idle_bytes() const;  // held by recycled buffers waiting for reuse

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
  // Buffers of released entries, by size; shared with the entries' deleters.
  struct IdleBuffers;

  mutable std::mutex mutex_;
  const uint64_t capacity_bytes_;
  uint64_t bytes_ = 0;
  Lru lru_;  // most recent first
  std::unordered_map<Key, Lru::iterator, KeyHash> by_key_;
  std::shared_ptr<IdleBuffers> idle_;
};

}  // namespace zarrstream

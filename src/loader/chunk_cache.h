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
// flight hold: at most a wave of chunks each, see loader.cc).
//
// Chunks being decoded are shared too: the first batch to miss a chunk claims it (FindOrClaim) and
// decodes it; a batch in flight beside it that needs the same chunk waits for that decode
// (WaitFor) instead of decoding it again, which with a block shuffle and several batches in flight
// would otherwise decode most chunks once per batch in flight. A claimant resolves each claim
// (Insert, or Abandon when the decode failed) before it waits for anyone else's, so waits never
// form a cycle.
//
// Thread-safe. Entries may outlive the cache.
#pragma once

#include <condition_variable>
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

  // A chunk being decoded for some batch (see the overview).
  class Decode;

  // What FindOrClaim found.
  struct Lookup {
    std::shared_ptr<const Entry> entry;  // cached (a hit becomes the most recent)
    // Otherwise: being decoded by another batch (wait with WaitFor), or, when `claimed`, by the
    // caller, who must Insert or Abandon it.
    std::shared_ptr<Decode> decode;
    bool claimed = false;
  };

  // The entry for chunk `linear` of array `array`, or null; a hit becomes the most recent.
  std::shared_ptr<const Entry> Find(size_t array, uint64_t linear);
  // Find, and on a miss either the decode in flight or a new claim on the chunk.
  Lookup FindOrClaim(size_t array, uint64_t linear);
  // Gives up the caller's claim on a chunk whose decode failed: its waiters get null.
  void Abandon(size_t array, uint64_t linear);
  // Blocks until `decode` is inserted (its entry) or abandoned (null).
  static std::shared_ptr<const Entry> WaitFor(const std::shared_ptr<Decode>& decode);
  // An entry of `size` bytes to decode into, reusing an idle buffer of that size when there is
  // one. Dropping the last reference recycles it (a failed decode just drops it).
  std::shared_ptr<Entry> Allocate(uint64_t size);
  // Makes `entry` (decoded) findable, evicting the least recently used entries beyond capacity,
  // and hands it to the batches waiting for the chunk. An entry larger than the whole capacity is
  // not kept.
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
  // Find without locking; a hit becomes the most recent. Caller holds mutex_.
  std::shared_ptr<const Entry> FindLocked(const Key& key);
  // Insert's LRU part. Caller holds mutex_.
  void InsertLocked(const Key& key, const std::shared_ptr<Entry>& entry);
  // Buffers of released entries, by size; shared with the entries' deleters.
  struct IdleBuffers;

  mutable std::mutex mutex_;
  const uint64_t capacity_bytes_;
  uint64_t bytes_ = 0;
  Lru lru_;  // most recent first
  std::unordered_map<Key, Lru::iterator, KeyHash> by_key_;
  std::unordered_map<Key, std::shared_ptr<Decode>, KeyHash> decoding_;
  std::shared_ptr<IdleBuffers> idle_;
};

}  // namespace zarrstream

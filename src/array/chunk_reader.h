// Reading whole read chunks (inner chunks of a sharded array), many at once, from any number of
// arrays: the read and decode stages of the loader (docs/architecture.md, "The life of a chunk"),
// and the engine under Array::Read. This is the one place that fetches stored objects, shard
// indexes and inner-chunk ranges and decodes them.
//
// A caller (the loader's read planner) has already decided which chunks it needs and deduplicated
// them; ReadChunks fetches their bytes and decodes each into a buffer the caller owns (a chunk
// cache entry). What it does for one call:
//   - groups the requested chunks by stored object: an unsharded chunk is one object; the inner
//     chunks of one shard share the shard's object;
//   - sharded arrays: the shard index comes from `index_cache` when it holds it, else is read once
//     per shard (every inner chunk of the call wanting that shard waits for the one read) and put
//     there; then the byte ranges of the wanted inner chunks are coalesced (store/range_coalescing)
//     into few reads of the shard;
//   - local stores (Read completes in the calling thread): each object is read and decoded by one
//     pool task, so encoded bytes never pile up; the inner chunks of a shard then decode as tasks
//     of their own, ahead of any object not yet started;
//   - remote stores: every object's request goes out before any decode waits on one (within a
//     window of kRemoteWindowObjects objects issued and not yet decoded, so memory stays
//     bounded: shard index reads of a batch of objects first, then their inner-range reads), and
//     decodes run on the pool as the bytes arrive;
//   - a chunk not stored (or an empty inner chunk) decodes to the fill value, or is a kNotFound
//     error when the array was opened with missing_chunks_are_errors.
// Errors are per chunk (the loader's `skip` policy drops only the samples that need a failed
// chunk) and carry the same context as Array::Read: the chunk key, the inner chunk index and the
// array's Describe().
//
// Threads: ReadChunks blocks until every chunk is done; it runs decodes on `pool` with at most
// `max_parallelism` running at once (0: the pool's size), and the calling thread does not decode
// (so a loader's coordinating threads never add to its thread budget; it only plans, issues remote
// requests and decodes the few bytes of a remote shard's index). A caller that is itself a worker
// of `pool` does work through the call's tasks while it waits (TaskGroup), so that it never waits
// for the worker it occupies. Several ReadChunks calls may run at once on one pool and one index
// cache; their tasks never wait for other tasks.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "array/array_state.h"
#include "codec/sharding_codec.h"
#include "util/thread_pool.h"
#include "zarrstream/status.h"

namespace zarrstream {

// Decoded bytes of one read chunk of `array`: the read chunk shape's elements, C order, native
// byte order (edge chunks are full size; past the array's edge they hold what was stored).
uint64_t ReadChunkBytes(const internal::ArrayState& array);

// Where read chunk `coords` of `array` is stored: the linear index (C order) of its stored object
// in the array's grid of stored objects (its shards, or its chunks when unsharded), and its index
// within that shard (C order; 0 when unsharded). ReadChunks reads a call's chunks object by object.
struct StoredPlace {
  uint64_t object = 0;
  uint64_t inner = 0;
};
StoredPlace StoredPlaceOf(const internal::ArrayState& array, std::span<const uint64_t> coords);

// One chunk to read.
struct ChunkRead {
  const internal::ArrayState* array = nullptr;  // outlives the call
  // Index in the read-chunk grid (the inner-chunk grid of a sharded array, over the whole array).
  std::vector<uint64_t> coords;
  // ReadChunkBytes(*array) bytes the chunk is decoded into.
  std::span<std::byte> out;
  // Set: the chunk is not decoded; this takes its stored bytes instead (those of the inner chunk
  // of a sharded array, valid only during the call; called on a pool thread, concurrently with
  // other chunks' calls) and returns the chunk's status. `out` may then be empty, and a chunk not
  // stored only sets `missing`. The GPU path decodes these bytes itself.
  std::function<Status(std::span<const std::byte> stored)> take_encoded;
  // Optional, with take_encoded: memory the stored bytes may be read into instead of a buffer of
  // the reader's, so that they need no copy to reach where the caller wants them (the GPU path's
  // pinned staging). Called with the bytes needed, on any thread, concurrently; returns memory
  // that stays valid until the caller's take_encoded calls are done, or an empty span where it
  // has none (the reader's own buffer then holds them, as without it). Asked for the reads of a
  // shard whose wanted inner chunks all have it (their sizes are known from the index before the
  // read; an unsharded chunk's are not), once per coalesced read, of the read's length: which may
  // include bytes between the wanted inner chunks.
  std::function<std::span<std::byte>(uint64_t bytes)> encoded_memory;
  // Set by ReadChunks: Ok, or the chunk's error with its context.
  Status status;
  // Set by ReadChunks: true when the chunk was not stored and `out` holds the fill value.
  bool missing = false;
};

// What ReadChunks did, added to by each call (atomics: calls may run at once).
struct ChunkReadCounters {
  std::atomic<uint64_t> chunks{0};          // chunks decoded (missing ones filled included)
  std::atomic<uint64_t> missing_chunks{0};  // chunks that were not stored and were filled
  std::atomic<uint64_t> requests{0};        // store reads issued (one Read call each)
  std::atomic<uint64_t> bytes_read{0};      // encoded bytes read from the store
  std::atomic<uint64_t> index_reads{0};     // shard index reads (index cache misses)
  std::atomic<uint64_t> index_hits{0};      // shard indexes found in the cache
};

// Decoded shard indexes, keyed by array and shard key, bounded in bytes (least recently used out;
// an entry costs about its index's bytes). The key includes the array's URL as well as its address,
// so an array freed and another opened at the same address never sees the first one's indexes.
// Thread-safe.
class ShardIndexCache {
 public:
  explicit ShardIndexCache(uint64_t capacity_bytes = uint64_t{64} << 20);
  ~ShardIndexCache();

  std::shared_ptr<const ShardIndex> Find(const internal::ArrayState* array,
                                         const std::string& shard_key);
  void Insert(const internal::ArrayState* array, const std::string& shard_key,
              std::shared_ptr<const ShardIndex> index);

 private:
  struct Entry;
  std::mutex mutex_;
  uint64_t capacity_bytes_;
  uint64_t bytes_ = 0;
  std::list<Entry> lru_;  // most recently used first
  std::unordered_map<std::string, std::list<Entry>::iterator> by_key_;
};

// Reads and decodes every chunk of `reads` (see the overview), setting each one's status and
// `missing`. `index_cache` and `counters` may be null.
void ReadChunks(std::span<ChunkRead> reads, ThreadPool* pool, size_t max_parallelism = 0,
                ShardIndexCache* index_cache = nullptr, ChunkReadCounters* counters = nullptr);

// Where the chunks of a ReadChunks call go that the caller wants only part of (Array::Read of a
// region that cuts chunks, or an output that is not C-contiguous where a chunk lands). A ChunkRead
// with an empty `out` is decoded into a per-thread buffer and handed to `copy`; when it is not
// stored, `fill` is called instead. Both run on pool threads, concurrently for different chunks.
struct PartialChunkOutput {
  // Copies what it wants of chunk reads[i], `decoded` (ReadChunkBytes bytes, C order), which is
  // reused once it returns.
  std::function<void(size_t i, std::span<const std::byte> decoded)> copy;
  // Writes the fill value where chunk reads[i] goes.
  std::function<void(size_t i)> fill;
};

// ReadChunks where some chunks have an empty `out` and go to `partial`.
void ReadChunks(std::span<ChunkRead> reads, const PartialChunkOutput& partial, ThreadPool* pool,
                size_t max_parallelism = 0, ShardIndexCache* index_cache = nullptr,
                ChunkReadCounters* counters = nullptr);

// The indexes of shards `shard_keys` of sharded `array` (store keys, as ChunkKey gives them), read
// on `pool` (several at once; each from `index_cache` where it holds it, else read and put there):
// what a caller needs to know which inner chunks are stored without reading them (detecting
// missing dates). A shard that is not stored has a null index; a read or decode error is that
// shard's, with the shard key and the array's Describe() in its context.
std::vector<Result<std::shared_ptr<const ShardIndex>>> ReadShardIndexes(
    const internal::ArrayState& array, std::span<const std::string> shard_keys, ThreadPool* pool,
    ShardIndexCache* index_cache = nullptr, ChunkReadCounters* counters = nullptr);

// Objects a ReadChunks call keeps issued to remote stores and not yet decoded, and how many it
// issues at once (shard index reads of a batch go out together, then the batch's inner reads).
inline constexpr size_t kRemoteWindowObjects = 256;
inline constexpr size_t kRemoteBatchObjects = 64;

}  // namespace zarrstream

#include "array/chunk_reader.h"

#include <algorithm>
#include <map>
#include <mutex>

#include "store/range_coalescing.h"
#include "util/format.h"
#include "util/strided_copy.h"

namespace zarrstream {

namespace {

// Inner-chunk reads of one shard closer than this are merged into one read (as Array::Read does).
constexpr CoalescingOptions kShardCoalescing{uint64_t{256} * 1024, uint64_t{64} * 1024 * 1024};

struct ThreadBuffers {
  CodecScratch codec;
  ByteBuffer encoded;
};

ThreadBuffers& Buffers() {
  thread_local ThreadBuffers buffers;
  return buffers;
}

void Count(std::atomic<uint64_t> ChunkReadCounters::*field, ChunkReadCounters* counters,
           uint64_t n = 1) {
  if (counters != nullptr) (counters->*field) += n;
}

// Fills `read.out` with the fill value, or fails when missing chunks are errors.
Status Missing(ChunkRead& read, ChunkReadCounters* counters) {
  const internal::ArrayState& a = *read.array;
  if (a.options.missing_chunks_are_errors) {
    return NotFoundError("chunk is not stored (missing chunks are errors for this array)");
  }
  const std::vector<int64_t> strides =
      CStrides(a.read_chunk_shape, DataTypeSize(a.metadata.data_type));
  FillStrided(read.out.data(), strides, a.read_chunk_shape, a.metadata.fill_value);
  read.missing = true;
  Count(&ChunkReadCounters::missing_chunks, counters);
  return Status::Ok();
}

// One stored object's reads: an unsharded chunk, or the wanted inner chunks of one shard.
struct ObjectTask {
  const internal::ArrayState* array = nullptr;
  std::vector<uint64_t> object_coords;
  std::vector<size_t> reads;  // indices into the call's ChunkRead span
};

void ReadUnsharded(ObjectTask& task, std::span<ChunkRead> reads, ChunkReadCounters* counters) {
  ChunkRead& read = reads[task.reads.front()];
  const internal::ArrayState& a = *task.array;
  const std::string key = a.ChunkKey(task.object_coords);
  ThreadBuffers& buffers = Buffers();
  Status s = a.store->ReadInto(key, ByteRange::Full(), &buffers.encoded);
  Count(&ChunkReadCounters::requests, counters);
  if (s.code() == ErrorCode::kNotFound) {
    s = Missing(read, counters);
  } else if (s.ok()) {
    Count(&ChunkReadCounters::bytes_read, counters, buffers.encoded.size());
    s = a.chain->Decode(buffers.encoded.span(), read.out, &buffers.codec);
  }
  Count(&ChunkReadCounters::chunks, counters);
  read.status = std::move(s).WithContext("reading chunk '" + key + "' of " + a.Describe());
}

void ReadSharded(ObjectTask& task, std::span<ChunkRead> reads, ShardIndexCache* index_cache,
                 ChunkReadCounters* counters) {
  const internal::ArrayState& a = *task.array;
  const ShardingCodec& sharding = *a.chain->sharding();
  const std::string key = a.ChunkKey(task.object_coords);
  const std::string context = "reading chunk '" + key + "' of " + a.Describe();
  auto fail_all = [&](const Status& s) {
    for (size_t r : task.reads) {
      reads[r].status = Status(s).WithContext(context);
      Count(&ChunkReadCounters::chunks, counters);
    }
  };
  ThreadBuffers& buffers = Buffers();
  std::shared_ptr<const ShardIndex> index =
      index_cache != nullptr ? index_cache->Find(&a, key) : nullptr;
  if (index != nullptr) {
    Count(&ChunkReadCounters::index_hits, counters);
  } else {
    Status s = a.store->ReadInto(key, sharding.index_range(), &buffers.encoded);
    Count(&ChunkReadCounters::requests, counters);
    Count(&ChunkReadCounters::index_reads, counters);
    if (s.code() == ErrorCode::kNotFound) {
      for (size_t r : task.reads) {
        reads[r].status = Missing(reads[r], counters).WithContext(context);
        Count(&ChunkReadCounters::chunks, counters);
      }
      return;
    }
    if (!s.ok()) return fail_all(s);
    Count(&ChunkReadCounters::bytes_read, counters, buffers.encoded.size());
    auto decoded = sharding.DecodeIndex(buffers.encoded.span(), std::nullopt, &buffers.codec);
    if (!decoded.ok()) return fail_all(decoded.status());
    index = std::make_shared<const ShardIndex>(std::move(*decoded));
    if (index_cache != nullptr) index_cache->Insert(&a, key, index);
  }

  const std::vector<uint64_t>& per_shard = sharding.chunks_per_shard();
  std::vector<uint64_t> linear(task.reads.size());
  std::vector<ByteRange> wanted;
  std::vector<size_t> stored;
  for (size_t i = 0; i < task.reads.size(); ++i) {
    const ChunkRead& read = reads[task.reads[i]];
    for (size_t d = 0; d < per_shard.size(); ++d) {
      linear[i] = linear[i] * per_shard[d] + read.coords[d] % per_shard[d];
    }
    if (index->is_empty(linear[i])) continue;
    stored.push_back(i);
    wanted.push_back(ByteRange::Bounded(index->offset(linear[i]), index->nbytes(linear[i])));
  }
  CoalescedRanges merged = CoalesceRanges(wanted, kShardCoalescing);
  std::vector<ByteBuffer> bytes(merged.reads.size());
  if (!merged.reads.empty()) {
    auto got = a.store->Read(key, merged.reads, bytes).Wait();
    Count(&ChunkReadCounters::requests, counters);
    if (!got.ok()) {
      return fail_all(
          Status(got.status()).WithContext("reading the inner chunks its index points to"));
    }
    Count(&ChunkReadCounters::bytes_read, counters, *got);
  }
  std::vector<const RangeSlice*> slice_of(task.reads.size(), nullptr);
  for (size_t j = 0; j < stored.size(); ++j) slice_of[stored[j]] = &merged.slices[j];
  for (size_t i = 0; i < task.reads.size(); ++i) {
    ChunkRead& read = reads[task.reads[i]];
    std::vector<uint64_t> inner(per_shard.size());
    for (size_t d = 0; d < per_shard.size(); ++d) inner[d] = read.coords[d] % per_shard[d];
    Status s;
    if (slice_of[i] == nullptr) {
      s = Missing(read, counters);
      if (s.code() == ErrorCode::kNotFound) s = NotFoundError("inner chunk is empty");
    } else {
      const RangeSlice& slice = *slice_of[i];
      s = sharding.inner_chain().Decode(
          bytes[slice.read].span().subspan(slice.offset, slice.length), read.out, &buffers.codec);
    }
    Count(&ChunkReadCounters::chunks, counters);
    read.status =
        std::move(s).WithContext("inner chunk " + FormatIndex(inner)).WithContext(context);
  }
}

}  // namespace

uint64_t ReadChunkBytes(const internal::ArrayState& array) {
  uint64_t n = DataTypeSize(array.metadata.data_type);
  for (uint64_t c : array.read_chunk_shape) n *= c;
  return n;
}

struct ShardIndexCache::Entry {
  const internal::ArrayState* array;
  std::string key;
  std::shared_ptr<const ShardIndex> index;
  uint64_t bytes;
};

ShardIndexCache::ShardIndexCache(uint64_t capacity_bytes) : capacity_bytes_(capacity_bytes) {}
ShardIndexCache::~ShardIndexCache() = default;

namespace {
std::string CacheKey(const internal::ArrayState* array, const std::string& shard_key) {
  std::string key = std::to_string(reinterpret_cast<uintptr_t>(array));
  key += '/';
  key += shard_key;
  return key;
}
}  // namespace

std::shared_ptr<const ShardIndex> ShardIndexCache::Find(const internal::ArrayState* array,
                                                        const std::string& shard_key) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = by_key_.find(CacheKey(array, shard_key));
  if (it == by_key_.end()) return nullptr;
  lru_.splice(lru_.begin(), lru_, it->second);
  return it->second->index;
}

void ShardIndexCache::Insert(const internal::ArrayState* array, const std::string& shard_key,
                             std::shared_ptr<const ShardIndex> index) {
  std::lock_guard<std::mutex> lock(mutex_);
  const std::string key = CacheKey(array, shard_key);
  if (by_key_.count(key) > 0) return;
  const uint64_t bytes = index->num_chunks() * 16 + key.size() + 64;
  while (!lru_.empty() && bytes_ + bytes > capacity_bytes_) {
    bytes_ -= lru_.back().bytes;
    by_key_.erase(CacheKey(lru_.back().array, lru_.back().key));
    lru_.pop_back();
  }
  lru_.push_front(Entry{array, shard_key, std::move(index), bytes});
  by_key_.emplace(key, lru_.begin());
  bytes_ += bytes;
}

void ReadChunks(std::span<ChunkRead> reads, ThreadPool* pool, size_t max_parallelism,
                ShardIndexCache* index_cache, ChunkReadCounters* counters) {
  // Group the reads by stored object (the inner chunks of one shard together).
  std::map<std::pair<const internal::ArrayState*, std::vector<uint64_t>>, size_t> by_object;
  std::vector<ObjectTask> tasks;
  for (size_t i = 0; i < reads.size(); ++i) {
    const internal::ArrayState* a = reads[i].array;
    std::vector<uint64_t> object = reads[i].coords;
    if (const ShardingCodec* sharding = a->chain->sharding()) {
      for (size_t d = 0; d < object.size(); ++d) object[d] /= sharding->chunks_per_shard()[d];
    }
    auto [it, inserted] = by_object.try_emplace({a, object}, tasks.size());
    if (inserted) tasks.push_back(ObjectTask{a, std::move(object), {}});
    tasks[it->second].reads.push_back(i);
  }
  (void)ParallelFor(
      pool, tasks.size(),
      [&](size_t t) -> Status {
        ObjectTask& task = tasks[t];
        if (task.array->chain->sharding()) {
          ReadSharded(task, reads, index_cache, counters);
        } else {
          ReadUnsharded(task, reads, counters);
        }
        return Status::Ok();
      },
      max_parallelism);
}

}  // namespace zarrstream

// How a ReadChunks call runs (the contract is in the header):
//
// Plan (calling thread): check each read, sort the reads by (array, stored object) so that each
// object's reads are neighbours ("members" of the object), and give every object and member a task
// index in one TaskGroup: object o is task o (local objects: read and decode), member p is task
// num_objects + p (the decode of one chunk whose object's bytes are in memory).
//
// Local objects are scheduled at once. A task reads its object into the worker's scratch buffer and
// decodes the chunk in place (unsharded), or reads the shard index and the coalesced inner ranges
// and then either decodes its one member itself or schedules every member ahead of all other work
// (ScheduleFirst), so a shard's bytes are freed before the next object is read.
//
// Remote objects are issued by the calling thread in batches: a batch's shard index reads go out
// together, their indexes are decoded as they arrive, then the inner-range reads (and the
// unsharded chunks' reads, issued with the index reads) schedule their members from the I/O
// thread that completes them. At most kRemoteWindowObjects objects are issued and not yet decoded.
//
// An object is done when all its members are; its bytes are released then. The call returns when
// every object is done.
#include "array/chunk_reader.h"

#include <algorithm>
#include <functional>

#include "store/http_store.h"
#include "store/range_coalescing.h"
#include "util/checked_size.h"
#include "util/format.h"
#include "util/strided_copy.h"

namespace zarrstream {

namespace {

// Inner-chunk reads of one shard closer than this are merged into one read: a local read of a few
// hundred KiB extra costs less than another request. Remote stores merge further by their own
// latency (HttpStoreOptions::coalescing).
constexpr CoalescingOptions kShardCoalescing{uint64_t{256} * 1024, uint64_t{64} * 1024 * 1024};

// Reusable per-thread buffers: workers keep them across chunks and calls, so the steady state of a
// local read allocates nothing per chunk.
struct ReadScratch {
  CodecScratch codec;
  ByteBuffer encoded;  // a local object's bytes (or a shard index, or one member's inner range)
  ByteBuffer decoded;  // a chunk decoded for a PartialChunkOutput
  std::vector<uint64_t> coords;
};

ReadScratch& ThreadScratch() {
  thread_local ReadScratch scratch;
  return scratch;
}

// The read-chunk grid of `array` (inner chunks over the whole array when sharded).
uint64_t ReadGridExtent(const internal::ArrayState& array, size_t d) {
  return CeilDiv(array.metadata.shape[d], array.read_chunk_shape[d]);
}

std::string ChunkContext(const std::string& key, const internal::ArrayState& array) {
  std::string context = "reading chunk '";
  context.append(key).append("' of ").append(array.Describe());
  return context;
}

Status CheckRead(const ChunkRead& read, bool partial_allowed) {
  if (read.array == nullptr) return InvalidArgumentError("ReadChunks: a chunk read has no array");
  const internal::ArrayState& array = *read.array;
  const size_t rank = array.read_chunk_shape.size();
  bool inside = read.coords.size() == rank;
  for (size_t d = 0; inside && d < rank; ++d) inside = read.coords[d] < ReadGridExtent(array, d);
  if (!inside) {
    std::vector<uint64_t> grid(rank);
    for (size_t d = 0; d < rank; ++d) grid[d] = ReadGridExtent(array, d);
    std::string message = "chunk ";
    message.append(FormatIndex(read.coords))
        .append(" is outside the read-chunk grid ")
        .append(FormatIndex(grid))
        .append(" of ")
        .append(array.Describe());
    return InvalidArgumentError(std::move(message));
  }
  const uint64_t bytes = ReadChunkBytes(array);
  if (read.out.size() != bytes && !(read.out.empty() && (partial_allowed || read.take_encoded))) {
    std::string message = "chunk ";
    message.append(FormatIndex(read.coords))
        .append(" of ")
        .append(array.Describe())
        .append(" needs an output of ")
        .append(std::to_string(bytes))
        .append(" bytes, not ")
        .append(std::to_string(read.out.size()));
    return InvalidArgumentError(std::move(message));
  }
  return Status::Ok();
}

// One stored object (an unsharded chunk or a shard) and the reads of the call that want it.
struct StoredObject {
  const internal::ArrayState* array = nullptr;
  const ShardingCodec* sharding = nullptr;  // null: an unsharded chunk, decoded whole
  bool remote = false;
  size_t first_member = 0;
  size_t num_members = 0;
  std::string key;
  // Set by the fetch, before any member decodes (the TaskGroup's lock orders the two):
  Status status;         // a fetch error other than "not stored"
  bool missing = false;  // the object is not stored
  std::shared_ptr<const ShardIndex> index;
  std::vector<ByteRange> ranges;  // what is read (must outlive a remote request)
  std::vector<ByteBuffer> bytes;  // what was read, ranges[i] into bytes[i]
  Future<uint64_t> index_read;    // remote: the shard index read in flight
  std::atomic<size_t> members_left{0};
};

// One read of the call, as a member of its object.
struct Member {
  size_t read = 0;
  size_t object = 0;
  uint64_t inner = 0;  // sharded: the inner chunk's index in its shard (C order)
  RangeSlice slice;    // sharded: where its bytes lie among the object's reads
};

class ChunkReadCall {
 public:
  ChunkReadCall(std::span<ChunkRead> reads, const PartialChunkOutput* partial,
                ShardIndexCache* index_cache, ChunkReadCounters* counters)
      : reads_(reads),
        partial_(partial),
        index_cache_(index_cache),
        counters_(counters != nullptr ? *counters : own_counters_) {}

  void Run(ThreadPool* pool, size_t max_parallelism) {
    Plan();
    if (objects_.empty()) return;
    TaskGroup group(
        pool, objects_.size() + members_.size(), [this](size_t task) { RunTask(task); },
        max_parallelism);
    group_ = &group;
    std::vector<size_t> local, remote;
    for (size_t o = 0; o < objects_.size(); ++o) {
      (objects_[o].remote ? remote : local).push_back(o);
    }
    group.Schedule(local);
    HintLocalReads(local);
    IssueRemote(remote);
    group.WaitUntil([this] { return objects_done_.load() == objects_.size(); });
  }

 private:
  // Checks the reads and groups the valid ones by stored object.
  void Plan() {
    struct Key {
      const internal::ArrayState* array;
      uint64_t object;  // linear index in the array's grid of stored objects
      uint64_t inner;
      size_t read;
    };
    std::vector<Key> keys;
    keys.reserve(reads_.size());
    for (size_t i = 0; i < reads_.size(); ++i) {
      ChunkRead& read = reads_[i];
      read.missing = false;
      read.status = CheckRead(read, partial_ != nullptr);
      if (!read.status.ok()) continue;
      const StoredPlace place = StoredPlaceOf(*read.array, read.coords);
      keys.push_back(Key{read.array, place.object, place.inner, i});
    }
    std::sort(keys.begin(), keys.end(), [](const Key& a, const Key& b) {
      if (a.array != b.array) return std::less<>()(a.array, b.array);
      if (a.object != b.object) return a.object < b.object;
      return a.read < b.read;
    });
    size_t num_objects = 0;
    for (size_t k = 0; k < keys.size(); ++k) {
      if (k == 0 || keys[k].array != keys[k - 1].array || keys[k].object != keys[k - 1].object) {
        ++num_objects;
      }
    }
    objects_ = std::vector<StoredObject>(num_objects);
    members_.resize(keys.size());
    size_t o = 0;
    for (size_t k = 0; k < keys.size(); ++k) {
      if (k > 0 && (keys[k].array != keys[k - 1].array || keys[k].object != keys[k - 1].object)) {
        ++o;
      }
      StoredObject& object = objects_[o];
      if (object.num_members == 0) {
        object.array = keys[k].array;
        object.sharding = object.array->chain->sharding();
        object.remote = IsRemoteStore(*object.array->store);
        object.first_member = k;
      }
      ++object.num_members;
      object.members_left.store(object.num_members);
      members_[k] = Member{keys[k].read, o, keys[k].inner, {}};
    }
  }

  void RunTask(size_t task) {
    if (task >= objects_.size()) {
      const size_t p = task - objects_.size();
      DecodeMember(p, objects_[members_[p].object].bytes);
      return;
    }
    StoredObject& object = objects_[task];
    object.key = ObjectKey(object);
    if (object.sharding != nullptr) {
      FetchLocalShard(object);
    } else {
      FetchLocalChunk(object);
    }
  }

  // While the worker threads read the local objects, tells their stores that every one will be
  // read (Store::WillRead): where reads come from the disk, the kernel reads them all at once
  // rather than a worker's read at a time (on a 2-core VM, a cold epoch of a GPU-friendly store
  // read 20 % faster). A sharded object is hinted whole only where every inner chunk is wanted.
  void HintLocalReads(std::span<const size_t> local) {
    const ByteRange full = ByteRange::Full();
    std::vector<const Store*> declined;
    for (size_t o : local) {
      const StoredObject& object = objects_[o];
      Store* store = object.array->store.get();
      if (std::find(declined.begin(), declined.end(), store) != declined.end()) continue;
      if (object.sharding != nullptr && object.num_members < object.sharding->num_inner_chunks()) {
        continue;
      }
      if (!store->WillRead(ObjectKey(object), std::span<const ByteRange>(&full, 1))) {
        declined.push_back(store);
      }
    }
  }

  // The store key of `object`, from its first member's coordinates.
  std::string ObjectKey(const StoredObject& object) const {
    const ChunkRead& read = reads_[members_[object.first_member].read];
    std::vector<uint64_t>& coords = ThreadScratch().coords;
    coords.assign(read.coords.begin(), read.coords.end());
    if (object.sharding != nullptr) {
      for (size_t d = 0; d < coords.size(); ++d)
        coords[d] /= object.sharding->chunks_per_shard()[d];
    }
    return object.array->ChunkKey(coords);
  }

  Result<uint64_t> ReadNow(const StoredObject& object, std::span<const ByteRange> ranges,
                           std::span<ByteBuffer> outs) {
    counters_.requests.fetch_add(1, std::memory_order_relaxed);
    Result<uint64_t> got = CatchOutOfMemory("reading the stored object", [&]() -> Result<uint64_t> {
      return object.array->store->Read(object.key, ranges, outs).Wait();
    });
    if (got.ok()) counters_.bytes_read.fetch_add(*got, std::memory_order_relaxed);
    return got;
  }

  // Local unsharded chunk: read into this worker's buffer, decode every member from there.
  void FetchLocalChunk(StoredObject& object) {
    ReadScratch& scratch = ThreadScratch();
    const ByteRange full = ByteRange::Full();
    Result<uint64_t> got = ReadNow(object, std::span<const ByteRange>(&full, 1),
                                   std::span<ByteBuffer>(&scratch.encoded, 1));
    SetChunkFetchStatus(object, got.status());
    const size_t first = object.first_member, end = first + object.num_members;
    for (size_t p = first; p < end; ++p) {
      DecodeMember(p, std::span<const ByteBuffer>(&scratch.encoded, 1));
    }
  }

  void SetChunkFetchStatus(StoredObject& object, const Status& status) {
    if (status.code() == ErrorCode::kNotFound) {
      object.missing = true;
    } else if (!status.ok()) {
      object.status = status;
    }
  }

  bool FindCachedIndex(StoredObject& object) {
    if (index_cache_ == nullptr) return false;
    std::shared_ptr<const ShardIndex> index = index_cache_->Find(object.array, object.key);
    // An index of another shape cannot be this array's (the cache's key rules that out; this is
    // cheap insurance against reading past an index).
    if (index == nullptr || index->num_chunks() != object.sharding->num_inner_chunks()) {
      return false;
    }
    counters_.index_hits.fetch_add(1, std::memory_order_relaxed);
    object.index = std::move(index);
    return true;
  }

  // Takes the result of a shard index read into `encoded`.
  void SetIndex(StoredObject& object, const Result<uint64_t>& got,
                std::span<const std::byte> encoded, CodecScratch* scratch) {
    if (!got.ok()) {
      SetChunkFetchStatus(object, got.status());
      return;
    }
    Result<ShardIndex> index = CatchOutOfMemory("decoding the shard index", [&] {
      return object.sharding->DecodeIndex(encoded, std::nullopt, scratch);
    });
    if (!index.ok()) {
      object.status = index.status();
      return;
    }
    object.index = std::make_shared<const ShardIndex>(std::move(*index));
    if (index_cache_ != nullptr) index_cache_->Insert(object.array, object.key, object.index);
  }

  // Sets object.ranges to the merged reads of the stored inner chunks its members want, and each
  // member's slice of them.
  void PlanInnerReads(StoredObject& object) {
    std::vector<ByteRange> wanted;
    std::vector<size_t> stored;
    const ShardIndex& index = *object.index;
    const size_t first = object.first_member, end = first + object.num_members;
    for (size_t p = first; p < end; ++p) {
      if (index.is_empty(members_[p].inner)) continue;
      stored.push_back(p);
      wanted.push_back(
          ByteRange::Bounded(index.offset(members_[p].inner), index.nbytes(members_[p].inner)));
    }
    CoalescedRanges merged = CoalesceRanges(wanted, kShardCoalescing);
    for (size_t j = 0; j < stored.size(); ++j) members_[stored[j]].slice = merged.slices[j];
    object.ranges = std::move(merged.reads);
  }

  // Where every member of sharded `object` gives memory for its stored bytes
  // (ChunkRead::encoded_memory): sets object.bytes to buffers over the first member's memory,
  // one per read of object.ranges, and returns true. A read it has no memory for gets a buffer
  // the store fills as it would any (the index's lengths are the store's to check against what
  // is stored: nothing is allocated here from them).
  bool BorrowEncodedMemory(StoredObject& object) {
    const size_t first = object.first_member, end = first + object.num_members;
    for (size_t p = first; p < end; ++p) {
      const ChunkRead& read = reads_[members_[p].read];
      if (!read.take_encoded || !read.encoded_memory) return false;
    }
    const auto& memory = reads_[members_[first].read].encoded_memory;
    object.bytes.resize(object.ranges.size());
    for (size_t r = 0; r < object.ranges.size(); ++r) {
      const uint64_t length = object.ranges[r].length;
      std::span<std::byte> given = memory(length);
      if (given.size() >= length) object.bytes[r] = ByteBuffer::Borrow(given.first(length));
    }
    return true;
  }

  void SetInnerReadStatus(StoredObject& object, const Result<uint64_t>& got) {
    if (!got.ok()) {
      object.status = got.status().WithContext("reading the inner chunks its index points to");
    }
  }

  // Local shard: its index, then its wanted inner ranges; one member decodes here, several are
  // scheduled ahead of every other task.
  void FetchLocalShard(StoredObject& object) {
    ReadScratch& scratch = ThreadScratch();
    if (!FindCachedIndex(object)) {
      counters_.index_reads.fetch_add(1, std::memory_order_relaxed);
      const ByteRange range = object.sharding->index_range();
      Result<uint64_t> got = ReadNow(object, std::span<const ByteRange>(&range, 1),
                                     std::span<ByteBuffer>(&scratch.encoded, 1));
      SetIndex(object, got, scratch.encoded.span(), &scratch.codec);
    }
    bool alone = object.num_members == 1;
    if (object.status.ok() && !object.missing) {
      PlanInnerReads(object);
      if (!object.ranges.empty()) {
        // One member has one range: it needs no buffer of the object's own, unless the caller
        // gives the memory.
        const bool callers = BorrowEncodedMemory(object);
        alone = alone && !callers;
        if (!alone && !callers) object.bytes.resize(object.ranges.size());
        std::span<ByteBuffer> outs = alone ? std::span<ByteBuffer>(&scratch.encoded, 1)
                                           : std::span<ByteBuffer>(object.bytes);
        SetInnerReadStatus(object, ReadNow(object, object.ranges, outs));
      }
    }
    if (alone) {
      DecodeMember(object.first_member, std::span<const ByteBuffer>(&scratch.encoded, 1));
      return;
    }
    // In reverse, so that they run in order.
    TaskGroup* group = group_;
    const size_t first = objects_.size() + object.first_member;
    for (size_t task = first + object.num_members; task-- > first;) group->ScheduleFirst(task);
  }

  // Remote objects, issued from the calling thread (see the overview).
  void IssueRemote(std::span<const size_t> remote) {
    ReadScratch& scratch = ThreadScratch();
    for (size_t begin = 0; begin < remote.size(); begin += kRemoteBatchObjects) {
      const size_t end = std::min(remote.size(), begin + kRemoteBatchObjects);
      if (end > kRemoteWindowObjects) {
        group_->WaitUntil(
            [this, end] { return remote_done_.load() + kRemoteWindowObjects >= end; });
      }
      for (size_t r = begin; r < end; ++r) {
        StoredObject& object = objects_[remote[r]];
        object.key = ObjectKey(object);
        if (object.sharding == nullptr) {
          object.ranges = {ByteRange::Full()};
          IssueObjectRead(object);
        } else if (!FindCachedIndex(object)) {
          counters_.index_reads.fetch_add(1, std::memory_order_relaxed);
          counters_.requests.fetch_add(1, std::memory_order_relaxed);
          object.ranges = {object.sharding->index_range()};
          object.bytes.resize(1);
          object.index_read = object.array->store->Read(object.key, object.ranges, object.bytes);
        }
      }
      for (size_t r = begin; r < end; ++r) {
        StoredObject& object = objects_[remote[r]];
        if (object.sharding == nullptr) continue;
        if (object.index_read.valid()) {
          Result<uint64_t> got = object.index_read.Wait();
          object.index_read = Future<uint64_t>();
          if (got.ok()) counters_.bytes_read.fetch_add(*got, std::memory_order_relaxed);
          // Decoding an index is a checksum over a few KiB: not worth a pool task.
          SetIndex(object, got, object.bytes[0].span(), &scratch.codec);
          object.bytes.clear();
        }
        if (object.status.ok() && !object.missing) {
          PlanInnerReads(object);
          if (!object.ranges.empty()) {
            IssueObjectRead(object);
            continue;
          }
        }
        ScheduleMembers(object);
      }
    }
  }

  // Sends a remote object's read of object.ranges; its completion schedules the members.
  void IssueObjectRead(StoredObject& object) {
    if (object.sharding == nullptr || !BorrowEncodedMemory(object)) {
      object.bytes.resize(object.ranges.size());
    }
    counters_.requests.fetch_add(1, std::memory_order_relaxed);
    object.array->store->Read(object.key, object.ranges, object.bytes)
        .OnReady([this, &object](Result<uint64_t>& got) {
          if (got.ok()) counters_.bytes_read.fetch_add(*got, std::memory_order_relaxed);
          if (object.sharding != nullptr) {
            SetInnerReadStatus(object, got);
          } else {
            SetChunkFetchStatus(object, got.status());
          }
          ScheduleMembers(object);
        });
  }

  // May run on an I/O thread: once the last member is scheduled the call may return, so nothing
  // of it is touched after that.
  void ScheduleMembers(const StoredObject& object) {
    TaskGroup* group = group_;
    const size_t first = objects_.size() + object.first_member;
    const size_t end = first + object.num_members;
    for (size_t task = first; task < end; ++task) group->Schedule(task);
  }

  // Decodes (or fills) member p from `object_reads`, its object's bytes, and sets its status.
  void DecodeMember(size_t p, std::span<const ByteBuffer> object_reads) {
    const Member& member = members_[p];
    StoredObject& object = objects_[member.object];
    ChunkRead& read = reads_[member.read];
    Status s;
    if (!object.status.ok()) {
      s = object.status;
    } else if (object.missing ||
               (object.sharding != nullptr && object.index->is_empty(member.inner))) {
      s = FillMissing(object, member);
    } else {
      std::span<const std::byte> bytes;
      if (object.sharding == nullptr) {
        bytes = object_reads[0].span();
      } else if (member.slice.read != RangeSlice::kNoRead) {
        bytes = object_reads[member.slice.read].span().subspan(member.slice.offset,
                                                               member.slice.length);
      }
      s = Decode(object, member, bytes);
    }
    if (s.ok()) {
      counters_.chunks.fetch_add(1, std::memory_order_relaxed);
      read.status = Status::Ok();
    } else {
      if (object.sharding != nullptr) {
        std::vector<uint64_t> inner(read.coords.size());
        for (size_t d = 0; d < inner.size(); ++d) {
          inner[d] = read.coords[d] % object.sharding->chunks_per_shard()[d];
        }
        std::string context = "inner chunk ";
        context.append(FormatIndex(inner));
        s = std::move(s).WithContext(context);
      }
      read.status = std::move(s).WithContext(ChunkContext(object.key, *object.array));
    }
    if (object.members_left.fetch_sub(1) == 1) {
      // The last member: the object's bytes are no longer needed.
      object.bytes = std::vector<ByteBuffer>();
      object.index.reset();
      // The caller waits for every object, and for remote ones to leave room in the window.
      if (object.remote) remote_done_.fetch_add(1);
      const bool last = objects_done_.fetch_add(1) + 1 == objects_.size();
      if (last || object.remote) group_->Notify();
    }
  }

  Status FillMissing(const StoredObject& object, const Member& member) {
    const internal::ArrayState& array = *object.array;
    ChunkRead& read = reads_[member.read];
    if (array.options.missing_chunks_are_errors) {
      std::string message = object.missing ? (object.sharding ? "shard" : "chunk") : "inner chunk";
      message.append(object.missing ? " is not stored" : " is empty")
          .append(" (missing chunks are errors for this array)");
      return NotFoundError(std::move(message));
    }
    if (read.take_encoded) {
      // The caller fills it: only `missing` says so.
    } else if (read.out.empty()) {
      partial_->fill(member.read);
    } else {
      const std::span<const std::byte> fill = array.metadata.fill_value;
      const int64_t stride = static_cast<int64_t>(fill.size());
      const uint64_t elements = read.out.size() / fill.size();
      FillStrided(read.out.data(), std::span<const int64_t>(&stride, 1),
                  std::span<const uint64_t>(&elements, 1), fill);
    }
    read.missing = true;
    counters_.missing_chunks.fetch_add(1, std::memory_order_relaxed);
    return Status::Ok();
  }

  Status Decode(const StoredObject& object, const Member& member,
                std::span<const std::byte> bytes) {
    const CodecChain& chain =
        object.sharding != nullptr ? object.sharding->inner_chain() : *object.array->chain;
    ChunkRead& read = reads_[member.read];
    if (read.take_encoded) return read.take_encoded(bytes);
    ReadScratch& scratch = ThreadScratch();
    // A chunk decodes whole even when the caller wants a part of it: its declared size, not the
    // request, bounds the scratch, so a size no machine holds is refused here, before decoding.
    std::span<std::byte> out = read.out;
    if (out.empty()) {
      const std::vector<uint64_t>& shape = object.array->read_chunk_shape;
      ZS_RETURN_IF_ERROR(AllocateBytes(&scratch.decoded, ReadChunkBytes(*object.array),
                                       "decoding a chunk of shape " + FormatIndex(shape)));
      out = scratch.decoded.span();
    }
    ZS_RETURN_IF_ERROR(CatchOutOfMemory("decoding a chunk",
                                        [&] { return chain.Decode(bytes, out, &scratch.codec); }));
    if (read.out.empty()) partial_->copy(member.read, out);
    return Status::Ok();
  }

  std::span<ChunkRead> reads_;
  const PartialChunkOutput* partial_;
  ShardIndexCache* index_cache_;
  ChunkReadCounters own_counters_;
  ChunkReadCounters& counters_;
  std::vector<StoredObject> objects_;
  std::vector<Member> members_;
  TaskGroup* group_ = nullptr;
  std::atomic<size_t> objects_done_{0};
  std::atomic<size_t> remote_done_{0};
};

// The cache's key: the array's address and URL, and the shard's key.
std::string IndexCacheKey(const internal::ArrayState* array, const std::string& shard_key) {
  std::string key = std::to_string(reinterpret_cast<uintptr_t>(array));
  key.append(" ").append(array->url).push_back('\0');
  key.append(shard_key);
  return key;
}

}  // namespace

StoredPlace StoredPlaceOf(const internal::ArrayState& array, std::span<const uint64_t> coords) {
  const ShardingCodec* sharding = array.chain->sharding();
  StoredPlace place;
  for (size_t d = 0; d < coords.size(); ++d) {
    const uint64_t per_shard = sharding != nullptr ? sharding->chunks_per_shard()[d] : 1;
    place.object = place.object * array.metadata.grid_extent(d) + coords[d] / per_shard;
    place.inner = place.inner * per_shard + coords[d] % per_shard;
  }
  return place;
}

uint64_t ReadChunkBytes(const internal::ArrayState& array) {
  uint64_t n = DataTypeSize(array.metadata.data_type);
  for (uint64_t c : array.read_chunk_shape) n *= c;
  return n;
}

struct ShardIndexCache::Entry {
  std::string key;
  std::shared_ptr<const ShardIndex> index;
  uint64_t bytes;
};

ShardIndexCache::ShardIndexCache(uint64_t capacity_bytes) : capacity_bytes_(capacity_bytes) {}
ShardIndexCache::~ShardIndexCache() = default;

std::shared_ptr<const ShardIndex> ShardIndexCache::Find(const internal::ArrayState* array,
                                                        const std::string& shard_key) {
  const std::string key = IndexCacheKey(array, shard_key);
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = by_key_.find(key);
  if (it == by_key_.end()) return nullptr;
  lru_.splice(lru_.begin(), lru_, it->second);
  return it->second->index;
}

void ShardIndexCache::Insert(const internal::ArrayState* array, const std::string& shard_key,
                             std::shared_ptr<const ShardIndex> index) {
  std::string key = IndexCacheKey(array, shard_key);
  // The index's entries, and the key twice (list and map) with their nodes' overhead.
  const uint64_t bytes = index->num_chunks() * 16 + 2 * key.size() + 128;
  std::lock_guard<std::mutex> lock(mutex_);
  if (auto it = by_key_.find(key); it != by_key_.end()) {
    // Another call read the same index at the same time: keep one.
    lru_.splice(lru_.begin(), lru_, it->second);
    return;
  }
  if (bytes > capacity_bytes_) return;
  while (bytes_ + bytes > capacity_bytes_) {
    bytes_ -= lru_.back().bytes;
    by_key_.erase(lru_.back().key);
    lru_.pop_back();
  }
  lru_.push_front(Entry{key, std::move(index), bytes});
  by_key_.emplace(std::move(key), lru_.begin());
  bytes_ += bytes;
}

std::vector<Result<std::shared_ptr<const ShardIndex>>> ReadShardIndexes(
    const internal::ArrayState& array, std::span<const std::string> shard_keys, ThreadPool* pool,
    ShardIndexCache* index_cache, ChunkReadCounters* counters) {
  std::vector<Result<std::shared_ptr<const ShardIndex>>> indexes(
      shard_keys.size(), std::shared_ptr<const ShardIndex>());
  const ShardingCodec* sharding = array.chain != nullptr ? array.chain->sharding() : nullptr;
  if (sharding == nullptr) {
    for (auto& index : indexes) index = InvalidArgumentError(array.Describe() + " is not sharded");
    return indexes;
  }
  const ByteRange range = sharding->index_range();
  (void)ParallelFor(pool, shard_keys.size(), [&](size_t i) -> Status {
    const std::string& key = shard_keys[i];
    if (index_cache != nullptr) {
      std::shared_ptr<const ShardIndex> cached = index_cache->Find(&array, key);
      if (cached != nullptr && cached->num_chunks() == sharding->num_inner_chunks()) {
        if (counters != nullptr) counters->index_hits.fetch_add(1, std::memory_order_relaxed);
        indexes[i] = std::move(cached);
        return Status::Ok();
      }
    }
    ReadScratch& scratch = ThreadScratch();
    if (counters != nullptr) {
      counters->index_reads.fetch_add(1, std::memory_order_relaxed);
      counters->requests.fetch_add(1, std::memory_order_relaxed);
    }
    Result<uint64_t> got = CatchOutOfMemory("reading the shard index", [&]() -> Result<uint64_t> {
      return array.store
          ->Read(key, std::span<const ByteRange>(&range, 1),
                 std::span<ByteBuffer>(&scratch.encoded, 1))
          .Wait();
    });
    if (!got.ok() && got.status().code() == ErrorCode::kNotFound) return Status::Ok();
    Result<ShardIndex> index = [&]() -> Result<ShardIndex> {
      ZS_RETURN_IF_ERROR(got.status());
      if (counters != nullptr) counters->bytes_read.fetch_add(*got, std::memory_order_relaxed);
      return CatchOutOfMemory("decoding the shard index", [&] {
        return sharding->DecodeIndex(scratch.encoded.span(), std::nullopt, &scratch.codec);
      });
    }();
    if (!index.ok()) {
      indexes[i] = std::move(index).status().WithContext(ChunkContext(key, array));
      return Status::Ok();
    }
    auto shared = std::make_shared<const ShardIndex>(std::move(*index));
    if (index_cache != nullptr) index_cache->Insert(&array, key, shared);
    indexes[i] = std::move(shared);
    return Status::Ok();
  });
  return indexes;
}

void ReadChunks(std::span<ChunkRead> reads, ThreadPool* pool, size_t max_parallelism,
                ShardIndexCache* index_cache, ChunkReadCounters* counters) {
  ChunkReadCall(reads, nullptr, index_cache, counters).Run(pool, max_parallelism);
}

void ReadChunks(std::span<ChunkRead> reads, const PartialChunkOutput& partial, ThreadPool* pool,
                size_t max_parallelism, ShardIndexCache* index_cache, ChunkReadCounters* counters) {
  ChunkReadCall(reads, &partial, index_cache, counters).Run(pool, max_parallelism);
}

}  // namespace zarrstream

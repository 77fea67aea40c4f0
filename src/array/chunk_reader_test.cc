// ReadChunks' mechanics: grouping by stored object, shard index reads and the index cache,
// missing and empty chunks, per-chunk errors, concurrent calls on one pool, and the remote path
// (requests issued ahead of decodes, within the window). Fixtures are written by zarrstream's own
// writer into memory stores; what peers write is read through the same engine from Python
// (tests/test_read_matrix.py, tests/test_tensorstore_fixtures.py, tests/test_chunk_reader.py).
#include "array/chunk_reader.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <filesystem>
#include <functional>
#include <numeric>
#include <random>
#include <thread>

#include "store/file_store.h"
#include "store/http_store.h"
#include "util/status_test_util.h"
#include "util/strided_copy.h"
#include "zarrstream/array.h"

namespace zarrstream {
namespace {

uint64_t Product(const std::vector<uint64_t>& v) {
  uint64_t p = 1;
  for (uint64_t x : v) p *= x;
  return p;
}

// An int32 array in a memory store holding its linear index at each element, except where the
// fixture leaves the fill value (-1): read chunks that `empty_chunk` names (in a shard they are
// stored as empty inner chunks) and stored objects that `unwritten` names (never stored).
class Fixture {
 public:
  using Predicate = std::function<bool(const std::vector<uint64_t>&)>;

  Fixture(const std::string& name, std::vector<uint64_t> shape, std::vector<uint64_t> chunks,
          const std::optional<std::vector<uint64_t>>& shards = std::nullopt,
          const Predicate& empty_chunk = nullptr, const Predicate& unwritten = nullptr,
          const OpenOptions& options = {})
      : shape_(std::move(shape)), chunks_(std::move(chunks)) {
    ArraySpec spec;
    spec.shape = shape_;
    spec.dtype = DataType::kInt32;
    spec.chunks = chunks_;
    spec.shard_shape = shards;
    spec.compressor = "zstd:1";
    spec.fill_value_json = "-1";
    CreateOptions create;
    create.overwrite = true;  // memory stores live as long as the process: tests may repeat
    auto array = Array::Create("memory://chunk-reader-" + name, spec, create, options);
    EXPECT_TRUE(array.ok()) << array.status().ToString();
    array_ = std::make_unique<Array>(*array);
    values_.resize(Product(shape_));
    std::iota(values_.begin(), values_.end(), 0);
    for (uint64_t i = 0; i < values_.size(); ++i) {
      if (empty_chunk && empty_chunk(ChunkOf(i))) values_[i] = -1;
    }
    const std::vector<uint64_t> object_shape = shards.value_or(chunks_);
    const std::vector<int64_t> strides = CStrides(shape_, sizeof(int32_t));
    ForEachCell(GridOf(object_shape), [&](const std::vector<uint64_t>& object) {
      if (unwritten && unwritten(object)) return;
      std::vector<uint64_t> start(shape_.size()), extent(shape_.size());
      int64_t offset = 0;
      for (size_t d = 0; d < shape_.size(); ++d) {
        start[d] = object[d] * object_shape[d];
        extent[d] = std::min(object_shape[d], shape_[d] - start[d]);
        offset += static_cast<int64_t>(start[d]) * strides[d];
      }
      const auto* data = reinterpret_cast<const std::byte*>(values_.data()) + offset;
      ASSERT_TRUE(array_->Write(start, extent, data, strides).ok());
    });
    ForEachCell(GridOf(object_shape), [&](const std::vector<uint64_t>& object) {
      if (!unwritten || !unwritten(object)) return;
      ForEachCell(GridOf(chunks_), [&](const std::vector<uint64_t>& chunk) {
        bool inside = true;
        for (size_t d = 0; d < chunk.size(); ++d) {
          inside &= chunk[d] * chunks_[d] / object_shape[d] == object[d];
        }
        if (inside) FillChunk(chunk);
      });
    });
  }

  const Array& array() const { return *array_; }
  const internal::ArrayState* state() const { return &array_->state(); }
  Store& store() const { return *array_->state().store; }
  std::vector<uint64_t> grid() const { return GridOf(chunks_); }

  // The read chunk at `coords` as ReadChunks must decode it (C order, -1 past the array's edge).
  std::vector<int32_t> Expected(const std::vector<uint64_t>& coords) const {
    std::vector<int32_t> out(Product(chunks_), -1);
    ForEachCell(chunks_, [&](const std::vector<uint64_t>& local) {
      uint64_t flat = 0, at = 0;
      for (size_t d = 0; d < local.size(); ++d) {
        const uint64_t g = coords[d] * chunks_[d] + local[d];
        if (g >= shape_[d]) return;
        flat = flat * shape_[d] + g;
      }
      for (size_t d = 0; d < local.size(); ++d) at = at * chunks_[d] + local[d];
      out[at] = values_[flat];
    });
    return out;
  }

  // Calls fn(cell) for every cell of a grid of `extent`, in C order.
  static void ForEachCell(const std::vector<uint64_t>& extent,
                          const std::function<void(const std::vector<uint64_t>&)>& fn) {
    std::vector<uint64_t> cell(extent.size(), 0);
    for (uint64_t linear = 0; linear < Product(extent); ++linear) {
      uint64_t rest = linear;
      for (size_t d = extent.size(); d-- > 0;) {
        cell[d] = rest % extent[d];
        rest /= extent[d];
      }
      fn(cell);
    }
  }

 private:
  std::vector<uint64_t> GridOf(const std::vector<uint64_t>& cell) const {
    std::vector<uint64_t> grid(shape_.size());
    for (size_t d = 0; d < grid.size(); ++d) grid[d] = (shape_[d] + cell[d] - 1) / cell[d];
    return grid;
  }
  std::vector<uint64_t> ChunkOf(uint64_t linear) const {
    std::vector<uint64_t> chunk(shape_.size());
    for (size_t d = shape_.size(); d-- > 0;) {
      chunk[d] = linear % shape_[d] / chunks_[d];
      linear /= shape_[d];
    }
    return chunk;
  }
  void FillChunk(const std::vector<uint64_t>& chunk) {
    for (uint64_t i = 0; i < values_.size(); ++i) {
      if (ChunkOf(i) == chunk) values_[i] = -1;
    }
  }

  std::vector<uint64_t> shape_, chunks_;
  std::unique_ptr<Array> array_;
  std::vector<int32_t> values_;
};

// The reads of a call and the buffers they decode into.
struct Batch {
  std::vector<ChunkRead> reads;
  std::vector<std::vector<int32_t>> outs;

  void Add(const internal::ArrayState* array, std::vector<uint64_t> coords) {
    outs.emplace_back(ReadChunkBytes(*array) / sizeof(int32_t), 12345);
    ChunkRead read;
    read.array = array;
    read.coords = std::move(coords);
    reads.push_back(std::move(read));
  }
  // Points the reads at their buffers (after the last Add: `outs` may move while growing).
  std::span<ChunkRead> Spans() {
    for (size_t i = 0; i < reads.size(); ++i) {
      reads[i].out = std::as_writable_bytes(std::span<int32_t>(outs[i]));
    }
    return reads;
  }
};

void ExpectDecoded(const Fixture& f, Batch& batch, size_t i) {
  ASSERT_TRUE(batch.reads[i].status.ok()) << batch.reads[i].status.ToString();
  EXPECT_EQ(batch.outs[i], f.Expected(batch.reads[i].coords))
      << "chunk " << ::testing::PrintToString(batch.reads[i].coords);
}

bool AllFill(const std::vector<int32_t>& v) {
  return std::all_of(v.begin(), v.end(), [](int32_t x) { return x == -1; });
}

TEST(ChunkReaderTest, UnshardedChunksDecodeIntoTheirOutputs) {
  Fixture f("unsharded", {8, 6, 10}, {4, 3, 5});
  Batch batch;
  Fixture::ForEachCell(f.grid(), [&](const std::vector<uint64_t>& c) { batch.Add(f.state(), c); });
  std::reverse(batch.reads.begin(), batch.reads.end());
  ThreadPool pool(2);
  ChunkReadCounters counters;
  ReadChunks(batch.Spans(), &pool, 0, nullptr, &counters);
  uint64_t stored_bytes = 0;
  for (size_t i = 0; i < batch.reads.size(); ++i) {
    ExpectDecoded(f, batch, i);
    EXPECT_FALSE(batch.reads[i].missing);
    auto bytes = f.store().ReadAll(f.state()->ChunkKey(batch.reads[i].coords));
    ASSERT_TRUE(bytes.ok());
    stored_bytes += bytes->size();
  }
  EXPECT_EQ(counters.chunks.load(), 8u);
  EXPECT_EQ(counters.requests.load(), 8u);
  EXPECT_EQ(counters.bytes_read.load(), stored_bytes);
  EXPECT_EQ(counters.missing_chunks.load(), 0u);
  EXPECT_EQ(counters.index_reads.load(), 0u);
}

TEST(ChunkReaderTest, InnerChunksOfOneShardShareOneIndexReadAndOneMergedRead) {
  Fixture f("one-shard", {8, 12}, {2, 3}, std::vector<uint64_t>{4, 6});
  Batch batch;
  // The four inner chunks of shard (1, 1), and one of shard (0, 0).
  for (uint64_t i = 2; i < 4; ++i) {
    for (uint64_t j = 2; j < 4; ++j) batch.Add(f.state(), {i, j});
  }
  batch.Add(f.state(), {0, 1});
  ThreadPool pool(2);
  ChunkReadCounters counters;
  ReadChunks(batch.Spans(), &pool, 0, nullptr, &counters);
  for (size_t i = 0; i < batch.reads.size(); ++i) ExpectDecoded(f, batch, i);
  EXPECT_EQ(counters.index_reads.load(), 2u);
  // Per shard: the index, then one read of its (adjacent) inner chunks.
  EXPECT_EQ(counters.requests.load(), 4u);
  EXPECT_EQ(counters.chunks.load(), 5u);
}

TEST(ChunkReaderTest, TheIndexCacheServesLaterCalls) {
  Fixture f("index-cache", {8, 12}, {2, 3}, std::vector<uint64_t>{4, 6});
  ThreadPool pool(2);
  ShardIndexCache cache;
  ChunkReadCounters counters;
  Batch first;
  first.Add(f.state(), {0, 0});
  first.Add(f.state(), {3, 3});
  ReadChunks(first.Spans(), &pool, 0, &cache, &counters);
  EXPECT_EQ(counters.index_reads.load(), 2u);
  EXPECT_EQ(counters.index_hits.load(), 0u);

  Batch second;
  second.Add(f.state(), {1, 1});
  second.Add(f.state(), {2, 2});
  second.Add(f.state(), {0, 3});
  ReadChunks(second.Spans(), &pool, 0, &cache, &counters);
  for (size_t i = 0; i < second.reads.size(); ++i) ExpectDecoded(f, second, i);
  EXPECT_EQ(counters.index_reads.load(), 3u) << "shard (0, 1) was not read before";
  EXPECT_EQ(counters.index_hits.load(), 2u);
  EXPECT_EQ(counters.requests.load(), 4u + 4u);
}

TEST(ChunkReaderTest, EmptyInnerChunksAndMissingShardsReadAsTheFillValue) {
  auto empty = [](const std::vector<uint64_t>& c) { return c[0] == 1 && c[1] == 2; };
  auto unwritten = [](const std::vector<uint64_t>& shard) {
    return shard == std::vector<uint64_t>{1, 0};
  };
  Fixture f("fill", {8, 12}, {2, 3}, std::vector<uint64_t>{4, 6}, empty, unwritten);
  Batch batch;
  Fixture::ForEachCell(f.grid(), [&](const std::vector<uint64_t>& c) { batch.Add(f.state(), c); });
  ThreadPool pool(3);
  ChunkReadCounters counters;
  ReadChunks(batch.Spans(), &pool, 0, nullptr, &counters);
  uint64_t missing = 0;
  for (size_t i = 0; i < batch.reads.size(); ++i) {
    ExpectDecoded(f, batch, i);
    const auto& c = batch.reads[i].coords;
    const bool want_missing = empty(c) || unwritten({c[0] / 2, c[1] / 2});
    EXPECT_EQ(batch.reads[i].missing, want_missing) << ::testing::PrintToString(c);
    if (want_missing) {
      EXPECT_TRUE(AllFill(batch.outs[i]));
    }
    missing += want_missing;
  }
  EXPECT_EQ(missing, 5u);
  EXPECT_EQ(counters.missing_chunks.load(), missing);
  EXPECT_EQ(counters.chunks.load(), batch.reads.size());
  EXPECT_EQ(counters.index_reads.load(), 4u) << "the missing shard's index read counts too";
}

TEST(ChunkReaderTest, MissingChunksAreErrorsPerChunkWhenTheArraySaysSo) {
  OpenOptions strict;
  strict.missing_chunks_are_errors = true;
  auto unwritten = [](const std::vector<uint64_t>& c) { return c[0] == 1 && c[1] == 0; };
  auto empty = [](const std::vector<uint64_t>& c) { return c[0] == 0 && c[1] == 1; };
  Fixture plain("strict", {8, 8}, {4, 4}, std::nullopt, nullptr, unwritten, strict);
  Fixture sharded("strict-sharded", {8, 12}, {2, 3}, std::vector<uint64_t>{4, 6}, empty, unwritten,
                  strict);
  Batch batch;
  batch.Add(plain.state(), {0, 0});
  batch.Add(plain.state(), {1, 0});
  batch.Add(sharded.state(), {0, 0});
  batch.Add(sharded.state(), {0, 1});
  batch.Add(sharded.state(), {2, 1});
  ThreadPool pool(2);
  ReadChunks(batch.Spans(), &pool);
  ExpectDecoded(plain, batch, 0);
  ExpectErrorContains(batch.reads[1].status, ErrorCode::kNotFound,
                      {"reading chunk 'c/1/0'", "memory://chunk-reader-strict", "not stored"});
  ExpectDecoded(sharded, batch, 2);
  ExpectErrorContains(batch.reads[3].status, ErrorCode::kNotFound,
                      {"reading chunk 'c/0/0'", "inner chunk (0,1)", "empty"});
  ExpectErrorContains(batch.reads[4].status, ErrorCode::kNotFound,
                      {"reading chunk 'c/1/0'", "inner chunk (0,1)", "shard is not stored"});
  for (const ChunkRead& read : batch.reads) EXPECT_FALSE(read.missing);
}

TEST(ChunkReaderTest, ACorruptChunkFailsAloneAndNamesItsKey) {
  Fixture plain("corrupt", {8, 8}, {4, 4});
  const std::string garbage = "not a zstd frame";
  ASSERT_TRUE(plain.store().Put("c/1/0", std::as_bytes(std::span(garbage))).ok());
  Fixture sharded("corrupt-inner", {4, 6}, {2, 3}, std::vector<uint64_t>{4, 6});
  // Overwrite inner chunk (1, 0)'s bytes in the shard, leaving its index intact.
  const ShardingCodec& sharding = *sharded.state()->chain->sharding();
  auto shard = sharded.store().ReadAll("c/0/0");
  ASSERT_TRUE(shard.ok());
  CodecScratch scratch;
  const size_t index_at = shard->size() - sharding.index_size();
  auto index = sharding.DecodeIndex(shard->span().subspan(index_at), shard->size(), &scratch);
  ASSERT_TRUE(index.ok()) << index.status().ToString();
  ASSERT_FALSE(index->is_empty(2));
  std::memset(shard->data() + index->offset(2), 0x5a, index->nbytes(2));
  ASSERT_TRUE(sharded.store().Put("c/0/0", shard->span()).ok());

  Batch batch;
  Fixture::ForEachCell(plain.grid(), [&](const auto& c) { batch.Add(plain.state(), c); });
  Fixture::ForEachCell(sharded.grid(), [&](const auto& c) { batch.Add(sharded.state(), c); });
  ThreadPool pool(2);
  ReadChunks(batch.Spans(), &pool);
  for (size_t i = 0; i < batch.reads.size(); ++i) {
    const Fixture& f = i < 4 ? plain : sharded;
    if (i == 2) {
      ExpectErrorContains(batch.reads[i].status, ErrorCode::kCorruptChunk,
                          {"reading chunk 'c/1/0' of array at memory://chunk-reader-corrupt"});
    } else if (i == 4 + 2) {
      ExpectErrorContains(
          batch.reads[i].status, ErrorCode::kCorruptChunk,
          {"reading chunk 'c/0/0'", "chunk-reader-corrupt-inner", "inner chunk (1,0)"});
    } else {
      ExpectDecoded(f, batch, i);
    }
  }
}

TEST(ChunkReaderTest, ChunksOfSeveralArraysInOneCall) {
  Fixture a("several-a", {6, 6}, {3, 3});
  Fixture b("several-b", {8, 12}, {2, 3}, std::vector<uint64_t>{4, 6});
  Fixture c("several-c", {9}, {2});  // an edge chunk: past the edge it holds the fill value
  Batch batch;
  std::vector<const Fixture*> owner;
  for (const Fixture* f : {&a, &b, &c}) {
    Fixture::ForEachCell(f->grid(), [&](const auto& coords) {
      batch.Add(f->state(), coords);
      owner.push_back(f);
    });
  }
  // Interleave the arrays' reads.
  std::vector<size_t> order(batch.reads.size());
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), std::mt19937(7));
  Batch shuffled;
  std::vector<const Fixture*> shuffled_owner;
  for (size_t i : order) {
    shuffled.Add(batch.reads[i].array, batch.reads[i].coords);
    shuffled_owner.push_back(owner[i]);
  }
  ThreadPool pool(2);
  ChunkReadCounters counters;
  ReadChunks(shuffled.Spans(), &pool, 1, nullptr, &counters);
  for (size_t i = 0; i < shuffled.reads.size(); ++i) {
    ExpectDecoded(*shuffled_owner[i], shuffled, i);
  }
  EXPECT_EQ(counters.chunks.load(), 4u + 16u + 5u);
  EXPECT_EQ(counters.index_reads.load(), 4u);
}

TEST(ChunkReaderTest, InvalidReadsFailAlone) {
  Fixture f("invalid", {4, 4}, {2, 2});
  Batch batch;
  batch.Add(f.state(), {0, 0});
  batch.Add(f.state(), {2, 0});  // outside the grid
  batch.Add(f.state(), {1});     // wrong rank
  batch.Add(f.state(), {1, 1});
  batch.Spans();
  batch.reads[3].out = batch.reads[3].out.subspan(4);  // too small
  batch.reads.push_back(ChunkRead{});                  // no array
  ThreadPool pool(2);
  ReadChunks(batch.reads, &pool);
  ExpectDecoded(f, batch, 0);
  ExpectErrorContains(batch.reads[1].status, ErrorCode::kInvalidArgument,
                      {"chunk (2,0) is outside the read-chunk grid (2,2)"});
  ExpectErrorContains(batch.reads[2].status, ErrorCode::kInvalidArgument, {"outside"});
  ExpectErrorContains(batch.reads[3].status, ErrorCode::kInvalidArgument,
                      {"needs an output of 16 bytes, not 12"});
  ExpectErrorContains(batch.reads[4].status, ErrorCode::kInvalidArgument, {"no array"});
}

TEST(ChunkReaderTest, ConcurrentCallsOnOneSmallPoolFinish) {
  Fixture plain("concurrent", {16, 16}, {4, 4});
  Fixture sharded("concurrent-sharded", {16, 16}, {2, 2}, std::vector<uint64_t>{8, 8});
  ThreadPool pool(2);
  ShardIndexCache cache;
  auto read_all = [&](size_t max_parallelism) {
    Batch batch;
    Fixture::ForEachCell(plain.grid(), [&](const auto& c) { batch.Add(plain.state(), c); });
    Fixture::ForEachCell(sharded.grid(), [&](const auto& c) { batch.Add(sharded.state(), c); });
    ReadChunks(batch.Spans(), &pool, max_parallelism, &cache);
    size_t good = 0;
    for (size_t i = 0; i < batch.reads.size(); ++i) {
      const Fixture& f = batch.reads[i].array == plain.state() ? plain : sharded;
      good += batch.reads[i].status.ok() && batch.outs[i] == f.Expected(batch.reads[i].coords);
    }
    return good == batch.reads.size();
  };
  // Callers outside the pool (a loader's coordinating threads)...
  std::atomic<int> good{0};
  std::vector<std::thread> callers;
  for (size_t t = 0; t < 6; ++t) {
    callers.emplace_back([&, t] {
      for (int k = 0; k < 5; ++k) good += read_all(t % 3);
    });
  }
  for (std::thread& t : callers) t.join();
  EXPECT_EQ(good.load(), 30);
  // ...and callers that are the pool's workers, every one of them at once (they work through
  // their own calls' tasks while they wait).
  std::mutex mutex;
  std::condition_variable cv;
  int done = 0;
  for (int k = 0; k < 4; ++k) {
    pool.Submit([&] {
      const bool ok = read_all(0);
      std::lock_guard<std::mutex> lock(mutex);
      good += ok;
      ++done;
      cv.notify_all();
    });
  }
  std::unique_lock<std::mutex> lock(mutex);
  cv.wait(lock, [&] { return done == 4; });
  EXPECT_EQ(good.load(), 34);
}

// Reads from local files while the file store acts on read hints (as after a read from the disk):
// unsharded chunks and whole shards are hinted while the workers read them; the values are the
// same.
TEST(ChunkReaderTest, ReadHintsToALocalStoreChangeNoValue) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("zarrstream_hints_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  const std::vector<uint64_t> shape = {8, 12};
  std::vector<int32_t> values(Product(shape));
  std::iota(values.begin(), values.end(), 0);
  for (const bool sharded : {false, true}) {
    ArraySpec spec;
    spec.shape = shape;
    spec.dtype = DataType::kInt32;
    spec.chunks = {2, 3};
    if (sharded) spec.shard_shape = std::vector<uint64_t>{4, 6};
    spec.compressor = "zstd:1";
    const std::string url = "file://" + (dir / (sharded ? "sharded" : "plain")).string();
    auto array = Array::Create(url, spec);
    ASSERT_TRUE(array.ok()) << array.status().ToString();
    const std::vector<uint64_t> origin = {0, 0};
    ASSERT_TRUE(array->Write(origin, shape, values.data()).ok());
    auto* file = dynamic_cast<FileStore*>(array->state().store.get());
    ASSERT_NE(file, nullptr);
    file->NoteReadFromDiskForTesting();
    Batch batch;
    for (uint64_t i = 0; i < 4; ++i) {
      for (uint64_t j = 0; j < 4; ++j) batch.Add(&array->state(), {i, j});
    }
    ThreadPool pool(2);
    ChunkReadCounters counters;
    ReadChunks(batch.Spans(), &pool, 0, nullptr, &counters);
    for (size_t k = 0; k < batch.reads.size(); ++k) {
      ASSERT_TRUE(batch.reads[k].status.ok()) << batch.reads[k].status.ToString();
      const std::vector<uint64_t>& c = batch.reads[k].coords;
      for (uint64_t y = 0; y < 2; ++y) {
        for (uint64_t x = 0; x < 3; ++x) {
          EXPECT_EQ(batch.outs[k][y * 3 + x], values[(c[0] * 2 + y) * 12 + c[1] * 3 + x])
              << (sharded ? "sharded" : "unsharded") << " chunk " << c[0] << "," << c[1];
        }
      }
    }
    EXPECT_EQ(counters.chunks.load(), 16u);
  }
  std::filesystem::remove_all(dir);
}

// Memory a caller gives for stored bytes (ChunkRead::encoded_memory): a bump allocator over
// `capacity` bytes, any thread.
class CallerMemory {
 public:
  explicit CallerMemory(size_t capacity) : memory_(capacity) {}
  std::span<std::byte> Take(uint64_t bytes) {
    ++asked_;
    const size_t at = used_.fetch_add(bytes);
    if (at + bytes > memory_.size()) return {};
    return {memory_.data() + at, bytes};
  }
  bool Holds(std::span<const std::byte> bytes) const {
    return !bytes.empty() && bytes.data() >= memory_.data() &&
           bytes.data() + bytes.size() <= memory_.data() + memory_.size();
  }
  size_t asked() const { return asked_.load(); }

 private:
  std::vector<std::byte> memory_;
  std::atomic<size_t> used_{0};
  std::atomic<size_t> asked_{0};
};

// Reads every inner chunk of `array` (sharded) with take_encoded, the stored bytes given memory
// by `memory` (except for the chunks `without` names); each chunk's stored bytes must decode to
// its values, and `in_memory` counts those that were read into the caller's memory.
void ReadEncoded(const internal::ArrayState& array, const std::vector<int32_t>& values,
                 CallerMemory& memory, size_t* in_memory,
                 const std::function<bool(const std::vector<uint64_t>&)>& without = nullptr) {
  const std::vector<uint64_t>& shape = array.metadata.shape;
  const std::vector<uint64_t>& chunk = array.read_chunk_shape;
  std::vector<ChunkRead> reads;
  std::vector<std::vector<std::byte>> stored;
  for (uint64_t i = 0; i < shape[0] / chunk[0]; ++i) {
    for (uint64_t j = 0; j < shape[1] / chunk[1]; ++j) {
      ChunkRead read;
      read.array = &array;
      read.coords = {i, j};
      reads.push_back(std::move(read));
    }
  }
  stored.resize(reads.size());
  std::atomic<size_t> held{0};
  for (size_t k = 0; k < reads.size(); ++k) {
    reads[k].take_encoded = [&, k](std::span<const std::byte> bytes) {
      if (memory.Holds(bytes)) ++held;
      stored[k].assign(bytes.begin(), bytes.end());
      return Status::Ok();
    };
    if (!without || !without(reads[k].coords)) {
      reads[k].encoded_memory = [&memory](uint64_t bytes) { return memory.Take(bytes); };
    }
  }
  ThreadPool pool(2);
  ReadChunks(reads, &pool);
  const CodecChain& inner = array.chain->sharding()->inner_chain();
  for (size_t k = 0; k < reads.size(); ++k) {
    ASSERT_TRUE(reads[k].status.ok()) << reads[k].status.ToString();
    std::vector<int32_t> decoded(chunk[0] * chunk[1]);
    CodecScratch scratch;
    ASSERT_TRUE(
        inner.Decode(stored[k], std::as_writable_bytes(std::span<int32_t>(decoded)), &scratch)
            .ok());
    const std::vector<uint64_t>& c = reads[k].coords;
    for (uint64_t y = 0; y < chunk[0]; ++y) {
      for (uint64_t x = 0; x < chunk[1]; ++x) {
        ASSERT_EQ(decoded[y * chunk[1] + x],
                  values[(c[0] * chunk[0] + y) * shape[1] + c[1] * chunk[1] + x])
            << "chunk " << c[0] << "," << c[1];
      }
    }
  }
  *in_memory = held.load();
}

// A shard's inner chunks taken encoded are read straight into memory the caller gives, one piece
// per merged read; where it has none left, or a member of the shard gives none, they are read as
// before; unsharded chunks never ask. In a memory store and in local files.
TEST(ChunkReaderTest, TheStoredBytesOfAShardAreReadIntoMemoryTheCallerGives) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() /
                                    ("zarrstream_caller_memory_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  const std::vector<uint64_t> shape = {8, 12};
  std::vector<int32_t> values(Product(shape));
  std::iota(values.begin(), values.end(), 0);
  for (const std::string& root : {std::string("memory://chunk-reader-caller-memory"),
                                  "file://" + (dir / "sharded").string()}) {
    SCOPED_TRACE(root);
    ArraySpec spec;
    spec.shape = shape;
    spec.dtype = DataType::kInt32;
    spec.chunks = {2, 3};
    spec.shard_shape = std::vector<uint64_t>{4, 6};
    spec.compressor = "zstd:1";
    CreateOptions create;
    create.overwrite = true;
    auto array = Array::Create(root, spec, create);
    ASSERT_TRUE(array.ok()) << array.status().ToString();
    const std::vector<uint64_t> origin = {0, 0};
    ASSERT_TRUE(array->Write(origin, shape, values.data()).ok());
    const internal::ArrayState& state = array->state();

    CallerMemory plenty(1 << 20);
    size_t in_memory = 0;
    ReadEncoded(state, values, plenty, &in_memory);
    EXPECT_EQ(in_memory, 16u);
    EXPECT_EQ(plenty.asked(), 4u) << "one merged read per shard";

    CallerMemory none(0);
    ReadEncoded(state, values, none, &in_memory);
    EXPECT_EQ(in_memory, 0u);
    EXPECT_EQ(none.asked(), 4u);

    // Shard (0, 0) has a member that gives no memory: its reads are not asked for.
    CallerMemory partial(1 << 20);
    ReadEncoded(state, values, partial, &in_memory,
                [](const std::vector<uint64_t>& c) { return c[0] == 1 && c[1] == 1; });
    EXPECT_EQ(in_memory, 12u);
    EXPECT_EQ(partial.asked(), 3u);
  }
  std::filesystem::remove_all(dir);

  // Unsharded chunks: their size is not known before the read; nothing is asked.
  Fixture f("caller-memory-unsharded", {8, 6}, {4, 3});
  CallerMemory memory(1 << 20);
  Batch batch;
  Fixture::ForEachCell(f.grid(), [&](const std::vector<uint64_t>& c) { batch.Add(f.state(), c); });
  std::span<ChunkRead> reads = batch.Spans();
  std::atomic<size_t> taken{0};
  for (ChunkRead& read : reads) {
    read.out = {};
    read.take_encoded = [&](std::span<const std::byte>) {
      ++taken;
      return Status::Ok();
    };
    read.encoded_memory = [&memory](uint64_t bytes) { return memory.Take(bytes); };
  }
  ThreadPool pool(2);
  ReadChunks(reads, &pool);
  EXPECT_EQ(taken.load(), 4u);
  EXPECT_EQ(memory.asked(), 0u);
}

TEST(ShardIndexCacheTest, EvictsTheLeastRecentlyUsedIndexPastItsCapacity) {
  Fixture a("cache-a", {4}, {2});
  Fixture b("cache-b", {4}, {2});
  // Three indexes of 1000 entries (16 kB each): two fit in 40 kB.
  auto index = std::make_shared<const ShardIndex>(std::vector<uint64_t>(2000, 0));
  ShardIndexCache cache(40000);
  cache.Insert(a.state(), "c/0", index);
  cache.Insert(b.state(), "c/0", index);
  EXPECT_EQ(cache.Find(a.state(), "c/0"), index);  // a is now the most recently used
  EXPECT_EQ(cache.Find(a.state(), "c/1"), nullptr);
  cache.Insert(a.state(), "c/1", index);
  EXPECT_EQ(cache.Find(b.state(), "c/0"), nullptr);
  EXPECT_EQ(cache.Find(a.state(), "c/0"), index);
  EXPECT_EQ(cache.Find(a.state(), "c/1"), index);
  // An index larger than the whole cache is not kept.
  ShardIndexCache small(1000);
  small.Insert(a.state(), "c/0", index);
  EXPECT_EQ(small.Find(a.state(), "c/0"), nullptr);
}

// A store that IsRemoteStore() takes for an HTTP store. Reads are served from another store by a
// thread of its own, as a transport's I/O thread completes them, but only once `gate` reads are
// waiting: a reader that waits for one read before sending the next never gets an answer (the
// gate then opens after a long while, and the test fails on `gate_timed_out`).
class GatedRemoteStore final : public HttpStore {
 public:
  GatedRemoteStore(std::shared_ptr<Store> backing, size_t gate)
      : HttpStore("gated+" + backing->url(), "http://unused.invalid", nullptr, {}),
        backing_(std::move(backing)),
        gate_(gate),
        server_([this] { Serve(); }) {}
  ~GatedRemoteStore() override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    cv_.notify_all();
    server_.join();
  }

  Future<uint64_t> Read(std::string_view key, std::span<const ByteRange> ranges,
                        std::span<ByteBuffer> outs) override {
    Pending pending{std::string(key), {ranges.begin(), ranges.end()}, outs, {}};
    Future<uint64_t> future = pending.promise.future();
    std::lock_guard<std::mutex> lock(mutex_);
    log_.push_back(ranges.size() == 1 && ranges[0].kind == ByteRange::Kind::kSuffix ? 'i' : 'd');
    queue_.push_back(std::move(pending));
    ++in_flight_;
    max_in_flight_ = std::max(max_in_flight_, in_flight_);
    cv_.notify_all();
    return future;
  }

  size_t max_in_flight() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return max_in_flight_;
  }
  bool gate_timed_out() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return gate_timed_out_;
  }
  // 'i' for a shard index read (a suffix range), 'd' for any other, in the order they came.
  std::string log() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return log_;
  }

 private:
  struct Pending {
    std::string key;
    std::vector<ByteRange> ranges;
    std::span<ByteBuffer> outs;
    Promise<uint64_t> promise;
  };

  void Serve() {
    std::unique_lock<std::mutex> lock(mutex_);
    if (!cv_.wait_for(lock, std::chrono::seconds(60),
                      [this] { return stopping_ || queue_.size() >= gate_; })) {
      gate_timed_out_ = true;
    }
    for (;;) {
      cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;
      Pending pending = std::move(queue_.front());
      queue_.pop_front();
      lock.unlock();
      Result<uint64_t> got = backing_->Read(pending.key, pending.ranges, pending.outs).Wait();
      lock.lock();
      --in_flight_;
      lock.unlock();
      pending.promise.Set(std::move(got));
      lock.lock();
    }
  }

  std::shared_ptr<Store> backing_;
  const size_t gate_;
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<Pending> queue_;
  size_t in_flight_ = 0;
  size_t max_in_flight_ = 0;
  bool gate_timed_out_ = false;
  bool stopping_ = false;
  std::string log_;
  std::thread server_;
};

// The fixture's array, read through `store`.
std::shared_ptr<internal::ArrayState> Through(const Fixture& f, std::shared_ptr<Store> store) {
  auto state = std::make_shared<internal::ArrayState>(*f.state());
  state->store = std::move(store);
  return state;
}

TEST(ChunkReaderRemoteTest, RequestsOfAWindowGoOutBeforeAnyDecodeWaits) {
  Fixture f("remote", {2400}, {4}, std::nullopt, nullptr,
            [](const std::vector<uint64_t>& c) { return c[0] % 100 == 7; });
  auto store = std::make_shared<GatedRemoteStore>(f.array().state().store, kRemoteWindowObjects);
  ASSERT_TRUE(IsRemoteStore(*store));
  auto array = Through(f, store);
  Batch batch;
  for (uint64_t c = 0; c < 600; ++c) batch.Add(array.get(), {c});
  ThreadPool pool(2);
  ChunkReadCounters counters;
  ReadChunks(batch.Spans(), &pool, 0, nullptr, &counters);
  EXPECT_FALSE(store->gate_timed_out()) << "requests waited for each other";
  EXPECT_EQ(store->max_in_flight(), kRemoteWindowObjects);
  for (size_t i = 0; i < batch.reads.size(); ++i) {
    ExpectDecoded(f, batch, i);
    EXPECT_EQ(batch.reads[i].missing, i % 100 == 7);
  }
  EXPECT_EQ(counters.requests.load(), 600u);
  EXPECT_EQ(counters.missing_chunks.load(), 6u);
}

TEST(ChunkReaderRemoteTest, ShardIndexesOfABatchAreReadBeforeItsInnerChunks) {
  // 150 shards of 4 inner chunks; a few shards never written, a few inner chunks empty.
  auto unwritten = [](const std::vector<uint64_t>& shard) { return shard[0] % 37 == 5; };
  auto empty = [](const std::vector<uint64_t>& c) { return c[0] % 53 == 9; };
  Fixture f("remote-sharded", {1200}, {2}, std::vector<uint64_t>{8}, empty, unwritten);
  auto store = std::make_shared<GatedRemoteStore>(f.array().state().store, kRemoteBatchObjects);
  auto array = Through(f, store);
  Batch batch;
  // Two inner chunks of every shard (one for the last), out of order.
  for (uint64_t c = 0; c < 600; c += 2) batch.Add(array.get(), {(c * 7) % 600});
  ThreadPool pool(2);
  ShardIndexCache cache;
  ChunkReadCounters counters;
  ReadChunks(batch.Spans(), &pool, 0, &cache, &counters);
  EXPECT_FALSE(store->gate_timed_out()) << "index reads waited for each other";
  EXPECT_LE(store->max_in_flight(), kRemoteWindowObjects);
  EXPECT_EQ(store->log().substr(0, kRemoteBatchObjects), std::string(kRemoteBatchObjects, 'i'));
  uint64_t missing = 0;
  for (size_t i = 0; i < batch.reads.size(); ++i) {
    ExpectDecoded(f, batch, i);
    const uint64_t c = batch.reads[i].coords[0];
    const bool want_missing = empty({c}) || unwritten({c / 4});
    EXPECT_EQ(batch.reads[i].missing, want_missing) << c;
    missing += want_missing;
  }
  EXPECT_EQ(counters.missing_chunks.load(), missing);
  EXPECT_EQ(counters.index_reads.load(), 150u);

  // Again, every stored shard's index from the cache: only the inner reads go out, and the
  // unwritten shards' index reads (nothing was cached for them).
  uint64_t unwritten_shards = 0;
  for (uint64_t shard = 0; shard < 150; ++shard) unwritten_shards += unwritten({shard});
  ASSERT_EQ(unwritten_shards, 4u);
  const uint64_t requests = counters.requests.load();
  Batch again;
  for (uint64_t c = 0; c < 600; c += 3) again.Add(array.get(), {c});  // touches every shard
  ReadChunks(again.Spans(), &pool, 0, &cache, &counters);
  for (size_t i = 0; i < again.reads.size(); ++i) ExpectDecoded(f, again, i);
  EXPECT_EQ(counters.index_reads.load(), 150u + unwritten_shards);
  EXPECT_EQ(counters.index_hits.load(), 150u - unwritten_shards);
  EXPECT_LE(counters.requests.load() - requests, 150u);
}

}  // namespace
}  // namespace zarrstream

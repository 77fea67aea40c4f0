#include "loader/chunk_cache.h"

#include <gtest/gtest.h>

#include <thread>

namespace zarrstream {
namespace {

TEST(ChunkCacheTest, EvictsLeastRecentlyUsedBeyondCapacity) {
  ChunkCache cache(300, 300);
  for (uint64_t linear = 0; linear < 3; ++linear) cache.Insert(0, linear, cache.Allocate(100));
  ASSERT_NE(cache.Find(0, 0), nullptr);  // 0 becomes the most recent: 1 is the oldest now
  cache.Insert(0, 3, cache.Allocate(100));
  EXPECT_EQ(cache.Find(0, 1), nullptr);
  EXPECT_NE(cache.Find(0, 0), nullptr);
  EXPECT_NE(cache.Find(0, 2), nullptr);
  EXPECT_NE(cache.Find(0, 3), nullptr);
  EXPECT_EQ(cache.Find(1, 3), nullptr);  // another array's chunk of the same index
  EXPECT_EQ(cache.bytes(), 300u);
  cache.Insert(0, 4, cache.Allocate(400));  // larger than the whole cache: not kept
  EXPECT_EQ(cache.Find(0, 4), nullptr);
  EXPECT_EQ(cache.bytes(), 300u);
}

// An entry evicted while a batch still uses it is recycled when the batch lets go, and the next
// allocation of its size gets its buffer back instead of fresh memory.
TEST(ChunkCacheTest, RecyclesBuffersWhenTheLastHolderLetsGo) {
  ChunkCache cache(200, 200);
  std::shared_ptr<ChunkCache::Entry> held = cache.Allocate(100);
  const std::byte* buffer = held->bytes.data();
  cache.Insert(0, 0, held);
  cache.Insert(0, 1, cache.Allocate(100));
  cache.Insert(0, 2, cache.Allocate(100));  // evicts chunk 0, which `held` still holds
  EXPECT_EQ(cache.Find(0, 0), nullptr);
  EXPECT_EQ(cache.idle_bytes(), 0u);
  held->missing = true;
  held.reset();
  EXPECT_EQ(cache.idle_bytes(), 100u);

  std::shared_ptr<ChunkCache::Entry> other_size = cache.Allocate(50);
  EXPECT_NE(other_size->bytes.data(), buffer);
  std::shared_ptr<ChunkCache::Entry> reused = cache.Allocate(100);
  EXPECT_EQ(reused->bytes.data(), buffer);
  EXPECT_EQ(reused->bytes.size(), 100u);
  EXPECT_FALSE(reused->missing);
  EXPECT_EQ(cache.idle_bytes(), 0u);
}

TEST(ChunkCacheTest, IdleBuffersStayWithinTheCapacity) {
  ChunkCache cache(1000, 250);
  std::vector<std::shared_ptr<ChunkCache::Entry>> entries;
  for (int i = 0; i < 5; ++i) entries.push_back(cache.Allocate(100));
  entries.clear();  // two fit in 250 idle bytes, the other three are freed
  EXPECT_EQ(cache.idle_bytes(), 200u);
}

// Entries may outlive the cache (a batch still assembling when the loader goes).
TEST(ChunkCacheTest, EntriesOutliveTheCache) {
  std::shared_ptr<ChunkCache::Entry> entry;
  {
    ChunkCache cache(100, 100);
    entry = cache.Allocate(10);
    cache.Insert(0, 0, entry);
  }
  entry->bytes.data()[0] = std::byte{1};
  entry.reset();
}

// A second batch missing a chunk that a first one is decoding waits for that decode and gets its
// entry; when the decode fails it gets null and the chunk can be claimed again.
TEST(ChunkCacheTest, BatchesInFlightShareOneDecodePerChunk) {
  ChunkCache cache(1000, 1000);
  ChunkCache::Lookup first = cache.FindOrClaim(0, 7);
  ASSERT_TRUE(first.claimed);
  ASSERT_EQ(first.entry, nullptr);
  ChunkCache::Lookup second = cache.FindOrClaim(0, 7);
  EXPECT_FALSE(second.claimed);
  EXPECT_EQ(second.decode, first.decode);

  std::shared_ptr<const ChunkCache::Entry> waited;
  std::thread waiter([&] { waited = ChunkCache::WaitFor(second.decode); });
  std::shared_ptr<ChunkCache::Entry> decoded = cache.Allocate(10);
  decoded->bytes.data()[0] = std::byte{42};
  const ChunkCache::Entry* address = decoded.get();
  cache.Insert(0, 7, std::move(decoded));
  waiter.join();
  EXPECT_EQ(waited.get(), address);
  EXPECT_EQ(cache.FindOrClaim(0, 7).entry.get(), address);  // now a plain hit

  ChunkCache::Lookup failing = cache.FindOrClaim(0, 8);
  ASSERT_TRUE(failing.claimed);
  ChunkCache::Lookup waiting = cache.FindOrClaim(0, 8);
  cache.Abandon(0, 8);
  EXPECT_EQ(ChunkCache::WaitFor(waiting.decode), nullptr);
  EXPECT_TRUE(cache.FindOrClaim(0, 8).claimed);
}

}  // namespace
}  // namespace zarrstream

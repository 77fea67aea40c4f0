#include "util/block_cache.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "util/byte_buffer.h"

namespace zarrstream {
namespace {

using internal::CachedBlockBytes;
using internal::kMinCachedBlockBytes;

ByteBuffer Reusable(size_t size) {
  ByteBuffer b;
  b.ReserveReusable(size);
  b.Resize(size);
  return b;
}

TEST(BlockCacheTest, AFreedLargeBufferIsReusedForASimilarSize) {
  const void* first = nullptr;
  {
    ByteBuffer a = Reusable(1 << 20);
    std::memset(a.data(), 7, a.size());
    first = a.data();
  }
  // Slightly smaller (within a quarter): the same block, already touched.
  ByteBuffer b = Reusable(1000000);
  EXPECT_EQ(b.data(), first);
  EXPECT_EQ(b.capacity(), 1000000u);  // what was asked, not the block's size
  // Growing within the block keeps it.
  b.Resize(1 << 20);
  EXPECT_EQ(b.data(), first);
}

TEST(BlockCacheTest, ABlockMuchLargerThanAskedIsNotHandedOut) {
  const void* big = nullptr;
  {
    ByteBuffer a = Reusable(8 << 20);
    big = a.data();
  }
  ByteBuffer small = Reusable(1 << 20);
  EXPECT_NE(small.data(), big);
  ByteBuffer again = Reusable(8 << 20);
  EXPECT_EQ(again.data(), big);
}

TEST(BlockCacheTest, SmallAndOrdinaryBuffersAreNotCached) {
  const size_t before = CachedBlockBytes();
  { ByteBuffer a = Reusable(kMinCachedBlockBytes - 1); }
  EXPECT_EQ(CachedBlockBytes(), before);
  { ByteBuffer a(4 << 20); }  // not ReserveReusable: plain new[] and delete[]
  EXPECT_EQ(CachedBlockBytes(), before);
  { ByteBuffer a = Reusable(kMinCachedBlockBytes); }
  EXPECT_GE(CachedBlockBytes(), before + kMinCachedBlockBytes);
}

TEST(BlockCacheTest, TheCacheHoldsAtMostItsLimit) {
  // The default limit is 256 MiB: freeing 320 MiB of buffers keeps at most that much.
  {
    std::vector<ByteBuffer> buffers;
    for (int i = 0; i < 320; ++i) buffers.push_back(Reusable(size_t{1} << 20));
  }
  EXPECT_LE(CachedBlockBytes(), size_t{256} << 20);
  EXPECT_GE(CachedBlockBytes(), size_t{200} << 20);
}

TEST(BlockCacheTest, MovesHandOverTheBlock) {
  ByteBuffer a = Reusable(1 << 20);
  a.data()[0] = std::byte{42};
  const std::byte* p = a.data();
  ByteBuffer b(std::move(a));
  EXPECT_EQ(b.data(), p);
  EXPECT_EQ(a.data(), nullptr);  // NOLINT(bugprone-use-after-move): moved-from is empty
  EXPECT_EQ(a.capacity(), 0u);
  ByteBuffer c(2 << 20);
  c = std::move(b);
  EXPECT_EQ(c.data(), p);
  EXPECT_EQ(c.data()[0], std::byte{42});
}

}  // namespace
}  // namespace zarrstream

#include "loader/batch_memory_pool.h"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

namespace zarrstream {
namespace {

std::vector<std::shared_ptr<void>> AcquireMany(HostBatchPool& pool, int n) {
  std::vector<std::shared_ptr<void>> blocks;
  for (int i = 0; i < n; ++i) {
    Result<std::shared_ptr<void>> block = pool.Acquire();
    EXPECT_TRUE(block.ok()) << block.status().ToString();
    blocks.push_back(*std::move(block));
  }
  return blocks;
}

TEST(HostBatchPoolTest, KeepsAtMostMaxKeptBlocksAsTheyComeBack) {
  auto pool = std::make_shared<HostBatchPool>(1024, /*max_kept=*/3, /*pin=*/nullptr);
  std::vector<std::shared_ptr<void>> held = AcquireMany(*pool, 5);  // a consumer holding many
  EXPECT_EQ(pool->blocks(), 5U);
  held.clear();
  EXPECT_EQ(pool->blocks(), 3U);
  // The kept blocks are reused: three more take no new memory.
  std::vector<std::shared_ptr<void>> again = AcquireMany(*pool, 3);
  EXPECT_EQ(pool->blocks(), 3U);
  again.push_back(*pool->Acquire());
  EXPECT_EQ(pool->blocks(), 4U);
}

TEST(HostBatchPoolTest, ALowerMaxKeptFreesIdleBlocksNowAndTheOthersAsTheyComeBack) {
  auto pool = std::make_shared<HostBatchPool>(1024, /*max_kept=*/4, /*pin=*/nullptr);
  std::vector<std::shared_ptr<void>> held = AcquireMany(*pool, 4);
  held.resize(2);  // two idle, two in use
  EXPECT_EQ(pool->blocks(), 4U);
  pool->SetMaxKept(3);
  EXPECT_EQ(pool->blocks(), 3U);  // one idle block freed now
  pool->SetMaxKept(1);
  EXPECT_EQ(pool->blocks(), 2U);  // the other idle one too; the two in use are still held
  held.pop_back();
  EXPECT_EQ(pool->blocks(), 1U);  // freed as it came back: over the limit
  held.clear();
  EXPECT_EQ(pool->blocks(), 1U);  // kept
  pool->SetMaxKept(5);            // higher: nothing allocated ahead
  EXPECT_EQ(pool->blocks(), 1U);
}

}  // namespace
}  // namespace zarrstream

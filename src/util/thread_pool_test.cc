#include "util/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <vector>

namespace zarrstream {
namespace {

TEST(ParallelForTest, RunsEveryIndexOnce) {
  ThreadPool pool(4);
  std::vector<std::atomic<int>> hits(1000);
  ASSERT_TRUE(ParallelFor(&pool, hits.size(), [&](size_t i) {
                hits[i]++;
                return Status::Ok();
              }).ok());
  for (auto& h : hits) EXPECT_EQ(h.load(), 1);
}

TEST(ParallelForTest, ReturnsAnErrorAndStopsEarly) {
  ThreadPool pool(2);
  std::atomic<int> calls{0};
  Status s = ParallelFor(&pool, 100000, [&](size_t i) {
    calls++;
    return i == 10 ? CorruptChunkError("bad chunk 10") : Status::Ok();
  });
  EXPECT_EQ(s.code(), ErrorCode::kCorruptChunk);
  EXPECT_EQ(s.message(), "bad chunk 10");
  EXPECT_LT(calls.load(), 100000);
}

TEST(ParallelForTest, NestedCallsOnASmallPoolDoNotDeadlock) {
  ThreadPool pool(2);
  std::atomic<int> total{0};
  ASSERT_TRUE(ParallelFor(&pool, 16, [&](size_t) {
                return ParallelFor(&pool, 16, [&](size_t) {
                  total++;
                  return Status::Ok();
                });
              }).ok());
  EXPECT_EQ(total.load(), 256);
}

TEST(ParallelForTest, NullPoolRunsSerially) {
  int sum = 0;
  ASSERT_TRUE(ParallelFor(nullptr, 5, [&](size_t i) {
                sum += static_cast<int>(i);
                return Status::Ok();
              }).ok());
  EXPECT_EQ(sum, 10);
}

TEST(StatusTest, ContextIsPrepended) {
  Status s = NotFoundError("no such key").WithContext("reading chunk 'c/0'");
  EXPECT_EQ(s.message(), "reading chunk 'c/0': no such key");
  EXPECT_TRUE(Status::Ok().WithContext("x").ok());
}

}  // namespace
}  // namespace zarrstream

#include "util/fork_safety.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

#include "util/fork_test_util.h"

namespace zarrstream {
namespace {

TEST(ForkSafetyTest, AChildIsOneGenerationOnAndTheParentStays) {
  const uint64_t parent = ForkGeneration();
  ExpectChildSucceeds([parent] { return ForkGeneration() == parent + 1 ? 0 : 1; });
  EXPECT_EQ(ForkGeneration(), parent);
}

// A thread holds the mutex, mid-change, when another forks: the fork waits for it, so the child
// finds the change whole and the mutex free.
TEST(ForkSafetyTest, AMutexHeldByAnotherThreadAtForkIsFreeAndItsStateWholeInTheChild) {
  static ForkSafeMutex mutex;
  static int guarded = 0;
  std::atomic<bool> holding{false};
  std::thread holder([&] {
    std::lock_guard<ForkSafeMutex> lock(mutex);
    guarded = 1;  // half changed
    holding = true;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    guarded = 2;
  });
  while (!holding) std::this_thread::yield();
  ExpectChildSucceeds([] {
    if (!mutex.try_lock()) return 1;
    const int seen = guarded;
    mutex.unlock();
    return seen == 2 ? 0 : 2;
  });
  holder.join();
  // The parent's mutex works on as before.
  std::lock_guard<ForkSafeMutex> lock(mutex);
  EXPECT_EQ(guarded, 2);
}

// A thread takes `a` then `b` (b was made later, and fork() starts at the newest) while the process
// forks again and again: fork() acquires them all without deadlock, whatever the order.
TEST(ForkSafetyTest, ForkAcquiresMutexesTakenInAnyOrderWithoutDeadlock) {
  static ForkSafeMutex a;
  static ForkSafeMutex b;
  std::atomic<bool> stop{false};
  std::thread nested([&stop] {
    while (!stop) {
      std::lock_guard<ForkSafeMutex> outer(a);
      std::lock_guard<ForkSafeMutex> inner(b);
    }
  });
  for (int i = 0; i < 20; ++i) {
    ExpectChildSucceeds([] {
      std::lock_guard<ForkSafeMutex> outer(a);
      std::lock_guard<ForkSafeMutex> inner(b);
      return 0;
    });
  }
  stop = true;
  nested.join();
}

}  // namespace
}  // namespace zarrstream

#include "util/thread_pool.h"

#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <new>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "util/address_space_test_util.h"
#include "util/fork_test_util.h"

namespace zarrstream {
namespace {

TEST(UsableCoresTest, CountsTheAffinityAndDefaultPoolsFollowIt) {
  cpu_set_t set;
  CPU_ZERO(&set);
  ASSERT_EQ(sched_getaffinity(0, sizeof(set), &set), 0);
  EXPECT_EQ(UsableCores(), static_cast<size_t>(CPU_COUNT(&set)));
  EXPECT_EQ(ThreadPool().num_threads(), UsableCores());
}

// Lets this process start about three more threads: 1 GiB stacks, and an address space of what
// it maps now plus 3.5 GiB.
void LeaveRoomForThreeThreads() {
  LimitAddressSpaceToMappedPlus(size_t{7} << 29);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, size_t{1} << 30);
  pthread_setattr_default_np(&attr);
  pthread_attr_destroy(&attr);
}

// Workers that start, then one that cannot: the constructor joins those that started and throws
// (a joinable std::thread destroyed would abort the process).
TEST(ThreadPoolDeathTest, WorkerThatCannotStartIsAnExceptionNotAnAbort) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        LeaveRoomForThreeThreads();
        try {
          ThreadPool pool(64);
          std::_Exit(1);  // all started: the limit did not bite
        } catch (const std::system_error&) {
          std::_Exit(0);
        }
      },
      testing::ExitedWithCode(0), "");
}

// Bursts of two tasks, each burst run to its end before the next: the workers that went idle last
// take the next burst, so a few workers of sixteen run them all (the decode of an `a[t]`'s chunks
// on threads whose scratch is faulted in and whose caches are warm). Woken first-come, the bursts
// rotate through every worker. The pause between bursts lets the two workers go back to sleep (a
// worker held up longer only adds one more thread to the count).
TEST(ThreadPoolTest, BurstsRunOnTheWorkersThatWentIdleLast) {
  ThreadPool pool(16);
  std::mutex mutex;
  std::condition_variable done;
  std::vector<std::thread::id> ran;
  for (int burst = 0; burst < 100; ++burst) {
    for (int task = 0; task < 2; ++task) {
      pool.Submit([&] {
        std::lock_guard<std::mutex> lock(mutex);
        ran.push_back(std::this_thread::get_id());
        done.notify_all();
      });
    }
    std::unique_lock<std::mutex> lock(mutex);
    done.wait(lock, [&] { return ran.size() == 2u * (burst + 1); });
    lock.unlock();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  std::sort(ran.begin(), ran.end());
  const size_t workers = std::unique(ran.begin(), ran.end()) - ran.begin();
  EXPECT_LE(workers, 6u) << "200 tasks in bursts of two ran on " << workers << " of 16 workers";
}

TEST(UsableCoresTest, LocalRanksShareTheCores) {
  const size_t cores = UsableCores();
  unsetenv("LOCAL_WORLD_SIZE");
  EXPECT_EQ(CoresPerLocalRank().value(), cores);
  setenv("LOCAL_WORLD_SIZE", "2", 1);
  EXPECT_EQ(CoresPerLocalRank().value(), std::max<size_t>(1, cores / 2));
  setenv("LOCAL_WORLD_SIZE", "100000", 1);
  EXPECT_EQ(CoresPerLocalRank().value(), 1u);
  for (const char* bad : {"two", "0", "-1", "2x"}) {
    setenv("LOCAL_WORLD_SIZE", bad, 1);
    const Result<size_t> cores_per_rank = CoresPerLocalRank();
    ASSERT_FALSE(cores_per_rank.ok()) << bad;
    EXPECT_EQ(cores_per_rank.status().code(), ErrorCode::kConfig);
    EXPECT_NE(cores_per_rank.status().message().find("LOCAL_WORLD_SIZE='" + std::string(bad) + "'"),
              std::string::npos);
  }
  unsetenv("LOCAL_WORLD_SIZE");
}

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

TEST(ParallelForTest, AnAllocationFailureInATaskIsAnErrorValue) {
  // On a pool thread (not only the caller's): an exception must not leave a worker.
  ThreadPool pool(2);
  for (const size_t failing : {size_t{0}, size_t{7}}) {
    Status s = ParallelFor(&pool, 64, [&](size_t i) -> Status {
      if (i == failing) throw std::bad_alloc();
      return Status::Ok();
    });
    EXPECT_EQ(s.code(), ErrorCode::kOutOfMemory) << s.ToString();
  }
  Status serial = ParallelFor(nullptr, 4, [](size_t) -> Status { throw std::bad_alloc(); });
  EXPECT_EQ(serial.code(), ErrorCode::kOutOfMemory);
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

TEST(TaskGroupTest, RunsScheduledTasksOnThePoolWithinItsLimit) {
  ThreadPool pool(4);
  std::atomic<int> running{0}, most{0}, done{0}, on_caller{0};
  const std::thread::id caller = std::this_thread::get_id();
  TaskGroup group(
      &pool, 200,
      [&](size_t) {
        int now = ++running;
        int seen = most.load();
        while (now > seen && !most.compare_exchange_weak(seen, now)) {
        }
        on_caller += std::this_thread::get_id() == caller;
        std::this_thread::yield();
        --running;
        ++done;
      },
      2);
  for (size_t i = 0; i < 200; ++i) group.Schedule(i);
  group.WaitUntil([&] { return done.load() == 200; });
  EXPECT_LE(most.load(), 2);
  EXPECT_EQ(on_caller.load(), 0) << "the waiting caller is not a worker: it must not run tasks";
}

TEST(TaskGroupTest, ScheduleFirstRunsAheadOfWaitingTasks) {
  ThreadPool pool(1);
  std::mutex mutex;
  std::condition_variable cv;
  bool release = false;
  // Keep the only worker busy until every task is queued, so the order is the queue's.
  pool.Submit([&] {
    std::unique_lock<std::mutex> lock(mutex);
    cv.wait(lock, [&] { return release; });
  });
  std::vector<size_t> order;  // written by the one worker only
  std::atomic<int> done{0};
  TaskGroup* self = nullptr;
  TaskGroup group(&pool, 4, [&](size_t i) {
    order.push_back(i);
    if (i == 0) self->ScheduleFirst(3);
    ++done;
  });
  self = &group;
  for (size_t i = 0; i < 3; ++i) group.Schedule(i);
  {
    std::lock_guard<std::mutex> lock(mutex);
    release = true;
  }
  cv.notify_all();
  group.WaitUntil([&] { return done.load() == 4; });
  EXPECT_EQ(order, (std::vector<size_t>{0, 3, 1, 2}));
}

TEST(TaskGroupTest, TasksMayBeScheduledFromOtherThreads) {
  ThreadPool pool(2);
  std::atomic<int> done{0};
  TaskGroup group(&pool, 64, [&](size_t) { ++done; });
  std::thread io([&] {
    for (size_t i = 0; i < 64; ++i) group.Schedule(i);
  });
  group.WaitUntil([&] { return done.load() == 64; });
  io.join();
}

TEST(TaskGroupTest, WorkersWaitingOnTheirOwnGroupsRunTheirTasks) {
  ThreadPool pool(2);
  std::atomic<int> total{0}, finished{0};
  // Every worker waits on a group of its own: nobody else is left to run the tasks.
  for (int k = 0; k < 2; ++k) {
    pool.Submit([&] {
      std::atomic<int> done{0};
      TaskGroup group(&pool, 16, [&](size_t) {
        ++total;
        ++done;
      });
      for (size_t i = 0; i < 16; ++i) group.Schedule(i);
      group.WaitUntil([&] { return done.load() == 16; });
      ++finished;
    });
  }
  while (finished.load() < 2) std::this_thread::yield();
  EXPECT_EQ(total.load(), 32);
}

TEST(StatusTest, ContextIsPrepended) {
  Status s = NotFoundError("no such key").WithContext("reading chunk 'c/0'");
  EXPECT_EQ(s.message(), "reading chunk 'c/0': no such key");
  EXPECT_TRUE(Status::Ok().WithContext("x").ok());
}

// A pool made before fork() works in the child on workers of its own: the parent's are gone there,
// one of them busy at the fork with a task, others queued behind it. Destroying pools in the child,
// used there or not, waits for none of the parent's workers.
TEST(ThreadPoolTest, AForkedChildRunsItsTasksOnWorkersOfItsOwn) {
  auto used = std::make_shared<ThreadPool>(2);
  auto unused = std::make_shared<ThreadPool>(2);
  std::mutex mutex;
  std::condition_variable cv;
  bool release = false;
  std::atomic<bool> started{false};
  auto blocker = [&] {
    started = true;
    std::unique_lock<std::mutex> lock(mutex);
    cv.wait(lock, [&] { return release; });
  };
  used->Submit(blocker);
  used->Submit(blocker);
  used->Submit(blocker);  // queued: both workers are busy
  while (!started) std::this_thread::yield();
  ExpectChildSucceeds([&] {
    std::atomic<size_t> sum{0};
    const Status s = ParallelFor(used.get(), 1000, [&](size_t i) {
      sum += i;
      return Status::Ok();
    });
    if (!s.ok() || sum != 999 * 1000 / 2) return 1;
    std::atomic<int> ran{0};
    {
      TaskGroup group(used.get(), 10, [&](size_t) { ++ran; });
      for (size_t i = 0; i < 10; ++i) group.Schedule(i);
      group.WaitUntil([&] { return ran == 10; });
    }
    used.reset();
    unused.reset();
    return ran == 10 ? 0 : 2;
  });
  {
    std::lock_guard<std::mutex> lock(mutex);
    release = true;
  }
  cv.notify_all();
  // The parent's pool runs on, the queued task included.
  std::atomic<int> after{0};
  EXPECT_TRUE(ParallelFor(used.get(), 4, [&](size_t) {
                ++after;
                return Status::Ok();
              }).ok());
  EXPECT_EQ(after, 4);
}

}  // namespace
}  // namespace zarrstream

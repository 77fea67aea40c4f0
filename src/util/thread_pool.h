// ThreadPool: a fixed set of worker threads running submitted tasks, and ParallelFor on top of it.
//
// One pool is created per top-level object that needs parallelism (an opened array's read context,
// a loader) and passed down explicitly; there are no hidden global pools, so the thread budget is
// the one the caller sets. ParallelFor may be called from inside a pool task: the calling thread
// works through the indices itself, so nested parallelism never deadlocks and never adds threads.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "zarrstream/status.h"

namespace zarrstream {

class ThreadPool {
 public:
  // Starts `num_threads` workers (0 means std::thread::hardware_concurrency()).
  explicit ThreadPool(size_t num_threads = 0);
  // Runs every task already submitted, then joins the workers.
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  size_t num_threads() const { return workers_.size(); }

  // Queues `task` to run on a worker. Thread-safe.
  void Submit(std::function<void()> task);

 private:
  void WorkerLoop();

  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  bool stopping_ = false;
  std::vector<std::thread> workers_;
};

// Runs fn(i) for i in [0, n) on `pool` and the calling thread, at most `max_parallelism` at once
// (0: the pool's size, the caller counted as one). Returns the first error a call returned; after
// an error, indices not yet started are skipped. `pool` may be null (runs serially).
Status ParallelFor(ThreadPool* pool, size_t n, const std::function<Status(size_t)>& fn,
                   size_t max_parallelism = 0);

}  // namespace zarrstream

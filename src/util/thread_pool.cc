#include "util/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <memory>

namespace zarrstream {

ThreadPool::ThreadPool(size_t num_threads) {
  if (num_threads == 0) num_threads = std::max(1u, std::thread::hardware_concurrency());
  workers_.reserve(num_threads);
  for (size_t i = 0; i < num_threads; ++i) workers_.emplace_back([this] { WorkerLoop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (auto& w : workers_) w.join();
}

void ThreadPool::Submit(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(std::move(task));
  }
  cv_.notify_one();
}

void ThreadPool::WorkerLoop() {
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping and drained
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    task();
  }
}

namespace {

// Shared between the caller and the helper tasks of one ParallelFor. Helpers hold a shared_ptr so
// a helper that starts after the caller returned finds no work and touches nothing else.
struct ParallelForState {
  const std::function<Status(size_t)>* fn;
  size_t n;
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  std::mutex mutex;
  std::condition_variable done_cv;
  size_t running_helpers = 0;
  bool closed = false;  // set by the caller once it stops waiting for new helpers
  Status first_error;

  void Work() {
    for (;;) {
      if (failed.load(std::memory_order_relaxed)) return;
      size_t i = next.fetch_add(1, std::memory_order_relaxed);
      if (i >= n) return;
      Status s = (*fn)(i);
      if (!s.ok()) {
        std::lock_guard<std::mutex> lock(mutex);
        if (!failed.exchange(true)) first_error = std::move(s);
      }
    }
  }
};

}  // namespace

Status ParallelFor(ThreadPool* pool, size_t n, const std::function<Status(size_t)>& fn,
                   size_t max_parallelism) {
  if (n == 0) return Status::Ok();
  if (pool == nullptr || n == 1) {
    for (size_t i = 0; i < n; ++i) ZS_RETURN_IF_ERROR(fn(i));
    return Status::Ok();
  }
  // The caller works too, so `num_threads` helpers-or-caller keep every pool thread busy without
  // oversubscribing the cores the pool was sized for.
  if (max_parallelism == 0) max_parallelism = pool->num_threads();
  size_t helpers = std::min(n, max_parallelism) - 1;
  auto state = std::make_shared<ParallelForState>();
  state->fn = &fn;
  state->n = n;
  for (size_t h = 0; h < helpers; ++h) {
    pool->Submit([state] {
      {
        std::lock_guard<std::mutex> lock(state->mutex);
        if (state->closed) return;  // the caller finished; `fn` may no longer exist
        ++state->running_helpers;
      }
      state->Work();
      std::lock_guard<std::mutex> lock(state->mutex);
      if (--state->running_helpers == 0) state->done_cv.notify_all();
    });
  }
  state->Work();
  // Every index is claimed. Wait only for helpers already inside Work(): a helper still queued
  // (perhaps behind tasks that are themselves waiting here) must not be waited for, or nested
  // ParallelFor calls on a busy pool would deadlock.
  std::unique_lock<std::mutex> lock(state->mutex);
  state->closed = true;
  state->done_cv.wait(lock, [&] { return state->running_helpers == 0; });
  return state->first_error;
}

}  // namespace zarrstream

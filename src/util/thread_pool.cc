#include "util/thread_pool.h"

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "util/checked_size.h"
#include "util/fork_safety.h"

namespace zarrstream {

size_t UsableCores() {
  // A set big enough for any machine's CPU numbers (glibc's cpu_set_t stops at 1024).
  const size_t cpus = std::max<size_t>(std::thread::hardware_concurrency(), 1024) * 4;
  cpu_set_t* set = CPU_ALLOC(cpus);
  if (set != nullptr) {
    const size_t bytes = CPU_ALLOC_SIZE(cpus);
    const int count = sched_getaffinity(0, bytes, set) == 0 ? CPU_COUNT_S(bytes, set) : 0;
    CPU_FREE(set);
    if (count > 0) return static_cast<size_t>(count);
  }
  return std::max(1u, std::thread::hardware_concurrency());
}

Result<size_t> CoresPerLocalRank() {
  const char* value = std::getenv("LOCAL_WORLD_SIZE");
  if (value == nullptr || *value == '\0') return UsableCores();
  const std::string_view text(value);
  size_t ranks = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), ranks);
  if (error != std::errc() || end != text.data() + text.size() || ranks == 0) {
    return ConfigError("LOCAL_WORLD_SIZE='" + std::string(text) +
                       "': expected the number of ranks on this machine (torchrun sets it)");
  }
  return std::max<size_t>(1, UsableCores() / ranks);
}

namespace {

// The pool whose worker the current thread is (null on other threads).
thread_local const ThreadPool* current_pool = nullptr;

}  // namespace

// Idle workers sleep on a stack, and a submitted task wakes the one that went idle last: a burst of
// a few tasks (the chunks of one `a[t]`) runs on the same few threads call after call, whose
// scratch buffers are faulted in and whose caches are warm, instead of rotating through every
// worker of the pool as one shared condition variable's wake-ups do.
struct ThreadPool::Workers {
  // One worker's wake-up: set and taken off the `idle` stack by whoever wakes it.
  struct Sleeper {
    std::condition_variable cv;
    bool woken = false;
  };

  // Starts `count` threads running tasks for `pool`.
  Workers(const ThreadPool* pool, size_t count) : fork_generation(ForkGeneration()) {
    threads.reserve(count);
    idle.reserve(count);
    for (size_t i = 0; i < count; ++i) sleepers.push_back(std::make_unique<Sleeper>());
    try {
      for (size_t i = 0; i < count; ++i) {
        threads.emplace_back([this, pool, i] { Run(pool, *sleepers[i]); });
      }
    } catch (...) {
      // No destructor runs for a constructor that throws, and a joinable std::thread destroyed
      // aborts the process.
      Stop();
      throw;
    }
  }

  void Run(const ThreadPool* pool, Sleeper& self) {
    current_pool = pool;
    std::unique_lock<std::mutex> lock(mutex);
    for (;;) {
      while (queue.empty() && !stopping) {
        self.woken = false;
        idle.push_back(&self);
        self.cv.wait(lock, [&self] { return self.woken; });
      }
      if (queue.empty()) return;  // stopping and drained
      std::function<void()> task = std::move(queue.front());
      queue.pop_front();
      lock.unlock();
      task();
      task = nullptr;  // its captures go before the lock is taken again
      lock.lock();
    }
  }

  // Takes the worker that went idle last off the stack and returns it, to be notified (its sleeper
  // lives as long as the workers, so the lock need not be held for that); null when every worker
  // is busy (one takes the task when it is done). Called with `mutex` held.
  Sleeper* TakeIdle() {
    if (idle.empty()) return nullptr;
    Sleeper* sleeper = idle.back();
    idle.pop_back();
    sleeper->woken = true;
    return sleeper;
  }

  // Runs the queued tasks and joins the threads.
  void Stop() {
    {
      std::lock_guard<std::mutex> lock(mutex);
      stopping = true;
      while (Sleeper* sleeper = TakeIdle()) sleeper->cv.notify_one();
    }
    for (auto& t : threads) t.join();
  }

  const uint64_t fork_generation;  // the process the threads run in
  std::mutex mutex;
  std::deque<std::function<void()>> queue;
  bool stopping = false;
  std::vector<std::unique_ptr<Sleeper>> sleepers;  // one per thread, as long as the threads
  std::vector<Sleeper*> idle;  // the sleeping workers, the one that went idle last on top
  std::vector<std::thread> threads;
};

ThreadPool::ThreadPool(size_t num_threads)
    : num_threads_(num_threads == 0 ? UsableCores() : num_threads),
      workers_(new Workers(this, num_threads_)) {}

ThreadPool::~ThreadPool() {
  Workers* workers = workers_.load(std::memory_order_acquire);
  // Inherited through fork() and never used here: its threads are gone and its lock may be held
  // by one of them, so it is left as it is.
  if (workers->fork_generation != ForkGeneration()) return;
  workers->Stop();
  delete workers;
}

ThreadPool::Workers& ThreadPool::ForThisProcess() {
  Workers* workers = workers_.load(std::memory_order_acquire);
  if (workers->fork_generation == ForkGeneration()) return *workers;
  static ForkSafeMutex restart_mutex;
  std::lock_guard<ForkSafeMutex> lock(restart_mutex);
  workers = workers_.load(std::memory_order_acquire);
  if (workers->fork_generation != ForkGeneration()) {
    // The parent's workers are never freed: threads that are gone may hold their lock and wait
    // on their condition, and their queued tasks belong to the parent.
    workers = new Workers(this, num_threads_);
    workers_.store(workers, std::memory_order_release);
  }
  return *workers;
}

void ThreadPool::Submit(std::function<void()> task) {
  Workers& workers = ForThisProcess();
  Workers::Sleeper* sleeper;
  {
    std::lock_guard<std::mutex> lock(workers.mutex);
    workers.queue.push_back(std::move(task));
    sleeper = workers.TakeIdle();
  }
  if (sleeper != nullptr) sleeper->cv.notify_one();
}

bool ThreadPool::OnWorkerThread() const { return current_pool == this; }

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
      Status s = CatchOutOfMemory("a parallel task", [&] { return (*fn)(i); });
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
    for (size_t i = 0; i < n; ++i) {
      ZS_RETURN_IF_ERROR(CatchOutOfMemory("a parallel task", [&] { return fn(i); }));
    }
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

// Shared by a TaskGroup and the runner tasks it submits. Runners hold a shared_ptr, so one that
// finds no work after the group is gone touches only this.
struct TaskGroup::State {
  ThreadPool* pool;
  std::function<void(size_t)> fn;
  size_t max_runners;
  std::mutex mutex;
  // Waiters sleep here. Wake-ups are only what a waiter needs (new work for a helping waiter, the
  // group going idle, Notify): a decode finishing must not wake a caller that cannot use it.
  std::condition_variable changed;
  // Scheduled indices not yet started: a ring buffer over `queue` (each index is scheduled at most
  // once, so n slots always suffice).
  std::vector<size_t> queue;
  size_t head = 0;
  size_t queued = 0;
  size_t running = 0;  // tasks started and not finished
  size_t runners = 0;  // runner tasks submitted to the pool and not yet exited
  size_t waiting = 0;  // threads in WaitUntil
  size_t helpers_waiting = 0;

  // Runs the next queued task. Called with `lock` held and a task queued; returns with it held.
  void RunOne(std::unique_lock<std::mutex>& lock) {
    const size_t i = queue[head];
    head = (head + 1) % queue.size();
    --queued;
    ++running;
    lock.unlock();
    fn(i);
    lock.lock();
    --running;
    if (waiting > 0 && running == 0 && queued == 0) changed.notify_all();
  }
};

TaskGroup::TaskGroup(ThreadPool* pool, size_t n, std::function<void(size_t)> fn,
                     size_t max_parallelism)
    : state_(std::make_shared<State>()) {
  state_->pool = pool;
  state_->fn = std::move(fn);
  state_->max_runners =
      max_parallelism > 0 ? max_parallelism : (pool != nullptr ? pool->num_threads() : 1);
  state_->queue.resize(std::max<size_t>(n, 1));
}

TaskGroup::~TaskGroup() {
  WaitUntil([this] { return state_->queued == 0 && state_->running == 0; });
}

void TaskGroup::Schedule(size_t i) { Add(std::span<const size_t>(&i, 1), false); }
void TaskGroup::ScheduleFirst(size_t i) { Add(std::span<const size_t>(&i, 1), true); }
void TaskGroup::Schedule(std::span<const size_t> indices) { Add(indices, false); }

void TaskGroup::Add(std::span<const size_t> indices, bool first) {
  if (indices.empty()) return;
  // The tasks may run and the group go away before this returns: keep the state alive.
  std::shared_ptr<State> state = state_;
  std::lock_guard<std::mutex> lock(state->mutex);
  const size_t slots = state->queue.size();
  for (size_t i : indices) {
    if (first) {
      state->head = (state->head + slots - 1) % slots;
      state->queue[state->head] = i;
    } else {
      state->queue[(state->head + state->queued) % slots] = i;
    }
    ++state->queued;
  }
  // Submitting under the lock: once it is released the tasks may have run, and the group's owner
  // may already have destroyed the pool.
  while (state->pool != nullptr && state->runners < state->max_runners &&
         state->runners < state->queued + state->running) {
    ++state->runners;
    state->pool->Submit([state] {
      std::unique_lock<std::mutex> runner_lock(state->mutex);
      while (state->queued > 0) state->RunOne(runner_lock);
      --state->runners;
    });
  }
  if (state->helpers_waiting > 0) state->changed.notify_all();
}

void TaskGroup::Notify() {
  std::lock_guard<std::mutex> lock(state_->mutex);
  if (state_->waiting > 0) state_->changed.notify_all();
}

void TaskGroup::WaitUntil(const std::function<bool()>& done) {
  State& state = *state_;
  const bool helps = state.pool == nullptr || state.pool->OnWorkerThread();
  std::unique_lock<std::mutex> lock(state.mutex);
  while (!done()) {
    if (helps && state.queued > 0) {
      // One task at a time, so `done` is checked between tasks.
      state.RunOne(lock);
      continue;
    }
    ++state.waiting;
    state.helpers_waiting += helps;
    state.changed.wait(lock);
    --state.waiting;
    state.helpers_waiting -= helps;
  }
}

}  // namespace zarrstream

// ThreadPool: a fixed set of worker threads running submitted tasks, and ParallelFor and TaskGroup
// on top of it.
//
// One pool is created per top-level object that needs parallelism (an opened array's read context,
// a loader) and passed down explicitly; there are no hidden global pools, so the thread budget is
// the one the caller sets. ParallelFor may be called from inside a pool task: the calling thread
// works through the indices itself, so nested parallelism never deadlocks and never adds threads.
//
// fork(): a pool used in a fork()ed child starts workers of its own there; the parent's, and the
// tasks queued for them, are left as they are (util/fork_safety.h).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

#include "zarrstream/status.h"

namespace zarrstream {

// The cores this process may run on (its CPU affinity, which taskset, cpusets and job schedulers
// narrow), at least 1: what "one thread per core" means everywhere in zarrstream. Thread-safe.
size_t UsableCores();
// UsableCores() shared among the processes a launcher started on this machine for one job
// (LOCAL_WORLD_SIZE, as torchrun sets it; one when unset), at least 1: the default thread budget of
// a data loader and its remote reads, so that N ranks do not run N threads per core between them.
// A LOCAL_WORLD_SIZE that is not a positive number is a kConfig error naming it.
Result<size_t> CoresPerLocalRank();

class ThreadPool {
 public:
  // Starts `num_threads` workers (0 means UsableCores()). Throws std::system_error where a worker
  // cannot start, after stopping and joining those that did.
  explicit ThreadPool(size_t num_threads = 0);
  // Runs every task already submitted, then joins the workers (those of this process: a pool
  // inherited through fork() and never used in the child has none to join).
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  size_t num_threads() const { return num_threads_; }

  // Queues `task` to run on a worker. Thread-safe. Tasks start in the order they were submitted;
  // an idle worker is woken for each, the one that went idle last, so that a few tasks at a time
  // keep running on the same (warm) workers. In a fork()ed child, the first call starts this
  // process's workers (throwing std::system_error, as the constructor, where none can start).
  void Submit(std::function<void()> task);

  // True when the calling thread is one of this pool's workers.
  bool OnWorkerThread() const;

 private:
  // The workers of one process and their queue.
  struct Workers;
  // The workers of the calling process, started here after a fork().
  Workers& ForThisProcess();

  const size_t num_threads_;
  std::atomic<Workers*> workers_;
};

// Runs fn(i) for i in [0, n) on `pool` and the calling thread, at most `max_parallelism` at once
// (0: the pool's size, the caller counted as one). Returns the first error a call returned; after
// an error, indices not yet started are skipped. `pool` may be null (runs serially).
Status ParallelFor(ThreadPool* pool, size_t n, const std::function<Status(size_t)>& fn,
                   size_t max_parallelism = 0);

// Tasks fn(i), i in [0, n), run on `pool` at most `max_parallelism` at once (0: the pool's size),
// for callers that must not do the work themselves (a loader's coordinating thread, outside the
// thread budget) or that learn of work on other threads (an I/O completion schedules the decode of
// the bytes it delivered). Each index is scheduled at most once, from any thread, by Schedule
// (after the tasks already waiting) or ScheduleFirst (before them: a running task's follow-up work,
// so that work started is finished before new work starts, which bounds the memory in use).
//
// A thread waiting in WaitUntil runs no tasks, unless it is a worker of `pool` or `pool` is null:
// then it runs scheduled tasks itself while it waits, so a caller running on the pool never waits
// for workers it occupies (it may then add one to max_parallelism). Tasks must not wait for other
// tasks of the pool; waiting for I/O is fine.
class TaskGroup {
 public:
  TaskGroup(ThreadPool* pool, size_t n, std::function<void(size_t)> fn, size_t max_parallelism = 0);
  // Waits until no scheduled task is waiting or running.
  ~TaskGroup();
  TaskGroup(const TaskGroup&) = delete;
  TaskGroup& operator=(const TaskGroup&) = delete;

  // Thread-safe. The group may be destroyed as soon as the task has run, even while Schedule is
  // still returning: it touches nothing of the group's owner after queueing the task.
  void Schedule(size_t i);
  void ScheduleFirst(size_t i);
  // Schedules each of `indices` in order (one lock for all of them).
  void Schedule(std::span<const size_t> indices);

  // Blocks until `done()` holds. It is checked when called, whenever the group has no task queued
  // or running, and after Notify(); it should read atomics that tasks set before calling Notify.
  void WaitUntil(const std::function<bool()>& done);
  // Wakes the threads in WaitUntil to check their condition again.
  void Notify();

 private:
  struct State;
  void Add(std::span<const size_t> indices, bool first);

  std::shared_ptr<State> state_;
};

}  // namespace zarrstream

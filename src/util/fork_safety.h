// zarrstream after fork(): what a child process inherits and must not use.
//
// A fork()ed child has one thread, the one that called fork(). The threads of the parent's pools,
// HTTP I/O loops and loaders are not there, and a mutex one of them held at the fork stays locked
// forever. So:
// - Objects that own threads (ThreadPool, CurlTransport) record the ForkGeneration they were
//   started in. Used in a later generation, they start fresh threads (and fresh locks and queues)
//   for this process and leave the inherited ones untouched and unfreed: the child never waits for
//   a thread that does not exist, joins it, or locks what it held. Arrays, groups and stores opened
//   in the parent therefore read in the child (a DataLoader worker) as in the parent.
// - Process-wide state that many threads lock (the buffer cache, the registries, the shared pool
//   and transport) is guarded by ForkSafeMutex: the thread calling fork() holds every such mutex
//   across the fork, so the state is consistent and unlocked in both processes afterwards.
// - A Loader is not restarted in a child: its batches in flight, its position and its producer's
//   state belong to the parent's threads. Using one there is a kConfig error naming fork()
//   (Loader::CheckProcess).
// posix_spawn and vfork+exec (subprocess) run none of this; threads made in the child are the
// child's own and behave as in any process.
#pragma once

#include <cstdint>
#include <mutex>

namespace zarrstream {

// 0 in the process zarrstream was loaded in; in a fork()ed child, one more than in its parent at
// the fork. An object made with generation g and used with another was inherited through fork().
// Thread-safe and cheap (one atomic load).
uint64_t ForkGeneration();

// A mutex for process-wide state (registries, caches, the shared pool and transport): held by the
// thread that calls fork() from just before the fork to just after it, in parent and child, so
// that neither finds it locked by a thread that is gone nor the state it guards half changed. A
// Lockable (use std::lock_guard). Meant for state that lives as long as the process: each one
// made stays on the list fork() walks (a few bytes) even once destroyed.
//
// Code holding one must not wait for anything the forking thread may hold (the Python GIL): it is
// a leaf lock, or holds only other ForkSafeMutexes, which fork() acquires without deadlock
// whatever order code takes them in.
class ForkSafeMutex {
 public:
  ForkSafeMutex();
  ForkSafeMutex(const ForkSafeMutex&) = delete;
  ForkSafeMutex& operator=(const ForkSafeMutex&) = delete;

  void lock() { node_->mutex.lock(); }
  bool try_lock() { return node_->mutex.try_lock(); }
  void unlock() { node_->mutex.unlock(); }

  // One entry of the list fork() walks; never freed.
  struct Node {
    std::mutex mutex;
    Node* next = nullptr;  // the one made before this
  };

 private:
  Node* const node_;
};

}  // namespace zarrstream

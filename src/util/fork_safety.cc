#include "util/fork_safety.h"

#include <pthread.h>

#include <atomic>
#include <thread>

namespace zarrstream {

namespace {

using Node = ForkSafeMutex::Node;

std::atomic<uint64_t> fork_generation{0};

// Every ForkSafeMutex made, newest first. Pushed without a lock, so that one may be made while
// others are held, by a fork() or not.
std::atomic<Node*> newest{nullptr};

Node* Push() {
  auto* node = new Node;  // never freed: fork() may be walking the list
  node->next = newest.load(std::memory_order_relaxed);
  while (!newest.compare_exchange_weak(node->next, node, std::memory_order_release,
                                       std::memory_order_relaxed)) {
  }
  return node;
}

// Locks every mutex of the list from `first` on without deadlock, whatever order other threads
// take them in (std::lock's method): block on one, try the rest; on a failure release them and
// block on the one that failed.
void LockAll(Node* first) {
  Node* blocking = first;
  while (blocking != nullptr) {
    blocking->mutex.lock();
    Node* failed = nullptr;
    for (Node* n = first; n != nullptr; n = n->next) {
      if (n != blocking && !n->mutex.try_lock()) {
        failed = n;
        break;
      }
    }
    if (failed == nullptr) return;
    for (Node* n = first; n != failed; n = n->next) {
      if (n != blocking) n->mutex.unlock();
    }
    blocking->mutex.unlock();
    blocking = failed;
    std::this_thread::yield();
  }
}

// The mutexes the handlers lock and unlock: those made before the fork began (one made during it
// is held by no one yet). fork() runs the handlers of one fork at a time.
Node* locked_at_fork = nullptr;

void BeforeFork() {
  locked_at_fork = newest.load(std::memory_order_acquire);
  LockAll(locked_at_fork);
}

// In both processes the thread that locked them is the one running this.
void AfterFork() {
  for (Node* n = locked_at_fork; n != nullptr; n = n->next) n->mutex.unlock();
}

void AfterForkInChild() {
  fork_generation.fetch_add(1, std::memory_order_relaxed);
  AfterFork();
}

// Registered when the library is loaded, before any thread of it exists.
[[maybe_unused]] const int fork_handlers =
    pthread_atfork(&BeforeFork, &AfterFork, &AfterForkInChild);

}  // namespace

uint64_t ForkGeneration() { return fork_generation.load(std::memory_order_relaxed); }

ForkSafeMutex::ForkSafeMutex() : node_(Push()) {}

}  // namespace zarrstream

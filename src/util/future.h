// Promise<T> / Future<T>: a one-shot result delivered across threads.
//
// Asynchronous operations (store reads) return a Future<T> that resolves to a Result<T>. A consumer
// either blocks with Wait() or registers one continuation with OnReady(), which runs on the thread
// that fulfils the promise (or immediately, on the caller's thread, if the result is already
// there). Continuations must be short: they run on I/O threads; hand heavy work to an executor.
#pragma once

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>

#include "zarrstream/status.h"

namespace zarrstream {

namespace internal {
template <typename T>
struct FutureState {
  std::mutex mutex;
  std::condition_variable cv;
  std::optional<Result<T>> result;
  std::function<void(Result<T>&)> continuation;
};
}  // namespace internal

template <typename T>
class Future {
 public:
  Future() = default;
  explicit Future(std::shared_ptr<internal::FutureState<T>> state) : state_(std::move(state)) {}

  // A future that is already resolved.
  static Future Ready(Result<T> result) {
    auto state = std::make_shared<internal::FutureState<T>>();
    state->result.emplace(std::move(result));
    return Future(std::move(state));
  }

  bool valid() const { return state_ != nullptr; }
  bool ready() const {
    std::lock_guard<std::mutex> lock(state_->mutex);
    return state_->result.has_value();
  }

  // Blocks until resolved and returns the result (moved out; call once).
  Result<T> Wait() {
    std::unique_lock<std::mutex> lock(state_->mutex);
    state_->cv.wait(lock, [&] { return state_->result.has_value(); });
    return std::move(*state_->result);
  }

  // Runs `fn(result)` once resolved: on the resolving thread, or now if already resolved. At most
  // one continuation per future; after it, Wait() must not be called.
  void OnReady(std::function<void(Result<T>&)> fn) {
    std::unique_lock<std::mutex> lock(state_->mutex);
    if (state_->result.has_value()) {
      lock.unlock();
      fn(*state_->result);
      return;
    }
    state_->continuation = std::move(fn);
  }

 private:
  std::shared_ptr<internal::FutureState<T>> state_;
};

template <typename T>
class Promise {
 public:
  Promise() : state_(std::make_shared<internal::FutureState<T>>()) {}

  Future<T> future() const { return Future<T>(state_); }

  // Resolves the future. Call exactly once.
  void Set(Result<T> result) {
    std::function<void(Result<T>&)> continuation;
    {
      std::lock_guard<std::mutex> lock(state_->mutex);
      state_->result.emplace(std::move(result));
      continuation = std::move(state_->continuation);
    }
    state_->cv.notify_all();
    if (continuation) continuation(*state_->result);
  }

 private:
  std::shared_ptr<internal::FutureState<T>> state_;
};

}  // namespace zarrstream

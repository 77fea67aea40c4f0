#include "loader/decode_share.h"

#include <algorithm>

namespace zarrstream {

DecodeShareController::DecodeShareController(double initial_share) {
  setting_.share = std::clamp(initial_share, 0.0, 1.0);
}

DecodeShareController::Setting DecodeShareController::Current() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return setting_;
}

void DecodeShareController::Observe(uint64_t generation, double waited_seconds,
                                    double interval_seconds) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (generation != setting_.generation || interval_seconds <= 0) return;
  if (waited_seconds >= kOverload * interval_seconds) {
    Lower(kOverloadStep);
    return;
  }
  ++window_batches_;
  window_waited_ += waited_seconds;
  window_seconds_ += interval_seconds;
  if (window_batches_ < kWindow) return;
  const double waiting = window_waited_ / window_seconds_;
  if (waiting > kWaitBudget) {
    Lower(kStep);
    return;
  }
  if (probing_) {  // the raised share held for a window: the next probe may come sooner
    probing_ = false;
    rise_windows_ = 1;
  }
  good_windows_ = waiting <= kRiseBelow ? good_windows_ + 1 : 0;
  if (good_windows_ >= rise_windows_ && setting_.share < 1) {
    Raise();
  } else {
    MoveTo(setting_.share);  // a fresh window judges it again
  }
}

void DecodeShareController::Lower(double step) {
  if (probing_) rise_windows_ = std::min(2 * rise_windows_, kMaxRiseWindows);
  probing_ = false;
  good_windows_ = 0;
  MoveTo(setting_.share - step);
}

void DecodeShareController::Raise() {
  probing_ = true;
  good_windows_ = 0;
  MoveTo(setting_.share + kStep);
}

void DecodeShareController::MoveTo(double share) {
  share = std::clamp(share, 0.0, 1.0);
  if (share != setting_.share) {
    setting_.share = share;
    ++setting_.generation;
  }
  window_batches_ = 0;
  window_waited_ = 0;
  window_seconds_ = 0;
}

}  // namespace zarrstream

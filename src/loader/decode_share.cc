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
                                    double early_seconds, double interval_seconds) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (generation != setting_.generation) return;
  double share = setting_.share;
  if (waited_seconds > 0) {
    share = std::max(0.0, share - kStepDown);
  } else if (interval_seconds > 0 && early_seconds >= kEarlyMargin * interval_seconds) {
    share = std::min(1.0, share + kStepUp);
  }
  if (share != setting_.share) {
    setting_.share = share;
    ++setting_.generation;
  }
}

}  // namespace zarrstream

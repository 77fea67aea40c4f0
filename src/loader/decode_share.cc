#include "loader/decode_share.h"

#include <algorithm>
#include <charconv>
#include <string>

#include "zarrstream/loader.h"

namespace zarrstream {

Result<DecodePlacement> ParseCpuDecodeShare(std::string_view text) {
  DecodePlacement placement;
  if (text == "auto") {
    placement.cpu_share = DecodePlacement::kAutoStart;
    placement.adaptive = true;
    return placement;
  }
  const auto [end, error] =
      std::from_chars(text.data(), text.data() + text.size(), placement.cpu_share);
  if (text.empty() || error != std::errc() || end != text.data() + text.size() ||
      !(placement.cpu_share >= 0 && placement.cpu_share <= 1)) {
    std::string s = "'";
    s += text;
    s += "': expected a share from 0 to 1 or 'auto'";
    return InvalidArgumentError(std::move(s));
  }
  return placement;
}

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

std::vector<uint8_t> ChunksDecodedOnGpu(std::span<const uint8_t> decodable, double cpu_share) {
  std::vector<uint8_t> on_gpu(decodable.size(), 0);
  uint64_t seen = 0;
  for (size_t k = 0; k < decodable.size(); ++k) {
    if (!decodable[k]) continue;
    // The CPU's running count floor(seen * share) steps up at this chunk: it is the CPU's.
    const bool to_cpu = static_cast<uint64_t>(static_cast<double>(seen + 1) * cpu_share) >
                        static_cast<uint64_t>(static_cast<double>(seen) * cpu_share);
    on_gpu[k] = to_cpu ? 0 : 1;
    ++seen;
  }
  return on_gpu;
}

DecodeShareController::Setting CurrentDecodeShare(const DecodeShareController* adaptive,
                                                  double cpu_share) {
  return adaptive ? adaptive->Current() : DecodeShareController::Setting{cpu_share, 0};
}

}  // namespace zarrstream

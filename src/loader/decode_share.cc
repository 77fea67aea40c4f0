#include "loader/decode_share.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstddef>
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

DecodeShareController::DecodeShareController(double initial_share, int startup_batches, Steps steps)
    : steps_(steps), startup_left_(startup_batches) {
  const double share = std::clamp(initial_share, 0.0, 1.0);
  level_ = static_cast<int>(std::lround(share * kLevels));
  setting_.share = static_cast<double>(level_) / kLevels;
  StartSearch(std::max(level_, kLevels - level_));
}

DecodeShareController::Setting DecodeShareController::Current() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return setting_;
}

void DecodeShareController::StayAtCpuEnd() {
  std::lock_guard<std::mutex> lock(mutex_);
  stay_at_cpu_end_ = true;
  searching_ = false;
  centre_ = kLevels;
  MoveTo(kLevels);
}

void DecodeShareController::PassOver(int batches) {
  std::lock_guard<std::mutex> lock(mutex_);
  startup_left_ = batches;
  window_.clear();
  window_waits_.clear();
}

void DecodeShareController::Observe(uint64_t generation, double waited_seconds,
                                    double interval_seconds) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (stay_at_cpu_end_ || generation != setting_.generation || !(interval_seconds > 0)) return;
  if (startup_left_ > 0) {
    --startup_left_;
    return;
  }
  if (!first_passed_) {
    first_passed_ = true;
    return;
  }
  if (steps_ == Steps::kOwn && waited_seconds >= kOverload * interval_seconds) {
    window_.clear();
    window_waits_.clear();
    Judge(interval_seconds, waited_seconds / interval_seconds);
    return;
  }
  window_.push_back(interval_seconds);
  window_waits_.push_back(waited_seconds);
  if (window_.size() < kWindow) return;
  // The mean, not the median: with two batches in flight the consumer often waits for every
  // second one, and a median picks one of the two kinds of interval. Spikes are left out.
  std::vector<double> sorted = window_;
  std::sort(sorted.begin(), sorted.end());
  const double median = (sorted[(kWindow - 1) / 2] + sorted[kWindow / 2]) / 2;
  double sum = 0, waited = 0;
  int counted = 0;
  for (size_t i = 0; i < window_.size(); ++i) {
    if (window_[i] > kSpike * median) continue;
    sum += window_[i];
    waited += window_waits_[i];
    ++counted;
  }
  window_.clear();
  window_waits_.clear();
  Judge(sum / counted, waited / sum);
}

void DecodeShareController::Judge(double seconds, double waited_share) {
  if (steps_ == Steps::kSharedWithRanks) {
    // This rank's waits are its own; the time per batch is every rank's.
    if (searching_) {
      measured_[level_] = seconds;
      SearchEnds();
    } else if (seconds > measured_[level_] * (1 + kChanged)) {
      StartSearch(kLevels);
      measured_[level_] = seconds;
      SearchEnds();
    } else {
      measured_[level_] = seconds;
    }
    return;
  }
  const bool unbeatable = level_ == kLevels && waited_share <= kTie;
  if (searching_) {
    measured_[level_] = seconds;
    if (unbeatable) {
      centre_ = level_;
      Settle(kMaxHoldWindows);
      return;
    }
    Search();
    return;
  }
  if (level_ != centre_) {  // a neighbour's probe
    measured_[level_] = seconds;
    if (Fastest({centre_, level_}) == level_) {
      // As fast or faster: it takes over, and the search goes on from there.
      const int settled = centre_;
      const double settled_seconds = measured_[settled];
      StartSearch(1);
      measured_[settled] = settled_seconds;
      Search();
      return;
    }
    hold_windows_ = std::min(2 * hold_windows_, kMaxHoldWindows);
    held_ = 0;
    MoveTo(centre_);
    return;
  }
  if (seconds > measured_[level_] * (1 + kChanged)) {
    StartSearch(2);
    measured_[level_] = seconds;
    Search();
    return;
  }
  measured_[level_] = seconds;
  // Every chunk on the CPU and no wait: no neighbour can do better (the header), so no probe
  // until a window in which the consumer waited.
  if (unbeatable) return;
  if (++held_ < hold_windows_) return;
  // Probe a neighbour, alternating above and below where both exist.
  const bool up = level_ == 0 || (level_ < kLevels && probe_up_);
  probe_up_ = !up;
  MoveTo(up ? level_ + 1 : level_ - 1);
}

void DecodeShareController::Search() {
  for (;;) {
    const int up = std::min(centre_ + span_, kLevels);
    const int down = std::max(centre_ - span_, 0);
    for (const int level : {centre_, up, down}) {
      if (measured_[level] == kUnmeasured) {
        MoveTo(level);
        return;
      }
    }
    const int fastest = Fastest({centre_, up, down});
    if (span_ > 1) {
      span_ /= 2;
    } else if (fastest == centre_) {
      Settle(1);
      return;
    }
    centre_ = fastest;
  }
}

void DecodeShareController::SearchEnds() {
  for (const int level : {kLevels, 0}) {
    if (measured_[level] == kUnmeasured) {
      MoveTo(level);
      return;
    }
  }
  centre_ = Fastest({0, kLevels});
  Settle(kMaxHoldWindows);
}

int DecodeShareController::Fastest(std::initializer_list<int> levels) const {
  double fastest = 0;
  for (const int level : levels) {
    if (measured_[level] != kUnmeasured && (fastest == 0 || measured_[level] < fastest)) {
      fastest = measured_[level];
    }
  }
  int chosen = -1;
  for (const int level : levels) {
    if (measured_[level] != kUnmeasured && measured_[level] <= fastest * (1 + kTie)) {
      chosen = std::max(chosen, level);
    }
  }
  return chosen;
}

void DecodeShareController::StartSearch(int span) {
  measured_.fill(kUnmeasured);
  searching_ = true;
  centre_ = level_;
  span_ = span;
}

void DecodeShareController::Settle(int hold_windows) {
  searching_ = false;
  held_ = 0;
  hold_windows_ = hold_windows;
  MoveTo(centre_);
}

void DecodeShareController::MoveTo(int level) {
  if (level != level_) {
    level_ = level;
    setting_.share = static_cast<double>(level) / kLevels;
    ++setting_.generation;
    first_passed_ = false;
  }
  window_.clear();
  window_waits_.clear();
}

std::vector<uint8_t> ChunksDecodedOnGpu(std::span<const uint8_t> decodable, double cpu_share,
                                        std::span<const uint64_t> objects) {
  std::vector<uint8_t> on_gpu(decodable.size(), 0);
  uint64_t seen = 0, on_cpu = 0;
  for (size_t k = 0; k < decodable.size();) {
    if (!decodable[k]) {
      ++k;
      continue;
    }
    // The run of decodable chunks of k's stored object.
    size_t end = k + 1;
    while (end < decodable.size() && decodable[end] && !objects.empty() &&
           objects[end] == objects[k]) {
      ++end;
    }
    const uint64_t run = end - k;
    // What the CPU is owed once the run is placed: floor((seen + run) * share), less what it has.
    const auto owed = static_cast<int64_t>(static_cast<double>(seen + run) * cpu_share) -
                      static_cast<int64_t>(on_cpu);
    const bool to_cpu = owed >= static_cast<int64_t>((run + 1) / 2);
    std::fill(on_gpu.begin() + static_cast<std::ptrdiff_t>(k),
              on_gpu.begin() + static_cast<std::ptrdiff_t>(end), to_cpu ? 0 : 1);
    if (to_cpu) on_cpu += run;
    seen += run;
    k = end;
  }
  return on_gpu;
}

DecodeShareController::Setting CurrentDecodeShare(const DecodeShareController* adaptive,
                                                  double cpu_share) {
  return adaptive ? adaptive->Current() : DecodeShareController::Setting{cpu_share, 0};
}

}  // namespace zarrstream

// A one-line progress bar on stderr for long CLI jobs: percent, bytes done, throughput and ETA.
// Draws only when stderr is a terminal (logs and pipes stay clean); Finish() ends the line.
// Update() may be called from any thread; redraws are throttled to a few per second.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>

namespace zarrstream::cli {

class ProgressBar {
 public:
  explicit ProgressBar(std::string label);

  void Update(uint64_t done_bytes, uint64_t total_bytes);
  // Draws the final state and ends the line (on a terminal).
  void Finish();

  // "1h02m", "3m05s", "12s".
  static std::string FormatDuration(double seconds);

 private:
  void Draw(uint64_t done, uint64_t total);

  std::string label_;
  bool enabled_;
  std::mutex mutex_;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_draw_;
  uint64_t done_ = 0;
  uint64_t total_ = 0;
};

}  // namespace zarrstream::cli

#include "cli/progress_bar.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>

#include "util/format.h"

namespace zarrstream::cli {

ProgressBar::ProgressBar(std::string label)
    : label_(std::move(label)),
      enabled_(::isatty(STDERR_FILENO) != 0),
      start_(std::chrono::steady_clock::now()),
      last_draw_(start_) {}

void ProgressBar::Update(uint64_t done_bytes, uint64_t total_bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  done_ = done_bytes;
  total_ = total_bytes;
  const auto now = std::chrono::steady_clock::now();
  if (!enabled_ || now - last_draw_ < std::chrono::milliseconds(250)) return;
  last_draw_ = now;
  Draw(done_, total_);
}

void ProgressBar::Finish() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!enabled_) return;
  Draw(done_, total_);
  std::fputc('\n', stderr);
}

void ProgressBar::Draw(uint64_t done, uint64_t total) {
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const double rate = elapsed > 0 ? static_cast<double>(done) / elapsed : 0.0;
  const double fraction = total ? static_cast<double>(done) / static_cast<double>(total) : 1.0;
  constexpr int kWidth = 24;
  std::string bar(kWidth, ' ');
  for (int i = 0; i < static_cast<int>(fraction * kWidth) && i < kWidth; ++i) bar[i] = '#';
  std::string eta = "--";
  if (rate > 0 && done < total) eta = FormatDuration(static_cast<double>(total - done) / rate);
  if (done >= total) eta = FormatDuration(elapsed);
  std::fprintf(stderr, "\r%s [%s] %5.1f%% %s / %s  %s/s  %s %s\x1b[K", label_.c_str(), bar.c_str(),
               100.0 * fraction, FormatBytes(static_cast<double>(done)).c_str(),
               FormatBytes(static_cast<double>(total)).c_str(), FormatBytes(rate).c_str(),
               done >= total ? "in" : "ETA", eta.c_str());
  std::fflush(stderr);
}

std::string ProgressBar::FormatDuration(double seconds) {
  const long long total = std::llround(seconds);
  char text[32];
  if (total >= 3600) {
    std::snprintf(text, sizeof(text), "%lldh%02lldm", total / 3600, (total / 60) % 60);
  } else if (total >= 60) {
    std::snprintf(text, sizeof(text), "%lldm%02llds", total / 60, total % 60);
  } else {
    std::snprintf(text, sizeof(text), "%llds", total);
  }
  return text;
}

}  // namespace zarrstream::cli

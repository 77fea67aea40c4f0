#include "loader/stage_timeline.h"

#include <algorithm>

namespace zarrstream::internal {

void TimelineRecorder::Add(const char* stage, uint64_t epoch, uint64_t batch,
                           Clock::time_point start, Clock::time_point end) {
  if (!enabled_) return;
  std::lock_guard<std::mutex> lock(mutex_);
  if (spans_.size() >= kMaxTimelineSpans) return;
  auto [it, added] =
      threads_.try_emplace(std::this_thread::get_id(), static_cast<uint32_t>(threads_.size()));
  spans_.push_back(TimelineSpan{stage, epoch, batch, it->second, Seconds(start - origin_),
                                Seconds(end - origin_)});
}

std::vector<TimelineSpan> TimelineRecorder::Spans() const {
  std::vector<TimelineSpan> spans;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    spans = spans_;
  }
  std::stable_sort(spans.begin(), spans.end(), [](const TimelineSpan& a, const TimelineSpan& b) {
    return a.start_seconds < b.start_seconds;
  });
  return spans;
}

}  // namespace zarrstream::internal

// The loader's stage spans (LoaderOptions::record_timeline, Loader::Timeline): a bounded,
// thread-safe recorder of when each stage of each batch ran, and StageSpan, one stage of one batch
// as a timeline span and an NVTX range. Kept apart from the producers so that the CPU and GPU paths
// time their stages the same way.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "util/nvtx_range.h"
#include "zarrstream/loader.h"

namespace zarrstream::internal {

using Clock = std::chrono::steady_clock;

inline double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }
inline uint64_t Nanoseconds(Clock::duration d) {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(d).count());
}

// Spans of the pipeline's stages, at most kMaxTimelineSpans. Thread-safe.
class TimelineRecorder {
 public:
  explicit TimelineRecorder(bool enabled) : enabled_(enabled), origin_(Clock::now()) {}

  void Add(const char* stage, uint64_t epoch, uint64_t batch, Clock::time_point start,
           Clock::time_point end);
  // The spans recorded so far, by start.
  std::vector<TimelineSpan> Spans() const;

 private:
  const bool enabled_;
  const Clock::time_point origin_;
  mutable std::mutex mutex_;
  std::vector<TimelineSpan> spans_;
  std::map<std::thread::id, uint32_t> threads_;
};

// One stage of one batch, from construction to End(): a span on the timeline (when recorded) and
// an NVTX range for Nsight Systems. The destructor ends it where End was not called (an error left
// the stage early).
class StageSpan {
 public:
  StageSpan(TimelineRecorder& timeline, const char* stage, uint64_t epoch, uint64_t batch,
            Clock::time_point start = Clock::now())
      : timeline_(timeline),
        stage_(stage),
        epoch_(epoch),
        batch_(batch),
        start_(start),
        range_(stage, batch) {}
  ~StageSpan() { End(); }
  StageSpan(const StageSpan&) = delete;
  StageSpan& operator=(const StageSpan&) = delete;

  Clock::time_point start() const { return start_; }
  // Ends the stage (once) and returns its end; its length is End() - start().
  Clock::time_point End() {
    if (!ended_) {
      end_ = Clock::now();
      ended_ = true;
      range_.End();
      timeline_.Add(stage_, epoch_, batch_, start_, end_);
    }
    return end_;
  }
  // Nanoseconds from start() to End() (ending it).
  uint64_t ElapsedNanoseconds() { return Nanoseconds(End() - start_); }

 private:
  TimelineRecorder& timeline_;
  const char* stage_;
  uint64_t epoch_, batch_;
  Clock::time_point start_, end_;
  bool ended_ = false;
  NvtxRange range_;
};

}  // namespace zarrstream::internal

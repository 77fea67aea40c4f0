// The records a rechunk job keeps in its destination: each part's progress (the plan it runs and
// the slabs it finished) and, once every part is done, the finished job's plan. They let a rerun
// resume an interrupted part and let a finished job's rerun find nothing to do.
#pragma once

#include <cstdint>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>

#include "store/store.h"
#include "zarrstream/status.h"

namespace zarrstream::tools {

// A part's record of finished slabs (global slab indices), kept as sorted disjoint ranges.
class SlabProgress {
 public:
  void MarkDone(uint64_t slab) {
    std::lock_guard<std::mutex> lock(mutex_);
    done_.insert(slab);
  }
  bool IsDone(uint64_t slab) const {
    std::lock_guard<std::mutex> lock(mutex_);
    return done_.count(slab) != 0;
  }
  nlohmann::json RangesJson() const {
    std::lock_guard<std::mutex> lock(mutex_);
    nlohmann::json ranges = nlohmann::json::array();
    for (auto it = done_.begin(); it != done_.end();) {
      uint64_t begin = *it;
      uint64_t end = begin + 1;
      for (++it; it != done_.end() && *it == end; ++it) ++end;
      ranges.push_back({begin, end});
    }
    return ranges;
  }
  Status LoadRanges(const nlohmann::json& ranges) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!ranges.is_array()) return MetadataError("\"done\" is not a list");
    for (const auto& range : ranges) {
      if (!range.is_array() || range.size() != 2 || !range[0].is_number_unsigned() ||
          !range[1].is_number_unsigned() || range[0].get<uint64_t>() > range[1].get<uint64_t>()) {
        return MetadataError("\"done\" holds a malformed range " + range.dump());
      }
      for (uint64_t s = range[0].get<uint64_t>(); s < range[1].get<uint64_t>(); ++s)
        done_.insert(s);
    }
    return Status::Ok();
  }

 private:
  mutable std::mutex mutex_;
  std::set<uint64_t> done_;
};

// The key of the finished job's record: what the last part of a finished job leaves in place of
// the parts' records, the job's plan, so that a rerun with the same options (a requeued batch job)
// finds the work done.
std::string FinishedKey();
// The key of the progress record of part `part` of `count`.
std::string StateKey(uint32_t part, uint32_t count);

// Reads the destination's progress record of one part; nullopt when there is none.
Result<std::optional<nlohmann::json>> ReadState(Store& store, uint32_t part, uint32_t count);

// The plan of the finished job recorded in the destination; nullopt when there is none.
Result<std::optional<nlohmann::json>> ReadFinishedPlan(Store& store);

// Replaces part `part` of `count`'s progress record (atomically where the store does).
Status WriteState(Store& store, uint32_t part, uint32_t count, const nlohmann::json& plan,
                  const SlabProgress& progress, bool complete);

// Removes the temporary objects of writes that never completed (a run killed while it wrote an
// object leaves one beside the object; the rerun writes the object again under another name).
// Only when the whole job is done: before that, another part may be writing one of them.
Status RemoveAbandonedTemporaries(Store& store);

}  // namespace zarrstream::tools

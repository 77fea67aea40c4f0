// Range coalescing: merges nearby byte ranges of one stored value into fewer reads, and maps each
// requested range back to its slice of a merged read.
//
// A request to object storage costs a round trip (tens of ms) whatever its size, while the bytes of
// a gap between two wanted ranges cost only bandwidth: reading the gap is cheaper than another
// request while gap / bandwidth < latency. Callers pick the thresholds for their store (the HTTP
// and S3 stores from their measured latency and bandwidth; the array layer for its shard reads).
// This is the one implementation of the rule; nothing else merges ranges.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "store/store.h"

namespace zarrstream {

struct CoalescingOptions {
  // Bounded ranges separated by at most this many unwanted bytes are read as one range.
  uint64_t max_gap_bytes = uint64_t{256} * 1024;
  // A merged range never grows past this many bytes (a range already larger stays one read): big
  // reads are better split so that they run in parallel and a retry repeats less.
  uint64_t max_merged_bytes = uint64_t{64} * 1024 * 1024;
};

// Where requested range i lies: `length` bytes at `offset` of merged read `read`. For ranges that
// are not kBounded (suffix, from-offset) the read is the range itself, and `length` is unknown
// until it is read: `whole_read` says to take all of it. Empty bounded ranges need no read
// (kNoRead).
struct RangeSlice {
  static constexpr size_t kNoRead = static_cast<size_t>(-1);
  size_t read = kNoRead;
  uint64_t offset = 0;
  uint64_t length = 0;
  bool whole_read = false;
};

struct CoalescedRanges {
  std::vector<ByteRange> reads;    // what to fetch: merged kBounded ranges, then the others
  std::vector<RangeSlice> slices;  // one per requested range, in request order
};

// Merges the kBounded ranges of `ranges` (in any order, overlapping or not) whose gaps are at most
// options.max_gap_bytes, without letting a merged read exceed options.max_merged_bytes. Suffix and
// from-offset ranges are passed through, one read each.
CoalescedRanges CoalesceRanges(std::span<const ByteRange> ranges, const CoalescingOptions& options);

}  // namespace zarrstream

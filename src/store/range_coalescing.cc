#include "store/range_coalescing.h"

#include <algorithm>

namespace zarrstream {

CoalescedRanges CoalesceRanges(std::span<const ByteRange> ranges,
                               const CoalescingOptions& options) {
  CoalescedRanges out;
  out.slices.resize(ranges.size());
  std::vector<size_t> bounded;
  for (size_t i = 0; i < ranges.size(); ++i) {
    if (ranges[i].kind == ByteRange::Kind::kBounded && ranges[i].length > 0) bounded.push_back(i);
  }
  std::sort(bounded.begin(), bounded.end(),
            [&](size_t a, size_t b) { return ranges[a].offset < ranges[b].offset; });
  for (size_t i : bounded) {
    const uint64_t begin = ranges[i].offset;
    const uint64_t end = begin + ranges[i].length;
    if (!out.reads.empty()) {
      ByteRange& last = out.reads.back();
      const uint64_t last_end = last.offset + last.length;
      const uint64_t merged_end = std::max(end, last_end);
      if (begin <= last_end + options.max_gap_bytes &&
          merged_end - last.offset <= options.max_merged_bytes) {
        last.length = merged_end - last.offset;
        out.slices[i] = {out.reads.size() - 1, begin - last.offset, ranges[i].length, false};
        continue;
      }
    }
    out.reads.push_back(ByteRange::Bounded(begin, end - begin));
    out.slices[i] = {out.reads.size() - 1, 0, ranges[i].length, false};
  }
  for (size_t i = 0; i < ranges.size(); ++i) {
    if (ranges[i].kind == ByteRange::Kind::kBounded) continue;
    out.reads.push_back(ranges[i]);
    out.slices[i] = {out.reads.size() - 1, 0, 0, true};
  }
  return out;
}

}  // namespace zarrstream

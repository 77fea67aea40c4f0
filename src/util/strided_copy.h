// Copies and fills of N-dimensional strided regions: how decoded chunks reach their place in an
// output array. Dimensions that are contiguous in both source and destination are merged first, so
// the common cases become a few large memcpy calls.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace zarrstream {

// Byte strides of a C-order array of `shape` with `element_size`-byte elements. A shape from
// metadata may declare more than INT64_MAX bytes: strides past that saturate at INT64_MAX (no
// buffer of such a shape exists, so nothing addresses with them).
std::vector<int64_t> CStrides(std::span<const uint64_t> shape, size_t element_size);

// Copies a region of `shape` elements of `element_size` bytes from `src` (byte strides
// `src_strides`) to `dst` (byte strides `dst_strides`). Regions must not overlap.
void CopyStrided(const std::byte* src, std::span<const int64_t> src_strides, std::byte* dst,
                 std::span<const int64_t> dst_strides, std::span<const uint64_t> shape,
                 size_t element_size);

// Writes the `element_size`-byte `value` to every element of the region.
void FillStrided(std::byte* dst, std::span<const int64_t> dst_strides,
                 std::span<const uint64_t> shape, std::span<const std::byte> value);

// True when a region of `shape` at `strides` is one C-order contiguous block. Any shape is
// taken (a chunk shape from metadata may multiply past INT64_MAX: such a region is contiguous
// only where its dims of extent above 1 stay below that).
bool IsCContiguous(std::span<const int64_t> strides, std::span<const uint64_t> shape,
                   size_t element_size);

}  // namespace zarrstream

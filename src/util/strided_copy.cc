#include "util/strided_copy.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "util/checked_size.h"

namespace zarrstream {

std::vector<int64_t> CStrides(std::span<const uint64_t> shape, size_t element_size) {
  // The bytes inside dims d.. so far, saturating: a shape from metadata may declare more than
  // INT64_MAX, and a stride past that is INT64_MAX.
  std::vector<int64_t> strides(shape.size());
  uint64_t bytes = element_size;
  for (size_t d = shape.size(); d-- > 0;) {
    strides[d] = static_cast<int64_t>(std::min<uint64_t>(bytes, INT64_MAX));
    bytes = SaturatingMul(bytes, shape[d]);
  }
  return strides;
}

bool IsCContiguous(std::span<const int64_t> strides, std::span<const uint64_t> shape,
                   size_t element_size) {
  // The bytes inside dims d.. so far, saturating; past INT64_MAX no stride can equal it, so any
  // further dim of extent above 1 is not contiguous.
  uint64_t expected = element_size;
  for (size_t d = shape.size(); d-- > 0;) {
    if (shape[d] == 0) return true;
    if (shape[d] == 1) continue;
    if (expected > static_cast<uint64_t>(INT64_MAX) ||
        strides[d] != static_cast<int64_t>(expected)) {
      return false;
    }
    expected = SaturatingMul(expected, shape[d]);
  }
  return true;
}

namespace {

// A region with dims of extent 1 dropped and dims contiguous in both arrays merged. The last dim
// is then the longest run that can be moved with one memcpy (or filled in one loop).
struct MergedRegion {
  std::vector<uint64_t> shape;
  std::vector<int64_t> src;
  std::vector<int64_t> dst;
};

MergedRegion Merge(std::span<const int64_t> src_strides, std::span<const int64_t> dst_strides,
                   std::span<const uint64_t> shape, size_t element_size) {
  MergedRegion m;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    int64_t s = src_strides[d];
    if (!m.shape.empty() && m.src.back() == s * static_cast<int64_t>(shape[d]) &&
        m.dst.back() == dst_strides[d] * static_cast<int64_t>(shape[d])) {
      m.shape.back() *= shape[d];
      m.src.back() = s;
      m.dst.back() = dst_strides[d];
      continue;
    }
    m.shape.push_back(shape[d]);
    m.src.push_back(s);
    m.dst.push_back(dst_strides[d]);
  }
  // A trailing "element" dimension makes the innermost loop uniform.
  m.shape.push_back(1);
  m.src.push_back(static_cast<int64_t>(element_size));
  m.dst.push_back(static_cast<int64_t>(element_size));
  // Fold the last real dim into the element run when both sides are contiguous there.
  size_t n = m.shape.size();
  if (n >= 2 && m.src[n - 2] == static_cast<int64_t>(element_size) &&
      m.dst[n - 2] == static_cast<int64_t>(element_size)) {
    m.shape[n - 1] = m.shape[n - 2];
    m.shape.erase(m.shape.end() - 2);
    m.src.erase(m.src.end() - 2);
    m.dst.erase(m.dst.end() - 2);
  }
  return m;
}

}  // namespace

void CopyStrided(const std::byte* src, std::span<const int64_t> src_strides, std::byte* dst,
                 std::span<const int64_t> dst_strides, std::span<const uint64_t> shape,
                 size_t element_size) {
  for (uint64_t extent : shape) {
    if (extent == 0) return;
  }
  MergedRegion m = Merge(src_strides, dst_strides, shape, element_size);
  const size_t outer_dims = m.shape.size() - 1;
  const size_t run_bytes = m.shape.back() * element_size;
  std::vector<uint64_t> index(outer_dims, 0);
  for (;;) {
    std::memcpy(dst, src, run_bytes);
    size_t d = outer_dims;
    for (;;) {
      if (d == 0) return;
      --d;
      src += m.src[d];
      dst += m.dst[d];
      if (++index[d] < m.shape[d]) break;
      src -= m.src[d] * static_cast<int64_t>(m.shape[d]);
      dst -= m.dst[d] * static_cast<int64_t>(m.shape[d]);
      index[d] = 0;
    }
  }
}

void FillStrided(std::byte* dst, std::span<const int64_t> dst_strides,
                 std::span<const uint64_t> shape, std::span<const std::byte> value) {
  for (uint64_t extent : shape) {
    if (extent == 0) return;
  }
  const size_t element_size = value.size();
  MergedRegion m = Merge(dst_strides, dst_strides, shape, element_size);
  const size_t outer_dims = m.shape.size() - 1;
  const uint64_t run = m.shape.back();
  bool all_zero =
      std::all_of(value.begin(), value.end(), [](std::byte b) { return b == std::byte{0}; });
  std::vector<uint64_t> index(outer_dims, 0);
  for (;;) {
    if (all_zero) {
      std::memset(dst, 0, run * element_size);
    } else {
      for (uint64_t i = 0; i < run; ++i)
        std::memcpy(dst + i * element_size, value.data(), element_size);
    }
    size_t d = outer_dims;
    for (;;) {
      if (d == 0) return;
      --d;
      dst += m.dst[d];
      if (++index[d] < m.shape[d]) break;
      dst -= m.dst[d] * static_cast<int64_t>(m.shape[d]);
      index[d] = 0;
    }
  }
}

}  // namespace zarrstream

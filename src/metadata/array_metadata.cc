#include "metadata/array_metadata.h"

namespace zarrstream {

std::string ChunkKeyEncoding::EncodeKey(std::span<const uint64_t> chunk_index) const {
  std::string key;
  if (kind == Kind::kDefault) {
    key = "c";
    for (uint64_t i : chunk_index) {
      key += separator;
      key += std::to_string(i);
    }
    return key;
  }
  // The v2 encoding names the single chunk of a 0-d array "0" (zarr-python 2 does the same).
  if (chunk_index.empty()) return "0";
  for (size_t d = 0; d < chunk_index.size(); ++d) {
    if (d > 0) key += separator;
    key += std::to_string(chunk_index[d]);
  }
  return key;
}

uint64_t ArrayMetadata::num_elements() const {
  uint64_t n = 1;
  for (uint64_t s : shape) n *= s;
  return n;
}

std::vector<uint64_t> ArrayMetadata::grid_shape() const {
  std::vector<uint64_t> grid(shape.size(), 0);
  for (size_t d = 0; d < shape.size(); ++d) grid[d] = grid_extent(d);
  return grid;
}

uint64_t ArrayMetadata::grid_extent(size_t d) const {
  // The parsers reject zero chunk sizes; a hand-built model with one gets an empty grid instead
  // of a division by zero. Written without (s + c - 1) so that shapes near 2^64 do not overflow.
  if (d >= chunk_shape.size() || chunk_shape[d] == 0) return 0;
  return shape[d] / chunk_shape[d] + (shape[d] % chunk_shape[d] != 0 ? 1 : 0);
}

uint64_t ArrayMetadata::num_chunks() const {
  uint64_t n = 1;
  for (uint64_t g : grid_shape()) n *= g;
  return n;
}

}  // namespace zarrstream

#include "loader/batch_layout.h"

#include <algorithm>

namespace zarrstream::internal {
namespace {

uint64_t AlignUp(uint64_t n) {
  return (n + BatchLayout::kAlignment - 1) / BatchLayout::kAlignment * BatchLayout::kAlignment;
}

BatchLayout::Tensor Slabs(const BatchLayoutSpec& spec, uint64_t channels, uint64_t item_bytes) {
  BatchLayout::Tensor t;
  t.present = true;
  t.sample_shape.push_back(static_cast<int64_t>(channels));
  for (uint64_t s : spec.spatial_shape) t.sample_shape.push_back(static_cast<int64_t>(s));
  t.sample_bytes = channels * spec.slab_elements * item_bytes;
  return t;
}

}  // namespace

BatchLayout BatchLayout::Make(const BatchLayoutSpec& spec) {
  BatchLayout layout;
  layout.input = Slabs(spec, spec.input_channels, spec.element_bytes);
  if (spec.target_channels != 0)
    layout.target = Slabs(spec, spec.target_channels, spec.element_bytes);
  if (spec.masks) {
    layout.input_mask = Slabs(spec, spec.input_channels, 1);
    if (spec.target_channels != 0) layout.target_mask = Slabs(spec, spec.target_channels, 1);
  }
  layout.origins.present = true;
  layout.origins.sample_shape = {static_cast<int64_t>(spec.origin_dims)};
  layout.origins.sample_bytes = spec.origin_dims * sizeof(int64_t);

  uint64_t offset = 0;
  for (Tensor* t : {&layout.input, &layout.target, &layout.input_mask, &layout.target_mask}) {
    t->offset = offset;
    if (t->present) offset = AlignUp(offset + spec.batch_size * t->sample_bytes);
  }
  const uint64_t origins_bytes = AlignUp(spec.batch_size * layout.origins.sample_bytes);
  if (spec.tensors_on_device) {
    layout.device_bytes = std::max(offset, kAlignment);
    layout.origins.offset = 0;
    layout.host_bytes = std::max(origins_bytes, kAlignment);
  } else {
    layout.origins.offset = offset;
    layout.host_bytes = std::max(offset + origins_bytes, kAlignment);
  }
  return layout;
}

}  // namespace zarrstream::internal

#include "loader/batch_layout.h"

#include <algorithm>
#include <optional>
#include <string>
#include <utility>

#include "util/checked_size.h"

namespace zarrstream::internal {
namespace {

// `n` + `add` rounded up to the alignment, or nullopt where it overflows.
std::optional<uint64_t> AddAligned(uint64_t n, uint64_t add) {
  uint64_t sum = 0;
  if (__builtin_add_overflow(n, add, &sum) ||
      __builtin_add_overflow(sum, BatchLayout::kAlignment - 1, &sum)) {
    return std::nullopt;
  }
  return sum / BatchLayout::kAlignment * BatchLayout::kAlignment;
}

Status TooLarge(const BatchLayoutSpec& spec, const std::string& what) {
  return ConfigError("batch_size " + std::to_string(spec.batch_size) +
                     " is too large: the bytes of a batch's " + what +
                     " overflow a 64-bit count; a smaller batch_size takes less");
}

// A tensor of `channels` slabs per sample, `item_bytes` per element.
Result<BatchLayout::Tensor> Slabs(const BatchLayoutSpec& spec, uint64_t channels,
                                  uint64_t item_bytes, const char* name) {
  BatchLayout::Tensor t;
  t.present = true;
  t.sample_shape.push_back(static_cast<int64_t>(channels));
  for (uint64_t s : spec.spatial_shape) t.sample_shape.push_back(static_cast<int64_t>(s));
  std::optional<uint64_t> bytes = CheckedMul(channels, spec.slab_elements);
  if (bytes) bytes = CheckedMul(*bytes, item_bytes);
  if (!bytes) {
    return TooLarge(spec, std::string(name) + " sample (" + std::to_string(channels) +
                              " channels of " + std::to_string(spec.slab_elements) +
                              " elements of " + std::to_string(item_bytes) + " bytes)");
  }
  t.sample_bytes = *bytes;
  return t;
}

}  // namespace

Result<BatchLayout> BatchLayout::Make(const BatchLayoutSpec& spec) {
  BatchLayout layout;
  ZS_ASSIGN_OR_RETURN(layout.input, Slabs(spec, spec.input_channels, spec.element_bytes, "input"));
  if (spec.target_channels != 0) {
    ZS_ASSIGN_OR_RETURN(layout.target,
                        Slabs(spec, spec.target_channels, spec.element_bytes, "target"));
  }
  if (spec.masks) {
    ZS_ASSIGN_OR_RETURN(layout.input_mask, Slabs(spec, spec.input_channels, 1, "input mask"));
    if (spec.target_channels != 0) {
      ZS_ASSIGN_OR_RETURN(layout.target_mask, Slabs(spec, spec.target_channels, 1, "target mask"));
    }
  }
  layout.origins.present = true;
  layout.origins.sample_shape = {static_cast<int64_t>(spec.origin_dims)};
  layout.origins.sample_bytes = spec.origin_dims * sizeof(int64_t);  // a handful of dimensions

  uint64_t offset = 0;
  const std::pair<Tensor*, const char*> tensors[] = {{&layout.input, "input"},
                                                     {&layout.target, "target"},
                                                     {&layout.input_mask, "input mask"},
                                                     {&layout.target_mask, "target mask"}};
  for (const auto& [t, name] : tensors) {
    t->offset = offset;
    if (!t->present) continue;
    std::optional<uint64_t> end = CheckedMul(spec.batch_size, t->sample_bytes);
    if (end) end = AddAligned(offset, *end);
    if (!end) return TooLarge(spec, std::string(name) + " tensor");
    offset = *end;
  }
  std::optional<uint64_t> origins_bytes = CheckedMul(spec.batch_size, layout.origins.sample_bytes);
  if (origins_bytes) origins_bytes = AddAligned(0, *origins_bytes);
  if (!origins_bytes) return TooLarge(spec, "origins");
  if (spec.tensors_on_device) {
    layout.device_bytes = std::max(offset, kAlignment);
    layout.origins.offset = 0;
    layout.host_bytes = std::max(*origins_bytes, kAlignment);
  } else {
    layout.origins.offset = offset;
    std::optional<uint64_t> end = AddAligned(offset, *origins_bytes);
    if (!end) return TooLarge(spec, "tensors together");
    layout.host_bytes = std::max(*end, kAlignment);
  }
  return layout;
}

}  // namespace zarrstream::internal

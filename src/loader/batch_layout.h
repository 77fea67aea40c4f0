// Where a batch's tensors lie in the memory behind it: each tensor's shape, byte offset and size.
// A value type computed once per loader from the geometry and options (Loader::Open), so that the
// producers, the memory pools and the tests read the same numbers.
//
// A CPU batch is one host block: input, target, input mask, target mask, origins, each at a
// 64-byte-aligned offset. A GPU batch's tensors (all but the origins) are one device block in that
// order, and its origins a host block of their own. A tensor may be absent (no targets; masks
// without fill_nan): its size is 0 and its offset that of the next.
//
// Every size is a product of options (batch_size) and the store's shape, so each product and sum
// is checked: a layout whose bytes 64 bits cannot count is an error, not a wrapped small size.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "zarrstream/status.h"

namespace zarrstream::internal {

// What a batch layout is computed from.
struct BatchLayoutSpec {
  uint64_t batch_size = 0;       // samples of a full batch
  uint64_t input_channels = 0;   // slabs per sample
  uint64_t target_channels = 0;  // 0: no target tensors
  std::vector<uint64_t> spatial_shape;
  uint64_t slab_elements = 1;  // product of spatial_shape
  uint64_t origin_dims = 0;    // sampled dimensions: an origin's int64 values
  uint64_t element_bytes = 4;  // of the input and target (the batch dtype)
  bool masks = false;          // fill_nan: one byte per input and target element
  bool tensors_on_device = false;
};

struct BatchLayout {
  static constexpr uint64_t kAlignment = 64;

  struct Tensor {
    bool present = false;
    // Shape of one sample (the batch's leading dimension is the number of samples it holds).
    std::vector<int64_t> sample_shape;
    uint64_t sample_bytes = 0;
    // In the tensors' block (device block for GPU batches' tensors, host block otherwise).
    uint64_t offset = 0;
  };

  Tensor input, target, input_mask, target_mask, origins;
  // Host bytes of a batch (everything on the CPU; the origins on the GPU), at least kAlignment.
  uint64_t host_bytes = 0;
  // Device bytes of a GPU batch (0 for a CPU batch), at least kAlignment.
  uint64_t device_bytes = 0;

  // A ConfigError naming the batch_size and the tensor where a size overflows 64 bits.
  static Result<BatchLayout> Make(const BatchLayoutSpec& spec);
};

}  // namespace zarrstream::internal

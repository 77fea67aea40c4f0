// The assemble stage on the GPU (LoaderOptions::device kCuda): copy descriptors for the scatter
// kernel.
#pragma once

#include <cstdint>
#include <span>

#include "gpu/kernel_abi.h"
#include "loader/batch_assembly.h"
#include "loader/read_plan.h"
#include "zarrstream/data_type.h"
#include "zarrstream/loader.h"
#include "zarrstream/status.h"

namespace zarrstream {

// The kernels' form of a batch dtype.
gpu_abi::BatchType BatchTypeOf(BatchDType dtype);

// AssembleCopy's arguments as one descriptor for the scatter kernel, with the same meaning:
// `chunk` is the decoded chunk's device address, `slab` and `mask` the slab's (mask 0 unless
// transform.fill_nan). `byte_swap`: the chunk's elements are big-endian. A non-empty `fill_value`
// (one element, native order) stands for a chunk that is not stored. The box is simplified first:
// extent-1 dimensions dropped and runs contiguous in both chunk and slab merged, so the kernel
// indexes as few dimensions as it can.
gpu_abi::CopyDescriptor MakeCopyDescriptor(uint64_t chunk, DataType source,
                                           std::span<const uint64_t> chunk_shape,
                                           const PlannedCopy& copy, uint64_t slab, BatchDType dtype,
                                           const DimArray& slab_strides,
                                           const SlabTransform& transform, uint64_t mask,
                                           bool byte_swap, std::span<const std::byte> fill_value);

// AssembleDecoded's arguments as one descriptor for the scatter kernel (kDecodedFloat64): the box
// CF-decoded by `cf` (null: values as stored) into float64 values at device address `values`
// (the slab's first element, `slab_strides` in float64 elements), the rest as MakeCopyDescriptor.
gpu_abi::CopyDescriptor MakeDecodedCopyDescriptor(uint64_t chunk, DataType source,
                                                  std::span<const uint64_t> chunk_shape,
                                                  const PlannedCopy& copy, uint64_t values,
                                                  const DimArray& slab_strides,
                                                  const CfDecoding* cf, bool byte_swap,
                                                  std::span<const std::byte> fill_value);

}  // namespace zarrstream

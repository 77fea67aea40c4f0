#include "loader/gpu_assembly.h"

#include <cstring>

namespace zarrstream {

gpu_abi::BatchType BatchTypeOf(BatchDType dtype) {
  switch (dtype) {
    case BatchDType::kFloat32:
      return gpu_abi::kBatchFloat32;
    case BatchDType::kBFloat16:
      return gpu_abi::kBatchBFloat16;
    case BatchDType::kFloat16:
      return gpu_abi::kBatchFloat16;
  }
  return gpu_abi::kBatchFloat32;
}

namespace {

// MakeCopyDescriptor into slab elements of `target_size` bytes (the batch dtype's, or float64's).
gpu_abi::CopyDescriptor Describe(uint64_t chunk, DataType source,
                                 std::span<const uint64_t> chunk_shape, const PlannedCopy& copy,
                                 uint64_t slab, uint64_t target_size, BatchDType dtype,
                                 const DimArray& slab_strides, const SlabTransform& transform,
                                 uint64_t mask, bool byte_swap,
                                 std::span<const std::byte> fill_value) {
  static_assert(static_cast<uint32_t>(DataType::kFloat64) == gpu_abi::kFloat64);
  static_assert(static_cast<uint32_t>(DataType::kFloat16) == gpu_abi::kFloat16);
  gpu_abi::CopyDescriptor d;
  const size_t rank = copy.rank;
  DimArray chunk_strides{};
  uint64_t stride = 1;
  for (size_t a = rank; a-- > 0;) {
    chunk_strides[a] = stride;
    stride *= chunk_shape[a];
  }
  uint64_t source_offset = 0, target_offset = 0;
  for (size_t a = 0; a < rank; ++a) {
    source_offset += copy.within_chunk[a] * chunk_strides[a];
    target_offset += copy.within_slab[a] * slab_strides[a];
  }
  const uint64_t source_size = DataTypeSize(source);
  d.source = fill_value.empty() ? chunk + source_offset * source_size : 0;
  d.target = slab + target_offset * target_size;
  d.mask = transform.fill_nan ? mask + target_offset : 0;
  // Dimensions outermost first, extent-1 ones dropped; a dimension merges into the one after it
  // when stepping it is stepping that one's whole extent in both the chunk and the slab.
  uint32_t n = 0;
  uint64_t elements = 1;
  for (size_t a = 0; a < rank; ++a) {
    if (copy.shape[a] == 1) continue;
    elements *= copy.shape[a];
    d.shape[n] = copy.shape[a];
    d.source_strides[n] = static_cast<int64_t>(chunk_strides[a]);
    d.target_strides[n] = static_cast<int64_t>(slab_strides[a]);
    ++n;
  }
  uint32_t merged = 0;
  for (uint32_t i = 0; i < n; ++i) {
    if (merged > 0) {
      const uint32_t last = merged - 1;
      const auto extent = static_cast<int64_t>(d.shape[i]);
      if (d.source_strides[last] == d.source_strides[i] * extent &&
          d.target_strides[last] == d.target_strides[i] * extent) {
        d.shape[last] *= d.shape[i];
        d.source_strides[last] = d.source_strides[i];
        d.target_strides[last] = d.target_strides[i];
        continue;
      }
    }
    d.shape[merged] = d.shape[i];
    d.source_strides[merged] = d.source_strides[i];
    d.target_strides[merged] = d.target_strides[i];
    ++merged;
  }
  if (merged == 0) {
    d.shape[0] = 1;
    d.source_strides[0] = 1;
    d.target_strides[0] = 1;
    merged = 1;
  }
  for (uint32_t i = merged; i < static_cast<uint32_t>(gpu_abi::kMaxRank); ++i) {
    d.shape[i] = 0;
    d.source_strides[i] = 0;
    d.target_strides[i] = 0;
  }
  d.rank = merged;
  d.elements = elements;
  d.mean = transform.mean;
  d.inv_std = transform.inv_std;
  d.nan_fill = transform.nan_fill;
  d.source_type = static_cast<uint32_t>(source);
  if (transform.cf != nullptr) {
    const CfDecoding& cf = *transform.cf;
    d.source_type = static_cast<uint32_t>(cf.source);
    if (cf.decode) {
      static_assert(kMaxCfFillValues == gpu_abi::kMaxCfFillValues);
      d.cf_scale_factor = cf.scale_factor;
      d.cf_add_offset = cf.add_offset;
      d.cf_num_fill_values = cf.num_fill_values;
      for (uint32_t k = 0; k < cf.num_fill_values; ++k) d.cf_fill_values[k] = cf.fill_values[k];
    }
  }
  d.batch_type = BatchTypeOf(dtype);
  d.flags = (transform.fill_nan ? gpu_abi::kFillNan : 0) |
            (byte_swap && source_size > 1 && fill_value.empty() ? gpu_abi::kByteSwap : 0);
  if (transform.cf != nullptr && transform.cf->decode) {
    const CfDecoding& cf = *transform.cf;
    d.flags |= gpu_abi::kCfDecode | (cf.wide() ? gpu_abi::kCfWide : 0) |
               (cf.has_scale_factor ? gpu_abi::kCfScale : 0) |
               (cf.has_add_offset ? gpu_abi::kCfOffset : 0);
  }
  if (!fill_value.empty()) {
    d.flags |= gpu_abi::kFromFill;
    std::memcpy(&d.fill_value, fill_value.data(), std::min<size_t>(fill_value.size(), 8));
  }
  return d;
}

}  // namespace

gpu_abi::CopyDescriptor MakeCopyDescriptor(uint64_t chunk, DataType source,
                                           std::span<const uint64_t> chunk_shape,
                                           const PlannedCopy& copy, uint64_t slab, BatchDType dtype,
                                           const DimArray& slab_strides,
                                           const SlabTransform& transform, uint64_t mask,
                                           bool byte_swap, std::span<const std::byte> fill_value) {
  return Describe(chunk, source, chunk_shape, copy, slab, BatchDTypeSize(dtype), dtype,
                  slab_strides, transform, mask, byte_swap, fill_value);
}

gpu_abi::CopyDescriptor MakeDecodedCopyDescriptor(uint64_t chunk, DataType source,
                                                  std::span<const uint64_t> chunk_shape,
                                                  const PlannedCopy& copy, uint64_t values,
                                                  const DimArray& slab_strides,
                                                  const CfDecoding* cf, bool byte_swap,
                                                  std::span<const std::byte> fill_value) {
  SlabTransform decode_only;
  decode_only.cf = cf;
  gpu_abi::CopyDescriptor d =
      Describe(chunk, source, chunk_shape, copy, values, sizeof(double), BatchDType::kFloat32,
               slab_strides, decode_only, /*mask=*/0, byte_swap, fill_value);
  d.flags |= gpu_abi::kDecodedFloat64;
  return d;
}

}  // namespace zarrstream

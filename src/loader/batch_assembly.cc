#include "loader/batch_assembly.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <type_traits>
#include <vector>

#include "dataset/computed_forcings.h"

namespace zarrstream {

uint16_t FloatToBFloat16(float value) {
  const auto bits = std::bit_cast<uint32_t>(value);
  if (std::isnan(value)) return static_cast<uint16_t>((bits >> 16) | 0x0040U);
  const uint32_t rounding = 0x7FFFU + ((bits >> 16) & 1U);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

namespace {

struct BFloat16 {
  uint16_t bits;
};

template <typename Dst>
inline Dst FromFloat(float v) {
  if constexpr (std::is_same_v<Dst, BFloat16>) {
    return BFloat16{FloatToBFloat16(v)};
  } else {
    return static_cast<Dst>(v);
  }
}

// The arithmetic type of the transform: float32 holds every value of these sources exactly;
// wider sources (float64, 32/64-bit integers) are normalised in float64 and rounded once, so a
// float64 geopotential near 1e5 with a spread of 1 keeps its digits.
template <typename Src>
using ComputeType =
    std::conditional_t<(sizeof(Src) >= 4 && !std::is_same_v<Src, float>), double, float>;

// One run along the innermost dimension, in `Compute`. `kContiguous`: both steps are 1, so the loop
// vectorises. `kDecode`: the values are CF-decoded first (t.cf).
template <typename Src, typename Dst, typename Compute, bool kDecode, bool kContiguous>
inline void ConvertRun(const Src* src, int64_t src_step, Dst* dst, int64_t dst_step, uint8_t* mask,
                       uint64_t n, const SlabTransform& t) {
  if constexpr (kContiguous) {
    src_step = 1;
    dst_step = 1;
  }
  const auto mean = static_cast<Compute>(t.mean);
  const auto inv_std = static_cast<Compute>(t.inv_std);
  const CfDecoder<Compute> decode(kDecode ? *t.cf : CfDecoding{});
  auto value = [&](uint64_t i) {
    Compute x;
    if constexpr (kDecode) {
      x = decode(src[i * src_step]);
    } else {
      x = static_cast<Compute>(src[i * src_step]);
    }
    return static_cast<float>((x - mean) * inv_std);
  };
  if (t.fill_nan) {
    const auto fill = static_cast<float>(t.nan_fill);
    for (uint64_t i = 0; i < n; ++i) {
      const float v = value(i);
      const bool nan = std::isnan(v);
      mask[i * dst_step] = nan ? 1 : 0;
      dst[i * dst_step] = FromFloat<Dst>(nan ? fill : v);
    }
  } else {
    for (uint64_t i = 0; i < n; ++i) dst[i * dst_step] = FromFloat<Dst>(value(i));
  }
}

template <typename Src, typename Dst, typename Compute, bool kDecode>
void ConvertBox(const Src* chunk, std::span<const uint64_t> chunk_shape, const PlannedCopy& copy,
                Dst* slab, const DimArray& slab_strides, const SlabTransform& t, uint8_t* mask) {
  const size_t rank = copy.rank;
  DimArray chunk_strides{};
  int64_t stride = 1;
  for (size_t a = rank; a-- > 0;) {
    chunk_strides[a] = static_cast<uint64_t>(stride);
    stride *= static_cast<int64_t>(chunk_shape[a]);
  }
  const size_t inner = rank - 1;
  const uint64_t n = copy.shape[inner];
  const auto src_step = static_cast<int64_t>(chunk_strides[inner]);
  const auto dst_step = static_cast<int64_t>(slab_strides[inner]);
  const bool contiguous = src_step == 1 && dst_step == 1;
  DimArray index{};  // over the outer dimensions of the box
  for (;;) {
    int64_t src_offset = 0, dst_offset = 0;
    for (size_t a = 0; a < rank; ++a) {
      const uint64_t i = a == inner ? 0 : index[a];
      src_offset += static_cast<int64_t>((copy.within_chunk[a] + i) * chunk_strides[a]);
      dst_offset += static_cast<int64_t>((copy.within_slab[a] + i) * slab_strides[a]);
    }
    uint8_t* mask_run = t.fill_nan ? mask + dst_offset : nullptr;
    if (contiguous) {
      ConvertRun<Src, Dst, Compute, kDecode, true>(chunk + src_offset, 1, slab + dst_offset, 1,
                                                   mask_run, n, t);
    } else {
      ConvertRun<Src, Dst, Compute, kDecode, false>(chunk + src_offset, src_step, slab + dst_offset,
                                                    dst_step, mask_run, n, t);
    }
    size_t a = inner;
    while (a-- > 0) {
      if (++index[a] < copy.shape[a]) break;
      index[a] = 0;
    }
    if (a == static_cast<size_t>(-1)) return;
  }
}

template <typename Src, typename Compute, bool kDecode>
void ConvertInto(const std::byte* chunk, std::span<const uint64_t> chunk_shape,
                 const PlannedCopy& copy, std::byte* slab, BatchDType dtype,
                 const DimArray& slab_strides, const SlabTransform& t, uint8_t* mask) {
  const auto* src = reinterpret_cast<const Src*>(chunk);
  switch (dtype) {
    case BatchDType::kFloat32:
      return ConvertBox<Src, float, Compute, kDecode>(
          src, chunk_shape, copy, reinterpret_cast<float*>(slab), slab_strides, t, mask);
    case BatchDType::kBFloat16:
      return ConvertBox<Src, BFloat16, Compute, kDecode>(
          src, chunk_shape, copy, reinterpret_cast<BFloat16*>(slab), slab_strides, t, mask);
    case BatchDType::kFloat16:
#if defined(__FLT16_MANT_DIG__)
      return ConvertBox<Src, _Float16, Compute, kDecode>(
          src, chunk_shape, copy, reinterpret_cast<_Float16*>(slab), slab_strides, t, mask);
#else
      break;  // rejected by ParseBatchDType
#endif
  }
}

template <typename Src>
void ConvertTo(const std::byte* chunk, std::span<const uint64_t> chunk_shape,
               const PlannedCopy& copy, std::byte* slab, BatchDType dtype,
               const DimArray& slab_strides, const SlabTransform& t, uint8_t* mask) {
  if (t.cf == nullptr || !t.cf->decode) {
    return ConvertInto<Src, ComputeType<Src>, false>(chunk, chunk_shape, copy, slab, dtype,
                                                     slab_strides, t, mask);
  }
  if (t.cf->wide()) {
    return ConvertInto<Src, double, true>(chunk, chunk_shape, copy, slab, dtype, slab_strides, t,
                                          mask);
  }
  return ConvertInto<Src, float, true>(chunk, chunk_shape, copy, slab, dtype, slab_strides, t,
                                       mask);
}

}  // namespace

namespace {

// Calls `f(Src{})` with the C++ type of `source`'s elements.
template <typename F>
void WithSourceType(DataType source, F&& f) {
  switch (source) {
    case DataType::kInt8:
      return f(int8_t{});
    case DataType::kInt16:
      return f(int16_t{});
    case DataType::kInt32:
      return f(int32_t{});
    case DataType::kInt64:
      return f(int64_t{});
    case DataType::kUInt8:
      return f(uint8_t{});
    case DataType::kUInt16:
      return f(uint16_t{});
    case DataType::kUInt32:
      return f(uint32_t{});
    case DataType::kUInt64:
      return f(uint64_t{});
#if defined(__FLT16_MANT_DIG__)
    case DataType::kFloat16:
      return f(_Float16{});
#endif
    case DataType::kFloat32:
      return f(float{});
    case DataType::kFloat64:
      return f(double{});
    default:
      break;  // rejected by MakeLoaderGeometry
  }
}

// One run of decoded values into float64 (AssembleDecoded).
template <typename Src, typename Compute, bool kDecode>
void DecodeRun(const Src* src, int64_t src_step, double* dst, int64_t dst_step, uint64_t n,
               const CfDecoding* cf) {
  const CfDecoder<Compute> decode(kDecode ? *cf : CfDecoding{});
  for (uint64_t i = 0; i < n; ++i) {
    if constexpr (kDecode) {
      dst[i * dst_step] = static_cast<double>(decode(src[i * src_step]));
    } else {
      dst[i * dst_step] = static_cast<double>(static_cast<Compute>(src[i * src_step]));
    }
  }
}

template <typename Src, typename Compute, bool kDecode>
void DecodeBox(const Src* chunk, std::span<const uint64_t> chunk_shape, const PlannedCopy& copy,
               double* slab, const DimArray& slab_strides, const CfDecoding* cf) {
  const size_t rank = copy.rank;
  DimArray chunk_strides{};
  uint64_t stride = 1;
  for (size_t a = rank; a-- > 0;) {
    chunk_strides[a] = stride;
    stride *= chunk_shape[a];
  }
  const size_t inner = rank - 1;
  DimArray index{};  // over the outer dimensions of the box
  for (;;) {
    uint64_t src_offset = 0, dst_offset = 0;
    for (size_t a = 0; a < rank; ++a) {
      const uint64_t i = a == inner ? 0 : index[a];
      src_offset += (copy.within_chunk[a] + i) * chunk_strides[a];
      dst_offset += (copy.within_slab[a] + i) * slab_strides[a];
    }
    DecodeRun<Src, Compute, kDecode>(chunk + src_offset, static_cast<int64_t>(chunk_strides[inner]),
                                     slab + dst_offset, static_cast<int64_t>(slab_strides[inner]),
                                     copy.shape[inner], cf);
    size_t a = inner;
    while (a-- > 0) {
      if (++index[a] < copy.shape[a]) break;
      index[a] = 0;
    }
    if (a == static_cast<size_t>(-1)) return;
  }
}

template <typename Dst>
void WriteTendency(const double* target, const double* base, uint64_t n, const SlabTransform& t,
                   Dst* dst, uint8_t* mask) {
  for (uint64_t i = 0; i < n; ++i) {
    const auto v = static_cast<float>(((target[i] - base[i]) - t.mean) * t.inv_std);
    if (t.fill_nan) {
      const bool nan = std::isnan(v);
      mask[i] = nan ? 1 : 0;
      dst[i] = FromFloat<Dst>(nan ? static_cast<float>(t.nan_fill) : v);
    } else {
      dst[i] = FromFloat<Dst>(v);
    }
  }
}

}  // namespace

void AssembleCopy(const std::byte* chunk, DataType source, std::span<const uint64_t> chunk_shape,
                  const PlannedCopy& copy, std::byte* slab, BatchDType dtype,
                  const DimArray& slab_strides, const SlabTransform& transform, uint8_t* mask) {
  if (transform.cf != nullptr) source = transform.cf->source;
  WithSourceType(source, [&](auto tag) {
    ConvertTo<decltype(tag)>(chunk, chunk_shape, copy, slab, dtype, slab_strides, transform, mask);
  });
}

void AssembleDecoded(const std::byte* chunk, DataType source, std::span<const uint64_t> chunk_shape,
                     const PlannedCopy& copy, double* slab, const DimArray& slab_strides,
                     const CfDecoding* cf) {
  if (cf != nullptr) source = cf->source;
  WithSourceType(source, [&](auto tag) {
    using Src = decltype(tag);
    const auto* src = reinterpret_cast<const Src*>(chunk);
    if (cf == nullptr || !cf->decode) {
      DecodeBox<Src, ComputeType<Src>, false>(src, chunk_shape, copy, slab, slab_strides, cf);
    } else if (cf->wide()) {
      DecodeBox<Src, double, true>(src, chunk_shape, copy, slab, slab_strides, cf);
    } else {
      DecodeBox<Src, float, true>(src, chunk_shape, copy, slab, slab_strides, cf);
    }
  });
}

void AssembleTendency(const double* target, const double* base, uint64_t n,
                      const SlabTransform& transform, std::byte* slab, BatchDType dtype,
                      uint8_t* mask) {
  switch (dtype) {
    case BatchDType::kFloat32:
      return WriteTendency(target, base, n, transform, reinterpret_cast<float*>(slab), mask);
    case BatchDType::kBFloat16:
      return WriteTendency(target, base, n, transform, reinterpret_cast<BFloat16*>(slab), mask);
    case BatchDType::kFloat16:
#if defined(__FLT16_MANT_DIG__)
      return WriteTendency(target, base, n, transform, reinterpret_cast<_Float16*>(slab), mask);
#else
      break;  // rejected by ParseBatchDType
#endif
  }
}

namespace {

// Forcing `kind` over a grid of `rows` latitudes × `cols` longitudes into `table` (row-major):
// each value depends on its row, its column or neither, so the trigonometry runs once per row and
// column (the solar zenith angle's terms likewise), with the arithmetic of forcing_math::Value.
void ForcingTable(uint32_t kind, int64_t seconds, const double* latitudes, uint64_t rows,
                  const double* longitudes, uint64_t cols, std::vector<float>& table) {
  using forcing_math::Kind;
  table.resize(rows * cols);
  if (kind == forcing_math::kCosSolarZenithAngle || kind == forcing_math::kInsolation) {
    double d = 0, time_correction = 0;
    forcing_math::SolarDeclination(seconds, &d, &time_correction);
    const double hours = forcing_math::DayHours(seconds);
    std::vector<double> cos_hour(cols);
    for (uint64_t j = 0; j < cols; ++j) {
      cos_hour[j] = forcing_math::CosHourAngle(hours, time_correction, longitudes[j]);
    }
    for (uint64_t i = 0; i < rows; ++i) {
      const double phi = forcing_math::Radians(latitudes[i]);
      const double sindec_sinlat = sin(d) * sin(phi);
      const double cosdec_coslat = cos(d) * cos(phi);
      for (uint64_t j = 0; j < cols; ++j) {
        table[i * cols + j] = static_cast<float>(
            forcing_math::ClippedZenith(sindec_sinlat, cosdec_coslat, cos_hour[j]));
      }
    }
    return;
  }
  const bool by_row = ComputedForcingNeedsLatitude(static_cast<Kind>(kind));
  const bool by_column = ComputedForcingNeedsLongitude(static_cast<Kind>(kind));
  const uint64_t n = by_row ? rows : by_column ? cols : 1;
  std::vector<float> values(n);
  for (uint64_t k = 0; k < n; ++k) {
    values[k] = static_cast<float>(forcing_math::Value(kind, seconds, by_row ? latitudes[k] : 0.0,
                                                       by_column ? longitudes[k] : 0.0));
  }
  for (uint64_t i = 0; i < rows; ++i) {
    for (uint64_t j = 0; j < cols; ++j) {
      table[i * cols + j] = values[by_row ? i : by_column ? j : 0];
    }
  }
}

template <typename Dst>
void SpreadInto(const std::vector<float>& table, uint64_t cols, std::span<const uint64_t> shape,
                int latitude_axis, int longitude_axis, Dst* slab) {
  uint64_t elements = 1;
  for (uint64_t extent : shape) elements *= extent;
  std::vector<uint64_t> at(shape.size(), 0);
  for (uint64_t e = 0; e < elements; ++e) {
    const uint64_t i = latitude_axis >= 0 ? at[latitude_axis] : 0;
    const uint64_t j = longitude_axis >= 0 ? at[longitude_axis] : 0;
    slab[e] = FromFloat<Dst>(table[i * cols + j]);
    for (size_t a = shape.size(); a-- > 0;) {
      if (++at[a] < shape[a]) break;
      at[a] = 0;
    }
  }
}

template <typename Dst>
void FillBox(Dst value, std::span<const uint64_t> slab_shape, const DimArray& offset,
             const DimArray& shape, Dst* slab, uint8_t* mask, uint8_t masked) {
  const size_t rank = slab_shape.size();
  if (rank == 0) {
    slab[0] = value;
    if (mask != nullptr) mask[0] = masked;
    return;
  }
  DimArray strides{};
  uint64_t stride = 1;
  for (size_t a = rank; a-- > 0;) {
    strides[a] = stride;
    stride *= slab_shape[a];
  }
  uint64_t rows = 1;
  for (size_t a = 0; a + 1 < rank; ++a) rows *= shape[a];
  DimArray at{};
  for (uint64_t row = 0; row < rows; ++row) {
    uint64_t first = offset[rank - 1];
    for (size_t a = 0; a + 1 < rank; ++a) first += (offset[a] + at[a]) * strides[a];
    std::fill(slab + first, slab + first + shape[rank - 1], value);
    if (mask != nullptr) std::fill(mask + first, mask + first + shape[rank - 1], masked);
    for (size_t a = rank - 1; a-- > 0;) {
      if (++at[a] < shape[a]) break;
      at[a] = 0;
    }
  }
}

}  // namespace

void AssembleFill(double value, std::span<const uint64_t> slab_shape, const DimArray& offset,
                  const DimArray& shape, std::byte* slab, BatchDType dtype,
                  const SlabTransform& transform, uint8_t* mask) {
  const bool missing = std::isnan(value);
  const auto v = static_cast<float>(missing && transform.fill_nan ? transform.nan_fill : value);
  const uint8_t masked = missing ? 1 : 0;
  if (!transform.fill_nan) mask = nullptr;
  switch (dtype) {
    case BatchDType::kFloat32:
      return FillBox(v, slab_shape, offset, shape, reinterpret_cast<float*>(slab), mask, masked);
    case BatchDType::kBFloat16:
      return FillBox(FromFloat<BFloat16>(v), slab_shape, offset, shape,
                     reinterpret_cast<BFloat16*>(slab), mask, masked);
    case BatchDType::kFloat16:
#if defined(__FLT16_MANT_DIG__)
      return FillBox(static_cast<_Float16>(v), slab_shape, offset, shape,
                     reinterpret_cast<_Float16*>(slab), mask, masked);
#else
      break;  // rejected by ParseBatchDType
#endif
  }
}

void AssembleComputed(uint32_t kind, int64_t seconds, std::span<const uint64_t> shape,
                      int latitude_axis, const double* latitudes, int longitude_axis,
                      const double* longitudes, std::byte* slab, BatchDType dtype, uint8_t* mask) {
  uint64_t elements = 1;
  for (uint64_t extent : shape) elements *= extent;
  if (mask != nullptr) std::fill(mask, mask + elements, uint8_t{0});
  const uint64_t rows = latitude_axis >= 0 ? shape[latitude_axis] : 1;
  const uint64_t cols = longitude_axis >= 0 ? shape[longitude_axis] : 1;
  std::vector<float> table;
  ForcingTable(kind, seconds, latitudes, rows, longitudes, cols, table);
  switch (dtype) {
    case BatchDType::kFloat32:
      return SpreadInto(table, cols, shape, latitude_axis, longitude_axis,
                        reinterpret_cast<float*>(slab));
    case BatchDType::kBFloat16:
      return SpreadInto(table, cols, shape, latitude_axis, longitude_axis,
                        reinterpret_cast<BFloat16*>(slab));
    case BatchDType::kFloat16:
#if defined(__FLT16_MANT_DIG__)
      return SpreadInto(table, cols, shape, latitude_axis, longitude_axis,
                        reinterpret_cast<_Float16*>(slab));
#else
      break;  // rejected by ParseBatchDType
#endif
  }
}

}  // namespace zarrstream

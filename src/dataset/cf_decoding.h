// CF decoding of a numeric variable, as xarray's open_zarr does it by default (its CFMaskCoder and
// CFScaleOffsetCoder): `_Unsigned` reinterprets the stored integers, values equal to `_FillValue`
// or `missing_value` (a number or a list) become NaN, then x * scale_factor + add_offset.
// valid_min, valid_max and valid_range are not applied (nor are they by xarray's default).
//
// The arithmetic is xarray's, step for step, in the floating-point type xarray decodes to:
// - packed variables (scale_factor or add_offset present) decode in float64: Zarr keeps attributes
//   as JSON numbers, which xarray reads as Python floats, so its _choose_float_dtype picks float64
//   whatever the stored integer type or the netCDF file's float32 scale_factor was;
// - unpacked variables with a fill value decode to float32 for integers of up to 16 bits, float64
//   for wider integers, and keep float16/32/64 (xarray's maybe_promote);
// - the stored value is converted to that type, compared with each fill value converted to that
//   type (NaN when equal), then multiplied by scale_factor (rounded), then add_offset is added
//   (rounded): never fused into one multiply-add.
// Where fill values come from is xarray's too: in Zarr v2 the array's fill_value (unless null or
// NaN), else a `_FillValue` attribute; in Zarr v3 the `_FillValue` attribute (xarray writes a float
// one as the base64 text of its 8 little-endian bytes; a JSON number is taken as well), never the
// array's fill_value. Under `_Unsigned: "true"` the `_FillValue` is reinterpreted as the unsigned
// type (`missing_value` is not, as in xarray).
//
// Consumers: the loader's assembly (CPU and GPU, loader/batch_assembly.h), `zarrstream stats`
// (tools/channel_stats.h) and open_array(decode_cf=True). A CfDecoding is a plain value.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>

#include "metadata/float16.h"
#include "zarrstream/array.h"
#include "zarrstream/data_type.h"
#include "zarrstream/status.h"

namespace zarrstream {

// The most distinct fill values (`_FillValue` and `missing_value` together) one variable may have.
inline constexpr size_t kMaxCfFillValues = 8;

struct CfDecoding {
  // The stored elements' type as the arithmetic reads them: the array's, or its signed/unsigned
  // twin under `_Unsigned`.
  DataType source = DataType::kFloat32;
  // False: values are used as they are stored (in `source`); nothing below applies.
  bool decode = false;
  // The type xarray decodes to: kFloat16, kFloat32 or kFloat64.
  DataType decoded = DataType::kFloat32;
  bool has_scale_factor = false;
  bool has_add_offset = false;
  double scale_factor = 1;
  double add_offset = 0;
  // The fill values, each rounded to `decoded` (a double holds every float16/32 value exactly).
  uint32_t num_fill_values = 0;
  std::array<double, kMaxCfFillValues> fill_values{};

  bool packed() const { return has_scale_factor || has_add_offset; }
  // The arithmetic runs in float64 (else in float32, which holds every float16 value).
  bool wide() const { return decoded == DataType::kFloat64; }
};

// Values as stored: no decoding.
CfDecoding StoredValues(DataType type);

// The decoding `array`'s attributes (and, in Zarr v2, its fill_value) ask for. Arrays of types
// other than integers and floats are never decoded. Errors (kMetadata) name the array and the
// attribute: a scale_factor or add_offset that is not a number, a fill value that is not a number
// or not a value of an integer array's type, more than kMaxCfFillValues fill values.
Result<CfDecoding> CfDecodingOf(const Array& array);

// Decodes stored values: NaN where one equals a fill value, else x * scale_factor + add_offset,
// each step rounded to `Compute` (float when !cf.wide(), double when cf.wide()). Made once per run
// of values, so that a loop calling it vectorises: the constants are converted to `Compute` up
// front, and the steps are written without branches. An absent scale_factor multiplies by 1 and
// an absent add_offset adds -0.0, both exact for every value (+0.0 would turn a stored -0.0 into
// +0.0); every fill slot is compared, the unused ones holding NaN, which equals nothing.
// The loader's CPU assembly and `stats` decode through it; the GPU kernel (gpu/kernels.cu) spells
// out the same steps.
template <typename Compute>
class CfDecoder {
 public:
  explicit CfDecoder(const CfDecoding& cf)
      : scale_(cf.has_scale_factor ? static_cast<Compute>(cf.scale_factor) : Compute{1}),
        offset_(cf.has_add_offset ? static_cast<Compute>(cf.add_offset) : -Compute{0}) {
    fills_.fill(std::numeric_limits<Compute>::quiet_NaN());
    // Exact: each fill value was rounded to the decoded type, which `Compute` holds.
    for (uint32_t k = 0; k < cf.num_fill_values; ++k) {
      fills_[k] = static_cast<Compute>(cf.fill_values[k]);
    }
  }

  template <typename Src>
  Compute operator()(Src stored) const {
    const Compute x = static_cast<Compute>(stored);
    const Compute v = x * scale_ + offset_;
    return IsFill(x, std::make_index_sequence<kMaxCfFillValues>())
               ? std::numeric_limits<Compute>::quiet_NaN()
               : v;
  }

 private:
  // The comparisons spelled out (not a loop) and or-ed without short-circuit, so that the compiler
  // sees straight-line code.
  template <size_t... k>
  bool IsFill(Compute x, std::index_sequence<k...>) const {
    return (static_cast<unsigned>(x == fills_[k]) | ...) != 0;
  }

  std::array<Compute, kMaxCfFillValues> fills_;
  Compute scale_;
  Compute offset_;
};

// The element type CfDecoder code reads float16 data as (distinct from uint16 elements).
struct Float16Bits {
  uint16_t bits;
};

// The stored element of type T (Float16Bits: a float16) at `p`, unaligned, in the type CfDecoder
// takes it as (float16 widened to float32, exactly).
template <typename T>
auto LoadStoredElement(const std::byte* p) {
  if constexpr (std::is_same_v<T, Float16Bits>) {
    uint16_t bits;
    std::memcpy(&bits, p, sizeof bits);
    return static_cast<float>(Float16BitsToDouble(bits));
  } else {
    T v;
    std::memcpy(&v, p, sizeof(T));
    return v;
  }
}

// One stored value decoded (CfDecoder, for a single value).
template <typename Compute, typename Src>
inline Compute CfDecode(Src stored, const CfDecoding& cf) {
  return CfDecoder<Compute>(cf)(stored);
}

// A short description for `inspect`: "packed int16 (× 0.01 + 273.1), fill -32767" or "" when
// nothing is decoded.
std::string DescribeCfDecoding(const CfDecoding& cf, DataType stored);

}  // namespace zarrstream

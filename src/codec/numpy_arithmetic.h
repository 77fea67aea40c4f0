// numpy's element-wise arithmetic and casts for the numcodecs filters (numcodecs.delta,
// numcodecs.fixedscaleoffset), which must reproduce what numpy computes bit for bit.
//
// Internal to src/codec. float16 arithmetic uses the compiler's _Float16, which (like numpy)
// computes each operation in float and rounds the result to half precision.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "zarrstream/data_type.h"

namespace zarrstream::numpy {

// Values in chunk buffers are not necessarily aligned for their type: load and store by memcpy.
template <typename T>
T Load(const std::byte* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

template <typename T>
void Store(std::byte* p, T v) {
  std::memcpy(p, &v, sizeof(T));
}

#if defined(__FLT16_MANT_DIG__)
using Float16 = _Float16;
inline constexpr bool kHaveFloat16 = true;
#else
struct Float16 {};  // placeholder: float16 filters are unsupported without compiler support
inline constexpr bool kHaveFloat16 = false;
#endif

template <typename T>
inline constexpr bool kIsFloat = std::is_floating_point_v<T> || std::is_same_v<T, Float16>;

template <typename T>
struct TypeTag {
  using type = T;
};

// Calls f(TypeTag<T>{}) with the C++ type of a real numeric `type` and returns true; returns false
// for bool, complex and (without compiler support) float16, which the filters do not handle.
template <typename F>
bool VisitRealType(DataType type, F&& f) {
  switch (type) {
    case DataType::kInt8:
      f(TypeTag<int8_t>{});
      return true;
    case DataType::kInt16:
      f(TypeTag<int16_t>{});
      return true;
    case DataType::kInt32:
      f(TypeTag<int32_t>{});
      return true;
    case DataType::kInt64:
      f(TypeTag<int64_t>{});
      return true;
    case DataType::kUInt8:
      f(TypeTag<uint8_t>{});
      return true;
    case DataType::kUInt16:
      f(TypeTag<uint16_t>{});
      return true;
    case DataType::kUInt32:
      f(TypeTag<uint32_t>{});
      return true;
    case DataType::kUInt64:
      f(TypeTag<uint64_t>{});
      return true;
    case DataType::kFloat16:
      if constexpr (kHaveFloat16) {
        f(TypeTag<Float16>{});
        return true;
      }
      return false;
    case DataType::kFloat32:
      f(TypeTag<float>{});
      return true;
    case DataType::kFloat64:
      f(TypeTag<double>{});
      return true;
    default:
      return false;
  }
}

// numpy's astype(To) of one value (casting="unsafe"). Integer to integer wraps; float to integer
// truncates toward zero. Out-of-range float to integer conversions are undefined in C++ and
// platform-specific in numpy (which warns "invalid value encountered in cast"); here they are
// defined: values inside the int64 range wrap to the target width, NaN and values outside become
// INT64_MIN wrapped (which is what numpy gives on x86-64 for 64-bit targets).
template <typename To, typename From>
To Cast(From v) {
  if constexpr (std::is_integral_v<To> && kIsFloat<From>) {
    const double d = static_cast<double>(v);
    if constexpr (std::is_same_v<To, uint64_t>) {
      if (d >= 0 && d < 18446744073709551616.0) return static_cast<uint64_t>(d);
    }
    if (!(d >= -9223372036854775808.0 && d < 9223372036854775808.0)) {
      return static_cast<To>(INT64_MIN);
    }
    return static_cast<To>(static_cast<int64_t>(d));
  } else {
    return static_cast<To>(v);
  }
}

// The float type numpy's result_type gives for a float `A` or `B` (or int paired with a float):
// the widest of the floats, where an int of 1, 2 or more bytes counts as float16, float32 or
// float64.
template <typename T>
constexpr int FloatRank() {
  if constexpr (kIsFloat<T>)
    return sizeof(T) == 2 ? 0 : sizeof(T) == 4 ? 1 : 2;
  else
    return sizeof(T) == 1 ? 0 : sizeof(T) == 2 ? 1 : 2;
}

// Without float16 support rank 0 never occurs (no float16 operand exists), but must still name a
// type.
template <int kRank>
using FloatOfRank = std::conditional_t<kRank == 0, std::conditional_t<kHaveFloat16, Float16, float>,
                                       std::conditional_t<kRank == 1, float, double>>;

template <typename A, typename B>
using PromotedFloat = FloatOfRank<std::max(FloatRank<A>(), FloatRank<B>())>;

// Whether numpy promotes two integer types to float64 (uint64 with any signed type).
template <typename A, typename B>
inline constexpr bool kIntegersPromoteToFloat = (std::is_same_v<A, uint64_t> &&
                                                 std::is_signed_v<B>) ||
                                                (std::is_same_v<B, uint64_t> &&
                                                 std::is_signed_v<A>);

// Integer arithmetic that wraps like numpy's (and unlike C++'s signed arithmetic, is defined).
template <typename T>
T WrappingAdd(T a, T b) {
  return static_cast<T>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
}
template <typename T>
T WrappingSub(T a, T b) {
  return static_cast<T>(static_cast<uint64_t>(a) - static_cast<uint64_t>(b));
}
template <typename T>
T WrappingMul(T a, T b) {
  return static_cast<T>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
}

// np.rint: round half to even (the default rounding mode).
template <typename T>
T RoundHalfEven(T v) {
  if constexpr (std::is_same_v<T, double>)
    return std::nearbyint(v);
  else if constexpr (std::is_same_v<T, float>)
    return std::nearbyintf(v);
  else if constexpr (kIsFloat<T>)
    return static_cast<T>(std::nearbyintf(static_cast<float>(v)));
  else
    return v;
}

}  // namespace zarrstream::numpy

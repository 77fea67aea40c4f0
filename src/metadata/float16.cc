#include "metadata/float16.h"

#include <bit>
#include <cmath>

namespace zarrstream {
namespace {

constexpr int kDoubleMantissaBits = 52;
constexpr int kHalfMantissaBits = 10;
constexpr int kDoubleExponentBias = 1023;
constexpr int kHalfExponentBias = 15;
constexpr uint16_t kHalfInfinity = 0x7c00;
constexpr uint16_t kHalfQuietBit = 0x0200;

// Shifts `significand` right by `shift` bits (1..63), rounding to nearest, ties to even.
uint64_t ShiftRightRoundEven(uint64_t significand, int shift) {
  uint64_t kept = significand >> shift;
  uint64_t rest = significand & ((uint64_t{1} << shift) - 1);
  uint64_t halfway = uint64_t{1} << (shift - 1);
  if (rest > halfway || (rest == halfway && (kept & 1) != 0)) ++kept;
  return kept;
}

}  // namespace

uint16_t DoubleToFloat16Bits(double value) {
  const uint64_t bits = std::bit_cast<uint64_t>(value);
  const auto sign = static_cast<uint16_t>((bits >> 48) & 0x8000);
  const int biased_exponent = static_cast<int>((bits >> kDoubleMantissaBits) & 0x7ff);
  const uint64_t mantissa = bits & ((uint64_t{1} << kDoubleMantissaBits) - 1);

  if (biased_exponent == 0x7ff) {
    if (mantissa == 0) return sign | kHalfInfinity;
    return static_cast<uint16_t>(sign | kHalfInfinity | kHalfQuietBit |
                                 (mantissa >> (kDoubleMantissaBits - kHalfMantissaBits)));
  }
  // Zeros and double subnormals (< 2^-1022) are far below half of binary16's smallest subnormal.
  if (biased_exponent == 0) return sign;

  const int exponent = biased_exponent - kDoubleExponentBias;
  if (exponent > kHalfExponentBias) return sign | kHalfInfinity;
  const uint64_t significand = mantissa | (uint64_t{1} << kDoubleMantissaBits);

  if (exponent >= 1 - kHalfExponentBias) {
    // Normal range. Adding the rounded significand to the exponent field lets a carry out of the
    // mantissa bump the exponent, and 65520 and above carry into the infinity pattern.
    const uint64_t rounded =
        ShiftRightRoundEven(significand, kDoubleMantissaBits - kHalfMantissaBits);
    const uint64_t half =
        (static_cast<uint64_t>(exponent + kHalfExponentBias - 1) << kHalfMantissaBits) + rounded;
    return static_cast<uint16_t>(sign | (half >= kHalfInfinity ? kHalfInfinity : half));
  }
  // Subnormal range: the result counts units of 2^-24, i.e. significand * 2^(exponent - 52 + 24).
  constexpr int kSubnormalUnitExponent = kHalfExponentBias - 1 + kHalfMantissaBits;  // 24
  const int shift = kDoubleMantissaBits - kSubnormalUnitExponent - exponent;
  if (shift >= 64) return sign;
  // A subnormal that rounds up to 0x0400 is the smallest normal: the bit pattern is right as is.
  return static_cast<uint16_t>(sign | ShiftRightRoundEven(significand, shift));
}

double Float16BitsToDouble(uint16_t bits) {
  const bool negative = (bits & 0x8000) != 0;
  const int biased_exponent = (bits >> kHalfMantissaBits) & 0x1f;
  const uint64_t mantissa = bits & 0x3ff;
  double magnitude = 0;
  if (biased_exponent == 0x1f) {
    if (mantissa == 0) {
      magnitude = INFINITY;
    } else {
      // Keep sign and payload: widen the payload into a double NaN's mantissa.
      uint64_t nan_bits = (uint64_t{negative} << 63) | (uint64_t{0x7ff} << kDoubleMantissaBits) |
                          (mantissa << (kDoubleMantissaBits - kHalfMantissaBits));
      return std::bit_cast<double>(nan_bits);
    }
  } else if (biased_exponent == 0) {
    magnitude = std::ldexp(static_cast<double>(mantissa), -24);
  } else {
    magnitude = std::ldexp(static_cast<double>(mantissa | 0x400),
                           biased_exponent - kHalfExponentBias - kHalfMantissaBits);
  }
  return negative ? -magnitude : magnitude;
}

}  // namespace zarrstream

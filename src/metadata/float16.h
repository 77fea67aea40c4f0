// IEEE 754 binary16 ("float16", numpy's "<f2") conversions for scalar values such as fill values.
// Bulk conversion of array data belongs to the codec and GPU layers.
#pragma once

#include <cstdint>

namespace zarrstream {

// Rounds `value` to the nearest binary16 value, ties to even, straight from double (going through
// float first would round twice and can be off by one unit). Values too large for binary16 become
// infinities, tiny ones subnormals or signed zeros, NaN a quiet NaN keeping the sign and the top
// payload bits.
uint16_t DoubleToFloat16Bits(double value);

// The exact double value of a binary16 bit pattern (every binary16 value is a double).
double Float16BitsToDouble(uint16_t bits);

}  // namespace zarrstream

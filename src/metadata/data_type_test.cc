#include "zarrstream/data_type.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>

#include "metadata/float16.h"

namespace zarrstream {
namespace {

using ::testing::HasSubstr;

struct TypeCase {
  DataType type;
  const char* name;
  size_t size;
  size_t component_size;
  const char* numpy_little_endian;
};

constexpr TypeCase kTypes[] = {
    {DataType::kBool, "bool", 1, 1, "|b1"},
    {DataType::kInt8, "int8", 1, 1, "|i1"},
    {DataType::kInt16, "int16", 2, 2, "<i2"},
    {DataType::kInt32, "int32", 4, 4, "<i4"},
    {DataType::kInt64, "int64", 8, 8, "<i8"},
    {DataType::kUInt8, "uint8", 1, 1, "|u1"},
    {DataType::kUInt16, "uint16", 2, 2, "<u2"},
    {DataType::kUInt32, "uint32", 4, 4, "<u4"},
    {DataType::kUInt64, "uint64", 8, 8, "<u8"},
    {DataType::kFloat16, "float16", 2, 2, "<f2"},
    {DataType::kFloat32, "float32", 4, 4, "<f4"},
    {DataType::kFloat64, "float64", 8, 8, "<f8"},
    {DataType::kComplex64, "complex64", 8, 4, "<c8"},
    {DataType::kComplex128, "complex128", 16, 8, "<c16"},
};

TEST(DataTypeTest, SizesNamesAndParsing) {
  for (const TypeCase& c : kTypes) {
    SCOPED_TRACE(c.name);
    EXPECT_EQ(DataTypeSize(c.type), c.size);
    EXPECT_EQ(DataTypeComponentSize(c.type), c.component_size);
    EXPECT_EQ(DataTypeName(c.type), c.name);
    Result<DataType> parsed = ParseDataTypeName(c.name);
    ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
    EXPECT_EQ(*parsed, c.type);
  }
}

TEST(DataTypeTest, NumpyTypeStringIsNativeEndian) {
  for (const TypeCase& c : kTypes) {
    std::string expected = c.numpy_little_endian;
    if (std::endian::native == std::endian::big && c.size > 1) expected[0] = '>';
    EXPECT_EQ(NumpyTypeString(c.type), expected) << c.name;
  }
}

TEST(DataTypeTest, Predicates) {
  EXPECT_TRUE(IsFloatingPoint(DataType::kFloat16));
  EXPECT_FALSE(IsFloatingPoint(DataType::kComplex64));
  EXPECT_TRUE(IsComplex(DataType::kComplex128));
  EXPECT_TRUE(IsSignedInteger(DataType::kInt8));
  EXPECT_FALSE(IsSignedInteger(DataType::kUInt8));
  EXPECT_TRUE(IsUnsignedInteger(DataType::kUInt64));
  EXPECT_FALSE(IsUnsignedInteger(DataType::kBool));
  EXPECT_FALSE(IsSignedInteger(DataType::kBool));
}

TEST(DataTypeTest, UnknownNameIsUnsupportedAndNamed) {
  for (const char* name : {"string", "float128", "Float32", "", "r16"}) {
    Result<DataType> parsed = ParseDataTypeName(name);
    ASSERT_FALSE(parsed.ok()) << name;
    EXPECT_EQ(parsed.status().code(), ErrorCode::kUnsupported);
    EXPECT_THAT(parsed.status().message(), HasSubstr("'" + std::string(name) + "'"));
  }
}

TEST(DataTypeFloat16Test, KnownValues) {
  struct Case {
    double value;
    uint16_t bits;
  };
  const Case cases[] = {
      {1.0, 0x3c00},
      {-2.0, 0xc000},
      {0.0, 0x0000},
      {-0.0, 0x8000},
      {0.1, 0x2e66},
      {1.0 / 3, 0x3555},
      {65504, 0x7bff},                                    // largest finite
      {65519.99, 0x7bff},                                 // just below the rounding boundary
      {65520, 0x7c00},                                    // rounds to infinity
      {std::ldexp(1, -14), 0x0400},                       // smallest normal
      {std::ldexp(1, -24), 0x0001},                       // smallest subnormal
      {std::ldexp(1, -25), 0x0000},                       // half of it: tie to even (zero)
      {std::ldexp(3, -26), 0x0001},                       // above the tie
      {std::ldexp(3, -25), 0x0002},                       // 1.5 units: tie to even (2)
      {std::ldexp(1, -14) - std::ldexp(1, -25), 0x0400},  // subnormal rounding up to normal
      {1 + std::ldexp(1, -11), 0x3c00},                   // tie to even (down)
      {1 + std::ldexp(3, -11), 0x3c02},                   // tie to even (up)
      // Just above a tie: rounding through float first would lose the 2^-40 and round down.
      {1 + std::ldexp(1, -11) + std::ldexp(1, -40), 0x3c01},
      {1e-300, 0x0000},
      {-1e300, 0xfc00},
      {std::numeric_limits<double>::denorm_min(), 0x0000},
      {INFINITY, 0x7c00},
      {-INFINITY, 0xfc00},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(DoubleToFloat16Bits(c.value), c.bits) << c.value;
  }
  EXPECT_EQ(DoubleToFloat16Bits(std::numeric_limits<double>::quiet_NaN()), 0x7e00);
  EXPECT_EQ(DoubleToFloat16Bits(-std::numeric_limits<double>::quiet_NaN()), 0xfe00);
}

TEST(DataTypeFloat16Test, EveryHalfValueRoundTrips) {
  for (uint32_t bits = 0; bits <= 0xffff; ++bits) {
    const auto half = static_cast<uint16_t>(bits);
    const double value = Float16BitsToDouble(half);
    if ((half & 0x7c00) == 0x7c00 && (half & 0x03ff) != 0) {
      ASSERT_TRUE(std::isnan(value)) << bits;
      ASSERT_EQ(std::signbit(value), (half & 0x8000) != 0) << bits;
      // A NaN comes back quiet, with its sign and payload.
      ASSERT_EQ(DoubleToFloat16Bits(value), half | 0x0200) << bits;
    } else {
      ASSERT_EQ(DoubleToFloat16Bits(value), half) << bits;
    }
  }
  EXPECT_EQ(Float16BitsToDouble(0x3c00), 1.0);
  EXPECT_EQ(Float16BitsToDouble(0x0001), std::ldexp(1, -24));
  EXPECT_EQ(Float16BitsToDouble(0x7bff), 65504.0);
  EXPECT_EQ(Float16BitsToDouble(0xfc00), -INFINITY);
}

#if defined(__FLT16_MAX__)
// The compiler's own conversion (software-rounded from double) as an independent oracle.
TEST(DataTypeFloat16Test, MatchesCompilerConversionOnRandomDoubles) {
  std::mt19937_64 rng(42);
  std::uniform_int_distribution<int> exponent(-30, 17);
  std::uniform_real_distribution<double> mantissa(-2.0, 2.0);
  for (int i = 0; i < 200000; ++i) {
    double value = std::ldexp(mantissa(rng), exponent(rng));
    if (i % 4 == 0) {
      // Values near ties: a half-representable value plus half a unit and a perturbation.
      value = std::ldexp(std::round(std::ldexp(value, 12)) + 0.5, -12);
      if (i % 8 == 0) value = std::nextafter(value, i % 16 == 0 ? INFINITY : -INFINITY);
    }
    const auto expected = std::bit_cast<uint16_t>(static_cast<_Float16>(value));
    ASSERT_EQ(DoubleToFloat16Bits(value), expected) << std::hexfloat << value;
  }
}
#endif

}  // namespace
}  // namespace zarrstream

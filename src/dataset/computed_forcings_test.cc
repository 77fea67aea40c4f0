#include "dataset/computed_forcings.h"

#include <gtest/gtest.h>

#include <cmath>

namespace zarrstream {
namespace {

using forcing_math::JulianDay;
using forcing_math::LocalTime;
using forcing_math::Value;

// 2020-03-01T06:00:00Z (a leap year: 31 + 29 days before it) and 1969-12-31T18:00:00Z.
constexpr int64_t kMarch2020 = 1583042400;
constexpr int64_t kEve1969 = -6 * 3600;

TEST(ComputedForcings, NamesRoundTrip) {
  for (uint32_t k = 0; k < forcing_math::kNumKinds; ++k) {
    const auto kind = static_cast<forcing_math::Kind>(k);
    EXPECT_EQ(ComputedForcingByName(ComputedForcingName(kind)), kind);
  }
  EXPECT_FALSE(ComputedForcingByName("cos_lattitude"));
  EXPECT_NE(ComputedForcingNames().find("cos_solar_zenith_angle"), std::string::npos);
}

TEST(ComputedForcings, JulianDayCountsFromTheYearsFirstDay) {
  EXPECT_DOUBLE_EQ(JulianDay(kMarch2020), 60.25);
  EXPECT_DOUBLE_EQ(JulianDay(kEve1969), 364.75);
  EXPECT_DOUBLE_EQ(JulianDay(0), 0.0);
  EXPECT_EQ(forcing_math::DaysFromCivil(2000, 3, 1), 11017);
}

TEST(ComputedForcings, LocalTimeWrapsIntoTheDay) {
  EXPECT_DOUBLE_EQ(LocalTime(kMarch2020, 0), 6.0);
  EXPECT_DOUBLE_EQ(LocalTime(kMarch2020, -135), 21.0);  // 6 − 9 hours, wrapped
  EXPECT_DOUBLE_EQ(LocalTime(kEve1969, 90), 0.0);       // 18 + 6 hours
}

TEST(ComputedForcings, SolarZenithAngleAtNoonAndAtNight) {
  // Local solar noon on the equator near an equinox: the sun is nearly overhead.
  const int64_t noon = kMarch2020 + 6 * 3600;
  EXPECT_GT(Value(forcing_math::kCosSolarZenithAngle, noon, 0, 0), 0.99);
  // Midnight at longitude 0 is night everywhere but the polar day.
  EXPECT_EQ(Value(forcing_math::kCosSolarZenithAngle, noon + 12 * 3600, 0, 0), 0.0);
  EXPECT_EQ(Value(forcing_math::kInsolation, noon, 30, 10),
            Value(forcing_math::kCosSolarZenithAngle, noon, 30, 10));
  EXPECT_DOUBLE_EQ(Value(forcing_math::kSinLatitude, 0, 30, 0), std::sin(M_PI / 6));
  EXPECT_DOUBLE_EQ(Value(forcing_math::kCosJulianDay, kMarch2020, 0, 0),
                   std::cos(60.25 / 365.25 * M_PI * 2));
}

}  // namespace
}  // namespace zarrstream

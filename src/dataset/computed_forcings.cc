#include "dataset/computed_forcings.h"

#include <array>

#include "util/format.h"

namespace zarrstream {
namespace {

using forcing_math::Kind;

constexpr std::array<std::string_view, forcing_math::kNumKinds> kNames = {
    "cos_latitude",           "sin_latitude",   "cos_longitude",  "sin_longitude",
    "cos_julian_day",         "sin_julian_day", "cos_local_time", "sin_local_time",
    "cos_solar_zenith_angle", "insolation"};

}  // namespace

std::optional<Kind> ComputedForcingByName(std::string_view name) {
  for (size_t k = 0; k < kNames.size(); ++k) {
    if (kNames[k] == name) return static_cast<Kind>(k);
  }
  return std::nullopt;
}

std::string_view ComputedForcingName(Kind kind) { return kNames[kind]; }

std::string ComputedForcingNames() { return Join(kNames); }

bool ComputedForcingNeedsTime(Kind kind) { return kind >= forcing_math::kCosJulianDay; }

bool ComputedForcingNeedsLatitude(Kind kind) {
  return kind == forcing_math::kCosLatitude || kind == forcing_math::kSinLatitude ||
         kind == forcing_math::kCosSolarZenithAngle || kind == forcing_math::kInsolation;
}

bool ComputedForcingNeedsLongitude(Kind kind) {
  return kind == forcing_math::kCosLongitude || kind == forcing_math::kSinLongitude ||
         kind >= forcing_math::kCosLocalTime;
}

}  // namespace zarrstream

// Computed forcings: input channels the loader computes for each sample's valid time and grid point
// instead of reading them (ECMWF anemoi-datasets' names: "cos_latitude", "cos_solar_zenith_angle",
// ...). Their values are dataset/computed_forcing_math.h's; this names them.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dataset/computed_forcing_math.h"

namespace zarrstream {

// The forcing `name` computes; nullopt for any other name.
std::optional<forcing_math::Kind> ComputedForcingByName(std::string_view name);
std::string_view ComputedForcingName(forcing_math::Kind kind);
// Every computed forcing's name, comma-separated, for error messages.
std::string ComputedForcingNames();

// What a forcing needs: the valid time, the latitude, the longitude.
bool ComputedForcingNeedsTime(forcing_math::Kind kind);
bool ComputedForcingNeedsLatitude(forcing_math::Kind kind);
bool ComputedForcingNeedsLongitude(forcing_math::Kind kind);

}  // namespace zarrstream

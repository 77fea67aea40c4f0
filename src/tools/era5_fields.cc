// The field formulas. Each variable is climatology (functions of latitude, level, season, local
// time and the static fields) plus weather (noise streams, era5_noise.h) scaled by a spread that
// depends on latitude and level. Magnitudes follow ERA5: jets of ~40 m/s at 200-250 hPa, 500 hPa
// height anomalies of ~100-150 m in midlatitudes, a 2 m temperature diurnal range of ~10 K over
// land.
#include "tools/era5_fields.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <string>

#include "tools/era5_noise.h"
#include "util/mix64.h"

namespace zarrstream::tools {

namespace {

constexpr double kGravity = 9.80665;         // m s-2, as ERA5 converts geopotential
constexpr double kEarthRotation = 7.292e-5;  // rad s-1
constexpr double kSolarConstant = 1361.0;    // W m-2
constexpr double kTropicalYearDays = 365.2422;
// Days from 1900-01-01T00 UTC to the March equinox of 1900 (March 21, ~01 UTC); later equinoxes
// follow from the tropical year.
constexpr double kMarchEquinoxDay = 79.05;
// Days from January 1 to perihelion (Earth closest to the sun).
constexpr double kPerihelionDay = 3.0;
// The warmest point of the seasonal cycle lags the solstice by about a month.
constexpr double kSeasonLagDays = 30.0;
constexpr size_t kNumLevels = kEra5PressureLevelsHpa.size();

constexpr Era5VariableInfo kVariables[] = {
    {Era5Variable::k2mTemperature, Era5VariableKind::kSurface, "2m_temperature", "K",
     "2 metre temperature", "air_temperature"},
    {Era5Variable::k10mUComponentOfWind, Era5VariableKind::kSurface, "10m_u_component_of_wind",
     "m s**-1", "10 metre U wind component", "eastward_wind"},
    {Era5Variable::k10mVComponentOfWind, Era5VariableKind::kSurface, "10m_v_component_of_wind",
     "m s**-1", "10 metre V wind component", "northward_wind"},
    {Era5Variable::kMeanSeaLevelPressure, Era5VariableKind::kSurface, "mean_sea_level_pressure",
     "Pa", "Mean sea level pressure", "air_pressure_at_mean_sea_level"},
    {Era5Variable::kSurfacePressure, Era5VariableKind::kSurface, "surface_pressure", "Pa",
     "Surface pressure", "surface_air_pressure"},
    {Era5Variable::kTotalPrecipitation, Era5VariableKind::kSurface, "total_precipitation", "m",
     "Total precipitation (6-hourly accumulation)", "lwe_thickness_of_precipitation_amount"},
    {Era5Variable::kTopOfAtmosphereIncidentSolarRadiation, Era5VariableKind::kSurface,
     "toa_incident_solar_radiation", "J m**-2", "TOA incident solar radiation",
     "integral_wrt_time_of_toa_incoming_shortwave_flux"},
    {Era5Variable::kTotalColumnWaterVapour, Era5VariableKind::kSurface, "total_column_water_vapour",
     "kg m**-2", "Total column vertically-integrated water vapour",
     "atmosphere_mass_content_of_water_vapor"},
    {Era5Variable::kGeopotential, Era5VariableKind::kPressureLevel, "geopotential", "m**2 s**-2",
     "Geopotential", "geopotential"},
    {Era5Variable::kTemperature, Era5VariableKind::kPressureLevel, "temperature", "K",
     "Temperature", "air_temperature"},
    {Era5Variable::kUComponentOfWind, Era5VariableKind::kPressureLevel, "u_component_of_wind",
     "m s**-1", "U component of wind", "eastward_wind"},
    {Era5Variable::kVComponentOfWind, Era5VariableKind::kPressureLevel, "v_component_of_wind",
     "m s**-1", "V component of wind", "northward_wind"},
    {Era5Variable::kSpecificHumidity, Era5VariableKind::kPressureLevel, "specific_humidity",
     "kg kg**-1", "Specific humidity", "specific_humidity"},
    {Era5Variable::kLandSeaMask, Era5VariableKind::kStatic, "land_sea_mask", "(0 - 1)",
     "Land-sea mask", "land_binary_mask"},
    {Era5Variable::kGeopotentialAtSurface, Era5VariableKind::kStatic, "geopotential_at_surface",
     "m**2 s**-2", "Geopotential at surface", "surface_geopotential"},
};

// Per-level climatology, in the order of kEra5PressureLevelsHpa (50 ... 1000 hPa).
// Geopotential height of the US standard atmosphere (m).
constexpr double kStandardHeight[kNumLevels] = {20576, 16180, 13608, 11784, 10363, 9164, 7185,
                                                5574,  4206,  3012,  1457,  762,   110};
// Equator-to-pole height contrast (m): warm tropical columns are thicker.
constexpr double kHeightContrast[kNumLevels] = {800, 950, 1000, 1000, 950, 880, 750,
                                                600, 480, 380,  230,  150, 100};
// Midlatitude spread of height anomalies (m).
constexpr double kHeightSpread[kNumLevels] = {260, 240, 220, 220, 220, 210, 185,
                                              160, 140, 125, 110, 105, 100};
// Tropical temperature (K): the cold tropical tropopause near 100 hPa.
constexpr double kTropicalTemperature[kNumLevels] = {210, 195, 205, 218, 228, 238, 254,
                                                     267, 276, 284, 293, 297, 301};
// Tropics-minus-pole temperature (K); negative in the lower stratosphere, whose poles are warmer.
constexpr double kPoleContrast[kNumLevels] = {-15, -20, -10, 2, 15, 25, 32, 35, 37, 38, 40, 42, 45};
constexpr double kTemperatureSpread[kNumLevels] = {3.0, 2.5, 2.5, 2.5, 3.0, 3.0, 3.5,
                                                   3.5, 3.5, 3.5, 4.0, 4.0, 4.0};
// Spread of the wind not explained by geostrophy (m/s).
constexpr double kAgeostrophicSpread[kNumLevels] = {3.0, 3.0, 3.0, 3.5, 3.5, 3.0, 2.5,
                                                    2.2, 2.0, 2.0, 2.0, 1.8, 1.6};
constexpr size_t kSurfaceLevel = kNumLevels - 1;  // 1000 hPa

}  // namespace

namespace {

// --- Calendar and sun. ---------------------------------------------------------------------------

double DaysSince1900(double hours) { return hours / 24.0; }

double OrbitAngle(double hours) {
  return 2 * kPi * (DaysSince1900(hours) - kMarchEquinoxDay) / kTropicalYearDays;
}

// Solar declination (radians): positive in northern summer.
double Declination(double hours) { return 23.44 * kDegree * std::sin(OrbitAngle(hours)); }

// +1 at the height of northern summer, -1 of northern winter (lagging the solstice).
double Season(double hours) {
  return std::sin(OrbitAngle(hours) - 2 * kPi * kSeasonLagDays / kTropicalYearDays);
}

// The sun's hour angle at `longitude_rad` (0 at local solar noon; the equation of time is
// neglected).
double HourAngle(double hours, double longitude_rad) {
  return 2 * kPi * std::fmod(hours, 24.0) / 24.0 + longitude_rad - kPi;
}

// The latitude (degrees) of the thermal equator: the ITCZ follows the sun, north of the equator on
// average.
double ThermalEquator(double season) { return 6.0 + 9.0 * season; }

// --- Winds. -------------------------------------------------------------------------------------

double SurfaceZonalWind(double lat) {
  return -7.0 * Gaussian(std::abs(lat) - 15.0, 10.0) + 9.0 * Gaussian(std::abs(lat) - 50.0, 11.0);
}

// Trade winds blowing towards the equator.
double SurfaceMeridionalWind(double lat) {
  return -4.0 * std::sin(2 * kPi * lat / 60.0) * Gaussian(lat, 22.0);
}

double ZonalWind(double lat, double zeta, double season) {
  const double jet = 38.0 * Gaussian(zeta - 1.45, 0.8);
  // The winter hemisphere's jet is stronger and nearer the equator.
  const double north = (1 - 0.35 * season) * Gaussian(lat - (36 + 7 * season), 11.0);
  const double south = (1 + 0.35 * season) * Gaussian(lat + (36 - 7 * season), 11.0);
  const double tropical_easterlies = -8.0 * Gaussian(lat, 15.0) * Gaussian(zeta - 2.3, 0.6);
  return jet * (north + south) + SurfaceZonalWind(lat) * std::exp(-zeta / 0.6) +
         tropical_easterlies;
}

// The Hadley cells: towards the equator near the surface, away from it aloft.
double MeridionalWind(double lat, double zeta) {
  return SurfaceMeridionalWind(lat) * (std::exp(-zeta / 0.4) - 0.5 * Gaussian(zeta - 1.6, 0.4));
}

// Share of a midlatitude anomaly spread a latitude gets (weather is weaker in the tropics).
double StormWeight(double sin_lat) { return 0.25 + 0.75 * sin_lat * sin_lat; }

// Adds the geostrophic wind of the height anomaly spread[i] · psi (m) to `out`: eastward
// (zonal) or northward. The Coriolis parameter is bounded away from zero and changes sign smoothly
// across the equator, where geostrophy fails.
void AddGeostrophicWind(const Tables& t, bool zonal, std::span<const float> psi,
                        std::span<const double> spread, std::span<float> out) {
  const size_t nlat = t.grid.num_latitudes;
  const size_t nlon = t.grid.num_longitudes;
  const double dlon = 2 * kPi / static_cast<double>(nlon);
  for (size_t i = 0; i < nlat; ++i) {
    const double lat = t.latitude[i];
    const double inverse_f =
        std::tanh(lat / 8.0) / (2 * kEarthRotation * std::max(std::abs(t.sin_lat[i]), 0.42));
    float* row = out.data() + i * nlon;
    if (zonal) {
      const size_t north = i == 0 ? 0 : i - 1;
      const size_t south = std::min(i + 1, nlat - 1);
      const double dphi = (t.latitude[north] - t.latitude[south]) * kDegree;
      const auto scale =
          static_cast<float>(-kGravity * inverse_f / kEarthRadius * spread[i] / dphi);
      const float* pn = psi.data() + north * nlon;
      const float* ps = psi.data() + south * nlon;
      for (size_t j = 0; j < nlon; ++j) row[j] += scale * (pn[j] - ps[j]);
    } else {
      const auto scale =
          static_cast<float>(kGravity * inverse_f / (kEarthRadius * std::max(t.cos_lat[i], 0.35)) *
                             spread[i] / (2 * dlon));
      const float* p = psi.data() + i * nlon;
      for (size_t j = 0; j < nlon; ++j) {
        const size_t east = j + 1 == nlon ? 0 : j + 1;
        const size_t west = j == 0 ? nlon - 1 : j - 1;
        row[j] += scale * (p[east] - p[west]);
      }
    }
  }
}

// --- Variables. ---------------------------------------------------------------------------------

double Zeta(size_t level) {
  return std::log(1000.0 / static_cast<double>(kEra5PressureLevelsHpa[level]));
}

std::span<float> NoiseBuffer(const Tables& t, Era5FieldScratch* scratch, int which) {
  scratch->noise[which].resize(t.grid.num_points());
  return scratch->noise[which];
}

// Per-row height anomaly spread (m) at `level`.
std::vector<double> HeightSpread(const Tables& t, size_t level) {
  std::vector<double> spread(t.grid.num_latitudes);
  for (size_t i = 0; i < spread.size(); ++i) {
    spread[i] = kHeightSpread[level] * StormWeight(t.sin_lat[i]);
  }
  return spread;
}

void MakeGeopotential(const Tables& t, double hours, size_t level, std::span<float> out,
                      Era5FieldScratch* scratch) {
  std::span<float> psi = NoiseBuffer(t, scratch, 0);
  MakeNoise(t, kDynamicsStyle, hours, Zeta(level), psi, scratch);
  const double season = Season(hours);
  const size_t nlon = t.grid.num_longitudes;
  for (size_t i = 0; i < t.grid.num_latitudes; ++i) {
    const double contrast = kHeightContrast[level];
    const double height = kStandardHeight[level] + contrast * (t.cos_lat[i] * t.cos_lat[i] - 0.6) +
                          0.35 * contrast * t.sin_lat[i] * season;
    const auto base = static_cast<float>(kGravity * height);
    const auto spread =
        static_cast<float>(kGravity * kHeightSpread[level] * StormWeight(t.sin_lat[i]));
    for (size_t j = 0; j < nlon; ++j) out[i * nlon + j] = base + spread * psi[i * nlon + j];
  }
}

void MakeTemperature(const Tables& t, double hours, size_t level, std::span<float> out,
                     Era5FieldScratch* scratch) {
  std::span<float> theta = NoiseBuffer(t, scratch, 0);
  MakeNoise(t, kThermalStyle, hours, Zeta(level), theta, scratch);
  const double season = Season(hours);
  const size_t nlon = t.grid.num_longitudes;
  for (size_t i = 0; i < t.grid.num_latitudes; ++i) {
    const double s2 = t.sin_lat[i] * t.sin_lat[i];
    const auto base = static_cast<float>(kTropicalTemperature[level] - kPoleContrast[level] * s2 +
                                         10.0 * t.sin_lat[i] * season);
    const auto spread = static_cast<float>(kTemperatureSpread[level] * (0.5 + 0.8 * s2));
    for (size_t j = 0; j < nlon; ++j) out[i * nlon + j] = base + spread * theta[i * nlon + j];
  }
}

void MakeUpperWind(const Tables& t, bool zonal, double hours, size_t level, std::span<float> out,
                   Era5FieldScratch* scratch) {
  const double zeta = Zeta(level);
  std::span<float> psi = NoiseBuffer(t, scratch, 0);
  std::span<float> own = NoiseBuffer(t, scratch, 1);
  MakeNoise(t, kDynamicsStyle, hours, zeta, psi, scratch);
  MakeNoise(t, zonal ? kAgeostrophicUStyle : kAgeostrophicVStyle, hours, zeta, own, scratch);
  const double season = Season(hours);
  const size_t nlon = t.grid.num_longitudes;
  const auto spread = static_cast<float>(kAgeostrophicSpread[level]);
  for (size_t i = 0; i < t.grid.num_latitudes; ++i) {
    const double lat = t.latitude[i];
    const auto mean =
        static_cast<float>(zonal ? ZonalWind(lat, zeta, season) : MeridionalWind(lat, zeta));
    for (size_t j = 0; j < nlon; ++j) out[i * nlon + j] = mean + spread * own[i * nlon + j];
  }
  AddGeostrophicWind(t, zonal, psi, HeightSpread(t, level), out);
}

void MakeSpecificHumidity(const Tables& t, double hours, size_t level, std::span<float> out,
                          Era5FieldScratch* scratch) {
  std::span<float> moisture = NoiseBuffer(t, scratch, 0);
  MakeNoise(t, kMoistureStyle, hours, Zeta(level), moisture, scratch);
  const double season = Season(hours);
  const double pressure_factor =
      std::pow(static_cast<double>(kEra5PressureLevelsHpa[level]) / 1000.0, 3.1);
  const size_t nlon = t.grid.num_longitudes;
  for (size_t i = 0; i < t.grid.num_latitudes; ++i) {
    const double lat = t.latitude[i];
    double surface = 0.0015 + 0.0175 * Gaussian(lat - ThermalEquator(season), 24.0) +
                     0.004 * season * t.sin_lat[i] * Gaussian(std::abs(lat) - 40.0, 18.0);
    surface = std::max(surface, 0.0008);
    const auto scale = static_cast<float>(surface * pressure_factor * std::exp(-0.1));
    for (size_t j = 0; j < nlon; ++j) {
      // Saturation: nothing holds much more than 0.03 kg/kg; the stratosphere keeps ~2.5e-6.
      const float q = scale * std::exp(0.45f * moisture[i * nlon + j]);
      out[i * nlon + j] = 0.03f * std::tanh(q / 0.03f) + 2.5e-6f;
    }
  }
}

void Make2mTemperature(const Tables& t, double hours, std::span<float> out,
                       Era5FieldScratch* scratch) {
  std::span<float> theta = NoiseBuffer(t, scratch, 0);
  MakeNoise(t, kThermalStyle, hours, Zeta(kSurfaceLevel), theta, scratch);
  const double season = Season(hours);
  const size_t nlon = t.grid.num_longitudes;
  // The diurnal cycle per column: warmest about 2.5 hours after local noon.
  std::vector<float>& diurnal = scratch->rows;
  diurnal.resize(nlon);
  for (size_t j = 0; j < nlon; ++j) {
    diurnal[j] =
        static_cast<float>(std::cos(HourAngle(hours, t.longitude_rad[j]) - 2 * kPi * 2.5 / 24.0));
  }
  for (size_t i = 0; i < t.grid.num_latitudes; ++i) {
    const double lat = t.latitude[i];
    const double s2 = t.sin_lat[i] * t.sin_lat[i];
    const auto zonal = static_cast<float>(301.0 - 48.0 * s2);
    const auto seasonal = static_cast<float>(13.0 * t.sin_lat[i] * season);
    const auto desert = static_cast<float>(6.0 * Gaussian(std::abs(lat) - 25.0, 12.0));
    const auto daylight = static_cast<float>(std::sqrt(std::max(t.cos_lat[i], 0.0)));
    const auto spread = static_cast<float>(1.5 + 3.5 * s2);
    for (size_t j = 0; j < nlon; ++j) {
      const size_t k = i * nlon + j;
      const float land = t.land_sea_mask[k];
      out[k] = zonal + seasonal * (0.3f + 0.7f * land) + desert * land -
               0.0065f * std::max(t.surface_height[k], 0.0f) +
               (0.5f + 5.5f * land) * daylight * diurnal[j] +
               spread * (0.6f + 0.6f * land) * theta[k];
    }
  }
}

double MeanSeaLevelPressureClimate(double lat) {
  const double a = std::abs(lat);
  return 101325.0 - 1200.0 * Gaussian(a - 62.0, 9.0) + 800.0 * Gaussian(a - 32.0, 10.0) -
         400.0 * Gaussian(lat, 12.0);
}

void MakeMeanSeaLevelPressure(const Tables& t, double hours, std::span<float> out,
                              Era5FieldScratch* scratch) {
  std::span<float> psi = NoiseBuffer(t, scratch, 0);
  MakeNoise(t, kDynamicsStyle, hours, Zeta(kSurfaceLevel), psi, scratch);
  const size_t nlon = t.grid.num_longitudes;
  for (size_t i = 0; i < t.grid.num_latitudes; ++i) {
    const auto base = static_cast<float>(MeanSeaLevelPressureClimate(t.latitude[i]));
    // ~12 Pa per metre of height anomaly near the surface.
    const auto spread =
        static_cast<float>(12.0 * kHeightSpread[kSurfaceLevel] * StormWeight(t.sin_lat[i]));
    for (size_t j = 0; j < nlon; ++j) out[i * nlon + j] = base + spread * psi[i * nlon + j];
  }
}

void Make10mWind(const Tables& t, bool zonal, double hours, std::span<float> out,
                 Era5FieldScratch* scratch) {
  const double zeta = Zeta(kSurfaceLevel);
  std::span<float> psi = NoiseBuffer(t, scratch, 0);
  std::span<float> own = NoiseBuffer(t, scratch, 1);
  MakeNoise(t, kDynamicsStyle, hours, zeta, psi, scratch);
  MakeNoise(t, zonal ? kAgeostrophicUStyle : kAgeostrophicVStyle, hours, zeta, own, scratch);
  std::fill(out.begin(), out.end(), 0.0f);
  AddGeostrophicWind(t, zonal, psi, HeightSpread(t, kSurfaceLevel), out);
  const size_t nlon = t.grid.num_longitudes;
  for (size_t i = 0; i < t.grid.num_latitudes; ++i) {
    const double lat = t.latitude[i];
    const auto mean =
        static_cast<float>(zonal ? SurfaceZonalWind(lat) : SurfaceMeridionalWind(lat));
    for (size_t j = 0; j < nlon; ++j) {
      const size_t k = i * nlon + j;
      // Friction: 10 m winds are weaker than the free flow, more so over rough land.
      const float friction = 0.7f - 0.3f * t.land_sea_mask[k];
      out[k] = friction * (mean + out[k]) + 1.5f * own[k];
    }
  }
}

// The moisture stream at the height that dominates the column (~700-800 hPa).
constexpr double kColumnMoistureZeta = 0.35;

void MakeTotalColumnWaterVapour(const Tables& t, double hours, std::span<float> out,
                                Era5FieldScratch* scratch) {
  std::span<float> moisture = NoiseBuffer(t, scratch, 0);
  MakeNoise(t, kMoistureStyle, hours, kColumnMoistureZeta, moisture, scratch);
  const double season = Season(hours);
  const size_t nlon = t.grid.num_longitudes;
  for (size_t i = 0; i < t.grid.num_latitudes; ++i) {
    const double lat = t.latitude[i];
    const auto climate = static_cast<float>(
        4.0 + 50.0 * Gaussian(lat - ThermalEquator(season), 22.0) +
        8.0 * Gaussian(std::abs(lat) - 45.0, 15.0) * (1.0 + 0.5 * season * t.sin_lat[i]));
    for (size_t j = 0; j < nlon; ++j) {
      const size_t k = i * nlon + j;
      const float w =
          climate * std::exp(0.25f * moisture[k] - std::max(t.surface_height[k], 0.0f) / 2200.0f);
      // Saturation caps the moistest columns near 80 kg m-2; the driest keep a little.
      out[k] = 80.0f * std::tanh(w / 80.0f) + 0.2f;
    }
  }
}

void MakeTotalPrecipitation(const Tables& t, double hours, std::span<float> out,
                            Era5FieldScratch* scratch) {
  std::span<float> moisture = NoiseBuffer(t, scratch, 0);
  std::span<float> rain = NoiseBuffer(t, scratch, 1);
  MakeNoise(t, kMoistureStyle, hours, kColumnMoistureZeta, moisture, scratch);
  MakeNoise(t, kRainStyle, hours, 0.0, rain, scratch);
  const double season = Season(hours);
  const size_t nlon = t.grid.num_longitudes;
  for (size_t i = 0; i < t.grid.num_latitudes; ++i) {
    const double lat = t.latitude[i];
    // Wet ITCZ and storm tracks, dry subtropics.
    const auto wetness = static_cast<float>(0.9 * Gaussian(lat - ThermalEquator(season), 8.0) +
                                            0.45 * Gaussian(std::abs(lat) - 52.0, 12.0) -
                                            0.7 * Gaussian(std::abs(lat) - 24.0, 8.0));
    for (size_t j = 0; j < nlon; ++j) {
      const size_t k = i * nlon + j;
      const float excess = 0.6f * moisture[k] + 0.8f * rain[k] + wetness + 0.1f;
      // Exactly zero where it does not rain; heavy tails where it does (tens of mm in 6 h).
      out[k] = excess > 0 ? 6e-4f * std::expm1(0.9f * excess) : 0.0f;
    }
  }
}

// Solar energy reaching the top of the atmosphere during the hour ending at `hours`, as ERA5
// accumulates it (J m-2): the cosine of the zenith angle integrated over 12 five-minute steps.
void MakeTopOfAtmosphereIncidentSolarRadiation(const Tables& t, double hours, std::span<float> out,
                                               Era5FieldScratch* scratch) {
  constexpr int kSteps = 12;
  const size_t nlat = t.grid.num_latitudes;
  const size_t nlon = t.grid.num_longitudes;
  const double declination = Declination(hours);
  const double distance_factor =
      1.0 +
      0.0334 *
          std::cos(2 * kPi * (std::fmod(DaysSince1900(hours), kTropicalYearDays) - kPerihelionDay) /
                   kTropicalYearDays);
  const double joules_per_step = kSolarConstant * distance_factor * 3600.0 / kSteps;
  std::vector<float>& cos_hour = scratch->rows;
  cos_hour.resize(kSteps * nlon);
  for (int s = 0; s < kSteps; ++s) {
    const double when = hours - 1.0 + (s + 0.5) / kSteps;
    for (size_t j = 0; j < nlon; ++j) {
      cos_hour[s * nlon + j] = static_cast<float>(std::cos(HourAngle(when, t.longitude_rad[j])));
    }
  }
  std::fill(out.begin(), out.end(), 0.0f);
  for (size_t i = 0; i < nlat; ++i) {
    const auto a = static_cast<float>(t.sin_lat[i] * std::sin(declination));
    const auto b = static_cast<float>(t.cos_lat[i] * std::cos(declination));
    float* row = out.data() + i * nlon;
    for (int s = 0; s < kSteps; ++s) {
      const float* c = cos_hour.data() + s * nlon;
      for (size_t j = 0; j < nlon; ++j) row[j] += std::max(a + b * c[j], 0.0f);
    }
    const auto scale = static_cast<float>(joules_per_step);
    for (size_t j = 0; j < nlon; ++j) row[j] *= scale;
  }
}

// The static fields: continents from thresholded noise with a few geographic biases (Antarctica,
// more land in the northern midlatitudes, open Southern and Arctic oceans), fractional along
// coasts; mountains from the orography stream; tiny ripples over sea.
void MakeStaticFields(Tables* t) {
  const size_t n = t->grid.num_points();
  const size_t nlon = t->grid.num_longitudes;
  Era5FieldScratch scratch;
  std::vector<float> land(n), mountains(n), ripple(n);
  MakeNoise(*t, kLandStyle, 0, 0, land, &scratch);
  MakeNoise(*t, kOrographyStyle, 0, 0, mountains, &scratch);
  MakeNoise(*t, kOceanRippleStyle, 0, 0, ripple, &scratch);
  for (size_t i = 0; i < t->grid.num_latitudes; ++i) {
    const double lat = t->latitude[i];
    const auto bias = static_cast<float>(
        4.0 * Smoothstep(Clamp01((-64.0 - lat) / 8.0)) + 0.35 * Gaussian(lat - 50.0, 20.0) -
        0.9 * Gaussian(lat + 52.0, 10.0) - 1.2 * Smoothstep(Clamp01((lat - 78.0) / 6.0)));
    for (size_t j = 0; j < nlon; ++j) land[i * nlon + j] += bias;
  }
  // The land fraction of a coastal cell ramps over this much of the land score.
  constexpr double kCoastWidth = 0.25;
  auto land_fraction = [&](double score, double threshold) {
    return Clamp01((score - threshold) / kCoastWidth + 0.5);
  };
  // The threshold that makes the Earth's share of the area land, found by bisection so that every
  // seed and grid gets realistic continents.
  constexpr double kLandShare = 0.29;
  double low = -10, high = 10;
  for (int iteration = 0; iteration < 40; ++iteration) {
    const double threshold = 0.5 * (low + high);
    double area = 0, land_area = 0;
    for (size_t i = 0; i < t->grid.num_latitudes; ++i) {
      double row_land = 0;
      for (size_t j = 0; j < nlon; ++j) row_land += land_fraction(land[i * nlon + j], threshold);
      area += t->cos_lat[i] * static_cast<double>(nlon);
      land_area += t->cos_lat[i] * row_land;
    }
    (land_area > kLandShare * area ? low : high) = threshold;
  }
  const double threshold = 0.5 * (low + high);
  t->land_sea_mask.resize(n);
  t->surface_height.resize(n);
  t->pressure_reduction.resize(n);
  for (size_t i = 0; i < t->grid.num_latitudes; ++i) {
    const double lat = t->latitude[i];
    const double plateau = 2800.0 * Smoothstep(Clamp01((-66.0 - lat) / 12.0));
    for (size_t j = 0; j < nlon; ++j) {
      const size_t k = i * nlon + j;
      const double fraction = land_fraction(land[k], threshold);
      // Lowlands rolling with the orography stream, ranges where it is high, and the Antarctic
      // plateau; the highest terrain saturates near 6.5 km.
      const double x = std::max(0.0, mountains[k] - 0.3);
      const double raw_height =
          250.0 * std::exp(0.6 * mountains[k]) + 5000.0 * x * x / (1.0 + x * x) + plateau;
      const double land_height = 6500.0 * std::tanh(raw_height / 6500.0);
      const double height = fraction * land_height + (1.0 - fraction) * 1.2 * ripple[k];
      t->land_sea_mask[k] = static_cast<float>(fraction);
      t->surface_height[k] = static_cast<float>(height);
      t->pressure_reduction[k] = static_cast<float>(std::exp(-std::max(height, 0.0) / 8400.0));
    }
  }
}

// Quantises a field as ERA5's GRIB archive stores it (simple packing, 16 bits per value:
// reference + integer · 2^E) and back to float32, as WeatherBench2's float32 stores hold it. The
// low mantissa bits this fixes are why real reanalysis float32 compresses at all; exact zeros
// (precipitation, night-side radiation) stay zero since the reference is the minimum.
void PackLikeGrib(std::span<float> values) {
  constexpr double kMaxPacked = (1 << 20) - 1;
  const auto [min_it, max_it] = std::minmax_element(values.begin(), values.end());
  const double reference = *min_it;
  const double range = static_cast<double>(*max_it) - reference;
  if (!(range > 0)) return;
  const double step = std::ldexp(1.0, static_cast<int>(std::ceil(std::log2(range / kMaxPacked))));
  const double inverse_step = 1.0 / step;
  for (float& v : values) {
    const double packed = std::rint((v - reference) * inverse_step);
    v = static_cast<float>(reference + packed * step);
  }
}

}  // namespace

// --- Public API. --------------------------------------------------------------------------------

static_assert(std::size(kVariables) ==
              static_cast<size_t>(Era5Variable::kGeopotentialAtSurface) + 1);

std::span<const Era5VariableInfo> Era5Variables() { return kVariables; }

const Era5VariableInfo& Era5VariableInfoFor(Era5Variable variable) {
  return kVariables[static_cast<size_t>(variable)];
}

double Era5Grid::latitude(size_t row) const {
  if (includes_poles) return 90.0 - 180.0 * static_cast<double>(row) / (num_latitudes - 1);
  return 90.0 - 180.0 * (static_cast<double>(row) + 0.5) / num_latitudes;
}

double Era5Grid::longitude(size_t column) const {
  return 360.0 * static_cast<double>(column) / num_longitudes;
}

Result<Era5FieldGenerator> Era5FieldGenerator::Make(const Era5Grid& grid, uint64_t seed) {
  if (grid.num_latitudes < 4 || grid.num_longitudes < 8) {
    std::string message = "synthetic ERA5 grid of ";
    message += std::to_string(grid.num_latitudes);
    message += "x";
    message += std::to_string(grid.num_longitudes);
    message += " points is too small (at least 4 latitudes and 8 longitudes)";
    return InvalidArgumentError(std::move(message));
  }
  auto tables = std::make_shared<Tables>();
  tables->grid = grid;
  tables->seed = seed;
  for (size_t i = 0; i < grid.num_latitudes; ++i) {
    const double lat = grid.latitude(i);
    tables->latitude.push_back(lat);
    tables->sin_lat.push_back(std::sin(lat * kDegree));
    // Exactly zero on the poles (cos(π/2) is 6e-17 in floating point).
    tables->cos_lat.push_back(std::abs(lat) == 90.0 ? 0.0 : std::cos(lat * kDegree));
  }
  for (size_t j = 0; j < grid.num_longitudes; ++j) {
    tables->longitude_rad.push_back(grid.longitude(j) * kDegree);
  }
  tables->octaves = MakeOctaves(*tables);
  MakeStaticFields(tables.get());
  return Era5FieldGenerator(std::move(tables));
}

const Era5Grid& Era5FieldGenerator::grid() const { return tables_->grid; }
uint64_t Era5FieldGenerator::seed() const { return tables_->seed; }

Status Era5FieldGenerator::Generate(Era5Variable variable, int64_t valid_time_hours,
                                    size_t level_index, std::span<float> out,
                                    Era5FieldScratch* scratch) const {
  const Tables& t = *tables_;
  const Era5VariableInfo& info = Era5VariableInfoFor(variable);
  if (out.size() != t.grid.num_points()) {
    std::string message = "generating ";
    message += info.name;
    message += ": output of ";
    message += std::to_string(out.size());
    message += " values for a grid of ";
    message += std::to_string(t.grid.num_points());
    return InvalidArgumentError(std::move(message));
  }
  const size_t num_levels = info.kind == Era5VariableKind::kPressureLevel ? kNumLevels : 1;
  if (level_index >= num_levels) {
    std::string message = "generating ";
    message += info.name;
    message += ": level index ";
    message += std::to_string(level_index);
    message += " out of range [0, ";
    message += std::to_string(num_levels);
    message += ")";
    return InvalidArgumentError(std::move(message));
  }
  const auto hours = static_cast<double>(valid_time_hours);
  switch (variable) {
    case Era5Variable::k2mTemperature:
      Make2mTemperature(t, hours, out, scratch);
      break;
    case Era5Variable::k10mUComponentOfWind:
      Make10mWind(t, /*zonal=*/true, hours, out, scratch);
      break;
    case Era5Variable::k10mVComponentOfWind:
      Make10mWind(t, /*zonal=*/false, hours, out, scratch);
      break;
    case Era5Variable::kMeanSeaLevelPressure:
      MakeMeanSeaLevelPressure(t, hours, out, scratch);
      break;
    case Era5Variable::kSurfacePressure:
      MakeMeanSeaLevelPressure(t, hours, out, scratch);
      for (size_t k = 0; k < out.size(); ++k) out[k] *= t.pressure_reduction[k];
      break;
    case Era5Variable::kTotalPrecipitation:
      MakeTotalPrecipitation(t, hours, out, scratch);
      break;
    case Era5Variable::kTopOfAtmosphereIncidentSolarRadiation:
      MakeTopOfAtmosphereIncidentSolarRadiation(t, hours, out, scratch);
      break;
    case Era5Variable::kTotalColumnWaterVapour:
      MakeTotalColumnWaterVapour(t, hours, out, scratch);
      break;
    case Era5Variable::kGeopotential:
      MakeGeopotential(t, hours, level_index, out, scratch);
      break;
    case Era5Variable::kTemperature:
      MakeTemperature(t, hours, level_index, out, scratch);
      break;
    case Era5Variable::kUComponentOfWind:
      MakeUpperWind(t, /*zonal=*/true, hours, level_index, out, scratch);
      break;
    case Era5Variable::kVComponentOfWind:
      MakeUpperWind(t, /*zonal=*/false, hours, level_index, out, scratch);
      break;
    case Era5Variable::kSpecificHumidity:
      MakeSpecificHumidity(t, hours, level_index, out, scratch);
      break;
    case Era5Variable::kLandSeaMask:
      std::copy(t.land_sea_mask.begin(), t.land_sea_mask.end(), out.begin());
      break;
    case Era5Variable::kGeopotentialAtSurface:
      for (size_t k = 0; k < out.size(); ++k) {
        out[k] = static_cast<float>(kGravity) * t.surface_height[k];
      }
      break;
  }
  PackLikeGrib(out);
  return Status::Ok();
}

}  // namespace zarrstream::tools

// Synthetic ERA5-like weather fields: realistic stand-ins for WeatherBench2's ERA5 variables,
// generated on the fly, with no download.
//
// What makes them realistic enough for tests, demos and benchmarks:
//   - climatology: latitude gradients, jets at 200-250 hPa, trade winds, the ITCZ, a standard
//     atmosphere in the vertical (geopotential ~1e3 m²/s² at 1000 hPa to ~2e5 at 50 hPa, specific
//     humidity falling from ~1e-2 to ~1e-6 kg/kg), continents and orography from a seeded static
//     land-sea mask;
//   - cycles: the hemispheric seasonal cycle, the diurnal cycle of 2 m temperature in local solar
//     time (strong over land, weak over sea), and top-of-atmosphere solar radiation computed from
//     sun geometry (a true forcing: no noise);
//   - weather: a few planetary waves drifting east plus fractal value noise whose octaves run from
//     80° down to the grid spacing with a red spectrum, advected by a climatological steering flow
//     and evolving between key frames in time and in log-pressure. Variables share noise streams
//     the way the atmosphere couples them (winds are the geostrophic winds of the geopotential
//     anomaly; msl, surface pressure and low-level winds share that anomaly; 2 m temperature is
//     the 1000 hPa temperature anomaly; humidity, water vapour and precipitation share moisture),
//     so a model trained on the data has something physical to learn;
//   - bytes: float32 values with random low mantissa bits and a red spectrum compress like real
//     reanalysis (zstd about 1.1-1.6x), not like noise and not like toy data.
//
// Determinism: a field is a pure function of (seed, variable, valid time, level) and the grid, so
// any chunk can be generated alone, on any thread or machine, in any order; thread count does not
// change a byte. Noise octaves larger than the grid spacing are defined on the sphere, not on the
// grid, so two grids with the same seed share their large-scale weather (continents included).
//
// Cost: each field is a handful of separable passes (per-row and per-column tables, lattices
// interpolated row by row), about 10-40 ms for a 721x1440 field on one core.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "zarrstream/status.h"

namespace zarrstream::tools {

enum class Era5VariableKind : uint8_t {
  kSurface,        // (time, latitude, longitude)
  kPressureLevel,  // (time, level, latitude, longitude)
  kStatic,         // (latitude, longitude)
};

enum class Era5Variable : uint8_t {
  k2mTemperature,
  k10mUComponentOfWind,
  k10mVComponentOfWind,
  kMeanSeaLevelPressure,
  kSurfacePressure,
  kTotalPrecipitation,
  kTopOfAtmosphereIncidentSolarRadiation,
  kTotalColumnWaterVapour,
  kGeopotential,
  kTemperature,
  kUComponentOfWind,
  kVComponentOfWind,
  kSpecificHumidity,
  kLandSeaMask,
  kGeopotentialAtSurface,
};

struct Era5VariableInfo {
  Era5Variable variable;
  Era5VariableKind kind;
  std::string_view name;           // WeatherBench2's name: "2m_temperature"
  std::string_view units;          // ERA5's spelling: "m s**-1"
  std::string_view long_name;      // ERA5's: "2 metre temperature"
  std::string_view standard_name;  // CF: "air_temperature"
};

// Every variable, in the order a dataset lists them.
std::span<const Era5VariableInfo> Era5Variables();
const Era5VariableInfo& Era5VariableInfoFor(Era5Variable variable);

// WeatherBench2's 13 pressure levels (hPa), in the order of the level dimension.
inline constexpr std::array<int64_t, 13> kEra5PressureLevelsHpa = {
    50, 100, 150, 200, 250, 300, 400, 500, 600, 700, 850, 925, 1000};

// A regular latitude/longitude grid. Rows run north to south, columns east from 0°.
struct Era5Grid {
  uint32_t num_latitudes = 0;
  uint32_t num_longitudes = 0;
  // True: rows at 90, ..., -90 with the poles as rows (ERA5's 0.25° grid, 721 rows). False: rows
  // at cell centres 90 - (i + 1/2)·180/n (WeatherBench2's pole-less grids, e.g. 5.625°, 32 rows).
  bool includes_poles = true;

  double latitude(size_t row) const;      // degrees north
  double longitude(size_t column) const;  // degrees east, in [0, 360)
  size_t num_points() const { return size_t{num_latitudes} * num_longitudes; }
};

// One thread's working memory for Era5FieldGenerator::Generate: a few fields' worth, grown on
// first use and reused. Not thread-safe: one per thread.
struct Era5FieldScratch {
  std::vector<float> lattice;   // one noise octave's lattice values
  std::vector<float> rows;      // lattice rows interpolated to the grid's columns
  std::vector<float> noise[2];  // noise fields a variable combines
};

// Generates fields of one grid and seed. A cheap handle to immutable tables (the static fields
// and the noise octaves of the grid): copy it freely and call Generate from any number of threads
// at once, each with its own scratch.
class Era5FieldGenerator {
 public:
  // Builds the grid's tables and the static fields for `seed` (a few noise fields' work).
  // kInvalidArgument for a grid smaller than 4x8.
  static Result<Era5FieldGenerator> Make(const Era5Grid& grid, uint64_t seed);

  const Era5Grid& grid() const;
  uint64_t seed() const;

  // Writes `variable` at `valid_time_hours` (hours since 1900-01-01T00:00 UTC, the dataset's time
  // coordinate) and pressure level kEra5PressureLevelsHpa[level_index] (0 for variables without
  // levels; static variables ignore the time) into `out`: grid().num_points() float32 values,
  // rows north to south. Errors (kInvalidArgument) for a wrong output size or level index.
  Status Generate(Era5Variable variable, int64_t valid_time_hours, size_t level_index,
                  std::span<float> out, Era5FieldScratch* scratch) const;

  // The grid's tables and static fields; defined in era5_fields.cc.
  struct Tables;

 private:
  explicit Era5FieldGenerator(std::shared_ptr<const Tables> tables) : tables_(std::move(tables)) {}
  std::shared_ptr<const Tables> tables_;
};

}  // namespace zarrstream::tools

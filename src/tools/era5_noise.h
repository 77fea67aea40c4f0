// The weather noise of the synthetic ERA5 fields, and the grid tables it shares with the field
// formulas (era5_fields.cc).
//
// Noise streams. A stream is a sum of octaves of value noise (hashed lattice values, smoothstep
// interpolation) with lattice spacings 80°, 40°, ... down to twice the grid spacing, plus one
// octave on the grid itself, with amplitude ∝ spacing^slope (the red spectrum). Each octave is
// evaluated separably: its lattice rows are interpolated to the grid's columns once, then each
// grid row blends two of those rows. Lattice values are keyed by (seed, stream, octave, time key,
// depth key, lattice point) and blended between neighbouring time and log-pressure keys (smaller
// octaves change faster and are shallower), and each lattice row drifts with a climatological
// steering flow (westerlies in midlatitudes, easterlies in the tropics), so weather moves east and
// evolves. Near the poles, octaves finer (in metres) than the grid's meridional spacing are tapered
// off, as in ERA5, whose fields are smooth along the crowded high-latitude longitudes. A few
// planetary waves (zonal wavenumbers 1-6, drifting east) are added to the streams that carry them.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numbers>
#include <span>
#include <vector>

#include "tools/era5_fields.h"

namespace zarrstream::tools {

inline constexpr double kPi = std::numbers::pi;
inline constexpr double kDegree = kPi / 180.0;
inline constexpr double kEarthRadius = 6.371e6;

template <typename T>
T Smoothstep(T x) {
  return x * x * (T{3} - T{2} * x);
}

inline double Clamp01(double x) { return std::clamp(x, 0.0, 1.0); }

inline double Gaussian(double x, double width) { return std::exp(-(x / width) * (x / width)); }

// One noise octave on this grid. Physical octaves live on a lattice over the sphere (spacing
// `scale_deg`); the last octave is the grid itself.
struct Octave {
  double scale_deg = 0;
  size_t lattice_rows = 0;
  size_t lattice_cols = 0;
  float cols_per_column = 1;  // lattice columns per grid column
  // Makes the interpolated octave unit-variance: uniform values have variance 1/3, and smoothstep
  // interpolation keeps on average 0.743 of the variance per interpolated dimension.
  float unit_variance = 1;
  std::vector<uint32_t> row_below;  // per grid row: the lattice row at or north of it
  std::vector<float> row_weight;    // per grid row: the smoothstep weight of row_below + 1
  std::vector<float> pole_taper;    // per grid row
  std::vector<double> lattice_row_latitude;
};

struct Era5FieldGenerator::Tables {
  Era5Grid grid;
  uint64_t seed = 0;
  std::vector<double> latitude;  // degrees, per row
  std::vector<double> sin_lat;
  std::vector<double> cos_lat;
  std::vector<double> longitude_rad;  // per column
  std::vector<Octave> octaves;
  // Static fields, per grid point.
  std::vector<float> land_sea_mask;       // land fraction 0..1
  std::vector<float> surface_height;      // m
  std::vector<float> pressure_reduction;  // surface pressure / mean sea level pressure
};

using Tables = Era5FieldGenerator::Tables;

enum class Stream : uint64_t {
  kDynamics = 1,  // geopotential anomaly: winds, pressure
  kThermal,       // temperature anomaly
  kMoisture,      // humidity, water vapour, precipitation
  kAgeostrophicU,
  kAgeostrophicV,
  kRain,  // convective intermittency
  kLand,  // static: continents
  kOrography,
  kOceanRipple,  // static: the small spectral ripples ERA5's orography has over sea
};

struct NoiseStyle {
  Stream stream;
  double slope;             // octave amplitude ∝ (spacing / 80°)^slope
  double time_scale_hours;  // key-frame spacing of the largest octave; 0: static
  double depth;             // key spacing in ln(1000/p) of the largest octave
  double drift;             // × the steering flow
  int num_waves;
  double wave_amplitude;
};

inline constexpr NoiseStyle kDynamicsStyle{Stream::kDynamics, 1.6, 96, 2.5, 1.0, 6, 0.8};
inline constexpr NoiseStyle kThermalStyle{Stream::kThermal, 1.2, 72, 1.2, 1.0, 4, 0.6};
inline constexpr NoiseStyle kMoistureStyle{Stream::kMoisture, 1.0, 48, 0.8, 1.0, 3, 0.4};
inline constexpr NoiseStyle kAgeostrophicUStyle{Stream::kAgeostrophicU, 0.9, 24, 0.6, 1.0, 0, 0};
inline constexpr NoiseStyle kAgeostrophicVStyle{Stream::kAgeostrophicV, 0.9, 24, 0.6, 1.0, 0, 0};
inline constexpr NoiseStyle kRainStyle{Stream::kRain, 0.4, 18, 0.5, 1.2, 0, 0};
inline constexpr NoiseStyle kLandStyle{Stream::kLand, 0.65, 0, 0, 0, 0, 0};
inline constexpr NoiseStyle kOrographyStyle{Stream::kOrography, 0.8, 0, 0, 0, 0, 0};
inline constexpr NoiseStyle kOceanRippleStyle{Stream::kOceanRipple, 0.2, 0, 0, 0, 0, 0};

// The grid's noise octaves (their lattices and per-row interpolation weights).
std::vector<Octave> MakeOctaves(const Tables& t);

// Writes the stream's weather at (hours, zeta) into `out`: about unit variance, red spectrum.
void MakeNoise(const Tables& t, const NoiseStyle& style, double hours, double zeta,
               std::span<float> out, Era5FieldScratch* scratch);

}  // namespace zarrstream::tools

// The weather noise streams (see era5_noise.h).
#include "tools/era5_noise.h"

#include "util/mix64.h"

namespace zarrstream::tools {
namespace {

constexpr double kLargestNoiseScaleDeg = 80.0;

constexpr uint64_t kGolden = 0x9e3779b97f4a7c15ULL;

uint64_t HashCombine(uint64_t key, uint64_t value) { return Mix64(key ^ (value + kGolden)); }

// Uniform in [-1, 1). Distinct planes never repeat each other's values at shifted indices: the
// golden-ratio stride is odd, so `plane + index * stride` is a bijection of index per plane.
float LatticeValue(uint64_t plane, uint64_t index) {
  const uint64_t h = Mix64(plane + index * kGolden);
  return static_cast<float>(static_cast<int32_t>(h >> 32)) * 0x1p-31f;
}

// Uniform doubles in [0, 1) for the planetary waves' parameters.
class ParameterSource {
 public:
  explicit ParameterSource(uint64_t key) : state_(key) {}
  double Next() {
    state_ += kGolden;
    return static_cast<double>(Mix64(state_) >> 11) * 0x1p-53;
  }

 private:
  uint64_t state_;
};

double MeridionalSpacing(const Era5Grid& grid) {
  return grid.includes_poles ? 180.0 / (grid.num_latitudes - 1) : 180.0 / grid.num_latitudes;
}

// The cosine of latitude that sets how much zonal detail row `i` can hold. A pole row takes its
// neighbour's: its values are constant along longitude anyway (see FillLattice), and tapering them
// to zero would put a step between the pole and the next row.
double TaperCosine(const Tables& t, size_t i) {
  if (t.cos_lat[i] > 0) return t.cos_lat[i];
  return t.cos_lat[i == 0 ? 1 : i - 1];
}

// The climatological steering flow (m/s eastward) that carries weather.
double SteeringWind(double latitude) {
  return 11.0 * Gaussian(std::abs(latitude) - 45.0, 18.0) - 5.0 * Gaussian(latitude, 14.0);
}

// The two keys bracketing `coordinate` at `spacing` and the smoothstep weight of the second.
struct KeyPair {
  int64_t first = 0;
  double weight = 0;
};

KeyPair Keys(double coordinate, double spacing) {
  if (spacing <= 0) return {};
  const double x = coordinate / spacing;
  const double first = std::floor(x);
  return {static_cast<int64_t>(first), Smoothstep(x - first)};
}

// Fills scratch->lattice with one octave's values at (hours, zeta): rows of 2·cols + 1 values
// (each row repeated once more, plus one, so interpolation needs no modulo). Returns the factor
// that restores unit variance after blending keys.
double FillLattice(const Tables& t, const NoiseStyle& style, size_t octave_index, double hours,
                   double zeta, Era5FieldScratch* scratch) {
  const Octave& o = t.octaves[octave_index];
  const double relative = o.scale_deg / kLargestNoiseScaleDeg;
  const KeyPair time =
      Keys(hours, style.time_scale_hours > 0
                      ? std::max(3.0, style.time_scale_hours * std::cbrt(relative * relative))
                      : 0.0);
  const KeyPair depth =
      Keys(zeta, style.depth > 0 ? std::max(0.1, style.depth * std::sqrt(relative)) : 0.0);
  const size_t cols = o.lattice_cols;
  const size_t stride = 2 * cols + 1;
  std::vector<float>& lattice = scratch->lattice;
  lattice.assign(o.lattice_rows * stride, 0.0f);
  uint64_t key = HashCombine(t.seed, static_cast<uint64_t>(style.stream));
  key = HashCombine(key, octave_index);
  for (int dt = 0; dt < 2; ++dt) {
    const double wt = dt ? time.weight : 1.0 - time.weight;
    for (int dz = 0; dz < 2; ++dz) {
      const double wz = dz ? depth.weight : 1.0 - depth.weight;
      if (wt * wz == 0.0) continue;
      const float w = static_cast<float>(wt * wz);
      uint64_t plane = HashCombine(key, static_cast<uint64_t>(time.first + dt));
      plane = HashCombine(plane, static_cast<uint64_t>(depth.first + dz));
      for (size_t r = 0; r < o.lattice_rows; ++r) {
        float* row = lattice.data() + r * stride;
        const uint64_t first = r * cols;
        for (size_t c = 0; c < cols; ++c) row[c] += w * LatticeValue(plane, first + c);
      }
    }
  }
  // A lattice row on a pole is one point of the sphere: constant along longitude, so fields stay
  // continuous (and winds finite) there.
  for (size_t r : {size_t{0}, o.lattice_rows - 1}) {
    if (std::abs(o.lattice_row_latitude[r]) != 90.0) continue;
    float* row = lattice.data() + r * stride;
    std::fill(row + 1, row + cols, row[0]);
  }
  for (size_t r = 0; r < o.lattice_rows; ++r) {
    float* row = lattice.data() + r * stride;
    for (size_t c = 0; c <= cols; ++c) row[cols + c] = row[c == cols ? 0 : c];
  }
  const double spread_t = (1 - time.weight) * (1 - time.weight) + time.weight * time.weight;
  const double spread_z = (1 - depth.weight) * (1 - depth.weight) + depth.weight * depth.weight;
  return 1.0 / std::sqrt(spread_t * spread_z);
}

// Interpolates every lattice row to the grid's columns (scratch->rows), each row shifted east by
// the distance the steering flow carried it since 1900.
void InterpolateColumns(const Tables& t, const NoiseStyle& style, const Octave& o, double hours,
                        Era5FieldScratch* scratch) {
  const size_t nlon = t.grid.num_longitudes;
  const size_t cols = o.lattice_cols;
  const size_t stride = 2 * cols + 1;
  // Rossby waves move at the steering flow minus a term growing with the square of their length:
  // the longest octaves stand still (and only evolve), synoptic ones move with the flow.
  const double drift = style.drift * std::max(0.0, 1.0 - std::pow(o.scale_deg / 60.0, 2));
  scratch->rows.resize(o.lattice_rows * nlon);
  for (size_t r = 0; r < o.lattice_rows; ++r) {
    double offset = 0;
    if (drift != 0) {
      const double lat = o.lattice_row_latitude[r];
      const double degrees_per_hour =
          drift * SteeringWind(lat) * 3600.0 /
          (kEarthRadius * kDegree * std::max(std::cos(lat * kDegree), 0.25));
      offset = std::fmod(degrees_per_hour * hours, 360.0) / 360.0 * cols;
      if (offset < 0) offset += cols;
    }
    // Positions start in (0, cols] and stay below 2·cols: inside the repeated row.
    const float start = static_cast<float>(cols - offset);
    const float* v = scratch->lattice.data() + r * stride;
    float* x = scratch->rows.data() + r * nlon;
    for (size_t j = 0; j < nlon; ++j) {
      const float u = start + static_cast<float>(j) * o.cols_per_column;
      const auto i0 = static_cast<size_t>(u);
      const float w = Smoothstep(u - static_cast<float>(i0));
      x[j] = v[i0] + w * (v[i0 + 1] - v[i0]);
    }
  }
}

// Adds the stream's planetary waves: zonal wavenumbers 1-6 in midlatitude bands, drifting east.
void AddWaves(const Tables& t, const NoiseStyle& style, double hours, std::span<float> out,
              Era5FieldScratch* scratch) {
  const size_t nlat = t.grid.num_latitudes;
  const size_t nlon = t.grid.num_longitudes;
  ParameterSource source(HashCombine(HashCombine(t.seed, static_cast<uint64_t>(style.stream)),
                                     0x77617665ULL));  // "wave"
  std::vector<float>& column = scratch->rows;
  column.resize(nlon);
  for (int k = 0; k < style.num_waves; ++k) {
    const double wavenumber = 1 + std::floor(6 * source.Next());
    const double amplitude = style.wave_amplitude * (0.6 + 0.4 * source.Next());
    const double center = (source.Next() < 0.5 ? 1 : -1) * (38 + 22 * source.Next());
    const double width = 10 + 10 * source.Next();
    // Planetary waves are slow: a few degrees of longitude a day.
    const double degrees_per_day = 2 + 8 * source.Next();
    const double phase0 = 2 * kPi * source.Next();
    const double phase =
        phase0 - wavenumber * std::fmod(degrees_per_day * hours / 24.0, 360.0) * kDegree;
    for (size_t j = 0; j < nlon; ++j) {
      column[j] = static_cast<float>(std::cos(wavenumber * t.longitude_rad[j] + phase));
    }
    for (size_t i = 0; i < nlat; ++i) {
      const auto profile =
          static_cast<float>(amplitude * Gaussian(t.latitude[i] - center, width) * t.cos_lat[i]);
      float* row = out.data() + i * nlon;
      for (size_t j = 0; j < nlon; ++j) row[j] += profile * column[j];
    }
  }
}

}  // namespace

std::vector<Octave> MakeOctaves(const Tables& t) {
  const size_t nlat = t.grid.num_latitudes;
  const size_t nlon = t.grid.num_longitudes;
  const double dlat = MeridionalSpacing(t.grid);
  const double dlon = 360.0 / static_cast<double>(nlon);
  const double grid_scale = std::max(dlat, dlon);
  std::vector<Octave> octaves;
  for (double scale = kLargestNoiseScaleDeg; scale >= 2 * grid_scale; scale /= 2) {
    Octave o;
    o.scale_deg = scale;
    o.lattice_rows = std::max<size_t>(2, static_cast<size_t>(std::lround(180.0 / scale)) + 1);
    o.lattice_cols = std::max<size_t>(3, static_cast<size_t>(std::lround(360.0 / scale)));
    o.cols_per_column = static_cast<float>(static_cast<double>(o.lattice_cols) / nlon);
    o.unit_variance = static_cast<float>(1.0 / (std::sqrt(1.0 / 3.0) * 0.7429));
    for (size_t r = 0; r < o.lattice_rows; ++r) {
      o.lattice_row_latitude.push_back(90.0 - 180.0 * r / (o.lattice_rows - 1));
    }
    for (size_t i = 0; i < nlat; ++i) {
      const double v = (90.0 - t.latitude[i]) / 180.0 * (o.lattice_rows - 1);
      const size_t below = std::min(static_cast<size_t>(v), o.lattice_rows - 2);
      o.row_below.push_back(static_cast<uint32_t>(below));
      o.row_weight.push_back(static_cast<float>(Smoothstep(Clamp01(v - below))));
      o.pole_taper.push_back(static_cast<float>(Clamp01(scale * TaperCosine(t, i) / dlat)));
    }
    octaves.push_back(std::move(o));
  }
  // The grid octave: one lattice value per grid point, so variability reaches the grid scale.
  Octave o;
  o.scale_deg = grid_scale;
  o.lattice_rows = nlat;
  o.lattice_cols = nlon;
  o.cols_per_column = 1;
  o.unit_variance = static_cast<float>(1.0 / (std::sqrt(1.0 / 3.0) * std::sqrt(0.7429)));
  o.lattice_row_latitude = t.latitude;
  for (size_t i = 0; i < nlat; ++i) {
    o.row_below.push_back(static_cast<uint32_t>(std::min(i, nlat - 2)));
    o.row_weight.push_back(i == nlat - 1 ? 1.0f : 0.0f);
    o.pole_taper.push_back(static_cast<float>(Clamp01(dlon * TaperCosine(t, i) / dlat)));
  }
  octaves.push_back(std::move(o));
  return octaves;
}

void MakeNoise(const Tables& t, const NoiseStyle& style, double hours, double zeta,
               std::span<float> out, Era5FieldScratch* scratch) {
  const size_t nlat = t.grid.num_latitudes;
  const size_t nlon = t.grid.num_longitudes;
  std::fill(out.begin(), out.end(), 0.0f);
  // Octave k of an unbounded series has weight 2^(-k·slope); normalising by the whole series
  // keeps large scales alike on every grid (fine grids only add small-scale variance).
  const double series = 1.0 / (1.0 - std::pow(4.0, -style.slope));
  for (size_t index = 0; index < t.octaves.size(); ++index) {
    const Octave& o = t.octaves[index];
    const double blend = FillLattice(t, style, index, hours, zeta, scratch);
    InterpolateColumns(t, style, o, hours, scratch);
    const double amplitude = std::pow(o.scale_deg / kLargestNoiseScaleDeg, style.slope) /
                             std::sqrt(series) * o.unit_variance * blend;
    for (size_t i = 0; i < nlat; ++i) {
      const auto a = static_cast<float>(amplitude * o.pole_taper[i]);
      if (a == 0.0f) continue;
      const float w = o.row_weight[i];
      const float* xa = scratch->rows.data() + size_t{o.row_below[i]} * nlon;
      const float* xb = xa + nlon;
      float* row = out.data() + i * nlon;
      for (size_t j = 0; j < nlon; ++j) row[j] += a * (xa[j] + w * (xb[j] - xa[j]));
    }
  }
  if (style.num_waves > 0) AddWaves(t, style, hours, out, scratch);
}

}  // namespace zarrstream::tools

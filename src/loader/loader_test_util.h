// Test-only: the small ERA5-like dataset that the loader's and the read plan's tests read, written
// into a memory store (array/memory_dataset_test_util.h), and label selections as the fronts build
// them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "array/memory_dataset_test_util.h"
#include "zarrstream/loader.h"

namespace zarrstream::testing {

// value(t, l, y, x) = 1000 t + 100 l + 10 y + x: every value says where it came from.
inline float Era5LikeValue(uint64_t t, uint64_t l, uint64_t y, uint64_t x) {
  return static_cast<float>(1000 * t + 100 * l + 10 * y + x);
}

// Levels 500, 850 and 1000 (hPa).
inline constexpr uint64_t kEra5LikeLevels = 3;

// The grid of an ERA5-like dataset: `times` 6-hourly steps from 2000-01-01, the levels, and these
// latitudes and longitudes.
struct Era5LikeGrid {
  uint64_t times = 0;
  std::vector<float> latitudes;
  std::vector<float> longitudes;
  // temperature's chunks hold 2 times, 2 levels, every latitude and this many longitudes.
  uint64_t temperature_longitude_chunk = 0;
};

// Writes the coordinates and two variables on `grid` into `dataset`: temperature (time, level,
// latitude, longitude) = Era5LikeValue, and t2m (time, latitude, longitude) = -Era5LikeValue(t, 0,
// y, x) in chunks of one time step.
inline void AddEra5LikeArrays(MemoryDataset* dataset, const Era5LikeGrid& grid) {
  const uint64_t lat = grid.latitudes.size(), lon = grid.longitudes.size();
  std::vector<int64_t> hours;
  for (uint64_t t = 0; t < grid.times; ++t) hours.push_back(static_cast<int64_t>(6 * t));
  dataset->AddArray<int64_t>("time", {grid.times}, {grid.times}, {"time"}, hours,
                             {{"units", "hours since 2000-01-01"}, {"calendar", "standard"}});
  dataset->AddArray<int32_t>("level", {kEra5LikeLevels}, {kEra5LikeLevels}, {"level"},
                             {500, 850, 1000});
  dataset->AddArray<float>("latitude", {lat}, {lat}, {"latitude"}, grid.latitudes);
  dataset->AddArray<float>("longitude", {lon}, {lon}, {"longitude"}, grid.longitudes);
  std::vector<float> temperature;
  std::vector<double> t2m;
  for (uint64_t t = 0; t < grid.times; ++t) {
    for (uint64_t l = 0; l < kEra5LikeLevels; ++l) {
      for (uint64_t y = 0; y < lat; ++y) {
        for (uint64_t x = 0; x < lon; ++x) temperature.push_back(Era5LikeValue(t, l, y, x));
      }
    }
    for (uint64_t y = 0; y < lat; ++y) {
      for (uint64_t x = 0; x < lon; ++x) t2m.push_back(-Era5LikeValue(t, 0, y, x));
    }
  }
  dataset->AddArray<float>("temperature", {grid.times, kEra5LikeLevels, lat, lon},
                           {2, 2, lat, grid.temperature_longitude_chunk},
                           {"time", "level", "latitude", "longitude"}, temperature);
  dataset->AddArray<double>("t2m", {grid.times, lat, lon}, {1, lat, lon},
                            {"time", "latitude", "longitude"}, t2m);
}

// A label range on `dim` (a missing bound is open).
inline LabelSelection LabelRange(std::string dim, std::optional<std::string> start,
                                 std::optional<std::string> stop) {
  LabelSelection selection;
  selection.dim = std::move(dim);
  selection.start = std::move(start);
  selection.stop = std::move(stop);
  return selection;
}

// A list of labels on `dim`.
inline LabelSelection LabelList(std::string dim, std::vector<std::string> values) {
  LabelSelection selection;
  selection.dim = std::move(dim);
  selection.values = std::move(values);
  return selection;
}

}  // namespace zarrstream::testing

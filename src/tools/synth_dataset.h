// Synthetic ERA5-like datasets (`zarrstream synth`): a WeatherBench2-style Zarr group of the
// variables of era5_fields.h on a preset grid, written in one of three layouts, with no download.
//
// The group: coordinates time (int64 hours since 1900-01-01 00:00:00, proleptic_gregorian,
// 6-hourly), level (int64 hPa, the 13 WeatherBench2 levels), latitude (float32, north to south),
// longitude (float32, 0 to 360 - Δ); data variables (time, latitude, longitude),
// (time, level, latitude, longitude) and static (latitude, longitude), float32, fill value NaN,
// with units / long_name / standard_name; dimension names on every array (v3 dimension_names, v2
// _ARRAY_DIMENSIONS), so xarray opens it; group attributes title, source, preset, seed, layout;
// consolidated metadata.
//
// How the work is cut: one task per stored object (chunk, or shard when sharded) of each data
// variable, generated field by field into one buffer and written whole, so nothing is read back.
// Tasks run on a pool of `threads`; at most `threads` tasks are in flight, each holding its
// object's buffer and a generator scratch (a few fields), which bounds memory (reported). Fields
// depend only on (seed, variable, time, level), so the bytes written do not depend on the thread
// count or the order tasks run in.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "tools/era5_fields.h"
#include "zarrstream/status.h"

namespace zarrstream::tools {

enum class SynthLayout : uint8_t {
  // Zarr v3, zstd level 3, one time step per chunk (levels per chunk: see SynthPreset).
  kV3Zstd,
  // Zarr v3, zstd inner chunks of one time step and one level, in shards of several time steps.
  kV3Sharded,
  // Zarr v2 as WeatherBench2 stores it: blosc lz4 + byte shuffle, clevel 5, chunks (1, lat, lon)
  // and (1, 13, lat, lon), consolidated .zmetadata.
  kWb2,
};

// "v3-zstd", "v3-sharded", "wb2".
std::string_view SynthLayoutName(SynthLayout layout);
Result<SynthLayout> ParseSynthLayout(std::string_view name);

struct SynthPreset {
  std::string_view name;
  Era5Grid grid;
  uint64_t default_steps;  // 6-hourly time steps
  // v3-zstd: pressure levels per chunk of the (time, level, lat, lon) variables (1 or 13).
  uint64_t levels_per_chunk;
  // v3-sharded: time steps and pressure levels per shard.
  uint64_t shard_steps;
  uint64_t shard_levels;
  std::string_view description;
};

// era5-small, era5-1deg, era5 (see docs/synth.md for their sizes and why they are chunked so).
std::span<const SynthPreset> SynthPresets();
Result<SynthPreset> FindSynthPreset(std::string_view name);

// Hours since 1900-01-01T00:00 (proleptic Gregorian) of a date: "1979-01-01", "1979-01-01T06",
// "1979-01-01T06:00" (whole hours only).
Result<int64_t> ParseStartHours(std::string_view date);

struct SynthOptions {
  // Where the group is written: a path or URL of a store that can be written.
  std::string dest_url;
  std::string preset = "era5-small";
  uint64_t seed = 0;
  SynthLayout layout = SynthLayout::kV3Zstd;
  // Number of 6-hourly time steps (default: the preset's).
  std::optional<uint64_t> steps;
  // The first time step.
  std::string start = "1979-01-01";
  // Threads generating and encoding (0: one per core).
  size_t threads = 0;
  // Replace a Zarr group or array already at the destination (everything under it is removed).
  // Otherwise an existing one is an error.
  bool overwrite = false;
  // Called after each stored object with the data bytes (decoded float32) done and in total,
  // from worker threads, one call at a time.
  std::function<void(uint64_t done_bytes, uint64_t total_bytes)> on_progress;
};

struct SynthReport {
  std::string preset;
  SynthLayout layout = SynthLayout::kV3Zstd;
  uint64_t steps = 0;
  int64_t start_hours = 0;
  size_t arrays = 0;                // data variables and coordinates
  size_t stored_objects = 0;        // chunks or shards of the data variables
  uint64_t fields = 0;              // 2-D (latitude, longitude) fields generated
  uint64_t data_bytes = 0;          // decoded bytes of the data variables
  uint64_t memory_bound_bytes = 0;  // object buffers and generator scratch in flight at most
  size_t threads = 0;
  // Thread time spent generating fields and encoding + storing them (summed over threads).
  double generate_seconds = 0;
  double write_seconds = 0;
  double wall_seconds = 0;
};

// Writes the dataset. Errors name the destination and the array and time step being written.
Result<SynthReport> WriteSynthDataset(const SynthOptions& options);

}  // namespace zarrstream::tools

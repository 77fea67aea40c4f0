// Rechunk's copy of arrays of the extended types (zarrstream/data_type.h: ExtendedType): text
// (strings, bytes, numpy "U" and "S") and datetime64/timedelta64. They are coordinates and labels
// (a level name, ERA5's `expver`, a datetime64 time axis): small, and outside the numeric slab
// copy (text has no fixed element size). Each is read whole (its selected region) and written as
// one Zarr v3 chunk in the form zarr-python 3 writes that type, so zarr-python and xarray read the
// copy as they read the source:
//
//   strings              "string"                 [vlen-utf8, zstd]
//   bytes                "variable_length_bytes"  [vlen-bytes, zstd]
//   numpy "U"            fixed_length_utf32       [bytes (little endian), zstd]
//   numpy "S"            null_terminated_bytes    [bytes, zstd]
//   datetime64/timedelta64                        [bytes (little endian), zstd]
//
// JSON objects (v2's json2 codec) have no v3 data type: rechunk skips them and says so.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "store/store.h"
#include "zarrstream/array.h"

namespace zarrstream::tools {

// The region [start, start + shape) of `array` (an extended type), copied to `path`.
struct ExtendedArrayCopy {
  std::string path;
  Array array;
  std::vector<uint64_t> start;
  std::vector<uint64_t> shape;
  std::string attributes_json = "{}";
};

// Why an array of `type` cannot be written to a v3 store; empty when it can.
std::string WhyNotWritableInV3(const ExtendedType& type);

// Reads `copy`'s region and writes it at copy.path of `store` (its zarr.json and one chunk, each
// replaced atomically; every part of a rechunk job writes the same bytes). Errors name the source
// array and the destination.
Status WriteExtendedArray(Store& store, const ExtendedArrayCopy& copy);

// Writes `labels` (UTF-8) at `name` of `store` as a 1-D numpy "U" array of the longest label's
// length, whose dimension is `name`: xarray then indexes that dimension by label.
Status WriteLabelArray(Store& store, const std::string& name,
                       const std::vector<std::string>& labels);

}  // namespace zarrstream::tools

// Detecting missing dates (LoaderOptions::detect_missing_dates): the selected time steps at which
// some channel the loader reads has no value in the box it would deliver, because the chunks
// holding that box are not stored (in a sharded array: the inner chunks are empty in their
// shard's index) or hold only NaN once CF-decoded (_FillValue / missing_value masked, before
// `nan=` filling and normalisation).
//
// What it reads, once each: every array's listing of stored keys; the index of every stored shard
// the channels' boxes touch; and, for channels whose values can be NaN (floating-point arrays, and
// integer ones with a CF fill value), the stored read chunks of their boxes. A read chunk holding
// many time steps answers all of them. The read chunks of one run of time steps are read one
// spatial chunk at a time (in waves over all runs, in parallel): once every step of the run has a
// value for every channel, its other spatial chunks are not read. Integer arrays without a CF fill
// value cannot hold NaN: there only presence counts, and no data is read. Static fields (no time
// dimension) are left out, and so are the steps a frequency (LoaderOptions::frequency) skips.
#pragma once

#include <cstdint>
#include <vector>

#include "dataset/loader_geometry.h"
#include "util/thread_pool.h"
#include "zarrstream/status.h"

namespace zarrstream {

// The selected time steps of `geometry` (indices of its time dimension within
// ranges[*time_dim], sorted) at which some time-dependent channel has no value (see the
// overview). `geometry` needs its channels, arrays, ranges, time segments, resident boxes and CF
// decoding (`cf`) set. Reads run on `pool` (null: the calling thread only). Errors: a listing, a
// shard index or a chunk that cannot be read or decoded, with the store, array and chunk key.
Result<std::vector<uint64_t>> DetectMissingSteps(const LoaderGeometry& geometry, ThreadPool* pool);

}  // namespace zarrstream

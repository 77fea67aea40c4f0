// Per-channel statistics (count, NaN count, mean, standard deviation, min, max) over a label
// selection of a dataset, computed in one streaming pass (`zarrstream stats`); the result is the
// stats file (dataset/stats_file.h) the loader normalises with.
//
// The pass reads chunk-aligned blocks in parallel: every block lies inside one read chunk (inner
// chunk of a sharded array) of its array, and a block of a variable with levels covers all the
// requested levels that chunk holds, so each stored chunk is read and decoded once however many
// of its levels are channels. Memory is bounded: at most `num_threads` blocks are in flight, each
// needing its block buffer plus the read path's per-thread buffers (one encoded and one decoded
// chunk), i.e. at most about 3 × num_threads × one chunk's decoded size, whatever the dataset's
// size.
//
// Numerics: each block's count, mean and M2 (sum of squared deviations from the mean) are
// computed in double with a corrected two-pass algorithm (exact mean first, then deviations), and
// blocks merge with Chan, Golub & LeVeque's pairwise update, so values near 1e5 with a variance
// near 1 (geopotential) keep their digits where a running sum of squares would lose them all.
// Blocks merge in a fixed order, so results do not depend on the thread count. NaN values are
// counted and left out of every other statistic; infinities are values (and make mean / std
// undefined). CF-decoded values are decoded element by element as the loader decodes them (in
// float64 or float32, dataset/cf_decoding.h) before entering the sums. `std` is the population
// standard deviation, sqrt(M2 / count) (numpy's ddof=0).
//
// Tendencies (ChannelStatsOptions::tendencies): for each distance n, the statistics of
// x[t + n] - x[t] over every pair of selected time steps n steps of the store apart (both CF-
// decoded, the difference in double; a NaN in either is a NaN tendency). They are extra passes
// whose blocks are those of the values with the time pieces cut to the steps t whose partner
// t + n is selected too; a block reads the same box n steps later as well, so each pair belongs
// to the block of its first step, whichever part that block falls in. Static fields have none.
// Over stores concatenated along time, a pair may span the boundary: its later step is read from
// the next store (decoded with that store's CF encoding), as in one store.
//
// Parts: `part_count` > 1 cuts the blocks (of all arrays, in order) into that many contiguous runs;
// ComputeChannelStatsPart reduces one run into per-channel accumulators, which merge (in part
// order) into the statistics of the whole selection, equal to one pass's within rounding (the
// merge tree differs), so parts can run on different machines (zarrstream.dask.stats).
//
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "dataset/channel_spec.h"
#include "dataset/coordinates.h"
#include "dataset/stats_file.h"
#include "zarrstream/status.h"

namespace zarrstream {

// Count, mean and M2 of a set of values; two sets merge exactly (Chan et al.).
struct Moments {
  uint64_t count = 0;
  double mean = 0;
  double m2 = 0;  // sum of squared deviations from the mean

  void Merge(const Moments& other);
  // Population variance M2 / count (NaN when empty).
  double Variance() const;
};

// One channel's statistics over some of its values; accumulators of disjoint values merge into
// those of their union.
struct ChannelAccumulator {
  Moments moments;  // of the values that are not NaN
  uint64_t nan_count = 0;
  double min = std::numeric_limits<double>::infinity();
  double max = -std::numeric_limits<double>::infinity();

  void Merge(const ChannelAccumulator& other);
};

// A part's result: the stats file's description of the job (source, decode_cf, the selected
// labels, each channel's name; the same for every part of a job) and one accumulator per channel.
struct ChannelStatsPart {
  ChannelStatsFile job;  // channels' statistics not filled in
  std::vector<ChannelAccumulator> channels;
  // Per entry of job.tendency_steps, one accumulator per channel (static fields' stay empty).
  std::vector<std::vector<ChannelAccumulator>> tendencies;
};

struct ChannelStatsOptions {
  // Label selections on the channels' dimensions (not on levels: those are part of the channels).
  std::vector<LabelSelection> select;
  // CF decoding (dataset/cf_decoding.h): statistics of the values xarray shows (fill values are
  // NaN, packed variables unpacked), as the loader delivers them. Off: of the values as stored.
  bool decode_cf = true;
  // Threads reading and reducing blocks; 0: one per usable core (UsableCores()). The pass owns
  // its pool for its duration.
  size_t num_threads = 0;
  // Called on the calling thread as blocks complete, with the bytes of the selection read so far
  // and in all (decoded bytes of the channels' arrays, levels read together counted once); may
  // be empty.
  std::function<void(uint64_t done_bytes, uint64_t total_bytes)> progress;
  // Tendencies to compute too: distances along the time dimension, each a number of the store's
  // steps ("6") or a duration ("6h") that is a whole number of the selected times' (evenly spaced)
  // step. Each must be below the number of selected steps, and some pair of selected steps must
  // lie that far apart.
  std::vector<std::string> tendencies;
  // This pass's part of the blocks: part_index in [0, part_count) (ComputeChannelStatsPart).
  uint32_t part_index = 0;
  uint32_t part_count = 1;
  // When not null and it becomes true, no further batch of blocks starts and the pass returns an
  // error saying it was interrupted. Must outlive the call.
  const std::atomic<bool>* interrupt = nullptr;
};

// Computes the statistics of `channels` (resolved from `dataset`, which holds the coordinates
// `options.select` refers to). Blocks until done. Errors name the dataset, the array and the chunk
// (from the read path), or the selection.
Result<ChannelStatsFile> ComputeChannelStats(const Dataset& dataset,
                                             std::span<const Channel> channels,
                                             const ChannelStatsOptions& options);

// Reduces part `options.part_index` of `options.part_count` (the whole pass when 1). Errors as
// ComputeChannelStats's.
Result<ChannelStatsPart> ComputeChannelStatsPart(const Dataset& dataset,
                                                 std::span<const Channel> channels,
                                                 const ChannelStatsOptions& options);

// The statistics of merged accumulators: `part.job` with every channel's statistics filled in
// (undefined ones NaN, as ComputeChannelStats writes them).
ChannelStatsFile FinishChannelStats(ChannelStatsPart part);

}  // namespace zarrstream

// The loader's geometry (docs/architecture.md, "The life of a batch"): the sample model of
// include/zarrstream/loader.h resolved against a dataset. Which channels (inputs, then targets)
// come from which arrays, which range of each dimension is selected, which dimensions are sampled
// with which windows and strides, where each output channel's slab comes from, and how each channel
// is normalised.
//
// MakeLoaderGeometry resolves it once at open and validates everything that can be wrong in a
// configuration, so a running loader only meets I/O and data errors; the read plan
// (loader/read_plan.h) turns it and a batch of sample origins into chunk reads.
//
// A geometry is a plain value, immutable after MakeLoaderGeometry and shared by the loader's
// threads. Its array pointers point into the channels' array handles: they live as long as the
// geometry does.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "array/array_state.h"
#include "dataset/cf_decoding.h"
#include "dataset/channel_spec.h"
#include "dataset/computed_forcings.h"
#include "dataset/coordinates.h"
#include "util/thread_pool.h"
#include "zarrstream/loader.h"
#include "zarrstream/status.h"

namespace zarrstream {

// Arrays the loader reads have at most this many dimensions (ERA5-like data has 3-4).
inline constexpr size_t kLoaderMaxRank = 8;

// A box of a static field's array (LoaderGeometry::resident): the selected range of each
// dimension, the whole level dimension. The loader reads it once and keeps it.
struct ResidentBox {
  std::vector<uint64_t> start, shape;
};

// One output channel's source: a channel of the dataset at a step along the time dimension.
struct Slab {
  size_t channel = 0;  // index into LoaderGeometry::channels
  uint64_t step = 0;   // time index relative to the sample's origin (0 without a time dim)
  uint32_t out_channel = 0;
  bool target = false;
  // The value a tendency target is taken from (LoaderGeometry::base_slabs): read like a target
  // slab, kept aside rather than put into the batch.
  bool base = false;
};

// A run of a combined dataset's time dimension that one array holds (Channel::time_segments):
// dataset time indices [begin, end) are indices first + (t - begin) of
// LoaderGeometry::arrays[array].
struct ArraySegment {
  uint64_t begin = 0;
  uint64_t end = 0;
  uint64_t first = 0;
  size_t array = 0;
};

// One output channel of a computed forcing (dataset/computed_forcings.h) at a time step.
struct ComputedSlab {
  forcing_math::Kind kind = forcing_math::kCosLatitude;
  uint64_t step = 0;  // as Slab::step
  uint32_t out_channel = 0;
};

// Where an input channel comes from, in the order of the batch's input channels.
struct InputSource {
  bool computed = false;
  size_t index = 0;  // into LoaderGeometry::channels, or the forcing kind when computed
};

// How the loader's indices along one dimension (LoaderGeometry::ranges, windows, sample origins)
// map to the store's. They are the store's indices but on a periodic dimension, where they run on
// past the end (index i is store index i mod `period`), and on a padded one, where index i is store
// index i - `pad_before` and what lies outside `selected` is padding.
struct AxisIndexing {
  uint64_t period = 0;  // the store's extent of a periodic dimension; 0: not periodic
  bool padded = false;
  uint64_t pad_before = 0;
  IndexRange selected;  // padded: the store indices selected
};

// A run of the loader's indices along one dimension as runs of the store's (MapAxisRun): `length`
// indices from `offset` in the run are store indices from `store` on, or padding.
struct AxisPiece {
  uint64_t offset = 0;
  uint64_t store = 0;
  uint64_t length = 0;
  bool padding = false;  // filled with PatchPadding::value (kValue padding)
};

struct LoaderGeometry {
  // Inputs then targets; a channel that is both appears twice (normalised alike, read once).
  std::vector<Channel> channels;
  size_t num_inputs = 0;  // channels[0, num_inputs) are inputs (variables, then forcings)
  std::vector<std::string> input_names, target_names;
  // The input channels of one time step in order: the stored ones (channels[0, num_inputs)) with
  // the computed forcings among the forcings where `forcings` names them.
  std::vector<InputSource> input_order;

  // The channels' dimensions (level/channel dimension removed; a static field's are these without
  // the time dimension) and, per dimension, the selected
  // range, whether it is sampled and its window (the range's size when not sampled).
  std::vector<std::string> dims;
  std::vector<IndexRange> ranges;
  // Per dimension: how the indices above map to the store's (periodic and padded dimensions).
  std::vector<AxisIndexing> axes;
  PatchPadding padding;
  std::vector<uint8_t> sampled;
  std::vector<uint64_t> window;
  std::vector<uint64_t> stride;
  std::optional<size_t> time_dim;
  // The ensemble's member dimension when each member is a sample (EnsembleMode::kSample): sampled
  // with window 1 and left out of the batch's spatial dimensions. (With kChannels the members are
  // channels, Channel::member_dim, and the dimension is none of these.)
  std::optional<size_t> member_dim;
  // Steps of the store per time step of the samples (LoaderOptions::frequency; 1 without it):
  // window, stride and target steps along the time dimension count the samples' steps, and
  // step s of a sample is index origin + s × time_step of the store.
  uint64_t time_step = 1;
  // Output channel steps: inputs at 0..window-1 of the time dimension; targets at
  // window - 1 + offset per offset.
  uint64_t time_window = 1;
  std::vector<uint64_t> target_steps;
  // Time indices no sample may touch (LoaderOptions::missing_dates), sorted, inside the selection.
  std::vector<uint64_t> missing_steps;
  std::vector<Slab> input_slabs, target_slabs;
  std::vector<ComputedSlab> computed_slabs;
  // Input channels per sample: input_order.size() × time_window.
  uint64_t input_channels = 0;
  // For the computed forcings: the latitude and longitude dimensions (indices into dims) and
  // their coordinates' values in degrees, indexed by the loader's indices (a periodic
  // longitude's run on past the end; a reflected row has its mirror's latitude), and the time
  // coordinate in seconds since 1970 by the store's (empty when no computed forcing needs it).
  std::optional<size_t> latitude_dim, longitude_dim;
  std::vector<double> latitudes, longitudes;
  std::vector<int64_t> times;

  std::vector<std::string> sample_dims;  // names of the sampled dims, in dims order
  std::vector<size_t> sampled_index;     // their indices in dims
  std::vector<std::string> spatial_dims;
  std::vector<size_t> spatial_index;  // dims of the batch after [batch, channel]
  std::vector<uint64_t> spatial_shape;
  uint64_t slab_elements = 1;  // product of spatial_shape

  // The distinct arrays behind the channels; channel_array[c] indexes them.
  std::vector<const internal::ArrayState*> arrays;
  std::vector<size_t> channel_array;
  // Per channel of a combined dataset's store(s), in order along the time dimension: the arrays
  // that hold its runs of the time dimension. Empty: arrays[channel_array[c]] holds every time
  // index as the dataset numbers it.
  std::vector<std::vector<ArraySegment>> time_segments;
  // Per array: the box kept in memory where its channels are static fields (Channel::broadcast:
  // no time dimension, the same field at every step of a window); nullopt: read per batch.
  std::vector<std::optional<ResidentBox>> resident;

  // CF decoding per channel (dataset/cf_decoding.h), before normalisation; values as stored when
  // LoaderOptions::decode_cf is off.
  std::vector<CfDecoding> cf;
  // Normalisation per channel: out = (x - mean) * inv_std (0 and 1 without a stats file).
  std::vector<double> mean, inv_std;
  // LoaderOptions::target_tendencies: per target slab, the channel at the window's last input
  // step (base_slabs[j].out_channel is j), and the tendency statistics of the target's distance
  // from it: out = ((x - base) - target_mean[j]) * target_inv_std[j]. Empty otherwise.
  std::vector<Slab> base_slabs;
  std::vector<double> target_mean, target_inv_std;
};

// The dimension of channel `c`'s array that the geometry's dimension `d` is; nullopt for the time
// dimension of a static field and the member dimension of a channel without members, which its
// array lacks.
std::optional<size_t> ArrayDimOf(const LoaderGeometry& geometry, size_t c, size_t d);

// The loader's indices [start, start + extent) along dimension `d` as runs of store indices and
// padding, appended to `pieces` in order (one piece where the dimension neither wraps nor is
// padded; reflected padding is one piece per index, as it runs backwards).
void MapAxisRun(const LoaderGeometry& geometry, size_t d, uint64_t start, uint64_t extent,
                std::vector<AxisPiece>* pieces);
// The store index whose value the loader's index `index` along dimension `d` takes: itself, the
// wrapped or mirrored one, or for padding with a value the nearest selected one (which the
// padding then covers).
uint64_t SourceIndex(const LoaderGeometry& geometry, size_t d, uint64_t index);
// The store index the loader's index `index` along dimension `d` stands for, as sample origins
// report it: below the period of a periodic dimension; shifted by the padding of a padded one,
// so before the selection's first index, below 0 too.
int64_t ReportedIndex(const LoaderGeometry& geometry, size_t d, uint64_t index);
// The store indices the loader's range along dimension `d` touches: the range itself, the whole
// dimension where it wraps, the selection where it is padded.
IndexRange TouchedStoreRange(const LoaderGeometry& geometry, size_t d);

// The array (index into `geometry.arrays`) and the index along its time dimension that hold
// dataset time index `t` of channel `c`.
std::pair<size_t, uint64_t> TimeSource(const LoaderGeometry& geometry, size_t c, uint64_t t);

// Resolves `options` against `dataset` (see include/zarrstream/loader.h), reading the stats file
// `options.normalize` names. Errors are kInvalidArgument (kNotFound for unknown names, kUnsupported
// for arrays the loader cannot read) and name the dataset and what is available. With
// `options.detect_missing_dates` it reads the channels' chunks (dataset/missing_dates.h) on `pool`
// (null: on the calling thread).
Result<LoaderGeometry> MakeLoaderGeometry(const Dataset& dataset, const LoaderOptions& options,
                                          ThreadPool* pool = nullptr);

}  // namespace zarrstream

// zarrstream's loader: samples of a Zarr dataset → training batches, planned, read, decoded and
// assembled by C++ threads, deterministic, sharded over data-parallel ranks and resumable.
// Mirrors the Python zarrstream.Loader (docs/loader.md has the user guide).
//
//   zarrstream::LoaderOptions options;
//   options.variables = {"temperature@500,850", "2m_temperature"};
//   options.sample = {{"time", 1}};
//   options.target_dim = "time";
//   options.target_offsets = {1};
//   options.batch_size = 16;
//   auto loader = zarrstream::Loader::Open("era5.zarr", options);
//   while (auto batch = loader->Next()) { ... (*batch)->input() ... }
//
// Sample model (docs/loader.md). The channels are the resolved variables (then the forcings), each
// one 2-D (or n-D) field of one array: "temperature@500" is one level of `temperature`. Every
// channel must have the same dimensions, but a static field (without the time dimension) is the
// same at every time step. A dimension named in `sample` is sampled with that
// window; `stride` (default: the window) spaces the sample origins; a time dimension
// ("time", "valid_time", ...) is always sampled (window 1 when not named). The other dimensions are
// taken whole (their selected range); an ensemble's member dimension may instead be sampled one
// member at a time or stacked into channels (`ensemble`). Label selections (`select`) restrict any
// dimension but the level dimension, whose selection is part of the channels ("t@500,850").
//
// Batch layout. input: [batch, time_window × channels, *spatial], where spatial are the channel
// dimensions other than the time dimension, in array order, each of its window (sampled) or
// selected size (whole). Channels are time-major: index t × channels + c is channel c at the
// window's step t. target: [batch, leads × target_channels, *spatial], lead-major: the target
// channels at origin + time_window - 1 + offset for each offset in `target_offsets`, in order.
// origins: int64 [batch, sample_dims], each sample's first index along each sampled dimension
// (absolute array indices, sample_dims() order; a window on a periodic dimension may run on past
// the end to index 0, and with patch padding an origin may lie before the selection, below 0 too).
//
// GPU batches (device kCuda; needs the CUDA driver and a build with nvcc). The chunks' stored bytes
// are staged in pinned memory and cross to the GPU in one copy per wave of chunks; nvCOMP decodes
// them there, one call per codec (chains PlanGpuDecode accepts: zstd, gzip, zlib, lz4, none, and
// blosc with lz4 or zstd inside, whose frames are parsed on the CPU and unshuffled by a kernel;
// with crc32c; unsharded or a shard's inner chunks), and one kernel launch per wave converts,
// normalises and scatters every box into the batch: identical values to the CPU path. Chunks of
// other chains (bitshuffle, blosclz, transposed, ...), and all compressed chunks where nvCOMP is
// not installed or `decode.gpu` is off, decode on the CPU and cross decoded. The checksums zlib and
// gzip store (Adler-32, CRC-32) are verified on the GPU; a chunk the GPU rejects (nvCOMP's status,
// its size, a checksum) is decoded again on the CPU, so that its error names it. The chunk cache
// is not used. A batch is complete when Next returns it; its device buffers are reused only after
// the work queued on the consumer's stream (SetConsumerStream) before the batch was released.
//
// The Python front (zarrstream.Loader) maps its keywords onto these options and converts batches,
// nothing more: shuffle → ShuffleMode (ParseShuffleMode; True "exact", False "none"), select
// {dim: (start, stop) | slice | [labels] | label} → LabelSelection (dates and numbers as label
// text), gpu_decode and cpu_decode_share → DecodePlacement (ParseCpuDecodeShare for "auto"),
// device="cuda" with gpu_batches → PlanBatchPlacement (GPU batches, or host batches it copies with
// torch), pin_memory None/True/False → PinMemory, nan=<value> → fill_nan and nan_fill,
// on_error="skip" → skip_bad_samples, timeline → record_timeline. The command line (`zarrstream
// bench`) parses its text with the same parsers.
//
// Threads and ownership. Next, SetEpoch, SetPrefetch and RestoreStateJson may be called from
// several threads at once: they take turns (a Next waiting for its batch holds the others back),
// and each batch is delivered to exactly one caller; the accessors (epoch, next_batch, StateJson,
// stats) see the position between two of them, never halfway through one. Opening and destroying
// the Loader are not concurrent with anything. Its own threads (`num_threads` workers, plus up to
// `prefetch` coordinating threads that only plan and wait) run the pipeline in the background. A
// Batch is owned by the shared_ptr Next returns; its buffers return to the loader's pool when the
// last reference goes, and may outlive the Loader.
//
// fork(): a fork()ed child inherits the Loader but not its threads, so it cannot make batches
// there: Next and RestoreStateJson return CheckProcess()'s kConfig error, SetEpoch, StartNextEpoch
// and PutBack do nothing, and the destructor leaves the loader's memory as it is (it would wait for
// threads that are gone). Open a loader in the process that iterates it. Arrays and groups, by
// contrast, read in a child as in the parent (zarrstream/array.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "zarrstream/array.h"
#include "zarrstream/label_selection.h"
#include "zarrstream/status.h"

namespace zarrstream {

namespace internal {
struct LoaderState;
struct BatchAccess;
}  // namespace internal

// The element type of batches.
enum class BatchDType : uint8_t { kFloat32, kBFloat16, kFloat16 };
std::string_view BatchDTypeName(BatchDType dtype);  // "float32", "bfloat16", "float16"
Result<BatchDType> ParseBatchDType(std::string_view name);
size_t BatchDTypeSize(BatchDType dtype);

// Page-locked ("pinned") batch buffers: copies of a pinned batch to the GPU run at full PCIe speed
// and can overlap the training step. kAuto pins when a CUDA driver and device are present (the
// CUDA driver is loaded at run time; nothing is needed to build or run without one); kOn makes
// their absence an error at Open.
enum class PinMemory : uint8_t { kAuto, kOn, kOff };

// Where batches are made. kCpu: host memory (pinned per PinMemory). kCuda: the memory of the CUDA
// device LoaderOptions::cuda_device (see "GPU batches" below).
enum class BatchDevice : uint8_t { kCpu, kCuda };
std::string_view BatchDeviceName(BatchDevice device);  // "cpu", "cuda"
// Why a Loader with device kCuda cannot make batches on CUDA device `cuda_device` here (no driver,
// no such device, a build without nvcc, kernels that do not load), or "" when it can. Makes that
// device's context, and no other's.
std::string GpuBatchesUnavailableReason(int cuda_device = 0);

// Whether batches for a consumer on a CUDA device are made on it (kCuda batches): kAuto where this
// build and machine can, kOn only (else an error), kOff never.
enum class GpuBatches : uint8_t { kAuto, kOn, kOff };

// How batches reach a consumer that asked for `requested` memory (CUDA device `cuda_device`):
// made on the GPU, or made in host memory (page-locked where a CUDA driver is present) that the
// consumer copies to the GPU itself (as the Python front does with torch).
struct BatchPlacement {
  BatchDevice device = BatchDevice::kCpu;  // LoaderOptions::device
  // With a CUDA request: whether the consumer copies host batches to the GPU, and why the
  // batches are not made there ("" when they are).
  bool consumer_copies = false;
  std::string reason;
};
// The policy both fronts share: a cuda request gets GPU batches where they can be made here
// (GpuBatchesUnavailableReason) and `gpu_batches` is not kOff; otherwise host batches that the
// consumer copies, if it can (`consumer_can_copy`). A ConfigError, with the reason, when a cuda
// request finds no GPU at all (no driver, no device, none visible under CUDA_VISIBLE_DEVICES, no
// such device: CudaDriver::ForDevice's reason, the one `zarrstream doctor` prints), when
// gpu_batches is kOn without a cuda request or without GPU batches, or when the consumer cannot
// copy and there are no GPU batches. Makes the context of CUDA device `cuda_device` (kCuda only).
Result<BatchPlacement> PlanBatchPlacement(BatchDevice requested, int cuda_device,
                                          GpuBatches gpu_batches, bool consumer_can_copy);

// Epoch order: kNone (index order), kExact (a global permutation) or kBlock (a chunk-aware block
// shuffle); see LoaderOptions::shuffle.
enum class ShuffleMode : uint8_t { kNone, kExact, kBlock };
// "none", "exact", "block": the names the fronts (`--shuffle`, Python shuffle=) and saved states
// use; ParseShuffleMode is the one parser of them, a ConfigError naming the three for anything
// else.
std::string_view ShuffleModeName(ShuffleMode mode);
Result<ShuffleMode> ParseShuffleMode(std::string_view name);

// Where GPU batches' chunks are decoded: by nvCOMP on the GPU, by the worker threads, or split
// between them. Ignored for batches on the CPU (which always decode there).
struct DecodePlacement {
  // nvCOMP decodes the chunks it can (true), or the worker threads decode every compressed chunk
  // into pinned memory and it crosses decoded, so that the GPU only copies and assembles (false):
  // for training steps that keep the GPU busy, where decoding there would take time from the
  // step, on machines with cores to spare. Batches are identical either way.
  bool gpu = true;
  // With `gpu`: the share (0 to 1) of the chunks nvCOMP could decode that the worker threads
  // decode instead, spread evenly over each batch, so that the CPU and the GPU decode side by
  // side: for training steps that keep the GPU busy, where the CPU alone cannot keep up. 0: nvCOMP
  // decodes all it can; 1: as `gpu` off. Batches are identical either way.
  double cpu_share = 0;
  // With `gpu`: `cpu_share` (rounded to tenths) is where the worker threads' share starts, and the
  // loader searches for the share that gives the consumer the shortest time per batch taken: its
  // step, which nvCOMP's decoding beside it slows, plus its wait for the batch, which grows where
  // the CPU falls behind. Shares on a grid of tenths are measured by windows of batches, the
  // fastest kept (of shares as fast, the highest), its neighbours tried now and then, and the
  // search starts again when the settled share turns slower (src/loader/decode_share.h).
  // Loader::stats().cpu_decode_share says where it stands.
  bool adaptive = false;

  // Where "auto" starts the adaptive share: every chunk on the CPU, where a host whose cores keep
  // up with the consumer stays without searching (the consumer waits for none of its batches, and
  // the step has the GPU to itself); elsewhere the first search measures every chunk on nvCOMP
  // next, then the shares between.
  static constexpr double kAutoStart = 1.0;
};
// The one parser of the CPU share's text forms (Python cpu_decode_share="auto" or a share,
// `zarrstream bench --cpu-decode-share`): "auto" (adaptive from kAutoStart) or a number from 0 to
// 1 (fixed), with nvCOMP decoding the rest. Anything else is an InvalidArgument error
// "'TEXT': expected a share from 0 to 1 or 'auto'", which the fronts prefix with their option.
Result<DecodePlacement> ParseCpuDecodeShare(std::string_view text);

// What patch windows see past the edges of a dimension that does not wrap (LoaderOptions::
// patch_padding; docs/loader.md, "Global grids").
struct PatchPadding {
  enum class Mode : uint8_t {
    kNone,     // windows stay inside the selection (rows near an edge that no stride reaches are
               // never sampled)
    kReflect,  // the selection mirrored at its edge, the edge not repeated (numpy's "reflect")
    kValue,    // `value`, in output units (after normalisation), in every channel
  };
  Mode mode = Mode::kNone;
  double value = 0;
};
// The one parser of its text forms (Python patch_padding=, `zarrstream bench --patch-padding`):
// "none", "reflect" or a number (the value); anything else is an InvalidArgument error naming them.
Result<PatchPadding> ParsePatchPadding(std::string_view text);

// What the loader does with an ensemble's member dimension (LoaderOptions::ensemble;
// docs/loader.md, "Ensembles").
enum class EnsembleMode : uint8_t {
  kNone,      // none: a member dimension is taken whole, a spatial dimension of the batch
  kSample,    // each member is a sample: sampled with window 1, not a dimension of the batch
  kChannels,  // the members stacked into channels: "2m_temperature#3", "temperature@500#3"
};
// "none", "sample", "channels": the names the fronts (Python ensemble=, `zarrstream bench
// --ensemble`) use; ParseEnsembleMode is their one parser, an InvalidArgument error naming the
// three for anything else.
std::string_view EnsembleModeName(EnsembleMode mode);
Result<EnsembleMode> ParseEnsembleMode(std::string_view name);

struct LoaderOptions {
  // Input channels: variable specs ("2m_temperature", "temperature@500,850", "temperature@*");
  // empty: every data variable of the dataset, sorted, but the forcings and, where some
  // variables have a time dimension, those without one. A static field (no time dimension, the
  // others' spatial dimensions) named here or in `forcings` is an input channel broadcast over
  // every step of the window, read once at open and kept (in device memory for GPU batches).
  std::vector<std::string> variables;
  // Inputs that are never targets (forcings: e.g. "toa_incident_solar_radiation"), after
  // `variables` in the input's channels.
  // A name that is no variable of the dataset but a computed forcing ("cos_latitude",
  // "sin_julian_day", "cos_solar_zenith_angle", ...: docs/loader.md) is computed for each
  // sample's valid time and grid point, in its place among the forcings, not normalised.
  std::vector<std::string> forcings;
  // Target channels when targets are configured; empty: `variables` but the static fields.
  // Naming a static field here is a kConfig error.
  std::vector<std::string> target_variables;

  // Window per sampled dimension, and the distance between origins (default: the window).
  std::vector<std::pair<std::string, uint64_t>> sample;
  std::vector<std::pair<std::string, uint64_t>> stride;
  // Targets: offsets (>= 0) along `target_dim` (the sampled time dimension) after the window's
  // last step. Empty target_dim: no targets.
  std::string target_dim;
  std::vector<uint64_t> target_offsets;
  // Time steps at this frequency ("6h"; units s, min, h, d) instead of the store's own: the
  // time dimension's windows, strides and target offsets count steps of it, taken every
  // frequency / step of the store from the selection's first (every 6th hour of an hourly
  // store). The time coordinate must be evenly spaced, with a step the frequency is a multiple
  // of. Empty: the store's step.
  std::string frequency;
  // Time steps no sample may touch, as input or as target (anemoi-datasets' missing_dates):
  // labels of the time coordinate (a date names its whole period), and with
  // `detect_missing_dates` every selected step at which some time-dependent channel the loader
  // reads has no value in its selected box: the chunks holding the box are not stored (in a
  // sharded array, the inner chunks are empty in the shard's index), or they hold only NaN after
  // CF decoding (_FillValue / missing_value masked; before `fill_nan` and normalisation). Detection
  // is a full pass at open, like `zarrstream stats`: it lists each array's chunks, reads the index
  // of each stored shard, and reads every stored chunk of the channels' selected boxes once (on the
  // loader's threads; a chunk holding many steps answers them all; a step's other spatial chunks
  // are skipped once one holds a value). Integer arrays without a CF fill value cannot hold NaN:
  // only their chunks' presence counts, and nothing of them is read; steps a `frequency` never
  // samples are not looked at. To pay the pass once, save what DetectMissingDates (or
  // Loader::missing_dates) returns and pass it as `missing_dates`. Samples touching a missing
  // step are left out of the index space, before shuffling and sharding;
  // LoaderStats::missing_date_samples counts them.
  std::vector<std::string> missing_dates;
  bool detect_missing_dates = false;

  // Label selections (label_selection.h), at most one per dimension: {"time", range "1979" to
  // "2015"}, {"latitude", range "60" to "30"}; ParseLabelSelections reads the command line's
  // "time=1979:2015". A selection of a sampled dimension must pick one run of indices.
  std::vector<LabelSelection> select;

  // Dimensions whose indices wrap around: nullopt detects them (a longitude going once around the
  // circle: Coordinate::periodic), a list names them (empty: none). On a periodic dimension a
  // label range may wrap ("longitude=350:10", or "-10:10" on a 0 to 359.75 grid), and a sampled
  // one selected whole has a window origin at every index (stride apart), a window past the end
  // going on at index 0: every column of a global grid is sampled, none is an edge.
  std::optional<std::vector<std::string>> periodic;
  // Sampled dimensions that do not wrap (the time dimension excepted): with kReflect or kValue the
  // selection is padded at both ends, the padding split evenly, until the windows `stride` apart
  // cover every index of it (721 latitudes in windows of 64: 47 rows of padding, 12 windows).
  // Reflection needs less padding than the selection has indices on each side. Sample origins
  // (Batch::origins) are then store indices that may lie outside the selection, below 0 too.
  PatchPadding patch_padding;

  // An ensemble's member dimension (`ensemble_dim`, or the one dimension named "number",
  // "member", "ensemble" or "realization"): kSample samples it with window 1 and leaves it out of
  // the batch's dimensions (each member a sample, its index a column of the origins); kChannels
  // stacks the members into channels, each channel of a variable with the dimension becoming one
  // per member ("2m_temperature#3", "temperature@500#3": the member coordinate's label after '#'),
  // variable-major, normalised with the variable's statistics ("2m_temperature") unless the stats
  // file names the member's channel. A channel without the member dimension (a static field, a
  // forcing shared by the members) is the same field for every member: one channel with
  // kChannels, the same values in every member's sample with kSample. kNone: a member dimension is
  // like any other (taken whole unless sampled), and every channel must have it.
  EnsembleMode ensemble = EnsembleMode::kNone;
  std::string ensemble_dim;

  // Epoch order: kNone, kExact (global permutation) or kBlock (chunk-aware block shuffle;
  // `block_chunks` chunks per block along each sampled dimension, `block_window` blocks
  // interleaved). Deterministic for (seed, epoch), identical on every rank. block_chunks 0: the
  // largest block (up to 8 chunks) whose samples still share decoded chunks: on the CPU, the
  // `block_window` blocks in play fit in three quarters of the chunk cache, so each chunk is
  // decoded about once per epoch; with GPU batches (no chunk cache), the `block_window` blocks
  // hold at most `batch_size` samples, so a block's shared chunks are decoded once per batch.
  ShuffleMode shuffle = ShuffleMode::kExact;
  uint64_t seed = 0;
  uint64_t block_chunks = 0;
  uint64_t block_window = 4;

  uint64_t batch_size = 1;
  // Data-parallel sharding: every sample once per epoch across `world_size` ranks (see
  // SamplePlan for drop_last and padding).
  uint32_t world_size = 1;
  uint32_t rank = 0;
  bool drop_last = false;

  BatchDType dtype = BatchDType::kFloat32;
  // A stats file (`zarrstream stats --output`): each channel becomes (x - mean) / std; a channel
  // with std 0 is only centred. Empty: values as stored.
  std::string normalize;
  // Targets as tendencies (residual prediction; Python's target_normalize="tendencies"): a target
  // channel at a step d store steps after the window's last input step is delivered as
  // ((x[target] - x[last input]) - mean_d) / std_d, with the tendency statistics over d steps of
  // `normalize` (`zarrstream stats --tendencies d`), the difference taken in float64 after CF
  // decoding and before the NaN policy and the cast to `dtype`. Needs `normalize` and target
  // offsets. Host and GPU batches give the same values.
  bool target_tendencies = false;
  // CF decoding, as xarray's open_zarr does by default (docs/loader.md, "CF decoding"): values
  // equal to _FillValue or missing_value become NaN and packed variables are unpacked
  // (x * scale_factor + add_offset), before the NaN policy and normalisation. Off: values as
  // stored.
  bool decode_cf = true;
  // NaN policy: keep NaN, or replace it with `nan_fill` (in output units, after normalisation)
  // and deliver masks (true where the value was NaN).
  bool fill_nan = false;
  double nan_fill = 0;
  // A sample whose chunk cannot be read: an error naming the array and chunk (false), or the
  // sample is dropped from its batch and counted (true).
  bool skip_bad_samples = false;

  BatchDevice device = BatchDevice::kCpu;
  // The CUDA device (cuda:N; each data-parallel rank its own) GPU batches are made on, or host
  // batches are pinned through (pinned memory serves every device; only this one gets a context).
  int cuda_device = 0;
  // GPU batches: the decoded bytes of one wave (one copy to the GPU, one nvCOMP call per codec, one
  // scatter launch), at least one chunk; 0: 512 MiB. A batch of several waves reads the next wave
  // while the GPU copies, decodes and scatters the last, each in a workspace of its own. Larger
  // waves give nvCOMP more chunks per call and take more GPU memory: about 10× this per batch in
  // flight (two workspaces of staging, decoded chunks and nvCOMP's scratch).
  uint64_t gpu_wave_bytes = 0;
  // GPU batches: where their chunks are decoded (nvCOMP, the worker threads, or both).
  DecodePlacement decode;
  // Batches prepared ahead of the consumer (0 counts as 1); Loader::SetPrefetch changes it later.
  size_t prefetch = 2;
  PinMemory pin_memory = PinMemory::kAuto;
  // Worker threads reading, decoding and assembling (0: one per core this process may run on, its
  // CPU affinity, divided among the ranks on this machine: LOCAL_WORLD_SIZE, as torchrun sets it).
  size_t num_threads = 0;
  // Decoded chunks kept for reuse by later samples (overlapping windows, block shuffle, chunks
  // shared by input and target); 0 picks 1/64 of the machine's memory, from 256 MiB to 1 GiB.
  uint64_t cache_bytes = 0;
  // Chunks not stored are errors rather than fill values.
  bool missing_chunks_are_errors = false;
  // An Icechunk repository's branch, tag or snapshot id to read (empty: branch "main"); see
  // OpenOptions::ref.
  std::string ref;
  // Record a timeline of the pipeline's stages (Loader::Timeline): each batch's planning, every
  // read-and-decode wave and assembly, and the consumer's waits, up to kMaxTimelineSpans spans.
  bool record_timeline = false;
};

// One timed stage of the pipeline: "plan", "read+decode" (one wave of chunks), "assemble" or
// "wait" (the consumer blocked in Next); GPU batches have "read", "gpu decode" and "scatter" per
// wave instead of "read+decode" and "assemble". Times are seconds since the loader opened; `thread`
// numbers the threads in the order they first recorded a span.
struct TimelineSpan {
  std::string stage;
  uint64_t epoch = 0;
  uint64_t batch = 0;
  uint32_t thread = 0;
  double start_seconds = 0;
  double end_seconds = 0;
};
inline constexpr size_t kMaxTimelineSpans = size_t{1} << 20;

// One output tensor of a batch: C-order elements of `dtype` with `shape`.
struct BatchTensor {
  std::vector<int64_t> shape;
  std::span<std::byte> data;
};

class Batch {
 public:
  uint64_t epoch() const { return epoch_; }
  uint64_t index() const { return index_; }  // within this rank's epoch
  // Where input, target and the masks live (origins are always in host memory): with kCuda their
  // data are device addresses of CUDA device cuda_device().
  BatchDevice device() const { return device_; }
  int cuda_device() const { return cuda_device_; }
  size_t size() const { return sample_ids_.size(); }
  // The last num_padding() samples repeat earlier ones (equal batch counts per rank).
  uint64_t num_padding() const { return num_padding_; }
  // Samples of this batch dropped by the skip policy.
  uint64_t num_skipped() const { return num_skipped_; }
  const std::vector<uint64_t>& sample_ids() const { return sample_ids_; }

  BatchDType dtype() const { return dtype_; }
  const BatchTensor& input() const { return input_; }
  // Empty shape when no targets are configured.
  const BatchTensor& target() const { return target_; }
  // uint8 (1 where the value was NaN) with the input's/target's shape; empty unless fill_nan.
  const BatchTensor& input_mask() const { return input_mask_; }
  const BatchTensor& target_mask() const { return target_mask_; }
  // int64 [size(), num sampled dims].
  const BatchTensor& origins() const { return origins_; }

  ~Batch() = default;
  Batch(const Batch&) = delete;
  Batch& operator=(const Batch&) = delete;

 private:
  friend struct internal::BatchAccess;
  Batch() = default;

  uint64_t epoch_ = 0;
  uint64_t index_ = 0;
  uint64_t num_padding_ = 0;
  uint64_t num_skipped_ = 0;
  std::vector<uint64_t> sample_ids_;
  BatchDType dtype_ = BatchDType::kFloat32;
  BatchDevice device_ = BatchDevice::kCpu;
  int cuda_device_ = 0;
  BatchTensor input_, target_, input_mask_, target_mask_, origins_;
  // The buffers behind the tensors, returned to the loader's pool on destruction.
  std::shared_ptr<void> storage_;
};

// What the loader did since it was opened. `batches`, `samples`, `skipped_samples`,
// `bytes_delivered` and the wait count what reached the consumer; the read counters (chunk_refs
// and what follows) count every batch prepared (prefetched ones included, the next epoch's first
// batches too). Times are summed over threads (seconds of work, not wall time), except the wait,
// which is the consumer's.
struct LoaderStats {
  uint64_t batches = 0;          // delivered to the consumer
  uint64_t samples = 0;          // delivered (padding included)
  uint64_t skipped_samples = 0;  // dropped by the skip policy from the delivered batches
  uint64_t chunk_refs = 0;       // chunks the prepared batches' samples needed
  uint64_t chunks_decoded = 0;   // chunks read and decoded (cache misses)
  uint64_t cache_hits = 0;       // chunks served from the chunk cache
  uint64_t missing_chunks = 0;   // chunks not stored (read as the fill value)
  uint64_t requests = 0;         // store reads
  uint64_t bytes_read = 0;       // encoded bytes read from the store
  uint64_t bytes_decoded = 0;    // decoded bytes of the chunks decoded
  uint64_t bytes_used = 0;       // bytes of the chunks' values that went into batches
  uint64_t bytes_delivered = 0;  // bytes of the batch tensors delivered
  // The batch blocks the loader holds now (GPU batches: device blocks; else host blocks), in use
  // and kept for reuse: up to prefetch + 2 while the consumer holds no more than one batch.
  uint64_t batch_blocks = 0;
  double plan_seconds = 0;         // planning batches (sample and read plans)
  double read_decode_seconds = 0;  // wall time of each batch's read-and-decode waves, summed
  double assemble_seconds = 0;     // copying, casting, normalising into batches (thread time)
  // GPU batches: chunks nvCOMP decoded, chunks the GPU rejected (decoded again on the CPU), bytes
  // copied to the GPU, of which the streams read straight into the pinned staging and decoded
  // where they lie (a shard's inner chunks: no copy on the CPU), and the wall time of the GPU
  // waves, summed over batches: in all, and its stages: reading (stored bytes into pinned
  // staging; CPU decodes of what the GPU does not decode), the copy to the GPU and nvCOMP's
  // decode, and the scatter kernel.
  uint64_t gpu_decoded_chunks = 0;
  uint64_t gpu_rejected_chunks = 0;
  uint64_t bytes_to_gpu = 0;
  uint64_t bytes_staged_without_copy = 0;
  double gpu_seconds = 0;
  double gpu_read_seconds = 0;
  double gpu_decode_seconds = 0;
  double gpu_scatter_seconds = 0;
  double wait_seconds = 0;  // the consumer's wait for batches
  // GPU batches decoded by nvCOMP: the share of its chunks the worker threads decode now (fixed,
  // or where DecodePlacement::adaptive has taken it; 1 once nvCOMP ran out of GPU memory beside
  // the consumer, after which the worker threads decode every chunk); 0 otherwise.
  double cpu_decode_share = 0;
  // Consumer wait per batch: bucket b counts waits in [2^b, 2^(b+1)) microseconds (bucket 0 also
  // holds shorter ones; the last everything longer).
  static constexpr size_t kWaitBuckets = 32;
  std::vector<uint64_t> wait_histogram = std::vector<uint64_t>(kWaitBuckets, 0);
  // Remote stores (http, s3, gs), counted since the loader opened the dataset (opening it
  // included): HTTP attempts that were retries, attempts that failed (a transport error or an
  // error status, retried or not), and each attempt's latency: bucket b counts attempts that took
  // [2^b, 2^(b+1)) microseconds. Zero and empty for local stores.
  uint64_t retries = 0;
  uint64_t failed_requests = 0;
  std::vector<uint64_t> request_latency_histogram;
  // Chunk-grid read amplification of the epoch order, estimated at open (SamplePlan): chunk
  // reads per epoch over distinct chunks, for the configured shuffle and for "exact".
  double estimated_read_amplification = 0;
  double estimated_read_amplification_exact = 0;
  // Shuffle "block": the chunks per block in use (the option, or the loader's choice for
  // block_chunks 0); 0 for the other orders.
  uint64_t block_chunks = 0;
  // Samples of the index space (all ranks, per epoch) left out because they touch a missing date
  // (LoaderOptions::missing_dates).
  uint64_t missing_date_samples = 0;
};

// The time steps `options.detect_missing_dates` finds in the dataset at `url` (as Loader::Open
// takes it), as labels of its time coordinate (ISO dates to the second: "2010-01-01T06:00:00"),
// in order: what a loader given them as `missing_dates` leaves out, without the pass. Reads what
// detection reads (see LoaderOptions::missing_dates) on `options.num_threads` threads; the options
// that pick channels and boxes count (variables, forcings, targets, select, periodic, ensemble,
// decode_cf, ref), those of batches do not, and `options.missing_dates` is not added. Errors are
// Loader::Open's, and a ConfigError where the channels have no time dimension.
Result<std::vector<std::string>> DetectMissingDates(std::string_view url,
                                                    const LoaderOptions& options);

class Loader {
 public:
  // Opens the dataset (a group or a single array) at `url`, or the stores a JSON dataset form
  // combines (a list joins them; {"join": [...], "mode": "inner"}, {"concat": [...], "dim":
  // "time"}; docs/loader.md, "Several stores"), resolves channels and selections and plans the
  // samples. Misconfiguration (unknown variable, mismatched dimensions, a window larger
  // than the selection, offsets past the end, a stats file without a channel) fails here with a
  // message naming the dataset and what is available; so does a batch whose byte count overflows
  // (a batch_size too large for any memory), and worker threads that cannot start (ConfigError).
  // Starts the worker threads (num_threads); the pipeline's threads start with the first Next.
  static Result<Loader> Open(std::string_view url, const LoaderOptions& options);

  Loader(Loader&&) noexcept;
  Loader& operator=(Loader&&) noexcept;
  ~Loader();  // stops the pipeline (waits for in-flight batches; undelivered ones are dropped)

  // A kConfig error, naming fork(), in a process other than the one that opened this loader (a
  // fork()ed child, such as a PyTorch DataLoader worker); Ok in the one that did.
  Status CheckProcess() const;

  // The next batch of this rank's current epoch, preparing up to `prefetch` ahead; nullopt once
  // the epoch is exhausted (then StartNextEpoch or SetEpoch). Errors: a batch that could not be
  // read (unless skipping), or memory for it that could not be allocated (a ConfigError saying
  // out of memory, what and how many bytes); the pipeline stays usable and the failed batch counts
  // as delivered. A pipeline thread that cannot start is a ConfigError.
  Result<std::optional<std::shared_ptr<const Batch>>> Next();
  // Next for a consumer that must stay responsive while it waits (the Python binding checks for
  // Ctrl-C): while the batch is not ready, `interrupted` is called about every 50 ms on this thread
  // (during Next's turn: it must not call the loader); once it returns true, Next gives up with
  // nullopt and nothing delivered (the caller knows why: its callback said so).
  Result<std::optional<std::shared_ptr<const Batch>>> Next(
      const std::function<bool()>& interrupted);
  // Takes back `batch`, the batch Next delivered last, as not delivered: the position (next_batch,
  // StateJson) moves back before it, and the next Next delivers it again. For a consumer that took
  // a batch but could not pass it on (the Python loop interrupted between the two). False, with
  // nothing changed, where another batch was delivered since or the epoch changed.
  bool PutBack(std::shared_ptr<const Batch> batch);

  // Starts epoch `epoch` at its first batch (drops prepared batches).
  void SetEpoch(uint64_t epoch);
  // Batches prepared ahead from now on (at least 1; LoaderOptions::prefetch until then). Lower: the
  // batches already prepared or in production are kept and delivered, no new one is started until
  // the pipeline is that close, and the memory kept for reuse beyond what the new number needs
  // (batch blocks, GPU decode workspaces) is freed, idle now and the rest as the consumer releases
  // it: for a consumer that runs short of (GPU) memory. Higher: the batches prepared ahead are
  // dropped and made again (the position does not move) by more coordinating threads. The Python
  // loader lowers it itself where PyTorch's allocator runs short of GPU memory (docs/loader.md).
  void SetPrefetch(size_t prefetch);
  size_t prefetch() const;
  // SetEpoch(epoch() + 1).
  void StartNextEpoch();
  uint64_t epoch() const;
  // Batches of this rank's epoch delivered so far; num_batches() at the end of the epoch.
  uint64_t next_batch() const;
  uint64_t num_batches() const;  // per epoch, this rank
  uint64_t num_samples() const;  // in the index space (all ranks)

  // The position to resume from (JSON, format "zarrstream.sample_plan/1"), and resuming: the
  // batches after it are exactly those the saved loader had left.
  std::string StateJson() const;
  Status RestoreStateJson(std::string_view json);
  // Which data the loader reads: one StoreIdentity per store of the dataset, in the order the
  // dataset names them (a combination's members depth first), fixed when it opened. An Icechunk
  // repository is the snapshot id read (the branch or tag as it stood then); a Kerchunk reference
  // set the SHA-256 of its file; a Zarr store the SHA-256 of its metadata documents (consolidated
  // metadata when present). Python's state_dict() records it and load_state_dict() refuses a state
  // of another identity; pickled loaders reopen an Icechunk repository at this snapshot.
  const std::vector<StoreIdentity>& dataset_identity() const;
  // The time steps no sample touches (LoaderOptions::missing_dates, named or detected), as labels
  // of the time coordinate (ISO dates to the second), in order; empty without any. What a loader
  // given them as `missing_dates` leaves out, without detecting them again. Errors: the time
  // coordinate cannot be read.
  Result<std::vector<std::string>> missing_dates() const;

  const std::vector<std::string>& input_channels() const;   // one per input channel of a step
  const std::vector<std::string>& target_channels() const;  // one per target channel of a lead
  const std::vector<std::string>& sample_dims() const;      // the origins' columns
  const std::vector<std::string>& spatial_dims() const;     // the batch's trailing dimensions
  std::vector<int64_t> input_shape() const;                 // of a full batch
  std::vector<int64_t> target_shape() const;                // empty without targets
  LoaderStats stats() const;
  const LoaderOptions& options() const;
  // Whether batch buffers are page-locked for the GPU (see PinMemory).
  bool pinned() const;
  // The worker threads (LoaderOptions::num_threads, or what 0 chose).
  size_t num_threads() const;
  // GPU batches: the stream (a CUstream / cudaStream_t; null or CU_STREAM_LEGACY (1) the legacy
  // default stream, CU_STREAM_PER_THREAD (2) the per-thread default, as DLPack numbers them too)
  // on which the consumer uses the batches it releases from now on. Thread-safe.
  void SetConsumerStream(void* stream);
  // GPU batches: whether nvCOMP decodes (else the CPU decodes every chunk), or why not.
  std::string gpu_decode_status() const;
  // The spans recorded so far with record_timeline (empty without), in order of start.
  std::vector<TimelineSpan> Timeline() const;

 private:
  explicit Loader(std::unique_ptr<internal::LoaderState> state);
  std::unique_ptr<internal::LoaderState> state_;
};

}  // namespace zarrstream

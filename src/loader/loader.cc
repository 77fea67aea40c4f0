// Loader: where the loader's parts are assembled (Loader::Open) and its public methods. The parts
// live beside it: the batch layout (batch_layout.h), the memory batches live in
// (batch_memory_pool.h), the producers that make one batch on the CPU or the GPU
// (cpu_batch_producer.h, gpu_batch_producer.h), the pipeline that orders and prefetches them
// (pipeline.h), the CPU/GPU split of decoding (decode_share.h) and the stage timeline
// (stage_timeline.h).
//
// Memory bound (what the loader holds, beyond the consumer's batches): the chunk cache
// (cache_bytes), per batch in flight one wave (≤ CpuBatchProducer::kWaveBytes or two chunks per
// worker), idle decode buffers kept for reuse (at most as much again as those two) and the batch
// buffers (prefetch + 2 batches, recycled through a pool).
#include "zarrstream/loader.h"

#include <unistd.h>

#include <algorithm>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>

#include "array/array_state.h"
#include "dataset/channel_spec.h"
#include "gpu/cuda_driver.h"
#include "gpu/gpu_kernels.h"
#include "loader/batch_layout.h"
#include "loader/batch_memory_pool.h"
#include "loader/batch_producer.h"
#include "loader/cpu_batch_producer.h"
#include "loader/decode_share.h"
#include "loader/gpu_batch_producer.h"
#include "loader/pipeline.h"
#include "loader/read_plan.h"
#include "loader/sample_plan.h"
#include "loader/stage_timeline.h"
#include "store/http_store.h"
#include "store/store_metrics.h"
#include "util/checked_size.h"
#include "util/fork_safety.h"
#include "util/format.h"
#include "util/thread_pool.h"

namespace zarrstream {

std::string_view BatchDTypeName(BatchDType dtype) {
  switch (dtype) {
    case BatchDType::kFloat32:
      return "float32";
    case BatchDType::kBFloat16:
      return "bfloat16";
    case BatchDType::kFloat16:
      return "float16";
  }
  return "?";
}

Result<BatchDType> ParseBatchDType(std::string_view name) {
  for (BatchDType d : {BatchDType::kFloat32, BatchDType::kBFloat16, BatchDType::kFloat16}) {
#if !defined(__FLT16_MANT_DIG__)
    if (d == BatchDType::kFloat16 && name == BatchDTypeName(d)) {
      return UnsupportedError("float16 batches need a compiler with _Float16");
    }
#endif
    if (name == BatchDTypeName(d)) return d;
  }
  return InvalidArgumentError("batch dtype '" + std::string(name) +
                              "': expected float32, bfloat16 or float16");
}

size_t BatchDTypeSize(BatchDType dtype) { return dtype == BatchDType::kFloat32 ? 4 : 2; }

std::string_view BatchDeviceName(BatchDevice device) {
  return device == BatchDevice::kCuda ? "cuda" : "cpu";
}

std::string GpuBatchesUnavailableReason(int cuda_device) {
  Result<internal::GpuDevice> device = internal::OpenGpuDevice(cuda_device);
  return device.ok() ? std::string() : device.status().message();
}

Result<BatchPlacement> PlanBatchPlacement(BatchDevice requested, int cuda_device,
                                          GpuBatches gpu_batches, bool consumer_can_copy) {
  BatchPlacement placement;
  if (requested != BatchDevice::kCuda) {
    if (gpu_batches == GpuBatches::kOn) {
      return ConfigError("GPU batches (gpu_batches on) need device cuda, not " +
                         std::string(BatchDeviceName(requested)));
    }
    return placement;
  }
  // No GPU to put batches on, however they are made (no driver, no device, none visible, no such
  // device): said now, with the reason `zarrstream doctor` gives, not by the consumer's first copy.
  if (Result<const CudaDriver*> driver = CudaDriver::ForDevice(cuda_device); !driver.ok()) {
    return ConfigError("device is cuda:" + std::to_string(cuda_device) +
                       ", but this machine has no GPU zarrstream can use: " +
                       driver.status().message() + " (zarrstream doctor reports the GPU)");
  }
  // A malformed tuning knob is the caller's error, not a reason to make the batches elsewhere.
  if (Result<uint32_t> blocks = GpuKernels::BlocksPerSmFromEnvironment(); !blocks.ok()) {
    return std::move(blocks).status();
  }
  placement.reason = gpu_batches == GpuBatches::kOff ? "GPU batches are off (gpu_batches)"
                                                     : GpuBatchesUnavailableReason(cuda_device);
  if (placement.reason.empty()) {
    placement.device = BatchDevice::kCuda;
    return placement;
  }
  if (gpu_batches == GpuBatches::kOn) {
    return ConfigError(
        "GPU batches (gpu_batches on) need device cuda and a GPU this build can "
        "use, but batches cannot be made on cuda:" +
        std::to_string(cuda_device) + " here: " + placement.reason);
  }
  if (!consumer_can_copy) {
    return ConfigError(
        "device is cuda:" + std::to_string(cuda_device) +
        " and the consumer does not copy host batches there (Python's output='dlpack', "
        "zarrstream bench), so it needs GPU batches" +
        (gpu_batches == GpuBatches::kOff
             ? ", which are off (gpu_batches)"
             : ", but batches cannot be made on that GPU here: " + placement.reason));
  }
  placement.consumer_copies = true;
  return placement;
}

namespace internal {
namespace {

// The chunk cache when the options leave it to the loader: 1/64 of the machine's memory, from
// 256 MiB to 1 GiB (enough for block_window blocks of 8 time steps of 69 ERA5 channels at 1°;
// at 0.25° one such step is 286 MB).
uint64_t CacheBytes(const LoaderOptions& options) {
  if (options.cache_bytes != 0) return options.cache_bytes;
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_size = sysconf(_SC_PAGESIZE);
  const uint64_t memory = pages > 0 && page_size > 0
                              ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page_size)
                              : 0;
  return std::clamp<uint64_t>(memory / 64, uint64_t{256} << 20, uint64_t{1} << 30);
}

// Decoded-chunk buffers kept idle for reuse: as many bytes as the cache and the waves in flight
// hold at most, so that a steady state of misses reuses every buffer instead of faulting in fresh
// pages (which cost as much as a fifth of the loader's CPU time).
uint64_t IdleChunkBytes(const LoaderOptions& options) {
  return CacheBytes(options) + NumCoordinators(options.prefetch) * CpuBatchProducer::kWaveBytes;
}

}  // namespace

struct LoaderState {
  LoaderOptions options;
  Dataset dataset;
  LoaderGeometry geometry;
  SamplePlan plan;
  // Next, SetEpoch and RestoreStateJson take turns under consumer_turn (held while Next waits for
  // its batch). The position (plan's epoch, delivered, returned, delivered_stats) changes only
  // with both mutexes held, so that it is read under either: position_mutex for the accessors,
  // which must not wait for a batch.
  std::mutex consumer_turn;
  mutable std::mutex position_mutex;
  uint64_t delivered = 0;  // batches of plan.epoch() delivered
  // A delivered batch put back (Loader::PutBack): delivered again before the pipeline's next.
  std::shared_ptr<const Batch> returned;
  BatchContext context;

  // GPU batches with an adaptive decode placement: the share a batch's production starts with.
  std::unique_ptr<DecodeShareController> decode_share;
  std::unique_ptr<BatchProducer> producer;
  GpuBatchProducer* gpu = nullptr;  // the producer, for device kCuda

  // Delivered-batch statistics.
  LoaderStats delivered_stats;
  double estimated_amplification = 0, estimated_amplification_exact = 0;

  std::unique_ptr<Pipeline> pipeline;

  // The process that opened the loader, whose threads run it.
  const uint64_t fork_generation = ForkGeneration();
  const pid_t pid = getpid();

  LoaderState(LoaderOptions o, Dataset d, LoaderGeometry g, SamplePlan p)
      : options(std::move(o)),
        dataset(std::move(d)),
        geometry(std::move(g)),
        plan(std::move(p)),
        context(options, geometry, CacheBytes(options), IdleChunkBytes(options)) {}
  ~LoaderState() { StopPipeline(); }

  // Under position_mutex: `b` counts as delivered, or (taken_back) no longer.
  void CountDelivered(const Batch& b, bool taken_back = false) {
    const auto count = [taken_back](uint64_t& counter, uint64_t n) {
      counter = taken_back ? counter - n : counter + n;
    };
    LoaderStats& st = delivered_stats;
    count(delivered, 1);
    count(st.batches, 1);
    count(st.samples, b.size());
    count(st.skipped_samples, b.num_skipped());
    count(st.bytes_delivered, b.input().data.size() + b.target().data.size());
  }

  void StopPipeline() { pipeline.reset(); }
  // In consumer_turn.
  void SetEpoch(uint64_t epoch) {
    // The pipeline has been producing the next epoch since this one's last batches: keep them.
    const bool ahead = pipeline && delivered == plan.num_batches() && pipeline->AdvanceEpoch(epoch);
    if (!ahead) StopPipeline();
    std::lock_guard<std::mutex> position(position_mutex);
    plan.SetEpoch(epoch);
    delivered = 0;
    returned.reset();
  }
  // In consumer_turn: `prefetch` batches ahead from the next batch on. Fewer: the running pipeline
  // claims no new batch until it is that far ahead, keeping those it has (a consumer short of GPU
  // memory would otherwise wait for them to be made again), and the memory beyond what the new
  // number needs is freed as it comes back. More: the pipeline starts again (more coordinating
  // threads), its batches ahead dropped and made again.
  void SetPrefetch(size_t prefetch) {
    prefetch = std::max<size_t>(prefetch, 1);
    const size_t before = context.prefetch.load();
    if (prefetch == before) return;
    if (prefetch > before) {
      StopPipeline();
      // The new pipeline's first batches allocate: not what a decode share costs.
      if (decode_share) decode_share->PassOver(DecodeShareController::kStartupBatches);
    } else if (pipeline) {
      pipeline->LowerPrefetch(prefetch);
    }
    context.prefetch.store(prefetch);
    producer->KeepMemoryFor(prefetch);
    context.host_memory->SetMaxKept(prefetch + 2);
  }
  Status StartPipeline() {
    PipelineOptions o;
    o.prefetch = context.prefetch.load();
    o.coordinators = NumCoordinators(o.prefetch);
    o.cpu_decode_share = options.decode.cpu_share;
    o.adaptive = decode_share.get();
    ZS_ASSIGN_OR_RETURN(pipeline, Pipeline::Start(*producer, o, plan, delivered));
    return Status::Ok();
  }
};

namespace {

// The host memory batches are page-locked in (null: pageable), or why pin_memory on cannot be
// had. GPU batches' host memory (their origins) is never pinned.
Result<const CudaDriver*> PinningDriver(const LoaderOptions& options) {
  if (options.pin_memory == PinMemory::kOff || options.device == BatchDevice::kCuda) {
    return nullptr;
  }
  // Page-locked through the GPU the batches go to (PORTABLE: for every device alike), so that
  // no other device gets a context.
  Result<const CudaDriver*> driver = CudaDriver::ForDevice(options.cuda_device);
  if (!driver.ok() && options.pin_memory == PinMemory::kOn) {
    return ConfigError("pin_memory is on, but batches cannot be page-locked: " +
                       driver.status().message());
  }
  return driver.ok() ? *driver : nullptr;
}

Result<SamplePlan> MakeSamplePlan(const Dataset& dataset, const LoaderGeometry& geometry,
                                  const LoaderOptions& options, ShuffleMode shuffle) {
  SamplePlanOptions plan_options;
  plan_options.shuffle = shuffle;
  plan_options.seed = options.seed;
  plan_options.batch_size = options.batch_size;
  plan_options.world_size = options.world_size;
  plan_options.rank = options.rank;
  plan_options.drop_last = options.drop_last;
  const std::vector<SampledDim> plan_dims = PlanDims(geometry);
  plan_options.block_chunks =
      options.block_chunks != 0
          ? options.block_chunks
          : AutoBlockChunks(geometry, plan_dims, options, CacheBytes(options));
  plan_options.block_window = options.block_window;
  Result<SamplePlan> plan = SamplePlan::Create(plan_dims, plan_options);
  if (!plan.ok())
    return std::move(plan).status().WithContext("planning samples of " + dataset.url());
  return plan;
}

// Per channel: slab strides, C order over the spatial dims; 0 on the time and level dims.
std::vector<DimArray> SlabStrides(const LoaderGeometry& g) {
  std::vector<uint64_t> spatial_strides(g.spatial_shape.size());
  uint64_t stride = 1;
  for (size_t i = g.spatial_shape.size(); i-- > 0;) {
    spatial_strides[i] = stride;
    stride *= g.spatial_shape[i];
  }
  std::vector<DimArray> slab_strides;
  for (size_t c = 0; c < g.channels.size(); ++c) {
    DimArray strides{};
    for (size_t i = 0; i < g.spatial_index.size(); ++i) {
      strides[*ArrayDimOf(g, c, g.spatial_index[i])] = spatial_strides[i];
    }
    slab_strides.push_back(strides);
  }
  return slab_strides;
}

BatchLayoutSpec LayoutSpec(const LoaderGeometry& g, const LoaderOptions& options) {
  BatchLayoutSpec spec;
  spec.batch_size = options.batch_size;
  spec.input_channels = g.input_channels;
  spec.target_channels = g.target_slabs.size();
  spec.spatial_shape = g.spatial_shape;
  spec.slab_elements = g.slab_elements;
  spec.origin_dims = g.sampled_index.size();
  spec.element_bytes = BatchDTypeSize(options.dtype);
  spec.masks = options.fill_nan;
  spec.tensors_on_device = options.device == BatchDevice::kCuda;
  return spec;
}

// Static field `array` of `g` (its box `box`), read once, as stored: batches copy their slabs from
// it, decoding and normalising them as they do a chunk's values.
Result<std::shared_ptr<const ChunkCache::Entry>> ReadResidentBox(const LoaderGeometry& g,
                                                                 size_t array,
                                                                 const ResidentBox& box) {
  const size_t c = static_cast<size_t>(
      std::find(g.channel_array.begin(), g.channel_array.end(), array) - g.channel_array.begin());
  const Array& handle = g.channels[c].array;
  uint64_t elements = 1;
  for (uint64_t extent : box.shape) elements *= extent;
  const uint64_t bytes = elements * DataTypeSize(handle.dtype());
  auto entry = std::make_shared<ChunkCache::Entry>();
  ZS_RETURN_IF_ERROR(AllocateBytes(&entry->bytes, bytes,
                                   "the static field '" + g.channels[c].variable + "' (" +
                                       FormatIndex(box.shape) + " of " + handle.state().Describe() +
                                       ")"));
  ZS_RETURN_IF_ERROR(handle.Read(box.start, box.shape, entry->bytes.data()));
  return std::shared_ptr<const ChunkCache::Entry>(std::move(entry));
}

// The loader's worker threads (num_threads; 0: CoresPerLocalRank()).
Result<std::shared_ptr<ThreadPool>> StartWorkers(const LoaderOptions& options) {
  size_t threads = options.num_threads;
  if (threads == 0) {
    ZS_ASSIGN_OR_RETURN(threads, CoresPerLocalRank());
  }
  try {
    return std::make_shared<ThreadPool>(threads);
  } catch (const std::exception& e) {  // std::system_error, or bad_alloc for the threads' count
    return ConfigError("cannot start the loader's " + std::to_string(threads) +
                       " worker threads: " + e.what() + "; a smaller num_threads starts fewer");
  }
}

// The loader's parts on its state: strides, layout, memory and producer (the thread pool is
// there already).
Status AssembleParts(LoaderState& s, const CudaDriver* pin, std::optional<GpuSetup> gpu) {
  const LoaderOptions& options = s.options;
  BatchContext& c = s.context;
  ZS_ASSIGN_OR_RETURN(c.layout, BatchLayout::Make(LayoutSpec(s.geometry, options)));
  for (size_t i = 0; i < s.geometry.arrays.size(); ++i) {
    const ArrayState* array = s.geometry.arrays[i];
    if (const std::optional<ResidentBox>& box = s.geometry.resident[i]) {
      ZS_ASSIGN_OR_RETURN(std::shared_ptr<const ChunkCache::Entry> kept,
                          ReadResidentBox(s.geometry, i, *box));
      c.resident.push_back(std::move(kept));
      c.chunk_shapes.push_back(box->shape);
      continue;
    }
    // Batches decode whole read chunks into the chunk cache: a chunk no machine could hold is
    // refused here rather than by an allocation on a loader thread.
    ZS_RETURN_IF_ERROR(CheckAllocation("a read chunk of shape " +
                                           FormatIndex(array->read_chunk_shape) + " of " +
                                           array->Describe(),
                                       ReadChunkBytes(*array)));
    c.resident.emplace_back();
    c.chunk_shapes.push_back(array->read_chunk_shape);
  }
  c.slab_strides = SlabStrides(s.geometry);
  if (gpu) {
    auto producer = std::make_unique<GpuBatchProducer>(c, std::move(*gpu));
    s.gpu = producer.get();
    s.producer = std::move(producer);
    if (s.gpu->decodes_with_nvcomp() && options.decode.adaptive) {
      // Data-parallel ranks step together: their controllers judge by what they share.
      s.decode_share = std::make_unique<DecodeShareController>(
          options.decode.cpu_share, DecodeShareController::kStartupBatches,
          options.world_size > 1 ? DecodeShareController::Steps::kSharedWithRanks
                                 : DecodeShareController::Steps::kOwn);
      s.gpu->SetAdaptiveShare(s.decode_share.get());
    }
  } else {
    s.producer = std::make_unique<CpuBatchProducer>(c);
  }
  // The batches in flight, the one the consumer holds and the one it released last.
  c.host_memory = std::make_shared<HostBatchPool>(c.layout.host_bytes, c.prefetch.load() + 2, pin);
  return Status::Ok();
}

// The dataset at `url` opened as the loader's options say (missing chunks, Icechunk ref).
Result<Dataset> OpenDataset(std::string_view url, const LoaderOptions& options) {
  OpenOptions open_options;
  open_options.missing_chunks_are_errors = options.missing_chunks_are_errors;
  open_options.ref = options.ref;
  return Dataset::Open(url, open_options);
}

}  // namespace
}  // namespace internal

using internal::LoaderState;

Result<Loader> Loader::Open(std::string_view url, const LoaderOptions& options) {
  ZS_RETURN_IF_ERROR(ParseBatchDType(BatchDTypeName(options.dtype)).status());
  // Options are checked before any CUDA driver is touched.
  if (!(options.decode.cpu_share >= 0 && options.decode.cpu_share <= 1)) {
    std::ostringstream share;
    share << options.decode.cpu_share;
    return ConfigError("cpu_decode_share is " + share.str() + ": expected a share from 0 to 1");
  }
  std::optional<internal::GpuSetup> gpu;
  if (options.device == BatchDevice::kCuda) {
    ZS_ASSIGN_OR_RETURN(gpu, internal::SetUpGpu(options));
  }
  ZS_ASSIGN_OR_RETURN(const CudaDriver* pin, internal::PinningDriver(options));
  ZS_ASSIGN_OR_RETURN(Dataset dataset, internal::OpenDataset(url, options));
  // Started before the geometry: detecting missing dates reads chunks on it.
  ZS_ASSIGN_OR_RETURN(std::shared_ptr<ThreadPool> pool, internal::StartWorkers(options));
  ZS_ASSIGN_OR_RETURN(LoaderGeometry geometry, MakeLoaderGeometry(dataset, options, pool.get()));
  const ShuffleMode shuffle = options.shuffle;
  ZS_ASSIGN_OR_RETURN(SamplePlan plan,
                      internal::MakeSamplePlan(dataset, geometry, options, shuffle));
  auto state = std::make_unique<LoaderState>(options, std::move(dataset), std::move(geometry),
                                             std::move(plan));
  state->context.pool = std::move(pool);
  ZS_RETURN_IF_ERROR(internal::AssembleParts(*state, pin, std::move(gpu)));
  state->estimated_amplification = state->plan.EstimateReads(shuffle).read_amplification;
  state->estimated_amplification_exact =
      state->plan.EstimateReads(ShuffleMode::kExact).read_amplification;
  return Loader(std::move(state));
}

namespace internal {
namespace {

// `geometry`'s missing steps as labels of `dataset`'s time coordinate.
Result<std::vector<std::string>> MissingDateLabels(const Dataset& dataset,
                                                   const LoaderGeometry& geometry) {
  std::vector<std::string> labels;
  if (geometry.missing_steps.empty()) return labels;
  ZS_ASSIGN_OR_RETURN(Coordinate coordinate,
                      dataset.LoadCoordinate(geometry.dims[*geometry.time_dim]));
  for (uint64_t t : geometry.missing_steps) labels.push_back(coordinate.FormatLabel(t));
  return labels;
}

}  // namespace
}  // namespace internal

Result<std::vector<std::string>> DetectMissingDates(std::string_view url,
                                                    const LoaderOptions& options) {
  LoaderOptions detect = options;
  detect.detect_missing_dates = true;
  detect.missing_dates.clear();
  ZS_ASSIGN_OR_RETURN(Dataset dataset, internal::OpenDataset(url, options));
  ZS_ASSIGN_OR_RETURN(std::shared_ptr<ThreadPool> pool, internal::StartWorkers(detect));
  ZS_ASSIGN_OR_RETURN(LoaderGeometry geometry, MakeLoaderGeometry(dataset, detect, pool.get()));
  return internal::MissingDateLabels(dataset, geometry);
}

Loader::Loader(std::unique_ptr<LoaderState> state) : state_(std::move(state)) {}
Loader::Loader(Loader&&) noexcept = default;
Loader& Loader::operator=(Loader&&) noexcept = default;
Loader::~Loader() {
  // In a fork()ed child the pipeline's threads are gone (and may hold its locks): stopping it
  // would wait for them forever.
  if (state_ && state_->fork_generation != ForkGeneration()) (void)state_.release();
}

Status Loader::CheckProcess() const {
  if (state_->fork_generation == ForkGeneration()) return Status::Ok();
  return ConfigError(
      "this loader of " + state_->dataset.url() + " was opened in process " +
      std::to_string(state_->pid) + ", and this is a fork()ed child of it (process " +
      std::to_string(getpid()) +
      "): the loader's threads did not come with the fork, so it cannot make batches here. Open "
      "the loader in the process that iterates it (or iterate it in the parent: with "
      "num_workers=0, a DataLoader runs it in its own threads)");
}

Result<std::optional<std::shared_ptr<const Batch>>> Loader::Next() {
  return Next(std::function<bool()>());
}

Result<std::optional<std::shared_ptr<const Batch>>> Loader::Next(
    const std::function<bool()>& interrupted) {
  using Delivery = std::optional<std::shared_ptr<const Batch>>;
  ZS_RETURN_IF_ERROR(CheckProcess());
  LoaderState& s = *state_;
  std::lock_guard<std::mutex> turn(s.consumer_turn);
  {
    std::lock_guard<std::mutex> position(s.position_mutex);
    if (s.returned) {
      s.CountDelivered(*s.returned);
      return Delivery(std::move(s.returned));
    }
  }
  if (s.delivered >= s.plan.num_batches()) return Delivery();
  if (!s.pipeline) ZS_RETURN_IF_ERROR(s.StartPipeline());
  internal::StageSpan wait(s.context.timeline, "wait", s.plan.epoch(), s.delivered);
  std::optional<Result<std::shared_ptr<Batch>>> batch = s.pipeline->Take(interrupted);
  if (!batch) return Delivery();
  const double waited = internal::Seconds(wait.End() - wait.start());
  std::lock_guard<std::mutex> position(s.position_mutex);
  LoaderStats& st = s.delivered_stats;
  st.wait_seconds += waited;
  const auto micros = static_cast<uint64_t>(waited * 1e6);
  size_t bucket = 0;
  while (bucket + 1 < LoaderStats::kWaitBuckets && (uint64_t{2} << bucket) <= micros) ++bucket;
  ++st.wait_histogram[bucket];
  if (!batch->ok()) {
    ++s.delivered;  // a failed batch counts as delivered: the pipeline goes on after it
    return std::move(*batch).status();
  }
  s.CountDelivered(***batch);
  return Delivery(std::move(**batch));
}

bool Loader::PutBack(std::shared_ptr<const Batch> batch) {
  if (!CheckProcess().ok()) return false;
  LoaderState& s = *state_;
  std::lock_guard<std::mutex> turn(s.consumer_turn);
  std::lock_guard<std::mutex> position(s.position_mutex);
  if (!batch || s.returned || s.delivered == 0 || batch->epoch() != s.plan.epoch() ||
      batch->index() + 1 != s.delivered) {
    return false;
  }
  s.CountDelivered(*batch, /*taken_back=*/true);
  s.returned = std::move(batch);
  return true;
}

void Loader::SetPrefetch(size_t prefetch) {
  if (!CheckProcess().ok()) return;
  std::lock_guard<std::mutex> turn(state_->consumer_turn);
  state_->SetPrefetch(prefetch);
}

size_t Loader::prefetch() const { return state_->context.prefetch.load(); }

void Loader::SetEpoch(uint64_t epoch) {
  if (!CheckProcess().ok()) return;
  std::lock_guard<std::mutex> turn(state_->consumer_turn);
  state_->SetEpoch(epoch);
}

void Loader::StartNextEpoch() {
  if (!CheckProcess().ok()) return;
  std::lock_guard<std::mutex> turn(state_->consumer_turn);
  state_->SetEpoch(state_->plan.epoch() + 1);  // in one turn: two callers start two epochs
}

uint64_t Loader::epoch() const {
  std::lock_guard<std::mutex> position(state_->position_mutex);
  return state_->plan.epoch();
}
uint64_t Loader::next_batch() const {
  std::lock_guard<std::mutex> position(state_->position_mutex);
  return state_->delivered;
}
uint64_t Loader::num_batches() const {
  std::lock_guard<std::mutex> position(state_->position_mutex);
  return state_->plan.num_batches();
}
uint64_t Loader::num_samples() const {
  std::lock_guard<std::mutex> position(state_->position_mutex);
  return state_->plan.num_samples();
}

std::string Loader::StateJson() const {
  std::lock_guard<std::mutex> position(state_->position_mutex);
  SamplePlanState state = state_->plan.State();
  state.next_batch = state_->delivered;
  return state.ToJson();
}

Status Loader::RestoreStateJson(std::string_view json) {
  ZS_RETURN_IF_ERROR(CheckProcess());
  ZS_ASSIGN_OR_RETURN(SamplePlanState state, SamplePlanState::FromJson(json));
  LoaderState& s = *state_;
  std::lock_guard<std::mutex> turn(s.consumer_turn);
  s.StopPipeline();
  std::lock_guard<std::mutex> position(s.position_mutex);
  ZS_RETURN_IF_ERROR(s.plan.Restore(state));
  s.delivered = state.next_batch;
  s.returned.reset();
  return Status::Ok();
}

const std::vector<std::string>& Loader::input_channels() const {
  return state_->geometry.input_names;
}
const std::vector<std::string>& Loader::target_channels() const {
  return state_->geometry.target_names;
}
const std::vector<std::string>& Loader::sample_dims() const { return state_->geometry.sample_dims; }
const std::vector<std::string>& Loader::spatial_dims() const {
  return state_->geometry.spatial_dims;
}
const LoaderOptions& Loader::options() const { return state_->options; }
const std::vector<StoreIdentity>& Loader::dataset_identity() const {
  return state_->dataset.store_identities();
}
Result<std::vector<std::string>> Loader::missing_dates() const {
  return internal::MissingDateLabels(state_->dataset, state_->geometry);
}
bool Loader::pinned() const { return state_->context.host_memory->pinned(); }
size_t Loader::num_threads() const { return state_->context.pool->num_threads(); }

void Loader::SetConsumerStream(void* stream) {
  if (state_->gpu) state_->gpu->SetConsumerStream(stream);
}

std::string Loader::gpu_decode_status() const {
  return state_->gpu ? state_->gpu->nvcomp_status() : "batches are made on the CPU";
}
std::vector<TimelineSpan> Loader::Timeline() const { return state_->context.timeline.Spans(); }

std::vector<int64_t> Loader::input_shape() const {
  const LoaderGeometry& g = state_->geometry;
  std::vector<int64_t> shape = {static_cast<int64_t>(state_->options.batch_size),
                                static_cast<int64_t>(g.input_channels)};
  for (uint64_t s : g.spatial_shape) shape.push_back(static_cast<int64_t>(s));
  return shape;
}

std::vector<int64_t> Loader::target_shape() const {
  const LoaderGeometry& g = state_->geometry;
  if (g.target_slabs.empty()) return {};
  std::vector<int64_t> shape = {static_cast<int64_t>(state_->options.batch_size),
                                static_cast<int64_t>(g.target_slabs.size())};
  for (uint64_t s : g.spatial_shape) shape.push_back(static_cast<int64_t>(s));
  return shape;
}

LoaderStats Loader::stats() const {
  const LoaderState& s = *state_;
  const internal::LoaderCounters& counters = s.context.counters;
  const ChunkReadCounters& reads = s.context.read_counters;
  LoaderStats st;
  {
    std::lock_guard<std::mutex> position(s.position_mutex);
    st = s.delivered_stats;
  }
  st.cache_hits = counters.cache_hits;
  st.chunks_decoded = reads.chunks;
  st.chunk_refs = counters.chunk_refs;
  st.bytes_used = counters.bytes_used;
  st.batch_blocks = s.gpu ? s.gpu->batch_blocks() : s.context.host_memory->blocks();
  st.missing_chunks = reads.missing_chunks;
  st.requests = reads.requests;
  st.bytes_read = reads.bytes_read;
  st.bytes_decoded = counters.bytes_decoded;
  st.plan_seconds = static_cast<double>(counters.plan_ns) * 1e-9;
  st.read_decode_seconds = static_cast<double>(counters.read_decode_ns) * 1e-9;
  st.assemble_seconds = static_cast<double>(counters.assemble_ns) * 1e-9;
  st.gpu_decoded_chunks = counters.gpu_decoded_chunks;
  st.gpu_rejected_chunks = counters.gpu_rejected_chunks;
  st.bytes_to_gpu = counters.bytes_to_gpu;
  st.bytes_staged_without_copy = counters.bytes_staged_without_copy;
  st.gpu_seconds = static_cast<double>(counters.gpu_ns) * 1e-9;
  st.gpu_read_seconds = static_cast<double>(counters.gpu_read_ns) * 1e-9;
  st.gpu_decode_seconds = static_cast<double>(counters.gpu_decode_ns) * 1e-9;
  st.gpu_scatter_seconds = static_cast<double>(counters.gpu_scatter_ns) * 1e-9;
  if (s.gpu && s.gpu->decodes_with_nvcomp()) {
    st.cpu_decode_share =
        s.gpu->gave_up_nvcomp()
            ? 1.0
            : CurrentDecodeShare(s.decode_share.get(), s.options.decode.cpu_share).share;
  }
  st.missing_date_samples = s.plan.num_missing_samples();
  st.estimated_read_amplification = s.estimated_amplification;
  st.estimated_read_amplification_exact = s.estimated_amplification_exact;
  if (s.plan.options().shuffle == ShuffleMode::kBlock)
    st.block_chunks = s.plan.options().block_chunks;
  std::set<const Store*> stores;
  for (const internal::ArrayState* array : s.geometry.arrays) stores.insert(array->store.get());
  for (const Store* store : stores) {
    const StoreMetrics* metrics = MetricsOf(*store);
    if (metrics == nullptr) continue;
    const StoreMetricsSnapshot m = metrics->Snapshot();
    st.retries += m.retries;
    st.failed_requests += m.failed_requests;
    st.request_latency_histogram.resize(m.latency_us_log2.size(), 0);
    for (size_t b = 0; b < m.latency_us_log2.size(); ++b) {
      st.request_latency_histogram[b] += m.latency_us_log2[b];
    }
  }
  return st;
}

}  // namespace zarrstream

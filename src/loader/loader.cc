// The loader's pipeline on the CPU (DESIGN.md §2): plan → read + decode → assemble, `prefetch`
// batches ahead of the consumer.
//
// Coordinating threads (one per batch in flight, at most `prefetch`) each take the next batch
// index, plan it (SamplePlan → BatchReadPlan), serve what they can from the chunk cache and read
// the rest in waves: a wave's chunks are read and decoded by ReadChunks on the loader's pool, then
// copied into the batch by pool tasks (one per chunk, all its copies), and the wave's buffers go
// to the cache. Waves bound the decoded bytes a batch holds at once (kWaveBytes, at least two
// chunks per worker), whatever the batch's size: an ERA5 0.25° batch of 16 samples needs ~9 GB of
// chunks, which never sit in memory together. Batches are delivered in order; a failed batch is
// delivered as its error in its place. Past an epoch's last batch the coordinators go on with the
// next epoch's first batches (its order is known), which Loader::SetEpoch(epoch + 1) keeps: a
// training loop's next epoch does not start with an empty pipeline.
//
// Memory bound (what the loader holds, beyond the consumer's batches): the chunk cache
// (cache_bytes), per batch in flight one wave (≤ kWaveBytes or two chunks per worker), idle decode
// buffers kept for reuse (at most as much again as those two) and the batch buffers (prefetch + 2
// batches, recycled through a pool).
#include "zarrstream/loader.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <new>
#include <numeric>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include "array/chunk_reader.h"
#include "gpu/cuda_driver.h"
#include "gpu/gpu_decoder.h"
#include "gpu/gpu_kernels.h"
#include "gpu/nvcomp.h"
#include "loader/batch_assembly.h"
#include "loader/channel_spec.h"
#include "loader/chunk_cache.h"
#include "loader/decode_share.h"
#include "loader/gpu_assembly.h"
#include "loader/read_plan.h"
#include "loader/sample_plan.h"
#include "store/http_store.h"
#include "store/store_metrics.h"
#include "util/checked_size.h"
#include "util/format.h"
#include "util/nvtx_range.h"
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

namespace {

// What GPU batches on one device are made with: its driver instance and kernels.
struct GpuDevice {
  const CudaDriver* driver;
  const GpuKernels* kernels;
};

// Device `cuda_device`'s (making its context), or why GPU batches cannot be made there.
Result<GpuDevice> OpenGpuDevice(int cuda_device) {
  ZS_ASSIGN_OR_RETURN(const CudaDriver* driver, CudaDriver::ForDevice(cuda_device));
  ZS_ASSIGN_OR_RETURN(const GpuKernels* kernels, GpuKernels::ForDevice(driver));
  return GpuDevice{driver, kernels};
}

}  // namespace

std::string GpuBatchesUnavailableReason(int cuda_device) {
  Result<GpuDevice> device = OpenGpuDevice(cuda_device);
  return device.ok() ? std::string() : device.status().message();
}

namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }
uint64_t Nanoseconds(Clock::duration d) {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(d).count());
}

// Decoded bytes one batch in flight reads at once (see the overview).
constexpr uint64_t kWaveBytes = uint64_t{256} << 20;
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

constexpr size_t kAlignment = 64;

uint64_t AlignUp(uint64_t n) { return (n + kAlignment - 1) / kAlignment * kAlignment; }

// Recycles the one allocation behind each batch's tensors. Batches may outlive the loader: they
// hold the pool by shared_ptr. With `pin` the blocks are whole pages, page-locked for the GPU
// (registered once, when allocated, and unregistered when freed).
class BatchMemoryPool : public std::enable_shared_from_this<BatchMemoryPool> {
 public:
  BatchMemoryPool(uint64_t bytes, size_t max_free, const CudaDriver* pin)
      : bytes_(pin ? (bytes + kPageBytes - 1) / kPageBytes * kPageBytes : bytes),
        alignment_(std::align_val_t{pin ? kPageBytes : kAlignment}),
        max_free_(max_free),
        pin_(pin) {}
  ~BatchMemoryPool() {
    for (std::byte* p : free_) Free(p);
  }

  bool pinned() const { return pin_ != nullptr; }

  Result<std::shared_ptr<void>> Acquire() {
    std::byte* block = nullptr;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!free_.empty()) {
        block = free_.back();
        free_.pop_back();
      }
    }
    if (block == nullptr) {
      block = static_cast<std::byte*>(::operator new(bytes_, alignment_));
      if (pin_ != nullptr) {
        if (Status status = pin_->RegisterHost(block, bytes_); !status.ok()) {
          ::operator delete(block, alignment_);
          return status;
        }
      }
    }
    std::shared_ptr<BatchMemoryPool> self = shared_from_this();
    return std::shared_ptr<void>(block,
                                 [self](void* p) { self->Return(static_cast<std::byte*>(p)); });
  }

 private:
  static constexpr uint64_t kPageBytes = 4096;

  void Free(std::byte* p) const {
    if (pin_ != nullptr) (void)pin_->UnregisterHost(p);  // nothing to do about a failure here
    ::operator delete(p, alignment_);
  }
  void Return(std::byte* p) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (free_.size() < max_free_) {
        free_.push_back(p);
        return;
      }
    }
    Free(p);
  }

  const uint64_t bytes_;
  const std::align_val_t alignment_;
  const size_t max_free_;
  const CudaDriver* const pin_;
  std::mutex mutex_;
  std::vector<std::byte*> free_;
};

}  // namespace

namespace internal {

struct BatchAccess {
  static std::shared_ptr<Batch> Make() { return std::shared_ptr<Batch>(new Batch()); }
  static Batch& Mutable(Batch& b) { return b; }
  static uint64_t& epoch(Batch& b) { return b.epoch_; }
  static uint64_t& index(Batch& b) { return b.index_; }
  static uint64_t& num_padding(Batch& b) { return b.num_padding_; }
  static uint64_t& num_skipped(Batch& b) { return b.num_skipped_; }
  static std::vector<uint64_t>& sample_ids(Batch& b) { return b.sample_ids_; }
  static BatchDType& dtype(Batch& b) { return b.dtype_; }
  static BatchDevice& device(Batch& b) { return b.device_; }
  static int& cuda_device(Batch& b) { return b.cuda_device_; }
  static BatchTensor& input(Batch& b) { return b.input_; }
  static BatchTensor& target(Batch& b) { return b.target_; }
  static BatchTensor& input_mask(Batch& b) { return b.input_mask_; }
  static BatchTensor& target_mask(Batch& b) { return b.target_mask_; }
  static BatchTensor& origins(Batch& b) { return b.origins_; }
  static std::shared_ptr<void>& storage(Batch& b) { return b.storage_; }
};

struct LoaderCounters {
  std::atomic<uint64_t> cache_hits{0};
  std::atomic<uint64_t> bytes_decoded{0};
  std::atomic<uint64_t> chunk_refs{0};
  std::atomic<uint64_t> bytes_used{0};
  std::atomic<uint64_t> plan_ns{0};
  std::atomic<uint64_t> read_decode_ns{0};
  std::atomic<uint64_t> assemble_ns{0};
  std::atomic<uint64_t> gpu_decoded_chunks{0};
  std::atomic<uint64_t> gpu_rejected_chunks{0};
  std::atomic<uint64_t> bytes_to_gpu{0};
  std::atomic<uint64_t> gpu_ns{0};
  std::atomic<uint64_t> gpu_read_ns{0};
  std::atomic<uint64_t> gpu_decode_ns{0};
  std::atomic<uint64_t> gpu_scatter_ns{0};
};

// The GPU side of a loader with device kCuda (see loader.h): the CUDA pieces, each array's GPU
// decode (null: the CPU decodes its chunks), the device memory batches live in and the decode
// workspaces of the batches in flight (one each, reused).
struct GpuLoaderState {
  const CudaDriver* driver = nullptr;
  const GpuKernels* kernels = nullptr;
  const Nvcomp* nvcomp = nullptr;  // null: compressed chunks decode on the CPU
  std::string nvcomp_status;
  std::vector<std::optional<GpuChunkCodec>> codecs;  // per LoaderGeometry::arrays
  uint64_t max_chunk_bytes = 0;                      // the largest decoded chunk of any array
  bool any_blosc = false;                            // some array's chunks unshuffle on the GPU
  std::shared_ptr<DeviceBatchPool> batches;
  uint64_t batch_bytes = 0;  // device bytes of a batch: input, target, masks

  std::mutex mutex;
  std::vector<std::unique_ptr<GpuDecodeWorkspace>> idle;

  Result<std::unique_ptr<GpuDecodeWorkspace>> TakeWorkspace() {
    {
      std::lock_guard<std::mutex> lock(mutex);
      if (!idle.empty()) {
        std::unique_ptr<GpuDecodeWorkspace> w = std::move(idle.back());
        idle.pop_back();
        return w;
      }
    }
    return GpuDecodeWorkspace::Create(driver, nvcomp);
  }
  void ReturnWorkspace(std::unique_ptr<GpuDecodeWorkspace> w) {
    std::lock_guard<std::mutex> lock(mutex);
    idle.push_back(std::move(w));
  }
};

// Decoded bytes a GPU wave holds by default (LoaderOptions::gpu_wave_bytes).
constexpr uint64_t kGpuWaveBytes = uint64_t{1} << 30;

class Pipeline;

// Coordinating threads: one per batch in flight, at most 4 (more add memory, not speed).
size_t NumCoordinators(const LoaderOptions& options) {
  return std::min<size_t>(std::max<size_t>(options.prefetch, 1), 4);
}

// Decoded-chunk buffers kept idle for reuse: as many bytes as the cache and the waves in flight
// hold at most, so that a steady state of misses reuses every buffer instead of faulting in fresh
// pages (which cost as much as a fifth of the loader's CPU time).
uint64_t IdleChunkBytes(const LoaderOptions& options) {
  const uint64_t cache = CacheBytes(options);
  return cache + NumCoordinators(options) * kWaveBytes;
}

// LoaderOptions::record_timeline: spans of the pipeline's stages, bounded. Thread-safe.
class TimelineRecorder {
 public:
  explicit TimelineRecorder(bool enabled) : enabled_(enabled), origin_(Clock::now()) {}

  void Add(const char* stage, uint64_t epoch, uint64_t batch, Clock::time_point start,
           Clock::time_point end) {
    if (!enabled_) return;
    std::lock_guard<std::mutex> lock(mutex_);
    if (spans_.size() >= kMaxTimelineSpans) return;
    auto [it, added] =
        threads_.try_emplace(std::this_thread::get_id(), static_cast<uint32_t>(threads_.size()));
    spans_.push_back(TimelineSpan{stage, epoch, batch, it->second,
                                  std::chrono::duration<double>(start - origin_).count(),
                                  std::chrono::duration<double>(end - origin_).count()});
  }

  std::vector<TimelineSpan> Spans() const {
    std::vector<TimelineSpan> spans;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      spans = spans_;
    }
    std::stable_sort(spans.begin(), spans.end(), [](const TimelineSpan& a, const TimelineSpan& b) {
      return a.start_seconds < b.start_seconds;
    });
    return spans;
  }

 private:
  const bool enabled_;
  const Clock::time_point origin_;
  mutable std::mutex mutex_;
  std::vector<TimelineSpan> spans_;
  std::map<std::thread::id, uint32_t> threads_;
};

// One stage of one batch, from construction to End(): a span on the timeline (when recorded) and
// an NVTX range for Nsight Systems. The destructor ends it where End was not called (an error left
// the stage early).
class StageSpan {
 public:
  StageSpan(TimelineRecorder& timeline, const char* stage, uint64_t epoch, uint64_t batch,
            Clock::time_point start = Clock::now())
      : timeline_(timeline),
        stage_(stage),
        epoch_(epoch),
        batch_(batch),
        start_(start),
        range_(stage, batch) {}
  ~StageSpan() { End(); }
  StageSpan(const StageSpan&) = delete;
  StageSpan& operator=(const StageSpan&) = delete;

  Clock::time_point start() const { return start_; }
  // Ends the stage (once) and returns its end; its length is End() - start().
  Clock::time_point End() {
    if (!ended_) {
      end_ = Clock::now();
      ended_ = true;
      range_.End();
      timeline_.Add(stage_, epoch_, batch_, start_, end_);
    }
    return end_;
  }

 private:
  TimelineRecorder& timeline_;
  const char* stage_;
  uint64_t epoch_, batch_;
  Clock::time_point start_, end_;
  bool ended_ = false;
  NvtxRange range_;
};

struct LoaderState {
  LoaderOptions options;
  Dataset dataset;
  LoaderGeometry geometry;
  SamplePlan plan;
  uint64_t delivered = 0;  // batches of plan.epoch() delivered

  std::shared_ptr<ThreadPool> pool;
  ChunkCache cache;
  ShardIndexCache index_cache;
  ChunkReadCounters read_counters;
  LoaderCounters counters;
  std::shared_ptr<BatchMemoryPool> batch_memory;
  TimelineRecorder timeline;
  // Per array: element strides of its read chunk (C order).
  std::vector<std::vector<uint64_t>> chunk_shapes;
  // Per channel: element strides of a slab along each array dimension.
  std::vector<DimArray> slab_strides;
  // Tensor byte offsets inside a batch's allocation.
  uint64_t input_offset = 0, target_offset = 0, input_mask_offset = 0, target_mask_offset = 0,
           origins_offset = 0, batch_bytes = 0;

  // Delivered-batch statistics (the consumer's thread only).
  LoaderStats delivered_stats;
  double estimated_amplification = 0, estimated_amplification_exact = 0;

  std::unique_ptr<GpuLoaderState> gpu;  // device kCuda only
  // GPU batches with adapt_cpu_decode_share: the share a batch's production starts with.
  std::unique_ptr<DecodeShareController> decode_share;

  std::unique_ptr<Pipeline> pipeline;

  LoaderState(LoaderOptions o, Dataset d, LoaderGeometry g, SamplePlan p)
      : options(std::move(o)),
        dataset(std::move(d)),
        geometry(std::move(g)),
        plan(std::move(p)),
        cache(CacheBytes(options), IdleChunkBytes(options)),
        timeline(options.record_timeline) {}
  ~LoaderState();

  void StopPipeline();
  // Batch `index` of `epoch_plan`'s epoch (the pipeline's copy of the plan: `plan` above may have
  // moved on to another epoch); GPU batches with `cpu_share` of nvCOMP's chunks decoded by the
  // worker threads.
  Result<std::shared_ptr<Batch>> Produce(const SamplePlan& epoch_plan, uint64_t index,
                                         double cpu_share);
  Result<std::shared_ptr<Batch>> ProduceOnGpu(const SamplePlan& epoch_plan, uint64_t index,
                                              double cpu_share);
  // The share of nvCOMP's chunks the worker threads decode in a batch whose production starts
  // now, and the decode_share generation it belongs to.
  DecodeShareController::Setting CpuDecodeShare() const {
    return decode_share ? decode_share->Current()
                        : DecodeShareController::Setting{options.cpu_decode_share, 0};
  }
  // `error`, and where the GPU ran out of memory, what this loader holds there and what lowers it.
  Status ExplainGpuMemory(Status error) const;
  Result<std::shared_ptr<Batch>> AllocateBatch(size_t samples) const;
  // The batch tensors (input, target, masks) at `base`, in the layout of the offsets above.
  void LayOutTensors(Batch& b, std::byte* base, size_t samples) const;
  void SetOrigins(Batch& b, std::byte* base, size_t samples) const;
  // A planned batch's position and origins, and the plan stage's accounting.
  void FinishPlanning(Batch& b, uint64_t epoch, uint64_t index, const SampleBatch& samples,
                      const BatchReadPlan& reads, StageSpan& plan_stage);
  // `error` of a batch, named by its first failed sample.
  Status BatchError(Status error, const std::vector<uint8_t>& bad, const SampleBatch& samples,
                    uint64_t epoch, uint64_t index) const;
  // A GPU batch: tensors in a device block (the first of the pair), origins in host memory.
  Result<std::pair<std::shared_ptr<Batch>, DeviceBatchPool::Block>> AllocateGpuBatch(
      size_t samples) const;

  // Where a planned copy lands in batch `b` (host or device memory alike): its slab's first
  // element, its NaN mask (null without fill_nan), the channel's transform and slab strides.
  struct CopyTarget {
    std::byte* slab = nullptr;
    uint8_t* mask = nullptr;
    SlabTransform transform;
    const DimArray* strides = nullptr;
  };
  CopyTarget TargetOf(Batch& b, const PlannedCopy& copy) const;
};

LoaderState::CopyTarget LoaderState::TargetOf(Batch& b, const PlannedCopy& copy) const {
  const LoaderGeometry& g = geometry;
  const Slab& slab = copy.target ? g.target_slabs[copy.slab] : g.input_slabs[copy.slab];
  const uint64_t channels = copy.target ? g.target_slabs.size() : g.input_slabs.size();
  const uint64_t slab_index = copy.sample * channels + slab.out_channel;
  const BatchTensor& out = copy.target ? BatchAccess::target(b) : BatchAccess::input(b);
  CopyTarget target;
  target.slab = out.data.data() + slab_index * g.slab_elements * BatchDTypeSize(options.dtype);
  if (options.fill_nan) {
    const BatchTensor& m = copy.target ? BatchAccess::target_mask(b) : BatchAccess::input_mask(b);
    target.mask = reinterpret_cast<uint8_t*>(m.data.data()) + slab_index * g.slab_elements;
  }
  target.transform = SlabTransform{g.mean[slab.channel], g.inv_std[slab.channel], options.fill_nan,
                                   options.nan_fill};
  target.strides = &slab_strides[slab.channel];
  return target;
}

// The batches of an epoch from `first` on, produced by coordinating threads and handed out in
// order (see the overview); past the epoch's last batch it goes on into the next epoch, whose
// order (seed, epoch + 1) is known, so that a training loop's next epoch starts with its first
// batches ready. AdvanceEpoch moves delivery on to them; anything else (another epoch, a restored
// state) discards the pipeline. Batches are numbered by slot: the epoch's from `first`, then the
// next epoch's from 0.
class Pipeline {
 public:
  Pipeline(LoaderState& state, const SamplePlan& plan, uint64_t first) : state_(state) {
    epochs_.push_back(std::make_unique<EpochBatches>(plan, first, 0));
    AddNextEpoch();
    next_claim_ = next_deliver_ = 0;
    for (size_t i = 0; i < NumCoordinators(state.options); ++i) {
      drivers_.emplace_back([this] { Drive(); });
    }
  }
  ~Pipeline() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    cv_.notify_all();
    for (std::thread& t : drivers_) t.join();
  }

  // After the current epoch's last batch: delivery goes on with epoch `epoch` if it is the one
  // produced ahead (true), and production with the epoch after it.
  bool AdvanceEpoch(uint64_t epoch) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (epochs_.size() < 2 || epochs_[1]->plan.epoch() != epoch ||
        next_deliver_ != epochs_.front()->end_slot()) {
      return false;
    }
    epochs_.pop_front();  // every batch of it was delivered: no driver uses its plan
    AddNextEpoch();
    cv_.notify_all();
    return true;
  }

  // The next batch in order; waits for it. The consumer's thread only. With an adaptive decode
  // share, tells it how long the consumer waited and how long since it last asked.
  Result<std::shared_ptr<Batch>> Take() {
    const std::optional<Clock::time_point> asked =
        state_.decode_share ? std::optional(Clock::now()) : std::nullopt;
    std::unique_lock<std::mutex> lock(mutex_);
    const bool was_ready = ready_.count(next_deliver_) > 0;
    cv_.wait(lock, [&] { return ready_.count(next_deliver_) > 0; });
    auto node = ready_.extract(next_deliver_);
    ++next_deliver_;
    lock.unlock();
    cv_.notify_all();
    Produced& produced = node.mapped();
    // A pipeline's first batch is waited for while it fills, whatever the share: not counted.
    if (asked && produced.batch.ok() && previous_ask_) {
      const double waited = was_ready ? 0 : Seconds(Clock::now() - *asked);
      state_.decode_share->Observe(produced.share_generation, waited,
                                   Seconds(*asked - *previous_ask_));
    }
    previous_ask_ = asked;
    return std::move(produced.batch);
  }

 private:
  // One epoch's batches [first, plan.num_batches()) at slots [slot_begin, end_slot()).
  struct EpochBatches {
    EpochBatches(const SamplePlan& p, uint64_t f, uint64_t s) : plan(p), first(f), slot_begin(s) {}
    uint64_t end_slot() const { return slot_begin + plan.num_batches() - first; }
    SamplePlan plan;  // a copy: the loader's own may move to another epoch meanwhile
    uint64_t first;
    uint64_t slot_begin;
  };

  // Under mutex_ (or before the drivers start).
  void AddNextEpoch() {
    const EpochBatches& last = *epochs_.back();
    auto next = std::make_unique<EpochBatches>(last.plan, 0, last.end_slot());
    next->plan.SetEpoch(last.plan.epoch() + 1);
    epochs_.push_back(std::move(next));
  }

  void Drive() {
    const uint64_t prefetch = std::max<size_t>(state_.options.prefetch, 1);
    for (;;) {
      const EpochBatches* epoch = nullptr;
      uint64_t slot = 0;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        // Never further than the epoch after the one being delivered.
        cv_.wait(lock, [&] {
          return stopping_ || (next_claim_ < next_deliver_ + prefetch &&
                               next_claim_ < epochs_.back()->end_slot());
        });
        if (stopping_) return;
        slot = next_claim_++;
        for (const auto& e : epochs_) {
          if (slot < e->end_slot()) {
            epoch = e.get();
            break;
          }
        }
      }
      const uint64_t index = epoch->first + (slot - epoch->slot_begin);
      const DecodeShareController::Setting share = state_.CpuDecodeShare();
      Result<std::shared_ptr<Batch>> batch = state_.Produce(epoch->plan, index, share.share);
      {
        std::lock_guard<std::mutex> lock(mutex_);
        ready_.emplace(slot, Produced{std::move(batch), share.generation});
      }
      cv_.notify_all();
    }
  }

  LoaderState& state_;
  std::mutex mutex_;
  std::condition_variable cv_;
  // The epoch being delivered, then the one produced ahead. Elements never move (pointers), and
  // one is dropped only once all its batches are delivered.
  std::deque<std::unique_ptr<EpochBatches>> epochs_;
  uint64_t next_claim_ = 0;
  uint64_t next_deliver_ = 0;
  bool stopping_ = false;
  struct Produced {
    Result<std::shared_ptr<Batch>> batch;
    uint64_t share_generation;  // of the decode share it was produced with
  };
  std::map<uint64_t, Produced> ready_;
  std::vector<std::thread> drivers_;
  std::optional<Clock::time_point> previous_ask_;  // the consumer's previous Take
};

LoaderState::~LoaderState() { StopPipeline(); }

void LoaderState::StopPipeline() { pipeline.reset(); }

Result<std::pair<std::shared_ptr<Batch>, DeviceBatchPool::Block>> LoaderState::AllocateGpuBatch(
    size_t samples) const {
  std::shared_ptr<Batch> batch = BatchAccess::Make();
  Batch& b = *batch;
  ZS_ASSIGN_OR_RETURN(auto device, gpu->batches->Acquire());
  ZS_ASSIGN_OR_RETURN(std::shared_ptr<void> host, batch_memory->Acquire());
  // One handle keeps both: the device block returns to its pool when the batch goes.
  auto both = std::make_shared<std::pair<std::shared_ptr<void>, std::shared_ptr<void>>>(
      std::move(device.second), host);
  BatchAccess::storage(b) = both;
  LayOutTensors(b, reinterpret_cast<std::byte*>(device.first.address), samples);
  BatchAccess::device(b) = BatchDevice::kCuda;
  BatchAccess::cuda_device(b) = options.cuda_device;
  SetOrigins(b, static_cast<std::byte*>(host.get()), samples);
  return std::make_pair(std::move(batch), device.first);
}

void LoaderState::LayOutTensors(Batch& b, std::byte* base, size_t samples) const {
  const LoaderGeometry& g = geometry;
  const uint64_t element = BatchDTypeSize(options.dtype);
  auto tensor = [&](uint64_t offset, uint64_t channels, uint64_t item) {
    BatchTensor t;
    t.shape.push_back(static_cast<int64_t>(samples));
    t.shape.push_back(static_cast<int64_t>(channels));
    for (uint64_t s : g.spatial_shape) t.shape.push_back(static_cast<int64_t>(s));
    t.data = std::span<std::byte>(base + offset, samples * channels * g.slab_elements * item);
    return t;
  };
  BatchAccess::dtype(b) = options.dtype;
  BatchAccess::input(b) = tensor(input_offset, g.input_slabs.size(), element);
  if (!g.target_slabs.empty()) {
    BatchAccess::target(b) = tensor(target_offset, g.target_slabs.size(), element);
  }
  if (options.fill_nan) {
    BatchAccess::input_mask(b) = tensor(input_mask_offset, g.input_slabs.size(), 1);
    if (!g.target_slabs.empty()) {
      BatchAccess::target_mask(b) = tensor(target_mask_offset, g.target_slabs.size(), 1);
    }
  }
}

void LoaderState::SetOrigins(Batch& b, std::byte* base, size_t samples) const {
  BatchTensor& origins = BatchAccess::origins(b);
  const size_t dims = geometry.sampled_index.size();
  origins.shape = {static_cast<int64_t>(samples), static_cast<int64_t>(dims)};
  origins.data = std::span<std::byte>(base, samples * dims * sizeof(int64_t));
}

Result<std::shared_ptr<Batch>> LoaderState::AllocateBatch(size_t samples) const {
  std::shared_ptr<Batch> batch = BatchAccess::Make();
  Batch& b = *batch;
  ZS_ASSIGN_OR_RETURN(BatchAccess::storage(b), batch_memory->Acquire());
  auto* base = static_cast<std::byte*>(BatchAccess::storage(b).get());
  LayOutTensors(b, base, samples);
  SetOrigins(b, base + origins_offset, samples);
  return batch;
}

namespace {

// Drops the samples marked in `bad` from every tensor of `batch`, keeping the order of the rest.
// A GPU batch's device tensors move with `move_on_device` (target, source, bytes; never
// overlapping).
void CompactBatch(
    Batch& b, const std::vector<uint8_t>& bad,
    const std::function<void(std::byte*, const std::byte*, size_t)>& move_on_device = nullptr) {
  std::vector<BatchTensor*> tensors = {&BatchAccess::input(b), &BatchAccess::target(b),
                                       &BatchAccess::input_mask(b), &BatchAccess::target_mask(b),
                                       &BatchAccess::origins(b)};
  const size_t n = bad.size();
  std::vector<uint64_t>& ids = BatchAccess::sample_ids(b);
  size_t kept = 0;
  for (size_t s = 0; s < n; ++s) {
    if (bad[s]) continue;
    for (BatchTensor* t : tensors) {
      if (t->shape.empty()) continue;
      const size_t per_sample = t->data.size() / n;
      if (kept == s) continue;
      std::byte* to = t->data.data() + kept * per_sample;
      const std::byte* from = t->data.data() + s * per_sample;
      if (b.device() == BatchDevice::kCuda && t != &BatchAccess::origins(b)) {
        move_on_device(to, from, per_sample);
      } else {
        std::memmove(to, from, per_sample);
      }
    }
    ids[kept] = ids[s];
    ++kept;
  }
  for (BatchTensor* t : tensors) {
    if (t->shape.empty()) continue;
    const size_t per_sample = t->data.size() / n;
    t->shape[0] = static_cast<int64_t>(kept);
    t->data = t->data.first(kept * per_sample);
  }
  ids.resize(kept);
  BatchAccess::num_skipped(b) = n - kept;
  BatchAccess::num_padding(b) = std::min<uint64_t>(BatchAccess::num_padding(b), kept);
}

std::string DescribeSample(const LoaderGeometry& g, std::span<const uint64_t> origin) {
  std::string out = "sample at";
  for (size_t k = 0; k < origin.size(); ++k) {
    out += k == 0 ? " " : ", ";
    out += g.sample_dims[k];
    out += "=";
    out += std::to_string(origin[k]);
  }
  return out;
}

}  // namespace

void LoaderState::FinishPlanning(Batch& b, uint64_t epoch, uint64_t index,
                                 const SampleBatch& samples, const BatchReadPlan& reads,
                                 StageSpan& plan_stage) {
  BatchAccess::epoch(b) = epoch;
  BatchAccess::index(b) = index;
  BatchAccess::num_padding(b) = samples.num_padding;
  BatchAccess::sample_ids(b) = samples.sample_ids;
  auto* origins = reinterpret_cast<int64_t*>(BatchAccess::origins(b).data.data());
  for (size_t i = 0; i < samples.origins.size(); ++i) {
    origins[i] = static_cast<int64_t>(samples.origins[i]);
  }
  counters.chunk_refs += reads.chunk_refs;
  counters.bytes_used += reads.bytes_used;
  counters.plan_ns += Nanoseconds(plan_stage.End() - plan_stage.start());
}

Status LoaderState::BatchError(Status error, const std::vector<uint8_t>& bad,
                               const SampleBatch& samples, uint64_t epoch, uint64_t index) const {
  size_t s = 0;
  while (s < bad.size() && !bad[s]) ++s;
  return std::move(error).WithContext(DescribeSample(geometry, samples.origin(s)) + " of batch " +
                                      std::to_string(index) + " (epoch " + std::to_string(epoch) +
                                      ")");
}

Status LoaderState::ExplainGpuMemory(Status error) const {
  if (error.code() != ErrorCode::kCuda ||
      error.message().find("cuMemAlloc failed: CUDA_ERROR_OUT_OF_MEMORY") == std::string::npos) {
    return error;
  }
  const uint64_t wave = options.gpu_wave_bytes != 0 ? options.gpu_wave_bytes : kGpuWaveBytes;
  const bool decodes = gpu->nvcomp != nullptr;
  return Status(
      error.code(),
      error.message() + ". This loader's GPU memory: up to " +
          std::to_string(options.prefetch + 2) + " batches of " +
          FormatBytes(static_cast<double>(gpu->batch_bytes)) +
          ", and a decode workspace of up to " + (decodes ? "about 5 times" : "about once") +
          " gpu_wave_bytes (" + FormatBytes(static_cast<double>(wave)) + ") for each of the " +
          std::to_string(NumCoordinators(options)) +
          " batches in flight; a smaller prefetch, batch_size or gpu_wave_bytes takes less" +
          (decodes ? ", and so does gpu_decode off (the CPU decodes; one wave per workspace)"
                   : ""));
}

Result<std::shared_ptr<Batch>> LoaderState::Produce(const SamplePlan& epoch_plan, uint64_t index,
                                                    double cpu_share) {
  if (gpu) {
    Result<std::shared_ptr<Batch>> batch = ProduceOnGpu(epoch_plan, index, cpu_share);
    if (!batch.ok()) return ExplainGpuMemory(batch.status());
    return batch;
  }
  const uint64_t epoch = epoch_plan.epoch();
  StageSpan plan_stage(timeline, "plan", epoch, index);
  const LoaderGeometry& g = geometry;
  ZS_ASSIGN_OR_RETURN(SampleBatch samples, epoch_plan.Batch(index));
  BatchReadPlan reads = PlanBatchReads(g, samples);
  ZS_ASSIGN_OR_RETURN(std::shared_ptr<Batch> batch, AllocateBatch(samples.size()));
  Batch& b = *batch;
  FinishPlanning(b, epoch, index, samples, reads, plan_stage);

  std::vector<uint8_t> bad(samples.size(), 0);
  Status first_error;

  // Copies every planned box of chunk `k` (decoded in `bytes`) into the batch.
  auto assemble = [&](size_t k, const std::byte* bytes) {
    const PlannedChunk& chunk = reads.chunks[k];
    const internal::ArrayState& array = *g.arrays[chunk.array];
    for (const PlannedCopy& copy : chunk.copies) {
      const CopyTarget to = TargetOf(b, copy);
      AssembleCopy(bytes, array.metadata.data_type, chunk_shapes[chunk.array], copy, to.slab,
                   options.dtype, *to.strides, to.transform, to.mask);
    }
  };
  // On the pool only: this coordinating thread waits and does not add to the thread budget.
  auto assemble_all =
      [&](const std::vector<std::pair<size_t, std::shared_ptr<const ChunkCache::Entry>>>& ready) {
        if (ready.empty()) return;
        StageSpan stage(timeline, "assemble", epoch, index);
        std::vector<size_t> indices(ready.size());
        std::iota(indices.begin(), indices.end(), size_t{0});
        {
          TaskGroup group(pool.get(), ready.size(), [&](size_t i) {
            assemble(ready[i].first, ready[i].second->bytes.data());
          });
          group.Schedule(indices);
        }  // waits for every copy
        counters.assemble_ns += Nanoseconds(stage.End() - stage.start());
      };
  auto fail = [&](size_t k, Status status) {
    for (const PlannedCopy& copy : reads.chunks[k].copies) bad[copy.sample] = 1;
    if (first_error.ok()) first_error = std::move(status);
  };

  // Reads and decodes chunks `keys` in waves and assembles them; `claimed`: this batch claimed
  // them in the cache, and publishes (or abandons) each.
  auto read_in_waves = [&](const std::vector<size_t>& keys, bool claimed) {
    const uint64_t min_wave_chunks = 2 * pool->num_threads();
    for (size_t begin = 0; begin < keys.size();) {
      std::vector<ChunkRead> wave;
      std::vector<std::shared_ptr<ChunkCache::Entry>> entries;
      std::vector<size_t> wave_keys;  // keys[] of wave[i] (a chunk whose entry failed is not read)
      uint64_t wave_bytes = 0;
      size_t end = begin;
      while (end < keys.size() && (wave.size() < min_wave_chunks || wave_bytes < kWaveBytes)) {
        const size_t k = keys[end++];
        const PlannedChunk& chunk = reads.chunks[k];
        const internal::ArrayState* array = g.arrays[chunk.array];
        const uint64_t bytes = ReadChunkBytes(*array);
        std::shared_ptr<ChunkCache::Entry> entry;
        try {
          entry = cache.Allocate(bytes);
        } catch (const std::bad_alloc&) {
          // This thread must not end with an exception: the chunk's samples fail instead.
          if (claimed) cache.Abandon(chunk.array, chunk.linear);
          fail(k,
               OutOfMemoryFor("a chunk cache entry for a read chunk of shape " +
                                  FormatIndex(array->read_chunk_shape) + " of " + array->Describe(),
                              bytes));
          continue;
        }
        wave_keys.push_back(k);
        ChunkRead read;
        read.array = array;
        read.coords = chunk.coords;
        read.out = entry->bytes.span();
        wave.push_back(std::move(read));
        entries.push_back(std::move(entry));
        wave_bytes += bytes;
      }
      StageSpan stage(timeline, "read+decode", epoch, index);
      ReadChunks(wave, pool.get(), 0, &index_cache, &read_counters);
      counters.read_decode_ns += Nanoseconds(stage.End() - stage.start());
      std::vector<std::pair<size_t, std::shared_ptr<const ChunkCache::Entry>>> decoded;
      for (size_t i = 0; i < wave.size(); ++i) {
        const size_t k = wave_keys[i];
        if (!wave[i].status.ok()) {
          if (claimed) cache.Abandon(reads.chunks[k].array, reads.chunks[k].linear);
          fail(k, std::move(wave[i].status));
          continue;
        }
        entries[i]->missing = wave[i].missing;
        counters.bytes_decoded += entries[i]->bytes.size();
        decoded.emplace_back(k, entries[i]);
        if (claimed) {
          cache.Insert(reads.chunks[k].array, reads.chunks[k].linear, std::move(entries[i]));
        }
      }
      assemble_all(decoded);
      begin = end;
    }
  };

  // Cache hits first, then the misses this batch claimed, in waves, then the chunks other batches
  // in flight were decoding (a chunk whose decode failed there is decoded here, unclaimed, so that
  // its error is this batch's too).
  std::vector<std::pair<size_t, std::shared_ptr<const ChunkCache::Entry>>> hits;
  std::vector<size_t> misses;
  std::vector<std::pair<size_t, std::shared_ptr<ChunkCache::Decode>>> elsewhere;
  for (size_t k = 0; k < reads.chunks.size(); ++k) {
    ChunkCache::Lookup found = cache.FindOrClaim(reads.chunks[k].array, reads.chunks[k].linear);
    if (found.entry) {
      hits.emplace_back(k, std::move(found.entry));
    } else if (found.claimed) {
      misses.push_back(k);
    } else {
      elsewhere.emplace_back(k, std::move(found.decode));
    }
  }
  counters.cache_hits += hits.size();
  assemble_all(hits);
  hits.clear();
  read_in_waves(misses, /*claimed=*/true);
  std::vector<size_t> failed_elsewhere;
  for (auto& [k, decode] : elsewhere) {
    std::shared_ptr<const ChunkCache::Entry> entry = ChunkCache::WaitFor(decode);
    if (entry) {
      hits.emplace_back(k, std::move(entry));
    } else {
      failed_elsewhere.push_back(k);
    }
  }
  counters.cache_hits += hits.size();
  assemble_all(hits);
  hits.clear();
  read_in_waves(failed_elsewhere, /*claimed=*/false);

  if (!first_error.ok()) {
    if (!options.skip_bad_samples) {
      return BatchError(std::move(first_error), bad, samples, epoch, index);
    }
    CompactBatch(b, bad);
  }
  return batch;
}

// The GPU path (see loader.h): the batch's chunks in waves; per wave, stored bytes staged as they
// are read (or decoded on the CPU where the GPU cannot), one copy to the GPU, nvCOMP's batched
// decodes, CPU decodes of what the GPU rejected, and one scatter launch for every box.
Result<std::shared_ptr<Batch>> LoaderState::ProduceOnGpu(const SamplePlan& epoch_plan,
                                                         uint64_t index, double cpu_share) {
  const uint64_t epoch = epoch_plan.epoch();
  StageSpan plan_stage(timeline, "plan", epoch, index);
  const LoaderGeometry& g = geometry;
  GpuLoaderState& gs = *gpu;
  ZS_ASSIGN_OR_RETURN(SampleBatch samples, epoch_plan.Batch(index));
  BatchReadPlan reads = PlanBatchReads(g, samples);
  ZS_ASSIGN_OR_RETURN(auto allocated, AllocateGpuBatch(samples.size()));
  std::shared_ptr<Batch> batch = std::move(allocated.first);
  const DeviceBatchPool::Block block = allocated.second;
  Batch& b = *batch;
  FinishPlanning(b, epoch, index, samples, reads, plan_stage);

  ZS_ASSIGN_OR_RETURN(std::unique_ptr<GpuDecodeWorkspace> workspace, gs.TakeWorkspace());
  GpuDecodeWorkspace& w = *workspace;
  const uint64_t uploaded_before = w.bytes_uploaded();
  const uint64_t decoded_before = w.chunks_decoded();
  // The previous consumer of this batch's memory must be done with it.
  Status status = gs.driver->StreamWaitEvent(w.stream(), block.released);
  std::vector<uint8_t> bad(samples.size(), 0);
  Status first_error;
  auto fail = [&](size_t k, Status error) {
    for (const PlannedCopy& copy : reads.chunks[k].copies) bad[copy.sample] = 1;
    if (first_error.ok()) first_error = std::move(error);
  };

  // A wave ends at the chunk that takes it to the limit: none is larger than the limit plus the
  // largest chunk, or than the batch.
  const uint64_t wave_limit = options.gpu_wave_bytes != 0 ? options.gpu_wave_bytes : kGpuWaveBytes;
  uint64_t batch_decoded_bytes = 0;
  for (const PlannedChunk& chunk : reads.chunks) {
    batch_decoded_bytes += ReadChunkBytes(*g.arrays[chunk.array]);
  }
  w.ExpectWaves(std::min(wave_limit + gs.max_chunk_bytes, batch_decoded_bytes), gs.any_blosc);
  // Which chunks nvCOMP decodes: those of arrays it can, less `cpu_share` of them, spread evenly
  // over the batch, that the worker threads decode instead.
  std::vector<uint8_t> on_gpu(reads.chunks.size(), 0);
  uint64_t decodable = 0;
  for (size_t k = 0; k < reads.chunks.size(); ++k) {
    if (!gs.codecs[reads.chunks[k].array]) continue;
    const bool to_cpu = static_cast<uint64_t>(static_cast<double>(decodable + 1) * cpu_share) >
                        static_cast<uint64_t>(static_cast<double>(decodable) * cpu_share);
    on_gpu[k] = to_cpu ? 0 : 1;
    ++decodable;
  }

  for (size_t begin = 0; status.ok() && begin < reads.chunks.size();) {
    StageSpan read_stage(timeline, "read", epoch, index);
    const Clock::time_point start = read_stage.start();
    // The wave: chunks up to gpu_wave_bytes decoded (at least one).
    size_t end = begin;
    uint64_t wave_bytes = 0, host_bytes = 0;
    while (end < reads.chunks.size() && (end == begin || wave_bytes < wave_limit)) {
      const PlannedChunk& chunk = reads.chunks[end];
      const uint64_t bytes = ReadChunkBytes(*g.arrays[chunk.array]);
      wave_bytes += bytes;
      if (!on_gpu[end]) host_bytes += bytes;
      ++end;
    }
    const size_t n = end - begin;
    if (status = w.Begin(n, host_bytes, wave_bytes - host_bytes); !status.ok()) break;
    std::vector<ChunkRead> wave(n);
    for (size_t i = 0; i < n; ++i) {
      const PlannedChunk& chunk = reads.chunks[begin + i];
      ChunkRead& read = wave[i];
      read.array = g.arrays[chunk.array];
      read.coords = chunk.coords;
      if (!on_gpu[begin + i]) {
        read.out = w.HostOutput(i, ReadChunkBytes(*read.array));
        continue;
      }
      const std::optional<GpuChunkCodec>& codec = gs.codecs[chunk.array];
      read.take_encoded = [&w, &codec, i](std::span<const std::byte> stored) {
        Result<GpuChunkParse> parse = codec->Parse(stored);
        if (parse.ok()) {
          w.Stage(i, *parse, codec->decoded_bytes);
        } else {
          w.Reject(i);  // decoded again on the CPU below: for its error, or what the GPU cannot
        }
        return Status::Ok();
      };
    }
    ReadChunks(wave, pool.get(), 0, &index_cache, &read_counters);
    const Clock::time_point read_end = read_stage.End();
    counters.gpu_read_ns += Nanoseconds(read_end - start);
    StageSpan decode_stage(timeline, "gpu decode", epoch, index, read_end);
    if (status = w.Decode(); !status.ok()) break;
    const Clock::time_point decode_end = decode_stage.End();
    counters.gpu_decode_ns += Nanoseconds(decode_end - read_end);
    StageSpan scatter_stage(timeline, "scatter", epoch, index, decode_end);

    // Chunks the GPU rejected: read and decoded again on the CPU. Success (a frame nvCOMP does not
    // handle) crosses decoded; failure is the chunk's error, with its context.
    std::vector<size_t> retry;
    for (size_t i = 0; i < n; ++i) {
      if (wave[i].status.ok() && !wave[i].missing && w.Rejected(i)) retry.push_back(i);
    }
    std::vector<uint64_t> retried(n, 0);
    if (!retry.empty()) {
      counters.gpu_rejected_chunks += retry.size();
      std::vector<ChunkRead> again(retry.size());
      std::vector<ByteBuffer> decoded(retry.size());
      for (size_t r = 0; r < retry.size(); ++r) {
        again[r].array = wave[retry[r]].array;
        again[r].coords = wave[retry[r]].coords;
        decoded[r].Resize(ReadChunkBytes(*again[r].array));
        again[r].out = decoded[r].span();
      }
      ReadChunks(again, pool.get(), 0, &index_cache, &read_counters);
      for (size_t r = 0; r < retry.size() && status.ok(); ++r) {
        if (!again[r].status.ok()) {
          wave[retry[r]].status = std::move(again[r].status);
          continue;
        }
        Result<uint64_t> address = w.Upload(decoded[r].span());
        if (!address.ok()) {
          status = address.status();
        } else {
          retried[retry[r]] = *address;
        }
      }
      if (!status.ok()) break;
    }

    // One descriptor per box of every chunk of the wave.
    std::vector<gpu_abi::CopyDescriptor> copies;
    uint64_t max_elements = 0;
    for (size_t i = 0; i < n; ++i) {
      const size_t k = begin + i;
      if (!wave[i].status.ok()) {
        fail(k, std::move(wave[i].status));
        continue;
      }
      const PlannedChunk& chunk = reads.chunks[k];
      const internal::ArrayState& array = *g.arrays[chunk.array];
      std::span<const std::byte> fill;
      uint64_t source = 0;
      bool swap = false;
      if (wave[i].missing) {
        fill = array.metadata.fill_value;
      } else if (retried[i] != 0) {
        source = retried[i];
      } else {
        source = w.DeviceAddress(i);
        // Bytes nvCOMP decoded are as stored; the CPU's are in this machine's order.
        swap = on_gpu[k] && gs.codecs[chunk.array]->big_endian;
      }
      counters.bytes_decoded += ReadChunkBytes(array);
      for (const PlannedCopy& copy : chunk.copies) {
        const CopyTarget to = TargetOf(b, copy);
        copies.push_back(
            MakeCopyDescriptor(source, array.metadata.data_type, chunk_shapes[chunk.array], copy,
                               reinterpret_cast<uint64_t>(to.slab), options.dtype, *to.strides,
                               to.transform, reinterpret_cast<uint64_t>(to.mask), swap, fill));
        max_elements = std::max(max_elements, copies.back().elements);
      }
    }
    if (!copies.empty()) {
      Result<uint64_t> descriptors =
          w.Upload(std::as_bytes(std::span<const gpu_abi::CopyDescriptor>(copies)));
      if (!descriptors.ok()) {
        status = descriptors.status();
        break;
      }
      status = gs.kernels->Scatter(*descriptors, static_cast<uint32_t>(copies.size()), max_elements,
                                   w.stream());
      if (!status.ok()) break;
    }
    status = w.Synchronize();
    const Clock::time_point end_time = scatter_stage.End();
    counters.gpu_ns += Nanoseconds(end_time - start);
    counters.gpu_scatter_ns += Nanoseconds(end_time - decode_end);
    counters.read_decode_ns += Nanoseconds(end_time - start);
    begin = end;
  }
  counters.bytes_to_gpu += w.bytes_uploaded() - uploaded_before;
  counters.gpu_decoded_chunks += w.chunks_decoded() - decoded_before;
  if (status.ok() && !first_error.ok() && options.skip_bad_samples) {
    CompactBatch(b, bad, [&](std::byte* to, const std::byte* from, size_t bytes) {
      if (status.ok()) {
        status = gs.driver->CopyOnDevice(reinterpret_cast<uint64_t>(to),
                                         reinterpret_cast<uint64_t>(from), bytes, w.stream());
      }
    });
    if (status.ok()) status = w.Synchronize();
  }
  if (status.ok()) {
    gs.ReturnWorkspace(std::move(workspace));
  }  // else: a workspace whose stream failed is not reused
  if (!status.ok()) {
    return std::move(status).WithContext("batch " + std::to_string(index) + " (epoch " +
                                         std::to_string(epoch) + ") on the GPU");
  }
  if (!first_error.ok() && !options.skip_bad_samples) {
    return BatchError(std::move(first_error), bad, samples, epoch, index);
  }
  return batch;
}
}  // namespace internal

using internal::LoaderState;

Result<Loader> Loader::Open(std::string_view url, const LoaderOptions& options) {
  ZS_RETURN_IF_ERROR(ParseBatchDType(BatchDTypeName(options.dtype)).status());
  const CudaDriver* pin = nullptr;
  std::unique_ptr<internal::GpuLoaderState> gpu;
  if (options.device == BatchDevice::kCuda) {
    gpu = std::make_unique<internal::GpuLoaderState>();
    Result<GpuDevice> device = OpenGpuDevice(options.cuda_device);
    if (!device.ok()) {
      return ConfigError(
          "device is cuda:" + std::to_string(options.cuda_device) +
          ", but batches cannot be made on that GPU here: " + device.status().message());
    }
    gpu->driver = device->driver;
    gpu->kernels = device->kernels;
    if (!options.gpu_decode) {
      gpu->nvcomp_status = "chunks decode on the CPU: gpu_decode is off";
    } else if ((gpu->nvcomp = Nvcomp::Get()) != nullptr) {
      gpu->nvcomp_status = "nvCOMP " + gpu->nvcomp->version() + " (" + gpu->nvcomp->library() + ")";
      if (options.adapt_cpu_decode_share) {
        gpu->nvcomp_status +=
            "; the worker threads decode a share of its chunks that adapts to what they carry, "
            "from " +
            std::to_string(std::lround(100 * options.cpu_decode_share)) + " % (cpu_decode_share)";
      } else if (options.cpu_decode_share > 0) {
        gpu->nvcomp_status += "; the worker threads decode " +
                              std::to_string(std::lround(100 * options.cpu_decode_share)) +
                              " % of its chunks (cpu_decode_share)";
      }
    } else {
      gpu->nvcomp_status = "chunks decode on the CPU: " + Nvcomp::UnavailableReason();
    }
  }
  if (options.pin_memory != PinMemory::kOff && !gpu) {
    // Page-locked through the GPU the batches go to (PORTABLE: for every device alike), so that
    // no other device gets a context.
    Result<const CudaDriver*> driver = CudaDriver::ForDevice(options.cuda_device);
    pin = driver.ok() ? *driver : nullptr;
    if (pin == nullptr && options.pin_memory == PinMemory::kOn) {
      return ConfigError("pin_memory is on, but batches cannot be page-locked: " +
                         driver.status().message());
    }
  }
  if (!(options.cpu_decode_share >= 0 && options.cpu_decode_share <= 1)) {
    std::ostringstream share;
    share << options.cpu_decode_share;
    return ConfigError("cpu_decode_share is " + share.str() + ": expected a share from 0 to 1");
  }
  OpenOptions open_options;
  open_options.missing_chunks_are_errors = options.missing_chunks_are_errors;
  ZS_ASSIGN_OR_RETURN(Dataset dataset, Dataset::Open(url, open_options));
  ZS_ASSIGN_OR_RETURN(LoaderGeometry geometry, MakeLoaderGeometry(dataset, options));
  ZS_ASSIGN_OR_RETURN(ShuffleMode shuffle, ParseShuffleMode(options.shuffle));
  SamplePlanOptions plan_options;
  plan_options.shuffle = shuffle;
  plan_options.seed = options.seed;
  plan_options.batch_size = options.batch_size;
  plan_options.world_size = options.world_size;
  plan_options.rank = options.rank;
  plan_options.drop_last = options.drop_last;
  const std::vector<SampledDim> plan_dims = geometry.PlanDims();
  plan_options.block_chunks =
      options.block_chunks != 0
          ? options.block_chunks
          : AutoBlockChunks(geometry, plan_dims, options, CacheBytes(options));
  plan_options.block_window = options.block_window;
  auto plan = SamplePlan::Create(plan_dims, plan_options);
  if (!plan.ok())
    return std::move(plan).status().WithContext("planning samples of " + dataset.url());

  auto state = std::make_unique<LoaderState>(options, std::move(dataset), std::move(geometry),
                                             std::move(*plan));
  LoaderState& s = *state;
  const LoaderGeometry& g = s.geometry;
  size_t threads = options.num_threads;
  if (threads == 0) {
    ZS_ASSIGN_OR_RETURN(threads, CoresPerLocalRank());
  }
  s.pool = std::make_shared<ThreadPool>(threads);
  for (const internal::ArrayState* array : g.arrays) {
    // Batches decode whole read chunks into the chunk cache: a chunk no machine could hold is
    // refused here rather than by an allocation on a loader thread.
    ZS_RETURN_IF_ERROR(CheckAllocation("a read chunk of shape " +
                                           FormatIndex(array->read_chunk_shape) + " of " +
                                           array->Describe(),
                                       ReadChunkBytes(*array)));
    s.chunk_shapes.push_back(array->read_chunk_shape);
  }
  // Slab strides: C order over the spatial dims; 0 on the time and level dims.
  std::vector<uint64_t> spatial_strides(g.spatial_shape.size());
  uint64_t stride = 1;
  for (size_t i = g.spatial_shape.size(); i-- > 0;) {
    spatial_strides[i] = stride;
    stride *= g.spatial_shape[i];
  }
  for (const Channel& channel : g.channels) {
    DimArray strides{};
    for (size_t i = 0; i < g.spatial_index.size(); ++i) {
      const size_t d = g.spatial_index[i];
      const size_t a = channel.level_dim && d >= *channel.level_dim ? d + 1 : d;
      strides[a] = spatial_strides[i];
    }
    s.slab_strides.push_back(strides);
  }
  const uint64_t batch = options.batch_size;
  const uint64_t element = BatchDTypeSize(options.dtype);
  const uint64_t inputs = batch * g.input_slabs.size() * g.slab_elements;
  const uint64_t targets = batch * g.target_slabs.size() * g.slab_elements;
  uint64_t offset = 0;
  s.input_offset = offset;
  offset = AlignUp(offset + inputs * element);
  s.target_offset = offset;
  offset = AlignUp(offset + targets * element);
  s.input_mask_offset = offset;
  if (options.fill_nan) offset = AlignUp(offset + inputs);
  s.target_mask_offset = offset;
  if (options.fill_nan) offset = AlignUp(offset + targets);
  s.origins_offset = offset;
  offset = AlignUp(offset + batch * g.sampled_index.size() * sizeof(int64_t));
  s.batch_bytes = std::max<uint64_t>(offset, kAlignment);
  if (gpu) {
    // Tensors in device memory (everything before the origins), origins in host memory.
    gpu->batch_bytes = std::max<uint64_t>(s.origins_offset, kAlignment);
    gpu->batches =
        std::make_shared<DeviceBatchPool>(gpu->driver, gpu->batch_bytes, options.prefetch + 2);
    s.batch_bytes =
        std::max<uint64_t>(AlignUp(batch * g.sampled_index.size() * sizeof(int64_t)), kAlignment);
    s.origins_offset = 0;
    for (const internal::ArrayState* array : g.arrays) {
      const CodecChain& chain = array->chain->sharding() != nullptr
                                    ? array->chain->sharding()->inner_chain()
                                    : *array->chain;
      // Without nvCOMP the GPU takes only chunks it copies as they are; the CPU decodes the rest
      // (staging them would read them twice: once for the GPU to reject, once for the CPU).
      std::optional<GpuChunkCodec> codec = PlanGpuDecode(chain);
      if (codec && gpu->nvcomp == nullptr && (codec->compression || codec->blosc)) codec.reset();
      gpu->codecs.push_back(codec);
      gpu->max_chunk_bytes = std::max(gpu->max_chunk_bytes, ReadChunkBytes(*array));
      gpu->any_blosc |= gpu->codecs.back() && gpu->codecs.back()->blosc;
    }
    if (gpu->nvcomp != nullptr && options.adapt_cpu_decode_share) {
      s.decode_share = std::make_unique<DecodeShareController>(options.cpu_decode_share);
    }
    s.gpu = std::move(gpu);
  }
  s.batch_memory = std::make_shared<BatchMemoryPool>(s.batch_bytes, options.prefetch + 2, pin);
  s.estimated_amplification = s.plan.EstimateReads(shuffle).read_amplification;
  s.estimated_amplification_exact = s.plan.EstimateReads(ShuffleMode::kExact).read_amplification;
  return Loader(std::move(state));
}

Loader::Loader(std::unique_ptr<LoaderState> state) : state_(std::move(state)) {}
Loader::Loader(Loader&&) noexcept = default;
Loader& Loader::operator=(Loader&&) noexcept = default;
Loader::~Loader() = default;

Result<std::optional<std::shared_ptr<const Batch>>> Loader::Next() {
  LoaderState& s = *state_;
  const uint64_t end = s.plan.num_batches();
  if (s.delivered >= end) return std::optional<std::shared_ptr<const Batch>>();
  if (!s.pipeline) s.pipeline = std::make_unique<internal::Pipeline>(s, s.plan, s.delivered);
  internal::StageSpan wait(s.timeline, "wait", s.plan.epoch(), s.delivered);
  Result<std::shared_ptr<Batch>> batch = s.pipeline->Take();
  const double waited = Seconds(wait.End() - wait.start());
  ++s.delivered;
  LoaderStats& st = s.delivered_stats;
  st.wait_seconds += waited;
  const auto micros = static_cast<uint64_t>(waited * 1e6);
  size_t bucket = 0;
  while (bucket + 1 < LoaderStats::kWaitBuckets && (uint64_t{2} << bucket) <= micros) ++bucket;
  ++st.wait_histogram[bucket];
  if (!batch.ok()) return std::move(batch).status();
  const Batch& b = **batch;
  ++st.batches;
  st.samples += b.size();
  st.skipped_samples += b.num_skipped();
  st.bytes_delivered += b.input().data.size() + b.target().data.size();
  return std::optional<std::shared_ptr<const Batch>>(std::move(*batch));
}

void Loader::SetEpoch(uint64_t epoch) {
  LoaderState& s = *state_;
  // The pipeline has been producing the next epoch since this one's last batches: keep them.
  const bool ahead =
      s.pipeline && s.delivered == s.plan.num_batches() && s.pipeline->AdvanceEpoch(epoch);
  if (!ahead) s.StopPipeline();
  s.plan.SetEpoch(epoch);
  s.delivered = 0;
}

void Loader::StartNextEpoch() { SetEpoch(epoch() + 1); }
uint64_t Loader::epoch() const { return state_->plan.epoch(); }
uint64_t Loader::next_batch() const { return state_->delivered; }
uint64_t Loader::num_batches() const { return state_->plan.num_batches(); }
uint64_t Loader::num_samples() const { return state_->plan.num_samples(); }

std::string Loader::StateJson() const {
  SamplePlanState state = state_->plan.State();
  state.next_batch = state_->delivered;
  return state.ToJson();
}

Status Loader::RestoreStateJson(std::string_view json) {
  ZS_ASSIGN_OR_RETURN(SamplePlanState state, SamplePlanState::FromJson(json));
  state_->StopPipeline();
  ZS_RETURN_IF_ERROR(state_->plan.Restore(state));
  state_->delivered = state.next_batch;
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
bool Loader::pinned() const { return state_->batch_memory->pinned(); }
size_t Loader::num_threads() const { return state_->pool->num_threads(); }

void Loader::SetConsumerStream(uintptr_t stream) {
  if (state_->gpu) state_->gpu->batches->SetConsumerStream(stream);
}

std::string Loader::gpu_decode_status() const {
  return state_->gpu ? state_->gpu->nvcomp_status : "batches are made on the CPU";
}
std::vector<TimelineSpan> Loader::Timeline() const { return state_->timeline.Spans(); }

std::vector<int64_t> Loader::input_shape() const {
  const LoaderGeometry& g = state_->geometry;
  std::vector<int64_t> shape = {static_cast<int64_t>(state_->options.batch_size),
                                static_cast<int64_t>(g.input_slabs.size())};
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
  LoaderStats st = s.delivered_stats;
  st.cache_hits = s.counters.cache_hits;
  st.chunks_decoded = s.read_counters.chunks;
  st.chunk_refs = s.counters.chunk_refs;
  st.bytes_used = s.counters.bytes_used;
  st.missing_chunks = s.read_counters.missing_chunks;
  st.requests = s.read_counters.requests;
  st.bytes_read = s.read_counters.bytes_read;
  st.bytes_decoded = s.counters.bytes_decoded;
  st.plan_seconds = static_cast<double>(s.counters.plan_ns) * 1e-9;
  st.read_decode_seconds = static_cast<double>(s.counters.read_decode_ns) * 1e-9;
  st.assemble_seconds = static_cast<double>(s.counters.assemble_ns) * 1e-9;
  st.gpu_decoded_chunks = s.counters.gpu_decoded_chunks;
  st.gpu_rejected_chunks = s.counters.gpu_rejected_chunks;
  st.bytes_to_gpu = s.counters.bytes_to_gpu;
  st.gpu_seconds = static_cast<double>(s.counters.gpu_ns) * 1e-9;
  st.gpu_read_seconds = static_cast<double>(s.counters.gpu_read_ns) * 1e-9;
  st.gpu_decode_seconds = static_cast<double>(s.counters.gpu_decode_ns) * 1e-9;
  st.gpu_scatter_seconds = static_cast<double>(s.counters.gpu_scatter_ns) * 1e-9;
  if (s.gpu && s.gpu->nvcomp != nullptr) st.cpu_decode_share = s.CpuDecodeShare().share;
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

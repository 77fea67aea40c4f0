// What makes one batch: the BatchProducer interface the pipeline drives, with one implementation
// per device (cpu_batch_producer.h, gpu_batch_producer.h), and what both share: the loader's
// context (geometry, options, caches, thread pool, counters, timeline, batch layout and host
// memory) and the steps common to both paths (laying a batch out in its memory, planning it,
// naming a failed sample, dropping bad samples).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "array/chunk_reader.h"
#include "loader/batch_assembly.h"
#include "loader/batch_layout.h"
#include "loader/batch_memory_pool.h"
#include "loader/chunk_cache.h"
#include "loader/read_plan.h"
#include "loader/sample_plan.h"
#include "loader/stage_timeline.h"
#include "util/thread_pool.h"
#include "zarrstream/loader.h"

namespace zarrstream::internal {

// The loader's access to a Batch's private members.
struct BatchAccess {
  static std::shared_ptr<Batch> Make() { return std::shared_ptr<Batch>(new Batch()); }
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

// The producers' accounting, read by Loader::stats.
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
  std::atomic<uint64_t> bytes_staged_without_copy{0};
  std::atomic<uint64_t> gpu_ns{0};
  std::atomic<uint64_t> gpu_read_ns{0};
  std::atomic<uint64_t> gpu_decode_ns{0};
  std::atomic<uint64_t> gpu_scatter_ns{0};
};

// What the producers share, owned by the loader and set up by Loader::Open. The producers use it
// from the coordinating threads at once: the members are thread-safe or not changed after Open.
struct BatchContext {
  BatchContext(const LoaderOptions& o, const LoaderGeometry& g, uint64_t cache_bytes,
               uint64_t idle_chunk_bytes)
      : options(o),
        geometry(g),
        prefetch(std::max<size_t>(o.prefetch, 1)),
        cache(cache_bytes, idle_chunk_bytes),
        timeline(o.record_timeline) {}

  const LoaderOptions& options;
  const LoaderGeometry& geometry;
  // Batches prepared ahead now: LoaderOptions::prefetch (at least 1) until Loader::SetPrefetch.
  std::atomic<size_t> prefetch;
  std::shared_ptr<ThreadPool> pool;
  ChunkCache cache;
  ShardIndexCache index_cache;
  ChunkReadCounters read_counters;
  LoaderCounters counters;
  TimelineRecorder timeline;
  BatchLayout layout;
  std::shared_ptr<HostBatchPool> host_memory;
  // Per array: the shape of its read chunk (C order); of its kept box for a static field.
  std::vector<std::vector<uint64_t>> chunk_shapes;
  // Per array: a static field's box (LoaderGeometry::resident) as stored, read once at open and
  // kept for every batch; null for arrays read per batch.
  std::vector<std::shared_ptr<const ChunkCache::Entry>> resident;
  // Per channel: element strides of a slab along each array dimension.
  std::vector<DimArray> slab_strides;
};

// Makes batches of a loader. Thread-safe: the pipeline's coordinating threads call Produce at once,
// each for its own batch.
class BatchProducer {
 public:
  virtual ~BatchProducer() = default;

  // Batch `index` of `epoch_plan`'s epoch (the pipeline's copy of the plan: the loader's own may
  // have moved on to another epoch). GPU batches: `cpu_share` of the chunks nvCOMP could decode are
  // decoded by the worker threads instead (decode_share.h).
  virtual Result<std::shared_ptr<Batch>> Produce(const SamplePlan& epoch_plan, uint64_t index,
                                                 double cpu_share) = 0;
  // From now on keeps for reuse only the memory `prefetch` batches ahead need (GPU batch blocks,
  // decode workspaces): what is idle beyond it is freed now, what is in use as it comes back.
  // Thread-safe: batches may be in production.
  virtual void KeepMemoryFor(size_t prefetch) { (void)prefetch; }
};

// The steps both producers take alike, on the loader's context.
class BatchProducerBase : public BatchProducer {
 public:
  explicit BatchProducerBase(BatchContext& context) : context_(context) {}
  BatchProducerBase(const BatchProducerBase&) = delete;
  BatchProducerBase& operator=(const BatchProducerBase&) = delete;

 protected:
  // Where a planned copy lands in batch `b` (host or device memory alike): its slab's first
  // element, its NaN mask (null without fill_nan), the channel's transform and slab strides.
  struct CopyTarget {
    std::byte* slab = nullptr;
    uint8_t* mask = nullptr;
    SlabTransform transform;
    const DimArray* strides = nullptr;
  };
  CopyTarget TargetOf(Batch& b, const PlannedCopy& copy) const;
  // One computed forcing's slab of a host batch (BatchReadPlan::computed).
  void AssembleComputedForcing(Batch& b, const PlannedForcing& forcing) const;
  // Padding box `box` (PatchPadding kValue) in every channel of its sample, on the CPU: after the
  // sample's copies and computed forcings.
  void AssemblePadding(Batch& b, const PlannedPadding& box) const;
  // Axis of the latitude (longitude) among the spatial dimensions; -1 where there is none.
  int LatitudeAxis() const;
  int LongitudeAxis() const;

  // The batch tensors of `samples` samples at `tensors` (input, target, masks) and `origins`, in
  // the context's layout.
  void LayOutTensors(Batch& b, std::byte* tensors, std::byte* origins, size_t samples) const;
  // A batch of `samples` samples in a host block of the context's pool.
  Result<std::shared_ptr<Batch>> AllocateBatch(size_t samples) const;
  // A planned batch's position and origins, and the plan stage's accounting.
  void FinishPlanning(Batch& b, uint64_t epoch, uint64_t index, const SampleBatch& samples,
                      const BatchReadPlan& reads, StageSpan& plan_stage) const;
  // `error` of a batch, named by its first sample marked in `bad`.
  Status BatchError(Status error, const std::vector<uint8_t>& bad, const SampleBatch& samples,
                    uint64_t epoch, uint64_t index) const;

  BatchContext& context_;
};

// Drops the samples marked in `bad` from every tensor of `b`, keeping the order of the rest. A GPU
// batch's device tensors move with `move_on_device` (target, source, bytes; never overlapping).
void CompactBatch(
    Batch& b, const std::vector<uint8_t>& bad,
    const std::function<void(std::byte*, const std::byte*, size_t)>& move_on_device = nullptr);

}  // namespace zarrstream::internal

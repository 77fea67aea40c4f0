// Batches made on the GPU (LoaderOptions::device kCuda, see loader.h): the batch's chunks in
// waves; per wave, stored bytes staged as they are read (or decoded on the CPU where the GPU
// cannot, or where the CPU share places them: decode_share.h), one copy to the GPU, nvCOMP's
// batched decodes, CPU decodes of what the GPU rejected, and one scatter launch for every box;
// after the last wave, one launch that makes tendency targets from the values the waves decoded
// aside (LoaderGeometry::base_slabs). A batch of several waves holds two decode workspaces and
// reads the next wave into one (on a thread of its own, the worker threads doing the reading)
// while the current wave crosses, decodes and scatters from the other.
// Static fields are copied to device memory once and scattered from there by every batch.
// A batch's tensors live in a device block (batch_memory_pool.h), its origins in host memory.
//
// Apart from the CPU path because it shares only planning and layout with it; the CUDA pieces
// (driver, kernels, nvCOMP, decode workspaces) are all behind this one class.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gpu/gpu_decoder.h"
#include "loader/batch_producer.h"
#include "loader/decode_share.h"

namespace zarrstream {
class CudaDriver;
class GpuKernels;
class Nvcomp;
}  // namespace zarrstream

namespace zarrstream::internal {

// What GPU batches on one device are made with: its driver instance and kernels.
struct GpuDevice {
  const CudaDriver* driver = nullptr;
  const GpuKernels* kernels = nullptr;
};

// Device `cuda_device`'s (making its context), or why GPU batches cannot be made there.
Result<GpuDevice> OpenGpuDevice(int cuda_device);

// What a GPU loader is made with, settled before its dataset opens: the device, and nvCOMP where
// chunks decode on the GPU (null: on the CPU), with the words Loader::gpu_decode_status says.
struct GpuSetup {
  GpuDevice device;
  const Nvcomp* nvcomp = nullptr;
  std::string nvcomp_status;
};
// A ConfigError where `options.cuda_device` cannot make batches.
Result<GpuSetup> SetUpGpu(const LoaderOptions& options);

class GpuBatchProducer : public BatchProducerBase {
 public:
  // Decoded bytes a GPU wave holds by default (LoaderOptions::gpu_wave_bytes): two workspaces of
  // this per batch in flight take what one of twice the size took before waves overlapped.
  static constexpr uint64_t kGpuWaveBytes = uint64_t{512} << 20;

  // Each array's GPU decode from the context's geometry, and the device pool of
  // context.layout.device_bytes blocks.
  GpuBatchProducer(BatchContext& context, GpuSetup setup);
  ~GpuBatchProducer() override;

  Result<std::shared_ptr<Batch>> Produce(const SamplePlan& epoch_plan, uint64_t index,
                                         double cpu_share) override;

  void KeepMemoryFor(size_t prefetch) override;
  // The adaptive decode share batches are made with (null: a fixed one), told when nvCOMP runs out
  // of GPU memory. Set before the first batch.
  void SetAdaptiveShare(DecodeShareController* adaptive) { adaptive_ = adaptive; }

  const std::string& nvcomp_status() const { return setup_.nvcomp_status; }
  bool decodes_with_nvcomp() const { return setup_.nvcomp != nullptr; }
  // Whether nvCOMP ran out of GPU memory (GiveUpNvcomp): the worker threads decode every chunk.
  bool gave_up_nvcomp() const { return nvcomp_out_of_memory_.load(); }
  void SetConsumerStream(void* stream) { batches_->SetConsumerStream(stream); }
  size_t batch_blocks() const { return batches_->blocks(); }  // device blocks, in use and idle

 private:
  class Job;

  Result<std::shared_ptr<Batch>> ProduceOnGpu(const SamplePlan& epoch_plan, uint64_t index,
                                              double cpu_share);
  // A GPU batch: tensors in a device block (the second of the pair), origins in host memory.
  Result<std::pair<std::shared_ptr<Batch>, DeviceBatchPool::Block>> AllocateGpuBatch(
      size_t samples) const;
  // LoaderOptions::gpu_wave_bytes, or its default.
  uint64_t WaveLimit() const;
  // Where each wave of `reads` starts (indices into reads.chunks): a wave ends at the chunk that
  // takes its decoded bytes to WaveLimit(). Empty for a batch without chunks.
  std::vector<size_t> WaveStarts(const BatchReadPlan& reads) const;
  // `error`, and where the GPU ran out of memory, what this loader holds there and what lowers it.
  Status ExplainGpuMemory(Status error) const;
  // nvCOMP could not have its memory beside the consumer's (a batch with some of its chunks on
  // nvCOMP ran out of GPU memory): the worker threads decode every chunk from now on, which needs
  // none of it, the adaptive share stays at 1, and the idle workspaces give that memory back (the
  // busy ones as they return).
  void GiveUpNvcomp();
  // The static fields' boxes (BatchContext::resident) in device memory, copied there on `stream`
  // by the first batch and kept for every batch after it.
  Status KeepResidentOnDevice(void* stream);
  // The decode workspaces of the batches in flight: one or two each, reused; at most two per
  // coordinating thread are kept idle (KeepMemoryFor), the others freed as they come back.
  Result<std::unique_ptr<GpuDecodeWorkspace>> TakeWorkspace();
  void ReturnWorkspace(std::unique_ptr<GpuDecodeWorkspace> w);
  static size_t WorkspacesFor(size_t prefetch);

  const GpuSetup setup_;
  std::vector<std::optional<GpuChunkCodec>> codecs_;  // per LoaderGeometry::arrays; none: CPU
  uint64_t max_chunk_bytes_ = 0;                      // the largest decoded chunk of any array
  bool any_blosc_ = false;                            // some array's chunks unshuffle on the GPU
  std::shared_ptr<DeviceBatchPool> batches_;

  DecodeShareController* adaptive_ = nullptr;
  std::atomic<bool> nvcomp_out_of_memory_{false};  // GiveUpNvcomp

  std::mutex mutex_;
  std::vector<std::unique_ptr<GpuDecodeWorkspace>> idle_;
  size_t max_idle_workspaces_;  // WorkspacesFor(the prefetch)

  std::mutex resident_mutex_;
  bool resident_on_device_ = false;
  // Per array: its static field's box in device memory (0: none, or not yet copied).
  std::vector<uint64_t> resident_device_;
  // The computed forcings' latitudes and longitudes (LoaderGeometry) in device memory (0: none).
  uint64_t latitudes_device_ = 0, longitudes_device_ = 0;
};

}  // namespace zarrstream::internal

#include "loader/gpu_batch_producer.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <new>
#include <system_error>
#include <thread>

#include "gpu/cuda_driver.h"
#include "gpu/gpu_kernels.h"
#include "gpu/nvcomp.h"
#include "loader/decode_share.h"
#include "loader/gpu_assembly.h"
#include "loader/pipeline.h"
#include "util/format.h"
#include "util/mix64.h"
#include "util/nvtx_range.h"

namespace zarrstream::internal {
namespace {

// a + b, or the largest count where that overflows: wave sizes come from options
// (gpu_wave_bytes) and the store, and a sum that wrapped would size a workspace too small.
uint64_t SaturatingAdd(uint64_t a, uint64_t b) {
  uint64_t sum = 0;
  return __builtin_add_overflow(a, b, &sum) ? std::numeric_limits<uint64_t>::max() : sum;
}

}  // namespace

Result<GpuDevice> OpenGpuDevice(int cuda_device) {
  ZS_ASSIGN_OR_RETURN(const CudaDriver* driver, CudaDriver::ForDevice(cuda_device));
  ZS_ASSIGN_OR_RETURN(const GpuKernels* kernels, GpuKernels::ForDevice(driver));
  return GpuDevice{driver, kernels};
}

Result<GpuSetup> SetUpGpu(const LoaderOptions& options) {
  Result<GpuDevice> device = OpenGpuDevice(options.cuda_device);
  if (!device.ok()) {
    return ConfigError(
        "device is cuda:" + std::to_string(options.cuda_device) +
        ", but batches cannot be made on that GPU here: " + device.status().message());
  }
  GpuSetup setup;
  setup.device = *device;
  if (!options.decode.gpu) {
    setup.nvcomp_status = "chunks decode on the CPU: gpu_decode is off";
  } else if ((setup.nvcomp = Nvcomp::Get()) != nullptr) {
    setup.nvcomp_status =
        "nvCOMP " + setup.nvcomp->version() + " (" + setup.nvcomp->library() + ")";
    if (!setup.nvcomp->has_crc32()) {
      setup.nvcomp_status +=
          "; gzip chunks decode on the CPU: this nvCOMP has no batched CRC-32 "
          "(nvcompBatchedCRC32Async, nvCOMP 6.0 on) to verify them";
    }
    const std::string percent = std::to_string(std::lround(100 * options.decode.cpu_share));
    if (options.decode.adaptive) {
      setup.nvcomp_status +=
          "; the worker threads decode a share of its chunks that adapts to the consumer's time "
          "per batch, "
          "from " +
          percent + " % (cpu_decode_share)";
    } else if (options.decode.cpu_share > 0) {
      setup.nvcomp_status +=
          "; the worker threads decode " + percent + " % of its chunks (cpu_decode_share)";
    }
  } else {
    setup.nvcomp_status = "chunks decode on the CPU: " + Nvcomp::UnavailableReason();
  }
  return setup;
}

GpuBatchProducer::GpuBatchProducer(BatchContext& context, GpuSetup setup)
    : BatchProducerBase(context), setup_(std::move(setup)) {
  for (const internal::ArrayState* array : context.geometry.arrays) {
    // Without nvCOMP the GPU takes only chunks it copies as they are, and gzip chunks only where
    // nvCOMP can verify their CRC-32; the CPU decodes the rest (staging them would read them
    // twice: once for the GPU to reject, once for the CPU).
    std::optional<GpuChunkCodec> codec = PlanGpuDecode(*array->chain).codec;
    if (codec && setup_.nvcomp == nullptr && (codec->compression || codec->blosc)) codec.reset();
    if (codec && codec->compression == GpuCompression::kGzip && !setup_.nvcomp->has_crc32()) {
      codec.reset();
    }
    codecs_.push_back(codec);
    max_chunk_bytes_ = std::max(max_chunk_bytes_, ReadChunkBytes(*array));
    any_blosc_ |= codecs_.back() && codecs_.back()->blosc;
  }
  // The batches in flight, the one the consumer holds and the one it released last.
  batches_ = std::make_shared<DeviceBatchPool>(setup_.device.driver, context.layout.device_bytes,
                                               context.prefetch.load() + 2);
  max_idle_workspaces_ = WorkspacesFor(context.prefetch.load());
}

GpuBatchProducer::~GpuBatchProducer() {
  for (uint64_t address : resident_device_) {
    if (address != 0) setup_.device.driver->FreeDevice(address);
  }
  for (uint64_t address : {latitudes_device_, longitudes_device_}) {
    if (address != 0) setup_.device.driver->FreeDevice(address);
  }
}

Status GpuBatchProducer::KeepResidentOnDevice(void* stream) {
  std::lock_guard<std::mutex> lock(resident_mutex_);
  if (resident_on_device_) return Status::Ok();
  const CudaDriver* driver = setup_.device.driver;
  resident_device_.assign(context_.resident.size(), 0);
  for (size_t a = 0; a < context_.resident.size(); ++a) {
    const std::shared_ptr<const ChunkCache::Entry>& kept = context_.resident[a];
    if (!kept) continue;
    ZS_ASSIGN_OR_RETURN(resident_device_[a], driver->AllocateDevice(kept->bytes.size()));
    ZS_RETURN_IF_ERROR(
        driver->CopyToDevice(resident_device_[a], kept->bytes.data(), kept->bytes.size(), stream));
  }
  // The computed forcings' latitudes and longitudes.
  const LoaderGeometry& g = context_.geometry;
  for (auto [values, address] : {std::pair{&g.latitudes, &latitudes_device_},
                                 std::pair{&g.longitudes, &longitudes_device_}}) {
    if (values->empty()) continue;
    const uint64_t bytes = values->size() * sizeof(double);
    ZS_ASSIGN_OR_RETURN(*address, driver->AllocateDevice(bytes));
    ZS_RETURN_IF_ERROR(driver->CopyToDevice(*address, values->data(), bytes, stream));
  }
  ZS_RETURN_IF_ERROR(driver->SynchronizeStream(stream));
  resident_on_device_ = true;
  return Status::Ok();
}

Result<std::unique_ptr<GpuDecodeWorkspace>> GpuBatchProducer::TakeWorkspace() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!idle_.empty()) {
      std::unique_ptr<GpuDecodeWorkspace> w = std::move(idle_.back());
      idle_.pop_back();
      return w;
    }
  }
  return GpuDecodeWorkspace::Create(setup_.device.driver, setup_.nvcomp);
}

void GpuBatchProducer::ReturnWorkspace(std::unique_ptr<GpuDecodeWorkspace> w) {
  if (nvcomp_out_of_memory_.load()) w->ReleaseGpuDecodeMemory();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (idle_.size() < max_idle_workspaces_) {
      idle_.push_back(std::move(w));
      return;
    }
  }
  w.reset();  // frees its pinned and device memory, outside the lock
}

size_t GpuBatchProducer::WorkspacesFor(size_t prefetch) { return 2 * NumCoordinators(prefetch); }

void GpuBatchProducer::GiveUpNvcomp() {
  if (nvcomp_out_of_memory_.exchange(true)) return;
  if (adaptive_ != nullptr) adaptive_->StayAtCpuEnd();
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& w : idle_) w->ReleaseGpuDecodeMemory();
}

void GpuBatchProducer::KeepMemoryFor(size_t prefetch) {
  std::vector<std::unique_ptr<GpuDecodeWorkspace>> surplus;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    max_idle_workspaces_ = WorkspacesFor(prefetch);
    while (idle_.size() > max_idle_workspaces_) {
      surplus.push_back(std::move(idle_.back()));
      idle_.pop_back();
    }
  }
  surplus.clear();  // each frees its pinned and device memory
  batches_->SetMaxKept(prefetch + 2);
}

Result<std::pair<std::shared_ptr<Batch>, DeviceBatchPool::Block>>
GpuBatchProducer::AllocateGpuBatch(size_t samples) const {
  std::shared_ptr<Batch> batch = BatchAccess::Make();
  Batch& b = *batch;
  ZS_ASSIGN_OR_RETURN(auto device, batches_->Acquire());
  ZS_ASSIGN_OR_RETURN(std::shared_ptr<void> host, context_.host_memory->Acquire());
  // One handle keeps both: the device block returns to its pool when the batch goes.
  auto both = std::make_shared<std::pair<std::shared_ptr<void>, std::shared_ptr<void>>>(
      std::move(device.second), host);
  BatchAccess::storage(b) = both;
  LayOutTensors(b, DevicePointer<std::byte>(device.first.address),
                static_cast<std::byte*>(host.get()), samples);
  BatchAccess::device(b) = BatchDevice::kCuda;
  BatchAccess::cuda_device(b) = context_.options.cuda_device;
  return std::make_pair(std::move(batch), device.first);
}

namespace {

// Whether `error` is a device allocation that failed for want of memory.
bool IsGpuOutOfMemory(const Status& error) {
  return error.code() == ErrorCode::kCuda &&
         error.message().find("cuMemAlloc failed: CUDA_ERROR_OUT_OF_MEMORY") != std::string::npos;
}

}  // namespace

Status GpuBatchProducer::ExplainGpuMemory(Status error) const {
  if (!IsGpuOutOfMemory(error)) return error;
  const LoaderOptions& options = context_.options;
  const uint64_t wave = options.gpu_wave_bytes != 0 ? options.gpu_wave_bytes : kGpuWaveBytes;
  const bool decodes = decodes_with_nvcomp();
  return Status(
      error.code(),
      error.message() + ". This loader's GPU memory: up to " +
          std::to_string(context_.prefetch.load() + 2) + " batches of " +
          FormatBytes(static_cast<double>(context_.layout.device_bytes)) +
          ", and two decode workspaces of up to " + (decodes ? "about 5 times" : "about once") +
          " gpu_wave_bytes (" + FormatBytes(static_cast<double>(wave)) + ") each for each of the " +
          std::to_string(NumCoordinators(context_.prefetch.load())) + " batches in flight" +
          (context_.geometry.base_slabs.empty()
               ? std::string()
               : ", each with its tendency targets' values and bases in float64 (16 bytes per "
                 "target element)") +
          "; a smaller prefetch, batch_size or gpu_wave_bytes takes less" +
          (decodes ? ", and so does gpu_decode off (the CPU decodes; one wave per workspace)"
                   : ""));
}

uint64_t GpuBatchProducer::WaveLimit() const {
  const uint64_t limit = context_.options.gpu_wave_bytes;
  return limit != 0 ? limit : kGpuWaveBytes;
}

std::vector<size_t> GpuBatchProducer::WaveStarts(const BatchReadPlan& reads) const {
  // A wave ends at the chunk that takes it to the limit (at least one chunk).
  std::vector<size_t> starts;
  uint64_t wave_bytes = 0;
  for (size_t k = 0; k < reads.chunks.size(); ++k) {
    if (starts.empty() || wave_bytes >= WaveLimit()) {
      starts.push_back(k);
      wave_bytes = 0;
    }
    wave_bytes =
        SaturatingAdd(wave_bytes, ReadChunkBytes(*context_.geometry.arrays[reads.chunks[k].array]));
  }
  return starts;
}

// The waves of one planned batch on the GPU: chunk k is reads.chunks[k]. Waves alternate between
// two workspaces, so that the worker threads read and stage wave j + 1 into one while wave j
// crosses to the GPU, decodes and scatters from the other (a batch of one wave uses one).
class GpuBatchProducer::Job {
 public:
  // `wave_starts`: WaveStarts(reads). `second` may be null (every wave on `first`, one after the
  // other); both outlive the job.
  Job(GpuBatchProducer& producer, Batch& b, uint64_t epoch, uint64_t index,
      const BatchReadPlan& reads, std::vector<size_t> wave_starts, size_t samples,
      GpuDecodeWorkspace& first, GpuDecodeWorkspace* second)
      : producer_(producer),
        context_(producer.context_),
        b_(b),
        epoch_(epoch),
        index_(index),
        reads_(reads),
        wave_starts_(std::move(wave_starts)),
        w_(first),
        workspaces_{&first, second != nullptr ? second : &first} {
    bad.assign(samples, 0);
  }

  // Every wave while `status` (the streams') is OK; returns the streams' status after them.
  Status Run(Status status, double cpu_share) {
    // A wave ends at the chunk that takes it to the limit: none is larger than the limit plus the
    // largest chunk, or than the batch.
    uint64_t batch_decoded_bytes = 0;
    std::vector<uint8_t> decodable(reads_.chunks.size(), 0);
    std::vector<uint64_t> objects(reads_.chunks.size(), 0);
    for (size_t k = 0; k < reads_.chunks.size(); ++k) {
      const PlannedChunk& chunk = reads_.chunks[k];
      const internal::ArrayState& array = *context_.geometry.arrays[chunk.array];
      batch_decoded_bytes = SaturatingAdd(batch_decoded_bytes, ReadChunkBytes(array));
      decodable[k] = producer_.codecs_[chunk.array] ? 1 : 0;
      objects[k] = StoredObjectId(chunk, array);
    }
    for (GpuDecodeWorkspace* w : workspaces_) {
      w->ExpectWaves(std::min(SaturatingAdd(producer_.WaveLimit(), producer_.max_chunk_bytes_),
                              batch_decoded_bytes),
                     producer_.any_blosc_);
    }
    on_gpu_ = ChunksDecodedOnGpu(decodable, cpu_share, objects);
    if (status.ok()) status = RunWaves();
    if (status.ok() && reads_.chunks.empty() &&
        (!reads_.resident.empty() || !reads_.computed.empty() || !reads_.padding.empty())) {
      // Only static fields, computed forcings and padding: their launches, which the first wave
      // makes otherwise.
      status = w_.Begin(0, 0, 0);
      std::vector<ChunkRead> none;
      if (status.ok()) status = Scatter(0, w_, none, {});
      if (status.ok()) status = w_.Synchronize();
    }
    if (status.ok()) status = LaunchTendencies();
    return status;
  }

  // The device buffers tendency targets and their bases are decoded into
  // (LoaderGeometry::base_slabs): two float64 values per target element of the batch, in the
  // workspace's scratch memory.
  Status AllocateTendencies() {
    const LoaderGeometry& g = context_.geometry;
    if (g.base_slabs.empty()) return Status::Ok();
    const uint64_t bytes = bad.size() * g.target_slabs.size() * g.slab_elements * sizeof(double);
    Result<uint64_t> scratch = w_.Scratch(2 * bytes);
    if (!scratch.ok()) {
      return std::move(scratch).status().WithContext(
          "the tendency targets of a batch on the GPU (their values and their bases, in float64)");
    }
    tendency_values_ = *scratch;
    tendency_bases_ = *scratch + bytes;
    return Status::Ok();
  }

  // Per sample: 1 where one of its chunks failed; the first failure.
  std::vector<uint8_t> bad;
  Status first_error;

 private:
  // Which stored object `chunk` (of `array`) is in, for the placement (ChunksDecodedOnGpu keeps
  // neighbours of one object together): its array's index and the object's, mixed. Neighbours of
  // two objects that mixed alike would only be placed together.
  static uint64_t StoredObjectId(const PlannedChunk& chunk, const internal::ArrayState& array) {
    return Mix64(Mix64(chunk.array) ^ StoredPlaceOf(array, chunk.coords).object);
  }

  // The chunks of wave j: [wave_starts_[j], wave_starts_[j + 1]) (the last to the batch's end).
  size_t WaveBegin(size_t j) const { return wave_starts_[j]; }
  size_t WaveEnd(size_t j) const {
    return j + 1 < wave_starts_.size() ? wave_starts_[j + 1] : reads_.chunks.size();
  }
  GpuDecodeWorkspace& Workspace(size_t j) const { return *workspaces_[j % 2]; }

  // Wave j's chunks, read: staged for the GPU or decoded on the CPU into its workspace.
  struct WaveRead {
    Status status;
    std::vector<ChunkRead> chunks;
    Clock::time_point start, end;
  };

  // The waves, each read, decoded and scattered into the batch; wave j + 1 is read on a thread of
  // its own while wave j finishes where it has its own workspace.
  Status RunWaves() {
    const size_t waves = wave_starts_.size();
    if (waves == 0) return Status::Ok();
    WaveRead next = ReadWave(0);
    for (size_t j = 0; j < waves; ++j) {
      WaveRead current = std::move(next);
      RecordRead(current);
      ZS_RETURN_IF_ERROR(current.status);
      const bool read_next = j + 1 < waves;
      std::thread reader;
      if (read_next && &Workspace(j + 1) != &Workspace(j)) {
        try {
          reader = std::thread([this, &next, j] { next = ReadWaveOnItsThread(j + 1); });
        } catch (const std::system_error&) {
          // No thread to be had: the next wave is read after this one, as with one workspace.
        }
      }
      Status status = FinishWave(j, current.chunks);
      if (reader.joinable()) {
        reader.join();
      } else if (status.ok() && read_next) {
        next = ReadWave(j + 1);
      }
      ZS_RETURN_IF_ERROR(status);
    }
    return Status::Ok();
  }

  // Reads wave j into its workspace (a new wave on it: the workspace's previous wave is done).
  // nvCOMP's chunks are staged for the GPU, the rest decoded into the workspace's host outputs.
  WaveRead ReadWave(size_t j) {
    WaveRead read;
    NvtxRange range("read", index_);
    read.start = Clock::now();
    GpuDecodeWorkspace& w = Workspace(j);
    const size_t begin = WaveBegin(j), n = WaveEnd(j) - begin;
    uint64_t wave_bytes = 0, host_bytes = 0;
    for (size_t k = begin; k < begin + n; ++k) {
      const uint64_t bytes = ReadChunkBytes(*context_.geometry.arrays[reads_.chunks[k].array]);
      wave_bytes = SaturatingAdd(wave_bytes, bytes);
      if (!on_gpu_[k]) host_bytes = SaturatingAdd(host_bytes, bytes);
    }
    read.status = w.Begin(n, host_bytes, wave_bytes - host_bytes);
    if (read.status.ok()) {
      read.chunks.resize(n);
      for (size_t i = 0; i < n; ++i) {
        const PlannedChunk& chunk = reads_.chunks[begin + i];
        ChunkRead& chunk_read = read.chunks[i];
        chunk_read.array = context_.geometry.arrays[chunk.array];
        chunk_read.coords = chunk.coords;
        if (!on_gpu_[begin + i]) {
          chunk_read.out = w.HostOutput(i, ReadChunkBytes(*chunk_read.array));
          continue;
        }
        const std::optional<GpuChunkCodec>& codec = producer_.codecs_[chunk.array];
        // A shard's inner chunks are read straight into the staging (no copy where nvCOMP can
        // decode them where they lie).
        chunk_read.encoded_memory = [w = &w](uint64_t bytes) { return w->StagingFor(bytes); };
        chunk_read.take_encoded = [w = &w, &codec, i](std::span<const std::byte> stored) {
          Result<GpuChunkParse> parse = codec->Parse(stored);
          if (parse.ok()) {
            w->Stage(i, *parse, codec->decoded_bytes);
          } else {
            w->Reject(i);  // decoded again on the CPU below: for its error, or what the GPU cannot
          }
          return Status::Ok();
        };
      }
      ReadChunks(read.chunks, context_.pool.get(), 0, &context_.index_cache,
                 &context_.read_counters);
    }
    read.end = Clock::now();
    return read;
  }

  // ReadWave on the reader thread: an allocation that fails there is the wave's error, as it is on
  // the coordinating thread (Pipeline::ProduceBatch), since no exception may leave a thread.
  WaveRead ReadWaveOnItsThread(size_t j) {
    try {
      return ReadWave(j);
    } catch (const std::bad_alloc&) {
      WaveRead failed;
      failed.status =
          OutOfMemoryError("out of memory reading wave " + std::to_string(j) + " of batch " +
                           std::to_string(index_) + " (epoch " + std::to_string(epoch_) + ")");
      failed.start = failed.end = Clock::now();
      return failed;
    }
  }

  // The read stage of a wave on the timeline (on the coordinating thread's lane, whichever thread
  // read it) and in the counters.
  void RecordRead(const WaveRead& read) {
    context_.timeline.Add("read", epoch_, index_, read.start, read.end);
    const uint64_t ns = Nanoseconds(read.end - read.start);
    context_.counters.gpu_read_ns += ns;
    context_.counters.gpu_ns += ns;
    context_.counters.read_decode_ns += ns;
  }

  // Wave j, read: copied to the GPU, decoded, its rejects decoded on the CPU, scattered into the
  // batch, and waited for.
  Status FinishWave(size_t j, std::vector<ChunkRead>& wave) {
    GpuDecodeWorkspace& w = Workspace(j);
    StageSpan decode_stage(context_.timeline, "gpu decode", epoch_, index_);
    const Clock::time_point start = decode_stage.start();
    ZS_RETURN_IF_ERROR(w.Decode());
    const Clock::time_point decode_end = decode_stage.End();
    context_.counters.gpu_decode_ns += Nanoseconds(decode_end - start);
    StageSpan scatter_stage(context_.timeline, "scatter", epoch_, index_, decode_end);
    std::vector<uint64_t> retried(wave.size(), 0);
    ZS_RETURN_IF_ERROR(RetryRejected(w, wave, retried));
    ZS_RETURN_IF_ERROR(Scatter(WaveBegin(j), w, wave, retried));
    Status status = w.Synchronize();
    const Clock::time_point end_time = scatter_stage.End();
    context_.counters.gpu_ns += Nanoseconds(end_time - start);
    context_.counters.gpu_scatter_ns += Nanoseconds(end_time - decode_end);
    context_.counters.read_decode_ns += Nanoseconds(end_time - start);
    return status;
  }

  // Chunks the GPU rejected: read and decoded again on the CPU. Success (a frame nvCOMP does not
  // handle) crosses decoded, its device address in `retried`; failure is the chunk's error, with
  // its context.
  Status RetryRejected(GpuDecodeWorkspace& w, std::vector<ChunkRead>& wave,
                       std::vector<uint64_t>& retried) {
    std::vector<size_t> retry;
    for (size_t i = 0; i < wave.size(); ++i) {
      if (wave[i].status.ok() && !wave[i].missing && w.Rejected(i)) retry.push_back(i);
    }
    if (retry.empty()) return Status::Ok();
    context_.counters.gpu_rejected_chunks += retry.size();
    std::vector<ChunkRead> again(retry.size());
    std::vector<ByteBuffer> decoded(retry.size());
    for (size_t r = 0; r < retry.size(); ++r) {
      again[r].array = wave[retry[r]].array;
      again[r].coords = wave[retry[r]].coords;
      decoded[r].Resize(ReadChunkBytes(*again[r].array));
      again[r].out = decoded[r].span();
    }
    ReadChunks(again, context_.pool.get(), 0, &context_.index_cache, &context_.read_counters);
    for (size_t r = 0; r < retry.size(); ++r) {
      if (!again[r].status.ok()) {
        wave[retry[r]].status = std::move(again[r].status);
        continue;
      }
      ZS_ASSIGN_OR_RETURN(retried[retry[r]], w.Upload(decoded[r].span()));
    }
    return Status::Ok();
  }

  // One descriptor per box of every chunk of the wave from `begin` (decoded in `w`), uploaded, and
  // one scatter launch for them all on w's stream. The first wave's (on w_) adds the static
  // fields, the computed forcings and the padding.
  Status Scatter(size_t begin, GpuDecodeWorkspace& w, std::vector<ChunkRead>& wave,
                 const std::vector<uint64_t>& retried) {
    std::vector<gpu_abi::CopyDescriptor> copies;
    uint64_t max_elements = 0;
    for (size_t i = 0; i < wave.size(); ++i) {
      const size_t k = begin + i;
      if (!wave[i].status.ok()) {
        Fail(k, std::move(wave[i].status));
        continue;
      }
      const PlannedChunk& chunk = reads_.chunks[k];
      const internal::ArrayState& array = *context_.geometry.arrays[chunk.array];
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
        swap = on_gpu_[k] && producer_.codecs_[chunk.array]->big_endian;
      }
      context_.counters.bytes_decoded += ReadChunkBytes(array);
      for (const PlannedCopy& copy : chunk.copies) {
        copies.push_back(Describe(chunk.array, copy, source, swap, fill));
        max_elements = std::max(max_elements, copies.back().elements);
      }
    }
    if (begin == 0) {
      // The static fields' slabs, from their boxes kept in device memory (native byte order).
      for (const PlannedChunk& chunk : reads_.resident) {
        for (const PlannedCopy& copy : chunk.copies) {
          copies.push_back(Describe(chunk.array, copy, producer_.resident_device_[chunk.array],
                                    /*byte_swap=*/false, {}));
          max_elements = std::max(max_elements, copies.back().elements);
        }
      }
    }
    if (begin == 0) {
      ZS_RETURN_IF_ERROR(LaunchComputedForcings());
      // Patch padding with a value, in the scatter launch after the forcings' on the same stream
      // (the forcings fill whole slabs; no chunk's copy reaches the padding); after the tendency
      // targets where there are some (LaunchTendencies), which fill whole target slabs too.
      if (tendency_values_ == 0) AddPaddingCopies(copies, max_elements);
    }
    if (copies.empty()) return Status::Ok();
    ZS_ASSIGN_OR_RETURN(uint64_t descriptors,
                        w.Upload(std::as_bytes(std::span<const gpu_abi::CopyDescriptor>(copies))));
    return producer_.setup_.device.kernels->Scatter(
        descriptors, static_cast<uint32_t>(copies.size()), max_elements, w.stream());
  }

  // The padding boxes (BatchReadPlan::padding) of every channel, as copies from a fill value:
  // float64 through an identity transform, so that the value arrives rounded as on the CPU.
  void AddPaddingCopies(std::vector<gpu_abi::CopyDescriptor>& copies, uint64_t& max_elements) {
    if (reads_.padding.empty()) return;
    const LoaderGeometry& g = context_.geometry;
    const LoaderOptions& options = context_.options;
    const SlabTransform identity{0, 1, options.fill_nan, options.nan_fill, nullptr};
    std::byte fill[sizeof(double)];
    std::memcpy(fill, &g.padding.value, sizeof(double));
    const size_t rank = g.spatial_shape.size();
    DimArray strides{};
    uint64_t stride = 1;
    for (size_t a = rank; a-- > 0;) {
      strides[a] = stride;
      stride *= g.spatial_shape[a];
    }
    const size_t element_bytes = BatchDTypeSize(options.dtype);
    const auto add = [&](const BatchTensor& out, const BatchTensor& mask, uint64_t channels,
                         const PlannedPadding& box) {
      PlannedCopy copy;
      copy.rank = static_cast<uint8_t>(rank);
      copy.within_slab = box.offset;
      copy.shape = box.shape;
      for (uint64_t c = 0; c < channels; ++c) {
        const uint64_t slab = box.sample * channels + c;
        const uint64_t mask_address =
            options.fill_nan ? reinterpret_cast<uint64_t>(mask.data.data()) + slab * g.slab_elements
                             : 0;
        copies.push_back(MakeCopyDescriptor(
            0, DataType::kFloat64, std::span<const uint64_t>(box.shape.data(), rank), copy,
            reinterpret_cast<uint64_t>(out.data.data()) + slab * g.slab_elements * element_bytes,
            options.dtype, strides, identity, mask_address, /*byte_swap=*/false, fill));
        max_elements = std::max(max_elements, copies.back().elements);
      }
    };
    for (const PlannedPadding& box : reads_.padding) {
      add(BatchAccess::input(b_), BatchAccess::input_mask(b_), g.input_channels, box);
      if (!g.target_slabs.empty()) {
        add(BatchAccess::target(b_), BatchAccess::target_mask(b_), g.target_slabs.size(), box);
      }
    }
  }

  // The descriptor of one box of array `array`'s decoded chunk at device address `source`
  // (MakeCopyDescriptor's other arguments): into the batch, or for a tendency target or its base,
  // decoded aside and differenced once the batch is read (LaunchTendencies).
  gpu_abi::CopyDescriptor Describe(size_t array, const PlannedCopy& copy, uint64_t source,
                                   bool byte_swap, std::span<const std::byte> fill) {
    const LoaderGeometry& g = context_.geometry;
    const DataType type = g.arrays[array]->metadata.data_type;
    if (copy.target && tendency_values_ != 0) {
      const size_t channel = g.target_slabs[copy.slab].channel;
      const uint64_t aside =
          (copy.base ? tendency_bases_ : tendency_values_) +
          (copy.sample * g.target_slabs.size() + copy.slab) * g.slab_elements * sizeof(double);
      return MakeDecodedCopyDescriptor(source, type, context_.chunk_shapes[array], copy, aside,
                                       context_.slab_strides[channel], &g.cf[channel], byte_swap,
                                       fill);
    }
    const CopyTarget to = producer_.TargetOf(b_, copy);
    return MakeCopyDescriptor(source, type, context_.chunk_shapes[array], copy,
                              reinterpret_cast<uint64_t>(to.slab), context_.options.dtype,
                              *to.strides, to.transform, reinterpret_cast<uint64_t>(to.mask),
                              byte_swap, fill);
  }

  // The computed forcings' slabs (BatchReadPlan::computed), in one zs_forcings launch.
  Status LaunchComputedForcings() {
    if (reads_.computed.empty()) return Status::Ok();
    const LoaderGeometry& g = context_.geometry;
    const LoaderOptions& options = context_.options;
    const int latitude_axis = producer_.LatitudeAxis();
    const int longitude_axis = producer_.LongitudeAxis();
    const size_t element_bytes = BatchDTypeSize(options.dtype);
    const auto input = reinterpret_cast<uint64_t>(BatchAccess::input(b_).data.data());
    std::vector<gpu_abi::ForcingDescriptor> slabs;
    slabs.reserve(reads_.computed.size());
    for (const PlannedForcing& f : reads_.computed) {
      const ComputedSlab& slab = g.computed_slabs[f.slab];
      const uint64_t slab_index = f.sample * g.input_channels + slab.out_channel;
      gpu_abi::ForcingDescriptor d;
      d.target = input + slab_index * g.slab_elements * element_bytes;
      if (options.fill_nan) {
        d.mask = reinterpret_cast<uint64_t>(BatchAccess::input_mask(b_).data.data()) +
                 slab_index * g.slab_elements;
        d.flags = gpu_abi::kFillNan;
      }
      if (latitude_axis >= 0)
        d.latitudes = producer_.latitudes_device_ + f.latitude * sizeof(double);
      if (longitude_axis >= 0) {
        d.longitudes = producer_.longitudes_device_ + f.longitude * sizeof(double);
      }
      d.elements = g.slab_elements;
      d.rank = static_cast<uint32_t>(g.spatial_shape.size());
      for (size_t a = 0; a < g.spatial_shape.size(); ++a) d.shape[a] = g.spatial_shape[a];
      d.seconds = f.seconds;
      d.kind = slab.kind;
      d.latitude_axis = latitude_axis;
      d.longitude_axis = longitude_axis;
      d.batch_type = BatchTypeOf(options.dtype);
      slabs.push_back(d);
    }
    ZS_ASSIGN_OR_RETURN(
        uint64_t descriptors,
        w_.Upload(std::as_bytes(std::span<const gpu_abi::ForcingDescriptor>(slabs))));
    return producer_.setup_.device.kernels->Forcings(
        descriptors, static_cast<uint32_t>(slabs.size()), g.slab_elements, w_.stream());
  }

  // The target slabs of LoaderGeometry::base_slabs, after the last wave: each target's tendency
  // from its base, normalised with the tendency's statistics, into the batch, in one zs_tendencies
  // launch.
  Status LaunchTendencies() {
    if (tendency_values_ == 0) return Status::Ok();
    StageSpan stage(context_.timeline, "scatter", epoch_, index_);
    const LoaderGeometry& g = context_.geometry;
    const size_t slabs = bad.size() * g.target_slabs.size();
    std::vector<gpu_abi::TendencyDescriptor> tendencies(slabs);
    for (size_t i = 0; i < slabs; ++i) {
      PlannedCopy copy;
      copy.sample = static_cast<uint32_t>(i / g.target_slabs.size());
      copy.slab = static_cast<uint32_t>(i % g.target_slabs.size());
      copy.target = true;
      const CopyTarget to = producer_.TargetOf(b_, copy);
      gpu_abi::TendencyDescriptor& d = tendencies[i];
      const uint64_t offset = i * g.slab_elements * sizeof(double);
      d.values = tendency_values_ + offset;
      d.bases = tendency_bases_ + offset;
      d.target = reinterpret_cast<uint64_t>(to.slab);
      d.elements = g.slab_elements;
      d.mean = g.target_mean[copy.slab];
      d.inv_std = g.target_inv_std[copy.slab];
      d.nan_fill = to.transform.nan_fill;
      d.batch_type = BatchTypeOf(context_.options.dtype);
      if (to.transform.fill_nan) {
        d.mask = reinterpret_cast<uint64_t>(to.mask);
        d.flags = gpu_abi::kFillNan;
      }
    }
    ZS_ASSIGN_OR_RETURN(
        uint64_t descriptors,
        w_.Upload(std::as_bytes(std::span<const gpu_abi::TendencyDescriptor>(tendencies))));
    ZS_RETURN_IF_ERROR(producer_.setup_.device.kernels->Tendencies(
        descriptors, static_cast<uint32_t>(slabs), g.slab_elements, w_.stream()));
    Status status = w_.Synchronize();
    std::vector<gpu_abi::CopyDescriptor> padding;
    uint64_t max_elements = 0;
    AddPaddingCopies(padding, max_elements);
    if (status.ok() && !padding.empty()) {
      Result<uint64_t> uploaded =
          w_.Upload(std::as_bytes(std::span<const gpu_abi::CopyDescriptor>(padding)));
      status = uploaded.status();
      if (status.ok()) {
        status = producer_.setup_.device.kernels->Scatter(
            *uploaded, static_cast<uint32_t>(padding.size()), max_elements, w_.stream());
      }
      if (status.ok()) status = w_.Synchronize();
    }
    const uint64_t elapsed = stage.ElapsedNanoseconds();
    context_.counters.gpu_ns += elapsed;
    context_.counters.gpu_scatter_ns += elapsed;
    context_.counters.read_decode_ns += elapsed;
    return status;
  }

  void Fail(size_t k, Status error) {
    for (const PlannedCopy& copy : reads_.chunks[k].copies) bad[copy.sample] = 1;
    if (first_error.ok()) first_error = std::move(error);
  }

  GpuBatchProducer& producer_;
  BatchContext& context_;
  Batch& b_;
  const uint64_t epoch_, index_;
  const BatchReadPlan& reads_;
  const std::vector<size_t> wave_starts_;  // WaveStarts(reads_)
  // The first workspace: the batch's own launches (static fields, forcings, tendency targets,
  // padding) and every wave where there is no second.
  GpuDecodeWorkspace& w_;
  const std::array<GpuDecodeWorkspace*, 2> workspaces_;  // wave j on workspaces_[j % 2]
  std::vector<uint8_t> on_gpu_;  // per chunk: nvCOMP decodes it (decode_share.h)
  // LoaderGeometry::base_slabs: per sample and target slab, its values and its base's, decoded
  // (float64, slab layout) in device memory; 0 without tendency targets.
  uint64_t tendency_values_ = 0, tendency_bases_ = 0;
};

Result<std::shared_ptr<Batch>> GpuBatchProducer::Produce(const SamplePlan& epoch_plan,
                                                         uint64_t index, double cpu_share) {
  if (nvcomp_out_of_memory_.load()) cpu_share = 1;
  Result<std::shared_ptr<Batch>> batch = ProduceOnGpu(epoch_plan, index, cpu_share);
  if (!batch.ok() && cpu_share < 1 && decodes_with_nvcomp() && IsGpuOutOfMemory(batch.status())) {
    // What nvCOMP decodes takes GPU memory the CPU's share does not (the decoded chunks before
    // their scatter, its scratch): beside a consumer that fills the card, the batch again with
    // every chunk decoded by the worker threads, and every batch after it.
    GiveUpNvcomp();
    batch = ProduceOnGpu(epoch_plan, index, 1);
  }
  if (!batch.ok()) return ExplainGpuMemory(batch.status());
  return batch;
}

Result<std::shared_ptr<Batch>> GpuBatchProducer::ProduceOnGpu(const SamplePlan& epoch_plan,
                                                              uint64_t index, double cpu_share) {
  const uint64_t epoch = epoch_plan.epoch();
  StageSpan plan_stage(context_.timeline, "plan", epoch, index);
  ZS_ASSIGN_OR_RETURN(SampleBatch samples, epoch_plan.Batch(index));
  BatchReadPlan reads = PlanBatchReads(context_.geometry, samples);
  ZS_ASSIGN_OR_RETURN(auto allocated, AllocateGpuBatch(samples.size()));
  std::shared_ptr<Batch> batch = std::move(allocated.first);
  const DeviceBatchPool::Block block = allocated.second;
  Batch& b = *batch;
  FinishPlanning(b, epoch, index, samples, reads, plan_stage);

  // The waves' workspaces: a second where there is more than one wave, so that reads overlap the
  // GPU's work (Job).
  std::vector<size_t> wave_starts = WaveStarts(reads);
  std::vector<std::unique_ptr<GpuDecodeWorkspace>> workspaces;
  for (size_t i = 0; i < std::min<size_t>(2, std::max<size_t>(1, wave_starts.size())); ++i) {
    ZS_ASSIGN_OR_RETURN(std::unique_ptr<GpuDecodeWorkspace> workspace, TakeWorkspace());
    workspaces.push_back(std::move(workspace));
  }
  GpuDecodeWorkspace& w = *workspaces.front();
  ZS_RETURN_IF_ERROR(KeepResidentOnDevice(w.stream()));
  const auto uploaded = [&] {
    uint64_t bytes = 0;
    for (const auto& workspace : workspaces) bytes += workspace->bytes_uploaded();
    return bytes;
  };
  const auto decoded = [&] {
    uint64_t chunks = 0;
    for (const auto& workspace : workspaces) chunks += workspace->chunks_decoded();
    return chunks;
  };
  const auto in_place = [&] {
    uint64_t bytes = 0;
    for (const auto& workspace : workspaces) bytes += workspace->payload_bytes_in_place();
    return bytes;
  };
  const uint64_t uploaded_before = uploaded(), decoded_before = decoded(),
                 in_place_before = in_place();
  const CudaDriver* driver = setup_.device.driver;
  Job job(*this, b, epoch, index, reads, std::move(wave_starts), samples.size(), w,
          workspaces.size() > 1 ? workspaces.back().get() : nullptr);
  ZS_RETURN_IF_ERROR(job.AllocateTendencies());
  // The previous consumer of this batch's memory must be done with it, on every stream that
  // writes it.
  Status status;
  for (const auto& workspace : workspaces) {
    if (status.ok()) status = driver->StreamWaitEvent(workspace->stream(), block.released);
  }
  status = job.Run(std::move(status), cpu_share);
  context_.counters.bytes_to_gpu += uploaded() - uploaded_before;
  context_.counters.gpu_decoded_chunks += decoded() - decoded_before;
  context_.counters.bytes_staged_without_copy += in_place() - in_place_before;
  const bool skip = context_.options.skip_bad_samples;
  if (status.ok() && !job.first_error.ok() && skip) {
    CompactBatch(b, job.bad, [&](std::byte* to, const std::byte* from, size_t bytes) {
      if (status.ok()) {
        status = driver->CopyOnDevice(reinterpret_cast<uint64_t>(to),
                                      reinterpret_cast<uint64_t>(from), bytes, w.stream());
      }
    });
    if (status.ok()) status = w.Synchronize();
  }
  if (!status.ok()) {  // a workspace whose stream failed is not reused
    return std::move(status).WithContext("batch " + std::to_string(index) + " (epoch " +
                                         std::to_string(epoch) + ") on the GPU");
  }
  for (auto& workspace : workspaces) ReturnWorkspace(std::move(workspace));
  if (!job.first_error.ok() && !skip) {
    return BatchError(std::move(job.first_error), job.bad, samples, epoch, index);
  }
  return batch;
}

}  // namespace zarrstream::internal

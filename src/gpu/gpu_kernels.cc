#include "gpu/gpu_kernels.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>

#include "gpu/cuda_driver.h"

#if defined(ZARRSTREAM_GPU_KERNELS)
// Generated at build time from kernels.cu's fatbin (CMakeLists.txt).
extern "C" const unsigned char zarrstream_kernels_fatbin[];
#endif

namespace zarrstream {

namespace {

constexpr uint32_t kThreadsPerBlock = 256;
constexpr uint64_t kMaxGridY = 65535;

// x spreads one descriptor's work over blocks of which each thread does at least
// `items_per_thread`; y covers the descriptors (the kernels loop over them in steps of gridDim.y).
// The whole grid stays near `blocks_per_sm` blocks per multiprocessor: by default 64, enough to
// hide memory latency without idle blocks; fewer leave more of each multiprocessor to the kernels
// of a training step running beside the loader's.
void GridFor(const CudaDriver& driver, uint32_t count, uint64_t max_items,
             uint64_t items_per_thread, uint32_t blocks_per_sm, uint32_t grid[3]) {
  const auto sms = static_cast<uint64_t>(std::max(driver.multiprocessor_count(), 1));
  const uint64_t budget = std::max<uint64_t>(1, sms * blocks_per_sm);
  const uint64_t y = std::clamp<uint64_t>(count, 1, std::min(kMaxGridY, budget));
  uint64_t x =
      (max_items + kThreadsPerBlock * items_per_thread - 1) / (kThreadsPerBlock * items_per_thread);
  x = std::clamp<uint64_t>(x, 1, std::max<uint64_t>(1, budget / y));
  grid[0] = static_cast<uint32_t>(x);
  grid[1] = static_cast<uint32_t>(y);
  grid[2] = 1;
}

}  // namespace

struct LoadedKernels {
  GpuKernels* kernels = nullptr;
  std::string reason;
};

class GpuKernelsLoader {
 public:
  // `driver` is not null (ForDevice checks).
  static LoadedKernels Load(const CudaDriver* driver) {
    LoadedKernels loaded;
#if defined(ZARRSTREAM_GPU_KERNELS)
    Result<void*> module = driver->LoadModule(zarrstream_kernels_fatbin);
    if (!module.ok()) {
      loaded.reason = "loading zarrstream's kernels: " + module.status().message();
      return loaded;
    }
    Result<void*> scatter = driver->GetFunction(*module, "zs_scatter");
    Result<void*> forcings = driver->GetFunction(*module, "zs_forcings");
    Result<void*> tendencies = driver->GetFunction(*module, "zs_tendencies");
    Result<void*> unshuffle = driver->GetFunction(*module, "zs_unshuffle");
    Result<void*> adler32 = driver->GetFunction(*module, "zs_adler32");
    for (const Result<void*>* function : {&scatter, &forcings, &tendencies, &unshuffle, &adler32}) {
      if (!function->ok()) {
        loaded.reason = function->status().message();
        return loaded;
      }
    }
    Result<uint32_t> blocks_per_sm = GpuKernels::BlocksPerSmFromEnvironment();
    if (!blocks_per_sm.ok()) {
      loaded.reason = blocks_per_sm.status().message();
      return loaded;
    }
    loaded.kernels = new GpuKernels();  // lives for the process, as the module stays loaded
    loaded.kernels->driver_ = driver;
    loaded.kernels->blocks_per_sm_ = *blocks_per_sm;
    loaded.kernels->scatter_ = *scatter;
    loaded.kernels->forcings_ = *forcings;
    loaded.kernels->tendencies_ = *tendencies;
    loaded.kernels->unshuffle_ = *unshuffle;
    loaded.kernels->adler32_ = *adler32;
#else
    (void)driver;
    loaded.reason =
        "this build of zarrstream has no CUDA kernels (nvcc was not found when it "
        "was built)";
#endif
    return loaded;
  }
};

Result<const GpuKernels*> GpuKernels::ForDevice(const CudaDriver* driver) {
  if (driver == nullptr) return CudaError("no CUDA kernels: " + CudaDriver::UnavailableReason());
  static std::mutex mutex;
  // Loaded once per device and kept for the process: never destroyed, so a thread still running at
  // exit finds it intact (and leak checkers see the kernels reachable).
  static auto& by_device = *new std::map<int, LoadedKernels>();
  std::lock_guard lock(mutex);
  auto [it, made] = by_device.try_emplace(driver->ordinal());
  if (made) it->second = GpuKernelsLoader::Load(driver);
  if (it->second.kernels == nullptr) {
    return CudaError("no CUDA kernels on device " + std::to_string(driver->ordinal()) + ": " +
                     it->second.reason);
  }
  return it->second.kernels;
}

Result<uint32_t> GpuKernels::BlocksPerSmFromEnvironment() {
  const char* value = std::getenv("ZARRSTREAM_GPU_BLOCKS_PER_SM");
  if (value == nullptr || *value == '\0') return GpuKernels::kDefaultBlocksPerSm;
  const bool digit_first = *value >= '0' && *value <= '9';  // strtoul would skip spaces and signs
  char* end = nullptr;
  const unsigned long blocks = std::strtoul(value, &end, 10);
  if (!digit_first || *end != '\0' || blocks < 1 || blocks > kDefaultBlocksPerSm) {
    return ConfigError("ZARRSTREAM_GPU_BLOCKS_PER_SM='" + std::string(value) +
                       "': expected a whole number from 1 to 64");
  }
  return static_cast<uint32_t>(blocks);
}

bool GpuKernels::Compiled() {
#if defined(ZARRSTREAM_GPU_KERNELS)
  return true;
#else
  return false;
#endif
}

Status GpuKernels::Scatter(uint64_t descriptors, uint32_t count, uint64_t max_elements,
                           void* stream) const {
  if (count == 0) return Status::Ok();
  uint32_t grid[3];
  GridFor(*driver_, count, max_elements, 4, blocks_per_sm_, grid);
  void* arguments[] = {&descriptors, &count};
  return driver_->Launch(scatter_, grid, kThreadsPerBlock, stream, arguments);
}

Status GpuKernels::Forcings(uint64_t descriptors, uint32_t count, uint64_t max_elements,
                            void* stream) const {
  if (count == 0) return Status::Ok();
  uint32_t grid[3];
  GridFor(*driver_, count, max_elements, 1, blocks_per_sm_, grid);
  void* arguments[] = {&descriptors, &count};
  return driver_->Launch(forcings_, grid, kThreadsPerBlock, stream, arguments);
}

Status GpuKernels::Tendencies(uint64_t descriptors, uint32_t count, uint64_t max_elements,
                              void* stream) const {
  if (count == 0) return Status::Ok();
  uint32_t grid[3];
  GridFor(*driver_, count, max_elements, 4, blocks_per_sm_, grid);
  void* arguments[] = {&descriptors, &count};
  return driver_->Launch(tendencies_, grid, kThreadsPerBlock, stream, arguments);
}

Status GpuKernels::Unshuffle(uint64_t descriptors, uint32_t count, uint64_t max_bytes,
                             void* stream) const {
  if (count == 0) return Status::Ok();
  uint32_t grid[3];
  GridFor(*driver_, count, max_bytes, 8, blocks_per_sm_, grid);
  void* arguments[] = {&descriptors, &count};
  return driver_->Launch(unshuffle_, grid, kThreadsPerBlock, stream, arguments);
}

Status GpuKernels::Adler32(uint64_t descriptors, uint32_t count, uint64_t results,
                           void* stream) const {
  if (count == 0) return Status::Ok();
  // One block per stream: its threads' partial sums meet in the block, with no second pass.
  uint32_t grid[3] = {1, static_cast<uint32_t>(std::min<uint64_t>(count, kMaxGridY)), 1};
  void* arguments[] = {&descriptors, &count, &results};
  return driver_->Launch(adler32_, grid, kThreadsPerBlock, stream, arguments);
}

}  // namespace zarrstream

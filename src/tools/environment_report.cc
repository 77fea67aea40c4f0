#include "tools/environment_report.h"

#include <blosc.h>
#include <bzlib.h>
#include <curl/curl.h>
#include <dlfcn.h>
#include <libdeflate.h>
#include <lz4.h>
#include <openssl/crypto.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include <fstream>
#include <string>
#include <thread>

#include "gpu/cuda_driver.h"
#include "gpu/gpu_kernels.h"
#include "gpu/nvcomp.h"
#include "store/curl_transport.h"
#include "util/block_cache.h"
#include "util/nvtx_range.h"
#include "util/thread_pool.h"
#include "zarrstream/loader.h"

namespace zarrstream::tools {

namespace {

std::string CpuModel() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("model name", 0) == 0) {
      const size_t colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
    }
  }
  return "";
}

nlohmann::json CpuFeatures() {
  nlohmann::json features = nlohmann::json::object();
#if defined(__x86_64__)
  __builtin_cpu_init();
  features["sse4.2"] = __builtin_cpu_supports("sse4.2") != 0;
  features["avx2"] = __builtin_cpu_supports("avx2") != 0;
  features["avx512f"] = __builtin_cpu_supports("avx512f") != 0;
#endif
  return features;
}

std::string UpTo(const char* text, char end) {
  const std::string s(text);
  return s.substr(0, s.find(end));
}

// Whether the shared library `name` can be loaded here (it is unloaded again).
bool Loadable(const char* name) {
  void* handle = dlopen(name, RTLD_LAZY | RTLD_LOCAL);
  if (handle == nullptr) return false;
  dlclose(handle);
  return true;
}

}  // namespace

nlohmann::json EnvironmentReport() {
  nlohmann::json report;
  report["zarrstream_version"] = ZARRSTREAM_VERSION;
  // Whether nvcc built the kernels into this library; the driver and nvCOMP load at run time.
  report["cuda_compiled"] = GpuKernels::Compiled();
  const CudaDriver* driver = CudaDriver::Get();
  if (driver != nullptr) {
    nlohmann::json gpu;
    gpu["devices"] = driver->device_count();
    if (auto name = driver->DeviceName(0); name.ok()) gpu["name"] = *name;
    if (auto memory = driver->DeviceMemoryBytes(0); memory.ok()) gpu["memory_bytes"] = *memory;
    gpu["driver_cuda_version"] = std::to_string(driver->driver_version() / 1000) + "." +
                                 std::to_string(driver->driver_version() % 1000 / 10);
    report["gpu"] = gpu;
    report["gpu_unavailable_reason"] = nullptr;
  } else {
    report["gpu"] = nullptr;
    report["gpu_unavailable_reason"] = CudaDriver::UnavailableReason();
  }
  const Nvcomp* nvcomp = driver != nullptr ? Nvcomp::Get() : nullptr;
  report["nvcomp_version"] = nvcomp != nullptr ? nlohmann::json(nvcomp->version()) : nullptr;
  report["nvcomp_library"] = nvcomp != nullptr ? nlohmann::json(nvcomp->library()) : nullptr;
  report["nvcomp_unavailable_reason"] =
      nvcomp != nullptr ? nlohmann::json(nullptr) : nlohmann::json(Nvcomp::UnavailableReason());
  const bool gpu_batches = GpuBatchesUnavailableReason().empty();
  report["gpu_batches"] = gpu_batches;
  report["gpu_batches_unavailable_reason"] =
      gpu_batches ? nlohmann::json(nullptr) : nlohmann::json(GpuBatchesUnavailableReason());
  // Whether chunks may decode on the GPU here; which chains do is per array (`doctor STORE`).
  report["gpu_decoding"] = gpu_batches && nvcomp != nullptr;
  // The loader reads into pinned staging, not through cuFile: see docs/benchmarks.md ("GPU
  // batches").
  report["gds"] = {{"cufile_library", Loadable("libcufile.so.0")}, {"used", false}};
  report["nvtx"] = NvtxRange::Compiled();
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_size = sysconf(_SC_PAGESIZE);
  report["cpu"] = {{"model", CpuModel()},
                   {"cores", std::thread::hardware_concurrency()},
                   {"usable_cores", UsableCores()},
                   {"features", CpuFeatures()}};
  report["memory_bytes"] = pages > 0 && page_size > 0
                               ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page_size)
                               : 0;
  // What remote reads will use (the environment over the defaults); a malformed setting is
  // reported as the error opening a remote store would raise.
  if (Result<TransportOptions> http = TransportOptions::FromEnvironment(); http.ok()) {
    report["http"] = {{"io_threads", http->io_threads},
                      {"max_in_flight", http->max_in_flight},
                      {"max_in_flight_per_host", http->max_in_flight_per_host}};
  } else {
    report["http"] = {{"error", http.status().ToString()}};
  }
  report["buffer_cache_bytes"] = internal::BlockCacheLimitBytes();
  // The grid budget of the loader's GPU kernels (gpu_kernels.h); a malformed setting is reported as
  // the error opening a loader on a GPU would raise.
  if (Result<uint32_t> blocks = GpuKernels::BlocksPerSmFromEnvironment(); blocks.ok()) {
    report["gpu_grids"] = {{"blocks_per_sm", *blocks}};
  } else {
    report["gpu_grids"] = {{"error", blocks.status().ToString()}};
  }
  const unsigned lz4 = static_cast<unsigned>(LZ4_versionNumber());
  report["libraries"] = {
      {"zstd", ZSTD_versionString()},
      {"lz4", std::to_string(lz4 / 10000) + "." + std::to_string(lz4 / 100 % 100) + "." +
                  std::to_string(lz4 % 100)},
      {"blosc", blosc_get_version_string()},
      {"libdeflate", LIBDEFLATE_VERSION_STRING},
      {"zlib", zlibVersion()},
      {"bzip2", UpTo(BZ2_bzlibVersion(), ',')},  // "1.0.8, 13-Jul-2019"
      {"curl", curl_version_info(CURLVERSION_NOW)->version},
      {"openssl", OpenSSL_version(OPENSSL_VERSION_STRING)},
  };
  return report;
}

}  // namespace zarrstream::tools

#include "gpu/cuda_driver.h"

#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "util/format.h"
#include "util/populate_pages.h"

namespace zarrstream {

namespace {

// The driver's C types, as its ABI defines them.
using CUresult = int;
using CUdevice = int;
using CUcontext = void*;
using CUdeviceptr = unsigned long long;
using CUstream = void*;
using CUevent = void*;
using CUmodule = void*;
using CUfunction = void*;
constexpr CUresult kCudaSuccess = 0;
constexpr unsigned kStreamNonBlocking = 0x1;
constexpr unsigned kEventDisableTiming = 0x2;
constexpr int kAttributeMultiprocessorCount = 16;
constexpr CUresult kCudaErrorNoDevice = 100;
constexpr unsigned kMemHostRegisterPortable = 0x01;
// Threads that fault a range's pages in before it is pinned. Measured on an H100 host with 16
// cores (512 MiB of fresh memory on transparent huge pages): cuMemHostRegister alone took 184 ms,
// three such ranges pinned from three threads at once 685 ms (the driver pins one at a time);
// after faulting in with 16 threads, 98 ms + 40 ms, and the three at once (5 threads each) 172 ms.
constexpr unsigned kMaxPopulateThreads = 8;

}  // namespace

struct CudaDriver::Api {
  CUresult (*cuInit)(unsigned) = nullptr;
  CUresult (*cuDriverGetVersion)(int*) = nullptr;
  CUresult (*cuDeviceGetCount)(int*) = nullptr;
  CUresult (*cuDeviceGet)(CUdevice*, int) = nullptr;
  CUresult (*cuDeviceGetName)(char*, int, CUdevice) = nullptr;
  CUresult (*cuDeviceTotalMem)(size_t*, CUdevice) = nullptr;
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext*, CUdevice) = nullptr;
  CUresult (*cuCtxPushCurrent)(CUcontext) = nullptr;
  CUresult (*cuCtxPopCurrent)(CUcontext*) = nullptr;
  CUresult (*cuMemHostRegister)(void*, size_t, unsigned) = nullptr;
  CUresult (*cuMemHostUnregister)(void*) = nullptr;
  CUresult (*cuMemHostGetFlags)(unsigned*, void*) = nullptr;
  CUresult (*cuGetErrorName)(CUresult, const char**) = nullptr;
  CUresult (*cuGetErrorString)(CUresult, const char**) = nullptr;
  CUresult (*cuDeviceGetAttribute)(int*, int, CUdevice) = nullptr;
  CUresult (*cuMemAlloc)(CUdeviceptr*, size_t) = nullptr;
  CUresult (*cuMemGetInfo)(size_t*, size_t*) = nullptr;
  CUresult (*cuMemFree)(CUdeviceptr) = nullptr;
  CUresult (*cuStreamCreate)(CUstream*, unsigned) = nullptr;
  CUresult (*cuStreamDestroy)(CUstream) = nullptr;
  CUresult (*cuStreamSynchronize)(CUstream) = nullptr;
  CUresult (*cuStreamWaitEvent)(CUstream, CUevent, unsigned) = nullptr;
  CUresult (*cuMemcpyHtoDAsync)(CUdeviceptr, const void*, size_t, CUstream) = nullptr;
  CUresult (*cuMemcpyDtoHAsync)(void*, CUdeviceptr, size_t, CUstream) = nullptr;
  CUresult (*cuMemcpyDtoDAsync)(CUdeviceptr, CUdeviceptr, size_t, CUstream) = nullptr;
  CUresult (*cuEventCreate)(CUevent*, unsigned) = nullptr;
  CUresult (*cuEventDestroy)(CUevent) = nullptr;
  CUresult (*cuEventRecord)(CUevent, CUstream) = nullptr;
  CUresult (*cuEventSynchronize)(CUevent) = nullptr;
  CUresult (*cuModuleLoadData)(CUmodule*, const void*) = nullptr;
  CUresult (*cuModuleGetFunction)(CUfunction*, CUmodule, const char*) = nullptr;
  CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                             unsigned, CUstream, void**, void**) = nullptr;
};

namespace {

// "cuMemHostRegister failed: CUDA_ERROR_OUT_OF_MEMORY (out of memory)".
Status DriverError(const CudaDriver::Api& api, const char* call, CUresult result) {
  const char* name = nullptr;
  const char* text = nullptr;
  if (api.cuGetErrorName == nullptr || api.cuGetErrorName(result, &name) != kCudaSuccess) {
    name = nullptr;
  }
  if (api.cuGetErrorString == nullptr || api.cuGetErrorString(result, &text) != kCudaSuccess) {
    text = nullptr;
  }
  std::string message = std::string(call) + " failed: ";
  message += name != nullptr ? name : "CUresult " + std::to_string(result);
  if (text != nullptr) message += std::string(" (") + text + ")";
  return CudaError(std::move(message));
}

template <typename Fn>
bool Resolve(void* library, const char* symbol, Fn* fn) {
  *fn = reinterpret_cast<Fn>(dlsym(library, symbol));
  return *fn != nullptr;
}

}  // namespace

// The driver library, initialised; no device's context is made until a device is asked for.
struct LoadedDriver {
  const CudaDriver::Api* api = nullptr;  // null: unavailable
  int device_count = 0;
  int version = 0;
  std::string reason;  // why `api` is null
};

class CudaDriverLoader {
 public:
  static LoadedDriver Load();
  // The instance for device `ordinal` (< count): retains its primary context for the process.
  static Result<const CudaDriver*> MakeForDevice(const LoadedDriver& loaded, int ordinal);
};

template <typename Call>
Status CudaDriver::WithContext(const Call& call) const {
  CUresult result = api_->cuCtxPushCurrent(static_cast<CUcontext>(context_));
  if (result != kCudaSuccess) return DriverError(*api_, "cuCtxPushCurrent", result);
  Status status = call();
  CUcontext popped = nullptr;
  result = api_->cuCtxPopCurrent(&popped);
  if (status.ok() && result != kCudaSuccess) return DriverError(*api_, "cuCtxPopCurrent", result);
  return status;
}

LoadedDriver CudaDriverLoader::Load() {
  LoadedDriver loaded;
  void* library = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    loaded.reason = "the CUDA driver (libcuda.so.1) is not installed";
    return loaded;
  }
  static CudaDriver::Api api;
  const bool complete =
      Resolve(library, "cuInit", &api.cuInit) &&
      Resolve(library, "cuDriverGetVersion", &api.cuDriverGetVersion) &&
      Resolve(library, "cuDeviceGetCount", &api.cuDeviceGetCount) &&
      Resolve(library, "cuDeviceGet", &api.cuDeviceGet) &&
      Resolve(library, "cuDeviceGetName", &api.cuDeviceGetName) &&
      Resolve(library, "cuDeviceTotalMem_v2", &api.cuDeviceTotalMem) &&
      Resolve(library, "cuDevicePrimaryCtxRetain", &api.cuDevicePrimaryCtxRetain) &&
      Resolve(library, "cuCtxPushCurrent_v2", &api.cuCtxPushCurrent) &&
      Resolve(library, "cuCtxPopCurrent_v2", &api.cuCtxPopCurrent) &&
      Resolve(library, "cuMemHostRegister_v2", &api.cuMemHostRegister) &&
      Resolve(library, "cuMemHostUnregister", &api.cuMemHostUnregister) &&
      Resolve(library, "cuMemHostGetFlags", &api.cuMemHostGetFlags) &&
      Resolve(library, "cuGetErrorName", &api.cuGetErrorName) &&
      Resolve(library, "cuGetErrorString", &api.cuGetErrorString) &&
      Resolve(library, "cuDeviceGetAttribute", &api.cuDeviceGetAttribute) &&
      Resolve(library, "cuMemAlloc_v2", &api.cuMemAlloc) &&
      Resolve(library, "cuMemGetInfo_v2", &api.cuMemGetInfo) &&
      Resolve(library, "cuMemFree_v2", &api.cuMemFree) &&
      Resolve(library, "cuStreamCreate", &api.cuStreamCreate) &&
      Resolve(library, "cuStreamDestroy_v2", &api.cuStreamDestroy) &&
      Resolve(library, "cuStreamSynchronize", &api.cuStreamSynchronize) &&
      Resolve(library, "cuStreamWaitEvent", &api.cuStreamWaitEvent) &&
      Resolve(library, "cuMemcpyHtoDAsync_v2", &api.cuMemcpyHtoDAsync) &&
      Resolve(library, "cuMemcpyDtoHAsync_v2", &api.cuMemcpyDtoHAsync) &&
      Resolve(library, "cuMemcpyDtoDAsync_v2", &api.cuMemcpyDtoDAsync) &&
      Resolve(library, "cuEventCreate", &api.cuEventCreate) &&
      Resolve(library, "cuEventDestroy_v2", &api.cuEventDestroy) &&
      Resolve(library, "cuEventRecord", &api.cuEventRecord) &&
      Resolve(library, "cuEventSynchronize", &api.cuEventSynchronize) &&
      Resolve(library, "cuModuleLoadData", &api.cuModuleLoadData) &&
      Resolve(library, "cuModuleGetFunction", &api.cuModuleGetFunction) &&
      Resolve(library, "cuLaunchKernel", &api.cuLaunchKernel);
  if (!complete) {
    loaded.reason = "libcuda.so.1 lacks an entry point zarrstream needs (driver too old?)";
    return loaded;
  }
  CUresult result = api.cuInit(0);
  if (result == kCudaErrorNoDevice) {
    loaded.reason = "no CUDA device";
    return loaded;
  }
  if (result != kCudaSuccess) {
    loaded.reason = DriverError(api, "cuInit", result).message();
    return loaded;
  }
  int count = 0;
  result = api.cuDeviceGetCount(&count);
  if (result != kCudaSuccess || count == 0) {
    loaded.reason = result != kCudaSuccess ? DriverError(api, "cuDeviceGetCount", result).message()
                                           : "no CUDA device";
    return loaded;
  }
  (void)api.cuDriverGetVersion(&loaded.version);
  loaded.device_count = count;
  loaded.api = &api;
  return loaded;
}

Result<const CudaDriver*> CudaDriverLoader::MakeForDevice(const LoadedDriver& loaded, int ordinal) {
  const CudaDriver::Api& api = *loaded.api;
  CUdevice device = 0;
  CUcontext context = nullptr;
  CUresult result = api.cuDeviceGet(&device, ordinal);
  if (result == kCudaSuccess) result = api.cuDevicePrimaryCtxRetain(&context, device);
  if (result != kCudaSuccess) {
    return DriverError(api, "cuDevicePrimaryCtxRetain", result)
        .WithContext("CUDA device " + std::to_string(ordinal));
  }
  int multiprocessors = 0;
  (void)api.cuDeviceGetAttribute(&multiprocessors, kAttributeMultiprocessorCount, device);
  // Lives for the process: the primary context stays retained and the library loaded.
  auto* driver = new CudaDriver();
  driver->api_ = &api;
  driver->context_ = context;
  driver->ordinal_ = ordinal;
  driver->device_count_ = loaded.device_count;
  driver->driver_version_ = loaded.version;
  driver->multiprocessor_count_ = multiprocessors;
  return driver;
}

namespace {

const LoadedDriver& Instance() {
  static const LoadedDriver loaded = CudaDriverLoader::Load();
  return loaded;
}

}  // namespace

bool CudaDriver::Present() { return Instance().api != nullptr; }

const CudaDriver* CudaDriver::Get() {
  Result<const CudaDriver*> first = ForDevice(0);
  return first.ok() ? *first : nullptr;
}

Result<const CudaDriver*> CudaDriver::ForDevice(int ordinal) {
  const LoadedDriver& loaded = Instance();
  if (loaded.api == nullptr) return CudaError(loaded.reason);
  if (ordinal < 0 || ordinal >= loaded.device_count) {
    return CudaError("CUDA device " + std::to_string(ordinal) +
                     " does not exist: this machine has " + std::to_string(loaded.device_count) +
                     " (cuda:0 to cuda:" + std::to_string(loaded.device_count - 1) + ")");
  }
  // One instance per device, made at first use (a data-parallel rank never touches the other
  // ranks' devices: each context takes GPU memory) and kept for the process.
  // The slots are never destroyed either: the drivers stay reachable from them until exit.
  static auto* const made =
      new std::atomic<const CudaDriver*>[static_cast<size_t>(loaded.device_count)]();
  std::atomic<const CudaDriver*>& slot = made[static_cast<size_t>(ordinal)];
  if (const CudaDriver* driver = slot.load(std::memory_order_acquire)) return driver;
  static std::mutex mutex;
  std::lock_guard lock(mutex);
  if (const CudaDriver* driver = slot.load(std::memory_order_relaxed)) return driver;
  ZS_ASSIGN_OR_RETURN(const CudaDriver* driver, CudaDriverLoader::MakeForDevice(loaded, ordinal));
  slot.store(driver, std::memory_order_release);
  return driver;
}

std::string CudaDriver::UnavailableReason() {
  if (!Present()) return Instance().reason;
  Result<const CudaDriver*> first = ForDevice(0);
  return first.ok() ? std::string() : first.status().message();
}

Result<std::string> CudaDriver::DeviceName(int ordinal) const {
  CUdevice device = 0;
  CUresult result = api_->cuDeviceGet(&device, ordinal);
  if (result != kCudaSuccess) return DriverError(*api_, "cuDeviceGet", result);
  char name[256] = {};
  result = api_->cuDeviceGetName(name, sizeof(name) - 1, device);
  if (result != kCudaSuccess) return DriverError(*api_, "cuDeviceGetName", result);
  return std::string(name);
}

Result<uint64_t> CudaDriver::DeviceMemoryBytes(int ordinal) const {
  CUdevice device = 0;
  CUresult result = api_->cuDeviceGet(&device, ordinal);
  if (result != kCudaSuccess) return DriverError(*api_, "cuDeviceGet", result);
  size_t bytes = 0;
  result = api_->cuDeviceTotalMem(&bytes, device);
  if (result != kCudaSuccess) return DriverError(*api_, "cuDeviceTotalMem", result);
  return uint64_t{bytes};
}

Status CudaDriver::RegisterHost(void* data, size_t size) const {
  PopulatePages(data, size,
                std::clamp(std::thread::hardware_concurrency(), 1u, kMaxPopulateThreads));
  return WithContext([&] {
    const CUresult result = api_->cuMemHostRegister(data, size, kMemHostRegisterPortable);
    if (result != kCudaSuccess) {
      return DriverError(*api_, "cuMemHostRegister", result)
          .WithContext("page-locking " + std::to_string(size) + " bytes of batch memory");
    }
    return Status::Ok();
  });
}

Status CudaDriver::UnregisterHost(void* data) const {
  return WithContext([&] {
    const CUresult result = api_->cuMemHostUnregister(data);
    if (result != kCudaSuccess) return DriverError(*api_, "cuMemHostUnregister", result);
    return Status::Ok();
  });
}

bool CudaDriver::IsPageLocked(const void* data) const {
  unsigned flags = 0;
  bool locked = false;
  (void)WithContext([&] {
    locked = api_->cuMemHostGetFlags(&flags, const_cast<void*>(data)) == kCudaSuccess;
    return Status::Ok();
  });
  return locked;
}

Status CudaDriver::InContext(const std::function<Status()>& call) const {
  return WithContext(call);
}

namespace {

// The call `name` with `args`, its failure a kCuda error naming it.
#define ZS_CUDA_CALL(name, ...)                                                       \
  WithContext([&] {                                                                   \
    const CUresult result = api_->name(__VA_ARGS__);                                  \
    return result == kCudaSuccess ? Status::Ok() : DriverError(*api_, #name, result); \
  })

}  // namespace

Result<uint64_t> CudaDriver::AllocateDevice(size_t bytes) const {
  CUdeviceptr address = 0;
  Status status = ZS_CUDA_CALL(cuMemAlloc, &address, bytes);
  if (!status.ok()) {
    std::string context = "allocating " + FormatBytes(static_cast<double>(bytes)) +
                          " of GPU memory on cuda:" + std::to_string(ordinal_);
    if (Result<MemoryInfo> memory = DeviceMemory(); memory.ok()) {
      context += " (" + FormatBytes(static_cast<double>(memory->free_bytes)) + " free of " +
                 FormatBytes(static_cast<double>(memory->total_bytes)) + ")";
    }
    return std::move(status).WithContext(context);
  }
  return uint64_t{address};
}

Result<CudaDriver::MemoryInfo> CudaDriver::DeviceMemory() const {
  size_t free_bytes = 0, total_bytes = 0;
  ZS_RETURN_IF_ERROR(ZS_CUDA_CALL(cuMemGetInfo, &free_bytes, &total_bytes));
  return MemoryInfo{free_bytes, total_bytes};
}

void CudaDriver::FreeDevice(uint64_t address) const {
  if (address != 0) (void)ZS_CUDA_CALL(cuMemFree, address);
}

Result<void*> CudaDriver::CreateStream() const {
  CUstream stream = nullptr;
  ZS_RETURN_IF_ERROR(ZS_CUDA_CALL(cuStreamCreate, &stream, kStreamNonBlocking));
  return stream;
}

void CudaDriver::DestroyStream(void* stream) const {
  if (stream != nullptr) (void)ZS_CUDA_CALL(cuStreamDestroy, stream);
}

Status CudaDriver::SynchronizeStream(void* stream) const {
  return ZS_CUDA_CALL(cuStreamSynchronize, stream);
}

Status CudaDriver::CopyToDevice(uint64_t target, const void* source, size_t bytes,
                                void* stream) const {
  if (bytes == 0) return Status::Ok();
  return ZS_CUDA_CALL(cuMemcpyHtoDAsync, target, source, bytes, stream);
}

Status CudaDriver::CopyToHost(void* target, uint64_t source, size_t bytes, void* stream) const {
  if (bytes == 0) return Status::Ok();
  return ZS_CUDA_CALL(cuMemcpyDtoHAsync, target, source, bytes, stream);
}

Status CudaDriver::CopyOnDevice(uint64_t target, uint64_t source, size_t bytes,
                                void* stream) const {
  if (bytes == 0) return Status::Ok();
  return ZS_CUDA_CALL(cuMemcpyDtoDAsync, target, source, bytes, stream);
}

Result<void*> CudaDriver::CreateEvent() const {
  CUevent event = nullptr;
  ZS_RETURN_IF_ERROR(ZS_CUDA_CALL(cuEventCreate, &event, kEventDisableTiming));
  return event;
}

void CudaDriver::DestroyEvent(void* event) const {
  if (event != nullptr) (void)ZS_CUDA_CALL(cuEventDestroy, event);
}

Status CudaDriver::RecordEvent(void* event, void* stream) const {
  return ZS_CUDA_CALL(cuEventRecord, event, stream);
}

Status CudaDriver::StreamWaitEvent(void* stream, void* event) const {
  return ZS_CUDA_CALL(cuStreamWaitEvent, stream, event, 0u);
}

Status CudaDriver::SynchronizeEvent(void* event) const {
  return ZS_CUDA_CALL(cuEventSynchronize, event);
}

Result<void*> CudaDriver::LoadModule(const void* image) const {
  CUmodule module = nullptr;
  ZS_RETURN_IF_ERROR(ZS_CUDA_CALL(cuModuleLoadData, &module, image));
  return module;
}

Result<void*> CudaDriver::GetFunction(void* module, const char* name) const {
  CUfunction function = nullptr;
  Status status = ZS_CUDA_CALL(cuModuleGetFunction, &function, module, name);
  if (!status.ok()) return std::move(status).WithContext(std::string("kernel ") + name);
  return function;
}

Status CudaDriver::Launch(void* function, const uint32_t grid[3], uint32_t block_x, void* stream,
                          void** arguments) const {
  return ZS_CUDA_CALL(cuLaunchKernel, function, grid[0], grid[1], grid[2], block_x, 1u, 1u, 0u,
                      stream, arguments, nullptr);
}

#undef ZS_CUDA_CALL

}  // namespace zarrstream

// The CUDA driver API, loaded at run time (libcuda.so.1), so that zarrstream builds without CUDA
// and runs on machines with no GPU or driver. The base of the GPU layer (src/gpu; see "Layers" in
// docs/architecture.md): device discovery, page-locking the host memory batches and staging buffers
// live in, device memory, streams, events, copies and kernel launches.
//
// Only the few entry points used are declared here (the driver's C ABI is stable); nothing
// includes cuda.h.
//
// An instance is bound to one device (its primary context, the one the CUDA runtime and PyTorch
// use): CudaDriver::Get() is device 0's, ForDevice(n) device n's.
//
// Threads: every member is thread-safe. The driver is loaded and initialised once per process, an
// instance made once per device, when first asked for, and kept for the process. Host registrations
// are made with the PORTABLE flag, so the memory is page-locked for every context and device
// (PyTorch's included).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "zarrstream/status.h"

namespace zarrstream {

// Device memory at `address` as a `T*`, for the APIs that take device pointers (nvCOMP's arguments,
// a batch's tensors). The driver API gives device memory as integer addresses (CUdeviceptr); the
// pointer is never dereferenced on the host.
template <typename T>
T* DevicePointer(uint64_t address) {
  // NOLINTNEXTLINE(performance-no-int-to-ptr): a CUdeviceptr is an integer in the driver's ABI.
  return reinterpret_cast<T*>(address);
}

class CudaDriver {
 public:
  // Whether the driver loaded and initialised with at least one device (no context is made);
  // UnavailableReason() otherwise says why ("libcuda.so.1 not found", "no CUDA device", the
  // driver's error).
  static bool Present();
  // Device 0's instance, or null; UnavailableReason() then says why.
  static const CudaDriver* Get();
  static std::string UnavailableReason();
  // Device `ordinal`'s instance, made (its primary context retained) at the first call for that
  // device only; kCuda errors when the driver is unavailable or no such device exists (the
  // message says how many there are).
  static Result<const CudaDriver*> ForDevice(int ordinal);

  // The device this instance works on.
  int ordinal() const { return ordinal_; }

  int device_count() const { return device_count_; }
  // "NVIDIA H100 80GB HBM3" for device `ordinal`, and its memory in bytes.
  Result<std::string> DeviceName(int ordinal) const;
  Result<uint64_t> DeviceMemoryBytes(int ordinal) const;
  // The driver's CUDA version, e.g. 13000 for 13.0.
  int driver_version() const { return driver_version_; }

  // Page-locks [data, data + size) for DMA by every device (cuMemHostRegister, PORTABLE). The
  // range must stay allocated until UnregisterHost(data). A large range's pages are first faulted
  // in by several threads (PopulatePages): no other thread may write it during the call. Errors
  // are kCuda and name the call.
  Status RegisterHost(void* data, size_t size) const;
  Status UnregisterHost(void* data) const;
  // Whether `data` lies in page-locked host memory (registered or allocated pinned).
  bool IsPageLocked(const void* data) const;

  // The device's memory, streams, events, copies and kernels: what the GPU path is built on. Device
  // addresses are CUdeviceptr values; streams, events, modules and functions are the driver's
  // handles (CUstream, CUevent, CUmodule, CUfunction). Copies and launches are asynchronous on
  // `stream`; host memory they read or write must stay allocated (and, to overlap, page-locked)
  // until the stream passes them. Errors are kCuda and name the call.
  // A failed allocation says how much was asked for and how much the device has free.
  Result<uint64_t> AllocateDevice(size_t bytes) const;
  void FreeDevice(uint64_t address) const;
  // The device's free and total memory now (every process's allocations counted).
  struct MemoryInfo {
    uint64_t free_bytes = 0;
    uint64_t total_bytes = 0;
  };
  Result<MemoryInfo> DeviceMemory() const;
  Result<void*> CreateStream() const;  // non-blocking: no implicit order with the default stream
  void DestroyStream(void* stream) const;
  Status SynchronizeStream(void* stream) const;
  Status CopyToDevice(uint64_t target, const void* source, size_t bytes, void* stream) const;
  Status CopyToHost(void* target, uint64_t source, size_t bytes, void* stream) const;
  Status CopyOnDevice(uint64_t target, uint64_t source, size_t bytes, void* stream) const;
  Result<void*> CreateEvent() const;  // without timing
  void DestroyEvent(void* event) const;
  Status RecordEvent(void* event, void* stream) const;
  // Work queued on `stream` after this waits for `event`'s last record.
  Status StreamWaitEvent(void* stream, void* event) const;
  Status SynchronizeEvent(void* event) const;
  // A module from a fatbin or PTX image (kept loaded for the process), and a kernel in it.
  Result<void*> LoadModule(const void* image) const;
  Result<void*> GetFunction(void* module, const char* name) const;
  Status Launch(void* function, const uint32_t grid[3], uint32_t block_x, void* stream,
                void** arguments) const;
  // Streaming multiprocessors of the device (sizes kernel grids).
  int multiprocessor_count() const { return multiprocessor_count_; }
  // Runs `call` with the device's primary context current on this thread: for libraries that use
  // the CUDA runtime (nvCOMP), which then finds the same context.
  Status InContext(const std::function<Status()>& call) const;

  struct Api;  // the resolved entry points (cuda_driver.cc)

 private:
  friend class CudaDriverLoader;  // cuda_driver.cc: loads the library and makes the instance
  CudaDriver() = default;
  // Runs `call` with the device's primary context current on this thread.
  template <typename Call>
  Status WithContext(const Call& call) const;

  const Api* api_ = nullptr;
  void* context_ = nullptr;  // CUcontext of the device's primary context, retained for the process
  int ordinal_ = 0;
  int device_count_ = 0;
  int driver_version_ = 0;
  int multiprocessor_count_ = 0;
};

}  // namespace zarrstream

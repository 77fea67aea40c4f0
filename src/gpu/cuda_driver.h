// The CUDA driver API, loaded at run time (libcuda.so.1), so that zarrstream builds without CUDA
// and runs on machines with no GPU or driver. This is the first piece of the GPU layer
// (DESIGN.md §3, src/gpu): device discovery and page-locking host memory that the loader's batch
// buffers live in, so that copies to the GPU run at full PCIe speed and asynchronously.
//
// Only the few entry points used are declared here (the driver's C ABI is stable); nothing
// includes cuda.h.
//
// Threads: every member is thread-safe. CudaDriver::Get() loads and initialises the driver once
// per process. Host registrations are made in device 0's primary context with the PORTABLE flag,
// so the memory is page-locked for every context and device (PyTorch's included).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "zarrstream/status.h"

namespace zarrstream {

class CudaDriver {
 public:
  // The loaded, initialised driver with at least one device, or null; UnavailableReason() then
  // says why ("libcuda.so.1 not found", "no CUDA device", the driver's error).
  static const CudaDriver* Get();
  static std::string UnavailableReason();

  int device_count() const { return device_count_; }
  // "NVIDIA H100 80GB HBM3" for device `ordinal`, and its memory in bytes.
  Result<std::string> DeviceName(int ordinal) const;
  Result<uint64_t> DeviceMemoryBytes(int ordinal) const;
  // The driver's CUDA version, e.g. 13000 for 13.0.
  int driver_version() const { return driver_version_; }

  // Page-locks [data, data + size) for DMA by every device (cuMemHostRegister, PORTABLE). The
  // range must stay allocated until UnregisterHost(data). Errors are kCuda and name the call.
  Status RegisterHost(void* data, size_t size) const;
  Status UnregisterHost(void* data) const;
  // Whether `data` lies in page-locked host memory (registered or allocated pinned).
  bool IsPageLocked(const void* data) const;

  struct Api;  // the resolved entry points (cuda_driver.cc)

 private:
  friend class CudaDriverLoader;  // cuda_driver.cc: loads the library and makes the instance
  CudaDriver() = default;
  // Runs `call` with device 0's primary context current on this thread.
  template <typename Call>
  Status WithContext(const Call& call) const;

  const Api* api_ = nullptr;
  void* context_ = nullptr;  // CUcontext of device 0's primary context, retained for the process
  int device_count_ = 0;
  int driver_version_ = 0;
};

}  // namespace zarrstream

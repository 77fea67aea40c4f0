#include "gpu/cuda_driver.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <new>
#include <string>
#include <vector>

namespace zarrstream {
namespace {

// Where there is no driver or device the driver is absent with a reason, and nothing else breaks.
TEST(CudaDriverTest, AbsentDriverSaysWhy) {
  if (CudaDriver::Get() != nullptr) GTEST_SKIP() << "a CUDA device is present";
  EXPECT_FALSE(CudaDriver::UnavailableReason().empty());
}

// Where there is no driver every device is unavailable, with the reason.
TEST(CudaDriverTest, NoDeviceWithoutTheDriver) {
  if (CudaDriver::Get() != nullptr) GTEST_SKIP() << "a CUDA device is present";
  Result<const CudaDriver*> device = CudaDriver::ForDevice(0);
  ASSERT_FALSE(device.ok());
  EXPECT_EQ(device.status().code(), ErrorCode::kCuda);
  EXPECT_NE(device.status().message().find(CudaDriver::UnavailableReason()), std::string::npos)
      << device.status().message();
}

// GPU: one instance per device, each working on its own device; a device that does not exist is
// an error saying how many there are.
TEST(CudaDriverGpuTest, OneInstancePerDevice) {
  const CudaDriver* first = CudaDriver::Get();
  if (first == nullptr) GTEST_SKIP() << "GPU test skipped: " << CudaDriver::UnavailableReason();
  EXPECT_EQ(first->ordinal(), 0);
  const int count = first->device_count();
  for (int ordinal = 0; ordinal < count; ++ordinal) {
    Result<const CudaDriver*> device = CudaDriver::ForDevice(ordinal);
    ASSERT_TRUE(device.ok()) << device.status().ToString();
    EXPECT_EQ((*device)->ordinal(), ordinal);
    EXPECT_EQ(*CudaDriver::ForDevice(ordinal), *device);  // made once
    if (ordinal == 0) {
      EXPECT_EQ(*device, first);
    }
    // Memory, a stream and a round trip on that device.
    const CudaDriver* d = *device;
    Result<uint64_t> memory = d->AllocateDevice(4096);
    ASSERT_TRUE(memory.ok()) << memory.status().ToString();
    Result<void*> stream = d->CreateStream();
    ASSERT_TRUE(stream.ok()) << stream.status().ToString();
    std::vector<int> sent(1024), back(1024, 0);
    for (int i = 0; i < 1024; ++i) sent[i] = i * (ordinal + 1);
    ASSERT_TRUE(d->CopyToDevice(*memory, sent.data(), 4096, *stream).ok());
    ASSERT_TRUE(d->CopyToHost(back.data(), *memory, 4096, *stream).ok());
    ASSERT_TRUE(d->SynchronizeStream(*stream).ok());
    EXPECT_EQ(back, sent);
    d->DestroyStream(*stream);
    d->FreeDevice(*memory);
  }
  Result<const CudaDriver*> missing = CudaDriver::ForDevice(count);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), ErrorCode::kCuda);
  EXPECT_NE(missing.status().message().find("this machine has " + std::to_string(count)),
            std::string::npos)
      << missing.status().message();
  EXPECT_FALSE(CudaDriver::ForDevice(-1).ok());
}

// GPU: page-locks a buffer, sees it locked, unlocks it.
TEST(CudaDriverGpuTest, RegistersAndUnregistersHostMemory) {
  const CudaDriver* driver = CudaDriver::Get();
  if (driver == nullptr) GTEST_SKIP() << "GPU test skipped: " << CudaDriver::UnavailableReason();
  EXPECT_GE(driver->device_count(), 1);
  EXPECT_GE(driver->driver_version(), 12000);
  auto name = driver->DeviceName(0);
  ASSERT_TRUE(name.ok()) << name.status().ToString();
  EXPECT_FALSE(name->empty());
  auto memory = driver->DeviceMemoryBytes(0);
  ASSERT_TRUE(memory.ok()) << memory.status().ToString();
  EXPECT_GT(*memory, uint64_t{1} << 30);

  constexpr size_t kBytes = size_t{8} << 20;
  auto* data = static_cast<std::byte*>(::operator new (kBytes, std::align_val_t{4096}));
  EXPECT_FALSE(driver->IsPageLocked(data));
  ASSERT_TRUE(driver->RegisterHost(data, kBytes).ok());
  EXPECT_TRUE(driver->IsPageLocked(data));
  EXPECT_TRUE(driver->IsPageLocked(data + kBytes - 1));
  // Registering the same pages twice is the driver's error, reported with the call's name.
  Status again = driver->RegisterHost(data, kBytes);
  EXPECT_EQ(again.code(), ErrorCode::kCuda);
  EXPECT_NE(
      again.message().find("cuMemHostRegister failed: CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED"),
      std::string::npos)
      << again.ToString();
  ASSERT_TRUE(driver->UnregisterHost(data).ok());
  EXPECT_FALSE(driver->IsPageLocked(data));
  ::operator delete (data, std::align_val_t{4096});
}

}  // namespace
}  // namespace zarrstream

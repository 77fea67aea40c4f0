#include "gpu/cuda_driver.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <new>

namespace zarrstream {
namespace {

// Where there is no driver or device the driver is absent with a reason, and nothing else breaks.
TEST(CudaDriverTest, AbsentDriverSaysWhy) {
  if (CudaDriver::Get() != nullptr) GTEST_SKIP() << "a CUDA device is present";
  EXPECT_FALSE(CudaDriver::UnavailableReason().empty());
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

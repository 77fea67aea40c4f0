#include "gpu/gpu_kernels.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

namespace zarrstream {
namespace {

// ZARRSTREAM_GPU_BLOCKS_PER_SM: unset or empty is the full grid (64); 1 to 64 are taken; anything
// else is a kConfig error naming the variable and its value (read without a GPU: it is parsed
// before the kernels load).
TEST(GpuKernelsTest, BlocksPerMultiprocessorComeFromTheEnvironment) {
  unsetenv("ZARRSTREAM_GPU_BLOCKS_PER_SM");
  EXPECT_EQ(*GpuKernels::BlocksPerSmFromEnvironment(), 64u);
  setenv("ZARRSTREAM_GPU_BLOCKS_PER_SM", "", 1);
  EXPECT_EQ(*GpuKernels::BlocksPerSmFromEnvironment(), 64u);
  for (const char* good : {"1", "2", "64"}) {
    setenv("ZARRSTREAM_GPU_BLOCKS_PER_SM", good, 1);
    Result<uint32_t> blocks = GpuKernels::BlocksPerSmFromEnvironment();
    ASSERT_TRUE(blocks.ok()) << good;
    EXPECT_EQ(*blocks, static_cast<uint32_t>(std::stoul(good)));
  }
  for (const char* bad : {"0", "65", "-1", "8x", "many", " 4"}) {
    setenv("ZARRSTREAM_GPU_BLOCKS_PER_SM", bad, 1);
    Result<uint32_t> blocks = GpuKernels::BlocksPerSmFromEnvironment();
    ASSERT_FALSE(blocks.ok()) << bad;
    EXPECT_EQ(blocks.status().code(), ErrorCode::kConfig);
    EXPECT_EQ(blocks.status().message(), "ZARRSTREAM_GPU_BLOCKS_PER_SM='" + std::string(bad) +
                                             "': expected a whole number from 1 to 64");
  }
  unsetenv("ZARRSTREAM_GPU_BLOCKS_PER_SM");
}

}  // namespace
}  // namespace zarrstream

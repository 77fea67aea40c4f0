#include "gpu/nvcomp.h"

#include <gtest/gtest.h>

namespace zarrstream {
namespace {

// The command a zarrstream wheel installs (moved by auditwheel into
// site-packages/zarrstream.scripts/) finds the nvCOMP that the `nvidia-libnvcomp-cu13` wheel put in
// the same site-packages.
TEST(NvcompTest, WheelLibraryIsInTheCommandsSitePackages) {
  EXPECT_EQ(Nvcomp::WheelLibraryBesideCommand(
                "/env/lib/python3.11/site-packages/zarrstream.scripts/zarrstream"),
            "/env/lib/python3.11/site-packages/nvidia/libnvcomp/lib64/libnvcomp.so.6");
}

}  // namespace
}  // namespace zarrstream

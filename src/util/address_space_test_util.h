// Test helper: a process at its address-space limit, where no thread whose stack does not fit can
// start (tests only; for a death test's child, since the limit outlives the test).
#pragma once

#include <sys/resource.h>
#include <unistd.h>

#include <cstddef>
#include <fstream>

namespace zarrstream {

// Limits this process's address space (RLIMIT_AS) to what it maps now plus `room` bytes. Returns
// false where the mapped size cannot be read or the limit cannot be set.
inline bool LimitAddressSpaceToMappedPlus(size_t room) {
  size_t pages = 0;
  if (!(std::ifstream("/proc/self/statm") >> pages) || pages == 0) return false;
  const rlim_t mapped = static_cast<rlim_t>(pages) * static_cast<rlim_t>(::sysconf(_SC_PAGESIZE));
  const rlimit limit{mapped + room, mapped + room};
  return ::setrlimit(RLIMIT_AS, &limit) == 0;
}

}  // namespace zarrstream

#include "util/checked_size.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <new>
#include <string>

namespace zarrstream {

uint64_t MemoryLimitBytes() {
  static const uint64_t limit = [] {
    uint64_t bytes = ~uint64_t{0};
    const long pages = sysconf(_SC_PHYS_PAGES);
    const long page_size = sysconf(_SC_PAGE_SIZE);
    if (pages > 0 && page_size > 0) {
      bytes = CheckedMul(static_cast<uint64_t>(pages), static_cast<uint64_t>(page_size))
                  .value_or(bytes);
    }
    rlimit address_space{};
    if (getrlimit(RLIMIT_AS, &address_space) == 0 && address_space.rlim_cur != RLIM_INFINITY) {
      bytes = std::min<uint64_t>(bytes, address_space.rlim_cur);
    }
    return bytes;
  }();
  return limit;
}

Status OutOfMemoryFor(std::string_view what, uint64_t bytes, std::string_view remedy) {
  std::string message("out of memory: ");
  message.append(what).append(" needs ").append(std::to_string(bytes)).append(" bytes");
  if (bytes > MemoryLimitBytes()) {
    message.append(", more than this machine's ")
        .append(std::to_string(MemoryLimitBytes()))
        .append(" bytes of memory");
  }
  if (!remedy.empty()) message.append("; ").append(remedy);
  return OutOfMemoryError(std::move(message));
}

Status CheckAllocation(std::string_view what, uint64_t bytes) {
  if (bytes > MemoryLimitBytes()) return OutOfMemoryFor(what, bytes);
  return Status::Ok();
}

Status AllocateBytes(ByteBuffer* buffer, uint64_t bytes, std::string_view what) {
  ZS_RETURN_IF_ERROR(CheckAllocation(what, bytes));
  try {
    if (bytes > buffer->capacity()) buffer->Clear();  // growing need not copy what is overwritten
    buffer->Resize(static_cast<size_t>(bytes));
  } catch (const std::bad_alloc&) {
    return OutOfMemoryFor(what, bytes);
  }
  return Status::Ok();
}

}  // namespace zarrstream

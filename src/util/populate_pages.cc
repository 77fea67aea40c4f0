#include "util/populate_pages.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <system_error>
#include <thread>
#include <vector>

namespace zarrstream {

namespace {

constexpr size_t kSliceBytes = size_t{32} << 20;

void PopulateSlice(std::byte* begin, size_t bytes, size_t page) {
#ifdef MADV_POPULATE_WRITE
  if (::madvise(begin, bytes, MADV_POPULATE_WRITE) == 0) return;
#endif
  for (size_t offset = 0; offset < bytes; offset += page) {
    volatile std::byte* p = begin + offset;
    *p = *p;
  }
}

}  // namespace

void PopulatePages(void* data, size_t size, unsigned max_threads) {
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  // Whole pages only: madvise takes a page-aligned start; the partial pages at either end are
  // the caller's to fault in.
  const uintptr_t start = (reinterpret_cast<uintptr_t>(data) + page - 1) / page * page;
  const uintptr_t end = (reinterpret_cast<uintptr_t>(data) + size) / page * page;
  if (end <= start) return;
  const size_t bytes = end - start;
  const size_t threads = std::min<size_t>(max_threads, bytes / kSliceBytes);
  if (threads < 2) return;
  // Slices of whole pages, the last one taking the remainder.
  const size_t slice = bytes / threads / page * page;
  std::vector<std::thread> workers;
  workers.reserve(threads - 1);
  // Slice i by a thread of its own; the slices whose thread could not be started (a process at
  // its thread limit) by the calling thread, after its own.
  size_t started = 1;
  try {
    for (; started < threads; ++started) {
      const size_t length = started + 1 == threads ? bytes - started * slice : slice;
      workers.emplace_back(PopulateSlice, reinterpret_cast<std::byte*>(start + started * slice),
                           length, page);
    }
  } catch (const std::system_error&) {
  }
  PopulateSlice(reinterpret_cast<std::byte*>(start), slice, page);
  if (started < threads) {
    PopulateSlice(reinterpret_cast<std::byte*>(start + started * slice), bytes - started * slice,
                  page);
  }
  for (std::thread& worker : workers) worker.join();
}

}  // namespace zarrstream

#pragma once

#include <cstddef>

namespace zarrstream {

// Faults every page of [data, data + size) in, writable, using up to `max_threads` threads at
// once (one slice of at least 32 MiB each; a smaller range is left to the caller's first touch).
// The contents are kept: MADV_POPULATE_WRITE where the kernel has it (5.14), else each page read
// and written back. For a range about to be page-locked: cuMemHostRegister faults in each missing
// page on the calling thread, and the driver pins one range at a time, so a batch loader's first
// buffers wait on each other (docs/architecture.md, "pinned host memory").
//
// Threads: blocks the caller until every page is in; no other thread may write the range
// meanwhile (a page read and written back would lose a concurrent write).
void PopulatePages(void* data, size_t size, unsigned max_threads);

}  // namespace zarrstream

// The memory behind large ByteBuffers: freed blocks are kept for reuse, up to a byte limit.
//
// Remote reads allocate a buffer per stored object (often MBs) on an I/O thread and free it on a
// decode thread once the chunk is decoded. Through malloc alone those blocks go back to the kernel
// (trimmed or unmapped) and the next read of the same size takes fresh pages: on loopback with
// 1 MiB chunks, page faults and zeroing were about a third of the reading process's system time
// and bounded what each I/O thread could receive. Blocks taken from here were touched before, so
// receiving into them is a plain copy.
//
// ByteBuffer::ReserveReusable allocates from here (the HTTP transport's response bodies); other
// buffers use new[] as before, so bounded-memory work (rechunk's slabs) is not held up by it.
// Blocks below kMinCachedBlockBytes come from operator new[] and go straight back. A cached block
// is handed out for a request of n bytes when its size is within [n, n + n/4]. The cache holds at
// most ZARRSTREAM_BUFFER_CACHE_MB MiB (read once; default 256, 0 turns it off); a block freed
// beyond that is released.
//
// Threads: every function may be called from any thread (one mutex; a call per stored object).
#pragma once

#include <cstddef>

namespace zarrstream::internal {

inline constexpr size_t kMinCachedBlockBytes = size_t{64} << 10;

// Returns a block of at least `bytes` bytes (uninitialised) and sets `block_bytes` to its size,
// which FreeBlock must be given back.
std::byte* AllocateBlock(size_t bytes, size_t& block_bytes);

// Gives back a block from AllocateBlock (nullptr is ignored).
void FreeBlock(std::byte* block, size_t block_bytes);

// Bytes held in the cache now (for tests and stats).
size_t CachedBlockBytes();

// The most the cache holds (ZARRSTREAM_BUFFER_CACHE_MB, read once).
size_t BlockCacheLimitBytes();

}  // namespace zarrstream::internal

// Size arithmetic that cannot wrap, and allocations that fail as errors.
//
// Declared shapes come from metadata anyone can write: a product of extents may overflow, and a
// chunk may declare more bytes than any machine holds. Every size computed from declared extents
// goes through CheckedMul/CheckedProduct, and every buffer sized from one through AllocateBytes
// (or CheckAllocation first), so hostile metadata gives an error value, never a wrapped size, a
// std::bad_alloc escaping a worker thread, or the OOM killer.
#pragma once

#include <cstdint>
#include <new>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "util/byte_buffer.h"
#include "zarrstream/status.h"

namespace zarrstream {

// a * b, or nullopt when it does not fit in 64 bits.
inline std::optional<uint64_t> CheckedMul(uint64_t a, uint64_t b) {
  uint64_t product = 0;
  if (__builtin_mul_overflow(a, b, &product)) return std::nullopt;
  return product;
}

// init * factors[0] * factors[1] * ..., or nullopt when it does not fit in 64 bits.
inline std::optional<uint64_t> CheckedProduct(std::span<const uint64_t> factors,
                                              uint64_t init = 1) {
  uint64_t product = init;
  for (uint64_t f : factors) {
    if (__builtin_mul_overflow(product, f, &product)) return std::nullopt;
  }
  return product;
}

// ceil(a / b) for b > 0, without the overflow of (a + b - 1) / b near 2^64.
inline uint64_t CeilDiv(uint64_t a, uint64_t b) { return a / b + (a % b != 0 ? 1 : 0); }

// a + b, or 2^64 - 1 when it does not fit (a bound compared against, never an allocation size).
inline uint64_t SaturatingAdd(uint64_t a, uint64_t b) {
  uint64_t sum = 0;
  return __builtin_add_overflow(a, b, &sum) ? ~uint64_t{0} : sum;
}

// a * b, or 2^64 - 1 when it does not fit (a bound, never an allocation size).
inline uint64_t SaturatingMul(uint64_t a, uint64_t b) {
  uint64_t product = 0;
  return __builtin_mul_overflow(a, b, &product) ? ~uint64_t{0} : product;
}

// The most bytes this process can hold: physical memory, or the address-space limit
// (RLIMIT_AS) when that is lower. Read once.
uint64_t MemoryLimitBytes();

// An out-of-memory error (ErrorCode::kOutOfMemory): "out of memory: <what> needs <bytes> bytes[,
// more than this machine's <limit> bytes of memory][; <remedy>]".
Status OutOfMemoryFor(std::string_view what, uint64_t bytes, std::string_view remedy = {});

// Ok when `bytes` may be allocated at all: not more than MemoryLimitBytes().
Status CheckAllocation(std::string_view what, uint64_t bytes);

// Resizes `buffer` to `bytes` for the caller to overwrite (its contents are not kept:
// CheckAllocation, then the allocation with std::bad_alloc caught): an out-of-memory error naming
// `what` instead of an exception.
Status AllocateBytes(ByteBuffer* buffer, uint64_t bytes, std::string_view what);

// Runs `fn` (returning a Status or Result), turning a std::bad_alloc it throws (an allocation of a
// codec, a store read or a container) into an out-of-memory error naming `what`: exceptions must
// not leave a worker thread.
template <typename Fn>
auto CatchOutOfMemory(std::string_view what, Fn&& fn) -> decltype(fn()) {
  try {
    return fn();
  } catch (const std::bad_alloc&) {
    return OutOfMemoryError("out of memory: " + std::string(what) + " (an allocation failed)");
  }
}

}  // namespace zarrstream

// What every fuzz target checks beyond the sanitizers: properties the library promises in its
// headers (a decoder never writes past its output, errors come back as values), reported as a
// crash so that libFuzzer saves the input.
#pragma once

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <vector>

#include "zarrstream/status.h"

namespace zarrstream::fuzz {

// Aborts with `what` (libFuzzer then writes the input out as a crash artifact).
[[noreturn]] inline void FuzzFail(const char* what, const Status& status = Status::Ok()) {
  std::fprintf(stderr, "fuzz property violated: %s %s\n", what, status.ToString().c_str());
  std::abort();
}

// Library calls report failures as Status values; kInternal means zarrstream itself is wrong, and
// so does an error code the layer is documented never to return.
inline void CheckNotInternal(const Status& status, const char* where) {
  if (status.code() == ErrorCode::kInternal) FuzzFail(where, status);
}

// Output memory followed by guard bytes. ASan catches writes past a heap block, but not writes
// past a span's end that stay inside a larger allocation (the chain's scratch buffers, a shard
// being decoded in place), so a decoder handed span() must also leave the guard alone.
class GuardedBuffer {
 public:
  static constexpr size_t kGuardSize = 64;
  static constexpr std::byte kGuardByte{0xCD};

  explicit GuardedBuffer(size_t size) : size_(size), bytes_(size + kGuardSize, kGuardByte) {}

  std::span<std::byte> span() { return std::span(bytes_).first(size_); }

  void CheckGuard(const char* where) const {
    for (size_t i = size_; i < bytes_.size(); ++i) {
      if (bytes_[i] != kGuardByte) FuzzFail(where);
    }
  }

 private:
  size_t size_;
  std::vector<std::byte> bytes_;
};

}  // namespace zarrstream::fuzz

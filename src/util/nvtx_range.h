// NVTX ranges for Nsight Systems: the loader's stages (plan, read, decode, GPU decode, scatter,
// assemble, the consumer's wait) appear on the profiler's timeline in the "zarrstream" domain,
// each with its batch index as the payload.
//
// Builds with the CUDA toolkit found use NVTX 3 (header-only: it loads the profiler's injection
// library at the first range when a tool is attached, and is a no-op otherwise); other builds
// compile these to nothing. A range may end on another thread than the one that started it.
#pragma once

#include <cstdint>

namespace zarrstream {

class NvtxRange {
 public:
  // `name` must outlive the range (a string literal).
  NvtxRange(const char* name, uint64_t batch);
  ~NvtxRange() { End(); }
  NvtxRange(const NvtxRange&) = delete;
  NvtxRange& operator=(const NvtxRange&) = delete;

  // Ends the range now (later calls and the destructor do nothing).
  void End();

  // Whether this build emits NVTX ranges.
  static bool Compiled();

 private:
  uint64_t id_ = 0;
  bool open_ = false;
};

}  // namespace zarrstream

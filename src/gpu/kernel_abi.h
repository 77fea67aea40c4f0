// The arguments of the CUDA kernels (kernels.cu), shared by the kernels and the host code that
// fills them (gpu_kernels.cc). Plain C++ of fixed-width types, so that both compilers lay them out
// alike; nothing here includes a CUDA header.
#pragma once

#include <cstdint>

namespace zarrstream::gpu_abi {

inline constexpr int kMaxRank = 8;

// A decoded chunk's element type (the values of zarrstream::DataType, which the kernels convert
// from: every real type).
enum SourceType : uint32_t {
  kBool = 0,
  kInt8 = 1,
  kInt16 = 2,
  kInt32 = 3,
  kInt64 = 4,
  kUInt8 = 5,
  kUInt16 = 6,
  kUInt32 = 7,
  kUInt64 = 8,
  kFloat16 = 9,
  kFloat32 = 10,
  kFloat64 = 11,
};

// The batch's element type (the values of zarrstream::BatchDType).
enum BatchType : uint32_t { kBatchFloat32 = 0, kBatchBFloat16 = 1, kBatchFloat16 = 2 };

// CopyDescriptor::flags.
inline constexpr uint32_t kFillNan = 1;   // NaN → nan_fill, and the mask byte says where
inline constexpr uint32_t kByteSwap = 2;  // the chunk's elements are stored big-endian
inline constexpr uint32_t kFromFill = 4;  // the chunk is not stored: every element is fill_value

// One box of a decoded chunk copied into one slab of a batch tensor, converted to the batch type
// and normalised: the GPU form of loader/batch_assembly.h's AssembleCopy, with the same arithmetic.
// Addresses are device addresses; strides are in elements and may be 0.
struct CopyDescriptor {
  uint64_t source = 0;  // the box's first element in the decoded chunk (unused with kFromFill)
  uint64_t target = 0;  // the box's first element in the batch tensor
  uint64_t mask = 0;    // the box's first mask byte (with kFillNan)
  uint64_t elements = 0;
  uint64_t shape[kMaxRank] = {};  // the box; dimensions past `rank` unused
  int64_t source_strides[kMaxRank] = {};
  int64_t target_strides[kMaxRank] = {};
  double mean = 0;
  double inv_std = 1;
  double nan_fill = 0;
  uint64_t fill_value = 0;  // with kFromFill: one element's bytes (native order), zero-extended
  uint32_t rank = 0;
  uint32_t source_type = kFloat32;
  uint32_t batch_type = kBatchFloat32;
  uint32_t flags = 0;
};

// One blosc block's byte shuffle undone: `source` holds the block's bytes as `typesize` planes of
// `bytes / typesize` bytes each (then the `bytes % typesize` left over), `target` receives the
// elements. Addresses are device addresses.
struct UnshuffleDescriptor {
  uint64_t source = 0;
  uint64_t target = 0;
  uint32_t bytes = 0;
  uint32_t typesize = 0;
};

// One decoded stream whose Adler-32 (zlib's) zs_adler32 computes: `bytes` bytes at device address
// `data`, any alignment.
struct ChecksumDescriptor {
  uint64_t data = 0;
  uint64_t bytes = 0;
};

}  // namespace zarrstream::gpu_abi

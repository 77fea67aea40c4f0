// The arguments of the CUDA kernels (kernels.cu), shared by the kernels and the host code that
// fills them (gpu_kernels.cc). Plain C++ of fixed-width types, so that both compilers lay them out
// alike; nothing here includes a CUDA header.
#pragma once

#include <cstdint>

namespace zarrstream::gpu_abi {

inline constexpr int kMaxRank = 8;

// A decoded chunk's element type (the values of zarrstream::DataType, which the kernels convert
// from: every real type). Under CF `_Unsigned` the descriptor names the type the elements are read
// as.
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
// CF decoding (dataset/cf_decoding.h) before normalisation: the stored value converted to the
// decoded type (kCfWide: float64, else float32), fill values → NaN, × cf_scale_factor (kCfScale),
// + cf_add_offset (kCfOffset), each step rounded.
inline constexpr uint32_t kCfDecode = 8;
inline constexpr uint32_t kCfWide = 16;
inline constexpr uint32_t kCfScale = 32;
inline constexpr uint32_t kCfOffset = 64;
// The box's values CF-decoded (with kCfDecode) and nothing else, written as float64 at `target`
// (target_strides counting float64 elements): loader/batch_assembly.h's AssembleDecoded, the
// values of tendency targets and of their bases, which zs_tendencies then differences. mean,
// inv_std, nan_fill, mask and batch_type are unused, and kFillNan is not set.
inline constexpr uint32_t kDecodedFloat64 = 128;

// The most fill values of one CF-decoded variable (dataset/cf_decoding.h's kMaxCfFillValues).
inline constexpr int kMaxCfFillValues = 8;

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
  double cf_scale_factor = 1;
  double cf_add_offset = 0;
  // With kCfDecode: the values that become NaN, rounded to the decoded type.
  double cf_fill_values[kMaxCfFillValues] = {};
  uint32_t cf_num_fill_values = 0;
  uint32_t rank = 0;
  uint32_t source_type = kFloat32;
  uint32_t batch_type = kBatchFloat32;
  uint32_t flags = 0;
  uint32_t reserved = 0;  // keeps the size a multiple of 8 under both compilers
};
static_assert(sizeof(CopyDescriptor) == 360, "host and device must lay CopyDescriptor out alike");

// One target slab of one sample as a tendency: loader/batch_assembly.h's AssembleTendency, bit for
// bit. Element e of the slab (`elements` of them, contiguous from `target`) is ((values[e] -
// bases[e]) - mean) * inv_std in float64, where `values` and `bases` are the target's and its
// base's float64 values (zs_scatter with kDecodedFloat64, laid out as the slab is), rounded to
// float32; with kFillNan, NaN becomes nan_fill and mask[e] (from `mask`) says where (1) or not (0);
// then rounded to the batch type. Addresses are device addresses.
struct TendencyDescriptor {
  uint64_t values = 0;
  uint64_t bases = 0;
  uint64_t target = 0;
  uint64_t mask = 0;
  uint64_t elements = 0;
  double mean = 0;
  double inv_std = 1;
  double nan_fill = 0;
  uint32_t batch_type = kBatchFloat32;
  uint32_t flags = 0;  // kFillNan or 0
};
static_assert(sizeof(TendencyDescriptor) == 72,
              "host and device must lay TendencyDescriptor out alike");

// One slab of a computed forcing (dataset/computed_forcing_math.h) for one sample: element e of the
// slab (C order over `shape`, `elements` of them, contiguous from `target`) is forcing `kind` at
// valid time `seconds`, the latitude latitudes[i] where i is e's index along `latitude_axis` (-1:
// none), likewise the longitude; computed in float64 and rounded to float32 as the CPU does, then
// to the batch type. With kFillNan the slab's mask bytes (from `mask`) are set to 0. Addresses
// are device addresses; latitudes and longitudes point at float64 values.
struct ForcingDescriptor {
  uint64_t target = 0;
  uint64_t mask = 0;
  uint64_t latitudes = 0;
  uint64_t longitudes = 0;
  uint64_t elements = 0;
  uint64_t shape[kMaxRank] = {};
  int64_t seconds = 0;
  uint32_t rank = 0;
  uint32_t kind = 0;
  int32_t latitude_axis = -1;
  int32_t longitude_axis = -1;
  uint32_t batch_type = kBatchFloat32;
  uint32_t flags = 0;
};
static_assert(sizeof(ForcingDescriptor) == 136,
              "host and device must lay ForcingDescriptor out alike");

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

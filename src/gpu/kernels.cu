// The loader's CUDA kernels, compiled by nvcc into a fatbin that the library embeds and loads
// through the driver at run time (gpu_kernels.cc): no CUDA runtime is linked. Each kernel runs once
// per wave over every chunk of the wave (no per-chunk launches: docs/architecture.md, "On the
// GPU"); its arguments are arrays of descriptors (kernel_abi.h) in device memory.
//
// zs_scatter reproduces the CPU's AssembleCopy and AssembleDecoded bit for bit
// (loader/batch_assembly.h), and zs_tendencies its AssembleTendency: the same arithmetic in the
// same precision, rounded alike, and NaN payloads carried as x86-64 carries them
// (a NaN input stays that NaN, quieted; conversions keep the high payload bits), because CUDA's own
// arithmetic would return its canonical NaN instead.
#include <cuda_fp16.h>
#include <stdint.h>

#include "../dataset/computed_forcing_math.h"
#include "kernel_abi.h"

namespace {

using zarrstream::gpu_abi::ChecksumDescriptor;
using zarrstream::gpu_abi::CopyDescriptor;
using zarrstream::gpu_abi::ForcingDescriptor;
using zarrstream::gpu_abi::TendencyDescriptor;
using zarrstream::gpu_abi::UnshuffleDescriptor;
namespace abi = zarrstream::gpu_abi;

__device__ __forceinline__ uint64_t LoadBits(const unsigned char* p, uint32_t size, bool swap) {
  uint64_t bits = 0;
  switch (size) {
    case 1:
      return *p;
    case 2:
      bits = *reinterpret_cast<const uint16_t*>(p);
      return swap ? __byte_perm(static_cast<uint32_t>(bits), 0, 0x3201) & 0xFFFFu : bits;
    case 4:
      bits = *reinterpret_cast<const uint32_t*>(p);
      return swap ? __byte_perm(static_cast<uint32_t>(bits), 0, 0x0123) : bits;
    default: {
      bits = *reinterpret_cast<const uint64_t*>(p);
      if (!swap) return bits;
      const uint32_t lo = __byte_perm(static_cast<uint32_t>(bits), 0, 0x0123);
      const uint32_t hi = __byte_perm(static_cast<uint32_t>(bits >> 32), 0, 0x0123);
      return (static_cast<uint64_t>(lo) << 32) | hi;
    }
  }
}

__device__ __forceinline__ uint32_t SourceSize(uint32_t type) {
  switch (type) {
    case abi::kInt16:
    case abi::kUInt16:
    case abi::kFloat16:
      return 2;
    case abi::kInt32:
    case abi::kUInt32:
    case abi::kFloat32:
      return 4;
    case abi::kInt64:
    case abi::kUInt64:
    case abi::kFloat64:
      return 8;
    default:
      return 1;
  }
}

// x86-64's NaNs, which the CPU's arithmetic makes and the kernels reproduce: a CF fill value
// becomes the quiet NaN (the CPU's quiet_NaN); an operation with a NaN operand returns its first
// NaN operand, quieted; one that makes a NaN of numbers (∞ − ∞) returns the negative "default NaN".
constexpr uint64_t kQuietNan64 = 0x7FF8000000000000ull;
constexpr uint64_t kQuietBit64 = 0x0008000000000000ull;
constexpr uint64_t kX86DefaultNan64 = 0xFFF8000000000000ull;

__device__ __forceinline__ bool IsNan64(uint64_t bits) {
  return (bits & 0x7FF0000000000000ull) == 0x7FF0000000000000ull &&
         (bits & 0x000FFFFFFFFFFFFFull) != 0;
}

// A float64 NaN narrowed to float32 as x86-64 narrows it: sign kept, quiet, the high payload bits.
__device__ __forceinline__ uint32_t NarrowNan(uint64_t bits) {
  return static_cast<uint32_t>((bits >> 32) & 0x80000000u) | 0x7FC00000u |
         static_cast<uint32_t>((bits >> 29) & 0x007FFFFFu);
}

__device__ __forceinline__ bool IsCfFill(double value, const CopyDescriptor& d) {
  for (uint32_t k = 0; k < d.cf_num_fill_values; ++k) {
    if (value == d.cf_fill_values[k]) return true;
  }
  return false;
}

// A stored value in the type the CPU computes with (batch_assembly.cc's ComputeType, or with
// kCfDecode the decoded type), CF-decoded with kCfDecode (dataset/cf_decoding.h's CfDecode):
// float32 in `f` for sources float32 holds exactly, else float64 in `d` (`wide`). A NaN (stored,
// or a CF fill value) is `nan`, its float64 bits (quieted, the payload kept, as x86-64 widens) in
// `nan_bits`: it never enters CUDA's arithmetic, which would return its canonical NaN instead.
struct Decoded {
  float f = 0;
  double d = 0;
  bool wide = false;
  bool nan = false;
  uint64_t nan_bits = 0;
};

__device__ __forceinline__ Decoded NanValue(uint64_t bits) {
  Decoded v;
  v.nan = true;
  v.nan_bits = bits;
  return v;
}

__device__ __forceinline__ Decoded Decode(uint64_t bits, const CopyDescriptor& desc) {
  Decoded v;
  switch (desc.source_type) {
    case abi::kBool:
    case abi::kUInt8:
      v.f = static_cast<float>(static_cast<uint8_t>(bits));
      break;
    case abi::kInt8:
      v.f = static_cast<float>(static_cast<int8_t>(bits));
      break;
    case abi::kInt16:
      v.f = static_cast<float>(static_cast<int16_t>(bits));
      break;
    case abi::kUInt16:
      v.f = static_cast<float>(static_cast<uint16_t>(bits));
      break;
    case abi::kFloat16: {
      const auto h = static_cast<uint16_t>(bits);
      if ((h & 0x7C00u) == 0x7C00u && (h & 0x03FFu) != 0) {
        return NanValue((static_cast<uint64_t>(h & 0x8000u) << 48) | kQuietNan64 |
                        (static_cast<uint64_t>(h & 0x03FFu) << 42));
      }
      v.f = __half2float(__ushort_as_half(h));
      break;
    }
    case abi::kFloat32: {
      const auto b = static_cast<uint32_t>(bits);
      if ((b & 0x7F800000u) == 0x7F800000u && (b & 0x007FFFFFu) != 0) {
        return NanValue((static_cast<uint64_t>(b & 0x80000000u) << 32) | kQuietNan64 |
                        (static_cast<uint64_t>(b & 0x007FFFFFu) << 29));
      }
      v.f = __uint_as_float(b);
      break;
    }
    case abi::kInt32:
      v.d = static_cast<double>(static_cast<int32_t>(bits));
      v.wide = true;
      break;
    case abi::kUInt32:
      v.d = static_cast<double>(static_cast<uint32_t>(bits));
      v.wide = true;
      break;
    case abi::kInt64:
      v.d = __ll2double_rn(static_cast<long long>(bits));
      v.wide = true;
      break;
    case abi::kUInt64:
      v.d = __ull2double_rn(static_cast<unsigned long long>(bits));
      v.wide = true;
      break;
    default:  // kFloat64
      if (IsNan64(bits)) return NanValue(bits | kQuietBit64);
      v.d = __longlong_as_double(static_cast<long long>(bits));
      v.wide = true;
      break;
  }
  if ((desc.flags & abi::kCfDecode) != 0) {
    if ((desc.flags & abi::kCfWide) != 0) {
      if (!v.wide) v.d = static_cast<double>(v.f);  // exact: f holds every value of these sources
      v.wide = true;
      if (IsCfFill(v.d, desc)) return NanValue(kQuietNan64);
      if ((desc.flags & abi::kCfScale) != 0) v.d = __dmul_rn(v.d, desc.cf_scale_factor);
      if ((desc.flags & abi::kCfOffset) != 0) v.d = __dadd_rn(v.d, desc.cf_add_offset);
    } else if (IsCfFill(static_cast<double>(v.f), desc)) {
      return NanValue(kQuietNan64);
    }
  }
  return v;
}

// Decode, then (x - mean) * inv_std, as the CPU computes them (batch_assembly.cc): in float32 for
// float32 values, in float64 (then rounded once) for float64 ones. Returns the float32 bits.
__device__ __forceinline__ uint32_t Normalise(uint64_t bits, const CopyDescriptor& desc) {
  const Decoded v = Decode(bits, desc);
  if (v.nan) return NarrowNan(v.nan_bits);
  if (v.wide) {
    return __float_as_uint(__double2float_rn(__dmul_rn(__dsub_rn(v.d, desc.mean), desc.inv_std)));
  }
  return __float_as_uint(
      __fmul_rn(__fsub_rn(v.f, __double2float_rn(desc.mean)), __double2float_rn(desc.inv_std)));
}

// Decode's value as float64 bits (AssembleDecoded's: a float32 value widened exactly).
__device__ __forceinline__ uint64_t DecodedFloat64(uint64_t bits, const CopyDescriptor& desc) {
  const Decoded v = Decode(bits, desc);
  if (v.nan) return v.nan_bits;
  return static_cast<uint64_t>(__double_as_longlong(v.wide ? v.d : static_cast<double>(v.f)));
}

__device__ __forceinline__ bool IsNan(uint32_t bits) {
  return (bits & 0x7F800000u) == 0x7F800000u && (bits & 0x007FFFFFu) != 0;
}

__device__ __forceinline__ uint16_t ToBFloat16(uint32_t bits) {
  if (IsNan(bits)) return static_cast<uint16_t>((bits >> 16) | 0x0040u);
  const uint32_t rounding = 0x7FFFu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

__device__ __forceinline__ uint16_t ToFloat16(uint32_t bits) {
  if (IsNan(bits)) {
    return static_cast<uint16_t>(((bits >> 16) & 0x8000u) | 0x7E00u | ((bits & 0x007FFFFFu) >> 13));
  }
  return __half_as_ushort(__float2half_rn(__uint_as_float(bits)));
}

// Element `offset` of a batch tensor of `batch_type` at `target` from float32 `bits`, rounded as
// the CPU rounds (batch_assembly.cc's FromFloat).
__device__ __forceinline__ void StoreBatchValue(uint64_t target, int64_t offset,
                                                uint32_t batch_type, uint32_t bits) {
  switch (batch_type) {
    case abi::kBatchFloat32:
      reinterpret_cast<uint32_t*>(target)[offset] = bits;
      break;
    case abi::kBatchBFloat16:
      reinterpret_cast<uint16_t*>(target)[offset] = ToBFloat16(bits);
      break;
    default:
      reinterpret_cast<uint16_t*>(target)[offset] = ToFloat16(bits);
      break;
  }
}

// ((value - base) - mean) * inv_std in float64, rounded to float32, with x86-64's NaNs
// (AssembleTendency's arithmetic; mean and inv_std are finite): `value` and `base` are float64
// bits.
__device__ __forceinline__ uint32_t Tendency(uint64_t value, uint64_t base,
                                             const TendencyDescriptor& d) {
  if (IsNan64(value)) return NarrowNan(value | kQuietBit64);
  if (IsNan64(base)) return NarrowNan(base | kQuietBit64);
  const double t =
      __dmul_rn(__dsub_rn(__dsub_rn(__longlong_as_double(static_cast<long long>(value)),
                                    __longlong_as_double(static_cast<long long>(base))),
                          d.mean),
                d.inv_std);
  if (t != t) return NarrowNan(kX86DefaultNan64);  // a NaN made of numbers (∞ − ∞)
  return __float_as_uint(__double2float_rn(t));
}

// The flags and constants of one box, read once per box.
struct BoxScatter {
  const CopyDescriptor& d;
  const unsigned char* source;
  uint32_t size;
  uint32_t nan_fill;
  bool swap, fill_nan, from_fill, decoded_float64;

  // The bits of the element at `source_offset` of the decoded chunk.
  __device__ __forceinline__ uint64_t Load(int64_t source_offset) const {
    return from_fill ? d.fill_value : LoadBits(source + source_offset * size, size, swap);
  }

  // An element's `bits` into `target_offset` of the slab.
  __device__ __forceinline__ void Store(uint64_t bits, int64_t target_offset) const {
    if (decoded_float64) {
      reinterpret_cast<uint64_t*>(d.target)[target_offset] = DecodedFloat64(bits, d);
      return;
    }
    uint32_t value = Normalise(bits, d);
    if (fill_nan) {
      const bool nan = IsNan(value);
      reinterpret_cast<uint8_t*>(d.mask)[target_offset] = nan ? 1 : 0;
      if (nan) value = nan_fill;
    }
    StoreBatchValue(d.target, target_offset, d.batch_type, value);
  }
};

// The source and target offsets (in elements) of element `e` of the box, in row major order.
// `Index` is the type the division runs in: 32-bit where the box has fewer than 2^32 elements
// (every ERA5-sized field), since a 64-bit division is a long emulated sequence on the GPU. (A
// whole field is one axis after the host merges contiguous ones: no division at all.)
template <typename Index>
__device__ __forceinline__ void Offsets(uint64_t e, const CopyDescriptor& d, int64_t& source_offset,
                                        int64_t& target_offset) {
  source_offset = 0;
  target_offset = 0;
  Index rest = static_cast<Index>(e);
  for (int a = static_cast<int>(d.rank) - 1; a > 0; --a) {
    const auto extent = static_cast<Index>(d.shape[a]);
    const Index i = rest % extent;
    rest /= extent;
    source_offset += static_cast<int64_t>(i) * d.source_strides[a];
    target_offset += static_cast<int64_t>(i) * d.target_strides[a];
  }
  source_offset += static_cast<int64_t>(rest) * d.source_strides[0];
  target_offset += static_cast<int64_t>(rest) * d.target_strides[0];
}

// Elements per thread whose loads are in flight together. One at a time, a thread's next load
// waits for its previous store (the compiler cannot tell the batch from the chunk), so a grid of
// few blocks (ZARRSTREAM_GPU_BLOCKS_PER_SM, gpu_kernels.h) would run far under the memory's
// bandwidth.
constexpr int kElementsInFlight = 4;

template <typename Index>
__device__ __forceinline__ void ScatterBox(const BoxScatter& box) {
  const CopyDescriptor& d = box.d;
  const uint64_t step = static_cast<uint64_t>(gridDim.x) * blockDim.x;
  for (uint64_t first = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       first < d.elements; first += kElementsInFlight * step) {
    uint64_t bits[kElementsInFlight];
    int64_t target_offsets[kElementsInFlight];
#pragma unroll
    for (int k = 0; k < kElementsInFlight; ++k) {
      const uint64_t e = first + k * step;
      if (e < d.elements) {
        int64_t source_offset;
        Offsets<Index>(e, d, source_offset, target_offsets[k]);
        bits[k] = box.Load(source_offset);
      }
    }
#pragma unroll
    for (int k = 0; k < kElementsInFlight; ++k) {
      if (first + k * step < d.elements) box.Store(bits[k], target_offsets[k]);
    }
  }
}

}  // namespace

// Every box of `copies` (count of them) into its slab. Grid: x spreads a box's elements, y the
// boxes (looping when there are more than gridDim.y).
extern "C" __global__ void zs_scatter(const CopyDescriptor* copies, uint32_t count) {
  // Raw storage: a __shared__ variable takes no initialiser, and CopyDescriptor has defaults.
  __shared__ alignas(CopyDescriptor) unsigned char storage[sizeof(CopyDescriptor)];
  CopyDescriptor& d = *reinterpret_cast<CopyDescriptor*>(storage);
  for (uint32_t c = blockIdx.y; c < count; c += gridDim.y) {
    __syncthreads();  // every thread is done with the previous box's descriptor
    if (threadIdx.x == 0) d = copies[c];
    __syncthreads();
    const BoxScatter box{d,
                         reinterpret_cast<const unsigned char*>(d.source),
                         SourceSize(d.source_type),
                         __float_as_uint(__double2float_rn(d.nan_fill)),
                         (d.flags & abi::kByteSwap) != 0,
                         (d.flags & abi::kFillNan) != 0,
                         (d.flags & abi::kFromFill) != 0,
                         (d.flags & abi::kDecodedFloat64) != 0};
    if (d.elements <= 0xFFFFFFFFull) {  // then every index of the box fits 32 bits too
      ScatterBox<uint32_t>(box);
    } else {
      ScatterBox<uint64_t>(box);
    }
  }
}

// Every computed forcing slab of `slabs` (count of them): each element the forcing's float64 value
// (the CPU's arithmetic, computed_forcing_math.h) rounded to float32, then to the batch type.
// Grid as zs_scatter's.
extern "C" __global__ void zs_forcings(const ForcingDescriptor* slabs, uint32_t count) {
  __shared__ alignas(ForcingDescriptor) unsigned char storage[sizeof(ForcingDescriptor)];
  ForcingDescriptor& d = *reinterpret_cast<ForcingDescriptor*>(storage);
  for (uint32_t c = blockIdx.y; c < count; c += gridDim.y) {
    __syncthreads();  // every thread is done with the previous slab's descriptor
    if (threadIdx.x == 0) d = slabs[c];
    __syncthreads();
    const auto* latitudes = reinterpret_cast<const double*>(d.latitudes);
    const auto* longitudes = reinterpret_cast<const double*>(d.longitudes);
    const uint64_t step = static_cast<uint64_t>(gridDim.x) * blockDim.x;
    for (uint64_t e = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < d.elements;
         e += step) {
      double latitude = 0, longitude = 0;
      uint64_t rest = e;
      for (int a = static_cast<int>(d.rank) - 1; a >= 0; --a) {
        const uint64_t i = rest % d.shape[a];
        rest /= d.shape[a];
        if (a == d.latitude_axis) latitude = latitudes[i];
        if (a == d.longitude_axis) longitude = longitudes[i];
      }
      const double v = zarrstream::forcing_math::Value(d.kind, d.seconds, latitude, longitude);
      const uint32_t value = __float_as_uint(__double2float_rn(v));
      if ((d.flags & abi::kFillNan) != 0) reinterpret_cast<uint8_t*>(d.mask)[e] = 0;
      StoreBatchValue(d.target, static_cast<int64_t>(e), d.batch_type, value);
    }
  }
}

// Every tendency slab of `slabs` (count of them): AssembleTendency's values from the float64
// values and bases zs_scatter decoded (kDecodedFloat64). Grid as zs_scatter's.
extern "C" __global__ void zs_tendencies(const TendencyDescriptor* slabs, uint32_t count) {
  __shared__ alignas(TendencyDescriptor) unsigned char storage[sizeof(TendencyDescriptor)];
  TendencyDescriptor& d = *reinterpret_cast<TendencyDescriptor*>(storage);
  for (uint32_t c = blockIdx.y; c < count; c += gridDim.y) {
    __syncthreads();  // every thread is done with the previous slab's descriptor
    if (threadIdx.x == 0) d = slabs[c];
    __syncthreads();
    const auto* values = reinterpret_cast<const uint64_t*>(d.values);
    const auto* bases = reinterpret_cast<const uint64_t*>(d.bases);
    const bool fill_nan = (d.flags & abi::kFillNan) != 0;
    const uint32_t nan_fill = __float_as_uint(__double2float_rn(d.nan_fill));
    const uint64_t step = static_cast<uint64_t>(gridDim.x) * blockDim.x;
    for (uint64_t e = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < d.elements;
         e += step) {
      uint32_t value = Tendency(values[e], bases[e], d);
      if (fill_nan) {
        const bool nan = IsNan(value);
        reinterpret_cast<uint8_t*>(d.mask)[e] = nan ? 1 : 0;
        if (nan) value = nan_fill;
      }
      StoreBatchValue(d.target, static_cast<int64_t>(e), d.batch_type, value);
    }
  }
}

// Undoes blosc's byte shuffle of every block of `blocks`. Grid as zs_scatter's.
extern "C" __global__ void zs_unshuffle(const UnshuffleDescriptor* blocks, uint32_t count) {
  for (uint32_t b = blockIdx.y; b < count; b += gridDim.y) {
    const UnshuffleDescriptor d = blocks[b];
    const auto* in = reinterpret_cast<const unsigned char*>(d.source);
    auto* out = reinterpret_cast<unsigned char*>(d.target);
    const uint32_t elements = d.bytes / d.typesize;
    const uint32_t shuffled = elements * d.typesize;
    const uint32_t step = gridDim.x * blockDim.x;
    for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < d.bytes; i += step) {
      if (i < shuffled) {
        const uint32_t element = i / d.typesize;
        const uint32_t byte = i - element * d.typesize;
        out[i] = in[byte * elements + element];
      } else {
        out[i] = in[i];  // the bytes after the last whole element are stored as they are
      }
    }
  }
}

namespace {

constexpr uint32_t kAdlerModulus = 65521;

// Σ b and Σ w·b of one byte `b` of weight `w` (its distance from the end of the stream).
__device__ __forceinline__ void AdlerByte(uint32_t b, uint64_t weight, uint64_t& sum,
                                          uint64_t& weighted) {
  sum += b;
  weighted += (weight % kAdlerModulus) * b;
}

// The sum of `value` over the block's threads, in thread 0 (`scratch`: one word per warp).
__device__ __forceinline__ uint64_t BlockSum(uint64_t value, uint64_t* scratch) {
  for (int offset = 16; offset > 0; offset /= 2) {
    value += __shfl_down_sync(0xFFFFFFFFu, value, offset);
  }
  const uint32_t warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) scratch[warp] = value;
  __syncthreads();
  value = 0;
  if (threadIdx.x == 0) {
    for (uint32_t w = 0; w < (blockDim.x + 31) / 32; ++w) value += scratch[w];
  }
  __syncthreads();  // scratch is free again
  return value;
}

}  // namespace

// zlib's Adler-32 of every stream of `streams` (count of them) into `results`: one block per stream
// (y; looping when there are more than gridDim.y), blockDim.x a multiple of 32. For n bytes b_i,
// s1 = 1 + Σ b_i and s2 = n + Σ (n − i)·b_i, both mod 65521, and the result is s2 << 16 | s1.
// Each thread sums whole 16-byte words in 64-bit partial sums: per word, its bytes' sum (≤ 4080)
// and their weights within the word, the weight of the bytes after it kept mod 65521, so that a
// term stays below 2^28 and no partial sum of a stream under 2^40 bytes can wrap; partial s2s are
// reduced mod 65521 before the block adds them. The bytes before the first aligned word and after
// the last whole one are read one by one: nothing past the stream is read.
extern "C" __global__ void zs_adler32(const ChecksumDescriptor* streams, uint32_t count,
                                      uint32_t* results) {
  __shared__ uint64_t scratch[32];
  for (uint32_t s = blockIdx.y; s < count; s += gridDim.y) {
    const ChecksumDescriptor d = streams[s];
    const auto* bytes = reinterpret_cast<const unsigned char*>(d.data);
    const uint64_t n = d.bytes;
    const uint64_t misaligned = (16 - d.data % 16) % 16;
    const uint64_t head = misaligned < n ? misaligned : n;
    const uint64_t words = (n - head) / 16;
    const uint64_t body_end = head + 16 * words;
    const auto* body = reinterpret_cast<const uint4*>(bytes + head);
    uint64_t sum = 0, weighted = 0;
    // The bytes after this thread's word, mod 65521: its byte j weighs after + 16 − j. It falls by
    // 16·blockDim.x from one word of the thread to its next (kept reduced: no 64-bit division).
    const uint32_t step = 16 * blockDim.x % kAdlerModulus;
    uint32_t after =
        threadIdx.x < words
            ? static_cast<uint32_t>((n - (head + 16 * threadIdx.x + 16)) % kAdlerModulus)
            : 0;
    for (uint64_t w = threadIdx.x; w < words; w += blockDim.x) {
      const uint4 v = body[w];
      const uint32_t parts[4] = {v.x, v.y, v.z, v.w};
      uint32_t word_sum = 0, word_weighted = 0;  // weights 16 … 1 within the word
#pragma unroll
      for (int k = 0; k < 4; ++k) {
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const uint32_t b = (parts[k] >> (8 * j)) & 0xFFu;
          word_sum += b;
          word_weighted += (16 - (4 * k + j)) * b;
        }
      }
      sum += word_sum;
      weighted += static_cast<uint64_t>(after) * word_sum + word_weighted;
      after = after >= step ? after - step : after + kAdlerModulus - step;
    }
    for (uint64_t i = threadIdx.x; i < head; i += blockDim.x) {
      AdlerByte(bytes[i], n - i, sum, weighted);
    }
    for (uint64_t i = body_end + threadIdx.x; i < n; i += blockDim.x) {
      AdlerByte(bytes[i], n - i, sum, weighted);
    }
    sum = BlockSum(sum % kAdlerModulus, scratch);
    weighted = BlockSum(weighted % kAdlerModulus, scratch);
    if (threadIdx.x == 0) {
      const uint64_t s1 = (1 + sum) % kAdlerModulus;
      const uint64_t s2 = (n % kAdlerModulus + weighted) % kAdlerModulus;
      results[s] = static_cast<uint32_t>(s2 << 16 | s1);
    }
  }
}

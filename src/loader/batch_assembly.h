// The assemble stage on the CPU: one planned box of a decoded chunk → its slab of a batch tensor,
// converted from the array's data type to the batch's, normalised, with the NaN policy applied.
// The GPU path does the same in one kernel launch per wave (docs/architecture.md, "On the GPU");
// batches from the two must be identical, so the arithmetic is spelled out here:
// out = (x - mean) * inv_std, computed in float32 for sources float32 holds exactly (float16/32,
// 8/16-bit integers) and in float64 for wider ones (float64, 32/64-bit integers), rounded to
// float32. A CF-decoded variable (dataset/cf_decoding.h) is decoded first, in the same pass: the
// stored value converted to the decoded type, fill values → NaN, × scale_factor, + add_offset, then
// normalised in float64 when it decodes to float64 (packed variables, wide integers) and in float32
// otherwise; then NaN → nan_fill when filling; then rounded to the batch dtype (bfloat16 and
// float16 round to nearest even; NaN stays NaN). float16 (source or batch) uses the compiler's
// _Float16 (GCC 12, clang 15 on x86-64); a build without it rejects float16 at open.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "dataset/cf_decoding.h"
#include "loader/read_plan.h"
#include "zarrstream/data_type.h"
#include "zarrstream/loader.h"

namespace zarrstream {

struct SlabTransform {
  double mean = 0;
  double inv_std = 1;
  bool fill_nan = false;
  double nan_fill = 0;
  // The channel's CF decoding (owned by the loader's geometry); null: values as stored.
  const CfDecoding* cf = nullptr;
};

// `chunk`: the decoded chunk (C order, `chunk_shape` elements of `source`, the array's data type;
// transform.cf->source when decoding says how its elements are read). `slab`: the first
// element of the slab in the batch tensor; `slab_strides`: element strides of the slab along each
// array dimension (0 on dimensions the slab collapses: time, level). `mask`: the slab's first
// mask byte (same strides), written only when transform.fill_nan.
void AssembleCopy(const std::byte* chunk, DataType source, std::span<const uint64_t> chunk_shape,
                  const PlannedCopy& copy, std::byte* slab, BatchDType dtype,
                  const DimArray& slab_strides, const SlabTransform& transform, uint8_t* mask);

// Tendency targets (LoaderGeometry::base_slabs): AssembleDecoded copies a box as AssembleCopy does
// but into float64 values CF-decoded and nothing else (a target's or its base's values, kept aside
// per batch); AssembleTendency then writes `n` elements of one target slab: ((target - base) -
// transform.mean) * transform.inv_std in float64, NaN → nan_fill when filling (mask as
// AssembleCopy's), rounded to float32 and then to the batch dtype, as AssembleCopy rounds. The
// differences are of values decoded in the arithmetic type AssembleCopy decodes them in (float32
// for narrow sources), so only the batch dtype's rounding comes after the subtraction.
void AssembleDecoded(const std::byte* chunk, DataType source, std::span<const uint64_t> chunk_shape,
                     const PlannedCopy& copy, double* slab, const DimArray& slab_strides,
                     const CfDecoding* cf);
void AssembleTendency(const double* target, const double* base, uint64_t n,
                      const SlabTransform& transform, std::byte* slab, BatchDType dtype,
                      uint8_t* mask);

// Computed forcing `kind` (dataset/computed_forcing_math.h) at valid time `seconds` over one slab:
// C order over `shape` (the spatial dimensions), the latitude along axis `latitude_axis` taking
// `latitudes[i]` at its index i (likewise longitude; an axis < 0: the forcing does not need it),
// computed in float64 and rounded to the batch dtype. `mask`: the slab's mask bytes, set to 0
// (a forcing is never missing), or null.
void AssembleComputed(uint32_t kind, int64_t seconds, std::span<const uint64_t> shape,
                      int latitude_axis, const double* latitudes, int longitude_axis,
                      const double* longitudes, std::byte* slab, BatchDType dtype, uint8_t* mask);

// The box `offset`/`shape` (per dimension of the slab, C order over `slab_shape`) of one slab set
// to `value` (in output units: patch padding), rounded to float32 and then to the batch dtype as
// the GPU's fill does; a NaN value becomes transform.nan_fill with its mask bytes 1 when
// transform.fill_nan, else the mask bytes are 0 (`mask`: the slab's first mask byte, or null).
void AssembleFill(double value, std::span<const uint64_t> slab_shape, const DimArray& offset,
                  const DimArray& shape, std::byte* slab, BatchDType dtype,
                  const SlabTransform& transform, uint8_t* mask);

// float32 → bfloat16 bits, rounding to nearest even (NaN stays a quiet NaN).
uint16_t FloatToBFloat16(float value);

}  // namespace zarrstream

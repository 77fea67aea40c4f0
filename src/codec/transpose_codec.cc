#include "codec/transpose_codec.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <string>
#include <vector>

#include "codec/codec_configuration.h"

namespace zarrstream {
namespace {

constexpr std::string_view kName = "transpose";

// Every planned dimension has an extent of at least 2 and the element count fits in 64 bits, so a
// plan never has more than 64 dimensions.
constexpr size_t kMaxPlannedRank = 64;

struct Unit16 {
  uint64_t words[2];
};

// dst = np.transpose(src, perm) for C-order arrays of `elem_size`-byte elements.
class PermutePlan {
 public:
  PermutePlan(std::span<const uint64_t> src_shape, std::span<const size_t> perm, size_t elem_size)
      : elem_size_(elem_size) {
    const size_t rank = src_shape.size();
    std::vector<uint64_t> src_strides(rank);
    uint64_t stride = 1;
    for (size_t d = rank; d-- > 0;) {
      src_strides[d] = stride;
      stride *= src_shape[d];
    }
    total_ = stride;
    if (total_ == 0) {
      kind_ = Kind::kEmpty;
      return;
    }
    // Destination dimensions in order, as (extent, source stride); drop unit dimensions and merge
    // neighbours that are also neighbours, in the same order, in the source.
    std::vector<uint64_t> extents, strides;
    for (size_t i = 0; i < rank; ++i) {
      const uint64_t extent = src_shape[perm[i]];
      const uint64_t src_stride = src_strides[perm[i]];
      if (extent == 1) continue;
      if (!extents.empty() && strides.back() == src_stride * extent) {
        extents.back() *= extent;
        strides.back() = src_stride;
        continue;
      }
      extents.push_back(extent);
      strides.push_back(src_stride);
    }
    const size_t n = extents.size();
    if (n <= 1) {
      kind_ = Kind::kCopy;
      return;
    }
    std::vector<uint64_t> dst_strides(n);
    stride = 1;
    for (size_t i = n; i-- > 0;) {
      dst_strides[i] = stride;
      stride *= extents[i];
    }
    size_t a = n - 1, b = n;  // a: innermost in the destination; b: innermost in the source
    if (strides[a] == 1) {
      kind_ = Kind::kRows;
      row_ = extents[a];
    } else {
      kind_ = Kind::kTiles;
      b = static_cast<size_t>(std::find(strides.begin(), strides.end(), 1) - strides.begin());
      na_ = extents[a];
      nb_ = extents[b];
      src_stride_a_ = strides[a];
      dst_stride_b_ = dst_strides[b];
    }
    for (size_t i = 0; i < n; ++i) {
      if (i == a || i == b) continue;
      outer_.push_back({extents[i], strides[i], dst_strides[i]});
    }
  }

  void Run(const std::byte* src, std::byte* dst) const {
    switch (kind_) {
      case Kind::kEmpty:
        return;
      case Kind::kCopy:
        std::memcpy(dst, src, total_ * elem_size_);
        return;
      case Kind::kRows: {
        const size_t row_bytes = row_ * elem_size_;
        ForEachOuter([&](uint64_t s, uint64_t d) {
          std::memcpy(dst + d * elem_size_, src + s * elem_size_, row_bytes);
        });
        return;
      }
      case Kind::kTiles:
        switch (elem_size_) {
          case 1:
            return RunTiles<uint8_t>(src, dst);
          case 2:
            return RunTiles<uint16_t>(src, dst);
          case 4:
            return RunTiles<uint32_t>(src, dst);
          case 8:
            return RunTiles<uint64_t>(src, dst);
          case 16:
            return RunTiles<Unit16>(src, dst);
          default:
            return;  // DataTypeSize has no other sizes
        }
    }
  }

 private:
  enum class Kind { kEmpty, kCopy, kRows, kTiles };

  struct OuterDim {
    uint64_t extent, src_stride, dst_stride;
  };

  // Calls f(src offset, dst offset), in elements, for every index of the outer dimensions.
  template <typename F>
  void ForEachOuter(F&& f) const {
    std::array<uint64_t, kMaxPlannedRank> index{};
    uint64_t s = 0, d = 0;
    while (true) {
      f(s, d);
      size_t k = outer_.size();
      while (k-- > 0) {
        const OuterDim& dim = outer_[k];
        if (++index[k] < dim.extent) {
          s += dim.src_stride;
          d += dim.dst_stride;
          break;
        }
        index[k] = 0;
        s -= dim.src_stride * (dim.extent - 1);
        d -= dim.dst_stride * (dim.extent - 1);
      }
      if (k == static_cast<size_t>(-1)) return;
    }
  }

  // The 2-D case: dst[b][a] = src[a][b] (b contiguous in the source, a in the destination),
  // for every outer index. Cache-sized tiles are cut into micro-blocks that are read as
  // contiguous source rows into a small local block and written as contiguous destination rows:
  // both sides get wide loads and stores, and only the local block is accessed with a stride.
  template <typename T>
  void RunTiles(const std::byte* src, std::byte* dst) const {
    constexpr uint64_t kMicro = sizeof(T) == 1 ? 16 : 8;
    constexpr uint64_t kTile = 8 * kMicro;
    const uint64_t na = na_, nb = nb_, ssa = src_stride_a_, dsb = dst_stride_b_;
    ForEachOuter([&](uint64_t s_off, uint64_t d_off) {
      const T* s0 = reinterpret_cast<const T*>(src) + s_off;
      T* d0 = reinterpret_cast<T*>(dst) + d_off;
      for (uint64_t a0 = 0; a0 < na; a0 += kTile) {
        const uint64_t a1 = std::min(na, a0 + kTile);
        for (uint64_t b0 = 0; b0 < nb; b0 += kTile) {
          const uint64_t b1 = std::min(nb, b0 + kTile);
          for (uint64_t a = a0; a < a1; a += kMicro) {
            for (uint64_t b = b0; b < b1; b += kMicro) {
              if (a + kMicro <= a1 && b + kMicro <= b1) {
                MicroBlock<T, kMicro>(s0 + b + a * ssa, ssa, d0 + b * dsb + a, dsb);
              } else {
                for (uint64_t bb = b; bb < std::min(b1, b + kMicro); ++bb) {
                  for (uint64_t aa = a; aa < std::min(a1, a + kMicro); ++aa) {
                    Copy(s0 + bb + aa * ssa, d0 + bb * dsb + aa);
                  }
                }
              }
            }
          }
        }
      }
    });
  }

  // Element copies through memcpy: the buffers are raw bytes with no alignment promise.
  template <typename T>
  static void Copy(const T* from, T* to) {
    std::memcpy(static_cast<void*>(to), static_cast<const void*>(from), sizeof(T));
  }

  // dst[b * dst_stride + a] = src[a * src_stride + b] for a, b < kN.
  template <typename T, uint64_t kN>
  static void MicroBlock(const T* src, uint64_t src_stride, T* dst, uint64_t dst_stride) {
    T block[kN][kN];
    for (uint64_t a = 0; a < kN; ++a) {
      std::memcpy(static_cast<void*>(block[a]), static_cast<const void*>(src + a * src_stride),
                  sizeof(block[a]));
    }
    for (uint64_t b = 0; b < kN; ++b) {
      T row[kN];
      for (uint64_t a = 0; a < kN; ++a) row[a] = block[a][b];
      std::memcpy(static_cast<void*>(dst + b * dst_stride), static_cast<const void*>(row),
                  sizeof(row));
    }
  }

  size_t elem_size_;
  uint64_t total_ = 0;
  Kind kind_ = Kind::kEmpty;
  std::vector<OuterDim> outer_;
  uint64_t row_ = 0;                                                // kRows: elements per row
  uint64_t na_ = 0, nb_ = 0, src_stride_a_ = 0, dst_stride_b_ = 0;  // kTiles
};

class TransposeCodec final : public ArrayToArrayCodec {
 public:
  TransposeCodec(const ChunkRepresentation& decoded, std::vector<size_t> order)
      : order_(std::move(order)),
        decoded_bytes_(decoded.num_bytes()),
        encode_plan_(decoded.shape, order_, DataTypeSize(decoded.data_type)),
        decode_plan_(EncodedShape(decoded.shape, order_), Inverse(order_),
                     DataTypeSize(decoded.data_type)) {
    encoded_ = decoded;
    encoded_.shape = EncodedShape(decoded.shape, order_);
  }

  const ChunkRepresentation& encoded_representation() const override { return encoded_; }

  Status Decode(std::span<const std::byte> encoded, std::span<std::byte> decoded) const override {
    ZS_RETURN_IF_ERROR(CheckSizes(encoded.size(), decoded.size()));
    decode_plan_.Run(encoded.data(), decoded.data());
    return Status::Ok();
  }

  Status Encode(std::span<const std::byte> decoded, std::span<std::byte> encoded) const override {
    ZS_RETURN_IF_ERROR(CheckSizes(encoded.size(), decoded.size()));
    encode_plan_.Run(decoded.data(), encoded.data());
    return Status::Ok();
  }

  nlohmann::json ToJson() const override { return CodecJson(kName, {{"order", order_}}); }
  CodecTraits traits() const override { return {.type = CodecTraits::Type::kTranspose}; }

 private:
  static std::vector<uint64_t> EncodedShape(std::span<const uint64_t> shape,
                                            std::span<const size_t> order) {
    std::vector<uint64_t> encoded(order.size());
    for (size_t i = 0; i < order.size(); ++i) encoded[i] = shape[order[i]];
    return encoded;
  }

  static std::vector<size_t> Inverse(std::span<const size_t> order) {
    std::vector<size_t> inverse(order.size());
    for (size_t i = 0; i < order.size(); ++i) inverse[order[i]] = i;
    return inverse;
  }

  Status CheckSizes(size_t encoded, size_t decoded) const {
    if (decoded != decoded_bytes_ || encoded != decoded_bytes_) {
      return InternalError("transpose: buffers of " + std::to_string(encoded) + " and " +
                           std::to_string(decoded) + " bytes for a chunk of " +
                           std::to_string(decoded_bytes_));
    }
    return Status::Ok();
  }

  std::vector<size_t> order_;
  uint64_t decoded_bytes_;
  ChunkRepresentation encoded_;
  PermutePlan encode_plan_;
  PermutePlan decode_plan_;
};

}  // namespace

Result<std::unique_ptr<ArrayToArrayCodec>> MakeTransposeCodec(const nlohmann::json& configuration,
                                                              const ChunkRepresentation& decoded) {
  ZS_ASSIGN_OR_RETURN(CodecConfiguration config,
                      CodecConfiguration::Parse(kName, configuration, {"order"}));
  const size_t rank = decoded.shape.size();
  const nlohmann::json* order_json = config.Find("order");
  if (order_json == nullptr) return config.Error("configuration field 'order' is required");
  std::vector<size_t> order(rank);
  for (size_t i = 0; i < rank; ++i) order[i] = i;
  if (order_json->is_string() && order_json->get<std::string>() == "F") {
    std::reverse(order.begin(), order.end());
  } else if (!(order_json->is_string() && order_json->get<std::string>() == "C")) {
    const std::string problem = "must be a permutation of 0.." + std::to_string(rank) +
                                "-1 (the chunk's rank is " + std::to_string(rank) + ")";
    if (!order_json->is_array() || order_json->size() != rank) {
      return config.FieldError("order", problem);
    }
    std::vector<bool> seen(rank, false);
    for (size_t i = 0; i < rank; ++i) {
      const nlohmann::json& v = (*order_json)[i];
      if (!v.is_number_integer() || v.get<int64_t>() < 0 ||
          static_cast<uint64_t>(v.get<int64_t>()) >= rank || seen[v.get<int64_t>()]) {
        return config.FieldError("order", problem);
      }
      order[i] = static_cast<size_t>(v.get<int64_t>());
      seen[order[i]] = true;
    }
  }
  return std::unique_ptr<ArrayToArrayCodec>(new TransposeCodec(decoded, std::move(order)));
}

}  // namespace zarrstream

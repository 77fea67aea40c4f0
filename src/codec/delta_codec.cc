#include "codec/delta_codec.h"

#include <cstring>
#include <string>

#include "codec/codec_configuration.h"
#include "codec/numpy_arithmetic.h"

namespace zarrstream {
namespace {

constexpr std::string_view kName = "numcodecs.delta";

// enc[0] = arr[0]; enc[i] = arr[i] - arr[i - 1] in D arithmetic; each cast to A.
template <typename D, typename A>
void EncodeDelta(const std::byte* in, std::byte* out, uint64_t n) {
  D previous{};
  for (uint64_t i = 0; i < n; ++i) {
    const D x = numpy::Load<D>(in + i * sizeof(D));
    D diff;
    if (i == 0) {
      diff = x;
    } else if constexpr (std::is_integral_v<D>) {
      diff = numpy::WrappingSub(x, previous);
    } else {
      diff = static_cast<D>(x - previous);
    }
    numpy::Store<A>(out + i * sizeof(A), numpy::Cast<A>(diff));
    previous = x;
  }
}

// np.cumsum(enc, out=dec): accumulate in result_type(A, D), cast each partial sum to D.
template <typename D, typename A>
void DecodeDelta(const std::byte* in, std::byte* out, uint64_t n) {
  if (n == 0) return;
  if constexpr (std::is_integral_v<D> && std::is_integral_v<A> &&
                !numpy::kIntegersPromoteToFloat<D, A>) {
    // Any integer loop at least as wide as D gives the true sum modulo 2^bits(D).
    uint64_t sum = 0;
    for (uint64_t i = 0; i < n; ++i) {
      sum += static_cast<uint64_t>(numpy::Load<A>(in + i * sizeof(A)));
      numpy::Store<D>(out + i * sizeof(D), static_cast<D>(sum));
    }
  } else {
    using Acc = std::conditional_t<std::is_integral_v<D> && std::is_integral_v<A>, double,
                                   numpy::PromotedFloat<D, A>>;
    // The first partial sum is the first element itself (so -0.0 stays -0.0).
    Acc sum = numpy::Cast<Acc>(numpy::Load<A>(in));
    numpy::Store<D>(out, numpy::Cast<D>(sum));
    for (uint64_t i = 1; i < n; ++i) {
      sum = static_cast<Acc>(sum + numpy::Cast<Acc>(numpy::Load<A>(in + i * sizeof(A))));
      numpy::Store<D>(out + i * sizeof(D), numpy::Cast<D>(sum));
    }
  }
}

using Kernel = void (*)(const std::byte*, std::byte*, uint64_t);

class DeltaCodec final : public ArrayToArrayCodec {
 public:
  DeltaCodec(const ChunkRepresentation& decoded, DataType astype, std::string dtype_string,
             std::string astype_string, Kernel encode, Kernel decode)
      : dtype_string_(std::move(dtype_string)),
        astype_string_(std::move(astype_string)),
        num_elements_(decoded.num_elements()),
        decoded_size_(DataTypeSize(decoded.data_type)),
        encode_(encode),
        decode_(decode) {
    encoded_ = decoded;
    encoded_.data_type = astype;
    // The fill value of the encoded chunk is what encoding a chunk of one fill element gives.
    encoded_.fill_value.resize(DataTypeSize(astype));
    if (decoded.fill_value.size() == decoded_size_) {
      encode_(decoded.fill_value.data(), encoded_.fill_value.data(), 1);
    }
  }

  const ChunkRepresentation& encoded_representation() const override { return encoded_; }

  Status Decode(std::span<const std::byte> encoded, std::span<std::byte> decoded) const override {
    ZS_RETURN_IF_ERROR(CheckSizes(encoded.size(), decoded.size()));
    decode_(encoded.data(), decoded.data(), num_elements_);
    return Status::Ok();
  }

  Status Encode(std::span<const std::byte> decoded, std::span<std::byte> encoded) const override {
    ZS_RETURN_IF_ERROR(CheckSizes(encoded.size(), decoded.size()));
    encode_(decoded.data(), encoded.data(), num_elements_);
    return Status::Ok();
  }

  nlohmann::json ToJson() const override {
    return CodecJson(kName, {{"dtype", dtype_string_}, {"astype", astype_string_}});
  }
  CodecTraits traits() const override { return {.type = CodecTraits::Type::kDelta}; }

 private:
  Status CheckSizes(size_t encoded, size_t decoded) const {
    if (encoded != num_elements_ * DataTypeSize(encoded_.data_type) ||
        decoded != num_elements_ * decoded_size_) {
      return InternalError("numcodecs.delta: buffers of " + std::to_string(encoded) + " and " +
                           std::to_string(decoded) + " bytes for a chunk of " +
                           std::to_string(num_elements_) + " elements");
    }
    return Status::Ok();
  }

  std::string dtype_string_;
  std::string astype_string_;
  uint64_t num_elements_;
  size_t decoded_size_;
  Kernel encode_;
  Kernel decode_;
  ChunkRepresentation encoded_;
};

}  // namespace

Result<std::unique_ptr<ArrayToArrayCodec>> MakeDeltaCodec(const nlohmann::json& configuration,
                                                          const ChunkRepresentation& decoded) {
  ZS_ASSIGN_OR_RETURN(CodecConfiguration config,
                      CodecConfiguration::Parse(kName, configuration, {"dtype", "astype"}));
  ZS_ASSIGN_OR_RETURN(std::optional<std::string> dtype_string, config.String("dtype"));
  if (!dtype_string) return config.Error("configuration field 'dtype' is required");
  ZS_ASSIGN_OR_RETURN(std::optional<std::string> astype_string, config.String("astype"));
  if (!astype_string) astype_string = dtype_string;
  ZS_ASSIGN_OR_RETURN(auto conversion, config.DtypeAndAstype(decoded.data_type));
  const DataType dtype = conversion.dtype, astype = conversion.astype;
  Kernel encode = nullptr, decode = nullptr;
  bool supported = numpy::VisitRealType(dtype, [&](auto d_tag) {
    numpy::VisitRealType(astype, [&](auto a_tag) {
      using D = typename decltype(d_tag)::type;
      using A = typename decltype(a_tag)::type;
      encode = &EncodeDelta<D, A>;
      decode = &DecodeDelta<D, A>;
    });
  });
  if (!supported || encode == nullptr) {
    return UnsupportedError("numcodecs.delta: data types " + std::string(DataTypeName(dtype)) +
                            " -> " + std::string(DataTypeName(astype)) +
                            " are not supported (integer and float types only)");
  }
  return std::unique_ptr<ArrayToArrayCodec>(new DeltaCodec(
      decoded, astype, std::move(*dtype_string), std::move(*astype_string), encode, decode));
}

}  // namespace zarrstream

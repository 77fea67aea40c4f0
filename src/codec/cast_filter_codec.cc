#include "codec/cast_filter_codec.h"

#include <cmath>
#include <cstring>
#include <string>

#include "codec/codec_configuration.h"
#include "codec/numpy_arithmetic.h"

namespace zarrstream {
namespace {

// What an encoder needs beyond the values.
struct Parameters {
  double quantize_scale = 1;  // quantize: 2^bits
  int mask_bits = 0;          // bitround: mantissa bits cleared
};

using Kernel = void (*)(const Parameters&, const std::byte*, std::byte*, uint64_t);

// numpy's astype(To) of each value; decoding of all three filters.
template <typename From, typename To>
void CastValues(const Parameters& /*parameters*/, const std::byte* in, std::byte* out, uint64_t n) {
  if constexpr (std::is_same_v<From, To>) {
    std::memcpy(out, in, n * sizeof(From));
  } else {
    for (uint64_t i = 0; i < n; ++i) {
      numpy::Store<To>(out + i * sizeof(To),
                       numpy::Cast<To>(numpy::Load<From>(in + i * sizeof(From))));
    }
  }
}

// numcodecs.Quantize.encode: np.around(scale * x) / scale in D (scale is a Python float, which
// numpy 2 applies in the array's type), then astype(A).
template <typename D, typename A>
void Quantize(const Parameters& parameters, const std::byte* in, std::byte* out, uint64_t n) {
  const D scale = static_cast<D>(parameters.quantize_scale);
  for (uint64_t i = 0; i < n; ++i) {
    const D rounded =
        numpy::RoundHalfEven(static_cast<D>(scale * numpy::Load<D>(in + i * sizeof(D))));
    numpy::Store<A>(out + i * sizeof(A), numpy::Cast<A>(static_cast<D>(rounded / scale)));
  }
}

// numcodecs.BitRound.encode on the float's bits U: add half a quantum (ties to even), clear the
// low mask_bits bits. Unsigned arithmetic wraps as numpy's signed integers do.
template <typename U>
void BitRound(const Parameters& parameters, const std::byte* in, std::byte* out, uint64_t n) {
  const int mask_bits = parameters.mask_bits;
  if (mask_bits == 0) {
    std::memcpy(out, in, n * sizeof(U));
    return;
  }
  const U mask = static_cast<U>(~((U{1} << mask_bits) - 1));
  const U half_quantum_minus_one = static_cast<U>((U{1} << (mask_bits - 1)) - 1);
  for (uint64_t i = 0; i < n; ++i) {
    U bits = numpy::Load<U>(in + i * sizeof(U));
    bits = static_cast<U>(bits + ((bits >> mask_bits) & 1) + half_quantum_minus_one);
    numpy::Store<U>(out + i * sizeof(U), static_cast<U>(bits & mask));
  }
}

class CastFilterCodec final : public ArrayToArrayCodec {
 public:
  CastFilterCodec(std::string name, CodecTraits::Type type, const ChunkRepresentation& decoded,
                  DataType encoded_type, const Parameters& parameters, nlohmann::json configuration,
                  Kernel encode, Kernel decode)
      : name_(std::move(name)),
        type_(type),
        parameters_(parameters),
        configuration_(std::move(configuration)),
        num_elements_(decoded.num_elements()),
        decoded_size_(DataTypeSize(decoded.data_type)),
        encode_(encode),
        decode_(decode) {
    encoded_ = decoded;
    encoded_.data_type = encoded_type;
    // The fill value of the encoded chunk is what encoding a chunk of one fill element gives.
    encoded_.fill_value.resize(DataTypeSize(encoded_type));
    if (decoded.fill_value.size() == decoded_size_) {
      encode_(parameters_, decoded.fill_value.data(), encoded_.fill_value.data(), 1);
    }
    identity_decode_ = encoded_type == decoded.data_type;
  }

  const ChunkRepresentation& encoded_representation() const override { return encoded_; }

  Status Decode(std::span<const std::byte> encoded, std::span<std::byte> decoded) const override {
    ZS_RETURN_IF_ERROR(CheckSizes(encoded.size(), decoded.size()));
    decode_(parameters_, encoded.data(), decoded.data(), num_elements_);
    return Status::Ok();
  }

  Status Encode(std::span<const std::byte> decoded, std::span<std::byte> encoded) const override {
    ZS_RETURN_IF_ERROR(CheckSizes(encoded.size(), decoded.size()));
    encode_(parameters_, decoded.data(), encoded.data(), num_elements_);
    return Status::Ok();
  }

  nlohmann::json ToJson() const override { return CodecJson(name_, configuration_); }
  CodecTraits traits() const override {
    return {.type = type_, .identity_decode = identity_decode_};
  }

 private:
  Status CheckSizes(size_t encoded, size_t decoded) const {
    if (encoded != num_elements_ * DataTypeSize(encoded_.data_type) ||
        decoded != num_elements_ * decoded_size_) {
      return InternalError(name_ + ": buffers of " + std::to_string(encoded) + " and " +
                           std::to_string(decoded) + " bytes for a chunk of " +
                           std::to_string(num_elements_) + " elements");
    }
    return Status::Ok();
  }

  std::string name_;
  CodecTraits::Type type_;
  Parameters parameters_;
  nlohmann::json configuration_;
  uint64_t num_elements_;
  size_t decoded_size_;
  Kernel encode_;
  Kernel decode_;
  ChunkRepresentation encoded_;
  bool identity_decode_ = false;
};

// The kernels of a filter from decoded type D to encoded type A.
struct Kernels {
  Kernel encode = nullptr;
  Kernel decode = nullptr;
};

Status UnsupportedTypes(std::string_view name, DataType decoded, DataType encoded,
                        std::string_view supported) {
  return UnsupportedError(std::string(name) + ": data types " + std::string(DataTypeName(decoded)) +
                          " -> " + std::string(DataTypeName(encoded)) + " are not supported (" +
                          std::string(supported) + " only)");
}

// The power of two numcodecs.Quantize scales by, computed as numcodecs computes it.
double QuantizeScale(int64_t digits) {
  const double precision = std::pow(10.0, static_cast<double>(-digits));
  double exponent = std::log10(precision);
  exponent = exponent < 0 ? std::floor(exponent) : std::ceil(exponent);
  const double bits = std::ceil(std::log2(std::pow(10.0, -exponent)));
  return std::pow(2.0, bits);
}

}  // namespace

Result<std::unique_ptr<ArrayToArrayCodec>> MakeQuantizeCodec(const nlohmann::json& configuration,
                                                             const ChunkRepresentation& decoded) {
  constexpr std::string_view kName = "numcodecs.quantize";
  ZS_ASSIGN_OR_RETURN(
      CodecConfiguration config,
      CodecConfiguration::Parse(kName, configuration, {"digits", "dtype", "astype"}));
  // Beyond ±400 digits the scale is 0 or infinite in numcodecs too; no store has those.
  ZS_ASSIGN_OR_RETURN(std::optional<int64_t> digits, config.Integer("digits", -300, 300));
  if (!digits) return config.Error("configuration field 'digits' is required");
  ZS_ASSIGN_OR_RETURN(auto conversion, config.DtypeAndAstype(decoded.data_type));
  Kernels kernels;
  numpy::VisitRealType(conversion.dtype, [&](auto d_tag) {
    numpy::VisitRealType(conversion.astype, [&](auto a_tag) {
      using D = typename decltype(d_tag)::type;
      using A = typename decltype(a_tag)::type;
      if constexpr (numpy::kIsFloat<D> && numpy::kIsFloat<A>) {
        kernels = {&Quantize<D, A>, &CastValues<A, D>};
      }
    });
  });
  if (kernels.encode == nullptr) {
    return UnsupportedTypes(kName, conversion.dtype, conversion.astype, "float types");
  }
  nlohmann::json normalized = configuration;
  if (!normalized.contains("astype")) normalized["astype"] = normalized["dtype"];
  return std::unique_ptr<ArrayToArrayCodec>(
      new CastFilterCodec(std::string(kName), CodecTraits::Type::kQuantize, decoded,
                          conversion.astype, {.quantize_scale = QuantizeScale(*digits)},
                          std::move(normalized), kernels.encode, kernels.decode));
}

Result<std::unique_ptr<ArrayToArrayCodec>> MakeBitRoundCodec(const nlohmann::json& configuration,
                                                             const ChunkRepresentation& decoded) {
  constexpr std::string_view kName = "numcodecs.bitround";
  ZS_ASSIGN_OR_RETURN(CodecConfiguration config,
                      CodecConfiguration::Parse(kName, configuration, {"keepbits"}));
  int mantissa_bits = 0;
  Kernels kernels;
  switch (decoded.data_type) {
    case DataType::kFloat16:
      mantissa_bits = 10;
      kernels = {&BitRound<uint16_t>, &CastValues<uint16_t, uint16_t>};
      break;
    case DataType::kFloat32:
      mantissa_bits = 23;
      kernels = {&BitRound<uint32_t>, &CastValues<uint32_t, uint32_t>};
      break;
    case DataType::kFloat64:
      mantissa_bits = 52;
      kernels = {&BitRound<uint64_t>, &CastValues<uint64_t, uint64_t>};
      break;
    default:
      return UnsupportedError(std::string(kName) + ": data type " +
                              std::string(DataTypeName(decoded.data_type)) +
                              " is not supported (float16, float32 and float64 only)");
  }
  ZS_ASSIGN_OR_RETURN(std::optional<int64_t> keepbits,
                      config.Integer("keepbits", 0, mantissa_bits));
  if (!keepbits) return config.Error("configuration field 'keepbits' is required");
  return std::unique_ptr<ArrayToArrayCodec>(new CastFilterCodec(
      std::string(kName), CodecTraits::Type::kBitRound, decoded, decoded.data_type,
      {.mask_bits = mantissa_bits - static_cast<int>(*keepbits)}, configuration, kernels.encode,
      kernels.decode));
}

Result<std::unique_ptr<ArrayToArrayCodec>> MakeAsTypeCodec(const nlohmann::json& configuration,
                                                           const ChunkRepresentation& decoded) {
  constexpr std::string_view kName = "numcodecs.astype";
  ZS_ASSIGN_OR_RETURN(
      CodecConfiguration config,
      CodecConfiguration::Parse(kName, configuration, {"encode_dtype", "decode_dtype"}));
  ZS_ASSIGN_OR_RETURN(DataType encode_dtype, config.NumpyDataType("encode_dtype"));
  nlohmann::json normalized = configuration;
  if (config.Find("decode_dtype") != nullptr) {
    ZS_ASSIGN_OR_RETURN(DataType decode_dtype, config.NumpyDataType("decode_dtype"));
    if (decode_dtype != decoded.data_type) {
      return config.FieldError("decode_dtype", "must match the array's data type " +
                                                   std::string(DataTypeName(decoded.data_type)));
    }
  } else {
    normalized["decode_dtype"] = NumpyTypeString(decoded.data_type);
  }
  Kernels kernels;
  numpy::VisitRealType(decoded.data_type, [&](auto d_tag) {
    numpy::VisitRealType(encode_dtype, [&](auto a_tag) {
      using D = typename decltype(d_tag)::type;
      using A = typename decltype(a_tag)::type;
      kernels = {&CastValues<D, A>, &CastValues<A, D>};
    });
  });
  if (kernels.encode == nullptr) {
    return UnsupportedTypes(kName, decoded.data_type, encode_dtype, "integer and float types");
  }
  return std::unique_ptr<ArrayToArrayCodec>(
      new CastFilterCodec(std::string(kName), CodecTraits::Type::kAsType, decoded, encode_dtype, {},
                          std::move(normalized), kernels.encode, kernels.decode));
}

}  // namespace zarrstream

#include "codec/cast_filter_codec.h"

#include <cmath>
#include <cstring>
#include <string>

#include "codec/codec_configuration.h"
#include "codec/elementwise_filter_codec.h"
#include "codec/numpy_arithmetic.h"

namespace zarrstream {
namespace {

// numpy's astype(To) of each value; decoding of all three filters.
template <typename From, typename To>
void CastValues(const std::byte* in, std::byte* out, uint64_t n) {
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
void Quantize(double quantize_scale, const std::byte* in, std::byte* out, uint64_t n) {
  const D scale = static_cast<D>(quantize_scale);
  for (uint64_t i = 0; i < n; ++i) {
    const D rounded =
        numpy::RoundHalfEven(static_cast<D>(scale * numpy::Load<D>(in + i * sizeof(D))));
    numpy::Store<A>(out + i * sizeof(A), numpy::Cast<A>(static_cast<D>(rounded / scale)));
  }
}

// numcodecs.BitRound.encode on the float's bits U: add half a quantum (ties to even), clear the
// low mask_bits bits. Unsigned arithmetic wraps as numpy's signed integers do.
template <typename U>
ElementKernel BitRound(int mask_bits) {
  return [mask_bits](const std::byte* in, std::byte* out, uint64_t n) {
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
  };
}

// A filter whose decoding leaves the bytes as they are says so, so that decoders of the rest of the
// chain (the GPU path) may skip it.
CodecTraits CastTraits(CodecTraits::Type type, DataType decoded, DataType encoded) {
  return {.type = type, .identity_decode = encoded == decoded};
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
  const double scale = QuantizeScale(*digits);
  ElementwiseFilter filter{
      .name = std::string(kName),
      .traits = CastTraits(CodecTraits::Type::kQuantize, decoded.data_type, conversion.astype),
      .encoded_type = conversion.astype,
      .configuration = configuration};
  numpy::VisitRealType(conversion.dtype, [&](auto d_tag) {
    numpy::VisitRealType(conversion.astype, [&](auto a_tag) {
      using D = typename decltype(d_tag)::type;
      using A = typename decltype(a_tag)::type;
      if constexpr (numpy::kIsFloat<D> && numpy::kIsFloat<A>) {
        filter.encode = [scale](const std::byte* in, std::byte* out, uint64_t n) {
          Quantize<D, A>(scale, in, out, n);
        };
        filter.decode = &CastValues<A, D>;
      }
    });
  });
  if (!filter.encode) {
    return UnsupportedElementTypes(kName, conversion.dtype, conversion.astype, "float types");
  }
  if (!filter.configuration.contains("astype")) {
    filter.configuration["astype"] = filter.configuration["dtype"];
  }
  return MakeElementwiseFilterCodec(std::move(filter), decoded);
}

Result<std::unique_ptr<ArrayToArrayCodec>> MakeBitRoundCodec(const nlohmann::json& configuration,
                                                             const ChunkRepresentation& decoded) {
  constexpr std::string_view kName = "numcodecs.bitround";
  ZS_ASSIGN_OR_RETURN(CodecConfiguration config,
                      CodecConfiguration::Parse(kName, configuration, {"keepbits"}));
  int mantissa_bits = 0;
  ElementKernel (*bit_round)(int mask_bits) = nullptr;
  ElementKernel identity;
  switch (decoded.data_type) {
    case DataType::kFloat16:
      mantissa_bits = 10;
      bit_round = &BitRound<uint16_t>;
      identity = &CastValues<uint16_t, uint16_t>;
      break;
    case DataType::kFloat32:
      mantissa_bits = 23;
      bit_round = &BitRound<uint32_t>;
      identity = &CastValues<uint32_t, uint32_t>;
      break;
    case DataType::kFloat64:
      mantissa_bits = 52;
      bit_round = &BitRound<uint64_t>;
      identity = &CastValues<uint64_t, uint64_t>;
      break;
    default:
      return UnsupportedError(std::string(kName) + ": data type " +
                              std::string(DataTypeName(decoded.data_type)) +
                              " is not supported (float16, float32 and float64 only)");
  }
  ZS_ASSIGN_OR_RETURN(std::optional<int64_t> keepbits,
                      config.Integer("keepbits", 0, mantissa_bits));
  if (!keepbits) return config.Error("configuration field 'keepbits' is required");
  return MakeElementwiseFilterCodec(
      {.name = std::string(kName),
       .traits = CastTraits(CodecTraits::Type::kBitRound, decoded.data_type, decoded.data_type),
       .encoded_type = decoded.data_type,
       .configuration = configuration,
       .encode = bit_round(mantissa_bits - static_cast<int>(*keepbits)),
       .decode = std::move(identity)},
      decoded);
}

Result<std::unique_ptr<ArrayToArrayCodec>> MakeAsTypeCodec(const nlohmann::json& configuration,
                                                           const ChunkRepresentation& decoded) {
  constexpr std::string_view kName = "numcodecs.astype";
  ZS_ASSIGN_OR_RETURN(
      CodecConfiguration config,
      CodecConfiguration::Parse(kName, configuration, {"encode_dtype", "decode_dtype"}));
  ZS_ASSIGN_OR_RETURN(DataType encode_dtype, config.NumpyDataType("encode_dtype"));
  ElementwiseFilter filter{
      .name = std::string(kName),
      .traits = CastTraits(CodecTraits::Type::kAsType, decoded.data_type, encode_dtype),
      .encoded_type = encode_dtype,
      .configuration = configuration};
  if (config.Find("decode_dtype") != nullptr) {
    ZS_ASSIGN_OR_RETURN(DataType decode_dtype, config.NumpyDataType("decode_dtype"));
    if (decode_dtype != decoded.data_type) {
      return config.FieldError("decode_dtype", "must match the array's data type " +
                                                   std::string(DataTypeName(decoded.data_type)));
    }
  } else {
    filter.configuration["decode_dtype"] = NumpyTypeString(decoded.data_type);
  }
  numpy::VisitRealType(decoded.data_type, [&](auto d_tag) {
    numpy::VisitRealType(encode_dtype, [&](auto a_tag) {
      using D = typename decltype(d_tag)::type;
      using A = typename decltype(a_tag)::type;
      filter.encode = &CastValues<D, A>;
      filter.decode = &CastValues<A, D>;
    });
  });
  if (!filter.encode) {
    return UnsupportedElementTypes(kName, decoded.data_type, encode_dtype,
                                   "integer and float types");
  }
  return MakeElementwiseFilterCodec(std::move(filter), decoded);
}

}  // namespace zarrstream

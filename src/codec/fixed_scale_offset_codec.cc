#include "codec/fixed_scale_offset_codec.h"

#include <cstring>
#include <string>

#include "codec/codec_configuration.h"
#include "codec/elementwise_filter_codec.h"
#include "codec/numpy_arithmetic.h"

namespace zarrstream {
namespace {

constexpr std::string_view kName = "numcodecs.fixedscaleoffset";

// A Python scalar from the configuration: numpy treats ints and floats differently.
struct Scalar {
  double value = 0;
  int64_t integer = 0;
  bool is_integer = false;
};

struct Parameters {
  Scalar scale;
  Scalar offset;
};

template <typename D, typename A>
void Decode(const Parameters& p, const std::byte* in, std::byte* out, uint64_t n) {
  // true_divide of an integer array gives float64; a float array keeps its type.
  using C = std::conditional_t<numpy::kIsFloat<A>, A, double>;
  const C scale = static_cast<C>(p.scale.value);
  const C offset = static_cast<C>(p.offset.value);
  for (uint64_t i = 0; i < n; ++i) {
    const C y = static_cast<C>(numpy::Cast<C>(numpy::Load<A>(in + i * sizeof(A))) / scale);
    numpy::Store<D>(out + i * sizeof(D), numpy::Cast<D>(static_cast<C>(y + offset)));
  }
}

template <typename D, typename A>
void Encode(const Parameters& p, const std::byte* in, std::byte* out, uint64_t n) {
  auto store = [&](uint64_t i, auto v) { numpy::Store<A>(out + i * sizeof(A), numpy::Cast<A>(v)); };
  if constexpr (numpy::kIsFloat<D>) {
    const D scale = static_cast<D>(p.scale.value);
    const D offset = static_cast<D>(p.offset.value);
    for (uint64_t i = 0; i < n; ++i) {
      const D diff = static_cast<D>(numpy::Load<D>(in + i * sizeof(D)) - offset);
      store(i, numpy::RoundHalfEven(static_cast<D>(diff * scale)));
    }
  } else if (p.offset.is_integer) {
    const D offset = static_cast<D>(p.offset.integer);
    const D scale = static_cast<D>(p.scale.integer);
    for (uint64_t i = 0; i < n; ++i) {
      const D diff = numpy::WrappingSub(numpy::Load<D>(in + i * sizeof(D)), offset);
      if (p.scale.is_integer) {
        store(i, numpy::WrappingMul(diff, scale));
      } else {
        store(i, numpy::RoundHalfEven(static_cast<double>(diff) * p.scale.value));
      }
    }
  } else {
    for (uint64_t i = 0; i < n; ++i) {
      const double diff = static_cast<double>(numpy::Load<D>(in + i * sizeof(D))) - p.offset.value;
      store(i, numpy::RoundHalfEven(diff * p.scale.value));
    }
  }
}

Result<Scalar> ReadScalar(const CodecConfiguration& config, std::string_view field) {
  const nlohmann::json* value = config.Find(field);
  if (value == nullptr)
    return config.Error("configuration field '" + std::string(field) + "' is required");
  Scalar scalar;
  if (value->is_number_integer() && !value->is_number_unsigned()) {
    scalar.is_integer = true;
    scalar.integer = value->get<int64_t>();
  } else if (value->is_number_unsigned() &&
             value->get<uint64_t>() <= static_cast<uint64_t>(INT64_MAX)) {
    scalar.is_integer = true;
    scalar.integer = static_cast<int64_t>(value->get<uint64_t>());
  } else if (!value->is_number()) {
    return config.FieldError(field, "must be a number");
  }
  scalar.value = value->get<double>();
  return scalar;
}

}  // namespace

Result<std::unique_ptr<ArrayToArrayCodec>> MakeFixedScaleOffsetCodec(
    const nlohmann::json& configuration, const ChunkRepresentation& decoded) {
  ZS_ASSIGN_OR_RETURN(
      CodecConfiguration config,
      CodecConfiguration::Parse(kName, configuration, {"scale", "offset", "dtype", "astype"}));
  Parameters parameters;
  ZS_ASSIGN_OR_RETURN(parameters.scale, ReadScalar(config, "scale"));
  ZS_ASSIGN_OR_RETURN(parameters.offset, ReadScalar(config, "offset"));
  ZS_ASSIGN_OR_RETURN(auto conversion, config.DtypeAndAstype(decoded.data_type));
  const DataType dtype = conversion.dtype, astype = conversion.astype;
  ElementwiseFilter filter{.name = std::string(kName),
                           .traits = {.type = CodecTraits::Type::kFixedScaleOffset},
                           .encoded_type = astype,
                           .configuration = configuration};
  numpy::VisitRealType(dtype, [&](auto d_tag) {
    numpy::VisitRealType(astype, [&](auto a_tag) {
      using D = typename decltype(d_tag)::type;
      using A = typename decltype(a_tag)::type;
      filter.encode = [parameters](const std::byte* in, std::byte* out, uint64_t n) {
        Encode<D, A>(parameters, in, out, n);
      };
      filter.decode = [parameters](const std::byte* in, std::byte* out, uint64_t n) {
        Decode<D, A>(parameters, in, out, n);
      };
    });
  });
  if (!filter.encode) {
    return UnsupportedElementTypes(kName, dtype, astype, "integer and float types");
  }
  if (!filter.configuration.contains("astype")) {
    filter.configuration["astype"] = filter.configuration["dtype"];
  }
  return MakeElementwiseFilterCodec(std::move(filter), decoded);
}

}  // namespace zarrstream

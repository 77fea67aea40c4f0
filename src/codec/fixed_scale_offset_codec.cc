#include "codec/fixed_scale_offset_codec.h"

#include <cstring>
#include <string>

#include "codec/codec_configuration.h"
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

using Kernel = void (*)(const Parameters&, const std::byte*, std::byte*, uint64_t);

class FixedScaleOffsetCodec final : public ArrayToArrayCodec {
 public:
  FixedScaleOffsetCodec(const ChunkRepresentation& decoded, DataType astype,
                        const Parameters& parameters, nlohmann::json configuration, Kernel encode,
                        Kernel decode)
      : parameters_(parameters),
        configuration_(std::move(configuration)),
        num_elements_(decoded.num_elements()),
        decoded_size_(DataTypeSize(decoded.data_type)),
        encode_(encode),
        decode_(decode) {
    encoded_ = decoded;
    encoded_.data_type = astype;
    encoded_.fill_value.resize(DataTypeSize(astype));
    if (decoded.fill_value.size() == decoded_size_) {
      encode_(parameters_, decoded.fill_value.data(), encoded_.fill_value.data(), 1);
    }
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

  nlohmann::json ToJson() const override { return CodecJson(kName, configuration_); }
  CodecTraits traits() const override { return {.type = CodecTraits::Type::kFixedScaleOffset}; }

 private:
  Status CheckSizes(size_t encoded, size_t decoded) const {
    if (encoded != num_elements_ * DataTypeSize(encoded_.data_type) ||
        decoded != num_elements_ * decoded_size_) {
      return InternalError(std::string(kName) + ": buffers of " + std::to_string(encoded) +
                           " and " + std::to_string(decoded) + " bytes for a chunk of " +
                           std::to_string(num_elements_) + " elements");
    }
    return Status::Ok();
  }

  Parameters parameters_;
  nlohmann::json configuration_;
  uint64_t num_elements_;
  size_t decoded_size_;
  Kernel encode_;
  Kernel decode_;
  ChunkRepresentation encoded_;
};

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
  Kernel encode = nullptr, decode = nullptr;
  bool supported = numpy::VisitRealType(dtype, [&](auto d_tag) {
    numpy::VisitRealType(astype, [&](auto a_tag) {
      using D = typename decltype(d_tag)::type;
      using A = typename decltype(a_tag)::type;
      encode = &Encode<D, A>;
      decode = &Decode<D, A>;
    });
  });
  if (!supported || encode == nullptr) {
    return UnsupportedError(
        std::string(kName) + ": data types " + std::string(DataTypeName(dtype)) + " -> " +
        std::string(DataTypeName(astype)) + " are not supported (integer and float types only)");
  }
  nlohmann::json normalized = configuration;
  if (!normalized.contains("astype")) normalized["astype"] = normalized["dtype"];
  return std::unique_ptr<ArrayToArrayCodec>(new FixedScaleOffsetCodec(
      decoded, astype, parameters, std::move(normalized), encode, decode));
}

}  // namespace zarrstream

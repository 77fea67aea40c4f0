#include "codec/elementwise_filter_codec.h"

#include <utility>

#include "codec/codec_configuration.h"

namespace zarrstream {
namespace {

class ElementwiseFilterCodec final : public ArrayToArrayCodec {
 public:
  ElementwiseFilterCodec(ElementwiseFilter filter, const ChunkRepresentation& decoded)
      : filter_(std::move(filter)),
        num_elements_(decoded.num_elements()),
        decoded_size_(DataTypeSize(decoded.data_type)) {
    encoded_ = decoded;
    encoded_.data_type = filter_.encoded_type;
    // The fill value of the encoded chunk is what encoding a chunk of one fill element gives.
    encoded_.fill_value.resize(DataTypeSize(filter_.encoded_type));
    if (decoded.fill_value.size() == decoded_size_) {
      filter_.encode(decoded.fill_value.data(), encoded_.fill_value.data(), 1);
    }
  }

  const ChunkRepresentation& encoded_representation() const override { return encoded_; }

  Status Decode(std::span<const std::byte> encoded, std::span<std::byte> decoded) const override {
    ZS_RETURN_IF_ERROR(CheckSizes(encoded.size(), decoded.size()));
    filter_.decode(encoded.data(), decoded.data(), num_elements_);
    return Status::Ok();
  }

  Status Encode(std::span<const std::byte> decoded, std::span<std::byte> encoded) const override {
    ZS_RETURN_IF_ERROR(CheckSizes(encoded.size(), decoded.size()));
    filter_.encode(decoded.data(), encoded.data(), num_elements_);
    return Status::Ok();
  }

  nlohmann::json ToJson() const override { return CodecJson(filter_.name, filter_.configuration); }
  CodecTraits traits() const override { return filter_.traits; }

 private:
  Status CheckSizes(size_t encoded, size_t decoded) const {
    if (encoded != num_elements_ * DataTypeSize(encoded_.data_type) ||
        decoded != num_elements_ * decoded_size_) {
      return InternalError(filter_.name + ": buffers of " + std::to_string(encoded) + " and " +
                           std::to_string(decoded) + " bytes for a chunk of " +
                           std::to_string(num_elements_) + " elements");
    }
    return Status::Ok();
  }

  ElementwiseFilter filter_;
  uint64_t num_elements_;
  size_t decoded_size_;
  ChunkRepresentation encoded_;
};

}  // namespace

std::unique_ptr<ArrayToArrayCodec> MakeElementwiseFilterCodec(ElementwiseFilter filter,
                                                              const ChunkRepresentation& decoded) {
  return std::make_unique<ElementwiseFilterCodec>(std::move(filter), decoded);
}

Status UnsupportedElementTypes(std::string_view name, DataType decoded, DataType encoded,
                               std::string_view supported) {
  return UnsupportedError(std::string(name) + ": data types " + std::string(DataTypeName(decoded)) +
                          " -> " + std::string(DataTypeName(encoded)) + " are not supported (" +
                          std::string(supported) + " only)");
}

}  // namespace zarrstream

#include "codec/shuffle_codec.h"

#include <cstring>
#include <string>

#include "codec/codec_configuration.h"
#include "codec/decoded_size.h"

namespace zarrstream {
namespace {

constexpr std::string_view kName = "numcodecs.shuffle";

// out[b * count + i] = in[i * size + b] for `count` elements of `size` bytes. Templated on the
// common sizes so that the inner loop is unrolled.
template <size_t kSize>
void ShuffleFixed(const std::byte* in, std::byte* out, size_t count) {
  for (size_t i = 0; i < count; ++i) {
    for (size_t b = 0; b < kSize; ++b) out[b * count + i] = in[i * kSize + b];
  }
}

template <size_t kSize>
void UnshuffleFixed(const std::byte* in, std::byte* out, size_t count) {
  for (size_t i = 0; i < count; ++i) {
    for (size_t b = 0; b < kSize; ++b) out[i * kSize + b] = in[b * count + i];
  }
}

void Shuffle(const std::byte* in, std::byte* out, size_t count, size_t size) {
  switch (size) {
    case 2:
      return ShuffleFixed<2>(in, out, count);
    case 4:
      return ShuffleFixed<4>(in, out, count);
    case 8:
      return ShuffleFixed<8>(in, out, count);
    case 16:
      return ShuffleFixed<16>(in, out, count);
    default:
      for (size_t i = 0; i < count; ++i) {
        for (size_t b = 0; b < size; ++b) out[b * count + i] = in[i * size + b];
      }
  }
}

void Unshuffle(const std::byte* in, std::byte* out, size_t count, size_t size) {
  switch (size) {
    case 2:
      return UnshuffleFixed<2>(in, out, count);
    case 4:
      return UnshuffleFixed<4>(in, out, count);
    case 8:
      return UnshuffleFixed<8>(in, out, count);
    case 16:
      return UnshuffleFixed<16>(in, out, count);
    default:
      for (size_t i = 0; i < count; ++i) {
        for (size_t b = 0; b < size; ++b) out[i * size + b] = in[b * count + i];
      }
  }
}

class ShuffleCodec final : public BytesToBytesCodec {
 public:
  explicit ShuffleCodec(size_t element_size) : element_size_(element_size) {}

  Status Decode(std::span<const std::byte> encoded, DecodedSize expected_size,
                ByteBuffer* decoded) const override {
    // The output is as large as the input, which the caller already holds: only a size the
    // expectation does not admit is an error.
    if (!expected_size.admits(encoded.size())) {
      return expected_size.exact()
                 ? DecodedSizeMismatch(kName, encoded.size(), expected_size.bytes())
                 : DecodedSizeTooLarge(kName, expected_size);
    }
    decoded->Resize(encoded.size());
    Transform(encoded, decoded->span(), /*shuffle=*/false);
    return Status::Ok();
  }

  Status DecodeInto(std::span<const std::byte> encoded, std::span<std::byte> decoded,
                    CodecScratch* /*scratch*/) const override {
    if (decoded.size() != encoded.size()) {
      return DecodedSizeMismatch(kName, encoded.size(), decoded.size());
    }
    Transform(encoded, decoded, /*shuffle=*/false);
    return Status::Ok();
  }

  Status Encode(std::span<const std::byte> decoded, ByteBuffer* encoded) const override {
    encoded->Resize(decoded.size());
    Transform(decoded, encoded->span(), /*shuffle=*/true);
    return Status::Ok();
  }

  std::optional<uint64_t> EncodedSize(uint64_t decoded_size) const override { return decoded_size; }

  nlohmann::json ToJson() const override {
    return CodecJson(kName, {{"elementsize", element_size_}});
  }
  CodecTraits traits() const override { return {.type = CodecTraits::Type::kShuffle}; }

 private:
  // `in` and `out` have the same size and do not overlap.
  void Transform(std::span<const std::byte> in, std::span<std::byte> out, bool shuffle) const {
    if (in.empty()) return;
    if (element_size_ <= 1) {
      std::memcpy(out.data(), in.data(), in.size());
      return;
    }
    const size_t count = in.size() / element_size_;
    const size_t whole = count * element_size_;
    if (shuffle) {
      Shuffle(in.data(), out.data(), count, element_size_);
    } else {
      Unshuffle(in.data(), out.data(), count, element_size_);
    }
    if (whole < in.size()) std::memcpy(out.data() + whole, in.data() + whole, in.size() - whole);
  }

  size_t element_size_;
};

}  // namespace

Result<std::unique_ptr<BytesToBytesCodec>> MakeShuffleCodec(
    const nlohmann::json& configuration, const ChunkRepresentation& array_representation) {
  ZS_ASSIGN_OR_RETURN(CodecConfiguration config,
                      CodecConfiguration::Parse(kName, configuration, {"elementsize"}));
  ZS_ASSIGN_OR_RETURN(std::optional<int64_t> element_size,
                      config.Integer("elementsize", 0, int64_t{1} << 32));
  return std::unique_ptr<BytesToBytesCodec>(new ShuffleCodec(static_cast<size_t>(
      element_size.value_or(static_cast<int64_t>(DataTypeSize(array_representation.data_type))))));
}

}  // namespace zarrstream

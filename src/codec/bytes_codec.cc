#include "codec/bytes_codec.h"

#include <bit>
#include <cstring>
#include <string>

#include "codec/codec_configuration.h"

namespace zarrstream {
namespace {

constexpr std::string_view kName = "bytes";

template <typename T>
T ByteSwap(T v) {
  if constexpr (sizeof(T) == 2) return __builtin_bswap16(v);
  if constexpr (sizeof(T) == 4) return __builtin_bswap32(v);
  if constexpr (sizeof(T) == 8) return __builtin_bswap64(v);
}

// memcpy through a register keeps this free of alignment and aliasing assumptions; compilers turn
// the loop into vector shuffles.
template <typename T>
void SwapUnits(const std::byte* in, std::byte* out, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    T v;
    std::memcpy(&v, in + i * sizeof(T), sizeof(T));
    v = ByteSwap(v);
    std::memcpy(out + i * sizeof(T), &v, sizeof(T));
  }
}

// Copies `n` units of `unit_size` bytes from `in` to `out` (the same or disjoint), reversing the
// bytes of each.
void ByteSwapCopy(const std::byte* in, std::byte* out, size_t n, size_t unit_size) {
  switch (unit_size) {
    case 2:
      return SwapUnits<uint16_t>(in, out, n);
    case 4:
      return SwapUnits<uint32_t>(in, out, n);
    case 8:
      return SwapUnits<uint64_t>(in, out, n);
    default:
      if (in != out) std::memcpy(out, in, n * unit_size);
  }
}

class BytesCodec final : public ArrayToBytesCodec {
 public:
  BytesCodec(const ChunkRepresentation& decoded, std::optional<std::string> endian)
      : num_bytes_(decoded.num_bytes()),
        unit_size_(DataTypeComponentSize(decoded.data_type)),
        endian_(std::move(endian)) {
    const bool little = std::endian::native == std::endian::little;
    swap_ = unit_size_ > 1 && endian_ && (*endian_ == "little") != little;
    big_endian_ = endian_ && *endian_ == "big";
  }

  Status Decode(std::span<const std::byte> encoded, std::span<std::byte> decoded,
                CodecScratch* /*scratch*/) const override {
    if (decoded.size() != num_bytes_) {
      return InternalError("bytes: output of " + std::to_string(decoded.size()) +
                           " bytes for a chunk of " + std::to_string(num_bytes_));
    }
    if (encoded.size() != num_bytes_) {
      return CorruptChunkError("bytes: chunk has " + std::to_string(encoded.size()) +
                               " bytes, expected " + std::to_string(num_bytes_));
    }
    Convert(encoded, decoded);
    return Status::Ok();
  }

  Status Encode(std::span<const std::byte> decoded, ByteBuffer* encoded) const override {
    if (decoded.size() != num_bytes_) {
      return InternalError("bytes: input of " + std::to_string(decoded.size()) +
                           " bytes for a chunk of " + std::to_string(num_bytes_));
    }
    encoded->Resize(num_bytes_);
    Convert(decoded, encoded->span());
    return Status::Ok();
  }

  std::optional<uint64_t> encoded_size() const override { return num_bytes_; }
  uint64_t max_encoded_size() const override { return num_bytes_; }
  bool is_identity() const override { return !swap_; }

  nlohmann::json ToJson() const override {
    nlohmann::json configuration = nlohmann::json::object();
    if (endian_) configuration["endian"] = *endian_;
    return CodecJson(kName, std::move(configuration));
  }
  CodecTraits traits() const override {
    return {.type = CodecTraits::Type::kBytes, .big_endian = big_endian_};
  }

 private:
  void Convert(std::span<const std::byte> in, std::span<std::byte> out) const {
    if (in.empty()) return;
    if (swap_) {
      ByteSwapCopy(in.data(), out.data(), in.size() / unit_size_, unit_size_);
    } else if (in.data() != out.data()) {
      std::memcpy(out.data(), in.data(), in.size());
    }
  }

  uint64_t num_bytes_;
  size_t unit_size_;
  std::optional<std::string> endian_;
  bool swap_ = false;
  bool big_endian_ = false;
};

}  // namespace

Result<std::unique_ptr<ArrayToBytesCodec>> MakeBytesCodec(const nlohmann::json& configuration,
                                                          const ChunkRepresentation& decoded) {
  ZS_ASSIGN_OR_RETURN(CodecConfiguration config,
                      CodecConfiguration::Parse(kName, configuration, {"endian"}));
  ZS_ASSIGN_OR_RETURN(std::optional<std::string> endian, config.String("endian"));
  if (endian && *endian != "little" && *endian != "big") {
    return config.FieldError("endian", "must be \"little\" or \"big\"");
  }
  if (!endian && DataTypeSize(decoded.data_type) > 1) {
    return config.Error("configuration field 'endian' is required for " +
                        std::string(DataTypeName(decoded.data_type)));
  }
  return std::unique_ptr<ArrayToBytesCodec>(new BytesCodec(decoded, std::move(endian)));
}

}  // namespace zarrstream

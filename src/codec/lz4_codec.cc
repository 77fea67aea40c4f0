#include "codec/lz4_codec.h"

#include <lz4.h>

#include <climits>
#include <string>

#include "codec/codec_configuration.h"
#include "codec/decoded_size.h"

namespace zarrstream {
namespace {

constexpr std::string_view kName = "numcodecs.lz4";
constexpr size_t kHeaderSize = 4;
// An LZ4 block expands at most ~255:1 (a match length byte of 255 per input byte); a header
// claiming more than this for its block is corrupt, whatever the caller expects.
constexpr uint64_t kMaxLz4Ratio = 256;

class Lz4Codec final : public BytesToBytesCodec {
 public:
  explicit Lz4Codec(int acceleration) : acceleration_(acceleration) {}

  Status Decode(std::span<const std::byte> encoded, DecodedSize expected_size,
                ByteBuffer* decoded) const override {
    ZS_ASSIGN_OR_RETURN(uint64_t size, ReadHeader(encoded, expected_size));
    decoded->Resize(size);
    return DecodeBlock(encoded, decoded->span());
  }

  Status DecodeInto(std::span<const std::byte> encoded, std::span<std::byte> decoded,
                    CodecScratch* /*scratch*/) const override {
    ZS_RETURN_IF_ERROR(ReadHeader(encoded, decoded.size()));
    return DecodeBlock(encoded, decoded);
  }

  Status Encode(std::span<const std::byte> decoded, ByteBuffer* encoded) const override {
    if (decoded.size() > static_cast<size_t>(LZ4_MAX_INPUT_SIZE)) {
      return InvalidArgumentError("numcodecs.lz4: cannot compress " +
                                  std::to_string(decoded.size()) + " bytes; LZ4 blocks hold " +
                                  std::to_string(LZ4_MAX_INPUT_SIZE) + " at most");
    }
    const int size = static_cast<int>(decoded.size());
    const int bound = LZ4_compressBound(size);
    encoded->Resize(kHeaderSize + static_cast<size_t>(bound));
    for (size_t i = 0; i < kHeaderSize; ++i) {
      encoded->data()[i] = static_cast<std::byte>(static_cast<uint32_t>(size) >> (8 * i));
    }
    int n = LZ4_compress_fast(reinterpret_cast<const char*>(decoded.data()),
                              reinterpret_cast<char*>(encoded->data() + kHeaderSize), size, bound,
                              acceleration_);
    if (n <= 0) return InternalError("numcodecs.lz4: compression failed");
    encoded->Resize(kHeaderSize + static_cast<size_t>(n));
    return Status::Ok();
  }

  nlohmann::json ToJson() const override {
    return CodecJson(kName, {{"acceleration", acceleration_}});
  }
  CodecTraits traits() const override { return {.type = CodecTraits::Type::kLz4}; }

 private:
  // The size the header declares, once it is known to fit both `expected` and what the block can
  // decode to: checked before the caller allocates it.
  static Result<uint64_t> ReadHeader(std::span<const std::byte> encoded, DecodedSize expected) {
    if (encoded.size() < kHeaderSize + 1) {
      return CorruptChunkError("numcodecs.lz4: " + std::to_string(encoded.size()) +
                               " bytes is too short for a size header and an LZ4 block");
    }
    uint32_t size = 0;
    for (size_t i = 0; i < kHeaderSize; ++i) {
      size |= static_cast<uint32_t>(encoded[i]) << (8 * i);
    }
    if (!expected.admits(size)) return DeclaredSizeTooLarge(kName, "header", size, expected);
    const uint64_t block = encoded.size() - kHeaderSize;
    if (size > static_cast<uint32_t>(LZ4_MAX_INPUT_SIZE) || size > block * kMaxLz4Ratio + 64) {
      return CorruptChunkError("numcodecs.lz4: header declares " + std::to_string(size) +
                               " bytes, impossible for an LZ4 block of " + std::to_string(block) +
                               " bytes");
    }
    return uint64_t{size};
  }

  // Decodes the block after the header into exactly `out` (whose size the header declared).
  static Status DecodeBlock(std::span<const std::byte> encoded, std::span<std::byte> out) {
    const std::span<const std::byte> block = encoded.subspan(kHeaderSize);
    if (block.size() > static_cast<size_t>(INT_MAX)) {
      return CorruptChunkError("numcodecs.lz4: block of " + std::to_string(block.size()) +
                               " bytes is larger than LZ4 allows");
    }
    int n = LZ4_decompress_safe(reinterpret_cast<const char*>(block.data()),
                                reinterpret_cast<char*>(out.data()), static_cast<int>(block.size()),
                                static_cast<int>(out.size()));
    if (n < 0) return CorruptChunkError("numcodecs.lz4: corrupt or truncated LZ4 block");
    if (static_cast<size_t>(n) != out.size()) {
      return DecodedSizeMismatch(kName, static_cast<uint64_t>(n), out.size());
    }
    return Status::Ok();
  }

  int acceleration_;
};

}  // namespace

Result<std::unique_ptr<BytesToBytesCodec>> MakeLz4Codec(
    const nlohmann::json& configuration, const ChunkRepresentation& /*array_representation*/) {
  ZS_ASSIGN_OR_RETURN(CodecConfiguration config,
                      CodecConfiguration::Parse(kName, configuration, {"acceleration"}));
  ZS_ASSIGN_OR_RETURN(std::optional<int64_t> acceleration,
                      config.Integer("acceleration", INT_MIN, INT_MAX));
  return std::unique_ptr<BytesToBytesCodec>(
      new Lz4Codec(static_cast<int>(acceleration.value_or(1))));
}

}  // namespace zarrstream

#include "codec/blosc_codec.h"

#include <blosc.h>

#include <array>
#include <string>

#include "codec/codec_configuration.h"
#include "codec/decoded_size.h"

namespace zarrstream {
namespace {

constexpr std::string_view kName = "blosc";

// In CodecTraits::BloscCompressor's order.
constexpr std::array<std::string_view, 6> kCompressors = {"blosclz", "lz4",  "lz4hc",
                                                          "snappy",  "zlib", "zstd"};
constexpr std::array<std::string_view, 3> kShuffleModes = {"noshuffle", "shuffle", "bitshuffle"};
static_assert(BLOSC_NOSHUFFLE == 0 && BLOSC_SHUFFLE == 1 && BLOSC_BITSHUFFLE == 2);
static_assert(static_cast<int>(CodecTraits::BloscShuffle::kBit) == BLOSC_BITSHUFFLE);

class BloscCodec final : public BytesToBytesCodec {
 public:
  BloscCodec(std::string cname, int clevel, int shuffle, int typesize, int64_t blocksize)
      : cname_(std::move(cname)),
        clevel_(clevel),
        shuffle_(shuffle),
        typesize_(typesize),
        blocksize_(blocksize) {}

  Status Decode(std::span<const std::byte> encoded, DecodedSize expected_size,
                ByteBuffer* decoded) const override {
    ZS_ASSIGN_OR_RETURN(uint64_t nbytes, ValidateHeader(encoded, expected_size));
    decoded->Resize(nbytes);
    return Decompress(encoded, decoded->span());
  }

  Status DecodeInto(std::span<const std::byte> encoded, std::span<std::byte> decoded,
                    CodecScratch* /*scratch*/) const override {
    ZS_RETURN_IF_ERROR(ValidateHeader(encoded, decoded.size()));
    return Decompress(encoded, decoded);
  }

  Status Encode(std::span<const std::byte> decoded, ByteBuffer* encoded) const override {
    if (decoded.size() > static_cast<size_t>(BLOSC_MAX_BUFFERSIZE)) {
      return InvalidArgumentError("blosc: cannot compress " + std::to_string(decoded.size()) +
                                  " bytes; c-blosc 1.x buffers are limited to " +
                                  std::to_string(BLOSC_MAX_BUFFERSIZE));
    }
    encoded->Resize(decoded.size() + BLOSC_MAX_OVERHEAD);
    int n = blosc_compress_ctx(clevel_, shuffle_, static_cast<size_t>(typesize_), decoded.size(),
                               decoded.data(), encoded->data(), encoded->size(), cname_.c_str(),
                               static_cast<size_t>(blocksize_), /*numinternalthreads=*/1);
    if (n <= 0) return InternalError("blosc: compression failed (" + std::to_string(n) + ")");
    encoded->Resize(static_cast<size_t>(n));
    return Status::Ok();
  }

  nlohmann::json ToJson() const override {
    return CodecJson(kName, {{"cname", cname_},
                             {"clevel", clevel_},
                             {"shuffle", kShuffleModes[shuffle_]},
                             {"typesize", typesize_},
                             {"blocksize", blocksize_}});
  }
  CodecTraits traits() const override {
    size_t compressor = 0;
    while (compressor + 1 < kCompressors.size() && kCompressors[compressor] != cname_) ++compressor;
    return {.type = CodecTraits::Type::kBlosc,
            .blosc_compressor = static_cast<CodecTraits::BloscCompressor>(compressor),
            .blosc_shuffle = static_cast<CodecTraits::BloscShuffle>(shuffle_)};
  }

 private:
  // The decoded size the header declares, after checking it against the input and `expected`
  // (before the caller allocates it: a 16-byte header may declare 2 GiB).
  static Result<uint64_t> ValidateHeader(std::span<const std::byte> encoded, DecodedSize expected) {
    if (encoded.size() < BLOSC_MIN_HEADER_LENGTH) {
      return CorruptChunkError("blosc: " + std::to_string(encoded.size()) +
                               " bytes is shorter than a blosc header");
    }
    size_t nbytes = 0;
    if (blosc_cbuffer_validate(encoded.data(), encoded.size(), &nbytes) != 0) {
      size_t header_nbytes = 0, cbytes = 0, blocksize = 0;
      blosc_cbuffer_sizes(encoded.data(), &header_nbytes, &cbytes, &blocksize);
      return CorruptChunkError("blosc: invalid header (it declares " + std::to_string(cbytes) +
                               " compressed bytes, the chunk has " +
                               std::to_string(encoded.size()) + ")");
    }
    if (!expected.admits(nbytes)) return DeclaredSizeTooLarge(kName, "header", nbytes, expected);
    return uint64_t{nbytes};
  }

  static Status Decompress(std::span<const std::byte> encoded, std::span<std::byte> out) {
    int n = blosc_decompress_ctx(encoded.data(), out.data(), out.size(),
                                 /*numinternalthreads=*/1);
    if (n < 0)
      return CorruptChunkError("blosc: corrupt data (c-blosc error " + std::to_string(n) + ")");
    if (static_cast<size_t>(n) != out.size()) {
      return DecodedSizeMismatch(kName, static_cast<uint64_t>(n), out.size());
    }
    return Status::Ok();
  }

  std::string cname_;
  int clevel_;
  int shuffle_;
  int typesize_;
  int64_t blocksize_;
};

}  // namespace

Result<std::unique_ptr<BytesToBytesCodec>> MakeBloscCodec(
    const nlohmann::json& configuration, const ChunkRepresentation& array_representation) {
  ZS_ASSIGN_OR_RETURN(
      CodecConfiguration config,
      CodecConfiguration::Parse(kName, configuration,
                                {"cname", "clevel", "shuffle", "typesize", "blocksize"}));
  ZS_ASSIGN_OR_RETURN(std::optional<std::string> cname, config.String("cname"));
  if (!cname) cname = "lz4";
  bool known = false;
  for (std::string_view c : kCompressors) known = known || c == *cname;
  if (!known) {
    return config.FieldError("cname", "must be one of blosclz, lz4, lz4hc, snappy, zlib, zstd");
  }
  if (blosc_compname_to_compcode(cname->c_str()) < 0) {
    return UnsupportedError("blosc: compressor '" + *cname +
                            "' is not available in this build of c-blosc (it has " +
                            blosc_list_compressors() + ")");
  }
  ZS_ASSIGN_OR_RETURN(std::optional<int64_t> clevel, config.Integer("clevel", 0, 9));
  ZS_ASSIGN_OR_RETURN(std::optional<std::string> shuffle_name, config.String("shuffle"));
  int shuffle = BLOSC_NOSHUFFLE;
  if (shuffle_name) {
    shuffle = -1;
    for (size_t i = 0; i < kShuffleModes.size(); ++i) {
      if (kShuffleModes[i] == *shuffle_name) shuffle = static_cast<int>(i);
    }
    if (shuffle < 0) {
      return config.FieldError("shuffle", "must be \"noshuffle\", \"shuffle\" or \"bitshuffle\"");
    }
  }
  ZS_ASSIGN_OR_RETURN(std::optional<int64_t> typesize,
                      config.Integer("typesize", 1, BLOSC_MAX_TYPESIZE));
  if (!typesize) {
    typesize = static_cast<int64_t>(DataTypeSize(array_representation.data_type));
    if (*typesize > BLOSC_MAX_TYPESIZE) typesize = 1;
  }
  ZS_ASSIGN_OR_RETURN(std::optional<int64_t> blocksize,
                      config.Integer("blocksize", 0, BLOSC_MAX_BLOCKSIZE));
  return std::unique_ptr<BytesToBytesCodec>(
      new BloscCodec(std::move(*cname), static_cast<int>(clevel.value_or(5)), shuffle,
                     static_cast<int>(*typesize), blocksize.value_or(0)));
}

}  // namespace zarrstream

#include "codec/bz2_codec.h"

#include <bzlib.h>

#include <algorithm>
#include <climits>
#include <string>

#include "codec/codec_configuration.h"
#include "codec/decoded_size.h"

namespace zarrstream {
namespace {

constexpr std::string_view kName = "numcodecs.bz2";

// libbz2 counts in unsigned int; larger buffers are fed in slices of this size.
constexpr size_t kMaxSlice = UINT_MAX;

// Owns a bz_stream set up for decompression.
class Bz2Decompressor {
 public:
  Bz2Decompressor() = default;
  Bz2Decompressor(const Bz2Decompressor&) = delete;
  Bz2Decompressor& operator=(const Bz2Decompressor&) = delete;
  ~Bz2Decompressor() {
    if (initialized_) BZ2_bzDecompressEnd(&stream_);
  }

  // Starts a new stream (the previous one, if any, ended).
  bool Start() {
    if (initialized_) BZ2_bzDecompressEnd(&stream_);
    stream_ = bz_stream{};
    initialized_ = BZ2_bzDecompressInit(&stream_, /*verbosity=*/0, /*small=*/0) == BZ_OK;
    return initialized_;
  }

  bz_stream* stream() { return &stream_; }

 private:
  bz_stream stream_{};
  bool initialized_ = false;
};

class Bz2Codec final : public BytesToBytesCodec {
 public:
  explicit Bz2Codec(int level) : level_(level) {}

  Status Decode(std::span<const std::byte> encoded, DecodedSize expected_size,
                ByteBuffer* decoded) const override {
    // bzip2 streams carry no decoded size; a bound is grown into from a guess, as data appears
    // (bzip2 expands a few dozen bytes into megabytes, so the input says little).
    decoded->Resize(expected_size.exact()
                        ? expected_size.bytes()
                        : std::min<uint64_t>(expected_size.bytes(),
                                             std::max<uint64_t>(64 << 10, 8 * encoded.size())));
    uint64_t produced = 0;
    ZS_RETURN_IF_ERROR(Run(encoded, expected_size, decoded, &produced));
    if (expected_size.exact() && produced != expected_size.bytes()) {
      return DecodedSizeMismatch(kName, produced, expected_size.bytes());
    }
    decoded->Resize(produced);
    return Status::Ok();
  }

  Status Encode(std::span<const std::byte> decoded, ByteBuffer* encoded) const override {
    if (decoded.size() > kMaxSlice / 2) {
      return InvalidArgumentError("numcodecs.bz2: cannot compress " +
                                  std::to_string(decoded.size()) + " bytes in one call");
    }
    // bzip2's documented worst case: 1% larger plus 600 bytes.
    unsigned int capacity = static_cast<unsigned int>(decoded.size() + decoded.size() / 100 + 600);
    encoded->Resize(capacity);
    // libbz2 rejects a null source even for zero bytes, which an empty span may carry.
    char empty = 0;
    char* source =
        decoded.empty() ? &empty : const_cast<char*>(reinterpret_cast<const char*>(decoded.data()));
    int rc = BZ2_bzBuffToBuffCompress(reinterpret_cast<char*>(encoded->data()), &capacity, source,
                                      static_cast<unsigned int>(decoded.size()), level_,
                                      /*verbosity=*/0, /*workFactor=*/0);
    if (rc != BZ_OK)
      return InternalError("numcodecs.bz2: compression failed (" + std::to_string(rc) + ")");
    encoded->Resize(capacity);
    return Status::Ok();
  }

  nlohmann::json ToJson() const override { return CodecJson(kName, {{"level", level_}}); }
  CodecTraits traits() const override { return {.type = CodecTraits::Type::kBz2}; }

 private:
  // Decodes every stream in `encoded` into `out`, growing it up to a bounding `size` (an exact
  // one: `out` already has that size). Sets `produced` to the decoded size.
  static Status Run(std::span<const std::byte> encoded, DecodedSize size, ByteBuffer* out,
                    uint64_t* produced) {
    if (encoded.empty()) return CorruptChunkError("numcodecs.bz2: empty input");
    Bz2Decompressor decompressor;
    size_t in_pos = 0;
    uint64_t out_pos = 0;
    while (in_pos < encoded.size()) {
      if (!decompressor.Start()) return InternalError("numcodecs.bz2: cannot start decompressor");
      bz_stream* s = decompressor.stream();
      while (true) {
        bool full = out_pos == out->size();
        if (full && out->size() < size.bytes()) {
          out->Resize(std::min(size.bytes(), std::max<uint64_t>(1, SaturatingMul(out->size(), 2))));
          full = false;
        }
        // An output full at its size still gets a one-byte probe: libbz2 cannot say whether it
        // stopped for want of input or of output space, and an empty stream needs neither.
        char probe = 0;
        const size_t in_slice = std::min(kMaxSlice, encoded.size() - in_pos);
        const size_t out_slice = full ? 1 : std::min<uint64_t>(kMaxSlice, out->size() - out_pos);
        s->next_in = const_cast<char*>(reinterpret_cast<const char*>(encoded.data() + in_pos));
        s->avail_in = static_cast<unsigned int>(in_slice);
        s->next_out = full ? &probe : reinterpret_cast<char*>(out->data() + out_pos);
        s->avail_out = static_cast<unsigned int>(out_slice);
        int rc = BZ2_bzDecompress(s);
        in_pos += in_slice - s->avail_in;
        const size_t written = out_slice - s->avail_out;
        if (full && written > 0) return DecodedSizeTooLarge(kName, size);
        if (!full) out_pos += written;
        if (rc == BZ_STREAM_END) break;
        if (rc != BZ_OK) {
          return CorruptChunkError("numcodecs.bz2: corrupt data (libbz2 error " +
                                   std::to_string(rc) + ")");
        }
        if (in_pos == encoded.size() && s->avail_out > 0) {
          return CorruptChunkError("numcodecs.bz2: truncated stream");
        }
      }
    }
    *produced = out_pos;
    return Status::Ok();
  }

  int level_;
};

}  // namespace

Result<std::unique_ptr<BytesToBytesCodec>> MakeBz2Codec(
    const nlohmann::json& configuration, const ChunkRepresentation& /*array_representation*/) {
  ZS_ASSIGN_OR_RETURN(CodecConfiguration config,
                      CodecConfiguration::Parse(kName, configuration, {"level"}));
  ZS_ASSIGN_OR_RETURN(std::optional<int64_t> level, config.Integer("level", 1, 9));
  return std::unique_ptr<BytesToBytesCodec>(new Bz2Codec(static_cast<int>(level.value_or(1))));
}

}  // namespace zarrstream

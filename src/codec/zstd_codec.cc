#include "codec/zstd_codec.h"

#include <zstd.h>
#include <zstd_errors.h>

#include <algorithm>
#include <string>

#include "codec/codec_configuration.h"
#include "codec/decoded_size.h"

namespace zarrstream {
namespace {

constexpr std::string_view kName = "zstd";

// A zstd block decodes to at most 128 KiB and takes at least 4 bytes (an RLE block: a 3-byte
// header and the byte repeated), so no frame decodes to more than 32768 times its size.
constexpr uint64_t kMaxZstdRatio = (uint64_t{128} << 10) / 4;

struct DCtxDeleter {
  void operator()(ZSTD_DCtx* dctx) const { ZSTD_freeDCtx(dctx); }
};
struct CCtxDeleter {
  void operator()(ZSTD_CCtx* cctx) const { ZSTD_freeCCtx(cctx); }
};

// One context per thread: a context holds ~100 KiB of tables and window state that would otherwise
// be allocated and freed for every chunk.
ZSTD_DCtx* ThreadDCtx() {
  thread_local std::unique_ptr<ZSTD_DCtx, DCtxDeleter> dctx(ZSTD_createDCtx());
  return dctx.get();
}

ZSTD_CCtx* ThreadCCtx() {
  thread_local std::unique_ptr<ZSTD_CCtx, CCtxDeleter> cctx(ZSTD_createCCtx());
  return cctx.get();
}

Status ZstdError(std::string_view what, size_t code) {
  return CorruptChunkError(std::string(kName) + ": " + std::string(what) + ": " +
                           ZSTD_getErrorName(code));
}

class ZstdCodec final : public ExactSizeBytesToBytesCodec {
 public:
  ZstdCodec(int level, bool checksum) : level_(level), checksum_(checksum) {}

  Status Encode(std::span<const std::byte> decoded, ByteBuffer* encoded) const override {
    ZSTD_CCtx* cctx = ThreadCCtx();
    if (cctx == nullptr) return InternalError("zstd: cannot allocate a compression context");
    ZSTD_CCtx_reset(cctx, ZSTD_reset_session_and_parameters);
    size_t rc = ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, level_);
    if (!ZSTD_isError(rc)) rc = ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, checksum_);
    // Readers (ours and nvCOMP's) size their output from the frame header.
    if (!ZSTD_isError(rc)) rc = ZSTD_CCtx_setParameter(cctx, ZSTD_c_contentSizeFlag, 1);
    if (ZSTD_isError(rc)) {
      return InternalError(std::string("zstd: setting parameters: ") + ZSTD_getErrorName(rc));
    }
    encoded->Resize(ZSTD_compressBound(decoded.size()));
    size_t n =
        ZSTD_compress2(cctx, encoded->data(), encoded->size(), decoded.data(), decoded.size());
    if (ZSTD_isError(n)) {
      return InternalError(std::string("zstd: compression failed: ") + ZSTD_getErrorName(n));
    }
    encoded->Resize(n);
    return Status::Ok();
  }

  nlohmann::json ToJson() const override {
    return CodecJson(kName, {{"level", level_}, {"checksum", checksum_}});
  }
  CodecTraits traits() const override {
    return {.type = CodecTraits::Type::kZstd, .checksum = checksum_};
  }

 private:
  // Decodes into exactly `out`: one call that handles every frame in `encoded`.
  Status DecodeExact(std::span<const std::byte> encoded, std::span<std::byte> out) const override {
    if (encoded.empty()) return CorruptChunkError("zstd: empty input is not a zstd frame");
    // A header that declares a larger frame fails before any work, with the sizes in the message.
    unsigned long long first = ZSTD_getFrameContentSize(encoded.data(), encoded.size());
    if (first == ZSTD_CONTENTSIZE_ERROR) {
      return CorruptChunkError("zstd: not a zstd frame, or its header is truncated");
    }
    if (first != ZSTD_CONTENTSIZE_UNKNOWN && first > out.size()) {
      return CorruptChunkError("zstd: frame decodes to " + std::to_string(first) +
                               " bytes, expected " + std::to_string(out.size()));
    }
    ZSTD_DCtx* dctx = ThreadDCtx();
    if (dctx == nullptr) return InternalError("zstd: cannot allocate a decompression context");
    size_t n = ZSTD_decompressDCtx(dctx, out.data(), out.size(), encoded.data(), encoded.size());
    if (ZSTD_isError(n)) {
      if (ZSTD_getErrorCode(n) == ZSTD_error_dstSize_tooSmall) {
        return DecodedSizeTooLarge(kName, out.size());
      }
      return ZstdError("corrupt or truncated data", n);
    }
    if (n != out.size()) return DecodedSizeMismatch(kName, n, out.size());
    return Status::Ok();
  }

  Status DecodeAtMost(std::span<const std::byte> encoded, uint64_t limit,
                      ByteBuffer* decoded) const override {
    if (encoded.empty()) return CorruptChunkError("zstd: empty input is not a zstd frame");
    // The sum of the frames' content sizes, unless some frame does not declare one. Each declared
    // size is checked against what its frame can hold and the sum against `limit` before anything
    // is allocated: a 22-byte frame may declare gigabytes.
    std::optional<uint64_t> total = 0;
    for (size_t pos = 0; pos < encoded.size();) {
      const std::byte* frame = encoded.data() + pos;
      const size_t frame_size = ZSTD_findFrameCompressedSize(frame, encoded.size() - pos);
      if (ZSTD_isError(frame_size)) return ZstdError("not a sequence of valid frames", frame_size);
      const unsigned long long content = ZSTD_getFrameContentSize(frame, frame_size);
      if (content == ZSTD_CONTENTSIZE_ERROR) {
        return CorruptChunkError("zstd: invalid frame header");
      }
      if (content == ZSTD_CONTENTSIZE_UNKNOWN) {
        total.reset();
        break;
      }
      if (content > SaturatingMul(frame_size, kMaxZstdRatio)) {
        return CorruptChunkError("zstd: frame header declares " + std::to_string(content) +
                                 " bytes, more than a frame of " + std::to_string(frame_size) +
                                 " bytes can hold");
      }
      *total = SaturatingAdd(*total, content);
      if (*total > limit) {
        return DeclaredSizeTooLarge(kName, "frame header", *total, DecodedSize::AtMost(limit));
      }
      pos += frame_size;
    }
    if (total) {
      decoded->Resize(*total);
      return DecodeExact(encoded, decoded->span());
    }
    // Some frame has no content size: stream, growing the output as data appears, so memory
    // follows what the input really holds rather than what a header claims.
    ZSTD_DCtx* dctx = ThreadDCtx();
    if (dctx == nullptr) return InternalError("zstd: cannot allocate a decompression context");
    ZSTD_DCtx_reset(dctx, ZSTD_reset_session_only);
    uint64_t capacity =
        std::min<uint64_t>(limit, std::max<uint64_t>(ZSTD_DStreamOutSize(), 4 * encoded.size()));
    decoded->Resize(capacity);
    ZSTD_inBuffer input{encoded.data(), encoded.size(), 0};
    ZSTD_outBuffer output{decoded->data(), decoded->size(), 0};
    Status status;
    while (true) {
      // At the limit, a one-byte probe tells whether any output is left.
      std::byte probe{};
      ZSTD_outBuffer probe_output{&probe, 1, 0};
      ZSTD_outBuffer* out = output.pos == output.size ? &probe_output : &output;
      const size_t rc = ZSTD_decompressStream(dctx, out, &input);
      if (ZSTD_isError(rc)) {
        status = ZstdError("corrupt data", rc);
        break;
      }
      if (probe_output.pos > 0) {
        status = DecodedSizeTooLarge(kName, DecodedSize::AtMost(limit));
        break;
      }
      if (rc == 0 && input.pos == input.size) break;
      if (output.pos == output.size && capacity < limit) {
        capacity = std::min(limit, SaturatingMul(capacity, 2));
        decoded->Resize(capacity);
        output.dst = decoded->data();
        output.size = capacity;
      } else if (input.pos == input.size && out->pos < out->size) {
        // zstd stopped with room left and nothing more to read.
        status = CorruptChunkError("zstd: truncated frame");
        break;
      }
    }
    if (!status.ok()) {
      ZSTD_DCtx_reset(dctx, ZSTD_reset_session_only);
      return status;
    }
    decoded->Resize(output.pos);
    return Status::Ok();
  }

  int level_;
  bool checksum_;
};

}  // namespace

Result<std::unique_ptr<BytesToBytesCodec>> MakeZstdCodec(
    const nlohmann::json& configuration, const ChunkRepresentation& /*array_representation*/) {
  ZS_ASSIGN_OR_RETURN(CodecConfiguration config,
                      CodecConfiguration::Parse(kName, configuration, {"level", "checksum"}));
  ZS_ASSIGN_OR_RETURN(std::optional<int64_t> level,
                      config.Integer("level", ZSTD_minCLevel(), ZSTD_maxCLevel()));
  ZS_ASSIGN_OR_RETURN(std::optional<bool> checksum, config.Boolean("checksum"));
  return std::unique_ptr<BytesToBytesCodec>(
      new ZstdCodec(static_cast<int>(level.value_or(0)), checksum.value_or(false)));
}

}  // namespace zarrstream

#include "codec/deflate_codec.h"

#include <libdeflate.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <string>

#include "codec/codec_configuration.h"
#include "codec/decoded_size.h"

namespace zarrstream {
namespace {

enum class Wrapper { kGzip, kZlib };

// DEFLATE cannot expand data by more than this: a 258-byte match takes at least two bits.
constexpr uint64_t kMaxDeflateRatio = 1032;

struct DecompressorDeleter {
  void operator()(libdeflate_decompressor* d) const { libdeflate_free_decompressor(d); }
};
struct CompressorDeleter {
  void operator()(libdeflate_compressor* c) const { libdeflate_free_compressor(c); }
};

libdeflate_decompressor* ThreadDecompressor() {
  thread_local std::unique_ptr<libdeflate_decompressor, DecompressorDeleter> decompressor(
      libdeflate_alloc_decompressor());
  return decompressor.get();
}

// A compressor is several hundred KiB of tables sized for its level; keep the last one per thread.
libdeflate_compressor* ThreadCompressor(int level) {
  thread_local std::unique_ptr<libdeflate_compressor, CompressorDeleter> compressor;
  thread_local int compressor_level = -1;
  if (compressor == nullptr || compressor_level != level) {
    compressor.reset(libdeflate_alloc_compressor(level));
    compressor_level = level;
  }
  return compressor.get();
}

class DeflateCodec final : public ExactSizeBytesToBytesCodec {
 public:
  DeflateCodec(Wrapper wrapper, int level)
      : wrapper_(wrapper),
        level_(level),
        name_(wrapper == Wrapper::kGzip ? "gzip" : "numcodecs.zlib") {}

  Status Encode(std::span<const std::byte> decoded, ByteBuffer* encoded) const override {
    libdeflate_compressor* compressor = ThreadCompressor(level_);
    if (compressor == nullptr) return InternalError(name_ + ": cannot allocate a compressor");
    const bool gzip = wrapper_ == Wrapper::kGzip;
    size_t bound = gzip ? libdeflate_gzip_compress_bound(compressor, decoded.size())
                        : libdeflate_zlib_compress_bound(compressor, decoded.size());
    encoded->Resize(bound);
    size_t n = gzip ? libdeflate_gzip_compress(compressor, decoded.data(), decoded.size(),
                                               encoded->data(), bound)
                    : libdeflate_zlib_compress(compressor, decoded.data(), decoded.size(),
                                               encoded->data(), bound);
    if (n == 0) return InternalError(name_ + ": compression failed");
    encoded->Resize(n);
    return Status::Ok();
  }

  nlohmann::json ToJson() const override { return CodecJson(name_, {{"level", level_}}); }
  CodecTraits traits() const override {
    return {.type =
                wrapper_ == Wrapper::kGzip ? CodecTraits::Type::kGzip : CodecTraits::Type::kZlib};
  }

 private:
  // Decodes one gzip member or zlib stream at the start of `in` into `out`. On success sets the
  // bytes consumed and produced.
  libdeflate_result DecodeOne(std::span<const std::byte> in, std::span<std::byte> out,
                              size_t* in_used, size_t* out_used) const {
    libdeflate_decompressor* d = ThreadDecompressor();
    if (d == nullptr) return LIBDEFLATE_BAD_DATA;
    return wrapper_ == Wrapper::kGzip
               ? libdeflate_gzip_decompress_ex(d, in.data(), in.size(), out.data(), out.size(),
                                               in_used, out_used)
               : libdeflate_zlib_decompress_ex(d, in.data(), in.size(), out.data(), out.size(),
                                               in_used, out_used);
  }

  // Whether decoding stops before `rest`: nothing left, or (gzip) only zero padding.
  bool AtEnd(std::span<const std::byte> rest) const {
    if (wrapper_ == Wrapper::kZlib) return rest.empty();
    return std::all_of(rest.begin(), rest.end(), [](std::byte b) { return b == std::byte{0}; });
  }

  Status Corrupt() const {
    if (ThreadDecompressor() == nullptr) {
      return InternalError(name_ + ": cannot allocate a decompressor");
    }
    return CorruptChunkError(name_ + ": corrupt or truncated " +
                             (wrapper_ == Wrapper::kGzip ? "gzip member" : "zlib stream"));
  }

  Status TrailingBytes(size_t n) const {
    return CorruptChunkError(name_ + ": " + std::to_string(n) +
                             " unexpected bytes after the zlib stream");
  }

  Status DecodeExact(std::span<const std::byte> encoded, std::span<std::byte> out) const override {
    size_t in_pos = 0, out_pos = 0;
    do {
      size_t in_used = 0, out_used = 0;
      libdeflate_result r =
          DecodeOne(encoded.subspan(in_pos), out.subspan(out_pos), &in_used, &out_used);
      if (r == LIBDEFLATE_INSUFFICIENT_SPACE) return DecodedSizeTooLarge(name_, out.size());
      if (r != LIBDEFLATE_SUCCESS) return Corrupt();
      in_pos += in_used;
      out_pos += out_used;
      if (wrapper_ == Wrapper::kZlib && in_pos != encoded.size()) {
        return TrailingBytes(encoded.size() - in_pos);
      }
    } while (!AtEnd(encoded.subspan(in_pos)));
    if (out_pos != out.size()) return DecodedSizeMismatch(name_, out_pos, out.size());
    return Status::Ok();
  }

  Status DecodeAtMost(std::span<const std::byte> encoded, uint64_t limit,
                      ByteBuffer* decoded) const override {
    // No DEFLATE stream decodes to more than kMaxDeflateRatio times its size, nor may this one
    // decode to more than `limit`: the output grows up to the smaller, so a stream that claims
    // more fails without the allocation.
    const uint64_t by_input = SaturatingAdd(SaturatingMul(encoded.size(), kMaxDeflateRatio), 1024);
    const uint64_t bound = std::min(limit, by_input);
    uint64_t guess = 4 * encoded.size();
    if (wrapper_ == Wrapper::kGzip && encoded.size() >= 18) {
      // ISIZE, the size modulo 2^32 of the last member: exact for the usual single member.
      uint32_t isize = 0;
      std::memcpy(&isize, encoded.data() + encoded.size() - 4, 4);
      isize = LittleEndian32(isize);
      guess = std::max<uint64_t>(guess, isize);
    }
    uint64_t capacity = std::min(bound, std::max<uint64_t>(guess, 4096));
    decoded->Resize(capacity);
    size_t in_pos = 0, out_pos = 0;
    do {
      size_t in_used = 0, out_used = 0;
      libdeflate_result r;
      while ((r = DecodeOne(encoded.subspan(in_pos), decoded->span().subspan(out_pos), &in_used,
                            &out_used)) == LIBDEFLATE_INSUFFICIENT_SPACE) {
        if (capacity >= bound) {
          if (bound == limit) return DecodedSizeTooLarge(name_, DecodedSize::AtMost(limit));
          return CorruptChunkError(name_ + ": data decodes to more than " + std::to_string(bound) +
                                   " bytes, more than DEFLATE can from " +
                                   std::to_string(encoded.size()) + " bytes");
        }
        capacity = std::min(bound, SaturatingMul(capacity, 2));
        decoded->Resize(capacity);
      }
      if (r != LIBDEFLATE_SUCCESS) return Corrupt();
      in_pos += in_used;
      out_pos += out_used;
      if (wrapper_ == Wrapper::kZlib && in_pos != encoded.size()) {
        return TrailingBytes(encoded.size() - in_pos);
      }
    } while (!AtEnd(encoded.subspan(in_pos)));
    decoded->Resize(out_pos);
    return Status::Ok();
  }

  static uint32_t LittleEndian32(uint32_t v) {
    if constexpr (std::endian::native == std::endian::big) return __builtin_bswap32(v);
    return v;
  }

  Wrapper wrapper_;
  int level_;
  std::string name_;
};

Result<std::unique_ptr<BytesToBytesCodec>> MakeDeflateCodec(Wrapper wrapper, std::string_view name,
                                                            const nlohmann::json& configuration,
                                                            int default_level) {
  ZS_ASSIGN_OR_RETURN(CodecConfiguration config,
                      CodecConfiguration::Parse(name, configuration, {"level"}));
  ZS_ASSIGN_OR_RETURN(std::optional<int64_t> level, config.Integer("level", 0, 9));
  return std::unique_ptr<BytesToBytesCodec>(
      new DeflateCodec(wrapper, static_cast<int>(level.value_or(default_level))));
}

}  // namespace

Result<std::unique_ptr<BytesToBytesCodec>> MakeGzipCodec(
    const nlohmann::json& configuration, const ChunkRepresentation& /*array_representation*/) {
  return MakeDeflateCodec(Wrapper::kGzip, "gzip", configuration, 5);
}

Result<std::unique_ptr<BytesToBytesCodec>> MakeZlibCodec(
    const nlohmann::json& configuration, const ChunkRepresentation& /*array_representation*/) {
  return MakeDeflateCodec(Wrapper::kZlib, "numcodecs.zlib", configuration, 1);
}

}  // namespace zarrstream

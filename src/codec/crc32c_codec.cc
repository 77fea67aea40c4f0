// The hardware path runs three independent crc32 streams over adjacent blocks, because the
// instruction has a latency of three cycles but a throughput of one; the three CRCs are then joined
// by "shifting" the earlier ones over the later blocks with precomputed GF(2) operators (the method
// of Mark Adler's crc32c.c). This file is compiled with -msse4.2 on x86-64; the instruction only
// runs after __builtin_cpu_supports("sse4.2") says it exists.
#include "codec/crc32c_codec.h"

#include <array>
#include <bit>
#include <cstdio>
#include <cstring>
#include <string>

#if defined(__x86_64__) && defined(__SSE4_2__)
#include <nmmintrin.h>
#define ZARRSTREAM_CRC32C_SSE42 1
#endif

#include "codec/codec_configuration.h"
#include "codec/decoded_size.h"

namespace zarrstream {
namespace {

constexpr uint32_t kPolynomial = 0x82F63B78;  // CRC-32C, bit-reflected

using Table = std::array<std::array<uint32_t, 256>, 8>;

// kSliceTables[k][b]: the CRC of byte b followed by k zero bytes.
constexpr Table MakeSliceTables() {
  Table t{};
  for (uint32_t b = 0; b < 256; ++b) {
    uint32_t crc = b;
    for (int i = 0; i < 8; ++i) crc = (crc >> 1) ^ (kPolynomial & (0u - (crc & 1)));
    t[0][b] = crc;
  }
  for (uint32_t b = 0; b < 256; ++b) {
    for (int k = 1; k < 8; ++k) t[k][b] = (t[k - 1][b] >> 8) ^ t[0][t[k - 1][b] & 0xFF];
  }
  return t;
}
constexpr Table kSliceTables = MakeSliceTables();

uint64_t LoadLittleEndian64(const std::byte* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  if constexpr (std::endian::native == std::endian::big) v = __builtin_bswap64(v);
  return v;
}

// Raw CRC update (no pre/post inversion).
uint32_t UpdatePortable(uint32_t crc, const std::byte* p, size_t n) {
  const Table& t = kSliceTables;
  while (n >= 8) {
    uint64_t v = LoadLittleEndian64(p) ^ crc;
    crc = t[7][v & 0xFF] ^ t[6][(v >> 8) & 0xFF] ^ t[5][(v >> 16) & 0xFF] ^ t[4][(v >> 24) & 0xFF] ^
          t[3][(v >> 32) & 0xFF] ^ t[2][(v >> 40) & 0xFF] ^ t[1][(v >> 48) & 0xFF] ^ t[0][v >> 56];
    p += 8;
    n -= 8;
  }
  while (n-- > 0) crc = (crc >> 8) ^ t[0][(crc ^ static_cast<uint8_t>(*p++)) & 0xFF];
  return crc;
}

#if ZARRSTREAM_CRC32C_SSE42

// A 32x32 GF(2) matrix, column i being the image of bit i.
using Matrix = std::array<uint32_t, 32>;

constexpr uint32_t Multiply(const Matrix& m, uint32_t v) {
  uint32_t sum = 0;
  for (int i = 0; v != 0; ++i, v >>= 1) {
    if (v & 1) sum ^= m[i];
  }
  return sum;
}

constexpr Matrix Square(const Matrix& m) {
  Matrix r{};
  for (int i = 0; i < 32; ++i) r[i] = Multiply(m, m[i]);
  return r;
}

// Tables applying the operator "append `bytes` zero bytes" (a power of two) to a raw CRC.
using ShiftTable = std::array<std::array<uint32_t, 256>, 4>;

constexpr ShiftTable MakeShiftTable(size_t bytes) {
  Matrix op{};  // one zero bit
  op[0] = kPolynomial;
  for (int i = 1; i < 32; ++i) op[i] = uint32_t{1} << (i - 1);
  for (int i = 0; i < 3; ++i) op = Square(op);  // one zero byte
  for (size_t n = bytes; n > 1; n >>= 1) op = Square(op);
  ShiftTable t{};
  for (uint32_t b = 0; b < 256; ++b) {
    for (int k = 0; k < 4; ++k) t[k][b] = Multiply(op, b << (8 * k));
  }
  return t;
}

constexpr size_t kLongBlock = 8192;
constexpr size_t kShortBlock = 256;
constexpr ShiftTable kLongShift = MakeShiftTable(kLongBlock);
constexpr ShiftTable kShortShift = MakeShiftTable(kShortBlock);

inline uint32_t Shift(const ShiftTable& t, uint32_t crc) {
  return t[0][crc & 0xFF] ^ t[1][(crc >> 8) & 0xFF] ^ t[2][(crc >> 16) & 0xFF] ^ t[3][crc >> 24];
}

// Three streams over three adjacent blocks of `block` bytes each, while they last.
inline uint32_t UpdateTripleBlocks(uint32_t crc, const std::byte*& p, size_t& n, size_t block,
                                   const ShiftTable& shift) {
  while (n >= 3 * block) {
    uint64_t c0 = crc, c1 = 0, c2 = 0;
    const std::byte* end = p + block;
    do {
      uint64_t v0, v1, v2;
      std::memcpy(&v0, p, 8);
      std::memcpy(&v1, p + block, 8);
      std::memcpy(&v2, p + 2 * block, 8);
      c0 = _mm_crc32_u64(c0, v0);
      c1 = _mm_crc32_u64(c1, v1);
      c2 = _mm_crc32_u64(c2, v2);
      p += 8;
    } while (p < end);
    crc = Shift(shift, static_cast<uint32_t>(c0)) ^ static_cast<uint32_t>(c1);
    crc = Shift(shift, crc) ^ static_cast<uint32_t>(c2);
    p += 2 * block;
    n -= 3 * block;
  }
  return crc;
}

uint32_t UpdateSse42(uint32_t crc, const std::byte* p, size_t n) {
  crc = UpdateTripleBlocks(crc, p, n, kLongBlock, kLongShift);
  crc = UpdateTripleBlocks(crc, p, n, kShortBlock, kShortShift);
  uint64_t c = crc;
  while (n >= 8) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    c = _mm_crc32_u64(c, v);
    p += 8;
    n -= 8;
  }
  crc = static_cast<uint32_t>(c);
  while (n-- > 0) crc = _mm_crc32_u8(crc, static_cast<uint8_t>(*p++));
  return crc;
}

bool HaveSse42() {
  static const bool have = __builtin_cpu_supports("sse4.2");
  return have;
}

#endif  // ZARRSTREAM_CRC32C_SSE42

constexpr std::string_view kName = "crc32c";

class Crc32cCodec final : public BytesToBytesCodec {
 public:
  Status Decode(std::span<const std::byte> encoded, DecodedSize expected_size,
                ByteBuffer* decoded) const override {
    ZS_ASSIGN_OR_RETURN(std::span<const std::byte> payload, Verify(encoded, expected_size));
    decoded->Assign(payload.data(), payload.size());
    return Status::Ok();
  }

  Status DecodeInto(std::span<const std::byte> encoded, std::span<std::byte> decoded,
                    CodecScratch* /*scratch*/) const override {
    ZS_ASSIGN_OR_RETURN(std::span<const std::byte> payload, Verify(encoded, decoded.size()));
    if (!payload.empty() && payload.data() != decoded.data()) {
      std::memmove(decoded.data(), payload.data(), payload.size());
    }
    return Status::Ok();
  }

  Status Encode(std::span<const std::byte> decoded, ByteBuffer* encoded) const override {
    encoded->Resize(decoded.size() + 4);
    if (!decoded.empty()) std::memcpy(encoded->data(), decoded.data(), decoded.size());
    uint32_t crc = Crc32c(decoded);
    for (int i = 0; i < 4; ++i) {
      encoded->data()[decoded.size() + i] = static_cast<std::byte>(crc >> (8 * i));
    }
    return Status::Ok();
  }

  std::optional<uint64_t> EncodedSize(uint64_t decoded_size) const override {
    return decoded_size + 4;
  }

  nlohmann::json ToJson() const override { return CodecJson(kName, nlohmann::json::object()); }
  CodecTraits traits() const override { return {.type = CodecTraits::Type::kCrc32c}; }

 private:
  static Result<std::span<const std::byte>> Verify(std::span<const std::byte> encoded,
                                                   DecodedSize expected) {
    if (encoded.size() < 4) {
      return CorruptChunkError("crc32c: " + std::to_string(encoded.size()) +
                               " bytes cannot hold a 4-byte checksum");
    }
    std::span<const std::byte> payload = encoded.first(encoded.size() - 4);
    if (!expected.admits(payload.size())) {
      return expected.exact() ? DecodedSizeMismatch(kName, payload.size(), expected.bytes())
                              : DecodedSizeTooLarge(kName, expected);
    }
    uint32_t stored = 0;
    for (int i = 0; i < 4; ++i) {
      stored |= static_cast<uint32_t>(encoded[payload.size() + i]) << (8 * i);
    }
    uint32_t computed = Crc32c(payload);
    if (stored != computed) {
      char text[64];
      std::snprintf(text, sizeof(text), " (stored 0x%08x, computed 0x%08x)", stored, computed);
      return CorruptChunkError(std::string("crc32c checksum mismatch") + text);
    }
    return payload;
  }
};

}  // namespace

namespace internal {
uint32_t Crc32cPortable(std::span<const std::byte> data) {
  return ~UpdatePortable(~uint32_t{0}, data.data(), data.size());
}
}  // namespace internal

uint32_t Crc32c(std::span<const std::byte> data) {
#if ZARRSTREAM_CRC32C_SSE42
  if (HaveSse42()) return ~UpdateSse42(~uint32_t{0}, data.data(), data.size());
#endif
  return internal::Crc32cPortable(data);
}

Result<std::unique_ptr<BytesToBytesCodec>> MakeCrc32cCodec(
    const nlohmann::json& configuration, const ChunkRepresentation& /*array_representation*/) {
  ZS_RETURN_IF_ERROR(CodecConfiguration::Parse(kName, configuration, {}));
  return std::unique_ptr<BytesToBytesCodec>(new Crc32cCodec());
}

}  // namespace zarrstream

#include "util/base64.h"

#include <cstdint>

namespace zarrstream {

namespace {

constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

// The 6-bit value of one alphabet character, or -1.
int SextetOf(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

std::string DescribeChar(char c) {
  const auto byte = static_cast<unsigned char>(c);
  if (byte >= 0x20 && byte < 0x7F) return std::string("'") + c + "'";
  static constexpr char kHex[] = "0123456789abcdef";
  return std::string("byte 0x") + kHex[byte >> 4] + kHex[byte & 0xF];
}

}  // namespace

Result<std::string> DecodeBase64(std::string_view text) {
  if (text.size() % 4 != 0) {
    return InvalidArgumentError("not base64: its length " + std::to_string(text.size()) +
                                " is not a multiple of 4");
  }
  std::string out;
  out.reserve(text.size() / 4 * 3);
  for (size_t i = 0; i < text.size(); i += 4) {
    uint32_t bits = 0;
    int padding = 0;
    for (size_t k = 0; k < 4; ++k) {
      const char c = text[i + k];
      // '=' may only fill the last one or two places of the last group.
      if (c == '=' && i + 4 == text.size() && k >= 2) {
        ++padding;
        bits <<= 6;
        continue;
      }
      if (c == '=' || padding > 0) {
        return InvalidArgumentError("not base64: padding '=' before the end, at offset " +
                                    std::to_string(c == '=' ? i + k : i + k - 1));
      }
      const int sextet = SextetOf(c);
      if (sextet < 0) {
        return InvalidArgumentError("not base64: " + DescribeChar(c) + " at offset " +
                                    std::to_string(i + k) + " is outside its alphabet");
      }
      bits = (bits << 6) | static_cast<uint32_t>(sextet);
    }
    out.push_back(static_cast<char>(bits >> 16));
    if (padding < 2) out.push_back(static_cast<char>((bits >> 8) & 0xFF));
    if (padding < 1) out.push_back(static_cast<char>(bits & 0xFF));
  }
  return out;
}

std::string EncodeBase64(std::string_view bytes) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (size_t i = 0; i < bytes.size(); i += 3) {
    uint32_t bits = static_cast<uint32_t>(static_cast<unsigned char>(bytes[i])) << 16;
    if (i + 1 < bytes.size())
      bits |= static_cast<uint32_t>(static_cast<unsigned char>(bytes[i + 1])) << 8;
    if (i + 2 < bytes.size()) bits |= static_cast<unsigned char>(bytes[i + 2]);
    out.push_back(kAlphabet[bits >> 18]);
    out.push_back(kAlphabet[(bits >> 12) & 63]);
    out.push_back(i + 1 < bytes.size() ? kAlphabet[(bits >> 6) & 63] : '=');
    out.push_back(i + 2 < bytes.size() ? kAlphabet[bits & 63] : '=');
  }
  return out;
}

}  // namespace zarrstream

#include "util/base64.h"

#include <gtest/gtest.h>

#include <utility>

#include "util/status_test_util.h"

namespace zarrstream {
namespace {

// RFC 4648 section 10's test vectors.
const std::pair<std::string_view, std::string_view> kRfc4648Vectors[] = {
    {"", ""},
    {"f", "Zg=="},
    {"fo", "Zm8="},
    {"foo", "Zm9v"},
    {"foob", "Zm9vYg=="},
    {"fooba", "Zm9vYmE="},
    {"foobar", "Zm9vYmFy"},
};

TEST(Base64Test, EncodesRfc4648Vectors) {
  for (const auto& [bytes, text] : kRfc4648Vectors) EXPECT_EQ(EncodeBase64(bytes), text) << bytes;
}

TEST(Base64Test, DecodesRfc4648Vectors) {
  for (const auto& [bytes, text] : kRfc4648Vectors) {
    Result<std::string> decoded = DecodeBase64(text);
    ASSERT_TRUE(decoded.ok()) << text << ": " << decoded.status().ToString();
    EXPECT_EQ(*decoded, bytes) << text;
  }
}

TEST(Base64Test, RoundTripsEveryByteValue) {
  std::string bytes;
  for (int b = 0; b < 256; ++b) bytes.push_back(static_cast<char>(b));
  for (size_t length : {size_t{0}, size_t{1}, size_t{2}, size_t{3}, size_t{255}, size_t{256}}) {
    const std::string part = bytes.substr(0, length);
    Result<std::string> decoded = DecodeBase64(EncodeBase64(part));
    ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
    EXPECT_EQ(*decoded, part);
  }
  // The float64 -9999.0, little-endian, as xarray writes a float _FillValue into v3 attributes.
  EXPECT_EQ(EncodeBase64(std::string("\x00\x00\x00\x00\x80\x87\xc3\xc0", 8)), "AAAAAICHw8A=");
}

TEST(Base64Test, RejectsALengthThatIsNotAMultipleOfFour) {
  ExpectErrorContains(DecodeBase64("Zm9").status(), ErrorCode::kInvalidArgument,
                      {"not base64", "length 3", "multiple of 4"});
  // Unpadded text (RFC 4648 section 3.2 lets a specification drop padding; none here does).
  ExpectErrorContains(DecodeBase64("Zg").status(), ErrorCode::kInvalidArgument, {"length 2"});
}

TEST(Base64Test, RejectsACharacterOutsideTheAlphabet) {
  ExpectErrorContains(DecodeBase64("Zm9v YmE=").status(), ErrorCode::kInvalidArgument,
                      {"length 9"});
  ExpectErrorContains(DecodeBase64("Zm9vY E=").status(), ErrorCode::kInvalidArgument,
                      {"' '", "offset 5", "alphabet"});
  // The URL-safe alphabet (section 5) is another encoding.
  ExpectErrorContains(DecodeBase64("-_-_").status(), ErrorCode::kInvalidArgument,
                      {"'-'", "offset 0", "alphabet"});
  ExpectErrorContains(DecodeBase64(std::string("Zm9\x01", 4)).status(), ErrorCode::kInvalidArgument,
                      {"byte 0x01", "offset 3"});
}

TEST(Base64Test, RejectsMisplacedPadding) {
  ExpectErrorContains(DecodeBase64("Zg==Zm8=").status(), ErrorCode::kInvalidArgument,
                      {"padding", "offset 2"});
  ExpectErrorContains(DecodeBase64("Zm=v").status(), ErrorCode::kInvalidArgument,
                      {"padding", "offset 2"});
  ExpectErrorContains(DecodeBase64("Z===").status(), ErrorCode::kInvalidArgument,
                      {"padding", "offset 1"});
  ExpectErrorContains(DecodeBase64("====").status(), ErrorCode::kInvalidArgument,
                      {"padding", "offset 0"});
}

}  // namespace
}  // namespace zarrstream

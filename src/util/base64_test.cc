#include "util/base64.h"

#include <gtest/gtest.h>

namespace zarrstream {
namespace {

TEST(Base64Test, Base64RoundTrips) {
  for (std::string bytes : {std::string(), std::string("a"), std::string("ab"), std::string("abc"),
                            std::string("\x00\xff\x10\x20", 4)}) {
    EXPECT_EQ(DecodeBase64(EncodeBase64(bytes)), bytes);
  }
  EXPECT_FALSE(DecodeBase64("abc").has_value());
  EXPECT_FALSE(DecodeBase64("a=bc").has_value());
}

TEST(Base64Test, KnownValues) {
  EXPECT_EQ(EncodeBase64("AAAA\x01"), "QUFBQQE=");
  EXPECT_EQ(DecodeBase64("QUFBQQE="), "AAAA\x01");
  EXPECT_FALSE(DecodeBase64("QUFB QQE=").has_value());
  EXPECT_FALSE(DecodeBase64("QU=BQQE=").has_value());
}

}  // namespace
}  // namespace zarrstream

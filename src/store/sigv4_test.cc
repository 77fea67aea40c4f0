// SigV4 against the worked examples of AWS's S3 documentation ("Signature Calculations for the
// Authorization Header: Transferring Payload in a Single Chunk"), which fix every input.
#include "store/sigv4.h"

#include <gtest/gtest.h>

namespace zarrstream {
namespace {

const AwsCredentials kExampleCredentials{"AKIAIOSFODNN7EXAMPLE",
                                         "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", ""};
constexpr const char* kEmptySha =
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

std::string AuthorizationOf(const std::vector<std::string>& lines) {
  for (const std::string& l : lines) {
    if (l.rfind("Authorization: ", 0) == 0) return l.substr(15);
  }
  return "";
}

TEST(SigV4Test, GetObjectWithRangeMatchesAwsExample) {
  SigV4Request r;
  r.method = "GET";
  r.host = "examplebucket.s3.amazonaws.com";
  r.canonical_uri = "/test.txt";
  r.headers = {{"range", "bytes=0-9"}};
  r.payload_sha256 = kEmptySha;
  auto lines = SignSigV4(r, kExampleCredentials, "us-east-1", "s3", "20130524T000000Z");
  EXPECT_EQ(AuthorizationOf(lines),
            "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, "
            "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, "
            "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
  EXPECT_NE(std::find(lines.begin(), lines.end(), "x-amz-date: 20130524T000000Z"), lines.end());
}

TEST(SigV4Test, ListObjectsQueryIsSortedAsInAwsExample) {
  SigV4Request r;
  r.method = "GET";
  r.host = "examplebucket.s3.amazonaws.com";
  r.canonical_uri = "/";
  r.query = "prefix=J&max-keys=2";  // out of order on purpose
  r.payload_sha256 = kEmptySha;
  auto lines = SignSigV4(r, kExampleCredentials, "us-east-1", "s3", "20130524T000000Z");
  EXPECT_NE(AuthorizationOf(lines).find(
                "Signature=34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7"),
            std::string::npos)
      << AuthorizationOf(lines);
}

TEST(SigV4Test, SessionTokenIsSentAndSignedButSecretNeverAppears) {
  AwsCredentials temporary = kExampleCredentials;
  temporary.session_token = "session-token-value";
  SigV4Request r;
  r.method = "GET";
  r.host = "127.0.0.1:9000";
  r.canonical_uri = "/bucket/key";
  r.payload_sha256 = kEmptySha;
  auto lines = SignSigV4(r, temporary, "us-east-1", "s3", "20240101T000000Z");
  EXPECT_NE(std::find(lines.begin(), lines.end(), "x-amz-security-token: session-token-value"),
            lines.end());
  EXPECT_NE(AuthorizationOf(lines).find(
                "SignedHeaders=host;x-amz-content-sha256;x-amz-date;x-amz-security-token"),
            std::string::npos);
  auto unsigned_token = SignSigV4(r, kExampleCredentials, "us-east-1", "s3", "20240101T000000Z");
  EXPECT_NE(AuthorizationOf(lines), AuthorizationOf(unsigned_token));
  for (const std::string& l : lines) {
    EXPECT_EQ(l.find(kExampleCredentials.secret_access_key), std::string::npos) << l;
  }
}

TEST(SigV4Test, Sha256OfKnownInputs) {
  EXPECT_EQ(Sha256Hex({}), kEmptySha);
  std::string text = "Welcome to Amazon S3.";
  EXPECT_EQ(Sha256Hex(std::as_bytes(std::span<const char>(text.data(), text.size()))),
            "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072");
}

TEST(SigV4Test, AmzDateHasTheBasicIsoFormat) {
  std::string date = AmzDateNow();
  ASSERT_EQ(date.size(), 16u);
  EXPECT_EQ(date[8], 'T');
  EXPECT_EQ(date[15], 'Z');
}

}  // namespace
}  // namespace zarrstream

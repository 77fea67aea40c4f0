// AWS Signature Version 4 for S3 requests (and GCS's S3-compatible XML API with HMAC keys).
//
// Signed by hand rather than with libcurl's CURLOPT_AWS_SIGV4 so that exactly the headers S3
// needs are signed, whatever the libcurl version: x-amz-content-sha256 (S3 rejects requests
// without it), x-amz-security-token (temporary credentials) and Range. Verified against the
// examples in AWS's S3 documentation (sigv4_test.cc) and a SigV4-checking server (tests/).
//
// Secrets: the secret key only enters HMAC; nothing here formats it into a string.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace zarrstream {

struct AwsCredentials {
  std::string access_key_id;
  std::string secret_access_key;
  std::string session_token;  // temporary credentials only
};

struct SigV4Request {
  std::string method;
  std::string host;           // as sent in the Host header (with ":port" when not the default)
  std::string canonical_uri;  // the URI-encoded path, "/" at least
  std::string query;          // the encoded query string as sent, "" for none
  // Headers to sign besides host, x-amz-content-sha256, x-amz-date and x-amz-security-token
  // (lower-case names).
  std::vector<std::pair<std::string, std::string>> headers;
  std::string payload_sha256;  // hex SHA-256 of the body
};

// Lower-case hex SHA-256 of `data`.
std::string Sha256Hex(std::span<const std::byte> data);

// The header lines that sign `request` at `amz_date` ("20130524T000000Z"): x-amz-date,
// x-amz-content-sha256, x-amz-security-token (when the credentials have one) and Authorization.
std::vector<std::string> SignSigV4(const SigV4Request& request, const AwsCredentials& credentials,
                                   std::string_view region, std::string_view service,
                                   std::string_view amz_date);

// The current UTC time as "YYYYMMDDTHHMMSSZ".
std::string AmzDateNow();

}  // namespace zarrstream

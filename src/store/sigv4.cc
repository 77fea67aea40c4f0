#include "store/sigv4.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <algorithm>
#include <ctime>

namespace zarrstream {

namespace {

std::string Hex(const unsigned char* data, size_t size) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out(size * 2, '0');
  for (size_t i = 0; i < size; ++i) {
    out[2 * i] = kHex[data[i] >> 4];
    out[2 * i + 1] = kHex[data[i] & 15];
  }
  return out;
}

std::string HmacSha256(std::string_view key, std::string_view data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(data.data()), data.size(), out, &size);
  return std::string(reinterpret_cast<const char*>(out), size);
}

std::string TextSha256Hex(std::string_view s) {
  return Sha256Hex(
      std::span<const std::byte>(reinterpret_cast<const std::byte*>(s.data()), s.size()));
}

// The query's parameters sorted by name (then value), as SigV4 wants them. Our queries are
// already encoded with UriEncode, so only the order changes.
std::string CanonicalQuery(std::string_view query) {
  std::vector<std::pair<std::string, std::string>> params;
  size_t start = 0;
  while (start < query.size()) {
    size_t amp = query.find('&', start);
    if (amp == std::string_view::npos) amp = query.size();
    std::string_view param = query.substr(start, amp - start);
    size_t eq = param.find('=');
    if (eq == std::string_view::npos) {
      params.emplace_back(std::string(param), "");
    } else {
      params.emplace_back(std::string(param.substr(0, eq)), std::string(param.substr(eq + 1)));
    }
    start = amp + 1;
  }
  std::sort(params.begin(), params.end());
  std::string out;
  for (const auto& [name, value] : params) {
    if (!out.empty()) out += '&';
    out += name;
    out += '=';
    out += value;
  }
  return out;
}

}  // namespace

std::string Sha256Hex(std::span<const std::byte> data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  EVP_Digest(data.data(), data.size(), digest, &size, EVP_sha256(), nullptr);
  return Hex(digest, size);
}

std::vector<std::string> SignSigV4(const SigV4Request& request, const AwsCredentials& credentials,
                                   std::string_view region, std::string_view service,
                                   std::string_view amz_date) {
  std::vector<std::pair<std::string, std::string>> headers = request.headers;
  headers.emplace_back("host", request.host);
  headers.emplace_back("x-amz-content-sha256", request.payload_sha256);
  headers.emplace_back("x-amz-date", std::string(amz_date));
  if (!credentials.session_token.empty()) {
    headers.emplace_back("x-amz-security-token", credentials.session_token);
  }
  std::sort(headers.begin(), headers.end());

  std::string canonical = request.method;
  canonical += '\n';
  canonical += request.canonical_uri;
  canonical += '\n';
  canonical += CanonicalQuery(request.query);
  canonical += '\n';
  std::string signed_headers;
  for (const auto& [name, value] : headers) {
    canonical += name;
    canonical += ':';
    canonical += value;
    canonical += '\n';
    if (!signed_headers.empty()) signed_headers += ';';
    signed_headers += name;
  }
  canonical += '\n';
  canonical += signed_headers;
  canonical += '\n';
  canonical += request.payload_sha256;

  const std::string_view date = amz_date.substr(0, 8);
  std::string scope(date);
  scope += '/';
  scope += region;
  scope += '/';
  scope += service;
  scope += "/aws4_request";
  std::string to_sign = "AWS4-HMAC-SHA256\n";
  to_sign += amz_date;
  to_sign += '\n';
  to_sign += scope;
  to_sign += '\n';
  to_sign += TextSha256Hex(canonical);

  std::string key = "AWS4";
  key += credentials.secret_access_key;
  key = HmacSha256(key, date);
  key = HmacSha256(key, region);
  key = HmacSha256(key, service);
  key = HmacSha256(key, "aws4_request");
  const std::string mac = HmacSha256(key, to_sign);
  const std::string signature = Hex(reinterpret_cast<const unsigned char*>(mac.data()), mac.size());

  std::vector<std::string> lines;
  lines.push_back("x-amz-date: " + std::string(amz_date));
  lines.push_back("x-amz-content-sha256: " + request.payload_sha256);
  if (!credentials.session_token.empty()) {
    lines.push_back("x-amz-security-token: " + credentials.session_token);
  }
  std::string authorization = "Authorization: AWS4-HMAC-SHA256 Credential=";
  authorization += credentials.access_key_id;
  authorization += '/';
  authorization += scope;
  authorization += ", SignedHeaders=";
  authorization += signed_headers;
  authorization += ", Signature=";
  authorization += signature;
  lines.push_back(std::move(authorization));
  return lines;
}

std::string AmzDateNow() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char buffer[20];
  std::strftime(buffer, sizeof(buffer), "%Y%m%dT%H%M%SZ", &utc);
  return buffer;
}

}  // namespace zarrstream

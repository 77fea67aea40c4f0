#include "store/s3_store.h"

#include <cctype>
#include <charconv>
#include <cstdlib>

#include "store/store_registry.h"

namespace zarrstream {

namespace {

// SHA-256 of the empty body: every request but a PUT.
constexpr std::string_view kEmptySha256 =
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

bool IsTrue(const std::optional<std::string>& v) {
  if (!v) return false;
  std::string s = *v;
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s == "1" || s == "yes" || s == "true";
}

std::optional<std::string> NonEmpty(const EnvironmentLookup& env, std::string_view name) {
  std::optional<std::string> v = env(name);
  if (v && v->empty()) return std::nullopt;
  return v;
}

// A bucket name usable as a host label: lower-case letters, digits and '-' (dots would break TLS
// certificate matching of *.s3.amazonaws.com).
bool IsHostCompatibleBucket(std::string_view bucket) {
  if (bucket.size() < 3 || bucket.size() > 63 || bucket.front() == '-' || bucket.back() == '-') {
    return false;
  }
  for (char c : bucket) {
    if (!(std::islower(static_cast<unsigned char>(c)) ||
          std::isdigit(static_cast<unsigned char>(c)) || c == '-')) {
      return false;
    }
  }
  return true;
}

// "https://host:port" → "host:port".
std::string_view AuthorityOf(std::string_view endpoint) {
  std::string_view rest = endpoint.substr(endpoint.find("://") + 3);
  return rest.substr(0, rest.find('/'));
}

std::string XmlDecode(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '&') {
      out += s[i];
      continue;
    }
    size_t semi = s.find(';', i);
    if (semi == std::string_view::npos) {
      out += s[i];
      continue;
    }
    std::string_view entity = s.substr(i + 1, semi - i - 1);
    if (entity == "amp") {
      out += '&';
    } else if (entity == "lt") {
      out += '<';
    } else if (entity == "gt") {
      out += '>';
    } else if (entity == "quot") {
      out += '"';
    } else if (entity == "apos") {
      out += '\'';
    } else if (entity.size() > 1 && entity[0] == '#') {
      uint32_t code = 0;
      const bool hex = entity[1] == 'x' || entity[1] == 'X';
      std::string_view digits = entity.substr(hex ? 2 : 1);
      auto [ptr, ec] =
          std::from_chars(digits.data(), digits.data() + digits.size(), code, hex ? 16 : 10);
      if (ec != std::errc() || ptr != digits.data() + digits.size()) {
        out.append(s.substr(i, semi - i + 1));
      } else if (code < 0x80) {
        out += static_cast<char>(code);
      } else if (code < 0x800) {
        out += static_cast<char>(0xC0 | (code >> 6));
        out += static_cast<char>(0x80 | (code & 0x3F));
      } else if (code < 0x10000) {
        out += static_cast<char>(0xE0 | (code >> 12));
        out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (code & 0x3F));
      } else {
        out += static_cast<char>(0xF0 | (code >> 18));
        out += static_cast<char>(0x80 | ((code >> 12) & 0x3F));
        out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (code & 0x3F));
      }
    } else {
      out.append(s.substr(i, semi - i + 1));
    }
    i = semi;
  }
  return out;
}

// The text of the first <tag>...</tag> in `xml` at or after `from`; `end` gets the position past
// it. Empty when absent.
std::optional<std::string_view> XmlElement(std::string_view xml, std::string_view tag,
                                           size_t from = 0, size_t* end = nullptr) {
  std::string open = "<";
  open += tag;
  open += ">";
  std::string close = "</";
  close += tag;
  close += ">";
  size_t begin = xml.find(open, from);
  if (begin == std::string_view::npos) return std::nullopt;
  begin += open.size();
  size_t stop = xml.find(close, begin);
  if (stop == std::string_view::npos) return std::nullopt;
  if (end != nullptr) *end = stop + close.size();
  return xml.substr(begin, stop - begin);
}

// "Code: Message" of an S3 error document, or "" when the body is not one.
std::string S3ErrorText(std::string_view body) {
  std::optional<std::string_view> code = XmlElement(body, "Code");
  if (!code) return "";
  std::string text = XmlDecode(*code);
  if (std::optional<std::string_view> message = XmlElement(body, "Message")) {
    text += ": ";
    text += XmlDecode(*message);
  }
  return text;
}

// The bucket and key prefix of `url` (`rest`: what follows its scheme) into `loc`.
Status ParseBucketAndPrefix(std::string_view url, std::string_view rest, S3Location* loc) {
  const size_t slash = rest.find('/');
  loc->bucket = std::string(rest.substr(0, slash));
  if (loc->bucket.empty() || loc->bucket.find_first_of("@:?#") != std::string::npos) {
    return InvalidArgumentError(loc->scheme + ":// URL needs a bucket name: " + loc->scheme +
                                "://BUCKET/PREFIX");
  }
  if (slash != std::string_view::npos) {
    std::string_view prefix = rest.substr(slash + 1);
    while (!prefix.empty() && prefix.back() == '/') prefix.remove_suffix(1);
    if (!prefix.empty()) {
      ZS_RETURN_IF_ERROR_CTX(ValidateKey(prefix), "in " + RedactUrl(url));
      loc->prefix = std::string(prefix);
    }
  }
  return Status::Ok();
}

// The region, addressing style and credentials of an s3:// location from the AWS variables of
// `env` into `loc`; returns the endpoint.
Result<std::string> ResolveAwsSettings(const EnvironmentLookup& env, S3Location* loc) {
  loc->region = NonEmpty(env, "AWS_REGION")
                    .value_or(NonEmpty(env, "AWS_DEFAULT_REGION").value_or("us-east-1"));
  std::optional<std::string> endpoint = NonEmpty(env, "AWS_ENDPOINT_URL_S3");
  if (!endpoint) endpoint = NonEmpty(env, "AWS_ENDPOINT_URL");
  const bool custom_endpoint = endpoint.has_value();
  if (!endpoint) endpoint = "https://s3." + loc->region + ".amazonaws.com";
  loc->addressing =
      custom_endpoint ? S3Location::Addressing::kPath : S3Location::Addressing::kVirtualHosted;
  if (std::optional<std::string> style = NonEmpty(env, "ZARRSTREAM_S3_ADDRESSING_STYLE")) {
    if (*style == "path") {
      loc->addressing = S3Location::Addressing::kPath;
    } else if (*style == "virtual") {
      loc->addressing = S3Location::Addressing::kVirtualHosted;
    } else {
      return ConfigError("ZARRSTREAM_S3_ADDRESSING_STYLE must be 'path' or 'virtual', not '" +
                         *style + "'");
    }
  }
  std::optional<std::string> key_id = NonEmpty(env, "AWS_ACCESS_KEY_ID");
  std::optional<std::string> secret = NonEmpty(env, "AWS_SECRET_ACCESS_KEY");
  if (key_id.has_value() != secret.has_value()) {
    return ConfigError(
        "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY must be set together (only one is set)");
  }
  if (key_id && !IsTrue(env("AWS_NO_SIGN_REQUEST"))) {
    loc->credentials.access_key_id = *key_id;
    loc->credentials.secret_access_key = *secret;
    loc->credentials.session_token = NonEmpty(env, "AWS_SESSION_TOKEN").value_or("");
    loc->credential_source = loc->credentials.session_token.empty()
                                 ? "AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY"
                                 : "AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY/AWS_SESSION_TOKEN";
  }
  return *endpoint;
}

// The region, addressing style and credentials of a gs:// location (GCS's S3-compatible API) from
// `env` into `loc`; returns the endpoint.
Result<std::string> ResolveGcsSettings(const EnvironmentLookup& env, S3Location* loc) {
  loc->region = "auto";
  std::optional<std::string> endpoint = NonEmpty(env, "STORAGE_EMULATOR_HOST");
  if (endpoint && endpoint->find("://") == std::string::npos) endpoint = "http://" + *endpoint;
  if (!endpoint) endpoint = "https://storage.googleapis.com";
  loc->addressing = S3Location::Addressing::kPath;
  std::optional<std::string> key_id = NonEmpty(env, "GS_ACCESS_KEY_ID");
  std::optional<std::string> secret = NonEmpty(env, "GS_SECRET_ACCESS_KEY");
  if (key_id.has_value() != secret.has_value()) {
    return ConfigError(
        "GS_ACCESS_KEY_ID and GS_SECRET_ACCESS_KEY must be set together (only one is set)");
  }
  if (key_id) {
    loc->credentials.access_key_id = *key_id;
    loc->credentials.secret_access_key = *secret;
    loc->credential_source = "GS_ACCESS_KEY_ID/GS_SECRET_ACCESS_KEY (HMAC)";
  } else if (std::optional<std::string> token = NonEmpty(env, "GOOGLE_OAUTH_ACCESS_TOKEN")) {
    loc->bearer_token = *token;
    loc->credential_source = "GOOGLE_OAUTH_ACCESS_TOKEN";
  }
  return *endpoint;
}

// Refuses an endpoint (trailing slashes removed) that is not scheme://host[:port].
Status CheckEndpoint(const std::string& endpoint, const std::string& scheme) {
  if (endpoint.rfind("http://", 0) != 0 && endpoint.rfind("https://", 0) != 0) {
    return ConfigError("the " + scheme +
                       " endpoint must be an http:// or https:// URL: " + RedactUrl(endpoint));
  }
  if (endpoint.find('/', endpoint.find("://") + 3) != std::string::npos ||
      endpoint.find('@') != std::string::npos) {
    return ConfigError(
        "the " + scheme +
        " endpoint must be scheme://host[:port] without a path or user: " + RedactUrl(endpoint));
  }
  return Status::Ok();
}

}  // namespace

std::optional<std::string> ProcessEnvironment(std::string_view name) {
  const char* value = std::getenv(std::string(name).c_str());
  if (value == nullptr) return std::nullopt;
  return std::string(value);
}

Result<S3Location> ResolveS3Location(std::string_view url, const EnvironmentLookup& env) {
  auto [scheme, rest] = SplitScheme(url);
  if (scheme != "s3" && scheme != "gs") {
    return InvalidArgumentError("not an s3:// or gs:// URL: " + RedactUrl(url));
  }
  if (url.find('\0') != std::string_view::npos) {
    return InvalidArgumentError("a store URL cannot contain a NUL byte: " + EscapeNul(url));
  }
  S3Location loc;
  loc.scheme = std::string(scheme);
  ZS_RETURN_IF_ERROR(ParseBucketAndPrefix(url, rest, &loc));
  std::string endpoint;
  if (loc.scheme == "s3") {
    ZS_ASSIGN_OR_RETURN(endpoint, ResolveAwsSettings(env, &loc));
  } else {
    ZS_ASSIGN_OR_RETURN(endpoint, ResolveGcsSettings(env, &loc));
  }
  if (loc.credential_source.empty()) loc.credential_source = "anonymous (no credentials set)";
  if (std::optional<std::string> page = NonEmpty(env, "ZARRSTREAM_S3_LIST_PAGE_SIZE")) {
    uint32_t n = 0;
    auto [ptr, ec] = std::from_chars(page->data(), page->data() + page->size(), n);
    if (ec != std::errc() || ptr != page->data() + page->size() || n == 0 || n > 1000) {
      return ConfigError("ZARRSTREAM_S3_LIST_PAGE_SIZE must be an integer in [1, 1000], not '" +
                         *page + "'");
    }
    loc.list_page_size = n;
  }
  while (!endpoint.empty() && endpoint.back() == '/') endpoint.pop_back();
  ZS_RETURN_IF_ERROR(CheckEndpoint(endpoint, loc.scheme));
  loc.endpoint = endpoint;
  if (loc.addressing == S3Location::Addressing::kVirtualHosted &&
      !IsHostCompatibleBucket(loc.bucket)) {
    loc.addressing = S3Location::Addressing::kPath;
  }
  return loc;
}

Result<ListObjectsPage> ParseListObjectsV2(std::string_view xml) {
  if (xml.find("<ListBucketResult") == std::string_view::npos) {
    return StorageError("not a ListObjectsV2 response (no <ListBucketResult>)");
  }
  ListObjectsPage page;
  size_t pos = 0;
  while (std::optional<std::string_view> contents = XmlElement(xml, "Contents", pos, &pos)) {
    std::optional<std::string_view> key = XmlElement(*contents, "Key");
    std::optional<std::string_view> size = XmlElement(*contents, "Size");
    uint64_t n = 0;
    if (!key || !size ||
        std::from_chars(size->data(), size->data() + size->size(), n).ec != std::errc()) {
      return StorageError("malformed <Contents> in a ListObjectsV2 response");
    }
    page.objects.push_back({XmlDecode(*key), n});
  }
  pos = 0;
  while (std::optional<std::string_view> common = XmlElement(xml, "CommonPrefixes", pos, &pos)) {
    if (std::optional<std::string_view> prefix = XmlElement(*common, "Prefix")) {
      page.prefixes.push_back(XmlDecode(*prefix));
    }
  }
  std::optional<std::string_view> truncated = XmlElement(xml, "IsTruncated");
  if (truncated && *truncated == "true") {
    std::optional<std::string_view> token = XmlElement(xml, "NextContinuationToken");
    if (!token || token->empty()) {
      return StorageError("truncated ListObjectsV2 response without a NextContinuationToken");
    }
    page.continuation = XmlDecode(*token);
  }
  return page;
}

S3Store::S3Store(S3Location location, std::shared_ptr<CurlTransport> transport,
                 const HttpStoreOptions& options)
    : HttpStore(location.scheme + "://" + location.bucket +
                    (location.prefix.empty() ? std::string() : "/" + location.prefix),
                location.endpoint, std::move(transport), options),
      location_(std::move(location)) {
  const std::string authority(AuthorityOf(location_.endpoint));
  if (location_.addressing == S3Location::Addressing::kVirtualHosted) {
    host_ = location_.bucket + "." + authority;
  } else {
    host_ = authority;
    base_path_ = "/" + UriEncode(location_.bucket, /*keep_slash=*/false);
  }
}

Result<std::shared_ptr<S3Store>> S3Store::Open(const S3Location& location,
                                               std::shared_ptr<CurlTransport> transport,
                                               const HttpStoreOptions& options) {
  return std::shared_ptr<S3Store>(new S3Store(location, std::move(transport), options));
}

HttpRequest S3Store::MakeRequest(std::string_view method, std::string_view key,
                                 std::string_view query) const {
  HttpRequest request;
  request.method = std::string(method);
  // An empty key names the bucket itself (listings); keys live under the store's prefix.
  const std::string object_key = key.empty() ? std::string() : JoinKey(location_.prefix, key);
  std::string path = base_path_;
  if (!object_key.empty()) {
    path += '/';
    path += UriEncode(object_key, /*keep_slash=*/true);
  } else if (path.empty()) {
    path = "/";
  }
  const std::string scheme = location_.endpoint.substr(0, location_.endpoint.find("://"));
  request.url = scheme + "://" + host_ + path;
  if (!query.empty()) {
    request.url += '?';
    request.url += query;
  }
  request.display_url = location_.scheme + "://" + location_.bucket;
  if (!object_key.empty()) request.display_url += "/" + object_key;
  request.policy = options().policy;
  request.metrics = std::const_pointer_cast<StoreMetrics>(
      std::shared_ptr<const StoreMetrics>(std::shared_ptr<const void>(), &metrics()));
  if (!location_.bearer_token.empty()) {
    request.headers.push_back("Authorization: Bearer " + location_.bearer_token);
  }
  if (!location_.credentials.access_key_id.empty()) {
    request.sign =
        [credentials = location_.credentials, region = location_.region, host = host_, path,
         query = std::string(query)](const HttpRequest& r) -> Result<std::vector<std::string>> {
      SigV4Request s;
      s.method = r.method;
      s.host = host;
      s.canonical_uri = path;
      s.query = query;
      for (const std::string& h : r.headers) {
        if (h.rfind("Range: ", 0) == 0) s.headers.emplace_back("range", h.substr(7));
      }
      s.payload_sha256 = r.body.empty() ? std::string(kEmptySha256) : Sha256Hex(r.body);
      return SignSigV4(s, credentials, region, "s3", AmzDateNow());
    };
  }
  return request;
}

Status S3Store::ErrorForResponse(const HttpRequest& request, const HttpResponse& response) const {
  std::string message =
      request.method + " " + request.display_url + ": HTTP " + std::to_string(response.status);
  message += RedirectNote(response);
  const std::string detail = S3ErrorText(response.body.view());
  if (!detail.empty()) message += " " + detail;
  // S3 answers some credential problems with 400 (a malformed or expired session token).
  bool auth_problem = response.status == 401 || response.status == 403;
  for (std::string_view code :
       {"InvalidToken", "ExpiredToken", "TokenRefreshRequired", "InvalidAccessKeyId",
        "SignatureDoesNotMatch", "AccessDenied", "AuthorizationHeaderMalformed"}) {
    std::string prefix(code);
    prefix += ':';
    auth_problem |= detail.rfind(prefix, 0) == 0 || detail == code;
  }
  if (auth_problem) {
    message += " — an authorisation problem: " + location_.endpoint +
               " refused the request made with credentials from " + location_.credential_source;
  }
  return StorageError(std::move(message));
}

Status S3Store::ListPages(const std::string& object_prefix, bool delimited, ListObjectsPage* all) {
  std::optional<std::string> token;
  do {
    std::string query = "list-type=2&max-keys=" + std::to_string(location_.list_page_size) +
                        "&prefix=" + UriEncode(object_prefix, false);
    if (delimited) query += "&delimiter=%2F";
    if (token) query += "&continuation-token=" + UriEncode(*token, false);
    HttpRequest request = MakeRequest("GET", "", query);
    request.display_url = url() + " (listing '" + object_prefix + "')";
    HttpRequest described = request;
    ZS_ASSIGN_OR_RETURN(HttpResponse response, SendAndWait(std::move(request)));
    if (response.status == 404) {
      return NotFoundError("no such bucket: " + location_.scheme + "://" + location_.bucket +
                           " at " + location_.endpoint);
    }
    if (response.status != 200) return ErrorForResponse(described, response);
    ZS_ASSIGN_OR_RETURN_CTX(ListObjectsPage page, ParseListObjectsV2(response.body.view()),
                            "listing " + url());
    all->objects.insert(all->objects.end(), page.objects.begin(), page.objects.end());
    all->prefixes.insert(all->prefixes.end(), page.prefixes.begin(), page.prefixes.end());
    token = page.continuation;
  } while (token);
  return Status::Ok();
}

Result<std::vector<KeyInfo>> S3Store::List(std::string_view prefix) {
  if (!prefix.empty()) ZS_RETURN_IF_ERROR(ValidateKey(prefix));
  std::string object_prefix = JoinKey(location_.prefix, prefix);
  if (!object_prefix.empty()) object_prefix += '/';
  const size_t strip = location_.prefix.empty() ? 0 : location_.prefix.size() + 1;
  ListObjectsPage page;
  ZS_RETURN_IF_ERROR(ListPages(object_prefix, /*delimited=*/false, &page));
  std::vector<KeyInfo> keys;
  keys.reserve(page.objects.size());
  for (KeyInfo& object : page.objects) {
    if (object.key.size() <= strip) continue;
    keys.push_back({object.key.substr(strip), object.size});
  }
  return keys;
}

Result<DirectoryListing> S3Store::ListDirectory(std::string_view prefix) {
  if (!prefix.empty()) ZS_RETURN_IF_ERROR(ValidateKey(prefix));
  std::string object_prefix = JoinKey(location_.prefix, prefix);
  if (!object_prefix.empty()) object_prefix += '/';
  const size_t strip = location_.prefix.empty() ? 0 : location_.prefix.size() + 1;
  ListObjectsPage page;
  ZS_RETURN_IF_ERROR(ListPages(object_prefix, /*delimited=*/true, &page));
  DirectoryListing listing;
  for (KeyInfo& object : page.objects) {
    if (object.key.size() <= object_prefix.size()) continue;  // a "directory marker" object
    listing.keys.push_back({object.key.substr(strip), object.size});
  }
  for (std::string& p : page.prefixes) {
    while (!p.empty() && p.back() == '/') p.pop_back();
    if (p.size() <= strip) continue;
    listing.prefixes.push_back(p.substr(strip));
  }
  return listing;
}

Status S3Store::Put(std::string_view key, std::span<const std::byte> value) {
  ZS_RETURN_IF_ERROR(ValidateKey(key));
  HttpRequest request = MakeRequest("PUT", key, "");
  request.body = value;
  HttpRequest described = request;
  ZS_ASSIGN_OR_RETURN(HttpResponse response, SendAndWait(std::move(request)));
  if (response.status < 200 || response.status >= 300) {
    return ErrorForResponse(described, response);
  }
  return Status::Ok();
}

Status S3Store::Delete(std::string_view key) {
  ZS_RETURN_IF_ERROR(ValidateKey(key));
  HttpRequest request = MakeRequest("DELETE", key, "");
  HttpRequest described = request;
  ZS_ASSIGN_OR_RETURN(HttpResponse response, SendAndWait(std::move(request)));
  if (response.status == 404) return Status::Ok();  // some servers say so for a missing key
  if (response.status < 200 || response.status >= 300) {
    return ErrorForResponse(described, response);
  }
  return Status::Ok();
}

Result<std::shared_ptr<Store>> OpenS3StoreFromUrl(std::string_view url) {
  ZS_ASSIGN_OR_RETURN(S3Location location, ResolveS3Location(url, ProcessEnvironment));
  ZS_ASSIGN_OR_RETURN(auto transport, CurlTransport::Shared());
  ZS_ASSIGN_OR_RETURN(auto options, HttpStoreOptions::FromEnvironment());
  ZS_ASSIGN_OR_RETURN(auto store, S3Store::Open(location, std::move(transport), options));
  return std::shared_ptr<Store>(std::move(store));
}

}  // namespace zarrstream

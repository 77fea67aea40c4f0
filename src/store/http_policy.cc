// The HTTP transport's policy, apart from libcurl's event loop (declared in curl_transport.h): its
// configuration from the environment, URL helpers, the retry policy (which statuses are retried,
// the per-host quota, backoff, Retry-After), and the response checks (the header lines the
// transport keeps, and whether a finished body is framed whole).
#include <curl/curl.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "store/curl_transport.h"
#include "util/thread_pool.h"

namespace zarrstream {

namespace {

Result<uint64_t> EnvInteger(const char* name, uint64_t fallback, uint64_t min, uint64_t max) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return fallback;
  uint64_t value = 0;
  const char* end = text + std::strlen(text);
  auto [ptr, ec] = std::from_chars(text, end, value);
  if (ec != std::errc() || ptr != end || value < min || value > max) {
    std::string message = "environment variable ";
    message += name;
    message += "='";
    message += text;
    message += "' is not an integer in [" + std::to_string(min) + ", " + std::to_string(max) + "]";
    return ConfigError(std::move(message));
  }
  return value;
}

bool StartsWithNoCase(std::string_view s, std::string_view prefix) {
  if (s.size() < prefix.size()) return false;
  for (size_t i = 0; i < prefix.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(s[i])) !=
        std::tolower(static_cast<unsigned char>(prefix[i]))) {
      return false;
    }
  }
  return true;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() &&
         (s.back() == ' ' || s.back() == '\t' || s.back() == '\r' || s.back() == '\n'))
    s.remove_suffix(1);
  return s;
}

// Parses "bytes first-last/total" (total may be '*'): the number of bytes it spans.
std::optional<uint64_t> ContentRangeLength(std::string_view value) {
  if (!StartsWithNoCase(value, "bytes ")) return std::nullopt;
  value.remove_prefix(6);
  size_t dash = value.find('-');
  size_t slash = value.find('/');
  if (dash == std::string_view::npos || slash == std::string_view::npos || slash < dash) {
    return std::nullopt;
  }
  uint64_t first = 0, last = 0;
  auto a = std::from_chars(value.data(), value.data() + dash, first);
  auto b = std::from_chars(value.data() + dash + 1, value.data() + slash, last);
  if (a.ec != std::errc() || b.ec != std::errc() || last < first) return std::nullopt;
  return last - first + 1;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Configuration.

size_t DefaultIoThreads() {
  Result<size_t> cores = CoresPerLocalRank();
  return std::clamp<size_t>((cores.ok() ? *cores : UsableCores()) * 3 / 4, 2, 16);
}

Result<TransportOptions> TransportOptions::FromEnvironment() {
  ZS_RETURN_IF_ERROR(CoresPerLocalRank().status());  // the I/O threads' default is a share of it
  TransportOptions o;
  ZS_ASSIGN_OR_RETURN(o.io_threads, EnvInteger("ZARRSTREAM_HTTP_IO_THREADS", o.io_threads, 1, 64));
  ZS_ASSIGN_OR_RETURN(o.max_in_flight,
                      EnvInteger("ZARRSTREAM_HTTP_MAX_IN_FLIGHT", o.max_in_flight, 1, 65536));
  ZS_ASSIGN_OR_RETURN(o.max_in_flight_per_host, EnvInteger("ZARRSTREAM_HTTP_MAX_PER_HOST",
                                                           o.max_in_flight_per_host, 1, 65536));
  return o;
}

Result<RequestPolicy> RequestPolicy::FromEnvironment() {
  RequestPolicy p;
  constexpr uint64_t kDay = uint64_t{24} * 3600 * 1000;
  ZS_ASSIGN_OR_RETURN(p.max_attempts,
                      EnvInteger("ZARRSTREAM_HTTP_MAX_ATTEMPTS", p.max_attempts, 1, 1000));
  ZS_ASSIGN_OR_RETURN(uint64_t initial, EnvInteger("ZARRSTREAM_HTTP_INITIAL_BACKOFF_MS",
                                                   p.initial_backoff.count(), 0, kDay));
  ZS_ASSIGN_OR_RETURN(uint64_t max_backoff,
                      EnvInteger("ZARRSTREAM_HTTP_MAX_BACKOFF_MS", p.max_backoff.count(), 0, kDay));
  ZS_ASSIGN_OR_RETURN(uint64_t budget,
                      EnvInteger("ZARRSTREAM_HTTP_RETRY_BUDGET_MS", p.budget.count(), 1, kDay));
  ZS_ASSIGN_OR_RETURN(uint64_t connect, EnvInteger("ZARRSTREAM_HTTP_CONNECT_TIMEOUT_MS",
                                                   p.connect_timeout.count(), 1, kDay));
  ZS_ASSIGN_OR_RETURN(uint64_t stall, EnvInteger("ZARRSTREAM_HTTP_STALL_TIMEOUT_S",
                                                 p.stall_timeout.count(), 1, kDay / 1000));
  p.initial_backoff = std::chrono::milliseconds(initial);
  p.max_backoff = std::chrono::milliseconds(max_backoff);
  p.budget = std::chrono::milliseconds(budget);
  p.connect_timeout = std::chrono::milliseconds(connect);
  p.stall_timeout = std::chrono::seconds(stall);
  return p;
}

// ---------------------------------------------------------------------------------------------
// URL helpers.

namespace {

// Splits `url` into scheme, authority (userinfo included) and the rest (from the first '/').
struct UrlParts {
  std::string_view scheme;
  std::string_view authority;
  std::string_view rest;
};

UrlParts SplitUrl(std::string_view url) {
  UrlParts parts;
  size_t scheme_end = url.find("://");
  if (scheme_end == std::string_view::npos) {
    parts.rest = url;
    return parts;
  }
  parts.scheme = url.substr(0, scheme_end);
  std::string_view after = url.substr(scheme_end + 3);
  size_t path = after.find_first_of("/?#");
  parts.authority = after.substr(0, path);
  parts.rest = path == std::string_view::npos ? std::string_view() : after.substr(path);
  return parts;
}

}  // namespace

std::string RedactUrl(std::string_view url) {
  UrlParts parts = SplitUrl(url);
  if (parts.scheme.empty()) return std::string(url);
  std::string_view authority = parts.authority;
  size_t at = authority.rfind('@');
  if (at != std::string_view::npos) authority.remove_prefix(at + 1);
  std::string out(parts.scheme);
  out += "://";
  out += authority;
  out += parts.rest;
  return out;
}

std::string UriEncode(std::string_view s, bool keep_slash) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (std::isalnum(u) || c == '-' || c == '_' || c == '.' || c == '~' ||
        (keep_slash && c == '/')) {
      out += c;
    } else {
      out += '%';
      out += kHex[u >> 4];
      out += kHex[u & 15];
    }
  }
  return out;
}

std::string HostKeyOf(std::string_view url) {
  UrlParts parts = SplitUrl(url);
  std::string_view authority = parts.authority;
  size_t at = authority.rfind('@');
  if (at != std::string_view::npos) authority.remove_prefix(at + 1);
  std::string scheme(parts.scheme);
  std::string host(authority);
  for (char& c : scheme) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (char& c : host) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  size_t bracket = host.rfind(']');
  size_t colon = host.rfind(':');
  if (colon == std::string::npos || (bracket != std::string::npos && colon < bracket)) {
    host += scheme == "https" ? ":443" : ":80";
  }
  return scheme + "://" + host;
}

// ---------------------------------------------------------------------------------------------
// Retry policy.

std::optional<std::chrono::milliseconds> ParseRetryAfter(std::string_view value, int64_t now) {
  value = Trim(value);
  if (value.empty()) return std::nullopt;
  uint64_t seconds = 0;
  auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), seconds);
  if (ec == std::errc() && ptr == value.data() + value.size()) {
    return std::chrono::milliseconds(std::min<uint64_t>(seconds, 86400) * 1000);
  }
  std::string date(value);
  const time_t when = curl_getdate(date.c_str(), nullptr);
  if (when < 0) return std::nullopt;
  return std::chrono::milliseconds(std::max<int64_t>(0, static_cast<int64_t>(when) - now) * 1000);
}

std::string RedirectNote(const HttpResponse& response) {
  if (response.status < 300 || response.status >= 400 || response.status == 304) return "";
  std::string note = " redirect";
  if (!response.location.empty()) {
    std::string to = RedactUrl(response.location);
    if (const size_t query = to.find_first_of("?#"); query != std::string::npos) {
      to.resize(query);
      to += "?...";
    }
    note += " to " + to;
  }
  note += " (redirects are not followed: open the store at the URL it moved to)";
  return note;
}

bool RetryQuota::TrySpend(bool timed_out) {
  const int cost = timed_out ? kTimeoutCost : kCost;
  if (tokens_ < cost) return false;
  tokens_ -= cost;
  return true;
}

void RetryQuota::Earn() { tokens_ = std::min(kCapacity, tokens_ + kCost); }

std::chrono::milliseconds RetryBackoff(const RequestPolicy& policy, uint32_t retry, double unit) {
  const double cap = static_cast<double>(policy.max_backoff.count());
  const double exponential = static_cast<double>(policy.initial_backoff.count()) *
                             std::ldexp(1.0, static_cast<int>(std::min(retry, 40u)) - 1);
  const double d = std::min(cap, exponential);
  // "Equal jitter": at least half the exponential delay (so retries do back off), the rest random
  // (so clients that failed together do not retry together).
  return std::chrono::milliseconds(static_cast<int64_t>(d / 2 + unit * d / 2));
}

bool IsRetryableStatus(long status) {
  return status == 408 || status == 429 || status == 500 || status == 502 || status == 503 ||
         status == 504;
}

// ---------------------------------------------------------------------------------------------
// Response checks.

void ApplyHeaderLine(std::string_view line, int64_t now, HttpResponse* response,
                     BodyFraming* framing, std::optional<std::chrono::milliseconds>* retry_after) {
  if (StartsWithNoCase(line, "HTTP/")) {
    // A new response (after a 100 Continue or a redirect): forget the previous one's headers.
    response->content_range.clear();
    response->content_length.clear();
    framing->content_length.reset();
    retry_after->reset();
    framing->chunked = false;
    response->location.clear();
  } else if (StartsWithNoCase(line, "content-length:")) {
    response->content_length = std::string(Trim(line.substr(15)));
    uint64_t n = 0;
    const std::string& v = response->content_length;
    auto [ptr, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
    if (ec == std::errc() && ptr == v.data() + v.size()) framing->content_length = n;
  } else if (StartsWithNoCase(line, "content-range:")) {
    response->content_range = std::string(Trim(line.substr(14)));
  } else if (StartsWithNoCase(line, "transfer-encoding:")) {
    std::string value(Trim(line.substr(18)));
    for (char& c : value) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    framing->chunked = value.find("chunked") != std::string::npos;
  } else if (StartsWithNoCase(line, "location:")) {
    response->location = std::string(Trim(line.substr(9)));
  } else if (StartsWithNoCase(line, "retry-after:")) {
    *retry_after = ParseRetryAfter(line.substr(12), now);
  }
}

std::optional<FramingFailure> CheckBodyFraming(std::string_view method,
                                               const HttpResponse& response,
                                               const BodyFraming& framing, uint64_t received,
                                               bool http1) {
  // A body shorter than announced is a dropped connection that curl did not catch (or a proxy
  // that cut it): retry rather than hand truncated chunk bytes to a decoder.
  std::optional<uint64_t> expected = framing.content_length;
  if (response.status == 206) {
    if (auto span = ContentRangeLength(response.content_range)) expected = span;
  }
  if (expected && *expected != received) {
    return FramingFailure{"response body truncated: received " + std::to_string(received) + " of " +
                              std::to_string(*expected) + " bytes",
                          /*connection_suspect=*/true};
  }
  if (!expected && !framing.chunked && method == "GET" && response.status != 204 && http1) {
    // An HTTP/1 body without a length that ends when the connection closes: a connection
    // dropped midway ends it the same way, so a truncated value would pass for a whole one.
    return FramingFailure{
        "response body of unknown length (no Content-Length, Content-Range or chunked "
        "encoding) ended when the connection closed: it cannot be told from a truncated one",
        /*connection_suspect=*/false};
  }
  return std::nullopt;
}

}  // namespace zarrstream

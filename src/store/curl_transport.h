// CurlTransport: HTTP requests for the remote stores (http, s3, gcs), many in flight on a few I/O
// threads, with connection reuse, admission limits and retries.
//
// Each I/O thread drives one libcurl multi handle (its own connection and DNS cache, so keep-alive
// connections are reused across requests). Requests wait in one FIFO queue until both the global
// in-flight limit and their host's limit allow them to start, then go to the least-loaded thread.
//
// Retries: an attempt that fails with a connection error, a timeout, a reset, a truncated body, a
// response that HttpRequest::check_response refuses, or HTTP 408/429/500/502/503/504 is retried
// after a jittered exponential backoff (the server's Retry-After when it asks for longer), until
// the request's RetryPolicy runs out of attempts or time. Each host also has a retry quota shared
// by all its requests (RetryQuota): when an endpoint is down, hundreds of queued requests fail fast
// instead of each retrying for its whole budget, while a host that answers at least as many
// attempts as it fails never runs it out.
//
// Framing: a body that disagrees with its Content-Length or Content-Range, and garbage where a
// response should start on a reused connection (bytes a previous response left behind), are
// retried on a new connection. An HTTP/1 2xx body of a GET with no length at all (no
// Content-Length, Content-Range or chunked encoding) is refused (and retried): it ends when the
// connection closes, so a dropped connection would pass for a complete value.
//
// Redirects (3xx) are not followed: another host must not receive the request's credentials, and a
// signed request would not match there anyway. They are final responses; RedirectNote says where
// the value moved, for the store's error.
//
// Credentials: a request's URL may carry user:password (basic auth) and its headers may carry
// secrets (Authorization); neither ever appears in an error. Errors name `display_url`.
//
// TLS: the system's CA certificates, or the bundle named by ZARRSTREAM_CA_BUNDLE.
//
// Threads: Send may be called from any thread. Futures resolve on an I/O thread; their
// continuations must be short (hand heavy work to an executor). Destroying the transport fails the
// requests still queued or in flight and joins the I/O threads; it must not happen on one of them.
// In a fork()ed child the first Send starts the child's own I/O threads and connections; the
// parent's (their sockets, which the parent still uses) are never touched there
// (util/fork_safety.h).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "store/store_metrics.h"
#include "util/byte_buffer.h"
#include "util/future.h"
#include "zarrstream/status.h"

namespace zarrstream {

// Three quarters of this process's share of the cores (CoresPerLocalRank), at least 2 and at most
// 16: what the default I/O threads are.
size_t DefaultIoThreads();

struct TransportOptions {
  // I/O threads, each with its own libcurl multi handle. Each receives bodies at about 1-2 GB/s
  // (socket reads and the copy out of libcurl's buffer), so bandwidth, not the number of
  // transfers, sets how many: on 16 cores, 8 read 1 MiB chunks 1.8x faster than 2 did (3.17 vs
  // 1.74 GB/s stored, 20 ms latency, 256 per host); with decoding on the GPU, 12 received 7.6
  // GB/s where 8 received 6.5 (the CPU-decoding read gained a little: 3.86 vs 3.67).
  size_t io_threads = DefaultIoThreads();
  // Requests in flight at once across every host (the rest wait in the queue).
  size_t max_in_flight = 256;
  // Requests in flight at once to one host (scheme://host:port), i.e. its HTTP/1.1 connections.
  // Object stores serve hundreds of connections; with 20 ms of latency 256 read 1.6x more than 64.
  size_t max_in_flight_per_host = 256;

  // Reads ZARRSTREAM_HTTP_IO_THREADS, ZARRSTREAM_HTTP_MAX_IN_FLIGHT and
  // ZARRSTREAM_HTTP_MAX_PER_HOST over the defaults; a malformed value is a kConfig error.
  static Result<TransportOptions> FromEnvironment();
};

// How one request is retried and timed out.
struct RequestPolicy {
  // Attempts in all (the first included).
  uint32_t max_attempts = 8;
  // Backoff before retry n (n = 1, 2, ...) is drawn from [d/2, d], d = min(max_backoff,
  // initial_backoff * 2^(n-1)); a Retry-After that asks for longer wins.
  std::chrono::milliseconds initial_backoff{100};
  std::chrono::milliseconds max_backoff{5000};
  // Wall time from a request's start (its first attempt) to giving up, retries and waits included.
  std::chrono::milliseconds budget{60000};
  // Connecting (TCP + TLS) must finish within this.
  std::chrono::milliseconds connect_timeout{10000};
  // An attempt that receives no bytes for this long is abandoned (and retried).
  std::chrono::seconds stall_timeout{30};

  // Reads ZARRSTREAM_HTTP_MAX_ATTEMPTS, ZARRSTREAM_HTTP_INITIAL_BACKOFF_MS,
  // ZARRSTREAM_HTTP_MAX_BACKOFF_MS, ZARRSTREAM_HTTP_RETRY_BUDGET_MS,
  // ZARRSTREAM_HTTP_CONNECT_TIMEOUT_MS and ZARRSTREAM_HTTP_STALL_TIMEOUT_S over the defaults.
  static Result<RequestPolicy> FromEnvironment();
};

struct HttpResponse;

struct HttpRequest {
  std::string method = "GET";  // GET, HEAD, PUT, DELETE
  // The URL requested. May carry user:password (sent as basic auth, never printed).
  std::string url;
  // The URL as errors show it: no credentials.
  std::string display_url;
  // Extra header lines ("Range: bytes=0-9").
  std::vector<std::string> headers;
  // The PUT body. Must stay valid until the future resolves.
  std::span<const std::byte> body;
  // When set, called before every attempt; returns header lines to add to that attempt (SigV4
  // signs the attempt's time, so each retry is signed anew). Runs on an I/O thread.
  std::function<Result<std::vector<std::string>>(const HttpRequest&)> sign;
  // When set, a successful (2xx) response body is written here (resized to it; its memory reused)
  // rather than into HttpResponse::body. Must stay valid until the future resolves.
  ByteBuffer* body_sink = nullptr;
  // When set, checks a successful (2xx) response of a GET or PUT whose body arrived whole (called
  // on an I/O thread, with the body in body_sink or HttpResponse::body): a non-empty result says
  // what is wrong with it, and the attempt is retried on a new connection, like a truncated body.
  // For headers that contradict the request (a Content-Range other than the Range asked for).
  std::function<std::string(const HttpResponse&)> check_response;
  RequestPolicy policy;
  // Where the attempts are counted; may be null.
  std::shared_ptr<StoreMetrics> metrics;
};

struct HttpResponse {
  long status = 0;
  // The body, unless HttpRequest::body_sink took it (error bodies always land here).
  ByteBuffer body;
  // Size of the body received (wherever it went).
  uint64_t body_size = 0;
  // Header values, "" when absent.
  std::string content_range;
  std::string content_length;
  std::string location;  // a redirect's target
  uint32_t attempts = 0;
};

class CurlTransport {
 public:
  // Starts the I/O threads.
  static Result<std::shared_ptr<CurlTransport>> Create(const TransportOptions& options);
  // The transport the URL registry's stores share, created on first use with
  // TransportOptions::FromEnvironment() and kept while any store holds it (so opening many stores
  // never multiplies I/O threads).
  static Result<std::shared_ptr<CurlTransport>> Shared();

  ~CurlTransport();
  CurlTransport(const CurlTransport&) = delete;
  CurlTransport& operator=(const CurlTransport&) = delete;

  // Sends `request`, retrying transient failures. Resolves to the final response (any status that
  // is not retried, or a retried one once retries ran out is an error instead), or to a kStorage
  // error naming request.display_url.
  Future<HttpResponse> Send(HttpRequest request);

  const TransportOptions& options() const { return options_; }

  struct Impl;

 private:
  explicit CurlTransport(const TransportOptions& options);
  // The I/O threads of the calling process, started here after a fork().
  Impl& ForThisProcess();

  TransportOptions options_;
  std::atomic<Impl*> impl_;
};

// The retry quota of one host, shared by all its requests. A retry spends the cost of one retry
// (two after a timeout, which held a connection for longer); every successful response earns one
// retry's cost back, up to the full quota. So the quota is what failures have taken beyond what
// successes gave back: it runs out only when a host's failed attempts outnumber its successful
// ones by kRetries (timeouts counting double) since they were last even. A host that answers at
// least half of the attempts never runs it out, and no read fails for it while the request's own
// attempts and time last; a dead endpoint (no successes) gets kRetries retries in all, and after
// them every request fails at its first failure until the host answers again.
//
// Not thread-safe: the transport guards it with its lock.
class RetryQuota {
 public:
  static constexpr int kRetries = 100;

  // Spends the cost of a retry after a failed attempt (`timed_out`: the attempt timed out). False,
  // with nothing spent, when too little is left: the request must fail instead of retrying.
  bool TrySpend(bool timed_out);
  // A successful response (any attempt): earns one retry's cost back.
  void Earn();
  // The retries left at the cost of one after a failure that was not a timeout.
  int retries_left() const { return static_cast<int>(tokens_ / kCost); }

 private:
  static constexpr int kCost = 5;
  static constexpr int kTimeoutCost = 10;
  static constexpr int kCapacity = kRetries * kCost;
  int tokens_ = kCapacity;
};

// "scheme://host:port" of `url` (default ports filled in; user:password dropped): the unit the
// per-host limit and retry quota apply to.
std::string HostKeyOf(std::string_view url);

// Percent-encodes everything but the RFC 3986 unreserved characters (and '/' when `keep_slash`):
// the encoding S3's SigV4 canonical requests require, and safe for any server.
std::string UriEncode(std::string_view s, bool keep_slash);

// `url` without user:password, for messages.
std::string RedactUrl(std::string_view url);

// For a redirect (3xx but 304): " redirect to <Location, without credentials or query> (redirects
// are not followed: ...)", to append to "HTTP 301"; "" for any other response.
std::string RedirectNote(const HttpResponse& response);

// Parses a Retry-After value: delay-seconds or an HTTP date (relative to `now`, seconds since the
// epoch). Empty when malformed.
std::optional<std::chrono::milliseconds> ParseRetryAfter(std::string_view value, int64_t now);

// The backoff before retry `retry` (1 for the first retry) under `policy`, `unit` in [0, 1)
// choosing within the jitter interval.
std::chrono::milliseconds RetryBackoff(const RequestPolicy& policy, uint32_t retry, double unit);

// Whether a response with HTTP status `status` is retried (408, 429 and the 5xx of overload).
bool IsRetryableStatus(long status);

// The framing the current response's headers announce for its body.
struct BodyFraming {
  std::optional<uint64_t> content_length;
  bool chunked = false;  // Transfer-Encoding: chunked (curl checks that the last chunk came)
};

// Applies one received header line to `response`, `framing` and `retry_after` (a Retry-After
// relative to `now`, seconds since the epoch); a status line starts a new response and forgets
// the previous one's headers.
void ApplyHeaderLine(std::string_view line, int64_t now, HttpResponse* response,
                     BodyFraming* framing, std::optional<std::chrono::milliseconds>* retry_after);

// Why a finished 2xx body is not known to be whole: its message, and whether the connection may
// hold stray bytes (so the retry opens a new one).
struct FramingFailure {
  std::string message;
  bool connection_suspect = false;
};

// Checks the `received` body bytes of a 2xx response to a `method` request (not HEAD) against its
// framing: a body shorter or longer than announced, or, over HTTP/1 (`http1`), a GET body of
// unknown length that ended with the connection. nullopt when the body is whole.
std::optional<FramingFailure> CheckBodyFraming(std::string_view method,
                                               const HttpResponse& response,
                                               const BodyFraming& framing, uint64_t received,
                                               bool http1);

}  // namespace zarrstream

#include "store/http_store.h"

#include <charconv>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "store/icechunk_store.h"
#include "store/reference_store.h"

namespace zarrstream {

namespace {

Result<uint64_t> EnvBytes(const char* name, uint64_t fallback) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return fallback;
  uint64_t value = 0;
  const char* end = text + std::strlen(text);
  auto [ptr, ec] = std::from_chars(text, end, value);
  if (ec != std::errc() || ptr != end) {
    std::string message = "environment variable ";
    message += name;
    message += "='";
    message += text;
    message += "' is not a byte count";
    return ConfigError(std::move(message));
  }
  return value;
}

// The total size in "bytes first-last/total" or "bytes */total"; empty when absent or "*".
std::optional<uint64_t> ContentRangeTotal(std::string_view value) {
  size_t slash = value.rfind('/');
  if (slash == std::string_view::npos) return std::nullopt;
  uint64_t total = 0;
  auto [ptr, ec] = std::from_chars(value.data() + slash + 1, value.data() + value.size(), total);
  if (ec != std::errc() || ptr != value.data() + value.size()) return std::nullopt;
  return total;
}

// The first byte in "bytes first-last/total".
std::optional<uint64_t> ContentRangeFirst(std::string_view value) {
  size_t space = value.find(' ');
  if (space == std::string_view::npos) return std::nullopt;
  uint64_t first = 0;
  auto [ptr, ec] = std::from_chars(value.data() + space + 1, value.data() + value.size(), first);
  if (ec != std::errc() || ptr == value.data() + value.size() || *ptr != '-') return std::nullopt;
  return first;
}

std::string RangeHeader(const ByteRange& range) { return "Range: " + range.ToString(); }

// One Read call in flight: its merged reads, where each lands, and the caller's outputs.
struct ReadOperation {
  Promise<uint64_t> promise;
  std::string key;
  std::string key_url;
  std::vector<ByteRange> requested;
  std::span<ByteBuffer> outs;
  CoalescedRanges plan;
  std::vector<ByteBuffer> merged;  // the bodies of merged reads not written straight to an out
  std::vector<ByteBuffer*> sinks;  // where read r's body goes (an out, or merged[r])
  std::mutex mutex;
  size_t remaining = 0;
  Status error;
  std::optional<uint64_t> object_size;

  // Only empty ranges (or none): a HEAD says whether the key exists and how large it is.
  bool head_only() const { return plan.reads.empty(); }
  size_t num_requests() const { return head_only() ? 1 : plan.reads.size(); }

  void Fail(Status s) {
    std::lock_guard<std::mutex> lock(mutex);
    // kNotFound wins: the key is missing whatever else went wrong.
    if (error.ok() || s.code() == ErrorCode::kNotFound) error = std::move(s);
  }
  // One request is done; true for the last.
  bool FinishRequest() {
    std::lock_guard<std::mutex> lock(mutex);
    return --remaining == 0;
  }
};

// The operation of a Read of `ranges` of `key` into `outs`: its merged reads, and where each
// lands (a read that serves exactly one range whole goes straight into that range's output).
std::shared_ptr<ReadOperation> StartReadOperation(std::string_view key, std::string key_url,
                                                  std::span<const ByteRange> ranges,
                                                  std::span<ByteBuffer> outs,
                                                  const CoalescingOptions& coalescing) {
  auto op = std::make_shared<ReadOperation>();
  op->key = std::string(key);
  op->key_url = std::move(key_url);
  op->requested.assign(ranges.begin(), ranges.end());
  op->outs = outs;
  op->plan = CoalesceRanges(ranges, coalescing);
  const size_t num_requests = op->num_requests();
  op->merged.resize(num_requests);
  op->sinks.resize(num_requests);
  std::vector<size_t> users(num_requests, 0);
  for (const RangeSlice& slice : op->plan.slices) {
    if (slice.read != RangeSlice::kNoRead) ++users[slice.read];
  }
  for (size_t r = 0; r < num_requests; ++r) op->sinks[r] = &op->merged[r];
  for (size_t i = 0; i < op->plan.slices.size(); ++i) {
    const RangeSlice& slice = op->plan.slices[i];
    if (slice.read == RangeSlice::kNoRead || users[slice.read] != 1 || slice.offset != 0) continue;
    if (slice.whole_read || slice.length == op->plan.reads[slice.read].length) {
      op->sinks[slice.read] = &outs[i];
    }
  }
  op->remaining = num_requests;
  return op;
}

// What is wrong with a successful response to a GET of `range` that a new attempt may cure ("" when
// nothing): a 206 whose Content-Range is unusable or is not the range asked for, or whose body is
// not what it says. A range the value is too short for is not among them (a corrupt store, which
// AcceptBody reports).
std::string RangeResponseProblem(const ByteRange& range, const HttpResponse& response) {
  if (response.status != 206) return "";
  std::optional<uint64_t> total = ContentRangeTotal(response.content_range);
  std::optional<uint64_t> first = ContentRangeFirst(response.content_range);
  if (!total || !first) {
    return "HTTP 206 with an unusable Content-Range '" + response.content_range + "'";
  }
  uint64_t begin = 0, end = 0;
  if (!ResolveByteRange(range, *total, &begin, &end).ok()) return "";
  if (*first != begin || response.body_size != end - begin) {
    return "asked for " + range.ToString() + ", the server sent '" + response.content_range +
           "' (" + std::to_string(response.body_size) + " bytes)";
  }
  return "";
}

// Checks a successful response of merged read `r` and cuts the body down to the range asked for
// (servers may answer a range request with the whole value, status 200).
Status AcceptBody(ReadOperation& op, size_t r, const HttpResponse& response) {
  const ByteRange& range = op.plan.reads[r];
  ByteBuffer& body = *op.sinks[r];
  if (response.status != 200 && response.status != 206) {
    // 204 No Content, 203, ...: no value the read can use.
    return StorageError("reading " + op.key_url + ": unexpected HTTP " +
                        std::to_string(response.status) + " to a GET of " + range.ToString() +
                        " (a value comes with 200 or 206)");
  }
  if (response.status == 200) {
    // The whole value (the request had no Range, or the server ignored it).
    const uint64_t size = body.size();
    {
      std::lock_guard<std::mutex> lock(op.mutex);
      op.object_size = size;
    }
    uint64_t begin = 0, end = 0;
    ZS_RETURN_IF_ERROR_CTX(ResolveByteRange(range, size, &begin, &end), op.key_url);
    if (begin > 0) std::memmove(body.data(), body.data() + begin, end - begin);
    body.Resize(end - begin);
    return Status::Ok();
  }
  // 206: the server says which bytes it sent and how large the value is. The transport retried
  // responses RangeResponseProblem objects to until it ran out of attempts.
  if (std::string problem = RangeResponseProblem(range, response); !problem.empty()) {
    return StorageError("reading " + op.key_url + ": " + problem);
  }
  const uint64_t total = *ContentRangeTotal(response.content_range);
  {
    std::lock_guard<std::mutex> lock(op.mutex);
    op.object_size = total;
  }
  uint64_t begin = 0, end = 0;
  ZS_RETURN_IF_ERROR_CTX(ResolveByteRange(range, total, &begin, &end), op.key_url);
  return Status::Ok();
}

// Final statuses request `r` of `op` takes as its answer (TakeReadResponse); others are the store's
// errors. A 416 answers only a GET with a Range: to a HEAD or a whole-value GET it is the server's.
bool IsReadOutcome(const ReadOperation& op, size_t r, int status) {
  if (status == 416) return !op.head_only() && !op.plan.reads[r].is_full();
  return status == 404 || (status >= 200 && status < 300);
}

// A 416 to merged read `r`: the range starts past the end. A from-offset range starting exactly at
// the end is valid (and empty); tell which from the size the server reports.
Status AcceptUnsatisfiableRange(ReadOperation& op, size_t r, const HttpResponse& response) {
  std::optional<uint64_t> size = ContentRangeTotal(response.content_range);
  uint64_t begin = 0, end = 0;
  if (size && ResolveByteRange(op.plan.reads[r], *size, &begin, &end).ok()) {
    op.sinks[r]->Resize(0);
    return Status::Ok();
  }
  return CorruptChunkError(
      "byte range " + op.plan.reads[r].ToString() + " lies outside the stored value" +
      (size ? " of " + std::to_string(*size) + " bytes" : "") + " (HTTP 416): " + op.key_url);
}

// Takes the response to request `r` of `op` whose status IsReadOutcome.
Status TakeReadResponse(ReadOperation& op, size_t r, const HttpResponse& response) {
  if (response.status == 404) return NotFoundError("no such key: " + op.key_url);
  if (response.status == 416) return AcceptUnsatisfiableRange(op, r, response);
  if (!op.head_only()) return AcceptBody(op, r, response);
  uint64_t size = 0;
  const std::string& length = response.content_length;
  if (std::from_chars(length.data(), length.data() + length.size(), size).ec == std::errc()) {
    std::lock_guard<std::mutex> lock(op.mutex);
    op.object_size = size;
  }
  return Status::Ok();
}

// Every merged read is back: slices them into the outputs and resolves the future.
void FinishRead(const std::shared_ptr<ReadOperation>& op) {
  if (!op->error.ok()) {
    op->promise.Set(op->error);
    return;
  }
  uint64_t total = 0;
  for (size_t i = 0; i < op->requested.size(); ++i) {
    const RangeSlice& slice = op->plan.slices[i];
    ByteBuffer& out = op->outs[i];
    if (slice.read == RangeSlice::kNoRead) {
      // An empty range: valid while it starts inside the value.
      uint64_t begin = 0, end = 0;
      if (op->object_size) {
        Status s = ResolveByteRange(op->requested[i], *op->object_size, &begin, &end);
        if (!s.ok()) {
          op->promise.Set(std::move(s).WithContext(op->key_url));
          return;
        }
      }
      out.Resize(0);
      continue;
    }
    ByteBuffer* body = op->sinks[slice.read];
    if (body != &out) {
      const uint64_t length = slice.whole_read ? body->size() : slice.length;
      out.Assign(body->data() + slice.offset, length);
    }
    total += out.size();
  }
  op->promise.Set(total);
}

}  // namespace

Result<HttpStoreOptions> HttpStoreOptions::FromEnvironment() {
  HttpStoreOptions o;
  ZS_ASSIGN_OR_RETURN(o.policy, RequestPolicy::FromEnvironment());
  ZS_ASSIGN_OR_RETURN(o.coalescing.max_gap_bytes,
                      EnvBytes("ZARRSTREAM_HTTP_COALESCE_GAP_BYTES", o.coalescing.max_gap_bytes));
  ZS_ASSIGN_OR_RETURN(o.coalescing.max_merged_bytes, EnvBytes("ZARRSTREAM_HTTP_COALESCE_MAX_BYTES",
                                                              o.coalescing.max_merged_bytes));
  return o;
}

HttpStore::HttpStore(std::string display_url, std::string base_url,
                     std::shared_ptr<CurlTransport> transport, const HttpStoreOptions& options)
    : transport_(std::move(transport)),
      url_(std::move(display_url)),
      base_url_(std::move(base_url)),
      options_(options),
      metrics_(std::make_shared<StoreMetrics>()) {}

Result<std::shared_ptr<HttpStore>> HttpStore::Open(std::string_view url,
                                                   std::shared_ptr<CurlTransport> transport,
                                                   const HttpStoreOptions& options) {
  std::string base(url);
  const std::string display = RedactUrl(url);
  const size_t scheme_end = base.find("://");
  if (scheme_end == std::string::npos ||
      (base.compare(0, scheme_end, "http") != 0 && base.compare(0, scheme_end, "https") != 0)) {
    return InvalidArgumentError("not an http(s) URL: " + display);
  }
  if (base.find('\0') != std::string::npos) {
    return InvalidArgumentError("an HTTP store URL cannot contain a NUL byte: " +
                                RedactUrl(EscapeNul(url)));
  }
  if (base.find_first_of("?#") != std::string::npos) {
    return InvalidArgumentError("an HTTP store URL cannot have a query or fragment: " +
                                display.substr(0, display.find_first_of("?#")) + "?...");
  }
  if (base.find('/', scheme_end + 3) == std::string::npos && base.size() == scheme_end + 3) {
    return InvalidArgumentError("HTTP store URL without a host: " + display);
  }
  while (base.size() > scheme_end + 3 && base.back() == '/') base.pop_back();
  std::string shown = RedactUrl(base);
  return std::shared_ptr<HttpStore>(
      new HttpStore(std::move(shown), std::move(base), std::move(transport), options));
}

std::string HttpStore::KeyUrl(std::string_view key) const { return JoinKey(url_, key); }

HttpRequest HttpStore::MakeRequest(std::string_view method, std::string_view key,
                                   std::string_view query) const {
  HttpRequest request;
  request.method = std::string(method);
  request.url = base_url_;
  request.display_url = url_;
  if (!key.empty()) {
    request.url += '/';
    request.url += UriEncode(key, /*keep_slash=*/true);
    request.display_url = KeyUrl(key);
  }
  if (!query.empty()) {
    request.url += '?';
    request.url += query;
  }
  request.policy = options_.policy;
  request.metrics = metrics_;
  return request;
}

Status HttpStore::ErrorForResponse(const HttpRequest& request, const HttpResponse& response) const {
  std::string message =
      request.method + " " + request.display_url + ": HTTP " + std::to_string(response.status);
  message += RedirectNote(response);
  if (response.status == 401 || response.status == 403) {
    message +=
        ": access denied — the server refused to authorise the request (an authorisation "
        "problem: check the URL's credentials and the server's access rules)";
  }
  return StorageError(std::move(message));
}

Result<HttpResponse> HttpStore::SendAndWait(HttpRequest request) const {
  return transport_->Send(std::move(request)).Wait();
}

Future<uint64_t> HttpStore::Read(std::string_view key, std::span<const ByteRange> ranges,
                                 std::span<ByteBuffer> outs) {
  if (Status s = ValidateKey(key); !s.ok()) return Future<uint64_t>::Ready(std::move(s));
  if (ranges.size() != outs.size()) {
    return Future<uint64_t>::Ready(InternalError("HttpStore::Read: ranges/outs mismatch"));
  }
  std::shared_ptr<ReadOperation> op =
      StartReadOperation(key, KeyUrl(key), ranges, outs, options_.coalescing);
  Future<uint64_t> future = op->promise.future();
  for (size_t r = 0; r < op->num_requests(); ++r) {
    HttpRequest request = MakeRequest(op->head_only() ? "HEAD" : "GET", key, "");
    if (!op->head_only()) {
      const ByteRange& range = op->plan.reads[r];
      if (!range.is_full()) request.headers.push_back(RangeHeader(range));
      request.check_response = [range](const HttpResponse& response) {
        return RangeResponseProblem(range, response);
      };
    }
    request.body_sink = op->sinks[r];
    HttpRequest described = request;  // for ErrorForResponse (the original moves into Send)
    described.body = {};
    described.sign = nullptr;
    transport_->Send(std::move(request))
        .OnReady([this, op, r, described = std::move(described)](Result<HttpResponse>& result) {
          if (!result.ok()) {
            op->Fail(result.status());
          } else if (!IsReadOutcome(*op, r, result->status)) {
            op->Fail(ErrorForResponse(described, *result));
          } else if (Status s = TakeReadResponse(*op, r, *result); !s.ok()) {
            op->Fail(std::move(s));
          }
          if (op->FinishRequest()) FinishRead(op);
        });
  }
  return future;
}

Result<std::vector<KeyInfo>> HttpStore::List(std::string_view /*prefix*/) {
  return UnsupportedError("listing is not supported over plain HTTP (" + url_ +
                          "): open groups with consolidated metadata, or use s3:// or gs://");
}

Result<DirectoryListing> HttpStore::ListDirectory(std::string_view prefix) {
  return List(prefix).status();
}

Status HttpStore::Put(std::string_view key, std::span<const std::byte> /*value*/) {
  return UnsupportedError("HTTP stores are read-only: cannot write " + KeyUrl(key));
}

Status HttpStore::Delete(std::string_view key) {
  return UnsupportedError("HTTP stores are read-only: cannot delete " + KeyUrl(key));
}

const StoreMetrics* MetricsOf(const Store& store) {
  const auto* http = dynamic_cast<const HttpStore*>(&store);
  return http != nullptr ? &http->metrics() : nullptr;
}

bool IsRemoteStore(const Store& store) {
  if (const auto* references = dynamic_cast<const ReferenceStore*>(&store)) {
    return references->has_remote_targets();
  }
  if (const auto* repository = dynamic_cast<const IcechunkStore*>(&store)) {
    return repository->is_remote();
  }
  return dynamic_cast<const HttpStore*>(&store) != nullptr;
}

}  // namespace zarrstream

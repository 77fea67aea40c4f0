// The HTTP transport: I/O threads that drive libcurl multi handles, the per-host limits and the
// retry schedule (the policy it applies and its response checks: http_policy.cc).
#include "store/curl_transport.h"

#include <curl/curl.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <new>
#include <random>
#include <thread>

#include "util/fork_safety.h"
#include "util/thread_pool.h"

namespace zarrstream {

namespace {

using Clock = std::chrono::steady_clock;

// The most memory reserved for a response body before its bytes arrive (a Content-Length is
// only what the server announces).
constexpr uint64_t kMaxBodyReserve = uint64_t{64} << 20;

bool IsRetryableCurlCode(CURLcode code) {
  switch (code) {
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_CONNECT:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_PARTIAL_FILE:
    case CURLE_GOT_NOTHING:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
    case CURLE_HTTP3:
    case CURLE_AGAIN:
      return true;
    default:
      return false;
  }
}

double UniformUnit() {
  thread_local std::minstd_rand engine(std::random_device{}());
  return std::uniform_real_distribution<double>(0.0, 1.0)(engine);
}

std::string FormatSeconds(Clock::duration d) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%.1f s", std::chrono::duration<double>(d).count());
  return buffer;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// The transport.

namespace {

struct IoLoop;

// One request across its attempts.
struct Transfer {
  HttpRequest request;
  Promise<HttpResponse> promise;
  HttpResponse response;
  std::string host_key;
  IoLoop* loop = nullptr;
  uint32_t attempts = 0;
  Clock::time_point started{};          // the first attempt
  Clock::time_point attempt_started{};  // the current attempt
  Clock::time_point retry_at{};
  std::optional<std::chrono::milliseconds> retry_after;
  // The last attempt ended with a response whose framing was wrong (a body that disagreed with
  // its headers, or bytes that were no response at all): its connection may hold stray bytes, so
  // the next attempt opens a new one.
  bool fresh_connection = false;

  // Per attempt.
  CURL* easy = nullptr;
  curl_slist* header_list = nullptr;
  size_t upload_offset = 0;
  ByteBuffer* body_out = nullptr;  // chosen at the attempt's first body byte
  BodyFraming framing;
  // Why the body could not be kept (its memory could not be had): the attempt's failure.
  std::string body_failure;
  char error_buffer[CURL_ERROR_SIZE] = {};

  Clock::time_point deadline() const { return started + request.policy.budget; }
};

struct HostState {
  size_t in_flight = 0;
  std::deque<Transfer*> pending;
  RetryQuota retry_quota;
};

// Orders the retry heap: earliest retry_at on top.
struct LaterRetry {
  bool operator()(const Transfer* a, const Transfer* b) const { return a->retry_at > b->retry_at; }
};

}  // namespace

struct CurlTransport::Impl {
  explicit Impl(const TransportOptions& o) : options(o), fork_generation(ForkGeneration()) {}
  // A transport's state with its I/O threads started.
  static Impl* Start(const TransportOptions& options);

  void Submit(Transfer* t);
  // Called by a loop when an attempt ended: `failure` empty means the response is final.
  void AttemptEnded(Transfer* t, const std::string& failure, bool retryable, bool timed_out);
  // Moves retries whose time has come into their host's queue; returns the time until the next.
  std::optional<Clock::duration> PromoteDueRetries();
  void Shutdown();

  // Starts queued transfers while the limits allow; loops to wake are appended to `wake`.
  void DispatchLocked(std::vector<IoLoop*>* wake);
  void ReleaseLocked(Transfer* t);

  const TransportOptions options;
  const uint64_t fork_generation;  // the process the I/O threads run in
  std::vector<std::unique_ptr<IoLoop>> loops;

  std::mutex mutex;
  std::map<std::string, HostState, std::less<>> hosts;
  std::vector<std::string> hosts_with_pending;  // round-robin order of hosts with queued work
  size_t next_host = 0;
  std::vector<Transfer*> retry_heap;
  size_t in_flight = 0;
  bool stopping = false;
};

namespace {

void Resolve(Transfer* t, Result<HttpResponse> result) {
  Promise<HttpResponse> promise = std::move(t->promise);
  delete t;
  promise.Set(std::move(result));
}

Status FailureStatus(const Transfer& t, std::string_view what) {
  std::string message = t.request.method;
  message += ' ';
  message += t.request.display_url;
  message += ": ";
  message += what;
  return StorageError(std::move(message));
}

// One I/O thread with its libcurl multi handle.
struct IoLoop {
  IoLoop(CurlTransport::Impl* transport, const TransportOptions& options)
      : impl(transport), max_idle_easies(options.max_in_flight) {
    multi = curl_multi_init();
    // Keep enough idle connections that a burst's connections are all reused by the next burst.
    curl_multi_setopt(multi, CURLMOPT_MAXCONNECTS, static_cast<long>(options.max_in_flight));
    thread = std::thread([this] { Run(); });
  }
  ~IoLoop() {
    for (CURL* easy : idle_easies) curl_easy_cleanup(easy);
    curl_multi_cleanup(multi);
  }

  void Enqueue(Transfer* t) {
    std::lock_guard<std::mutex> lock(mutex);
    inbox.push_back(t);
  }
  void Wake() { curl_multi_wakeup(multi); }
  void Stop() {
    {
      std::lock_guard<std::mutex> lock(mutex);
      stop = true;
    }
    Wake();
    thread.join();
  }

  void Run();
  // An easy handle with the options every attempt shares, from the pool or new.
  CURL* TakeEasyHandle();
  void StartAttempt(Transfer* t);
  void EndAttempt(Transfer* t, CURLcode code);
  void CleanupAttempt(Transfer* t);

  static size_t OnHeader(char* data, size_t size, size_t count, void* user);
  static size_t OnBody(char* data, size_t size, size_t count, void* user);
  static size_t OnUpload(char* data, size_t size, size_t count, void* user);

  CurlTransport::Impl* impl;
  CURLM* multi = nullptr;
  std::thread thread;
  std::mutex mutex;
  std::vector<Transfer*> inbox;
  bool stop = false;
  std::atomic<size_t> active{0};
  std::vector<Transfer*> running;  // owned by the loop thread
  // Easy handles of ended attempts, reused by later ones (owned by the loop thread).
  const size_t max_idle_easies;
  std::vector<CURL*> idle_easies;
  std::string idle_easies_ca;  // ZARRSTREAM_CA_BUNDLE when they were made
};

size_t IoLoop::OnHeader(char* data, size_t size, size_t count, void* user) {
  auto* t = static_cast<Transfer*>(user);
  ApplyHeaderLine(std::string_view(data, size * count), static_cast<int64_t>(std::time(nullptr)),
                  &t->response, &t->framing, &t->retry_after);
  return size * count;
}

size_t IoLoop::OnBody(char* data, size_t size, size_t count, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const size_t n = size * count;
  // An exception must not cross libcurl's C frames (it would terminate the process): a body
  // whose memory cannot be had ends the attempt (returning less than n aborts the transfer).
  try {
    if (t->body_out == nullptr) {
      long status = 0;
      curl_easy_getinfo(t->easy, CURLINFO_RESPONSE_CODE, &status);
      const bool success = status >= 200 && status < 300;
      t->body_out =
          (success && t->request.body_sink != nullptr) ? t->request.body_sink : &t->response.body;
      t->body_out->Clear();
      // The announced length is the server's word, not bytes received: reserve no more than
      // kMaxBodyReserve up front, and grow with what arrives beyond that.
      if (t->framing.content_length) {
        t->body_out->ReserveReusable(
            std::min<uint64_t>(*t->framing.content_length, kMaxBodyReserve));
      }
    }
    ByteBuffer& out = *t->body_out;
    const size_t old = out.size();
    if (old + n > out.capacity()) out.ReserveReusable(std::max(old + n, out.capacity() * 2));
    out.Resize(old + n);
    std::memcpy(out.data() + old, data, n);
  } catch (const std::bad_alloc&) {
    const size_t held = t->body_out != nullptr ? t->body_out->size() : 0;
    t->body_failure = "out of memory holding the response body (" + std::to_string(held + n) +
                      " bytes received" +
                      (t->framing.content_length
                           ? ", " + std::to_string(*t->framing.content_length) + " announced)"
                           : ")");
    return 0;
  }
  return n;
}

size_t IoLoop::OnUpload(char* data, size_t size, size_t count, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const size_t n = std::min(size * count, t->request.body.size() - t->upload_offset);
  std::memcpy(data, t->request.body.data() + t->upload_offset, n);
  t->upload_offset += n;
  return n;
}

CURL* IoLoop::TakeEasyHandle() {
  // Handles are configured once with the CA bundle of the time; a new one empties the pool.
  const char* ca_env = std::getenv("ZARRSTREAM_CA_BUNDLE");
  const std::string ca = ca_env != nullptr ? ca_env : "";
  if (ca != idle_easies_ca) {
    for (CURL* easy : idle_easies) curl_easy_cleanup(easy);
    idle_easies.clear();
    idle_easies_ca = ca;
  }
  if (!idle_easies.empty()) {
    // An earlier attempt's handle, not reset: its receive buffer stays allocated (and touched).
    CURL* easy = idle_easies.back();
    idle_easies.pop_back();
    return easy;
  }
  CURL* easy = curl_easy_init();
  curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(easy, CURLOPT_HEADERFUNCTION, &IoLoop::OnHeader);
  curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, &IoLoop::OnBody);
  curl_easy_setopt(easy, CURLOPT_READFUNCTION, &IoLoop::OnUpload);
  curl_easy_setopt(easy, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(easy, CURLOPT_TCP_NODELAY, 1L);
  curl_easy_setopt(easy, CURLOPT_TCP_KEEPALIVE, 1L);
  // Bodies are whole chunks (often MBs): a 64 KiB receive buffer takes them in fewer socket reads
  // and callbacks than libcurl's 16 KiB. Larger ones measured worse: libcurl allocates the buffer
  // for each transfer, and above malloc's mmap threshold (128 KiB) that means fresh pages, i.e.
  // page faults, every time.
  curl_easy_setopt(easy, CURLOPT_BUFFERSIZE, 64L * 1024);
  // No CURLOPT_ACCEPT_ENCODING: responses are compressed chunks, and asking servers for gzip would
  // only waste their CPU.
  curl_easy_setopt(easy, CURLOPT_LOW_SPEED_LIMIT, 1L);
  if (!ca.empty()) curl_easy_setopt(easy, CURLOPT_CAINFO, ca.c_str());
  return easy;
}

void IoLoop::StartAttempt(Transfer* t) {
  const Clock::time_point now = Clock::now();
  const bool is_retry = t->attempts > 0;
  if (!is_retry) t->started = now;
  ++t->attempts;
  t->attempt_started = now;
  t->upload_offset = 0;
  t->body_out = nullptr;
  t->framing = BodyFraming();
  t->body_failure.clear();
  t->retry_after.reset();
  t->response = HttpResponse();
  t->error_buffer[0] = '\0';
  if (t->request.metrics) t->request.metrics->AddRequest(is_retry);

  std::vector<std::string> extra;
  if (t->request.sign) {
    Result<std::vector<std::string>> signed_headers = t->request.sign(t->request);
    if (!signed_headers.ok()) {
      impl->AttemptEnded(t, "signing the request: " + signed_headers.status().message(), false,
                         false);
      return;
    }
    extra = std::move(signed_headers).value();
  }
  CURL* easy = TakeEasyHandle();
  t->easy = easy;
  for (const std::string& h : t->request.headers) {
    t->header_list = curl_slist_append(t->header_list, h.c_str());
  }
  for (const std::string& h : extra) t->header_list = curl_slist_append(t->header_list, h.c_str());
  // No "Expect: 100-continue" round trip before a PUT body.
  t->header_list = curl_slist_append(t->header_list, "Expect:");

  // Every option an earlier attempt on this handle may have set is set again here.
  curl_easy_setopt(easy, CURLOPT_URL, t->request.url.c_str());
  curl_easy_setopt(easy, CURLOPT_PRIVATE, t);
  curl_easy_setopt(easy, CURLOPT_HTTPHEADER, t->header_list);
  curl_easy_setopt(easy, CURLOPT_ERRORBUFFER, t->error_buffer);
  curl_easy_setopt(easy, CURLOPT_HEADERDATA, t);
  curl_easy_setopt(easy, CURLOPT_WRITEDATA, t);
  curl_easy_setopt(easy, CURLOPT_READDATA, t);
  curl_easy_setopt(easy, CURLOPT_CONNECTTIMEOUT_MS,
                   static_cast<long>(t->request.policy.connect_timeout.count()));
  curl_easy_setopt(easy, CURLOPT_LOW_SPEED_TIME,
                   static_cast<long>(t->request.policy.stall_timeout.count()));
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(t->deadline() - now);
  curl_easy_setopt(easy, CURLOPT_TIMEOUT_MS, static_cast<long>(std::max<int64_t>(1, left.count())));
  // HTTPGET also clears NOBODY and UPLOAD.
  curl_easy_setopt(easy, CURLOPT_HTTPGET, 1L);
  curl_easy_setopt(easy, CURLOPT_CUSTOMREQUEST, nullptr);
  curl_easy_setopt(easy, CURLOPT_FRESH_CONNECT, t->fresh_connection ? 1L : 0L);
  t->fresh_connection = false;
  const std::string& method = t->request.method;
  if (method == "HEAD") {
    curl_easy_setopt(easy, CURLOPT_NOBODY, 1L);
  } else if (method == "PUT") {
    curl_easy_setopt(easy, CURLOPT_UPLOAD, 1L);
    curl_easy_setopt(easy, CURLOPT_INFILESIZE_LARGE,
                     static_cast<curl_off_t>(t->request.body.size()));
  } else if (method != "GET") {
    curl_easy_setopt(easy, CURLOPT_CUSTOMREQUEST, method.c_str());
  }
  curl_multi_add_handle(multi, easy);
  running.push_back(t);
}

void IoLoop::CleanupAttempt(Transfer* t) {
  if (t->easy != nullptr) {
    curl_multi_remove_handle(multi, t->easy);
    if (idle_easies.size() < max_idle_easies) {
      idle_easies.push_back(t->easy);
    } else {
      curl_easy_cleanup(t->easy);
    }
    t->easy = nullptr;
  }
  curl_slist_free_all(t->header_list);
  t->header_list = nullptr;
  running.erase(std::find(running.begin(), running.end(), t));
}

void IoLoop::EndAttempt(Transfer* t, CURLcode code) {
  long status = 0;
  curl_easy_getinfo(t->easy, CURLINFO_RESPONSE_CODE, &status);
  long new_connections = 0;
  curl_easy_getinfo(t->easy, CURLINFO_NUM_CONNECTS, &new_connections);
  long http_version = 0;
  curl_easy_getinfo(t->easy, CURLINFO_HTTP_VERSION, &http_version);
  const auto latency =
      std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - t->attempt_started);
  const uint64_t received = t->body_out != nullptr ? t->body_out->size() : 0;
  if (StoreMetrics* m = t->request.metrics.get()) {
    m->AddLatency(static_cast<uint64_t>(latency.count()));
    m->AddBytesReceived(received);
    if (code == CURLE_OK) m->AddBytesSent(t->request.body.size());
  }
  t->response.status = status;
  t->response.body_size = received;
  t->response.attempts = t->attempts;
  std::string failure;
  bool retryable = false;
  if (!t->body_failure.empty()) {
    failure = t->body_failure;
  } else if (code != CURLE_OK) {
    failure = curl_easy_strerror(code);
    if (t->error_buffer[0] != '\0') {
      failure += " (";
      failure += t->error_buffer;
      failure += ")";
    }
    retryable = IsRetryableCurlCode(code);
    // What came back on a reused connection was no response: the bytes a previous response left
    // behind (a server that sent more than its Content-Length). A new connection starts clean.
    if (new_connections == 0 &&
        (code == CURLE_WEIRD_SERVER_REPLY || code == CURLE_UNSUPPORTED_PROTOCOL)) {
      retryable = true;
      t->fresh_connection = true;
    }
  } else if (IsRetryableStatus(status)) {
    failure = "HTTP " + std::to_string(status);
    retryable = true;
  } else if (status >= 200 && status < 300 && t->request.method != "HEAD") {
    if (std::optional<FramingFailure> framing =
            CheckBodyFraming(t->request.method, t->response, t->framing, received,
                             /*http1=*/http_version == CURL_HTTP_VERSION_1_0 ||
                                 http_version == CURL_HTTP_VERSION_1_1)) {
      failure = std::move(framing->message);
      retryable = true;
      if (framing->connection_suspect) t->fresh_connection = true;
    } else if (t->request.check_response) {
      failure = t->request.check_response(t->response);
      if (!failure.empty()) {
        retryable = true;
        t->fresh_connection = true;
      }
    }
  }
  CleanupAttempt(t);
  if (!failure.empty() && t->request.metrics) t->request.metrics->AddFailure();
  impl->AttemptEnded(t, failure, retryable, code == CURLE_OPERATION_TIMEDOUT);
}

void IoLoop::Run() {
  for (;;) {
    std::vector<Transfer*> arrived;
    {
      std::lock_guard<std::mutex> lock(mutex);
      if (stop) break;
      arrived.swap(inbox);
    }
    for (Transfer* t : arrived) StartAttempt(t);
    int still_running = 0;
    curl_multi_perform(multi, &still_running);
    int queued = 0;
    while (CURLMsg* msg = curl_multi_info_read(multi, &queued)) {
      if (msg->msg != CURLMSG_DONE) continue;
      Transfer* t = nullptr;
      curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, &t);
      EndAttempt(t, msg->data.result);
    }
    long timeout_ms = 1000;
    curl_multi_timeout(multi, &timeout_ms);
    if (timeout_ms < 0 || timeout_ms > 1000) timeout_ms = 1000;
    if (std::optional<Clock::duration> next = impl->PromoteDueRetries()) {
      const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(*next).count() + 1;
      timeout_ms = std::min<long>(timeout_ms, static_cast<long>(ms));
    }
    curl_multi_poll(multi, nullptr, 0, static_cast<int>(timeout_ms), nullptr);
  }
  // Shutting down: fail what is still running here.
  while (!running.empty()) {
    Transfer* t = running.back();
    CleanupAttempt(t);
    active.fetch_sub(1);
    Resolve(t, FailureStatus(*t, "the HTTP transport was shut down"));
  }
  std::lock_guard<std::mutex> lock(mutex);
  for (Transfer* t : inbox) Resolve(t, FailureStatus(*t, "the HTTP transport was shut down"));
  inbox.clear();
}

}  // namespace

void CurlTransport::Impl::Submit(Transfer* t) {
  std::vector<IoLoop*> wake;
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (stopping) {
      Resolve(t, FailureStatus(*t, "the HTTP transport was shut down"));
      return;
    }
    HostState& host = hosts[t->host_key];
    if (host.pending.empty()) hosts_with_pending.push_back(t->host_key);
    host.pending.push_back(t);
    DispatchLocked(&wake);
  }
  for (IoLoop* loop : wake) loop->Wake();
}

void CurlTransport::Impl::DispatchLocked(std::vector<IoLoop*>* wake) {
  if (stopping) return;  // Shutdown fails what is still queued
  // Round-robin over the hosts with queued work, one request at a time, so a host at its limit
  // never holds back the others.
  size_t blocked = 0;
  while (in_flight < options.max_in_flight && !hosts_with_pending.empty() &&
         blocked < hosts_with_pending.size()) {
    if (next_host >= hosts_with_pending.size()) next_host = 0;
    auto it = hosts.find(hosts_with_pending[next_host]);
    HostState& host = it->second;
    if (host.in_flight >= options.max_in_flight_per_host) {
      ++blocked;
      ++next_host;
      continue;
    }
    blocked = 0;
    Transfer* t = host.pending.front();
    host.pending.pop_front();
    if (host.pending.empty()) {
      hosts_with_pending.erase(hosts_with_pending.begin() + static_cast<ptrdiff_t>(next_host));
    } else {
      ++next_host;
    }
    ++host.in_flight;
    ++in_flight;
    IoLoop* loop = loops.front().get();
    for (const auto& l : loops) {
      if (l->active.load() < loop->active.load()) loop = l.get();
    }
    loop->active.fetch_add(1);
    t->loop = loop;
    loop->Enqueue(t);
    if (std::find(wake->begin(), wake->end(), loop) == wake->end()) wake->push_back(loop);
  }
}

void CurlTransport::Impl::ReleaseLocked(Transfer* t) {
  HostState& host = hosts[t->host_key];
  --host.in_flight;
  --in_flight;
  t->loop->active.fetch_sub(1);
}

void CurlTransport::Impl::AttemptEnded(Transfer* t, const std::string& failure, bool retryable,
                                       bool timed_out) {
  std::vector<IoLoop*> wake;
  std::optional<Status> error;
  {
    std::lock_guard<std::mutex> lock(mutex);
    ReleaseLocked(t);
    HostState& host = hosts[t->host_key];
    if (failure.empty()) {
      host.retry_quota.Earn();
    } else if (!retryable) {
      error = FailureStatus(*t, failure);
    } else {
      const Clock::time_point now = Clock::now();
      std::chrono::milliseconds wait = RetryBackoff(t->request.policy, t->attempts, UniformUnit());
      if (t->retry_after && *t->retry_after > wait) wait = *t->retry_after;
      std::string gave_up;
      if (t->attempts >= t->request.policy.max_attempts) {
        gave_up = "gave up after " + std::to_string(t->attempts) + " attempts in " +
                  FormatSeconds(now - t->started);
      } else if (now + wait >= t->deadline()) {
        gave_up = "gave up after " + std::to_string(t->attempts) + " attempts in " +
                  FormatSeconds(now - t->started) + ": the next retry (in " + FormatSeconds(wait) +
                  ") would pass the retry budget of " + FormatSeconds(t->request.policy.budget);
      } else if (!host.retry_quota.TrySpend(timed_out)) {
        gave_up = "not retried: " + t->host_key +
                  " failed far more attempts than it answered lately (its retry quota is spent)";
      }
      if (!gave_up.empty()) {
        error = FailureStatus(*t, failure + "; " + gave_up);
      } else {
        t->retry_at = now + wait;
        retry_heap.push_back(t);
        std::push_heap(retry_heap.begin(), retry_heap.end(), LaterRetry());
      }
    }
    DispatchLocked(&wake);
  }
  for (IoLoop* loop : wake) loop->Wake();
  if (error) {
    Resolve(t, *std::move(error));
  } else if (failure.empty()) {
    HttpResponse response = std::move(t->response);
    Resolve(t, std::move(response));
  }
}

std::optional<Clock::duration> CurlTransport::Impl::PromoteDueRetries() {
  std::vector<IoLoop*> wake;
  std::optional<Clock::duration> next;
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (retry_heap.empty()) return std::nullopt;
    const Clock::time_point now = Clock::now();
    bool promoted = false;
    while (!retry_heap.empty() && retry_heap.front()->retry_at <= now) {
      std::pop_heap(retry_heap.begin(), retry_heap.end(), LaterRetry());
      Transfer* t = retry_heap.back();
      retry_heap.pop_back();
      HostState& host = hosts[t->host_key];
      if (host.pending.empty()) hosts_with_pending.push_back(t->host_key);
      // A retry goes to the front: it has waited already.
      host.pending.push_front(t);
      promoted = true;
    }
    if (promoted) DispatchLocked(&wake);
    if (!retry_heap.empty()) next = retry_heap.front()->retry_at - now;
  }
  for (IoLoop* loop : wake) loop->Wake();
  return next;
}

void CurlTransport::Impl::Shutdown() {
  {
    std::lock_guard<std::mutex> lock(mutex);
    stopping = true;
  }
  for (auto& loop : loops) loop->Stop();
  std::vector<Transfer*> left;
  {
    std::lock_guard<std::mutex> lock(mutex);
    for (auto& [key, host] : hosts) {
      left.insert(left.end(), host.pending.begin(), host.pending.end());
      host.pending.clear();
    }
    left.insert(left.end(), retry_heap.begin(), retry_heap.end());
    retry_heap.clear();
  }
  for (Transfer* t : left) Resolve(t, FailureStatus(*t, "the HTTP transport was shut down"));
}

CurlTransport::Impl* CurlTransport::Impl::Start(const TransportOptions& options) {
  auto impl = std::make_unique<Impl>(options);
  for (size_t i = 0; i < options.io_threads; ++i) {
    impl->loops.push_back(std::make_unique<IoLoop>(impl.get(), options));
  }
  return impl.release();
}

CurlTransport::CurlTransport(const TransportOptions& options)
    : options_(options), impl_(Impl::Start(options)) {}

CurlTransport::~CurlTransport() {
  Impl* impl = impl_.load(std::memory_order_acquire);
  // Inherited through fork() and never used here: its threads are gone, and its connections are
  // the parent's.
  if (impl->fork_generation != ForkGeneration()) return;
  impl->Shutdown();
  delete impl;
}

CurlTransport::Impl& CurlTransport::ForThisProcess() {
  Impl* impl = impl_.load(std::memory_order_acquire);
  if (impl->fork_generation == ForkGeneration()) return *impl;
  static ForkSafeMutex restart_mutex;
  std::lock_guard<ForkSafeMutex> lock(restart_mutex);
  impl = impl_.load(std::memory_order_acquire);
  if (impl->fork_generation != ForkGeneration()) {
    // The parent's state is never freed or shut down: threads that are gone may hold its locks,
    // and closing its connections (a TLS close) would write to sockets the parent still uses.
    impl = Impl::Start(options_);
    impl_.store(impl, std::memory_order_release);
  }
  return *impl;
}

Result<std::shared_ptr<CurlTransport>> CurlTransport::Create(const TransportOptions& options) {
  if (options.io_threads == 0 || options.max_in_flight == 0 ||
      options.max_in_flight_per_host == 0) {
    return ConfigError(
        "HTTP transport: io_threads, max_in_flight and max_in_flight_per_host "
        "must be at least 1");
  }
  static const CURLcode global_init = curl_global_init(CURL_GLOBAL_DEFAULT);
  if (global_init != CURLE_OK) {
    return InternalError(std::string("initialising libcurl: ") + curl_easy_strerror(global_init));
  }
  return std::shared_ptr<CurlTransport>(new CurlTransport(options));
}

Result<std::shared_ptr<CurlTransport>> CurlTransport::Shared() {
  static ForkSafeMutex mutex;
  static std::weak_ptr<CurlTransport> shared;
  std::lock_guard<ForkSafeMutex> lock(mutex);
  if (std::shared_ptr<CurlTransport> transport = shared.lock()) return transport;
  ZS_ASSIGN_OR_RETURN(TransportOptions options, TransportOptions::FromEnvironment());
  ZS_ASSIGN_OR_RETURN(std::shared_ptr<CurlTransport> transport, Create(options));
  shared = transport;
  return transport;
}

Future<HttpResponse> CurlTransport::Send(HttpRequest request) {
  auto* t = new Transfer;
  t->request = std::move(request);
  t->host_key = HostKeyOf(t->request.url);
  if (t->request.display_url.empty()) t->request.display_url = RedactUrl(t->request.url);
  Future<HttpResponse> future = t->promise.future();
  ForThisProcess().Submit(t);
  return future;
}

}  // namespace zarrstream

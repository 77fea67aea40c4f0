// HttpStore: a read-only store over a static HTTP(S) server (nginx, a CDN, a bucket's public
// website): "<root URL>/<key>" for every key.
//
// Reads are GETs with a Range header, one per range after merging nearby ranges of the key
// (CoalesceRanges with HttpStoreOptions::coalescing; servers need not support multi-range
// requests). A 404 is kNotFound, so a missing chunk reads as the fill value; 401/403 are kStorage
// errors that say the server refused access and name the URL (never credentials, even when the root
// URL carries user:password for basic auth). Listing is kUnsupported (HTTP has no listing; open
// groups with consolidated metadata); Put and Delete are kUnsupported.
//
// The S3 and GCS stores derive from it: they only say how a key becomes a request (URL, signature)
// and what an error response means.
//
// Threads: all methods may be called concurrently from any thread. Read's future resolves on one of
// the transport's I/O threads.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "store/curl_transport.h"
#include "store/range_coalescing.h"
#include "store/store.h"
#include "store/store_metrics.h"

namespace zarrstream {

struct HttpStoreOptions {
  RequestPolicy policy;
  // At ~20 ms per request and ~100 MB/s per connection, reading a gap of 1 MiB costs less than the
  // round trip of another request; past 32 MiB a read is better split so the pieces run in
  // parallel.
  CoalescingOptions coalescing{uint64_t{1} << 20, uint64_t{32} << 20};

  // RequestPolicy::FromEnvironment() and ZARRSTREAM_HTTP_COALESCE_GAP_BYTES /
  // ZARRSTREAM_HTTP_COALESCE_MAX_BYTES over the defaults.
  static Result<HttpStoreOptions> FromEnvironment();
};

class HttpStore : public Store {
 public:
  // Opens the store rooted at `url` (http:// or https://, optionally with user:password@; no query
  // or fragment). Nothing is requested until the first read.
  static Result<std::shared_ptr<HttpStore>> Open(std::string_view url,
                                                 std::shared_ptr<CurlTransport> transport,
                                                 const HttpStoreOptions& options);

  const std::string& url() const override { return url_; }
  Future<uint64_t> Read(std::string_view key, std::span<const ByteRange> ranges,
                        std::span<ByteBuffer> outs) override;
  Result<std::vector<KeyInfo>> List(std::string_view prefix) override;
  Result<DirectoryListing> ListDirectory(std::string_view prefix) override;
  Status Put(std::string_view key, std::span<const std::byte> value) override;
  Status Delete(std::string_view key) override;

  // Counters of this store's requests (see store_metrics.h). Valid as long as the store.
  const StoreMetrics& metrics() const { return *metrics_; }
  const HttpStoreOptions& options() const { return options_; }

 protected:
  // `display_url` names the store in messages; `base_url` is what keys are appended to by the
  // default MakeRequest.
  HttpStore(std::string display_url, std::string base_url, std::shared_ptr<CurlTransport> transport,
            const HttpStoreOptions& options);

  // A request of `method` for `key` ("" for the store root's container, e.g. an S3 bucket
  // listing), with `query` (already encoded, "" for none) appended. Sets url, display_url,
  // headers (authorisation), policy and metrics.
  virtual HttpRequest MakeRequest(std::string_view method, std::string_view key,
                                  std::string_view query) const;
  // The error for a final response that is not a success, 404 or 416.
  virtual Status ErrorForResponse(const HttpRequest& request, const HttpResponse& response) const;

  // Sends `request` and blocks for the response.
  Result<HttpResponse> SendAndWait(HttpRequest request) const;
  // "<url>/<key>": how messages name a key.
  std::string KeyUrl(std::string_view key) const;

  std::shared_ptr<CurlTransport> transport_;

 private:
  std::string url_;       // for messages: no credentials
  std::string base_url_;  // for requests: may carry user:password; no trailing '/'
  HttpStoreOptions options_;
  std::shared_ptr<StoreMetrics> metrics_;
};

// The metrics of `store` when it is an HTTP, S3 or GCS store; null for local stores. For the
// loader's stats.
const StoreMetrics* MetricsOf(const Store& store);

// True for stores whose reads complete on I/O threads after a network round trip (http, s3, gcs,
// reference sets with such targets, Icechunk repositories read so): callers should issue many reads
// before waiting on any. Local stores complete reads inline, where issuing them from one thread
// first would only serialise them.
bool IsRemoteStore(const Store& store);

}  // namespace zarrstream

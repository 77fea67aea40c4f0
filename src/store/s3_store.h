// S3Store: the store for s3:// (AWS S3 and S3-compatible servers: MinIO, SeaweedFS, Ceph) and gs://
// (Google Cloud Storage through its S3-compatible XML API).
//
// s3://bucket/prefix
//   Endpoint: AWS_ENDPOINT_URL_S3, else AWS_ENDPOINT_URL, else https://s3.<region>.amazonaws.com.
//   Region: AWS_REGION, else AWS_DEFAULT_REGION, else us-east-1.
//   Credentials: AWS_ACCESS_KEY_ID + AWS_SECRET_ACCESS_KEY (+ AWS_SESSION_TOKEN for temporary
//   ones), requests signed with SigV4; none set, or AWS_NO_SIGN_REQUEST=YES: anonymous (unsigned)
//   requests, for public buckets. (~/.aws files and instance roles are not read.)
//   Addressing: virtual-hosted (https://bucket.s3.<region>.amazonaws.com/key) on AWS's own
//   endpoint, path-style (<endpoint>/bucket/key) on custom endpoints, as those servers expect;
//   ZARRSTREAM_S3_ADDRESSING_STYLE=path|virtual overrides. Bucket names that are not valid host
//   labels always use path-style.
// gs://bucket/prefix
//   Endpoint: https://storage.googleapis.com (STORAGE_EMULATOR_HOST overrides, as Google's own
//   clients allow), path-style.
//   Credentials, first found: HMAC keys GS_ACCESS_KEY_ID + GS_SECRET_ACCESS_KEY (SigV4, region
//   "auto"); an OAuth 2 access token in GOOGLE_OAUTH_ACCESS_TOKEN (sent as a bearer token);
//   otherwise anonymous, for public buckets (WeatherBench2, ARCO ERA5).
//
// Keys: "<prefix>/<key>" in the bucket. List uses ListObjectsV2 (paginated; ListDirectory with
// delimiter '/'); Put is a single PUT (S3 makes it visible atomically); Delete a DELETE (S3 answers
// 204 for missing keys too). Reads are the HttpStore's (ranged GETs, coalesced, retried).
// Errors name the s3:// or gs:// URL of the key and, for 401/403, say it is an authorisation
// problem and which variables supplied the credentials — never the secrets themselves.
//
// Threads: as HttpStore.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "store/http_store.h"
#include "store/sigv4.h"

namespace zarrstream {

// Looks up an environment variable (tests pass their own).
using EnvironmentLookup = std::function<std::optional<std::string>(std::string_view name)>;
// The process environment.
std::optional<std::string> ProcessEnvironment(std::string_view name);

struct S3Location {
  enum class Addressing { kPath, kVirtualHosted };
  std::string scheme;  // "s3" or "gs"
  std::string bucket;
  std::string prefix;    // key prefix inside the bucket, no leading or trailing '/'
  std::string endpoint;  // "https://host[:port]" (no trailing '/')
  std::string region;
  Addressing addressing = Addressing::kPath;
  AwsCredentials credentials;     // empty access key: unsigned
  std::string bearer_token;       // GCS OAuth 2 token; empty: none
  std::string credential_source;  // which variables gave the credentials ("anonymous" if none)
  // Keys per ListObjectsV2 page (max-keys): ZARRSTREAM_S3_LIST_PAGE_SIZE, default 1000 (S3's
  // maximum).
  uint32_t list_page_size = 1000;
};

// Parses an s3:// or gs:// URL and resolves endpoint, region, addressing and credentials from
// `env`.
Result<S3Location> ResolveS3Location(std::string_view url, const EnvironmentLookup& env);

// One page of a ListObjectsV2 response.
struct ListObjectsPage {
  std::vector<KeyInfo> objects;             // full keys in the bucket
  std::vector<std::string> prefixes;        // common prefixes, as returned (with the trailing '/')
  std::optional<std::string> continuation;  // NextContinuationToken when truncated
};
Result<ListObjectsPage> ParseListObjectsV2(std::string_view xml);

class S3Store final : public HttpStore {
 public:
  static Result<std::shared_ptr<S3Store>> Open(const S3Location& location,
                                               std::shared_ptr<CurlTransport> transport,
                                               const HttpStoreOptions& options);

  Result<std::vector<KeyInfo>> List(std::string_view prefix) override;
  Result<DirectoryListing> ListDirectory(std::string_view prefix) override;
  Status Put(std::string_view key, std::span<const std::byte> value) override;
  Status Delete(std::string_view key) override;

  const S3Location& location() const { return location_; }

 protected:
  HttpRequest MakeRequest(std::string_view method, std::string_view key,
                          std::string_view query) const override;
  Status ErrorForResponse(const HttpRequest& request, const HttpResponse& response) const override;

 private:
  S3Store(S3Location location, std::shared_ptr<CurlTransport> transport,
          const HttpStoreOptions& options);
  // Every page of ListObjectsV2 under `object_prefix` (a prefix inside the bucket).
  Status ListPages(const std::string& object_prefix, bool delimited, ListObjectsPage* all);

  S3Location location_;
  std::string host_;       // the Host header: bucket.host for virtual-hosted addressing
  std::string base_path_;  // "/bucket" (path-style) or "" (virtual-hosted)
};

// Registers the s3:// and gs:// schemes' factory in the store registry's form.
Result<std::shared_ptr<Store>> OpenS3StoreFromUrl(std::string_view url);

}  // namespace zarrstream

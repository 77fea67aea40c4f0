// The transport's pure parts, and its behaviour against an endpoint that refuses connections.
// Retries against misbehaving servers are tested with the fault-injecting proxy in
// tests/test_object_stores.py.
#include "store/curl_transport.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <random>

#include "store/http_store.h"
#include "util/fork_test_util.h"

namespace zarrstream {
namespace {

TEST(CurlTransportTest, HostKeysAndRedaction) {
  EXPECT_EQ(HostKeyOf("http://Example.com/a/b"), "http://example.com:80");
  EXPECT_EQ(HostKeyOf("https://user:pw@example.com:8443/x?y"), "https://example.com:8443");
  EXPECT_EQ(HostKeyOf("https://[::1]/x"), "https://[::1]:443");
  EXPECT_EQ(RedactUrl("https://user:secret@host:1/a?b"), "https://host:1/a?b");
  EXPECT_EQ(RedactUrl("http://host/a@b"), "http://host/a@b");
}

TEST(CurlTransportTest, UriEncodeKeepsUnreservedCharacters) {
  EXPECT_EQ(UriEncode("a/b c~d.e_f-g", true), "a/b%20c~d.e_f-g");
  EXPECT_EQ(UriEncode("a/b=c&d", false), "a%2Fb%3Dc%26d");
}

TEST(CurlTransportTest, RetryAfterSecondsAndDates) {
  EXPECT_EQ(ParseRetryAfter(" 3 ", 0), std::chrono::milliseconds(3000));
  // Sun, 06 Nov 1994 08:49:37 GMT is 784111777 seconds after the epoch.
  EXPECT_EQ(ParseRetryAfter("Sun, 06 Nov 1994 08:49:37 GMT", 784111770),
            std::chrono::milliseconds(7000));
  EXPECT_EQ(ParseRetryAfter("Sun, 06 Nov 1994 08:49:37 GMT", 784111800),
            std::chrono::milliseconds(0));
  EXPECT_FALSE(ParseRetryAfter("soon", 0).has_value());
  EXPECT_FALSE(ParseRetryAfter("", 0).has_value());
}

TEST(CurlTransportTest, BackoffGrowsExponentiallyWithJitterAndIsCapped) {
  RequestPolicy p;
  p.initial_backoff = std::chrono::milliseconds(100);
  p.max_backoff = std::chrono::milliseconds(1000);
  EXPECT_EQ(RetryBackoff(p, 1, 0.0), std::chrono::milliseconds(50));
  EXPECT_EQ(RetryBackoff(p, 1, 0.999), std::chrono::milliseconds(99));
  EXPECT_EQ(RetryBackoff(p, 3, 0.0), std::chrono::milliseconds(200));
  EXPECT_EQ(RetryBackoff(p, 30, 0.0), std::chrono::milliseconds(500));
  EXPECT_LE(RetryBackoff(p, 30, 0.999), std::chrono::milliseconds(1000));
}

TEST(CurlTransportTest, EnvironmentOverridesAreValidated) {
  ::setenv("ZARRSTREAM_HTTP_MAX_IN_FLIGHT", "12", 1);
  ::setenv("ZARRSTREAM_HTTP_MAX_ATTEMPTS", "many", 1);
  auto options = TransportOptions::FromEnvironment();
  auto policy = RequestPolicy::FromEnvironment();
  ::unsetenv("ZARRSTREAM_HTTP_MAX_IN_FLIGHT");
  ::unsetenv("ZARRSTREAM_HTTP_MAX_ATTEMPTS");
  ASSERT_TRUE(options.ok());
  EXPECT_EQ(options->max_in_flight, 12u);
  ASSERT_FALSE(policy.ok());
  EXPECT_EQ(policy.status().code(), ErrorCode::kConfig);
  EXPECT_NE(policy.status().message().find("ZARRSTREAM_HTTP_MAX_ATTEMPTS"), std::string::npos);
}

TEST(RetryQuotaTest, RunsOutOnlyWhenFailuresOutnumberSuccesses) {
  RetryQuota dead;
  for (int i = 0; i < RetryQuota::kRetries; ++i) ASSERT_TRUE(dead.TrySpend(false)) << i;
  EXPECT_FALSE(dead.TrySpend(false));
  EXPECT_EQ(dead.retries_left(), 0);
  dead.Earn();  // the host answered again
  EXPECT_TRUE(dead.TrySpend(false));
  EXPECT_FALSE(dead.TrySpend(false));

  RetryQuota timeouts;  // each timed-out attempt counts twice
  for (int i = 0; i < RetryQuota::kRetries / 2; ++i) ASSERT_TRUE(timeouts.TrySpend(true)) << i;
  EXPECT_FALSE(timeouts.TrySpend(true));

  // Half of the attempts failing, for ever, in bursts as long as the quota and a success after
  // each: never refused.
  RetryQuota half;
  for (int round = 0; round < 10000; ++round) {
    for (int i = 0; i < RetryQuota::kRetries; ++i) ASSERT_TRUE(half.TrySpend(false)) << round;
    for (int i = 0; i < RetryQuota::kRetries; ++i) half.Earn();
  }
  // 40 % of the attempts failing at random: never refused either, over a million attempts.
  RetryQuota forty;
  std::mt19937 rng(7);
  for (int i = 0; i < 1000000; ++i) {
    if (rng() % 100 < 40) {
      ASSERT_TRUE(forty.TrySpend(false)) << i;
    } else {
      forty.Earn();
    }
  }
  EXPECT_GT(forty.retries_left(), RetryQuota::kRetries / 2);  // near full: successes dominate
}

// A loopback port nothing listens on.
int ClosedPort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

TEST(CurlTransportTest, DeadEndpointFailsAfterItsAttemptsWithAClearError) {
  auto transport = CurlTransport::Create({});
  ASSERT_TRUE(transport.ok());
  HttpStoreOptions options;
  options.policy.max_attempts = 4;
  options.policy.initial_backoff = std::chrono::milliseconds(1);
  options.policy.max_backoff = std::chrono::milliseconds(5);
  const std::string url =
      "http://user:hunter2@127.0.0.1:" + std::to_string(ClosedPort()) + "/store";
  auto store = HttpStore::Open(url, *transport, options);
  ASSERT_TRUE(store.ok());
  EXPECT_EQ((*store)->url().find("hunter2"), std::string::npos);
  auto read = (*store)->ReadAll("zarr.json");
  ASSERT_FALSE(read.ok());
  EXPECT_EQ(read.status().code(), ErrorCode::kStorage);
  const std::string m = read.status().message();
  EXPECT_NE(m.find("/store/zarr.json"), std::string::npos) << m;
  EXPECT_NE(m.find("gave up after 4 attempts"), std::string::npos) << m;
  EXPECT_EQ(m.find("hunter2"), std::string::npos) << m;
  auto metrics = (*store)->metrics().Snapshot();
  EXPECT_EQ(metrics.requests, 4u);
  EXPECT_EQ(metrics.retries, 3u);
  EXPECT_EQ(metrics.failed_requests, 4u);
}

// A transport made before fork() sends the child's requests on I/O threads of the child's own
// (the parent's are gone there); the parent's transport works on.
TEST(CurlTransportTest, AForkedChildSendsOnIoThreadsOfItsOwn) {
  auto transport = CurlTransport::Create({});
  ASSERT_TRUE(transport.ok());
  HttpStoreOptions options;
  options.policy.max_attempts = 2;
  options.policy.initial_backoff = std::chrono::milliseconds(1);
  options.policy.max_backoff = std::chrono::milliseconds(1);
  auto store = HttpStore::Open("http://127.0.0.1:" + std::to_string(ClosedPort()) + "/store",
                               *transport, options);
  ASSERT_TRUE(store.ok());
  const auto gave_up = [&store] {
    Result<ByteBuffer> read = (*store)->ReadAll("zarr.json");
    return !read.ok() && read.status().code() == ErrorCode::kStorage &&
           read.status().message().find("gave up after 2 attempts") != std::string::npos;
  };
  ASSERT_TRUE(gave_up());  // the parent's I/O threads have run
  ExpectChildSucceeds([&] {
    if (!gave_up()) return 1;
    store->reset();
    transport->reset();  // joins the child's I/O threads only
    return 0;
  });
  EXPECT_TRUE(gave_up());
}

TEST(CurlTransportTest, RetryBudgetBoundsTheTimeSpent) {
  auto transport = CurlTransport::Create({});
  ASSERT_TRUE(transport.ok());
  HttpStoreOptions options;
  options.policy.max_attempts = 1000;
  options.policy.initial_backoff = std::chrono::milliseconds(50);
  options.policy.max_backoff = std::chrono::milliseconds(100);
  options.policy.budget = std::chrono::milliseconds(400);
  auto store =
      HttpStore::Open("http://127.0.0.1:" + std::to_string(ClosedPort()), *transport, options);
  ASSERT_TRUE(store.ok());
  auto read = (*store)->ReadAll("k");
  ASSERT_FALSE(read.ok());
  EXPECT_NE(read.status().message().find("retry budget"), std::string::npos)
      << read.status().message();
  EXPECT_LT((*store)->metrics().Snapshot().requests, 20u);
}

TEST(CurlTransportTest, ADeadEndpointSpendsTheHostsRetryQuotaAndEveryRequestFailsFast) {
  auto transport = CurlTransport::Create({});
  ASSERT_TRUE(transport.ok());
  HttpStoreOptions options;
  // Each request alone would retry for a minute.
  options.policy.max_attempts = 1000;
  options.policy.initial_backoff = std::chrono::milliseconds(1);
  options.policy.max_backoff = std::chrono::milliseconds(5);
  options.policy.budget = std::chrono::milliseconds(60000);
  auto store =
      HttpStore::Open("http://127.0.0.1:" + std::to_string(ClosedPort()), *transport, options);
  ASSERT_TRUE(store.ok());
  constexpr int kReads = 300;
  std::vector<ByteBuffer> outs(kReads);
  std::vector<ByteRange> ranges(kReads, ByteRange::Full());
  std::vector<std::string> keys(kReads);
  std::vector<Future<uint64_t>> reads;
  for (int i = 0; i < kReads; ++i) {
    keys[i] = "c/" + std::to_string(i);
    reads.push_back((*store)->Read(keys[i], std::span(&ranges[i], 1), std::span(&outs[i], 1)));
  }
  int refused = 0;
  for (auto& read : reads) {
    Result<uint64_t> result = read.Wait();
    ASSERT_FALSE(result.ok());
    EXPECT_EQ(result.status().code(), ErrorCode::kStorage);
    refused += result.status().message().find("retry quota is spent") != std::string::npos;
  }
  EXPECT_GT(refused, 0);
  // One attempt per request, and the quota's retries among them all.
  EXPECT_LE((*store)->metrics().Snapshot().requests, uint64_t{kReads + RetryQuota::kRetries});
}

TEST(HttpStoreTest, RejectsUrlsItCannotServeAndIsReadOnly) {
  auto transport = CurlTransport::Create({});
  ASSERT_TRUE(transport.ok());
  EXPECT_EQ(HttpStore::Open("http://host/x?token=secret", *transport, {}).status().code(),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(HttpStore::Open("http://host/x?token=secret", *transport, {})
                .status()
                .message()
                .find("secret"),
            std::string::npos);
  auto store = HttpStore::Open("https://host/data.zarr/", *transport, {});
  ASSERT_TRUE(store.ok());
  EXPECT_EQ((*store)->url(), "https://host/data.zarr");
  std::string value = "x";
  EXPECT_EQ((*store)->Put("k", std::as_bytes(std::span<const char>(value))).code(),
            ErrorCode::kUnsupported);
  EXPECT_EQ((*store)->Delete("k").code(), ErrorCode::kUnsupported);
  EXPECT_EQ((*store)->List("").status().code(), ErrorCode::kUnsupported);
  EXPECT_EQ((*store)->ListDirectory("").status().code(), ErrorCode::kUnsupported);
  ByteBuffer out;
  EXPECT_EQ((*store)->ReadInto("../x", ByteRange::Full(), &out).code(),
            ErrorCode::kInvalidArgument);
  EXPECT_NE(MetricsOf(**store), nullptr);
}

}  // namespace
}  // namespace zarrstream

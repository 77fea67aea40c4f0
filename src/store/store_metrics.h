// StoreMetrics: counters a remote store keeps about its requests, for the loader's stats and for
// tests that assert request counts.
//
// Every HTTP attempt counts: a read that needed two retries adds 3 to `requests` and 2 to
// `retries`. Latency is measured per attempt, from handing the request to libcurl until the last
// byte (or the failure), and binned into a log2 histogram of microseconds. Counters are atomics
// updated by the transport's I/O threads; Snapshot() reads them at any time from any thread (a
// snapshot taken while requests run may be mid-update across counters, never torn within one).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <string>

namespace zarrstream {

struct StoreMetricsSnapshot {
  // Bucket b counts attempts whose latency was in [2^b, 2^(b+1)) microseconds (bucket 0 also
  // holds anything under 2 µs; the last bucket everything from 2^(kLatencyBuckets-1) µs, ~9 min).
  static constexpr size_t kLatencyBuckets = 30;

  uint64_t requests = 0;         // HTTP attempts started (retries included)
  uint64_t failed_requests = 0;  // attempts that ended in a transport error or an error status
  uint64_t retries = 0;          // attempts that were retries of an earlier one
  uint64_t bytes_received = 0;   // response body bytes
  uint64_t bytes_sent = 0;       // request body bytes (Put)
  std::array<uint64_t, kLatencyBuckets> latency_us_log2{};

  // The latency below which `fraction` (0..1] of the attempts completed, in microseconds: the upper
  // edge of the histogram bucket holding that quantile; 0 when nothing was measured.
  uint64_t LatencyQuantileUs(double fraction) const;
  // "requests=… retries=… bytes_received=… p50=…ms p99=…ms", for logs.
  std::string ToString() const;
};

class StoreMetrics {
 public:
  void AddRequest(bool is_retry) {
    requests_.fetch_add(1, std::memory_order_relaxed);
    if (is_retry) retries_.fetch_add(1, std::memory_order_relaxed);
  }
  void AddFailure() { failed_requests_.fetch_add(1, std::memory_order_relaxed); }
  void AddBytesReceived(uint64_t n) { bytes_received_.fetch_add(n, std::memory_order_relaxed); }
  void AddBytesSent(uint64_t n) { bytes_sent_.fetch_add(n, std::memory_order_relaxed); }
  void AddLatency(uint64_t microseconds);

  StoreMetricsSnapshot Snapshot() const;

 private:
  std::atomic<uint64_t> requests_{0};
  std::atomic<uint64_t> failed_requests_{0};
  std::atomic<uint64_t> retries_{0};
  std::atomic<uint64_t> bytes_received_{0};
  std::atomic<uint64_t> bytes_sent_{0};
  std::array<std::atomic<uint64_t>, StoreMetricsSnapshot::kLatencyBuckets> latency_{};
};

}  // namespace zarrstream

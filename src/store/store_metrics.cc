#include "store/store_metrics.h"

#include <bit>
#include <cmath>
#include <cstdio>

namespace zarrstream {

void StoreMetrics::AddLatency(uint64_t microseconds) {
  size_t bucket = microseconds < 2 ? 0 : static_cast<size_t>(std::bit_width(microseconds) - 1);
  if (bucket >= latency_.size()) bucket = latency_.size() - 1;
  latency_[bucket].fetch_add(1, std::memory_order_relaxed);
}

StoreMetricsSnapshot StoreMetrics::Snapshot() const {
  StoreMetricsSnapshot s;
  s.requests = requests_.load(std::memory_order_relaxed);
  s.failed_requests = failed_requests_.load(std::memory_order_relaxed);
  s.retries = retries_.load(std::memory_order_relaxed);
  s.bytes_received = bytes_received_.load(std::memory_order_relaxed);
  s.bytes_sent = bytes_sent_.load(std::memory_order_relaxed);
  for (size_t b = 0; b < latency_.size(); ++b) {
    s.latency_us_log2[b] = latency_[b].load(std::memory_order_relaxed);
  }
  return s;
}

uint64_t StoreMetricsSnapshot::LatencyQuantileUs(double fraction) const {
  uint64_t total = 0;
  for (uint64_t n : latency_us_log2) total += n;
  if (total == 0) return 0;
  const auto wanted = static_cast<uint64_t>(std::llround(fraction * static_cast<double>(total)));
  uint64_t seen = 0;
  for (size_t b = 0; b < latency_us_log2.size(); ++b) {
    seen += latency_us_log2[b];
    if (seen >= wanted && seen > 0) return uint64_t{2} << b;
  }
  return uint64_t{2} << (latency_us_log2.size() - 1);
}

std::string StoreMetricsSnapshot::ToString() const {
  char buffer[256];
  std::snprintf(
      buffer, sizeof(buffer),
      "requests=%llu failed=%llu retries=%llu bytes_received=%llu bytes_sent=%llu "
      "p50<=%.1fms p99<=%.1fms",
      static_cast<unsigned long long>(requests), static_cast<unsigned long long>(failed_requests),
      static_cast<unsigned long long>(retries), static_cast<unsigned long long>(bytes_received),
      static_cast<unsigned long long>(bytes_sent),
      static_cast<double>(LatencyQuantileUs(0.5)) / 1000.0,
      static_cast<double>(LatencyQuantileUs(0.99)) / 1000.0);
  return buffer;
}

}  // namespace zarrstream

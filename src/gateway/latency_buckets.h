// The latency buckets of online services, shared by the gateway (its /metrics histograms and the
// stats it posts to the server) and the server (which stores and aggregates those counts).
// docs/services.md, "The gateway"; the contract's "Gateway stats".
#pragma once

#include <array>
#include <cstddef>

namespace arbiter::gateway {

// Upper bounds in milliseconds; counts come as one number per bucket plus one for +Inf.
inline constexpr std::array<double, 15> kServiceLatencyBucketsMs = {
    1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 30000, 60000};

// Buckets of one histogram with +Inf: kServiceLatencyBucketsMs.size() + 1.
inline constexpr size_t kServiceLatencyBucketCount = kServiceLatencyBucketsMs.size() + 1;

// The bucket of a latency: the first bound >= ms, or the +Inf bucket.
constexpr size_t ServiceLatencyBucket(double ms) {
  for (size_t i = 0; i < kServiceLatencyBucketsMs.size(); ++i) {
    if (ms <= kServiceLatencyBucketsMs[i]) return i;
  }
  return kServiceLatencyBucketsMs.size();
}

}  // namespace arbiter::gateway

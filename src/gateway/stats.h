// What the gateway counts per service and revision: requests by status class, latency and
// queue-wait histograms (kServiceLatencyBucketsMs), requests in flight, retries, ejections.
// Served at GET /metrics (Prometheus text) and posted to the server every stats interval as a
// window (docs/services.md, "The gateway"; the contract's "Gateway stats").
//
// Thread safety: each io thread writes only its own shard's counters (RouteCounters has one
// writer: relaxed atomic loads and stores, no read-modify-write, no lock); Stats::Counters
// (called when a routing table is built) and Stats::Totals (a scrape, a stats post) lock one
// shard at a time.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "gateway/latency_buckets.h"

namespace arbiter::gateway {

using Histogram = std::array<uint64_t, kServiceLatencyBucketCount>;

// Sums over every shard, or the difference of two such sums (a window).
struct RouteTotals {
  uint64_t requests = 0;
  std::array<uint64_t, 4> status{};  // 2xx (1xx counts here), 3xx, 4xx, 5xx
  uint64_t gateway_503 = 0;          // 503s the gateway answered itself (queue full or timed out)
  Histogram latency{};
  double latency_sum_ms = 0;
  Histogram queue_wait{};
  double queue_wait_sum_ms = 0;
  uint64_t retries = 0;          // requests sent again to another replica
  uint64_t upstream_errors = 0;  // 502s and 504s: a replica failed, closed or did not answer
  uint64_t ejections = 0;        // a replica skipped for a while after a failed connect
  int64_t in_flight = 0;         // a gauge: not part of a window's difference

  bool empty() const { return requests == 0 && retries == 0 && ejections == 0; }
  // this - earlier, counter by counter; in_flight stays this one's.
  RouteTotals Minus(const RouteTotals& earlier) const;
};

// The counters of one service+revision on one io thread. Only that thread calls the mutators.
class RouteCounters {
 public:
  // One answered request: its status, whether the gateway made the 503 itself, the time from
  // its arrival to the end of its answer, and how long it waited in the queue.
  void Record(int status, bool gateway_503, double latency_ms, double queue_wait_ms);
  void AddInFlight(int64_t d) { Bump(in_flight_, d); }
  void AddRetry() { Bump(retries_, 1); }
  void AddUpstreamError() { Bump(upstream_errors_, 1); }
  void AddEjection() { Bump(ejections_, 1); }

  // Adds these counters to `out` (any thread).
  void AddTo(RouteTotals* out) const;

 private:
  template <typename T, typename D>
  static void Bump(std::atomic<T>& a, D d) {
    a.store(a.load(std::memory_order_relaxed) + static_cast<T>(d), std::memory_order_relaxed);
  }

  std::atomic<uint64_t> requests_{0};
  std::array<std::atomic<uint64_t>, 4> status_{};
  std::atomic<uint64_t> gateway_503_{0};
  std::array<std::atomic<uint64_t>, kServiceLatencyBucketCount> latency_{};
  std::atomic<uint64_t> latency_sum_us_{0};
  std::array<std::atomic<uint64_t>, kServiceLatencyBucketCount> queue_wait_{};
  std::atomic<uint64_t> queue_wait_sum_us_{0};
  std::atomic<uint64_t> retries_{0};
  std::atomic<uint64_t> upstream_errors_{0};
  std::atomic<uint64_t> ejections_{0};
  std::atomic<int64_t> in_flight_{0};
};

// service name, revision (0: a request of a service with no revision to attribute it to).
using RouteKey = std::pair<std::string, int64_t>;

class Stats {
 public:
  explicit Stats(int shards);

  // The counters of `service`+`revision` on io thread `shard`, created on first use. The
  // pointer stays valid as long as this Stats.
  RouteCounters* Counters(int shard, const std::string& service, int64_t revision);

  // The sums over every shard, per service+revision.
  std::map<RouteKey, RouteTotals> Totals() const;

  // Requests for no known service (404s), per shard like the rest.
  void AddUnknownService(int shard) {
    auto& a = shards_[static_cast<size_t>(shard)]->unknown_service;
    a.store(a.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  }
  uint64_t unknown_service() const;

 private:
  struct Shard {
    mutable std::mutex mu;
    std::map<RouteKey, std::unique_ptr<RouteCounters>> counters;  // guarded by mu
    std::atomic<uint64_t> unknown_service{0};
  };
  std::vector<std::unique_ptr<Shard>> shards_;
};

// The body of POST /api/v1/gateway/stats for one window: the services with requests in it.
std::string StatsWindowJson(const std::string& gateway, int64_t window_start_ms,
                            int64_t window_end_ms, const std::map<RouteKey, RouteTotals>& window);

// The per-route families of GET /metrics (Prometheus text format 0.0.4).
std::string RoutesPrometheusText(const std::map<RouteKey, RouteTotals>& totals);

// Escapes a Prometheus label value (backslash, quote, newline).
std::string PrometheusLabel(const std::string& value);

}  // namespace arbiter::gateway

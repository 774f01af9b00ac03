// Serving figures: what the gateways measured of each service revision, and how many of its
// replicas were ready, per minute (the store's serving_stats rows; docs/services.md).
//
// ServingFigures is a plain value with its JSON (the row's data_json) and the arithmetic the
// serving report needs (sums, interpolated percentiles); ServingStats adds figures to the rows
// of their minutes: read, add, write, under its own mutex (a leaf), so that two gateways
// reporting the same minute never lose each other's counts. The gateway's report is parsed here
// too (GatewayStats), with errors that name the field.
//
// Thread safety: ServingFigures and the functions are plain values and pure; ServingStats's
// methods may be called from any thread.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "common/result.h"
#include "model/time.h"
#include "store/store.h"

namespace arbiter::server {

// The upper bounds of the gateways' latency buckets, in ms; one bucket more counts the rest.
inline constexpr std::array<int64_t, 15> kServiceLatencyBucketsMs = {
    1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 30000, 60000};
inline constexpr size_t kServiceLatencyBuckets = kServiceLatencyBucketsMs.size() + 1;

struct ServingFigures {
  int64_t requests = 0;
  int64_t status_2xx = 0, status_3xx = 0, status_4xx = 0, status_5xx = 0;
  int64_t gateway_503 = 0;  // answered by the gateway itself (queue full or timed out)
  std::array<int64_t, kServiceLatencyBuckets> latency{};
  double latency_sum_ms = 0;
  double queue_wait_sum_ms = 0;
  // The controller's samples of ready replicas in the minute.
  int64_t ready_samples = 0;
  int64_t ready_sum = 0;
  int64_t ready_min = 0;
  int64_t ready_max = 0;

  void Add(const ServingFigures& o);
  // Errors: 5xx answers, the gateway's own 503s included.
  int64_t errors() const { return status_5xx + gateway_503; }
  bool operator==(const ServingFigures&) const = default;
};

nlohmann::json ServingFiguresToJson(const ServingFigures& f);
// Unreadable members count as 0.
ServingFigures ServingFiguresFromJson(std::string_view text);

// The q-quantile (0..1) of a latency histogram, interpolated linearly inside its bucket (the
// first bucket from 0; the last, unbounded one answers its lower bound); 0 when empty.
double LatencyQuantileMs(const std::array<int64_t, kServiceLatencyBuckets>& buckets, double q);
// The share of the requests within `limit_ms` (interpolated inside the bucket that holds it);
// 1 when there are none.
double ShareWithinMs(const std::array<int64_t, kServiceLatencyBuckets>& buckets, double limit_ms);

// POST /api/v1/gateway/stats.
struct GatewayStats {
  std::string gateway;
  TimeMs window_start_ms = 0;
  TimeMs window_end_ms = 0;
  struct Entry {
    std::string service;
    int64_t revision = 0;
    ServingFigures figures;
  };
  std::vector<Entry> services;
};
// Errors name the field ("services[2].latency_buckets").
Result<GatewayStats> ParseGatewayStats(std::string_view json);

// POST /api/v1/gateway/load (every second, and at once when a request waits for a service with
// no replica): each service's load at one gateway, what autoscaling decides by.
struct GatewayLoad {
  std::string gateway;
  struct Entry {
    std::string service;
    double concurrency = 0;   // requests in flight or waiting, averaged over the last second
    double rps = 0;           // requests that arrived in the last second
    int64_t waiting = 0;      // requests waiting now
    bool no_replica = false;  // the gateway has no replica for the service
  };
  std::vector<Entry> services;
};
// Errors name the field ("services[0].concurrency").
Result<GatewayLoad> ParseGatewayLoad(std::string_view json);

// The minute [m, m + 60 s) that holds `ms`.
inline TimeMs MinuteOf(TimeMs ms) { return ms - ((ms % 60000) + 60000) % 60000; }

class ServingStats {
 public:
  explicit ServingStats(store::Store* store) : store_(store) {}

  // Adds `figures` to the row of (minute, service, revision), for each; durable on return.
  using Key = std::tuple<TimeMs, std::string, int64_t>;  // minute, service, revision
  Status Add(const std::vector<std::pair<Key, ServingFigures>>& rows);

 private:
  store::Store* store_;
  std::mutex mu_;
  // The rows of the recent minutes as written (a cache: a row not here is read from the store).
  std::map<Key, ServingFigures> recent_;
};

}  // namespace arbiter::server

// Autoscaler: how many replicas a service wants, from the load its gateways measured, by
// Knative's KPA rules and defaults (model/service.h AutoscalingSpec; docs/services.md,
// "Autoscaling"). Pure: the caller feeds one sample per second and asks for a decision; the
// server's service controller and the simulator drive the same code.
//
// Rules (each written out where it is computed):
//   demand(w)     the mean of the samples of the last w (seconds without a sample count 0)
//   per_replica   = target x target_utilization / 100
//   ready'        = max(1, ready)
//   up_limit      = ceil(max_scale_up_rate x ready'),  down_limit = floor(ready' /
//   max_scale_down_rate) stable        = clamp(ceil(demand(stable_window) / per_replica),
//   down_limit, up_limit) panic         = clamp(ceil(demand(panic_window) / per_replica),
//   down_limit, up_limit) panicking     starts when demand(panic_window) / per_replica / ready' >=
//   panic_threshold / 100
//                 (with ready > 0), and ends a stable window after that last held
//   desired       = panicking ? max(panic, the highest desired since panicking began) : stable
//   delay         desired = max(desired, every decision of the last scale_down_delay)
//   zero          0 only after scale_to_zero_grace without demand; otherwise at least 1 once
//                 there is any demand (a request waits at a service with no replica: at once)
//   range         clamp(desired, min, max)
//
// Thread safety: a plain value, one owner.
#pragma once

#include <cstdint>
#include <deque>
#include <string>

#include "model/service.h"
#include "model/time.h"

namespace arbiter::core {

struct AutoscaleSample {
  TimeMs at_ms = 0;
  double concurrency = 0;  // requests in flight or waiting at the gateways, averaged over 1 s
  double rps = 0;          // requests that arrived in that second
};

struct AutoscaleDecision {
  int32_t desired = 0;
  bool panicking = false;
  double stable_demand = 0;  // the metric averaged over the stable window
  double panic_demand = 0;   // over the panic window
  double per_replica = 0;    // target x utilisation
  // For people: "3 -> 5: 41.0 requests in flight over 60 s, target 7 per replica".
  std::string reason;
};

class Autoscaler {
 public:
  Autoscaler() = default;
  Autoscaler(const AutoscalingSpec& spec, int32_t min_replicas, int32_t max_replicas)
      : spec_(spec), min_(min_replicas), max_(max_replicas) {}

  // A changed spec keeps the samples.
  void SetSpec(const AutoscalingSpec& spec, int32_t min_replicas, int32_t max_replicas) {
    spec_ = spec;
    min_ = min_replicas;
    max_ = max_replicas;
  }

  // One sample, in time order (one per second; a later one at the same second replaces it).
  void Record(const AutoscaleSample& s);

  // The decision at `now`: `ready` replicas serve, `current` is what the service wants now;
  // `waiting`: requests wait at a gateway for this service (scale from zero at once).
  AutoscaleDecision Decide(TimeMs now, int32_t ready, int32_t current, bool waiting);

  bool panicking() const { return panic_since_ms_ > 0; }
  const std::deque<AutoscaleSample>& samples() const { return samples_; }

 private:
  double Demand(TimeMs now, DurationMs window) const;
  double Metric(const AutoscaleSample& s) const;

  AutoscalingSpec spec_;
  int32_t min_ = 0;
  int32_t max_ = 1;
  std::deque<AutoscaleSample> samples_;            // the last stable window's, oldest first
  TimeMs panic_since_ms_ = 0;                      // 0: not panicking
  TimeMs panic_last_ms_ = 0;                       // when the panic condition last held
  int32_t panic_max_ = 0;                          // the highest desired while panicking
  TimeMs last_demand_ms_ = -1;                     // when there was demand last (-1: never)
  std::deque<std::pair<TimeMs, int32_t>> recent_;  // decisions of the scale-down delay
};

}  // namespace arbiter::core

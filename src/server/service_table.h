// ServiceTable: the services the server knows and what their controller knows of their replicas.
//
// Owns: each service (its spec, revisions and traffic: the durable part, model/service.h) and,
// in memory only, its replicas' controller state (draining, why they ended, probe findings), its
// replacement backoff and its recent events. A replica is an ordinary job (JobTable); a service
// lists the ids of its live replicas, rebuilt from the jobs' service links at load. Lock: none of
// its own; the control plane's mutex guards it (ControlPlane::mu_), because starting or stopping
// a replica changes a job and its service in one step. It calls nothing.
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <vector>

#include "core/autoscale/autoscaler.h"
#include "model/service.h"
#include "model/time.h"

namespace arbiter::server {

struct ReplicaState {
  uint64_t job = 0;
  int64_t revision = 0;
  bool ready = false;     // readiness passed (the prober's last word)
  bool draining = false;  // out of the routes, stopped at drain_until
  TimeMs drain_until = 0;
  bool removed = false;        // the controller stopped it on purpose (not a failure)
  std::string reason;          // why it is not ready, or why it ended
  TimeMs ended_ms = 0;         // > 0: its job ended; listed as failed for a while
  std::string restart_reason;  // set when the controller restarts it (liveness)
};

struct ServiceEvent {
  TimeMs at_ms = 0;
  std::string message;
};

// What one gateway last reported of a service's load (POST /api/v1/gateway/load).
struct GatewayLoadReport {
  TimeMs at_ms = 0;         // when the server received it
  double concurrency = 0;   // requests in flight or waiting there, averaged over its second
  double rps = 0;           // requests that arrived there in that second
  int64_t waiting = 0;      // requests waiting there now
  bool no_replica = false;  // they wait because the gateway has no replica to send them to
};

// A scale-up under way: from the decision until `target` replicas are ready.
struct PendingScaleUp {
  TimeMs decided_ms = 0;
  int32_t target = 0;
  bool from_zero = false;
};

// The last kMaxTimings durations of one kind, in seconds.
struct Timings {
  static constexpr size_t kMaxTimings = 200;
  std::deque<double> seconds;
  int64_t count = 0;  // since the server started
  void Add(double s) {
    seconds.push_back(s);
    ++count;
    while (seconds.size() > kMaxTimings) seconds.pop_front();
  }
  // The quantile q (0..1) of the kept ones, linear between ranks; -1 when there are none.
  double Quantile(double q) const {
    if (seconds.empty()) return -1;
    std::vector<double> v(seconds.begin(), seconds.end());
    std::sort(v.begin(), v.end());
    const double at = q * static_cast<double>(v.size() - 1);
    const size_t lo = static_cast<size_t>(at);
    const size_t hi = std::min(lo + 1, v.size() - 1);
    return v[lo] + (v[hi] - v[lo]) * (at - static_cast<double>(lo));
  }
};

struct ScaleDecisionRecord {
  TimeMs at_ms = 0;
  int32_t from = 0;
  int32_t to = 0;
  std::string reason;
};

struct ServiceEntry {
  Service service;
  std::map<uint64_t, ReplicaState> replicas;  // by job id: live ones, and ended ones for a while
  int32_t failures = 0;                       // replicas that failed in a row (backoff)
  TimeMs next_start_ms = 0;                   // no replica starts before (backoff)
  std::string blocked;                        // why replicas cannot be started now ("" : they can)
  std::deque<ServiceEvent> events;            // the last kMaxEvents, oldest first
  static constexpr size_t kMaxEvents = 50;
  int32_t restarts = 0;  // replicas replaced after failures, since the server started

  // Autoscaling (spec.autoscaling): the load the gateways report, the autoscaler fed with one
  // sample a second, the count it wants and its recent decisions, and how long scale-ups took.
  int32_t desired = -1;  // the replica count wanted now (-1: not decided yet: the live count)
  core::Autoscaler autoscaler;
  std::map<std::string, GatewayLoadReport> load;  // by gateway
  TimeMs last_sample_ms = 0;
  std::deque<ScaleDecisionRecord> decisions;  // the last kMaxDecisions
  static constexpr size_t kMaxDecisions = 20;
  std::deque<PendingScaleUp> scale_ups;
  Timings scale_up;    // decision to the target count ready
  Timings reclaim;     // the same, for scale-ups whose replicas preempted borrowers
  Timings cold_start;  // from zero to the first ready replica
};

struct ServiceTable {
  std::map<std::string, ServiceEntry> all;  // by name (names are cluster-unique)

  ServiceEntry* Find(const std::string& name) {
    auto it = all.find(name);
    return it == all.end() ? nullptr : &it->second;
  }
  const ServiceEntry* Find(const std::string& name) const {
    auto it = all.find(name);
    return it == all.end() ? nullptr : &it->second;
  }
};

}  // namespace arbiter::server

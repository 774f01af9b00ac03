// An online inference service as the model describes it: what its replicas run, how many, how
// they are probed, rolled and routed to (docs/services.md; the API's JSON is api/service_codec.h).
//
// A service has numbered revisions: every change of its template or its fixed port makes the next
// one. Its replicas are ordinary jobs of type `service` (JobSpec::service names the service and
// the revision), started and stopped by the server's service controller
// (server/service_controller.h); `traffic` says which share of the requests each revision gets.
//
// Thread safety: plain values.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model/job.h"
#include "model/time.h"

namespace arbiter {

// An HTTP GET probe of a replica: success is a 2xx or 3xx answer within the timeout.
struct ProbeSpec {
  std::string path = "/healthz";
  DurationMs period_ms = 1000;
  DurationMs timeout_ms = 1000;
  int32_t failure_threshold = 3;  // consecutive failures that count
  int32_t success_threshold = 1;  // consecutive successes that count
  DurationMs initial_delay_ms = 0;
  bool operator==(const ProbeSpec&) const = default;
};

// How a revision replaces another: at most max_surge replicas beyond `replicas`, at most
// max_unavailable ready replicas fewer than `replicas`, at any time.
struct RolloutSpec {
  int32_t max_surge = 1;
  int32_t max_unavailable = 0;
  bool operator==(const RolloutSpec&) const = default;
};

// The objective the serving report measures (reports: slo_met): `percentile` of the requests of a
// minute within latency_ms, and `availability` percent of them not failed.
struct SloSpec {
  int64_t latency_ms = 500;
  double percentile = 99;
  double availability = 99.9;
  bool operator==(const SloSpec&) const = default;
};

// The gateway's wait queue of a service: at most `max` requests wait for a replica, each at most
// timeout_ms.
struct RequestQueueSpec {
  int64_t max = 1000;
  int64_t timeout_ms = 30000;
  bool operator==(const RequestQueueSpec&) const = default;
};

// How a service's replica count follows its load: Knative's KPA, with its semantics and defaults
// (docs/services.md, "Autoscaling"). Demand is the load the gateways measured each second (the
// requests in flight or waiting, or the requests per second), averaged over the stable window and
// over the panic window; each replica should carry `target x target_utilization / 100`.
enum class AutoscaleMetric { kConcurrency, kRps };
std::string_view AutoscaleMetricName(AutoscaleMetric m);  // "concurrency", "rps"

struct AutoscalingSpec {
  AutoscaleMetric metric = AutoscaleMetric::kConcurrency;
  double target = 0;               // per replica; 0: the metric's default (100, 200 rps)
  double target_utilization = 70;  // percent of `target` each replica is given
  DurationMs stable_window_ms = 60000;
  DurationMs panic_window_ms = 6000;
  double panic_threshold = 200;        // percent of the ready capacity the panic demand must reach
  double max_scale_up_rate = 1000;     // at most ceil(rate x ready) replicas after a decision
  double max_scale_down_rate = 2;      // at least floor(ready / rate) replicas after a decision
  DurationMs scale_down_delay_ms = 0;  // the highest decision of this long is kept
  DurationMs scale_to_zero_grace_ms = 30000;  // the last replica stays this long without demand
  bool operator==(const AutoscalingSpec&) const = default;

  // `target` or the metric's default.
  double EffectiveTarget() const {
    if (target > 0) return target;
    return metric == AutoscaleMetric::kConcurrency ? 100 : 200;
  }
};

// A revision's share of the requests, in percent.
struct TrafficSplit {
  int64_t revision = 0;
  int32_t percent = 0;
  bool operator==(const TrafficSplit&) const = default;
};

inline constexpr int32_t kMaxServiceReplicas = 1000;
inline constexpr size_t kMaxServiceNameLength = 40;

// What a caller gives (POST/PUT /api/v1/services).
struct ServiceSpec {
  std::string name;
  std::string tenant;  // "" : the caller's
  std::string queue;   // "" : the tenant's default_queue
  std::string priority_class;
  // What each replica runs: command, env, resources, ... (tasks 1, type service; the server
  // fills in name, tenant, queue, priority class and the service link).
  JobSpec tmpl;
  int32_t replicas = 1;  // without autoscaling; with it, where the count starts (min..max)
  // Autoscaling: `replicas: {min, max}` in the API; the count moves inside [min, max] (min 0:
  // scales to zero, the gateway holding requests while the first replica starts).
  std::optional<AutoscalingSpec> autoscaling;
  int32_t min_replicas = 0;
  int32_t max_replicas = 0;
  // Training may borrow this service's idle guarantee only with a grace period within this
  // (0: no limit): lent GPUs come back within it when the service needs them.
  int64_t reclaim_deadline_seconds = 0;
  int32_t port = 0;  // 0: the server picks one per replica; else every replica's
  std::vector<std::string> hosts;
  ProbeSpec readiness;
  std::optional<ProbeSpec> liveness;
  int32_t max_concurrency = 0;  // per replica; 0: no limit
  RequestQueueSpec request_queue;
  RolloutSpec rollout;
  std::optional<SloSpec> slo;
  int64_t drain_seconds = 30;
  std::vector<TrafficSplit> traffic;  // empty: the latest revision gets everything
};

// POST /api/v1/services/{name}/scale: a fixed count, or an autoscaling service's range.
struct ServiceScale {
  int32_t replicas = -1;  // -1: not given
  int32_t min = -1;
  int32_t max = -1;
};

// One revision: the template and port its replicas run with.
struct ServiceRevision {
  int64_t revision = 0;
  TimeMs created_ms = 0;
  JobSpec tmpl;
  int32_t port = 0;
};

// A service as the server keeps it.
// A service an approval rule matched at its creation (docs/approvals.md, "Services"): no replica
// starts until one of the rule's approvers approves it. The decision covers the service: later
// revisions and scaling do not ask again.
struct ServiceApproval {
  std::string state;  // "" : none needed; awaiting | approved | rejected
  std::string rule;   // the rule that matched
  TimeMs requested_ms = 0;
  std::string decided_by;  // "arbiter" for an expiry
  TimeMs decided_ms = 0;
  std::string comment;
  std::string reason;  // what the service's status says
  bool operator==(const ServiceApproval&) const = default;
};

struct Service {
  ServiceSpec spec;  // the latest one given (its traffic as given)
  ServiceApproval approval;
  std::string user;                        // who created it: its replicas run as this user
  int64_t revision = 0;                    // the latest revision
  std::vector<ServiceRevision> revisions;  // ascending
  std::vector<TrafficSplit> traffic;       // the target: what the controller rolls towards
  TimeMs created_ms = 0;
  TimeMs updated_ms = 0;

  const ServiceRevision* FindRevision(int64_t r) const {
    for (const ServiceRevision& rev : revisions) {
      if (rev.revision == r) return &rev;
    }
    return nullptr;
  }
};

// [a-z0-9]([a-z0-9-]*[a-z0-9])?, at most kMaxServiceNameLength characters.
bool IsValidServiceName(std::string_view name);

// Whether two templates make the same replicas (a change of either makes a new revision).
bool SameTemplate(const JobSpec& a, const JobSpec& b);

// The job name of a replica of revision `revision` of service `name`: "chat-r3".
std::string ReplicaJobName(std::string_view service, int64_t revision);

}  // namespace arbiter

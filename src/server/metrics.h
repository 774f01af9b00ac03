// ServerMetrics: the server's Prometheus metrics (GET /metrics, text exposition format 0.0.4).
//
// Two kinds of series, following Prometheus' naming conventions (arbiter_ prefix, base units:
// seconds and bytes, _total for counters):
//   - counters and histograms of events (job submissions, admissions, starts and ends by outcome,
//   preemptions
//     by reason, wait time, scheduling-cycle time, API request latency), kept here for the life of
//     the process: they start at zero when the server starts, which Prometheus' rate() and
//     increase() treat as a counter reset;
//   - gauges of the live state (GPUs, GPU memory, jobs per queue and state, quotas, nodes) and the
//     store's statistics, built afresh at every scrape from a MetricsSnapshot that ControlPlane
//     gathers under its lock, so series of removed nodes or queues disappear with them.
// Every label has a bounded set of values: tenant, queue, node, GPU model, and enums (state,
// outcome, reason, route template, method, status class); never a job id. docs/metrics.md lists
// every metric.
//
// Thread safety: every method may be called from any thread (prometheus-cpp's metrics are atomic
// or internally locked).
#pragma once

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "store/store.h"

namespace arbiter::server {

// The live state's gauges, gathered by ControlPlane::MetricsSnapshot under its lock.
struct MetricsSnapshot {
  // The GPUs of one model on one node.
  struct GpuGroup {
    std::string node;
    std::string model;
    int64_t gpus = 0;
    int64_t unhealthy = 0;
    int64_t allocated_milli = 0;  // milli-GPUs placed jobs hold
    int64_t busy = 0;             // GPUs whose telemetry reports utilisation above 0
    int64_t with_telemetry = 0;   // GPUs the node's agent reported telemetry for
    int64_t utilization_pct = 0;  // the sum over those GPUs
    int64_t memory_mib = 0;       // capacity
    int64_t memory_allocated_mib = 0;
    int64_t memory_used_mib = 0;  // from telemetry
  };
  struct NodeInfo {
    std::string name;
    std::string state;  // NodeStateName
  };
  struct QueueInfo {
    std::string tenant;
    std::string queue;
    // GPUs (all models), in milli-GPUs; max < 0: unlimited.
    int64_t guaranteed_milli = 0;
    int64_t max_milli = -1;
    int64_t used_milli = 0;
    int64_t borrowed_milli = 0;
    std::map<std::string, int64_t> jobs_by_state;  // JobStateName -> count (non-final states)
  };
  // An online service: its replicas and, when it autoscales, its autoscaler's timings.
  struct ServiceInfo {
    std::string service;
    std::string tenant;
    int64_t desired = 0;
    int64_t ready = 0;
    bool autoscaling = false;
    bool panicking = false;
    int64_t scale_ups = 0, reclaims = 0, cold_starts = 0;  // since the server started
    // Quantiles of the recent ones (seconds; < 0: none yet).
    double scale_up_p50 = -1, scale_up_p99 = -1, reclaim_p50 = -1, reclaim_p99 = -1;
  };
  std::vector<GpuGroup> gpus;
  std::vector<NodeInfo> nodes;
  std::vector<QueueInfo> queues;
  std::vector<ServiceInfo> services;
  // Jobs held in memory: every live one, and the window of recently finished ones.
  int64_t jobs_in_memory = 0;
};

// What ends a run (or a queued job): the `outcome` label of arbiter_job_ends_total.
inline constexpr std::string_view kJobOutcomes[] = {"succeeded", "failed", "timed-out", "cancelled",
                                                    "preempted", "lost",   "rejected"};
// Every node state (the `state` label of the node gauges): NodeStateName's values.
inline constexpr std::string_view kNodeStates[] = {"ready", "cordoned", "draining", "down"};
// The job states exported per queue: every state but the final ones (succeeded, failed, cancelled,
// timed-out, rejected), whose counts only grow; their rates are in arbiter_job_ends_total.
inline constexpr std::string_view kQueueJobStates[] = {
    "pending",   "admitted",  "starting",   "running", "preempting",
    "preempted", "suspended", "retry-wait", "lost",    "awaiting_approval"};

class ServerMetrics {
 public:
  ServerMetrics();
  ServerMetrics(const ServerMetrics&) = delete;
  ServerMetrics& operator=(const ServerMetrics&) = delete;

  // Job events, labelled by the job's tenant and queue.
  void JobSubmitted(const std::string& tenant, const std::string& queue);
  void JobAdmitted(const std::string& tenant, const std::string& queue, double wait_seconds);
  void JobStarted(const std::string& tenant, const std::string& queue);
  // `outcome`: one of kJobOutcomes.
  void JobEnded(const std::string& tenant, const std::string& queue, std::string_view outcome);
  // A running job chosen as a victim; `reason`: PreemptionReasonName ("priority", "reclaim", ...).
  void JobPreempted(const std::string& tenant, const std::string& queue, std::string_view reason);

  // Webhooks (server/webhooks.h): one attempt to deliver an event, by `result` (delivered,
  // http_error, connection_error); and a delivery that ended, by `outcome` (delivered, failed:
  // given up), labelled by the event (job.succeeded, budget.80, ...: a fixed set).
  void WebhookAttempt(std::string_view result);
  void WebhookDeliveryEnded(std::string_view event, std::string_view outcome);

  void SchedulingCycle(double seconds);
  // `route`: the route's template (/api/v1/jobs/{id}), never the raw path.
  void HttpRequest(std::string_view method, const std::string& route, int status, double seconds);

  // One route's latency histograms, one per status class, each made on its first request: a
  // request observes without building its label set. Handles live as long as their ServerMetrics.
  class Route {
   public:
    void Observe(int status, double seconds);

   private:
    friend class ServerMetrics;
    Route(ServerMetrics* metrics, std::string method, std::string route)
        : metrics_(metrics), method_(std::move(method)), route_(std::move(route)) {}
    ServerMetrics* metrics_;
    std::string method_;
    std::string route_;
    std::array<std::atomic<prometheus::Histogram*>, 6> by_class_{};  // 1xx-5xx, other
  };
  // The same handle for the same method and route.
  Route* RouteHandle(std::string_view method, const std::string& route);

  // The text exposition format: the counters and histograms above, then the snapshot's gauges
  // and the store's statistics.
  std::string Render(const MetricsSnapshot& snapshot, const store::StoreStats& store) const;

  // Bucket bounds, in seconds.
  static const std::vector<double>& WaitBuckets();
  static const std::vector<double>& CycleBuckets();
  static const std::vector<double>& RequestBuckets();

 private:
  prometheus::Registry registry_;
  prometheus::Family<prometheus::Counter>& submissions_;
  prometheus::Family<prometheus::Counter>& admissions_;
  prometheus::Family<prometheus::Counter>& starts_;
  prometheus::Family<prometheus::Counter>& ends_;
  prometheus::Family<prometheus::Counter>& preemptions_;
  prometheus::Family<prometheus::Histogram>& wait_;
  prometheus::Family<prometheus::Counter>& webhook_attempts_;
  prometheus::Family<prometheus::Counter>& webhook_deliveries_;
  prometheus::Counter& cycles_;
  prometheus::Histogram& cycle_seconds_;
  prometheus::Family<prometheus::Histogram>& requests_;
  std::mutex submitted_mu_;
  std::unordered_map<std::string, prometheus::Counter*> submitted_;  // guarded by submitted_mu_
  std::mutex routes_mu_;
  std::vector<std::unique_ptr<Route>> routes_;  // guarded by routes_mu_
};

}  // namespace arbiter::server

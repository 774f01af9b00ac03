#include "server/metrics.h"

#include <fmt/format.h>
#include <prometheus/gauge.h>
#include <prometheus/text_serializer.h>

namespace arbiter::server {

namespace {

constexpr double kBytesPerMib = 1024.0 * 1024.0;

prometheus::Family<prometheus::Counter>& CounterFamily(prometheus::Registry& r,
                                                       const std::string& name,
                                                       const std::string& help) {
  return prometheus::BuildCounter().Name(name).Help(help).Register(r);
}

prometheus::Family<prometheus::Gauge>& GaugeFamily(prometheus::Registry& r, const std::string& name,
                                                   const std::string& help) {
  return prometheus::BuildGauge().Name(name).Help(help).Register(r);
}

prometheus::Family<prometheus::Histogram>& HistogramFamily(prometheus::Registry& r,
                                                           const std::string& name,
                                                           const std::string& help) {
  return prometheus::BuildHistogram().Name(name).Help(help).Register(r);
}

// "2xx", "4xx", ...: the status class keeps the label set small.
std::string StatusClass(int status) {
  if (status < 100 || status > 599) return "other";
  return fmt::format("{}xx", status / 100);
}

// The store's statistics: cumulative since the store opened, so they are counters here, rebuilt
// at every scrape with the totals.
void AddStoreMetrics(prometheus::Registry& r, const store::StoreStats& s) {
  CounterFamily(r, "arbiter_store_commits_total",
                "Store transactions committed (one group commit of several batches counts once)")
      .Add({})
      .Increment(static_cast<double>(s.commits));
  auto& batches = CounterFamily(r, "arbiter_store_batches_total",
                                "Write batches the store finished, by result (committed, failed)");
  batches.Add({{"result", "committed"}})
      .Increment(static_cast<double>(s.batches - s.failed_batches));
  batches.Add({{"result", "failed"}}).Increment(static_cast<double>(s.failed_batches));
  CounterFamily(r, "arbiter_store_ops_total", "Operations (rows written) of committed batches")
      .Add({})
      .Increment(static_cast<double>(s.ops));
  GaugeFamily(r, "arbiter_store_queued_batches",
              "Write batches enqueued and not yet taken by the store's writer")
      .Add({})
      .Set(static_cast<double>(s.queued));
  GaugeFamily(r, "arbiter_store_max_group_batches",
              "The most batches the store has committed in one transaction")
      .Add({})
      .Set(static_cast<double>(s.max_group));
  std::vector<double> bounds;
  bounds.reserve(store::StoreStats::kCommitUsBounds.size());
  for (uint64_t us : store::StoreStats::kCommitUsBounds) {
    bounds.push_back(static_cast<double>(us) / 1e6);
  }
  std::vector<double> increments;
  increments.reserve(s.commit_us_histogram.size());
  for (uint64_t n : s.commit_us_histogram) increments.push_back(static_cast<double>(n));
  HistogramFamily(r, "arbiter_store_commit_duration_seconds",
                  "Store commit latency: from the start of the transaction to the return of the "
                  "synced commit")
      .Add({}, bounds)
      .ObserveMultiple(increments, static_cast<double>(s.total_commit_us) / 1e6);
}

void AddGpuMetrics(prometheus::Registry& r, const std::vector<MetricsSnapshot::GpuGroup>& groups) {
  auto& gpus = GaugeFamily(r, "arbiter_gpus", "GPUs on the node, of the model");
  auto& unhealthy =
      GaugeFamily(r, "arbiter_gpus_unhealthy", "GPUs reported unhealthy (out of scheduling)");
  auto& allocated = GaugeFamily(r, "arbiter_gpus_allocated",
                                "GPUs held by placed jobs (fractional GPUs add their fraction)");
  auto& busy = GaugeFamily(r, "arbiter_gpus_busy",
                           "GPUs whose telemetry reports a utilisation above 0 (nodes run by "
                           "agents only)");
  auto& utilization = GaugeFamily(r, "arbiter_gpu_utilization_ratio",
                                  "Mean GPU utilisation (0-1) from the node agent's telemetry");
  auto& memory = GaugeFamily(r, "arbiter_gpu_memory_bytes", "GPU memory on the node");
  auto& memory_allocated = GaugeFamily(r, "arbiter_gpu_memory_allocated_bytes",
                                       "GPU memory held by placed jobs (a whole GPU holds all its "
                                       "memory, a fraction what it asked)");
  auto& memory_used = GaugeFamily(r, "arbiter_gpu_memory_used_bytes",
                                  "GPU memory in use, from the node agent's telemetry");
  for (const MetricsSnapshot::GpuGroup& g : groups) {
    const prometheus::Labels labels = {{"node", g.node}, {"gpu_model", g.model}};
    gpus.Add(labels).Set(static_cast<double>(g.gpus));
    unhealthy.Add(labels).Set(static_cast<double>(g.unhealthy));
    allocated.Add(labels).Set(static_cast<double>(g.allocated_milli) / 1000.0);
    memory.Add(labels).Set(static_cast<double>(g.memory_mib) * kBytesPerMib);
    memory_allocated.Add(labels).Set(static_cast<double>(g.memory_allocated_mib) * kBytesPerMib);
    if (g.with_telemetry > 0) {
      busy.Add(labels).Set(static_cast<double>(g.busy));
      // utilisation = sum of utilization_pct / (GPUs with telemetry x 100)
      utilization.Add(labels).Set(static_cast<double>(g.utilization_pct) /
                                  (static_cast<double>(g.with_telemetry) * 100.0));
      memory_used.Add(labels).Set(static_cast<double>(g.memory_used_mib) * kBytesPerMib);
    }
  }
}

void AddNodeMetrics(prometheus::Registry& r, const std::vector<MetricsSnapshot::NodeInfo>& nodes) {
  auto& by_state = GaugeFamily(r, "arbiter_nodes", "Nodes in each state");
  auto& node_state =
      GaugeFamily(r, "arbiter_node_state", "1 for the node's current state, 0 for the others");
  std::map<std::string_view, int64_t> counts;
  for (std::string_view s : kNodeStates) counts[s] = 0;
  for (const MetricsSnapshot::NodeInfo& n : nodes) {
    ++counts[n.state];
    for (std::string_view s : kNodeStates) {
      node_state.Add({{"node", n.name}, {"state", std::string(s)}}).Set(s == n.state ? 1 : 0);
    }
  }
  for (const auto& [state, count] : counts) {
    by_state.Add({{"state", std::string(state)}}).Set(static_cast<double>(count));
  }
}

void AddServiceMetrics(prometheus::Registry& r,
                       const std::vector<MetricsSnapshot::ServiceInfo>& services) {
  auto& desired = GaugeFamily(r, "arbiter_service_replicas_desired",
                              "Replicas the service wants now (its autoscaler's count, or its "
                              "fixed one)");
  auto& ready = GaugeFamily(r, "arbiter_service_replicas_ready",
                            "Replicas that passed their readiness probe and get traffic");
  auto& panicking = GaugeFamily(r, "arbiter_service_autoscaler_panicking",
                                "1 while the autoscaler is in panic mode (no scale-down)");
  auto& scale_ups = GaugeFamily(r, "arbiter_service_scale_ups",
                                "Scale-ups that reached their count since the server started, by "
                                "kind: all, reclaim (GPUs taken back from borrowers), cold_start "
                                "(from zero)");
  auto& seconds = GaugeFamily(r, "arbiter_service_scale_up_seconds",
                              "Decision to ready, seconds, over the last 200 scale-ups of the "
                              "kind (all, reclaim), at the quantile");
  for (const MetricsSnapshot::ServiceInfo& s : services) {
    const prometheus::Labels labels = {{"service", s.service}, {"tenant", s.tenant}};
    desired.Add(labels).Set(static_cast<double>(s.desired));
    ready.Add(labels).Set(static_cast<double>(s.ready));
    if (!s.autoscaling) continue;
    panicking.Add(labels).Set(s.panicking ? 1 : 0);
    auto with = [&](const char* k, const char* v) {
      prometheus::Labels l = labels;
      l[k] = v;
      return l;
    };
    scale_ups.Add(with("kind", "all")).Set(static_cast<double>(s.scale_ups));
    scale_ups.Add(with("kind", "reclaim")).Set(static_cast<double>(s.reclaims));
    scale_ups.Add(with("kind", "cold_start")).Set(static_cast<double>(s.cold_starts));
    const std::pair<const char*, std::pair<double, double>> kinds[] = {
        {"all", {s.scale_up_p50, s.scale_up_p99}}, {"reclaim", {s.reclaim_p50, s.reclaim_p99}}};
    for (const auto& [kind, q] : kinds) {
      if (q.first < 0) continue;
      prometheus::Labels l = with("kind", kind);
      l["quantile"] = "0.5";
      seconds.Add(l).Set(q.first);
      l["quantile"] = "0.99";
      seconds.Add(l).Set(q.second);
    }
  }
}

void AddQueueMetrics(prometheus::Registry& r,
                     const std::vector<MetricsSnapshot::QueueInfo>& queues) {
  auto& jobs = GaugeFamily(r, "arbiter_jobs", "Jobs of the queue in each non-final state");
  auto& guaranteed =
      GaugeFamily(r, "arbiter_queue_guaranteed_gpus", "GPUs guaranteed to the queue (quota)");
  auto& max = GaugeFamily(r, "arbiter_queue_max_gpus",
                          "Most GPUs the queue may use, borrowing included (absent: unlimited)");
  auto& used = GaugeFamily(r, "arbiter_queue_used_gpus",
                           "GPUs held by the queue's jobs (nested queues include their children)");
  auto& borrowed =
      GaugeFamily(r, "arbiter_queue_borrowed_gpus",
                  "GPUs the queue uses beyond its guarantee: max(0, used - guaranteed)");
  for (const MetricsSnapshot::QueueInfo& q : queues) {
    const prometheus::Labels labels = {{"tenant", q.tenant}, {"queue", q.queue}};
    for (std::string_view s : kQueueJobStates) {
      auto it = q.jobs_by_state.find(std::string(s));
      jobs.Add({{"tenant", q.tenant}, {"queue", q.queue}, {"state", std::string(s)}})
          .Set(it == q.jobs_by_state.end() ? 0.0 : static_cast<double>(it->second));
    }
    guaranteed.Add(labels).Set(static_cast<double>(q.guaranteed_milli) / 1000.0);
    if (q.max_milli >= 0) max.Add(labels).Set(static_cast<double>(q.max_milli) / 1000.0);
    used.Add(labels).Set(static_cast<double>(q.used_milli) / 1000.0);
    borrowed.Add(labels).Set(static_cast<double>(q.borrowed_milli) / 1000.0);
  }
}

}  // namespace

const std::vector<double>& ServerMetrics::WaitBuckets() {
  static const std::vector<double> kBuckets = {1,    5,    15,   30,   60,    120,   300,   600,
                                               1200, 1800, 3600, 7200, 14400, 28800, 43200, 86400};
  return kBuckets;
}

const std::vector<double>& ServerMetrics::CycleBuckets() {
  static const std::vector<double> kBuckets = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                               0.1,    0.25,  0.5,    1,     2.5,  5,     10};
  return kBuckets;
}

const std::vector<double>& ServerMetrics::RequestBuckets() {
  static const std::vector<double> kBuckets = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                               0.1,    0.25,  0.5,    1,     2.5,  5,     10};
  return kBuckets;
}

ServerMetrics::ServerMetrics()
    : submissions_(CounterFamily(registry_, "arbiter_job_submissions_total",
                                 "Jobs submitted (accepted; an idempotent replay counts once)")),
      admissions_(CounterFamily(registry_, "arbiter_job_admissions_total",
                                "Jobs admitted by the scheduler (placed on nodes)")),
      starts_(CounterFamily(registry_, "arbiter_job_starts_total",
                            "Job runs whose processes all started (the job became running)")),
      ends_(CounterFamily(registry_, "arbiter_job_ends_total",
                          "Job runs that ended (and queued jobs cancelled), by outcome")),
      preemptions_(CounterFamily(registry_, "arbiter_preemptions_total",
                                 "Running jobs preempted, by the victim's queue and the reason")),
      wait_(HistogramFamily(registry_, "arbiter_job_wait_seconds",
                            "Time a job waited pending before each admission")),
      webhook_attempts_(CounterFamily(registry_, "arbiter_webhook_attempts_total",
                                      "Attempts to deliver a webhook event, by result (delivered, "
                                      "http_error, connection_error)")),
      webhook_deliveries_(CounterFamily(registry_, "arbiter_webhook_deliveries_total",
                                        "Webhook deliveries that ended, by event and outcome "
                                        "(delivered, failed: given up after retries)")),
      cycles_(CounterFamily(registry_, "arbiter_scheduling_cycles_total", "Scheduling cycles run")
                  .Add({})),
      cycle_seconds_(HistogramFamily(registry_, "arbiter_scheduling_cycle_duration_seconds",
                                     "Duration of one scheduling cycle: inputs copied, the core "
                                     "run, decisions applied")
                         .Add({}, CycleBuckets())),
      requests_(HistogramFamily(registry_, "arbiter_http_request_duration_seconds",
                                "API request latency by route template, method and status "
                                "class")) {}

void ServerMetrics::JobSubmitted(const std::string& tenant, const std::string& queue) {
  prometheus::Counter* c = nullptr;
  {
    // Found by name, not by building the label set: this runs at every submission. Tenant and
    // queue names are [a-z0-9-], so "tenant/queue" names the pair.
    std::lock_guard<std::mutex> lock(submitted_mu_);
    prometheus::Counter*& slot = submitted_[tenant + "/" + queue];
    if (slot == nullptr) slot = &submissions_.Add({{"tenant", tenant}, {"queue", queue}});
    c = slot;
  }
  c->Increment();
}

void ServerMetrics::JobAdmitted(const std::string& tenant, const std::string& queue,
                                double wait_seconds) {
  admissions_.Add({{"tenant", tenant}, {"queue", queue}}).Increment();
  wait_.Add({{"tenant", tenant}, {"queue", queue}}, WaitBuckets())
      .Observe(std::max(0.0, wait_seconds));
}

void ServerMetrics::JobStarted(const std::string& tenant, const std::string& queue) {
  starts_.Add({{"tenant", tenant}, {"queue", queue}}).Increment();
}

void ServerMetrics::JobEnded(const std::string& tenant, const std::string& queue,
                             std::string_view outcome) {
  ends_.Add({{"tenant", tenant}, {"queue", queue}, {"outcome", std::string(outcome)}}).Increment();
}

void ServerMetrics::JobPreempted(const std::string& tenant, const std::string& queue,
                                 std::string_view reason) {
  preemptions_.Add({{"tenant", tenant}, {"queue", queue}, {"reason", std::string(reason)}})
      .Increment();
}

void ServerMetrics::WebhookAttempt(std::string_view result) {
  webhook_attempts_.Add({{"result", std::string(result)}}).Increment();
}

void ServerMetrics::WebhookDeliveryEnded(std::string_view event, std::string_view outcome) {
  webhook_deliveries_.Add({{"event", std::string(event)}, {"outcome", std::string(outcome)}})
      .Increment();
}

void ServerMetrics::SchedulingCycle(double seconds) {
  cycles_.Increment();
  cycle_seconds_.Observe(seconds);
}

void ServerMetrics::HttpRequest(std::string_view method, const std::string& route, int status,
                                double seconds) {
  RouteHandle(method, route)->Observe(status, seconds);
}

ServerMetrics::Route* ServerMetrics::RouteHandle(std::string_view method,
                                                 const std::string& route) {
  std::lock_guard<std::mutex> lock(routes_mu_);
  for (const auto& r : routes_) {
    if (r->method_ == method && r->route_ == route) return r.get();
  }
  routes_.push_back(std::unique_ptr<Route>(new Route(this, std::string(method), route)));
  return routes_.back().get();
}

void ServerMetrics::Route::Observe(int status, double seconds) {
  const size_t slot = status >= 100 && status <= 599 ? static_cast<size_t>(status / 100 - 1) : 5;
  prometheus::Histogram* h = by_class_[slot].load(std::memory_order_acquire);
  if (h == nullptr) {
    // Family::Add returns the existing histogram for the same labels: a race here is harmless.
    h = &metrics_->requests_.Add(
        {{"method", method_}, {"route", route_}, {"status_class", StatusClass(status)}},
        RequestBuckets());
    by_class_[slot].store(h, std::memory_order_release);
  }
  h->Observe(seconds);
}

std::string ServerMetrics::Render(const MetricsSnapshot& snapshot,
                                  const store::StoreStats& store) const {
  prometheus::Registry live;
  AddGpuMetrics(live, snapshot.gpus);
  AddNodeMetrics(live, snapshot.nodes);
  AddQueueMetrics(live, snapshot.queues);
  AddServiceMetrics(live, snapshot.services);
  GaugeFamily(live, "arbiter_jobs_in_memory",
              "Jobs the server holds in memory: the live ones and the window of recently "
              "finished ones (older ones are read from the store)")
      .Add({})
      .Set(static_cast<double>(snapshot.jobs_in_memory));
  AddStoreMetrics(live, store);
  std::vector<prometheus::MetricFamily> families = registry_.Collect();
  for (prometheus::MetricFamily& f : live.Collect()) families.push_back(std::move(f));
  return prometheus::TextSerializer().Serialize(families);
}

}  // namespace arbiter::server

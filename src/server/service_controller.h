// ServiceController: the thread that keeps every service's replicas as their specs say
// (docs/services.md, docs/architecture.md "Services").
//
// Every `interval_ms` (100) it calls ControlPlane::ReconcileServices with what the prober found,
// which observes each replica's job and probes, starts and drains replicas by the rollout rules
// (service_rollout.h), replaces failed ones after a backoff and publishes the gateways' routes;
// it hands the replicas to probe back to the ServiceProber, whose worker threads probe them. Every
// `sample_ms` (10 s) it adds a sample of each revision's ready replicas to the serving stats.
// Level-triggered: a restart or a missed change heals at the next reconcile.
//
// Owns: its thread and the prober. The control plane's state stays the control plane's (mu_);
// the prober's results are under the prober's own lock, never taken with mu_ held.
//
// Thread safety: Start and Stop from one thread.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>

#include "server/control_plane.h"
#include "server/service_prober.h"

namespace arbiter::server {

struct ServiceControllerOptions {
  int64_t interval_ms = 100;
  int64_t sample_ms = 10000;
  size_t probe_threads = 8;
};

class ServiceController {
 public:
  ServiceController(ControlPlane* cp, ServiceControllerOptions options);
  ~ServiceController();

  void Start();
  void Stop();
  // One reconcile (what the thread does each interval); for tests.
  Status Tick();

 private:
  ControlPlane* cp_;
  ServiceControllerOptions options_;
  ServiceProber prober_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
  TimeMs last_sample_ = 0;
};

}  // namespace arbiter::server

#include "server/service_controller.h"

#include <pthread.h>
#include <spdlog/spdlog.h>

#include <chrono>

namespace arbiter::server {

ServiceController::ServiceController(ControlPlane* cp, ServiceControllerOptions options)
    : cp_(cp), options_(options), prober_([cp] { return cp->Now(); }, options.probe_threads) {}

ServiceController::~ServiceController() { Stop(); }

Status ServiceController::Tick() {
  std::vector<ProbeTarget> targets;
  Status st = cp_->ReconcileServices(prober_.Results(), &targets);
  prober_.SetTargets(targets);
  const TimeMs now = cp_->Now();
  if (now - last_sample_ >= options_.sample_ms) {
    last_sample_ = now;
    Status s = cp_->SampleServing();
    if (st.ok()) st = s;
  }
  return st;
}

void ServiceController::Start() {
  prober_.Start();
  thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "arbiter-svc");
    std::unique_lock<std::mutex> lock(mu_);
    while (!stop_) {
      lock.unlock();
      if (Status st = Tick(); !st.ok()) spdlog::warn("service controller: {}", st.ToString());
      lock.lock();
      cv_.wait_for(lock, std::chrono::milliseconds(options_.interval_ms), [this] { return stop_; });
    }
  });
}

void ServiceController::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  prober_.Stop();
}

}  // namespace arbiter::server

#include "server/service_routes.h"

#include <chrono>

namespace arbiter::server {

void RoutesBoard::Publish(const nlohmann::json& services) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (services == services_) return;
    services_ = services;
    ++version_;
  }
  cv_.notify_all();
}

std::string RoutesBoard::TextLocked() const {
  return nlohmann::json{{"version", version_}, {"services", services_}}.dump();
}

std::string RoutesBoard::Wait(uint64_t known, DurationMs wait_ms) {
  std::unique_lock<std::mutex> lock(mu_);
  if (wait_ms > 0) {
    cv_.wait_for(lock, std::chrono::milliseconds(wait_ms),
                 [&] { return version_ != known || stopping_; });
  }
  return TextLocked();
}

uint64_t RoutesBoard::version() const {
  std::lock_guard<std::mutex> lock(mu_);
  return version_;
}

void RoutesBoard::WakeAll() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
}

}  // namespace arbiter::server

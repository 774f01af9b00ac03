#include "model/service.h"

#include <fmt/format.h>

namespace arbiter {

std::string_view AutoscaleMetricName(AutoscaleMetric m) {
  return m == AutoscaleMetric::kRps ? "rps" : "concurrency";
}

bool IsValidServiceName(std::string_view name) {
  if (name.empty() || name.size() > kMaxServiceNameLength) return false;
  auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  if (!alnum(name.front()) || !alnum(name.back())) return false;
  for (char c : name) {
    if (!alnum(c) && c != '-') return false;
  }
  return true;
}

bool SameTemplate(const JobSpec& a, const JobSpec& b) {
  return a.command == b.command && a.env == b.env && a.secret_env == b.secret_env &&
         a.workdir == b.workdir && a.resources == b.resources && a.gpu_models == b.gpu_models &&
         a.node_selector == b.node_selector && a.tolerations == b.tolerations &&
         a.container_image == b.container_image && a.mounts == b.mounts &&
         a.grace_period_seconds == b.grace_period_seconds;
}

std::string ReplicaJobName(std::string_view service, int64_t revision) {
  return fmt::format("{}-r{}", service, revision);
}

}  // namespace arbiter

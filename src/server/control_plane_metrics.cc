// ControlPlane's side of the Prometheus metrics: the gauges of the live state, gathered under mu_,
// and the counting of job transitions.
#include <fmt/format.h>

#include <algorithm>
#include <tuple>
#include <vector>

#include "server/control_plane.h"
#include "server/control_plane_compiled.h"

namespace arbiter::server {

using nlohmann::json;

void ControlPlane::CountTransitionLocked(const JobEntry& j, JobState from, JobState to,
                                         TimeMs since) {
  const std::string& tenant = j.spec.tenant;
  const std::string& queue = j.spec.queue;
  switch (to) {
    case JobState::kAdmitted:
      // wait = now - the moment the job last became pending (submit, resume, retry, preemption)
      metrics_.JobAdmitted(tenant, queue, static_cast<double>(now_() - since) / 1000.0);
      break;
    case JobState::kRunning:
      if (from != JobState::kRunning) metrics_.JobStarted(tenant, queue);
      break;
    case JobState::kFailed:
      // A lost run that is not retried ends as failed: it was counted once, as lost.
      if (from != JobState::kLost) metrics_.JobEnded(tenant, queue, JobStateName(to));
      break;
    case JobState::kSucceeded:
    case JobState::kTimedOut:
    case JobState::kCancelled:
    case JobState::kPreempted:
    case JobState::kLost:
    case JobState::kRejected:
      metrics_.JobEnded(tenant, queue, JobStateName(to));
      break;
    default:
      break;
  }
}

MetricsSnapshot ControlPlane::GatherMetrics() {
  MetricsSnapshot out;
  std::lock_guard<std::mutex> lock(mu_);
  out.jobs_in_memory = static_cast<int64_t>(jobs_.all.size());
  // 1. GPUs per node and model: capacity, health, and the agent's telemetry.
  std::map<std::pair<std::string, std::string>, MetricsSnapshot::GpuGroup> groups;
  std::map<std::pair<std::string, int32_t>, const Gpu*> gpu_at;  // (node, CUDA index)
  for (const auto& [name, e] : nodes_.all) {
    out.nodes.push_back({name, std::string(NodeStateName(e.node.state))});
    for (const Gpu& g : e.node.gpus) {
      gpu_at[{name, g.index}] = &g;
      MetricsSnapshot::GpuGroup& group = groups[{name, g.model}];
      group.node = name;
      group.model = g.model;
      ++group.gpus;
      group.unhealthy += g.healthy ? 0 : 1;
      group.memory_mib += g.memory_mib;
    }
    if (!e.status.is_object() || !e.status.contains("gpus") || !e.status["gpus"].is_array()) {
      continue;
    }
    for (const json& t : e.status["gpus"]) {
      if (!t.is_object()) continue;
      auto it = gpu_at.find({name, t.value("index", -1)});
      if (it == gpu_at.end()) continue;
      MetricsSnapshot::GpuGroup& group = groups[{name, it->second->model}];
      const int64_t pct = t.value("utilization_pct", int64_t{0});
      ++group.with_telemetry;
      group.utilization_pct += pct;
      group.busy += pct > 0 ? 1 : 0;
      group.memory_used_mib += t.value("memory_used_mib", int64_t{0});
    }
  }
  // 2. What placed jobs hold: a whole GPU holds all its memory, a fraction the memory it asked.
  for (const auto& [id, entry] : jobs_.active) {
    const JobEntry& j = *entry;
    if (!j.holds_capacity()) continue;
    for (const PlacedTask& t : j.placement) {
      for (size_t g = 0; g < t.gpu_indices.size() && g < t.gpu_milli.size(); ++g) {
        auto it = gpu_at.find({t.node, t.gpu_indices[g]});
        if (it == gpu_at.end()) continue;
        MetricsSnapshot::GpuGroup& group = groups[{t.node, it->second->model}];
        group.allocated_milli += t.gpu_milli[g];
        const int64_t asked = g < t.gpu_memory_mib.size() ? t.gpu_memory_mib[g] : 0;
        group.memory_allocated_mib += t.gpu_milli[g] >= 1000
                                          ? it->second->memory_mib
                                          : std::min(asked, it->second->memory_mib);
      }
    }
  }
  for (auto& [key, group] : groups) out.gpus.push_back(std::move(group));

  // 3. Queues: quota (GPUs of every model), usage and borrowing, jobs per state.
  if (dirty_ && !CompileLocked().ok()) return out;
  if (compiled_ == nullptr) return out;
  const core::QuotaTree& tree = compiled_->tree;
  core::QuotaState usage(tree, compiled_->cluster.capacity());
  std::map<std::string, std::map<std::string, int64_t>> jobs_by_queue;
  for (const auto& [id, entry] : jobs_.active) {
    const JobEntry& j = *entry;
    if (!IsFinal(j.state)) ++jobs_by_queue[j.spec.queue][std::string(JobStateName(j.state))];
    QueueId q;
    if (!j.holds_capacity() || !tree.Find(j.spec.queue, &q)) continue;
    const GpuModelId m = compiled_->cluster.FindModel(j.gpu_model);
    usage.Add(q, j.HeldQuota(m));
  }
  for (size_t i = 1; i < tree.size(); ++i) {
    const core::QuotaNode& n = tree.nodes()[i];
    if (n.is_tenant) continue;
    const QueueId id(static_cast<uint32_t>(i));
    MetricsSnapshot::QueueInfo q;
    q.tenant = tree.node(n.tenant).name;
    q.queue = n.name;
    const int64_t guaranteed = n.guaranteed[core::kDimGpu];
    q.guaranteed_milli = guaranteed >= core::kUnlimited ? 0 : guaranteed;
    q.max_milli = n.max[core::kDimGpu] >= core::kUnlimited ? -1 : n.max[core::kDimGpu];
    q.used_milli = usage.usage(id)[core::kDimGpu];
    q.borrowed_milli = usage.Borrowed(id, core::kDimGpu);
    auto it = jobs_by_queue.find(n.name);
    if (it != jobs_by_queue.end()) q.jobs_by_state = std::move(it->second);
    out.queues.push_back(std::move(q));
  }
  // 4. Services.
  for (const auto& [name, e] : services_.all) {
    MetricsSnapshot::ServiceInfo s;
    s.service = name;
    s.tenant = e.service.spec.tenant;
    s.desired = DesiredCountLocked(e);
    for (const auto& [id, st] : e.replicas) {
      s.ready += st.ready && !st.draining && !st.removed && st.ended_ms == 0 ? 1 : 0;
    }
    s.autoscaling = e.service.spec.autoscaling.has_value();
    s.panicking = e.autoscaler.panicking();
    s.scale_ups = e.scale_up.count;
    s.reclaims = e.reclaim.count;
    s.cold_starts = e.cold_start.count;
    s.scale_up_p50 = e.scale_up.Quantile(0.5);
    s.scale_up_p99 = e.scale_up.Quantile(0.99);
    s.reclaim_p50 = e.reclaim.Quantile(0.5);
    s.reclaim_p99 = e.reclaim.Quantile(0.99);
    out.services.push_back(std::move(s));
  }
  return out;
}

std::string ControlPlane::MetricsText() {
  const MetricsSnapshot snapshot = GatherMetrics();
  return metrics_.Render(snapshot, store_->stats());
}

}  // namespace arbiter::server

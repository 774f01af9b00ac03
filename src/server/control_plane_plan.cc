// ControlPlane::PlanHistory: the inputs of a what-if on recorded history (plan/whatif.h).
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>
#include <set>

#include "plan/whatif.h"
#include "server/control_plane.h"
#include "server/control_plane_helpers.h"

namespace arbiter::server {

namespace {

// The budget's period in hours: a month is counted as 30 days.
double PeriodHours(const std::string& period) {
  if (period == "day") return 24;
  if (period == "week") return 24 * 7;
  return 24 * 30;
}

// A job as the what-if sees it; the admission and the wait come from the job facts later.
plan::RecordedJob RecordedOf(const JobEntry& j) {
  plan::RecordedJob r;
  r.id = j.spec.id.value();
  r.name = j.spec.name;
  r.tenant = j.spec.tenant;
  r.queue = j.spec.queue;
  r.priority_class = j.spec.priority_class;
  r.type = j.spec.type;
  r.tasks = j.spec.tasks;
  r.resources = j.spec.resources;
  r.gpu_models = j.spec.gpu_models;
  r.walltime_seconds = j.spec.walltime_seconds;
  r.submit_ms = j.spec.submit_time;
  r.preemptions = j.preemptions;
  // The current run's admission (held_since, while it holds capacity), else its start. A job
  // pending again (preempted, requeued) has no run that counts.
  const bool finished = IsFinal(j.state) && !j.holds_capacity();
  if (!finished && !j.holds_capacity()) return r;
  if (j.holds_capacity() && j.held_since > 0) {
    r.admitted_ms = j.held_since;
  } else if (j.started_at > 0) {
    r.admitted_ms = j.started_at;
  }
  if (finished && r.admitted_ms >= 0) {
    r.ended_ms = j.finished_at > 0 ? j.finished_at : j.updated_at;
  }
  return r;
}

// Whether a job concerns the period: submitted before its end, and not finished before it began.
bool InPeriod(const JobEntry& j, int64_t since_ms, int64_t until_ms) {
  if (j.spec.submit_time >= until_ms) return false;
  if (IsFinal(j.state) && !j.holds_capacity()) {
    const TimeMs end = j.finished_at > 0 ? j.finished_at : j.updated_at;
    if (end < since_ms) return false;
    if (j.started_at == 0) return false;  // ended without running (cancelled while pending)
  }
  return j.spec.service == std::nullopt;  // services' replicas are not batch work
}

}  // namespace

Status ControlPlane::PlanHistory(const Principal& p, int64_t since_ms, int64_t until_ms,
                                 plan::History* out) {
  if (p.role != Role::kAdmin) return Forbidden("only admins may replay the cluster's history");
  if (until_ms <= since_ms) {
    return InvalidArgument("until", "the period is empty: until must be after since");
  }
  out->since_ms = since_ms;
  out->until_ms = until_ms;
  std::set<uint64_t> seen;
  bool from_store = false;
  // 1. Under the lock: the configuration, the nodes and the jobs memory holds.
  {
    std::lock_guard<std::mutex> lock(mu_);
    out->models = config_.gpu_models;
    for (const auto& [name, e] : nodes_.all) {
      out->nodes.push_back(e.node);
      auto reported = nodes_.reported.find(name);
      if (e.from_config && reported != nodes_.reported.end()) {
        Node& n = out->nodes.back();
        if (n.cpu_milli == 0) n.cpu_milli = reported->second.first;
        if (n.memory_mib == 0) n.memory_mib = reported->second.second;
      }
      // The history spans times the node was up: a cordoned or down node now replays as ready.
      out->nodes.back().state = NodeState::kReady;
    }
    for (const api::TenantConfig& t : config_.tenants) {
      for (const QueueSpec& q : t.queues) out->queues.push_back(q);
      if (t.budget && t.budget->gpu_hours > 0) {
        out->budgets.push_back(
            {t.name, static_cast<double>(t.budget->gpu_hours), PeriodHours(t.budget->period)});
      }
    }
    out->classes = config_.priority_classes;
    const api::SchedulerConfig& sc = config_.scheduler;
    out->policy = sc.scores.empty() && !sc.policy.empty() ? sc.policy : "default";
    for (const auto& [id, j] : jobs_.all) {
      if (!InPeriod(j, since_ms, until_ms)) continue;
      out->jobs.push_back(RecordedOf(j));
      seen.insert(id);
    }
    from_store = history_in_store_;
  }
  // 2. Off the lock: the finished jobs only the store holds, a page at a time.
  if (from_store) {
    store::JobQuery q;
    q.submitted_until_ms = until_ms;
    q.updated_since_ms = since_ms;
    q.limit = 1000;
    for (;;) {
      auto rows = store_->ListJobs(q);
      if (!rows.ok()) return rows.status();
      for (const store::JobRecord& row : *rows) {
        q.after_id = std::max(q.after_id, row.id);
        if (seen.count(row.id) > 0) continue;
        auto j = JobEntryFromRecord(row);
        if (!j.ok()) {
          spdlog::warn("plan: {}", j.status().ToString());
          continue;
        }
        if (!InPeriod(*j, since_ms, until_ms)) continue;
        out->jobs.push_back(RecordedOf(*j));
        seen.insert(row.id);
        if (out->jobs.size() > plan::kMaxReplayJobs) {
          return InvalidArgument(
              "since", fmt::format("more than {} jobs in the period, more than one replay takes: "
                                   "give a shorter period",
                                   plan::kMaxReplayJobs));
        }
      }
      if (rows->size() < q.limit) break;
    }
  }
  // 3. Each admission's wait and the last admission's time, from the job facts.
  auto facts = store_->JobFacts(since_ms, until_ms);
  if (!facts.ok()) return facts.status();
  std::map<uint64_t, std::pair<int64_t, int64_t>> admitted;  // job -> (wait sum, last admission)
  // How long preempted jobs took to stop: from the decision (the "preempted" fact) to their
  // release (the start of the wait that follows it), beyond their class's grace period (which a
  // job may use in full: the replay stops it at its end).
  std::map<std::string, int64_t> grace_of_class;
  for (const PriorityClass& c : out->classes) {
    grace_of_class[c.name] = SecondsToMs(c.grace_period_seconds);
  }
  std::map<uint64_t, int64_t> grace_of_job;
  for (const plan::RecordedJob& j : out->jobs) {
    auto g = grace_of_class.find(j.priority_class);
    grace_of_job[j.id] = g == grace_of_class.end() ? 0 : g->second;
  }
  std::map<uint64_t, int64_t> stopping;  // job -> its preemption's decision
  std::vector<int64_t> stops;
  for (const store::JobFactRecord& f : *facts) {
    if (f.kind == "preempted") {
      stopping[f.job_id] = f.at_ms;
      continue;
    }
    if (f.kind != "admitted" && f.kind != "unqueued") continue;
    if (auto s = stopping.find(f.job_id); s != stopping.end()) {
      auto g = grace_of_job.find(f.job_id);
      const int64_t grace = g == grace_of_job.end() ? 0 : g->second;
      if (f.since_ms >= s->second)
        stops.push_back(std::max<int64_t>(f.since_ms - s->second - grace, 0));
      stopping.erase(s);
    }
    if (f.kind != "admitted" || f.at_ms >= until_ms) continue;
    auto& [wait, last] = admitted.try_emplace(f.job_id, 0, -1).first->second;
    wait += f.at_ms - f.since_ms;
    last = std::max(last, f.at_ms);
  }
  for (plan::RecordedJob& j : out->jobs) {
    auto it = admitted.find(j.id);
    if (it == admitted.end() || j.submit_ms < since_ms || j.admitted_ms < 0) continue;
    j.recorded_wait_ms = it->second.first;
    j.admitted_ms = it->second.second;
  }
  if (!stops.empty()) {
    std::nth_element(stops.begin(), stops.begin() + static_cast<ptrdiff_t>(stops.size() / 2),
                     stops.end());
    out->stop_latency_ms = stops[stops.size() / 2];
    out->stop_latency_samples = static_cast<int64_t>(stops.size());
  }
  std::sort(out->jobs.begin(), out->jobs.end(),
            [](const plan::RecordedJob& a, const plan::RecordedJob& b) {
              return a.submit_ms != b.submit_ms ? a.submit_ms < b.submit_ms : a.id < b.id;
            });
  return Status::Ok();
}

}  // namespace arbiter::server

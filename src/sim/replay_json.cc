// A replay's report as JSON.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <queue>
#include <unordered_map>

#include "core/cycle/cycle.h"
#include "core/fairshare/fair_share.h"
#include "core/preemption/preemption.h"
#include "sim/replay.h"
#include "sim/replay_math.h"

namespace arbiter::sim {

using replay_math::Seconds;

namespace {

nlohmann::json StatsJson(const Stats& s) {
  return {{"count", s.count}, {"p50", s.p50}, {"p95", s.p95},
          {"p99", s.p99},     {"max", s.max}, {"mean", s.mean}};
}

nlohmann::json EndedJson(const std::vector<EndedJob>& jobs) {
  nlohmann::json out = nlohmann::json::array();
  for (const EndedJob& j : jobs) {
    out.push_back({{"name", j.name}, {"queue", j.queue}, {"reason", j.reason}});
  }
  return out;
}

nlohmann::json ServicesJson(const std::vector<ServiceReport>& services) {
  nlohmann::json out = nlohmann::json::array();
  for (const ServiceReport& s : services) {
    nlohmann::json series = nlohmann::json::array();
    for (double v : s.ready_series) series.push_back(std::round(v * 1e3) / 1e3);
    nlohmann::json j = {
        {"name", s.name},
        {"queue", s.queue},
        {"scaling", s.scaling},
        {"lending", s.lending},
        {"requests", s.requests},
        {"served", s.served},
        {"within_slo", s.within_slo},
        {"within_slo_pct", s.within_slo_pct},
        {"slo_latency_ms", s.slo_latency_ms},
        {"timed_out", s.timed_out},
        {"rejected", s.rejected},
        {"waiting_at_end", s.waiting_at_end},
        {"wait_seconds", StatsJson(s.wait)},
        {"latency_seconds", StatsJson(s.latency)},
        {"ready_replicas", {{"min", s.ready_min}, {"avg", s.ready_avg}, {"max", s.ready_max}}},
        {"desired_max", s.desired_max},
        {"scale_ups", s.scale_ups},
        {"scale_downs", s.scale_downs},
        {"scale_up_seconds", StatsJson(s.scale_up)},
        {"reclaim_seconds", StatsJson(s.reclaim)},
        {"reclaim_victims", s.reclaim_victims},
        {"gpu_hours", s.gpu_hours},
        {"ready_series", {{"step_seconds", s.series_step_seconds}, {"ready", series}}}};
    if (!s.note.empty()) j["note"] = s.note;
    out.push_back(std::move(j));
  }
  return out;
}

}  // namespace

nlohmann::json ReplayReportJson(const ReplayReport& r) {
  nlohmann::json queues = nlohmann::json::array();
  for (const QueueReport& q : r.queues) {
    queues.push_back({{"queue", q.name},
                      {"tenant", q.tenant},
                      {"jobs", q.jobs},
                      {"wait_seconds", StatsJson(q.wait)},
                      {"jct_seconds", StatsJson(q.jct)},
                      {"preempted", q.preempted},
                      {"gpu_share_pct", q.gpu_share_pct},
                      {"entitlement_pct", q.entitlement_pct},
                      {"share_while_waiting_pct", q.share_while_waiting_pct},
                      {"waiting_time_pct", q.waiting_time_pct}});
  }
  nlohmann::json types = nlohmann::json::array();
  for (const GroupReport& g : r.types) {
    types.push_back({{"type", g.name},
                     {"jobs", g.jobs},
                     {"wait_seconds", StatsJson(g.wait)},
                     {"jct_seconds", StatsJson(g.jct)}});
  }
  nlohmann::json alloc = nlohmann::json::array();
  // Four decimals: the series is for charts, the exact average is gpu_alloc_pct.
  for (double v : r.alloc_series.alloc_pct) alloc.push_back(std::round(v * 1e4) / 1e4);
  const nlohmann::json series = {{"step_seconds", r.alloc_series.step_seconds},
                                 {"alloc_pct", alloc}};
  nlohmann::json daily = nlohmann::json::array();
  for (double v : r.gpu_alloc_daily_pct) daily.push_back(std::round(v * 1e4) / 1e4);
  nlohmann::json out = {
      {"policy", r.policy},
      {"seed", r.seed},
      {"jobs", r.jobs},
      {"completed", r.completed},
      {"timed_out", r.timed_out},
      {"dropped", r.dropped},
      {"unfinished", r.unfinished},
      {"jobs_waited", r.jobs_waited},
      {"time_limit_reached", r.time_limit_reached},
      {"wait_seconds", StatsJson(r.wait)},
      {"jct_seconds", StatsJson(r.jct)},
      {"gpu_alloc_pct", r.gpu_alloc_pct},
      {"gpu_alloc_busy_pct", r.gpu_alloc_busy_pct},
      {"busy_hours", r.busy_hours},
      {"gpu_alloc_daily_pct", daily},
      {"gpu_hours_allocated", r.gpu_hours_allocated},
      {"gpu_hours_idle_while_waiting", r.gpu_hours_idle_while_waiting},
      {"gpu_hours_lost_to_preemption", r.gpu_hours_lost_to_preemption},
      {"preemptions", r.preemptions},
      {"preemption_decisions", r.preemption_decisions},
      {"jobs_preempted", r.jobs_preempted},
      {"preemptions_by_reason",
       {{"priority", r.preemptions_by_reason[0]},
        {"reclaim", r.preemptions_by_reason[1]},
        {"anywhere", r.preemptions_by_reason[2]}}},
      {"fairness", {{"jain", r.jain}, {"jain_while_waiting", r.jain_while_waiting}}},
      {"start_seconds", Seconds(r.start)},
      {"end_seconds", Seconds(r.end)},
      {"makespan_seconds", r.makespan_seconds},
      {"cycles", r.cycles},
      {"gpu_alloc_series", series},
      {"by_queue", queues},
      {"by_type", types},
      {"dropped_jobs", EndedJson(r.dropped_jobs)},
      {"unfinished_jobs", EndedJson(r.unfinished_jobs)}};
  if (!r.services.empty()) {
    out["gpu_hours_jobs"] = r.gpu_hours_jobs;
    out["services"] = ServicesJson(r.services);
  }
  return out;
}

}  // namespace arbiter::sim

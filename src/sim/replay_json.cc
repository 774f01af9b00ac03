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
  return {{"policy", r.policy},
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
}

}  // namespace arbiter::sim

#include "server/start_estimates.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <unordered_map>

#include "server/control_plane_helpers.h"

namespace arbiter::server {

StartEstimates::StartEstimates(store::Store* store, Options o) : store_(store), o_(o) {}

std::optional<plan::StartEstimate> StartEstimates::Cached(uint64_t id, TimeMs now) const {
  std::lock_guard<std::mutex> lock(cache_mu_);
  auto it = cache_.find(id);
  if (it == cache_.end() || now - it->second.at >= o_.cache_ttl || now < it->second.at) {
    return std::nullopt;
  }
  return it->second.estimate;
}

// Completed runs: a job's last run (its usage record of task 0 that ended last) when the job
// succeeded or timed out (it ran to its walltime) within the window. Runs that were preempted,
// cancelled or failed are not what a job of that user takes to complete.
Status StartEstimates::LoadHistory(TimeMs now) {
  const TimeMs from = now - o_.history_window;
  auto facts = store_->JobFacts(from, now + 1);
  if (!facts.ok()) return facts.status();
  std::unordered_map<uint64_t, bool> completed;
  for (const store::JobFactRecord& f : *facts) {
    if (f.at_ms < from) continue;
    if (f.kind == "succeeded" || (f.kind == "failed" && f.reason == "timeout")) {
      completed[f.job_id] = true;
    }
  }
  auto usage = store_->Usage(from, now + 1);
  if (!usage.ok()) return usage.status();
  struct Run {
    TimeMs start = 0, end = 0;
    const store::UsageRecord* record = nullptr;
  };
  std::unordered_map<uint64_t, Run> last;
  for (const store::UsageRecord& u : *usage) {
    if (u.task != 0 || !completed.contains(u.job_id) || u.end_ms <= u.start_ms) continue;
    Run& r = last[u.job_id];
    if (u.end_ms > r.end) r = {u.start_ms, u.end_ms, &u};
  }
  // The latest history_per_key runs of each user and queue (and 8 x as many of the cluster).
  std::vector<Run> runs;
  runs.reserve(last.size());
  for (const auto& [job, r] : last) runs.push_back(r);
  std::sort(runs.begin(), runs.end(), [](const Run& a, const Run& b) { return a.end > b.end; });
  plan::RunTimeHistory h;
  h.min_samples = o_.min_samples;
  for (const Run& r : runs) {
    const DurationMs d = r.end - r.start;
    std::vector<DurationMs>& user = h.by_user[r.record->tenant + "/" + r.record->user];
    if (user.size() < o_.history_per_key) user.push_back(d);
    std::vector<DurationMs>& queue = h.by_queue[r.record->queue];
    if (queue.size() < o_.history_per_key) queue.push_back(d);
    if (h.cluster.size() < 8 * o_.history_per_key) h.cluster.push_back(d);
  }
  plan::SortRunTimes(&h);
  history_ = std::move(h);
  history_loaded_ = now;
  return Status::Ok();
}

plan::StartEstimate StartEstimates::Compute(const EstimateRequest& r, TimeMs now) {
  std::lock_guard<std::mutex> lock(compute_mu_);
  // Another `why` of the same job may have computed it meanwhile.
  if (auto cached = Cached(r.job, now)) return *cached;
  if (history_loaded_ < 0 || now - history_loaded_ >= o_.history_refresh || now < history_loaded_) {
    const Status st = LoadHistory(now);
    if (!st.ok()) {
      // Estimates go on with what was loaded before (walltimes alone at first).
      spdlog::warn("expected start: reading the run-time history: {}", st.ToString());
      history_loaded_ = now;
    }
  }
  const CycleSnapshot& s = *r.snapshot;
  plan::StartEstimateInput in;
  in.cluster = s.cluster.get();
  in.tree = s.tree.get();
  in.profile = s.profile.get();
  in.running = &s.running;
  in.pending = &r.pending;
  in.constraints = &s.constraints;
  in.nominations = &s.nominations;
  in.running_owners = r.running_owners;
  in.pending_owners = r.pending_owners;
  in.pending_min_runtime = r.pending_min_runtime;
  in.pending_left_out = r.pending_left_out;
  in.recent = &r.recent;
  in.arrival_window = r.arrival_window;
  in.now = s.now;
  in.target = JobId(r.job);
  plan::StartEstimateOptions eo;
  eo.samples = o_.samples;
  eo.max_pending = o_.max_pending;
  eo.horizon = o_.horizon;
  eo.max_work = o_.max_work;
  eo.seed = r.job;  // the same job and state give the same draws
  plan::StartEstimate e = plan::EstimateStart(in, history_, eo);
  std::lock_guard<std::mutex> cache_lock(cache_mu_);
  // Entries older than the TTL are dropped as new ones come, so the cache holds at most the jobs
  // asked about in the last few seconds.
  std::erase_if(cache_, [&](const auto& kv) { return now - kv.second.at >= o_.cache_ttl; });
  cache_[r.job] = {now, e};
  return e;
}

nlohmann::json StartEstimates::ToJson(const plan::StartEstimate& e, TimeMs now,
                                      std::optional<TimeMs> reservation_start) {
  auto at = [&](const std::optional<TimeMs>& t) {
    return t ? TimeJson(*t) : nlohmann::json(nullptr);
  };
  auto from_now = [&](const std::optional<TimeMs>& t) {
    return t ? nlohmann::json(std::max<TimeMs>(0, *t - now) / 1000) : nlohmann::json(nullptr);
  };
  nlohmann::json out = {
      {"p50", at(e.p50)},
      {"p90", at(e.p90)},
      {"p50_s", from_now(e.p50)},
      {"p90_s", from_now(e.p90)},
      {"samples", e.samples},
      {"started_in_samples", e.started},
      {"run_time_source", std::string(plan::RunTimeSourceName(e.source))},
      {"reservation_start", at(reservation_start)},
      {"bounded", e.bounded()},
      {"arrivals_modelled", e.arrivals_per_draw > 0},
      // A percentile that is null is later than this many seconds from now: the horizon, or less
      // when the work bound cut draws off.
      {"simulated_s", e.simulated / 1000},
  };
  // Only the job's own figures: the bounds are named, not the other jobs' counts.
  nlohmann::json bounds = nlohmann::json::array();
  if (e.pending_replayed < e.pending_total) bounds.push_back("queue_depth");
  if (e.horizon_reached > 0) bounds.push_back("horizon");
  if (e.arrivals_for) bounds.push_back("arrivals");
  if (e.work_cut > 0) bounds.push_back("work");
  out["bounds"] = bounds;
  return out;
}

}  // namespace arbiter::server

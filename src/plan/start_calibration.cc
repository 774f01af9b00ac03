#include "plan/start_calibration.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>
#include <queue>
#include <tuple>
#include <vector>

#include "core/cycle/cycle.h"

namespace arbiter::plan {

namespace {

// SplitMix64 of the id and the seed: the sampling of the jobs to estimate.
uint64_t Mix(uint64_t x, uint64_t seed) {
  uint64_t z = x + seed * 0x9e3779b97f4a7c15ULL + 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

void InsertSorted(std::vector<DurationMs>* v, DurationMs x) {
  v->insert(std::upper_bound(v->begin(), v->end(), x), x);
}

// The value at rank ceil(p x n) of the n values sorted (1-based; the lower median at p = 0.5);
// 0 for none.
template <typename T>
T NearestRank(std::vector<T> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const auto rank = static_cast<size_t>(std::ceil(p * static_cast<double>(v.size())));
  return v[std::clamp<size_t>(rank, 1, v.size()) - 1];
}

class Calibrator {
 public:
  Calibrator(const sim::ReplayWorkload& w, const core::Profile& profile,
             const CalibrationOptions& o)
      : w_(w),
        profile_(profile),
        o_(o),
        start_(w.jobs.size(), -1),
        first_start_(w.jobs.size(), -1),
        estimate_(w.jobs.size()) {
    history_.min_samples = o.min_samples;
  }

  CalibrationReport Run() {
    sim::ReplayOptions ro = o_.replay;
    ro.on_start = [this](JobId id, TimeMs t) {
      OnStart(id, t);
      return false;
    };
    ro.before_cycle = [this](const core::CycleInput& in) { BeforeCycle(in); };
    (void)sim::RunReplay(w_, profile_, "calibrate", ro);
    return Report();
  }

 private:
  struct Estimate {
    bool made = false;
    TimeMs at = 0;
    std::optional<TimeMs> p50, p90;
  };

  void OnStart(JobId id, TimeMs t) {
    const size_t j = id.value() - 1;
    if (j >= w_.jobs.size()) return;  // a service's replica
    start_[j] = t;
    if (first_start_[j] < 0) first_start_[j] = t;
    const sim::ReplayJob& job = w_.jobs[j];
    const DurationMs wall = job.pending.walltime;
    const DurationMs run = wall > 0 ? std::min(wall, job.duration) : job.duration;
    ends_.emplace(t + run, j, t);
  }

  void BeforeCycle(const core::CycleInput& cycle) {
    const TimeMs t = cycle.now;
    const std::vector<core::RunningJob>& running = *cycle.running;
    const std::vector<core::PendingJob>& pending = *cycle.pending;
    // A job pending again after a start was preempted: that run does not complete.
    for (const core::PendingJob& p : pending) {
      const size_t j = p.id.value() - 1;
      if (j < start_.size()) start_[j] = -1;
    }
    // A diagnostic: every job's run time in the history from the start (the distribution known
    // in advance, not which job runs how long).
    if (o_.known_run_times && !seeded_) {
      seeded_ = true;
      for (size_t j = 0; j < w_.jobs.size(); ++j) {
        const sim::ReplayJob& job = w_.jobs[j];
        const sim::ReplayQueue& q = w_.queues[job.queue];
        InsertSorted(&history_.by_user[q.tenant], job.duration);
        InsertSorted(&history_.by_queue[q.name], job.duration);
        InsertSorted(&history_.cluster, job.duration);
      }
    }
    // Runs completed by now join the history.
    while (!ends_.empty() && std::get<0>(ends_.top()) <= t) {
      const auto [end, j, started] = ends_.top();
      ends_.pop();
      if (start_[j] != started) continue;
      const DurationMs run = end - started;
      const sim::ReplayJob& job = w_.jobs[j];
      const sim::ReplayQueue& q = w_.queues[job.queue];
      InsertSorted(&history_.by_user[q.tenant], run);
      InsertSorted(&history_.by_queue[q.name], run);
      InsertSorted(&history_.cluster, run);
    }
    std::vector<size_t> todo;
    for (const core::PendingJob& p : pending) {
      const size_t j = p.id.value() - 1;
      if (j >= w_.jobs.size() || estimate_[j].made || p.submit_time >= t) continue;
      if (first_start_[j] >= 0) continue;  // estimate only before the first start
      estimate_[j].made = true;            // considered once, sampled or not
      if (Mix(j, o_.replay.seed) % static_cast<uint64_t>(std::max(o_.every, 1)) != 0) continue;
      if (made_ + static_cast<int32_t>(todo.size()) < o_.max_jobs) todo.push_back(j);
    }
    if (todo.empty()) return;
    StartEstimateInput in;
    in.cluster = w_.cluster;
    in.tree = w_.tree;
    in.profile = &profile_;
    in.running = &running;
    in.pending = &pending;
    in.constraints = w_.constraints.empty() ? nullptr : &w_.constraints;
    // The jobs that arrived in the last window (their arrival: max(submit, the trace's start)).
    recent_.clear();
    if (o_.arrival_window > 0 && !w_.jobs.empty()) {
      const TimeMs first = std::max(w_.jobs.front().pending.submit_time, w_.start);
      const DurationMs window = std::min<DurationMs>(o_.arrival_window, t - first);
      for (size_t j = 0; window > 0 && j < w_.jobs.size(); ++j) {
        const TimeMs at = std::max(w_.jobs[j].pending.submit_time, w_.start);
        if (at > t) break;
        if (at < t - window) continue;
        RecentArrival r;
        r.job = w_.jobs[j].pending;
        r.job.submit_time = at;
        r.owner = OwnerOf(JobId(j + 1));
        r.min_runtime = w_.jobs[j].min_runtime;
        recent_.push_back(std::move(r));
      }
      in.recent = &recent_;
      in.arrival_window = window;
    }
    if (o_.carry_cycle_state) {
      in.nominations = cycle.nominations;
      in.usage_history = cycle.usage_history;
      in.distribution = cycle.distribution;
    }
    in.now = t;
    in.cycle_seed = o_.replay.seed;
    for (const core::RunningJob& r : running) in.running_owners.push_back(OwnerOf(r.id));
    for (const core::PendingJob& p : pending) {
      in.pending_owners.push_back(OwnerOf(p.id));
      in.pending_min_runtime.push_back(MinRuntimeOf(p.id));
    }
    for (size_t j : todo) {
      if (made_ >= o_.max_jobs) break;
      in.target = JobId(j + 1);
      StartEstimateOptions eo = o_.estimate;
      eo.seed = Mix(j, o_.estimate.seed);
      const StartEstimate e = EstimateStart(in, history_, eo);
      Estimate& s = estimate_[j];
      s.at = t;
      s.p50 = e.p50;
      s.p90 = e.p90;
      estimated_.push_back(j);
      ++made_;
      if (e.bounded()) ++bounded_;
      if (e.work_cut > 0) ++work_cut_;
      work_.push_back(e.work);
      ++sources_[static_cast<size_t>(e.source)];
    }
  }

  JobOwner OwnerOf(JobId id) const {
    const size_t j = id.value() - 1;
    if (j >= w_.jobs.size()) return {};
    const sim::ReplayQueue& q = w_.queues[w_.jobs[j].queue];
    return {q.tenant, q.name};
  }

  DurationMs MinRuntimeOf(JobId id) const {
    const size_t j = id.value() - 1;
    return j < w_.jobs.size() ? w_.jobs[j].min_runtime : SecondsToMs(300);
  }

  CalibrationReport Report() const {
    CalibrationReport r;
    r.jobs = static_cast<int64_t>(w_.jobs.size());
    for (size_t j = 0; j < w_.jobs.size(); ++j) {
      if (!estimate_[j].made && first_start_[j] >= 0) ++r.started_at_once;
    }
    r.estimated = static_cast<int64_t>(estimated_.size());
    r.bounded = bounded_;
    r.work_cut = work_cut_;
    r.work_median = NearestRank(work_, 0.5);
    r.work_p90 = NearestRank(work_, 0.9);
    r.work_max = NearestRank(work_, 1.0);
    r.sources = sources_;
    std::vector<double> waits;
    std::vector<double> errors;
    const TimeMs horizon = o_.estimate.horizon;
    for (size_t j : estimated_) {
      const Estimate& e = estimate_[j];
      const TimeMs actual = first_start_[j];
      if (actual < 0) {
        ++r.unfinished;
        continue;
      }
      ++r.scored;
      if (!e.p50 || actual <= *e.p50) ++r.before_p50;
      if (!e.p90 || actual <= *e.p90) ++r.before_p90;
      waits.push_back(static_cast<double>(actual - w_.jobs[j].pending.submit_time) / 1000.0);
      const TimeMs p50 = e.p50 ? *e.p50 : e.at + horizon;
      errors.push_back(static_cast<double>(p50 - actual) / 1000.0);
    }
    if (r.scored > 0) {
      r.p50_hit_pct = 100.0 * static_cast<double>(r.before_p50) / static_cast<double>(r.scored);
      r.p90_hit_pct = 100.0 * static_cast<double>(r.before_p90) / static_cast<double>(r.scored);
    }
    r.actual_wait_median_s = NearestRank(std::move(waits), 0.5);
    r.p50_error_median_s = NearestRank(std::move(errors), 0.5);
    return r;
  }

  const sim::ReplayWorkload& w_;
  const core::Profile& profile_;
  const CalibrationOptions& o_;
  RunTimeHistory history_;
  std::vector<TimeMs> start_;        // the current run's start (-1: not running)
  std::vector<TimeMs> first_start_;  // -1: never started
  std::vector<Estimate> estimate_;
  std::vector<size_t> estimated_;
  std::vector<RecentArrival> recent_;  // the current estimates' (BeforeCycle)
  bool seeded_ = false;                // known_run_times applied
  // (end, job, start) of runs in progress, earliest end first.
  std::priority_queue<std::tuple<TimeMs, size_t, TimeMs>,
                      std::vector<std::tuple<TimeMs, size_t, TimeMs>>, std::greater<>>
      ends_;
  int32_t made_ = 0;
  int64_t bounded_ = 0;
  int64_t work_cut_ = 0;
  std::vector<int64_t> work_;  // each estimate's
  std::array<int64_t, kRunTimeSources> sources_{};
};

}  // namespace

CalibrationReport Calibrate(const sim::ReplayWorkload& workload, const core::Profile& profile,
                            const CalibrationOptions& options) {
  Calibrator c(workload, profile, options);
  return c.Run();
}

}  // namespace arbiter::plan

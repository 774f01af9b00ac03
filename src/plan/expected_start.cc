#include "plan/expected_start.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <unordered_map>

#include "common/check.h"
#include "common/rng.h"
#include "sim/replay.h"

namespace arbiter::plan {

std::string_view RunTimeSourceName(RunTimeSource s) {
  switch (s) {
    case RunTimeSource::kUser:
      return "user";
    case RunTimeSource::kQueue:
      return "queue";
    case RunTimeSource::kCluster:
      return "cluster";
    case RunTimeSource::kWalltime:
      return "walltime";
    case RunTimeSource::kNone:
      break;
  }
  return "none";
}

void SortRunTimes(RunTimeHistory* h) {
  for (auto* m : {&h->by_user, &h->by_queue}) {
    for (auto& [key, v] : *m) std::sort(v.begin(), v.end());
  }
  std::sort(h->cluster.begin(), h->cluster.end());
}

std::vector<size_t> SelectPending(const std::vector<core::PendingJob>& pending, JobId target,
                                  size_t max_pending) {
  std::vector<size_t> order(pending.size());
  std::iota(order.begin(), order.end(), size_t{0});
  auto before = [&](size_t a, size_t b) {
    const core::PendingJob& x = pending[a];
    const core::PendingJob& y = pending[b];
    if (x.priority != y.priority) return x.priority > y.priority;
    if (x.submit_time != y.submit_time) return x.submit_time < y.submit_time;
    return x.id < y.id;
  };
  const size_t keep = std::min(std::max<size_t>(max_pending, 1), order.size());
  std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(keep), order.end(),
                    before);
  order.resize(keep);
  const bool has_target =
      std::any_of(order.begin(), order.end(), [&](size_t i) { return pending[i].id == target; });
  if (!has_target && !order.empty()) {
    for (size_t i = 0; i < pending.size(); ++i) {
      if (pending[i].id == target) order.back() = i;
    }
  }
  return order;
}

namespace {

// The samples a job's run times come from, and which source they are.
struct Samples {
  RunTimeSource source = RunTimeSource::kNone;
  const std::vector<DurationMs>* values = nullptr;  // kUser, kQueue, kCluster
  double mean = 0;
};

Samples SamplesOf(const JobOwner& owner, const RunTimeHistory& h, DurationMs walltime) {
  Samples s;
  auto pick = [&](const std::vector<DurationMs>* v, RunTimeSource src) {
    s.source = src;
    s.values = v;
    s.mean = std::accumulate(v->begin(), v->end(), 0.0) / static_cast<double>(v->size());
  };
  const size_t min = std::max<size_t>(h.min_samples, 1);
  auto u = h.by_user.find(owner.user);
  auto q = h.by_queue.find(owner.queue);
  if (u != h.by_user.end() && u->second.size() >= min) {
    pick(&u->second, RunTimeSource::kUser);
  } else if (q != h.by_queue.end() && q->second.size() >= min) {
    pick(&q->second, RunTimeSource::kQueue);
  } else if (!h.cluster.empty()) {
    pick(&h.cluster, RunTimeSource::kCluster);
  } else if (walltime > 0) {
    s.source = RunTimeSource::kWalltime;
  }
  return s;
}

// The remaining time of a job that has outlived every sample: scale x (1/u - 1), u uniform in
// (0, 1], the residual life of a Pareto tail of index 1 (median: scale; P90: 9 x scale), with
// scale = max(elapsed, the samples' mean). Run times are heavy-tailed and the completed runs a
// history holds are biased short (the long ones are still running), so a job that has run longer
// than all of them is expected to run about as long again; at least 1 s, at most `never`.
DurationMs ParetoTail(Rng& rng, double scale, DurationMs never) {
  const double u = 1.0 - rng.UniformDouble();  // (0, 1]
  const double r = scale * (1.0 / u - 1.0);
  return std::clamp<DurationMs>(static_cast<DurationMs>(std::min(r, static_cast<double>(never))),
                                1000, never);
}

// A draw of the remaining run time of a job that has run `elapsed` (0 for a pending job), capped
// by its walltime (0: none). `never`: the run time when nothing is known.
DurationMs DrawRemaining(Rng& rng, const Samples& s, DurationMs elapsed, DurationMs walltime,
                         DurationMs never) {
  DurationMs remaining = never;
  if (s.values != nullptr) {
    // Uniform over the samples longer than elapsed: the values are sorted, so those are a suffix.
    const std::vector<DurationMs>& v = *s.values;
    const auto first = std::upper_bound(v.begin(), v.end(), elapsed);
    const auto n = static_cast<uint64_t>(v.end() - first);
    remaining = n > 0 ? first[static_cast<std::ptrdiff_t>(rng.Uniform(n))] - elapsed
                      : ParetoTail(rng, std::max(static_cast<double>(elapsed), s.mean), never);
  }
  if (walltime > 0) remaining = std::min(remaining, std::max<DurationMs>(walltime - elapsed, 1000));
  return std::max<DurationMs>(remaining, 1);
}

// Nearest rank: the value at rank ceil(p x n) of the n draws (1-based), the draws that never
// started ranked last (absent).
std::optional<TimeMs> Percentile(const std::vector<TimeMs>& started, size_t draws, double p) {
  const auto rank = static_cast<size_t>(std::ceil(p * static_cast<double>(draws)));
  if (rank == 0 || rank > started.size()) return std::nullopt;
  return started[rank - 1];
}

// The workload of one estimate: running jobs seated first, then the pending jobs replayed, with
// ids 1..n in that order. Durations are set per draw.
struct Built {
  sim::ReplayWorkload w;
  std::vector<Samples> samples;        // per workload job
  std::vector<DurationMs> elapsed;     // per workload job (0 for pending)
  std::vector<DurationMs> walltime;    // per workload job: the cap of its run time (0: none)
  std::vector<DurationMs> grace_only;  // > 0: a job being stopped, ends within this
  JobId target;
};

DurationMs QueueDefaultWalltime(const core::QuotaTree& tree, QueueId q) {
  return SecondsToMs(tree.node(q).default_walltime_seconds);
}

Built Build(const StartEstimateInput& in, const RunTimeHistory& h,
            const std::vector<size_t>& chosen) {
  Built b;
  sim::ReplayWorkload& w = b.w;
  w.cluster = in.cluster;
  w.tree = in.tree;
  w.start = in.now;
  if (in.constraints != nullptr) w.constraints = *in.constraints;
  std::unordered_map<uint32_t, uint32_t> queue_index;
  auto queue_of = [&](QueueId q) {
    auto [it, added] = queue_index.try_emplace(q.value(), static_cast<uint32_t>(w.queues.size()));
    if (added) {
      sim::ReplayQueue rq;
      rq.id = q;
      rq.name = in.tree->node(q).name;
      w.queues.push_back(std::move(rq));
    }
    return it->second;
  };
  auto add = [&](sim::ReplayJob job, const JobOwner& owner, DurationMs elapsed, DurationMs cap) {
    job.pending.id = JobId(w.jobs.size() + 1);
    job.queue = queue_of(job.pending.queue);
    b.samples.push_back(SamplesOf(owner, h, cap));
    b.elapsed.push_back(elapsed);
    b.walltime.push_back(cap);
    b.grace_only.push_back(0);
    w.jobs.push_back(std::move(job));
  };
  for (size_t i = 0; i < in.running->size(); ++i) {
    const core::RunningJob& r = (*in.running)[i];
    sim::ReplayJob job;
    job.name = fmt::format("running-{}", r.id.value());
    job.pending.queue = r.queue;
    job.pending.priority = r.priority;
    job.pending.preemptible = r.preemptible;
    job.pending.submit_time = std::min(r.start_time, in.now);
    job.pending.grace_period = r.grace_period;
    job.min_runtime = r.min_runtime;
    job.grace_period = r.grace_period;
    job.running = r;
    const DurationMs cap = r.walltime > 0 ? r.walltime : QueueDefaultWalltime(*in.tree, r.queue);
    add(std::move(job), in.running_owners[i], std::max<DurationMs>(0, in.now - r.start_time), cap);
    if (r.terminating) b.grace_only.back() = std::max<DurationMs>(r.grace_period, 1000);
  }
  for (size_t i : chosen) {
    const core::PendingJob& p = (*in.pending)[i];
    sim::ReplayJob job;
    job.name = fmt::format("pending-{}", p.id.value());
    job.pending = p;
    job.min_runtime = in.pending_min_runtime.empty() ? SecondsToMs(300) : in.pending_min_runtime[i];
    job.grace_period = p.grace_period;
    const bool target = p.id == in.target;
    const DurationMs cap = p.walltime > 0 ? p.walltime : QueueDefaultWalltime(*in.tree, p.queue);
    add(std::move(job), in.pending_owners[i], 0, cap);
    if (target) b.target = w.jobs.back().pending.id;
  }
  // The typical tasks, as a cycle derives them from its pending jobs (fgd's distribution).
  if (in.profile->needs_distribution()) {
    std::vector<core::TaskClass> tasks;
    for (size_t i : chosen) {
      const core::PendingJob& p = (*in.pending)[i];
      core::TaskClass c;
      c.cpu_milli = p.resources.cpu_milli;
      c.gpus = p.resources.gpus;
      c.gpu_milli = p.resources.gpus > 0 ? p.resources.gpu_milli : 0;
      c.model = p.models.empty() ? core::kNoModel : p.models.front();
      c.memory_mib = p.resources.memory_mib;
      tasks.push_back(c);
    }
    w.typical = core::TaskDistribution::FromTasks(tasks);
  }
  return b;
}

std::string BoundNote(const StartEstimate& e, DurationMs horizon) {
  std::vector<std::string> parts;
  if (e.pending_replayed < e.pending_total) {
    parts.push_back(fmt::format("replayed the first {} of {} pending jobs", e.pending_replayed,
                                e.pending_total));
  }
  if (e.horizon_reached > 0) {
    parts.push_back(fmt::format("{} of {} draws reached the horizon of {} h", e.horizon_reached,
                                e.samples, horizon / 3'600'000));
  }
  return fmt::format("{}", fmt::join(parts, "; "));
}

}  // namespace

StartEstimate EstimateStart(const StartEstimateInput& in, const RunTimeHistory& history,
                            const StartEstimateOptions& o) {
  ARBITER_CHECK(in.cluster != nullptr && in.tree != nullptr && in.profile != nullptr &&
                    in.running != nullptr && in.pending != nullptr,
                "EstimateStart needs the cluster, tree, profile and jobs");
  ARBITER_CHECK(in.running_owners.size() == in.running->size() &&
                    in.pending_owners.size() == in.pending->size(),
                "EstimateStart needs an owner per job");
  StartEstimate e;
  const auto it = std::find_if(in.pending->begin(), in.pending->end(),
                               [&](const core::PendingJob& p) { return p.id == in.target; });
  if (it == in.pending->end()) return e;
  e.found = true;
  const std::vector<size_t> chosen = SelectPending(*in.pending, in.target, o.max_pending);
  e.pending_total = in.pending->size() + in.pending_left_out;
  e.pending_replayed = chosen.size();
  Built b = Build(in, history, chosen);
  for (size_t j = 0; j < b.samples.size(); ++j) {
    if (b.grace_only[j] > 0) continue;
    ++e.sources[static_cast<size_t>(b.samples[j].source)];
  }
  // The most used source; ties go to the more specific (the lower).
  size_t best = static_cast<size_t>(RunTimeSource::kNone);
  for (size_t s = 0; s < kRunTimeSources; ++s) {
    if (e.sources[s] > e.sources[best] || (e.sources[s] == e.sources[best] && s < best)) best = s;
  }
  e.source = static_cast<RunTimeSource>(best);

  const DurationMs horizon = std::max<DurationMs>(o.horizon, 1000);
  const DurationMs never = 2 * horizon;  // no samples and no walltime: runs past the horizon
  Rng rng(o.seed);
  sim::ReplayOptions ro;
  ro.cycle_interval = std::max<DurationMs>(o.cycle_interval, 1);
  ro.time_limit = in.now + horizon;
  ro.seed = in.cycle_seed;  // the cycles decide as the driver's; the draws use o.seed
  ro.max_series_points = 2;
  const int32_t draws = std::max(o.samples, 1);
  for (int32_t d = 0; d < draws; ++d) {
    for (size_t j = 0; j < b.w.jobs.size(); ++j) {
      sim::ReplayJob& job = b.w.jobs[j];
      DurationMs remaining = b.grace_only[j] > 0 ? b.grace_only[j]
                                                 : DrawRemaining(rng, b.samples[j], b.elapsed[j],
                                                                 b.walltime[j], never);
      // A seated job ends at start_time + duration; a pending one runs `duration` once started.
      job.duration = b.elapsed[j] + remaining;
    }
    std::optional<TimeMs> start;
    ro.on_start = [&](JobId id, TimeMs t) {
      if (id != b.target) return false;
      start = t;
      return true;
    };
    (void)sim::RunReplay(b.w, *in.profile, "estimate", ro);
    if (start) {
      e.starts.push_back(*start);
    } else {
      ++e.horizon_reached;
    }
  }
  std::sort(e.starts.begin(), e.starts.end());
  e.samples = draws;
  e.started = static_cast<int32_t>(e.starts.size());
  e.p50 = Percentile(e.starts, static_cast<size_t>(draws), 0.5);
  e.p90 = Percentile(e.starts, static_cast<size_t>(draws), 0.9);
  e.bound_note = BoundNote(e, horizon);
  return e;
}

}  // namespace arbiter::plan

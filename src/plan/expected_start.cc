#include "plan/expected_start.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <unordered_map>

#include "common/check.h"
#include "common/rng.h"
#include "core/cycle/cycle.h"
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

RunTimeDistribution KaplanMeier(const std::vector<DurationMs>& events,
                                std::vector<DurationMs> censored) {
  RunTimeDistribution d;
  std::sort(censored.begin(), censored.end());
  d.mean = events.empty() ? 0.0
                          : std::accumulate(events.begin(), events.end(), 0.0) /
                                static_cast<double>(events.size());
  d.longest = std::max(events.empty() ? 0 : events.back(), censored.empty() ? 0 : censored.back());
  size_t at_risk = events.size() + censored.size();
  double survival = 1.0;
  size_t e = 0;
  size_t c = 0;
  while (e < events.size()) {
    const DurationMs t = events[e];
    // Runs censored before t left the risk set; a censored run at t is still at risk at t.
    while (c < censored.size() && censored[c] < t) {
      ++c;
      --at_risk;
    }
    size_t deaths = 0;
    while (e < events.size() && events[e] == t) {
      ++e;
      ++deaths;
    }
    survival *= 1.0 - static_cast<double>(deaths) / static_cast<double>(at_risk);
    at_risk -= deaths;
    d.times.push_back(t);
    d.cdf.push_back(1.0 - survival);
  }
  return d;
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
  const RunTimeDistribution* dist = nullptr;  // kUser, kQueue, kCluster
};

// The distributions of one estimate, built on first use per source, with the elapsed times of the
// running jobs as censored observations of their user, queue and cluster.
class Distributions {
 public:
  Distributions(const RunTimeHistory& h, const StartEstimateInput& in) : h_(&h) {
    for (size_t i = 0; i < in.running->size(); ++i) {
      const core::RunningJob& r = (*in.running)[i];
      if (r.terminating || r.start_time > in.now) continue;
      const DurationMs elapsed = in.now - r.start_time;
      censored_user_[in.running_owners[i].user].push_back(elapsed);
      censored_queue_[in.running_owners[i].queue].push_back(elapsed);
      censored_cluster_.push_back(elapsed);
    }
  }

  Samples Of(const JobOwner& owner, DurationMs walltime) {
    Samples s;
    const size_t min = std::max<size_t>(h_->min_samples, 1);
    auto u = h_->by_user.find(owner.user);
    auto q = h_->by_queue.find(owner.queue);
    if (u != h_->by_user.end() && u->second.size() >= min) {
      s.source = RunTimeSource::kUser;
      s.dist = &Get(users_, owner.user, u->second, censored_user_);
    } else if (q != h_->by_queue.end() && q->second.size() >= min) {
      s.source = RunTimeSource::kQueue;
      s.dist = &Get(queues_, owner.queue, q->second, censored_queue_);
    } else if (!h_->cluster.empty()) {
      s.source = RunTimeSource::kCluster;
      if (!cluster_) cluster_ = KaplanMeier(h_->cluster, censored_cluster_);
      s.dist = &*cluster_;
    } else if (walltime > 0) {
      s.source = RunTimeSource::kWalltime;
    }
    return s;
  }

 private:
  using Censored = std::unordered_map<std::string, std::vector<DurationMs>>;
  const RunTimeDistribution& Get(std::unordered_map<std::string, RunTimeDistribution>& cache,
                                 const std::string& key, const std::vector<DurationMs>& events,
                                 const Censored& censored) {
    auto it = cache.find(key);
    if (it != cache.end()) return it->second;
    auto c = censored.find(key);
    return cache
        .emplace(key,
                 KaplanMeier(events, c == censored.end() ? std::vector<DurationMs>{} : c->second))
        .first->second;
  }

  const RunTimeHistory* h_;
  Censored censored_user_;
  Censored censored_queue_;
  std::vector<DurationMs> censored_cluster_;
  std::unordered_map<std::string, RunTimeDistribution> users_;
  std::unordered_map<std::string, RunTimeDistribution> queues_;
  std::optional<RunTimeDistribution> cluster_;
};

// The remaining time of a job that has outlived every sample: scale x (1/u - 1), u uniform in
// (0, 1], the residual life of a Pareto tail of index 1 (median: scale; P90: 9 x scale), with
// scale = max(elapsed, the samples' mean). Run times are heavy-tailed, so a job that has run
// longer than every run seen is expected to run about as long again; at least 1 s, at most
// `never`.
DurationMs ParetoTail(Rng& rng, double scale, DurationMs never) {
  const double u = 1.0 - rng.UniformDouble();  // (0, 1]
  const double r = scale * (1.0 / u - 1.0);
  return std::clamp<DurationMs>(static_cast<DurationMs>(std::min(r, static_cast<double>(never))),
                                1000, never);
}

// A draw of the remaining run time of a job that has run `elapsed` (0 for a pending job), capped
// by its walltime (0: none): T from the distribution conditioned on T > elapsed, minus elapsed.
// `never`: the run time when nothing is known.
DurationMs DrawRemaining(Rng& rng, const Samples& s, DurationMs elapsed, DurationMs walltime,
                         DurationMs never) {
  DurationMs remaining = never;
  if (s.dist != nullptr) {
    const RunTimeDistribution& d = *s.dist;
    // P(T <= elapsed), and u uniform in (that, 1].
    const auto first = std::upper_bound(d.times.begin(), d.times.end(), elapsed);
    const double below = first == d.times.begin() ? 0.0 : d.cdf[(first - d.times.begin()) - 1];
    const double top = d.cdf.empty() ? 0.0 : d.cdf.back();
    if (elapsed >= d.longest || below >= 1.0) {
      // It has outlived every run seen.
      remaining = ParetoTail(rng, std::max(static_cast<double>(elapsed), d.mean), never);
    } else {
      const double u = below + (1.0 - below) * (1.0 - rng.UniformDouble());  // (below, 1]
      if (u <= top && first != d.times.end()) {
        const auto i = std::lower_bound(d.cdf.begin() + (first - d.times.begin()), d.cdf.end(), u);
        const auto idx = std::min<size_t>(i - d.cdf.begin(), d.times.size() - 1);
        remaining = d.times[idx] - elapsed;
      } else {
        // Beyond the last completed run: T = longest / v, v uniform in (0, 1] (T >= longest).
        const double v = 1.0 - rng.UniformDouble();
        const double t = static_cast<double>(d.longest) / v;
        remaining = static_cast<DurationMs>(
            std::min(t - static_cast<double>(elapsed), static_cast<double>(never)));
      }
    }
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
  size_t base = 0;  // jobs of the state; drawn arrivals follow them in w.jobs
  // The templates of the arrivals to come (RecentArrival), ready to replay.
  struct Template {
    sim::ReplayJob job;
    Samples samples;
    DurationMs walltime = 0;
  };
  std::vector<Template> arrivals;
};

DurationMs QueueDefaultWalltime(const core::QuotaTree& tree, QueueId q) {
  return SecondsToMs(tree.node(q).default_walltime_seconds);
}

Built Build(const StartEstimateInput& in, Distributions& dists, const std::vector<size_t>& chosen) {
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
    b.samples.push_back(dists.Of(owner, cap));
    b.elapsed.push_back(elapsed);
    b.walltime.push_back(cap);
    b.grace_only.push_back(0);
    w.jobs.push_back(std::move(job));
  };
  std::unordered_map<uint64_t, JobId> renumbered;  // the driver's id -> the replay's
  for (size_t i = 0; i < in.running->size(); ++i) {
    const core::RunningJob& r = (*in.running)[i];
    renumbered.emplace(r.id.value(), JobId(w.jobs.size() + 1));
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
    renumbered.emplace(p.id.value(), JobId(w.jobs.size() + 1));
    const DurationMs cap = p.walltime > 0 ? p.walltime : QueueDefaultWalltime(*in.tree, p.queue);
    add(std::move(job), in.pending_owners[i], 0, cap);
    if (target) b.target = w.jobs.back().pending.id;
  }
  b.base = w.jobs.size();
  if (in.recent != nullptr && in.arrival_window > 0) {
    for (const RecentArrival& r : *in.recent) {
      Built::Template t;
      t.job.name = "arrival";
      t.job.pending = r.job;
      t.job.pending.constraints =
          in.constraints != nullptr && r.job.constraints < in.constraints->size()
              ? r.job.constraints
              : 0;
      t.job.min_runtime = r.min_runtime;
      t.job.grace_period = r.job.grace_period;
      t.job.queue = queue_of(r.job.queue);
      t.walltime =
          r.job.walltime > 0 ? r.job.walltime : QueueDefaultWalltime(*in.tree, r.job.queue);
      t.samples = dists.Of(r.owner, t.walltime);
      b.arrivals.push_back(std::move(t));
    }
  }
  // The preemptors replayed that wait for their victims, with the victims that still run.
  if (in.nominations != nullptr) {
    for (const core::Nomination& n : *in.nominations) {
      auto p = renumbered.find(n.preemptor.value());
      if (p == renumbered.end()) continue;
      core::Nomination m{p->second, {}, n.tasks, n.model};
      for (JobId v : n.victims) {
        if (auto it = renumbered.find(v.value()); it != renumbered.end()) {
          m.victims.push_back(it->second);
        }
      }
      w.nominations.push_back(std::move(m));
    }
  }
  if (in.usage_history != nullptr) w.usage_history = *in.usage_history;
  // The typical tasks: the driver's, else as a cycle derives them from its pending jobs.
  if (in.distribution != nullptr) {
    w.typical = *in.distribution;
  } else if (in.profile->needs_distribution()) {
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

// The span of arrivals a draw replays first (EstimateStart lengthens it as needed).
constexpr DurationMs kFirstArrivalSpan = SecondsToMs(3600);

// One draw's future arrivals (EstimateStart, step 3) in [now, now + until), appended to b.w.jobs
// after the state's.
void DrawArrivals(Rng& rng, const StartEstimateInput& in, Built& b, DurationMs cycle_interval,
                  DurationMs until, DurationMs never, size_t max_arrivals, StartEstimate* e) {
  b.w.jobs.resize(b.base);
  if (b.arrivals.empty()) return;
  // Poisson arrivals at the recent rate: exponential gaps of mean window / n.
  const double mean_gap =
      static_cast<double>(in.arrival_window) / static_cast<double>(b.arrivals.size());
  std::optional<DurationMs> cut;
  double at = 0;  // ms after now
  for (;;) {
    at += -std::log(1.0 - rng.UniformDouble()) * mean_gap;
    if (at >= static_cast<double>(until)) break;
    if (b.w.jobs.size() - b.base >= max_arrivals) {
      cut = static_cast<DurationMs>(at);
      break;
    }
    // Rounded up to the cycle grid from now (arrivals share cycles), and after now.
    const auto off = std::max<DurationMs>(static_cast<DurationMs>(at), 1);
    const Built::Template& tpl = b.arrivals[rng.Uniform(b.arrivals.size())];
    sim::ReplayJob job = tpl.job;
    job.pending.id = JobId(b.w.jobs.size() + 1);
    job.pending.submit_time = in.now + (off + cycle_interval - 1) / cycle_interval * cycle_interval;
    job.duration = DrawRemaining(rng, tpl.samples, 0, tpl.walltime, never);
    b.w.jobs.push_back(std::move(job));
  }
  e->arrivals_per_draw =
      std::max(e->arrivals_per_draw, static_cast<int64_t>(b.w.jobs.size() - b.base));
  if (cut) e->arrivals_for = cut;
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
  if (e.arrivals_for) {
    parts.push_back(fmt::format("arrivals modelled for the first {:.1f} h only ({} per draw)",
                                static_cast<double>(*e.arrivals_for) / 3'600'000.0,
                                e.arrivals_per_draw));
  }
  if (e.work_cut > 0) {
    parts.push_back(fmt::format(
        "{} of {} draws stopped at the work bound (the earliest after {:.1f} h)", e.work_cut,
        e.samples, static_cast<double>(e.work_cut_after.value_or(0)) / 3'600'000.0));
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
  Distributions dists(history, in);
  Built b = Build(in, dists, chosen);
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
  const int64_t draw_work = o.max_work > 0 ? std::max<int64_t>(o.max_work / draws, 1) : 0;
  TimeMs last_cycle = in.now;
  ro.before_cycle = [&](const core::CycleInput& c) { last_cycle = c.now; };
  for (int32_t d = 0; d < draws; ++d) {
    b.w.jobs.resize(b.base);  // the previous draw's arrivals go
    for (size_t j = 0; j < b.base; ++j) {
      sim::ReplayJob& job = b.w.jobs[j];
      DurationMs remaining = b.grace_only[j] > 0 ? b.grace_only[j]
                                                 : DrawRemaining(rng, b.samples[j], b.elapsed[j],
                                                                 b.walltime[j], never);
      // A seated job ends at start_time + duration; a pending one runs `duration` once started.
      job.duration = b.elapsed[j] + remaining;
    }
    // Arrivals are drawn for a first span, and the replay limited to it; only when the target has
    // not started by then is the span lengthened (x 4, up to the horizon) and the draw replayed
    // with the same arrivals and more after them (their own generator, reseeded alike), so that
    // a target that starts soon costs no more than the arrivals before it.
    const uint64_t arrivals_seed = rng.Next();
    DurationMs span = b.arrivals.empty() ? horizon : std::min(horizon, kFirstArrivalSpan);
    std::optional<TimeMs> start;
    ro.on_start = [&](JobId id, TimeMs t) {
      if (id != b.target) return false;
      start = t;
      return true;
    };
    int64_t left = draw_work;  // of this draw's work bound, all its replays together
    bool cut = false;
    for (;;) {
      Rng arrivals_rng(arrivals_seed);
      DrawArrivals(arrivals_rng, in, b, ro.cycle_interval, span, never, o.max_arrivals, &e);
      ro.time_limit = in.now + span;
      ro.max_work = left;
      const sim::ReplayReport rep = sim::RunReplay(b.w, *in.profile, "estimate", ro);
      e.work += rep.work;
      if (draw_work > 0) left = std::max<int64_t>(left - rep.work, 1);
      if (rep.work_limit_reached && !start) {
        cut = true;
        break;
      }
      if (start || span >= horizon || e.arrivals_for) break;
      span = std::min(horizon, span * 4);
    }
    if (start) {
      e.starts.push_back(*start);
    } else if (cut) {
      ++e.work_cut;
      const DurationMs reached = std::max<DurationMs>(last_cycle - in.now, 0);
      e.work_cut_after = std::min(e.work_cut_after.value_or(reached), reached);
    } else {
      ++e.horizon_reached;
    }
  }
  e.simulated = std::min(horizon, e.work_cut_after.value_or(horizon));
  std::sort(e.starts.begin(), e.starts.end());
  e.samples = draws;
  e.started = static_cast<int32_t>(e.starts.size());
  e.p50 = Percentile(e.starts, static_cast<size_t>(draws), 0.5);
  e.p90 = Percentile(e.starts, static_cast<size_t>(draws), 0.9);
  e.bound_note = BoundNote(e, horizon);
  return e;
}

}  // namespace arbiter::plan

// The expected start of a pending job: a Monte Carlo replay of the current state through the
// production scheduling cycle (sim::RunReplay, which drives core::RunCycle in virtual time), with
// the run times nobody knows yet drawn from history.
//
// Each draw:
//   0. A job's run-time distribution is the Kaplan-Meier estimate over its source's completed run
//      times and, as right-censored observations, the elapsed times of the source's jobs running
//      now (KaplanMeier below): the completed runs alone are biased short, since the long ones
//      are still running. The mass the runs in progress carry past the longest completed run is
//      a Pareto tail of index 1 from the longest observation.
//   1. Every running job gets a remaining run time. A job being stopped (preempted, cancelled)
//      ends within its grace period. Otherwise, with elapsed = now - its start, a run time
//      T > elapsed is drawn from the distribution conditioned on outlasting what it has run
//      already and remaining = T - elapsed; when it has run longer than every observation, the
//      remaining time is the residual life of a Pareto tail of index 1 with scale
//      max(elapsed, the completed runs' mean): as long again at the median, 9 x at P90. A walltime
//      (its own, else its queue's default) caps it: remaining <= walltime - elapsed (at least 1 s).
//   2. Every pending job replayed gets a run time drawn from its distribution, capped by its
//      walltime.
//   3. Jobs keep arriving, at the rate of the last `arrival_window`: a Poisson process of rate
//      (jobs submitted in the window) / window, each arrival a job drawn uniformly (with
//      replacement) from those recent submissions, at its time rounded up to the cycle interval
//      (arrivals share cycles), with a run time drawn as in 2. At most max_arrivals per draw.
//      Jobs that arrive later may start first (a higher priority, a queue further below its fair
//      share): without them the estimate is an early bound, the start if nothing else arrived.
//      A draw replays the arrivals of its first hour and, only while its target has not started,
//      a span four times as long (the same arrivals and more), up to the horizon.
//   4. The replay starts at `now` with the running jobs seated where they run and the pending jobs
//      in queue order (their own submit times and priorities); it ends when the target starts, or
//      at now + horizon (the target has not started in this draw).
// The samples of a job: its user's completed run times when there are at least min_samples of
// them, else its queue's, else the cluster's; else its walltime (every draw the same); else none
// (it runs past the horizon). Which source served each job is counted.
//
// P50 and P90 are nearest-rank percentiles over the draws, a draw where the target never started
// counting as later than any other; a percentile that falls on such a draw is absent ("after the
// horizon").
//
// Bounds: at most max_pending pending jobs are replayed (the first in the order priority (high
// first), then submit time, then id, with the target always among them); the replay stops at the
// horizon; and, when max_work is set, the draws together do at most that much work (per cycle,
// the pending jobs it considers plus the nodes: sim::ReplayOptions::max_work; each draw
// max_work / samples): a draw cut off
// by it counts as one where the target started after the virtual time it reached, so that an
// estimate's cost stays bounded whatever the queue (thousands of arrivals that pile up behind a
// job that cannot start, say). The estimate says when any bound applied.
//
// Pure: no I/O, threads or clock; the draws come from a Rng seeded with options.seed, so equal
// inputs and seed give equal estimates. Thread safety: only reads its arguments.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/ids.h"
#include "core/cluster.h"
#include "core/placement/framework.h"
#include "core/quota/quota_tree.h"
#include "core/types.h"

namespace arbiter::plan {

enum class RunTimeSource { kUser, kQueue, kCluster, kWalltime, kNone };
inline constexpr size_t kRunTimeSources = 5;
// "user", "queue", "cluster", "walltime", "none".
std::string_view RunTimeSourceName(RunTimeSource s);

// Completed run times (ms) by user and by queue, and over the whole cluster, each list sorted
// ascending (SortRunTimes). The keys are the driver's (the server's user key is "tenant/user").
struct RunTimeHistory {
  std::map<std::string, std::vector<DurationMs>> by_user;
  std::map<std::string, std::vector<DurationMs>> by_queue;
  std::vector<DurationMs> cluster;
  size_t min_samples = 5;  // a user or queue with fewer falls back to the next source
};

// The run-time distribution of one source: the Kaplan-Meier estimate over its completed run
// times (events) and the elapsed times of its jobs still running (right-censored: they will run at
// least that long). Without censored runs it is the empirical distribution of the events.
// `times` are the distinct event times ascending and `cdf[i]` = P(T <= times[i]); the mass
// 1 - cdf.back() lies beyond the last event (runs in progress outlasted every completed one).
struct RunTimeDistribution {
  std::vector<DurationMs> times;
  std::vector<double> cdf;
  DurationMs longest = 0;  // the longest observation, completed or still running
  double mean = 0;         // of the completed run times
};

// `events` sorted ascending; `censored` in any order.
RunTimeDistribution KaplanMeier(const std::vector<DurationMs>& events,
                                std::vector<DurationMs> censored);

// Sorts every list of `h` ascending, as EstimateStart requires.
void SortRunTimes(RunTimeHistory* h);

// Who a job of the state belongs to, for its run-time samples.
struct JobOwner {
  std::string user;   // a key of RunTimeHistory::by_user
  std::string queue;  // a key of RunTimeHistory::by_queue
};

// A job submitted in the window before `now`: a template of the arrivals to come.
struct RecentArrival {
  core::PendingJob job;  // as submitted (its submit_time in [now - window, now]); id unused
  JobOwner owner;
  DurationMs min_runtime = SecondsToMs(300);
};

// The state to replay: as a scheduling cycle's input (core/cycle/cycle.h). Pointers must outlive
// the call; `running_owners` and `pending_owners` are parallel to `running` and `pending`.
struct StartEstimateInput {
  const core::Cluster* cluster = nullptr;
  const core::QuotaTree* tree = nullptr;
  const core::Profile* profile = nullptr;
  const std::vector<core::RunningJob>* running = nullptr;
  const std::vector<core::PendingJob>* pending = nullptr;
  const std::vector<core::Constraints>* constraints = nullptr;  // may be null
  // The cycle's preemptors waiting for their victims (CycleInput::nominations): the replay holds
  // their capacity as the driver does. May be null: none.
  const std::vector<core::Nomination>* nominations = nullptr;
  // The cycle's decayed usage per tree node (CycleInput::usage_history); may be null: none.
  const std::vector<core::QuotaVec>* usage_history = nullptr;
  // The typical tasks the driver's cycles score against (CycleInput::distribution); null: derived
  // from the pending jobs replayed, as a cycle given none does.
  const core::TaskDistribution* distribution = nullptr;
  // The jobs submitted in the last `arrival_window` (any state now): future arrivals are drawn
  // from them (see EstimateStart). Null or empty, or a window of 0: nothing more arrives.
  const std::vector<RecentArrival>* recent = nullptr;
  DurationMs arrival_window = 0;
  std::vector<JobOwner> running_owners;
  std::vector<JobOwner> pending_owners;
  // Minimum runtime of each pending job once it starts (its priority class's), parallel to
  // `pending`; empty: 5 minutes each.
  std::vector<DurationMs> pending_min_runtime;
  TimeMs now = 0;
  uint64_t cycle_seed = 0;  // the seed of the driver's cycles (CycleInput::seed)
  JobId target;             // a job of `pending`
  // Pending jobs the driver left out before (having called SelectPending itself), counted in the
  // estimate's bound.
  size_t pending_left_out = 0;
};

struct StartEstimateOptions {
  int32_t samples = 32;                          // draws, >= 1
  size_t max_pending = 1000;                     // pending jobs replayed, >= 1
  DurationMs horizon = SecondsToMs(14 * 86400);  // virtual time each draw may run
  DurationMs cycle_interval = SecondsToMs(30);   // between cycles while jobs wait
  uint64_t seed = 1;
  size_t max_arrivals = 5000;  // future arrivals drawn per draw, at most
  // The work of all draws together, at most (see the file comment: per cycle, its pending jobs
  // plus the nodes; a unit costs 0.3 to 0.6 us on a 2-core machine, from 8 to 3,000 nodes);
  // 0: no bound.
  int64_t max_work = 0;
};

struct StartEstimate {
  bool found = false;  // the target is in `pending`; else nothing else is set
  int32_t samples = 0;
  int32_t started = 0;        // draws in which the target started within the horizon
  std::optional<TimeMs> p50;  // absent: after the horizon
  std::optional<TimeMs> p90;
  std::vector<TimeMs> starts;  // each draw's start, ascending (draws that started only)
  // The source that gave run times to the most jobs (ties: the more specific), and the count of
  // jobs per source (RunTimeSource order).
  RunTimeSource source = RunTimeSource::kNone;
  std::array<int64_t, kRunTimeSources> sources{};
  // Bounds: pending jobs left out (beyond max_pending) and draws that reached the horizon.
  size_t pending_total = 0;
  size_t pending_replayed = 0;
  int32_t horizon_reached = 0;
  // Future arrivals: the most a draw replayed (0: none modelled; a draw whose target starts early
  // replays only those of its first hour or so), and, when max_arrivals cut a draw's arrivals
  // off, how long after now.
  int64_t arrivals_per_draw = 0;
  std::optional<DurationMs> arrivals_for;
  // The work bound (max_work): the draws it cut off before their target started, and the least
  // virtual time after now that such a draw reached (their target starts later than that).
  int32_t work_cut = 0;
  std::optional<DurationMs> work_cut_after;
  // Every draw replayed at least this long after now without its target starting, or started it:
  // a percentile that is absent is later than now + simulated (the horizon, unless cut off).
  DurationMs simulated = 0;
  int64_t work = 0;  // the draws' work, as max_work counts it
  bool bounded() const {
    return pending_replayed < pending_total || horizon_reached > 0 || arrivals_for.has_value() ||
           work_cut > 0;
  }
  // A line a person can read when bounded (else empty): "replayed the first 1000 of 4200 pending
  // jobs; 3 of 32 draws reached the 14-day horizon".
  std::string bound_note;
};

// The indices of the pending jobs a draw replays: the first max_pending in queue order (priority
// high first, submit time, id), with the target's replacing the last when it is beyond them; in
// that order.
std::vector<size_t> SelectPending(const std::vector<core::PendingJob>& pending, JobId target,
                                  size_t max_pending);

// The estimate (see the file comment). ARBITER_CHECKs that the pointers are set and the owners
// parallel to the jobs.
StartEstimate EstimateStart(const StartEstimateInput& in, const RunTimeHistory& history,
                            const StartEstimateOptions& options);

}  // namespace arbiter::plan

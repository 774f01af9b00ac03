// Online trace replay: the production scheduling cycle (core::RunCycle, ApplyAdmissions,
// ApplyPreemptions) driven in virtual time, as the server drives it in real time.
//
// The loop (RunReplay), over events in time order:
//   1. At each event time, apply every event of that time: arrivals (a job joins the pending
//      list at its submit time), departures (a running job ends when its duration has elapsed:
//      completed; or when its walltime has, if shorter: timed out) and victim stops (a preempted
//      job stops when its grace period has elapsed and goes back to pending, keeping its submit
//      time; its work restarts from scratch, no checkpoints are modelled).
//   2. Run one scheduling cycle at that time, with the running and pending jobs and the
//      nominations (preemptors waiting for their victims) kept from earlier cycles.
//   3. Apply its decisions: admissions start now (a departure is scheduled); preemptions mark the
//      victims terminating (a stop is scheduled after each victim's grace period) and the
//      preemptor is nominated; nominations the cycle reports finished are dropped.
//   4. While jobs wait, another cycle runs `cycle_interval` after the last one. Such a cycle with
//      nothing changed since a cycle that decided nothing (no event, no job reaching its minimum
//      runtime, which makes it a preemption candidate, and no decayed fair-share usage) would
//      decide the same as that cycle, so it is skipped; `skip_idle_cycles = false` runs them all
//      (the same report, more cycles).
// It stops when every job has ended or been dropped, at `time_limit`, or when jobs still wait
// but nothing runs, nothing is left to arrive and the last cycle decided nothing (they can never
// start: reported unfinished, with their verdict).
//
// A job that cannot run even on the empty cluster (one scheduling cycle with only that job, on
// this policy) is dropped when it arrives, with the verdict as its reason; so is a job whose
// gpu_models are all missing from the cluster.
//
// Everything is deterministic: equal inputs, policy and seed give equal reports. The core's seed
// (CycleInput::seed, used by scores that draw lots) is the replay's seed in every cycle.
//
// Thread safety: RunReplay only reads the workload and the profile; replays of one workload may
// run on several threads at once.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/result.h"
#include "core/cluster.h"
#include "core/placement/framework.h"
#include "core/quota/quota_tree.h"
#include "core/types.h"
#include "model/priority.h"
#include "model/queue.h"
#include "sim/replay_services.h"
#include "sim/trace.h"

namespace arbiter::core {
struct CycleInput;  // core/cycle/cycle.h
}  // namespace arbiter::core

namespace arbiter::sim {

// The priority classes a replay uses when no configuration gives them:
//   critical     1000, not preemptible
//   high          500, preemptible
//   normal        100, preemptible
//   best-effort     0, preemptible, no minimum runtime
// (minimum runtime 300 s and grace period 30 s unless said).
std::vector<PriorityClass> DefaultPriorityClasses();

// The queue tree a replay uses when no configuration gives one: one tenant per trace tenant and
// under it one leaf queue per trace queue, both in order of first appearance. Each queue is
// guaranteed a share of the cluster's GPUs (any model) proportional to its share of the trace's
// GPU demand, demand = sum over its jobs of tasks x GPUs x gpu_milli x run time (the duration,
// or the walltime when shorter), rounded down to milli-GPUs; no max, no lending limit, nothing
// set on the tenants (they guarantee what their queues do). Without GPU demand, no guarantees.
std::vector<QueueSpec> DefaultQueueTree(const Trace& trace, const core::Cluster& cluster);

// One trace job compiled against the cluster, the queue tree and the priority classes.
struct ReplayJob {
  std::string name;
  core::PendingJob pending;  // as submitted: id = 1-based index, submit time in ms
  DurationMs duration = 0;
  DurationMs min_runtime = 0;
  DurationMs grace_period = 0;
  uint32_t queue = 0;          // index into ReplayWorkload::queues
  std::string dropped_reason;  // non-empty: dropped at arrival without a cycle
  // Set: the job already runs when it arrives (a replay that starts from a live state). It is
  // seated as given (placement, start time, which may be before its arrival; its id is
  // pending.id) without a cycle, and ends at running->start_time + duration, or + its walltime if
  // that is shorter (no earlier than its arrival).
  std::optional<core::RunningJob> running;
};

struct ReplayQueue {
  QueueId id;
  std::string name;
  std::string tenant;
  int64_t guaranteed_gpu_milli = 0;  // any model, plus every model's guarantee
};

// A trace ready to replay on one cluster under any number of policies. Holds pointers to the
// cluster and the tree: they must outlive it.
struct ReplayWorkload {
  const core::Cluster* cluster = nullptr;
  const core::QuotaTree* tree = nullptr;
  // Jobs submitted before `start` arrive at `start` (keeping their submit time, hence their place
  // in their queue's order): a replay of a live state starts at its `now`. A job arrives at
  // max(submit time, start).
  TimeMs start = 0;
  std::vector<ReplayJob> jobs;      // in order of arrival, then of the file
  std::vector<ReplayQueue> queues;  // the leaf queues the jobs use, in order of first use
  // The trace's typical tasks (one sample per task, the 95% most frequent shapes), which fgd
  // measures fragmentation against.
  core::TaskDistribution typical;
  // Online services (CompileServices, sim/replay_services.h); their queues are in `queues`.
  std::vector<ReplayService> services;
  // The jobs' node constraints (PendingJob::constraints indexes them; [0] unused); empty: none.
  std::vector<core::Constraints> constraints;
  // A live state's preemptors still waiting for their victims (ids of `jobs`): the first cycles
  // hold their capacity as the driver's did. Empty: none.
  std::vector<core::Nomination> nominations;
  // A live state's decayed usage per tree node (core::CycleInput::usage_history) at `start`,
  // indexed by QueueId; empty: none yet (or the tree decays nothing).
  std::vector<core::QuotaVec> usage_history;
};

// Compiles a trace. Errors name the trace's file, line and column: an unknown priority class, a
// queue the tree does not have or one that has child queues.
Result<ReplayWorkload> CompileReplay(const Trace& trace, const core::Cluster& cluster,
                                     const core::QuotaTree& tree,
                                     const std::vector<PriorityClass>& classes);

struct ReplayProgress {
  TimeMs now = 0;
  int64_t cycles = 0;
  int64_t arrived = 0;
  int64_t ended = 0;  // completed, timed out or dropped
  int64_t total = 0;
  size_t pending = 0;
  size_t running = 0;
};

// How the replay estimates when a running job without a walltime ends, for the cycle's backfill
// reservations (core::RunningJob::expected_end): which nodes free first for a blocked queue head.
enum class RuntimeEstimates {
  kNone,     // no estimate: a job without a walltime never ends for a reservation, so none is made
  kHistory,  // from its queue's history (RuntimeHistory): what the driver may know
  kOracle,   // its trace duration: an upper bound for comparison, never a policy
};

// A queue's completed run times, and the estimate of a running job's end drawn from them: the
// median of the completed run times longer than what the job has already run (the run time of a
// job known to have run `elapsed` is one of those), when at least kMinSamples are; otherwise
// `elapsed` more (a job that ran long tends to run long). Never earlier than `now`.
class RuntimeHistory {
 public:
  static constexpr size_t kMinSamples = 3;
  void Add(DurationMs run_time);
  TimeMs ExpectedEnd(TimeMs start, TimeMs now) const;
  size_t size() const { return sorted_.size(); }

 private:
  std::vector<DurationMs> sorted_;
};

struct ReplayOptions {
  DurationMs cycle_interval = SecondsToMs(60);  // > 0
  TimeMs time_limit = 0;                        // virtual ms; 0: none
  uint64_t seed = 42;
  bool preemption = true;
  bool skip_idle_cycles = true;
  RuntimeEstimates runtime_estimates = RuntimeEstimates::kNone;
  // Added to every preempted job's grace period: how long a real stop takes after the decision
  // (the node stopping the processes and reporting their exit) while its preemptor waits. >= 0.
  DurationMs stop_latency = 0;
  // Where each cycle's typical tasks (fgd, fgd-plus) come from: the whole workload
  // (ReplayWorkload::typical, what an offline experiment knows), or, as the server's cycle does,
  // the cycle's own pending jobs (CycleInput::distribution unset).
  bool typical_from_pending = false;
  // Called every `progress_every` cycles (and at the end) when set.
  std::function<void(const ReplayProgress&)> progress;
  int64_t progress_every = 100;
  // Most points of each GPU allocation time series (ReplayReport::alloc_series and
  // arrival_alloc_series), >= 2.
  size_t max_series_points = 1000;
  // Services: a replica is ready (serves requests) this long after it is placed.
  DurationMs replica_startup = SecondsToMs(60);
  // >= 0: every service runs this many replicas throughout, without autoscaling (the static arm
  // of a comparison); -1: as each service's spec says.
  int32_t static_replicas = -1;
  // Fill ReplayReport::job_results (one per workload job).
  bool job_results = false;
  // Called at every start of a job (an admission, or a seated running job) with its id and the
  // time; returning true ends the replay after that time's cycle (as at a time limit, without
  // time_limit_reached).
  std::function<bool(JobId, TimeMs)> on_start;
  // Called before every cycle with the input it is given (valid during the call only).
  std::function<void(const core::CycleInput&)> before_cycle;
  // A bound on the replay's work: per cycle, the pending jobs it considers plus the cluster's
  // nodes (what a cycle costs grows with both), summed over the cycles. The replay ends after the
  // cycle that reaches it, with ReplayReport::work_limit_reached. 0: none.
  int64_t max_work = 0;
};

// The GPU allocation over time, in equal steps from the first submit: point i is the
// time-averaged allocated GPU milli / the cluster's GPU milli over [start + i x step,
// start + (i + 1) x step), percent (the last step ends at the report's end). The step is the
// smallest power-of-two number of seconds that keeps the series within
// ReplayOptions::max_series_points: the replay starts at 1 s steps and, whenever the run would
// outgrow the series, doubles the step and merges neighbouring pairs, exactly (integer
// milli-GPU x ms integrals), so the series depends only on the run, not on when cycles ran.
struct AllocSeries {
  double step_seconds = 1;
  double span_seconds = 0;  // from the start to the series' end
  std::vector<double> alloc_pct;
};

// Builds an AllocSeries from a piecewise-constant allocation, in bounded memory (at most
// max_points integrals, whatever the run's length).
class AllocSeriesBuilder {
 public:
  // start: the series' origin; capacity_milli: the cluster's GPU milli; max_points >= 2; the
  // series ends at `until` at the latest (what is added after it is left out).
  AllocSeriesBuilder(TimeMs start, int64_t capacity_milli, size_t max_points,
                     TimeMs until = std::numeric_limits<TimeMs>::max());
  // The allocation was `alloc_milli` over [from, to); start <= from, intervals in time order.
  void Add(TimeMs from, TimeMs to, int64_t alloc_milli);
  // The series up to `end` (or `until` when earlier; empty when end <= start).
  AllocSeries Finish(TimeMs end) const;

 private:
  __extension__ using Integral = __int128;  // milli-GPU x ms
  void Fit(TimeMs to);                      // doubles the step until [start, to) fits

  TimeMs start_;
  int64_t capacity_;
  size_t max_points_;
  TimeMs until_;
  DurationMs step_ = 1000;
  std::vector<Integral> integral_;
};

// The complementary distribution of waits, in jobs: (x, how many values are greater than x) at
// x = 0 and at every distinct value, ascending (the last count is 0); at most `max_points` of
// them when there are more, evenly spaced by index, the first and the last kept. Empty for no
// values. As ReplayReport::wait_survival.
std::vector<std::pair<double, int64_t>> SurvivalCurve(std::vector<double> values,
                                                      size_t max_points = 200);

// Percentiles by nearest rank (the value at rank ceil(p/100 x n) of the sorted values), seconds.
struct Stats {
  int64_t count = 0;
  double p50 = 0;
  double p95 = 0;
  double p99 = 0;
  double max = 0;
  double mean = 0;
  static Stats Of(std::vector<double> values);
};

struct GroupReport {
  std::string name;
  int64_t jobs = 0;
  Stats wait;  // jobs that started at least once
  Stats jct;   // jobs that ended (completed or timed out)
};

struct QueueReport {
  std::string name;
  std::string tenant;
  int64_t jobs = 0;
  Stats wait;
  Stats jct;
  int64_t preempted = 0;  // times its jobs were preempted
  // Time-averaged share of the cluster's GPUs over the makespan, and over the time the queue had
  // jobs waiting; entitlement = its guaranteed share of the cluster's GPUs. Percent.
  double gpu_share_pct = 0;
  double entitlement_pct = 0;
  double share_while_waiting_pct = 0;
  double waiting_time_pct = 0;  // of the makespan, with at least one job waiting
};

// One service's figures over the replay (docs/simulator.md, "Services in the replay").
struct ServiceReport {
  std::string name;
  std::string queue;
  std::string scaling;  // "autoscaled 0..8", "fixed 3", "static 3"
  std::string lending;  // how its queue lends its idle guarantee
  std::string note;     // non-empty: why no replica could be placed
  int64_t slo_latency_ms = 0;
  int64_t requests = 0;  // arrived
  int64_t served = 0;
  int64_t within_slo = 0;
  int64_t timed_out = 0;
  int64_t rejected = 0;
  int64_t waiting_at_end = 0;
  double within_slo_pct = 0;  // of the requests that arrived
  Stats wait;                 // seconds, served requests
  Stats latency;              // seconds: wait + service time
  // Ready replicas, sampled every second of the service's run: min, time-averaged, max; and the
  // most replicas asked for at once.
  int32_t ready_min = 0;
  double ready_avg = 0;
  int32_t ready_max = 0;
  int32_t desired_max = 0;
  int64_t scale_ups = 0;    // decisions that raised the count
  int64_t scale_downs = 0;  // decisions that lowered it
  Stats scale_up;           // seconds from the decision (submission) to ready, per replica
  Stats reclaim;            // seconds from a reclaim decision for a replica to its placement
  int64_t reclaim_victims = 0;
  double gpu_hours = 0;  // allocated to its replicas, ready or not
  // Ready replicas over time: the average of each step of `series_step_seconds` from the
  // replay's start.
  double series_step_seconds = 1;
  std::vector<double> ready_series;
};

// One job's outcome, for callers that group jobs their own way (ReplayOptions::job_results).
struct JobResult {
  bool started = false;   // started at least once
  bool ended = false;     // completed or timed out
  bool dropped = false;   // dropped at arrival
  DurationMs wait = 0;    // total time pending (until the end, for a job still pending)
  int32_t preempted = 0;  // times preempted
};

struct EndedJob {
  std::string name;
  std::string queue;
  std::string reason;
};

struct ReplayReport {
  std::string policy;
  uint64_t seed = 0;
  int64_t jobs = 0;
  int64_t completed = 0;
  int64_t timed_out = 0;
  int64_t dropped = 0;
  int64_t unfinished = 0;   // still pending or running at the end
  int64_t jobs_waited = 0;  // started after waiting at all (wait > 0)
  bool time_limit_reached = false;
  bool work_limit_reached = false;  // ReplayOptions::max_work ended it
  int64_t work = 0;                 // its work, as ReplayOptions::max_work counts it
  Stats wait;
  Stats jct;
  // The wait distribution of the jobs that started: (wait seconds x, jobs that waited longer than
  // x), SurvivalCurve() of `wait`'s values; empty when no job started.
  std::vector<std::pair<double, int64_t>> wait_survival;
  // GPU allocation over the whole run, and over the arrivals only (from the first to the last
  // submit time, at a finer step when the run lasts longer; empty when every job arrives at
  // once).
  AllocSeries alloc_series;
  AllocSeries arrival_alloc_series;
  std::vector<QueueReport> queues;
  std::vector<GroupReport> types;  // job types that occur, in JobType order
  // Time-averaged allocated GPU milli / the cluster's GPU milli over the makespan, percent.
  double gpu_alloc_pct = 0;
  // The same over the busy window only: from the first submit to the last time a job was waiting
  // or still to arrive (busy_hours long), where the average says how well the cluster was used
  // while there was work for it; a long job running on alone afterwards does not dilute it.
  double gpu_alloc_busy_pct = 0;
  double busy_hours = 0;
  // Per day since the first submit (the last day over its part before the end), percent.
  std::vector<double> gpu_alloc_daily_pct;
  double gpu_hours_allocated = 0;
  double gpu_hours_jobs = 0;  // allocated to the trace's jobs (all but services' replicas)
  double gpu_hours_idle_while_waiting = 0;  // unallocated GPU-hours while any job waited
  double gpu_hours_lost_to_preemption = 0;  // run time of preempted runs, discarded
  int64_t preemptions = 0;                  // victims stopped (or stopping) by preemption
  int64_t preemption_decisions = 0;
  int64_t jobs_preempted = 0;                      // distinct jobs preempted at least once
  std::array<int64_t, 3> preemptions_by_reason{};  // priority, reclaim, anywhere
  // Jain's index (sum x)^2 / (n sum x^2) over the queues with an entitlement, x = share /
  // entitlement, over the makespan and over each queue's waiting time.
  double jain = 1;
  double jain_while_waiting = 1;
  TimeMs start = 0;             // the first submit time
  TimeMs end = 0;               // the last job's end (or the time limit)
  double makespan_seconds = 0;  // end - start
  int64_t cycles = 0;
  double wall_seconds = 0;  // set by the caller; not part of ReplayReportJson
  std::vector<EndedJob> dropped_jobs;
  std::vector<EndedJob> unfinished_jobs;
  std::vector<ServiceReport> services;  // in the workload's order
  // With ReplayOptions::job_results: one per workload job, in the workload's order; else empty.
  std::vector<JobResult> job_results;
};

// Replays a workload under one placement profile.
ReplayReport RunReplay(const ReplayWorkload& workload, const core::Profile& profile,
                       std::string_view policy, const ReplayOptions& options);

// The report as JSON (docs/simulator.md shows it).
nlohmann::json ReplayReportJson(const ReplayReport& report);

}  // namespace arbiter::sim

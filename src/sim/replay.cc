#include "sim/replay.h"

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
#include "sim/replay_math.h"

namespace arbiter::sim {

void RuntimeHistory::Add(DurationMs run_time) {
  sorted_.insert(std::upper_bound(sorted_.begin(), sorted_.end(), run_time), run_time);
}

TimeMs RuntimeHistory::ExpectedEnd(TimeMs start, TimeMs now) const {
  const DurationMs elapsed = std::max<DurationMs>(0, now - start);
  const auto longer = std::upper_bound(sorted_.begin(), sorted_.end(), elapsed);
  const auto n = static_cast<size_t>(sorted_.end() - longer);
  if (n < kMinSamples) return now + std::max<DurationMs>(elapsed, 1000);
  return std::max(now, start + *(longer + static_cast<std::ptrdiff_t>((n - 1) / 2)));
}

using replay_math::GpuDemand;
using replay_math::Int128;
using replay_math::Jain;
using replay_math::JoinNames;
using replay_math::kMsPerDay;
using replay_math::kMsPerHour;
using replay_math::kNever;
using replay_math::Percent;
using replay_math::Seconds;

namespace {

// The leaf queue of every job (in file order) and the workload's queues in order of first use.
Status ResolveQueues(const Trace& trace, const core::Cluster& cluster, const core::QuotaTree& tree,
                     std::vector<QueueId>* job_queue, std::vector<ReplayQueue>* queues) {
  std::unordered_map<uint32_t, uint32_t> seen;
  for (const TraceJob& j : trace.jobs) {
    QueueId q;
    if (!tree.Find(j.queue, &q) || tree.node(q).is_tenant) {
      return InvalidArgument(trace.Where(j, "queue"),
                             fmt::format("queue: '{}' is not a queue of the queue tree", j.queue));
    }
    const core::QuotaNode& node = tree.node(q);
    if (!node.is_leaf()) {
      return InvalidArgument(
          trace.Where(j, "queue"),
          fmt::format("queue: '{}' has child queues; jobs go to leaf queues", j.queue));
    }
    const std::string& tenant = tree.node(node.tenant).name;
    if (tenant != j.tenant) {
      return InvalidArgument(trace.Where(j, "tenant"),
                             fmt::format("tenant: queue '{}' belongs to tenant '{}', not '{}'",
                                         j.queue, tenant, j.tenant));
    }
    job_queue->push_back(q);
    if (!seen.emplace(q.value(), static_cast<uint32_t>(queues->size())).second) continue;
    ReplayQueue rq;
    rq.id = q;
    rq.name = j.queue;
    rq.tenant = tenant;
    rq.guaranteed_gpu_milli = replay_math::Entitlement(node, cluster);
    queues->push_back(std::move(rq));
  }
  return Status::Ok();
}

// One job as the cycle sees it. `mask` gets the allowed models as a bit set.
ReplayJob CompileJob(const TraceJob& j, const PriorityClass& cls, const core::Cluster& cluster,
                     JobId id, QueueId queue, uint32_t* mask) {
  ReplayJob r;
  r.name = j.name;
  core::PendingJob& p = r.pending;
  p.id = id;
  p.queue = queue;
  p.priority = cls.value;
  p.preemptible = cls.preemptible;
  p.preempts_anywhere = cls.preempts_anywhere;
  p.type = j.type;
  p.tasks = j.tasks;
  p.resources = j.resources;
  p.walltime = SecondsToMs(j.walltime);
  p.submit_time = SecondsToMs(j.submit_time);
  p.grace_period = SecondsToMs(cls.grace_period_seconds);
  *mask = 0;
  for (const std::string& name : j.gpu_models) {
    const GpuModelId m = cluster.FindModel(name);
    if (m == core::kNoModel) continue;  // models the cluster lacks are left out
    p.models.push_back(m);
    if (m.value() < 32) *mask |= 1u << m.value();
  }
  if (!j.gpu_models.empty() && p.models.empty()) {
    r.dropped_reason = fmt::format("asks for GPU models {} and the cluster has none of them",
                                   fmt::join(j.gpu_models, "|"));
  }
  r.duration = SecondsToMs(j.duration);
  r.min_runtime = SecondsToMs(cls.min_runtime_seconds);
  r.grace_period = SecondsToMs(cls.grace_period_seconds);
  return r;
}

}  // namespace

Result<ReplayWorkload> CompileReplay(const Trace& trace, const core::Cluster& cluster,
                                     const core::QuotaTree& tree,
                                     const std::vector<PriorityClass>& classes) {
  ReplayWorkload w;
  w.cluster = &cluster;
  w.tree = &tree;
  std::vector<QueueId> job_queue;
  ARBITER_RETURN_IF_ERROR(ResolveQueues(trace, cluster, tree, &job_queue, &w.queues));
  std::unordered_map<uint32_t, uint32_t> queue_index;
  for (uint32_t q = 0; q < w.queues.size(); ++q) queue_index.emplace(w.queues[q].id.value(), q);
  std::vector<std::string> class_names;
  class_names.reserve(classes.size());
  for (const PriorityClass& c : classes) class_names.push_back(c.name);
  // Jobs in order of submit time, equal times in file order; ids follow that order.
  std::vector<uint32_t> order(trace.jobs.size());
  std::iota(order.begin(), order.end(), 0u);
  std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    return trace.jobs[a].submit_time < trace.jobs[b].submit_time;
  });
  std::vector<core::TaskClass> samples;
  for (uint32_t i : order) {
    const TraceJob& j = trace.jobs[i];
    auto cls = std::find_if(classes.begin(), classes.end(),
                            [&](const PriorityClass& c) { return c.name == j.priority_class; });
    if (cls == classes.end()) {
      return InvalidArgument(trace.Where(j, "priority_class"),
                             fmt::format("priority_class: unknown class '{}'; the classes are {}",
                                         j.priority_class, JoinNames(class_names)));
    }
    uint32_t mask = 0;
    ReplayJob r = CompileJob(j, *cls, cluster, JobId(w.jobs.size() + 1), job_queue[i], &mask);
    r.queue = queue_index.at(job_queue[i].value());
    if (r.dropped_reason.empty()) {
      core::TaskClass c;
      c.cpu_milli = j.resources.cpu_milli;
      c.gpus = j.resources.gpus;
      c.gpu_milli = j.resources.gpus > 0 ? j.resources.gpu_milli : 0;
      c.models = j.gpu_models.empty() ? 0 : mask;
      c.memory_mib = j.resources.memory_mib;  // feeds the demand ratios fgd-plus uses
      samples.insert(samples.end(), static_cast<size_t>(j.tasks), c);
    }
    w.jobs.push_back(std::move(r));
  }
  w.typical = core::TaskDistribution::FromTasks(samples);
  return w;
}

namespace {

enum class JobState : uint8_t { kFuture, kPending, kRunning, kEnded, kDropped };

// When job j arrives: its submit time, or the workload's start if that is later.
TimeMs ArrivalOf(const ReplayWorkload& w, size_t j) {
  return std::max(w.jobs[j].pending.submit_time, w.start);
}

// What happens to one job as the replay goes.
struct JobRun {
  JobState state = JobState::kFuture;
  uint32_t gen = 0;  // bumped at every start: events of earlier runs are stale
  TimeMs pending_since = 0;
  TimeMs wait = 0;  // total time pending
  TimeMs start = 0;
  TimeMs end = 0;
  bool started = false;
  bool timed_out = false;
  int32_t preempted = 0;
  int64_t alloc_milli = 0;
  std::vector<QueueId> preempted_queues;  // queues its preemption took from (the loop guard)
  std::string reason;                     // why it was dropped
  // A service's replica: the service (-1: a trace job), whether it serves, when a reclaim for it
  // was decided (-1: none pending).
  int32_t service = -1;
  bool ready = false;
  bool ready_once = false;
  TimeMs reclaim_at = -1;
};

// kReady: a replica's start-up delay has passed.
enum class EventKind : uint8_t { kEnd, kStop, kReady };

// What happens to one service as the replay goes.
struct ServiceRun {
  core::Autoscaler autoscaler;
  RequestQueue queue;
  std::vector<uint32_t> replicas;  // live replicas (pending or running), in order of submission
  int32_t ready = 0;
  int32_t desired = 0;
  int32_t desired_max = 0;
  int64_t scale_ups = 0;
  int64_t scale_downs = 0;
  int64_t reclaim_victims = 0;
  std::string never_fits;  // non-empty: no replica can be placed, even on the empty cluster
  std::vector<int32_t> ready_by_second;
  std::vector<double> scale_up;  // seconds
  std::vector<double> reclaim;   // seconds
  int64_t alloc = 0;             // GPU milli of its running replicas
  Int128 alloc_int = 0;

  ServiceRun(const ReplayService& s, TimeMs start)
      : autoscaler(s.autoscaling, s.min_replicas, s.max_replicas),
        queue(&s.requests, s.max_concurrency, s.request_queue.max, s.request_queue.timeout_ms,
              s.slo_ms, start) {}
};

struct Event {
  TimeMs time = 0;
  uint64_t seq = 0;
  EventKind kind = EventKind::kEnd;
  uint32_t job = 0;
  uint32_t gen = 0;
  bool operator>(const Event& o) const { return time != o.time ? time > o.time : seq > o.seq; }
};

class Replayer {
 public:
  Replayer(const ReplayWorkload& w, const core::Profile& profile, const ReplayOptions& o)
      : w_(w),
        profile_(profile),
        o_(o),
        runs_(w.jobs.size()),
        pending_pos_(w.jobs.size(), -1),
        running_pos_(w.jobs.size(), -1),
        queue_alloc_(w.queues.size(), 0),
        queue_pending_(w.queues.size(), 0),
        run_history_(w.queues.size()),
        queue_alloc_int_(w.queues.size(), 0),
        queue_wait_time_(w.queues.size(), 0),
        queue_wait_alloc_int_(w.queues.size(), 0),
        queue_preempted_(w.queues.size(), 0),
        capacity_(w.cluster->capacity()[core::kDimGpu]),
        series_(w.jobs.empty() ? 0 : ArrivalOf(w, 0), capacity_, o.max_series_points),
        arrival_series_(w.jobs.empty() ? 0 : ArrivalOf(w, 0), capacity_, o.max_series_points,
                        w.jobs.empty() ? 0 : ArrivalOf(w, w.jobs.size() - 1)) {
    if (!w.jobs.empty()) {
      first_submit_ = ArrivalOf(w, 0);
      last_submit_ = ArrivalOf(w, w.jobs.size() - 1);
    }
    for (const core::QuotaNode& n : w.tree->nodes()) decay_ = decay_ || n.half_life_seconds > 0;
    if (decay_) {
      history_.assign(w.tree->size(), core::QuotaVec{});
      usage_.assign(w.tree->size(), core::QuotaVec{});
      if (w.usage_history.size() == w.tree->size()) history_ = w.usage_history;
      history_time_ = w.start;
    }
    nominations_ = w.nominations;
    // Services' reclaim deadlines: their queue lends its idle guarantee only within the shortest.
    for (const ReplayService& s : w.services) {
      if (s.reclaim_deadline_seconds <= 0 || s.queue >= w.queues.size()) continue;
      const QueueId q = w.queues[s.queue].id;
      const DurationMs limit = SecondsToMs(s.reclaim_deadline_seconds);
      auto it = std::find_if(lend_limits_.begin(), lend_limits_.end(),
                             [&](const auto& l) { return l.first == q; });
      if (it == lend_limits_.end()) {
        lend_limits_.emplace_back(q, limit);
      } else {
        it->second = std::min(it->second, limit);
      }
    }
  }

  ReplayReport Run(std::string_view policy);

 private:
  // The job of index j: the trace's, then the replicas'.
  const ReplayJob& Job(uint32_t j) const {
    return j < w_.jobs.size() ? w_.jobs[j] : replica_jobs_[j - w_.jobs.size()];
  }
  void StartServices(TimeMs start);
  void AdvanceServices(TimeMs t);
  bool ServiceTick(TimeMs t);
  bool ScaleTo(size_t k, int32_t desired, TimeMs t);
  void SubmitReplica(size_t k, TimeMs t);
  void RemoveReplica(size_t k, TimeMs t);
  void SetReady(uint32_t j, bool ready);
  void ServiceOutcomes(ReplayReport* rep) const;
  void Integrate(TimeMs t);
  void Arrive(uint32_t j, TimeMs t);
  void Seat(uint32_t j, TimeMs t);
  bool Valid(const Event& e) const;
  void Apply(const Event& e);
  void Cycle(TimeMs t);
  void EstimateEnds(TimeMs t);
  void StartAdmitted(size_t from, TimeMs t);
  void ApplyDecisions(const core::CycleResult& r, TimeMs t);
  TimeMs NextTick(TimeMs t) const;
  TimeMs NextMinRuntime(TimeMs after) const;
  std::string NeverFits(const core::PendingJob& p, TimeMs t);
  void UpdateHistory(TimeMs t);

  void AddPending(uint32_t j, TimeMs t);
  void RemovePending(uint32_t j, TimeMs t);
  void RemoveRunning(uint32_t j);
  void Push(TimeMs t, EventKind kind, uint32_t j) {
    events_.push(Event{t, seq_++, kind, j, runs_[j].gen});
  }
  void ReportProgress(TimeMs t) const;
  // Waits and JCTs (seconds) of a group of jobs, and how many it has.
  struct Samples {
    std::vector<double> wait;
    std::vector<double> jct;
    int64_t jobs = 0;
  };
  void JobOutcomes(ReplayReport* rep, Samples* all, std::vector<Samples>* by_queue,
                   std::vector<Samples>* by_type) const;
  void QueueOutcomes(ReplayReport* rep, std::vector<Samples>* by_queue) const;
  ReplayReport Report(std::string_view policy) const;

  const ReplayWorkload& w_;
  const core::Profile& profile_;
  const ReplayOptions& o_;
  std::vector<JobRun> runs_;
  std::vector<core::PendingJob> pending_;
  std::vector<core::RunningJob> running_;
  std::vector<core::Nomination> nominations_;
  std::vector<std::pair<QueueId, DurationMs>> lend_limits_;  // CycleInput::lend_grace_limits
  std::vector<int64_t> pending_pos_;
  std::vector<int64_t> running_pos_;
  std::priority_queue<Event, std::vector<Event>, std::greater<>> events_;
  uint64_t seq_ = 0;
  size_t next_arrival_ = 0;
  int64_t ended_ = 0;
  int64_t cycles_ = 0;
  bool dirty_ = true;  // the last cycle decided something, or nothing has run yet
  TimeMs now_ = 0;
  TimeMs last_ = 0;  // integrated up to here
  bool time_limit_reached_ = false;
  bool stop_ = false;  // ReplayOptions::on_start asked to end the replay, or max_work was reached
  int64_t work_ = 0;   // per cycle, pending jobs and nodes, summed (ReplayOptions::max_work)
  bool work_limit_reached_ = false;
  std::unordered_map<std::string, std::string> never_fits_;
  std::vector<core::Verdict> last_verdicts_;
  // Decayed fair-share usage, maintained when some queue has a half-life.
  bool decay_ = false;
  std::vector<core::QuotaVec> history_;
  std::vector<core::QuotaVec> usage_;
  TimeMs history_time_ = 0;
  // Allocation and its integrals (milli-GPU x ms).
  int64_t alloc_ = 0;
  std::vector<int64_t> queue_alloc_;
  std::vector<int64_t> queue_pending_;
  std::vector<RuntimeHistory> run_history_;  // per queue: completed run times
  size_t waiting_ = 0;
  Int128 alloc_int_ = 0;
  Int128 idle_while_waiting_int_ = 0;
  // The busy window: from the first submit to the last time a job was waiting or still to arrive
  // (busy_end_), and the allocation integral over it; and the integral per day since the first
  // submit.
  TimeMs first_submit_ = 0;
  TimeMs last_submit_ = 0;
  TimeMs busy_end_ = 0;
  Int128 busy_alloc_int_ = 0;
  std::vector<Int128> daily_alloc_int_;
  Int128 lost_int_ = 0;
  std::vector<Int128> queue_alloc_int_;
  std::vector<TimeMs> queue_wait_time_;
  std::vector<Int128> queue_wait_alloc_int_;
  std::vector<int64_t> queue_preempted_;
  int64_t preemptions_ = 0;
  int64_t decisions_ = 0;
  std::array<int64_t, 3> by_reason_{};
  int64_t capacity_ = 0;
  AllocSeriesBuilder series_;
  AllocSeriesBuilder arrival_series_;  // until the last submit time
  // Services: their replicas' jobs (index w_.jobs.size() + i), their state, the next per-second
  // tick and the last one.
  std::vector<ReplayJob> replica_jobs_;
  std::vector<ServiceRun> svc_;
  TimeMs service_tick_ = kNever;
  TimeMs service_end_ = 0;
  TimeMs service_start_ = 0;
};

void Replayer::Integrate(TimeMs t) {
  const TimeMs dt = t - last_;
  if (dt <= 0) return;
  // Busy until t while a job waits, else until the last submit if that is still ahead.
  const TimeMs busy_until = waiting_ > 0 ? t : std::min(t, last_submit_);
  if (busy_until > last_) {
    busy_end_ = busy_until;
    busy_alloc_int_ = alloc_int_ + Int128{alloc_} * (busy_until - last_);
  }
  for (TimeMs a = last_; a < t;) {
    const auto day = static_cast<size_t>((a - first_submit_) / kMsPerDay);
    const TimeMs b = std::min<TimeMs>(t, first_submit_ + static_cast<TimeMs>(day + 1) * kMsPerDay);
    if (daily_alloc_int_.size() <= day) daily_alloc_int_.resize(day + 1, 0);
    daily_alloc_int_[day] += Int128{alloc_} * (b - a);
    a = b;
  }
  series_.Add(last_, t, alloc_);
  arrival_series_.Add(last_, t, alloc_);
  alloc_int_ += Int128{alloc_} * dt;
  for (ServiceRun& r : svc_) r.alloc_int += Int128{r.alloc} * dt;
  if (waiting_ > 0) idle_while_waiting_int_ += Int128{capacity_ - alloc_} * dt;
  for (size_t q = 0; q < w_.queues.size(); ++q) {
    queue_alloc_int_[q] += Int128{queue_alloc_[q]} * dt;
    if (queue_pending_[q] > 0) {
      queue_wait_time_[q] += dt;
      queue_wait_alloc_int_[q] += Int128{queue_alloc_[q]} * dt;
    }
  }
  last_ = t;
}

void Replayer::AddPending(uint32_t j, TimeMs t) {
  runs_[j].state = JobState::kPending;
  runs_[j].pending_since = t;
  pending_pos_[j] = static_cast<int64_t>(pending_.size());
  pending_.push_back(Job(j).pending);
  ++queue_pending_[Job(j).queue];
  ++waiting_;
}

void Replayer::RemovePending(uint32_t j, TimeMs t) {
  const auto pos = static_cast<size_t>(pending_pos_[j]);
  runs_[j].wait += t - runs_[j].pending_since;
  if (pos + 1 != pending_.size()) {
    pending_[pos] = std::move(pending_.back());
    pending_pos_[pending_[pos].id.value() - 1] = static_cast<int64_t>(pos);
  }
  pending_.pop_back();
  pending_pos_[j] = -1;
  --queue_pending_[Job(j).queue];
  --waiting_;
}

void Replayer::RemoveRunning(uint32_t j) {
  const auto pos = static_cast<size_t>(running_pos_[j]);
  if (pos + 1 != running_.size()) {
    running_[pos] = std::move(running_.back());
    running_pos_[running_[pos].id.value() - 1] = static_cast<int64_t>(pos);
  }
  running_.pop_back();
  running_pos_[j] = -1;
  alloc_ -= runs_[j].alloc_milli;
  queue_alloc_[Job(j).queue] -= runs_[j].alloc_milli;
  if (runs_[j].service >= 0)
    svc_[static_cast<size_t>(runs_[j].service)].alloc -= runs_[j].alloc_milli;
}

// A job that no cycle can start, even alone on the empty cluster: the verdict says why. Cached
// per shape (queue, type, resources, tasks, models).
std::string Replayer::NeverFits(const core::PendingJob& p, TimeMs t) {
  const TaskResources& r = p.resources;
  std::string key = fmt::format("{}/{}/{}/{}/{}/{}/{}/{}/{}", p.queue.value(),
                                static_cast<int>(p.type), p.tasks, r.gpus, r.gpu_milli,
                                r.gpu_memory_mib, r.cpu_milli, r.memory_mib, p.distinct_nodes);
  for (GpuModelId m : p.models) key += fmt::format("/{}", m.value());
  auto it = never_fits_.find(key);
  if (it != never_fits_.end()) return it->second;
  const std::vector<core::PendingJob> alone = {p};
  core::CycleInput in;
  in.cluster = w_.cluster;
  in.tree = w_.tree;
  in.pending = &alone;
  in.constraints = w_.constraints.empty() ? nullptr : &w_.constraints;
  in.distribution = profile_.needs_distribution() ? &w_.typical : nullptr;
  in.preemption.enabled = false;
  in.now = t;
  in.seed = o_.seed;
  const core::CycleResult res = core::RunCycle(in, profile_);
  std::string reason;
  if (res.admissions.empty()) {
    reason = res.verdicts.empty()
                 ? std::string("does not fit the empty cluster")
                 : fmt::format("{}: {}", core::VerdictCodeName(res.verdicts.front().code),
                               res.verdicts.front().message);
  }
  never_fits_.emplace(std::move(key), reason);
  return reason;
}

void Replayer::Arrive(uint32_t j, TimeMs t) {
  const ReplayJob& job = w_.jobs[j];
  JobRun& s = runs_[j];
  if (job.running) {
    Seat(j, t);
    return;
  }
  s.reason = job.dropped_reason.empty() ? NeverFits(job.pending, t) : job.dropped_reason;
  if (!s.reason.empty()) {
    s.state = JobState::kDropped;
    s.end = t;
    ++ended_;
    return;
  }
  AddPending(j, t);
}

// A job already running when it arrives takes its placement as given, without a cycle.
void Replayer::Seat(uint32_t j, TimeMs t) {
  const ReplayJob& job = w_.jobs[j];
  JobRun& s = runs_[j];
  core::RunningJob rj = *job.running;
  rj.id = job.pending.id;
  running_pos_[j] = static_cast<int64_t>(running_.size());
  s.state = JobState::kRunning;
  s.started = true;
  s.start = rj.start_time;
  ++s.gen;
  s.alloc_milli = 0;
  for (const core::TaskPlacement& p : rj.tasks) {
    for (const core::GpuShare& g : p.gpus) s.alloc_milli += g.milli;
  }
  alloc_ += s.alloc_milli;
  queue_alloc_[job.queue] += s.alloc_milli;
  running_.push_back(std::move(rj));
  const DurationMs walltime = job.pending.walltime;
  s.timed_out = walltime > 0 && walltime < job.duration;
  Push(std::max(t, s.start + (s.timed_out ? walltime : job.duration)), EventKind::kEnd, j);
  if (o_.on_start && o_.on_start(job.pending.id, t)) stop_ = true;
}

bool Replayer::Valid(const Event& e) const {
  const JobRun& s = runs_[e.job];
  if (s.state != JobState::kRunning || s.gen != e.gen) return false;
  if (e.kind == EventKind::kReady) return !s.ready;
  if (e.kind == EventKind::kStop) {
    return running_[static_cast<size_t>(running_pos_[e.job])].terminating;
  }
  return true;
}

void Replayer::Apply(const Event& e) {
  JobRun& s = runs_[e.job];
  if (e.kind == EventKind::kReady) {
    SetReady(e.job, true);
    return;
  }
  if (e.kind == EventKind::kEnd) {
    if (!s.timed_out) run_history_[Job(e.job).queue].Add(e.time - s.start);
    RemoveRunning(e.job);
    s.state = JobState::kEnded;
    s.end = e.time;
    ++ended_;
    return;
  }
  // A victim stops: its run is lost (no checkpoints), and it queues again with its submit time.
  lost_int_ += Int128{s.alloc_milli} * (e.time - s.start);
  if (s.ready) SetReady(e.job, false);
  RemoveRunning(e.job);
  AddPending(e.job, e.time);
}

TimeMs Replayer::NextMinRuntime(TimeMs after) const {
  if (!o_.preemption) return kNever;
  TimeMs next = kNever;
  for (const core::RunningJob& r : running_) {
    if (!r.preemptible || r.terminating) continue;
    const TimeMs t = r.start_time + r.min_runtime;
    if (t > after) next = std::min(next, t);
  }
  return next;
}

// The next periodic cycle after a cycle at t, while jobs wait: t + interval, or, when that cycle
// would see nothing new, the first such time at or after the next job reaches its minimum
// runtime (none: no periodic cycle until an event).
TimeMs Replayer::NextTick(TimeMs t) const {
  if (pending_.empty()) return kNever;
  const DurationMs n = o_.cycle_interval;
  if (!o_.skip_idle_cycles || dirty_ || decay_) return t + n;
  const TimeMs change = NextMinRuntime(t);
  if (change == kNever) return kNever;
  const TimeMs k = std::max<TimeMs>(1, (change - t + n - 1) / n);
  return t + k * n;
}

void Replayer::UpdateHistory(TimeMs t) {
  const DurationMs dt = t - history_time_;
  history_time_ = t;
  if (dt <= 0) return;
  const core::QuotaTree& tree = *w_.tree;
  for (size_t n = 0; n < tree.size(); ++n) {
    const core::QuotaNode& node = tree.nodes()[n];
    if (node.half_life_seconds <= 0) continue;
    history_[n] =
        core::DecayUsage(history_[n], usage_[n], dt, node.half_life_seconds, tree.num_dims());
  }
}

// RunningJob::expected_end of every running job, as ReplayOptions::runtime_estimates says.
void Replayer::EstimateEnds(TimeMs t) {
  for (core::RunningJob& rj : running_) {
    const auto j = static_cast<uint32_t>(rj.id.value() - 1);
    switch (o_.runtime_estimates) {
      case RuntimeEstimates::kNone:
        rj.expected_end = 0;
        break;
      case RuntimeEstimates::kHistory:
        rj.expected_end = run_history_[Job(j).queue].ExpectedEnd(rj.start_time, t);
        break;
      case RuntimeEstimates::kOracle:
        rj.expected_end = std::max(t, rj.start_time + Job(j).duration);
        break;
    }
  }
}

void Replayer::Cycle(TimeMs t) {
  if (decay_) UpdateHistory(t);
  core::CycleInput in;
  in.cluster = w_.cluster;
  in.tree = w_.tree;
  in.running = &running_;
  in.pending = &pending_;
  in.constraints = w_.constraints.empty() ? nullptr : &w_.constraints;
  in.nominations = &nominations_;
  in.usage_history = decay_ ? &history_ : nullptr;
  in.distribution =
      profile_.needs_distribution() && !o_.typical_from_pending ? &w_.typical : nullptr;
  in.preemption.enabled = o_.preemption;
  in.lend_grace_limits = lend_limits_.empty() ? nullptr : &lend_limits_;
  in.now = t;
  in.seed = o_.seed;
  EstimateEnds(t);
  if (o_.before_cycle) o_.before_cycle(in);
  core::CycleResult r = core::RunCycle(in, profile_);
  ++cycles_;
  work_ += static_cast<int64_t>(pending_.size() + w_.cluster->num_nodes());
  if (o_.max_work > 0 && work_ >= o_.max_work) {
    work_limit_reached_ = true;
    stop_ = true;
  }
  const size_t before = running_.size();
  core::ApplyAdmissions(in, r, t, &running_);
  StartAdmitted(before, t);
  ApplyDecisions(r, t);
  dirty_ = !r.admissions.empty() || !r.preemptions.empty() || !r.finished_nominations.empty();
  last_verdicts_ = std::move(r.verdicts);
  if (decay_) {
    // Usage per tree node from now until the next cycle (no event in between changes it).
    std::fill(usage_.begin(), usage_.end(), core::QuotaVec{});
    for (const core::RunningJob& rj : running_) {
      const core::QuotaVec q = w_.cluster->RunningQuota(rj);
      for (QueueId n = rj.queue;; n = w_.tree->node(n).parent) {
        usage_[n.value()] += q;
        if (n == core::QuotaTree::kRoot) break;
      }
    }
  }
  if (o_.progress && cycles_ % std::max<int64_t>(1, o_.progress_every) == 0) ReportProgress(t);
}

// The jobs ApplyAdmissions appended from `from` on start now: the driver's part of an admission.
void Replayer::StartAdmitted(size_t from, TimeMs t) {
  for (size_t k = from; k < running_.size(); ++k) {
    core::RunningJob& rj = running_[k];
    const auto j = static_cast<uint32_t>(rj.id.value() - 1);
    const ReplayJob& job = Job(j);
    JobRun& s = runs_[j];
    rj.min_runtime = job.min_runtime;
    rj.grace_period = job.grace_period;
    rj.preempted_queues = std::move(s.preempted_queues);
    s.preempted_queues.clear();
    RemovePending(j, t);
    running_pos_[j] = static_cast<int64_t>(k);
    s.state = JobState::kRunning;
    s.started = true;
    s.start = t;
    ++s.gen;
    s.alloc_milli = 0;
    for (const core::TaskPlacement& p : rj.tasks) {
      for (const core::GpuShare& g : p.gpus) s.alloc_milli += g.milli;
    }
    alloc_ += s.alloc_milli;
    queue_alloc_[job.queue] += s.alloc_milli;
    if (s.service >= 0) {
      // A replica runs until it is removed; it serves after its start-up delay.
      ServiceRun& sr = svc_[static_cast<size_t>(s.service)];
      sr.alloc += s.alloc_milli;
      if (s.reclaim_at >= 0) sr.reclaim.push_back(Seconds(t - s.reclaim_at));
      s.reclaim_at = -1;
      Push(t + o_.replica_startup, EventKind::kReady, j);
      continue;
    }
    const DurationMs walltime = job.pending.walltime;
    s.timed_out = walltime > 0 && walltime < job.duration;
    Push(t + (s.timed_out ? walltime : job.duration), EventKind::kEnd, j);
    if (o_.on_start && o_.on_start(job.pending.id, t)) stop_ = true;
  }
}

void Replayer::ApplyDecisions(const core::CycleResult& r, TimeMs t) {
  auto drop_nomination = [&](JobId id) {
    std::erase_if(nominations_, [&](const core::Nomination& n) { return n.preemptor == id; });
  };
  for (JobId id : r.finished_nominations) drop_nomination(id);
  for (const core::Admission& a : r.admissions) drop_nomination(a.job);
  core::ApplyPreemptions(r, &running_);
  for (const core::PreemptionDecision& d : r.preemptions) {
    ++decisions_;
    nominations_.push_back({d.preemptor, d.victims, d.tasks, d.model});
    JobRun& pre = runs_[d.preemptor.value() - 1];
    pre.preempted_queues = d.victim_queues;
    if (pre.service >= 0 && d.reason == core::PreemptionReason::kReclaim) {
      if (pre.reclaim_at < 0) pre.reclaim_at = t;
      svc_[static_cast<size_t>(pre.service)].reclaim_victims +=
          static_cast<int64_t>(d.victims.size());
    }
    for (JobId v : d.victims) {
      const auto j = static_cast<uint32_t>(v.value() - 1);
      ++runs_[j].preempted;
      ++preemptions_;
      ++by_reason_[static_cast<size_t>(d.reason)];
      ++queue_preempted_[Job(j).queue];
      const core::RunningJob& rj = running_[static_cast<size_t>(running_pos_[j])];
      Push(t + rj.grace_period + o_.stop_latency, EventKind::kStop, j);
    }
  }
}

void Replayer::ReportProgress(TimeMs t) const {
  ReplayProgress p;
  p.now = t;
  p.cycles = cycles_;
  p.arrived = static_cast<int64_t>(next_arrival_);
  p.ended = ended_;
  p.total = static_cast<int64_t>(w_.jobs.size());
  p.pending = pending_.size();
  p.running = running_.size();
  o_.progress(p);
}

// Services start with the replay: a tick every second from the start until a while after the
// last request (the autoscaler's windows and grace, and a replica's start-up, to scale down).
void Replayer::StartServices(TimeMs start) {
  if (w_.services.empty()) return;
  service_start_ = start;
  service_end_ = start;
  for (const ReplayService& s : w_.services) {
    svc_.emplace_back(s, start);
    const TimeMs last = s.requests.empty() ? start : s.requests.back().arrival;
    const DurationMs tail =
        (s.autoscaled ? s.autoscaling.stable_window_ms + s.autoscaling.scale_to_zero_grace_ms : 0) +
        o_.replica_startup + SecondsToMs(60);
    service_end_ = std::max(service_end_, last + tail);
  }
  service_tick_ = start;
}

void Replayer::AdvanceServices(TimeMs t) {
  for (ServiceRun& r : svc_) r.queue.AdvanceTo(t);
}

// One second of every service: a sample of its load, a decision (the fixed count, the static
// arm's, or the autoscaler's), replicas submitted or removed to match. True when replicas were.
bool Replayer::ServiceTick(TimeMs t) {
  bool changed = false;
  for (size_t k = 0; k < svc_.size(); ++k) {
    ServiceRun& r = svc_[k];
    const ReplayService& s = w_.services[k];
    const core::AutoscaleSample sample = r.queue.TakeSample();
    int32_t desired = s.replicas;
    if (o_.static_replicas >= 0) {
      desired = o_.static_replicas;
    } else if (s.autoscaled && t > service_start_) {
      r.autoscaler.Record(sample);
      desired = r.autoscaler.Decide(t, r.ready, r.desired, r.queue.waiting()).desired;
    }
    if (t > service_start_) {
      if (desired > r.desired) ++r.scale_ups;
      if (desired < r.desired) ++r.scale_downs;
    }
    changed = ScaleTo(k, desired, t) || changed;
    r.ready_by_second.push_back(r.ready);
  }
  service_tick_ = t + 1000 <= service_end_ ? t + 1000 : kNever;
  return changed;
}

bool Replayer::ScaleTo(size_t k, int32_t desired, TimeMs t) {
  ServiceRun& r = svc_[k];
  r.desired = desired;
  r.desired_max = std::max(r.desired_max, desired);
  bool changed = false;
  while (r.never_fits.empty() && static_cast<int32_t>(r.replicas.size()) < desired) {
    SubmitReplica(k, t);
    changed = true;
  }
  while (static_cast<int32_t>(r.replicas.size()) > desired) {
    RemoveReplica(k, t);
    changed = true;
  }
  return changed;
}

// A replica joins the pending list as a job of type service in the service's queue.
void Replayer::SubmitReplica(size_t k, TimeMs t) {
  const ReplayService& s = w_.services[k];
  ServiceRun& r = svc_[k];
  const auto j = static_cast<uint32_t>(w_.jobs.size() + replica_jobs_.size());
  ReplayJob job;
  job.name = fmt::format("{}-{}", s.name, r.replicas.size());
  job.pending = s.replica;
  job.pending.id = JobId(j + 1);
  job.pending.submit_time = t;
  job.min_runtime = s.min_runtime;
  job.grace_period = s.grace_period;
  job.queue = s.queue;
  r.never_fits = NeverFits(job.pending, t);
  if (!r.never_fits.empty()) return;
  replica_jobs_.push_back(std::move(job));
  runs_.emplace_back();
  pending_pos_.push_back(-1);
  running_pos_.push_back(-1);
  runs_[j].service = static_cast<int32_t>(k);
  AddPending(j, t);
  r.replicas.push_back(j);
}

// Scale-down removes a pending replica first, then one starting, then a ready one, newest first.
// Its GPUs are free at once; the requests it serves finish (RequestQueue drains them).
void Replayer::RemoveReplica(size_t k, TimeMs t) {
  std::vector<uint32_t>& reps = svc_[k].replicas;
  auto newest = [&](auto pred) -> size_t {
    for (size_t i = reps.size(); i-- > 0;) {
      if (pred(runs_[reps[i]])) return i;
    }
    return reps.size();
  };
  size_t i = newest([](const JobRun& s) { return s.state == JobState::kPending; });
  if (i == reps.size()) i = newest([](const JobRun& s) { return !s.ready; });
  if (i == reps.size()) i = reps.size() - 1;
  const uint32_t j = reps[i];
  reps.erase(reps.begin() + static_cast<std::ptrdiff_t>(i));
  JobRun& s = runs_[j];
  if (s.state == JobState::kPending) {
    RemovePending(j, t);
    const JobId id(j + 1);
    std::erase_if(nominations_, [&](const core::Nomination& n) { return n.preemptor == id; });
  } else if (s.state == JobState::kRunning) {
    if (s.ready) SetReady(j, false);
    RemoveRunning(j);
  }
  s.state = JobState::kEnded;
  s.end = t;
  s.reclaim_at = -1;
  ++s.gen;
}

void Replayer::SetReady(uint32_t j, bool ready) {
  JobRun& s = runs_[j];
  if (s.ready == ready) return;
  s.ready = ready;
  ServiceRun& r = svc_[static_cast<size_t>(s.service)];
  r.ready += ready ? 1 : -1;
  if (ready && !s.ready_once) {
    // Scale-up time: from the decision that submitted the replica to its first ready moment.
    s.ready_once = true;
    r.scale_up.push_back(Seconds(now_ - Job(j).pending.submit_time));
  }
  r.queue.SetReady(r.ready);
}

ReplayReport Replayer::Run(std::string_view policy) {
  const size_t n = w_.jobs.size();
  now_ = n > 0 ? ArrivalOf(w_, 0) : 0;
  last_ = now_;
  history_time_ = now_;
  StartServices(now_);
  TimeMs tick = kNever;
  while (true) {
    while (!events_.empty() && !Valid(events_.top())) events_.pop();
    TimeMs t = std::min(tick, service_tick_);
    if (next_arrival_ < n) t = std::min(t, ArrivalOf(w_, next_arrival_));
    if (!events_.empty()) t = std::min(t, events_.top().time);
    if (t == kNever) break;
    if (o_.time_limit > 0 && t > o_.time_limit) {
      Integrate(o_.time_limit);
      now_ = o_.time_limit;
      time_limit_reached_ = true;
      break;
    }
    Integrate(t);
    now_ = t;
    AdvanceServices(t);
    bool changed = false;
    for (; next_arrival_ < n && ArrivalOf(w_, next_arrival_) == t; ++next_arrival_) {
      Arrive(static_cast<uint32_t>(next_arrival_), t);
      changed = true;
    }
    while (!events_.empty() && events_.top().time == t) {
      const Event e = events_.top();
      events_.pop();
      if (!Valid(e)) continue;
      Apply(e);
      changed = true;
    }
    if (service_tick_ == t) changed = ServiceTick(t) || changed;
    const bool periodic = tick == t;
    if (!changed && !periodic) continue;
    if (!pending_.empty()) Cycle(t);
    if (stop_) break;
    tick = NextTick(t);
    // Jobs wait, nothing runs, nothing is to come and the last cycle decided nothing: they can
    // never start.
    if (!pending_.empty() && running_.empty() && next_arrival_ == n && !dirty_ &&
        service_tick_ == kNever) {
      break;
    }
  }
  AdvanceServices(now_);
  if (o_.progress) ReportProgress(now_);
  return Report(policy);
}

// Each job's outcome: counted, listed when dropped or unfinished, its wait and JCT sampled.
void Replayer::JobOutcomes(ReplayReport* rep, Samples* all, std::vector<Samples>* by_queue,
                           std::vector<Samples>* by_type) const {
  std::unordered_map<uint64_t, const core::Verdict*> verdicts;
  for (const core::Verdict& v : last_verdicts_) verdicts.emplace(v.job.value(), &v);
  if (o_.job_results) rep->job_results.resize(w_.jobs.size());
  for (size_t j = 0; j < w_.jobs.size(); ++j) {
    const ReplayJob& job = w_.jobs[j];
    const JobRun& s = runs_[j];
    if (o_.job_results) {
      JobResult& r = rep->job_results[j];
      r.started = s.started;
      r.ended = s.state == JobState::kEnded;
      r.dropped = s.state == JobState::kDropped;
      r.wait = s.wait + (s.state == JobState::kPending ? now_ - s.pending_since : 0);
      r.preempted = s.preempted;
    }
    Samples& q = (*by_queue)[job.queue];
    Samples& t = (*by_type)[static_cast<size_t>(job.pending.type)];
    ++q.jobs;
    ++t.jobs;
    if (s.preempted > 0) ++rep->jobs_preempted;
    const std::string& queue = w_.queues[job.queue].name;
    switch (s.state) {
      case JobState::kDropped:
        ++rep->dropped;
        rep->dropped_jobs.push_back({job.name, queue, s.reason});
        continue;
      case JobState::kEnded:
        ++(s.timed_out ? rep->timed_out : rep->completed);
        break;
      case JobState::kPending: {
        auto v = verdicts.find(job.pending.id.value());
        rep->unfinished_jobs.push_back(
            {job.name, queue,
             v == verdicts.end()
                 ? std::string("waiting at the end")
                 : fmt::format("waiting at the end: {}: {}", core::VerdictCodeName(v->second->code),
                               v->second->message)});
        break;
      }
      case JobState::kRunning:
        rep->unfinished_jobs.push_back({job.name, queue, "running at the time limit"});
        break;
      case JobState::kFuture:
        rep->unfinished_jobs.push_back({job.name, queue, "not submitted by the time limit"});
        continue;
    }
    if (!s.started) continue;
    TimeMs wait = s.wait;
    if (s.state == JobState::kPending) wait += now_ - s.pending_since;
    if (wait > 0) ++rep->jobs_waited;
    for (Samples* g : {all, &q, &t}) g->wait.push_back(Seconds(wait));
    if (s.state != JobState::kEnded) continue;
    const double jct = Seconds(s.end - job.pending.submit_time);
    for (Samples* g : {all, &q, &t}) g->jct.push_back(jct);
  }
  rep->unfinished = static_cast<int64_t>(rep->unfinished_jobs.size());
}

// Per service: requests against the SLO, replicas over time, scale-up and reclaim times.
void Replayer::ServiceOutcomes(ReplayReport* rep) const {
  for (size_t k = 0; k < svc_.size(); ++k) {
    const ReplayService& s = w_.services[k];
    const ServiceRun& r = svc_[k];
    ServiceReport sr;
    sr.name = s.name;
    sr.queue = w_.queues[s.queue].name;
    if (o_.static_replicas >= 0) {
      sr.scaling = fmt::format("static {}", o_.static_replicas);
    } else if (s.autoscaled) {
      sr.scaling = fmt::format("autoscaled {}..{}", s.min_replicas, s.max_replicas);
    } else {
      sr.scaling = fmt::format("fixed {}", s.replicas);
    }
    sr.lending = s.lending;
    sr.note = r.never_fits;
    sr.slo_latency_ms = s.slo_ms;
    RequestOutcomes o = r.queue.Outcomes();
    sr.requests = o.arrived;
    sr.served = o.served;
    sr.within_slo = o.within_slo;
    sr.timed_out = o.timed_out;
    sr.rejected = o.rejected;
    sr.waiting_at_end = o.waiting_at_end;
    sr.within_slo_pct =
        o.arrived > 0 ? 100.0 * static_cast<double>(o.within_slo) / static_cast<double>(o.arrived)
                      : 0;
    sr.wait = Stats::Of(std::move(o.wait_seconds));
    sr.latency = Stats::Of(std::move(o.latency_seconds));
    const std::vector<int32_t>& ready = r.ready_by_second;
    if (!ready.empty()) {
      sr.ready_min = *std::min_element(ready.begin(), ready.end());
      sr.ready_max = *std::max_element(ready.begin(), ready.end());
      sr.ready_avg =
          std::accumulate(ready.begin(), ready.end(), 0.0) / static_cast<double>(ready.size());
      // The series: averages of `step` seconds, at most max_series_points of them.
      const size_t max_points = std::max<size_t>(2, o_.max_series_points);
      const size_t step = (ready.size() + max_points - 1) / max_points;
      sr.series_step_seconds = static_cast<double>(step);
      for (size_t i = 0; i < ready.size(); i += step) {
        const size_t e = std::min(ready.size(), i + step);
        sr.ready_series.push_back(std::accumulate(ready.begin() + static_cast<std::ptrdiff_t>(i),
                                                  ready.begin() + static_cast<std::ptrdiff_t>(e),
                                                  0.0) /
                                  static_cast<double>(e - i));
      }
    }
    sr.desired_max = r.desired_max;
    sr.scale_ups = r.scale_ups;
    sr.scale_downs = r.scale_downs;
    sr.scale_up = Stats::Of(r.scale_up);
    sr.reclaim = Stats::Of(r.reclaim);
    sr.reclaim_victims = r.reclaim_victims;
    sr.gpu_hours = static_cast<double>(r.alloc_int) / kMilliPerGpu / kMsPerHour;
    rep->services.push_back(std::move(sr));
  }
}

// Per queue: waits, shares against the entitlement; and Jain's index over the queues.
void Replayer::QueueOutcomes(ReplayReport* rep, std::vector<Samples>* by_queue) const {
  const Int128 window = rep->end - rep->start;
  std::vector<double> fair;
  std::vector<double> fair_waiting;
  for (size_t q = 0; q < w_.queues.size(); ++q) {
    QueueReport qr;
    qr.name = w_.queues[q].name;
    qr.tenant = w_.queues[q].tenant;
    qr.jobs = (*by_queue)[q].jobs;
    qr.wait = Stats::Of(std::move((*by_queue)[q].wait));
    qr.jct = Stats::Of(std::move((*by_queue)[q].jct));
    qr.preempted = queue_preempted_[q];
    // share = integral of the queue's allocated GPU milli dt / (capacity x time)
    qr.gpu_share_pct = Percent(queue_alloc_int_[q], Int128{capacity_} * window);
    qr.entitlement_pct = Percent(w_.queues[q].guaranteed_gpu_milli, capacity_);
    qr.share_while_waiting_pct =
        Percent(queue_wait_alloc_int_[q], Int128{capacity_} * queue_wait_time_[q]);
    qr.waiting_time_pct = Percent(queue_wait_time_[q], window);
    if (qr.entitlement_pct > 0) {
      fair.push_back(qr.gpu_share_pct / qr.entitlement_pct);
      if (queue_wait_time_[q] > 0) {
        fair_waiting.push_back(qr.share_while_waiting_pct / qr.entitlement_pct);
      }
    }
    rep->queues.push_back(std::move(qr));
  }
  rep->jain = Jain(fair);
  rep->jain_while_waiting = Jain(fair_waiting);
}

ReplayReport Replayer::Report(std::string_view policy) const {
  ReplayReport rep;
  rep.policy = std::string(policy);
  rep.seed = o_.seed;
  rep.jobs = static_cast<int64_t>(w_.jobs.size());
  rep.start = w_.jobs.empty() ? 0 : ArrivalOf(w_, 0);
  rep.end = now_;
  rep.makespan_seconds = Seconds(rep.end - rep.start);
  rep.time_limit_reached = time_limit_reached_;
  rep.work_limit_reached = work_limit_reached_;
  rep.work = work_;
  rep.cycles = cycles_;
  Samples all;
  std::vector<Samples> by_queue(w_.queues.size());
  std::vector<Samples> by_type(static_cast<size_t>(JobType::kExperiment) + 1);
  JobOutcomes(&rep, &all, &by_queue, &by_type);
  rep.wait_survival = SurvivalCurve(all.wait);
  rep.wait = Stats::Of(std::move(all.wait));
  rep.alloc_series = series_.Finish(rep.end);
  rep.arrival_alloc_series = arrival_series_.Finish(rep.end);
  rep.jct = Stats::Of(std::move(all.jct));
  for (size_t t = 0; t < by_type.size(); ++t) {
    if (by_type[t].jobs == 0) continue;
    GroupReport g;
    g.name = std::string(JobTypeName(static_cast<JobType>(t)));
    g.jobs = by_type[t].jobs;
    g.wait = Stats::Of(std::move(by_type[t].wait));
    g.jct = Stats::Of(std::move(by_type[t].jct));
    rep.types.push_back(std::move(g));
  }
  QueueOutcomes(&rep, &by_queue);
  ServiceOutcomes(&rep);
  const Int128 window = rep.end - rep.start;
  rep.gpu_alloc_pct = Percent(alloc_int_, Int128{capacity_} * window);
  rep.gpu_hours_allocated = static_cast<double>(alloc_int_) / kMilliPerGpu / kMsPerHour;
  rep.busy_hours = static_cast<double>(busy_end_ - rep.start) / kMsPerHour;
  rep.gpu_alloc_busy_pct =
      busy_end_ > rep.start ? Percent(busy_alloc_int_, Int128{capacity_} * (busy_end_ - rep.start))
                            : 0;
  for (size_t d = 0; d < daily_alloc_int_.size(); ++d) {
    const TimeMs from = rep.start + static_cast<TimeMs>(d) * kMsPerDay;
    const TimeMs to = std::min<TimeMs>(rep.end, from + kMsPerDay);
    rep.gpu_alloc_daily_pct.push_back(
        to > from ? Percent(daily_alloc_int_[d], Int128{capacity_} * (to - from)) : 0);
  }
  Int128 services_int = 0;
  for (const ServiceRun& r : svc_) services_int += r.alloc_int;
  rep.gpu_hours_jobs = static_cast<double>(alloc_int_ - services_int) / kMilliPerGpu / kMsPerHour;
  rep.gpu_hours_idle_while_waiting =
      static_cast<double>(idle_while_waiting_int_) / kMilliPerGpu / kMsPerHour;
  rep.gpu_hours_lost_to_preemption = static_cast<double>(lost_int_) / kMilliPerGpu / kMsPerHour;
  rep.preemptions = preemptions_;
  rep.preemption_decisions = decisions_;
  rep.preemptions_by_reason = by_reason_;
  return rep;
}

}  // namespace

ReplayReport RunReplay(const ReplayWorkload& workload, const core::Profile& profile,
                       std::string_view policy, const ReplayOptions& options) {
  ARBITER_CHECK(workload.cluster != nullptr && workload.tree != nullptr,
                "RunReplay needs a compiled workload");
  ARBITER_CHECK(options.cycle_interval > 0, "RunReplay needs a positive cycle interval");
  Replayer r(workload, profile, options);
  return r.Run(policy);
}

}  // namespace arbiter::sim

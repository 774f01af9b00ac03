#include "core/cycle/cycle.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <memory>
#include <optional>
#include <unordered_map>

#include "core/cycle/admissible.h"
#include "core/cycle/verdict_messages.h"
#include "core/fairshare/fair_share.h"
#include "core/snapshot.h"

namespace arbiter::core {

bool Admission::borrowing() const {
  for (int64_t v : borrowed.v) {
    if (v > 0) return true;
  }
  return false;
}

namespace {

constexpr int32_t kBestEffortPriority = std::numeric_limits<int32_t>::min() / 2;
constexpr TimeMs kNever = std::numeric_limits<TimeMs>::max();

// What placement depends on, apart from the snapshot: equal shapes place (or fail) alike.
struct ShapeKey {
  TaskResources res;
  int32_t tasks;
  uint32_t constraints;
  uint16_t model;
  bool distinct;
  uint32_t lifted;   // reservations lifted for this job (see Lift)
  uint32_t queue;    // preemption only: candidates depend on the queue
  int32_t priority;  // and on the priority
  bool operator==(const ShapeKey&) const = default;
};

struct ShapeKeyHash {
  size_t operator()(const ShapeKey& k) const {
    uint64_t h = 1469598103934665603ULL;
    auto mix = [&h](uint64_t v) { h = (h ^ v) * 1099511628211ULL; };
    mix(static_cast<uint64_t>(k.res.gpus));
    mix(static_cast<uint64_t>(k.res.gpu_milli));
    mix(static_cast<uint64_t>(k.res.gpu_memory_mib));
    mix(static_cast<uint64_t>(k.res.cpu_milli));
    mix(static_cast<uint64_t>(k.res.memory_mib));
    mix(static_cast<uint64_t>(k.tasks));
    mix(k.constraints);
    mix(k.model);
    mix(k.distinct ? 1 : 0);
    mix(k.lifted);
    mix(k.queue);
    mix(static_cast<uint64_t>(static_cast<uint32_t>(k.priority)));
    return h;
  }
};

// A placement (or preemption) that failed; valid while no capacity has been freed since
// (release_version) and the set of reservations is the same (epoch).
struct CachedFailure {
  uint64_t release_version = 0;
  uint64_t epoch = 0;
  VerdictCode code = VerdictCode::kNoFeasibleNode;
  std::string message;
};

struct QueueCursor {
  std::vector<uint32_t> jobs;  // indices into pending, in queue order
  size_t next = 0;
};

// How one model's try ended.
struct ModelTry {
  GpuModelId model = kNoModel;
  VerdictCode code = VerdictCode::kNoFeasibleNode;
  std::string why;
  bool quota_ok = false;
  bool placement_tried = false;  // placement ran (and failed) on the snapshot
};

class CycleRunner {
 public:
  CycleRunner(const CycleInput& in, const Profile& profile)
      : in_(in),
        profile_(profile),
        tree_(*in.tree),
        snap_(*in.cluster, *in.tree),
        cursors_(tree_.size()),
        active_(tree_.size(), 0),
        queue_reserved_(tree_.size(), false),
        running_(in.running != nullptr ? *in.running : kNoRunning),
        preemptor_(running_, tree_, in.preemption, in.now, in.usage_history),
        admissible_(tree_, in.cluster, ChecksOf(profile)) {}

  CycleResult Run() {
    if (in_.lend_grace_limits != nullptr) {
      for (const auto& [q, limit] : *in_.lend_grace_limits) snap_.SetLendGraceLimit(q, limit);
    }
    LoadRunning();
    BuildDistribution();
    SortQueues();
    PlaceNominated();
    for (QueueId q = PickQueue(); q != QuotaTree::kRoot; q = PickQueue()) {
      QueueCursor& c = cursors_[q.value()];
      const uint32_t idx = c.jobs[c.next++];
      if (c.next == c.jobs.size()) Deactivate(q);
      if (!handled_[idx]) TryJob(idx);
    }
    return std::move(result_);
  }

 private:
  static inline const std::vector<RunningJob> kNoRunning{};

  // The node limits the profile's filters enforce (a custom profile may leave some out).
  static NodeChecks ChecksOf(const Profile& profile) {
    auto has = [&profile](std::string_view name) {
      for (const auto& f : profile.filters()) {
        if (f->name() == name) return true;
      }
      return false;
    };
    NodeChecks c;
    c.gpus = has("gpu-model") && has("gpu");
    c.gpu_memory = has("gpu-memory");
    c.cpu = has("cpu");
    c.memory = has("memory");
    c.distinct_nodes = has("gang-distinct-nodes");
    return c;
  }

  // Step 1: the allocations and quota of running jobs.
  void LoadRunning() {
    taken_.assign(running_.size(), false);
    released_.assign(running_.size(), false);
    for (uint32_t i = 0; i < running_.size(); ++i) {
      const RunningJob& r = running_[i];
      for (const TaskPlacement& t : r.tasks) snap_.Allocate(t);
      if (r.spread != 0) AddSpread(r.spread, r.tasks);
      snap_.ChargeQuota(r.queue, RunningQuota(r));
      running_index_.emplace(r.id.value(), i);
      if (r.terminating) taken_[i] = true;
    }
  }

  QuotaVec RunningQuota(const RunningJob& r) const { return in_.cluster->RunningQuota(r); }

  void BuildDistribution() {
    if (!profile_.needs_distribution()) return;
    if (in_.distribution != nullptr) {
      dist_ = in_.distribution;
      frag_cache_ = std::make_unique<FragmentationCache>(*dist_);
      return;
    }
    std::vector<TaskClass> samples;
    samples.reserve(in_.pending->size());
    for (const PendingJob& j : *in_.pending) {
      TaskClass c;
      c.cpu_milli = j.resources.cpu_milli;
      c.gpus = j.resources.gpus;
      c.gpu_milli = j.resources.gpus > 0 ? j.resources.gpu_milli : 0;
      c.model = j.models.empty() ? kNoModel : j.models.front();
      c.memory_mib = j.resources.memory_mib;
      samples.push_back(c);
    }
    derived_dist_ = TaskDistribution::FromTasks(samples);
    dist_ = &derived_dist_;
    // Memoised fragmentation for this cycle's placements (the same values, so the same decisions).
    frag_cache_ = std::make_unique<FragmentationCache>(*dist_);
  }

  const TenantBudget* BudgetOf(const PendingJob& j) const {
    if (in_.budgets == nullptr) return nullptr;
    const uint32_t t = tree_.node(j.queue).tenant.value();
    if (t >= in_.budgets->size() || !(*in_.budgets)[t].exhausted) return nullptr;
    return &(*in_.budgets)[t];
  }

  // Steps 2 and 3: queue order (effective priority: a spent best-effort budget runs lowest).
  void SortQueues() {
    const auto& pending = *in_.pending;
    handled_.assign(pending.size(), false);
    position_.assign(pending.size(), 0);
    priority_.assign(pending.size(), 0);
    for (uint32_t i = 0; i < pending.size(); ++i) {
      const PendingJob& j = pending[i];
      pending_index_.emplace(j.id.value(), i);
      const uint32_t q = j.queue.value();
      if (q == 0 || q >= tree_.size() || !tree_.node(j.queue).is_leaf()) {
        handled_[i] = true;
        AddVerdict(j, VerdictCode::kNotAllowed, 0,
                   q < tree_.size() && q != 0
                       ? fmt::format("'{}' has child queues; submit to one of them",
                                     tree_.node(j.queue).name)
                       : "unknown queue");
        continue;
      }
      const TenantBudget* b = BudgetOf(j);
      priority_[i] = b != nullptr && b->on_exhausted == BudgetPolicy::kBestEffort
                         ? kBestEffortPriority
                         : j.priority;
      cursors_[q].jobs.push_back(i);
    }
    for (uint32_t q = 1; q < tree_.size(); ++q) {
      auto& jobs = cursors_[q].jobs;
      if (jobs.empty()) continue;
      std::sort(jobs.begin(), jobs.end(), [&](uint32_t a, uint32_t b) {
        if (priority_[a] != priority_[b]) return priority_[a] > priority_[b];
        const PendingJob& x = pending[a];
        const PendingJob& y = pending[b];
        if (x.submit_time != y.submit_time) return x.submit_time < y.submit_time;
        return x.id < y.id;
      });
      for (size_t k = 0; k < jobs.size(); ++k) position_[jobs[k]] = static_cast<int32_t>(k + 1);
      for (QueueId n(q);; n = tree_.node(n).parent) {
        ++active_[n.value()];
        if (n == QuotaTree::kRoot) break;
      }
    }
  }

  void Deactivate(QueueId leaf) {
    for (QueueId n = leaf;; n = tree_.node(n).parent) {
      --active_[n.value()];
      if (n == QuotaTree::kRoot) break;
    }
  }

  // Step 4: down from the root, the child with pending work and the lowest share.
  QueueId PickQueue() const {
    if (active_[0] == 0) return QuotaTree::kRoot;
    QueueId n = QuotaTree::kRoot;
    while (!tree_.node(n).is_leaf()) {
      QueueId best = QuotaTree::kRoot;
      double best_share = 0;
      for (QueueId c : tree_.node(n).children) {
        if (active_[c.value()] == 0) continue;
        const double s = ShareOf(c);
        if (best == QuotaTree::kRoot || s < best_share) {
          best = c;
          best_share = s;
        }
      }
      n = best;
    }
    return n;
  }

  double ShareOf(QueueId c) const {
    const QuotaVec* history = in_.usage_history != nullptr && c.value() < in_.usage_history->size()
                                  ? &(*in_.usage_history)[c.value()]
                                  : nullptr;
    return Share(tree_.node(c), snap_.quota().usage(c), history, snap_.quota().capacity(),
                 tree_.num_dims());
  }

  bool Considerable(const PendingJob& j, int32_t position, const std::vector<GpuModelId>& models) {
    if (j.suspended) {
      AddVerdict(j, VerdictCode::kSuspended, position, "suspended; resume it to queue it again");
      return false;
    }
    if (j.not_before > in_.now) {
      Verdict& v = AddVerdict(
          j, VerdictCode::kBackoff, position,
          fmt::format("waiting {} s before its next retry", (j.not_before - in_.now + 999) / 1000));
      v.estimated_start = j.not_before;
      return false;
    }
    const QuotaNode& q = tree_.node(j.queue);
    if (q.allowed_types_mask != 0 &&
        (q.allowed_types_mask & (1u << static_cast<unsigned>(j.type))) == 0) {
      AddVerdict(j, VerdictCode::kNotAllowed, position,
                 fmt::format("queue {} does not take {} jobs", q.name, JobTypeName(j.type)));
      return false;
    }
    // Before any quota or placement work: a job no wait can start neither places, nor preempts,
    // nor holds a reservation that would keep capacity from others.
    if (!models.empty()) {
      if (std::optional<Inadmissibility> why = admissible_.Check(j, models)) {
        AddVerdict(j, VerdictCode::kInadmissible, position, std::move(why->message));
        return false;
      }
    }
    const TenantBudget* b = BudgetOf(j);
    if (b != nullptr && b->on_exhausted == BudgetPolicy::kBlock) {
      AddVerdict(j, VerdictCode::kBudgetExhausted, position,
                 fmt::format("tenant {} has spent its GPU-hour budget for this period; its policy "
                             "blocks new starts until the next period",
                             tree_.node(tree_.node(j.queue).tenant).name));
      return false;
    }
    return true;
  }

  std::vector<GpuModelId> ModelsOf(const PendingJob& j) const {
    return AllowedModels(j, *in_.cluster);
  }

  // The job as the cycle treats it: a spent best-effort budget runs at the lowest priority.
  PendingJob Effective(uint32_t idx) const {
    PendingJob j = (*in_.pending)[idx];
    if (priority_[idx] != j.priority) {
      j.priority = priority_[idx];
      j.preemptible = true;
    }
    return j;
  }

  TimeMs ExpectedEnd(DurationMs walltime, QueueId q, TimeMs start) const {
    if (walltime > 0) return start + walltime;
    const int64_t d = tree_.node(q).default_walltime_seconds;
    return d > 0 ? start + SecondsToMs(d) : kNever;
  }

  // Step 3b: preemptors whose victims are stopping keep the capacity they were promised.
  void PlaceNominated() {
    if (in_.nominations == nullptr) return;
    std::vector<const Nomination*> noms;
    for (const Nomination& n : *in_.nominations) noms.push_back(&n);
    auto prio = [&](const Nomination* n) {
      auto it = pending_index_.find(n->preemptor.value());
      return it == pending_index_.end() ? kBestEffortPriority : priority_[it->second];
    };
    std::stable_sort(noms.begin(), noms.end(), [&](const Nomination* a, const Nomination* b) {
      return prio(a) > prio(b) || (prio(a) == prio(b) && a->preemptor < b->preemptor);
    });
    // First every preemptor takes the placement its preemption planned (its victims' capacity
    // and the free capacity beside it), so that none lands on what another was promised; then
    // those whose plan no longer fits are placed wherever they fit.
    std::vector<const Nomination*> unplanned;
    for (const Nomination* n : noms) {
      if (!PlaceOneNominated(*n, /*planned_only=*/true)) unplanned.push_back(n);
    }
    for (const Nomination* n : unplanned) PlaceOneNominated(*n, /*planned_only=*/false);
  }

  // Allocates `tasks` on the snapshot as they are, when their nodes are schedulable and every
  // GPU share, CPU and memory they name is free; false otherwise (what was allocated stays, for
  // the caller's transaction to roll back).
  bool HoldPlanned(const std::vector<TaskPlacement>& tasks) {
    for (const TaskPlacement& t : tasks) {
      if (!snap_.schedulable_nodes().Contains(t.node.value()) ||
          snap_.free_cpu(t.node) < t.cpu_milli || snap_.free_memory(t.node) < t.memory_mib) {
        return false;
      }
      for (const GpuShare& g : t.gpus) {
        if (!snap_.gpu_usable(g.slot) || snap_.gpu_free_milli(g.slot) < g.milli ||
            snap_.gpu_free_memory(g.slot) < g.memory_mib) {
          return false;
        }
      }
      snap_.Allocate(t);
    }
    return true;
  }

  // planned_only: only on the placement its preemption planned; returns false when that does not
  // fit (nothing is decided; the caller tries again without planned_only). Otherwise true.
  bool PlaceOneNominated(const Nomination& n, bool planned_only) {
    auto it = pending_index_.find(n.preemptor.value());
    if (it == pending_index_.end() || handled_[it->second]) {
      result_.finished_nominations.push_back(n.preemptor);
      return true;
    }
    if (planned_only && n.tasks.empty()) return false;
    const uint32_t idx = it->second;
    const PendingJob j = Effective(idx);
    Snapshot::Txn txn(snap_);
    int still_running = 0;
    DurationMs grace = 0;
    for (JobId v : n.victims) {
      auto r = running_index_.find(v.value());
      if (r == running_index_.end()) continue;
      const RunningJob& victim = running_[r->second];
      ++still_running;
      grace = std::max(grace, victim.grace_period);
      taken_[r->second] = true;
      for (const TaskPlacement& t : victim.tasks) snap_.Release(t);
      snap_.RefundQuota(victim.queue, RunningQuota(victim));
    }
    for (GpuModelId m : ModelsOf(j)) {
      if (planned_only && m != n.model) continue;
      const QuotaVec r = JobQuotaRequest(j.resources, j.tasks, m);
      if (!snap_.quota().Check(j.queue, r, j.grace_period).ok()) continue;
      Admission a;
      if (planned_only) {
        if (!HoldPlanned(n.tasks)) return false;  // the transaction rolls back
        a.tasks = n.tasks;
      } else {
        const TaskRequest req = RequestOf(j, m);
        if (!PlaceGang(snap_, profile_, dist_, req, j.tasks, j.distinct_nodes, &a.tasks, nullptr,
                       frag_cache_.get())) {
          continue;
        }
      }
      handled_[idx] = true;
      if (still_running == 0) {
        Admit(j, m, r, std::move(a));
        result_.finished_nominations.push_back(n.preemptor);
      } else {
        snap_.ChargeQuota(j.queue, r);
        // The victims still run until they stop: their capacity stays taken for the rest of the
        // cycle, or later jobs would be placed on GPUs that are still busy.
        for (JobId victim : n.victims) {
          auto vi = running_index_.find(victim.value());
          if (vi == running_index_.end()) continue;
          for (const TaskPlacement& t : running_[vi->second].tasks) snap_.Allocate(t);
        }
        Verdict& v = AddVerdict(
            j, VerdictCode::kWaitingForReservation, position_[idx],
            fmt::format("capacity is held for it: waiting for {} preempted job{} to stop",
                        still_running, still_running == 1 ? "" : "s"));
        v.estimated_start = in_.now + grace;
      }
      txn.Commit();
      for (JobId v : n.victims) {
        auto vi = running_index_.find(v.value());
        if (vi != running_index_.end()) released_[vi->second] = true;
      }
      return true;
    }
    if (planned_only) return false;
    result_.finished_nominations.push_back(n.preemptor);  // no longer fits there: queue normally
    return true;
  }

  // The task request of `j` on model `m`, with its spread group's counts.
  TaskRequest RequestOf(const PendingJob& j, GpuModelId m) {
    TaskRequest req{&j.resources, m, ConstraintsOf(j), j.type};
    req.image = j.image;
    if (j.spread != 0) {
      req.spread = &spread_[j.spread];
      req.spread_distinct = j.spread_distinct;
    }
    return req;
  }

  void AddSpread(uint32_t group, const std::vector<TaskPlacement>& tasks) {
    SpreadCounts& c = spread_[group];
    for (const TaskPlacement& t : tasks) c.Add(t.node, in_.cluster->node(t.node).rack);
  }

  void Admit(const PendingJob& j, GpuModelId m, const QuotaVec& r, Admission a) {
    if (j.spread != 0) AddSpread(j.spread, a.tasks);
    a.job = j.id;
    a.queue = j.queue;
    a.model = m;
    a.borrowed = BorrowedPart(j.queue, r);
    a.best_effort = j.priority == kBestEffortPriority;
    snap_.ChargeQuota(j.queue, r);
    result_.admissions.push_back(std::move(a));
  }

  // Steps 5 to 7.
  void TryJob(uint32_t idx) {
    const PendingJob j = Effective(idx);
    const int32_t position = position_[idx];
    const std::vector<GpuModelId> models = ModelsOf(j);
    if (!Considerable(j, position, models)) return;
    ++result_.stats.jobs_considered;
    const uint32_t lifted = Lift(ExpectedEnd(j.walltime, j.queue, in_.now));
    std::vector<ModelTry> tries;
    bool admitted = false;
    for (GpuModelId m : models) {
      ModelTry t;
      t.model = m;
      if (TryModel(j, lifted, &t)) {
        admitted = true;
        break;
      }
      tries.push_back(std::move(t));
    }
    Unlift(lifted);
    if (admitted) return;
    if (TryPreemption(j, position, tries)) return;
    Verdict& v = AddVerdict(j, tries.empty() ? VerdictCode::kNoFeasibleNode : tries.front().code,
                            position, JoinReasons(tries, models.empty()));
    ExplainBlocked(j, tries, &v);
  }

  static std::string JoinReasons(const std::vector<ModelTry>& tries, bool no_models) {
    std::vector<std::string> reasons;
    for (const ModelTry& t : tries) {
      if (std::find(reasons.begin(), reasons.end(), t.why) == reasons.end())
        reasons.push_back(t.why);
    }
    if (no_models) reasons.push_back("the cluster has no GPU models");
    std::string message;
    for (const std::string& r : reasons) message += (message.empty() ? "" : "; ") + r;
    return message;
  }

  bool TryModel(const PendingJob& j, uint32_t lifted, ModelTry* t) {
    const GpuModelId m = t->model;
    const QuotaVec r = JobQuotaRequest(j.resources, j.tasks, m);
    const QuotaFailure qf = snap_.quota().Check(j.queue, r, j.grace_period);
    if (!qf.ok()) {
      t->code =
          qf.kind == QuotaFailure::Kind::kMax ? VerdictCode::kQuotaExceeded
          : qf.kind == QuotaFailure::Kind::kBorrow || qf.kind == QuotaFailure::Kind::kLendDeadline
              ? VerdictCode::kBorrowLimit
              : VerdictCode::kNoFeasibleNode;
      t->why = DescribeQuotaFailure(j, qf);
      // A full cluster is a placement problem: it may still get a reservation or preempt.
      t->quota_ok = qf.kind == QuotaFailure::Kind::kCapacity;
      return false;
    }
    t->quota_ok = true;
    const ShapeKey key{j.resources, j.tasks, j.constraints, m.value(), j.distinct_nodes, lifted,
                       0,           0};
    // A group that must take distinct nodes fails by where its group runs, not by its shape.
    auto it = j.spread_distinct ? failures_.end() : failures_.find(key);
    if (it != failures_.end() && it->second.release_version == snap_.release_version() &&
        it->second.epoch == epoch_) {
      ++result_.stats.failure_cache_hits;
      t->placement_tried = true;
      t->code = it->second.code;
      t->why = it->second.message;
      return false;
    }
    t->placement_tried = true;
    ++result_.stats.placement_attempts;
    const TaskRequest req = RequestOf(j, m);
    Admission a;
    PlacementFailure pf;
    Snapshot::Txn txn(snap_);
    if (PlaceGang(snap_, profile_, dist_, req, j.tasks, j.distinct_nodes, &a.tasks, &pf,
                  frag_cache_.get())) {
      if (!Exclusive(j)) {
        Admit(j, m, r, std::move(a));
        txn.Commit();
        return true;
      }
      // Whole nodes: the quota is what they hold, known only now (at least the request).
      const QuotaVec whole = in_.cluster->PlacedQuota(a.tasks);
      const QuotaFailure wf = snap_.quota().Check(j.queue, whole, j.grace_period);
      if (wf.ok()) {
        Admit(j, m, whole, std::move(a));
        txn.Commit();
        return true;
      }
      t->code = wf.kind == QuotaFailure::Kind::kMax ? VerdictCode::kQuotaExceeded
                                                    : VerdictCode::kBorrowLimit;
      t->why = fmt::format("its whole nodes exceed the quota: {}", DescribeQuotaFailure(j, wf));
      return false;  // txn undoes the placement; nothing cached: smaller nodes may free up
    }
    CachedFailure f;
    f.release_version = snap_.release_version();
    f.epoch = epoch_;
    f.code = pf.tasks_placed > 0 ? VerdictCode::kGangIncomplete : VerdictCode::kNoFeasibleNode;
    f.message = DescribePlacementFailure(j, req, pf);
    t->code = f.code;
    t->why = f.message;
    if (!j.spread_distinct) failures_[key] = std::move(f);
    return false;
  }

  bool Exclusive(const PendingJob& j) const {
    const Constraints* c = ConstraintsOf(j);
    return c != nullptr && c->exclusive;
  }

  // Step 6: preemption, for each model in order, cached per shape, queue and priority. A job that
  // takes whole nodes waits for free ones: what it would charge is known only once placed.
  bool TryPreemption(const PendingJob& j, int32_t position, const std::vector<ModelTry>& tries) {
    if (!in_.preemption.enabled || running_.empty() || Exclusive(j)) return false;
    for (const ModelTry& t : tries) {
      if (t.code == VerdictCode::kQuotaExceeded) continue;  // a max never yields to preemption
      const ShapeKey key{j.resources,     j.tasks,          j.constraints,
                         t.model.value(), j.distinct_nodes, j.preempts_anywhere ? 1u : 0u,
                         j.queue.value(), j.priority};
      auto it = preempt_failures_.find(key);
      if (it != preempt_failures_.end() && it->second.release_version == snap_.release_version() &&
          it->second.epoch == epoch_) {
        continue;
      }
      ++result_.stats.preemption_attempts;
      PreemptionRequest req{&j, t.model, JobQuotaRequest(j.resources, j.tasks, t.model),
                            ConstraintsOf(j)};
      PreemptionPlan plan;
      if (preemptor_.TryPreempt(snap_, profile_, dist_, req, taken_, &plan, frag_cache_.get())) {
        RecordPreemption(j, position, t.model, plan);
        return true;
      }
      preempt_failures_[key] = CachedFailure{snap_.release_version(), epoch_, t.code, {}};
    }
    return false;
  }

  void RecordPreemption(const PendingJob& j, int32_t position, GpuModelId model,
                        const PreemptionPlan& plan) {
    PreemptionDecision d;
    d.preemptor = j.id;
    d.queue = j.queue;
    d.reason = plan.reason;
    d.tasks = plan.tasks;
    d.model = model;
    for (uint32_t v : plan.victims) {
      taken_[v] = true;
      released_[v] = true;
      // The victim runs until it stops (its grace period): its capacity stays taken for the rest
      // of the cycle, under the preemptor's hold, or later jobs would land on its busy GPUs.
      for (const TaskPlacement& t : running_[v].tasks) snap_.Allocate(t);
      d.victims.push_back(running_[v].id);
      if (std::find(d.victim_queues.begin(), d.victim_queues.end(), running_[v].queue) ==
          d.victim_queues.end()) {
        d.victim_queues.push_back(running_[v].queue);
      }
      d.grace_period = std::max(d.grace_period, running_[v].grace_period);
    }
    Verdict& v =
        AddVerdict(j, VerdictCode::kWaitingForReservation, position,
                   fmt::format("preempting {} job{} ({}); starts when they stop, within {} s",
                               d.victims.size(), d.victims.size() == 1 ? "" : "s",
                               PreemptionReasonName(plan.reason), (d.grace_period + 999) / 1000));
    v.estimated_start = in_.now + d.grace_period;
    result_.preemptions.push_back(std::move(d));
  }

  // Step 7: why a job that fits the quota still waits, and a reservation for a queue's first one.
  void ExplainBlocked(const PendingJob& j, const std::vector<ModelTry>& tries, Verdict* v) {
    const ModelTry* placement = nullptr;
    for (const ModelTry& t : tries) {
      if (t.quota_ok) {
        placement = &t;
        break;
      }
    }
    if (placement == nullptr) return;
    const TaskRequest req{&j.resources, placement->model, ConstraintsOf(j), j.type};
    if (placement->placement_tried && !result_.reservations.empty() &&
        FitsWithoutReservations(j, req)) {
      const Reservation* top = &result_.reservations.front();
      for (const Reservation& r : result_.reservations) {
        if (r.priority > top->priority) top = &r;
      }
      const bool lower = top->priority > j.priority;
      v->code = lower ? VerdictCode::kLowerPriority : VerdictCode::kWaitingForReservation;
      v->message = fmt::format(
          "{} the capacity it needs is held for job {}{}, which starts at the latest in {} s",
          v->message + ";", top->job.value(), lower ? " of higher priority" : " ahead of it",
          std::max<int64_t>(0, (top->start - in_.now + 999) / 1000));
      return;
    }
    if (!in_.backfill.enabled || queue_reserved_[j.queue.value()] ||
        static_cast<int>(result_.reservations.size()) >= in_.backfill.max_reservations) {
      return;
    }
    queue_reserved_[j.queue.value()] = true;
    // The earliest reservation over the models it may use within its quota (ties: the model it
    // prefers), skipping models no node of which could ever hold it.
    Reservation r;
    bool reserved = false;
    for (const ModelTry& t : tries) {
      if (!t.quota_ok || admissible_.Check(j, {t.model}).has_value()) continue;
      const TaskRequest model_req{&j.resources, t.model, ConstraintsOf(j), j.type};
      Reservation candidate;
      if (MakeReservation(j, model_req, &candidate) && (!reserved || candidate.start < r.start)) {
        r = std::move(candidate);
        reserved = true;
      }
    }
    if (reserved) {
      v->estimated_start = r.start;
      v->message += fmt::format("; reserved: starts by {} s from now when running jobs end",
                                std::max<int64_t>(0, (r.start - in_.now + 999) / 1000));
      for (const TaskPlacement& t : r.tasks) snap_.Hold(t);
      result_.reservations.push_back(std::move(r));
      ++epoch_;
    }
  }

  bool FitsWithoutReservations(const PendingJob& j, const TaskRequest& req) {
    // Cached per shape: the answer changes only with new reservations or freed capacity.
    const ShapeKey key{j.resources, j.tasks, j.constraints, req.model.value(), j.distinct_nodes, 0,
                       0,           0};
    auto it = held_probe_.find(key);
    if (it != held_probe_.end() && it->second.release_version == snap_.release_version() &&
        it->second.epoch == epoch_) {
      return it->second.code == VerdictCode::kWaitingForReservation;
    }
    const bool fits = ProbeWithoutReservations(j, req);
    held_probe_[key] =
        CachedFailure{snap_.release_version(),
                      epoch_,
                      fits ? VerdictCode::kWaitingForReservation : VerdictCode::kNoFeasibleNode,
                      {}};
    return fits;
  }

  bool ProbeWithoutReservations(const PendingJob& j, const TaskRequest& req) {
    for (const Reservation& r : result_.reservations) {
      for (const TaskPlacement& t : r.tasks) snap_.Unhold(t);
    }
    bool fits = false;
    {
      Snapshot::Txn probe(snap_);
      std::vector<TaskPlacement> tasks;
      fits = PlaceGang(snap_, profile_, dist_, req, j.tasks, j.distinct_nodes, &tasks, nullptr,
                       frag_cache_.get());
    }
    for (const Reservation& r : result_.reservations) {
      for (const TaskPlacement& t : r.tasks) snap_.Hold(t);
    }
    return fits;
  }

  // The earliest time the job fits as running jobs end by their walltimes (or, without one, by
  // the driver's estimate, RunningJob::expected_end): a binary search over how many of them (in
  // order of end) must be gone, since more ending never makes it fit less.
  bool MakeReservation(const PendingJob& j, const TaskRequest& req, Reservation* out) {
    std::vector<std::pair<TimeMs, uint32_t>> ends;
    for (uint32_t i = 0; i < running_.size(); ++i) {
      if (released_[i]) continue;  // its capacity already went to a preemptor
      const RunningJob& r = running_[i];
      TimeMs end =
          r.terminating ? in_.now + r.grace_period : ExpectedEnd(r.walltime, r.queue, r.start_time);
      if (end == kNever && r.expected_end > 0) end = r.expected_end;  // an estimate
      if (end != kNever) ends.emplace_back(std::max(end, in_.now), i);
    }
    std::sort(ends.begin(), ends.end());
    auto fits_after = [&](size_t k, std::vector<TaskPlacement>* tasks) {
      Snapshot::Txn probe(snap_);
      for (size_t e = 0; e < k; ++e) {
        for (const TaskPlacement& t : running_[ends[e].second].tasks) snap_.Release(t);
      }
      return PlaceGang(snap_, profile_, dist_, req, j.tasks, j.distinct_nodes, tasks, nullptr,
                       frag_cache_.get());
    };
    std::vector<TaskPlacement> tasks;
    if (ends.empty() || !fits_after(ends.size(), &tasks)) return false;
    size_t lo = 1;
    size_t hi = ends.size();
    while (lo < hi) {
      const size_t mid = lo + (hi - lo) / 2;
      std::vector<TaskPlacement> unused;
      if (fits_after(mid, &unused)) {
        hi = mid;
      } else {
        lo = mid + 1;
      }
    }
    fits_after(lo, &tasks);
    out->job = j.id;
    out->priority = j.priority;
    out->start = ends[lo - 1].first;
    out->tasks = std::move(tasks);
    return true;
  }

  // Reservations that start no earlier than `end` do not bind a job that is over by then (EASY):
  // lift them around its placement. Returns how many were lifted (part of the failure cache key).
  uint32_t Lift(TimeMs end) {
    uint32_t n = 0;
    for (size_t i = 0; i < result_.reservations.size(); ++i) {
      if (result_.reservations[i].start < end) continue;
      for (const TaskPlacement& t : result_.reservations[i].tasks) snap_.Unhold(t);
      lifted_.push_back(i);
      ++n;
    }
    return n;
  }

  void Unlift(uint32_t n) {
    for (uint32_t k = 0; k < n; ++k) {
      for (const TaskPlacement& t : result_.reservations[lifted_.back()].tasks) snap_.Hold(t);
      lifted_.pop_back();
    }
  }

  const Constraints* ConstraintsOf(const PendingJob& j) const {
    if (j.constraints == 0 || in_.constraints == nullptr ||
        j.constraints >= in_.constraints->size()) {
      return nullptr;
    }
    return &(*in_.constraints)[j.constraints];
  }

  // Borrowed part of r at the nearest node (leaf first) that configures each dimension.
  QuotaVec BorrowedPart(QueueId leaf, const QuotaVec& r) const {
    QuotaVec b;
    for (int d = 0; d < tree_.num_dims(); ++d) {
      if (r[d] == 0) continue;
      QueueId a = leaf;
      while (a != QuotaTree::kRoot && !tree_.node(a).configured[static_cast<size_t>(d)]) {
        a = tree_.node(a).parent;
      }
      if (a == QuotaTree::kRoot) continue;
      const int64_t u = snap_.quota().usage(a)[d];
      const int64_t g = tree_.node(a).guaranteed[d];
      b[d] = std::max<int64_t>(0, u + r[d] - g) - std::max<int64_t>(0, u - g);
    }
    return b;
  }
  std::string DescribeQuotaFailure(const PendingJob& j, const QuotaFailure& f) const {
    return QuotaFailureMessage(tree_, j, f);
  }

  std::string DescribePlacementFailure(const PendingJob& j, const TaskRequest& req,
                                       const PlacementFailure& pf) const {
    return PlacementFailureMessage(snap_, profile_, *in_.cluster, j, req, pf);
  }

  Verdict& AddVerdict(const PendingJob& j, VerdictCode code, int32_t position, std::string msg) {
    Verdict v;
    v.job = j.id;
    v.code = code;
    v.message = std::move(msg);
    v.position = position;
    result_.verdicts.push_back(std::move(v));
    return result_.verdicts.back();
  }

  const CycleInput& in_;
  const Profile& profile_;
  const QuotaTree& tree_;
  Snapshot snap_;
  std::vector<QueueCursor> cursors_;
  std::vector<int32_t> active_;  // leaves with pending jobs left, per subtree
  std::vector<bool> queue_reserved_;
  const std::vector<RunningJob>& running_;
  Preemptor preemptor_;
  AdmissibilityChecker admissible_;
  std::unordered_map<uint64_t, uint32_t> running_index_;
  std::unordered_map<uint64_t, uint32_t> pending_index_;
  std::map<uint32_t, SpreadCounts> spread_;  // by spread group: where its tasks run (steps 1, 5)
  std::vector<bool> taken_;     // running jobs already terminating or chosen as victims
  std::vector<bool> released_;  // running jobs whose capacity the snapshot has given to others
  std::vector<bool> handled_;   // pending jobs decided outside the fair-share loop
  std::vector<int32_t> position_;
  std::vector<int32_t> priority_;  // effective priority
  std::vector<size_t> lifted_;
  uint64_t epoch_ = 0;  // bumped with every new reservation
  TaskDistribution derived_dist_;
  const TaskDistribution* dist_ = nullptr;
  std::unique_ptr<FragmentationCache> frag_cache_;  // over *dist_, when the profile needs one
  std::unordered_map<ShapeKey, CachedFailure, ShapeKeyHash> failures_;
  std::unordered_map<ShapeKey, CachedFailure, ShapeKeyHash> preempt_failures_;
  std::unordered_map<ShapeKey, CachedFailure, ShapeKeyHash> held_probe_;
  CycleResult result_;
};

}  // namespace

CycleResult RunCycle(const CycleInput& in, const Profile& profile) {
  ARBITER_CHECK(in.cluster != nullptr && in.tree != nullptr && in.pending != nullptr,
                "RunCycle needs a cluster, a queue tree and a pending list");
  CycleRunner runner(in, profile);
  return runner.Run();
}

void ApplyAdmissions(const CycleInput& in, const CycleResult& result, TimeMs start,
                     std::vector<RunningJob>* running) {
  std::unordered_map<uint64_t, const PendingJob*> by_id;
  for (const PendingJob& j : *in.pending) by_id.emplace(j.id.value(), &j);
  for (const Admission& a : result.admissions) {
    const PendingJob& j = *by_id.at(a.job.value());
    RunningJob r;
    r.id = j.id;
    r.queue = j.queue;
    r.priority = j.priority;
    r.preemptible = j.preemptible;
    r.model = a.model;
    r.resources = j.resources;
    r.tasks = a.tasks;
    r.start_time = start;
    r.walltime = j.walltime;
    r.exclusive = j.constraints != 0 && in.constraints != nullptr &&
                  j.constraints < in.constraints->size() &&
                  (*in.constraints)[j.constraints].exclusive;
    if (a.best_effort) {
      r.priority = kBestEffortPriority;
      r.preemptible = true;
    }
    running->push_back(std::move(r));
  }
}

void ApplyPreemptions(const CycleResult& result, std::vector<RunningJob>* running) {
  for (const PreemptionDecision& d : result.preemptions) {
    for (JobId v : d.victims) {
      for (RunningJob& r : *running) {
        if (r.id == v) r.terminating = true;
      }
    }
  }
}

}  // namespace arbiter::core

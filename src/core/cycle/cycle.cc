#include "core/cycle/cycle.h"

#include <fmt/format.h>

#include <algorithm>
#include <unordered_map>

#include "core/fairshare/fair_share.h"
#include "core/snapshot.h"

namespace arbiter::core {

std::string_view VerdictCodeName(VerdictCode c) {
  switch (c) {
    case VerdictCode::kQuotaExceeded:
      return "QuotaExceeded";
    case VerdictCode::kBorrowLimit:
      return "BorrowLimit";
    case VerdictCode::kNoFeasibleNode:
      return "NoFeasibleNode";
    case VerdictCode::kGangIncomplete:
      return "GangIncomplete";
    case VerdictCode::kWaitingForReservation:
      return "WaitingForReservation";
    case VerdictCode::kLowerPriority:
      return "LowerPriority";
    case VerdictCode::kBudgetExhausted:
      return "BudgetExhausted";
    case VerdictCode::kSuspended:
      return "Suspended";
    case VerdictCode::kBackoff:
      return "Backoff";
    case VerdictCode::kNotAllowed:
      return "NotAllowed";
  }
  return "Unknown";
}

bool Admission::borrowing() const {
  for (int64_t v : borrowed.v) {
    if (v > 0) return true;
  }
  return false;
}

namespace {

// What placement depends on, apart from the snapshot: equal shapes place (or fail) alike.
struct ShapeKey {
  TaskResources res;
  int32_t tasks;
  uint32_t constraints;
  uint16_t model;
  bool distinct;
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
    return h;
  }
};

// A placement that failed; valid while no capacity has been freed since (release_version).
struct CachedFailure {
  uint64_t release_version = 0;
  VerdictCode code = VerdictCode::kNoFeasibleNode;
  std::string message;
};

struct QueueCursor {
  std::vector<uint32_t> jobs;  // indices into pending, in queue order
  size_t next = 0;
};

class CycleRunner {
 public:
  CycleRunner(const CycleInput& in, const Profile& profile)
      : in_(in),
        profile_(profile),
        tree_(*in.tree),
        snap_(*in.cluster, *in.tree),
        cursors_(tree_.size()),
        active_(tree_.size(), 0) {}

  CycleResult Run() {
    LoadRunning();
    BuildDistribution();
    SortQueues();
    for (QueueId q = PickQueue(); q != QuotaTree::kRoot; q = PickQueue()) {
      QueueCursor& c = cursors_[q.value()];
      const uint32_t idx = c.jobs[c.next];
      const auto position = static_cast<int32_t>(++c.next);
      if (c.next == c.jobs.size()) Deactivate(q);
      TryJob((*in_.pending)[idx], position);
    }
    return std::move(result_);
  }

 private:
  // Step 1: the allocations and quota of running jobs.
  void LoadRunning() {
    if (in_.running == nullptr) return;
    for (const RunningJob& r : *in_.running) {
      for (const TaskPlacement& t : r.tasks) snap_.Allocate(t);
      snap_.ChargeQuota(
          r.queue, JobQuotaRequest(r.resources, static_cast<int32_t>(r.tasks.size()), r.model));
    }
  }

  void BuildDistribution() {
    if (!profile_.needs_distribution()) return;
    if (in_.distribution != nullptr) {
      dist_ = in_.distribution;
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
      samples.push_back(c);
    }
    derived_dist_ = TaskDistribution::FromTasks(samples);
    dist_ = &derived_dist_;
  }

  // Steps 2 and 3.
  void SortQueues() {
    const auto& pending = *in_.pending;
    for (uint32_t i = 0; i < pending.size(); ++i) {
      const PendingJob& j = pending[i];
      const uint32_t q = j.queue.value();
      if (q == 0 || q >= tree_.size() || !tree_.node(j.queue).is_leaf()) {
        AddVerdict(j, VerdictCode::kNotAllowed, 0,
                   q < tree_.size() && q != 0
                       ? fmt::format("'{}' has child queues; submit to one of them",
                                     tree_.node(j.queue).name)
                       : "unknown queue");
        continue;
      }
      cursors_[q].jobs.push_back(i);
    }
    for (uint32_t q = 1; q < tree_.size(); ++q) {
      auto& jobs = cursors_[q].jobs;
      if (jobs.empty()) continue;
      std::sort(jobs.begin(), jobs.end(), [&](uint32_t a, uint32_t b) {
        const PendingJob& x = pending[a];
        const PendingJob& y = pending[b];
        if (x.priority != y.priority) return x.priority > y.priority;
        if (x.submit_time != y.submit_time) return x.submit_time < y.submit_time;
        return x.id < y.id;
      });
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
        const QuotaVec* history =
            in_.usage_history != nullptr && c.value() < in_.usage_history->size()
                ? &(*in_.usage_history)[c.value()]
                : nullptr;
        const double s = Share(tree_.node(c), snap_.quota().usage(c), history,
                               snap_.quota().capacity(), tree_.num_dims());
        if (best == QuotaTree::kRoot || s < best_share) {
          best = c;
          best_share = s;
        }
      }
      n = best;
    }
    return n;
  }

  bool Considerable(const PendingJob& j, int32_t position) {
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
    return true;
  }

  // Steps 5 and 6.
  void TryJob(const PendingJob& j, int32_t position) {
    if (!Considerable(j, position)) return;
    ++result_.stats.jobs_considered;
    std::vector<GpuModelId> models = j.models;
    if (j.resources.gpus == 0) {
      models.assign(1, kNoModel);
    } else if (models.empty()) {
      for (size_t m = 0; m < in_.cluster->models().size(); ++m) {
        models.emplace_back(static_cast<uint16_t>(m));
      }
    }
    VerdictCode code = VerdictCode::kNoFeasibleNode;
    std::vector<std::string> reasons;
    bool first = true;
    for (GpuModelId m : models) {
      std::string why;
      VerdictCode c;
      if (TryModel(j, m, &c, &why)) return;
      if (first) code = c;
      first = false;
      if (std::find(reasons.begin(), reasons.end(), why) == reasons.end()) reasons.push_back(why);
    }
    if (models.empty()) reasons.push_back("the cluster has no GPU models");
    std::string message;
    for (const std::string& r : reasons) message += (message.empty() ? "" : "; ") + r;
    AddVerdict(j, code, position, std::move(message));
  }

  bool TryModel(const PendingJob& j, GpuModelId m, VerdictCode* code, std::string* why) {
    const QuotaVec r = JobQuotaRequest(j.resources, j.tasks, m);
    const QuotaFailure qf = snap_.quota().Check(j.queue, r);
    if (!qf.ok()) {
      *code = qf.kind == QuotaFailure::Kind::kMax ? VerdictCode::kQuotaExceeded
                                                  : VerdictCode::kBorrowLimit;
      *why = DescribeQuotaFailure(j, qf);
      return false;
    }
    const ShapeKey key{j.resources, j.tasks, j.constraints, m.value(), j.distinct_nodes};
    auto it = failures_.find(key);
    if (it != failures_.end() && it->second.release_version == snap_.release_version()) {
      ++result_.stats.failure_cache_hits;
      *code = it->second.code;
      *why = it->second.message;
      return false;
    }
    ++result_.stats.placement_attempts;
    TaskRequest req{&j.resources, m, ConstraintsOf(j), j.type};
    Admission a;
    PlacementFailure pf;
    if (PlaceGang(snap_, profile_, dist_, req, j.tasks, j.distinct_nodes, &a.tasks, &pf)) {
      a.job = j.id;
      a.queue = j.queue;
      a.model = m;
      a.borrowed = BorrowedPart(j.queue, r);
      snap_.ChargeQuota(j.queue, r);
      result_.admissions.push_back(std::move(a));
      return true;
    }
    CachedFailure f;
    f.release_version = snap_.release_version();
    f.code = pf.tasks_placed > 0 ? VerdictCode::kGangIncomplete : VerdictCode::kNoFeasibleNode;
    f.message = DescribePlacementFailure(j, req, pf);
    *code = f.code;
    *why = f.message;
    failures_[key] = std::move(f);
    return false;
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

  std::string ModelName(GpuModelId m) const {
    return m == kNoModel ? "" : in_.cluster->models()[m.value()].name;
  }

  std::string DescribeQuotaFailure(const PendingJob& j, const QuotaFailure& f) const {
    const QuotaNode& n = tree_.node(f.node);
    const char* what = n.is_tenant ? "tenant" : "queue";
    const std::string& dim = tree_.DimName(f.dim);
    std::string unit = dim == "cpu" ? " CPU" : dim == "memory" ? "" : " GPUs";
    if (f.dim >= kFirstModelDim) unit = " GPUs of " + dim.substr(4);
    if (f.kind == QuotaFailure::Kind::kMax) {
      return fmt::format("{} {} uses {} of max {}{}; this job needs {} more", what, n.name,
                         tree_.FormatAmount(f.dim, f.used), tree_.FormatAmount(f.dim, f.limit),
                         unit, tree_.FormatAmount(f.dim, f.requested));
    }
    const QuotaNode& q = tree_.node(j.queue);
    return fmt::format(
        "queue {} uses {} of {} guaranteed{} and can borrow only {} more; this job needs {} "
        "(the rest is in use by other queues or held back by their lending limits)",
        q.name, tree_.FormatAmount(f.dim, f.used), tree_.FormatAmount(f.dim, q.guaranteed[f.dim]),
        unit, tree_.FormatAmount(f.dim, f.limit), tree_.FormatAmount(f.dim, f.requested));
  }

  std::string DescribePlacementFailure(const PendingJob& j, const TaskRequest& req,
                                       const PlacementFailure& pf) const {
    const TaskResources& r = j.resources;
    std::string need;
    if (r.gpus == 0) {
      need = fmt::format("{} CPU and {} MiB RAM", FormatMilli(r.cpu_milli), r.memory_mib);
    } else if (r.fractional()) {
      need = fmt::format("{} of a GPU of model {}", FormatMilli(r.gpu_milli), ModelName(req.model));
      if (r.gpu_memory_mib > 0) need += fmt::format(" with {} MiB GPU memory", r.gpu_memory_mib);
    } else {
      need =
          fmt::format("{} GPU{} of model {}", r.gpus, r.gpus == 1 ? "" : "s", ModelName(req.model));
    }
    int best_whole = 0;
    int32_t best_milli = 0;
    const FilterCounts counts = DiagnoseTask(snap_, profile_, req, &best_whole, &best_milli);
    std::string out;
    if (j.tasks > 1 && pf.tasks_placed > 0) {
      out = fmt::format("gang of {} tasks needs {} per task{}: only {} fit at once", j.tasks, need,
                        j.distinct_nodes ? " on distinct nodes" : "", pf.tasks_placed);
    } else {
      out = fmt::format("needs {} on one node", need);
      if (j.tasks > 1) out += fmt::format(" for each of {} tasks", j.tasks);
      if (r.gpus > 0 && !r.fractional()) {
        out += fmt::format(": best node has {} free", best_whole);
      } else if (r.gpus > 0) {
        out += fmt::format(": best GPU has {} free", FormatMilli(best_milli));
      }
    }
    std::string detail;
    for (size_t c = 1; c < counts.by_code.size(); ++c) {
      if (counts.by_code[c] == 0) continue;
      detail += fmt::format("{}{} node{} {}", detail.empty() ? "" : ", ", counts.by_code[c],
                            counts.by_code[c] == 1 ? "" : "s",
                            FilterCodeName(static_cast<FilterCode>(c)));
    }
    if (!detail.empty()) out += "; " + detail;
    return out;
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
  TaskDistribution derived_dist_;
  const TaskDistribution* dist_ = nullptr;
  std::unordered_map<ShapeKey, CachedFailure, ShapeKeyHash> failures_;
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
    running->push_back(std::move(r));
  }
}

}  // namespace arbiter::core

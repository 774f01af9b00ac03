#include "core/preemption/preemption.h"

#include <algorithm>
#include <tuple>

#include "core/fairshare/fair_share.h"

namespace arbiter::core {

std::string_view PreemptionReasonName(PreemptionReason r) {
  switch (r) {
    case PreemptionReason::kPriority:
      return "priority";
    case PreemptionReason::kReclaim:
      return "reclaim";
    case PreemptionReason::kAnywhere:
      return "anywhere";
  }
  return "unknown";
}

namespace {

QuotaVec QuotaOf(const Snapshot& snap, const RunningJob& v) {
  return snap.cluster().RunningQuota(v);
}

// The node that accounts dimension d for leaf q: q itself or its nearest configuring ancestor.
QueueId Accountant(const QuotaTree& tree, QueueId q, int d) {
  while (q != QuotaTree::kRoot && !tree.node(q).configured[static_cast<size_t>(d)]) {
    q = tree.node(q).parent;
  }
  return q;
}

}  // namespace

bool Preemptor::QueueBorrowing(const Snapshot& snap, QueueId q, const QuotaVec& uses) const {
  bool any_configured = false;
  for (int d = 0; d < tree_.num_dims(); ++d) {
    if (uses[d] <= 0) continue;
    const QueueId a = Accountant(tree_, q, d);
    if (a == QuotaTree::kRoot) continue;
    any_configured = true;
    if (snap.quota().usage(a)[d] > tree_.node(a).guaranteed[d]) return true;
  }
  // A queue whose tenant guarantees it nothing on the GPU dimension it uses runs on what
  // others are guaranteed, or on what nobody is: borrowed either way.
  return !any_configured && uses[kDimGpu] > 0;
}

bool Preemptor::WithinGuarantee(const Snapshot& snap, QueueId q, const QuotaVec& r) const {
  bool any = false;
  for (int d = 0; d < tree_.num_dims(); ++d) {
    if (r[d] <= 0) continue;
    const QueueId a = Accountant(tree_, q, d);
    if (a == QuotaTree::kRoot) continue;
    any = true;
    if (snap.quota().usage(a)[d] + r[d] > tree_.node(a).guaranteed[d]) return false;
  }
  return any;
}

double Preemptor::ShareOf(const Snapshot& snap, QueueId q) const {
  const QuotaVec* h =
      history_ != nullptr && q.value() < history_->size() ? &(*history_)[q.value()] : nullptr;
  return Share(tree_.node(q), snap.quota().usage(q), h, snap.quota().capacity(), tree_.num_dims());
}

std::vector<Preemptor::Candidate> Preemptor::Candidates(const Snapshot& snap,
                                                        const PreemptionRequest& req,
                                                        const std::vector<bool>& taken) const {
  const PendingJob& j = *req.job;
  const bool may_reclaim = WithinGuarantee(snap, j.queue, req.quota);
  // A queue that lends within a reclaim deadline takes its GPUs back whatever the borrowers'
  // minimum runtime: they were lent on that condition.
  bool deadline = false;
  for (QueueId a = j.queue;; a = tree_.node(a).parent) {
    deadline = deadline || snap.quota().LendGraceLimit(a) > 0;
    if (a == QuotaTree::kRoot) break;
  }
  std::vector<Candidate> out;
  for (uint32_t i = 0; i < running_.size(); ++i) {
    const RunningJob& v = running_[i];
    if (taken[i] || v.terminating || !v.preemptible) continue;
    const bool young = now_ - v.start_time < v.min_runtime;
    if (young && !(deadline && may_reclaim && v.queue != j.queue)) continue;
    if (v.queue == j.queue) {
      if (v.priority < j.priority) out.push_back({i, PreemptionReason::kPriority});
      continue;
    }
    if (j.preempts_anywhere && v.priority < j.priority && !young) {
      out.push_back({i, PreemptionReason::kAnywhere});
      continue;
    }
    if (!may_reclaim || !QueueBorrowing(snap, v.queue, QuotaOf(snap, v))) continue;
    // Loop guard: v started by preempting j's queue; it stays unless the shares differ enough.
    const bool started_on_us = std::find(v.preempted_queues.begin(), v.preempted_queues.end(),
                                         j.queue) != v.preempted_queues.end();
    if (started_on_us &&
        ShareOf(snap, j.queue) + options_.fair_share_tolerance >= ShareOf(snap, v.queue)) {
      continue;
    }
    out.push_back({i, PreemptionReason::kReclaim});
  }
  auto key = [&](const Candidate& c) {
    const RunningJob& v = running_[c.index];
    const TimeMs since = std::max(v.start_time, v.last_checkpoint);
    return std::make_tuple(v.priority, now_ - since, -v.start_time, v.id.value());
  };
  std::sort(out.begin(), out.end(),
            [&](const Candidate& a, const Candidate& b) { return key(a) < key(b); });
  return out;
}

void Preemptor::ReleaseJob(Snapshot& snap, const RunningJob& v) const {
  for (const TaskPlacement& t : v.tasks) snap.Release(t);
  snap.RefundQuota(v.queue, QuotaOf(snap, v));
}

void Preemptor::RestoreJob(Snapshot& snap, const RunningJob& v) const {
  for (const TaskPlacement& t : v.tasks) snap.Allocate(t);
  snap.ChargeQuota(v.queue, QuotaOf(snap, v));
}

bool Preemptor::Fits(Snapshot& snap, const Profile& profile, const TaskDistribution* dist,
                     const PreemptionRequest& req, int* trials,
                     FragmentationCache* frag_cache) const {
  if (!snap.quota().Check(req.job->queue, req.quota, req.job->grace_period).ok()) return false;
  if (++*trials > options_.max_placement_trials) return false;
  Snapshot::Txn probe(snap);  // never committed: only asks whether the gang fits
  std::vector<TaskPlacement> tasks;
  const TaskRequest tr{&req.job->resources, req.model, req.constraints, req.job->type};
  return PlaceGang(snap, profile, dist, tr, req.job->tasks, req.job->distinct_nodes, &tasks,
                   nullptr, frag_cache);
}

bool Preemptor::TryPreempt(Snapshot& snap, const Profile& profile, const TaskDistribution* dist,
                           const PreemptionRequest& req, const std::vector<bool>& taken,
                           PreemptionPlan* plan, FragmentationCache* frag_cache) const {
  if (!options_.enabled) return false;
  const std::vector<Candidate> candidates = Candidates(snap, req, taken);
  if (candidates.empty()) return false;
  Snapshot::Txn txn(snap);
  // 1. Take victims in order until the job fits.
  std::vector<Candidate> removed;
  int trials = 0;
  bool fits = false;
  for (const Candidate& c : candidates) {
    const RunningJob& v = running_[c.index];
    // A reclaim victim's queue may have stopped borrowing through earlier removals.
    if (c.reason == PreemptionReason::kReclaim &&
        !QueueBorrowing(snap, v.queue, QuotaOf(snap, v))) {
      continue;
    }
    ReleaseJob(snap, v);
    removed.push_back(c);
    if (Fits(snap, profile, dist, req, &trials, frag_cache)) {
      fits = true;
      break;
    }
    if (trials > options_.max_placement_trials) break;
  }
  if (!fits) return false;  // txn restores the snapshot
  // 2. Put back every victim the job can do without (all but the last one taken).
  std::vector<Candidate> victims;
  for (size_t i = 0; i + 1 < removed.size(); ++i) {
    const RunningJob& v = running_[removed[i].index];
    RestoreJob(snap, v);
    int unused = 0;
    if (!Fits(snap, profile, dist, req, &unused, frag_cache)) {
      ReleaseJob(snap, v);
      victims.push_back(removed[i]);
    }
  }
  victims.push_back(removed.back());
  // 3. Hold the capacity: place the preemptor for real and charge its quota.
  const TaskRequest tr{&req.job->resources, req.model, req.constraints, req.job->type};
  if (!PlaceGang(snap, profile, dist, tr, req.job->tasks, req.job->distinct_nodes, &plan->tasks,
                 nullptr, frag_cache)) {
    return false;
  }
  snap.ChargeQuota(req.job->queue, req.quota);
  plan->victims.clear();
  plan->reason = PreemptionReason::kPriority;
  for (const Candidate& c : victims) {
    plan->victims.push_back(c.index);
    if (c.reason == PreemptionReason::kReclaim) plan->reason = PreemptionReason::kReclaim;
    if (c.reason == PreemptionReason::kAnywhere && plan->reason == PreemptionReason::kPriority) {
      plan->reason = PreemptionReason::kAnywhere;
    }
  }
  std::sort(plan->victims.begin(), plan->victims.end());
  txn.Commit();
  return true;
}

}  // namespace arbiter::core

// RunCycle: one scheduling cycle of the core. Pure: no I/O, no threads, no clock; `now` and `seed`
// are inputs, and equal inputs give equal decisions.
//
// Steps (cycle.cc follows them):
//   1. Build the snapshot: every node free, then the allocations and quota of running jobs.
//   2. Sort each leaf queue's pending jobs: priority (high first), then submit time, then id.
//   3. Give verdicts to jobs that cannot be considered (suspended, in backoff, not allowed).
//   4. Repeatedly pick the queue whose path from the root has the lowest fair share (fair_share.h)
//      and take its next job.
//   5. For each allowed GPU model in the job's order of preference: check the quota (quota_tree.h),
//      then place the whole gang on the snapshot (framework.h). The first model that works admits
//      the job and charges its quota; quota is never charged for a job that does not place.
//   6. A job that fits nowhere tries preemption (preemption.h): victims are chosen and released on
//      the snapshot, the preemptor's placement is held, and the decision goes to the driver, which
//      stops the victims within their grace period. Next cycles hold that capacity for the
//      preemptor (Nomination) until the victims are gone, then admit it.
//   7. Otherwise the first job of its queue that does not place gets a reservation (EASY backfill):
//      the earliest time enough running jobs end (by walltime, else by the driver's estimate
//      RunningJob::expected_end) for it to fit, and the nodes and GPUs it would use then. Those
//      are held: a later job may use them only if it ends (by walltime) before the reservation
//      starts. Every job left gets a verdict with reasons.
//
// Held capacity is processed first: nominated preemptors (step 3b) before the fair-share loop.
#pragma once

#include <cstdint>
#include <vector>

#include "core/cluster.h"
#include "core/cycle/verdict.h"
#include "core/placement/framework.h"
#include "core/preemption/preemption.h"
#include "core/quota/quota_tree.h"
#include "core/types.h"

namespace arbiter::core {

struct CycleInput {
  const Cluster* cluster = nullptr;
  const QuotaTree* tree = nullptr;
  const std::vector<RunningJob>* running = nullptr;  // may be null: nothing runs
  const std::vector<PendingJob>* pending = nullptr;
  const std::vector<Constraints>* constraints = nullptr;  // [0] unused; may be null
  // Per tree node, the decayed usage rate (fair_share.h), indexed by QueueId; may be null.
  const std::vector<QuotaVec>* usage_history = nullptr;
  // The typical-task distribution for fgd; null: derived from the pending jobs.
  const TaskDistribution* distribution = nullptr;
  // Preemptors waiting for their victims (from earlier cycles); may be null.
  const std::vector<Nomination>* nominations = nullptr;
  // Per tenant (indexed by the tenant's QueueId), its budget state; may be null: no budgets.
  const std::vector<TenantBudget>* budgets = nullptr;
  // Queues that lend their idle guarantee only to jobs whose grace period is within a deadline
  // (a service's reclaim_deadline_seconds), with that deadline; may be null: none.
  const std::vector<std::pair<QueueId, DurationMs>>* lend_grace_limits = nullptr;
  PreemptionOptions preemption;
  struct Backfill {
    bool enabled = true;
    int max_reservations = 16;  // reservations made per cycle (queue heads)
  } backfill;
  TimeMs now = 0;
  uint64_t seed = 0;
};

struct Admission {
  JobId job;
  QueueId queue;
  GpuModelId model = kNoModel;
  std::vector<TaskPlacement> tasks;
  // The part of the job's quota above its queue's guarantee (per dimension), at admission.
  QuotaVec borrowed;
  // Admitted at the lowest priority and preemptible because its tenant's budget is spent.
  bool best_effort = false;
  bool borrowing() const;
};

// A decision to preempt: the victims get SIGTERM, their grace period, then SIGKILL; the preemptor
// keeps its place (a Nomination) until they are gone.
struct PreemptionDecision {
  JobId preemptor;
  QueueId queue;
  PreemptionReason reason = PreemptionReason::kPriority;
  std::vector<JobId> victims;
  std::vector<QueueId> victim_queues;
  DurationMs grace_period = 0;  // the longest of the victims'
  // Where the preemptor goes once they are gone, on which model: the driver keeps it in the
  // Nomination, and later cycles hold that very placement while it fits.
  std::vector<TaskPlacement> tasks;
  GpuModelId model = kNoModel;
};

// Capacity held for a queue's first job that does not fit now (EASY backfill).
struct Reservation {
  JobId job;
  int32_t priority = 0;
  TimeMs start = 0;  // the earliest time it fits, from running jobs' walltimes (or estimates)
  std::vector<TaskPlacement> tasks;
};

struct CycleStats {
  int64_t jobs_considered = 0;
  int64_t placement_attempts = 0;
  int64_t failure_cache_hits = 0;
  int64_t preemption_attempts = 0;
};

struct CycleResult {
  std::vector<Admission> admissions;  // in the order they were decided
  std::vector<Verdict> verdicts;      // one per pending job not admitted
  std::vector<PreemptionDecision> preemptions;
  std::vector<Reservation> reservations;
  // Nominations that no longer hold (the preemptor was placed, or no longer fits there).
  std::vector<JobId> finished_nominations;
  CycleStats stats;
};

CycleResult RunCycle(const CycleInput& in, const Profile& profile);

// Applies admissions to a list of running jobs (what a driver does once it has persisted them).
void ApplyAdmissions(const CycleInput& in, const CycleResult& result, TimeMs start,
                     std::vector<RunningJob>* running);
// Marks the victims of the cycle's preemption decisions as terminating.
void ApplyPreemptions(const CycleResult& result, std::vector<RunningJob>* running);

}  // namespace arbiter::core

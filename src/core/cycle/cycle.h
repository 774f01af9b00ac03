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
//   6. A job that fits nowhere gets a verdict with reasons.
#pragma once

#include <cstdint>
#include <vector>

#include "core/cluster.h"
#include "core/cycle/verdict.h"
#include "core/placement/framework.h"
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
  bool borrowing() const;
};

struct CycleStats {
  int64_t jobs_considered = 0;
  int64_t placement_attempts = 0;
  int64_t failure_cache_hits = 0;
};

struct CycleResult {
  std::vector<Admission> admissions;  // in the order they were decided
  std::vector<Verdict> verdicts;      // one per pending job not admitted
  CycleStats stats;
};

CycleResult RunCycle(const CycleInput& in, const Profile& profile);

// Applies admissions to a list of running jobs (what a driver does once it has persisted them).
void ApplyAdmissions(const CycleInput& in, const CycleResult& result, TimeMs start,
                     std::vector<RunningJob>* running);

}  // namespace arbiter::core

// Preemption and reclaim: choosing victims for a pending job that does not fit.
//
// Who may be a victim of pending job j (request r on GPU model m):
//   kPriority  a running job of j's own queue with a lower priority;
//   kAnywhere  when j's class preempts anywhere: a lower-priority job of any queue;
//   kReclaim   when j's queue stays within its guarantee with r added: a job of another queue while
//              that queue uses more than its guarantee (runs on borrowed capacity; a queue with
//              no GPU guarantee configured up to its tenant always does), any priority.
// Never a victim: a non-preemptible job, a job running for less than its minimum runtime (except
// for a reclaim by a queue that lends within a reclaim deadline, QuotaState::SetLendGraceLimit:
// its GPUs were lent on that condition), a job already terminating, and (the loop guard) a job
// that itself started by preempting j's queue, unless j's queue's fair share is below the victim
// queue's by more than the tolerance.
//
// The victim set: candidates in order of (priority ascending, lost work ascending, start time
// descending, id), where lost work = now - max(start, last checkpoint). Victims are taken in that
// order until j fits (quota, then placement of the whole gang); then each victim but the last is
// put back if j still fits without it. A job's tasks are one victim: a gang goes together. All of
// it runs inside a Snapshot::Txn: when j cannot be made to fit, the snapshot is restored exactly.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "core/placement/framework.h"
#include "core/snapshot.h"
#include "core/types.h"

namespace arbiter::core {

enum class PreemptionReason { kPriority, kReclaim, kAnywhere };
std::string_view PreemptionReasonName(PreemptionReason r);  // "priority", "reclaim", "anywhere"

struct PreemptionOptions {
  bool enabled = true;
  // Fair-share difference under which a job admitted by preempting a queue is safe from that
  // queue's reclaim.
  double fair_share_tolerance = 0.05;
  // Placement trials per preemptor, bounding the work of one attempt.
  int max_placement_trials = 64;
};

struct PreemptionRequest {
  const PendingJob* job = nullptr;
  GpuModelId model = kNoModel;
  QuotaVec quota;  // what the job charges
  const Constraints* constraints = nullptr;
};

struct PreemptionPlan {
  std::vector<uint32_t> victims;  // indices into the running list
  PreemptionReason reason = PreemptionReason::kPriority;
  std::vector<TaskPlacement> tasks;  // where the preemptor goes once the victims are gone
};

class Preemptor {
 public:
  // `running` is the cycle's running list; `taken[i]` marks jobs already chosen as victims (or
  // terminating) this cycle. `history` as in fair_share.h, may be null.
  Preemptor(const std::vector<RunningJob>& running, const QuotaTree& tree,
            const PreemptionOptions& options, TimeMs now, const std::vector<QuotaVec>* history)
      : running_(running), tree_(tree), options_(options), now_(now), history_(history) {}

  // Tries to make room. On success the snapshot holds the preemptor's placement and quota, the
  // victims are released from it, and `plan` says who and why. On failure the snapshot is
  // unchanged. `frag_cache` (may be null) memoises fragmentation over `dist` for the placement
  // trials, as in PlaceGang.
  bool TryPreempt(Snapshot& snap, const Profile& profile, const TaskDistribution* dist,
                  const PreemptionRequest& req, const std::vector<bool>& taken,
                  PreemptionPlan* plan, FragmentationCache* frag_cache = nullptr) const;

 private:
  struct Candidate {
    uint32_t index;
    PreemptionReason reason;
  };
  std::vector<Candidate> Candidates(const Snapshot& snap, const PreemptionRequest& req,
                                    const std::vector<bool>& taken) const;
  bool Fits(Snapshot& snap, const Profile& profile, const TaskDistribution* dist,
            const PreemptionRequest& req, int* trials, FragmentationCache* frag_cache) const;
  bool QueueBorrowing(const Snapshot& snap, QueueId q, const QuotaVec& uses) const;
  bool WithinGuarantee(const Snapshot& snap, QueueId q, const QuotaVec& r) const;
  double ShareOf(const Snapshot& snap, QueueId q) const;
  void ReleaseJob(Snapshot& snap, const RunningJob& v) const;
  void RestoreJob(Snapshot& snap, const RunningJob& v) const;

  const std::vector<RunningJob>& running_;
  const QuotaTree& tree_;
  const PreemptionOptions& options_;
  TimeMs now_;
  const std::vector<QuotaVec>* history_;
};

}  // namespace arbiter::core

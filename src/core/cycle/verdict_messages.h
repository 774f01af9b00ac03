// The messages of verdicts: what a quota or placement failure means for a job, in numbers.
// Pure functions of the cycle's state (cycle.cc calls them).
#pragma once

#include <string>

#include "core/placement/framework.h"
#include "core/quota/quota_tree.h"
#include "core/snapshot.h"
#include "core/types.h"

namespace arbiter::core {

// "queue q uses 6 of max 8 GPUs; this job needs 4 more", and the other kinds of QuotaFailure.
std::string QuotaFailureMessage(const QuotaTree& tree, const PendingJob& j, const QuotaFailure& f);
// "needs 4 GPUs of model A100 on one node: best node has 2 free; 3 nodes cordoned", gangs too.
std::string PlacementFailureMessage(const Snapshot& snap, const Profile& profile,
                                    const Cluster& cluster, const PendingJob& j,
                                    const TaskRequest& req, const PlacementFailure& pf);

}  // namespace arbiter::core

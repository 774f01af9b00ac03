// What a submission is refused for because it could never start: a request beyond a max of its
// queue, a queue above it or its tenant (core/cycle/admissible.h). Nodes are no reason to refuse:
// agents register nodes whenever they start, so a job larger than every node there is now may
// still fit one that joins later; the scheduling cycle calls it Inadmissible until one does.
#pragma once

#include "common/ids.h"
#include "common/status.h"
#include "core/cluster.h"
#include "core/quota/quota_tree.h"
#include "model/job.h"

namespace arbiter::server {

// InvalidArgument naming the job's field ("resources.gpus", "tasks", ...) and, in the message,
// the limit and its value; Ok when some allowed model stays within every max. `queue` is the
// job's leaf queue; the job's GPU models are known to `cluster`.
Status CheckQuotaAdmissible(const core::QuotaTree& tree, const core::Cluster& cluster,
                            const JobSpec& spec, QueueId queue);

}  // namespace arbiter::server

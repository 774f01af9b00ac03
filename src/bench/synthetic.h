// A synthetic cluster and backlog for `arbiter bench` and the randomised tests.
//
// The cluster: `nodes` nodes of `gpus_per_node` GPUs, the models spread round-robin, two NVLink
// domains per node, 32 nodes a rack and 512 a network block. The tree: `queues` queues under
// ceil(queues / 10) tenants; each queue is guaranteed an equal share of the GPUs and may borrow up
// to three times that. The backlog mixes 1, 2, 4 and 8 GPU tasks, about 20% fractional-GPU tasks
// and about 5% gangs of 2 to 16 tasks of 8 GPUs; 30% of jobs ask for one model, the rest take any.
#pragma once

#include <cstdint>
#include <vector>

#include "common/result.h"
#include "core/cluster.h"
#include "core/quota/quota_tree.h"
#include "core/types.h"
#include "model/node.h"
#include "model/queue.h"

namespace arbiter::bench {

struct SyntheticSpec {
  int nodes = 100;
  int gpus_per_node = 8;
  int models = 1;
  int queues = 10;
  int jobs = 1000;
  uint64_t seed = 42;
};

struct SyntheticWorld {
  std::vector<GpuModel> models;
  std::vector<Node> nodes;
  std::vector<QueueSpec> queues;
  core::Cluster cluster;
  core::QuotaTree tree;
  std::vector<core::PendingJob> pending;
};

Result<SyntheticWorld> MakeSyntheticWorld(const SyntheticSpec& spec);

// Only the backlog, for a world already built (ids start at `first_id`).
std::vector<core::PendingJob> MakeSyntheticJobs(const SyntheticSpec& spec,
                                                const core::QuotaTree& tree, uint64_t first_id);

}  // namespace arbiter::bench

// Admissibility: whether a pending job could ever start under the current limits, apart from what
// others use. A job is inadmissible when, for every GPU model it allows, its request exceeds a
// limit that no wait changes:
//   - a max of its queue, of a queue above it or of its tenant (per task, or all tasks together);
//   - with a cluster: the nodes as they are (any state; removed nodes are gone). One task needs
//     more GPUs of the model, GPU memory, CPU or RAM than the largest node has, or the gang needs
//     more tasks at once (on distinct nodes, or in all) than the nodes could hold.
// Each check is a necessary condition for a placement, so a job called inadmissible can never be
// admitted until the configuration or the nodes change; the cycle gives it VerdictCode
// kInadmissible, and the server refuses a submission that the quota alone makes inadmissible.
//
// Cost: a leaf's limits along its path are folded once (lazily, per checker); a job then costs a
// few comparisons per allowed model, and a scan of the model's per-node GPU counts (few distinct).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/cluster.h"
#include "core/quota/quota_tree.h"
#include "core/types.h"

namespace arbiter::core {

struct Inadmissibility {
  enum class Limit { kQuotaMax, kNodes };
  Limit limit = Limit::kQuotaMax;
  // The job's field whose value is too large: "resources.gpus", "resources.gpu_milli",
  // "resources.gpu_memory_mib", "resources.cpu_milli", "resources.memory_mib" (one task alone is
  // too large) or "tasks" (the tasks together are).
  std::string field;
  std::string message;  // names the limit, its value and what the job asks
};

// The GPU models a job may run on, in its order of preference: kNoModel alone for a job without
// GPUs; every model of the cluster when it names none.
std::vector<GpuModelId> AllowedModels(const PendingJob& j, const Cluster& cluster);

// Which of the nodes' limits a placement enforces: a profile without a filter does not bind
// that resource, so nothing is concluded from it.
struct NodeChecks {
  bool gpus = true;            // filters gpu-model and gpu
  bool gpu_memory = true;      // gpu-memory
  bool cpu = true;             // cpu
  bool memory = true;          // memory
  bool distinct_nodes = true;  // gang-distinct-nodes
};

class AdmissibilityChecker {
 public:
  // `cluster` null: the quota's maxima only (what a submission is refused for, since nodes may
  // still join). A cluster without nodes concludes nothing about nodes either.
  AdmissibilityChecker(const QuotaTree& tree, const Cluster* cluster, NodeChecks checks = {});

  // nullopt while some model in `models` (AllowedModels) might admit the job; else the reason for
  // the first one. `j.queue` must be a leaf of the tree.
  std::optional<Inadmissibility> Check(const PendingJob& j, const std::vector<GpuModelId>& models);

 private:
  struct PathMax {
    QuotaVec max;                         // the smallest max along the path, per dimension
    std::array<QueueId, kMaxDims> where;  // the node that sets it
  };
  const PathMax& PathOf(QueueId leaf);
  std::optional<Inadmissibility> CheckQuota(const PendingJob& j, GpuModelId m);
  std::optional<Inadmissibility> CheckNodes(const PendingJob& j, GpuModelId m) const;

  const QuotaTree& tree_;
  const Cluster* cluster_;
  NodeChecks checks_;
  std::vector<int32_t> slot_;  // by QueueId: index into paths_, -1 until first use
  std::vector<PathMax> paths_;
};

}  // namespace arbiter::core

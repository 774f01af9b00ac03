#include "server/admissibility.h"

#include <optional>
#include <string>
#include <vector>

#include "core/cycle/admissible.h"

namespace arbiter::server {

Status CheckQuotaAdmissible(const core::QuotaTree& tree, const core::Cluster& cluster,
                            const JobSpec& spec, QueueId queue) {
  core::PendingJob j;
  j.queue = queue;
  j.tasks = spec.tasks;
  j.resources = spec.resources;
  j.distinct_nodes = spec.distinct_nodes;
  for (const std::string& m : spec.gpu_models) j.models.push_back(cluster.FindModel(m));
  std::vector<GpuModelId> models = core::AllowedModels(j, cluster);
  // No GPU model configured yet: the maxima on GPUs of any model still bind.
  if (models.empty()) models.push_back(core::kNoModel);
  core::AdmissibilityChecker checker(tree, nullptr);
  std::optional<core::Inadmissibility> why = checker.Check(j, models);
  if (!why) return Status::Ok();
  return InvalidArgument(std::move(why->field), std::move(why->message));
}

}  // namespace arbiter::server

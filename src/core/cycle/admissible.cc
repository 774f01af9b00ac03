#include "core/cycle/admissible.h"

#include <fmt/format.h>

#include <algorithm>

namespace arbiter::core {

std::vector<GpuModelId> AllowedModels(const PendingJob& j, const Cluster& cluster) {
  if (j.resources.gpus == 0) return {kNoModel};
  std::vector<GpuModelId> models = j.models;
  if (models.empty()) {
    for (size_t m = 0; m < cluster.models().size(); ++m) {
      models.emplace_back(static_cast<uint16_t>(m));
    }
  }
  return models;
}

AdmissibilityChecker::AdmissibilityChecker(const QuotaTree& tree, const Cluster* cluster,
                                           NodeChecks checks)
    : tree_(tree),
      cluster_(cluster != nullptr && cluster->num_nodes() > 0 ? cluster : nullptr),
      checks_(checks) {}

std::optional<Inadmissibility> AdmissibilityChecker::Check(const PendingJob& j,
                                                           const std::vector<GpuModelId>& models) {
  std::optional<Inadmissibility> out;
  for (GpuModelId m : models) {
    std::optional<Inadmissibility> why = CheckQuota(j, m);
    if (!why) why = CheckNodes(j, m);
    if (!why) return std::nullopt;  // this model might admit it
    if (!out) {
      out = std::move(why);
    } else if (out->message.find(why->message) == std::string::npos) {
      out->message += "; " + why->message;  // each model's reason, the first one's field
    }
  }
  return out;
}

const AdmissibilityChecker::PathMax& AdmissibilityChecker::PathOf(QueueId leaf) {
  if (slot_.empty()) slot_.assign(tree_.size(), -1);
  int32_t& s = slot_[leaf.value()];
  if (s >= 0) return paths_[static_cast<size_t>(s)];
  s = static_cast<int32_t>(paths_.size());
  PathMax& p = paths_.emplace_back();
  p.max.v.fill(kUnlimited);
  p.where.fill(QuotaTree::kRoot);
  for (QueueId a = leaf; a != QuotaTree::kRoot; a = tree_.node(a).parent) {
    const QuotaNode& n = tree_.node(a);
    for (int d = 0; d < tree_.num_dims(); ++d) {
      if (n.max[d] < p.max[d]) {
        p.max[d] = n.max[d];
        p.where[static_cast<size_t>(d)] = a;
      }
    }
  }
  return p;
}

namespace {

// " GPUs", " CPU", " GPUs of A100" for amounts of dimension d (memory: FormatAmount says MiB).
std::string Unit(const QuotaTree& tree, int d) {
  if (d == kDimCpu) return " CPU";
  if (d == kDimMemory) return "";
  if (d == kDimTasks) return " live tasks";
  if (d >= kFirstModelDim) return " GPUs of " + tree.DimName(d).substr(4);
  return " GPUs";
}

std::string TaskField(const TaskResources& r, int d) {
  if (d == kDimCpu) return "resources.cpu_milli";
  if (d == kDimMemory) return "resources.memory_mib";
  if (d == kDimTasks) return "tasks";
  return r.fractional() ? "resources.gpu_milli" : "resources.gpus";
}

Inadmissibility NodesLimit(std::string field, std::string what) {
  return {Inadmissibility::Limit::kNodes, std::move(field),
          what + ": it cannot start on the nodes there are, until a node that can take it joins"};
}

}  // namespace

std::optional<Inadmissibility> AdmissibilityChecker::CheckQuota(const PendingJob& j, GpuModelId m) {
  const PathMax& p = PathOf(j.queue);
  const QuotaVec one = JobQuotaRequest(j.resources, 1, m);
  const QuotaVec all = JobQuotaRequest(j.resources, j.tasks, m);
  int dims[5] = {kDimGpu, -1, kDimTasks, kDimCpu, kDimMemory};
  if (m != kNoModel && j.resources.gpus > 0) dims[1] = ModelDim(m);
  for (int d : dims) {
    if (d < 0 || all[d] <= p.max[d]) continue;
    const QuotaNode& n = tree_.node(p.where[static_cast<size_t>(d)]);
    const std::string limit =
        fmt::format("{} {} allows at most {}{} (its max.{})", n.is_tenant ? "tenant" : "queue",
                    n.name, tree_.FormatAmount(d, p.max[d]), Unit(tree_, d),
                    d >= kFirstModelDim ? "gpu." + tree_.DimName(d).substr(4) : tree_.DimName(d));
    const bool per_task = one[d] > p.max[d];
    const std::string asks =
        per_task
            ? fmt::format("{} asks for {}{}", j.tasks > 1 ? "each task of this job" : "this job",
                          tree_.FormatAmount(d, one[d]), Unit(tree_, d))
            : fmt::format("its {} tasks ask for {}{} together", j.tasks,
                          tree_.FormatAmount(d, all[d]), Unit(tree_, d));
    return Inadmissibility{
        Inadmissibility::Limit::kQuotaMax, per_task ? TaskField(j.resources, d) : "tasks",
        fmt::format("{}; {}: it can never start unless the max is raised or the job asks for less",
                    limit, asks)};
  }
  return std::nullopt;
}

std::optional<Inadmissibility> AdmissibilityChecker::CheckNodes(const PendingJob& j,
                                                                GpuModelId m) const {
  if (cluster_ == nullptr) return std::nullopt;
  const TaskResources& r = j.resources;
  const Cluster::Extent& e = cluster_->extent();
  const bool distinct = j.distinct_nodes && checks_.distinct_nodes && j.tasks > 1;
  // How many of the job's tasks the nodes could hold at once, by the tightest resource checked.
  int64_t hold = j.tasks;
  std::string hold_why;
  if (r.gpus > 0 && checks_.gpus && m != kNoModel && m.value() < cluster_->models().size()) {
    const std::string& model = cluster_->models()[m.value()].name;
    const Cluster::ModelExtent& me = cluster_->model_extent(m);
    const int most = me.nodes_by_count.empty() ? 0 : me.nodes_by_count.back().first;
    if (most == 0) {
      return NodesLimit("resources.gpus", fmt::format("no node has GPUs of model {}", model));
    }
    if (r.gpus > most) {
      return NodesLimit("resources.gpus",
                        fmt::format("no node has {} GPUs of model {} (the most on one node is {})",
                                    r.gpus, model, most));
    }
    if (checks_.gpu_memory && r.gpu_memory_mib > me.max_gpu_memory_mib) {
      return NodesLimit("resources.gpu_memory_mib",
                        fmt::format("no GPU of model {} has {} MiB of memory (the largest has {} "
                                    "MiB)",
                                    model, r.gpu_memory_mib, me.max_gpu_memory_mib));
    }
    // Per node: whole GPUs hold count / gpus tasks; a GPU holds 1000 / gpu_milli shares.
    int64_t tasks = 0;
    int64_t nodes = 0;
    for (const auto& [count, n] : me.nodes_by_count) {
      const int64_t per_node =
          r.fractional() ? int64_t{count} * (kMilliPerGpu / r.gpu_milli) : int64_t{count} / r.gpus;
      if (per_node == 0) continue;
      nodes += n;
      tasks += int64_t{n} * (distinct ? 1 : per_node);
    }
    if (tasks < hold) {
      hold = tasks;
      hold_why = fmt::format("{} node{} with GPUs of model {} can hold {} such task{} at once{}",
                             nodes, nodes == 1 ? "" : "s", model, tasks, tasks == 1 ? "" : "s",
                             distinct ? " on distinct nodes" : "");
    }
  }
  if (checks_.cpu && r.cpu_milli > cluster_->max_cpu_milli()) {
    return NodesLimit("resources.cpu_milli", fmt::format("no node has {} CPU (the largest has {})",
                                                         FormatMilli(r.cpu_milli),
                                                         FormatMilli(cluster_->max_cpu_milli())));
  }
  if (checks_.memory && r.memory_mib > e.max_memory_mib) {
    return NodesLimit("resources.memory_mib",
                      fmt::format("no node has {} MiB of RAM (the largest has {} MiB)",
                                  r.memory_mib, e.max_memory_mib));
  }
  if (j.tasks <= 1) return std::nullopt;
  if (hold < j.tasks) {
    return NodesLimit(
        "tasks", fmt::format("the job's {} tasks must start together, but {}", j.tasks, hold_why));
  }
  const auto nodes = static_cast<int64_t>(cluster_->num_nodes());
  if (distinct && j.tasks > nodes) {
    return NodesLimit("tasks", fmt::format("the job's {} tasks need distinct nodes; there {} {}",
                                           j.tasks, nodes == 1 ? "is" : "are", nodes));
  }
  const int64_t cpu = r.cpu_milli * j.tasks;
  if (checks_.cpu && cpu > e.total_cpu_milli) {
    return NodesLimit("tasks",
                      fmt::format("the job's {} tasks need {} CPU together; all nodes "
                                  "have {}",
                                  j.tasks, FormatMilli(cpu), FormatMilli(e.total_cpu_milli)));
  }
  const int64_t mem = r.memory_mib * j.tasks;
  if (checks_.memory && mem > e.total_memory_mib) {
    return NodesLimit("tasks", fmt::format("the job's {} tasks need {} MiB of RAM together; all "
                                           "nodes have {} MiB",
                                           j.tasks, mem, e.total_memory_mib));
  }
  return std::nullopt;
}

}  // namespace arbiter::core

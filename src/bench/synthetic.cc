#include "bench/synthetic.h"

#include <fmt/format.h>

#include "common/rng.h"

namespace arbiter::bench {

namespace {
constexpr int64_t kNodeCpuMilli = 128 * 1000;
constexpr int64_t kNodeMemoryMib = 1024 * 1024;
constexpr int64_t kGpuMemoryMib = 80 * 1024;
}  // namespace

std::vector<core::PendingJob> MakeSyntheticJobs(const SyntheticSpec& spec,
                                                const core::QuotaTree& tree, uint64_t first_id) {
  Rng rng(spec.seed);
  std::vector<QueueId> leaves;
  for (size_t i = 1; i < tree.size(); ++i) {
    if (tree.nodes()[i].is_leaf() && !tree.nodes()[i].is_tenant) {
      leaves.emplace_back(static_cast<uint32_t>(i));
    }
  }
  std::vector<core::PendingJob> jobs;
  jobs.reserve(static_cast<size_t>(spec.jobs));
  constexpr int32_t kPriorities[] = {0, 100, 100, 100, 1000};
  constexpr int32_t kShares[] = {250, 500, 500, 750};
  for (int i = 0; i < spec.jobs; ++i) {
    core::PendingJob j;
    j.id = JobId(first_id + static_cast<uint64_t>(i));
    j.queue = leaves[rng.Uniform(leaves.size())];
    j.priority = kPriorities[rng.Uniform(5)];
    j.submit_time = i;
    const uint64_t kind = rng.Uniform(100);
    if (kind < 5) {  // gang of 2..16 tasks of 8 GPUs
      j.tasks = 2 + static_cast<int32_t>(rng.Uniform(15));
      j.resources.gpus = std::min(8, spec.gpus_per_node);
      j.distinct_nodes = rng.Uniform(2) == 0;
      j.type = JobType::kTraining;
    } else if (kind < 25) {  // a share of one GPU
      j.resources.gpus = 1;
      j.resources.gpu_milli = kShares[rng.Uniform(4)];
      j.resources.gpu_memory_mib = kGpuMemoryMib * j.resources.gpu_milli / 1000;
      j.type = JobType::kService;
    } else {  // 1, 2, 4 or 8 whole GPUs
      constexpr int32_t kSizes[] = {1, 1, 1, 1, 2, 2, 2, 4, 4, 8};
      j.resources.gpus = std::min(kSizes[rng.Uniform(10)], spec.gpus_per_node);
      j.type = rng.Uniform(2) == 0 ? JobType::kTraining : JobType::kExperiment;
    }
    const int64_t gpus = j.resources.fractional() ? 1 : j.resources.gpus;
    j.resources.cpu_milli = gpus * (j.resources.fractional() ? 4000 : 12000);
    j.resources.memory_mib = gpus * (j.resources.fractional() ? 16384 : 98304);
    if (spec.models > 1 && rng.Uniform(10) < 3) {
      j.models.emplace_back(static_cast<uint16_t>(rng.Uniform(static_cast<uint64_t>(spec.models))));
    }
    j.walltime = SecondsToMs(3600 * (1 + static_cast<int64_t>(rng.Uniform(24))));
    jobs.push_back(std::move(j));
  }
  return jobs;
}

Result<SyntheticWorld> MakeSyntheticWorld(const SyntheticSpec& spec) {
  if (spec.nodes < 1) return InvalidArgument("nodes", "must be >= 1");
  if (spec.gpus_per_node < 1 || spec.gpus_per_node > 64) {
    return InvalidArgument("gpus-per-node", "must be between 1 and 64");
  }
  if (spec.models < 1 || spec.models > core::kMaxGpuModels) {
    return InvalidArgument("models", fmt::format("must be between 1 and {}", core::kMaxGpuModels));
  }
  if (spec.queues < 1) return InvalidArgument("queues", "must be >= 1");
  if (spec.jobs < 0) return InvalidArgument("jobs", "must be >= 0");
  SyntheticWorld w;
  for (int m = 0; m < spec.models; ++m) {
    w.models.push_back({fmt::format("gpu-{}", m), kGpuMemoryMib, 2000 + 500 * m});
  }
  w.nodes.reserve(static_cast<size_t>(spec.nodes));
  for (int i = 0; i < spec.nodes; ++i) {
    Node n;
    n.name = fmt::format("node-{:05d}", i);
    n.cpu_milli = kNodeCpuMilli;
    n.memory_mib = kNodeMemoryMib;
    n.rack = fmt::format("rack-{}", i / 32);
    n.block = fmt::format("block-{}", i / 512);
    const std::string& model = w.models[static_cast<size_t>(i % spec.models)].name;
    for (int g = 0; g < spec.gpus_per_node; ++g) {
      n.gpus.push_back({g, model, kGpuMemoryMib, true, g * 2 / spec.gpus_per_node});
    }
    w.nodes.push_back(std::move(n));
  }
  auto cluster = core::Cluster::Build(w.models, w.nodes);
  if (!cluster.ok()) return cluster.status();
  w.cluster = std::move(cluster).value();

  const int tenants = (spec.queues + 9) / 10;
  const int64_t total_gpu = int64_t{spec.nodes} * spec.gpus_per_node * kMilliPerGpu;
  const int64_t per_queue = total_gpu / spec.queues;
  std::vector<int64_t> tenant_g(static_cast<size_t>(tenants), 0);
  std::vector<QueueSpec> queues;
  for (int q = 0; q < spec.queues; ++q) {
    QueueSpec s;
    s.name = fmt::format("queue-{}", q);
    s.parent = fmt::format("tenant-{}", q % tenants);
    s.quota["gpu"] = QuotaLimits{per_queue, per_queue * 3, std::nullopt};
    tenant_g[static_cast<size_t>(q % tenants)] += per_queue;
    queues.push_back(std::move(s));
  }
  for (int t = 0; t < tenants; ++t) {
    QueueSpec s;
    s.name = fmt::format("tenant-{}", t);
    s.is_tenant = true;
    s.quota["gpu"] = QuotaLimits{tenant_g[static_cast<size_t>(t)], std::nullopt, std::nullopt};
    w.queues.push_back(std::move(s));
  }
  for (auto& q : queues) w.queues.push_back(std::move(q));
  auto tree = core::QuotaTree::Build(w.queues, w.models);
  if (!tree.ok()) return tree.status();
  w.tree = std::move(tree).value();
  w.pending = MakeSyntheticJobs(spec, w.tree, 1);
  return w;
}

}  // namespace arbiter::bench

#include "core/placement/plugins.h"

#include <algorithm>
#include <cmath>

#include "core/placement/baselines.h"

namespace arbiter::core {

int CountFreeWholeGpus(const Snapshot& s, NodeId n, GpuModelId model, int64_t min_memory) {
  const NodeInfo& info = s.cluster().node(n);
  int count = 0;
  for (uint32_t g = info.gpu_begin; g < info.gpu_begin + info.gpu_count; ++g) {
    const GpuSlotInfo& slot = s.cluster().gpus()[g];
    if (slot.model == model && s.gpu_usable(g) && s.gpu_free_milli(g) == kMilliPerGpu &&
        slot.memory_mib >= min_memory) {
      ++count;
    }
  }
  return count;
}

bool HasGpuShare(const Snapshot& s, NodeId n, GpuModelId model, int32_t milli, int64_t memory) {
  const NodeInfo& info = s.cluster().node(n);
  for (uint32_t g = info.gpu_begin; g < info.gpu_begin + info.gpu_count; ++g) {
    if (s.cluster().gpus()[g].model == model && s.gpu_usable(g) && s.gpu_free_milli(g) >= milli &&
        s.gpu_free_memory(g) >= memory) {
      return true;
    }
  }
  return false;
}

int64_t FreeGpuMilli(const Snapshot& s, NodeId n) {
  const NodeInfo& info = s.cluster().node(n);
  int64_t free = 0;
  for (uint32_t g = info.gpu_begin; g < info.gpu_begin + info.gpu_count; ++g) {
    if (s.gpu_usable(g)) free += s.gpu_free_milli(g);
  }
  return free;
}

namespace {

bool NodeHasModel(const Snapshot& s, NodeId n, GpuModelId model) {
  const NodeInfo& info = s.cluster().node(n);
  for (uint32_t g = info.gpu_begin; g < info.gpu_begin + info.gpu_count; ++g) {
    if (s.cluster().gpus()[g].model == model) return true;
  }
  return false;
}

// --- Filters -------------------------------------------------------------------------------

class NodeStateFilter final : public FilterPlugin {
 public:
  std::string_view name() const override { return "node-state"; }
  FilterCode Filter(const PlacementContext& ctx, const TaskRequest&, NodeId n) const override {
    return ctx.snapshot->cluster().node(n).schedulable() ? FilterCode::kOk
                                                         : FilterCode::kNodeNotReady;
  }
};

class SelectorFilter final : public FilterPlugin {
 public:
  std::string_view name() const override { return "node-selector"; }
  FilterCode Filter(const PlacementContext& ctx, const TaskRequest& req, NodeId n) const override {
    if (req.constraints == nullptr || req.constraints->selector.empty()) return FilterCode::kOk;
    const auto& labels = ctx.snapshot->cluster().node(n).labels;
    for (const auto& kv : req.constraints->selector) {
      if (!std::binary_search(labels.begin(), labels.end(), kv)) {
        return FilterCode::kSelectorMismatch;
      }
    }
    return FilterCode::kOk;
  }
};

class TaintFilter final : public FilterPlugin {
 public:
  std::string_view name() const override { return "taints"; }
  FilterCode Filter(const PlacementContext& ctx, const TaskRequest& req, NodeId n) const override {
    const auto& taints = ctx.snapshot->cluster().node(n).taints;
    for (const auto& [key, value] : taints) {
      bool tolerated = false;
      if (req.constraints != nullptr) {
        for (const auto& [tk, tv] : req.constraints->tolerations) {
          if (tk == key && (tv == Constraints::kAnyValue || tv == value)) {
            tolerated = true;
            break;
          }
        }
      }
      if (!tolerated) return FilterCode::kUntoleratedTaint;
    }
    return FilterCode::kOk;
  }
};

// Slurm's --nodelist and --exclude.
class NodeNameFilter final : public FilterPlugin {
 public:
  std::string_view name() const override { return "node-name"; }
  FilterCode Filter(const PlacementContext&, const TaskRequest& req, NodeId n) const override {
    const Constraints* c = req.constraints;
    if (c == nullptr) return FilterCode::kOk;
    if (c->only_listed && !std::binary_search(c->nodes.begin(), c->nodes.end(), n.value())) {
      return FilterCode::kNodeNotListed;
    }
    if (std::binary_search(c->excluded.begin(), c->excluded.end(), n.value())) {
      return FilterCode::kNodeExcluded;
    }
    return FilterCode::kOk;
  }
};

// An exclusive task (--exclusive) goes only to a node with nothing allocated on it; it then takes
// the node whole (TakeWholeNode), so no other task fits there while it holds it.
class ExclusiveFilter final : public FilterPlugin {
 public:
  std::string_view name() const override { return "exclusive"; }
  FilterCode Filter(const PlacementContext& ctx, const TaskRequest& req, NodeId n) const override {
    if (req.constraints == nullptr || !req.constraints->exclusive) return FilterCode::kOk;
    const Snapshot& s = *ctx.snapshot;
    const NodeInfo& info = s.cluster().node(n);
    if (s.free_cpu(n) != info.cpu_milli || s.free_memory(n) != info.memory_mib) {
      return FilterCode::kNodeShared;
    }
    for (uint32_t g = info.gpu_begin; g < info.gpu_begin + info.gpu_count; ++g) {
      if (s.gpu_free_milli(g) != kMilliPerGpu) return FilterCode::kNodeShared;
    }
    return FilterCode::kOk;
  }
};

class GpuModelFilter final : public FilterPlugin {
 public:
  std::string_view name() const override { return "gpu-model"; }
  FilterCode Filter(const PlacementContext& ctx, const TaskRequest& req, NodeId n) const override {
    if (req.resources->gpus == 0) return FilterCode::kOk;
    return NodeHasModel(*ctx.snapshot, n, req.model) ? FilterCode::kOk : FilterCode::kWrongModel;
  }
};

class GpuFilter final : public FilterPlugin {
 public:
  std::string_view name() const override { return "gpu"; }
  FilterCode Filter(const PlacementContext& ctx, const TaskRequest& req, NodeId n) const override {
    const TaskResources& r = *req.resources;
    if (r.gpus == 0) return FilterCode::kOk;
    if (r.fractional()) {
      return HasGpuShare(*ctx.snapshot, n, req.model, r.gpu_milli, 0)
                 ? FilterCode::kOk
                 : FilterCode::kInsufficientGpu;
    }
    return ctx.snapshot->full_free_gpus(n, req.model) >= r.gpus ? FilterCode::kOk
                                                                : FilterCode::kInsufficientGpu;
  }
};

class GpuMemoryFilter final : public FilterPlugin {
 public:
  std::string_view name() const override { return "gpu-memory"; }
  FilterCode Filter(const PlacementContext& ctx, const TaskRequest& req, NodeId n) const override {
    const TaskResources& r = *req.resources;
    if (r.gpus == 0 || r.gpu_memory_mib == 0) return FilterCode::kOk;
    if (r.fractional()) {
      return HasGpuShare(*ctx.snapshot, n, req.model, r.gpu_milli, r.gpu_memory_mib)
                 ? FilterCode::kOk
                 : FilterCode::kInsufficientGpuMemory;
    }
    return CountFreeWholeGpus(*ctx.snapshot, n, req.model, r.gpu_memory_mib) >= r.gpus
               ? FilterCode::kOk
               : FilterCode::kInsufficientGpuMemory;
  }
};

class CpuFilter final : public FilterPlugin {
 public:
  std::string_view name() const override { return "cpu"; }
  FilterCode Filter(const PlacementContext& ctx, const TaskRequest& req, NodeId n) const override {
    return ctx.snapshot->free_cpu(n) >= req.resources->cpu_milli ? FilterCode::kOk
                                                                 : FilterCode::kInsufficientCpu;
  }
};

class MemoryFilter final : public FilterPlugin {
 public:
  std::string_view name() const override { return "memory"; }
  FilterCode Filter(const PlacementContext& ctx, const TaskRequest& req, NodeId n) const override {
    return ctx.snapshot->free_memory(n) >= req.resources->memory_mib
               ? FilterCode::kOk
               : FilterCode::kInsufficientMemory;
  }
};

class GangFilter final : public FilterPlugin {
 public:
  std::string_view name() const override { return "gang-distinct-nodes"; }
  FilterCode Filter(const PlacementContext& ctx, const TaskRequest&, NodeId n) const override {
    if (ctx.gang == nullptr || !ctx.gang->distinct_nodes) return FilterCode::kOk;
    return ctx.gang->UsesNode(n) ? FilterCode::kGangNodeTaken : FilterCode::kOk;
  }
};

// --- Scores --------------------------------------------------------------------------------

// Free capacity left on the node after the task, as a fraction of the node's GPUs (CPU for nodes
// without GPUs): binpack = kMaxScore x (1 - left / total).
int64_t LeftAfter(const PlacementContext& ctx, const TaskRequest& req, NodeId n,
                  const std::vector<GpuShare>& gpus, int64_t* total) {
  const Snapshot& s = *ctx.snapshot;
  const NodeInfo& info = s.cluster().node(n);
  if (info.gpu_count == 0) {
    *total = std::max<int64_t>(1, info.cpu_milli);
    return s.free_cpu(n) - req.resources->cpu_milli;
  }
  *total = int64_t{info.gpu_count} * kMilliPerGpu;
  int64_t used = 0;
  for (const GpuShare& g : gpus) used += g.milli;
  return FreeGpuMilli(s, n) - used;
}

class BinpackScore final : public ScorePlugin {
 public:
  std::string_view name() const override { return "binpack"; }
  int64_t Score(const PlacementContext& ctx, const TaskRequest& req, NodeId n,
                const std::vector<GpuShare>& gpus) const override {
    int64_t total = 1;
    const int64_t left = LeftAfter(ctx, req, n, gpus, &total);
    return kMaxScore - (kMaxScore * std::clamp<int64_t>(left, 0, total)) / total;
  }
  bool bucket_monotone() const override { return true; }
};

class SpreadScore final : public ScorePlugin {
 public:
  std::string_view name() const override { return "spread"; }
  int64_t Score(const PlacementContext& ctx, const TaskRequest& req, NodeId n,
                const std::vector<GpuShare>& gpus) const override {
    int64_t total = 1;
    const int64_t left = LeftAfter(ctx, req, n, gpus, &total);
    return (kMaxScore * std::clamp<int64_t>(left, 0, total)) / total;
  }
  CandidateOrder order() const override { return CandidateOrder::kMostFreeFirst; }
  bool bucket_monotone() const override { return true; }
};

// topology: a task's GPUs inside one NVLink domain; a gang's tasks on the fewest nodes and racks.
//   in-node part = kMaxScore / (number of NVLink domains the task's GPUs span)
//   gang part    = kMaxScore on a node the gang already uses (when tasks may share nodes),
//                  60% in a rack it uses, 30% in a network block it uses, else 0;
//                  for the first task, the share of the node's GPUs the gang could still use.
class TopologyScore final : public ScorePlugin {
 public:
  std::string_view name() const override { return "topology"; }
  int64_t Score(const PlacementContext& ctx, const TaskRequest& req, NodeId n,
                const std::vector<GpuShare>& gpus) const override {
    const Snapshot& s = *ctx.snapshot;
    const NodeInfo& info = s.cluster().node(n);
    int64_t in_node = kMaxScore;
    if (gpus.size() > 1) {
      int32_t domains[64];
      int nd = 0;
      for (const GpuShare& g : gpus) {
        const int32_t d = s.cluster().gpus()[info.gpu_begin + g.slot].nvlink_domain;
        if (std::find(domains, domains + nd, d) == domains + nd && nd < 64) domains[nd++] = d;
      }
      in_node = kMaxScore / std::max(1, nd);
    }
    const GangState* gang = ctx.gang;
    if (gang == nullptr || gang->tasks_total <= 1) return in_node;
    int64_t gang_part = 0;
    if (gang->nodes.empty()) {
      // First task: prefer nodes that could hold more of the gang.
      const int per_task = std::max(1, req.resources->gpus);
      const int fit = s.full_free_gpus(n, req.model) / per_task;
      gang_part = kMaxScore * std::min(fit, gang->tasks_total) / gang->tasks_total;
    } else if (!gang->distinct_nodes && gang->UsesNode(n)) {
      gang_part = kMaxScore;
    } else if (info.rack != 0 && gang->UsesRack(info.rack)) {
      gang_part = kMaxScore * 6 / 10;
    } else if (info.block != 0 && gang->UsesBlock(info.block)) {
      gang_part = kMaxScore * 3 / 10;
    }
    return (in_node + gang_part) / 2;
  }
};

// The free milli of the node's usable GPUs of `model`, before and after the placement.
struct NodeGpuFrees {
  NodeGpuFrees(const Snapshot& s, GpuModelId model, NodeId n, const std::vector<GpuShare>& gpus) {
    const NodeInfo& info = s.cluster().node(n);
    for (uint16_t k = 0; k < info.gpu_count && count < 256; ++k) {
      const uint32_t g = info.gpu_begin + k;
      if (s.cluster().gpus()[g].model != model || !s.gpu_usable(g)) continue;
      before[count] = s.gpu_free_milli(g);
      after[count] = before[count];
      for (const GpuShare& sh : gpus) {
        if (sh.slot == k) after[count] -= sh.milli;
      }
      ++count;
    }
  }
  int32_t before[256];
  int32_t after[256];
  int count = 0;
};

// fgd: Fragmentation Gradient Descent (Weng et al., USENIX ATC'23): place where the node's
// expected fragmentation against the typical-task distribution grows least, in absolute GPU milli
// (a node's growth is not scaled by its size: the paper and its simulator compare raw deltas).
//   delta     = F_n(after) - F_n(before)                     in GPU milli
//   published = floor(100 x sigmoid(-delta / 1000))          the simulator's 0..100 score
//   score     = published x kMaxScore / 100
// The 0..100 resolution is kept on purpose: nodes whose growth differs by less than about 40 milli
// tie and go to the lower node id, as in the published runs. On the openb trace that reproduces the
// paper's numbers; scoring at full resolution places about 1 point lower (docs/simulator.md).
class FgdScore final : public ScorePlugin {
 public:
  std::string_view name() const override { return "fgd"; }
  int64_t Score(const PlacementContext& ctx, const TaskRequest& req, NodeId n,
                const std::vector<GpuShare>& gpus) const override {
    const Snapshot& s = *ctx.snapshot;
    const NodeInfo& info = s.cluster().node(n);
    if (ctx.distribution == nullptr || ctx.distribution->classes.empty() || info.gpu_count == 0) {
      return 50 * kPublishedPoint;
    }
    GpuModelId model = req.model;
    if (model == kNoModel) model = s.cluster().gpus()[info.gpu_begin].model;
    const NodeGpuFrees f(s, model, n, gpus);
    const int64_t cpu = s.free_cpu(n);
    const double f0 = ContextFragmentation(ctx, model, cpu, f.before, f.count);
    const double f1 =
        ContextFragmentation(ctx, model, cpu - req.resources->cpu_milli, f.after, f.count);
    const double sigmoid = 1.0 / (1.0 + std::exp((f1 - f0) / 1000.0));
    const auto published = static_cast<int64_t>(sigmoid * 100.0);
    return std::clamp<int64_t>(published, 0, 100) * kPublishedPoint;
  }
};

// fgd-plus: FGD at full resolution, plus the idle GPUs the node's CPU and memory could no longer
// feed, plus GPUs of a model that tasks restricted to it will need; best fit when no typical tasks
// are known. Every term is in GPU milli, lower is better:
//
//   dF    = F_n(after) - F_n(before)             FGD's fragmentation growth (see fgd above)
//   S_n   = max(0, G_n - C_n / rho_cpu, G_n - M_n / rho_mem)
//           the stranded idle GPU milli: G_n idle GPU milli, C_n free CPU, M_n free memory, rho
//           the GPU tasks' CPU (memory) per GPU milli (TaskDistribution's demand ratios)
//   dS    = S_n(after) - S_n(before)
//   R     = used x min(1, e_k / c_k)             the task's GPU milli on model k, e_k the share of
//           GPU demand restricted to models that include k (exclusive_share), c_k k's share of
//           the cluster's GPUs
//   W     = max over the scarce multi-GPU shapes m of F_n(m, after) - F_n(m, before)
//           a shape (GPU count, CPU) of tasks of several whole GPUs is scarce when the whole free
//           GPUs on nodes that could take it are fewer than its share of the idle GPU milli
//           (ScarceMultiGpu; 0 when none is)
//   L     = 1000 x (cpu_left / max_cpu + gpu_left / max_gpu) / 2     bestfit's leftover, 0..1000
//   cost  = dF + dS + R + W, or L / 10 without a distribution
//   score = kMaxScore / 2 - cost x kMaxScore / (6 x 1000 x the largest node's GPUs), clamped
//
// Why each term. FGD sees CPU only through whether a typical task still fits the node's free CPU,
// a step: taking a node from 96 to 40 free cores costs nothing while its 8 idle GPUs would need
// 90, and when the cluster fills, GPUs are left with no CPU to go with them. S_n prices that
// gradually, at the workload's own average CPU and memory per GPU, so CPU-only and CPU-heavy
// tasks go where CPU is in surplus of what the idle GPUs need. FGD sees a GPU model only as
// whether the next task may use it; R is the longer view: when tasks restricted to model k will
// ask for a share e_k of the demand and k is c_k of the cluster, a GPU of k that a task able to run
// elsewhere takes is, with probability about e_k / c_k, one such a task will miss. R is the same
// for every node of one model, so it only steers tasks that may choose between models. The
// typical tasks leave out rare shapes, such as whole-node tasks of 8 GPUs (0.5% of openb's tasks
// but 6% of its GPU demand), and dS balances CPU against GPUs by opening empty nodes: online, the
// empty nodes those tasks need were all partly used by the time they arrived. W keeps them, but
// only while they are scarce, measured against the shape's own share of the demand: opening a
// whole node then costs the GPUs it leaves that such a task cannot use. A tenth of
// L was once added to pack what full resolution spreads; with dS it no longer changes the offline
// figures (within 0.04 points on every openb family) and online it kept whole nodes busy longer
// (docs/simulator.md, "Online: default against the baselines"). Without a distribution dF, dS, R
// and W are 0 and the score is best fit.
class FgdPlusScore final : public ScorePlugin {
 public:
  std::string_view name() const override { return "fgd-plus"; }
  int64_t Score(const PlacementContext& ctx, const TaskRequest& req, NodeId n,
                const std::vector<GpuShare>& gpus) const override {
    const Snapshot& s = *ctx.snapshot;
    const NodeInfo& info = s.cluster().node(n);
    const TaskResources& r = *req.resources;
    const TaskDistribution* dist = ctx.distribution;
    const bool have_dist = dist != nullptr && !dist->classes.empty() && info.gpu_count > 0;
    const int64_t cpu = s.free_cpu(n);
    const int64_t cpu_after = cpu - r.cpu_milli;
    const int64_t idle = FreeGpuMilli(s, n);
    int64_t used = 0;
    for (const GpuShare& g : gpus) used += g.milli;
    const int64_t idle_after = idle - used;

    double cost = 0;
    if (have_dist) {
      GpuModelId model = req.model;
      if (model == kNoModel) model = s.cluster().gpus()[info.gpu_begin].model;
      NodeGpuFrees f(s, model, n, gpus);
      cost += ContextFragmentation(ctx, model, cpu_after, f.after, f.count) -
              ContextFragmentation(ctx, model, cpu, f.before, f.count);
      if (!dist->multi_gpu.empty()) {
        TaskDistribution computed;
        const TaskDistribution* scarce = &computed;
        if (ctx.frag_cache != nullptr && &ctx.frag_cache->distribution() == dist) {
          scarce = &ctx.frag_cache->ScarceMultiGpu(s);
        } else {
          computed = ScarceMultiGpu(*dist, s);
        }
        // W: the most any scarce shape's room grows fragmented.
        double w = 0;
        for (size_t i = 0; i < scarce->classes.size(); ++i) {
          const TaskClass& m = scarce->classes[i];
          const auto growth =
              static_cast<double>(ClassFragmentation(m, model, cpu_after, f.after, f.count) -
                                  ClassFragmentation(m, model, cpu, f.before, f.count));
          w = i == 0 ? growth : std::max(w, growth);
        }
        cost += w;
      }
      const int64_t mem = s.free_memory(n);
      cost += Stranded(*dist, idle_after, cpu_after, mem - r.memory_mib) -
              Stranded(*dist, idle, cpu, mem);
      cost += static_cast<double>(used) * Reserved(*dist, s.cluster(), model);
    }
    const double max_gpu = static_cast<double>(std::max(1, s.cluster().max_gpus_per_node())) *
                           static_cast<double>(kMilliPerGpu);
    if (!have_dist) {  // L / 10, as beside the other terms before
      const double max_cpu = static_cast<double>(std::max<int64_t>(1, s.cluster().max_cpu_milli()));
      cost +=
          100.0 *
          (static_cast<double>(cpu_after) / max_cpu + static_cast<double>(idle_after) / max_gpu) /
          2.0;
    }
    const double scale = static_cast<double>(kMaxScore) / (6.0 * max_gpu);
    const double score = static_cast<double>(kMaxScore) / 2.0 - cost * scale;
    return std::clamp<int64_t>(std::llround(score), 0, kMaxScore);
  }

 private:
  // S_n: idle GPU milli beyond what the free CPU and memory can feed at the demand ratios.
  static double Stranded(const TaskDistribution& d, int64_t idle, int64_t cpu, int64_t mem) {
    const auto g = static_cast<double>(idle);
    double stranded = 0;
    if (d.cpu_per_gpu_milli > 0) {
      stranded = std::max(stranded, g - static_cast<double>(cpu) / d.cpu_per_gpu_milli);
    }
    if (d.memory_per_gpu_milli > 0) {
      stranded = std::max(stranded, g - static_cast<double>(mem) / d.memory_per_gpu_milli);
    }
    return stranded;
  }

  // min(1, e_k / c_k) for model k.
  static double Reserved(const TaskDistribution& d, const Cluster& c, GpuModelId k) {
    if (k.value() >= d.exclusive_share.size() || d.exclusive_share[k.value()] <= 0) return 0;
    const auto total = static_cast<double>(c.capacity()[kDimGpu]);
    const auto of_k = static_cast<double>(c.capacity()[ModelDim(k)]);
    if (total <= 0 || of_k <= 0) return 0;
    return std::min(1.0, d.exclusive_share[k.value()] / (of_k / total));
  }
};

}  // namespace

std::vector<std::string_view> BuiltinFilterNames() {
  return {"node-state", "node-selector", "node-name", "taints",    "gpu-model",          "gpu",
          "gpu-memory", "cpu",           "memory",    "exclusive", "gang-distinct-nodes"};
}

// image-locality (Kubernetes' ImageLocality): prefer nodes that already hold the task's container
// image, so that it starts without a pull. A big image counts more than a small one, and an image
// few nodes hold counts less (so that the jobs of one image do not all pile onto those nodes):
//   scaled = size x (nodes holding it / nodes)
//   score  = kMaxScore x (clamp(scaled, 23 MiB, 1000 MiB) - 23 MiB) / (1000 MiB - 23 MiB)
// A node that holds it, of a size nobody reported: kMaxScore / 2. A node without it, or a task
// without an image: 0.
class ImageLocalityScore final : public ScorePlugin {
 public:
  std::string_view name() const override { return "image-locality"; }
  int64_t Score(const PlacementContext& ctx, const TaskRequest& req, NodeId n,
                const std::vector<GpuShare>&) const override {
    if (req.image == kNoImage) return 0;
    const Cluster& c = ctx.snapshot->cluster();
    const int64_t size = c.ImageSizeOn(n, req.image);
    if (size < 0) return 0;
    if (size == 0) return kMaxScore / 2;
    constexpr int64_t kMin = int64_t{23} << 20;
    constexpr int64_t kMax = int64_t{1000} << 20;
    __extension__ using I128 = __int128;
    const int64_t scaled = static_cast<int64_t>(static_cast<I128>(size) * c.image_nodes(req.image) /
                                                std::max<size_t>(1, c.num_nodes()));
    return kMaxScore * (std::clamp(scaled, kMin, kMax) - kMin) / (kMax - kMin);
  }
};

std::vector<std::string_view> BuiltinScoreNames() {
  std::vector<std::string_view> names = {"binpack", "spread",   "topology",
                                         "fgd",     "fgd-plus", "image-locality"};
  for (std::string_view b : BaselineScoreNames()) names.push_back(b);
  return names;
}

std::unique_ptr<FilterPlugin> MakeFilter(std::string_view name) {
  if (name == "node-state") return std::make_unique<NodeStateFilter>();
  if (name == "node-selector") return std::make_unique<SelectorFilter>();
  if (name == "taints") return std::make_unique<TaintFilter>();
  if (name == "node-name") return std::make_unique<NodeNameFilter>();
  if (name == "exclusive") return std::make_unique<ExclusiveFilter>();
  if (name == "gpu-model") return std::make_unique<GpuModelFilter>();
  if (name == "gpu") return std::make_unique<GpuFilter>();
  if (name == "gpu-memory") return std::make_unique<GpuMemoryFilter>();
  if (name == "cpu") return std::make_unique<CpuFilter>();
  if (name == "memory") return std::make_unique<MemoryFilter>();
  if (name == "gang-distinct-nodes") return std::make_unique<GangFilter>();
  return nullptr;
}

std::unique_ptr<ScorePlugin> MakeScore(std::string_view name) {
  if (name == "binpack") return std::make_unique<BinpackScore>();
  if (name == "spread") return std::make_unique<SpreadScore>();
  if (name == "topology") return std::make_unique<TopologyScore>();
  if (name == "fgd") return std::make_unique<FgdScore>();
  if (name == "fgd-plus") return std::make_unique<FgdPlusScore>();
  if (name == "image-locality") return std::make_unique<ImageLocalityScore>();
  return MakeBaselineScore(name);
}

}  // namespace arbiter::core

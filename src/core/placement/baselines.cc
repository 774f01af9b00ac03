#include "core/placement/baselines.h"

#include <algorithm>

#include "core/placement/plugins.h"

namespace arbiter::core {

uint64_t DecisionDraw(const PlacementContext& ctx, NodeId n, uint64_t bound) {
  // SplitMix64's finaliser over (seed, version, node): cheap, well mixed, portable.
  auto mix = [](uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  };
  const uint64_t version = ctx.snapshot != nullptr ? ctx.snapshot->version() : 0;
  uint64_t z = mix(ctx.seed + 0x9e3779b97f4a7c15ULL);
  z = mix(z ^ (version * 0x9e3779b97f4a7c15ULL));
  z = mix(z ^ (uint64_t{n.value()} + 0x632be59bd9b4e019ULL));
  __extension__ using U128 = unsigned __int128;
  return static_cast<uint64_t>((static_cast<U128>(z) * bound) >> 64);
}

namespace {

constexpr int64_t kPublishedMax = 100;

// A published integer score on kMaxScore's scale.
int64_t Published(int64_t published) {
  return std::clamp<int64_t>(published, 0, kPublishedMax) * kPublishedPoint;
}

// The normalisers the published scores use (the largest node of the Alibaba cluster: 128 cores,
// 8 GPUs); here the largest node of this cluster.
double MaxCpu(const Snapshot& s) {
  return static_cast<double>(std::max<int64_t>(1, s.cluster().max_cpu_milli()));
}
double MaxGpuMilli(const Snapshot& s) {
  return static_cast<double>(std::max(1, s.cluster().max_gpus_per_node()) * kMilliPerGpu);
}

// bestfit: published = (1 - sum_r w_r (free_r - request_r) / max_r) x 100, r in {cpu, gpu},
// w = 0.5 each, free and request summed over the node's GPUs; lower leftovers score higher.
class BestFitScore final : public ScorePlugin {
 public:
  std::string_view name() const override { return "bestfit"; }
  int64_t Score(const PlacementContext& ctx, const TaskRequest& req, NodeId n,
                const std::vector<GpuShare>&) const override {
    const Snapshot& s = *ctx.snapshot;
    const TaskResources& r = *req.resources;
    double left = 0;  // in the published order of operations, so truncation matches
    left += static_cast<double>(s.free_cpu(n) - r.cpu_milli) / MaxCpu(s) * 0.5;
    left += static_cast<double>(FreeGpuMilli(s, n) - r.total_gpu_milli()) / MaxGpuMilli(s) * 0.5;
    const auto published = static_cast<int64_t>((1.0 - left) * static_cast<double>(kPublishedMax));
    return Published(published);
  }
};

// dotprod (Tetris, Grandl et al., SIGCOMM'14), as the paper runs it (free GPUs merged into one
// dimension, both dimensions normalised by the largest node):
//   dot = (free_cpu x req_cpu / max_cpu^2 + free_gpu x req_gpu / max_gpu^2) / 2
//   published = (1 - dot) x 100: the smaller the alignment, the higher the score.
class DotProductScore final : public ScorePlugin {
 public:
  std::string_view name() const override { return "dotprod"; }
  int64_t Score(const PlacementContext& ctx, const TaskRequest& req, NodeId n,
                const std::vector<GpuShare>&) const override {
    const Snapshot& s = *ctx.snapshot;
    const TaskResources& r = *req.resources;
    const double cpu_max = MaxCpu(s);
    const double gpu_max = MaxGpuMilli(s);
    double dot = 0;
    dot +=
        static_cast<double>(s.free_cpu(n)) / cpu_max * (static_cast<double>(r.cpu_milli) / cpu_max);
    dot += static_cast<double>(FreeGpuMilli(s, n)) / gpu_max *
           (static_cast<double>(r.total_gpu_milli()) / gpu_max);
    dot /= 2;
    const auto published = static_cast<int64_t>(static_cast<double>(kPublishedMax) * (1.0 - dot));
    return Published(published);
  }
};

// gpupacking, in three tiers (published, 0..100):
//   every GPU of the node idle:          max(33 - idle GPUs, idle GPUs)         (smallest node
//   first) the task needs k idle GPUs:          max(50 - k, 33)                        (partly used
//   node) the task fits on partly used GPUs:   max(100 - sum of their free % / 10, 50)  (share a
//   GPU)
// The GPUs are taken least free first, as the published score does; CPU-only tasks score 0.
class GpuPackingScore final : public ScorePlugin {
 public:
  std::string_view name() const override { return "gpupacking"; }
  int64_t Score(const PlacementContext& ctx, const TaskRequest& req, NodeId n,
                const std::vector<GpuShare>&) const override {
    const TaskResources& r = *req.resources;
    if (r.gpus == 0 || req.model == kNoModel) return Published(0);
    const Snapshot& s = *ctx.snapshot;
    const NodeInfo& info = s.cluster().node(n);
    int32_t free[256];
    int ng = 0;
    int idle = 0;
    for (uint16_t k = 0; k < info.gpu_count && ng < 256; ++k) {
      const uint32_t g = info.gpu_begin + k;
      if (s.cluster().gpus()[g].model != req.model || !s.gpu_usable(g)) continue;
      free[ng++] = s.gpu_free_milli(g);
      if (s.gpu_free_milli(g) == kMilliPerGpu) ++idle;
    }
    if (idle == ng) return Published(std::max<int64_t>(kPublishedMax / 3 - idle, idle));
    std::stable_sort(free, free + ng);  // least free first
    int want = r.gpus;
    int idle_used = 0;
    int64_t free_pct = 0;  // sum over the GPUs used of their free share in percent
    for (int i = 0; i < ng && want > 0; ++i) {
      if (free[i] < r.gpu_milli) continue;
      --want;
      if (free[i] == kMilliPerGpu) ++idle_used;
      free_pct += int64_t{free[i]} * 100 / kMilliPerGpu;
    }
    if (want > 0) return Published(0);
    if (idle_used > 0) {
      return Published(std::max<int64_t>(kPublishedMax / 2 - idle_used, kPublishedMax / 3));
    }
    return Published(std::max<int64_t>(kPublishedMax - free_pct / 10, kPublishedMax / 2));
  }
};

// gpuclustering: keep tasks of one GPU kind together (kinds: a GPU share, or k whole GPUs).
//   fill = 25 x (max_gpu - free GPU milli of the node) / max_gpu        in 0..25
//   published = 75 + fill   the node runs only tasks of this kind
//               50 + fill   it runs this kind among others
//               25 + fill   it runs no GPU task
//                    fill   it runs only other kinds
// CPU-only tasks score 0.
class GpuClusteringScore final : public ScorePlugin {
 public:
  std::string_view name() const override { return "gpuclustering"; }
  int64_t Score(const PlacementContext& ctx, const TaskRequest& req, NodeId n,
                const std::vector<GpuShare>&) const override {
    const TaskResources& r = *req.resources;
    if (r.gpus == 0) return Published(0);
    const Snapshot& s = *ctx.snapshot;
    const auto gpu_max = static_cast<int64_t>(MaxGpuMilli(s));
    const int64_t fill = kPublishedMax / 4 * (gpu_max - FreeGpuMilli(s, n)) / gpu_max;
    const int16_t kind = r.fractional() ? 0 : static_cast<int16_t>(r.gpus);
    const auto& kinds = s.gpu_task_kinds(n);
    const bool has_kind =
        std::any_of(kinds.begin(), kinds.end(), [&](const auto& k) { return k.first == kind; });
    int64_t tier = 0;
    if (has_kind) {
      tier = kinds.size() == 1 ? kPublishedMax * 3 / 4 : kPublishedMax * 2 / 4;
    } else if (kinds.empty()) {
      tier = kPublishedMax / 4;
    }
    return Published(tier + fill);
  }
};

// random: every feasible node equally likely (the largest of independent uniform draws).
class RandomScore final : public ScorePlugin {
 public:
  std::string_view name() const override { return "random"; }
  int64_t Score(const PlacementContext& ctx, const TaskRequest&, NodeId n,
                const std::vector<GpuShare>&) const override {
    return static_cast<int64_t>(DecisionDraw(ctx, n, kMaxScore + 1));
  }
};

}  // namespace

std::vector<std::string_view> BaselineScoreNames() {
  return {"bestfit", "dotprod", "gpupacking", "gpuclustering", "random"};
}

std::unique_ptr<ScorePlugin> MakeBaselineScore(std::string_view name) {
  if (name == "bestfit") return std::make_unique<BestFitScore>();
  if (name == "dotprod") return std::make_unique<DotProductScore>();
  if (name == "gpupacking") return std::make_unique<GpuPackingScore>();
  if (name == "gpuclustering") return std::make_unique<GpuClusteringScore>();
  if (name == "random") return std::make_unique<RandomScore>();
  return nullptr;
}

}  // namespace arbiter::core

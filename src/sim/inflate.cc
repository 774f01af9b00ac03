#include "sim/inflate.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <numeric>
#include <tuple>

#include "common/rng.h"
#include "core/placement/plugins.h"
#include "core/quota/quota_tree.h"

namespace arbiter::sim {

using core::Cluster;
using core::PlacementContext;
using core::Profile;
using core::Snapshot;
using core::TaskClass;
using core::TaskDistribution;
using core::TaskPlacement;
using core::TaskRequest;

namespace {

// A model the core can never match, for a spec that names only models the cluster lacks.
constexpr GpuModelId kNoSuchModel{core::kMaxGpuModels};

// Allowed-model bit set of a spec over the cluster's models; `any` when the spec is empty.
uint32_t ModelMask(const Cluster& cluster, const std::vector<std::string>& names, bool* any) {
  *any = names.empty();
  uint32_t mask = 0;
  for (const std::string& name : names) {
    const GpuModelId m = cluster.FindModel(name);
    if (m != core::kNoModel) mask |= 1u << m.value();
  }
  return mask;
}

}  // namespace

TaskDistribution TypicalTasks(const Cluster& cluster, const std::vector<TraceTask>& tasks,
                              double coverage) {
  // Key: (cpu_milli, gpu_milli, num_gpu, gpu_spec); a CPU-only task's gpu_milli is 0, as in the
  // trace.
  using Key = std::tuple<int64_t, int32_t, int32_t, std::string>;
  std::map<Key, int64_t> counts;
  std::map<Key, const TraceTask*> example;
  for (const TraceTask& t : tasks) {
    const int32_t milli = t.resources.gpus == 0 ? 0 : t.resources.gpu_milli;
    const Key k{t.resources.cpu_milli, milli, t.resources.gpus, t.gpu_spec};
    if (++counts[k] == 1) example[k] = &t;
  }
  std::vector<std::pair<Key, int64_t>> sorted(counts.begin(), counts.end());
  // Descending by count, then by the key itself descending (cpu, gpu milli, GPU count, spec).
  std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) {
    if (a.second != b.second) return a.second > b.second;
    return a.first > b.first;
  });
  TaskDistribution d;
  const double expected = coverage * static_cast<double>(tasks.size());
  double covered = 0;
  for (const auto& [key, count] : sorted) {
    if (covered >= expected) break;
    const TraceTask& t = *example[key];
    TaskClass c;
    c.cpu_milli = std::get<0>(key);
    c.gpu_milli = std::get<1>(key);
    c.gpus = std::get<2>(key);
    bool any = false;
    c.models = ModelMask(cluster, t.gpu_models, &any);
    if (!any && c.models == 0) c.model = kNoSuchModel;
    c.weight = static_cast<double>(count);
    d.classes.push_back(c);
    covered += static_cast<double>(count);
  }
  for (TaskClass& c : d.classes) c.weight /= covered;
  // CPU and memory per GPU milli, and the demand restricted to models, over every GPU task of the
  // trace (for fgd-plus).
  std::vector<TaskClass> samples;
  samples.reserve(tasks.size());
  for (const TraceTask& t : tasks) {
    TaskClass c;
    c.cpu_milli = t.resources.cpu_milli;
    c.gpus = t.resources.gpus;
    c.gpu_milli = t.resources.gpu_milli;
    c.memory_mib = t.resources.memory_mib;
    // 0 (not counted as restricted) for an empty spec, and for one naming no model of the cluster.
    bool any = false;
    c.models = ModelMask(cluster, t.gpu_models, &any);
    samples.push_back(c);
  }
  d.SetDemandRatios(samples);
  return d;
}

Workload CompileWorkload(const Cluster& cluster, const std::vector<TraceTask>& tasks) {
  Workload w;
  w.tasks.reserve(tasks.size());
  for (const TraceTask& t : tasks) {
    SimTask s;
    s.resources = t.resources;
    if (t.resources.gpus > 0) {
      bool any = false;
      const uint32_t mask = ModelMask(cluster, t.gpu_models, &any);
      for (size_t m = 0; m < cluster.models().size(); ++m) {
        if (any || ((mask >> m) & 1u) != 0) s.models.emplace_back(static_cast<uint16_t>(m));
      }
    }
    w.tasks.push_back(std::move(s));
  }
  w.typical = TypicalTasks(cluster, tasks);
  return w;
}

bool PlaceOnAnyModel(Snapshot& snap, const Profile& profile, const PlacementContext& ctx,
                     const SimTask& task, TaskPlacement* out) {
  TaskRequest req;
  req.resources = &task.resources;
  if (task.resources.gpus == 0) return core::PlaceTask(snap, profile, ctx, req, out);
  // One FindPlacement per allowed model over the unchanged snapshot is one scoring pass over all
  // feasible nodes: the best score wins and equal scores go to the lower node id, as within one
  // model.
  bool found = false;
  int64_t best = 0;
  TaskPlacement candidate;
  for (GpuModelId m : task.models) {
    req.model = m;
    int64_t score = 0;
    if (!core::FindPlacement(snap, profile, ctx, req, &candidate, &score)) continue;
    if (!found || score > best || (score == best && candidate.node < out->node)) {
      found = true;
      best = score;
      std::swap(*out, candidate);
    }
  }
  if (found) snap.Allocate(*out);
  return found;
}

// --- FragmentationMeter ------------------------------------------------------------------------

FragmentationMeter::FragmentationMeter(const Snapshot& snap, const TaskDistribution& dist)
    : snap_(&snap),
      dist_(&dist),
      frag_(snap.cluster().num_nodes(), 0),
      idle_(snap.cluster().num_nodes(), 0) {
  for (uint32_t i = 0; i < snap.cluster().num_nodes(); ++i) Update(NodeId(i));
}

double FragmentationMeter::NodeFragment(NodeId n) const {
  // F_n over each GPU model of the node (openb nodes have one).
  const core::NodeInfo& info = snap_->cluster().node(n);
  const auto& gpus = snap_->cluster().gpus();
  double f = 0;
  GpuModelId done[8];
  int num_done = 0;
  for (uint32_t g = info.gpu_begin; g < info.gpu_begin + info.gpu_count; ++g) {
    const GpuModelId m = gpus[g].model;
    if (std::find(done, done + num_done, m) != done + num_done) continue;
    if (num_done < 8) done[num_done++] = m;
    int32_t free[256];
    int ng = 0;
    for (uint32_t h = g; h < info.gpu_begin + info.gpu_count && ng < 256; ++h) {
      if (gpus[h].model == m && snap_->gpu_usable(h)) free[ng++] = snap_->gpu_free_milli(h);
    }
    f += core::NodeFragmentation(*dist_, m, snap_->free_cpu(n), free, ng);
  }
  return f;
}

int64_t FragmentationMeter::NodeIdle(NodeId n) const { return core::FreeGpuMilli(*snap_, n); }

void FragmentationMeter::Update(NodeId n) {
  const size_t i = n.value();
  frag_sum_ -= frag_[i];
  idle_sum_ -= idle_[i];
  frag_[i] = NodeFragment(n);
  idle_[i] = NodeIdle(n);
  frag_sum_ += frag_[i];
  idle_sum_ += idle_[i];
}

double FragmentationMeter::ratio() const {
  return idle_sum_ > 0 ? frag_sum_ / static_cast<double>(idle_sum_) : 0.0;
}

// --- RunInflate --------------------------------------------------------------------------------

namespace {

// Step 1: the arrival order of task indices.
std::vector<uint32_t> ArrivalOrder(const Workload& w, Rng& rng, int64_t capacity, double target) {
  const auto n = static_cast<uint32_t>(w.tasks.size());
  std::vector<uint32_t> order(n);
  std::iota(order.begin(), order.end(), 0u);
  rng.Shuffle(order.begin(), order.end());
  auto demand = [&](uint32_t idx) { return w.tasks[idx].resources.total_gpu_milli(); };
  int64_t total = 0;
  for (uint32_t idx : order) total += demand(idx);
  const double goal = target * static_cast<double>(capacity);
  if (static_cast<double>(total) > goal) {
    // Below the trace's own demand: drop random tasks until the total fits.
    while (!order.empty() && static_cast<double>(total) > goal) {
      const size_t k = rng.Uniform(order.size());
      total -= demand(order[k]);
      order.erase(order.begin() + static_cast<std::ptrdiff_t>(k));
    }
    return order;
  }
  if (total == 0 && std::none_of(w.tasks.begin(), w.tasks.end(),
                                 [](const SimTask& t) { return t.resources.gpus > 0; })) {
    return order;  // no GPU task: copies would never reach the goal
  }
  while (true) {
    const auto idx = static_cast<uint32_t>(rng.Uniform(n));
    if (static_cast<double>(total + demand(idx)) > goal) break;
    total += demand(idx);
    order.push_back(idx);
  }
  return order;
}

}  // namespace

Result<InflateRun> RunInflate(const Cluster& cluster, const Workload& workload,
                              const Profile& profile, uint64_t seed, double target) {
  if (!(target > 0) || target > 100) {
    return InvalidArgument("target", fmt::format("must be in (0, 100], got {}", target));
  }
  const int64_t capacity = cluster.capacity()[core::kDimGpu];
  if (capacity <= 0) return InvalidArgument("nodes", "the cluster has no schedulable GPUs");
  if (workload.tasks.empty()) return InvalidArgument("pods", "the trace has no tasks");
  auto tree = core::QuotaTree::Build({}, cluster.models());
  if (!tree.ok()) return tree.status();

  const auto t0 = std::chrono::steady_clock::now();
  Rng rng(seed);
  const std::vector<uint32_t> order = ArrivalOrder(workload, rng, capacity, target);

  Snapshot snap(cluster, *tree);
  FragmentationMeter meter(snap, workload.typical);
  core::FragmentationCache frag_cache(workload.typical);
  PlacementContext ctx{&snap, nullptr, &workload.typical, 0, &frag_cache};
  InflateRun run;
  run.seed = seed;
  const int max_d = static_cast<int>(std::floor(target * 100.0 + 1e-9));
  int next_d = 0;
  int64_t arrived = 0;
  int64_t allocated = 0;
  auto record_until = [&](int64_t next_arrived) {
    // Points d whose demand the next task would exceed get the current state.
    while (next_d <= max_d && next_arrived * 100 > int64_t{next_d} * capacity) {
      run.curve.push_back(
          {next_d, 100.0 * static_cast<double>(allocated) / capacity, 100.0 * meter.ratio()});
      ++next_d;
    }
  };
  TaskPlacement placement;
  for (size_t i = 0; i < order.size(); ++i) {
    const SimTask& task = workload.tasks[order[i]];
    const int64_t want = task.resources.total_gpu_milli();
    record_until(arrived + want);
    arrived += want;
    ctx.seed = seed * 0x100000001b3ULL + i;
    if (PlaceOnAnyModel(snap, profile, ctx, task, &placement)) {
      ++run.placed;
      allocated += want;
      meter.Update(placement.node);
    }
  }
  record_until(std::numeric_limits<int64_t>::max() / 200);
  run.tasks = static_cast<int64_t>(order.size());
  run.demand_pct_end = 100.0 * static_cast<double>(arrived) / capacity;
  run.alloc_pct_end = 100.0 * static_cast<double>(allocated) / capacity;
  run.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return run;
}

std::vector<CurvePoint> MeanCurve(const std::vector<InflateRun>& runs) {
  std::vector<CurvePoint> mean;
  if (runs.empty()) return mean;
  mean = runs.front().curve;
  for (size_t r = 1; r < runs.size(); ++r) {
    for (size_t i = 0; i < mean.size() && i < runs[r].curve.size(); ++i) {
      mean[i].alloc_pct += runs[r].curve[i].alloc_pct;
      mean[i].frag_pct += runs[r].curve[i].frag_pct;
    }
  }
  for (CurvePoint& p : mean) {
    p.alloc_pct /= static_cast<double>(runs.size());
    p.frag_pct /= static_cast<double>(runs.size());
  }
  return mean;
}

}  // namespace arbiter::sim

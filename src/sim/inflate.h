// The workload-inflation experiment of the FGD paper (Weng et al., USENIX ATC'23, section 6), run
// on the production placement core (Snapshot, Profile, FindPlacement/PlaceTask):
//
//   1. Shuffle the trace's tasks with the seed, then append copies of tasks drawn uniformly at
//      random until the next copy would take the total GPU request above target x the cluster's
//      GPUs (a target below the trace's own demand removes random tasks instead).
//   2. Place the tasks one at a time into the empty cluster, never releasing anything. A task goes
//      to the best node over all of its allowed GPU models (one FindPlacement per model, the
//      highest score wins, ties to the lower node id); a task that fits nowhere is dropped.
//   3. After each task, record the GPU allocation ratio (allocated GPU milli / cluster GPU milli)
//      against the arrived GPU demand (every task's request, placed or not, over the same), and
//      the fragmentation ratio sum_n F_n / sum_n G_n, where G_n is node n's idle GPU milli and F_n
//      its fragmentation against the typical-task distribution (core::NodeFragmentation).
//
// The curve holds one point per whole demand percentage d = 0..floor(100 x target): the state
// after the last task whose arrival keeps the demand at or below d%.
//
// Everything here is deterministic in the seed (Arbiter's Rng; no clock inside RunInflate except
// the reported duration).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/result.h"
#include "core/cluster.h"
#include "core/placement/framework.h"
#include "core/snapshot.h"
#include "sim/openb.h"

namespace arbiter::sim {

// A trace task compiled against a cluster.
struct SimTask {
  TaskResources resources;
  // The allowed GPU models the cluster has (every model when the spec is empty), by id. Empty for
  // CPU-only tasks, and for GPU tasks whose spec names only models the cluster lacks (they never
  // fit).
  std::vector<GpuModelId> models;
};

struct Workload {
  std::vector<SimTask> tasks;
  core::TaskDistribution typical;  // the typical tasks of the trace (TypicalTasks)
};

// The typical tasks of a trace: the most frequent (cpu_milli, gpu_milli, num_gpu, gpu_spec) classes
// that together cover `coverage` of the tasks (CPU-only tasks included), weights renormalised to
// sum to 1. Classes are taken in the published simulator's order: by count, then CPU, GPU milli,
// GPU count and spec string, all descending, one class at a time until the coverage is reached.
// The demand ratios (CPU and memory per GPU milli) and the demand restricted to GPU models
// (exclusive_share) are over every GPU task of the trace.
core::TaskDistribution TypicalTasks(const core::Cluster& cluster,
                                    const std::vector<TraceTask>& tasks, double coverage = 0.95);

// Compiles the tasks and their typical-task distribution.
Workload CompileWorkload(const core::Cluster& cluster, const std::vector<TraceTask>& tasks);

// Places one task on the best node over its allowed models (see step 2 above) and reserves it on
// the snapshot. False when it fits nowhere.
bool PlaceOnAnyModel(core::Snapshot& snap, const core::Profile& profile,
                     const core::PlacementContext& ctx, const SimTask& task,
                     core::TaskPlacement* out);

// The cluster's fragmentation ratio, kept up to date node by node.
class FragmentationMeter {
 public:
  FragmentationMeter(const core::Snapshot& snap, const core::TaskDistribution& dist);
  // Call after node n's free capacity changed.
  void Update(NodeId n);
  // sum_n F_n / sum_n G_n (0 when nothing is idle).
  double ratio() const;
  // F_n and G_n of one node, as the ratio counts them.
  double NodeFragment(NodeId n) const;
  int64_t NodeIdle(NodeId n) const;

 private:
  const core::Snapshot* snap_;
  const core::TaskDistribution* dist_;
  std::vector<double> frag_;
  std::vector<int64_t> idle_;
  double frag_sum_ = 0;
  int64_t idle_sum_ = 0;
};

struct CurvePoint {
  int demand_pct = 0;
  double alloc_pct = 0;
  double frag_pct = 0;
};

struct InflateRun {
  uint64_t seed = 0;
  int64_t tasks = 0;   // arrived, copies included
  int64_t placed = 0;  // the rest were dropped
  double demand_pct_end = 0;
  double alloc_pct_end = 0;
  std::vector<CurvePoint> curve;
  double seconds = 0;  // wall time of the placement loop
};

// Runs the experiment once. Fails on a target outside (0, 100] or an empty cluster.
Result<InflateRun> RunInflate(const core::Cluster& cluster, const Workload& workload,
                              const core::Profile& profile, uint64_t seed, double target);

// The per-demand mean of several runs' curves (all of the same target).
std::vector<CurvePoint> MeanCurve(const std::vector<InflateRun>& runs);

}  // namespace arbiter::sim

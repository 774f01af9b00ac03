// Compact types the scheduling core works on: quota vectors, pending and running jobs, bindings.
//
// Drivers (the server, the simulator, the benchmark) translate the model (model/*.h, names and
// strings) into these indexed forms once; the cycle then works on integers only. A pending job
// costs about 120 bytes here, so a 200,000-job backlog stays far under 2 KiB per job.
#pragma once

#include <array>
#include <cstdint>
#include <limits>
#include <vector>

#include "common/ids.h"
#include "model/job.h"
#include "model/resources.h"
#include "model/time.h"

namespace arbiter::core {

// Quota dimensions: cpu (milli), memory (MiB), gpu of any model (milli), tasks (a count: the
// job's tasks, so that a queue's or tenant's `max: {tasks: N}` bounds its live processes; no
// node capacity), then gpu of model m (milli) at kFirstModelDim + m.
inline constexpr int kDimCpu = 0;
inline constexpr int kDimMemory = 1;
inline constexpr int kDimGpu = 2;
inline constexpr int kDimTasks = 3;
inline constexpr int kFirstModelDim = 4;
inline constexpr int kMaxGpuModels = 16;
inline constexpr int kMaxDims = kFirstModelDim + kMaxGpuModels;

// "Unlimited": far above any cluster, low enough that sums of a few never overflow.
inline constexpr int64_t kUnlimited = std::numeric_limits<int64_t>::max() / 8;

inline int ModelDim(GpuModelId m) { return kFirstModelDim + m.value(); }

struct QuotaVec {
  std::array<int64_t, kMaxDims> v{};

  int64_t& operator[](int d) { return v[static_cast<size_t>(d)]; }
  int64_t operator[](int d) const { return v[static_cast<size_t>(d)]; }
  QuotaVec& operator+=(const QuotaVec& o) {
    for (size_t i = 0; i < v.size(); ++i) v[i] += o.v[i];
    return *this;
  }
  QuotaVec& operator-=(const QuotaVec& o) {
    for (size_t i = 0; i < v.size(); ++i) v[i] -= o.v[i];
    return *this;
  }
  bool operator==(const QuotaVec&) const = default;
};

// The quota a job (all of its tasks) charges when it runs on GPUs of `model` (ignored without
// GPUs).
QuotaVec JobQuotaRequest(const TaskResources& per_task, int32_t tasks, GpuModelId model);

inline constexpr GpuModelId kNoModel{0xffff};
// No container image (Cluster::FindImage of an image no node holds).
inline constexpr uint32_t kNoImage = 0xffffffff;

// Node constraints shared by many jobs (selector, tolerations, node lists, exclusive use),
// interned by the driver into CycleInput::constraints; index 0 means "no constraints".
struct Constraints {
  std::vector<std::pair<uint32_t, uint32_t>> selector;     // (label key id, value id), sorted
  std::vector<std::pair<uint32_t, uint32_t>> tolerations;  // (key id, value id or kAnyValue)
  // Slurm's --nodelist: when `only_listed`, the tasks go only to these nodes (ids, sorted; names
  // the cluster does not have are left out, so an empty list matches nothing).
  bool only_listed = false;
  std::vector<uint32_t> nodes;
  std::vector<uint32_t> excluded;  // --exclude: never these nodes (ids, sorted)
  // --exclusive: each task takes a node nobody else uses, whole: every usable GPU, all its CPU
  // and memory (what its quota is charged), so nothing else is placed there while it runs.
  bool exclusive = false;
  static constexpr uint32_t kAnyValue = 0xffffffffu;
  static constexpr uint32_t kUnknown = 0xfffffffeu;  // a name no node has: never matches
};

struct PendingJob {
  JobId id;
  QueueId queue;
  int32_t priority = 0;
  bool preemptible = true;
  bool distinct_nodes = false;
  JobType type = JobType::kTraining;
  int32_t tasks = 1;
  TaskResources resources;         // per task
  std::vector<GpuModelId> models;  // allowed, in order of preference; empty: any
  uint32_t constraints = 0;        // index into CycleInput::constraints
  DurationMs walltime = 0;         // 0: none
  TimeMs submit_time = 0;
  bool suspended = false;  // held by its owner: never started, verdict Suspended
  TimeMs not_before = 0;   // retry backoff: not started before this time
  // SIGTERM to SIGKILL when it is preempted: a queue that lends within a reclaim deadline lends
  // only to jobs within it (QuotaState::SetLendGraceLimit).
  DurationMs grace_period = SecondsToMs(30);
  // The job's priority class may preempt lower-priority preemptible work in any queue.
  bool preempts_anywhere = false;
  // Spread group (0: none), interned by the driver: jobs of one group (a service's replicas)
  // prefer nodes, then racks, where fewer of the group run (a soft preference, ahead of the
  // profile's scores). `spread_distinct`: never a node where one of the group runs (a fixed
  // port: two replicas cannot listen on it on one node).
  uint32_t spread = 0;
  bool spread_distinct = false;
  // Its container image, as Cluster::FindImage names it (kNoImage: none, or on no node).
  uint32_t image = kNoImage;
};

// One GPU's share of a task: which GPU (slot on the node, not the CUDA index), how much of it.
struct GpuShare {
  uint16_t slot = 0;
  int16_t milli = 0;
  int64_t memory_mib = 0;
  bool operator==(const GpuShare&) const = default;
};

struct TaskPlacement {
  NodeId node;
  std::vector<GpuShare> gpus;
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  bool operator==(const TaskPlacement&) const = default;
};

struct RunningJob {
  JobId id;
  QueueId queue;
  int32_t priority = 0;
  bool preemptible = true;
  GpuModelId model = kNoModel;
  TaskResources resources;  // per task, as admitted
  std::vector<TaskPlacement> tasks;
  bool exclusive = false;  // took its nodes whole: its quota is what `tasks` hold (PlacedQuota)
  TimeMs start_time = 0;
  DurationMs walltime = 0;  // 0: the queue's default walltime, else none
  // The driver's estimate of when a job with neither walltime nor queue default ends (from its
  // queue's or user's history); 0: none. Used only to place backfill reservations (which nodes
  // free first); the job is never stopped by it.
  TimeMs expected_end = 0;
  // Preemption guards and costs.
  TimeMs last_checkpoint = 0;                 // 0: never reported; lost work counts from start_time
  DurationMs min_runtime = SecondsToMs(300);  // not preempted before running this long
  DurationMs grace_period = SecondsToMs(30);  // SIGTERM to SIGKILL when preempted
  bool terminating = false;                   // already being preempted or stopped
  // Queues whose jobs this job preempted to start (the loop guard, see preemption.h).
  std::vector<QueueId> preempted_queues;
  uint32_t spread = 0;  // its spread group (PendingJob::spread), 0: none
};

// A preemptor waiting for its victims to release their capacity; the driver keeps these between
// cycles and the cycle holds the capacity for the preemptor until the victims are gone.
struct Nomination {
  JobId preemptor;
  std::vector<JobId> victims;
  // Where the preemption planned it (PreemptionDecision::tasks) and on which model; empty: not
  // known (it is placed wherever it fits).
  std::vector<TaskPlacement> tasks;
  GpuModelId model = kNoModel;
};

enum class BudgetPolicy { kBlock, kBestEffort };

// A tenant's budget as the driver has metered it (see core/budget/budget.h).
struct TenantBudget {
  bool exhausted = false;
  BudgetPolicy on_exhausted = BudgetPolicy::kBlock;
};

}  // namespace arbiter::core

// What-if on recorded history (docs/simulator.md, "What-if on recorded history"): the jobs a
// cluster ran over a period, replayed through the production scheduling cycle in virtual time
// (sim/replay.h: CompileReplay, RunReplay) on the cluster as configured ("baseline") and with
// changes applied (each a "variant"), side by side with what really happened ("recorded").
//
// The workload, from each recorded job:
//   arrival   its submit time (a job submitted before the period that held GPUs at its start
//             arrives at the start and runs what was left of its run; one still pending then
//             arrives at the start too; neither counts in any figure);
//   run time  the end of its last run minus that run's admission (a job still running at the
//             end of the period runs at least until then; one never started runs for its
//             walltime, or until the end of the period when it has none);
//   shape     its tasks, resources per task, allowed GPU models, queue, priority class (a class
//             no longer configured, or none, replays as the server treats it: priority 0) and
//             walltime. Node selectors, tolerations, exclusivity and dependencies are not
//             replayed.
// The replay stops at the end of the period: a job still pending then counts with the wait it
// had so far (on both sides), so a queue that never starts its jobs cannot look fast.
//
// Waits are total time pending before admission, summed over a job's runs (preempted jobs wait
// again); the recorded side takes them from the store's facts of each admission.
//
// Thread safety: pure functions of their arguments (no I/O, no clock, no threads).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "model/gpu_model.h"
#include "model/job.h"
#include "model/node.h"
#include "model/priority.h"
#include "model/queue.h"
#include "model/resources.h"
#include "sim/replay.h"

namespace arbiter::plan {

// One job as the store recorded it. Times are server milliseconds; -1: did not happen.
struct RecordedJob {
  uint64_t id = 0;
  std::string name;
  std::string tenant;
  std::string queue;
  std::string priority_class;
  JobType type = JobType::kTraining;
  int32_t tasks = 1;
  TaskResources resources;              // per task
  std::vector<std::string> gpu_models;  // allowed models, in order of preference; empty: any
  int64_t walltime_seconds = 0;         // 0: none
  int64_t submit_ms = 0;
  int64_t admitted_ms = -1;  // the admission of its last run
  int64_t ended_ms = -1;     // the end of its last run (-1: still running, or never started)
  // Total time pending before its admissions, summed over its runs (-1: not known; then taken as
  // admitted_ms - submit_ms, or the time to the end of the period for a job never admitted).
  int64_t recorded_wait_ms = -1;
  int32_t preemptions = 0;
};

// A tenant's budget (docs/governance.md): GPU-hours per period of period_hours.
struct TenantBudget {
  std::string tenant;
  double gpu_hours = 0;
  double period_hours = 0;
};

// Everything a what-if needs: the period, the cluster and its configuration, the recorded jobs.
struct History {
  int64_t since_ms = 0;
  int64_t until_ms = 0;  // > since_ms
  std::vector<GpuModel> models;
  std::vector<Node> nodes;
  std::vector<QueueSpec> queues;  // tenants and queues, as the configuration has them
  std::vector<PriorityClass> classes;
  std::vector<TenantBudget> budgets;
  std::string policy = "default";  // the placement profile the cluster runs
  int64_t cycle_interval_ms = 1000;
  // How long a preempted job took to stop beyond its grace period: from the decision to its
  // release, less its class's grace period; the median over the period's preemptions (0 when
  // there were none). The replay adds it to every preemption (sim::ReplayOptions::stop_latency),
  // since the preemptor waits for it.
  int64_t stop_latency_ms = 0;
  int64_t stop_latency_samples = 0;  // the preemptions it was measured on (0: given, or none)
  std::vector<RecordedJob> jobs;
};

// One change to the cluster or its configuration.
struct Change {
  enum class Kind { kAddNodes, kRemoveNode, kQuota, kPolicy };
  Kind kind = Kind::kAddNodes;
  std::string text;  // as given: "4xH100-80G", "gpu-07", "vision.guaranteed.gpu=32", "bestfit"
  // kAddNodes: `count` nodes of `model`, each with `gpus_per_node` GPUs (0: the shape of an
  // existing node of that model).
  int32_t count = 0;
  std::string model;
  int32_t gpus_per_node = 0;
  // kRemoveNode: the node; kQuota: the queue; kPolicy: the profile.
  std::string name;
  std::string limit;     // kQuota: guaranteed, max or lending_limit
  std::string resource;  // kQuota: gpu, gpu:<model>, cpu or memory
  int64_t value = 0;     // kQuota: in the configuration's units (milli-GPU, milli-CPU, MiB)
};

// Parsers of the command line's and the API's forms; errors name `field`.
//   "4xH100-80G" or "4xH100-80G:8" (8 GPUs per node) -> kAddNodes
//   "QUEUE.LIMIT.RESOURCE=VALUE", VALUE in GPUs (gpu, gpu:<model>; decimals allowed), cores
//   (cpu) or MiB (memory) -> kQuota
Result<Change> ParseAddNodes(std::string_view text, std::string_view field);
Result<Change> ParseQuota(std::string_view text, std::string_view field);
Change RemoveNode(std::string name);
Change UsePolicy(std::string name);

// A variant: changes applied together. Its label names them ("add 4xH100-80G").
struct Variant {
  std::string label;
  std::vector<Change> changes;
};

// The variants a list of changes stands for: each change alone and, when there are several, all
// of them together ("all changes").
std::vector<Variant> VariantsOf(const std::vector<Change>& changes);

// Wait percentiles by nearest rank, seconds.
struct Waits {
  int64_t count = 0;  // jobs that arrived in the period
  double p50 = 0, p90 = 0, p99 = 0, max = 0;
};

struct GroupFigures {
  std::string name;
  std::string tenant;  // queues only
  Waits wait;
  int64_t started = 0;         // jobs that started in the period
  int64_t waiting_at_end = 0;  // jobs still pending at the end of the period
  int64_t preemptions = 0;
  double gpu_hours = 0;  // allocated to the group's jobs in the period
};

struct BudgetUse {
  std::string tenant;
  double gpu_hours = 0;         // used in the period
  double budget_gpu_hours = 0;  // the budget, pro rata over the period
  double used_pct = 0;
};

// One side: what happened, the baseline replay, or a variant.
// One counted job's figures in an outcome.
struct JobOutcome {
  uint64_t id = 0;
  double wait_seconds = 0;
  bool started = false;
  int32_t preemptions = 0;
};

struct Outcome {
  std::string label;  // "recorded", "baseline", or the variant's label
  std::string note;   // why a variant could not be replayed ("" when it was)
  int64_t nodes = 0;
  int64_t gpus = 0;
  Waits wait;
  std::vector<GroupFigures> queues;  // in the order of History::queues (leaves with jobs)
  std::vector<GroupFigures> types;   // job types that occur, in JobType order
  double gpu_alloc_pct = 0;          // allocated GPU-hours / (GPUs x hours of the period)
  double gpu_hours_allocated = 0;
  double idle_gpu_hours_while_waiting = 0;
  int64_t preemptions = 0;
  std::vector<BudgetUse> budgets;  // tenants with a budget
  int64_t cycles = 0;              // replays only
  std::vector<JobOutcome> jobs;    // every counted job, in order of arrival
};

struct PlanReport {
  int64_t since_ms = 0, until_ms = 0;
  int64_t jobs = 0;        // jobs that arrived in the period
  int64_t carried_in = 0;  // jobs running or pending at its start (replayed, not counted)
  int64_t skipped = 0;     // jobs not replayed (their queue is gone)
  std::vector<std::string> skipped_reasons;  // "N x reason"
  std::string policy;
  int64_t stop_latency_ms = 0;  // History::stop_latency_ms, as replayed
  int64_t stop_latency_samples = 0;
  Outcome recorded;
  Outcome baseline;
  std::vector<Outcome> variants;
  // The simulator's reports of the baseline and of each variant that replayed (for PlanHtml).
  std::vector<sim::ReplayReport> replays;
};

// The most jobs one what-if replays (a longer period is refused, naming `since`).
inline constexpr size_t kMaxReplayJobs = 200000;

// Replays the history unchanged and under each variant. Errors (InvalidArgument) name the field:
// "until" for an empty period, "since" for too many jobs, the change's field ("add_nodes",
// "remove_node", "quota", "policy") for a change that does not apply (an unknown node, queue or
// model), "cluster" when the cluster cannot be built.
Result<PlanReport> ReplayHistory(const History& h, const std::vector<Variant>& variants);

// `plan capacity`: the fewest nodes of `model` to add so that every queue's replayed p90 wait is
// within `target_wait_p90_ms`.
struct CapacityQuery {
  std::string model;
  int32_t gpus_per_node = 0;  // 0: the shape of an existing node of that model
  int64_t target_wait_p90_ms = 0;
  int32_t max_nodes = 64;
};

struct CapacityProbe {
  int32_t nodes = 0;
  double worst_p90_seconds = 0;
  std::string worst_queue;
  bool meets = false;
};

struct CapacityAnswer {
  bool found = false;  // false: even max_nodes is not enough
  int32_t nodes = 0;   // the fewest that meet the target (when found)
  int32_t gpus_per_node = 0;
  std::string model;
  double price_per_gpu_hour = 0;  // 0: no price configured
  double cost_per_hour = 0;       // nodes x GPUs x price
  double cost_per_30_days = 0;
  std::vector<CapacityProbe> probes;  // in the order tried
  Outcome baseline;                   // the replay without nodes added
  std::optional<Outcome> with_nodes;  // the replay with the answer's nodes
};

// Searches with the replay: 0 nodes, then 1, 2, 4, ... up to max_nodes until the target is met,
// then a binary search between the last count that missed and the first that met it. Errors name
// "model", "target_wait_p90" or "max_nodes".
Result<CapacityAnswer> FindCapacity(const History& h, const CapacityQuery& q);

// The reports as JSON (docs/simulator.md shows them). Per queue and per job type: `recorded`,
// `replayed` (the baseline) and `variants` (one per variant, with its `label`), each with
// wait_p50_s, wait_p90_s, wait_p99_s, wait_max_s, jobs, started, waiting_at_end, preemptions
// (and gpu_hours for queues); `runs` has each side's totals.
// with_jobs: also "per_job", each counted job's wait and preemptions recorded and in each replay
// (which jobs the replay decided differently).
nlohmann::json PlanReportJson(const PlanReport& r, bool with_jobs = false);
// A self-contained HTML page: the simulator's replay report (sim/replay_html.h) of the baseline
// and the variants, side by side; `command` is shown under the title.
std::string PlanHtml(const PlanReport& r, const std::string& command);
nlohmann::json CapacityAnswerJson(const CapacityAnswer& a, const CapacityQuery& q);

}  // namespace arbiter::plan

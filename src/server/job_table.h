// JobTable: the jobs the server holds in memory (every live one and a window of recently finished
// ones; older ones are read from the store: control_plane_history.cc), and the indexes that keep a
// cycle's cost to live work.
//
// Owns: the job entries (erased only by the scheduler thread between cycles, finished ones leaving
// memory: a scheduling cycle keeps pointers to its pending entries across the time it runs the
// core without the lock), the live-job and
// placed-job indexes, the job arrays' elements, the idempotency index and the next job id. Lock:
// none of its own; the control plane's mutex guards it (ControlPlane::mu_), because a cycle copies
// jobs, nodes and quotas as one consistent snapshot and a node's report changes a job and its
// node's capacity in one step. It calls nothing.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/cycle/cycle.h"
#include "model/job.h"
#include "model/job_array.h"
#include "server/lifecycle.h"

namespace arbiter::server {

struct PlacedTask {
  std::string node;
  std::vector<int32_t> gpu_indices;  // CUDA indices on the node
  std::vector<int32_t> gpu_milli;    // per GPU
  std::vector<int64_t> gpu_memory_mib;
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
};

struct JobEntry {
  JobSpec spec;  // id, tenant, user and submit_time filled in
  // The spec as stored and returned (api::JobSpecToJson, without id, tenant, user and submission
  // time): a spec never changes once submitted, so it is serialised once, outside the lock.
  std::shared_ptr<const std::string> spec_json;
  JobState state = JobState::kPending;
  std::string idempotency_key;
  // SHA-256 of the submission (RequestDigest): a repeated Idempotency-Key must come with the same
  // one ('' for jobs recorded before schema 5, which any body replays).
  std::string request_digest;
  std::string reason;         // of the last transition
  std::string approval_rule;  // the approval rule it waits for (awaiting_approval) or waited for
  TimeMs updated_at = 0;
  TimeMs started_at = 0;
  TimeMs finished_at = 0;
  std::optional<int32_t> exit_code;
  int32_t restarts = 0;
  int32_t preemptions = 0;
  // When its node last saw it write a checkpoint (server time; in memory): a preemption loses
  // the work since (the core orders victims by it).
  TimeMs last_checkpoint_ms = 0;
  TimeMs not_before = 0;  // retry backoff
  std::string gpu_model;
  std::vector<PlacedTask> placement;
  std::vector<std::string> preempted_queues;
  std::optional<core::Verdict> verdict;  // from the last cycle, while pending
  // Execution: processes may still run after a cancel, suspend, failure or preemption; until the
  // node reports them gone the job keeps its placement (nothing else is put on those GPUs).
  bool stopping = false;
  std::string stop_cause;           // "cancel", "suspend", "preempt", "timeout", "failed"
  std::vector<int32_t> task_state;  // per task: 0 not started, 1 running, 2 exited
  std::vector<int32_t> task_exit;   // per task exit code
  uint64_t attempt = 0;             // the run: grows at every admission
  TimeMs held_since = 0;            // when the current run was admitted (metering)
  // The reports' job facts (reports::FactsOfEvent): when it entered pending and has not left,
  // when its current run last reached running. Stored with the job.
  std::optional<TimeMs> pending_since;
  std::optional<TimeMs> running_since;
  std::vector<std::string> task_nodes;  // per task, the node of the latest run (for its logs)
  // The container image's digest its latest run started with ("": none, or not known).
  std::string image_digest;
  // Why the current run failed, when its node said better than an exit code ("ImagePullFailed:
  // ..."): the reason of its failure (in memory; cleared when the run ends).
  std::string fail_reason;
  bool dispatchable = true;  // false from an admission until it is committed: not yet assigned
  // A stop (cancel, suspend, preemption, failure of the gang, timeout, loss) not committed yet:
  // its nodes keep running the tasks until it is (PublishStops), so that a crash before the
  // commit never leaves a job the store has as running with its processes killed.
  bool stop_unpublished = false;
  // The spec's queue and priority class in the compiled configuration of that generation
  // (scheduling cycles resolve them once per configuration, not once per cycle).
  uint64_t resolved_generation = 0;
  bool queue_found = false;
  QueueId queue_id;
  const PriorityClass* priority_class = nullptr;
  bool holds_capacity() const { return HoldsResources(state) || stopping; }
  // What it charges its queue while it holds capacity on GPUs of `model`: its request, or, for a
  // job that took its nodes whole (exclusive), what its placement holds (core::Cluster's
  // RunningQuota, from the stored placement).
  core::QuotaVec HeldQuota(GpuModelId model) const {
    if (!spec.exclusive) return core::JobQuotaRequest(spec.resources, spec.tasks, model);
    core::QuotaVec q;
    for (const PlacedTask& t : placement) {
      q[core::kDimCpu] += t.cpu_milli;
      q[core::kDimMemory] += t.memory_mib;
      q[core::kDimTasks] += 1;
      for (int32_t milli : t.gpu_milli) {
        q[core::kDimGpu] += milli;
        if (model != core::kNoModel) q[core::ModelDim(model)] += milli;
      }
    }
    return q;
  }
};

// A job array's elements: their job ids, ascending (which is the order of their indices), and what
// their environment says of the whole array.
struct JobArrayEntry {
  std::vector<uint64_t> elements;
  ArrayBounds bounds;
};

// The jobs, by id, and their indexes.
struct JobTable {
  std::map<uint64_t, JobEntry> all;
  // The jobs that may be pending or hold capacity, by id: a superset (every submission and
  // transition adds its job; cycles drop the finished ones), so that a cycle's cost follows the
  // live jobs and not the whole history.
  std::map<uint64_t, JobEntry*> active;
  // The jobs that may hold capacity on their nodes (placed, running or stopping), by id: a
  // superset again (TouchNodesLocked adds, AssignmentsFor drops the released), so that a node
  // asking for its work every few milliseconds does not walk a deep backlog.
  std::map<uint64_t, const JobEntry*> placed;
  // Job arrays by id (their first element's), built from the elements' specs (JobSpec::array)
  // when submitted and at load.
  std::map<uint64_t, JobArrayEntry> arrays;
  // tenant/user/idempotency key -> job id, of the jobs in memory (the store has the others').
  std::unordered_map<std::string, uint64_t> by_key;
  uint64_t next_id = 1;

  JobEntry* Find(uint64_t id) {
    auto it = all.find(id);
    return it == all.end() ? nullptr : &it->second;
  }
  const JobEntry* Find(uint64_t id) const {
    auto it = all.find(id);
    return it == all.end() ? nullptr : &it->second;
  }
};

// The core's view of a pending job (control_plane_scheduling.cc); its node constraints, if any,
// are appended to `constraints_out` and indexed by PendingJob::constraints.
core::PendingJob PendingJobOf(const JobEntry& j, QueueId q, const core::Cluster& cluster,
                              std::vector<core::Constraints>* constraints_out);

}  // namespace arbiter::server

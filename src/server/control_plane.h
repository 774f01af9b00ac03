// ControlPlane: the server's live state and every operation on it.
//
// Ownership and threads: all live state (configuration, nodes, jobs, tokens) lives in memory here,
// guarded by one mutex (mu_). HTTP handler threads call the public operations; the scheduler
// thread calls RunSchedulingCycle(). A mutation is applied to memory and its WriteBatch enqueued
// on the store while mu_ is held (so the store's commit order is the order of changes), and the
// caller waits for durability after releasing mu_: a 201 or 200 is sent only once the change is
// committed. A scheduling cycle copies its inputs under mu_, runs the pure core without it, and
// applies the decisions under mu_ again, skipping jobs that changed meanwhile.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "api/config_codec.h"
#include "common/result.h"
#include "core/cluster.h"
#include "core/cycle/cycle.h"
#include "core/quota/quota_tree.h"
#include "model/job.h"
#include "server/auth.h"
#include "server/lifecycle.h"
#include "store/store.h"

namespace arbiter::server {

// Milliseconds since the epoch; injected so tests can drive time.
using NowFn = std::function<TimeMs()>;

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
  JobState state = JobState::kPending;
  std::string idempotency_key;
  std::string reason;  // of the last transition
  TimeMs updated_at = 0;
  TimeMs started_at = 0;
  TimeMs finished_at = 0;
  std::optional<int32_t> exit_code;
  int32_t restarts = 0;
  int32_t preemptions = 0;
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
  bool holds_capacity() const { return HoldsResources(state) || stopping; }
};

// What a node should do with one task.
struct TaskAssignment {
  uint64_t job = 0;
  int32_t task = 0;
  bool run = true;  // false: stop it (SIGTERM, grace, SIGKILL)
  DurationMs grace_ms = 30000;
  TimeMs deadline = 0;  // walltime end (0: none)
  JobSpec spec;
  std::vector<int32_t> gpus;  // CUDA indices
  int32_t restarts = 0;
  std::string master_node;  // node of task 0
  bool started = false;     // the control plane already saw this task start
};

struct NodeEntry {
  Node node;
  bool from_config = false;
  TimeMs last_heartbeat = 0;
};

struct JobFilter {
  std::string tenant, queue, state, user, type;
  uint64_t after_id = 0;  // cursor
  size_t limit = 100;
};

struct ServerEvent {
  uint64_t seq = 0;
  std::string kind;  // "job" or "node"
  nlohmann::json data;
};

class ControlPlane {
 public:
  ControlPlane(store::Store* store, NowFn now);

  // Loads everything from the store and compiles the cluster. Call once, before serving.
  Status Load();
  // Creates the first admin token when none exists; returns it (plain) or "" when one exists.
  Result<std::string> BootstrapAdmin();

  // Authenticates a bearer token.
  Result<Principal> Authenticate(std::string_view bearer);

  // Configuration (admin): the diff; applied unless dry_run.
  Result<std::vector<api::ConfigChange>> ApplyConfig(const Principal& p,
                                                     const api::ClusterConfig& c, bool dry_run);
  std::string ConfigYaml() const;
  // The first configured GPU model's name, or "".
  std::string FirstGpuModel() const;

  // Jobs.
  Result<nlohmann::json> SubmitJob(const Principal& p, JobSpec spec, const std::string& idem_key,
                                   bool* created);
  Result<nlohmann::json> GetJob(const Principal& p, uint64_t id);
  Result<nlohmann::json> ListJobs(const Principal& p, const JobFilter& f);
  Result<nlohmann::json> JobAction(const Principal& p, uint64_t id, std::string_view action);
  Result<nlohmann::json> JobEvents(const Principal& p, uint64_t id);
  Result<nlohmann::json> WhyPending(const Principal& p, uint64_t id);

  // Tenants, queues, users, tokens, priority classes, nodes.
  Result<nlohmann::json> ListTenants(const Principal& p);
  Result<nlohmann::json> ListQueues(const Principal& p);
  Result<nlohmann::json> GetQueue(const Principal& p, const std::string& name);
  Result<nlohmann::json> ListUsers(const Principal& p);
  Result<nlohmann::json> CreateUser(const Principal& p, const api::UserConfig& u);
  Result<nlohmann::json> CreateToken(const Principal& p, const std::string& user,
                                     std::optional<Role> role);
  Result<nlohmann::json> ListPriorityClasses(const Principal& p);
  Result<nlohmann::json> ListNodes(const Principal& p);
  Result<nlohmann::json> GetNode(const Principal& p, const std::string& name);
  Result<nlohmann::json> NodeAction(const Principal& p, const std::string& name,
                                    std::string_view action);

  // Execution (the built-in node and, later, remote agents).
  // Registers (or refreshes) a node reported by an agent; fails on invalid specs.
  Status RegisterNode(const Node& node);
  // The tasks placed on `node` that should run or stop now.
  std::vector<TaskAssignment> AssignmentsFor(const std::string& node);
  // A task's process started.
  void ReportTaskStarted(uint64_t job, int32_t task);
  // A task's process ended with `exit_code` (128 + signal when killed); `timed_out` when the node
  // stopped it at its walltime.
  void ReportTaskExited(uint64_t job, int32_t task, int32_t exit_code, bool timed_out);
  // A task's process is gone without an exit status (its node restarted, or went down): the job
  // is lost, and retried by its policy.
  void ReportTaskLost(uint64_t job, int32_t task);

  // Records a mutating call in the audit log (also for denied ones).
  void Audit(const Principal& p, std::string action, std::string target, std::string result);
  // The audit log (admins): at most `limit` records with seq > `after`, oldest first, and
  // next_after (the last seq, or null when there are no more). Every call answered before this one
  // is in it: audit records are written without waiting, so this waits for them first.
  Result<nlohmann::json> ListAudit(const Principal& p, uint64_t after, size_t limit);

  // One scheduling cycle: inputs copied under the lock, the core run without it, decisions applied
  // and persisted. Returns the number of admissions.
  Result<size_t> RunSchedulingCycle();

  // Events after `seq`, waiting up to `wait_ms` when there are none (for the SSE stream).
  std::vector<ServerEvent> EventsAfter(uint64_t seq, int64_t wait_ms);
  uint64_t last_event_seq() const;
  // Wakes anything waiting in EventsAfter (at shutdown).
  void WakeAll();

  // Whether the store is open and the state loaded.
  bool ready() const;

  struct Stats {
    uint64_t cycles = 0;
    uint64_t admissions = 0;
    double last_cycle_seconds = 0;
  };
  Stats stats() const;

 private:
  struct Compiled;
  // Each of these requires mu_.
  Status CompileLocked();
  // `previous`: the configuration being replaced, to delete what is gone (may be null).
  Status PersistConfigLocked(store::WriteBatch* b, const api::ClusterConfig* previous) const;
  void RecordTransitionLocked(JobEntry& j, JobState to, std::string reason, store::WriteBatch* b);
  store::JobRecord JobRecordLocked(const JobEntry& j) const;
  nlohmann::json JobJsonLocked(const JobEntry& j) const;
  nlohmann::json QueueJsonLocked(size_t tree_index) const;
  void PushEventLocked(std::string kind, nlohmann::json data);
  bool CanReadTenantLocked(const Principal& p, const std::string& tenant) const;
  const api::UserConfig* FindUserLocked(const std::string& name) const;
  Status CanActOnJobLocked(const Principal& p, const JobEntry& j) const;
  void FinishExecutionLocked(JobEntry& j, store::WriteBatch* b);
  // The budget state of every tenant, indexed by its QueueId in the compiled tree.
  std::vector<core::TenantBudget> BudgetsLocked(TimeMs now);
  void ApplyCycleLocked(const core::CycleInput& in, const core::CycleResult& r,
                        const std::vector<uint64_t>& pending_ids, store::WriteBatch* b);

  store::Store* store_;
  NowFn now_;
  mutable std::mutex mu_;
  std::condition_variable events_cv_;
  bool loaded_ = false;

  api::ClusterConfig config_;
  std::map<std::string, NodeEntry> nodes_;
  std::map<uint64_t, JobEntry> jobs_;
  std::unordered_map<std::string, uint64_t> idempotency_;  // tenant/user/key -> job id
  std::map<std::string, store::TokenRecord> tokens_;       // by id
  std::vector<core::Nomination> nominations_;
  uint64_t next_job_id_ = 1;
  // Budgets: GPU time (milli-GPU x ms) of closed usage records per tenant since the start of the
  // tenant's current period, and that period's start.
  std::map<std::string, std::pair<TimeMs, int64_t>> closed_usage_;

  std::shared_ptr<Compiled> compiled_;  // shared: a cycle keeps the one it started with
  bool dirty_ = true;

  std::deque<ServerEvent> events_;
  uint64_t event_seq_ = 0;
  Stats stats_;
};

}  // namespace arbiter::server

// A job as the model describes it: what it asks for and the rules it runs under.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/ids.h"
#include "common/status.h"
#include "model/mounts.h"
#include "model/resources.h"
#include "model/time.h"

namespace arbiter {

enum class JobType { kTraining, kFineTuning, kEvaluation, kBatchInference, kService, kExperiment };

std::string_view JobTypeName(JobType t);  // "training", "fine-tuning", ...
bool ParseJobType(std::string_view s, JobType* out);

struct Toleration {
  std::string key;
  std::string value;  // empty: tolerates any value of the key
  bool operator==(const Toleration&) const = default;
};

// A condition on other jobs before a job may start (Slurm's --dependency). A dependency that can
// no longer be met (the job it waits for ended the other way) ends the waiting job.
enum class DependencyType {
  kAfter,       // the job has started (or ended)
  kAfterOk,     // the job succeeded
  kAfterAny,    // the job ended, however
  kAfterNotOk,  // the job ended and did not succeed (failed, cancelled, timed out)
  kSingleton,   // every earlier job of the same user and name has ended (no `job`)
};
std::string_view DependencyTypeName(DependencyType t);  // "afterok", ...
bool ParseDependencyType(std::string_view s, DependencyType* out);

struct Dependency {
  DependencyType type = DependencyType::kAfterOk;
  uint64_t job = 0;  // 0 for kSingleton
  bool operator==(const Dependency&) const = default;
};

// Who hears about a job and when (Slurm's --mail-user and --mail-type): kept with the job and
// delivered by the server's notifications where they are configured.
struct MailSpec {
  std::string user;                // an address or a user name
  std::vector<std::string> types;  // Slurm's names: BEGIN, END, FAIL, REQUEUE, ALL, ...
  bool operator==(const MailSpec&) const = default;
};
// Slurm's --mail-type names.
bool IsMailType(std::string_view type);
// A job array's element (Slurm's job arrays: one submission, one job per index; docs/cli.md, "Job
// arrays"). The server sets it when it expands a submission's array; `id` 0: no element.
struct JobArrayElement {
  uint64_t id = 0;          // the array's id: its first element's job id (SLURM_ARRAY_JOB_ID)
  int64_t index = 0;        // this element's index (SLURM_ARRAY_TASK_ID)
  int32_t size = 0;         // how many elements the array has
  int32_t max_running = 0;  // at most this many elements hold resources at once; 0: no limit
  bool operator==(const JobArrayElement&) const = default;
};

// The service a job is a replica of (model/service.h): set by the server when its service
// controller starts the replica, never by a submission. `port` is what the replica listens on
// (the task's PORT).
struct ServiceLink {
  std::string name;
  int64_t revision = 0;
  int32_t port = 0;
  bool operator==(const ServiceLink&) const = default;
};

// When and how often a failed job runs again.
struct RetryPolicy {
  int32_t max_retries = 0;
  int64_t backoff_seconds = 30;        // first backoff; doubles each retry
  int64_t backoff_cap_seconds = 3600;  // the longest backoff
  std::vector<int32_t> on_exit_codes;  // retry only on these exit codes; empty: any failure
  bool operator==(const RetryPolicy&) const = default;
};

// Backoff before retry number `retry` (1-based): min(cap, base x 2^(retry-1)).
int64_t RetryBackoffSeconds(const RetryPolicy& p, int32_t retry);
// Whether a task that ended with `exit_code` may be retried after `restarts` earlier retries.
bool ShouldRetry(const RetryPolicy& p, int32_t restarts, int32_t exit_code);

struct JobSpec {
  JobId id;
  std::string name;
  std::string tenant;
  std::string queue;
  std::string user;
  JobType type = JobType::kTraining;
  std::string priority_class;
  int32_t tasks = 1;                    // tasks that start together (a gang when > 1)
  TaskResources resources;              // per task
  std::vector<std::string> gpu_models;  // allowed models, in order of preference; empty: any
  std::map<std::string, std::string> node_selector;
  std::vector<Toleration> tolerations;
  bool distinct_nodes = false;  // every task on its own node
  // Slurm's --exclusive: each task takes a node no other job uses, whole (all its GPUs, CPU and
  // memory, which is what the job is charged), so nothing else runs there meanwhile.
  bool exclusive = false;
  std::vector<std::string> nodes;          // --nodelist: only these nodes (empty: any)
  std::vector<std::string> exclude_nodes;  // --exclude: never these nodes
  int64_t walltime_seconds = 0;            // 0: the queue's default, else none
  RetryPolicy retry;
  std::optional<bool> preemptible;              // overrides the priority class when set
  std::optional<int64_t> grace_period_seconds;  // overrides the priority class when set
  TimeMs submit_time = 0;
  // What runs: the command of every task, its environment and working directory.
  std::vector<std::string> command;
  std::map<std::string, std::string> env;
  // Variables the task gets like `env`, whose values the API never returns and nothing logs
  // (docs/security.md, "Who sees a job's environment"); names disjoint from `env`'s.
  std::map<std::string, std::string> secret_env;
  std::string workdir;
  std::string container_image;
  // Host paths bound into the container (model/mounts.h); only with a container_image.
  std::vector<Mount> mounts;
  std::vector<Dependency> depends_on;  // all must hold before the job starts
  std::optional<MailSpec> mail;
  JobArrayElement array;               // set by the server for a job array's elements
  std::optional<ServiceLink> service;  // set by the server for a service's replicas
};

// Checks every field; errors name the field ("resources.gpus", "tasks").
Status ValidateJobSpec(const JobSpec& job);

// The environment variables the executor sets for every task (node::LocalExecutor::Environment) and
// the ones a job may not set for itself (docs/security.md, "What a job may ask for"): these names,
// and every name that starts with kReservedEnvPrefix. PATH is not among them: a job may set its
// own.
inline constexpr std::string_view kReservedEnvNames[] = {"CUDA_VISIBLE_DEVICES",
                                                         "NVIDIA_VISIBLE_DEVICES",
                                                         "CUDA_DEVICE_ORDER",
                                                         "HOME",
                                                         "USER",
                                                         "LOGNAME",
                                                         "TMPDIR",
                                                         "WORLD_SIZE",
                                                         "RANK",
                                                         "NODE_RANK",
                                                         "LOCAL_RANK",
                                                         "MASTER_ADDR",
                                                         "MASTER_PORT",
                                                         "LD_PRELOAD",
                                                         "LD_AUDIT"};
inline constexpr std::string_view kReservedEnvPrefix = "ARBITER_";
// Except these, which older clients set for their arrays' jobs (ARBITER_ARRAY_INDEX); for a job
// array's elements the executor sets them from JobSpec::array (its values win).
inline constexpr std::string_view kSubmitterEnvPrefix = "ARBITER_ARRAY_";
// What the executor sets besides for a service's replicas (JobSpec::service): PORT, and
// ARBITER_SERVICE / ARBITER_SERVICE_REVISION (reserved by the prefix). A service's template may
// not set PORT (api/service_codec.h); a plain job may, for its own use.
inline constexpr std::string_view kServicePortEnvName = "PORT";
bool IsReservedEnvName(std::string_view name);

// What a new submission may not ask for beyond ValidateJobSpec (which stored jobs pass too):
// reserved variables in `env` or `secret_env` (field "env.NAME", "secret_env.NAME"), and a name
// in both.
Status CheckSubmittedEnv(const JobSpec& job);

}  // namespace arbiter

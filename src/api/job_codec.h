// The job submission body of the REST API (POST /api/v1/jobs): JSON to JobSpec and back.
//
//   {"name": "llama-ft", "queue": "vision-train", "type": "fine-tuning", "priority_class":
//   "normal",
//    "command": ["python", "train.py"], "env": {"HF_HOME": "/data/hf"}, "workdir": "/home/alice",
//    "tasks": 2, "distinct_nodes": true,
//    "resources": {"gpus": 4, "gpu_milli": 1000, "gpu_memory_mib": 0, "cpu_milli": 16000,
//                  "memory_mib": 65536},
//    "gpu_models": ["A100-80G"], "node_selector": {"rack": "r1"}, "walltime_seconds": 86400,
//    "retry": {"max_retries": 3, "backoff_seconds": 30, "backoff_cap_seconds": 3600,
//              "on_exit_codes": []},
//    "preemptible": true, "grace_period_seconds": 60,
//    "tolerations": [{"key": "dedicated", "value": "inference"}], "container_image": "..."}
//
// A job array: "array": {"indices": "0-99:2,200", "max_running": 8} (Slurm's --array=0-99:2,200%8),
// only in POST /api/v1/jobs: one job per index, at most max_running of them holding resources at
// once (0 or absent: no limit). Each element's job object then has "array": {"id", "index", "size",
// "max_running"} instead (the stored form, ParseStoredJob).
//
// Required: command. Defaults: type "training", tasks 1, resources.gpu_milli 1000, the
// rest as in JobSpec. A null member counts as absent. The tenant, the user, the id and the submit
// time are not part of the body (the server sets them from the token and its clock): they are
// refused like any unknown field.
//
// Every error is InvalidArgument; field() is the dotted path of the offending member
// ("resources.gpus", "env[\"1X\"]", "command[0]"), or empty for errors about the whole body
// (too large, not JSON). The message says what is allowed.
//
// Thread safety: pure functions.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "model/job.h"

namespace arbiter::api {

// Bounds on a submission body. The server should also refuse larger bodies before reading them.
inline constexpr size_t kMaxBodyBytes = size_t{1} << 20;  // 1 MiB
inline constexpr size_t kMaxNestingDepth = 64;            // open objects and arrays at once
inline constexpr size_t kMaxBodyValues = 65536;           // values of any kind in the body

// Bounds on the fields (beyond ValidateJobSpec's).
inline constexpr size_t kMaxCommandArgs = 4096;
inline constexpr size_t kMaxArgBytes = size_t{128} * 1024;
inline constexpr size_t kMaxEnvVars = 1024;
inline constexpr size_t kMaxEnvValueBytes = size_t{128} * 1024;
inline constexpr size_t kMaxJobGpuModels = 16;
inline constexpr size_t kMaxSelectorLabels = 64;
inline constexpr size_t kMaxTolerations = 64;
inline constexpr size_t kMaxDependencies = 100;
inline constexpr size_t kMaxJobNodes = 1024;  // nodes, exclude_nodes
inline constexpr size_t kMaxExitCodes = 256;
inline constexpr size_t kMaxPathBytes = 4096;   // workdir
inline constexpr size_t kMaxImageBytes = 1024;  // container_image
inline constexpr int64_t kMaxWalltimeSeconds = int64_t{366} * 86400;
inline constexpr int64_t kMaxBackoffCapSeconds = int64_t{30} * 86400;

// A submission's job array (above).
struct ArrayRequest {
  std::string indices;            // as given: "0-99:2,200"
  std::vector<int64_t> expanded;  // ascending, each once (ExpandArrayIndices)
  int32_t max_running = 0;        // 0: no limit
};

// Parses and validates a submission body (ValidateJobSpec included). tenant, user, id and
// submit_time are left empty. `array`: where a job array's request goes (nullopt when the body has
// none); without it, a body with "array" is refused (a batch's jobs, for one).
Result<JobSpec> ParseJobSubmission(std::string_view json,
                                   std::optional<ArrayRequest>* array = nullptr);
// A stored spec (JobSpecJsonText): as a submission, but "array" is an element's (JobArrayElement).
Result<JobSpec> ParseStoredJob(std::string_view json);
// {"indices": ..., "max_running": ...}: the "array" member of a submission.
nlohmann::json ArrayRequestToJson(const ArrayRequest& a);

// At most this many jobs in one batch submission.
inline constexpr size_t kMaxBatchJobs = 1000;

// Parses and validates a batch submission body, {"jobs": [JOB, ...]} with 1 to kMaxBatchJobs
// jobs, each as for ParseJobSubmission; errors name the job ("jobs[3].resources.gpus").
Result<std::vector<JobSpec>> ParseJobBatch(std::string_view json);

// The error `st` with its field put under `prefix` ("template" + "resources.gpus" ->
// "template.resources.gpus"); OK stays OK.
Status UnderField(const Status& st, const std::string& prefix);

// An error about job `index` of a batch: its field put under "jobs[index]" (OK stays OK).
Status ForBatchJob(const Status& st, size_t index);

// The body that parses back to `job` (tenant, user, id and submit_time are not part of it). Empty
// optional strings (name, priority_class, workdir, container_image) and unset optional fields
// are left out; everything else is written, `secret_env` included. Requires: `job` passes
// ValidateJobSpec.
nlohmann::json JobSpecToJson(const JobSpec& job);
// The stored spec and the API's view of it, as compact text with keys in sorted order: byte for
// byte what dumping JobSpecToJson(job) gives for a job without `secret_env`, written without
// building the tree. Never holds `secret_env` (SecretEnvJsonText keeps it apart). With
// `env_values` false, every `env` value is null: the names only (docs/security.md).
std::string JobSpecJsonText(const JobSpec& job, bool env_values = true);
// JobSpecJsonText of an array's element, from its array's spec text (`base`: JobSpecJsonText of
// the job, with another "array" or none) without writing it again: "array" is the first key in
// sorted order.
std::string ElementSpecText(std::string_view base, const JobArrayElement& element);

// `secret_env` as a JSON object ("" when empty), stored apart from the spec; ParseSecretEnv reads
// it back into `job->secret_env`.
std::string SecretEnvJsonText(const JobSpec& job);
Status ParseSecretEnv(std::string_view text, JobSpec* job);

}  // namespace arbiter::api

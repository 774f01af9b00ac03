// Slurm batch scripts as Arbiter jobs: `arbiter submit train.sh` reads the script's #SBATCH
// directives (and #ARBITER ones, for what Slurm lacks) and makes the job they describe, so Slurm
// users keep their scripts.
//
// Reading (ParseBatchScript): like sbatch, directives are read from the top of the script up to
// its first command; blank lines and other comments may come between them. A directive line holds
// one or more options, written as on the sbatch command line (`-N 2`, `-N2`, `--nodes=2`,
// `--nodes 2`), with shell quoting; a word starting with '#' starts a comment. A later directive
// overrides an earlier one. Directives Arbiter does not support are collected (with their line),
// never dropped silently; the caller names them in one warning.
//
// The job (JobFromBatchScript): the script runs once per node, as one Arbiter task per node:
//   N  = --nodes, else ceil(--ntasks / --ntasks-per-node) when both are given, else 1
//   tasks = N, distinct_nodes = N > 1
//   tasks per node T = --ntasks-per-node, else --ntasks / N (must divide), else 1
//   GPUs per task (node) = --gpus-per-node | --gres=gpu[:type]:G | --gpus / N (must divide)
//                        | --gpus-per-task x T           (given more than one: they must agree)
//   CPUs per node = --cpus-per-task x T | --cpus-per-gpu x GPUs
//   memory per node = --mem | --mem-per-gpu x GPUs | --mem-per-cpu x CPUs
//   gpu_models = the GPU type of --gres/--gpus*, else the models of --constraint (a|b: either)
//   node_selector = the key=value features of --constraint
//   walltime = --time (M, M:S, H:M:S, D-H, D-H:M, D-H:M:S; UNLIMITED: none), less the lead time of
//              --signal, which becomes the grace period (SIGTERM then SIGKILL)
//   queue = --partition, priority_class = --qos, name = --job-name else the script's file name,
//   workdir = --chdir else the submit directory, container_image = --container-image,
//   --requeue: retry.max_retries 3; --no-requeue: 0.
//
// The command is a POSIX-sh wrapper that writes the script to a private temporary file, runs it
// with its arguments (its #! line chooses the interpreter, as with sbatch), applies -o/-e (with
// Slurm's %j %x %u %N %n %t %A %a %s %% patterns), and removes the file. The wrapper sets the
// variables that depend on the run from Arbiter's own: SLURM_JOB_ID (ARBITER_JOB_ID), for a job
// array's elements SLURM_ARRAY_JOB_ID, SLURM_ARRAY_TASK_ID, _COUNT, _MIN, _MAX and _STEP (from
// ARBITER_ARRAY_JOB_ID, _INDEX, _COUNT, _MIN, _MAX, _STEP),
// SLURM_PROCID and SLURM_NODEID (ARBITER_TASK_INDEX: one task per node), SLURM_NNODES and
// SLURM_NTASKS (WORLD_SIZE unless the script gave -n or --ntasks-per-node), SLURM_LOCALID,
// SLURMD_NODENAME, SLURM_RESTART_COUNT, SLURM_GPUS_ON_NODE and SLURM_JOB_GPUS. The job's env holds
// the fixed ones (SLURM_SUBMIT_DIR, SLURM_JOB_NAME, SLURM_JOB_PARTITION, ...).
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "model/job.h"

namespace arbiter::cli {

struct GpuRequest {
  std::string type;  // "" : any model
  int32_t count = 0;
  bool operator==(const GpuRequest&) const = default;
};

// What the #SBATCH directives said; each field is set when a directive gave it.
struct SlurmDirectives {
  std::optional<std::string> job_name, partition, account, qos, output, error, chdir,
      container_image, constraint, array;
  std::optional<std::vector<Dependency>> dependency;
  std::optional<int32_t> nodes, ntasks, ntasks_per_node, cpus_per_task, cpus_per_gpu;
  std::optional<GpuRequest> gres_gpu, gpus, gpus_per_node, gpus_per_task;
  std::optional<int64_t> mem_mib, mem_per_gpu_mib, mem_per_cpu_mib;
  std::optional<int64_t> time_seconds;  // 0: UNLIMITED
  std::optional<bool> requeue;
  std::optional<std::string> signal_name;  // "TERM", "USR1", ...
  std::optional<int64_t> signal_seconds;   // lead time before the end
  std::optional<bool> exclusive;
  std::optional<std::vector<std::string>> nodelist, exclude;  // host lists, expanded
  std::optional<std::string> mail_user, mail_type;
  std::optional<std::string> export_env;  // --export: ALL, NONE, or VAR[=VALUE],... after ALL,
  std::optional<bool> open_append;        // --open-mode=append (true) or truncate
};

struct BatchScript {
  std::string interpreter;  // the #! line without "#!" ("" when there is none)
  SlurmDirectives slurm;
  std::vector<std::string> arbiter_args;  // the words of the #ARBITER lines, in order
  std::vector<std::string> unsupported;   // "--mail-type=END (line 4)"
  std::vector<std::string> notes;         // how directives were adapted, things ignored
};

// Reads the directives. Errors name the line and the directive ("line 3: --nodes=two: must be a
// whole number").
Result<BatchScript> ParseBatchScript(std::string_view text);

// Applies sbatch's command-line options (`arbiter sbatch -p gpu -N 2 script.sh ARGS`) on top of
// the script's directives, as sbatch does: they override them. Reads options up to the first
// word that is not one (the script) and returns its index (words.size() when there is none).
Result<size_t> ApplySbatchOptions(const std::vector<std::string>& words, BatchScript* s);

// Slurm's host lists: "gpu-[01-04,07],cpu1" is gpu-01 .. gpu-04, gpu-07, cpu1 (zero padding
// kept; several bracket groups multiply). At most 1024 names.
Result<std::vector<std::string>> ExpandHostList(std::string_view list);

// A job array from Slurm's --array syntax: indices "0-9", "1,3,5", "0-20:5", "1-3,10" (at most
// kMaxArrayElements of them, each 0..kMaxArrayIndex: model/job_array.h), then optionally "%N": at
// most N elements hold resources at once. Errors name the field "array" and quote the spec.
struct ArraySpec {
  std::string indices;            // without the "%N"
  std::vector<int64_t> expanded;  // ascending, each once
  int32_t max_running = 0;        // N of "%N"; 0: no limit
};
Result<ArraySpec> ParseArraySpec(std::string_view spec);

// Whether `text` is a batch script rather than a job file: it starts with "#!" or has a #SBATCH
// or #ARBITER line.
bool LooksLikeBatchScript(std::string_view text);

// Slurm's time formats in seconds: M, M:S, H:M:S, D-H, D-H:M, D-H:M:S; "UNLIMITED"/"INFINITE": 0.
Result<int64_t> ParseSlurmTime(std::string_view s);

// Slurm's --dependency: "afterok:12:13,afterany:14,singleton" (every one must hold). Errors name
// the part: "?" (any of), "+MINUTES", aftercorr and afterburstbuffer are not supported.
Result<std::vector<Dependency>> ParseSlurmDependency(std::string_view s);
// Slurm memory sizes in MiB: a whole number with an optional unit K, M (default), G or T.
Result<int64_t> ParseSlurmMemory(std::string_view s);
// Durations for --walltime: Slurm's formats above, or a sum of parts with units d, h, m, s
// ("2h", "1h30m", "90s", "1d12h").
Result<int64_t> ParseDuration(std::string_view s);
// The words of a directive line, shell style: whitespace separates, '...' and "..." quote,
// backslash escapes; a word that starts with '#' starts a comment.
Result<std::vector<std::string>> SplitWords(std::string_view line);

struct ScriptContext {
  std::string text;               // the whole script
  std::string name;               // its file name, without folders
  std::vector<std::string> args;  // its arguments
  std::string submit_dir;         // absolute: the default working directory
  std::string submit_host;
  // The submitter's environment (--export: by default the job gets it, as with sbatch).
  std::map<std::string, std::string> environment;
};

// The job the script describes, as above (queue "" when no --partition). `notes` gets how
// directives were adapted. Errors name the directive.
Result<JobSpec> JobFromBatchScript(const BatchScript& script, const ScriptContext& ctx,
                                   std::vector<std::string>* notes);

// The wrapper command that runs `script_text` (see above). `output`/`error`: the -o/-e patterns
// ("" : the job's own logs); `tasks_share_files`: whether several tasks may write one file
// (then it is appended to rather than truncated); `append`: --open-mode=append, the files are
// always appended to.
std::vector<std::string> BatchCommand(const std::string& script_text, const std::string& name,
                                      const std::vector<std::string>& args,
                                      const std::string& output, const std::string& error,
                                      bool tasks_share_files, bool append = false);

// --export: ALL (sbatch's default: the submitter's `environment`), NONE, or VAR (its value in
// `environment`) and VAR=VALUE items, alone or after ALL ("ALL,HF_HOME=/data"), into job->env.
// Never exported: Arbiter's own variables (its token among them), those the node sets, the
// submitter's SLURM_*, names a shell cannot set, values over 128 KiB (left out with a note).
Status ExportEnvironment(std::string_view spec,
                         const std::map<std::string, std::string>& environment, JobSpec* job,
                         std::vector<std::string>* notes);

// Sets the fixed SLURM_* variables that follow the job's final fields (SLURM_JOB_NAME,
// SLURM_JOB_PARTITION, SLURM_CPUS_ON_NODE, SLURM_MEM_PER_NODE); call after the last change.
void SetSlurmJobEnv(JobSpec* job);

}  // namespace arbiter::cli

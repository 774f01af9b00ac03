// srun's arithmetic: which tasks of a job step run on which node, with which ranks and GPUs, as
// Slurm's srun does inside an allocation (exec/srun_main.cc runs them).
//
// The model (docs/cli.md, "srun inside a batch script"): a batch job of N nodes is N Arbiter tasks,
// one per node. Task 0 runs the batch script; the others wait for the script's job steps. Each
// `srun` in the script starts --ntasks-per-node processes on every node of the step (block
// distribution: node k runs ranks k*per_node ... k*per_node + per_node - 1, the last node fewer
// when --ntasks is not a multiple), each with SLURM_PROCID, SLURM_LOCALID, SLURM_NODEID, RANK,
// LOCAL_RANK, WORLD_SIZE and its share of the node's GPUs. Only the C++ runtime: this goes into
// the small arbiter-srun binary.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace arbiter::exec {

// What one srun command line asks for.
struct SrunRequest {
  int ntasks = 0;           // -n/--ntasks (0: per node x nodes)
  int ntasks_per_node = 0;  // --ntasks-per-node (0: from -n, else the allocation's, else 1)
  int nodes = 0;            // -N/--nodes (0: every node of the allocation)
  int gpus_per_task = 0;    // --gpus-per-task (0: see gpu_bind)
  std::string gpu_bind;     // --gpu-bind: none, closest, single:N, map_gpu:I,J,..., per_task:N
  bool label = false;       // -l/--label: prefix each output line with the task's rank
  std::string chdir;        // -D/--chdir: the tasks' working directory ("": srun's)
  std::vector<std::string> argv;
  std::vector<std::string> ignored;  // accepted flags with no effect here, for --verbose
  // srun's environment (the script's, with what it exported), sent to the step's other nodes.
  std::map<std::string, std::string> env;
};

// Parses srun's arguments (after the program name); the command starts at the first argument that
// is not an option. Returns "" or an error naming the flag.
std::string ParseSrunArgs(const std::vector<std::string>& args, SrunRequest* out);

// Gives a step that says neither --gpus-per-task nor --gpu-bind the job's --gpus-per-task, as
// Slurm's srun takes it from SLURM_GPUS_PER_TASK ("[type:]g"; "": the job gave none). Returns ""
// or an error that names the variable.
std::string ApplyJobGpusPerTask(const std::string& env_value, SrunRequest* r);

// Whether variable `name` belongs to the node a task runs on (its GPUs, ranks, folders, user and
// Arbiter's own variables), so that a step's other nodes keep their own value.
bool IsNodeEnv(const std::string& name);

// The environment of a step's tasks on a node other than srun's: srun's own (`caller`), as
// Slurm's srun sends it to every task (--export=ALL), except what belongs to the node, which is
// `node`'s (the worker's own environment).
std::map<std::string, std::string> StepEnv(const std::map<std::string, std::string>& caller,
                                           const std::map<std::string, std::string>& node);

// The step as it runs: how many tasks, on how many nodes, how many on each.
struct StepLayout {
  int nodes = 1;
  int per_node = 1;
  int ntasks = 1;
  // The ranks node `node` runs (empty when the step does not use it).
  std::vector<int> RanksOn(int node) const;
};

// The step of `r` in an allocation of `alloc_nodes` nodes, whose batch script was given
// `env_per_node` tasks per node (SLURM_NTASKS_PER_NODE, 0: none) and `env_ntasks` (SLURM_NTASKS,
// 0: none). Returns "" or an error.
std::string Layout(const SrunRequest& r, int alloc_nodes, int env_per_node, int env_ntasks,
                   StepLayout* out);

// The GPUs (CUDA indices, as in the node's CUDA_VISIBLE_DEVICES) of local task `local` of
// `per_node`, from the node's `gpus`. Returns "" or an error (not enough GPUs for the split).
std::string TaskGpus(const SrunRequest& r, const std::vector<std::string>& gpus, int local,
                     int per_node, std::vector<std::string>* out);

// The variables srun sets for one task (besides the allocation's): ranks, counts, GPUs.
std::map<std::string, std::string> TaskEnv(const StepLayout& l, int node, int rank, int local,
                                           const std::vector<std::string>& gpus, int step);

// Slurm's host list as `scontrol show hostnames` writes it, one name a line:
// "gpu-[01-03,07],cpu1" -> {"gpu-01", "gpu-02", "gpu-03", "gpu-07", "cpu1"}. Returns "" or an
// error that names the list.
std::string ExpandHostnames(const std::string& list, std::vector<std::string>* out);

// `scontrol ARGS` inside a job: `show hostname[s] [LIST]` (LIST: SLURM_JOB_NODELIST, given as
// `job_nodelist`) writes the names to `out`. Returns the exit status (1 with `err` set for what
// Arbiter's nodes do not answer).
int Scontrol(const std::vector<std::string>& args, const std::string& job_nodelist,
             std::string* out, std::string* err);

// "a,b,c" -> {"a", "b", "c"} ("" -> {}).
std::vector<std::string> SplitList(const std::string& s, char sep = ',');

}  // namespace arbiter::exec

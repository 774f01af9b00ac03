// LocalExecutor: runs the tasks placed on one node as real processes (the built-in node of
// `arbiter server --local-node`, and the execution engine of the node agent, `arbiter agent`).
//
// Each task is a process in its own session and process group, in the job's working directory,
// with its environment plus CUDA_VISIBLE_DEVICES / NVIDIA_VISIBLE_DEVICES (its GPUs, with
// CUDA_DEVICE_ORDER=PCI_BUS_ID so CUDA numbers them as NVML does), ARBITER_JOB_ID,
// ARBITER_TASK_INDEX, ARBITER_NODE_NAME, ARBITER_RESTART_COUNT, ARBITER_CHECKPOINT_DIR (stable per
// job), and for gangs MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK, NODE_RANK, LOCAL_RANK. stdout and
// stderr go to WORK_DIR/jobs/<id>/task-<n>.{out,err}; WORK_DIR/jobs/<id>/task-<n>.pid holds
// "<pid> <attempt>" while the process runs. A stop is SIGTERM to the whole group, then SIGKILL
// after the grace period; the walltime is enforced. A process whose task is no longer assigned
// to this node (its job was declared lost meanwhile) is stopped the same way.
//
// Processes of an earlier run of the executor cannot be adopted: ReapLeftovers() kills them
// (from their pid files) and reports them lost, so their jobs are retried by their policy.
//
// Threads: one thread (Start/Stop) polls assignments and reaps children; it calls the backend,
// which is thread-safe. BusyGpus() and Running() may be called from any thread.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "model/execution.h"
#include "server/execution_backend.h"

namespace arbiter::server {

// Per-task resource limits (cgroups). Implementations are called from the executor's thread;
// ProcsFile may be called from a forked child (between fork and exec) and must not allocate.
class TaskLimits {
 public:
  virtual ~TaskLimits() = default;
  // Prepares the limits of one task; returns the path of the file the task's process writes "0"
  // to (cgroup.procs) to enter them, or "" when it runs without.
  virtual std::string Prepare(uint64_t job, int32_t task, int64_t cpu_milli,
                              int64_t memory_mib) = 0;
  // The task's processes are gone: removes what Prepare made.
  virtual void Release(uint64_t job, int32_t task) = 0;
};

struct ExecutorOptions {
  // The task's first process gets SIGKILL when the executor's process dies (node agents: the
  // server retries the job elsewhere; its old processes must not run on).
  bool die_with_executor = false;
  TaskLimits* limits = nullptr;  // not owned; null: no limits
  // Between ticks (reaping exits, enforcing walltimes); Wake() ticks at once.
  DurationMs tick_ms = 20;
};

class LocalExecutor {
 public:
  using NowFn = std::function<TimeMs()>;

  LocalExecutor(ExecutionBackend* backend, std::string node, std::string work_dir, NowFn now,
                ExecutorOptions options = {});
  ~LocalExecutor();

  // Kills the process groups named by pid files under WORK_DIR/jobs (an earlier run's tasks) and
  // reports each lost. Call before Start.
  void ReapLeftovers();
  void Start();
  // Stops the loop. Running tasks keep running unless `kill_tasks` (then they are killed and
  // reported lost: at shutdown, whose processes would otherwise outlive the executor).
  void Stop(bool kill_tasks);
  // Ticks now (new assignments arrived) instead of at the next interval.
  void Wake();

  // One step: start what should run, stop what should stop, reap what exited. Public for tests.
  void Tick();

  // GPU indices of the tasks running now.
  std::set<int32_t> BusyGpus() const;
  // Whether a process of task `task` of job `job` runs now.
  bool Running(uint64_t job, int32_t task) const;

 private:
  struct Proc {
    pid_t pid = -1;
    uint64_t attempt = 0;
    std::vector<int32_t> gpus;
    TimeMs deadline = 0;  // walltime end
    TimeMs kill_at = 0;   // SIGKILL time once SIGTERM was sent
    DurationMs grace_ms = 30000;
    bool timed_out = false;
  };
  using Key = std::pair<uint64_t, int32_t>;  // job, task
  void Launch(const TaskAssignment& a);
  void Terminate(Proc& p, DurationMs grace);
  void Reap(TimeMs now);
  std::string PidFile(uint64_t job, int32_t task) const;

  ExecutionBackend* backend_;
  std::string node_;
  std::string work_dir_;
  NowFn now_;
  ExecutorOptions options_;
  mutable std::mutex mu_;  // guards procs_ against BusyGpus/Running; the loop thread mutates it
  std::map<Key, Proc> procs_;
  std::atomic<bool> stop_{false};
  std::mutex wake_mu_;
  std::condition_variable wake_cv_;
  bool woken_ = false;
  std::thread thread_;
};

}  // namespace arbiter::server

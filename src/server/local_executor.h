// LocalExecutor: runs the tasks placed on one node as real processes (the built-in node of
// `arbiter server --local-node`, and the execution engine the node agent uses).
//
// Each task is a process in its own session and process group, in the job's working directory,
// with its environment plus CUDA_VISIBLE_DEVICES / NVIDIA_VISIBLE_DEVICES (its GPUs),
// ARBITER_JOB_ID, ARBITER_TASK_INDEX, ARBITER_NODE_NAME, ARBITER_RESTART_COUNT,
// ARBITER_CHECKPOINT_DIR (stable per job), and for gangs MASTER_ADDR, MASTER_PORT, WORLD_SIZE,
// RANK, NODE_RANK, LOCAL_RANK. stdout and stderr go to WORK_DIR/jobs/<id>/task-<n>.{out,err}. A
// stop is SIGTERM to the whole group, then SIGKILL after the grace period; the walltime is
// enforced.
//
// Threads: one thread (Start/Stop) polls assignments and reaps children; it calls ControlPlane,
// which is thread-safe.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <map>
#include <string>
#include <thread>
#include <utility>

#include "server/control_plane.h"

namespace arbiter::server {

class LocalExecutor {
 public:
  LocalExecutor(ControlPlane* cp, std::string node, std::string work_dir, NowFn now);
  ~LocalExecutor();

  void Start();
  // Stops the loop. Running tasks keep running unless `kill_tasks` (used at shutdown of the
  // built-in node, whose processes would otherwise outlive the server).
  void Stop(bool kill_tasks);

  // One step: start what should run, stop what should stop, reap what exited. Public for tests.
  void Tick();

 private:
  struct Proc {
    pid_t pid = -1;
    TimeMs deadline = 0;  // walltime end
    TimeMs kill_at = 0;   // SIGKILL time once SIGTERM was sent
    bool timed_out = false;
  };
  void Launch(const TaskAssignment& a);
  void Terminate(Proc& p, DurationMs grace);

  ControlPlane* cp_;
  std::string node_;
  std::string work_dir_;
  NowFn now_;
  std::map<std::pair<uint64_t, int32_t>, Proc> procs_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace arbiter::server

// LocalExecutor: runs the tasks placed on one node as real processes (the built-in node of
// `arbiter server --local-node`, and the execution engine of the node agent, `arbiter agent`).
//
// Each task runs under its own `arbiter-shim` (exec/shim_spec.h), which the executor starts and
// then watches: the shim starts the task as the user its assignment names (RunAs), with a clean
// environment, in its cgroups (exec/task_cgroups.h: CPU, memory and process limits, only its own
// GPU devices), is the subreaper of everything it starts, stops the whole tree (SIGTERM, the
// grace period, SIGKILL) and writes the exit status to a file. A task's folders (docs/security.md):
//
//   WORK_DIR/                  0711, the executor's
//     jobs/<id>/               0700, the executor's: task-<n>.{out,err,log,runs} (0600: every
//                              run's output, node/task_logs.h), .pid, .exit
//     work/<id>/               0700, the task's user's: the default working directory and HOME
//     tmp/<id>/                0700, the task's user's: TMPDIR
//     checkpoints/<id>/        0700, the task's user's: ARBITER_CHECKPOINT_DIR (kept across runs)
//     volumes/<tenant>/<name>/ 0700, the user's of the tenant's last task to use it: a named
//                              volume of a host process (ARBITER_VOLUME_<NAME>), kept across jobs
//                              (a container's is the podman volume arbiter-<tenant>_<name>)
//
// The environment is only what the job sets, plus PATH (a default the job may override), HOME,
// USER, LOGNAME, TMPDIR, CUDA_VISIBLE_DEVICES / NVIDIA_VISIBLE_DEVICES (its GPUs, with
// CUDA_DEVICE_ORDER=PCI_BUS_ID so CUDA numbers them as NVML does), ARBITER_JOB_ID,
// ARBITER_TASK_INDEX, ARBITER_NODE_NAME, ARBITER_RESTART_COUNT, ARBITER_CHECKPOINT_DIR,
// ARBITER_VOLUME_<NAME> (each volume: its target in a container, its folder for a host process),
// and MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK, NODE_RANK, LOCAL_RANK.
//
// Restarts kill nothing: tasks outlive the executor's process. Recover() adopts the shims of an
// earlier run from their pid files (and reports the exits that happened meanwhile); a shim whose
// executor stays away longer than `orphan_timeout_ms` stops its task. A task no longer assigned
// to this node (its job was declared lost meanwhile) is stopped.
//
// Threads: one thread (Start/Stop) polls assignments and reaps shims; it calls the backend, which
// is thread-safe. BusyGpus(), RunningAttempt() and Describe() may be called from any thread.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "exec/shim_spec.h"
#include "exec/task_cgroups.h"
#include "model/execution.h"
#include "node/container_runtime.h"
#include "node/execution_backend.h"

namespace arbiter::node {

struct ExecutorOptions {
  exec::TaskLimits* limits = nullptr;  // not owned; null: the shim alone tracks the processes
  // Between ticks (reaping exits, enforcing walltimes); Wake() ticks at once.
  DurationMs tick_ms = 20;
  // The shim binary; "": arbiter-shim beside this program (/proc/self/exe).
  std::string shim_path;
  // Shims stop their task when this executor has not been heard of for this long (0: never). A
  // node agent sets the server's node timeout: by then its work may run elsewhere.
  DurationMs orphan_timeout_ms = 0;
  // Processes (and threads) one task may have at once: pids.max, else RLIMIT_NPROC of its uid.
  int64_t max_task_processes = 4096;
  // The node's GPU devices by CUDA index: a task may open only those of its own GPUs.
  std::map<int32_t, exec::DeviceNumber> gpu_devices;
  // Who tasks run as when their assignment names nobody, when this process may switch users.
  int64_t default_uid = 65534;
  int64_t default_gid = 65534;
  // Tasks with a container_image run in containers (node/container_runtime.h); false: such a
  // task fails to start, saying that this node runs no containers.
  bool containers = false;
  ContainerOptions container;
  // Task output (and the job's work, tmp and checkpoint folders) of jobs idle here for this long
  // is archived to WORK_DIR/archive and removed (node/output_retention.h); 0: kept forever.
  DurationMs output_retention_ms = 0;
};

class LocalExecutor {
 public:
  using NowFn = std::function<TimeMs()>;

  LocalExecutor(ExecutionBackend* backend, std::string node, std::string work_dir, NowFn now,
                ExecutorOptions options = {});
  ~LocalExecutor();

  // The tasks an earlier run of this executor left: a running shim is adopted, a finished one's
  // exit is reported, one gone without a record is reported lost. Call before Start.
  void Recover();
  void Start();
  // Stops the loop. Running tasks keep running (a later executor adopts them) unless
  // `kill_tasks`: then they are killed and reported lost.
  void Stop(bool kill_tasks);
  // Ticks now (new assignments arrived) instead of at the next interval.
  void Wake();

  // One step: start what should run, stop what should stop, reap what exited. Public for tests.
  void Tick();

  // GPU indices of the tasks running now.
  std::set<int32_t> BusyGpus() const;
  // The run (attempt) of task `task` of job `job` whose processes are here now; 0: none.
  uint64_t RunningAttempt(uint64_t job, int32_t task) const;
  // Tasks running now (adopted ones included).
  size_t running() const;
  // How tasks are confined here, for the node's status: who they run as, cgroups, devices.
  std::string Describe() const;
  // Whether this process can start tasks as other users (it is root).
  bool switches_users() const { return switch_users_; }
  // The orphan timeout of the shims started from now on (an agent learns the server's node
  // timeout when it registers).
  void SetOrphanTimeout(DurationMs ms) { orphan_timeout_ms_ = ms; }

 private:
  struct Proc {
    pid_t pid = -1;  // the shim's
    uint64_t attempt = 0;
    bool adopted = false;    // started by an earlier run: not our child
    exec::PidRecord record;  // adopted: to tell it from a reused pid
    std::vector<int32_t> gpus;
    TimeMs deadline = 0;  // walltime end
    TimeMs kill_at = 0;   // SIGKILL to the shim and the task's groups, if still there
    DurationMs grace_ms = 30000;
    bool timed_out = false;
    bool container = false;  // runs in a container (adopted ones: not known, taken as maybe)
    // Its job's checkpoint folder: the newest time seen in it (-1: not looked yet; what is there
    // at the first look is the run before's), and when it was last looked at.
    int64_t checkpoint_mtime_ns = -1;
    TimeMs checkpoint_checked = 0;
  };
  using Key = std::pair<uint64_t, int32_t>;  // job, task
  struct Identity {
    int64_t uid = -1;  // -1: run as this process
    int64_t gid = -1;
    std::vector<int64_t> groups;
    std::string name;  // USER
  };
  // `digest`: the container image's, for a task with one.
  void Launch(const TaskAssignment& a, const std::string& digest = "");
  void RecoverTasks();
  // A task with a container image: started once its image is on the node (pulled first).
  void StartContainerTask(const TaskAssignment& a, std::set<std::string>* failed_images);
  // The container's command line for the shim, in place of the task's own.
  // False (with *why) when it cannot be made.
  bool ContainerCommand(const TaskAssignment& a, const Identity& id, exec::ShimSpec* s,
                        std::string* why) const;
  // Pull progress, for the tasks waiting for `image` (the pull thread).
  void PullProgress(const std::string& image, const std::string& text);
  // The node's images to the backend when they changed; the images it asks for, pulled ahead.
  void SyncImages(TimeMs now);
  // Who the task runs as; false (with *why) when it may not run here.
  bool ResolveIdentity(const TaskAssignment& a, Identity* id, std::string* why) const;
  // The task's folders, owned by its user; false (with *why) when they cannot be made.
  bool PrepareFolders(uint64_t job, const Identity& id, std::string* why) const;
  // The task's volumes, made when missing and given to its user: podman volumes for a container,
  // folders under WORK_DIR/volumes for a host process. False (with *why) when they cannot be.
  bool PrepareVolumes(const TaskAssignment& a, const Identity& id, std::string* why) const;
  // WORK_DIR/volumes/<tenant>/<volume>: a host process's volume.
  std::string VolumeFolder(const std::string& tenant, const std::string& volume) const;
  std::vector<std::string> Environment(const TaskAssignment& a, const Identity& id) const;
  // `reason` ("ImagePullFailed: ..."): the job's reason, with `exit_code`.
  void FailToStart(const TaskAssignment& a, const std::string& why, const std::string& reason = "",
                   int32_t exit_code = 126);
  void Terminate(Proc& p, DurationMs grace, bool timed_out);
  void Reap(TimeMs now);
  // Hourly (every minute while a backlog remains), with output_retention_ms set: the output of
  // jobs idle here longer than that, archived and removed, on this (the loop's) thread, so no
  // task of them starts meanwhile.
  void SweepOutput(TimeMs now);
  // Every second, each task's checkpoint folder: a newer file (or the folder itself, when a file
  // was renamed into it) is reported as a checkpoint of the task's job.
  void WatchCheckpoints(TimeMs now);
  // The end of a shim: its exit record reported, its files and groups removed.
  void Finish(const Key& key, const Proc& p, int shim_status);
  void Touch();             // the heartbeat the shims watch
  void InstallTaskTools();  // srun, first on the tasks' PATH (work_dir/bin)
  std::string StateDir(uint64_t job) const;
  std::string PidFile(uint64_t job, int32_t task) const;
  std::string ExitFile(uint64_t job, int32_t task) const;

  ExecutionBackend* backend_;
  std::string node_;
  std::string work_dir_;
  NowFn now_;
  ExecutorOptions options_;
  bool switch_users_ = false;
  std::string shim_;
  // The folder of the tools every task finds first on its PATH (srun); "" when not installed.
  std::string tools_dir_;
  std::atomic<int64_t> orphan_timeout_ms_{0};
  std::string heartbeat_;
  TimeMs touched_ = 0;
  TimeMs next_output_sweep_ = 0;
  mutable std::mutex mu_;  // guards procs_ against BusyGpus/Running; the loop thread mutates it
  std::map<Key, Proc> procs_;
  std::atomic<bool> stop_{false};
  std::mutex wake_mu_;
  std::condition_variable wake_cv_;
  bool woken_ = false;
  std::thread thread_;
  // Containers (null: this node runs none), and whether podman works here (checked once).
  std::unique_ptr<ContainerRuntime> containers_;
  int containers_ok_ = -1;  // -1: not checked yet
  std::string containers_why_;
  std::mutex pull_mu_;  // guards waiting_ (the pull thread reads it)
  std::map<Key, std::pair<uint64_t, std::string>> waiting_;  // attempt, image
  uint64_t images_version_ = 0;
  TimeMs images_reported_ = 0;
  TimeMs images_asked_ = 0;
};

}  // namespace arbiter::node

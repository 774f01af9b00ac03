// Control groups per task: every process of a task is found and killed through its groups, and
// the task's requests become limits (CPU, memory, processes) and its GPUs the only GPU devices it
// may open.
//
// TaskLimits is what the executor needs; TaskCgroups implements it with the kernel's cgroups,
// whichever this machine offers:
//   - cgroup v2 (the whole /sys/fs/cgroup, or /sys/fs/cgroup/unified beside v1 controllers): a
//     group per task tracks its processes and kills them at once (cgroup.kill); the cpu, memory
//     and pids controllers where they are delegated to us (cpu.max, memory.max, pids.max); GPU
//     devices through an eBPF device program attached to the task's group;
//   - cgroup v1 controllers (pids, memory, cpu, devices, freezer), each mounted on its own, for
//     what v2 does not give: pids.max, memory.limit_in_bytes, cpu.cfs_quota_us, devices.deny.
// Groups live under BASE/arbiter/<scope>/task-<job>-<task> in each hierarchy, where BASE is this
// process's own group and the scope names the executor (its node and work folder), so that
// several executors on one machine never meet. Without any usable hierarchy, Setup says why and
// the executor falls back to the shim (a subreaper that finds every descendant) and RLIMIT_NPROC.
//
// Thread safety: Prepare, Dirs and Release from the executor's thread. The procs files that
// Prepare returns are written by the task's first process before it execs.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace arbiter::exec {

// A character device, as the kernel numbers it (/dev/nvidia3 is 195:3).
struct DeviceNumber {
  uint32_t major = 0;
  uint32_t minor = 0;
  bool operator==(const DeviceNumber&) const = default;
};

struct TaskLimitSpec {
  int64_t cpu_milli = 0;                   // 0: no CPU limit
  int64_t memory_mib = 0;                  // 0: no memory limit
  int64_t pids_max = 0;                    // 0: no process limit
  std::vector<DeviceNumber> deny_devices;  // GPUs of the node that are not the task's
};

struct TaskGroups {
  std::vector<std::string> procs_files;  // the task's first process writes "0" to each
  std::vector<std::string> dirs;         // every group of the task (its members are the task's)
  std::vector<std::string> warnings;     // a limit that could not be set, and why
  bool pids_limited = false;             // pids.max holds
  bool devices_isolated = false;         // deny_devices hold
};

class TaskLimits {
 public:
  virtual ~TaskLimits() = default;
  // Creates the task's groups with its limits (an earlier group of the same task is emptied and
  // replaced).
  virtual TaskGroups Prepare(uint64_t job, int32_t task, const TaskLimitSpec& spec) = 0;
  // The task's existing groups (a task adopted after a restart).
  virtual std::vector<std::string> Dirs(uint64_t job, int32_t task) const = 0;
  // Kills every process left in the task's groups and removes them.
  virtual void Release(uint64_t job, int32_t task) = 0;
  // The folders the task groups are made in (one per hierarchy).
  virtual std::vector<std::string> bases() const = 0;
};

struct CgroupOptions {
  std::string scope;  // a name for the executor's groups: letters, digits, '-', '_', '.'
  // Where to look (tests point these at fake trees).
  std::string mountinfo = "/proc/self/mountinfo";
  std::string self_cgroup = "/proc/self/cgroup";
  // cgroup v2 with controllers needs this process out of the group it delegates ("no internal
  // processes"): it moves into a child of that name first.
  std::string leaf = "executor";
};

class TaskCgroups : public TaskLimits {
 public:
  // The cgroups this machine offers to this process, or null when none is usable; `*status` says
  // which, or why none ("unavailable: ...").
  static std::unique_ptr<TaskCgroups> Setup(const CgroupOptions& options, std::string* status);

  TaskGroups Prepare(uint64_t job, int32_t task, const TaskLimitSpec& spec) override;
  std::vector<std::string> Dirs(uint64_t job, int32_t task) const override;
  void Release(uint64_t job, int32_t task) override;
  std::vector<std::string> bases() const override;

  bool limits_processes() const;
  bool isolates_devices() const;

  struct Hierarchy {
    std::string kind;  // "v2", or a v1 controller: "pids", "memory", "cpu", "devices", "freezer"
    std::string base;  // our groups' folder: .../arbiter/<scope>
    std::vector<std::string> controllers;  // v2: those enabled for the task groups
  };
  const std::vector<Hierarchy>& hierarchies() const { return hierarchies_; }

 private:
  std::string TaskDir(const Hierarchy& h, uint64_t job, int32_t task) const;
  std::vector<Hierarchy> hierarchies_;
};

}  // namespace arbiter::exec

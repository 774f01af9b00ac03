// CgroupLimits: each task in its own cgroup v2 group with cpu.max and memory.max from its
// request, where this process's cgroup is delegated to it (cpu and memory controllers
// available, the folder writable). Setup moves the agent into a leaf child ("agent") and enables
// the controllers for the task groups beside it; Release writes cgroup.kill (so nothing of the
// task survives, also what left its process group) and removes the group.
//
// Where cgroup v2 is not usable (cgroup v1 or a hybrid hierarchy, no delegation) Setup says why
// and the agent runs tasks without limits.
//
// Thread safety: Prepare and Release from the executor's thread; ProcsFile paths are written
// by the task's process between fork and exec.
#pragma once

#include <memory>
#include <string>

#include "server/local_executor.h"

namespace arbiter::agent {

class CgroupLimits : public server::TaskLimits {
 public:
  // Null with `*status` = "unavailable: <why>", or the limits with `*status` saying where.
  // `root`: the cgroup2 mount (/sys/fs/cgroup).
  static std::unique_ptr<CgroupLimits> Setup(const std::string& root, std::string* status);

  // Task groups directly under `base` (already delegated, controllers enabled). For tests.
  explicit CgroupLimits(std::string base) : base_(std::move(base)) {}

  std::string Prepare(uint64_t job, int32_t task, int64_t cpu_milli, int64_t memory_mib) override;
  void Release(uint64_t job, int32_t task) override;

  // The group of one task: BASE/task-<job>-<task>.
  std::string GroupPath(uint64_t job, int32_t task) const;

 private:
  std::string base_;
};

}  // namespace arbiter::agent

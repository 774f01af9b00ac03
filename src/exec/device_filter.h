// The cgroup v2 device controller: an eBPF program (BPF_PROG_TYPE_CGROUP_DEVICE) attached to a
// task's group decides every open of a device node by the task's processes. Ours refuses the
// character devices it is given (the node's GPUs that are not the task's) and allows everything
// else, beside whatever programs the groups above ours attach (BPF_F_ALLOW_MULTI: all must allow).
//
// Thread safety: pure system calls.
#pragma once

#include <string>
#include <vector>

#include "exec/task_cgroups.h"

namespace arbiter::exec {

// Attaches a program denying `deny` (read, write and mknod) to the cgroup v2 folder `dir`. False
// with `*error` when the kernel refuses (no CAP_BPF/CAP_SYS_ADMIN, no cgroup BPF support).
bool AttachDeviceDenyList(const std::string& dir, const std::vector<DeviceNumber>& deny,
                          std::string* error);

}  // namespace arbiter::exec

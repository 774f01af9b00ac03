// ControlPlane's compiled form of configuration and nodes (internal to the control plane's
// translation units): rebuilt under mu_ when either changes, shared with a running cycle.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "core/cluster.h"
#include "core/quota/quota_tree.h"
#include "server/control_plane.h"

namespace arbiter::server {

// The compiled form of configuration and nodes, rebuilt when either changes.
struct ControlPlane::Compiled {
  core::Cluster cluster;
  core::QuotaTree tree;
  std::unique_ptr<core::Profile> profile;
  std::map<std::string, PriorityClass> classes;
  // Lower-cased queue names and aliases -> the queue (GPU-A100 and gpu_a100 find gpu-a100).
  std::map<std::string, std::string> queue_names;
  std::map<std::string, std::string> default_queue;  // tenant -> its default_queue, where set
  uint64_t generation = 0;  // grows at every compilation (JobEntry::resolved_generation)
};

}  // namespace arbiter::server

// BuiltinNode: the node `arbiter server --local-node NAME` runs itself, as an agent would: its
// GPUs (NVML's, else fake ones), its registration with the control plane, its executor (tasks
// under arbiter-shim, confined as on an agent: docs/security.md) and its telemetry.
//
// Its work folder is apart from the data dir (tasks never reach the store or the tokens), and its
// tasks outlive the server: a restart adopts them (node::LocalExecutor::Recover).
//
// Threads: Start() starts the executor's thread and a telemetry thread (every 2 s: GPU telemetry,
// and the node registered again once the configuration names a GPU model it lacked); Stop() ends
// both. The control plane is called from both; it is thread-safe.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "common/status.h"
#include "node/local_executor.h"
#include "server/control_plane.h"
#include "server/server_command.h"

namespace arbiter::node {
class GpuDiscovery;
}
namespace arbiter::exec {
class TaskCgroups;
}

namespace arbiter::server {

class BuiltinNode {
 public:
  BuiltinNode(ControlPlane* cp, const ServerOptions& options, node::LocalExecutor::NowFn now);
  ~BuiltinNode();

  // Finds the GPUs, registers the node, adopts the tasks of the server's earlier run, starts.
  Status Start();
  // Ends the threads; the tasks keep running unless `kill_tasks`. Idempotent.
  void Stop(bool kill_tasks);

  const std::string& work_dir() const { return work_dir_; }
  size_t running() const;

 private:
  // Registers (or refreshes) the node unless the configuration defines it; false when it still
  // waits for a GPU model to count its GPUs as.
  Status Register();
  void TelemetryLoop();

  ControlPlane* cp_;
  ServerOptions o_;
  node::LocalExecutor::NowFn now_;
  std::string work_dir_;
  std::string address_;
  std::unique_ptr<node::GpuDiscovery> gpus_;
  std::unique_ptr<exec::TaskCgroups> cgroups_;
  std::string cgroup_status_;
  std::unique_ptr<node::LocalExecutor> executor_;
  bool configured_ = false;       // the configuration defines the node (its GPUs are the config's)
  std::string registered_model_;  // the model its GPUs were registered as ("": none yet)

  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread telemetry_;
};

// The built-in node's work folder: `configured`, else the data dir's sibling DATA-node.
std::string BuiltinWorkDir(const std::string& data_dir, const std::string& configured);

}  // namespace arbiter::server

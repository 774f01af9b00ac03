// `arbiter agent`: the node agent, one per GPU node. It registers the node with the server
// (CPUs and memory of the machine, its GPUs from NVML or --fake-gpus, labels, rack and block),
// heartbeats telemetry and task reports, runs the tasks the server places on the node as
// processes (node::LocalExecutor), and serves their logs on a small HTTP port.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace arbiter::agent {

struct AgentOptions {
  std::string server;                      // http://HOST:PORT of `arbiter server`
  std::string token;                       // a node token (POST /api/v1/tokens {"role": "node"})
  std::string token_file;                  // or its first line
  std::string name;                        // the node's name
  std::string work_dir = "arbiter-agent";  // jobs/<id>/task-<n>.{out,err,pid}, checkpoints/
  std::string listen = "127.0.0.1:0";      // the log port
  std::string address;                     // MASTER_ADDR of gangs led here ("": as the server sees)
  std::string labels;                      // k=v,k=v; rack= and block= set the node's topology
  int fake_gpus = 0;                       // > 0: fake GPUs instead of NVML
  std::string gpu_model;                   // the configured model of this node's GPUs
  int64_t gpu_memory_mib = 0;              // fake GPUs' memory (0: the model's)
  int heartbeat_ms = 2000;
  int backoff_max_ms = 10000;
  std::string log_format = "text";  // or "json"
  std::string nvml_library = "libnvidia-ml.so.1";
  // Task confinement (docs/security.md).
  bool cgroups = true;                // false: no cgroups (the shim alone tracks processes)
  int64_t max_task_processes = 4096;  // per task: pids.max, else RLIMIT_NPROC
  int output_retention_days = 0;      // 0: task output is kept forever
  int64_t orphan_timeout_ms = -1;     // shims stop tasks when the agent is away this long
                                      // (-1: the server's node timeout; 0: never)
  std::string shim;                   // "": arbiter-shim beside this binary
  std::string run_as_default = "arbiter-job";  // tasks whose assignment names nobody (as root)
  int fake_gpu_device_major = -1;              // fake GPU i is character device MAJOR:i (drills)
  bool kill_tasks_on_exit = false;             // SIGTERM kills the tasks instead of leaving them
  // Containers (docs/containers.md): whether this node runs them, and the registries
  // ("host:port") it reaches over plain HTTP.
  bool containers = true;
  std::vector<std::string> insecure_registries;
};

// Runs until SIGTERM or SIGINT; tasks keep running for the next agent to adopt (unless
// kill_tasks_on_exit). Returns the exit code.
int RunAgent(const AgentOptions& options);

}  // namespace arbiter::agent

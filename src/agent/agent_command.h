// `arbiter agent`: the node agent, one per GPU node. It registers the node with the server
// (CPUs and memory of the machine, its GPUs from NVML or --fake-gpus, labels, rack and block),
// heartbeats telemetry and task reports, runs the tasks the server places on the node as
// processes (LocalExecutor), and serves their logs on a small HTTP port.
#pragma once

#include <cstdint>
#include <string>

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
  std::string cgroup_root = "/sys/fs/cgroup";
};

// Runs until SIGTERM or SIGINT (then stops its tasks and reports them); returns the exit code.
int RunAgent(const AgentOptions& options);

}  // namespace arbiter::agent

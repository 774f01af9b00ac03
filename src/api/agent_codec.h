// The node agent's wire format (POST /api/v1/agent/register and /api/v1/agent/heartbeat): JSON
// to the values of model/execution.h and back. Both the server and the agent use it.
//
//   register:  {"name": "gpu-07", "cpu_milli": 64000, "memory_mib": 515000,
//               "labels": {"rack": "r1"}, "rack": "r1", "block": "",
//               "gpus": [{"index": 0, "model": "H100-80G", "memory_mib": 81559,
//                         "healthy": true, "nvlink_domain": 0}],
//               "instance": "5f0c...", "version": "0.1.0", "address": "",
//               "log_host": "127.0.0.1", "log_port": 40123, "log_token": "...",
//               "status": {"cgroups": "unavailable: ...", "gpu_discovery": "nvml: 8 GPUs"}}
//   heartbeat: {"name": "gpu-07", "instance": "5f0c...",
//               "gpus": [{"index": 0, "uuid": "GPU-...", "utilization_pct": 97,
//                         "memory_used_mib": 60211, "memory_total_mib": 81559,
//                         "healthy": true, "health_reason": ""}],
//               "reports": [{"seq": 12, "job": 41, "task": 0, "attempt": 2,
//                            "event": "exited", "exit_code": 0, "timed_out": false}],
//               "images": [{"name": "registry.example.com/team/trainer:1.4",
//                           "digest": "sha256:...", "size_bytes": 2000000}]}
//              (a report may carry "message" (kExited: the reason; kNote: the event's text) and
//              "image_digest"; "images" is absent when the node could not list them)
//   answer:    {"acked_seq": 12, "assignments": [{"job": 41, "task": 1, "attempt": 2,
//               "run": true, "grace_ms": 30000, "deadline_ms": 0, "gpus": [0, 1],
//               "restarts": 0, "master_node": "gpu-06", "master_addr": "10.0.0.6",
//               "started": true, "tasks": 2, "command": ["python", "train.py"],
//               "env": {}, "workdir": "", "cpu_milli": 16000, "memory_mib": 65536,
//               "container_image": "", "image_pull_auth": "", "image_insecure": false}],
//               "pull_images": [{"image": "...", "auth": "", "insecure": false}]}
//
// Errors are InvalidArgument naming the field ("reports[3].event", "gpus[1].index").
//
// Thread safety: pure functions.
#pragma once

#include <nlohmann/json.hpp>

#include "common/result.h"
#include "model/execution.h"

namespace arbiter::api {

inline constexpr size_t kMaxAgentGpus = 1024;
inline constexpr size_t kMaxAgentReports = 100000;
inline constexpr size_t kMaxReportMessageBytes = 4096;  // reports[].message

nlohmann::json AgentRegistrationToJson(const AgentRegistration& r);
Result<AgentRegistration> ParseAgentRegistration(const nlohmann::json& j);

nlohmann::json GpuTelemetryToJson(const GpuTelemetry& g);
nlohmann::json AgentHeartbeatToJson(const AgentHeartbeat& hb);
Result<AgentHeartbeat> ParseAgentHeartbeat(const nlohmann::json& j);

// Only what a node needs of the job's spec travels: tasks, command, env, workdir, mounts
// ({"path", "target", "read_only"}: host path, path in the container; target filled in; a
// volume mount has "volume" (the tenant's volume name) and an empty "path"), the tenant (whose
// volumes they are), and the per-task CPU and memory (for limits).
nlohmann::json TaskAssignmentToJson(const TaskAssignment& a);
// A node's images: [{"name", "digest", "size_bytes"}] (heartbeats, the node's status).
nlohmann::json NodeImagesToJson(const std::vector<NodeImage>& images);
Result<TaskAssignment> ParseTaskAssignment(const nlohmann::json& j, const std::string& field);

}  // namespace arbiter::api

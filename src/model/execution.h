// Execution on nodes as plain values: what a node should run or stop (TaskAssignment), what it
// says happened (TaskReport), how its GPUs are doing (GpuTelemetry), and what a node agent
// announces when it registers (AgentRegistration) and on every heartbeat (AgentHeartbeat).
//
// The same values travel in-process (the built-in node) and over HTTP (node agents; the JSON form
// is in api/agent_codec.h).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "model/job.h"
#include "model/job_array.h"
#include "model/node.h"
#include "model/time.h"

namespace arbiter {

// Who a task runs as on its node: the configuration's run_as of the job's user, else of its
// tenant, else the uid the server gave the tenant (docs/security.md). A node resolves `user`
// itself; a node that cannot switch users runs every task as itself, and says so.
struct RunAs {
  std::string user;           // a user name on the node ("": by number)
  int64_t uid = -1;           // -1: the node's default identity
  int64_t gid = -1;           // -1: the user's primary group, else the uid's number
  bool root_allowed = false;  // the tenant may run tasks as uid 0
  bool operator==(const RunAs&) const = default;
};

// What a node should do with one task of one run of a job.
struct TaskAssignment {
  uint64_t job = 0;
  int32_t task = 0;
  // Which run of the job this is (it grows at every admission): reports name it, so that a report
  // about an earlier run never changes a later one.
  uint64_t attempt = 0;
  bool run = true;  // false: stop it (SIGTERM, grace, SIGKILL)
  DurationMs grace_ms = 30000;
  TimeMs deadline = 0;  // walltime end (0: none)
  JobSpec spec;
  std::vector<int32_t> gpus;  // CUDA indices
  int32_t restarts = 0;
  std::string master_node;  // node of task 0
  std::string master_addr;  // its address as the tasks should use it ("": derived from the name)
  // Every task's node, in task order (Slurm's SLURM_JOB_NODELIST; empty from an older server).
  std::vector<std::string> nodes;
  bool started = false;  // the control plane already saw this task start
  // A secret of this run of the job, the same for all its tasks and known to no one else: srun's
  // job steps across nodes prove with it that they belong to the job (exec/srun_main.cc).
  std::string step_key;
  RunAs run_as;
  // A job array's element (spec.array.id != 0): where its array's indices start, end and step.
  ArrayBounds array_bounds;
  // spec.container_image only: credentials for its registry ("user:password", or the content of
  // a containers auth file; "": none), and whether its registry is reached without TLS checks.
  std::string image_pull_auth = {};
  bool image_insecure = false;
};

// kNote: something to tell the job's events ("pulling IMAGE: 40%"), or the image digest it runs.
// An image a node should pull ahead of the task that needs it.
struct ImagePull {
  std::string image;
  std::string auth;  // as TaskAssignment::image_pull_auth
  bool insecure = false;
  bool operator==(const ImagePull&) const = default;
};

enum class TaskEvent { kStarted, kExited, kLost, kCheckpointed, kNote };

// "started", "exited", "lost", "checkpointed", "note"
std::string_view TaskEventName(TaskEvent e);
bool ParseTaskEvent(std::string_view s, TaskEvent* out);

// Something that happened to a task on its node. Applying a report twice changes nothing.
struct TaskReport {
  uint64_t seq = 0;  // per agent process, increasing; 0 in-process
  uint64_t job = 0;
  int32_t task = 0;
  uint64_t attempt = 0;
  TaskEvent event = TaskEvent::kStarted;
  int32_t exit_code = 0;   // kExited: the exit code (128 + signal when killed)
  bool timed_out = false;  // kExited: stopped at its walltime
  // kExited: why the run failed, when the node knows better than an exit code
  // ("ImagePullFailed: ..."); kNote: the event's text.
  std::string message = {};
  std::string image_digest = {};  // kNote: the digest of the container image the task runs
};

// One GPU's health and use at one moment.
struct GpuTelemetry {
  int32_t index = 0;
  std::string uuid;
  int32_t utilization_pct = 0;  // 0..100
  int64_t memory_used_mib = 0;
  int64_t memory_total_mib = 0;
  bool healthy = true;
  std::string health_reason;  // why not healthy ("uncorrected ECC errors: 3")
};

// What an agent announces when it (re)registers its node.
struct AgentRegistration {
  Node node;             // capacity, labels, rack/block, GPUs (model "" : the server's first model)
  std::string instance;  // a random id of this agent process
  std::string version;
  std::string address;   // for MASTER_ADDR of gangs; "": the address the server sees
  std::string log_host;  // the agent's log port; "" or 0.0.0.0: the address the server sees
  int32_t log_port = 0;
  std::string log_token;                      // the server's bearer token for that port
  std::map<std::string, std::string> status;  // "cgroups", "gpu_discovery": readable states
};

// One heartbeat: telemetry, and the task reports since the last acknowledged one.
struct AgentHeartbeat {
  std::string node;
  std::string instance;
  std::vector<GpuTelemetry> gpus;
  std::vector<TaskReport> reports;
  // The node's container images (its image cache), when it could list them.
  bool images_known = false;
  std::vector<NodeImage> images = {};
};

}  // namespace arbiter

// ExecutionBackend: what a node's executor (LocalExecutor) needs from the control plane. The
// ControlPlane implements it directly for the built-in node of `arbiter server --local-node`; a
// node agent implements it over HTTP (agent/agent_client.h), carrying reports in heartbeats.
//
// Every report names the task's attempt (TaskAssignment::attempt); implementations ignore reports
// about another attempt and reports that are already applied, so a report may be sent twice.
//
// Thread safety: implementations are thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/execution.h"

namespace arbiter::node {

class ExecutionBackend {
 public:
  virtual ~ExecutionBackend() = default;

  // The tasks placed on `node` that should run or stop now.
  virtual std::vector<TaskAssignment> AssignmentsFor(const std::string& node) = 0;
  // Whether AssignmentsFor is the node's whole work (an agent knows it once the server has
  // answered): until then the executor stops nothing for not being listed.
  virtual bool AssignmentsKnown() { return true; }
  // A task's process started.
  virtual void ReportTaskStarted(uint64_t job, int32_t task, uint64_t attempt) = 0;
  // A task's process ended with `exit_code` (128 + signal when killed); `timed_out` when the node
  // stopped it at its walltime.
  virtual void ReportTaskExited(uint64_t job, int32_t task, uint64_t attempt, int32_t exit_code,
                                bool timed_out) = 0;
  // A task's process is gone without an exit status (its node restarted, or went down): the job
  // is lost, and retried by its policy.
  virtual void ReportTaskLost(uint64_t job, int32_t task, uint64_t attempt) = 0;
  // The task's job wrote a checkpoint (its ARBITER_CHECKPOINT_DIR changed): a preemption now
  // loses only what it did since.
  virtual void ReportTaskCheckpointed(uint64_t job, int32_t task, uint64_t attempt) = 0;
  // A task's run failed for a reason the node knows better than an exit code ("ImagePullFailed:
  // <the registry's message>"): it ended with `exit_code`, and the job's reason says `reason`.
  virtual void ReportTaskFailed(uint64_t job, int32_t task, uint64_t attempt, int32_t exit_code,
                                const std::string& reason) {
    (void)reason;
    ReportTaskExited(job, task, attempt, exit_code, false);
  }
  // Something for the job's events ("pulling IMAGE: 40%"), and/or (`image_digest` not empty) the
  // digest of the container image the task runs.
  virtual void ReportTaskNote(uint64_t job, int32_t task, uint64_t attempt,
                              const std::string& message, const std::string& image_digest) {
    (void)job, (void)task, (void)attempt, (void)message, (void)image_digest;
  }
  // The node's container images (its image cache), whenever they change.
  virtual void ReportImages(const std::string& node, const std::vector<NodeImage>& images) {
    (void)node, (void)images;
  }
  // Images the control plane wants this node to hold before a task needs them (a queue head
  // reserved here): pulled in the background.
  virtual std::vector<ImagePull> ImagesToPull(const std::string& node) {
    (void)node;
    return {};
  }
};

}  // namespace arbiter::node

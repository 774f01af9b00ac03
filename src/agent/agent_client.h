// AgentClient: the node agent's link to the server, and the node::ExecutionBackend its
// node::LocalExecutor runs against. One heartbeat thread registers the node, then every heartbeat
// sends telemetry and the task reports not yet acknowledged, and receives the node's assignments.
//
// Reports are queued with increasing sequence numbers and dropped only once a heartbeat answer
// acknowledges them; a heartbeat that fails is retried with the same reports (the server applies
// each once). While the server is away, the executor keeps running what it runs against the last
// assignments, and reports queue up; the heartbeat retries with exponential backoff (capped).
// When the server answers that the node has no session (it restarted), the agent registers
// again at once and delivers what queued meanwhile. With several servers on one store, a server
// that does not answer makes the agent try the next URL, and a follower's 503 naming the leader
// sends it to the leader; a new leader has no session for the node, so the agent registers with
// it as after a restart, and its tasks keep running throughout.
//
// A task reported exited or lost is not handed to the executor again even while older
// assignments still list it (an answer that predates the report).
//
// Thread safety: all public calls are thread-safe.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "common/server_list.h"
#include "common/status.h"
#include "model/execution.h"
#include "node/execution_backend.h"

namespace httplib {
class Client;
}

namespace arbiter::agent {

struct AgentClientOptions {
  // http://host:port (or https://); several servers on one store: their URLs separated by commas,
  // tried in order (the agent follows the leader: common/server_list.h).
  std::string server;
  std::string token;  // a node token
  std::string node;
  DurationMs heartbeat_ms = 2000;
  DurationMs backoff_base_ms = 250;
  DurationMs backoff_max_ms = 10000;
  DurationMs request_timeout_ms = 5000;
  // Between heartbeats, a long poll of /api/v1/agent/watch brings a heartbeat as soon as the
  // server has new assignments for the node (0: no watch, new work waits for the next beat).
  DurationMs watch_ms = 10000;
};

class AgentClient : public node::ExecutionBackend {
 public:
  // What to announce at each registration, and the telemetry of each heartbeat (both called on
  // the heartbeat thread).
  using RegistrationFn = std::function<AgentRegistration()>;
  using TelemetryFn = std::function<std::vector<GpuTelemetry>()>;

  AgentClient(AgentClientOptions options, RegistrationFn registration, TelemetryFn telemetry);
  ~AgentClient() override;

  // Registers the node once. A 4xx answer (bad token, invalid node) is returned as it is: the
  // agent cannot fix it by retrying.
  Status Register();
  // One heartbeat (registering first when needed).
  Status Beat();
  // The heartbeat loop on its own thread.
  void Start();
  void Stop();
  // At shutdown: one last heartbeat to deliver what is queued, within `timeout_ms`.
  void Flush(DurationMs timeout_ms);

  // node::ExecutionBackend (the executor's thread).
  std::vector<TaskAssignment> AssignmentsFor(const std::string& node) override;
  bool AssignmentsKnown() override;
  void ReportTaskStarted(uint64_t job, int32_t task, uint64_t attempt) override;
  void ReportTaskExited(uint64_t job, int32_t task, uint64_t attempt, int32_t exit_code,
                        bool timed_out) override;
  void ReportTaskLost(uint64_t job, int32_t task, uint64_t attempt) override;
  void ReportTaskCheckpointed(uint64_t job, int32_t task, uint64_t attempt) override;
  void ReportTaskFailed(uint64_t job, int32_t task, uint64_t attempt, int32_t exit_code,
                        const std::string& reason) override;
  void ReportTaskNote(uint64_t job, int32_t task, uint64_t attempt, const std::string& message,
                      const std::string& image_digest) override;
  // Sent with every heartbeat from now on.
  void ReportImages(const std::string& node, const std::vector<NodeImage>& images) override;
  // The last heartbeat answer's `pull_images`.
  std::vector<ImagePull> ImagesToPull(const std::string& node) override;

  // Called on the heartbeat thread after an answer changed the assignments (the executor acts
  // on them at once instead of at its next tick). Set before Start().
  void SetOnAssignments(std::function<void()> f) { on_assignments_ = std::move(f); }

  const std::string& instance() const { return instance_; }
  // The server's node timeout, from its last registration answer (0: it did not say).
  DurationMs server_node_timeout_ms() const;
  size_t queued_reports() const;

 private:
  using TaskKey = std::tuple<uint64_t, int32_t, uint64_t>;  // job, task, attempt
  void Enqueue(TaskReport r);
  void Loop();
  void WatchLoop();
  // Waits up to `wait` (a retry's backoff), but returns as soon as the server is ready again.
  void WaitForServer(DurationMs wait);
  // A client of the server with these timeouts (the write timeout is the connect one), TCP_NODELAY
  // and the node token.
  std::shared_ptr<httplib::Client> NewClient(const std::string& url, DurationMs connect_ms,
                                             DurationMs read_ms) const;
  Status Post(const std::string& path, const std::string& body, DurationMs timeout_ms,
              std::string* answer);

  AgentClientOptions options_;
  RegistrationFn registration_;
  TelemetryFn telemetry_;
  std::string instance_;
  ServerList servers_;  // where the server is: the leader, when several share a store

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool registered_ = false;
  DurationMs server_node_timeout_ms_ = 0;
  bool wake_ = false;  // a report is waiting
  std::deque<TaskReport> queue_;
  uint64_t next_seq_ = 1;
  std::vector<TaskAssignment> assignments_;  // from the last heartbeat answer
  std::vector<ImagePull> pulls_;             // from the last heartbeat answer
  bool images_known_ = false;                // the executor listed the node's images
  std::vector<NodeImage> images_;
  std::set<TaskKey> finished_;   // reported exited or lost
  uint64_t assign_version_ = 0;  // of the node's assignments in the last answer
  bool answered_ = false;        // a heartbeat was answered (assign_version_ is the server's)
  std::function<void()> on_assignments_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::thread watch_thread_;
  std::shared_ptr<httplib::Client> watch_client_;  // the watch in flight, stopped by Stop()
};

}  // namespace arbiter::agent

// ControlPlane's side of node agents: registration, heartbeats (telemetry, task reports,
// assignments), down detection, and where a task's logs are.
#include <fmt/format.h>

#include <algorithm>
#include <tuple>

#include "api/agent_codec.h"
#include "server/control_plane.h"
#include "server/control_plane_helpers.h"
#include "server/log_runs.h"

namespace arbiter::server {

using nlohmann::json;

namespace {

// host:port for a URL (IPv6 addresses in brackets).
std::string HostPort(const std::string& host, int32_t port) {
  return host.find(':') != std::string::npos ? fmt::format("[{}]:{}", host, port)
                                             : fmt::format("{}:{}", host, port);
}

using TaskKey = std::tuple<uint64_t, int32_t, uint64_t>;  // job, task, attempt

// The running tasks of `active` on GPU `index` of `node` (lost when it turns unhealthy).
void TasksOnGpu(const std::map<uint64_t, JobEntry*>& active, const std::string& node, int32_t index,
                std::vector<TaskKey>* out) {
  for (const auto& [id, entry] : active) {
    const JobEntry& j = *entry;
    if (!j.holds_capacity()) continue;
    for (size_t t = 0; t < j.placement.size(); ++t) {
      const auto& idx = j.placement[t].gpu_indices;
      if (j.placement[t].node == node && t < j.task_state.size() && j.task_state[t] != 2 &&
          std::find(idx.begin(), idx.end(), index) != idx.end()) {
        out->emplace_back(id, static_cast<int32_t>(t), j.attempt);
      }
    }
  }
}

}  // namespace

Status ControlPlane::CheckNodeToken(const Principal& p, const std::string& node) const {
  if (p.role != Role::kNode) {
    return Forbidden(fmt::format("only node tokens may speak for nodes; {} holds a {} token",
                                 p.user, RoleName(p.role)));
  }
  if (p.node.empty()) {
    return Forbidden(fmt::format(
        "node token {} names no node (it was made before node tokens were bound to one node); "
        "make one for this node with: arbiter token create --user {} --role node --node {}",
        p.token_id, p.user, node));
  }
  if (p.node != node) {
    return Forbidden(fmt::format("node token {} is for node {}; it may not speak for node {}",
                                 p.token_id, p.node, node));
  }
  return Status::Ok();
}

Result<json> ControlPlane::RegisterAgent(const Principal& p, AgentRegistration r,
                                         const std::string& remote_addr) {
  ARBITER_RETURN_IF_ERROR(CheckNodeToken(p, r.node.name));
  std::shared_future<Status> done;
  json out;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!nodes_.builtin.empty() && r.node.name == nodes_.builtin) {
      return Forbidden(fmt::format(
          "node {} is the server's built-in node (--local-node); no agent may register it",
          r.node.name));
    }
    if (dirty_) ARBITER_RETURN_IF_ERROR(CompileLocked());
    // GPU models: the agent names what it found (or nothing, for fake GPUs); the server must
    // know the model, else the cluster cannot be compiled.
    std::string known;
    for (const GpuModel& m : config_.gpu_models) known += (known.empty() ? "" : ", ") + m.name;
    for (size_t i = 0; i < r.node.gpus.size(); ++i) {
      Gpu& g = r.node.gpus[i];
      if (g.model.empty()) {
        if (config_.gpu_models.empty()) {
          return InvalidArgument(fmt::format("gpus[{}].model", i),
                                 "no GPU model is configured on the server; configure one first");
        }
        g.model = config_.gpu_models.front().name;
      }
      const GpuModel* model = nullptr;
      for (const GpuModel& m : config_.gpu_models) {
        if (m.name == g.model) model = &m;
      }
      if (model == nullptr) {
        return InvalidArgument(fmt::format("gpus[{}].model", i),
                               fmt::format("unknown GPU model '{}'; configured: {} (start the "
                                           "agent with --gpu-model to name the model)",
                                           g.model, known.empty() ? "none" : known));
      }
      if (g.memory_mib == 0) g.memory_mib = model->memory_mib;
    }
    ARBITER_RETURN_IF_ERROR(ValidateNode(r.node, ""));
    const TimeMs now = now_();
    auto it = nodes_.all.find(r.node.name);
    const bool existed = it != nodes_.all.end();
    NodeEntry& e = nodes_.all[r.node.name];
    const json before = existed ? NodeJson(e.node) : json();
    const NodeState old_state = existed ? e.node.state : NodeState::kReady;
    NodeState state = old_state;
    if (state == NodeState::kDown) {
      state = e.state_before_down;  // ready again, unless cordoned (the cordon's reason is lost)
      e.state_reason.clear();
      e.state_by.clear();
      e.state_since = now;
    }
    NoteReportedResourcesLocked(r.node);
    if (!e.from_config) e.node = std::move(r.node);  // configured nodes: the config is the truth
    e.node.state = state;
    if (e.agent_session && e.agent_instance != r.instance) {
      PushEventLocked("node", {{"name", e.node.name},
                               {"state", NodeStateName(state)},
                               {"reason", "another agent process registered this node"}});
    }
    e.agent_session = true;
    e.agent_instance = r.instance;
    e.acked_seq = 0;
    e.address = r.address.empty() ? remote_addr : r.address;
    // The server proxies users' log requests to the log port: only ever on the host the
    // registration came from, never one the agent names (a node token must not point the server
    // at an address of its choosing). The port is the agent's.
    e.log_url = r.log_port > 0 ? fmt::format("http://{}", HostPort(remote_addr, r.log_port)) : "";
    e.log_token = r.log_token;
    e.last_heartbeat = now;
    json status = json::object();
    for (const auto& [k, v] : r.status) status[k] = v;
    status["agent"] = {{"instance", r.instance},
                       {"version", r.version},
                       {"address", e.address},
                       {"log_url", e.log_url},
                       {"registered_at", now}};
    e.status = std::move(status);
    const json after = NodeJson(e.node);
    if (after != before) {
      dirty_ = true;
      store::WriteBatch b;
      b.PutNode({e.node.name, after.dump(), std::string(NodeStateName(state)), now});
      PushEventLocked(
          "node", {{"name", e.node.name},
                   {"state", NodeStateName(state)},
                   {"reason", existed ? "its agent registered again" : "registered by its agent"}});
      done = store_->WriteAsync(std::move(b));
    }
    out = {{"name", e.node.name},
           {"state", std::string(NodeStateName(state))},
           {"node_timeout_ms", nodes_.timeout_ms}};
  }
  if (done.valid()) ARBITER_RETURN_IF_ERROR(done.get());
  return out;
}

void ControlPlane::ApplyTaskReport(const TaskReport& r) {
  switch (r.event) {
    case TaskEvent::kStarted:
      ReportTaskStarted(r.job, r.task, r.attempt);
      break;
    case TaskEvent::kExited:
      if (r.message.empty()) {
        ReportTaskExited(r.job, r.task, r.attempt, r.exit_code, r.timed_out);
      } else {
        ReportTaskFailed(r.job, r.task, r.attempt, r.exit_code, r.message);
      }
      break;
    case TaskEvent::kLost:
      ReportTaskLost(r.job, r.task, r.attempt);
      break;
    case TaskEvent::kCheckpointed:
      ReportTaskCheckpointed(r.job, r.task, r.attempt);
      break;
    case TaskEvent::kNote:
      ReportTaskNote(r.job, r.task, r.attempt, r.message, r.image_digest);
      break;
  }
}

Result<json> ControlPlane::Heartbeat(const Principal& p, const AgentHeartbeat& hb) {
  ARBITER_RETURN_IF_ERROR(CheckNodeToken(p, hb.node));
  std::vector<TaskReport> reports;
  std::vector<TaskKey> lost;  // tasks on GPUs that turned unhealthy
  uint64_t max_seq = 0;
  std::shared_future<Status> done;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = nodes_.all.find(hb.node);
    if (it == nodes_.all.end() || !it->second.agent_session ||
        it->second.agent_instance != hb.instance) {
      return FailedPrecondition(fmt::format(
          "node {} has no session for this agent (the server restarted, or another agent "
          "registered the node): register again",
          hb.node));
    }
    NodeEntry& e = it->second;
    const TimeMs now = now_();
    e.last_heartbeat = now;
    bool changed = false;
    std::string reason;
    if (e.node.state == NodeState::kDown) {
      e.node.state = e.state_before_down;
      changed = true;
      reason = "heartbeats again";
    }
    // Telemetry, and GPU health: an unhealthy GPU leaves scheduling (the snapshot skips it) and
    // the tasks on it are lost.
    json telemetry = json::array();
    for (const GpuTelemetry& g : hb.gpus) {
      telemetry.push_back(api::GpuTelemetryToJson(g));
      for (Gpu& gpu : e.node.gpus) {
        if (gpu.index != g.index || gpu.healthy == g.healthy) continue;
        gpu.healthy = g.healthy;
        changed = true;
        reason = fmt::format("GPU {} is {}{}", g.index, g.healthy ? "healthy again" : "unhealthy",
                             g.health_reason.empty() ? "" : ": " + g.health_reason);
        if (!g.healthy) TasksOnGpu(jobs_.active, hb.node, g.index, &lost);
      }
    }
    if (hb.images_known) NodeImagesLocked(hb.node, hb.images);
    if (e.status.is_object()) {
      e.status["gpus"] = std::move(telemetry);
      e.status["last_heartbeat"] = now;
    }
    if (changed) {
      dirty_ = true;
      store::WriteBatch b;
      b.PutNode(
          {e.node.name, NodeJson(e.node).dump(), std::string(NodeStateName(e.node.state)), now});
      PushEventLocked(
          "node",
          {{"name", e.node.name}, {"state", NodeStateName(e.node.state)}, {"reason", reason}});
      done = store_->WriteAsync(std::move(b));
    }
    // Reports not applied yet, about tasks of the job's current run placed on this node (the
    // session is this node's: checked above). Anything else is another node's task, or a run
    // that is over: a node can never change the state of a job it does not run.
    for (const TaskReport& r : hb.reports) {
      max_seq = std::max(max_seq, r.seq);
      if (r.seq != 0 && r.seq <= e.acked_seq) continue;
      auto j = jobs_.all.find(r.job);
      if (j == jobs_.all.end() || r.task < 0) continue;
      const auto t = static_cast<size_t>(r.task);
      if (t >= j->second.placement.size() || j->second.placement[t].node != hb.node ||
          r.attempt != j->second.attempt) {
        continue;
      }
      reports.push_back(r);
    }
  }
  if (done.valid()) ARBITER_RETURN_IF_ERROR(done.get());
  for (const TaskReport& r : reports) ApplyTaskReport(r);
  for (const auto& [job, task, attempt] : lost) ReportTaskLost(job, task, attempt);
  // The version first: a change after it makes the agent's watch return, even if the
  // assignments below already include it.
  uint64_t version = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = nodes_.all.find(hb.node);
    if (it != nodes_.all.end()) version = it->second.assign_version;
  }
  std::vector<TaskAssignment> assignments = AssignmentsFor(hb.node);
  json items = json::array();
  uint64_t acked = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = nodes_.all.find(hb.node);
    if (it != nodes_.all.end() && it->second.agent_instance == hb.instance) {
      it->second.acked_seq = std::max(it->second.acked_seq, max_seq);
      acked = it->second.acked_seq;
    }
    for (const TaskAssignment& a : assignments) items.push_back(api::TaskAssignmentToJson(a));
  }
  json answer = {{"acked_seq", acked}, {"assignments", items}, {"assign_version", version}};
  const std::vector<ImagePull> pulls = ImagesToPull(hb.node);
  if (!pulls.empty()) {
    json list = json::array();
    for (const ImagePull& i : pulls) {
      list.push_back({{"image", i.image}, {"auth", i.auth}, {"insecure", i.insecure}});
    }
    answer["pull_images"] = std::move(list);
  }
  return answer;
}

std::vector<std::string> ControlPlane::DetectDownNodes(DurationMs timeout,
                                                       const std::string& builtin,
                                                       DurationMs reconnect_window) {
  std::vector<std::string> down;
  std::vector<TaskKey> lost;
  std::shared_future<Status> done;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const TimeMs now = now_();
    if (nodes_.down_detection_since == 0) nodes_.down_detection_since = now;
    store::WriteBatch b;
    for (auto& [name, e] : nodes_.all) {
      if (name == builtin || (e.from_config && !e.agent_session)) continue;
      if (e.node.state == NodeState::kDown) continue;
      // Nodes loaded from the store were last heard of when this server started, and have the
      // reconnect window to come back (an agent whose retries have backed off takes a while).
      TimeMs heard = std::max(e.last_heartbeat, nodes_.down_detection_since);
      if (!e.agent_session) {
        heard = std::max(heard, nodes_.down_detection_since +
                                    std::max<DurationMs>(0, reconnect_window - timeout));
      }
      if (now - heard <= timeout) continue;
      e.state_before_down = e.node.state;
      e.node.state = NodeState::kDown;
      dirty_ = true;
      down.push_back(name);
      const std::string reason = fmt::format("no heartbeat for {} ms", now - heard);
      e.state_reason = fmt::format("not responding: {}", reason);
      e.state_by = "";
      e.state_since = now;
      b.PutNode({name, NodeJson(e.node).dump(), "down", now});
      PushEventLocked("node", {{"name", name}, {"state", "down"}, {"reason", reason}});
      for (const auto& [id, entry] : jobs_.active) {
        const JobEntry& j = *entry;
        if (!j.holds_capacity()) continue;
        for (size_t t = 0; t < j.placement.size(); ++t) {
          if (j.placement[t].node == name && t < j.task_state.size() && j.task_state[t] != 2) {
            lost.emplace_back(id, static_cast<int32_t>(t), j.attempt);
          }
        }
      }
    }
    if (!b.empty()) done = store_->WriteAsync(std::move(b));
  }
  if (done.valid()) (void)done.get();
  for (const auto& [job, task, attempt] : lost) ReportTaskLost(job, task, attempt);
  return down;
}

Result<LogSource> ControlPlane::JobLogSource(const Principal& p, uint64_t id, int32_t task) {
  if (p.role == Role::kNode) return Forbidden("nodes may not read jobs");
  std::lock_guard<std::mutex> lock(mu_);
  const JobEntry* found = FindJobLocked(id);
  if (found == nullptr || !CanReadTenantLocked(p, found->spec.tenant)) {
    return NotFound(fmt::format("job {} not found", id));
  }
  const JobEntry& j = *found;
  if (task < 0 || task >= j.spec.tasks) {
    return InvalidArgument(
        "task", fmt::format("must be between 0 and {} (job {} has {} task{})", j.spec.tasks - 1, id,
                            j.spec.tasks, j.spec.tasks == 1 ? "" : "s"));
  }
  const auto t = static_cast<size_t>(task);
  LogSource src;
  src.state = std::string(JobStateName(j.state));
  src.ended = IsFinal(j.state) && !j.stopping;
  if (t < j.placement.size()) {
    src.node = j.placement[t].node;
  } else if (t < j.task_nodes.size()) {
    src.node = j.task_nodes[t];
  }
  src.attempt = j.attempt;
  src.running = j.holds_capacity() && t < j.placement.size() && t < j.task_state.size() &&
                j.task_state[t] != 2;
  LogPortLocked(src.node, &src.agent_url, &src.agent_token);
  return src;
}

void ControlPlane::LogPortLocked(const std::string& node, std::string* url,
                                 std::string* token) const {
  auto n = nodes_.all.find(node);
  if (n == nodes_.all.end() || n->second.log_url.empty()) return;
  *url = n->second.log_url;
  *token = n->second.log_token;
}

Result<std::vector<LogRun>> ControlPlane::JobLogRuns(const Principal& p, uint64_t id,
                                                     int32_t task) {
  auto now = JobLogSource(p, id, task);  // access, and the task's node now
  if (!now.ok()) return now.status();
  // Every change already visible in memory is in the history (JobEvents).
  ARBITER_RETURN_IF_ERROR(store_->Write(store::WriteBatch{}));
  auto events = store_->JobEvents(id);
  if (!events.ok()) return events.status();
  std::vector<LogRun> out;
  std::lock_guard<std::mutex> lock(mu_);
  for (RunHistory& h : RunsFromEvents(*events, task)) {
    LogRun r;
    r.attempt = h.attempt;
    // Admissions recorded before they named their nodes: the node the task ran on last.
    r.node = h.node.empty() ? now->node : std::move(h.node);
    r.after = std::move(h.after);
    LogPortLocked(r.node, &r.agent_url, &r.agent_token);
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace arbiter::server

// NodeRegistry: the nodes the server knows (configured, registered by agents, the built-in one)
// and what their agents said.
//
// Owns: each node's entry (spec, state, agent session, last heartbeat, status, assignment
// version), the CPU and memory each node reported, the built-in node's name and the node timeout.
// Lock: none of its own; the control plane's mutex guards it (ControlPlane::mu_), for the reason
// JobTable gives: a placement and the capacity it takes change together. It calls nothing.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>

#include "model/node.h"
#include "model/time.h"

namespace arbiter::server {

struct NodeEntry {
  Node node;
  bool from_config = false;
  TimeMs last_heartbeat = 0;
  // Node agents (in memory: an agent registers again after a server restart).
  bool agent_session = false;       // an agent registered this node since the server started
  std::string agent_instance = {};  // its process
  uint64_t acked_seq = 0;           // its last applied report
  std::string address = {};         // for MASTER_ADDR
  std::string log_url = {};         // http://host:port of its log port ("": none)
  std::string log_token = {};       // bearer token for it
  NodeState state_before_down = NodeState::kReady;
  nlohmann::json status = nullptr;  // what it says about itself: cgroups, GPU discovery, telemetry
  uint64_t assign_version = 0;      // grows whenever the node's assignments may have changed
  // Why the node is not ready, who made it so and when (since this server started; "" and 0 when
  // unknown): an admin's cordon or drain (with the reason given), or down detection.
  std::string state_reason = {};
  std::string state_by = {};
  TimeMs state_since = 0;
};

struct NodeRegistry {
  std::map<std::string, NodeEntry> all;  // by name
  // CPU and memory each node's agent (or the built-in node) reported at registration: a node in
  // the configuration that leaves them 0 has these (every task counts at least the minimums, so
  // a node of 0 CPUs could run nothing).
  std::map<std::string, std::pair<int64_t, int64_t>> reported;
  std::string builtin;              // --local-node ("": none)
  TimeMs down_detection_since = 0;  // nodes loaded from the store count as heard of then
  DurationMs timeout_ms = 0;

  NodeEntry* Find(const std::string& name) {
    auto it = all.find(name);
    return it == all.end() ? nullptr : &it->second;
  }
  const NodeEntry* Find(const std::string& name) const {
    auto it = all.find(name);
    return it == all.end() ? nullptr : &it->second;
  }
};

}  // namespace arbiter::server

// ServiceTable: the services the server knows and what their controller knows of their replicas.
//
// Owns: each service (its spec, revisions and traffic: the durable part, model/service.h) and,
// in memory only, its replicas' controller state (draining, why they ended, probe findings), its
// replacement backoff and its recent events. A replica is an ordinary job (JobTable); a service
// lists the ids of its live replicas, rebuilt from the jobs' service links at load. Lock: none of
// its own; the control plane's mutex guards it (ControlPlane::mu_), because starting or stopping
// a replica changes a job and its service in one step. It calls nothing.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <string>

#include "model/service.h"
#include "model/time.h"

namespace arbiter::server {

struct ReplicaState {
  uint64_t job = 0;
  int64_t revision = 0;
  bool ready = false;     // readiness passed (the prober's last word)
  bool draining = false;  // out of the routes, stopped at drain_until
  TimeMs drain_until = 0;
  bool removed = false;        // the controller stopped it on purpose (not a failure)
  std::string reason;          // why it is not ready, or why it ended
  TimeMs ended_ms = 0;         // > 0: its job ended; listed as failed for a while
  std::string restart_reason;  // set when the controller restarts it (liveness)
};

struct ServiceEvent {
  TimeMs at_ms = 0;
  std::string message;
};

struct ServiceEntry {
  Service service;
  std::map<uint64_t, ReplicaState> replicas;  // by job id: live ones, and ended ones for a while
  int32_t failures = 0;                       // replicas that failed in a row (backoff)
  TimeMs next_start_ms = 0;                   // no replica starts before (backoff)
  std::string blocked;                        // why replicas cannot be started now ("" : they can)
  std::deque<ServiceEvent> events;            // the last kMaxEvents, oldest first
  static constexpr size_t kMaxEvents = 50;
  int32_t restarts = 0;  // replicas replaced after failures, since the server started
};

struct ServiceTable {
  std::map<std::string, ServiceEntry> all;  // by name (names are cluster-unique)

  ServiceEntry* Find(const std::string& name) {
    auto it = all.find(name);
    return it == all.end() ? nullptr : &it->second;
  }
  const ServiceEntry* Find(const std::string& name) const {
    auto it = all.find(name);
    return it == all.end() ? nullptr : &it->second;
  }
};

}  // namespace arbiter::server

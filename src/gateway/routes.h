// The routing table the gateway learns from the server (GET /api/v1/gateway/routes) or reads
// from a file (--routes-file): plain values and their JSON form. The contract is
// docs/services.md, "The gateway".
//
// Thread safety: plain values.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace arbiter::gateway {

struct ReplicaRoute {
  std::string id;       // the replica's job id: X-Arbiter-Replica
  std::string address;  // HOST:PORT ([V6]:PORT)
};

struct RevisionRoute {
  int64_t revision = 0;
  double percent = 0;                  // share of the service's traffic; may be fractional
  std::vector<ReplicaRoute> replicas;  // ready, not draining
};

struct ServiceRoute {
  std::string name;
  std::string tenant;
  std::vector<std::string> hosts;  // Host-header routes, lower case, no port
  int64_t max_concurrency = 0;     // per replica; 0: unlimited
  int64_t queue_max = 1000;        // requests that may wait for a free replica
  int64_t queue_timeout_ms = 30000;
  std::vector<RevisionRoute> revisions;
};

struct RouteTable {
  int64_t version = 0;
  std::vector<ServiceRoute> services;
};

// Parses the routes endpoint's body. Unknown fields are ignored (a newer server may add some);
// wrong types, missing names, bad addresses, duplicate services or hosts are errors naming the
// field ("services[2].revisions[0].replicas[1].address").
Result<RouteTable> ParseRouteTable(std::string_view json);

// The JSON the routes endpoint answers with (what ParseRouteTable reads).
std::string RouteTableJson(const RouteTable& table);

// HOST:PORT split; false when there is no port 1-65535 or no host. "[::1]:80" gives "::1".
bool SplitHostPort(std::string_view address, std::string* host, int* port);

// A Host header's host: lower case, without the port ("Chat.Example.com:8080" ->
// "chat.example.com",
// "[::1]:80" -> "[::1]").
std::string NormalizeHost(std::string_view host);

}  // namespace arbiter::gateway

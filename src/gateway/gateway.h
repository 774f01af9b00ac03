// The gateway of online services: an HTTP/1.1 reverse proxy in front of the replicas of every
// service, routing /s/NAME/... and Host-header routes, balancing over revisions and replicas,
// queueing when every replica is busy, retrying once on another replica, and counting
// (docs/services.md, "The gateway").
//
// It learns its routing table from the server (GET /api/v1/gateway/routes, long-polled) or from
// a file, and posts its counters to the server (POST /api/v1/gateway/stats) every stats
// interval. Several gateways may serve the same cluster: each keeps its own table and posts its
// own windows.
//
// Thread safety: Start and Stop from one thread; the accessors and SetRoutes from any.
// This header does not include Boost: the data path lives in proxy.h.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "common/status.h"

namespace arbiter::gateway {

struct GatewayOptions {
  std::string listen = "127.0.0.1:0";  // HOST:PORT; port 0: any free port
  std::string server_url;              // http://HOST:PORT of `arbiter server`; "" : none
  std::string token;                   // bearer token for the server (admin or gateway role)
  std::string routes_file;  // a fixed table, same JSON as the routes endpoint ("" : none)
  int threads = 0;          // io threads; 0: the hardware's threads
  std::string id;           // the gateway's name in the stats; "" : HOSTNAME:PORT
  int64_t stats_interval_ms = 10000;
  // Each service's load (in flight or waiting, requests/s) is posted every this long, and at
  // once when a request waits for a service with no replica (autoscaling; 0: never).
  int64_t load_interval_ms = 1000;
  int64_t routes_wait_ms = 30000;  // the long poll's wait
  int64_t connect_timeout_ms = 2000;
  int64_t upstream_timeout_ms = 300000;
  int64_t client_idle_timeout_ms = 75000;
  int64_t max_body_bytes = int64_t{64} << 20;
  int64_t eject_ms = 1000;
};

class Gateway {
 public:
  explicit Gateway(GatewayOptions options);
  ~Gateway();  // stops
  Gateway(const Gateway&) = delete;
  Gateway& operator=(const Gateway&) = delete;

  // Reads the routes file (if any), raises the open-files limit to its hard limit, listens,
  // starts the io threads and, with a server, the routes poll (waiting up to 2 s for a first
  // table) and the stats posts. Errors name the option ("listen", "routes_file").
  Status Start();
  int port() const;
  // HOST:PORT as listened on.
  std::string address() const;

  // Replaces the routing table (the routes endpoint's JSON). Errors name the field.
  Status SetRoutes(const std::string& json);
  int64_t routes_version() const;

  // GET /metrics: Prometheus text.
  std::string metrics_text() const;

  // Stops polling and posting (one last stats post, bounded by 2 s), closes the listening
  // sockets and every connection, joins the threads. Idempotent.
  void Stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace arbiter::gateway

// The gateway's data path: N io threads, each with its own io_context, its own acceptor on the
// shared port (SO_REUSEPORT: the kernel spreads new connections over them), its own pools of
// keep-alive connections to replicas and its own copy of the current routing table. A request
// stays on the thread that accepted its connection from arrival to answer; threads share only
// the replicas' outstanding counts (atomics) and the services' wait queues (touched when a
// service is saturated).
//
// Thread safety: Listen, Start and Stop from one controlling thread; Publish from any thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "gateway/balancer.h"
#include "gateway/stats.h"

namespace arbiter::gateway {

struct ProxySettings {
  int64_t connect_timeout_ms = 2000;         // to a replica; a failed connect ejects it
  int64_t upstream_timeout_ms = 300000;      // a replica's silence while answering: 504
  int64_t client_idle_timeout_ms = 75000;    // a client connection between requests
  int64_t client_send_timeout_ms = 60000;    // a client that does not read its answer
  int64_t upstream_idle_timeout_ms = 30000;  // a pooled connection to a replica
  int64_t max_body_bytes = int64_t{64} << 20;
  int64_t eject_ms = 1000;             // how long a replica that failed a connect is skipped
  size_t max_idle_per_replica = 1024;  // pooled connections per replica per io thread
};

class Proxy {
 public:
  // `metrics_text` answers GET /metrics (called on an io thread).
  Proxy(int threads, ProxySettings settings, Stats& stats,
        std::function<std::string()> metrics_text);
  ~Proxy();
  Proxy(const Proxy&) = delete;
  Proxy& operator=(const Proxy&) = delete;

  // Binds every io thread's acceptor to HOST:PORT (port 0: one the kernel picks).
  Status Listen(const std::string& host, int port);
  int port() const { return port_; }
  void Start();
  // Closes the acceptors, stops the io threads and joins them. Idempotent.
  void Stop();

  // Makes `table` the one every io thread routes by (each picks it up before its next request),
  // then wakes the requests waiting in a queue of `previous` or `table` so that they try the
  // new replicas.
  void Publish(std::shared_ptr<const Table> table, const Table* previous);

  int threads() const { return static_cast<int>(workers_.size()); }
  int64_t open_connections() const;

  // One io thread (internal to proxy.cc).
  class Worker;

 private:
  ProxySettings settings_;
  std::function<std::string()> metrics_text_;
  std::vector<std::unique_ptr<Worker>> workers_;
  int port_ = 0;
  bool started_ = false;
  bool stopped_ = false;
};

}  // namespace arbiter::gateway

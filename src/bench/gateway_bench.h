// `arbiter bench gateway`: the gateway's throughput and latency next to nginx's, in front of the
// same replicas.
//
// Starts N arbiter-echo-server replicas, `arbiter gateway` with a routes file naming them (as
// one service, /s/bench/), and nginx as a reverse proxy to them (keep-alive upstream, HTTP/1.1,
// as many workers as the gateway has io threads), all on loopback in a temporary folder. For
// each concurrency it runs the same closed-loop load (http_load.h: that many keep-alive
// connections, one request in flight on each) three ways: straight to the replicas (round robin
// by connection), through the gateway, through nginx; and prints requests per second, p50 and
// p99 latency of each.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace arbiter::bench {

struct GatewayBenchOptions {
  int replicas = 4;
  std::vector<int> concurrency = {64, 1000};
  int64_t requests = 50000;     // per row, after a warm-up on the same connections
  int delay_ms = 0;             // each replica waits this long before it answers
  int threads = 0;              // the gateway's io threads and nginx's workers (0: hardware's)
  int rounds = 3;               // runs of each row, interleaved; the best (highest rps) is kept
  std::string binary;           // the arbiter executable ("" : this process's own)
  std::string echo_server;      // "" : arbiter-echo-server beside the arbiter executable
  std::string nginx = "nginx";  // found on PATH or in /usr/sbin; absent: the nginx rows are skipped
  bool keep = false;            // keep the temporary folder (logs, configurations)
  bool json = false;
};

int RunGatewayBench(const GatewayBenchOptions& options);

}  // namespace arbiter::bench

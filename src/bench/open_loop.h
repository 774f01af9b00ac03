// An open-loop HTTP/1.1 load generator: each request is sent at its own scheduled time, whether
// or not earlier ones were answered (arrivals as a service sees them, unlike http_load.h's closed
// loop). One thread with epoll drives a pool of keep-alive connections that grows as requests
// overlap; a request's latency runs from its scheduled time, so time it spent waiting for a
// connection counts (no coordinated omission).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "bench/http_load.h"

namespace arbiter::bench {

struct OpenLoopOptions {
  int max_connections = 2000;  // beyond, a due request waits for a connection to come free
  int timeout_ms = 60000;      // per request, from when it is sent
  int expect_status = 200;
};

struct OpenLoopOutcome {
  double latency_ms = 0;  // scheduled time to the answer's last byte
  int status = 0;         // 0: no answer (refused, broken, timed out)
};

struct OpenLoopResult {
  std::vector<OpenLoopOutcome> outcomes;  // by request index
  int connections_opened = 0;
  std::string first_error;
};

// Sends request i (bytes from `request_bytes(i)`) at `start + at_s[i]`; returns when every one
// is answered or has failed.
OpenLoopResult RunOpenLoop(const LoadTarget& target, const std::vector<double>& at_s,
                           const std::function<std::string(int64_t)>& request_bytes,
                           const OpenLoopOptions& options,
                           std::chrono::steady_clock::time_point start);

}  // namespace arbiter::bench

// `arbiter bench submit`: durable submissions per second against a running server.
#pragma once

#include <string>

namespace arbiter::bench {

struct SubmitBenchOptions {
  std::string server = "http://127.0.0.1:8080";
  std::string token;
  std::string queue;
  int jobs = 10000;
  int concurrency = 8;
  bool json = false;
};

// Submits `jobs` one-GPU jobs from `concurrency` keep-alive connections; every 201 is a durable
// acknowledgement. Prints jobs_per_sec and latency percentiles; returns the exit code.
int RunSubmitBench(const SubmitBenchOptions& options);

}  // namespace arbiter::bench

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
  int batch = 1;  // jobs per request; > 1: POST /api/v1/jobs/batch
  bool json = false;
};

// Submits `jobs` one-GPU jobs over `concurrency` keep-alive connections (one thread, epoll:
// bench/http_load.h), one per request or
// `batch` per request; every 201 is a durable acknowledgement of its jobs. Prints jobs_per_sec
// and latency percentiles (per request); returns the exit code.
int RunSubmitBench(const SubmitBenchOptions& options);

}  // namespace arbiter::bench

// `arbiter bench e2e`: end-to-end packing of real jobs on a real server and real agents.
//
// Starts `arbiter server` and N `arbiter agent` processes with fake GPUs on loopback (in a
// temporary folder), cordons every node, submits a fixed mix of `sleep` jobs needing 1, 2, 4 or
// 8 GPUs, uncordons every node at once, and waits for the last job to end. The mix comes from
// the generator of the Slurm comparison in docs/benchmarks.md (x = x * 1103515245 + 12345 mod
// 2^31 from 12345, size = {1,2,4,8}[(x >> 16) mod 4]), so both systems run the same jobs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace arbiter::bench {

struct E2eBenchOptions {
  std::string binary;  // the arbiter executable to start ("" : this process's own)
  int agents = 16;
  int gpus_per_agent = 8;
  int jobs = 1000;
  double job_seconds = 1;       // each job runs `sleep job_seconds`
  int walltime_seconds = 60;    // as the Slurm run's `-t 1`
  int heartbeat_ms = 2000;      // the agents' default
  int cycle_interval_ms = 200;  // the server's default
  int submit_concurrency = 8;
  int timeout_seconds = 600;  // for the whole run, after the release
  bool keep = false;          // keep the temporary folder (logs, the store)
  bool json = false;
};

// The job sizes (GPUs) of the mix, in submission order.
std::vector<int> MixedJobSizes(int jobs);

int RunE2eBench(const E2eBenchOptions& options);

}  // namespace arbiter::bench

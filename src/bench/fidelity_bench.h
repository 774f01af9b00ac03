// `arbiter bench plan-fidelity`: how faithfully the what-if replay (POST /api/v1/plan,
// docs/simulator.md "Fidelity of the replay") reproduces what really happened.
//
// Starts `arbiter server` and N `arbiter agent` processes with fake GPUs on loopback (in a
// temporary folder) with three queues of two tenants, guarantees that lend what is idle, and
// three priority classes (the high ones preempt); submits a seeded stream of `sleep` jobs over
// time (1 to 8 GPUs, some gangs of 2 or 4 tasks of 8 GPUs, Poisson arrivals); waits for every job
// to end; then asks the server for the unchanged replay of that history and prints, per queue,
// the recorded and replayed wait p50/p90 and their difference.
#pragma once

#include <cstdint>
#include <string>

namespace arbiter::bench {

struct FidelityBenchOptions {
  std::string binary;  // the arbiter executable to start ("": this process's own)
  int agents = 4;
  int gpus_per_agent = 8;
  int jobs = 300;
  double load = 1.3;            // offered GPU-seconds per second / GPUs
  double mean_job_seconds = 3;  // sleeps are uniform in [1/3, 5/3] x mean
  int heartbeat_ms = 2000;
  int cycle_interval_ms = 200;
  uint64_t seed = 7;
  int timeout_seconds = 900;
  bool keep = false;
  bool json = false;
};

int RunFidelityBench(const FidelityBenchOptions& options);

}  // namespace arbiter::bench

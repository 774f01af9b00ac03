// `arbiter bench history`: a server's start and reads over a year of job history.
//
// Writes the history straight into a store (big batches: N finished jobs over 50 tenants and 500
// queues, spread over the last 365 days, each with its job events and usage record, plus M live
// pending jobs), then starts the real server on it (a child process, port 0) and measures what a
// year of history costs it: RSS after the start, the time until /readyz answers, two reports over
// the history and the first page of one user's job list over all of it (docs/benchmarks.md).
//
// Thread safety: run once per process.
#pragma once

#include <cstdint>
#include <string>

namespace arbiter::bench {

struct HistoryBenchOptions {
  int64_t jobs = 100000;  // finished jobs of the year
  int64_t live = 1000;    // pending jobs
  int64_t batch = 20000;  // jobs per write batch (with their events and usage)
  std::string store;      // a store URL (postgres://...); "": SQLite in the bench's folder
  std::string dir;        // the bench's folder ("": a temporary one, removed unless --keep)
  bool reports = true;    // time the two reports (they read every stored event today)
  bool keep = false;
  bool json = false;
};

int RunHistoryBench(const HistoryBenchOptions& options);

}  // namespace arbiter::bench

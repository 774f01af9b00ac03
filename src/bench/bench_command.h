// `arbiter bench`: the real scheduling core on a synthetic cluster and backlog, timed.
#pragma once

#include <cstdint>
#include <string>

#include "bench/synthetic.h"

namespace arbiter::bench {

struct BenchOptions {
  SyntheticSpec spec;
  std::string policy = "binpack";
  bool json = false;
};

// Runs the benchmark and prints its figures to stdout; returns the process exit code.
int RunBench(const BenchOptions& options);

}  // namespace arbiter::bench

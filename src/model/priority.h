// Priority classes: a value, and separately whether jobs of the class can be preempted.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace arbiter {

struct PriorityClass {
  std::string name;
  int32_t value = 0;
  bool preemptible = true;
  // A job of this class runs at least this long before it may be preempted.
  int64_t min_runtime_seconds = 300;
  // Time between SIGTERM and SIGKILL when a job of this class is preempted.
  int64_t grace_period_seconds = 30;
  // Jobs of this class may preempt preemptible work of lower priority in any queue (production
  // inference), not only in their own queue.
  bool preempts_anywhere = false;
  // Who may submit jobs of this class: a job whose tenant is in allowed_tenants, or whose queue
  // (or a queue above it) is in allowed_queues. Both empty: every job.
  std::vector<std::string> allowed_tenants;
  std::vector<std::string> allowed_queues;
};

}  // namespace arbiter

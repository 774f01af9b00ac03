// Tenants and the queue tree, as configured.
//
// A tenant is a top-level node; queues nest under it (a queue may have child queues). Each node
// has, per resource and optionally per GPU model:
//   guaranteed     never taken away while used by the node's own work
//   max            the ceiling of the node's total usage, borrowing included
//   lending_limit  how much of the node's idle guaranteed capacity others may borrow
// and a weight for sharing what is idle. Jobs are submitted to leaf queues.
//
// Resource keys: "cpu" (milli-cores), "memory" (MiB), "gpu" (milli-GPU, any model) and
// "gpu:<model>" (milli-GPU of one model). A key a node does not mention leaves that resource
// unconstrained at that node.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

namespace arbiter {

struct QuotaLimits {
  std::optional<int64_t> guaranteed;
  std::optional<int64_t> max;
  std::optional<int64_t> lending_limit;
  bool operator==(const QuotaLimits&) const = default;
};

struct FairShareDecay {
  int64_t half_life_seconds = 0;  // 0: no decayed history, current usage only
  bool operator==(const FairShareDecay&) const = default;
};

struct QueueSpec {
  std::string name;
  std::string parent;  // empty for a tenant
  bool is_tenant = false;
  std::map<std::string, QuotaLimits> quota;  // by resource key
  // Weight for sharing idle capacity; a positive ratio (not a quantity), in thousandths.
  int64_t weight_milli = 1000;
  FairShareDecay decay;
  int64_t default_walltime_seconds = 0;    // 0: none
  std::vector<std::string> allowed_types;  // empty: all job types
  // Other names a submission may use for this queue (Slurm partition names: gpu_H100); unique
  // across all queues and aliases, compared without case. Not the scheduler's concern.
  std::vector<std::string> aliases;
};

}  // namespace arbiter

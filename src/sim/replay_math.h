// Small arithmetic shared by the replay and its statistics (internal to src/sim).
#pragma once

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "sim/replay.h"

namespace arbiter::sim::replay_math {

__extension__ using Int128 = __int128;

inline constexpr TimeMs kNever = std::numeric_limits<TimeMs>::max();
inline constexpr double kMsPerHour = 3600.0 * 1000.0;
inline constexpr TimeMs kMsPerDay = 24 * 3600 * 1000;

inline std::string JoinNames(const std::vector<std::string>& names) {
  return fmt::format("{}", fmt::join(names, ", "));
}

// GPU milli-seconds a job asks for: tasks x GPUs x gpu_milli x run time (walltime when shorter).
inline Int128 GpuDemand(const TraceJob& j) {
  const int64_t run = j.walltime > 0 ? std::min(j.duration, j.walltime) : j.duration;
  return Int128{j.tasks} * j.resources.total_gpu_milli() * run;
}

inline double Percent(Int128 num, Int128 den) {
  if (den <= 0) return 0;
  return 100.0 * static_cast<double>(num) / static_cast<double>(den);
}

// Jain's fairness index (sum x)^2 / (n sum x^2); 1 for no values or all zero.
inline double Jain(const std::vector<double>& x) {
  double sum = 0;
  double squares = 0;
  for (double v : x) {
    sum += v;
    squares += v * v;
  }
  if (x.empty() || squares == 0) return 1;
  return sum * sum / (static_cast<double>(x.size()) * squares);
}

// A queue's entitlement in GPU milli: the guarantee of any model, or the sum of the per-model
// ones when larger.
inline int64_t Entitlement(const core::QuotaNode& node, const core::Cluster& cluster) {
  int64_t per_model = 0;
  for (size_t m = 0; m < cluster.models().size(); ++m) {
    per_model += node.guaranteed[core::ModelDim(GpuModelId(static_cast<uint16_t>(m)))];
  }
  return std::max(node.guaranteed[core::kDimGpu], per_model);
}

inline double Seconds(TimeMs ms) { return static_cast<double>(ms) / 1000.0; }

}  // namespace arbiter::sim::replay_math

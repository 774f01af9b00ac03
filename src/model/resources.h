// Resource quantities in fixed point. Never double for a quantity:
//   GPU        milli-GPU (1000 = one whole GPU)
//   GPU memory MiB
//   CPU        milli-cores (1000 = one core)
//   RAM        MiB
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"

namespace arbiter {

inline constexpr int64_t kMilliPerGpu = 1000;
inline constexpr int64_t kMilliPerCpu = 1000;

// What one task of a job asks for. Either whole GPUs (`gpus` >= 1, `gpu_milli` == 1000) or a share
// of one GPU (`gpus` == 1, 0 < `gpu_milli` < 1000, usually with `gpu_memory_mib` > 0), or no GPU.
struct TaskResources {
  int32_t gpus = 0;            // number of GPUs
  int32_t gpu_milli = 1000;    // share of each GPU, 1..1000
  int64_t gpu_memory_mib = 0;  // GPU memory needed on each GPU (0: any)
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;

  bool fractional() const { return gpus == 1 && gpu_milli < kMilliPerGpu; }
  int64_t total_gpu_milli() const { return gpus == 0 ? 0 : int64_t{gpus} * gpu_milli; }

  bool operator==(const TaskResources&) const = default;
};

// Checks ranges and the whole-or-fraction rule. `field` prefixes error fields ("resources").
Status ValidateTaskResources(const TaskResources& r, const std::string& field);

// "2 GPU, 16 CPU, 64 GiB" style summary for messages.
std::string DescribeTaskResources(const TaskResources& r);

// Formats milli-units as a decimal: 2500 -> "2.5", 8000 -> "8".
std::string FormatMilli(int64_t milli);

}  // namespace arbiter

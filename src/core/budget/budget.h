// Budgets: GPU-hours charged as jobs run, priced per GPU model.
//
// A tenant may have a GPU-hour budget per period; usage is charged as it runs:
//   gpu_milli_ms += sum over its running tasks of (milli-GPU held) x dt
//   cost_milli   += gpu_milli_ms x price_milli_per_hour / (1000 x 3,600,000)
// (fixed point: milli-GPU x milliseconds; 1 GPU-hour = 1000 x 3,600,000). When the budget is spent,
// the tenant's policy decides: kBlock (no new starts, verdict BudgetExhausted) or kBestEffort (new
// jobs run at the lowest priority and preemptible). The driver meters and resets per period; the
// arithmetic lives here so that the server and the simulator charge alike.
#pragma once

#include <cstdint>
#include <vector>

#include "core/cluster.h"
#include "core/quota/quota_tree.h"
#include "core/types.h"

namespace arbiter::core {

inline constexpr int64_t kGpuMilliMsPerGpuHour = int64_t{1000} * 3600 * 1000;

struct TenantUsage {
  int64_t gpu_milli_ms = 0;  // GPU time held
  int64_t cost_micro = 0;    // cost in millionths of the currency
};

// Adds dt of the running jobs' GPU time to their tenants' usage (indexed by the tenant's QueueId).
void AccrueUsage(const Cluster& cluster, const QuotaTree& tree,
                 const std::vector<RunningJob>& running, DurationMs dt,
                 std::vector<TenantUsage>* usage);

// Whether `used` has reached a budget of `budget_gpu_hours` (0: no budget).
bool BudgetSpent(const TenantUsage& used, int64_t budget_gpu_hours);

}  // namespace arbiter::core

#include "core/budget/budget.h"

namespace arbiter::core {

void AccrueUsage(const Cluster& cluster, const QuotaTree& tree,
                 const std::vector<RunningJob>& running, DurationMs dt,
                 std::vector<TenantUsage>* usage) {
  if (usage->size() < tree.size()) usage->resize(tree.size());
  for (const RunningJob& r : running) {
    int64_t milli = 0;
    for (const TaskPlacement& t : r.tasks) {
      for (const GpuShare& g : t.gpus) milli += g.milli;
    }
    const int64_t held = milli * dt;
    TenantUsage& u = (*usage)[tree.node(r.queue).tenant.value()];
    u.gpu_milli_ms += held;
    if (r.model != kNoModel) {
      // price is milli-currency per GPU-hour: cost_micro = held x price x 1000 / (GPU-hour).
      const int64_t price = cluster.models()[r.model.value()].price_milli_per_hour;
      __extension__ using I128 = __int128;
      u.cost_micro +=
          static_cast<int64_t>(static_cast<I128>(held) * price * 1000 / kGpuMilliMsPerGpuHour);
    }
  }
}

bool BudgetSpent(const TenantUsage& used, int64_t budget_gpu_hours) {
  return budget_gpu_hours > 0 && used.gpu_milli_ms >= budget_gpu_hours * kGpuMilliMsPerGpuHour;
}

}  // namespace arbiter::core

#include "core/types.h"

namespace arbiter::core {

QuotaVec JobQuotaRequest(const TaskResources& per_task, int32_t tasks, GpuModelId model) {
  QuotaVec q;
  q[kDimCpu] = per_task.cpu_milli * tasks;
  q[kDimMemory] = per_task.memory_mib * tasks;
  q[kDimTasks] = tasks;
  const int64_t gpu = per_task.total_gpu_milli() * tasks;
  q[kDimGpu] = gpu;
  if (gpu > 0 && model != kNoModel) q[ModelDim(model)] = gpu;
  return q;
}

}  // namespace arbiter::core

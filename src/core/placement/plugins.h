// The built-in filter and score plugins. Each is small and stateless; see framework.h.
#pragma once

#include <memory>
#include <string_view>
#include <vector>

#include "core/placement/framework.h"

namespace arbiter::core {

// All built-in filters in their evaluation order (cheap and decisive first).
std::vector<std::string_view> BuiltinFilterNames();
std::vector<std::string_view> BuiltinScoreNames();
std::unique_ptr<FilterPlugin> MakeFilter(std::string_view name);
std::unique_ptr<ScorePlugin> MakeScore(std::string_view name);

// Shared helpers.
// Fully free usable GPUs of `model` on n with at least `min_memory` MiB each.
int CountFreeWholeGpus(const Snapshot& s, NodeId n, GpuModelId model, int64_t min_memory);
// Whether some usable GPU of `model` on n has `milli` and `memory` free.
bool HasGpuShare(const Snapshot& s, NodeId n, GpuModelId model, int32_t milli, int64_t memory);
// Sum of free GPU milli of usable GPUs on n (all models).
int64_t FreeGpuMilli(const Snapshot& s, NodeId n);

}  // namespace arbiter::core

#include "core/cycle/verdict_messages.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/cycle/verdict.h"

namespace arbiter::core {

std::string_view VerdictCodeName(VerdictCode c) {
  switch (c) {
    case VerdictCode::kQuotaExceeded:
      return "QuotaExceeded";
    case VerdictCode::kBorrowLimit:
      return "BorrowLimit";
    case VerdictCode::kNoFeasibleNode:
      return "NoFeasibleNode";
    case VerdictCode::kGangIncomplete:
      return "GangIncomplete";
    case VerdictCode::kWaitingForReservation:
      return "WaitingForReservation";
    case VerdictCode::kLowerPriority:
      return "LowerPriority";
    case VerdictCode::kBudgetExhausted:
      return "BudgetExhausted";
    case VerdictCode::kSuspended:
      return "Suspended";
    case VerdictCode::kBackoff:
      return "Backoff";
    case VerdictCode::kNotAllowed:
      return "NotAllowed";
    case VerdictCode::kInadmissible:
      return "Inadmissible";
    case VerdictCode::kDependency:
      return "Dependency";
    case VerdictCode::kArrayThrottled:
      return "ArrayThrottled";
  }
  return "Unknown";
}

std::string QuotaFailureMessage(const QuotaTree& tree, const PendingJob& j, const QuotaFailure& f) {
  const QuotaNode& n = tree.node(f.node);
  const char* what = n.is_tenant ? "tenant" : "queue";
  const std::string& dim = tree.DimName(f.dim);
  std::string unit = dim == "cpu"      ? " CPU"
                     : dim == "memory" ? ""
                     : dim == "tasks"  ? " live tasks"
                                       : " GPUs";
  if (f.dim >= kFirstModelDim) unit = " GPUs of " + dim.substr(4);
  if (f.kind == QuotaFailure::Kind::kCapacity) {
    return fmt::format("the cluster has {} of {}{} free; this job needs {}",
                       tree.FormatAmount(f.dim, std::max<int64_t>(0, f.limit - f.used)),
                       tree.FormatAmount(f.dim, f.limit), unit,
                       tree.FormatAmount(f.dim, f.requested));
  }
  if (f.kind == QuotaFailure::Kind::kLendDeadline) {
    return fmt::format(
        "what is free is {} {}'s idle guarantee, lent only to jobs that stop within {} s (its "
        "services' reclaim_deadline_seconds); this job's grace period is {} s",
        what, n.name, f.limit / 1000.0, j.grace_period / 1000.0);
  }
  if (f.kind == QuotaFailure::Kind::kMax) {
    return fmt::format("{} {} uses {} of max {}{}; this job needs {} more", what, n.name,
                       tree.FormatAmount(f.dim, f.used), tree.FormatAmount(f.dim, f.limit), unit,
                       tree.FormatAmount(f.dim, f.requested));
  }
  const QuotaNode& q = tree.node(j.queue);
  return fmt::format(
      "queue {} uses {} of {} guaranteed{} and can get only {} more; this job needs {} "
      "(the rest is in use by other queues or held back by their lending limits)",
      q.name, tree.FormatAmount(f.dim, f.used), tree.FormatAmount(f.dim, q.guaranteed[f.dim]), unit,
      tree.FormatAmount(f.dim, f.limit), tree.FormatAmount(f.dim, f.requested));
}

std::string PlacementFailureMessage(const Snapshot& snap, const Profile& profile,
                                    const Cluster& cluster, const PendingJob& j,
                                    const TaskRequest& req, const PlacementFailure& pf) {
  auto ModelName = [&cluster](GpuModelId m) {
    return m == kNoModel ? std::string() : cluster.models()[m.value()].name;
  };
  const TaskResources& r = j.resources;
  std::string need;
  if (r.gpus == 0) {
    need = fmt::format("{} CPU and {} MiB RAM", FormatMilli(r.cpu_milli), r.memory_mib);
  } else if (r.fractional()) {
    need = fmt::format("{} of a GPU of model {}", FormatMilli(r.gpu_milli), ModelName(req.model));
    if (r.gpu_memory_mib > 0) need += fmt::format(" with {} MiB GPU memory", r.gpu_memory_mib);
  } else {
    need =
        fmt::format("{} GPU{} of model {}", r.gpus, r.gpus == 1 ? "" : "s", ModelName(req.model));
  }
  int best_whole = 0;
  int32_t best_milli = 0;
  const FilterCounts counts = DiagnoseTask(snap, profile, req, &best_whole, &best_milli);
  std::string out;
  if (j.tasks > 1 && pf.tasks_placed > 0) {
    out = fmt::format("gang of {} tasks needs {} per task{}: only {} fit at once", j.tasks, need,
                      j.distinct_nodes ? " on distinct nodes" : "", pf.tasks_placed);
  } else {
    out = fmt::format("needs {} on one node", need);
    if (j.tasks > 1) out += fmt::format(" for each of {} tasks", j.tasks);
    if (r.gpus > 0 && !r.fractional()) {
      out += fmt::format(": best node has {} free", best_whole);
    } else if (r.gpus > 0) {
      out += fmt::format(": best GPU has {} free", FormatMilli(best_milli));
    }
  }
  std::string detail;
  for (size_t c = 1; c < counts.by_code.size(); ++c) {
    if (counts.by_code[c] == 0) continue;
    detail +=
        fmt::format("{}{} node{} {}", detail.empty() ? "" : ", ", counts.by_code[c],
                    counts.by_code[c] == 1 ? "" : "s", FilterCodeName(static_cast<FilterCode>(c)));
  }
  if (!detail.empty()) out += "; " + detail;
  return out;
}

}  // namespace arbiter::core

#include "server/report_inputs.h"

#include <algorithm>
#include <set>
#include <utility>
#include <vector>

#include "store/usage_rollup.h"

namespace arbiter::server::reports {
namespace {

using store::CeilTo;
using store::FloorTo;
using store::kRollupHourMs;

// The windows of the query: [from, to) or its steps.
std::vector<std::pair<int64_t, int64_t>> Windows(const Query& q) {
  std::vector<std::pair<int64_t, int64_t>> out;
  if (q.step_ms <= 0) {
    out.emplace_back(q.from_ms, q.to_ms);
    return out;
  }
  for (int64_t a = q.from_ms; a < q.to_ms; a += q.step_ms) {
    out.emplace_back(a, std::min(q.to_ms, a + q.step_ms));
  }
  return out;
}

// Merges overlapping or touching intervals.
std::vector<std::pair<int64_t, int64_t>> Merge(std::vector<std::pair<int64_t, int64_t>> v) {
  std::sort(v.begin(), v.end());
  std::vector<std::pair<int64_t, int64_t>> out;
  for (const auto& [a, b] : v) {
    if (b <= a) continue;
    if (!out.empty() && a <= out.back().second) {
      out.back().second = std::max(out.back().second, b);
    } else {
      out.emplace_back(a, b);
    }
  }
  return out;
}

// The attribution columns a report grouped as `q` says needs besides the tenant: the group's,
// and the job type when `with_type` (the wait report's second key); all of them when the
// report's default grouping applies.
uint32_t AttributionColumnsOf(const Query& q, bool with_type) {
  if (!q.group_by) return store::kAllAttributionColumns;
  uint32_t columns = with_type ? uint32_t{store::kAttributionJobType} : uint32_t{0};
  switch (*q.group_by) {
    case GroupBy::kTenant:
      break;
    case GroupBy::kType:
      columns |= store::kAttributionJobType;
      break;
    case GroupBy::kQueue:
      columns |= store::kAttributionQueue;
      break;
    case GroupBy::kUser:
      columns |= store::kAttributionUser;
      break;
    case GroupBy::kGpuModel:
      columns |= store::kAttributionGpuModel;
      break;
  }
  return columns;
}

Status ReadUsage(store::Store& store, const Query& q, Inputs& in, bool budgets, uint32_t columns) {
  std::set<std::pair<int64_t, int64_t>> rollups;     // whole hours, read from usage_rollups
  std::vector<std::pair<int64_t, int64_t>> partial;  // partial hours, read from the records
  auto add = [&](int64_t a, int64_t b) {
    const int64_t whole_from = CeilTo(a, kRollupHourMs), whole_to = FloorTo(b, kRollupHourMs);
    if (whole_from >= whole_to) {
      partial.emplace_back(a, b);
      return;
    }
    rollups.emplace(whole_from, whole_to);
    partial.emplace_back(a, whole_from);
    partial.emplace_back(whole_to, b);
  };
  for (const auto& [a, b] : Windows(q)) add(a, b);
  // A budget's used figure: [period start, now).
  if (budgets) {
    for (const TenantBudget& b : in.budgets)
      add(BudgetPeriod(b.period, in.now_ms).first, in.now_ms);
  }
  for (const auto& [a, b] : rollups) {
    auto rows = store.UsageRollup(a, b, columns);
    if (!rows.ok()) return rows.status();
    in.usage_rollups.insert(in.usage_rollups.end(), rows->begin(), rows->end());
  }
  std::set<uint64_t> seen;  // a record may overlap several partial hours
  for (const auto& [a, b] : Merge(std::move(partial))) {
    auto records = store.Usage(a, b);
    if (!records.ok()) return records.status();
    for (store::UsageRecord& u : *records) {
      if (seen.insert(u.seq).second) in.usage.push_back(std::move(u));
    }
  }
  return Status::Ok();
}

}  // namespace

Status ReadReportRecords(store::Store& store, std::string_view name, const Query& q, Inputs& in) {
  in.aggregated = true;
  if (name == "usage" || name == "fairness") {
    // Fairness weighs every attribution; usage sums by its grouping alone.
    return ReadUsage(store, q, in, /*budgets=*/name == "usage",
                     name == "usage" ? AttributionColumnsOf(q, /*with_type=*/false)
                                     : store::kAllAttributionColumns);
  }
  if (name == "forecast") {
    // Each whole day's usage (rollups), and the waits that overlap the days.
    const Query days = ForecastDays(q);
    if (days.to_ms <= days.from_ms) return Status::Ok();
    const uint32_t columns = AttributionColumnsOf(q, /*with_type=*/false);
    ARBITER_RETURN_IF_ERROR(ReadUsage(store, days, in, /*budgets=*/false, columns));
    auto waits = store.WaitFacts(days.from_ms, days.to_ms, columns);
    if (!waits.ok()) return waits.status();
    in.waits = std::move(waits).value();
    return Status::Ok();
  }
  if (name == "wait") {
    auto waits = store.WaitFacts(q.from_ms, q.to_ms, AttributionColumnsOf(q, /*with_type=*/true));
    if (!waits.ok()) return waits.status();
    in.waits = std::move(waits).value();
    return Status::Ok();
  }
  if (name == "failures" || name == "preemptions") {
    auto facts = store.JobFacts(q.from_ms, q.to_ms);
    if (!facts.ok()) return facts.status();
    in.facts = std::move(facts).value();
    return Status::Ok();
  }
  if (name == "serving") {
    auto usage = store.Usage(q.from_ms, q.to_ms);
    if (!usage.ok()) return usage.status();
    in.usage = std::move(usage).value();
  }
  return Status::Ok();
}

}  // namespace arbiter::server::reports

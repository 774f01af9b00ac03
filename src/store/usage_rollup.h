// How usage records become the hourly and daily rows of usage_rollups, and how a period of whole
// hours is read back from them; shared by both stores, so that they split and read alike
// (docs/store.md, "Report aggregates").
//
// A record's [start_ms, end_ms) is cut at every boundary of the span (an hour, a UTC day): the part
// [s, e) gets gpu_milli x (e - s) milli-GPU ms (integers: the parts add up exactly to the record's
// gpu_milli x (end_ms - start_ms)) and cost_micro x (e - s) / (end_ms - start_ms) of its cost.
//
// Thread safety: pure functions.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <tuple>
#include <vector>

#include "store/records.h"

namespace arbiter::store {

inline constexpr int64_t kRollupHourMs = 3'600'000;
inline constexpr int64_t kRollupDayMs = 86'400'000;
// Sixteen UTC days from the epoch's multiples of sixteen days: a year is 23 such rows per group,
// and at most 30 daily and 46 hourly ones around them.
inline constexpr int64_t kRollupSpanMs = 16 * kRollupDayMs;

// floor(t / span) x span, for t >= 0 and t < 0 alike.
inline int64_t FloorTo(int64_t t, int64_t span) {
  const int64_t q = t / span;
  return (q * span > t ? q - 1 : q) * span;
}
inline int64_t CeilTo(int64_t t, int64_t span) {
  const int64_t f = FloorTo(t, span);
  return f == t ? t : f + span;
}

struct RollupPart {
  int64_t span_ms = 0, at_ms = 0;
  int64_t gpu_milli_ms = 0;
  double cost_micro = 0;
};

// The hourly, daily and sixteen-day parts of one record (none when end_ms <= start_ms).
inline std::vector<RollupPart> SplitUsage(const UsageRecord& u) {
  std::vector<RollupPart> out;
  if (u.end_ms <= u.start_ms) return out;
  const double duration = static_cast<double>(u.end_ms - u.start_ms);
  for (int64_t span : {kRollupHourMs, kRollupDayMs, kRollupSpanMs}) {
    for (int64_t at = FloorTo(u.start_ms, span); at < u.end_ms; at += span) {
      const int64_t part = std::min(u.end_ms, at + span) - std::max(u.start_ms, at);
      out.push_back({span, at, u.gpu_milli * part,
                     static_cast<double>(u.cost_micro) * static_cast<double>(part) / duration});
    }
  }
  return out;
}

// One range of rollup rows to read: rows of span_ms with from_ms <= at_ms < to_ms.
struct RollupRange {
  int64_t span_ms = 0, from_ms = 0, to_ms = 0;
};

// The rows that tile [from_ms, to_ms) (whole hours), largest first: the sixteen-day rows of the
// whole sixteen-day spans inside it, the daily rows of the whole UTC days of the rest, the hourly
// rows of what remains. At most five ranges; none when the period is empty.
inline void AddRollupRanges(int64_t from_ms, int64_t to_ms, size_t level,
                            std::vector<RollupRange>& out) {
  static constexpr int64_t kSpans[] = {kRollupSpanMs, kRollupDayMs, kRollupHourMs};
  if (to_ms <= from_ms) return;
  const int64_t span = kSpans[level];
  if (level + 1 == std::size(kSpans)) {
    out.push_back({span, from_ms, to_ms});
    return;
  }
  const int64_t s0 = CeilTo(from_ms, span), s1 = FloorTo(to_ms, span);
  if (s0 >= s1) {
    AddRollupRanges(from_ms, to_ms, level + 1, out);
    return;
  }
  AddRollupRanges(from_ms, s0, level + 1, out);
  out.push_back({span, s0, s1});
  AddRollupRanges(s1, to_ms, level + 1, out);
}
inline std::vector<RollupRange> RollupRanges(int64_t from_ms, int64_t to_ms) {
  std::vector<RollupRange> out;
  AddRollupRanges(from_ms, to_ms, 0, out);
  return out;
}

// Sums per (tenant, queue, user, job_type, gpu_model) of the rows read for the ranges of one
// period, with from_ms and to_ms set to it, in that order.
inline std::vector<UsageRollupRecord> MergeRollupParts(std::vector<UsageRollupRecord> parts,
                                                       int64_t from_ms, int64_t to_ms) {
  auto key = [](const UsageRollupRecord& r) {
    return std::tie(r.tenant, r.queue, r.user, r.job_type, r.gpu_model);
  };
  std::sort(parts.begin(), parts.end(),
            [&](const auto& a, const auto& b) { return key(a) < key(b); });
  std::vector<UsageRollupRecord> out;
  for (UsageRollupRecord& p : parts) {
    if (!out.empty() && key(out.back()) == key(p)) {
      out.back().gpu_milli_ms += p.gpu_milli_ms;
      out.back().cost_micro += p.cost_micro;
      continue;
    }
    p.from_ms = from_ms;
    p.to_ms = to_ms;
    out.push_back(std::move(p));
  }
  return out;
}

}  // namespace arbiter::store

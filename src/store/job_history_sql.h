// The SQL of the job history reads (Store::Load(LoadOptions), ListJobs), shared by both stores:
// the same text in both dialects but for the placeholders ("?1" in SQLite, "$1" in PostgreSQL).
//
// The conditions over finished jobs are written exactly as the partial indexes of
// 0011_job_history.sql write them, so that both planners see that an index covers the query.
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "store/records.h"

namespace arbiter::store {

// "state IN ('succeeded', ...)": the partial indexes' condition.
inline constexpr std::string_view kFinishedSql =
    "state IN ('succeeded', 'failed', 'cancelled', 'timed-out', 'rejected')";
inline constexpr std::string_view kUnfinishedSql =
    "state NOT IN ('succeeded', 'failed', 'cancelled', 'timed-out', 'rejected')";

using SqlParam = std::variant<int64_t, std::string>;

// The WHERE (without the word) and ORDER BY ... LIMIT of a JobQuery; `placeholder(i)` names the
// i-th parameter (1-based), whose value is params[i - 1].
struct JobQuerySql {
  std::string where;
  std::string tail;
  std::vector<SqlParam> params;
};

inline int64_t ClampId(uint64_t id) {
  return static_cast<int64_t>(std::min<uint64_t>(id, std::numeric_limits<int64_t>::max()));
}

inline JobQuerySql BuildJobQuerySql(const JobQuery& q,
                                    const std::function<std::string(size_t)>& placeholder) {
  JobQuerySql out;
  auto add = [&out, &placeholder](SqlParam v) {
    out.params.push_back(std::move(v));
    return placeholder(out.params.size());
  };
  std::vector<std::string> terms;
  if (q.finished_only) terms.emplace_back(kFinishedSql);
  auto any_of = [&](std::string_view col, const std::vector<std::string>& values) {
    if (values.empty()) return;
    std::string list;
    for (const std::string& v : values) list += (list.empty() ? "" : ", ") + add(v);
    terms.push_back(values.size() == 1 ? fmt::format("{} = {}", col, list)
                                       : fmt::format("{} IN ({})", col, list));
  };
  any_of("tenant", q.tenants);
  any_of("\"user\"", q.users);
  any_of("queue", q.queues);
  any_of("state", q.states);
  any_of("type", q.types);
  if (q.after_id > 0) terms.push_back("id > " + add(ClampId(q.after_id)));
  if (q.before_id > 0) terms.push_back("id < " + add(ClampId(q.before_id)));
  if (q.submitted_until_ms > 0) terms.push_back("submitted_at_ms <= " + add(q.submitted_until_ms));
  if (q.updated_since_ms > 0) terms.push_back("updated_at_ms >= " + add(q.updated_since_ms));
  for (const std::string& t : terms) out.where += (out.where.empty() ? "" : " AND ") + t;
  if (out.where.empty()) out.where = "1 = 1";
  const size_t limit = std::min<size_t>(q.limit, 1'000'000);
  out.tail = fmt::format("ORDER BY id {} LIMIT {}", q.newest_first ? "DESC" : "ASC",
                         add(static_cast<int64_t>(limit)));
  return out;
}

// Load(LoadOptions)'s two reads of the jobs table: the live jobs with the finished ones still
// stopping (the index jobs_live), and the latest finished by id (placeholder: the count; a scan of
// the newest ids, which stops after the count: the live jobs among them are all it passes over).
inline std::string LiveJobsWhere(std::string_view contains_fn) {
  return fmt::format("WHERE {} OR {}(status_json, '\"stopping\":true') > 0 ORDER BY id",
                     kUnfinishedSql, contains_fn);
}
inline std::string LatestFinishedWhere(std::string_view p1) {
  return fmt::format("WHERE {} ORDER BY id DESC LIMIT {}", kFinishedSql, p1);
}

// Merges the reads into StoreState::jobs: by id, each job once.
inline void MergeLoadedJobs(std::vector<JobRecord>& jobs, std::vector<JobRecord> more) {
  jobs.insert(jobs.end(), std::make_move_iterator(more.begin()),
              std::make_move_iterator(more.end()));
}
// Of the latest finished jobs, those updated at or after `since_ms` (0: all).
inline void KeepUpdatedSince(std::vector<JobRecord>& jobs, int64_t since_ms) {
  if (since_ms <= 0) return;
  std::erase_if(jobs, [since_ms](const JobRecord& j) { return j.updated_at_ms < since_ms; });
}

inline void SortUniqueJobs(std::vector<JobRecord>& jobs) {
  std::sort(jobs.begin(), jobs.end(),
            [](const JobRecord& a, const JobRecord& b) { return a.id < b.id; });
  jobs.erase(std::unique(jobs.begin(), jobs.end(),
                         [](const JobRecord& a, const JobRecord& b) { return a.id == b.id; }),
             jobs.end());
}

}  // namespace arbiter::store

#include "server/history_retention.h"

#include <fmt/format.h>

#include <map>
#include <nlohmann/json.hpp>
#include <vector>

#include "common/archive.h"
#include "store/usage_rollup.h"

namespace arbiter::server {
namespace {

using nlohmann::json;

constexpr size_t kPageRows = 10'000;

json EventJson(const store::JobEventRecord& e) {
  return {{"table", "job_events"},      {"seq", e.seq},
          {"job_id", e.job_id},         {"at_ms", e.at_ms},
          {"from_state", e.from_state}, {"to_state", e.to_state},
          {"reason", e.reason},         {"detail_json", e.detail_json}};
}

json UsageJson(const store::UsageRecord& u) {
  return {{"table", "usage"},
          {"seq", u.seq},
          {"job_id", u.job_id},
          {"task", u.task},
          {"tenant", u.tenant},
          {"queue", u.queue},
          {"user", u.user},
          {"job_type", u.job_type},
          {"gpu_model", u.gpu_model},
          {"gpu_milli", u.gpu_milli},
          {"gpu_memory_mib", u.gpu_memory_mib},
          {"start_ms", u.start_ms},
          {"end_ms", u.end_ms},
          {"cost_micro", u.cost_micro}};
}

}  // namespace

Result<HistoryRetentionResult> ApplyHistoryRetention(store::Store& store,
                                                     const std::string& archive_dir, int days,
                                                     int64_t now_ms) {
  if (days <= 0) return InvalidArgument("retention_days", "must be > 0");
  HistoryRetentionResult out;
  out.before_ms = store::FloorTo(now_ms, store::kRollupDayMs) - days * store::kRollupDayMs;
  // 1. Events, a page at a time: archive, sync, delete.
  for (uint64_t after = 0;;) {
    auto page = store.EventsBefore(out.before_ms, after, kPageRows);
    if (!page.ok()) return page.status();
    if (page->empty()) break;
    std::map<std::string, std::string> lines;
    for (const store::JobEventRecord& e : *page) {
      lines[ArchiveDay(e.at_ms)] += EventJson(e).dump() + "\n";
    }
    ARBITER_RETURN_IF_ERROR(AppendArchiveDays(archive_dir, "", lines, "retention"));
    after = page->back().seq;
    store::WriteBatch b;
    b.PruneHistory({out.before_ms, after, 0});
    ARBITER_RETURN_IF_ERROR(store.Write(std::move(b)));
    out.events += page->size();
    if (page->size() < kPageRows) break;  // the read went through the rest
  }
  // 2. Usage records, filed under the day they end.
  for (uint64_t after = 0;;) {
    auto page = store.UsageBefore(out.before_ms, after, kPageRows);
    if (!page.ok()) return page.status();
    if (page->empty()) break;
    std::map<std::string, std::string> lines;
    for (const store::UsageRecord& u : *page) {
      lines[ArchiveDay(u.end_ms)] += UsageJson(u).dump() + "\n";
    }
    ARBITER_RETURN_IF_ERROR(AppendArchiveDays(archive_dir, "", lines, "retention"));
    after = page->back().seq;
    store::WriteBatch b;
    b.PruneHistory({out.before_ms, 0, after});
    ARBITER_RETURN_IF_ERROR(store.Write(std::move(b)));
    out.usage += page->size();
    if (page->size() < kPageRows) break;
  }
  return out;
}

}  // namespace arbiter::server

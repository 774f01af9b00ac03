#include "server/history_retention.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>
#include <zlib.h>

#include <ctime>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <vector>

#include "store/usage_rollup.h"

namespace arbiter::server {
namespace {

using nlohmann::json;

Status Unavailable(std::string message) { return {StatusCode::kUnavailable, std::move(message)}; }

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

Status SyncPath(const std::string& path, int flags) {
  const int fd = ::open(path.c_str(), flags | O_CLOEXEC);
  if (fd < 0) return Unavailable(fmt::format("retention: cannot open {} to sync", path));
  const int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0) return Unavailable(fmt::format("retention: cannot sync {}", path));
  return Status::Ok();
}

// Appends each day's lines to DIR/DAY.jsonl.gz as one gzip member, then syncs the files and DIR.
Status AppendDays(const std::string& dir, const std::map<std::string, std::string>& days) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Unavailable(fmt::format("retention: cannot create {}: {}", dir, ec.message()));
  for (const auto& [day, lines] : days) {
    const std::string path = fmt::format("{}/{}.jsonl.gz", dir, day);
    gzFile f = gzopen(path.c_str(), "ab");
    if (f == nullptr) return Unavailable(fmt::format("retention: cannot open {}", path));
    const int wrote = gzwrite(f, lines.data(), static_cast<unsigned>(lines.size()));
    const int closed = gzclose(f);
    if (wrote != static_cast<int>(lines.size()) || closed != Z_OK) {
      return Unavailable(fmt::format("retention: cannot write {}", path));
    }
    ARBITER_RETURN_IF_ERROR(SyncPath(path, O_RDONLY));
  }
  return SyncPath(dir, O_RDONLY | O_DIRECTORY);
}

}  // namespace

std::string ArchiveDay(int64_t ms) {
  const std::time_t s = store::FloorTo(ms, 1000) / 1000;
  std::tm tm{};
  gmtime_r(&s, &tm);
  return fmt::format("{:04d}-{:02d}-{:02d}", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday);
}

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
    ARBITER_RETURN_IF_ERROR(AppendDays(archive_dir, lines));
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
    ARBITER_RETURN_IF_ERROR(AppendDays(archive_dir, lines));
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

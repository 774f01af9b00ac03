#include "common/archive.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <ctime>
#include <filesystem>

namespace arbiter {
namespace {

Status Unavailable(std::string message) { return {StatusCode::kUnavailable, std::move(message)}; }

Status SyncPath(const std::string& path, int flags, std::string_view what) {
  const int fd = ::open(path.c_str(), flags | O_CLOEXEC);
  if (fd < 0) return Unavailable(fmt::format("{}: cannot open {} to sync", what, path));
  const int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0) return Unavailable(fmt::format("{}: cannot sync {}", what, path));
  return Status::Ok();
}

}  // namespace

std::string ArchiveDay(int64_t ms) {
  const std::time_t s = (ms >= 0 ? ms : ms - 999) / 1000;  // floor
  std::tm tm{};
  gmtime_r(&s, &tm);
  return fmt::format("{:04d}-{:02d}-{:02d}", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday);
}

Status AppendArchiveDays(const std::string& dir, std::string_view prefix,
                         const std::map<std::string, std::string>& days, std::string_view what) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Unavailable(fmt::format("{}: cannot create {}: {}", what, dir, ec.message()));
  // The archives hold every tenant's records (on a node: every job's output): the archiving
  // process's alone, whatever its umask, as the folders they come from.
  std::filesystem::permissions(dir, std::filesystem::perms::owner_all,
                               std::filesystem::perm_options::replace, ec);
  if (ec) return Unavailable(fmt::format("{}: cannot restrict {}: {}", what, dir, ec.message()));
  for (const auto& [day, lines] : days) {
    const std::string path = fmt::format("{}/{}{}.jsonl.gz", dir, prefix, day);
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (fd < 0 || ::fchmod(fd, 0600) != 0) {
      if (fd >= 0) ::close(fd);
      return Unavailable(fmt::format("{}: cannot open {}", what, path));
    }
    gzFile f = gzdopen(fd, "ab");  // owns fd from here
    if (f == nullptr) {
      ::close(fd);
      return Unavailable(fmt::format("{}: cannot open {}", what, path));
    }
    // gzwrite takes an unsigned length: large texts go in parts.
    size_t done = 0;
    bool ok = true;
    while (ok && done < lines.size()) {
      const size_t n = std::min<size_t>(lines.size() - done, size_t{1} << 30);
      ok = gzwrite(f, lines.data() + done, static_cast<unsigned>(n)) == static_cast<int>(n);
      done += n;
    }
    const int closed = gzclose(f);
    if (!ok || closed != Z_OK) return Unavailable(fmt::format("{}: cannot write {}", what, path));
    ARBITER_RETURN_IF_ERROR(SyncPath(path, O_RDONLY, what));
  }
  return SyncPath(dir, O_RDONLY | O_DIRECTORY, what);
}

}  // namespace arbiter

#include "node/output_retention.h"

#include <fmt/format.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <vector>

#include "common/archive.h"

namespace arbiter::node {
namespace {

namespace fs = std::filesystem;

int64_t ModifiedMs(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return -1;
  return static_cast<int64_t>(st.st_mtim.tv_sec) * 1000 + st.st_mtim.tv_nsec / 1'000'000;
}

bool ReadWhole(const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream s;
  s << in.rdbuf();
  *out = std::move(s).str();
  return true;
}

std::string Base64(std::string_view in) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((in.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    const uint32_t v = (static_cast<uint8_t>(in[i]) << 16) |
                       (static_cast<uint8_t>(in[i + 1]) << 8) | static_cast<uint8_t>(in[i + 2]);
    for (int shift : {18, 12, 6, 0}) out.push_back(kAlphabet[(v >> shift) & 63]);
  }
  if (i < in.size()) {
    uint32_t v = static_cast<uint8_t>(in[i]) << 16;
    if (i + 1 < in.size()) v |= static_cast<uint8_t>(in[i + 1]) << 8;
    out.push_back(kAlphabet[(v >> 18) & 63]);
    out.push_back(kAlphabet[(v >> 12) & 63]);
    out.push_back(i + 1 < in.size() ? kAlphabet[(v >> 6) & 63] : '=');
    out.push_back('=');
  }
  return out;
}

struct JobFolder {
  uint64_t job = 0;
  std::string state_dir;           // WORK_DIR/jobs/<id>
  std::vector<std::string> files;  // regular files in it, by name
  int64_t newest_ms = -1;          // the newest of the folder and its files
  int64_t bytes = 0;               // the files' bytes
};

// The state folder of job `id` with its files and their newest change; false when unreadable.
bool Inspect(const std::string& dir, JobFolder* f) {
  std::error_code ec;
  f->state_dir = dir;
  f->newest_ms = ModifiedMs(dir);
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    if (!e.is_regular_file(ec) || e.is_symlink(ec)) continue;
    f->files.push_back(e.path().filename().string());
    f->newest_ms = std::max(f->newest_ms, ModifiedMs(e.path().string()));
  }
  std::sort(f->files.begin(), f->files.end());
  return !ec && f->newest_ms >= 0;
}

}  // namespace

Result<OutputRetentionResult> ApplyOutputRetention(
    const std::string& work_dir, int64_t before_ms,
    const std::function<void(uint64_t job, const std::function<void()>& remove)>& remove_if_idle,
    int64_t max_jobs, int64_t max_bytes) {
  OutputRetentionResult out;
  const std::string jobs_dir = work_dir + "/jobs";
  std::error_code ec;
  std::vector<uint64_t> ids;
  for (const fs::directory_entry& e : fs::directory_iterator(jobs_dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.empty() || name.size() > 19 ||
        !std::all_of(name.begin(), name.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      continue;  // executor.heartbeat and anything not a job's folder
    }
    if (e.is_directory(ec) && !e.is_symlink(ec)) ids.push_back(std::stoull(name));
  }
  std::sort(ids.begin(), ids.end());
  // 1. The old jobs' output, up to the bounds, as JSON lines by day.
  std::vector<JobFolder> chosen;
  std::map<std::string, std::string> days;
  int64_t bytes = 0;
  for (uint64_t id : ids) {
    if (static_cast<int64_t>(chosen.size()) >= max_jobs || bytes >= max_bytes) break;
    JobFolder f;
    f.job = id;
    if (!Inspect(fmt::format("{}/{}", jobs_dir, id), &f) || f.newest_ms >= before_ms) continue;
    std::string& lines = days[ArchiveDay(f.newest_ms)];
    for (const std::string& name : f.files) {
      const std::string path = f.state_dir + "/" + name;
      std::string data;
      if (!ReadWhole(path, &data)) {
        return Status{StatusCode::kUnavailable,
                      fmt::format("output retention: cannot read {}", path)};
      }
      nlohmann::json line = {
          {"job", id}, {"file", name}, {"modified_ms", ModifiedMs(path)}, {"bytes", data.size()}};
      line["text"] = data;
      std::string dumped;
      try {
        dumped = line.dump();  // throws on bytes that are not UTF-8
      } catch (const nlohmann::json::type_error&) {
        line.erase("text");
        line["base64"] = Base64(data);
        dumped = line.dump();
      }
      lines += dumped + "\n";
      f.bytes += static_cast<int64_t>(data.size());
    }
    bytes += f.bytes;
    chosen.push_back(std::move(f));
  }
  std::erase_if(days, [](const auto& d) { return d.second.empty(); });
  if (chosen.empty()) return out;
  // 2. The archive, synced, before anything is removed.
  if (!days.empty()) {
    ARBITER_RETURN_IF_ERROR(
        AppendArchiveDays(work_dir + "/archive", "output-", days, "output retention"));
  }
  // 3. Their folders, unless a task of the job came back meanwhile.
  for (const JobFolder& f : chosen) {
    bool removed = false;
    remove_if_idle(f.job, [&] {
      JobFolder again;
      if (Inspect(f.state_dir, &again) && again.newest_ms != f.newest_ms) return;  // written since
      for (const char* sub : {"jobs", "work", "tmp", "checkpoints"}) {
        std::error_code rm;
        fs::remove_all(fmt::format("{}/{}/{}", work_dir, sub, f.job), rm);
      }
      removed = true;
    });
    if (!removed) continue;
    ++out.jobs;
    out.files += static_cast<int64_t>(f.files.size());
    out.bytes += f.bytes;
  }
  return out;
}

}  // namespace arbiter::node

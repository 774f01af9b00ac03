#include "node/output_retention.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <vector>

#include "common/archive.h"
#include "testing/temp_dir.h"

namespace arbiter::node {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr int64_t kDayMs = 86'400'000;
constexpr int64_t kNow = 1'796'000'000'000;  // 2026-11-29

void Write(const std::string& path, const std::string& data, int64_t modified_ms) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path, std::ios::binary) << data;
  const timespec t{static_cast<time_t>(modified_ms / 1000),
                   static_cast<long>(modified_ms % 1000 * 1'000'000)};
  const timespec times[2] = {t, t};
  ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), times, 0), 0) << path;
}

void Age(const std::string& dir, int64_t modified_ms) {
  const timespec t{static_cast<time_t>(modified_ms / 1000), 0};
  const timespec times[2] = {t, t};
  ASSERT_EQ(::utimensat(AT_FDCWD, dir.c_str(), times, 0), 0) << dir;
}

std::vector<json> ReadArchive(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  std::vector<json> out;
  if (f == nullptr) return out;
  std::string text;
  char buf[4096];
  for (int n; (n = gzread(f, buf, sizeof buf)) > 0;) text.append(buf, static_cast<size_t>(n));
  gzclose(f);
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(json::parse(line));
  return out;
}

// A job idle past the retention: its output archived exactly (text, and bytes that are not
// UTF-8 as base64), then its four folders removed; a recent job, a running one and a folder that
// is not a job's stay.
TEST(OutputRetention, ArchivesOldIdleJobsThenRemovesTheirFolders) {
  testing::TempDir dir;
  const std::string w = dir.path();
  const int64_t old = kNow - 40 * kDayMs;
  Write(w + "/jobs/5/task-0.log", "epoch 1 loss 2.31\n", old);
  Write(w + "/jobs/5/task-0.out", std::string("\xff\xfe binary\n", 10), old - 1000);
  Write(w + "/work/5/model.pt", "weights", old);
  Write(w + "/tmp/5/scratch", "x", old);
  Write(w + "/checkpoints/5/step-10", "ckpt", old);
  Age(w + "/jobs/5", old);
  Write(w + "/jobs/6/task-0.log", "still here\n", kNow - 2 * kDayMs);  // recent
  Write(w + "/jobs/7/task-0.log", "running\n", old);                   // old, but runs here
  Age(w + "/jobs/6", kNow - 2 * kDayMs);
  Age(w + "/jobs/7", old);
  Write(w + "/jobs/executor.heartbeat", "", old);

  std::set<uint64_t> asked;
  auto done = ApplyOutputRetention(w, kNow - 30 * kDayMs,
                                   [&](uint64_t job, const std::function<void()>& remove) {
                                     asked.insert(job);
                                     if (job != 7) remove();
                                   });
  ASSERT_TRUE(done.ok()) << done.status().ToString();
  EXPECT_EQ(done->jobs, 1);
  EXPECT_EQ(done->files, 2);
  EXPECT_EQ(done->bytes, 18 + 10);
  EXPECT_EQ(asked, (std::set<uint64_t>{5, 7}));  // 6 is recent: never considered

  for (const char* sub : {"jobs", "work", "tmp", "checkpoints"}) {
    EXPECT_FALSE(fs::exists(fmt::format("{}/{}/5", w, sub))) << sub;
  }
  EXPECT_TRUE(fs::exists(w + "/jobs/6/task-0.log"));
  EXPECT_TRUE(fs::exists(w + "/jobs/7/task-0.log"));
  EXPECT_TRUE(fs::exists(w + "/jobs/executor.heartbeat"));

  // The archive holds every job's output: the executor's alone.
  EXPECT_EQ(fs::status(w + "/archive").permissions(), fs::perms::owner_all);
  EXPECT_EQ(fs::status(w + "/archive/output-" + ArchiveDay(old) + ".jsonl.gz").permissions(),
            fs::perms::owner_read | fs::perms::owner_write);

  // Both jobs the sweep read (5 and 7) are archived under the day of their newest file: 7 stays
  // on disk too, and the next sweep archives it again (a line per copy).
  const std::vector<json> lines =
      ReadArchive(w + "/archive/output-" + ArchiveDay(old) + ".jsonl.gz");
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0]["job"], 5);
  EXPECT_EQ(lines[0]["file"], "task-0.log");
  EXPECT_EQ(lines[0]["text"], "epoch 1 loss 2.31\n");
  EXPECT_EQ(lines[0]["modified_ms"], old);
  EXPECT_EQ(lines[1]["file"], "task-0.out");
  EXPECT_FALSE(lines[1].contains("text"));
  EXPECT_EQ(lines[1]["base64"], "//4gYmluYXJ5Cg==");
  EXPECT_EQ(lines[1]["bytes"], 10);
  EXPECT_EQ(lines[2]["job"], 7);

  // Nothing left past the retention but the running job: nothing more is removed.
  auto again =
      ApplyOutputRetention(w, kNow - 30 * kDayMs, [](uint64_t, const std::function<void()>&) {});
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->jobs, 0);
}

// One call takes at most max_jobs jobs, the oldest ids first; the next call goes on.
TEST(OutputRetention, BoundedPerCall) {
  testing::TempDir dir;
  const std::string w = dir.path();
  const int64_t old = kNow - 40 * kDayMs;
  for (int job = 1; job <= 5; ++job) {
    Write(fmt::format("{}/jobs/{}/task-0.log", w, job), "x\n", old);
    Age(fmt::format("{}/jobs/{}", w, job), old);
  }
  auto remove_all = [](uint64_t, const std::function<void()>& remove) { remove(); };
  auto first = ApplyOutputRetention(w, kNow, remove_all, /*max_jobs=*/2);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->jobs, 2);
  EXPECT_FALSE(fs::exists(w + "/jobs/1"));
  EXPECT_FALSE(fs::exists(w + "/jobs/2"));
  EXPECT_TRUE(fs::exists(w + "/jobs/3"));
  auto rest = ApplyOutputRetention(w, kNow, remove_all);
  ASSERT_TRUE(rest.ok());
  EXPECT_EQ(rest->jobs, 3);
  EXPECT_EQ(ReadArchive(w + "/archive/output-" + ArchiveDay(old) + ".jsonl.gz").size(), 5u);
}

}  // namespace
}  // namespace arbiter::node

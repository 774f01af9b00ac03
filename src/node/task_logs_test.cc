// A task's logs on a node: its runs, each run's part of the files, and copying one while it is
// written.
#include "node/task_logs.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "exec/shim_spec.h"
#include "testing/temp_dir.h"

namespace arbiter::node {
namespace {

class TaskLogsTest : public ::testing::Test {
 protected:
  void SetUp() override { std::filesystem::create_directories(dir_.path() + "/jobs/7"); }

  void Append(LogStream s, const std::string& text) {
    std::ofstream(TaskLogPath(ref_, s), std::ios::app | std::ios::binary) << text;
  }
  // A run begins: its start in the index, at the files' current ends (as the shim writes it).
  void BeginRun(uint64_t attempt) {
    ASSERT_TRUE(exec::AppendRunStart(
        TaskRunIndexPath(ref_), attempt, TaskLogPath(ref_, LogStream::kStdout),
        TaskLogPath(ref_, LogStream::kStderr), TaskLogPath(ref_, LogStream::kCombined)));
  }
  // What the task wrote on one stream: its file and the combined log.
  void Write(LogStream s, const std::string& text) {
    Append(s, text);
    Append(LogStream::kCombined, text);
  }

  std::string Copy(std::optional<uint64_t> run, LogStream s, uint64_t offset = 0,
                   StreamEnd* end = nullptr) {
    StreamLogOptions o;
    o.run = run;
    o.stream = s;
    o.offset = offset;
    std::string out;
    uint64_t sent = 0;
    const StreamEnd e = StreamRunLog(
        ref_, o, nullptr,
        [&](const char* d, size_t n) {
          out.append(d, n);
          return true;
        },
        nullptr, &sent);
    if (end != nullptr) *end = e;
    EXPECT_EQ(sent, out.size());
    return out;
  }

  testing::TempDir dir_{"task-logs-test"};
  TaskLogRef ref_{dir_.path(), 7, 0};
};

TEST_F(TaskLogsTest, EachRunIsItsPartOfTheFiles) {
  BeginRun(1);
  Write(LogStream::kStdout, "one\n");
  Write(LogStream::kStderr, "oops\n");
  BeginRun(3);  // run 2 never started here
  Write(LogStream::kStdout, "two\n");
  EXPECT_EQ(TaskLogRuns(ref_), (std::vector<uint64_t>{1, 3}));
  EXPECT_EQ(Copy(1, LogStream::kCombined), "one\noops\n");
  EXPECT_EQ(Copy(1, LogStream::kStdout), "one\n");
  EXPECT_EQ(Copy(1, LogStream::kStderr), "oops\n");
  EXPECT_EQ(Copy(3, LogStream::kCombined), "two\n");
  EXPECT_EQ(Copy(3, LogStream::kStderr), "");
  EXPECT_EQ(Copy(3, LogStream::kCombined, 2), "o\n");
  EXPECT_EQ(Copy(std::nullopt, LogStream::kStdout), "one\ntwo\n");  // the whole file
  StreamEnd end = StreamEnd::kComplete;
  EXPECT_EQ(Copy(2, LogStream::kCombined, 0, &end), "");
  EXPECT_EQ(end, StreamEnd::kMissing);
}

// Files written before runs were recorded are run 0: the stdout, then the stderr.
TEST_F(TaskLogsTest, OutputFromBeforeRunsWereRecordedIsRunZero) {
  Append(LogStream::kStdout, "old out\n");
  Append(LogStream::kStderr, "old err\n");
  EXPECT_EQ(TaskLogRuns(ref_), (std::vector<uint64_t>{0}));
  EXPECT_EQ(Copy(0, LogStream::kCombined), "old out\nold err\n");
  EXPECT_EQ(Copy(0, LogStream::kCombined, 9), "ld err\n");
  BeginRun(2);
  Write(LogStream::kStdout, "new\n");
  EXPECT_EQ(TaskLogRuns(ref_), (std::vector<uint64_t>{0, 2}));
  EXPECT_EQ(Copy(0, LogStream::kStdout), "old out\n");
  EXPECT_EQ(Copy(2, LogStream::kCombined), "new\n");
}

// Following a run while it writes: everything up to its end, and none of the next run's output,
// even when the next run began before the follower noticed the end.
TEST_F(TaskLogsTest, FollowingStopsAtTheRunsEnd) {
  BeginRun(1);
  std::atomic<bool> running{true};
  std::string got;
  std::thread follower([&] {
    StreamLogOptions o;
    o.run = 1;
    o.follow = true;
    o.poll_ms = 5;
    uint64_t sent = 0;
    StreamRunLog(
        ref_, o, [&] { return running.load(); },
        [&](const char* d, size_t n) {
          got.append(d, n);
          return true;
        },
        nullptr, &sent);
  });
  Write(LogStream::kStdout, "a\n");
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  Write(LogStream::kStderr, "b\n");
  BeginRun(2);
  Write(LogStream::kStdout, "next run\n");
  running = false;
  follower.join();
  EXPECT_EQ(got, "a\nb\n");
}

// A follower waits for its run to begin; without following, a run that is not there is missing.
TEST_F(TaskLogsTest, FollowingWaitsForTheRunToBegin) {
  std::atomic<bool> running{true};
  std::string got;
  StreamEnd end = StreamEnd::kMissing;
  std::thread follower([&] {
    StreamLogOptions o;
    o.run = 4;
    o.follow = true;
    o.poll_ms = 5;
    uint64_t sent = 0;
    end = StreamRunLog(
        ref_, o, [&] { return running.load(); },
        [&](const char* d, size_t n) {
          got.append(d, n);
          return true;
        },
        nullptr, &sent);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  BeginRun(4);
  Write(LogStream::kStdout, "late\n");
  for (int i = 0; i < 400 && got.empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  running = false;
  follower.join();
  EXPECT_EQ(got, "late\n");
  EXPECT_EQ(end, StreamEnd::kComplete);
}

TEST_F(TaskLogsTest, StreamNames) {
  for (LogStream s : {LogStream::kCombined, LogStream::kStdout, LogStream::kStderr}) {
    EXPECT_EQ(ParseLogStream(LogStreamName(s)), s);
  }
  EXPECT_FALSE(ParseLogStream("both"));
  EXPECT_EQ(TaskLogPath(ref_, LogStream::kCombined), dir_.path() + "/jobs/7/task-0.log");
}

}  // namespace
}  // namespace arbiter::node

// Task logs on a node: where they are, the runs they hold, and copying one run's log to a reader,
// optionally following it while the task runs (the built-in node's logs route and the agent's log
// port share this).
//
// Every run of a task appends to the same three files, written by its shim (exec/log_pump.h):
//
//   WORK_DIR/jobs/<job>/task-<n>.out    its stdout
//   WORK_DIR/jobs/<job>/task-<n>.err    its stderr
//   WORK_DIR/jobs/<job>/task-<n>.log    both, line by line in the order written
//   WORK_DIR/jobs/<job>/task-<n>.runs   the run index: where each run begins in the three
//                                       (exec::RunStart, one line per run)
//
// A run's log is its bytes of one file, from its start to the next run's. Run 0 stands for what
// the files held before their first recorded run (written by a node that did not record runs);
// its combined log is its stdout, then its stderr.
//
// Thread safety: pure functions of their arguments and the files; StreamRunLog blocks its caller.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace arbiter::node {

enum class LogStream { kCombined, kStdout, kStderr };

std::string_view LogStreamName(LogStream s);  // "combined", "stdout", "stderr"
std::optional<LogStream> ParseLogStream(std::string_view s);

// Which task's logs.
struct TaskLogRef {
  std::string work_dir;
  uint64_t job = 0;
  int32_t task = 0;
};

// The file of a stream (task-<n>.log, .out or .err), and the run index (task-<n>.runs).
std::string TaskLogPath(const TaskLogRef& ref, LogStream s);
std::string TaskRunIndexPath(const TaskLogRef& ref);

// The runs this node has logs of (their attempts, in the order they ran; 0 first when the files
// hold output from before runs were recorded). Empty when there is no log at all.
std::vector<uint64_t> TaskLogRuns(const TaskLogRef& ref);

// Bytes [begin, end) of a file; no end: to the file's end (the last run, which may still write).
struct LogSegment {
  std::string path;
  uint64_t begin = 0;
  std::optional<uint64_t> end;
};
// Where run `attempt`'s log of stream `s` is, in order; empty when this node has no such run.
std::vector<LogSegment> RunLogSegments(const TaskLogRef& ref, uint64_t attempt, LogStream s);

struct StreamLogOptions {
  std::optional<uint64_t> run;  // the run (its attempt); none: the whole file, every run
  LogStream stream = LogStream::kCombined;
  uint64_t offset = 0;       // bytes of the run's log to skip
  bool follow = false;       // wait for the run to begin, and for more while running() says so
  int64_t max_idle_ms = -1;  // following: end after this long without new bytes (-1: never)
  int64_t poll_ms = 200;     // following: how often to look for more
};

enum class StreamEnd {
  kComplete,     // the end of the run's log, and it no longer runs (or not following)
  kIdle,         // following: max_idle_ms passed without new bytes
  kWriteFailed,  // the reader went away (a write failed, or `reader_gone` said so)
  kStopped,      // `stop` was set
  kMissing,      // the node has no such run (and it does not run)
};

// Copies the run's log (or the whole file) from options.offset to `write` in chunks of at most 64
// KiB; `*sent` counts the bytes written. `running` (whether the run may still write: asked before
// each read, so that once it says no, what follows is all there is) and `stop` may be null.
// Following a silent task, `reader_gone` (when given) is asked about once a second whether the
// reader hung up: nothing is written then, and a follower would otherwise hold its thread and
// socket until the task wrote or ended.
StreamEnd StreamRunLog(const TaskLogRef& ref, const StreamLogOptions& options,
                       const std::function<bool()>& running,
                       const std::function<bool(const char*, size_t)>& write,
                       const std::atomic<bool>* stop, uint64_t* sent,
                       const std::function<bool()>& reader_gone = {});

}  // namespace arbiter::node

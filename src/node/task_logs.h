// Task logs on a node: where they are, and copying them to a reader, optionally following them
// while the task runs (the built-in node's logs route and the agent's log port share this).
//
// Thread safety: pure functions of their arguments; StreamTaskLog blocks its caller.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>

namespace arbiter::node {

// WORK_DIR/jobs/<job>/task-<task>.out (or .err).
std::string TaskLogPath(const std::string& work_dir, uint64_t job, int32_t task, bool stderr_log);

struct StreamLogOptions {
  uint64_t offset = 0;       // where to start
  bool follow = false;       // wait for more while running() says the task runs
  int64_t max_idle_ms = -1;  // following: end after this long without new bytes (-1: never)
  int64_t poll_ms = 200;     // following: how often to look for more
};

enum class StreamEnd {
  kComplete,     // the end of the file, and the task no longer runs (or not following)
  kIdle,         // following: max_idle_ms passed without new bytes
  kWriteFailed,  // the reader went away (a write failed, or `reader_gone` said so)
  kStopped,      // `stop` was set
  kMissing,      // the file does not exist (and the task does not run)
};

// Copies the file from options.offset to `write` in chunks of at most 64 KiB; `*sent` counts the
// bytes written. `running` and `stop` may be null. Following a silent task, `reader_gone` (when
// given) is asked about once a second whether the reader hung up: nothing is written then, and
// a follower would otherwise hold its thread and socket until the task wrote or ended.
StreamEnd StreamTaskLog(const std::string& path, const StreamLogOptions& options,
                        const std::function<bool()>& running,
                        const std::function<bool(const char*, size_t)>& write,
                        const std::atomic<bool>* stop, uint64_t* sent,
                        const std::function<bool()>& reader_gone = {});

}  // namespace arbiter::node

// LogPump: where a task's output goes, as the shim reads it from the task's stdout and stderr
// pipes (src/exec/shim_main.cc). Each chunk goes at once to its stream's own file, byte for byte.
// The combined log gets both streams as one terminal would show them, but line by line: a
// stream's unfinished last line waits there (so that a line of one stream is never cut by the
// other's) until its newline comes, it reaches kMaxHeldBytes (a long line, binary output), it has
// waited kMaxHoldMs (a progress bar, a prompt), or its stream ends. So lines appear in the order
// their ends were read.
//
// Memory: at most kMaxHeldBytes held per stream. Writes go to local files; one that fails (a full
// disk) loses its bytes, counted in lost_bytes(), and nothing else: the task is never stopped or
// slowed by its logs.
//
// Thread safety: one thread (the shim's loop). It owns no descriptor.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace arbiter::exec {

class LogPump {
 public:
  enum Stream : int { kStdout = 0, kStderr = 1 };
  static constexpr size_t kMaxHeldBytes = 16 * 1024;
  static constexpr int64_t kMaxHoldMs = 500;

  // The files, opened for appending (-1: none).
  LogPump(int out_fd, int err_fd, int log_fd) : fds_{out_fd, err_fd}, log_fd_(log_fd) {}

  // `data`, read from stream `s` at `now_ms`.
  void Add(Stream s, std::string_view data, int64_t now_ms);
  // Stream `s` ended: its unfinished line goes to the combined log.
  void End(Stream s);
  // Writes the unfinished lines that have waited kMaxHoldMs at `now_ms`.
  void Flush(int64_t now_ms);
  // When Flush next has something to write (-1: nothing waits).
  int64_t next_flush_ms() const;

  // Bytes that could not be written, and the error of the first such write (0: none).
  uint64_t lost_bytes() const { return lost_; }
  int first_error() const { return first_error_; }

 private:
  void Write(int fd, std::string_view data);
  void Release(Stream s);  // the held line of `s` to the combined log

  int fds_[2];
  int log_fd_;
  std::string held_[2];
  int64_t held_since_[2] = {0, 0};
  uint64_t lost_ = 0;
  int first_error_ = 0;
};

}  // namespace arbiter::exec

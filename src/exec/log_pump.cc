#include "exec/log_pump.h"

#include <unistd.h>

#include <cerrno>

namespace arbiter::exec {

void LogPump::Add(Stream s, std::string_view data, int64_t now_ms) {
  if (data.empty()) return;
  Write(fds_[s], data);
  if (log_fd_ < 0) return;
  std::string& held = held_[s];
  const size_t nl = data.rfind('\n');
  if (nl != std::string_view::npos) {
    // Whole lines: what was held and this chunk up to its last newline, in one write.
    const std::string_view lines = data.substr(0, nl + 1);
    if (held.empty()) {
      Write(log_fd_, lines);
    } else {
      held.append(lines);
      Write(log_fd_, held);
      held.clear();
    }
    data.remove_prefix(nl + 1);
  }
  if (data.empty()) return;
  if (held.empty()) held_since_[s] = now_ms;
  held.append(data);
  if (held.size() >= kMaxHeldBytes) Release(s);
}

void LogPump::End(Stream s) { Release(s); }

void LogPump::Flush(int64_t now_ms) {
  for (Stream s : {kStdout, kStderr}) {
    if (!held_[s].empty() && now_ms - held_since_[s] >= kMaxHoldMs) Release(s);
  }
}

int64_t LogPump::next_flush_ms() const {
  int64_t next = -1;
  for (Stream s : {kStdout, kStderr}) {
    if (held_[s].empty()) continue;
    const int64_t due = held_since_[s] + kMaxHoldMs;
    if (next < 0 || due < next) next = due;
  }
  return next;
}

void LogPump::Release(Stream s) {
  if (held_[s].empty() || log_fd_ < 0) return;
  Write(log_fd_, held_[s]);
  held_[s].clear();
}

void LogPump::Write(int fd, std::string_view data) {
  if (fd < 0) return;
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (first_error_ == 0) first_error_ = n < 0 ? errno : ENOSPC;
      lost_ += data.size();
      return;
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
}

}  // namespace arbiter::exec

#include "node/task_logs.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <thread>
#include <vector>

namespace arbiter::node {

std::string TaskLogPath(const std::string& work_dir, uint64_t job, int32_t task, bool stderr_log) {
  return fmt::format("{}/jobs/{}/task-{}.{}", work_dir, job, task, stderr_log ? "err" : "out");
}

StreamEnd StreamTaskLog(const std::string& path, const StreamLogOptions& o,
                        const std::function<bool()>& running,
                        const std::function<bool(const char*, size_t)>& write,
                        const std::atomic<bool>* stop, uint64_t* sent,
                        const std::function<bool()>& reader_gone) {
  *sent = 0;
  auto is_running = [&] { return o.follow && running && running(); };
  auto stopped = [&] { return stop != nullptr && stop->load(); };
  int fd = -1;
  std::vector<char> buf(size_t{64} * 1024);
  auto idle_since = std::chrono::steady_clock::now();
  auto asked_reader = idle_since;
  StreamEnd end = StreamEnd::kComplete;
  for (;;) {
    if (stopped()) {
      end = StreamEnd::kStopped;
      break;
    }
    // Whether the task ran before this read: at the end of the file, what it wrote is all there.
    const bool was_running = is_running();
    if (fd < 0) fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    ssize_t n = 0;
    if (fd >= 0) n = ::pread(fd, buf.data(), buf.size(), static_cast<off_t>(o.offset + *sent));
    if (n > 0) {
      if (!write(buf.data(), static_cast<size_t>(n))) {
        end = StreamEnd::kWriteFailed;
        break;
      }
      *sent += static_cast<uint64_t>(n);
      idle_since = std::chrono::steady_clock::now();
      continue;
    }
    if (!was_running) {
      end = fd < 0 ? StreamEnd::kMissing : StreamEnd::kComplete;
      break;
    }
    if (o.max_idle_ms >= 0 &&
        std::chrono::steady_clock::now() - idle_since >= std::chrono::milliseconds(o.max_idle_ms)) {
      end = StreamEnd::kIdle;
      break;
    }
    if (reader_gone && std::chrono::steady_clock::now() - asked_reader >= std::chrono::seconds(1)) {
      asked_reader = std::chrono::steady_clock::now();
      if (reader_gone()) {
        end = StreamEnd::kWriteFailed;
        break;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(o.poll_ms));
  }
  if (fd >= 0) ::close(fd);
  return end;
}

}  // namespace arbiter::node

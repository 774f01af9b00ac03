#include "node/task_logs.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "exec/shim_spec.h"

namespace arbiter::node {

namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

uint64_t FileSize(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
}

uint64_t StartIn(const exec::RunStart& r, LogStream s) {
  switch (s) {
    case LogStream::kStdout:
      return r.out;
    case LogStream::kStderr:
      return r.err;
    case LogStream::kCombined:
      return r.log;
  }
  return 0;
}

std::vector<exec::RunStart> RunIndex(const TaskLogRef& ref) {
  return exec::DecodeRunIndex(ReadFile(TaskRunIndexPath(ref)));
}

// Run 0: what the stdout and stderr files held before their first recorded run (a node that did
// not record runs wrote them); its combined log is the one, then the other.
std::vector<LogSegment> EarlierSegments(const TaskLogRef& ref,
                                        const std::vector<exec::RunStart>& runs, LogStream s) {
  std::vector<LogSegment> out;
  for (LogStream part : {LogStream::kStdout, LogStream::kStderr}) {
    if (s != LogStream::kCombined && s != part) continue;
    LogSegment seg{TaskLogPath(ref, part), 0, std::nullopt};
    if (!runs.empty()) seg.end = StartIn(runs.front(), part);
    if ((seg.end && *seg.end == 0) || FileSize(seg.path) == 0) continue;
    out.push_back(std::move(seg));
  }
  return out;
}

// Every run's log of a stream: the whole file (none when it does not exist).
std::vector<LogSegment> WholeFile(const TaskLogRef& ref, LogStream s) {
  std::string path = TaskLogPath(ref, s);
  if (::access(path.c_str(), F_OK) != 0) return {};
  return {LogSegment{std::move(path), 0, std::nullopt}};
}

// Reads pieces as one log, opening each file once.
class SegmentReader {
 public:
  ~SegmentReader() {
    for (const auto& [path, fd] : fds_) {
      if (fd >= 0) ::close(fd);
    }
  }

  // Up to buf.size() bytes at `pos`; 0 when there is nothing more there now. `*open`: they are
  // in the last piece, which its run may still write.
  size_t Read(const std::vector<LogSegment>& segs, uint64_t pos, std::vector<char>& buf,
              bool* open) {
    const std::optional<Place> at = Locate(segs, pos);
    if (!at || at->left == 0) return 0;
    *open = at->open;
    const size_t want = static_cast<size_t>(std::min<uint64_t>(buf.size(), at->left));
    const ssize_t n = ::pread(at->fd, buf.data(), want, static_cast<off_t>(at->offset));
    return n > 0 ? static_cast<size_t>(n) : 0;
  }

  // Of `n` bytes read at `pos`, those that are in the pieces `segs` (read again after them).
  size_t Clamp(const std::vector<LogSegment>& segs, uint64_t pos, size_t n) {
    const std::optional<Place> at = Locate(segs, pos);
    return at ? static_cast<size_t>(std::min<uint64_t>(n, at->left)) : 0;
  }

 private:
  struct Place {
    int fd = -1;
    uint64_t offset = 0;  // in the file
    uint64_t left = 0;    // bytes from there to the piece's end (its file's end now, when open)
    bool open = false;
  };

  std::optional<Place> Locate(const std::vector<LogSegment>& segs, uint64_t pos) {
    for (const LogSegment& seg : segs) {
      const int fd = Open(seg.path);
      struct stat st {};
      const uint64_t size =
          fd >= 0 && ::fstat(fd, &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
      const uint64_t stop = seg.end ? std::min(*seg.end, size) : size;
      const uint64_t len = stop > seg.begin ? stop - seg.begin : 0;
      const bool last_open = !seg.end && &seg == &segs.back();
      if (pos < len || last_open) {
        return Place{fd, seg.begin + pos, pos < len ? len - pos : 0, last_open};
      }
      pos -= len;
    }
    return std::nullopt;
  }

  int Open(const std::string& path) {
    auto it = fds_.find(path);
    if (it == fds_.end() || it->second < 0) {
      const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
      it = fds_.insert_or_assign(path, fd).first;
    }
    return it->second;
  }

  std::map<std::string, int> fds_;
};

}  // namespace

std::string_view LogStreamName(LogStream s) {
  switch (s) {
    case LogStream::kCombined:
      return "combined";
    case LogStream::kStdout:
      return "stdout";
    case LogStream::kStderr:
      return "stderr";
  }
  return "combined";
}

std::optional<LogStream> ParseLogStream(std::string_view s) {
  for (LogStream v : {LogStream::kCombined, LogStream::kStdout, LogStream::kStderr}) {
    if (s == LogStreamName(v)) return v;
  }
  return std::nullopt;
}

std::string TaskLogPath(const TaskLogRef& ref, LogStream s) {
  const char* ext = s == LogStream::kStdout ? "out" : s == LogStream::kStderr ? "err" : "log";
  return fmt::format("{}/jobs/{}/task-{}.{}", ref.work_dir, ref.job, ref.task, ext);
}

std::string TaskRunIndexPath(const TaskLogRef& ref) {
  return fmt::format("{}/jobs/{}/task-{}.runs", ref.work_dir, ref.job, ref.task);
}

std::vector<uint64_t> TaskLogRuns(const TaskLogRef& ref) {
  const std::vector<exec::RunStart> runs = RunIndex(ref);
  std::vector<uint64_t> out;
  if (!EarlierSegments(ref, runs, LogStream::kCombined).empty()) out.push_back(0);
  for (const exec::RunStart& r : runs) {
    if (std::find(out.begin(), out.end(), r.attempt) == out.end()) out.push_back(r.attempt);
  }
  return out;
}

std::vector<LogSegment> RunLogSegments(const TaskLogRef& ref, uint64_t attempt, LogStream s) {
  const std::vector<exec::RunStart> runs = RunIndex(ref);
  if (attempt == 0) return EarlierSegments(ref, runs, s);
  std::vector<LogSegment> out;
  for (size_t i = 0; i < runs.size(); ++i) {
    if (runs[i].attempt != attempt) continue;
    LogSegment seg{TaskLogPath(ref, s), StartIn(runs[i], s), std::nullopt};
    if (i + 1 < runs.size()) seg.end = StartIn(runs[i + 1], s);
    out.push_back(std::move(seg));
  }
  return out;
}

StreamEnd StreamRunLog(const TaskLogRef& ref, const StreamLogOptions& o,
                       const std::function<bool()>& running,
                       const std::function<bool(const char*, size_t)>& write,
                       const std::atomic<bool>* stop, uint64_t* sent,
                       const std::function<bool()>& reader_gone) {
  *sent = 0;
  auto is_running = [&] { return o.follow && running && running(); };
  auto stopped = [&] { return stop != nullptr && stop->load(); };
  SegmentReader reader;
  std::vector<char> buf(size_t{64} * 1024);
  auto idle_since = std::chrono::steady_clock::now();
  auto asked_reader = idle_since;
  for (;;) {
    if (stopped()) return StreamEnd::kStopped;
    // Whether the run wrote before this read: at the end of its log, what it wrote is all there.
    const bool was_running = is_running();
    // Where the run is, asked before every read: its end in the files is known only once the
    // next run begins (the index is a few bytes per run).
    auto where = [&] {
      return o.run ? RunLogSegments(ref, *o.run, o.stream) : WholeFile(ref, o.stream);
    };
    const std::vector<LogSegment> segs = where();
    bool open = false;
    size_t n = reader.Read(segs, o.offset + *sent, buf, &open);
    // Read from the end of a run still written: the next run may have begun (and written) since
    // `segs` was read, its start recorded before it wrote anything.
    if (n > 0 && open) n = reader.Clamp(where(), o.offset + *sent, n);
    if (n > 0) {
      if (!write(buf.data(), n)) return StreamEnd::kWriteFailed;
      *sent += n;
      idle_since = std::chrono::steady_clock::now();
      continue;
    }
    if (!was_running) return segs.empty() ? StreamEnd::kMissing : StreamEnd::kComplete;
    const auto now = std::chrono::steady_clock::now();
    if (o.max_idle_ms >= 0 && now - idle_since >= std::chrono::milliseconds(o.max_idle_ms)) {
      return StreamEnd::kIdle;
    }
    if (reader_gone && now - asked_reader >= std::chrono::seconds(1)) {
      asked_reader = now;
      if (reader_gone()) return StreamEnd::kWriteFailed;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(o.poll_ms));
  }
}

}  // namespace arbiter::node

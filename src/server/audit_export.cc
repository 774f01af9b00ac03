#include "server/audit_export.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <netdb.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <utility>

#include "server/control_plane_helpers.h"

namespace arbiter::server {

using nlohmann::json;

json AuditRecordJson(const store::AuditRecord& r) {
  json detail = json::parse(r.detail_json, nullptr, /*allow_exceptions=*/false);
  auto or_null = [](const std::string& s) { return s.empty() ? json(nullptr) : json(s); };
  return {{"seq", r.seq},
          {"at", Iso8601(r.at_ms)},
          {"actor", r.actor},
          {"action", r.action},
          {"target", r.target},
          {"result", r.result},
          {"token_id", or_null(r.token_id)},
          {"source", or_null(r.source)},
          {"tenant", or_null(r.tenant)},
          {"detail", detail.is_discarded() ? json(r.detail_json) : detail}};
}

namespace {

std::string Errno(int e) { return std::strerror(e); }

Status Unavailable(std::string message) { return {StatusCode::kUnavailable, std::move(message)}; }

// Writes all of `data` with one write() where the kernel allows (O_APPEND: one line stays whole).
Status WriteAll(int fd, const std::string& data, const std::string& what) {
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Unavailable(fmt::format("{}: {}", what, Errno(errno)));
    done += static_cast<size_t>(n);
  }
  return Status::Ok();
}

class FileSink final : public AuditSink {
 public:
  explicit FileSink(std::string path) : path_(std::move(path)) {}
  ~FileSink() override {
    if (fd_ >= 0) ::close(fd_);
  }

  Status Open() {
    const int fd = ::open(path_.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) {
      return Unavailable(fmt::format("--audit-file: cannot open {}: {}", path_, Errno(errno)));
    }
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
    return Status::Ok();
  }

  std::string Name() const override { return "file " + path_; }

  void Reopen() override { reopen_ = true; }

  Status Write(const std::vector<store::AuditRecord>& records) override {
    // Rotated (moved or deleted) since it was opened, or asked to: open the path afresh.
    struct stat at_path {};
    struct stat open_file {};
    if (reopen_ || fd_ < 0 || ::stat(path_.c_str(), &at_path) != 0 ||
        ::fstat(fd_, &open_file) != 0 || at_path.st_ino != open_file.st_ino ||
        at_path.st_dev != open_file.st_dev) {
      ARBITER_RETURN_IF_ERROR(Open());
      reopen_ = false;
    }
    for (const store::AuditRecord& r : records) {
      ARBITER_RETURN_IF_ERROR(
          WriteAll(fd_, AuditRecordJson(r).dump() + "\n", "--audit-file: write " + path_));
    }
    if (::fsync(fd_) != 0) {
      return Unavailable(fmt::format("--audit-file: fsync {}: {}", path_, Errno(errno)));
    }
    return Status::Ok();
  }

 private:
  const std::string path_;
  int fd_ = -1;
  bool reopen_ = false;
};

class SyslogSink final : public AuditSink {
 public:
  SyslogSink(std::string target, int family, sockaddr_storage addr, socklen_t len)
      : target_(std::move(target)), family_(family), addr_(addr), len_(len) {
    char host[256] = {};
    hostname_ = ::gethostname(host, sizeof(host) - 1) == 0 && host[0] != '\0' ? host : "-";
    pid_ = static_cast<int>(::getpid());
  }
  ~SyslogSink() override {
    if (fd_ >= 0) ::close(fd_);
  }

  std::string Name() const override { return "syslog " + target_; }

  void Reopen() override {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

  Status Write(const std::vector<store::AuditRecord>& records) override {
    if (fd_ < 0) {
      fd_ = ::socket(family_, SOCK_DGRAM | SOCK_CLOEXEC, 0);
      if (fd_ < 0) return Unavailable(fmt::format("--audit-syslog: socket: {}", Errno(errno)));
      if (::connect(fd_, reinterpret_cast<const sockaddr*>(&addr_), len_) != 0) {
        const int e = errno;
        Reopen();
        return Unavailable(fmt::format("--audit-syslog: cannot reach {}: {}", target_, Errno(e)));
      }
    }
    for (const store::AuditRecord& r : records) {
      std::string m = SyslogMessage(r, hostname_, pid_);
      ssize_t n = ::send(fd_, m.data(), m.size(), MSG_NOSIGNAL);
      if (n < 0 && errno == EMSGSIZE) {
        // Too large for one datagram (a large configuration's diff): the record without its
        // detail, which the API and the file still have whole.
        store::AuditRecord small = r;
        small.detail_json = R"({"truncated":true})";
        m = SyslogMessage(small, hostname_, pid_);
        n = ::send(fd_, m.data(), m.size(), MSG_NOSIGNAL);
      }
      if (n < 0) {
        const int e = errno;
        Reopen();
        return Unavailable(fmt::format("--audit-syslog: send to {}: {}", target_, Errno(e)));
      }
    }
    return Status::Ok();
  }

 private:
  const std::string target_;
  const int family_;
  const sockaddr_storage addr_;
  const socklen_t len_;
  std::string hostname_;
  int pid_ = 0;
  int fd_ = -1;
};

}  // namespace

std::string SyslogMessage(const store::AuditRecord& r, const std::string& hostname, int pid) {
  // Facility authpriv (10); severity notice (5) for refusals, informational (6) otherwise.
  const bool ok = r.result.rfind("ok", 0) == 0;
  const int pri = 10 * 8 + (ok ? 6 : 5);
  return fmt::format("<{}>1 {} {} arbiter {} audit - {}", pri, Iso8601(r.at_ms), hostname, pid,
                     AuditRecordJson(r).dump());
}

Result<std::unique_ptr<AuditSink>> OpenAuditFileSink(const std::string& path) {
  if (path.empty()) return InvalidArgument("--audit-file", "must be a file path");
  auto sink = std::make_unique<FileSink>(path);
  ARBITER_RETURN_IF_ERROR(sink->Open());
  return std::unique_ptr<AuditSink>(std::move(sink));
}

Result<std::unique_ptr<AuditSink>> OpenAuditSyslogSink(const std::string& target) {
  const Status bad = InvalidArgument(
      "--audit-syslog", fmt::format("must be udp://HOST:PORT or unix:PATH, got '{}'", target));
  sockaddr_storage addr{};
  if (target.rfind("unix:", 0) == 0) {
    const std::string path = target.substr(5);
    sockaddr_un un{};
    if (path.empty() || path.size() >= sizeof(un.sun_path)) return bad;
    un.sun_family = AF_UNIX;
    std::memcpy(un.sun_path, path.data(), path.size());
    std::memcpy(&addr, &un, sizeof(un));
    return std::unique_ptr<AuditSink>(
        std::make_unique<SyslogSink>(target, AF_UNIX, addr, static_cast<socklen_t>(sizeof(un))));
  }
  if (target.rfind("udp://", 0) != 0) return bad;
  std::string hostport = target.substr(6);
  std::string host;
  std::string port;
  if (!hostport.empty() && hostport.front() == '[') {
    const size_t close = hostport.find(']');
    if (close == std::string::npos || close + 1 >= hostport.size() || hostport[close + 1] != ':') {
      return bad;
    }
    host = hostport.substr(1, close - 1);
    port = hostport.substr(close + 2);
  } else {
    const size_t colon = hostport.rfind(':');
    if (colon == std::string::npos) return bad;
    host = hostport.substr(0, colon);
    port = hostport.substr(colon + 1);
  }
  if (host.empty() || port.empty() || port.find_first_not_of("0123456789") != std::string::npos) {
    return bad;
  }
  addrinfo hints{};
  hints.ai_socktype = SOCK_DGRAM;
  hints.ai_family = AF_UNSPEC;
  addrinfo* res = nullptr;
  if (const int rc = ::getaddrinfo(host.c_str(), port.c_str(), &hints, &res); rc != 0) {
    return InvalidArgument("--audit-syslog",
                           fmt::format("cannot resolve {}: {}", host, ::gai_strerror(rc)));
  }
  std::memcpy(&addr, res->ai_addr, res->ai_addrlen);
  const int family = res->ai_family;
  const auto len = static_cast<socklen_t>(res->ai_addrlen);
  ::freeaddrinfo(res);
  return std::unique_ptr<AuditSink>(std::make_unique<SyslogSink>(target, family, addr, len));
}

// ---- The exporter ------------------------------------------------------------------------------

AuditExporter::AuditExporter(store::Store* store, std::unique_ptr<AuditSink> sink,
                             std::string cursor_path)
    : store_(store), sink_(std::move(sink)), cursor_path_(std::move(cursor_path)) {}

AuditExporter::~AuditExporter() { Stop(); }

Status AuditExporter::Start() {
  std::ifstream in(cursor_path_);
  uint64_t seq = 0;
  if (in.is_open() && !(in >> seq)) {
    return FailedPrecondition(fmt::format(
        "the audit export cursor {} is not a sequence number: fix or delete it (deleted, every "
        "record is exported again)",
        cursor_path_));
  }
  {
    std::lock_guard lock(mu_);
    cursor_ = seq;
  }
  spdlog::info("audit export to {}: from seq {}", sink_->Name(), seq + 1);
  thread_ = std::thread([this] { Loop(); });
  return Status::Ok();
}

void AuditExporter::Stop() {
  {
    std::lock_guard lock(mu_);
    if (stopping_ || !thread_.joinable()) return;
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void AuditExporter::Reopen() {
  std::lock_guard lock(mu_);
  reopen_ = true;
}

uint64_t AuditExporter::exported_seq() const {
  std::lock_guard lock(mu_);
  return cursor_;
}

Status AuditExporter::SaveCursor(uint64_t seq) {
  // Written aside, synced, then renamed over the old one: the cursor is one value or the other.
  const std::string tmp = cursor_path_ + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return Unavailable(fmt::format("cannot write {}: {}", tmp, Errno(errno)));
  Status st = WriteAll(fd, fmt::format("{}\n", seq), "write " + tmp);
  if (st.ok() && ::fsync(fd) != 0) st = Unavailable(fmt::format("fsync {}: {}", tmp, Errno(errno)));
  ::close(fd);
  if (st.ok() && ::rename(tmp.c_str(), cursor_path_.c_str()) != 0) {
    st = Unavailable(fmt::format("cannot rename {}: {}", tmp, Errno(errno)));
  }
  return st;
}

bool AuditExporter::ExportBatch() {
  uint64_t after = 0;
  {
    std::lock_guard lock(mu_);
    after = cursor_;
    if (reopen_) sink_->Reopen();
    reopen_ = false;
  }
  auto records = store_->Audit(after, kBatch);
  Status st = records.status();
  if (st.ok() && records->empty()) return false;
  if (st.ok()) st = sink_->Write(*records);
  if (st.ok()) st = SaveCursor(records->back().seq);
  if (!st.ok()) {
    if (!failing_)
      spdlog::warn("audit export to {} failed (retrying): {}", sink_->Name(), st.ToString());
    failing_ = true;
    return false;
  }
  if (failing_) spdlog::info("audit export to {} resumed", sink_->Name());
  failing_ = false;
  std::lock_guard lock(mu_);
  cursor_ = records->back().seq;
  return true;
}

void AuditExporter::Loop() {
  for (;;) {
    while (ExportBatch()) {
    }
    std::unique_lock lock(mu_);
    if (stopping_) break;
    cv_.wait_for(lock, std::chrono::milliseconds(failing_ ? 1000 : kPollMs),
                 [&] { return stopping_ || reopen_; });
  }
  // Stopping: everything enqueued so far committed (an empty batch is a barrier), then exported.
  if (store_->Write(store::WriteBatch()).ok()) {
    for (int i = 0; i < 1000 && ExportBatch(); ++i) {
    }
  }
}

}  // namespace arbiter::server

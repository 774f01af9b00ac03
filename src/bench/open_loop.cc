#include "bench/open_loop.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <deque>
#include <memory>

namespace arbiter::bench {

namespace {

using Clock = std::chrono::steady_clock;

struct Conn {
  int fd = -1;
  int64_t index = -1;  // the request in flight, -1: idle
  std::string out;
  size_t sent = 0;
  bool want_write = false;
  std::string in;
  Clock::time_point sent_at;
};

class OpenLoop {
 public:
  OpenLoop(const LoadTarget& target, const std::vector<double>& at_s,
           const std::function<std::string(int64_t)>& request_bytes, const OpenLoopOptions& o,
           Clock::time_point start)
      : target_(target), at_s_(at_s), request_bytes_(request_bytes), o_(o), start_(start) {
    result_.outcomes.resize(at_s.size());
  }
  ~OpenLoop() {
    for (Conn& c : conns_) Close(c);
    if (ep_ >= 0) ::close(ep_);
  }

  OpenLoopResult Run() {
    addrinfo hints{};
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* ai = nullptr;
    if (int rc =
            getaddrinfo(target_.host.c_str(), std::to_string(target_.port).c_str(), &hints, &ai);
        rc != 0 || ai == nullptr) {
      result_.first_error = fmt::format("cannot resolve {}: {}", target_.host, gai_strerror(rc));
      return std::move(result_);
    }
    addr_.reset(ai);
    ep_ = epoll_create1(EPOLL_CLOEXEC);
    conns_.reserve(static_cast<size_t>(std::max(1, o_.max_connections)));
    const int64_t n = static_cast<int64_t>(at_s_.size());
    std::vector<epoll_event> events(256);
    while (next_ < n || !backlog_.empty() || in_flight_ > 0) {
      const auto now = Clock::now();
      while (next_ < n && Due(next_) <= now) backlog_.push_back(next_++);
      SendBacklog();
      int wait_ms = 50;  // the timeouts' check
      if (next_ < n) {
        const double ms =
            std::chrono::duration<double, std::milli>(Due(next_) - Clock::now()).count();
        wait_ms = std::clamp(static_cast<int>(std::ceil(ms)), 0, wait_ms);
      }
      const int got = epoll_wait(ep_, events.data(), static_cast<int>(events.size()), wait_ms);
      for (int e = 0; e < got; ++e) {
        const epoll_event& ev = events[static_cast<size_t>(e)];
        OnEvent(static_cast<size_t>(ev.data.u64), ev.events);
      }
      ExpireTimedOut();
    }
    return std::move(result_);
  }

 private:
  Clock::time_point Due(int64_t i) const {
    return start_ + std::chrono::duration_cast<Clock::duration>(
                        std::chrono::duration<double>(at_s_[static_cast<size_t>(i)]));
  }

  void Fail(int64_t index, const std::string& why) {
    OpenLoopOutcome& out = result_.outcomes[static_cast<size_t>(index)];
    out.status = 0;
    out.latency_ms = std::chrono::duration<double, std::milli>(Clock::now() - Due(index)).count();
    if (result_.first_error.empty()) result_.first_error = why;
  }

  void Close(Conn& c) {
    if (c.fd >= 0) {
      epoll_ctl(ep_, EPOLL_CTL_DEL, c.fd, nullptr);
      ::close(c.fd);
    }
    c.fd = -1;
    c.in.clear();
  }

  // The request on `slot` ends without an answer; its connection is closed.
  void Abandon(size_t slot, const std::string& why) {
    Conn& c = conns_[slot];
    Fail(c.index, why);
    c.index = -1;
    --in_flight_;
    Close(c);
    idle_.push_back(slot);
  }

  bool Open(Conn& c, size_t slot) {
    c.fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (c.fd < 0 || connect(c.fd, addr_->ai_addr, addr_->ai_addrlen) != 0) {
      if (c.fd >= 0) ::close(c.fd);
      c.fd = -1;
      return false;
    }
    ++result_.connections_opened;
    int one = 1;
    setsockopt(c.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    fcntl(c.fd, F_SETFL, fcntl(c.fd, F_GETFL) | O_NONBLOCK);
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = slot;
    epoll_ctl(ep_, EPOLL_CTL_ADD, c.fd, &ev);
    c.want_write = false;
    return true;
  }

  void SetWriteInterest(Conn& c, size_t slot, bool want) {
    if (c.want_write == want) return;
    epoll_event ev{};
    ev.events = EPOLLIN | (want ? EPOLLOUT : 0u);
    ev.data.u64 = slot;
    epoll_ctl(ep_, EPOLL_CTL_MOD, c.fd, &ev);
    c.want_write = want;
  }

  bool Flush(Conn& c, size_t slot) {
    while (c.sent < c.out.size()) {
      const ssize_t n = ::send(c.fd, c.out.data() + c.sent, c.out.size() - c.sent, MSG_NOSIGNAL);
      if (n > 0) {
        c.sent += static_cast<size_t>(n);
        continue;
      }
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        SetWriteInterest(c, slot, true);
        return true;
      }
      if (n < 0 && errno == EINTR) continue;
      return false;
    }
    SetWriteInterest(c, slot, false);
    return true;
  }

  // Due requests go out on idle connections, on new ones while the pool may grow.
  void SendBacklog() {
    while (!backlog_.empty()) {
      size_t slot = 0;
      if (!idle_.empty()) {
        slot = idle_.back();
        idle_.pop_back();
      } else if (conns_.size() < static_cast<size_t>(std::max(1, o_.max_connections))) {
        conns_.emplace_back();
        slot = conns_.size() - 1;
      } else {
        return;  // every connection is busy: the oldest waits for the first to come free
      }
      const int64_t index = backlog_.front();
      backlog_.pop_front();
      Conn& c = conns_[slot];
      if (c.fd < 0 && !Open(c, slot)) {
        Fail(index, fmt::format("cannot connect to {}:{}: {}", target_.host, target_.port,
                                std::strerror(errno)));
        idle_.push_back(slot);
        continue;
      }
      c.index = index;
      c.out = request_bytes_(index);
      c.sent = 0;
      c.in.clear();
      c.sent_at = Clock::now();
      ++in_flight_;
      if (!Flush(c, slot)) {
        Abandon(slot, fmt::format("request {}: the connection broke while sending", index));
      }
    }
  }

  bool Drain(Conn& c) {
    while (true) {
      const ssize_t got = ::recv(c.fd, buf_, sizeof(buf_), 0);
      if (got > 0) {
        c.in.append(buf_, static_cast<size_t>(got));
        continue;
      }
      if (got < 0 && errno == EINTR) continue;
      return got == 0 || (errno != EAGAIN && errno != EWOULDBLOCK);
    }
  }

  void OnEvent(size_t slot, uint32_t events) {
    Conn& c = conns_[slot];
    if (c.fd < 0) return;
    if ((events & EPOLLOUT) && c.index >= 0 && !Flush(c, slot)) {
      Abandon(slot, fmt::format("request {}: the connection broke while sending", c.index));
      return;
    }
    const bool broken = Drain(c);
    if (c.index < 0) {
      if (broken) Close(c);  // an idle connection the server closed: opened again when used
      return;
    }
    const HttpResponseHead p = ParseHttpResponse(c.in);
    if (p.bytes < 0) {
      Abandon(slot,
              fmt::format("request {}: not an HTTP/1.1 response with a Content-Length", c.index));
    } else if (p.bytes > 0) {
      OpenLoopOutcome& out = result_.outcomes[static_cast<size_t>(c.index)];
      out.status = p.status;
      out.latency_ms =
          std::chrono::duration<double, std::milli>(Clock::now() - Due(c.index)).count();
      if (p.status != o_.expect_status && result_.first_error.empty()) {
        const size_t body = c.in.find("\r\n\r\n") + 4;
        result_.first_error = fmt::format("HTTP {}: {}", p.status, c.in.substr(body, 300));
      }
      c.index = -1;
      --in_flight_;
      if (p.close || broken) Close(c);
      idle_.push_back(slot);
    } else if (broken) {
      Abandon(slot, fmt::format("request {}: the server closed the connection", c.index));
    }
  }

  void ExpireTimedOut() {
    const auto now = Clock::now();
    for (size_t i = 0; i < conns_.size(); ++i) {
      Conn& c = conns_[i];
      if (c.index >= 0 && now - c.sent_at > std::chrono::milliseconds(o_.timeout_ms)) {
        Abandon(i, fmt::format("request {}: no answer within {} ms", c.index, o_.timeout_ms));
      }
    }
  }

  const LoadTarget& target_;
  const std::vector<double>& at_s_;
  const std::function<std::string(int64_t)>& request_bytes_;
  const OpenLoopOptions& o_;
  const Clock::time_point start_;
  OpenLoopResult result_;
  std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> addr_{nullptr, freeaddrinfo};
  int ep_ = -1;
  std::vector<Conn> conns_;
  std::vector<size_t> idle_;     // connections with no request in flight
  std::deque<int64_t> backlog_;  // due requests waiting for a connection
  int64_t next_ = 0;             // the next request not yet due
  int64_t in_flight_ = 0;
  char buf_[65536];
};

}  // namespace

OpenLoopResult RunOpenLoop(const LoadTarget& target, const std::vector<double>& at_s,
                           const std::function<std::string(int64_t)>& request_bytes,
                           const OpenLoopOptions& options, Clock::time_point start) {
  return OpenLoop(target, at_s, request_bytes, options, start).Run();
}

}  // namespace arbiter::bench

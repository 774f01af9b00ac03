#include "bench/http_load.h"

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
#include <chrono>
#include <cstring>
#include <memory>
#include <string_view>

namespace arbiter::bench {

namespace {

using Clock = std::chrono::steady_clock;

struct Conn {
  int fd = -1;
  int64_t index = -1;  // the request in flight, -1: none
  const std::string* out = nullptr;
  size_t sent = 0;
  bool want_write = false;
  std::string in;
  Clock::time_point started;
};

bool EqualsNoCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i]))) {
      return false;
    }
  }
  return true;
}

}  // namespace

HttpResponseHead ParseHttpResponse(const std::string& in) {
  HttpResponseHead p;
  const size_t end = in.find("\r\n\r\n");
  if (end == std::string::npos) return p;
  std::string_view head(in.data(), end);
  if (head.size() < 12 || head.substr(0, 5) != "HTTP/") {
    p.bytes = -1;
    return p;
  }
  p.status = std::atoi(std::string(head.substr(9, 3)).c_str());
  int64_t length = -1;
  size_t pos = head.find("\r\n");
  while (pos != std::string_view::npos && pos < head.size()) {
    const size_t next = head.find("\r\n", pos + 2);
    std::string_view line = head.substr(
        pos + 2, next == std::string_view::npos ? std::string_view::npos : next - pos - 2);
    const size_t colon = line.find(':');
    if (colon != std::string_view::npos) {
      std::string_view name = line.substr(0, colon);
      std::string_view value = line.substr(colon + 1);
      while (!value.empty() && value.front() == ' ') value.remove_prefix(1);
      if (EqualsNoCase(name, "content-length")) {
        length = std::atoll(std::string(value).c_str());
      } else if (EqualsNoCase(name, "connection") && EqualsNoCase(value, "close")) {
        p.close = true;
      } else if (EqualsNoCase(name, "transfer-encoding")) {
        p.bytes = -1;  // the API answers with Content-Length; chunked answers are not expected
        return p;
      }
    }
    pos = next;
  }
  if (length < 0) length = 0;
  const int64_t total = static_cast<int64_t>(end) + 4 + length;
  if (static_cast<int64_t>(in.size()) >= total) p.bytes = total;
  return p;
}

bool ParseHttpUrl(const std::string& url, LoadTarget* out, std::string* error) {
  const std::string prefix = "http://";
  if (url.rfind(prefix, 0) != 0) {
    *error = fmt::format("--server {}: must be http://HOST:PORT", url);
    return false;
  }
  std::string rest = url.substr(prefix.size());
  rest = rest.substr(0, rest.find('/'));
  const size_t colon = rest.rfind(':');
  out->host = colon == std::string::npos ? rest : rest.substr(0, colon);
  out->port = 80;
  if (colon != std::string::npos) {
    const std::string port = rest.substr(colon + 1);
    if (port.empty() || port.size() > 5 ||
        !std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; }) ||
        std::stoi(port) < 1 || std::stoi(port) > 65535) {
      *error = fmt::format("--server {}: the port must be 1-65535", url);
      return false;
    }
    out->port = std::stoi(port);
  }
  if (out->host.empty()) {
    *error = fmt::format("--server {}: no host", url);
    return false;
  }
  return true;
}

std::string HttpRequestBytes(const LoadTarget& target, const std::string& method,
                             const std::string& path, const std::vector<std::string>& headers,
                             const std::string& body) {
  std::string r =
      fmt::format("{} {} HTTP/1.1\r\nHost: {}:{}\r\n", method, path, target.host, target.port);
  for (const std::string& h : headers) r += h + "\r\n";
  r += fmt::format("Content-Length: {}\r\n\r\n", body.size());
  r += body;
  return r;
}

namespace {

// One load run: a fixed set of keep-alive connections, each with at most one request in flight,
// driven by one epoll loop.
class LoadRunner {
 public:
  LoadRunner(const std::vector<LoadTarget>& targets, const LoadOptions& o,
             const std::function<const std::string&(int64_t)>& request_bytes)
      : targets_(targets), o_(o), request_bytes_(request_bytes) {
    result_.latencies_ms.reserve(static_cast<size_t>(o.requests));
    result_.ok_indices.reserve(static_cast<size_t>(o.requests));
  }
  ~LoadRunner() {
    for (Conn& c : conns_) Close(c);
    if (ep_ >= 0) ::close(ep_);
  }

  LoadResult Run() {
    for (const LoadTarget& target : targets_) {
      addrinfo hints{};
      hints.ai_family = AF_INET;
      hints.ai_socktype = SOCK_STREAM;
      addrinfo* ai = nullptr;
      if (int rc =
              getaddrinfo(target.host.c_str(), std::to_string(target.port).c_str(), &hints, &ai);
          rc != 0 || ai == nullptr) {
        result_.requests_failed = o_.requests;
        result_.first_error = fmt::format("cannot resolve {}: {}", target.host, gai_strerror(rc));
        return result_;
      }
      addrs_.emplace_back(ai, freeaddrinfo);
    }
    ep_ = epoll_create1(EPOLL_CLOEXEC);
    conns_.resize(static_cast<size_t>(std::max(1, o_.connections)));

    total_ = o_.warmup + o_.requests;
    t0_ = Clock::now();
    for (size_t i = 0; i < conns_.size(); ++i) StartNext(conns_[i], i);
    std::vector<epoll_event> events(conns_.size());
    while (done_ < total_) {
      const int n = epoll_wait(ep_, events.data(), static_cast<int>(events.size()), 100);
      for (int e = 0; e < n; ++e) {
        const epoll_event& ev = events[static_cast<size_t>(e)];
        OnEvent(static_cast<size_t>(ev.data.u64), ev.events);
      }
      ExpireTimedOut();
    }
    result_.seconds = std::chrono::duration<double>(Clock::now() - t0_).count();
    return result_;
  }

 private:
  void Fail(const std::string& why) {
    ++result_.requests_failed;
    if (result_.first_error.empty()) result_.first_error = why;
  }

  void Close(Conn& c) {
    if (c.fd >= 0) {
      epoll_ctl(ep_, EPOLL_CTL_DEL, c.fd, nullptr);
      ::close(c.fd);
    }
    c.fd = -1;
    c.index = -1;
    c.in.clear();
  }

  // A request that will get no answer: counted, and its connection closed.
  void Abandon(Conn& c, const std::string& why) {
    Fail(why);
    ++done_;
    Close(c);
  }

  // Blocking connect (loopback answers at once), then non-blocking I/O. Connection `slot` goes
  // to target slot % targets.
  bool Open(Conn& c, size_t slot) {
    const size_t t = slot % targets_.size();
    const addrinfo* addr = addrs_[t].get();
    c.fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (c.fd < 0 || connect(c.fd, addr->ai_addr, addr->ai_addrlen) != 0) {
      Fail(fmt::format("cannot connect to {}:{}: {}", targets_[t].host, targets_[t].port,
                       std::strerror(errno)));
      if (c.fd >= 0) ::close(c.fd);
      c.fd = -1;
      return false;
    }
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

  // Writes what the socket takes; false when the connection broke.
  bool Flush(Conn& c, size_t slot) {
    while (c.sent < c.out->size()) {
      const ssize_t n = ::send(c.fd, c.out->data() + c.sent, c.out->size() - c.sent, MSG_NOSIGNAL);
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

  // Gives an idle connection the next request, opening it again when needed.
  void StartNext(Conn& c, size_t slot) {
    while (next_ < total_ && c.index < 0) {
      if (next_ == o_.warmup && o_.warmup > 0) t0_ = Clock::now();  // the measured part starts
      if (c.fd < 0 && !Open(c, slot)) {
        ++next_;  // counted as failed by Open
        ++done_;
        continue;
      }
      c.index = next_++;
      c.out = &request_bytes_(c.index);
      c.sent = 0;
      c.in.clear();
      c.started = Clock::now();
      if (!Flush(c, slot)) {
        Abandon(c, fmt::format("request {}: the connection broke while sending", c.index));
      }
    }
  }

  // Reads what arrived; true when the connection broke or the server closed it.
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
      Abandon(c, fmt::format("request {}: the connection broke while sending", c.index));
      StartNext(c, slot);
      return;
    }
    const bool broken = Drain(c);
    if (c.index >= 0) {
      const HttpResponseHead p = ParseHttpResponse(c.in);
      if (p.bytes < 0) {
        Abandon(c,
                fmt::format("request {}: not an HTTP/1.1 response with a Content-Length", c.index));
      } else if (p.bytes > 0) {
        const double ms =
            std::chrono::duration<double, std::milli>(Clock::now() - c.started).count();
        if (p.status == o_.expect_status) {
          if (c.index >= o_.warmup) {
            ++result_.requests_ok;
            result_.latencies_ms.push_back(ms);
            result_.ok_indices.push_back(c.index - o_.warmup);
          }
        } else {
          const size_t body = c.in.find("\r\n\r\n") + 4;
          Fail(fmt::format("HTTP {}: {}", p.status, c.in.substr(body, 500)));
        }
        ++done_;
        c.index = -1;
        c.in.clear();
        if (p.close || broken) Close(c);
      } else if (broken) {
        Abandon(c, fmt::format("request {}: the server closed the connection", c.index));
      }
    } else if (broken) {
      Close(c);  // an idle connection the server closed: opened again when needed
    }
    StartNext(c, slot);
  }

  // Requests with no answer in time fail; their connections are opened again.
  void ExpireTimedOut() {
    const auto now = Clock::now();
    for (size_t i = 0; i < conns_.size(); ++i) {
      Conn& c = conns_[i];
      if (c.index >= 0 && now - c.started > std::chrono::milliseconds(o_.timeout_ms)) {
        Abandon(c, fmt::format("request {}: no answer within {} ms", c.index, o_.timeout_ms));
        StartNext(c, i);
      }
    }
  }

  const std::vector<LoadTarget>& targets_;
  const LoadOptions& o_;
  const std::function<const std::string&(int64_t)>& request_bytes_;
  LoadResult result_;
  std::vector<std::unique_ptr<addrinfo, decltype(&freeaddrinfo)>> addrs_;
  int ep_ = -1;
  std::vector<Conn> conns_;
  int64_t next_ = 0;
  int64_t done_ = 0;
  int64_t total_ = 0;  // warm-up and measured requests
  Clock::time_point t0_;
  char buf_[65536];
};

}  // namespace

LoadResult RunHttpLoad(const LoadTarget& target, const LoadOptions& o,
                       const std::function<const std::string&(int64_t)>& request_bytes) {
  return LoadRunner({target}, o, request_bytes).Run();
}

LoadResult RunHttpLoad(const std::vector<LoadTarget>& targets, const LoadOptions& o,
                       const std::function<const std::string&(int64_t)>& request_bytes) {
  if (targets.empty()) {
    LoadResult r;
    r.requests_failed = o.requests;
    r.first_error = "no target";
    return r;
  }
  return LoadRunner(targets, o, request_bytes).Run();
}

}  // namespace arbiter::bench

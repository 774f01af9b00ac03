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

// A complete response in `in`: its status, whether the server keeps the connection, and the
// number of bytes it spans. 0 bytes: not complete yet; -1: not a response this client can read.
struct Parsed {
  int status = 0;
  bool close = false;
  int64_t bytes = 0;
};

Parsed ParseResponse(const std::string& in) {
  Parsed p;
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

}  // namespace

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

LoadResult RunHttpLoad(const LoadTarget& target, const LoadOptions& o,
                       const std::function<const std::string&(int64_t)>& request_bytes) {
  LoadResult result;
  result.latencies_ms.reserve(static_cast<size_t>(o.requests));
  result.ok_indices.reserve(static_cast<size_t>(o.requests));
  auto fail = [&](const std::string& why) {
    ++result.requests_failed;
    if (result.first_error.empty()) result.first_error = why;
  };

  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* ai = nullptr;
  if (int rc = getaddrinfo(target.host.c_str(), std::to_string(target.port).c_str(), &hints, &ai);
      rc != 0 || ai == nullptr) {
    result.requests_failed = o.requests;
    result.first_error = fmt::format("cannot resolve {}: {}", target.host, gai_strerror(rc));
    return result;
  }
  std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> addr(ai, freeaddrinfo);

  const int ep = epoll_create1(EPOLL_CLOEXEC);
  std::vector<Conn> conns(static_cast<size_t>(std::max(1, o.connections)));
  auto close_conn = [&](Conn& c) {
    if (c.fd >= 0) {
      epoll_ctl(ep, EPOLL_CTL_DEL, c.fd, nullptr);
      ::close(c.fd);
    }
    c.fd = -1;
    c.index = -1;
    c.in.clear();
  };
  // Blocking connect (loopback answers at once), then non-blocking I/O.
  auto open_conn = [&](Conn& c, size_t slot) -> bool {
    c.fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (c.fd < 0 || connect(c.fd, addr->ai_addr, addr->ai_addrlen) != 0) {
      fail(fmt::format("cannot connect to {}:{}: {}", target.host, target.port,
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
    epoll_ctl(ep, EPOLL_CTL_ADD, c.fd, &ev);
    c.want_write = false;
    return true;
  };
  auto set_write_interest = [&](Conn& c, size_t slot, bool want) {
    if (c.want_write == want) return;
    epoll_event ev{};
    ev.events = EPOLLIN | (want ? EPOLLOUT : 0u);
    ev.data.u64 = slot;
    epoll_ctl(ep, EPOLL_CTL_MOD, c.fd, &ev);
    c.want_write = want;
  };
  // Writes what the socket takes; false when the connection broke.
  auto flush = [&](Conn& c, size_t slot) -> bool {
    while (c.sent < c.out->size()) {
      const ssize_t n = ::send(c.fd, c.out->data() + c.sent, c.out->size() - c.sent, MSG_NOSIGNAL);
      if (n > 0) {
        c.sent += static_cast<size_t>(n);
        continue;
      }
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        set_write_interest(c, slot, true);
        return true;
      }
      if (n < 0 && errno == EINTR) continue;
      return false;
    }
    set_write_interest(c, slot, false);
    return true;
  };

  int64_t next = 0;
  int64_t done = 0;
  auto start_next = [&](Conn& c, size_t slot) {
    while (next < o.requests && c.index < 0) {
      if (c.fd < 0 && !open_conn(c, slot)) {
        ++next;  // counted as failed by open_conn
        ++done;
        continue;
      }
      c.index = next++;
      c.out = &request_bytes(c.index);
      c.sent = 0;
      c.in.clear();
      c.started = Clock::now();
      if (!flush(c, slot)) {
        fail(fmt::format("request {}: the connection broke while sending", c.index));
        ++done;
        close_conn(c);
      }
    }
  };

  const auto t0 = Clock::now();
  for (size_t i = 0; i < conns.size(); ++i) start_next(conns[i], i);
  std::vector<epoll_event> events(conns.size());
  char buf[65536];
  while (done < o.requests) {
    const int n = epoll_wait(ep, events.data(), static_cast<int>(events.size()), 100);
    for (int e = 0; e < n; ++e) {
      const size_t slot = events[static_cast<size_t>(e)].data.u64;
      Conn& c = conns[slot];
      if (c.fd < 0) continue;
      if ((events[static_cast<size_t>(e)].events & EPOLLOUT) && c.index >= 0 && !flush(c, slot)) {
        fail(fmt::format("request {}: the connection broke while sending", c.index));
        ++done;
        close_conn(c);
        start_next(c, slot);
        continue;
      }
      bool broken = false;
      while (true) {
        const ssize_t got = ::recv(c.fd, buf, sizeof(buf), 0);
        if (got > 0) {
          c.in.append(buf, static_cast<size_t>(got));
          continue;
        }
        if (got < 0 && errno == EINTR) continue;
        broken = got == 0 || (errno != EAGAIN && errno != EWOULDBLOCK);
        break;
      }
      if (c.index >= 0) {
        const Parsed p = ParseResponse(c.in);
        if (p.bytes < 0) {
          fail(fmt::format("request {}: not an HTTP/1.1 response with a Content-Length", c.index));
          ++done;
          close_conn(c);
        } else if (p.bytes > 0) {
          const double ms =
              std::chrono::duration<double, std::milli>(Clock::now() - c.started).count();
          if (p.status == o.expect_status) {
            ++result.requests_ok;
            result.latencies_ms.push_back(ms);
            result.ok_indices.push_back(c.index);
          } else {
            const size_t body = c.in.find("\r\n\r\n") + 4;
            fail(fmt::format("HTTP {}: {}", p.status, c.in.substr(body, 500)));
          }
          ++done;
          c.index = -1;
          c.in.clear();
          if (p.close || broken) close_conn(c);
        } else if (broken) {
          fail(fmt::format("request {}: the server closed the connection", c.index));
          ++done;
          close_conn(c);
        }
      } else if (broken) {
        close_conn(c);  // an idle connection the server closed: opened again when needed
      }
      start_next(c, slot);
    }
    // Requests with no answer in time fail; their connections are opened again.
    const auto now = Clock::now();
    for (size_t i = 0; i < conns.size(); ++i) {
      Conn& c = conns[i];
      if (c.index >= 0 && now - c.started > std::chrono::milliseconds(o.timeout_ms)) {
        fail(fmt::format("request {}: no answer within {} ms", c.index, o.timeout_ms));
        ++done;
        close_conn(c);
        start_next(c, i);
      }
    }
  }
  result.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  for (Conn& c : conns) close_conn(c);
  ::close(ep);
  return result;
}

}  // namespace arbiter::bench

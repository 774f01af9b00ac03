#include "net/http_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <string_view>

#include "net/http_pool.h"

namespace arbiter::net {

namespace {

using Clock = std::chrono::steady_clock;

int64_t MsUntil(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(t - Clock::now()).count();
}

std::string AddressOf(const sockaddr_storage& ss, int* port) {
  char buf[INET6_ADDRSTRLEN] = {0};
  if (ss.ss_family == AF_INET) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(&ss);
    inet_ntop(AF_INET, &a->sin_addr, buf, sizeof(buf));
    *port = ntohs(a->sin_port);
  } else if (ss.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&ss);
    *port = ntohs(a->sin6_port);
    if (IN6_IS_ADDR_V4MAPPED(&a->sin6_addr)) {  // ::ffff:1.2.3.4 is the IPv4 client 1.2.3.4
      inet_ntop(AF_INET, reinterpret_cast<const uint8_t*>(&a->sin6_addr) + 12, buf, sizeof(buf));
    } else {
      inet_ntop(AF_INET6, &a->sin6_addr, buf, sizeof(buf));
    }
  } else {
    *port = 0;
  }
  return buf;
}

void PeerAddress(socket_t sock, std::string* ip, int* port) {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  if (::getpeername(sock, reinterpret_cast<sockaddr*>(&ss), &len) != 0) {
    ip->clear();
    *port = 0;
    return;
  }
  *ip = AddressOf(ss, port);
}

// Writes all of `data` within `timeout_ms`; false when the peer is gone or too slow.
bool SendAll(socket_t sock, std::string_view data, int64_t timeout_ms) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  while (!data.empty()) {
    const ssize_t n = ::send(sock, data.data(), data.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      data.remove_prefix(static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) return false;
    const int64_t left = MsUntil(deadline);
    if (left <= 0) return false;
    pollfd p{sock, POLLOUT, 0};
    if (::poll(&p, 1, static_cast<int>(left)) <= 0) return false;
  }
  return true;
}

// A whole response for a request refused before it reached the routes: JSON error body,
// connection closed after it.
std::string CannedResponse(int status, std::string_view reason, std::string_view code,
                           std::string_view message, std::string_view field) {
  std::string body = "{\"error\": {\"code\": \"";
  body += code;
  body += "\", \"message\": \"";
  body += message;  // fixed text: nothing to escape
  body += "\"";
  if (!field.empty()) {
    body += ", \"field\": \"";
    body += field;
    body += "\"";
  }
  body += "}}";
  std::string out = "HTTP/1.1 " + std::to_string(status) + " ";
  out += reason;
  out += "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
         "\r\nConnection: close\r\n";
  if (status == 429) out += "Retry-After: 1\r\n";
  out += "\r\n";
  out += body;
  return out;
}

// Answers `response`, then reads and drops what the client still sends for a moment, so that
// closing with unread bytes does not reset the connection before the client reads the answer.
void AnswerAndLinger(socket_t sock, const std::string& response) {
  if (!SendAll(sock, response, 1000)) return;
  ::shutdown(sock, SHUT_WR);
  const auto deadline = Clock::now() + std::chrono::milliseconds(500);
  char buf[4096];
  size_t drained = 0;
  while (drained < (size_t{1} << 20)) {
    const int64_t left = MsUntil(deadline);
    if (left <= 0) break;
    pollfd p{sock, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left)) <= 0) break;
    const ssize_t n = ::recv(sock, buf, sizeof(buf), MSG_DONTWAIT);
    if (n <= 0) break;
    drained += static_cast<size_t>(n);
  }
}

// The connection's Stream for cpp-httplib: buffered reads under the current request's deadlines
// and limits. A request that breaks one fails its next read; the error response cpp-httplib then
// writes (400) is replaced by the one naming what was broken.
class GuardedStream final : public httplib::Stream {
 public:
  enum class Violation { kNone, kHeaderTimeout, kBodyTimeout, kHeadersTooLarge };

  GuardedStream(socket_t sock, const HttpLimits& limits, HttpServerStats* stats,
                int64_t read_timeout_ms, int64_t write_timeout_ms, std::string peer_ip,
                int peer_port)
      : sock_(sock),
        limits_(limits),
        stats_(stats),
        read_timeout_ms_(read_timeout_ms),
        write_timeout_ms_(write_timeout_ms),
        peer_ip_(std::move(peer_ip)),
        peer_port_(peer_port) {}

  // A request starts: its request line and headers are due by `head_deadline`. The first write
  // of its response (cpp-httplib's status line and headers, written apart from the body) is held
  // and sent with what follows, so that a response leaves in one send, not two.
  void BeginRequest(Clock::time_point head_deadline) {
    hold_next_write_ = true;
    in_head_ = true;
    head_deadline_ = head_deadline;
    head_bytes_ = 0;
    head_lines_ = 0;
    last_ = 0;
    before_last_ = 0;
  }

  Violation violation() const { return violation_; }
  bool answered() const { return answered_; }
  bool buffered() const { return pos_ < len_; }

  // The response for the violation, unless one was already sent in place of cpp-httplib's.
  void Answer() {
    if (answered_ || violation_ == Violation::kNone) return;
    answered_ = true;
    AnswerAndLinger(sock_, ResponseFor(violation_));
  }

  bool is_readable() const override {
    if (pos_ < len_) return true;
    pollfd p{sock_, POLLIN, 0};
    return ::poll(&p, 1, static_cast<int>(read_timeout_ms_)) > 0;
  }

  // Writable, and the peer has not hung up: a client that closed its end is gone, even before
  // a write to it fails.
  // cpp-httplib asks before each chunk of a streamed response (and a route's DataSink may ask).
  bool is_writable() const override {
    if (!held_.empty() && !const_cast<GuardedStream*>(this)->Flush()) return false;
    return WaitWritable();
  }

  ssize_t read(char* ptr, size_t size) override {
    if (violation_ != Violation::kNone) return -1;
    if (pos_ == len_ && !Fill()) return -1;
    size_t n = std::min(size, len_ - pos_);
    if (in_head_) {
      // Count the head's lines and bytes up to the empty line that ends it; hand out no byte
      // beyond it, so that what follows is read under the body's deadline.
      for (size_t i = 0; i < n; ++i) {
        const char c = buf_[pos_ + i];
        ++head_bytes_;
        if (c == '\n') {
          ++head_lines_;
          if (last_ == '\n' || (last_ == '\r' && before_last_ == '\n')) {
            n = i + 1;
            in_head_ = false;
            body_deadline_ = Clock::now() + std::chrono::milliseconds(limits_.body_timeout_ms);
            break;
          }
        }
        before_last_ = last_;
        last_ = c;
        // The request line and the empty line are not headers.
        if (head_bytes_ > limits_.max_header_bytes || head_lines_ > limits_.max_headers + 1) {
          Violate(Violation::kHeadersTooLarge);
          return -1;
        }
      }
    }
    std::memcpy(ptr, buf_ + pos_, n);
    pos_ += n;
    return static_cast<ssize_t>(n);
  }

  ssize_t write(const char* ptr, size_t size) override {
    if (violation_ != Violation::kNone) {
      Answer();  // in place of cpp-httplib's 400
      return static_cast<ssize_t>(size);
    }
    if (hold_next_write_) {
      hold_next_write_ = false;
      // A streamed (chunked) response's provider may wait long before its first chunk: its head
      // leaves at once.
      if (std::string_view(ptr, size).find("Transfer-Encoding") == std::string_view::npos) {
        held_.assign(ptr, size);
        return static_cast<ssize_t>(size);
      }
    }
    return Send(ptr, size);
  }

  // Sends what is held, if anything: before the connection waits for the client (a read), before
  // a streamed response's provider runs (is_writable), and when a request is done.
  bool Flush() { return held_.empty() || Send(nullptr, 0) >= 0; }

  // The addresses are the connection's: read once, not per request.
  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    ip = peer_ip_;
    port = peer_port_;
  }

  void get_local_ip_and_port(std::string& ip, int& port) const override {
    if (local_port_ < 0) {
      sockaddr_storage ss{};
      socklen_t len = sizeof(ss);
      if (::getsockname(sock_, reinterpret_cast<sockaddr*>(&ss), &len) != 0) {
        ip.clear();
        port = 0;
        return;
      }
      local_ip_ = AddressOf(ss, &local_port_);
    }
    ip = local_ip_;
    port = local_port_;
  }

  socket_t socket() const override { return sock_; }

 private:
  static std::string ResponseFor(Violation v) {
    switch (v) {
      case Violation::kHeaderTimeout:
        return CannedResponse(408, "Request Timeout", "deadline_exceeded",
                              "the request line and headers did not arrive in time", "headers");
      case Violation::kBodyTimeout:
        return CannedResponse(408, "Request Timeout", "deadline_exceeded",
                              "the request body did not arrive in time", "body");
      case Violation::kHeadersTooLarge:
        return CannedResponse(431, "Request Header Fields Too Large", "invalid_argument",
                              "too many request headers, or too many bytes of them", "headers");
      case Violation::kNone:
        break;
    }
    return {};
  }

  void Violate(Violation v) {
    violation_ = v;
    std::atomic<int64_t>& counter = v == Violation::kHeaderTimeout ? stats_->header_timeouts
                                    : v == Violation::kBodyTimeout ? stats_->body_timeouts
                                                                   : stats_->headers_too_large;
    counter.fetch_add(1, std::memory_order_relaxed);
  }

  bool WaitWritable() const {
    pollfd p{sock_, static_cast<short>(POLLOUT | POLLRDHUP), 0};
    if (::poll(&p, 1, static_cast<int>(write_timeout_ms_)) <= 0) return false;
    if (p.revents & (POLLERR | POLLHUP | POLLNVAL)) return false;
    if (p.revents & POLLRDHUP) {
      char c;
      // Data pipelined before the hang-up is still readable; only the end counts.
      if (::recv(sock_, &c, 1, MSG_PEEK | MSG_DONTWAIT) == 0) return false;
    }
    return (p.revents & POLLOUT) != 0;
  }

  // Reads what the socket has, waiting at most the read timeout and never past the current
  // deadline; false at the end of the connection, an error or a deadline.
  // What the socket already has is taken without waiting; poll only when it has nothing.
  bool Fill() {
    if (!Flush()) return false;  // a client waiting for "100 Continue" sends nothing before it
    const Clock::time_point deadline = in_head_ ? head_deadline_ : body_deadline_;
    for (;;) {
      const int64_t left = MsUntil(deadline);
      if (left <= 0) {
        Violate(in_head_ ? Violation::kHeaderTimeout : Violation::kBodyTimeout);
        return false;
      }
      const ssize_t n = ::recv(sock_, buf_, sizeof(buf_), MSG_DONTWAIT);
      if (n > 0) {
        pos_ = 0;
        len_ = static_cast<size_t>(n);
        return true;
      }
      if (n == 0) return false;  // the end of the connection
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) return false;
      pollfd p{sock_, POLLIN, 0};
      const int r = ::poll(&p, 1, static_cast<int>(std::min(left, read_timeout_ms_)));
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) return false;
      if (r == 0) {
        if (MsUntil(deadline) <= 0) continue;  // the deadline: named above
        return false;                          // the read timeout
      }
    }
  }

  // Sends the held bytes, then up to `size` bytes of `ptr`, without waiting while the socket
  // takes them and waiting at most the write timeout for it to take more. Returns how many of
  // `ptr`'s bytes were sent (at least one unless `size` is 0), or -1 when the peer is gone or too
  // slow. A client that half-closed after its request still reads the answer.
  ssize_t Send(const char* ptr, size_t size) {
    const auto deadline = Clock::now() + std::chrono::milliseconds(write_timeout_ms_);
    size_t held_sent = 0;
    for (;;) {
      iovec iov[2];
      int count = 0;
      if (held_sent < held_.size()) {
        iov[count++] = {held_.data() + held_sent, held_.size() - held_sent};
      }
      if (size > 0) iov[count++] = {const_cast<char*>(ptr), size};
      if (count == 0) {
        held_.clear();
        return 0;
      }
      msghdr msg{};
      msg.msg_iov = iov;
      msg.msg_iovlen = static_cast<size_t>(count);
      const ssize_t n = ::sendmsg(sock_, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) {
        const size_t held_left = held_.size() - held_sent;
        if (static_cast<size_t>(n) < held_left) {
          held_sent += static_cast<size_t>(n);
          continue;
        }
        held_.clear();
        held_sent = 0;
        const size_t sent = static_cast<size_t>(n) - held_left;
        if (sent > 0 || size == 0) return static_cast<ssize_t>(sent);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) return -1;
      const int64_t left = MsUntil(deadline);
      if (left <= 0) return -1;
      pollfd p{sock_, POLLOUT, 0};
      const int r = ::poll(&p, 1, static_cast<int>(left));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0 || (p.revents & (POLLERR | POLLHUP | POLLNVAL))) return -1;
    }
  }

  const socket_t sock_;
  const HttpLimits& limits_;
  HttpServerStats* const stats_;
  const int64_t read_timeout_ms_;
  const int64_t write_timeout_ms_;
  const std::string peer_ip_;
  const int peer_port_;
  mutable std::string local_ip_;
  mutable int local_port_ = -1;  // -1: not read yet
  std::string held_;             // a response's head, held to leave with its body
  bool hold_next_write_ = false;
  char buf_[16384];
  size_t pos_ = 0;
  size_t len_ = 0;
  bool in_head_ = false;
  Clock::time_point head_deadline_{};
  Clock::time_point body_deadline_{};
  size_t head_bytes_ = 0;
  size_t head_lines_ = 0;
  char last_ = 0;
  char before_last_ = 0;
  Violation violation_ = Violation::kNone;
  bool answered_ = false;
};

}  // namespace

GuardedHttpServer::GuardedHttpServer(HttpLimits limits) : limits_(limits) {
  new_task_queue = [this] {
    return new ElasticThreadPool(limits_.initial_threads, limits_.max_threads,
                                 limits_.idle_thread_ms, &stats_.threads);
  };
}

bool GuardedHttpServer::AdmitAddress(const std::string& address) {
  std::lock_guard<std::mutex> lock(mu_);
  size_t& n = per_address_[address];
  if (limits_.max_connections_per_address > 0 && n >= limits_.max_connections_per_address) {
    if (n == 0) per_address_.erase(address);
    return false;
  }
  ++n;
  return true;
}

void GuardedHttpServer::ReleaseAddress(const std::string& address) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = per_address_.find(address);
  if (it != per_address_.end() && --it->second == 0) per_address_.erase(it);
}

bool GuardedHttpServer::process_and_close_socket(socket_t sock) {
  const auto opened = Clock::now();
  std::string address;
  int port = 0;
  PeerAddress(sock, &address, &port);
  bool ok = false;
  if (!AdmitAddress(address)) {
    stats_.address_limited.fetch_add(1, std::memory_order_relaxed);
    AnswerAndLinger(sock, CannedResponse(429, "Too Many Requests", "resource_exhausted",
                                         "too many open connections from this address; close "
                                         "some or retry shortly",
                                         ""));
  } else {
    stats_.connections.fetch_add(1, std::memory_order_relaxed);
    const int64_t read_ms = read_timeout_sec_ * 1000 + read_timeout_usec_ / 1000;
    const int64_t write_ms = write_timeout_sec_ * 1000 + write_timeout_usec_ / 1000;
    const int64_t keep_alive_ms = keep_alive_timeout_sec_ * 1000;
    GuardedStream strm(sock, limits_, &stats_, std::max<int64_t>(read_ms, 1),
                       std::max<int64_t>(write_ms, 1), address, port);
    size_t left = keep_alive_max_count_;
    bool first = true;
    while (left > 0 && svr_sock_ != INVALID_SOCKET) {
      // Wait for the next request: a new connection as long as its headers may take, a kept-alive
      // one the keep-alive timeout; in steps, so that a stopping server closes it promptly.
      const auto wait_until = first ? opened + std::chrono::milliseconds(limits_.header_timeout_ms)
                                    : Clock::now() + std::chrono::milliseconds(keep_alive_ms);
      bool readable = strm.buffered();
      while (!readable && svr_sock_ != INVALID_SOCKET) {
        const int64_t wait = MsUntil(wait_until);
        if (wait <= 0) break;
        pollfd p{sock, POLLIN, 0};
        const int r = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(wait, 100)));
        if (r < 0 && errno != EINTR) break;
        readable = r > 0;
      }
      if (!readable) break;
      strm.BeginRequest(first
                            ? opened + std::chrono::milliseconds(limits_.header_timeout_ms)
                            : Clock::now() + std::chrono::milliseconds(limits_.header_timeout_ms));
      bool connection_closed = false;
      ok = process_request(strm, left == 1, connection_closed, nullptr);
      if (!strm.Flush()) ok = false;
      if (strm.violation() != GuardedStream::Violation::kNone) {
        strm.Answer();
        break;
      }
      if (!ok || connection_closed) break;
      --left;
      first = false;
    }
    stats_.connections.fetch_sub(1, std::memory_order_relaxed);
    ReleaseAddress(address);
  }
  ::shutdown(sock, SHUT_RDWR);
  ::close(sock);
  return ok;
}

}  // namespace arbiter::net

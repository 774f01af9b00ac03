// GuardedHttpServer: cpp-httplib's server with the limits a server open to untrusted clients needs.
//
// cpp-httplib reads a request's headers with a timeout per read only, so a client sending a byte
// every few seconds holds its connection (and the thread serving it) forever, and it accepts any
// number of headers. This server serves each connection itself (its keep-alive loop, over its own
// Stream) and, per request, enforces:
//   - a header deadline: the request line and headers must arrive within header_timeout_ms of the
//     request's first byte (a new connection: of its opening); else 408 and the connection closes;
//   - a body deadline: the body must arrive within body_timeout_ms after the headers; else 408;
//   - at most max_headers headers and max_header_bytes bytes of request line and headers; else 431;
//   - at most max_connections_per_address open connections per client address; a connection
//     beyond that is answered 429 and closed, so that one address cannot take every thread.
// Between requests a keep-alive connection waits for the next one at most the keep-alive timeout.
// Its Stream also reports a peer that hung up as not writable, so that a response streamed
// slowly (a followed log) notices a client that left without waiting for a write to fail.
// Per request it makes as few system calls as it can: a read takes what the socket has and polls
// only when it has nothing, a write polls only when the socket is full, a response's head leaves
// with its body in one send (a streamed response's head leaves at once), and the peer's address
// is read once per connection.
//
// Threads: connections are served on the task queue's threads (an ElasticThreadPool, whose
// threads exit after idle_thread_ms idle); the counters are atomics, read from any thread.
#pragma once

#include <httplib.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

namespace arbiter::net {

struct HttpLimits {
  int64_t header_timeout_ms = 10000;
  int64_t body_timeout_ms = 120000;
  size_t max_headers = 100;
  size_t max_header_bytes = 64 * 1024;
  size_t max_connections_per_address = 0;  // 0: no limit
  // The thread pool: threads started at once, the most ever, and how long a thread beyond the
  // initial ones may idle before it exits (0: never).
  size_t initial_threads = 8;
  size_t max_threads = 2048;
  int64_t idle_thread_ms = 60000;
};

struct HttpServerStats {
  std::atomic<int64_t> connections{0};  // open now
  std::atomic<int64_t> threads{0};      // the pool's threads now
  std::atomic<int64_t> header_timeouts{0};
  std::atomic<int64_t> body_timeouts{0};
  std::atomic<int64_t> headers_too_large{0};
  std::atomic<int64_t> address_limited{0};
};

class GuardedHttpServer : public httplib::Server {
 public:
  explicit GuardedHttpServer(HttpLimits limits);

  const HttpLimits& limits() const { return limits_; }
  const HttpServerStats& stats() const { return stats_; }

 private:
  bool process_and_close_socket(socket_t sock) override;
  // Counts a connection from `address`; false when that address has its most already.
  bool AdmitAddress(const std::string& address);
  void ReleaseAddress(const std::string& address);

  const HttpLimits limits_;
  HttpServerStats stats_;
  std::mutex mu_;
  std::map<std::string, size_t> per_address_;  // open connections by address; guarded by mu_
};

}  // namespace arbiter::net

#include "net/http_server.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

namespace arbiter::net {
namespace {

using Clock = std::chrono::steady_clock;

// A GuardedHttpServer on a loopback port, serving /hello and a slow streamed /stream.
class GuardedServerTest : public ::testing::Test {
 protected:
  void Start(HttpLimits limits) {
    server_ = std::make_unique<GuardedHttpServer>(limits);
    server_->Get("/hello", [](const httplib::Request&, httplib::Response& res) {
      res.set_content("hello", "text/plain");
    });
    // Writes nothing while the client stays, as a follower of a silent task's log does.
    server_->Get("/stream", [this](const httplib::Request&, httplib::Response& res) {
      res.set_chunked_content_provider("text/plain", [this](size_t, httplib::DataSink& sink) {
        streaming_ = true;
        const auto deadline = Clock::now() + std::chrono::seconds(30);
        while (sink.is_writable() && Clock::now() < deadline) {
          std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
        stream_ended_ = true;
        return false;
      });
    });
    port_ = server_->bind_to_any_port("127.0.0.1");
    ASSERT_GT(port_, 0);
    thread_ = std::thread([this] { server_->listen_after_bind(); });
  }
  void TearDown() override {
    if (server_) server_->stop();
    if (thread_.joinable()) thread_.join();
  }

  int Connect() {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port_));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
    return fd;
  }
  static bool Send(int fd, const std::string& s) {
    return ::send(fd, s.data(), s.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(s.size());
  }
  // What the server sends until it closes the connection or `timeout_ms` passes.
  static std::string ReadAll(int fd, int timeout_ms) {
    std::string out;
    const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
    char buf[4096];
    for (;;) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
      if (left <= 0) break;
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left)) <= 0) break;
      const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
      if (n <= 0) break;
      out.append(buf, static_cast<size_t>(n));
    }
    return out;
  }
  // One response on a kept-alive connection (up to its body "hello").
  static std::string ReadHello(int fd) { return ReadUntil(fd, "hello"); }
  // What the server sends until `end` is among it (at most 10 s).
  static std::string ReadUntil(int fd, const std::string& end) {
    std::string out;
    const auto deadline = Clock::now() + std::chrono::seconds(10);
    char buf[4096];
    while (out.find(end) == std::string::npos && Clock::now() < deadline) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 1000) <= 0) continue;
      const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
      if (n <= 0) break;
      out.append(buf, static_cast<size_t>(n));
    }
    return out;
  }

  std::unique_ptr<GuardedHttpServer> server_;
  std::thread thread_;
  int port_ = 0;
  std::atomic<bool> streaming_{false};
  std::atomic<bool> stream_ended_{false};
};

TEST_F(GuardedServerTest, HeadersTricklingInPastTheDeadlineGet408) {
  HttpLimits l;
  l.header_timeout_ms = 400;
  Start(l);
  const int fd = Connect();
  const auto t0 = Clock::now();
  ASSERT_TRUE(Send(fd, "GET /hello HTTP/1.1\r\nHost: x\r\n"));
  // A header every 100 ms: each read is well within any read timeout, the whole never ends.
  for (int i = 0; i < 20 && Send(fd, "X-Slow: 1\r\n"); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  const std::string answer = ReadAll(fd, 5000);
  ::close(fd);
  EXPECT_EQ(answer.rfind("HTTP/1.1 408 ", 0), 0u) << answer;
  EXPECT_NE(answer.find("\"field\": \"headers\""), std::string::npos) << answer;
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(4));
  EXPECT_EQ(server_->stats().header_timeouts.load(), 1);
}

TEST_F(GuardedServerTest, TooManyHeadersOrTooManyBytesOfThemGet431) {
  HttpLimits l;
  l.max_headers = 20;
  l.max_header_bytes = 4096;
  Start(l);
  std::string many = "GET /hello HTTP/1.1\r\nHost: x\r\n";
  for (int i = 0; i < 5000; ++i) many += "X-A: b\r\n";
  many += "\r\n";
  int fd = Connect();
  Send(fd, many);
  std::string answer = ReadAll(fd, 5000);
  ::close(fd);
  EXPECT_EQ(answer.rfind("HTTP/1.1 431 ", 0), 0u) << answer.substr(0, 200);

  fd = Connect();  // few headers, but long ones
  Send(fd, "GET /hello HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(3000, 'a') +
               "\r\nX-Big2: " + std::string(3000, 'b') + "\r\n\r\n");
  answer = ReadAll(fd, 5000);
  ::close(fd);
  EXPECT_EQ(answer.rfind("HTTP/1.1 431 ", 0), 0u) << answer.substr(0, 200);
  EXPECT_EQ(server_->stats().headers_too_large.load(), 2);

  // Within the limits: served, and a kept-alive connection serves request after request.
  fd = Connect();
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(Send(fd, "GET /hello HTTP/1.1\r\nHost: x\r\nX-A: b\r\n\r\n"));
    const std::string ok = ReadHello(fd);
    EXPECT_EQ(ok.rfind("HTTP/1.1 200 ", 0), 0u) << ok;
  }
  ::close(fd);
}

TEST_F(GuardedServerTest, ABodyTricklingInPastItsDeadlineGets408) {
  HttpLimits l;
  l.body_timeout_ms = 300;
  Start(l);
  server_->Post("/echo", [](const httplib::Request& req, httplib::Response& res) {
    res.set_content(req.body, "text/plain");
  });
  const int fd = Connect();
  ASSERT_TRUE(Send(fd, "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n"));
  for (int i = 0; i < 20 && Send(fd, "x"); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  const std::string answer = ReadAll(fd, 5000);
  ::close(fd);
  EXPECT_EQ(answer.rfind("HTTP/1.1 408 ", 0), 0u) << answer;
  EXPECT_NE(answer.find("\"field\": \"body\""), std::string::npos) << answer;
}

TEST_F(GuardedServerTest, OneAddressCannotHoldMoreThanItsConnections) {
  HttpLimits l;
  l.max_connections_per_address = 3;
  Start(l);
  int held[3];
  for (int& fd : held) {
    fd = Connect();
    ASSERT_TRUE(Send(fd, "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n"));
    EXPECT_EQ(ReadHello(fd).rfind("HTTP/1.1 200 ", 0), 0u);
  }
  const int extra = Connect();
  Send(extra, "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n");
  const std::string refused = ReadAll(extra, 5000);
  ::close(extra);
  EXPECT_EQ(refused.rfind("HTTP/1.1 429 ", 0), 0u) << refused;
  EXPECT_NE(refused.find("Retry-After: 1"), std::string::npos);
  EXPECT_EQ(server_->stats().address_limited.load(), 1);

  // One closes: the address may open another.
  ::close(held[0]);
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  while (server_->stats().connections.load() > 2 && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  held[0] = Connect();
  ASSERT_TRUE(Send(held[0], "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n"));
  EXPECT_EQ(ReadHello(held[0]).rfind("HTTP/1.1 200 ", 0), 0u);
  for (int fd : held) ::close(fd);
}

TEST_F(GuardedServerTest, AStreamNoticesTheClientLeftWithoutAWrite) {
  Start(HttpLimits{});
  const int fd = Connect();
  ASSERT_TRUE(Send(fd, "GET /stream HTTP/1.1\r\nHost: x\r\n\r\n"));
  ReadAll(fd, 300);  // the response's head
  ASSERT_TRUE(streaming_.load());
  EXPECT_FALSE(stream_ended_.load());
  const auto t0 = Clock::now();
  ::close(fd);
  while (!stream_ended_.load() && Clock::now() - t0 < std::chrono::seconds(10)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(stream_ended_.load());
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(3));
}

TEST_F(GuardedServerTest, AResponseLeavesWholeInOneSend) {
  Start(HttpLimits{});
  const int fd = Connect();
  for (int i = 0; i < 4; ++i) {  // within the default keep-alive count (5)
    ASSERT_TRUE(Send(fd, "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n"));
    // The first read after the socket turns readable holds the head and the body alike.
    pollfd p{fd, POLLIN, 0};
    ASSERT_EQ(::poll(&p, 1, 10000), 1);
    char buf[4096];
    const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    ASSERT_GT(n, 0);
    const std::string got(buf, static_cast<size_t>(n));
    EXPECT_EQ(got.rfind("HTTP/1.1 200 ", 0), 0u) << got;
    EXPECT_EQ(got.substr(got.size() - 9), "\r\n\r\nhello") << got;
  }
  ::close(fd);
}

TEST_F(GuardedServerTest, AClientExpecting100ContinueGetsItBeforeItSendsTheBody) {
  Start(HttpLimits{});
  server_->Post("/echo", [](const httplib::Request& req, httplib::Response& res) {
    res.set_content(req.body, "text/plain");
  });
  const int fd = Connect();
  ASSERT_TRUE(Send(fd,
                   "POST /echo HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
                   "Content-Length: 5\r\n\r\n"));
  const std::string got = ReadUntil(fd, "\r\n\r\n");
  EXPECT_EQ(got, "HTTP/1.1 100 Continue\r\n\r\n");
  ASSERT_TRUE(Send(fd, "hello"));
  const std::string answer = ReadHello(fd);
  ::close(fd);
  EXPECT_EQ(answer.rfind("HTTP/1.1 200 ", 0), 0u) << answer;
}

TEST_F(GuardedServerTest, AStreamedResponsesHeadArrivesBeforeItsFirstChunk) {
  Start(HttpLimits{});
  const int fd = Connect();
  ASSERT_TRUE(Send(fd, "GET /stream HTTP/1.1\r\nHost: x\r\n\r\n"));
  const std::string got = ReadUntil(fd, "\r\n\r\n");
  ::close(fd);
  EXPECT_EQ(got.rfind("HTTP/1.1 200 ", 0), 0u) << got;
  EXPECT_NE(got.find("Transfer-Encoding: chunked"), std::string::npos) << got;
  EXPECT_FALSE(stream_ended_.load());  // the provider has written nothing yet
}

TEST_F(GuardedServerTest, AnIdleNewConnectionIsClosedAfterTheHeaderDeadline) {
  HttpLimits l;
  l.header_timeout_ms = 300;
  Start(l);
  const int fd = Connect();
  const auto t0 = Clock::now();
  const std::string got = ReadAll(fd, 5000);  // returns when the server closes
  ::close(fd);
  EXPECT_EQ(got, "");
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(3));
}

}  // namespace
}  // namespace arbiter::net

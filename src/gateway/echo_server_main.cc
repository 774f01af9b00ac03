// arbiter-echo-server: a stand-in model server for the gateway's tests and benchmark.
//
//   arbiter-echo-server [--host 127.0.0.1] [--port N] [--id ID] [--threads N]
//                       [--ready-after-ms N]
//
// Listens on HOST:PORT (PORT from --port, else the environment's PORT, else any free port) and
// prints `listening on HOST:PORT` once it does. Every path answers 200 with a JSON object:
//   {"id": --id or $ARBITER_JOB_ID, "revision": $ARBITER_SERVICE_REVISION or null, "pid": ...,
//    "method": "GET", "path": "/a/b", "query": "x=1", "body_bytes": 0, "headers": {...}}
// Query parameters change the answer: delay_ms=N waits N ms first (a timer: other requests go
// on), status=N answers with that status, chunks=N sends the body chunked in N pieces (10 ms
// apart). GET /readyz and /livez answer 200 or 503; /fail-ready, /fail-live and /recover (any
// method) flip them; --ready-after-ms N keeps /readyz at 503 for N ms after the start.
// SIGTERM or SIGINT: stop accepting, finish the requests in flight (idle keep-alive connections
// are closed), exit 0.
//
// Every connection is served by Boost.Beast on an event loop, so thousands of concurrent
// keep-alive connections cost one small object each.
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "gateway/asio.h"

namespace {

namespace net = arbiter::gateway::net;
namespace beast = arbiter::gateway::beast;
namespace http = arbiter::gateway::http;
using arbiter::gateway::tcp;
using Clock = std::chrono::steady_clock;

struct Options {
  std::string host = "127.0.0.1";
  int port = -1;  // -1: $PORT, else 0
  std::string id;
  int threads = 1;
  int64_t ready_after_ms = 0;
};

// What every connection reads; the flags flip with /fail-ready, /fail-live, /recover.
struct State {
  std::string id;
  std::string revision_json = "null";
  long pid = 0;
  Clock::time_point ready_at;
  std::atomic<bool> fail_ready{false};
  std::atomic<bool> fail_live{false};
  std::atomic<bool> draining{false};
};

std::string JsonString(std::string_view s) {
  std::string out = "\"";
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out += ch;
        }
    }
  }
  out += '"';
  return out;
}

// The value of `name` in a query string ("a=1&b=2"); nullopt when absent.
std::optional<std::string_view> QueryParam(std::string_view query, std::string_view name) {
  while (!query.empty()) {
    const size_t amp = query.find('&');
    const std::string_view pair = query.substr(0, amp);
    const size_t eq = pair.find('=');
    if (pair.substr(0, eq) == name) {
      return eq == std::string_view::npos ? std::string_view() : pair.substr(eq + 1);
    }
    if (amp == std::string_view::npos) break;
    query.remove_prefix(amp + 1);
  }
  return std::nullopt;
}

int64_t ToInt(std::optional<std::string_view> v, int64_t fallback) {
  if (!v || v->empty()) return fallback;
  return std::strtoll(std::string(*v).c_str(), nullptr, 10);
}

class Session;

// The open connections, so that a drain can close the idle ones. Touched on accept, close and
// drain only.
struct Sessions {
  std::mutex mu;
  std::list<std::weak_ptr<Session>> open;
};

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, State& state, Sessions& sessions)
      : socket_(std::move(socket)),
        timer_(socket_.get_executor()),
        state_(state),
        sessions_(sessions) {}

  ~Session() {
    std::lock_guard<std::mutex> lock(sessions_.mu);
    sessions_.open.erase(self_);
  }

  void Start() {
    {
      std::lock_guard<std::mutex> lock(sessions_.mu);
      self_ = sessions_.open.insert(sessions_.open.end(), weak_from_this());
    }
    net::dispatch(socket_.get_executor(), [self = shared_from_this()] { self->Read(); });
  }

  // At the drain: an idle connection closes now, a busy one after its answer.
  void Drain() {
    net::post(socket_.get_executor(), [self = shared_from_this()] {
      if (!self->busy_) {
        beast::error_code ec;
        self->socket_.shutdown(tcp::socket::shutdown_both, ec);
        self->socket_.close(ec);
      }
    });
  }

 private:
  void Read() {
    if (state_.draining.load()) return;  // closes: the last reference goes
    req_ = {};
    http::async_read(socket_, buffer_, req_,
                     [self = shared_from_this()](beast::error_code ec, size_t) {
                       if (ec) return;  // closed, reset or not HTTP: the connection ends
                       self->busy_ = true;
                       self->Handle();
                     });
  }

  void Handle() {
    const std::string_view target = req_.target();
    const size_t q = target.find('?');
    const std::string_view path = target.substr(0, q);
    const std::string_view query =
        q == std::string_view::npos ? std::string_view() : target.substr(q + 1);
    res_ = {};
    res_.version(req_.version());
    res_.keep_alive(req_.keep_alive() && !state_.draining.load());
    res_.set(http::field::content_type, "application/json");

    if (path == "/readyz") {
      const bool ready = !state_.fail_ready.load() && Clock::now() >= state_.ready_at;
      Answer(ready ? http::status::ok : http::status::service_unavailable,
             ready ? "{\"ready\":true}\n" : "{\"ready\":false}\n");
      return;
    }
    if (path == "/livez") {
      const bool live = !state_.fail_live.load();
      Answer(live ? http::status::ok : http::status::service_unavailable,
             live ? "{\"live\":true}\n" : "{\"live\":false}\n");
      return;
    }
    if (path == "/fail-ready" || path == "/fail-live" || path == "/recover") {
      if (path == "/fail-ready") state_.fail_ready = true;
      if (path == "/fail-live") state_.fail_live = true;
      if (path == "/recover") {
        state_.fail_ready = false;
        state_.fail_live = false;
      }
      Answer(http::status::ok, "{\"ok\":true}\n");
      return;
    }

    const int64_t delay_ms = ToInt(QueryParam(query, "delay_ms"), 0);
    status_ = static_cast<int>(ToInt(QueryParam(query, "status"), 200));
    if (status_ < 200 || status_ > 599) status_ = 200;
    chunks_ = static_cast<int>(ToInt(QueryParam(query, "chunks"), 0));
    body_ = Describe(path, query);
    if (delay_ms > 0) {
      timer_.expires_after(std::chrono::milliseconds(delay_ms));
      timer_.async_wait([self = shared_from_this()](beast::error_code) { self->Reply(); });
      return;
    }
    Reply();
  }

  std::string Describe(std::string_view path, std::string_view query) const {
    std::string b = "{\"id\":" + JsonString(state_.id) + ",\"revision\":" + state_.revision_json +
                    ",\"pid\":" + std::to_string(state_.pid) +
                    ",\"method\":" + JsonString(req_.method_string()) +
                    ",\"path\":" + JsonString(path) + ",\"query\":" + JsonString(query) +
                    ",\"body_bytes\":" + std::to_string(req_.body().size()) + ",\"headers\":{";
    bool first = true;
    for (const auto& f : req_) {
      std::string name(f.name_string());
      for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      if (!first) b += ',';
      first = false;
      b += JsonString(name) + ":" + JsonString(f.value());
    }
    b += "}}\n";
    return b;
  }

  void Reply() {
    if (chunks_ > 0) {
      StartChunked();
      return;
    }
    Answer(static_cast<http::status>(status_), std::move(body_));
  }

  void Answer(http::status status, std::string body) {
    res_.result(status);
    res_.body() = std::move(body);
    res_.prepare_payload();
    http::async_write(socket_, res_, [self = shared_from_this()](beast::error_code ec, size_t) {
      self->Done(ec);
    });
  }

  // A chunked answer: the header, then chunk i of N ("{"chunk":i}\n") every 10 ms, then the
  // description as the last chunk.
  void StartChunked() {
    chunked_.emplace();
    chunked_->version(res_.version());
    chunked_->result(static_cast<http::status>(status_));
    chunked_->keep_alive(res_.keep_alive());
    chunked_->set(http::field::content_type, "application/json");
    chunked_->chunked(true);
    serializer_.emplace(*chunked_);
    http::async_write_header(socket_, *serializer_,
                             [self = shared_from_this()](beast::error_code ec, size_t) {
                               if (ec) return self->Done(ec);
                               self->NextChunk(0);
                             });
  }

  void NextChunk(int i) {
    if (i == chunks_) {
      net::async_write(socket_, http::make_chunk(net::buffer(body_)),
                       [self = shared_from_this()](beast::error_code ec, size_t) {
                         if (ec) return self->Done(ec);
                         net::async_write(self->socket_, http::make_chunk_last(),
                                          [self](beast::error_code ec2, size_t) {
                                            self->serializer_.reset();
                                            self->chunked_.reset();
                                            self->Done(ec2);
                                          });
                       });
      return;
    }
    chunk_text_ = "{\"chunk\":" + std::to_string(i) + "}\n";
    net::async_write(
        socket_, http::make_chunk(net::buffer(chunk_text_)),
        [self = shared_from_this(), i](beast::error_code ec, size_t) {
          if (ec) return self->Done(ec);
          self->timer_.expires_after(std::chrono::milliseconds(10));
          self->timer_.async_wait([self, i](beast::error_code) { self->NextChunk(i + 1); });
        });
  }

  void Done(beast::error_code ec) {
    busy_ = false;
    if (ec || !res_.keep_alive() || state_.draining.load()) {
      beast::error_code ignored;
      socket_.shutdown(tcp::socket::shutdown_send, ignored);
      return;  // the last reference goes: closed
    }
    Read();
  }

  tcp::socket socket_;
  net::steady_timer timer_;
  State& state_;
  Sessions& sessions_;
  std::list<std::weak_ptr<Session>>::iterator self_;
  beast::flat_buffer buffer_;
  http::request<http::string_body> req_;
  http::response<http::string_body> res_;
  std::optional<http::response<http::empty_body>> chunked_;
  std::optional<http::response_serializer<http::empty_body>> serializer_;
  std::string body_;
  std::string chunk_text_;
  int status_ = 200;
  int chunks_ = 0;
  bool busy_ = false;
};

void Accept(tcp::acceptor& acceptor, State& state, Sessions& sessions) {
  acceptor.async_accept(net::make_strand(acceptor.get_executor()),
                        [&](beast::error_code ec, tcp::socket socket) {
                          if (ec == net::error::operation_aborted || !acceptor.is_open()) return;
                          if (!ec) {
                            socket.set_option(tcp::no_delay(true), ec);
                            std::make_shared<Session>(std::move(socket), state, sessions)->Start();
                          }
                          Accept(acceptor, state, sessions);
                        });
}

int Usage(const char* why) {
  std::fprintf(stderr,
               "error: %s\nusage: arbiter-echo-server [--host H] [--port N] [--id ID] "
               "[--threads N] [--ready-after-ms N]\n",
               why);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (const char* id = std::getenv("ARBITER_JOB_ID")) o.id = id;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::printf(
          "arbiter-echo-server [--host H] [--port N] [--id ID] [--threads N] "
          "[--ready-after-ms N]\n");
      return 0;
    }
    if (i + 1 >= argc) return Usage(("missing value of " + a).c_str());
    const std::string v = argv[++i];
    if (a == "--host") {
      o.host = v;
    } else if (a == "--port") {
      o.port = std::atoi(v.c_str());
    } else if (a == "--id") {
      o.id = v;
    } else if (a == "--threads") {
      o.threads = std::max(1, std::atoi(v.c_str()));
    } else if (a == "--ready-after-ms") {
      o.ready_after_ms = std::atoll(v.c_str());
    } else {
      return Usage(("unknown flag " + a).c_str());
    }
  }
  if (o.port < 0) {
    const char* p = std::getenv("PORT");
    o.port = p != nullptr ? std::atoi(p) : 0;
  }
  if (o.port < 0 || o.port > 65535) return Usage("--port must be 0-65535");

  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }

  State state;
  state.id = o.id;
  state.pid = static_cast<long>(getpid());
  state.ready_at = Clock::now() + std::chrono::milliseconds(o.ready_after_ms);
  if (const char* rev = std::getenv("ARBITER_SERVICE_REVISION"); rev != nullptr) {
    const std::string r = rev;
    const bool number =
        !r.empty() && r.size() < 10 && r.find_first_not_of("0123456789") == std::string::npos;
    state.revision_json = number ? r : JsonString(r);
  }
  Sessions sessions;

  net::io_context ioc(o.threads);
  tcp::acceptor acceptor(ioc);
  beast::error_code ec;
  const auto address = net::ip::make_address(o.host, ec);
  if (ec) return Usage(("--host " + o.host + ": not an IP address").c_str());
  const tcp::endpoint endpoint(address, static_cast<unsigned short>(o.port));
  acceptor.open(endpoint.protocol(), ec);
  if (!ec) acceptor.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) acceptor.bind(endpoint, ec);
  if (!ec) acceptor.listen(4096, ec);
  if (ec) {
    std::fprintf(stderr, "error: cannot listen on %s:%d: %s\n", o.host.c_str(), o.port,
                 ec.message().c_str());
    return 1;
  }
  std::printf("listening on %s:%d\n", o.host.c_str(), acceptor.local_endpoint().port());
  std::fflush(stdout);

  net::signal_set signals(ioc, SIGTERM, SIGINT);
  signals.async_wait([&](beast::error_code e, int) {
    if (e) return;
    state.draining = true;
    beast::error_code ignored;
    acceptor.close(ignored);
    std::vector<std::shared_ptr<Session>> open;
    {
      std::lock_guard<std::mutex> lock(sessions.mu);
      for (auto& w : sessions.open) {
        if (auto s = w.lock()) open.push_back(std::move(s));
      }
    }
    for (auto& s : open) s->Drain();
  });
  Accept(acceptor, state, sessions);

  std::vector<std::thread> threads;
  for (int i = 1; i < o.threads; ++i) threads.emplace_back([&] { ioc.run(); });
  ioc.run();
  for (auto& t : threads) t.join();
  return 0;
}

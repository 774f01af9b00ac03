#include "agent/log_server.h"

#include <fmt/format.h>
#include <httplib.h>
#include <unistd.h>

#include "api/errors.h"
#include "common/net.h"
#include "net/http_params.h"
#include "net/http_server.h"
#include "node/task_logs.h"

namespace arbiter::agent {

namespace {

void SendError(httplib::Response& res, const Status& st) {
  res.status = api::HttpStatusFor(st.code());
  res.set_content(api::ErrorBody(st).dump(), "application/json");
}

// Compares in time independent of where the strings differ.
bool SameSecret(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

bool ParseUint(const std::string& s, uint64_t* out) {
  if (s.empty() || s.size() > 19) return false;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  *out = v;
  return true;
}

net::HttpLimits LogServerLimits() {
  net::HttpLimits l;
  l.initial_threads = 2;
  l.max_threads = 256;
  // Its clients are the server's log proxies: every follower from the server's one address.
  l.max_connections_per_address = 0;
  l.max_headers = 32;
  l.max_header_bytes = 16 * 1024;
  return l;
}

}  // namespace

LogServer::LogServer(std::string work_dir, std::string token, RunningFn running)
    : work_dir_(std::move(work_dir)),
      token_(std::move(token)),
      running_(std::move(running)),
      http_(std::make_unique<net::GuardedHttpServer>(LogServerLimits())) {
  // A follower (`arbiter logs -f`) holds its connection while the task runs: a thread each.
  http_->set_socket_options([](socket_t sock) { SetListenSocketOptions(sock); });
  http_->Get("/healthz", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(R"({"status": "ok"})", "application/json");
  });
  http_->Get(R"(/v1/logs/(\d+)/(\d+))", [this](const httplib::Request& req,
                                               httplib::Response& res) {
    const std::string auth = req.get_header_value("Authorization");
    if (auth.rfind("Bearer ", 0) != 0 || !SameSecret(auth.substr(7), token_)) {
      return SendError(res, Status(StatusCode::kUnauthenticated, "missing or wrong log token"));
    }
    uint64_t job = 0;
    uint64_t task = 0;
    if (!ParseUint(req.matches[1], &job) || !ParseUint(req.matches[2], &task) ||
        task > (1u << 20)) {
      return SendError(res, InvalidArgument("task", "must be a task index"));
    }
    node::StreamLogOptions o;
    const std::string stream = req.get_param_value("stream");
    if (!stream.empty() && stream != "stdout" && stream != "stderr") {
      return SendError(res, InvalidArgument("stream", "must be stdout or stderr"));
    }
    if (req.has_param("offset") && !ParseUint(req.get_param_value("offset"), &o.offset)) {
      return SendError(res, InvalidArgument("offset", "must be a byte offset"));
    }
    uint64_t idle = 0;
    if (req.has_param("idle_ms")) {
      if (!ParseUint(req.get_param_value("idle_ms"), &idle) || idle > 3600000) {
        return SendError(res, InvalidArgument("idle_ms", "must be between 0 and 3600000"));
      }
      o.max_idle_ms = static_cast<int64_t>(idle);
    }
    auto follow = net::QueryBool(req, "follow");
    if (!follow.ok()) return SendError(res, follow.status());
    o.follow = *follow;
    auto probe = net::QueryBool(req, "probe");
    if (!probe.ok()) return SendError(res, probe.status());
    const auto t = static_cast<int32_t>(task);
    const std::string path = node::TaskLogPath(work_dir_, job, t, stream == "stderr");
    const bool exists = ::access(path.c_str(), R_OK) == 0;
    if (!exists && !(o.follow && running_(job, t))) {
      return SendError(res, NotFound(fmt::format("job {} task {} has no {} log on this node", job,
                                                 task, stream.empty() ? "stdout" : stream)));
    }
    if (*probe) {
      res.set_content(R"({"exists": true})", "application/json");
      return;
    }
    res.set_chunked_content_provider(
        "text/plain; charset=utf-8", [this, path, o, job, t](size_t, httplib::DataSink& sink) {
          uint64_t sent = 0;
          const node::StreamEnd end = node::StreamTaskLog(
              path, o, [this, job, t] { return running_(job, t); }, sink.write, &stopping_, &sent,
              [&sink] { return !sink.is_writable(); });
          if (end == node::StreamEnd::kWriteFailed || end == node::StreamEnd::kStopped) {
            return false;
          }
          sink.done();
          return true;
        });
  });
}

LogServer::~LogServer() { Stop(); }

Result<int> LogServer::Start(const std::string& host, int port) {
  int bound = port;
  if (port == 0) {
    bound = http_->bind_to_any_port(host);
  } else if (!http_->bind_to_port(host, port)) {
    bound = -1;
  }
  if (bound <= 0) {
    return Status(StatusCode::kUnavailable,
                  fmt::format("--listen: cannot listen on {}:{}", host, port));
  }
  thread_ = std::thread([this] { http_->listen_after_bind(); });
  return bound;
}

void LogServer::Stop() {
  if (stopping_.exchange(true)) return;
  http_->stop();
  if (thread_.joinable()) thread_.join();
}

}  // namespace arbiter::agent

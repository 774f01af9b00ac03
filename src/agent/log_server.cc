#include "agent/log_server.h"

#include <fmt/format.h>
#include <httplib.h>
#include <unistd.h>

#include <filesystem>

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
  http_->Get(R"(/v1/logs/(\d+)/(\d+))",
             [this](const httplib::Request& req, httplib::Response& res) { ServeLog(req, res); });
  http_->Get(R"(/v1/logs/(\d+)/(\d+)/runs)",
             [this](const httplib::Request& req, httplib::Response& res) { ServeRuns(req, res); });
}

namespace {

// The task a request names, once its token is checked.
Result<node::TaskLogRef> Authorize(const httplib::Request& req, const std::string& work_dir,
                                   const std::string& token) {
  const std::string auth = req.get_header_value("Authorization");
  if (auth.rfind("Bearer ", 0) != 0 || !SameSecret(auth.substr(7), token)) {
    return Status(StatusCode::kUnauthenticated, "missing or wrong log token");
  }
  uint64_t job = 0;
  uint64_t task = 0;
  if (!ParseUint(req.matches[1], &job) || !ParseUint(req.matches[2], &task) || task > (1u << 20)) {
    return InvalidArgument("task", "must be a task index");
  }
  return node::TaskLogRef{work_dir, job, static_cast<int32_t>(task)};
}

Result<node::StreamLogOptions> ParseLogOptions(const httplib::Request& req) {
  node::StreamLogOptions o;
  o.stream = node::LogStream::kStdout;
  if (req.has_param("stream")) {
    auto s = node::ParseLogStream(req.get_param_value("stream"));
    if (!s) return InvalidArgument("stream", "must be combined, stdout or stderr");
    o.stream = *s;
  }
  if (req.has_param("run")) {
    uint64_t run = 0;
    if (!ParseUint(req.get_param_value("run"), &run)) {
      return InvalidArgument("run", "must be a run (an attempt)");
    }
    o.run = run;
  }
  if (req.has_param("offset") && !ParseUint(req.get_param_value("offset"), &o.offset)) {
    return InvalidArgument("offset", "must be a byte offset");
  }
  if (req.has_param("idle_ms")) {
    uint64_t idle = 0;
    if (!ParseUint(req.get_param_value("idle_ms"), &idle) || idle > 3600000) {
      return InvalidArgument("idle_ms", "must be between 0 and 3600000");
    }
    o.max_idle_ms = static_cast<int64_t>(idle);
  }
  auto follow = net::QueryBool(req, "follow");
  if (!follow.ok()) return follow.status();
  o.follow = *follow;
  return o;
}

}  // namespace

void LogServer::ServeLog(const httplib::Request& req, httplib::Response& res) {
  auto ref = Authorize(req, work_dir_, token_);
  if (!ref.ok()) return SendError(res, ref.status());
  auto o = ParseLogOptions(req);
  if (!o.ok()) return SendError(res, o.status());
  auto probe = net::QueryBool(req, "probe");
  if (!probe.ok()) return SendError(res, probe.status());
  // The run writes while its processes run here (without a run: any run of the task).
  auto running = [this, r = *ref, run = o->run] {
    const uint64_t now = running_(r.job, r.task);
    return now != 0 && (!run || now == *run);
  };
  const bool exists = o->run ? !node::RunLogSegments(*ref, *o->run, o->stream).empty()
                             : ::access(node::TaskLogPath(*ref, o->stream).c_str(), R_OK) == 0;
  if (!exists && !(o->follow && running())) {
    // Output past the node's retention is in its archive (node/output_retention.h).
    std::error_code ec;
    const bool archived =
        !std::filesystem::exists(fmt::format("{}/jobs/{}", work_dir_, ref->job), ec) &&
        std::filesystem::exists(work_dir_ + "/archive", ec);
    return SendError(
        res, NotFound(fmt::format(
                 "job {} task {} has no {} log{} on this node{}", ref->job, ref->task,
                 node::LogStreamName(o->stream),
                 o->run ? fmt::format(" of run {}", *o->run) : std::string(),
                 archived ? "; output older than the node's output retention is archived in "
                            "WORK_DIR/archive/output-YYYY-MM-DD.jsonl.gz on the node"
                          : "")));
  }
  if (*probe) {
    res.set_content(R"({"exists": true})", "application/json");
    return;
  }
  res.set_chunked_content_provider(
      "text/plain; charset=utf-8",
      [this, r = *ref, opts = *o, running](size_t, httplib::DataSink& sink) {
        uint64_t sent = 0;
        const node::StreamEnd end =
            node::StreamRunLog(r, opts, running, sink.write, &stopping_, &sent,
                               [&sink] { return !sink.is_writable(); });
        if (end == node::StreamEnd::kWriteFailed || end == node::StreamEnd::kStopped) {
          return false;
        }
        sink.done();
        return true;
      });
}

void LogServer::ServeRuns(const httplib::Request& req, httplib::Response& res) {
  auto ref = Authorize(req, work_dir_, token_);
  if (!ref.ok()) return SendError(res, ref.status());
  std::string body = R"({"runs": [)";
  const std::vector<uint64_t> runs = node::TaskLogRuns(*ref);
  for (size_t i = 0; i < runs.size(); ++i) body += fmt::format("{}{}", i ? ", " : "", runs[i]);
  body += "]}";
  res.set_content(body, "application/json");
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

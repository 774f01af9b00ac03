// The node agents' routes (register, heartbeat) and a job's task logs, read from the built-in
// node's work folder or proxied from the agent's log port.
#include <fmt/format.h>
#include <httplib.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>

#include "api/agent_codec.h"
#include "api/errors.h"
#include "net/http_params.h"
#include "node/task_logs.h"
#include "server/http_api.h"

namespace arbiter::server {

using nlohmann::json;

namespace {

Result<uint64_t> ParseUint(const std::string& s, const char* field, uint64_t max) {
  uint64_t v = 0;
  bool ok = !s.empty() && s.size() <= 19;
  for (char c : s) {
    ok = ok && c >= '0' && c <= '9';
    if (ok) v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  if (!ok || v > max) {
    return InvalidArgument(field, fmt::format("must be an integer between 0 and {}", max));
  }
  return v;
}

Status NodeOnly(const Principal& p) {
  if (p.role == Role::kNode) return Status::Ok();
  return {StatusCode::kPermissionDenied,
          fmt::format("only node tokens may use the agent routes; {} holds a {} token", p.user,
                      RoleName(p.role))};
}

}  // namespace

struct HttpApi::LogQuery {
  uint64_t job = 0;
  int32_t task = 0;
  bool stderr_log = false;
  bool follow = false;
};

namespace {

Result<HttpApi::LogQuery> ParseLogQuery(const httplib::Request& req) {
  HttpApi::LogQuery q;
  auto id = ParseUint(req.matches[1], "id", uint64_t{1} << 62);
  if (!id.ok()) return id.status();
  q.job = *id;
  if (req.has_param("task")) {
    auto t = ParseUint(req.get_param_value("task"), "task", 1 << 20);
    if (!t.ok()) return t.status();
    q.task = static_cast<int32_t>(*t);
  }
  const std::string stream = req.get_param_value("stream");
  if (!stream.empty() && stream != "stdout" && stream != "stderr") {
    return InvalidArgument("stream", fmt::format("must be stdout or stderr, got '{}'", stream));
  }
  q.stderr_log = stream == "stderr";
  auto follow = net::QueryBool(req, "follow");
  if (!follow.ok()) return follow.status();
  q.follow = *follow;
  return q;
}

}  // namespace

void HttpApi::RegisterAgentRoutes(const RouteFn& route) {
  route("POST", "/api/v1/agent/register", "/api/v1/agent/register",
        "Node agents (node tokens): register a node with its capacity, GPUs, labels and log port",
        [this](const Principal& p, const httplib::Request& req, httplib::Response& res) {
          if (Status st = NodeOnly(p); !st.ok()) return SendError(res, st);
          auto body = ParseJsonBody(req);
          if (!body.ok()) return SendError(res, body.status());
          auto reg = api::ParseAgentRegistration(*body);
          if (!reg.ok()) return SendError(res, reg.status());
          auto r = cp_->RegisterAgent(p, std::move(reg).value(), req.remote_addr);
          if (!r.ok()) return SendError(res, r.status());
          res.set_content(r->dump(), "application/json");
        });
  route("POST", "/api/v1/agent/heartbeat", "/api/v1/agent/heartbeat",
        "Node agents (node tokens): telemetry and task reports in, the node's assignments out",
        [this](const Principal& p, const httplib::Request& req, httplib::Response& res) {
          if (Status st = NodeOnly(p); !st.ok()) return SendError(res, st);
          auto body = ParseJsonBody(req);
          if (!body.ok()) return SendError(res, body.status());
          auto hb = api::ParseAgentHeartbeat(*body);
          if (!hb.ok()) return SendError(res, hb.status());
          auto r = cp_->Heartbeat(p, *hb);
          if (!r.ok()) return SendError(res, r.status());
          res.set_content(r->dump(), "application/json");
        });
  route("GET", "/api/v1/agent/watch", "/api/v1/agent/watch",
        "Node agents (node tokens): returns when the node's assignments may have changed from "
        "version=V (from a heartbeat or an earlier watch), or after wait_ms (default 10000, at "
        "most 60000); answers the current version",
        [this](const Principal& p, const httplib::Request& req, httplib::Response& res) {
          if (Status st = NodeOnly(p); !st.ok()) return SendError(res, st);
          const std::string node = req.get_param_value("node");
          if (node.empty()) {
            return SendError(res, InvalidArgument("node", "is required: the node's name"));
          }
          auto version = ParseUint(req.get_param_value("version"), "version", uint64_t{1} << 62);
          if (!version.ok()) return SendError(res, version.status());
          uint64_t wait_ms = 10000;
          if (req.has_param("wait_ms")) {
            auto w = ParseUint(req.get_param_value("wait_ms"), "wait_ms", 60000);
            if (!w.ok()) return SendError(res, w.status());
            wait_ms = *w;
          }
          auto r = cp_->WatchAssignments(p, node, *version, static_cast<DurationMs>(wait_ms));
          if (!r.ok()) return SendError(res, r.status());
          res.set_content(json{{"version", *r}}.dump(), "application/json");
        });
  route("GET", "/api/v1/jobs/{id}/logs", R"(/api/v1/jobs/(\d+)/logs)",
        "A task's output: task=N (default 0), stream=stdout|stderr, follow=true streams until the "
        "task ends",
        [this](const Principal& p, const httplib::Request& req, httplib::Response& res) {
          auto q = ParseLogQuery(req);
          if (!q.ok()) return SendError(res, q.status());
          auto src = cp_->JobLogSource(p, q->job, q->task);
          if (!src.ok()) return SendError(res, src.status());
          if (!src->agent_url.empty()) return ProxyLogs(p, *q, *src, res);
          if (!options_.local_node.empty() && src->node == options_.local_node) {
            return LocalLogs(p, *q, res);
          }
          SendError(res, Status(StatusCode::kUnavailable,
                                fmt::format("node {} has no agent serving logs now; the logs of "
                                            "job {} are on it under jobs/{}/",
                                            src->node, q->job, q->job)));
        });
}

namespace {

// Counts a log request while it streams (arbiter_log_followers).
class FollowerCount {
 public:
  explicit FollowerCount(std::atomic<int64_t>* n) : n_(n) { n_->fetch_add(1); }
  ~FollowerCount() { n_->fetch_sub(1); }
  FollowerCount(const FollowerCount&) = delete;
  FollowerCount& operator=(const FollowerCount&) = delete;

 private:
  std::atomic<int64_t>* n_;
};

}  // namespace

// The built-in node: the file itself, followed while the control plane says the task runs.
void HttpApi::LocalLogs(const Principal& p, const LogQuery& q, httplib::Response& res) {
  const std::string path = node::TaskLogPath(options_.local_work_dir, q.job, q.task, q.stderr_log);
  auto running = [this, p, q] {
    auto s = cp_->JobLogSource(p, q.job, q.task);
    return s.ok() && s->running;
  };
  if (::access(path.c_str(), R_OK) != 0 && !(q.follow && running())) {
    return SendError(res, NotFound(fmt::format("job {} task {} has no {} log yet", q.job, q.task,
                                               q.stderr_log ? "stderr" : "stdout")));
  }
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/plain; charset=utf-8", [this, path, q, running](size_t, httplib::DataSink& sink) {
        node::StreamLogOptions o;
        o.follow = q.follow;
        uint64_t sent = 0;
        FollowerCount counted(&log_followers_);
        const node::StreamEnd end =
            node::StreamTaskLog(path, o, running, sink.write, &stopping_, &sent,
                                [&sink] { return !sink.is_writable(); });
        if (end == node::StreamEnd::kWriteFailed || end == node::StreamEnd::kStopped) return false;
        sink.done();
        return true;
      });
}

// A node agent's log port: asked first whether the log exists (so that errors keep their
// status), then streamed; following, the request is repeated from the last byte while the task
// runs (each answer ends after some idle time, or when the agent's process ends).
void HttpApi::ProxyLogs(const Principal& p, const LogQuery& q, const LogSource& src,
                        httplib::Response& res) {
  const std::string base =
      fmt::format("/v1/logs/{}/{}?stream={}", q.job, q.task, q.stderr_log ? "stderr" : "stdout");
  const httplib::Headers headers = {{"Authorization", "Bearer " + src.agent_token}};
  {
    httplib::Client probe(src.agent_url);
    probe.set_connection_timeout(3);
    probe.set_read_timeout(10);
    auto r = probe.Get(base + "&probe=true", headers);
    if (!r) {
      return SendError(
          res, Status(StatusCode::kUnavailable,
                      fmt::format("the agent of node {} does not answer at {}: {}", src.node,
                                  src.agent_url, httplib::to_string(r.error()))));
    }
    const bool pending = q.follow && src.running;  // not started yet: the file comes later
    if (r->status != 200 && !(r->status == 404 && pending)) {
      res.status = r->status;
      res.set_content(r->body, "application/json");
      return;
    }
  }
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/plain; charset=utf-8",
      [this, p, q, base, headers, url = src.agent_url](size_t, httplib::DataSink& sink) {
        uint64_t offset = 0;
        bool write_failed = false;
        FollowerCount counted(&log_followers_);
        std::unique_ptr<httplib::Client> c;
        std::string c_url;
        for (;;) {
          auto s = cp_->JobLogSource(p, q.job, q.task);
          const bool live = q.follow && s.ok() && s->running;
          const std::string want = s.ok() && !s->agent_url.empty() ? s->agent_url : url;
          if (!c || c_url != want) {  // one keep-alive connection to the agent while it stays
            c = std::make_unique<httplib::Client>(want);
            c_url = want;
            c->set_connection_timeout(3);
            c->set_read_timeout(60);
            c->set_keep_alive(true);
          }
          const uint64_t before = offset;
          int status = 0;
          // Each answer ends after a second without new bytes, so that a reader that left is
          // noticed (below) while the task is silent.
          auto r = c->Get(
              fmt::format("{}&offset={}&follow={}&idle_ms=1000", base, offset,
                          live ? "true" : "false"),
              headers,
              [&](const httplib::Response& head) {
                status = head.status;
                return true;
              },
              [&](const char* data, size_t n) {
                if (status != 200) return true;  // no log yet: not part of it
                if (!sink.write(data, n)) {
                  write_failed = true;
                  return false;
                }
                offset += n;
                return true;
              });
          if (write_failed || stopping_ || !sink.is_writable()) return false;
          if (!live) break;
          // Nothing new (the agent saw the task end before the server did, or it is away).
          if (!r || offset == before) std::this_thread::sleep_for(std::chrono::milliseconds(500));
        }
        sink.done();
        return true;
      });
}

}  // namespace arbiter::server

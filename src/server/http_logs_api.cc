// A job's task logs (GET /api/v1/jobs/{id}/logs): every run of the task, one after the other with
// a separator line between them, read from the built-in node's files or proxied from the log
// ports of the agents of the nodes the runs were on (node/task_logs.h, agent/log_server.h); with
// follow=true, through the job's next runs until it ends.
#include <fmt/format.h>
#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <thread>

#include "api/errors.h"
#include "net/http_params.h"
#include "node/task_logs.h"
#include "server/http_api.h"
#include "server/log_runs.h"

namespace arbiter::server {

using nlohmann::json;

namespace {

struct LogQuery {
  uint64_t job = 0;
  int32_t task = 0;
  node::LogStream stream = node::LogStream::kStdout;
  uint64_t run = 0;  // 0: every run
  bool follow = false;
};

Result<uint64_t> ParseNumber(const std::string& s, const char* field, uint64_t max) {
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

Result<LogQuery> ParseLogQuery(const httplib::Request& req) {
  LogQuery q;
  auto id = ParseNumber(req.matches[1], "id", uint64_t{1} << 62);
  if (!id.ok()) return id.status();
  q.job = *id;
  if (req.has_param("task")) {
    auto t = ParseNumber(req.get_param_value("task"), "task", 1 << 20);
    if (!t.ok()) return t.status();
    q.task = static_cast<int32_t>(*t);
  }
  if (req.has_param("stream")) {
    const std::string stream = req.get_param_value("stream");
    auto s = node::ParseLogStream(stream);
    if (!s) {
      return InvalidArgument("stream",
                             fmt::format("must be combined, stdout or stderr, got '{}'", stream));
    }
    q.stream = *s;
  }
  if (req.has_param("run")) {
    auto r = ParseNumber(req.get_param_value("run"), "run", uint64_t{1} << 62);
    if (!r.ok()) return r.status();
    q.run = *r;
  }
  auto follow = net::QueryBool(req, "follow");
  if (!follow.ok()) return follow.status();
  q.follow = *follow;
  return q;
}

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

// The answer's body: what the runs wrote, and the lines between them.
class LogOut {
 public:
  LogOut(httplib::DataSink& sink, const std::atomic<bool>* stopping)
      : sink_(sink), stopping_(stopping) {}

  bool Write(const char* data, size_t n) {
    if (n == 0) return true;
    if (!sink_.write(data, n)) return false;
    at_line_start_ = data[n - 1] == '\n';
    return true;
  }
  // A line of its own (a separator, a note), after a newline when the output before it ends
  // without one.
  bool Line(const std::string& line) {
    if (!at_line_start_ && !Write("\n", 1)) return false;
    return Write(line.data(), line.size());
  }
  // The reader hung up, or the server stops.
  bool Gone() const { return stopping_->load() || !sink_.is_writable(); }
  const std::atomic<bool>* stopping() const { return stopping_; }

 private:
  httplib::DataSink& sink_;
  const std::atomic<bool>* stopping_;
  bool at_line_start_ = true;
};

// Whether a run may still write (asked while following it).
using LiveFn = std::function<bool()>;

// One node's logs of the task.
class NodeLogs {
 public:
  virtual ~NodeLogs() = default;
  // The runs it has logs of (attempts; 0: output from before runs were recorded).
  virtual Result<std::vector<uint64_t>> Runs() = 0;
  // Copies run `attempt`'s log, following it while `live()`. False when the reader left or the
  // server stops.
  virtual bool Copy(uint64_t attempt, const LiveFn& live, LogOut& out) = 0;
  // The node's agent answers at another port now (it restarted).
  virtual void Retarget(const std::string& /*url*/, const std::string& /*token*/) {}
};

// The built-in node's: its files.
class LocalNodeLogs final : public NodeLogs {
 public:
  LocalNodeLogs(node::TaskLogRef ref, node::LogStream stream)
      : ref_(std::move(ref)), stream_(stream) {}

  Result<std::vector<uint64_t>> Runs() override { return node::TaskLogRuns(ref_); }

  bool Copy(uint64_t attempt, const LiveFn& live, LogOut& out) override {
    node::StreamLogOptions o;
    o.run = attempt;
    o.stream = stream_;
    o.follow = true;  // for as long as live() says
    uint64_t sent = 0;
    const node::StreamEnd end = node::StreamRunLog(
        ref_, o, live, [&out](const char* data, size_t n) { return out.Write(data, n); },
        out.stopping(), &sent, [&out] { return out.Gone(); });
    return end != node::StreamEnd::kWriteFailed && end != node::StreamEnd::kStopped;
  }

 private:
  node::TaskLogRef ref_;
  node::LogStream stream_;
};

// An agent's, through its log port. Following, each request ends after a second without new
// bytes, so that a reader that left is noticed while the task is silent; the next asks from the
// last byte while the run lasts.
class AgentNodeLogs final : public NodeLogs {
 public:
  AgentNodeLogs(std::string node, const LogQuery& q, std::string url, std::string token)
      : node_(std::move(node)), q_(q), url_(std::move(url)), token_(std::move(token)) {}

  Result<std::vector<uint64_t>> Runs() override {
    httplib::Client c(url_);
    c.set_connection_timeout(3);
    c.set_read_timeout(10);
    auto r = c.Get(fmt::format("/v1/logs/{}/{}/runs", q_.job, q_.task), Headers());
    if (!r) {
      return Status(StatusCode::kUnavailable,
                    fmt::format("the agent of node {} does not answer at {}: {}", node_, url_,
                                httplib::to_string(r.error())));
    }
    if (r->status == 404) {  // an agent that does not keep runs apart: its files are one run
      legacy_ = true;
      return std::vector<uint64_t>{0};
    }
    const json body = json::parse(r->body, nullptr, false);
    if (r->status != 200 || !body.is_object() || !body.contains("runs")) {
      return Status(StatusCode::kUnavailable,
                    fmt::format("the agent of node {} answered {} at {}: {}", node_, r->status,
                                url_, r->body));
    }
    std::vector<uint64_t> runs;
    for (const json& a : body["runs"]) {
      if (a.is_number_unsigned()) runs.push_back(a.get<uint64_t>());
    }
    return runs;
  }

  bool Copy(uint64_t attempt, const LiveFn& live, LogOut& out) override {
    const auto path = [this](node::LogStream s) {
      return fmt::format("/v1/logs/{}/{}?stream={}", q_.job, q_.task, node::LogStreamName(s));
    };
    if (!legacy_) return CopyPart(fmt::format("{}&run={}", path(q_.stream), attempt), live, out);
    // Its whole files; the combined log is its stdout, then its stderr.
    if (q_.stream != node::LogStream::kCombined) return CopyPart(path(q_.stream), live, out);
    return CopyPart(path(node::LogStream::kStdout), live, out) &&
           CopyPart(path(node::LogStream::kStderr), live, out);
  }

  void Retarget(const std::string& url, const std::string& token) override {
    url_ = url;
    token_ = token;
  }

 private:
  httplib::Headers Headers() const { return {{"Authorization", "Bearer " + token_}}; }

  bool CopyPart(const std::string& base, const LiveFn& live, LogOut& out) {
    uint64_t offset = 0;
    for (;;) {
      const bool following = live();
      if (!client_ || client_url_ != url_) {  // one keep-alive connection while the port stays
        client_ = std::make_unique<httplib::Client>(url_);
        client_url_ = url_;
        client_->set_connection_timeout(3);
        client_->set_read_timeout(60);
        client_->set_keep_alive(true);
      }
      const uint64_t before = offset;
      int status = 0;
      bool write_failed = false;
      auto r = client_->Get(
          fmt::format("{}&offset={}&follow={}&idle_ms=1000", base, offset, following), Headers(),
          [&](const httplib::Response& head) {
            status = head.status;
            return true;
          },
          [&](const char* data, size_t n) {
            if (status != 200) return true;  // no log (yet): not part of it
            if (!out.Write(data, n)) {
              write_failed = true;
              return false;
            }
            offset += n;
            return true;
          });
      if (write_failed || out.Gone()) return false;
      if (!following) return true;
      // Nothing new (the agent saw the run end before the server did, or it is away).
      if (!r || offset == before) std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
  }

  std::string node_;
  LogQuery q_;
  std::string url_;
  std::string token_;
  bool legacy_ = false;
  std::unique_ptr<httplib::Client> client_;
  std::string client_url_;
};

// One request's log: which runs there are, where, and streaming them.
class TaskLogStreamer {
 public:
  TaskLogStreamer(ControlPlane* cp, Principal p, LogQuery q, std::string local_node,
                  std::string local_work_dir)
      : cp_(cp),
        p_(std::move(p)),
        q_(q),
        local_node_(std::move(local_node)),
        local_work_dir_(std::move(local_work_dir)) {}

  // Before the answer: the error to answer with (the job, the task, no log at all, a node that
  // does not serve its logs), or OK with what to show first.
  Status Prepare();
  // The answer's body. False when the reader left or the server stops.
  bool Stream(LogOut& out);

 private:
  struct PlannedRun {
    uint64_t attempt = 0;
    std::string after;
    std::string node;
    NodeLogs* logs = nullptr;  // null: its node's logs cannot be read now (`why`)
    bool has_log = false;      // its node has a log of it
    std::string why;
  };
  // The task's runs (its job's history) and, from their nodes, which have logs.
  Result<std::vector<PlannedRun>> Plan();
  NodeLogs* LogsOn(const LogRun& r, std::string* why);
  bool ShowRun(const PlannedRun& r, bool live, LogOut& out);
  // Whether run `attempt` is the task's latest and may still write.
  bool Live(uint64_t attempt, const std::string& node, NodeLogs* logs);
  static bool Pause(LogOut& out);

  ControlPlane* cp_;
  Principal p_;
  LogQuery q_;
  std::string local_node_;
  std::string local_work_dir_;
  std::map<std::string, std::unique_ptr<NodeLogs>> nodes_;
  std::optional<std::vector<PlannedRun>> prepared_;
  bool shown_ = false;  // a run's output (or a note) is in the answer
};

NodeLogs* TaskLogStreamer::LogsOn(const LogRun& r, std::string* why) {
  if (auto it = nodes_.find(r.node); it != nodes_.end()) return it->second.get();
  std::unique_ptr<NodeLogs> logs;
  if (!r.agent_url.empty()) {
    logs = std::make_unique<AgentNodeLogs>(r.node, q_, r.agent_url, r.agent_token);
  } else if (!local_node_.empty() && r.node == local_node_) {
    logs = std::make_unique<LocalNodeLogs>(node::TaskLogRef{local_work_dir_, q_.job, q_.task},
                                           q_.stream);
  } else {
    *why = fmt::format(
        "node {} has no agent serving logs now; the logs of job {} are on it under "
        "jobs/{}/",
        r.node, q_.job, q_.job);
    return nullptr;
  }
  return nodes_.emplace(r.node, std::move(logs)).first->second.get();
}

Result<std::vector<TaskLogStreamer::PlannedRun>> TaskLogStreamer::Plan() {
  auto runs = cp_->JobLogRuns(p_, q_.job, q_.task);
  if (!runs.ok()) return runs.status();
  std::map<std::string, Result<std::vector<uint64_t>>> listed;  // by node
  std::vector<PlannedRun> out;
  for (const LogRun& r : *runs) {
    PlannedRun run;
    run.attempt = r.attempt;
    run.after = r.after;
    run.node = r.node;
    run.logs = LogsOn(r, &run.why);
    if (run.logs != nullptr) {
      auto it = listed.find(r.node);
      if (it == listed.end()) it = listed.emplace(r.node, run.logs->Runs()).first;
      if (it->second.ok()) {
        const std::vector<uint64_t>& has = *it->second;
        run.has_log = std::find(has.begin(), has.end(), r.attempt) != has.end();
      } else {
        run.why = it->second.status().message();
        run.logs = nullptr;
      }
    }
    out.push_back(std::move(run));
  }
  // Output from before runs were recorded, and runs the history does not tell of: as the nodes
  // have them.
  for (const auto& [node, has] : listed) {
    if (!has.ok()) continue;
    for (uint64_t a : *has) {
      auto same = [a](const PlannedRun& r) { return r.attempt == a; };
      if (std::none_of(out.begin(), out.end(), same)) {
        out.push_back({a, "", node, nodes_.at(node).get(), true, ""});
      }
    }
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const PlannedRun& a, const PlannedRun& b) { return a.attempt < b.attempt; });
  return out;
}

Status TaskLogStreamer::Prepare() {
  auto src = cp_->JobLogSource(p_, q_.job, q_.task);
  if (!src.ok()) return src.status();
  if (src->attempt == 0) {
    if (q_.follow) return Status::Ok();  // the answer waits for it to start
    return NotFound(fmt::format("job {} has not run yet ({}): no logs", q_.job, src->state));
  }
  auto plan = Plan();
  if (!plan.ok()) return plan.status();
  const PlannedRun* unreadable = nullptr;
  bool any = false;
  for (const PlannedRun& r : *plan) {
    if (q_.run != 0 && r.attempt != q_.run) continue;
    const bool live = q_.follow && r.attempt == src->attempt && src->running;
    if (r.logs == nullptr) unreadable = &r;
    any = any || (r.logs != nullptr && (r.has_log || live));
  }
  if (!any && unreadable != nullptr) return Status(StatusCode::kUnavailable, unreadable->why);
  const bool more_to_come = q_.follow && !src->ended && (q_.run == 0 || q_.run > src->attempt);
  if (!any && !more_to_come) {
    if (q_.run != 0) {
      return NotFound(fmt::format("job {} task {} has no log of run {}", q_.job, q_.task, q_.run));
    }
    return NotFound(fmt::format("job {} task {} has no log yet", q_.job, q_.task));
  }
  prepared_ = std::move(plan).value();
  return Status::Ok();
}

bool TaskLogStreamer::Live(uint64_t attempt, const std::string& node, NodeLogs* logs) {
  auto s = cp_->JobLogSource(p_, q_.job, q_.task);
  if (!s.ok() || s->attempt != attempt || !s->running) return false;
  if (s->node == node && !s->agent_url.empty()) logs->Retarget(s->agent_url, s->agent_token);
  return true;
}

bool TaskLogStreamer::ShowRun(const PlannedRun& r, bool live, LogOut& out) {
  const bool one_run = q_.run != 0;
  if (r.logs == nullptr) {  // said where the separator would be
    shown_ = true;
    return one_run || out.Line(fmt::format("--- run {}: {} ---\n", r.attempt, r.why));
  }
  if (!r.has_log && !live) return true;  // it wrote nothing there (or never started)
  if (shown_ && !one_run && !out.Line(RunSeparator(r.attempt, r.after))) return false;
  shown_ = true;
  LiveFn is_live = [] { return false; };
  if (live) {
    is_live = [this, a = r.attempt, node = r.node, logs = r.logs] { return Live(a, node, logs); };
  }
  return r.logs->Copy(r.attempt, is_live, out);
}

bool TaskLogStreamer::Pause(LogOut& out) {
  for (int i = 0; i < 5; ++i) {
    if (out.Gone()) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return !out.Gone();
}

bool TaskLogStreamer::Stream(LogOut& out) {
  uint64_t next = q_.run;  // the first run not shown yet
  std::optional<std::vector<PlannedRun>> plan = std::move(prepared_);
  bool last_round = false;
  for (;;) {
    auto src = cp_->JobLogSource(p_, q_.job, q_.task);
    if (!src.ok()) return true;  // deleted or no longer visible: the answer ends there
    // A run to show: the history and the nodes are asked again (an agent away: later).
    if (!plan && src->attempt >= std::max<uint64_t>(next, 1)) {
      if (auto p = Plan(); p.ok()) plan = std::move(p).value();
    }
    if (plan) {
      for (const PlannedRun& r : *plan) {
        if (r.attempt < next || (q_.run != 0 && r.attempt != q_.run)) continue;
        const bool live = q_.follow && r.attempt == src->attempt && src->running;
        if (!ShowRun(r, live, out)) return false;
        next = r.attempt + 1;
      }
      plan.reset();
    }
    if (!q_.follow || (q_.run != 0 && next > q_.run)) return true;
    if (src->ended) {
      // Its last run may have begun since `src` was read: once more, then the end.
      if (src->attempt < next || last_round) return true;
      last_round = true;
      continue;
    }
    if (!Pause(out)) return false;  // waiting for the job's next run
  }
}

}  // namespace

void HttpApi::RegisterLogRoutes(const RouteFn& route) {
  route("GET", "/api/v1/jobs/{id}/logs", R"(/api/v1/jobs/(\d+)/logs)",
        "A task's output, every run in order with a separator line between runs: task=N "
        "(default 0), stream=combined|stdout|stderr (default stdout), run=N (only that run), "
        "follow=true streams until the job ends (waiting for it to start)",
        [this](const Principal& p, const httplib::Request& req, httplib::Response& res) {
          auto q = ParseLogQuery(req);
          if (!q.ok()) return SendError(res, q.status());
          auto streamer = std::make_shared<TaskLogStreamer>(cp_, p, *q, options_.local_node,
                                                            options_.local_work_dir);
          if (Status st = streamer->Prepare(); !st.ok()) return SendError(res, st);
          res.set_header("Cache-Control", "no-cache");
          res.set_chunked_content_provider(
              "text/plain; charset=utf-8",
              [this, streamer, keep = cp_.shared()](size_t, httplib::DataSink& sink) {
                FollowerCount counted(&log_followers_);
                LogOut out(sink, &stopping_);
                if (!streamer->Stream(out)) return false;
                sink.done();
                return true;
              });
        });
}

}  // namespace arbiter::server

#include "agent/agent_client.h"

#include <fmt/format.h>
#include <httplib.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <random>
#include <set>
#include <tuple>

#include "agent/backoff.h"
#include "api/agent_codec.h"
#include "api/errors.h"

namespace arbiter::agent {

using nlohmann::json;

namespace {

std::string RandomHex(size_t bytes) {
  std::random_device rd;
  std::string out;
  for (size_t i = 0; i < bytes; ++i) out += fmt::format("{:02x}", rd() & 0xff);
  return out;
}

}  // namespace

AgentClient::AgentClient(AgentClientOptions options, RegistrationFn registration,
                         TelemetryFn telemetry)
    : options_(std::move(options)),
      registration_(std::move(registration)),
      telemetry_(std::move(telemetry)),
      instance_(RandomHex(8)),
      servers_(options_.server) {}

AgentClient::~AgentClient() { Stop(); }

std::shared_ptr<httplib::Client> AgentClient::NewClient(const std::string& url,
                                                        DurationMs connect_ms,
                                                        DurationMs read_ms) const {
  auto c = std::make_shared<httplib::Client>(url);
  auto split = [](DurationMs ms) {
    return std::pair{static_cast<time_t>(ms / 1000), static_cast<time_t>((ms % 1000) * 1000)};
  };
  const auto [cs, cu] = split(connect_ms);
  const auto [rs, ru] = split(read_ms);
  c->set_connection_timeout(cs, cu);
  c->set_read_timeout(rs, ru);
  c->set_write_timeout(cs, cu);
  c->set_tcp_nodelay(true);
  c->set_bearer_token_auth(options_.token);
  return c;
}

Status AgentClient::Post(const std::string& path, const std::string& body, DurationMs timeout_ms,
                         std::string* answer) {
  std::string url = servers_.current();
  auto r = NewClient(url, timeout_ms, timeout_ms)->Post(path, body, "application/json");
  if (r && r->status == 503 && r->has_header(kLeaderHeader)) {
    // A follower: the leader it names, at once.
    url = r->get_header_value(kLeaderHeader);
    servers_.Follow(url);
    r = NewClient(url, timeout_ms, timeout_ms)->Post(path, body, "application/json");
  }
  if (!r) {
    servers_.Next(url);  // the next server of the list for the next try
    return {StatusCode::kUnavailable,
            fmt::format("cannot reach the server at {}: {}", url, httplib::to_string(r.error()))};
  }
  if (r->status != 200) {
    // A server without this agent's session answers failed_precondition: register again.
    const Status reply = api::StatusFromErrorReply(r->status, r->body);
    return {reply.code(), fmt::format("HTTP {}: {}", r->status,
                                      reply.message().empty() ? r->body : reply.message())};
  }
  *answer = std::move(r->body);
  return Status::Ok();
}

Status AgentClient::Register() {
  AgentRegistration reg = registration_();
  reg.instance = instance_;
  std::string answer;
  Status st = Post("/api/v1/agent/register", api::AgentRegistrationToJson(reg).dump(),
                   options_.request_timeout_ms, &answer);
  if (!st.ok()) return st;
  DurationMs node_timeout = 0;
  try {
    node_timeout = json::parse(answer).value("node_timeout_ms", DurationMs{0});
  } catch (const std::exception&) {
  }
  std::lock_guard<std::mutex> lock(mu_);
  registered_ = true;
  server_node_timeout_ms_ = node_timeout;
  spdlog::info("registered node {} with {} ({} GPUs)", options_.node, servers_.current(),
               reg.node.gpus.size());
  return Status::Ok();
}

Status AgentClient::Beat() {
  bool registered = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    registered = registered_;
  }
  if (!registered) ARBITER_RETURN_IF_ERROR(Register());
  AgentHeartbeat hb;
  hb.node = options_.node;
  hb.instance = instance_;
  hb.gpus = telemetry_();
  uint64_t last_sent = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    wake_ = false;
    hb.reports.assign(queue_.begin(), queue_.end());
    hb.images_known = images_known_;
    hb.images = images_;
    if (!hb.reports.empty()) last_sent = hb.reports.back().seq;
  }
  std::string answer;
  Status st = Post("/api/v1/agent/heartbeat", api::AgentHeartbeatToJson(hb).dump(),
                   options_.request_timeout_ms, &answer);
  if (st.code() == StatusCode::kFailedPrecondition) {
    std::lock_guard<std::mutex> lock(mu_);
    registered_ = false;  // the server restarted: register again, then deliver the reports
    spdlog::info("the server has no session for {}: registering again", options_.node);
  }
  if (!st.ok()) return st;
  std::vector<TaskAssignment> assignments;
  std::vector<ImagePull> pulls;
  uint64_t acked = 0;
  uint64_t version = 0;
  try {
    const json j = json::parse(answer);
    acked = j.value("acked_seq", uint64_t{0});
    version = j.value("assign_version", uint64_t{0});
    const json& items = j.at("assignments");
    for (size_t i = 0; i < items.size(); ++i) {
      auto a = api::ParseTaskAssignment(items[i], fmt::format("assignments[{}]", i));
      if (!a.ok()) {
        spdlog::error("ignoring an assignment the server sent: {}", a.status().ToString());
        continue;
      }
      assignments.push_back(std::move(a).value());
    }
    for (const json& p : j.value("pull_images", json::array())) {
      if (!p.is_object() || !p.contains("image") || !p["image"].is_string()) continue;
      pulls.push_back(
          {p["image"].get<std::string>(), p.value("auth", ""), p.value("insecure", false)});
    }
  } catch (const std::exception& e) {
    return {StatusCode::kInternal, fmt::format("unreadable heartbeat answer: {}", e.what())};
  }
  std::unique_lock<std::mutex> lock(mu_);
  acked = std::min(acked, last_sent);
  while (!queue_.empty() && queue_.front().seq <= acked) queue_.pop_front();
  // A finished task stays filtered while any answer may still list it: until its report is
  // acknowledged and the server stopped listing it.
  std::set<TaskKey> listed;
  for (const TaskAssignment& a : assignments) listed.insert({a.job, a.task, a.attempt});
  std::set<TaskKey> unacked;
  for (const TaskReport& r : queue_) unacked.insert({r.job, r.task, r.attempt});
  for (auto it = finished_.begin(); it != finished_.end();) {
    it = listed.count(*it) || unacked.count(*it) ? std::next(it) : finished_.erase(it);
  }
  auto key = [](const std::vector<TaskAssignment>& v) {
    std::set<std::tuple<uint64_t, int32_t, uint64_t, bool>> out;
    for (const TaskAssignment& a : v) out.insert({a.job, a.task, a.attempt, a.run});
    return out;
  };
  const bool changed = key(assignments) != key(assignments_);
  assignments_ = std::move(assignments);
  pulls_ = std::move(pulls);
  assign_version_ = version;  // the server's own count (it starts again when the server does)
  answered_ = true;
  cv_.notify_all();  // the watch (re)starts from this version
  lock.unlock();
  if (changed && on_assignments_) on_assignments_();
  return Status::Ok();
}

void AgentClient::WatchLoop() {
  std::mt19937_64 rng(std::random_device{}());
  int failures = 0;
  while (!stop_) {
    uint64_t known = 0;
    {
      std::unique_lock<std::mutex> lock(mu_);
      // Only between beats of a registered session: the first beat gives the version.
      cv_.wait(lock, [&] { return stop_.load() || (registered_ && answered_); });
      if (stop_) return;
      known = assign_version_;
    }
    // The server answers within watch_ms; the read waits that long and a request's timeout more.
    auto client = NewClient(servers_.current(), options_.request_timeout_ms,
                            options_.watch_ms + options_.request_timeout_ms);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_) return;
      watch_client_ = client;
    }
    auto r = client->Get(fmt::format("/api/v1/agent/watch?node={}&version={}&wait_ms={}",
                                     httplib::detail::encode_query_param(options_.node), known,
                                     options_.watch_ms));
    {
      std::lock_guard<std::mutex> lock(mu_);
      watch_client_.reset();
    }
    if (stop_) return;
    uint64_t version = known;
    if (r && r->status == 200) {
      failures = 0;
      try {
        version = json::parse(r->body).value("version", known);
      } catch (const std::exception&) {
      }
    } else {
      ++failures;  // the heartbeat reports the server's absence; retry calmly
    }
    std::unique_lock<std::mutex> lock(mu_);
    if (failures > 0) {
      const DurationMs delay =
          RetryDelayMs(failures, options_.backoff_base_ms, options_.backoff_max_ms,
                       std::uniform_real_distribution<double>(0, 1)(rng));
      cv_.wait_for(lock, std::chrono::milliseconds(delay), [&] { return stop_.load(); });
    } else if (version != known) {
      wake_ = true;  // a heartbeat now fetches the new assignments
      cv_.notify_all();
      // Until the beat answers, watching from the old version would return at once.
      cv_.wait_for(lock, std::chrono::milliseconds(options_.request_timeout_ms),
                   [&] { return stop_.load() || assign_version_ != known; });
    }
  }
}

void AgentClient::Loop() {
  std::mt19937_64 rng(std::random_device{}());
  int failures = 0;
  bool registered_again = false;  // after a "no session" answer, registered once without delay
  auto last_beat = std::chrono::steady_clock::now() - std::chrono::hours(1);
  while (!stop_) {
    // Back-to-back beats for reports and new work, but at most one every 20 ms (reports batch
    // meanwhile).
    const auto since = std::chrono::steady_clock::now() - last_beat;
    if (since < std::chrono::milliseconds(20)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20) - since);
    }
    last_beat = std::chrono::steady_clock::now();
    const Status st = Beat();
    DurationMs wait = options_.heartbeat_ms;
    bool wake_on_report = true;
    if (st.ok()) {
      if (failures > 0) {
        spdlog::info("the server answers again after {} failed attempt{}; reports delivered",
                     failures, failures == 1 ? "" : "s");
      }
      failures = 0;
      registered_again = false;
    } else if (st.code() == StatusCode::kFailedPrecondition && !registered_again) {
      wait = 0;  // register again now
      registered_again = true;
    } else {
      ++failures;
      wait = RetryDelayMs(failures, options_.backoff_base_ms, options_.backoff_max_ms,
                          std::uniform_real_distribution<double>(0, 1)(rng));
      wake_on_report = false;
      if (failures <= 3 || failures % 10 == 0) {
        spdlog::warn(
            "heartbeat failed ({} in a row): {}; retrying in {} ms ({} reports queued; "
            "tasks keep running)",
            failures, st.ToString(), wait, queued_reports());
      }
    }
    if (!wake_on_report) {
      WaitForServer(wait);
      continue;
    }
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, std::chrono::milliseconds(wait),
                 [&] { return stop_.load() || (wake_on_report && wake_); });
  }
}

// Backing off: the backoff bounds the heavy requests, but a restarted server is noticed within
// kReadyPollMs (GET /readyz, no token), and the heartbeat goes out at once.
void AgentClient::WaitForServer(DurationMs wait) {
  constexpr DurationMs kReadyPollMs = 250;
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(wait);
  while (!stop_) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      const auto next = std::min(
          until, std::chrono::steady_clock::now() + std::chrono::milliseconds(kReadyPollMs));
      if (cv_.wait_until(lock, next, [&] { return stop_.load(); })) return;
    }
    if (std::chrono::steady_clock::now() >= until) return;
    const std::string url = servers_.current();
    auto c = std::make_shared<httplib::Client>(url);
    c->set_connection_timeout(0, 200000);
    c->set_read_timeout(1, 0);
    auto r = c->Get("/readyz");
    if (r && r->status == 200) return;
    if (!r) servers_.Next(url);
  }
}

void AgentClient::Start() {
  thread_ = std::thread([this] { Loop(); });
  if (options_.watch_ms > 0) watch_thread_ = std::thread([this] { WatchLoop(); });
}

void AgentClient::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (watch_client_) watch_client_->stop();
  }
  // A watch in flight ends within watch_ms (the server's answer) or at the request timeout.
  if (watch_thread_.joinable()) watch_thread_.join();
}

void AgentClient::Flush(DurationMs timeout_ms) {
  if (queued_reports() == 0) return;
  const DurationMs saved = options_.request_timeout_ms;
  options_.request_timeout_ms = timeout_ms;
  const Status st = Beat();
  options_.request_timeout_ms = saved;
  if (!st.ok()) {
    spdlog::warn("could not deliver the last {} reports: {}", queued_reports(), st.ToString());
  }
}

size_t AgentClient::queued_reports() const {
  std::lock_guard<std::mutex> lock(mu_);
  return queue_.size();
}

std::vector<TaskAssignment> AgentClient::AssignmentsFor(const std::string&) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<TaskAssignment> out;
  for (const TaskAssignment& a : assignments_) {
    if (!finished_.count({a.job, a.task, a.attempt})) out.push_back(a);
  }
  return out;
}

DurationMs AgentClient::server_node_timeout_ms() const {
  std::lock_guard<std::mutex> lock(mu_);
  return server_node_timeout_ms_;
}

bool AgentClient::AssignmentsKnown() {
  std::lock_guard<std::mutex> lock(mu_);
  return answered_;
}

void AgentClient::Enqueue(TaskReport r) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    r.seq = next_seq_++;
    if (r.event == TaskEvent::kExited || r.event == TaskEvent::kLost) {
      finished_.insert({r.job, r.task, r.attempt});
    }
    queue_.push_back(r);
    wake_ = true;
  }
  cv_.notify_all();
}

void AgentClient::ReportTaskStarted(uint64_t job, int32_t task, uint64_t attempt) {
  Enqueue({0, job, task, attempt, TaskEvent::kStarted, 0, false});
}

void AgentClient::ReportTaskExited(uint64_t job, int32_t task, uint64_t attempt, int32_t exit_code,
                                   bool timed_out) {
  Enqueue({0, job, task, attempt, TaskEvent::kExited, exit_code, timed_out});
}

void AgentClient::ReportTaskLost(uint64_t job, int32_t task, uint64_t attempt) {
  Enqueue({0, job, task, attempt, TaskEvent::kLost, 0, false});
}

void AgentClient::ReportTaskCheckpointed(uint64_t job, int32_t task, uint64_t attempt) {
  Enqueue({0, job, task, attempt, TaskEvent::kCheckpointed, 0, false});
}

void AgentClient::ReportTaskFailed(uint64_t job, int32_t task, uint64_t attempt, int32_t exit_code,
                                   const std::string& reason) {
  TaskReport r{0, job, task, attempt, TaskEvent::kExited, exit_code, false};
  r.message = reason.substr(0, api::kMaxReportMessageBytes);
  Enqueue(std::move(r));
}

void AgentClient::ReportTaskNote(uint64_t job, int32_t task, uint64_t attempt,
                                 const std::string& message, const std::string& image_digest) {
  TaskReport r{0, job, task, attempt, TaskEvent::kNote, 0, false};
  r.message = message.substr(0, api::kMaxReportMessageBytes);
  r.image_digest = image_digest;
  Enqueue(std::move(r));
}

void AgentClient::ReportImages(const std::string& /*node*/, const std::vector<NodeImage>& images) {
  std::lock_guard<std::mutex> lock(mu_);
  images_known_ = true;
  images_ = images;
  if (images_.size() > kMaxNodeImages) images_.resize(kMaxNodeImages);
}

std::vector<ImagePull> AgentClient::ImagesToPull(const std::string& /*node*/) {
  std::lock_guard<std::mutex> lock(mu_);
  return pulls_;
}

}  // namespace arbiter::agent

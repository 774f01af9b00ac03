#include "server/server_command.h"

#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <optional>
#include <sstream>
#include <thread>
#include <vector>

#include "api/config_codec.h"
#include "gateway/gateway.h"
#include "server/audit_export.h"
#include "server/builtin_node.h"
#include "server/control_plane.h"
#include "server/http_api.h"
#include "server/lease_keeper.h"
#include "server/sampler.h"
#include "server/secret_box.h"
#include "server/service_controller.h"
#include "store/open_store.h"

namespace arbiter::server {

namespace {

TimeMs WallClockMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

bool SplitHostPort(const std::string& listen, std::string* host, int* port) {
  const size_t colon = listen.rfind(':');
  if (colon == std::string::npos) return false;
  *host = listen.substr(0, colon);
  try {
    *port = std::stoi(listen.substr(colon + 1));
  } catch (...) {
    return false;
  }
  return *port >= 0 && *port <= 65535 && !host->empty();
}

Status WriteSecretFile(const std::string& path, const std::string& content) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd < 0) return {StatusCode::kUnavailable, fmt::format("cannot write {}", path)};
  const std::string line = content + "\n";
  const bool ok = ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
  ::fchmod(fd, 0600);
  ::fsync(fd);
  ::close(fd);
  return ok ? Status::Ok() : Status(StatusCode::kUnavailable, fmt::format("cannot write {}", path));
}

void SetupLogging(const std::string& format) {
  auto logger = spdlog::stderr_logger_mt("arbiter");
  if (format == "json") {
    logger->set_pattern(
        R"({"time":"%Y-%m-%dT%H:%M:%S.%eZ","level":"%l","logger":"%n","message":"%v"})",
        spdlog::pattern_time_type::utc);
  } else {
    logger->set_pattern("%Y-%m-%d %H:%M:%S.%e %^%-5l%$ %v");
  }
  spdlog::set_default_logger(logger);
}

// The scrape secret: the file's first line, without trailing white space.
Result<std::string> ReadMetricsToken(const std::string& path) {
  std::ifstream in(path);
  if (!in.is_open())
    return Status(StatusCode::kInvalidArgument, fmt::format("cannot read {}", path));
  std::string secret;
  std::getline(in, secret);
  while (!secret.empty() && std::isspace(static_cast<unsigned char>(secret.back()))) {
    secret.pop_back();
  }
  if (secret.size() < 16) {
    return Status(StatusCode::kInvalidArgument,
                  fmt::format("the secret in {} must have at least 16 characters", path));
  }
  return secret;
}

// Stops the built-in node once, saying what happens to its tasks.
void StopBuiltin(BuiltinNode* node, bool kill_tasks) {
  static std::once_flag once;
  std::call_once(once, [&] {
    const size_t running = node->running();
    node->Stop(kill_tasks);
    if (running == 0) return;
    if (kill_tasks) {
      spdlog::info("built-in node: {} task{} killed (--kill-tasks-on-exit)", running,
                   running == 1 ? "" : "s");
    } else {
      spdlog::warn(
          "built-in node: {} task{} keep running; the server adopts them when it starts again "
          "with this data dir (cancel their jobs first to stop them)",
          running, running == 1 ? "" : "s");
    }
  });
}

// Everything the server writes is its own: the store, its journal, the tokens (0600; folders
// 0700). Tasks never run inside the data dir (the built-in node has its own folder).
bool PrepareDataDir(const std::string& data_dir) {
  ::umask(077);
  if (::mkdir(data_dir.c_str(), 0700) != 0 && errno != EEXIST) {
    spdlog::error("--data-dir: cannot create {}: {}", data_dir, std::strerror(errno));
    return false;
  }
  if (::chmod(data_dir.c_str(), 0700) != 0) {
    spdlog::warn("--data-dir: cannot make {} private (0700): {}", data_dir, std::strerror(errno));
  }
  return true;
}

// --config (every start) or --initial-config (an empty data dir only); an exit code, 0: go on.
int ApplyStartConfig(ControlPlane* cp_ptr, const ServerOptions& o) {
  ControlPlane& cp = *cp_ptr;
  std::string config_file = o.config_file;
  const char* config_flag = "--config";
  if (config_file.empty() && !o.initial_config_file.empty()) {
    config_flag = "--initial-config";
    if (cp.HasConfiguration()) {
      spdlog::info(
          "--initial-config {}: not applied, the data dir has a configuration already "
          "(GET /api/v1/config shows it)",
          o.initial_config_file);
    } else {
      config_file = o.initial_config_file;
    }
  }
  if (!config_file.empty()) {
    std::ifstream in(config_file);
    if (!in) {
      spdlog::error("{}: cannot read {}", config_flag, config_file);
      return 2;
    }
    std::stringstream text;
    text << in.rdbuf();
    auto config = api::ParseConfigYaml(text.str());
    if (!config.ok()) {
      spdlog::error("{} {}: {}", config_flag, config_file, config.status().ToString());
      return 2;
    }
    Principal admin{"admin", "", Role::kAdmin, ""};
    // Never prunes: a configuration file that would orphan live jobs stops the start, and the
    // jobs keep what they run in (apply it with `arbiter apply --prune` to cancel them).
    auto applied = cp.ApplyConfig(admin, *config, false);
    if (!applied.ok()) {
      spdlog::error("{} {}: {}", config_flag, config_file, applied.status().ToString());
      return 2;
    }
    spdlog::info("applied {} ({} changes)", config_file, applied->changes.size());
  }
  return 0;
}

// The bootstrap admin's token, made at the first start: printed once and written to the data dir.
bool WriteBootstrapToken(ControlPlane* cp, const std::string& data_dir) {
  auto token = cp->BootstrapAdmin();
  if (!token.ok()) {
    spdlog::error("cannot create the admin token: {}", token.status().ToString());
    return false;
  }
  if (!token->empty()) {
    const std::string path = data_dir + "/admin.token";
    if (Status st = WriteSecretFile(path, *token); !st.ok()) {
      spdlog::error("{}", st.ToString());
      return false;
    }
    std::printf("admin token (shown once, also in %s): %s\n", path.c_str(), token->c_str());
  }
  return true;
}

// The API's options from the server's flags; false (logged) when a file they name is unreadable.
bool HttpOptionsFrom(const ServerOptions& o, const std::string& local_work_dir, HttpOptions* out) {
  out->rate_limit_per_second = o.rate_limit;
  out->threads = static_cast<size_t>(o.http_threads);
  out->header_timeout_ms = o.http_header_timeout_ms;
  out->body_timeout_ms = o.http_body_timeout_ms;
  out->max_headers = static_cast<size_t>(o.http_max_headers);
  out->max_header_bytes = static_cast<size_t>(o.http_max_header_bytes);
  out->connections_per_address = o.http_connections_per_address >= 0
                                     ? static_cast<size_t>(o.http_connections_per_address)
                                     : std::max<size_t>(4, static_cast<size_t>(o.http_threads) / 4);
  out->idle_thread_ms = o.http_idle_thread_ms;
  out->local_node = o.local_node;
  out->local_work_dir = local_work_dir;
  out->metrics_public = o.metrics_public;
  if (!o.metrics_token_file.empty()) {
    auto secret = ReadMetricsToken(o.metrics_token_file);
    if (!secret.ok()) {
      spdlog::error("--metrics-token-file: {}", secret.status().message());
      return false;
    }
    out->metrics_token = *secret;
  }
  return true;
}

// The scheduler thread's loop: down nodes, then a cycle, every --cycle-interval-ms and sooner
// when woken (capacity released, a job submitted, a node changed).
class SchedulerLoop {
 public:
  // `node_timeout_ms`: nodes without a heartbeat for this long are down (NodeTimeoutMs).
  SchedulerLoop(ControlPlane* cp, const ServerOptions& o, DurationMs node_timeout_ms)
      : cp_(cp),
        o_(o),
        node_timeout_ms_(node_timeout_ms),
        reconnect_window_(o.reconnect_window_ms > 0
                              ? o.reconnect_window_ms
                              : std::max<DurationMs>(30000, DurationMs{5} * node_timeout_ms)) {
    cp_->SetSchedulerWake([this] { Wake(); });
  }
  ~SchedulerLoop() { cp_->SetSchedulerWake(nullptr); }

  void Wake() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (wake_) return;  // already woken: one notification per cycle, not one per event
      wake_ = true;
    }
    cv_.notify_all();
  }
  void Stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
  }

  void Run() {
    using Clock = std::chrono::steady_clock;
    std::unique_lock<std::mutex> lock(mu_);
    while (!stop_) {
      wake_ = false;
      lock.unlock();
      const auto started = Clock::now();
      for (const std::string& node :
           cp_->DetectDownNodes(node_timeout_ms_, o_.local_node, reconnect_window_)) {
        spdlog::warn("node {} is down: no heartbeat for {} ms; its tasks are lost", node,
                     node_timeout_ms_);
      }
      auto r = cp_->RunSchedulingCycle();
      if (!r.ok()) spdlog::error("scheduling cycle failed: {}", r.status().ToString());
      // Finished jobs beyond the window leave memory between cycles, on this thread: a cycle
      // keeps pointers to job entries while it runs (docs/architecture.md, "What memory holds").
      if (started - last_eviction_ >= std::chrono::seconds(1)) {
        last_eviction_ = started;
        cp_->EvictFinishedJobs();
      }
      const double last_cycle_seconds = cp_->stats().last_cycle_seconds;
      // Never call the control plane under mu_: its wake callback takes mu_ under its own lock.
      lock.lock();
      // A cycle runs every --cycle-interval-ms, and sooner when something happened, at most
      // every 10 ms. A cycle over a deep backlog may take a while: keep scheduling under ~10% of
      // the time, so that the API stays responsive (wait at least 9x the last cycle: at 20,000
      // pending jobs a cycle takes ~7 ms, so a new job waits at most ~70 ms for one, and
      // submissions keep their throughput).
      const auto busy = std::chrono::duration_cast<Clock::duration>(
          std::chrono::duration<double>(last_cycle_seconds * 9));
      const auto earliest =
          Clock::now() + std::max<Clock::duration>(std::chrono::milliseconds(10), busy);
      const auto periodic = started + std::chrono::milliseconds(o_.cycle_interval_ms);
      cv_.wait_until(lock, std::max(periodic, earliest), [&] { return stop_ || wake_; });
      if (!stop_ && wake_) cv_.wait_until(lock, earliest, [&] { return stop_; });
    }
  }

 private:
  ControlPlane* const cp_;
  const ServerOptions& o_;
  const DurationMs node_timeout_ms_;
  const DurationMs reconnect_window_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;  // guarded by mu_
  bool wake_ = false;  // something happened that a cycle may act on; guarded by mu_
  std::chrono::steady_clock::time_point last_eviction_{};  // the scheduler thread's own
};

}  // namespace

std::optional<int64_t> ParseAgeMs(std::string_view text) {
  if (text.empty() || text.size() > 18) return std::nullopt;
  int64_t unit = 1000;
  switch (text.back()) {
    case 's':
      unit = 1000;
      break;
    case 'm':
      unit = 60'000;
      break;
    case 'h':
      unit = 3'600'000;
      break;
    case 'd':
      unit = 86'400'000;
      break;
    default:
      unit = 0;
      break;
  }
  std::string_view digits = unit == 0 ? text : text.substr(0, text.size() - 1);
  if (unit == 0) unit = 1000;
  if (digits.empty()) return std::nullopt;
  int64_t n = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return std::nullopt;
    n = n * 10 + (c - '0');
  }
  if (n > std::numeric_limits<int64_t>::max() / unit) return std::nullopt;
  return n * unit;
}

bool ParsePortRange(const std::string& text, int32_t* lo, int32_t* hi, std::string* why) {
  const size_t dash = text.find('-');
  auto number = [](std::string_view s, int32_t* out) {
    if (s.empty() || s.size() > 5) return false;
    int32_t v = 0;
    for (char c : s) {
      if (c < '0' || c > '9') return false;
      v = v * 10 + (c - '0');
    }
    *out = v;
    return true;
  };
  if (dash == std::string::npos || !number(std::string_view(text).substr(0, dash), lo) ||
      !number(std::string_view(text).substr(dash + 1), hi)) {
    *why = fmt::format("expected LO-HI (10000-19999), got '{}'", text);
    return false;
  }
  if (*lo < 1 || *hi > 65535 || *lo > *hi) {
    *why = fmt::format("expected 1 <= LO <= HI <= 65535, got '{}'", text);
    return false;
  }
  return true;
}

namespace {

// The store the flags name: --store, the URL in --store-url-file, or SQLite in the data dir.
Result<store::StoreUrl> ResolveStoreUrl(const ServerOptions& o) {
  if (!o.store_url_file.empty()) {
    std::ifstream in(o.store_url_file);
    std::string url;
    if (!in || !std::getline(in, url)) {
      return InvalidArgument("--store-url-file",
                             fmt::format("cannot read a URL from {}", o.store_url_file));
    }
    while (!url.empty() && (url.back() == '\r' || url.back() == ' ')) url.pop_back();
    return store::ParseStoreUrl(url, "--store-url-file");
  }
  if (!o.store_url.empty()) return store::ParseStoreUrl(o.store_url, "--store");
  store::StoreUrl url;
  url.sqlite_dir = o.data_dir;
  return url;
}

std::string StoreDescription(const ServerOptions& o, const store::StoreUrl& url) {
  if (url.kind == store::StoreUrl::Kind::kSqlite) return "in " + url.sqlite_dir;
  return store::RedactStoreUrl(o.store_url_file.empty() ? o.store_url : url.postgres_uri);
}

}  // namespace

namespace {

// What only the leader runs, over its control plane: the sampler, webhooks, the scheduler, the
// services controller, the built-in gateway and the audit exports. A server alone on its store
// runs them from its start; with leader election, from when it is elected (RunServer).
class LeaderRuntime {
 public:
  LeaderRuntime(const ServerOptions& o, store::Store* store, DurationMs node_timeout_ms)
      : o_(o), store_(store), node_timeout_ms_(node_timeout_ms) {}
  ~LeaderRuntime() { Stop(); }

  // Opens the audit exports' sinks (before serving: a bad flag stops the start); 0 or an exit
  // code.
  int OpenExports() {
    if (!o_.audit_file.empty()) {
      auto sink = OpenAuditFileSink(o_.audit_file);
      if (!sink.ok()) {
        spdlog::error("{}", sink.status().ToString());
        return 2;
      }
      audit_exports_.push_back(std::make_unique<AuditExporter>(
          store_, std::move(sink).value(), o_.data_dir + "/audit-export-file.seq"));
    }
    if (!o_.audit_syslog.empty()) {
      auto sink = OpenAuditSyslogSink(o_.audit_syslog);
      if (!sink.ok()) {
        spdlog::error("{}", sink.status().ToString());
        return 2;
      }
      audit_exports_.push_back(std::make_unique<AuditExporter>(
          store_, std::move(sink).value(), o_.data_dir + "/audit-export-syslog.seq"));
    }
    return 0;
  }
  // Each export from where it stopped (its cursor in the data dir).
  Status StartExports() {
    for (auto& e : audit_exports_) ARBITER_RETURN_IF_ERROR(e->Start());
    return Status::Ok();
  }
  void ReopenExports() {
    for (auto& e : audit_exports_) e->Reopen();
  }

  // Starts everything but the exports over `cp`, whose API is at `api_url`.
  void Start(ControlPlane* cp, const std::string& api_url) {
    SamplerOptions sampler_options;
    sampler_options.interval_ms = o_.sample_interval_ms;
    sampler_options.history_days = o_.retention_days;
    sampler_options.archive_dir = (std::filesystem::path(o_.data_dir) / "archive").string();
    sampler_ = std::make_unique<Sampler>(cp, store_, sampler_options, WallClockMs);
    sampler_->Start();
    // Webhook deliveries: their own worker thread (docs/webhooks.md).
    WebhookRetryPolicy webhook_policy;
    webhook_policy.base_delay_ms = o_.webhook_retry_base_ms;
    webhook_policy.max_delay_ms = std::max(o_.webhook_retry_max_ms, o_.webhook_retry_base_ms);
    webhook_policy.max_attempts = o_.webhook_max_attempts;
    webhook_policy.max_age_ms = o_.webhook_max_age_ms;
    webhook_policy.timeout_ms = o_.webhook_timeout_ms;
    cp->webhooks().SetPolicy(webhook_policy);
    cp->webhooks().Start();
    webhooks_of_ = cp;
    loop_ = std::make_unique<SchedulerLoop>(cp, o_, node_timeout_ms_);
    scheduler_ = std::thread([this] { loop_->Run(); });
    // Services: their replicas kept as specified, probed, rolled and routed (docs/services.md).
    services_ = std::make_unique<ServiceController>(cp, ServiceControllerOptions{});
    services_->Start();
    // The built-in gateway (--gateway-listen): the same gateway as `arbiter gateway`, learning
    // its routes from this server over loopback with a token that exists only in this process.
    // It starts on its own thread, because its first routes poll needs the API serving.
    if (!o_.gateway_listen.empty()) {
      gateway::GatewayOptions go;
      go.listen = o_.gateway_listen;
      go.server_url = api_url;
      go.token = cp->InProcessGatewayToken();
      go.id = "built-in";
      gw_ = std::make_unique<gateway::Gateway>(go);
      gateway_starter_ = std::thread([this] {
        if (Status st = gw_->Start(); !st.ok()) {
          spdlog::error("--gateway-listen: {}", st.ToString());
          return;
        }
        std::printf("gateway for services listening on http://%s/s/NAME/\n",
                    gw_->address().c_str());
        std::fflush(stdout);
      });
    }
  }

  // Nothing new is scheduled or routed from here on (the first step of a shutdown).
  void StopScheduling() {
    if (loop_) loop_->Stop();
    if (gateway_starter_.joinable()) gateway_starter_.join();
    if (gw_) gw_->Stop();
  }

  // Idempotent; call from one thread, after the signal thread is done with StopScheduling.
  void Stop() {
    StopScheduling();
    if (scheduler_.joinable()) scheduler_.join();
    if (services_) services_->Stop();
    if (sampler_) sampler_->Stop();
    if (webhooks_of_ != nullptr) webhooks_of_->webhooks().Stop();
    webhooks_of_ = nullptr;
    services_.reset();
    sampler_.reset();
    loop_.reset();
    gw_.reset();
  }
  // What is committed by now, exported.
  void StopExports() {
    for (auto& e : audit_exports_) e->Stop();
  }

 private:
  const ServerOptions& o_;
  store::Store* const store_;
  const DurationMs node_timeout_ms_;
  std::vector<std::unique_ptr<AuditExporter>> audit_exports_;
  std::unique_ptr<Sampler> sampler_;
  ControlPlane* webhooks_of_ = nullptr;  // whose webhooks were started
  std::unique_ptr<SchedulerLoop> loop_;
  std::thread scheduler_;
  std::unique_ptr<ServiceController> services_;
  std::unique_ptr<gateway::Gateway> gw_;
  std::thread gateway_starter_;
};

// The settings every control plane of this server gets.
// The node timeout. Agents stop their tasks when the server is away this long (their orphan
// timeout is the server's node timeout), so with leader election it is at least what a failover
// takes: the lease, two renewal intervals and 5 s to load the state.
int64_t NodeTimeoutMs(const ServerOptions& o, bool election) {
  if (!election) return o.node_timeout_ms;
  return std::max<int64_t>(o.node_timeout_ms, o.lease_ms + 2 * o.lease_renew_ms + 5000);
}

void Configure(ControlPlane* cp, const ServerOptions& o, int32_t ports_lo, int32_t ports_hi,
               bool election, const SecretBox& secret_box) {
  cp->SetTenantUidBase(o.tenant_uid_base);
  cp->SetSecretBox(std::make_unique<SecretBox>(secret_box));
  cp->SetBuiltinNode(o.local_node);
  cp->SetServicePorts(ports_lo, ports_hi);
  cp->SetNodeTimeout(NodeTimeoutMs(o, election));
  cp->SetTaskLimits({o.task_min_cpu_milli, o.task_min_memory_mib, o.tenant_max_tasks});
  cp->SetJobWindow({o.finished_jobs_in_memory, o.finished_jobs_max_age_ms});
}

std::string HostName() {
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') return "localhost";
  return name;
}

int64_t MonotonicMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// A leader that lost its lease stops writing at once: the process starts again from scratch, as
// a follower with fresh state (the simplest way to drop every piece of leader state). Every open
// descriptor but the standard ones closes with the exec, the listening socket included.
[[noreturn]] void StepDown(const std::string& why) {
  spdlog::error("lost the leadership: {}; starting again as a follower", why);
  spdlog::default_logger()->flush();
  std::vector<std::string> args;
  {
    std::ifstream in("/proc/self/cmdline", std::ios::binary);
    std::string arg;
    while (std::getline(in, arg, '\0')) args.push_back(arg);
  }
  if (DIR* d = ::opendir("/proc/self/fd"); d != nullptr) {
    while (dirent* e = ::readdir(d)) {
      const int fd = std::atoi(e->d_name);
      if (fd > 2 && fd != ::dirfd(d)) ::fcntl(fd, F_SETFD, FD_CLOEXEC);
    }
    ::closedir(d);
  }
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  if (!args.empty()) ::execv("/proc/self/exe", argv.data());
  std::fprintf(stderr, "arbiter server: cannot start again (%s): exiting\n", std::strerror(errno));
  std::_Exit(1);
}

}  // namespace

int RunServer(const ServerOptions& o) {
  if (o.log_format != "text" && o.log_format != "json") {
    std::fprintf(stderr, "arbiter server: --log-format must be text or json, got '%s'\n",
                 o.log_format.c_str());
    return 2;
  }
  SetupLogging(o.log_format);
  std::string host;
  int port = 0;
  if (!SplitHostPort(o.listen, &host, &port)) {
    spdlog::error("--listen: expected HOST:PORT, got '{}'", o.listen);
    return 2;
  }
  int32_t ports_lo = 0;
  int32_t ports_hi = 0;
  if (std::string why; !ParsePortRange(o.service_ports, &ports_lo, &ports_hi, &why)) {
    spdlog::error("--service-ports: {}", why);
    return 2;
  }
  if (!PrepareDataDir(o.data_dir)) return 1;
  // Signals are handled by one thread with sigwait; block them everywhere else.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGHUP);  // reopens the audit exports (--audit-file after log rotation)
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  auto store_url = ResolveStoreUrl(o);
  if (!store_url.ok()) {
    spdlog::error("{}", store_url.status().ToString());
    return 2;
  }
  const bool election =
      o.leader_election == "on" ||
      (o.leader_election == "auto" && store_url->kind == store::StoreUrl::Kind::kPostgres);
  if (election && NodeTimeoutMs(o, true) > o.node_timeout_ms) {
    spdlog::info(
        "--node-timeout-ms: {} ms with leader election (at least --lease-ms, two renewals and "
        "5 s), so that agents keep their tasks through a failover",
        NodeTimeoutMs(o, true));
  }
  if (election && !o.local_node.empty()) {
    spdlog::error(
        "--local-node: not with leader election (several servers, the default on PostgreSQL): "
        "run an agent on the node instead (arbiter agent), so that its tasks do not depend on "
        "which server leads; or, for one server alone on its store, --leader-election off");
    return 2;
  }
  if (o.lease_renew_ms * 2 > o.lease_ms) {
    spdlog::error("--lease-renew-ms: must be at most half of --lease-ms ({}), got {}", o.lease_ms,
                  o.lease_renew_ms);
    return 2;
  }
  if (store_url->kind == store::StoreUrl::Kind::kSqlite &&
      ::mkdir(store_url->sqlite_dir.c_str(), 0700) != 0 && errno != EEXIST) {
    spdlog::error("--store: cannot create {}: {}", store_url->sqlite_dir, std::strerror(errno));
    return 1;
  }
  auto store = store::OpenStore(*store_url);
  // With leader election, a server that cannot reach the store waits for it (one that lost the
  // lease because it lost the store starts again here); SIGTERM or SIGINT end the wait.
  for (int attempt = 1; election && !store.ok(); ++attempt) {
    if (attempt == 1 || attempt % 30 == 0) {
      spdlog::warn("cannot open the store {}: {}; retrying every second",
                   StoreDescription(o, *store_url), store.status().ToString());
    }
    const timespec second{1, 0};
    const int sig = sigtimedwait(&signals, nullptr, &second);
    if (sig == SIGTERM || sig == SIGINT) return 1;
    store = store::OpenStore(*store_url);
  }
  if (!store.ok()) {
    spdlog::error("cannot open the store {}: {}", StoreDescription(o, *store_url),
                  store.status().ToString());
    return 1;
  }
  // Registry credentials are sealed under the server's key; servers sharing a store share it.
  std::optional<SecretBox> secret_box;
  {
    const std::string key_file =
        o.secret_key_file.empty() ? o.data_dir + "/secret.key" : o.secret_key_file;
    auto box = SecretBox::LoadOrCreate(key_file);
    if (!box.ok()) {
      spdlog::error("--secret-key-file: {}", box.status().message());
      return 2;
    }
    secret_box.emplace(std::move(box).value());
  }
  // A follower writes nothing to the state: a fence no lease ever has makes sure of it.
  if (election) (*store)->SetFence(std::numeric_limits<uint64_t>::max());
  auto cp = std::make_shared<ControlPlane>(store->get(), WallClockMs);
  Configure(cp.get(), o, ports_lo, ports_hi, election, *secret_box);
  if (Status st = cp->Load(); !st.ok()) {
    spdlog::error("cannot load the state: {}", st.ToString());
    return 1;
  }
  if (!election) {
    if (int rc = ApplyStartConfig(cp.get(), o); rc != 0) return rc;
    if (!WriteBootstrapToken(cp.get(), o.data_dir)) return 1;
  }

  LeaderRuntime runtime(o, store->get(), NodeTimeoutMs(o, election));
  if (int rc = runtime.OpenExports(); rc != 0) return rc;
  if (!election) {
    if (Status st = runtime.StartExports(); !st.ok()) {
      spdlog::error("{}", st.ToString());
      return 1;
    }
  }

  std::unique_ptr<BuiltinNode> builtin;
  if (!o.local_node.empty()) {
    builtin = std::make_unique<BuiltinNode>(cp.get(), o, WallClockMs);
    if (Status st = builtin->Start(); !st.ok()) {
      spdlog::error("--local-node: {}", st.ToString());
      return 1;
    }
  }

  HttpOptions http_options;
  if (!HttpOptionsFrom(o, builtin ? builtin->work_dir() : "", &http_options)) return 2;
  HttpApi api(cp, http_options);
  auto bound = api.Bind(host, port);
  if (!bound.ok()) {
    spdlog::error("{}", bound.status().ToString());
    return 1;
  }
  const std::string loopback_url =
      fmt::format("http://{}:{}", host == "0.0.0.0" || host.empty() ? "127.0.0.1" : host, *bound);
  const std::string self_url =
      !o.advertise_url.empty()
          ? o.advertise_url
          : fmt::format("http://{}:{}", host == "0.0.0.0" || host.empty() ? HostName() : host,
                        *bound);
  const int64_t started_at = WallClockMs();
  const std::string server_id = fmt::format("{}-{}-{}", HostName(), ::getpid(), started_at);

  // Leadership (election on): the lease keeper's threads, a follower's refresh, and the start of
  // leading once elected (docs/architecture.md, "Threads").
  LeaseOptions lease_options{server_id, self_url, o.lease_ms, o.lease_renew_ms, started_at};
  LeaseKeeper keeper(store->get(), lease_options, MonotonicMs);
  std::mutex lead_mu;
  std::condition_variable lead_cv;
  uint64_t elected_term = 0;   // guarded by lead_mu
  bool shutting_down = false;  // guarded by lead_mu
  bool leading = !election;    // guarded by lead_mu
  std::thread refresher;
  std::thread leader_starter;
  api.SetLeadership(election ? &keeper : nullptr, store->get(), self_url);
  if (!election) {
    (void)(*store)->PutServer({server_id, self_url, "leader", 0, started_at, 0});
  } else {
    // A follower: its state loaded afresh every --follower-refresh-ms, until it leads.
    refresher = std::thread([&] {
      std::unique_lock<std::mutex> lock(lead_mu);
      while (!shutting_down && elected_term == 0) {
        lead_cv.wait_for(lock, std::chrono::milliseconds(o.follower_refresh_ms),
                         [&] { return shutting_down || elected_term != 0; });
        if (shutting_down || elected_term != 0) break;
        lock.unlock();
        auto fresh = std::make_shared<ControlPlane>(store->get(), WallClockMs);
        Configure(fresh.get(), o, ports_lo, ports_hi, true, *secret_box);
        if (Status st = fresh->Load(); !st.ok()) {
          spdlog::warn("follower: cannot load the state: {}", st.ToString());
        } else {
          api.SetControlPlane(std::move(fresh));
        }
        lock.lock();
      }
    });
    // Elected: the fence first (nothing of an older term commits any more), then the state
    // loaded afresh (it holds everything the previous leader committed), and only then the
    // scheduler, services, sampler, webhooks and writes.
    leader_starter = std::thread([&] {
      std::unique_lock<std::mutex> lock(lead_mu);
      lead_cv.wait(lock, [&] { return shutting_down || elected_term != 0; });
      if (shutting_down) return;
      const uint64_t term = elected_term;
      lock.unlock();
      if (refresher.joinable()) refresher.join();
      api.SetRole(HttpApi::ServingRole::kStarting);
      (*store)->SetFence(term);
      auto lead = std::make_shared<ControlPlane>(store->get(), WallClockMs);
      Configure(lead.get(), o, ports_lo, ports_hi, true, *secret_box);
      if (Status st = lead->Load(); !st.ok()) StepDown("cannot load the state: " + st.ToString());
      if (ApplyStartConfig(lead.get(), o) != 0) StepDown("the configuration could not be applied");
      if (!WriteBootstrapToken(lead.get(), o.data_dir)) StepDown("cannot write the admin token");
      if (Status st = runtime.StartExports(); !st.ok()) spdlog::error("{}", st.ToString());
      lock.lock();
      if (shutting_down) return;
      api.SetControlPlane(lead);
      runtime.Start(lead.get(), loopback_url);
      leading = true;
      api.SetRole(HttpApi::ServingRole::kLeader);
      spdlog::info("leading with term {}: state loaded, scheduling", term);
    });
    keeper.Start(
        [&](uint64_t term) {
          spdlog::info("elected leader with term {}", term);
          {
            std::lock_guard<std::mutex> lock(lead_mu);
            elected_term = term;
          }
          lead_cv.notify_all();
        },
        [](const std::string& why) { StepDown(why); });
  }
  std::printf("arbiter server listening on http://%s:%d\n", host.c_str(), *bound);
  std::fflush(stdout);
  spdlog::info(
      "API at http://{}:{}/api/v1 (OpenAPI: /api/v1/openapi.json), data in {}{}", host, *bound,
      o.data_dir,
      election ? fmt::format("; leader election on as {} at {}", server_id, self_url) : "");
  if (!election) runtime.Start(cp.get(), loopback_url);

  std::thread signal_thread([&] {
    int sig = 0;
    while (sigwait(&signals, &sig) == 0 && sig == SIGHUP) {
      spdlog::info("SIGHUP: reopening the audit exports");
      runtime.ReopenExports();
    }
    if (sig == SIGTERM || sig == SIGINT) spdlog::info("signal {}: shutting down", sig);
    {
      std::lock_guard<std::mutex> lock(lead_mu);
      shutting_down = true;
      if (leading) runtime.StopScheduling();
    }
    lead_cv.notify_all();
    // Nothing new starts from here on: the built-in node stops first (its tasks keep running
    // unless --kill-tasks-on-exit), before the scheduler and the API.
    if (builtin) StopBuiltin(builtin.get(), o.kill_tasks_on_exit);
    api.Stop();
  });

  api.Serve();  // returns after Stop
  {
    std::lock_guard<std::mutex> lock(lead_mu);
    shutting_down = true;
  }
  lead_cv.notify_all();
  if (leader_starter.joinable()) leader_starter.join();
  if (refresher.joinable()) refresher.join();
  if (builtin) StopBuiltin(builtin.get(), o.kill_tasks_on_exit);
  // Wake the signal thread if Serve ended for another reason.
  pthread_kill(signal_thread.native_handle(), SIGTERM);
  signal_thread.join();
  runtime.Stop();
  runtime.StopExports();
  if (election) {
    // What this leader wrote is committed (a barrier), then the lease ends: a follower takes
    // over at once instead of after the lease.
    keeper.Stop();
    (void)(*store)->Write(store::WriteBatch{});
    keeper.Release();
  } else {
    (void)(*store)->PutServer({server_id, self_url, "stopped", 0, started_at, 0});
  }
  (*store)->Close();
  spdlog::info("stopped");
  return 0;
}

}  // namespace arbiter::server

#include "agent/agent_command.h"

#include <fmt/format.h>
#include <pwd.h>
#include <signal.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <random>
#include <thread>

#include "agent/agent_client.h"
#include "agent/backoff.h"
#include "agent/log_server.h"
#include "exec/task_cgroups.h"
#include "model/node.h"
#include "node/gpu/fake_gpus.h"
#include "node/gpu/nvml.h"
#include "node/local_executor.h"

#ifndef ARBITER_VERSION
#define ARBITER_VERSION "dev"
#endif

namespace arbiter::agent {

namespace {

TimeMs WallClockMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void SetupLogging(const std::string& format) {
  auto logger = spdlog::stderr_logger_mt("arbiter-agent");
  if (format == "json") {
    logger->set_pattern(
        R"({"time":"%Y-%m-%dT%H:%M:%S.%eZ","level":"%l","logger":"%n","message":"%v"})",
        spdlog::pattern_time_type::utc);
  } else {
    logger->set_pattern("%Y-%m-%d %H:%M:%S.%e %^%-5l%$ %v");
  }
  spdlog::set_default_logger(logger);
}

Status SplitHostPort(const std::string& listen, std::string* host, int* port) {
  const size_t colon = listen.rfind(':');
  if (colon == std::string::npos || colon == 0) {
    return InvalidArgument("--listen", fmt::format("expected HOST:PORT, got '{}'", listen));
  }
  *host = listen.substr(0, colon);
  try {
    *port = std::stoi(listen.substr(colon + 1));
  } catch (...) {
    *port = -1;
  }
  if (*port < 0 || *port > 65535) {
    return InvalidArgument("--listen", fmt::format("expected HOST:PORT, got '{}'", listen));
  }
  return Status::Ok();
}

Result<std::map<std::string, std::string>> ParseLabels(const std::string& text) {
  std::map<std::string, std::string> out;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find(',', start);
    if (end == std::string::npos) end = text.size();
    const std::string item = text.substr(start, end - start);
    const size_t eq = item.find('=');
    if (eq == 0 || eq == std::string::npos || item.size() > 317) {
      return InvalidArgument("--labels",
                             fmt::format("expected KEY=VALUE[,KEY=VALUE], got '{}'", item));
    }
    out[item.substr(0, eq)] = item.substr(eq + 1);
    start = end + 1;
  }
  return out;
}

std::string RandomToken() {
  std::random_device rd;
  std::string out;
  for (int i = 0; i < 24; ++i) out += fmt::format("{:02x}", rd() & 0xff);
  return out;
}

// The permanent answers: retrying does not help.
bool Permanent(const Status& st) {
  return st.code() == StatusCode::kInvalidArgument || st.code() == StatusCode::kUnauthenticated ||
         st.code() == StatusCode::kPermissionDenied || st.code() == StatusCode::kNotFound;
}

Status Validate(const AgentOptions& o, std::string* token,
                std::map<std::string, std::string>* labels) {
  const std::vector<std::string> servers = SplitServerUrls(o.server);
  if (servers.empty()) return InvalidArgument("--server", "expected http://HOST:PORT, got ''");
  for (const std::string& url : servers) {
    if (url.rfind("http://", 0) != 0 && url.rfind("https://", 0) != 0) {
      return InvalidArgument("--server", fmt::format("expected http://HOST:PORT{}, got '{}'",
                                                     servers.size() > 1 ? " (each URL)" : "", url));
    }
  }
  *token = o.token;
  if (token->empty() && !o.token_file.empty()) {
    std::ifstream f(o.token_file);
    if (!f || !std::getline(f, *token)) {
      return InvalidArgument("--token-file", fmt::format("cannot read {}", o.token_file));
    }
  }
  if (token->empty()) {
    return InvalidArgument("--token", "a node token is required (--token or --token-file)");
  }
  if (!IsValidHostName(o.name)) {
    return InvalidArgument("--name", fmt::format("'{}' is not a valid node name", o.name));
  }
  if (o.fake_gpus < 0 || o.gpu_memory_mib < 0) {
    return InvalidArgument("--fake-gpus", "must be >= 0");
  }
  auto parsed = ParseLabels(o.labels);
  if (!parsed.ok()) return parsed.status();
  *labels = std::move(parsed).value();
  return Status::Ok();
}

// A name for this agent's cgroups, stable across its restarts: the node and its work folder.
std::string CgroupScope(const std::string& node, const std::string& work_dir) {
  std::error_code ec;
  const std::string abs = std::filesystem::absolute(work_dir, ec).lexically_normal().string();
  return fmt::format("{}-{:08x}", node, static_cast<uint32_t>(std::hash<std::string>{}(abs)));
}

// Who tasks run as when their assignment names nobody, their GPUs' devices, the limits.
node::ExecutorOptions ConfinementOptions(const AgentOptions& o, node::GpuDiscovery* gpus) {
  node::ExecutorOptions eo;
  eo.shim_path = o.shim;
  eo.max_task_processes = o.max_task_processes;
  eo.output_retention_ms = int64_t{o.output_retention_days} * 86'400'000;
  eo.orphan_timeout_ms = o.orphan_timeout_ms >= 0 ? o.orphan_timeout_ms : 10000;
  eo.containers = o.containers;
  eo.container.insecure_registries = o.insecure_registries;
  if (const passwd* pw = getpwnam(o.run_as_default.c_str())) {
    eo.default_uid = pw->pw_uid;
    eo.default_gid = pw->pw_gid;
  } else if (geteuid() == 0) {
    spdlog::warn(
        "user {} does not exist; tasks whose assignment names no user run as nobody "
        "(65534)",
        o.run_as_default);
  }
  for (const node::DiscoveredGpu& g :
       gpus != nullptr ? gpus->Discover() : std::vector<node::DiscoveredGpu>{}) {
    if (g.device_major >= 0 && g.device_minor >= 0) {
      eo.gpu_devices[g.index] = {static_cast<uint32_t>(g.device_major),
                                 static_cast<uint32_t>(g.device_minor)};
    }
  }
  return eo;
}

// Not root: every task runs as this user and can read what it can. Said loudly, at start.
void WarnIfUnconfined(const node::LocalExecutor& executor) {
  if (executor.switches_users()) return;
  for (int i = 0; i < 3; ++i) spdlog::warn("{}", std::string(72, '!'));
  spdlog::warn("{}", executor.Describe());
  spdlog::warn("run the agent as root so that tasks run as their own users (docs/security.md)");
  for (int i = 0; i < 3; ++i) spdlog::warn("{}", std::string(72, '!'));
}

// What this node tells the server when it registers (again after every reconnection).
struct NodeFacts {
  std::map<std::string, std::string> labels;
  std::string listen_host;
  std::string log_token;
  std::string cgroup_status;
  std::string gpu_status;
};

AgentRegistration BuildRegistration(const AgentOptions& o, const NodeFacts& f,
                                    node::GpuDiscovery* gpus, int log_port,
                                    const node::LocalExecutor* executor) {
  AgentRegistration r;
  r.node.name = o.name;
  r.node.cpu_milli = static_cast<int64_t>(sysconf(_SC_NPROCESSORS_ONLN)) * 1000;
  r.node.memory_mib = static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) *
                      static_cast<int64_t>(sysconf(_SC_PAGESIZE)) / (1024 * 1024);
  r.node.labels = f.labels;
  if (auto it = f.labels.find("rack"); it != f.labels.end()) r.node.rack = it->second;
  if (auto it = f.labels.find("block"); it != f.labels.end()) r.node.block = it->second;
  for (const node::DiscoveredGpu& d :
       gpus ? gpus->Discover() : std::vector<node::DiscoveredGpu>{}) {
    r.node.gpus.push_back({d.index, o.gpu_model.empty() ? d.model : o.gpu_model, d.memory_mib,
                           d.healthy, d.nvlink_domain});
  }
  r.version = ARBITER_VERSION;
  r.address = o.address;
  r.log_host = f.listen_host;
  r.log_port = log_port;
  r.log_token = f.log_token;
  r.status = {{"cgroups", f.cgroup_status},
              {"gpu_discovery", f.gpu_status},
              {"confinement", executor != nullptr ? executor->Describe() : ""}};
  return r;
}

// The flags checked, the token read, the work dir made; an exit code (0: go on).
int Prepare(const AgentOptions& o, std::string* token, std::map<std::string, std::string>* labels,
            std::string* listen_host, int* listen_port) {
  Status valid = Validate(o, token, labels);
  if (valid.ok()) valid = SplitHostPort(o.listen, listen_host, listen_port);
  if (!valid.ok()) {
    spdlog::error("{}", valid.ToString());
    return 2;
  }
  std::error_code ec;
  std::filesystem::create_directories(o.work_dir, ec);
  if (ec) {
    spdlog::error("--work-dir: cannot create {}: {}", o.work_dir, ec.message());
    return 1;
  }
  return 0;
}

// Tasks keep running for the next agent to adopt (their shims stop them if none comes within
// the orphan timeout), unless --kill-tasks-on-exit.
void StopExecutor(node::LocalExecutor* executor, const AgentOptions& o) {
  const size_t left = executor->running();
  executor->Stop(o.kill_tasks_on_exit);
  if (left > 0 && !o.kill_tasks_on_exit) {
    spdlog::info("{} task{} keep running; an agent started again with --work-dir {} adopts them",
                 left, left == 1 ? "" : "s", o.work_dir);
  }
}

// GPU discovery: fake GPUs (--fake-gpus), else NVML; none, with a warning, without NVML.
std::unique_ptr<node::GpuDiscovery> DiscoverGpus(const AgentOptions& o, std::string* status) {
  std::unique_ptr<node::GpuDiscovery> gpus;
  if (o.fake_gpus > 0) {
    auto fake = std::make_unique<node::FakeGpus>(o.fake_gpus, o.gpu_model, o.gpu_memory_mib,
                                                 o.work_dir + "/fake-gpu-faults");
    if (o.fake_gpu_device_major >= 0) fake->SetDeviceMajor(o.fake_gpu_device_major);
    gpus = std::move(fake);
    *status = gpus->Describe();
  } else if (auto nvml = node::NvmlGpus::Load(o.nvml_library); nvml.ok()) {
    gpus = std::move(nvml).value();
    *status = gpus->Describe();
  } else {
    *status = fmt::format("unavailable: {}", nvml.status().message());
    spdlog::warn("no GPUs: {}", nvml.status().message());
  }
  spdlog::info("GPUs: {}", *status);
  return gpus;
}

// Cgroups per task where this machine offers them (null otherwise; `status` says why).
std::unique_ptr<exec::TaskCgroups> SetupCgroups(const AgentOptions& o, std::string* status) {
  *status = "disabled (--no-cgroups)";
  std::unique_ptr<exec::TaskCgroups> limits;
  if (o.cgroups) {
    exec::CgroupOptions co;
    co.scope = CgroupScope(o.name, o.work_dir);
    co.leaf = "agent";
    limits = exec::TaskCgroups::Setup(co, status);
  }
  spdlog::info("cgroups: {}", *status);
  return limits;
}

// Set once, by the signal thread; waited for by the others.
class StopSignal {
 public:
  void Set() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
  }
  bool stopped() const {
    std::lock_guard<std::mutex> lock(mu_);
    return stop_;
  }
  // True when set within `ms`.
  bool WaitFor(DurationMs ms) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, std::chrono::milliseconds(ms), [this] { return stop_; });
  }
  void Wait() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return stop_; });
  }

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;  // guarded by mu_
};

// Registers (the server may not be up yet: retries with backoff and jitter until it answers,
// refuses for good, or `stop` is set); the exit code: 1 when refused for good.
int RegisterWithRetry(AgentClient* client, const std::string& name, const AgentClientOptions& co,
                      StopSignal* stop) {
  std::mt19937_64 rng(std::random_device{}());
  for (int attempt = 1;; ++attempt) {
    const Status st = client->Register();
    if (st.ok()) return 0;
    if (Permanent(st)) {
      spdlog::error("the server refused to register {}: {}", name, st.ToString());
      return 1;
    }
    const DurationMs delay = RetryDelayMs(attempt, co.backoff_base_ms, co.backoff_max_ms,
                                          std::uniform_real_distribution<double>(0, 1)(rng));
    spdlog::warn("cannot register yet: {}; retrying in {} ms", st.ToString(), delay);
    if (stop->WaitFor(delay)) return 0;
  }
}

}  // namespace

int RunAgent(const AgentOptions& o) {
  if (o.log_format != "text" && o.log_format != "json") {
    std::fprintf(stderr, "arbiter agent: --log-format must be text or json\n");
    return 2;
  }
  SetupLogging(o.log_format);
  std::string token;
  std::map<std::string, std::string> labels;
  std::string listen_host;
  int listen_port = 0;
  if (int rc = Prepare(o, &token, &labels, &listen_host, &listen_port); rc != 0) return rc;
  // Signals are handled by one thread with sigwait; block them everywhere else.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  // 1. GPUs: fake ones, else NVML; without NVML the node offers no GPUs, and says so.
  std::string gpu_status;
  std::unique_ptr<node::GpuDiscovery> gpus = DiscoverGpus(o, &gpu_status);

  // 2. Confinement: cgroups per task where this machine offers them, the tasks' users.
  node::ExecutorOptions eo = ConfinementOptions(o, gpus.get());
  std::string cgroup_status;
  std::unique_ptr<exec::TaskCgroups> limits = SetupCgroups(o, &cgroup_status);
  eo.limits = limits.get();

  // 3. The link to the server, the executor, the log port.
  const std::string log_token = RandomToken();
  const NodeFacts facts{labels, listen_host, log_token, cgroup_status, gpu_status};
  int log_port = 0;
  node::LocalExecutor* executor_ptr = nullptr;
  auto registration = [&]() {
    return BuildRegistration(o, facts, gpus.get(), log_port, executor_ptr);
  };
  auto telemetry = [&]() {
    if (!gpus) return std::vector<GpuTelemetry>{};
    return gpus->Sample(executor_ptr != nullptr ? executor_ptr->BusyGpus() : std::set<int32_t>{});
  };
  AgentClientOptions co;
  co.server = o.server;
  co.token = token;
  co.node = o.name;
  co.heartbeat_ms = o.heartbeat_ms;
  co.backoff_max_ms = o.backoff_max_ms;
  AgentClient client(co, registration, telemetry);
  node::LocalExecutor executor(&client, o.name, o.work_dir, WallClockMs, eo);
  WarnIfUnconfined(executor);
  executor_ptr = &executor;
  client.SetOnAssignments([&executor] { executor.Wake(); });
  LogServer logs(o.work_dir, log_token, [&executor](uint64_t job, int32_t task) {
    return executor.RunningAttempt(job, task);
  });
  auto bound = logs.Start(listen_host, listen_port);
  if (!bound.ok()) {
    spdlog::error("{}", bound.status().ToString());
    return 1;
  }
  log_port = *bound;

  StopSignal stop;
  std::thread signal_thread([&] {
    int sig = 0;
    sigwait(&signals, &sig);
    spdlog::info("signal {}: stopping the agent", sig);
    stop.Set();
  });

  // 4. Tasks of an earlier run of this agent are adopted (or their exits reported).
  executor.Recover();

  // 5. Register (the server may not be up yet: retry), then heartbeat and run.
  const int exit_code = RegisterWithRetry(&client, o.name, co, &stop);
  const bool stopped = stop.stopped();
  if (exit_code == 0 && !stopped && o.orphan_timeout_ms < 0 &&
      client.server_node_timeout_ms() > 0) {
    executor.SetOrphanTimeout(client.server_node_timeout_ms());
  }
  if (exit_code == 0 && !stopped) {
    std::printf("arbiter agent %s registered with %s; logs on %s:%d\n", o.name.c_str(),
                o.server.c_str(), listen_host.c_str(), log_port);
    std::fflush(stdout);
    client.Start();
    executor.Start();
    stop.Wait();
  }

  // 6. Stop: tasks keep running for the next agent to adopt (their shims stop them if none comes
  // within the orphan timeout), unless asked to kill them; the reports delivered if the server
  // answers.
  StopExecutor(&executor, o);
  client.Stop();
  client.Flush(2000);
  logs.Stop();
  pthread_kill(signal_thread.native_handle(), SIGTERM);
  signal_thread.join();
  spdlog::info("stopped");
  return exit_code;
}

}  // namespace arbiter::agent

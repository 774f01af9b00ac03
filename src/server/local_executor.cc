#include "server/local_executor.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <charconv>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

namespace arbiter::server {

namespace {

// The kernel's id of this boot: pids in pid files of another boot name other processes.
std::string BootId() {
  std::ifstream f("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(f, id);
  return id;
}

// Start time of `pid` in clock ticks since boot (field 22 of /proc/PID/stat), or "" when gone.
std::string StartTime(pid_t pid) {
  std::ifstream f(fmt::format("/proc/{}/stat", pid));
  std::string stat;
  std::getline(f, stat);
  const size_t paren = stat.rfind(')');  // the command name may hold spaces and parentheses
  if (paren == std::string::npos) return "";
  std::istringstream rest(stat.substr(paren + 2));
  std::string field;
  for (int i = 3; i <= 22 && rest >> field; ++i) {
    if (i == 22) return field;
  }
  return "";
}

bool ParseNumber(std::string_view s, uint64_t* out) {
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && end == s.data() + s.size() && !s.empty();
}

// A pid file: "<pid> <attempt> <start time> <boot id>".
struct PidRecord {
  pid_t pid = 0;
  uint64_t attempt = 0;
  bool has_attempt = false;
  std::string start_time;
  std::string boot_id;
};

bool ReadPidFile(const std::string& path, PidRecord* r) {
  std::ifstream f(path);
  if (!(f >> r->pid) || r->pid <= 1) return false;
  r->has_attempt = static_cast<bool>(f >> r->attempt);
  f >> r->start_time >> r->boot_id;
  return true;
}

// Kills the process group a pid file names, unless that pid now belongs to another process (a
// pid of another boot, or one whose start time differs: the pid was reused).
void KillRecorded(const PidRecord& r) {
  if (!r.boot_id.empty() && r.boot_id != BootId()) return;  // gone with the previous boot
  const std::string now_start = StartTime(r.pid);
  if (!now_start.empty() && !r.start_time.empty() && now_start != r.start_time) return;
  // The leader may be gone while others of its group live on: a group id is not reused while
  // the group exists.
  ::kill(-r.pid, SIGKILL);
  if (!now_start.empty()) ::kill(r.pid, SIGKILL);
}

}  // namespace

LocalExecutor::LocalExecutor(ExecutionBackend* backend, std::string node, std::string work_dir,
                             NowFn now, ExecutorOptions options)
    : backend_(backend),
      node_(std::move(node)),
      work_dir_(std::move(work_dir)),
      now_(std::move(now)),
      options_(options) {}

LocalExecutor::~LocalExecutor() { Stop(true); }

std::string LocalExecutor::PidFile(uint64_t job, int32_t task) const {
  return fmt::format("{}/jobs/{}/task-{}.pid", work_dir_, job, task);
}

void LocalExecutor::ReapLeftovers() {
  std::error_code ec;
  const std::filesystem::path jobs = std::filesystem::path(work_dir_) / "jobs";
  if (!std::filesystem::is_directory(jobs, ec)) return;
  for (const auto& dir : std::filesystem::directory_iterator(jobs, ec)) {
    uint64_t job = 0;
    if (!ParseNumber(dir.path().filename().string(), &job)) continue;
    for (const auto& file : std::filesystem::directory_iterator(dir.path(), ec)) {
      const std::string name = file.path().filename().string();  // task-<n>.pid
      uint64_t index = 0;
      if (name.size() < 10 || name.rfind("task-", 0) != 0 || !name.ends_with(".pid") ||
          !ParseNumber(name.substr(5, name.size() - 9), &index) || index > 1u << 20) {
        continue;
      }
      const auto task = static_cast<int32_t>(index);
      PidRecord r;
      if (ReadPidFile(file.path().string(), &r)) KillRecorded(r);
      std::filesystem::remove(file.path(), ec);
      if (options_.limits != nullptr) options_.limits->Release(job, task);
      if (r.has_attempt) {
        spdlog::warn(
            "job {} task {} (attempt {}): pid {} of an earlier run cannot be adopted; "
            "killed, reported lost",
            job, task, r.attempt, r.pid);
        backend_->ReportTaskLost(job, task, r.attempt);
      }
    }
  }
}

void LocalExecutor::Start() {
  thread_ = std::thread([this] {
    while (!stop_) {
      Tick();
      std::unique_lock<std::mutex> lock(wake_mu_);
      wake_cv_.wait_for(lock, std::chrono::milliseconds(options_.tick_ms),
                        [&] { return woken_ || stop_.load(); });
      woken_ = false;
    }
  });
}

void LocalExecutor::Wake() {
  {
    std::lock_guard<std::mutex> lock(wake_mu_);
    woken_ = true;
  }
  wake_cv_.notify_all();
}

void LocalExecutor::Stop(bool kill_tasks) {
  stop_ = true;
  Wake();
  if (thread_.joinable()) thread_.join();
  if (!kill_tasks) return;
  for (auto& [key, p] : procs_) {
    if (p.pid <= 0) continue;
    ::kill(-p.pid, SIGKILL);
    int status = 0;
    waitpid(p.pid, &status, 0);
    std::error_code ec;
    std::filesystem::remove(PidFile(key.first, key.second), ec);
    if (options_.limits != nullptr) options_.limits->Release(key.first, key.second);
    backend_->ReportTaskLost(key.first, key.second, p.attempt);
  }
  std::lock_guard<std::mutex> lock(mu_);
  procs_.clear();
}

std::set<int32_t> LocalExecutor::BusyGpus() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::set<int32_t> out;
  for (const auto& [key, p] : procs_) out.insert(p.gpus.begin(), p.gpus.end());
  return out;
}

bool LocalExecutor::Running(uint64_t job, int32_t task) const {
  std::lock_guard<std::mutex> lock(mu_);
  return procs_.count({job, task}) > 0;
}

void LocalExecutor::Terminate(Proc& p, DurationMs grace) {
  if (p.kill_at != 0) return;
  ::kill(-p.pid, SIGTERM);
  p.kill_at = now_() + grace;
}

void LocalExecutor::Launch(const TaskAssignment& a) {
  const std::string job_dir = fmt::format("{}/jobs/{}", work_dir_, a.job);
  const std::string ckpt_dir = fmt::format("{}/checkpoints/{}", work_dir_, a.job);
  std::error_code ec;
  std::filesystem::create_directories(job_dir, ec);
  std::filesystem::create_directories(ckpt_dir, ec);
  std::string gpus;
  for (int32_t g : a.gpus) gpus += (gpus.empty() ? "" : ",") + std::to_string(g);
  std::map<std::string, std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string kv = *e;
    const size_t eq = kv.find('=');
    if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  for (const auto& [k, v] : a.spec.env) env[k] = v;
  env["CUDA_VISIBLE_DEVICES"] = gpus;
  env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID";  // NVML's order, which the indices are in
  env["NVIDIA_VISIBLE_DEVICES"] = gpus.empty() ? "void" : gpus;
  env["ARBITER_JOB_ID"] = std::to_string(a.job);
  env["ARBITER_TASK_INDEX"] = std::to_string(a.task);
  env["ARBITER_NODE_NAME"] = node_;
  env["ARBITER_RESTART_COUNT"] = std::to_string(a.restarts);  // retries and preemptions
  env["ARBITER_CHECKPOINT_DIR"] = std::filesystem::absolute(ckpt_dir, ec).string();
  env["WORLD_SIZE"] = std::to_string(a.spec.tasks);
  env["RANK"] = std::to_string(a.task);
  env["NODE_RANK"] = std::to_string(a.task);
  env["LOCAL_RANK"] = "0";
  env["MASTER_ADDR"] = !a.master_addr.empty()   ? a.master_addr
                       : a.master_node == node_ ? "127.0.0.1"
                                                : a.master_node;
  env["MASTER_PORT"] = std::to_string(20000 + a.job % 20000);
  std::vector<std::string> env_strings;
  env_strings.reserve(env.size());
  for (const auto& [k, v] : env) env_strings.push_back(fmt::format("{}={}", k, v));
  const std::string out = fmt::format("{}/task-{}.out", job_dir, a.task);
  const std::string err = fmt::format("{}/task-{}.err", job_dir, a.task);
  const std::string procs_file =
      options_.limits != nullptr
          ? options_.limits->Prepare(a.job, a.task, a.spec.resources.cpu_milli,
                                     a.spec.resources.memory_mib)
          : std::string();
  // Everything the child needs is built before fork: between fork and exec it only makes calls.
  std::vector<std::string> args = a.spec.command;
  std::vector<char*> argv;
  argv.reserve(args.size() + 1);
  for (auto& s : args) argv.push_back(s.data());
  argv.push_back(nullptr);
  std::vector<char*> envp;
  envp.reserve(env_strings.size() + 1);
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  const pid_t parent = getpid();

  const pid_t pid = fork();
  if (pid == 0) {
    setsid();  // its own session and process group: signals reach every child it starts
    if (options_.die_with_executor) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(137);  // the executor died before prctl
    }
    if (!procs_file.empty()) {
      const int fd = ::open(procs_file.c_str(), O_WRONLY);
      if (fd < 0 || ::write(fd, "0", 1) != 1) {
        std::fprintf(stderr, "arbiter: cannot enter the task's cgroup %s\n", procs_file.c_str());
      }
      if (fd >= 0) ::close(fd);
    }
    const int o = ::open(out.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    const int e = ::open(err.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (o >= 0) dup2(o, STDOUT_FILENO);
    if (e >= 0) dup2(e, STDERR_FILENO);
    const int in = ::open("/dev/null", O_RDONLY);
    if (in >= 0) dup2(in, STDIN_FILENO);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);  // the server blocks SIGTERM; tasks must not
    if (!a.spec.workdir.empty() && chdir(a.spec.workdir.c_str()) != 0) {
      std::fprintf(stderr, "arbiter: cannot enter workdir %s\n", a.spec.workdir.c_str());
      _exit(126);
    }
    execvpe(argv[0], argv.data(), envp.data());
    std::fprintf(stderr, "arbiter: cannot run %s: %s\n", argv[0], std::strerror(errno));
    _exit(127);
  }
  if (pid < 0) {
    spdlog::error("job {} task {}: fork failed: {}", a.job, a.task, std::strerror(errno));
    if (options_.limits != nullptr) options_.limits->Release(a.job, a.task);
    backend_->ReportTaskExited(a.job, a.task, a.attempt, 126, false);
    return;
  }
  setpgid(pid, pid);
  {
    std::ofstream pidfile(PidFile(a.job, a.task), std::ios::trunc);
    pidfile << pid << " " << a.attempt << " " << StartTime(pid) << " " << BootId() << "\n";
  }
  Proc p;
  p.pid = pid;
  p.attempt = a.attempt;
  p.gpus = a.gpus;
  p.grace_ms = a.grace_ms;
  {
    std::lock_guard<std::mutex> lock(mu_);
    procs_[{a.job, a.task}] = p;
  }
  backend_->ReportTaskStarted(a.job, a.task, a.attempt);
  spdlog::info("job {} task {} started as pid {} on GPUs [{}]", a.job, a.task, pid, gpus);
}

void LocalExecutor::Tick() {
  const TimeMs now = now_();
  std::set<Key> wanted;  // tasks assigned here, of the attempt that runs
  for (const TaskAssignment& a : backend_->AssignmentsFor(node_)) {
    const Key key{a.job, a.task};
    auto it = procs_.find(key);
    if (it == procs_.end()) {
      if (a.started) {
        // Started by an earlier run of this node: its process cannot be adopted. Make sure it is
        // gone (its pid file), and report the task lost so the job is retried by its policy.
        PidRecord r;
        if (ReadPidFile(PidFile(a.job, a.task), &r) && (!r.has_attempt || r.attempt == a.attempt))
          KillRecorded(r);
        std::error_code ec;
        std::filesystem::remove(PidFile(a.job, a.task), ec);
        backend_->ReportTaskLost(a.job, a.task, a.attempt);
      } else if (a.run) {
        Launch(a);
        wanted.insert(key);
      } else {
        backend_->ReportTaskExited(a.job, a.task, a.attempt, 143, false);  // stopped before start
      }
      continue;
    }
    Proc& p = it->second;
    if (p.attempt != a.attempt) continue;  // an older run still ends: stopped below
    wanted.insert(key);
    p.deadline = a.deadline;
    p.grace_ms = a.grace_ms;
    if (!a.run) Terminate(p, a.grace_ms);
    if (a.run && p.deadline > 0 && now >= p.deadline && p.kill_at == 0) {
      p.timed_out = true;
      Terminate(p, a.grace_ms);
    }
  }
  for (auto& [key, p] : procs_) {
    if (wanted.count(key) || p.kill_at != 0) continue;
    spdlog::warn("job {} task {} (attempt {}) is no longer assigned to {}: stopping pid {}",
                 key.first, key.second, p.attempt, node_, p.pid);
    Terminate(p, p.grace_ms);
  }
  Reap(now);
}

void LocalExecutor::Reap(TimeMs now) {
  for (auto it = procs_.begin(); it != procs_.end();) {
    Proc& p = it->second;
    if (p.kill_at != 0 && now >= p.kill_at) ::kill(-p.pid, SIGKILL);
    int status = 0;
    const pid_t r = waitpid(p.pid, &status, WNOHANG);
    if (r != p.pid) {
      ++it;
      continue;
    }
    const int32_t code = WIFEXITED(status) ? WEXITSTATUS(status)
                                           : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
    ::kill(-p.pid, SIGKILL);  // whatever the task left behind in its group
    const auto [job, task] = it->first;
    std::error_code ec;
    std::filesystem::remove(PidFile(job, task), ec);
    if (options_.limits != nullptr) options_.limits->Release(job, task);
    spdlog::info("job {} task {} exited with {}", job, task, code);
    const uint64_t attempt = p.attempt;
    const bool timed_out = p.timed_out;
    {
      std::lock_guard<std::mutex> lock(mu_);
      it = procs_.erase(it);
    }
    backend_->ReportTaskExited(job, task, attempt, code, timed_out);
  }
}

}  // namespace arbiter::server

#include "server/local_executor.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <vector>

namespace arbiter::server {

LocalExecutor::LocalExecutor(ControlPlane* cp, std::string node, std::string work_dir, NowFn now)
    : cp_(cp), node_(std::move(node)), work_dir_(std::move(work_dir)), now_(std::move(now)) {}

LocalExecutor::~LocalExecutor() { Stop(true); }

void LocalExecutor::Start() {
  thread_ = std::thread([this] {
    while (!stop_) {
      Tick();
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  });
}

void LocalExecutor::Stop(bool kill_tasks) {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
  if (!kill_tasks) return;
  for (auto& [key, p] : procs_) {
    if (p.pid > 0) {
      ::kill(-p.pid, SIGKILL);
      int status = 0;
      waitpid(p.pid, &status, 0);
      cp_->ReportTaskLost(key.first, key.second);
    }
  }
  procs_.clear();
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
  env["MASTER_ADDR"] = a.master_node == node_ ? "127.0.0.1" : a.master_node;
  env["MASTER_PORT"] = std::to_string(20000 + a.job % 20000);
  std::vector<std::string> env_strings;
  for (const auto& [k, v] : env) env_strings.push_back(k + "=" + v);
  const std::string out = fmt::format("{}/task-{}.out", job_dir, a.task);
  const std::string err = fmt::format("{}/task-{}.err", job_dir, a.task);

  const pid_t pid = fork();
  if (pid == 0) {
    setsid();  // its own session and process group: signals reach every child it starts
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
    std::vector<char*> argv;
    std::vector<std::string> args = a.spec.command;
    for (auto& s : args) argv.push_back(s.data());
    argv.push_back(nullptr);
    std::vector<char*> envp;
    for (auto& s : env_strings) envp.push_back(s.data());
    envp.push_back(nullptr);
    execvpe(argv[0], argv.data(), envp.data());
    std::fprintf(stderr, "arbiter: cannot run %s: %s\n", argv[0], std::strerror(errno));
    _exit(127);
  }
  if (pid < 0) {
    spdlog::error("job {} task {}: fork failed: {}", a.job, a.task, std::strerror(errno));
    cp_->ReportTaskExited(a.job, a.task, 126, false);
    return;
  }
  setpgid(pid, pid);
  {
    std::ofstream pidfile(fmt::format("{}/task-{}.pid", job_dir, a.task), std::ios::trunc);
    pidfile << pid << "\n";
  }
  Proc p;
  p.pid = pid;
  procs_[{a.job, a.task}] = p;
  cp_->ReportTaskStarted(a.job, a.task);
  spdlog::info("job {} task {} started as pid {} on GPUs [{}]", a.job, a.task, pid, gpus);
}

void LocalExecutor::Tick() {
  const TimeMs now = now_();
  std::set<std::pair<uint64_t, int32_t>> wanted;
  for (const TaskAssignment& a : cp_->AssignmentsFor(node_)) {
    const auto key = std::make_pair(a.job, a.task);
    wanted.insert(key);
    auto it = procs_.find(key);
    if (it == procs_.end()) {
      if (a.started) {
        // Started by an earlier run of this node: its process cannot be adopted. Make sure it is
        // gone (its pid file), and report the task lost so the job is retried by its policy.
        std::ifstream pidfile(fmt::format("{}/jobs/{}/task-{}.pid", work_dir_, a.job, a.task));
        pid_t old = 0;
        if (pidfile >> old && old > 1) ::kill(-old, SIGKILL);
        cp_->ReportTaskLost(a.job, a.task);
      } else if (a.run) {
        Launch(a);
      } else {
        cp_->ReportTaskExited(a.job, a.task, 143, false);  // stopped before it started
      }
      continue;
    }
    Proc& p = it->second;
    p.deadline = a.deadline;
    if (!a.run) Terminate(p, a.grace_ms);
    if (a.run && p.deadline > 0 && now >= p.deadline && p.kill_at == 0) {
      p.timed_out = true;
      Terminate(p, a.grace_ms);
    }
  }
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
    spdlog::info("job {} task {} exited with {}", it->first.first, it->first.second, code);
    cp_->ReportTaskExited(it->first.first, it->first.second, code, p.timed_out);
    it = procs_.erase(it);
  }
}

}  // namespace arbiter::server

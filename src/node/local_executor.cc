#include "node/local_executor.h"

#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "node/output_retention.h"
#include "node/task_logs.h"

namespace arbiter::node {

namespace {

// Debian's default, for tasks that do not set their own PATH.
constexpr const char* kDefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
// After the grace period the shim kills the task itself; the executor steps in only this much
// later (a shim that does not end).
constexpr DurationMs kBackstopMs = 10000;
constexpr DurationMs kHeartbeatEveryMs = 1000;
// The shim's own stop at the walltime, should its executor be away then.
constexpr int64_t kWalltimeBackstopMs = 60000;

bool ParseNumber(std::string_view s, uint64_t* out) {
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && end == s.data() + s.size() && !s.empty();
}

std::string ReadFile(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

bool WriteAtomically(const std::string& path, const std::string& content) {
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return false;
  const bool ok =
      ::write(fd, content.data(), content.size()) == static_cast<ssize_t>(content.size());
  ::close(fd);
  return ok && ::rename(tmp.c_str(), path.c_str()) == 0;
}

// A folder with exactly this mode (created, or corrected when it exists).
bool EnsureDir(const std::string& path, mode_t mode, std::string* why) {
  if (::mkdir(path.c_str(), mode) != 0 && errno != EEXIST) {
    *why = fmt::format("cannot create {}: {}", path, std::strerror(errno));
    return false;
  }
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    *why = fmt::format("{} is not a folder", path);
    return false;
  }
  if ((st.st_mode & 07777) != mode && ::chmod(path.c_str(), mode) != 0) {
    *why = fmt::format("cannot set the mode of {}: {}", path, std::strerror(errno));
    return false;
  }
  return true;
}

std::string DefaultShim() {
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? "arbiter-shim" : (self.parent_path() / "arbiter-shim").string();
}

// The supplementary groups of a user of this machine.
std::vector<int64_t> GroupsOf(const std::string& name, gid_t gid) {
  int n = 64;
  std::vector<gid_t> groups(static_cast<size_t>(n));
  if (getgrouplist(name.c_str(), gid, groups.data(), &n) < 0) {
    groups.resize(static_cast<size_t>(n));
    if (getgrouplist(name.c_str(), gid, groups.data(), &n) < 0) return {static_cast<int64_t>(gid)};
  }
  return {groups.begin(), groups.begin() + n};
}

// The container of a task (its name in the node's podman).
std::string ContainerName(uint64_t job, int32_t task) {
  return fmt::format("arbiter-task-{}-{}", job, task);
}

// Whether a tenant's name from an assignment may name a folder: the configuration's tenant names
// ([a-z0-9][a-z0-9-]*), so never "..", "/" or "".
bool IsFolderSafeTenant(const std::string& tenant) {
  if (tenant.empty() || tenant.size() > 63 || tenant[0] == '-') return false;
  return std::all_of(tenant.begin(), tenant.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
  });
}

// Processes whose parent is this one and that are not shims we know: what a killed shim's task
// left (this process is their subreaper).
void KillStrays(const std::set<pid_t>& shims) {
  DIR* d = opendir("/proc");
  if (d == nullptr) return;
  const pid_t self = getpid();
  while (dirent* e = readdir(d)) {
    uint64_t pid = 0;
    if (!ParseNumber(e->d_name, &pid)) continue;
    const std::string stat = ReadFile(fmt::format("/proc/{}/stat", pid));
    const size_t paren = stat.rfind(')');
    if (paren == std::string::npos) continue;
    std::istringstream rest(stat.substr(paren + 1));
    std::string state;
    long ppid = 0;
    if (rest >> state >> ppid && ppid == self && !shims.count(static_cast<pid_t>(pid))) {
      ::kill(static_cast<pid_t>(pid), SIGKILL);
    }
  }
  closedir(d);
}

}  // namespace

LocalExecutor::LocalExecutor(ExecutionBackend* backend, std::string node, std::string work_dir,
                             NowFn now, ExecutorOptions options)
    : backend_(backend),
      node_(std::move(node)),
      work_dir_(std::move(work_dir)),
      now_(std::move(now)),
      options_(std::move(options)),
      switch_users_(geteuid() == 0),
      shim_(options_.shim_path.empty() ? DefaultShim() : options_.shim_path),
      orphan_timeout_ms_(options_.orphan_timeout_ms) {
  std::error_code ec;
  work_dir_ = std::filesystem::absolute(work_dir_, ec).lexically_normal().string();
  if (work_dir_.size() > 1 && work_dir_.back() == '/') work_dir_.pop_back();
  heartbeat_ = work_dir_ + "/jobs/executor.heartbeat";
  // The layout: only the task's own folders are open to it (docs/security.md).
  std::string why;
  std::filesystem::create_directories(work_dir_, ec);
  bool ok = EnsureDir(work_dir_, 0711, &why) && EnsureDir(work_dir_ + "/jobs", 0700, &why);
  for (const char* d : {"work", "tmp", "checkpoints", "volumes"}) {
    ok = ok && EnsureDir(fmt::format("{}/{}", work_dir_, d), 0711, &why);
  }
  if (!ok) spdlog::error("node {}: {}", node_, why);
  if (options_.limits != nullptr) {
    // Where this node's task groups are, for an operator (or a test) cleaning up after it.
    std::string text;
    for (const std::string& b : options_.limits->bases()) text += b + "\n";
    WriteAtomically(work_dir_ + "/jobs/cgroups", text);
  }
  // Pipes to shims that died early must not kill this process.
  signal(SIGPIPE, SIG_IGN);
  // What a killed shim's task leaves comes to us, not to init: Reap and Stop find it.
  prctl(PR_SET_CHILD_SUBREAPER, 1);
  if (switch_users_) {
    // Every folder above the work folder must let the tasks' users through.
    for (std::filesystem::path p = work_dir_; p.has_relative_path(); p = p.parent_path()) {
      struct stat st {};
      if (::stat(p.c_str(), &st) == 0 && (st.st_mode & S_IXOTH) == 0) {
        spdlog::error(
            "node {}: {} is not searchable by other users (mode {:o}): tasks, which run as "
            "their own users, cannot reach their folders under {}",
            node_, p.string(), st.st_mode & 07777, work_dir_);
        break;
      }
    }
  }
  InstallTaskTools();
  if (options_.containers) {
    containers_ = std::make_unique<ContainerRuntime>(
        work_dir_, options_.container,
        [this](const std::string& image, const std::string& text) { PullProgress(image, text); });
  }
  Touch();
}

void LocalExecutor::InstallTaskTools() {
  // srun for batch scripts (exec/srun_main.cc): arbiter-srun from beside the shim, copied into a
  // folder of the work dir that every task's user may read, first on the tasks' PATH.
  const std::filesystem::path from = std::filesystem::path(shim_).parent_path() / "arbiter-srun";
  const std::string bin = work_dir_ + "/bin";
  std::string why;
  std::error_code ec;
  if (!std::filesystem::exists(from, ec)) {
    spdlog::warn("node {}: {} is missing: batch scripts that call srun will fail", node_,
                 from.string());
    return;
  }
  if (!EnsureDir(bin, 0755, &why)) {
    spdlog::error("node {}: {}", node_, why);
    return;
  }
  // The same program is scontrol too (`scontrol show hostnames`), by the name it is run as.
  for (const char* tool : {"srun", "scontrol"}) {
    const std::string to = bin + "/" + tool;
    const std::string tmp = to + ".new";
    std::filesystem::copy_file(from, tmp, std::filesystem::copy_options::overwrite_existing, ec);
    if (ec || ::chmod(tmp.c_str(), 0755) != 0 || ::rename(tmp.c_str(), to.c_str()) != 0) {
      spdlog::error("node {}: cannot install {} in {}: {}", node_, tool, bin,
                    ec ? ec.message() : std::strerror(errno));
      return;
    }
  }
  tools_dir_ = bin;
}

LocalExecutor::~LocalExecutor() {
  Stop(false);
  containers_.reset();  // its pull thread calls back into this executor: gone first
}

std::string LocalExecutor::StateDir(uint64_t job) const {
  return fmt::format("{}/jobs/{}", work_dir_, job);
}

std::string LocalExecutor::PidFile(uint64_t job, int32_t task) const {
  return fmt::format("{}/task-{}.pid", StateDir(job), task);
}

std::string LocalExecutor::ExitFile(uint64_t job, int32_t task) const {
  return fmt::format("{}/task-{}.exit", StateDir(job), task);
}

std::string LocalExecutor::Describe() const {
  const std::string containers =
      containers_ ? "; container images run through " + containers_->Describe() : "";
  if (switch_users_) {
    return "tasks run as the users their tenants and users map to (default uid " +
           std::to_string(options_.default_uid) + "), never as root unless a tenant allows it" +
           containers;
  }
  const uid_t uid = geteuid();
  const passwd* pw = getpwuid(uid);
  return fmt::format(
      "UNCONFINED: this process runs as {} (uid {}), not root, and cannot switch users: every "
      "task runs as uid {} and can read and change everything this user can{}",
      pw != nullptr ? pw->pw_name : "?", uid, uid, containers);
}

void LocalExecutor::Recover() {
  RecoverTasks();
  if (containers_ == nullptr) return;
  // The containers of tasks that are not running any more (their shims were killed with their
  // podman): a node's leftovers, removed as its tasks' groups are.
  std::set<std::string> keep;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [key, p] : procs_) keep.insert(ContainerName(key.first, key.second));
  }
  containers_->RemoveLeftovers("arbiter-task-", keep);
}

void LocalExecutor::RecoverTasks() {
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
      exec::PidRecord r;
      const bool readable = exec::DecodePidRecord(ReadFile(file.path().string()), &r);
      exec::ExitRecord exit;
      const bool exited = exec::DecodeExitRecord(ReadFile(ExitFile(job, task)), &exit);
      if (readable && r.has_attempt && !exited && exec::PidRecordAlive(r)) {
        Proc p;
        p.pid = static_cast<pid_t>(r.pid);
        p.attempt = r.attempt;
        p.adopted = true;
        p.record = r;
        std::lock_guard<std::mutex> lock(mu_);
        procs_[{job, task}] = p;
        spdlog::info("job {} task {} (attempt {}): adopted its running shim, pid {}", job, task,
                     r.attempt, r.pid);
        continue;
      }
      if (options_.limits != nullptr) options_.limits->Release(job, task);
      std::filesystem::remove(file.path(), ec);
      std::filesystem::remove(ExitFile(job, task), ec);
      if (!readable || !r.has_attempt) continue;
      if (exited) {
        spdlog::info("job {} task {} (attempt {}) exited with {} while this node was away", job,
                     task, r.attempt, exit.code);
        backend_->ReportTaskExited(job, task, r.attempt, exit.code, exit.timed_out);
      } else {
        spdlog::warn("job {} task {} (attempt {}): its shim is gone without an exit record; lost",
                     job, task, r.attempt);
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
  std::set<pid_t> shims;
  for (auto& [key, p] : procs_) {
    if (p.pid <= 0) continue;
    shims.insert(p.pid);
    if (!p.adopted || exec::PidRecordAlive(p.record)) ::kill(p.pid, SIGKILL);
    if (options_.limits != nullptr) options_.limits->Release(key.first, key.second);
    if (!p.adopted) waitpid(p.pid, nullptr, 0);
    std::error_code ec;
    std::filesystem::remove(PidFile(key.first, key.second), ec);
    std::filesystem::remove(ExitFile(key.first, key.second), ec);
    // A container outlives its killed shim (its monitor is not the shim's child): removed too.
    if (containers_ != nullptr && (p.container || p.adopted)) {
      containers_->Remove(ContainerName(key.first, key.second));
    }
    backend_->ReportTaskLost(key.first, key.second, p.attempt);
  }
  KillStrays(shims);
  std::lock_guard<std::mutex> lock(mu_);
  procs_.clear();
}

std::set<int32_t> LocalExecutor::BusyGpus() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::set<int32_t> out;
  for (const auto& [key, p] : procs_) out.insert(p.gpus.begin(), p.gpus.end());
  return out;
}

uint64_t LocalExecutor::RunningAttempt(uint64_t job, int32_t task) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = procs_.find({job, task});
  return it == procs_.end() ? 0 : it->second.attempt;
}

size_t LocalExecutor::running() const {
  std::lock_guard<std::mutex> lock(mu_);
  return procs_.size();
}

void LocalExecutor::Touch() {
  const TimeMs now = now_();
  if (now - touched_ < kHeartbeatEveryMs) return;
  touched_ = now;
  const int fd = ::open(heartbeat_.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
  if (fd >= 0) {
    ::futimens(fd, nullptr);
    ::close(fd);
  }
}

void LocalExecutor::Terminate(Proc& p, DurationMs grace, bool timed_out) {
  if (p.kill_at != 0) return;
  p.timed_out = p.timed_out || timed_out;
  ::kill(p.pid, timed_out ? SIGUSR1 : SIGTERM);  // the shim stops the whole task
  p.kill_at = now_() + grace + kBackstopMs;
}

bool LocalExecutor::ResolveIdentity(const TaskAssignment& a, Identity* id, std::string* why) const {
  const RunAs& r = a.run_as;
  if (!switch_users_) {
    const passwd* pw = getpwuid(geteuid());
    id->name = pw != nullptr ? pw->pw_name : a.spec.user;
    return true;  // every task runs as this process's user (Describe says so)
  }
  const passwd* pw = nullptr;
  if (!r.user.empty()) {
    pw = getpwnam(r.user.c_str());
    if (pw == nullptr) {
      *why = fmt::format("it runs as user {}, who does not exist on node {}", r.user, node_);
      return false;
    }
    id->uid = pw->pw_uid;
  } else if (r.uid >= 0) {
    id->uid = r.uid;
    pw = getpwuid(static_cast<uid_t>(r.uid));
  } else {
    id->uid = options_.default_uid;
    id->gid = options_.default_gid;
  }
  if (id->gid < 0) id->gid = r.gid >= 0 ? r.gid : pw != nullptr ? pw->pw_gid : id->uid;
  if (pw != nullptr) {
    id->groups = GroupsOf(pw->pw_name, static_cast<gid_t>(id->gid));
    id->name = pw->pw_name;
  } else {
    id->groups = {id->gid};
    id->name = a.spec.user.empty() ? fmt::format("uid{}", id->uid) : a.spec.user;
  }
  if ((id->uid == 0 || id->gid == 0) && !r.root_allowed) {
    *why = "it would run as root (uid or gid 0), which its tenant is not allowed";
    return false;
  }
  return true;
}

std::string LocalExecutor::VolumeFolder(const std::string& tenant,
                                        const std::string& volume) const {
  return fmt::format("{}/volumes/{}/{}", work_dir_, tenant, volume);
}

bool LocalExecutor::PrepareVolumes(const TaskAssignment& a, const Identity& id,
                                   std::string* why) const {
  const std::string& tenant = a.spec.tenant;
  for (const Mount& m : a.spec.mounts) {
    if (m.volume.empty()) continue;
    if (!IsFolderSafeTenant(tenant) || !IsValidVolumeName(m.volume)) {
      *why = fmt::format("volume {} of tenant '{}': not a volume this node can keep", m.volume,
                         tenant);
      return false;
    }
    if (!a.spec.container_image.empty()) {
      if (containers_ == nullptr) continue;  // the container fails to start, saying why
      // The container's user (ContainerCommand): the task's, else this process's.
      const int64_t uid = id.uid >= 0 ? id.uid : static_cast<int64_t>(geteuid());
      const int64_t gid = id.uid >= 0 ? id.gid : static_cast<int64_t>(getegid());
      if (!containers_->EnsureVolume(VolumeName(tenant, m.volume), tenant, m.volume, uid, gid,
                                     why)) {
        return false;
      }
      continue;
    }
    // A host process's volume: volumes/<tenant>/<volume>, 0700, the task's user's; the tenant's
    // folder (0711, ours) can be crossed, not listed.
    const std::string folder = VolumeFolder(tenant, m.volume);
    if (!EnsureDir(fmt::format("{}/volumes/{}", work_dir_, tenant), 0711, why) ||
        !EnsureDir(folder, 0700, why)) {
      return false;
    }
    if (id.uid >= 0 &&
        ::chown(folder.c_str(), static_cast<uid_t>(id.uid), static_cast<gid_t>(id.gid)) != 0) {
      *why = fmt::format("cannot give {} to uid {}: {}", folder, id.uid, std::strerror(errno));
      return false;
    }
  }
  return true;
}

bool LocalExecutor::PrepareFolders(uint64_t job, const Identity& id, std::string* why) const {
  if (!EnsureDir(StateDir(job), 0700, why)) return false;
  for (const char* d : {"work", "tmp", "checkpoints"}) {
    const std::string path = fmt::format("{}/{}/{}", work_dir_, d, job);
    if (!EnsureDir(path, 0700, why)) return false;
    if (id.uid >= 0 &&
        ::chown(path.c_str(), static_cast<uid_t>(id.uid), static_cast<gid_t>(id.gid)) != 0) {
      *why = fmt::format("cannot give {} to uid {}: {}", path, id.uid, std::strerror(errno));
      return false;
    }
  }
  return true;
}

std::vector<std::string> LocalExecutor::Environment(const TaskAssignment& a,
                                                    const Identity& id) const {
  const std::string gpus = fmt::format("{}", fmt::join(a.gpus, ","));
  std::map<std::string, std::string> env;
  env["PATH"] = kDefaultPath;
  // Reserved names are refused at submission (CheckSubmittedEnv); a job stored before that rule
  // may still carry one, and the executor's value wins.
  for (const auto& [k, v] : a.spec.env) {
    if (!IsReservedEnvName(k)) env[k] = v;
  }
  for (const auto& [k, v] : a.spec.secret_env) {
    if (!IsReservedEnvName(k)) env[k] = v;
  }
  // A job's own PATH keeps Arbiter's tools (srun) first, as Slurm's nodes have theirs.
  if (env["PATH"].empty()) env["PATH"] = kDefaultPath;
  if (!tools_dir_.empty() && env["PATH"].rfind(tools_dir_ + ":", 0) != 0) {
    env["PATH"] = tools_dir_ + ":" + env["PATH"];
  }
  const std::string home = fmt::format("{}/work/{}", work_dir_, a.job);
  env["HOME"] = home;
  env["USER"] = id.name;
  env["LOGNAME"] = id.name;
  env["TMPDIR"] = fmt::format("{}/tmp/{}", work_dir_, a.job);
  env["CUDA_VISIBLE_DEVICES"] = gpus;
  env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID";  // NVML's order, which the indices are in
  env["NVIDIA_VISIBLE_DEVICES"] = gpus.empty() ? "void" : gpus;
  env["ARBITER_JOB_ID"] = std::to_string(a.job);
  env["ARBITER_TASK_INDEX"] = std::to_string(a.task);
  env["ARBITER_NODE_NAME"] = node_;
  env["ARBITER_QUEUE"] = a.spec.queue;  // the queue it runs in (a default or alias resolved)
  env["ARBITER_RESTART_COUNT"] = std::to_string(a.restarts);  // retries and preemptions
  env["ARBITER_CHECKPOINT_DIR"] = fmt::format("{}/checkpoints/{}", work_dir_, a.job);
  env["WORLD_SIZE"] = std::to_string(a.spec.tasks);
  env["RANK"] = std::to_string(a.task);
  env["NODE_RANK"] = std::to_string(a.task);
  env["LOCAL_RANK"] = "0";
  // One address for every rank: the one the server gives for the first task's node.
  env["MASTER_ADDR"] = !a.master_addr.empty() ? a.master_addr : a.master_node;
  // 20000-25999: below the step port's range (srun) and the kernel's ephemeral ports.
  env["MASTER_PORT"] = std::to_string(20000 + a.job % 6000);
  // The job's nodes, each once, in task order (the batch wrapper's SLURM_JOB_NODELIST).
  std::vector<std::string> nodes;
  for (const std::string& n : a.nodes) {
    if (std::find(nodes.begin(), nodes.end(), n) == nodes.end()) nodes.push_back(n);
  }
  env["ARBITER_NODES"] = nodes.empty() ? node_ : fmt::format("{}", fmt::join(nodes, ","));
  if (!a.step_key.empty()) env["ARBITER_STEP_KEY"] = a.step_key;
  // Its volumes: where the container has them, or their folders on the node.
  for (const Mount& m : a.spec.mounts) {
    if (m.volume.empty()) continue;
    env[VolumeEnvName(m.volume)] =
        a.spec.container_image.empty() ? VolumeFolder(a.spec.tenant, m.volume) : m.target;
  }
  if (a.spec.service) {  // a service's replica: the port it serves on (docs/services.md)
    env[std::string(kServicePortEnvName)] = std::to_string(a.spec.service->port);
    env["ARBITER_SERVICE"] = a.spec.service->name;
    env["ARBITER_SERVICE_REVISION"] = std::to_string(a.spec.service->revision);
  }
  if (a.spec.array.id !=
      0) {  // a job array's element (the wrapper of a batch script: SLURM_ARRAY_*)
    env["ARBITER_ARRAY_JOB_ID"] = std::to_string(a.spec.array.id);
    env["ARBITER_ARRAY_INDEX"] = std::to_string(a.spec.array.index);
    env["ARBITER_ARRAY_COUNT"] = std::to_string(a.spec.array.size);
    env["ARBITER_ARRAY_MIN"] = std::to_string(a.array_bounds.min);
    env["ARBITER_ARRAY_MAX"] = std::to_string(a.array_bounds.max);
    env["ARBITER_ARRAY_STEP"] = std::to_string(a.array_bounds.step);
  }
  std::vector<std::string> out;
  out.reserve(env.size());
  for (const auto& [k, v] : env) out.push_back(fmt::format("{}={}", k, v));
  return out;
}

void LocalExecutor::FailToStart(const TaskAssignment& a, const std::string& why,
                                const std::string& reason, int32_t exit_code) {
  spdlog::error("job {} task {}: not started: {}", a.job, a.task, why);
  std::string ignored;
  if (EnsureDir(StateDir(a.job), 0700, &ignored)) {
    // As the run's own stderr would have said it: in its stderr and its combined log.
    const TaskLogRef ref{work_dir_, a.job, a.task};
    exec::AppendRunStart(TaskRunIndexPath(ref), a.attempt, TaskLogPath(ref, LogStream::kStdout),
                         TaskLogPath(ref, LogStream::kStderr),
                         TaskLogPath(ref, LogStream::kCombined));
    const std::string line =
        fmt::format("arbiter: the task was not started on node {}: {}\n", node_, why);
    for (LogStream s : {LogStream::kStderr, LogStream::kCombined}) {
      std::ofstream(TaskLogPath(ref, s), std::ios::app) << line;
    }
  }
  backend_->ReportTaskStarted(a.job, a.task, a.attempt);
  if (reason.empty()) {
    backend_->ReportTaskExited(a.job, a.task, a.attempt, exit_code, false);
  } else {
    backend_->ReportTaskFailed(a.job, a.task, a.attempt, exit_code, reason);
  }
}

void LocalExecutor::Launch(const TaskAssignment& a, const std::string& digest) {
  Identity id;
  std::string why;
  if (!ResolveIdentity(a, &id, &why) || !PrepareFolders(a.job, id, &why) ||
      !PrepareVolumes(a, id, &why)) {
    return FailToStart(a, why);
  }
  exec::ShimSpec s;
  s.job = a.job;
  s.task = a.task;
  s.attempt = a.attempt;
  s.argv = a.spec.command;
  s.env = Environment(a, id);
  s.cwd = a.spec.workdir.empty() ? fmt::format("{}/work/{}", work_dir_, a.job) : a.spec.workdir;
  s.uid = id.uid;
  s.gid = id.gid;
  s.groups = id.groups;
  const TaskLogRef logs{work_dir_, a.job, a.task};
  s.stdout_path = TaskLogPath(logs, LogStream::kStdout);
  s.stderr_path = TaskLogPath(logs, LogStream::kStderr);
  s.log_path = TaskLogPath(logs, LogStream::kCombined);
  s.runs_path = TaskRunIndexPath(logs);
  s.grace_ms = a.grace_ms;
  if (a.spec.walltime_seconds > 0)
    s.walltime_ms = a.spec.walltime_seconds * 1000 + kWalltimeBackstopMs;
  s.orphan_timeout_ms = orphan_timeout_ms_;
  s.heartbeat_path = heartbeat_;
  s.pid_path = PidFile(a.job, a.task);
  s.exit_path = ExitFile(a.job, a.task);
  std::error_code ec;
  std::filesystem::remove(s.exit_path, ec);
  if (!a.spec.container_image.empty() && !ContainerCommand(a, id, &s, &why)) {
    return FailToStart(a, why);
  }
  if (options_.limits != nullptr) {
    exec::TaskLimitSpec limits;
    limits.cpu_milli = a.spec.resources.cpu_milli;
    limits.memory_mib = a.spec.resources.memory_mib;
    limits.pids_max = options_.max_task_processes;
    for (const auto& [index, device] : options_.gpu_devices) {
      if (std::find(a.gpus.begin(), a.gpus.end(), index) == a.gpus.end()) {
        limits.deny_devices.push_back(device);
      }
    }
    exec::TaskGroups g = options_.limits->Prepare(a.job, a.task, limits);
    for (const std::string& w : g.warnings) spdlog::warn("job {} task {}: {}", a.job, a.task, w);
    s.cgroup_procs = g.procs_files;
    s.cgroup_dirs = g.dirs;
    if (!g.pids_limited && id.uid >= 0) s.rlimit_nproc = options_.max_task_processes;
  } else if (id.uid >= 0) {
    s.rlimit_nproc = options_.max_task_processes;  // per uid: the fallback without cgroups
  }
  const std::string spec = exec::EncodeShimSpec(s);
  // Everything the child needs is built before fork: between fork and exec it only makes calls.
  std::string arg0 = "arbiter-shim";
  std::string arg1 = "3";
  char* argv[] = {arg0.data(), arg1.data(), nullptr};
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0)
    return FailToStart(a, std::string("pipe: ") + std::strerror(errno));
  const pid_t pid = fork();
  if (pid == 0) {
    if (fds[0] == 3) {
      fcntl(3, F_SETFD, 0);
    } else {
      dup2(fds[0], 3);  // the copy is not close-on-exec
    }
    syscall(SYS_close_range, 4U, ~0U, 0U);
    execv(shim_.c_str(), argv);
    _exit(127);
  }
  ::close(fds[0]);
  if (pid < 0) {
    ::close(fds[1]);
    return FailToStart(a, std::string("fork: ") + std::strerror(errno));
  }
  size_t sent = 0;
  while (sent < spec.size()) {
    const ssize_t n = ::write(fds[1], spec.data() + sent, spec.size() - sent);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // the shim is gone: Reap finds out
    sent += static_cast<size_t>(n);
  }
  ::close(fds[1]);
  WriteAtomically(s.pid_path, fmt::format("{} {} {} {}\n", pid, a.attempt,
                                          exec::ProcessStartTime(pid), exec::BootId()));
  Proc p;
  p.pid = pid;
  p.attempt = a.attempt;
  p.gpus = a.gpus;
  p.grace_ms = a.grace_ms;
  p.container = !a.spec.container_image.empty();
  {
    std::lock_guard<std::mutex> lock(mu_);
    procs_[{a.job, a.task}] = p;
  }
  backend_->ReportTaskStarted(a.job, a.task, a.attempt);
  if (!a.spec.container_image.empty()) {
    backend_->ReportTaskNote(
        a.job, a.task, a.attempt,
        fmt::format("running {} ({}) in container {}", a.spec.container_image,
                    digest.empty() ? "digest unknown" : digest, ContainerName(a.job, a.task)),
        digest);
  }
  spdlog::info(
      "job {} task {} started (shim pid {}) on GPUs [{}] as {} (uid {}){}", a.job, a.task, pid,
      fmt::join(a.gpus, ","), id.name, id.uid >= 0 ? id.uid : geteuid(),
      a.spec.container_image.empty() ? "" : " in a container of " + a.spec.container_image);
}

void LocalExecutor::Tick() {
  const TimeMs now = now_();
  Touch();
  const std::vector<TaskAssignment> assignments = backend_->AssignmentsFor(node_);
  std::set<Key> wanted;                 // tasks assigned here, of the attempt that runs
  std::set<std::string> failed_images;  // pulls that failed, told to every task waiting
  for (const TaskAssignment& a : assignments) {
    const Key key{a.job, a.task};
    auto it = procs_.find(key);
    if (it == procs_.end()) {
      if (a.started) {
        // The control plane saw it start, but no shim of it is here (Recover adopted every one
        // that runs): its processes are gone without an exit status.
        backend_->ReportTaskLost(a.job, a.task, a.attempt);
      } else if (a.run) {
        if (stop_) continue;  // stopping: nothing new starts (it starts after the restart)
        wanted.insert(key);
        if (a.spec.container_image.empty()) {
          Launch(a);
        } else {
          StartContainerTask(a, &failed_images);
        }
      } else {
        backend_->ReportTaskExited(a.job, a.task, a.attempt, 143, false);  // stopped before start
      }
      continue;
    }
    Proc& p = it->second;
    if (p.attempt != a.attempt) continue;  // an older run still ends: stopped below
    wanted.insert(key);
    if (p.gpus.empty() && !a.gpus.empty()) {
      std::lock_guard<std::mutex> lock(mu_);
      p.gpus = a.gpus;  // adopted: its GPUs are the assignment's
    }
    p.deadline = a.deadline;
    p.grace_ms = a.grace_ms;
    if (!a.run) Terminate(p, a.grace_ms, false);
    if (a.run && p.deadline > 0 && now >= p.deadline && p.kill_at == 0) {
      Terminate(p, a.grace_ms, true);
    }
  }
  // Until the backend knows the node's work (an agent before its first answer), nothing is
  // stopped for not being assigned: adopted tasks wait for it.
  if (backend_->AssignmentsKnown()) {
    for (auto& [key, p] : procs_) {
      if (wanted.count(key) || p.kill_at != 0) continue;
      spdlog::warn("job {} task {} (attempt {}) is no longer assigned to {}: stopping it",
                   key.first, key.second, p.attempt, node_);
      Terminate(p, p.grace_ms, false);
    }
  }
  // Tasks that waited for a pull and are no longer assigned (or are running now).
  {
    std::lock_guard<std::mutex> lock(pull_mu_);
    std::erase_if(waiting_, [&](const auto& w) {
      return !wanted.count(w.first) || procs_.count(w.first) != 0;
    });
  }
  for (const std::string& image : failed_images) containers_->Forget(image);
  SyncImages(now);
  WatchCheckpoints(now);
  Reap(now);
  SweepOutput(now);
}

void LocalExecutor::SweepOutput(TimeMs now) {
  if (options_.output_retention_ms <= 0 || now < next_output_sweep_) return;
  const TimeMs wall = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();  // the files' times are the wall clock's
  auto done = node::ApplyOutputRetention(work_dir_, wall - options_.output_retention_ms,
                                         [this](uint64_t job, const std::function<void()>& remove) {
                                           for (const auto& [key, p] : procs_) {
                                             if (key.first == job)
                                               return;  // a task of it runs here again
                                           }
                                           {
                                             std::lock_guard<std::mutex> lock(pull_mu_);
                                             for (const auto& [key, w] : waiting_) {
                                               if (key.first == job)
                                                 return;  // one waits for its image
                                             }
                                           }
                                           remove();
                                         });
  if (!done.ok()) {
    spdlog::error("node {}: {}", node_, done.status().ToString());
    next_output_sweep_ = now + 3'600'000;
    return;
  }
  if (done->jobs > 0) {
    spdlog::info("node {}: archived and removed the output of {} jobs ({} files, {} bytes)", node_,
                 done->jobs, done->files, done->bytes);
  }
  next_output_sweep_ = now + (done->jobs > 0 ? 60'000 : 3'600'000);  // more may be left
}

void LocalExecutor::StartContainerTask(const TaskAssignment& a,
                                       std::set<std::string>* failed_images) {
  const std::string& image = a.spec.container_image;
  if (containers_ == nullptr) {
    return FailToStart(a, fmt::format("node {} runs no containers (image {})", node_, image),
                       fmt::format("ContainerFailed: node {} runs no containers", node_), 125);
  }
  if (containers_ok_ < 0) {
    containers_ok_ = containers_->Available(&containers_why_) ? 1 : 0;
    if (containers_ok_ == 0) spdlog::error("node {}: {}", node_, containers_why_);
  }
  if (containers_ok_ == 0) {
    return FailToStart(a, containers_why_, "ContainerFailed: " + containers_why_, 125);
  }
  const Key key{a.job, a.task};
  const ImageState st = containers_->Ensure({image, a.image_pull_auth, a.image_insecure});
  if (st.kind == ImageState::Kind::kPulling) {
    std::lock_guard<std::mutex> lock(pull_mu_);
    waiting_[key] = {a.attempt, image};
    return;
  }
  {
    std::lock_guard<std::mutex> lock(pull_mu_);
    waiting_.erase(key);
  }
  if (st.kind == ImageState::Kind::kFailed) {
    failed_images->insert(image);
    return FailToStart(a, st.message, st.message, 125);
  }
  Launch(a, st.digest);
}

void LocalExecutor::PullProgress(const std::string& image, const std::string& text) {
  std::vector<std::pair<Key, uint64_t>> tasks;
  {
    std::lock_guard<std::mutex> lock(pull_mu_);
    for (const auto& [key, w] : waiting_) {
      if (w.second == image) tasks.push_back({key, w.first});
    }
  }
  spdlog::info("node {}: {}", node_, text);
  for (const auto& [key, attempt] : tasks) {
    backend_->ReportTaskNote(key.first, key.second, attempt, text, "");
  }
}

void LocalExecutor::SyncImages(TimeMs now) {
  if (containers_ == nullptr) return;
  uint64_t version = 0;
  std::vector<NodeImage> images = containers_->Images(&version);
  // When they change, and every 30 s (a node the control plane registered again starts empty).
  if (version != images_version_ || now - images_reported_ >= 30000) {
    images_version_ = version;
    images_reported_ = now;
    if (version > 0) backend_->ReportImages(node_, images);
  }
  // Pulls ahead of a task (a queue head reserved here), asked at most every second.
  if (now - images_asked_ < 1000) return;
  images_asked_ = now;
  for (const ImagePull& p : backend_->ImagesToPull(node_)) {
    const bool present = std::any_of(images.begin(), images.end(),
                                     [&](const NodeImage& i) { return i.name == p.image; });
    if (!present) containers_->Ensure(p);
  }
}

bool LocalExecutor::ContainerCommand(const TaskAssignment& a, const Identity& id, exec::ShimSpec* s,
                                     std::string* why) const {
  TaskContainer c;
  c.name = ContainerName(a.job, a.task);
  c.image = a.spec.container_image;
  c.command = a.spec.command;
  c.env = s->env;
  // The task's folders at the same paths as on the host; its working folder is the image's
  // unless the job names one.
  c.cwd = a.spec.workdir.empty() ? fmt::format("{}/work/{}", work_dir_, a.job) : a.spec.workdir;
  for (const char* d : {"work", "tmp", "checkpoints"}) {
    c.mounts.push_back(fmt::format("{}/{}/{}", work_dir_, d, a.job));
  }
  for (const Mount& m : a.spec.mounts) {
    if (m.volume.empty()) {
      c.binds.push_back(m);
    } else {  // made by PrepareVolumes
      c.volumes.push_back({VolumeName(a.spec.tenant, m.volume), m.target, m.read_only});
    }
  }
  // Never the image's user (often root): the task's, or this process's when it cannot switch.
  c.uid = id.uid >= 0 ? id.uid : static_cast<int64_t>(geteuid());
  c.gid = id.uid >= 0 ? id.gid : static_cast<int64_t>(getegid());
  c.groups = id.groups;
  c.gpus = a.gpus;
  c.cpu_milli = a.spec.resources.cpu_milli;
  c.memory_mib = a.spec.resources.memory_mib;
  c.pids_max = options_.max_task_processes;
  // The environment file is the executor's, beside the task's logs (0600, the state folder 0700).
  const std::string env_file = fmt::format("{}/task-{}.env", StateDir(a.job), a.task);
  if (!containers_->RunCommand(c, env_file, &s->argv, &s->env, why)) return false;
  s->cleanup_argv = containers_->RemoveCommand(c.name);
  // A stop's SIGTERM reaches the container's processes from the shim itself, not through podman:
  // podman, finding its container already ended, would kill itself with the signal and report
  // 143 in place of the container's own exit code.
  s->stop_spares_main = true;
  // podman runs as this process (it switches to the task's user inside the container), in the
  // task's groups, from a folder it can enter.
  s->uid = -1;
  s->gid = -1;
  s->groups.clear();
  s->cwd = work_dir_;
  return true;
}

namespace {

// The newest modification time of `dir` and the entries directly in it, in ns; -1 when it
// cannot be read.
int64_t NewestMtimeNs(const std::string& dir) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) return -1;
  auto ns = [](const struct stat& s) {
    return static_cast<int64_t>(s.st_mtim.tv_sec) * 1'000'000'000 + s.st_mtim.tv_nsec;
  };
  int64_t newest = ns(st);
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return newest;
  for (int i = 0; i < 10000; ++i) {  // bounded: a checkpoint folder holds a few files
    const dirent* e = ::readdir(d);
    if (e == nullptr) break;
    if (std::strcmp(e->d_name, ".") == 0 || std::strcmp(e->d_name, "..") == 0) continue;
    struct stat fs {};
    if (::fstatat(::dirfd(d), e->d_name, &fs, AT_SYMLINK_NOFOLLOW) == 0) {
      newest = std::max(newest, ns(fs));
    }
  }
  ::closedir(d);
  return newest;
}

}  // namespace

void LocalExecutor::WatchCheckpoints(TimeMs now) {
  for (auto& [key, p] : procs_) {
    if (p.kill_at != 0 || now - p.checkpoint_checked < 1000) continue;
    p.checkpoint_checked = now;
    const int64_t mtime = NewestMtimeNs(fmt::format("{}/checkpoints/{}", work_dir_, key.first));
    if (p.checkpoint_mtime_ns < 0) {
      p.checkpoint_mtime_ns = std::max<int64_t>(0, mtime);  // the run before's, if any
      continue;
    }
    if (mtime > p.checkpoint_mtime_ns) {
      p.checkpoint_mtime_ns = mtime;
      backend_->ReportTaskCheckpointed(key.first, key.second, p.attempt);
    }
  }
}

void LocalExecutor::Reap(TimeMs now) {
  std::map<pid_t, int> reaped;
  for (;;) {
    int status = 0;
    const pid_t r = waitpid(-1, &status, WNOHANG);
    if (r <= 0) break;
    reaped[r] = status;
  }
  bool backstop = false;
  for (auto it = procs_.begin(); it != procs_.end();) {
    Proc& p = it->second;
    if (p.kill_at != 0 && now >= p.kill_at) {
      // The shim did not end after the grace period and more: kill it and the task's groups.
      spdlog::warn("job {} task {}: its shim (pid {}) did not end; killing it", it->first.first,
                   it->first.second, p.pid);
      if (!p.adopted || exec::PidRecordAlive(p.record)) ::kill(p.pid, SIGKILL);
      if (options_.limits != nullptr) options_.limits->Release(it->first.first, it->first.second);
      if (containers_ != nullptr && (p.container || p.adopted)) {
        containers_->Remove(ContainerName(it->first.first, it->first.second));
      }
      p.kill_at = now + kBackstopMs;
      backstop = true;
    }
    int status = 0;
    bool done = false;
    if (p.adopted) {
      done = !exec::PidRecordAlive(p.record);
    } else if (auto r = reaped.find(p.pid); r != reaped.end()) {
      done = true;
      status = r->second;
    }
    if (!done) {
      ++it;
      continue;
    }
    const Key key = it->first;
    const Proc ended = p;
    {
      std::lock_guard<std::mutex> lock(mu_);
      it = procs_.erase(it);
    }
    Finish(key, ended, status);
  }
  if (backstop) {
    std::set<pid_t> shims;
    for (const auto& [key, p] : procs_) shims.insert(p.pid);
    KillStrays(shims);
  }
}

void LocalExecutor::Finish(const Key& key, const Proc& p, int shim_status) {
  const auto [job, task] = key;
  exec::ExitRecord rec;
  const bool recorded = exec::DecodeExitRecord(ReadFile(ExitFile(job, task)), &rec);
  if (options_.limits != nullptr) options_.limits->Release(job, task);
  std::error_code ec;
  std::filesystem::remove(PidFile(job, task), ec);
  std::filesystem::remove(ExitFile(job, task), ec);
  std::filesystem::remove(fmt::format("{}/task-{}.env", StateDir(job), task), ec);
  // A shim that wrote its record removed its container; one killed may have left it.
  if (!recorded && (p.container || p.adopted) && containers_ != nullptr) {
    containers_->Remove(ContainerName(job, task));
  }
  if (recorded) {
    if (rec.orphaned) {
      spdlog::warn("job {} task {} was stopped by its shim: this node's executor was away", job,
                   task);
    }
    spdlog::info("job {} task {} exited with {}", job, task, rec.code);
    backend_->ReportTaskExited(job, task, p.attempt, rec.code, rec.timed_out || p.timed_out);
  } else if (p.kill_at != 0) {
    // We were stopping it and had to kill its shim: the task is gone, killed.
    spdlog::warn("job {} task {}: killed with its shim", job, task);
    backend_->ReportTaskExited(job, task, p.attempt, 137, p.timed_out);
  } else {
    spdlog::error("job {} task {}: its shim ended ({}) without an exit record; lost", job, task,
                  WIFSIGNALED(shim_status) ? fmt::format("signal {}", WTERMSIG(shim_status))
                                           : fmt::format("status {}", WEXITSTATUS(shim_status)));
    backend_->ReportTaskLost(job, task, p.attempt);
  }
}

}  // namespace arbiter::node

#include "agent/cgroups.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

namespace arbiter::agent {

namespace {

constexpr long kCgroup2Magic = 0x63677270;  // CGROUP2_SUPER_MAGIC
constexpr int64_t kCpuPeriodUs = 100000;    // cpu.max period: 100 ms

std::string ReadFile(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// Writes `value` to a cgroup file; the error when the kernel refuses it.
bool WriteFile(const std::string& path, const std::string& value, std::string* error) {
  // O_CREAT only matters outside cgroupfs (tests): there the kernel makes every file.
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    *error = fmt::format("cannot open {}: {}", path, std::strerror(errno));
    return false;
  }
  const bool ok = ::write(fd, value.data(), value.size()) == static_cast<ssize_t>(value.size());
  if (!ok) *error = fmt::format("cannot write '{}' to {}: {}", value, path, std::strerror(errno));
  ::close(fd);
  return ok;
}

bool HasWord(const std::string& text, const std::string& word) {
  std::istringstream in(text);
  std::string w;
  while (in >> w) {
    if (w == word) return true;
  }
  return false;
}

}  // namespace

std::unique_ptr<CgroupLimits> CgroupLimits::Setup(const std::string& root, std::string* status) {
  struct statfs fs {};
  if (statfs(root.c_str(), &fs) != 0 || static_cast<long>(fs.f_type) != kCgroup2Magic) {
    *status = fmt::format(
        "unavailable: {} is not a cgroup v2 mount (cgroup v1 or a hybrid "
        "hierarchy); tasks run without CPU and memory limits",
        root);
    return nullptr;
  }
  // "0::/some/path" names this process's group in the unified hierarchy.
  std::string path;
  std::istringstream lines(ReadFile("/proc/self/cgroup"));
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("0::", 0) == 0) path = line.substr(3);
  }
  if (path.empty()) {
    *status = "unavailable: this process is in no cgroup v2 group; tasks run without limits";
    return nullptr;
  }
  std::string base = root + (path == "/" ? "" : path);
  // Already set up by an earlier run of the agent in this group.
  if (base.size() > 6 && base.ends_with("/agent")) base.resize(base.size() - 6);
  const std::string controllers = ReadFile(base + "/cgroup.controllers");
  if (!HasWord(controllers, "cpu") || !HasWord(controllers, "memory")) {
    *status = fmt::format(
        "unavailable: the cpu and memory controllers are not delegated to {} "
        "(it has: {}); tasks run without limits",
        base, controllers.empty() ? "none" : controllers.substr(0, 80));
    return nullptr;
  }
  if (::access(base.c_str(), W_OK) != 0 ||
      ::access((base + "/cgroup.subtree_control").c_str(), W_OK) != 0) {
    *status = fmt::format(
        "unavailable: {} is not writable by this user (delegate it to the "
        "agent); tasks run without limits",
        base);
    return nullptr;
  }
  // A group with processes cannot give controllers to children: the agent moves into a leaf.
  std::string error;
  if (::mkdir((base + "/agent").c_str(), 0755) != 0 && errno != EEXIST) {
    *status = fmt::format("unavailable: cannot create {}/agent: {}", base, std::strerror(errno));
    return nullptr;
  }
  if (!WriteFile(base + "/agent/cgroup.procs", std::to_string(getpid()), &error) ||
      !WriteFile(base + "/cgroup.subtree_control", "+cpu +memory", &error)) {
    *status = fmt::format("unavailable: {}; tasks run without limits", error);
    return nullptr;
  }
  *status = fmt::format("v2: {} (cpu.max and memory.max per task)", base);
  return std::make_unique<CgroupLimits>(base);
}

std::string CgroupLimits::GroupPath(uint64_t job, int32_t task) const {
  return fmt::format("{}/task-{}-{}", base_, job, task);
}

std::string CgroupLimits::Prepare(uint64_t job, int32_t task, int64_t cpu_milli,
                                  int64_t memory_mib) {
  const std::string dir = GroupPath(job, task);
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    spdlog::warn("job {} task {}: cannot create {}: {}; it runs without limits", job, task, dir,
                 std::strerror(errno));
    return "";
  }
  std::string error;
  // cpu.max = "QUOTA PERIOD": QUOTA = cpu_milli / 1000 x PERIOD microseconds of CPU per period.
  if (cpu_milli > 0 &&
      !WriteFile(dir + "/cpu.max",
                 fmt::format("{} {}", cpu_milli * kCpuPeriodUs / 1000, kCpuPeriodUs), &error)) {
    spdlog::warn("job {} task {}: {}", job, task, error);
  }
  if (memory_mib > 0 &&
      !WriteFile(dir + "/memory.max", std::to_string(memory_mib * 1024 * 1024), &error)) {
    spdlog::warn("job {} task {}: {}", job, task, error);
  }
  return dir + "/cgroup.procs";
}

void CgroupLimits::Release(uint64_t job, int32_t task) {
  const std::string dir = GroupPath(job, task);
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) return;
  std::string error;
  if (::access((dir + "/cgroup.kill").c_str(), F_OK) == 0) {
    (void)WriteFile(dir + "/cgroup.kill", "1", &error);
  }
  // The group empties once its killed processes are reaped by the kernel: retry briefly.
  for (int i = 0; i < 20; ++i) {
    if (::rmdir(dir.c_str()) == 0 || errno == ENOENT) return;
    if (errno != EBUSY) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  spdlog::warn("job {} task {}: cannot remove {}: {}", job, task, dir, std::strerror(errno));
}

}  // namespace arbiter::agent

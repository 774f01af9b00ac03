#include "exec/task_cgroups.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <thread>

#include "exec/device_filter.h"

namespace arbiter::exec {

namespace {

constexpr int64_t kCpuPeriodUs = 100000;  // 100 ms
constexpr const char* kV1Controllers[] = {"pids", "memory", "cpu", "devices", "freezer"};

std::string ReadFile(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

bool WriteFile(const std::string& path, const std::string& value, std::string* error) {
  // O_CREAT matters outside cgroupfs only (tests of a fake tree): there the kernel makes them.
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    if (error != nullptr) *error = "cannot open " + path + ": " + std::strerror(errno);
    return false;
  }
  const bool ok = ::write(fd, value.data(), value.size()) == static_cast<ssize_t>(value.size());
  if (!ok && error != nullptr) {
    *error = "cannot write '" + value + "' to " + path + ": " + std::strerror(errno);
  }
  ::close(fd);
  return ok;
}

std::vector<std::string> Split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string item;
  std::istringstream in(s);
  while (std::getline(in, item, sep)) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

bool Has(const std::vector<std::string>& v, const std::string& x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

// mkdir -p, each level 0755.
bool MakeDirs(const std::string& path, std::string* error) {
  std::string at;
  for (const std::string& part : Split(path, '/')) {
    at += "/" + part;
    if (::mkdir(at.c_str(), 0755) != 0 && errno != EEXIST) {
      *error = "cannot create " + at + ": " + std::strerror(errno);
      return false;
    }
  }
  return true;
}

struct Mount {
  std::string point;
  std::string root;  // the mount's root inside its hierarchy
};

// The folder of this process's group: the mount point joined with its path below the mount root.
std::string GroupDir(const Mount& m, const std::string& path) {
  std::string rel = path;
  if (m.root != "/" && rel.rfind(m.root, 0) == 0) rel = rel.substr(m.root.size());
  if (rel == "/") rel.clear();
  return m.point + rel;
}

// Kills every member of the group at `dir` until it is empty (bounded), then removes it.
void EmptyAndRemove(const std::string& dir, bool freezer) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) return;
  if (::access((dir + "/cgroup.kill").c_str(), F_OK) == 0) {
    WriteFile(dir + "/cgroup.kill", "1", nullptr);
  }
  if (freezer) WriteFile(dir + "/freezer.state", "FROZEN", nullptr);
  for (int round = 0; round < 200; ++round) {
    std::istringstream procs(ReadFile(dir + "/cgroup.procs"));
    bool any = false;
    for (long pid = 0; procs >> pid;) {
      if (pid > 1) {
        ::kill(static_cast<pid_t>(pid), SIGKILL);
        any = true;
      }
    }
    if (freezer && round == 0) WriteFile(dir + "/freezer.state", "THAWED", nullptr);
    if (!any && ::rmdir(dir.c_str()) == 0) return;
    if (!any && errno != EBUSY) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ::rmdir(dir.c_str());
}

// The cgroup2 mount and the v1 mounts by controller, from /proc/self/mountinfo's text.
void ReadMounts(const std::string& mountinfo, std::optional<Mount>* v2,
                std::map<std::string, Mount>* v1) {
  std::istringstream mounts(mountinfo);
  for (std::string line; std::getline(mounts, line);) {
    const size_t dash = line.find(" - ");
    if (dash == std::string::npos) continue;
    const std::vector<std::string> left = Split(line.substr(0, dash), ' ');
    const std::vector<std::string> right = Split(line.substr(dash + 3), ' ');
    if (left.size() < 5 || right.size() < 3) continue;
    const Mount m{left[4], left[3]};
    if (right[0] == "cgroup2" && !*v2) *v2 = m;
    if (right[0] == "cgroup") {
      for (const std::string& opt : Split(right[2], ',')) {
        if (Has({std::begin(kV1Controllers), std::end(kV1Controllers)}, opt) && !v1->count(opt)) {
          (*v1)[opt] = m;
        }
      }
    }
  }
}

// This process's groups from /proc/self/cgroup's text: "0::/path" (v2), "N:ctrl[,ctrl]:/path"
// (v1).
void ReadOwnGroups(const std::string& text, std::string* v2_path,
                   std::map<std::string, std::string>* v1_path) {
  std::istringstream self(text);
  for (std::string line; std::getline(self, line);) {
    const size_t a = line.find(':');
    const size_t b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    const std::string ctrls = line.substr(a + 1, b - a - 1);
    const std::string path = line.substr(b + 1);
    if (line.rfind("0::", 0) == 0) *v2_path = path;
    for (const std::string& c : Split(ctrls, ',')) (*v1_path)[c] = path;
  }
}

}  // namespace

std::unique_ptr<TaskCgroups> TaskCgroups::Setup(const CgroupOptions& o, std::string* status) {
  // 1. The hierarchies mounted here: cgroup2, and v1 mounts with their controllers.
  std::optional<Mount> v2;
  std::map<std::string, Mount> v1;  // controller -> mount
  ReadMounts(ReadFile(o.mountinfo), &v2, &v1);
  // 2. This process's groups.
  std::string v2_path;
  std::map<std::string, std::string> v1_path;
  ReadOwnGroups(ReadFile(o.self_cgroup), &v2_path, &v1_path);
  auto out = std::unique_ptr<TaskCgroups>(new TaskCgroups());
  std::vector<std::string> notes;
  std::vector<std::string> missing;
  // 3. cgroup v2: tracking always; the controllers delegated to us.
  std::vector<std::string> v2_controllers;
  if (v2 && !v2_path.empty()) {
    std::string dir = GroupDir(*v2, v2_path);
    if (dir.size() > o.leaf.size() + 1 && dir.ends_with("/" + o.leaf)) {
      dir.resize(dir.size() - o.leaf.size() - 1);  // moved into the leaf by an earlier run
    }
    std::string error;
    if (::access(dir.c_str(), W_OK) != 0) {
      notes.push_back("v2: " + dir + " is not writable by this user");
    } else {
      std::vector<std::string> offered;
      std::istringstream words(ReadFile(dir + "/cgroup.controllers"));
      for (std::string w; words >> w;) offered.push_back(w);
      for (const char* c : {"cpu", "memory", "pids"}) {
        if (Has(offered, c)) v2_controllers.push_back(c);
      }
      bool ok = true;
      const bool is_root = dir == v2->point;
      std::string enable;
      for (const std::string& c : v2_controllers) enable += (enable.empty() ? "+" : " +") + c;
      if (!v2_controllers.empty() && !is_root) {
        // No internal processes: this process leaves the group whose children get controllers.
        ok = MakeDirs(dir + "/" + o.leaf, &error) &&
             WriteFile(dir + "/" + o.leaf + "/cgroup.procs", std::to_string(getpid()), &error);
      }
      const std::string base = dir + "/arbiter/" + o.scope;
      ok = ok && MakeDirs(base, &error);
      if (ok && !enable.empty()) {
        ok = WriteFile(dir + "/cgroup.subtree_control", enable, &error) &&
             WriteFile(dir + "/arbiter/cgroup.subtree_control", enable, &error) &&
             WriteFile(base + "/cgroup.subtree_control", enable, &error);
      }
      if (!ok) {
        notes.push_back("v2: " + error);
      } else {
        out->hierarchies_.push_back({"v2", base, v2_controllers});
        notes.push_back("v2 " + base + " (" +
                        (v2_controllers.empty() ? std::string("tracking") : "tracking, " + enable) +
                        ", devices by eBPF)");
      }
    }
  }
  // 4. v1 controllers for what v2 does not give.
  for (const char* c : kV1Controllers) {
    const std::string name = c;
    if ((name != "devices" && name != "freezer" && Has(v2_controllers, name)) || !v1.count(name)) {
      continue;
    }
    const std::string dir = GroupDir(v1[name], v1_path.count(name) ? v1_path[name] : "/");
    const std::string base = dir + "/arbiter/" + o.scope;
    std::string error;
    if (::access(dir.c_str(), W_OK) != 0 || !MakeDirs(base, &error)) {
      missing.push_back(name + " (v1 " + dir + " not writable)");
      continue;
    }
    out->hierarchies_.push_back({name, base, {}});
    notes.push_back("v1 " + name);
  }
  if (out->hierarchies_.empty()) {
    *status = "unavailable: " +
              (notes.empty() ? std::string("no cgroup hierarchy is mounted") : notes.front()) +
              "; tasks are tracked by their shim only, without CPU, memory or device limits";
    return nullptr;
  }
  std::string text;
  for (const std::string& n : notes) text += (text.empty() ? "" : "; ") + n;
  for (const std::string& m : missing) text += "; no " + m;
  *status = text;
  return out;
}

std::string TaskCgroups::TaskDir(const Hierarchy& h, uint64_t job, int32_t task) const {
  return h.base + "/task-" + std::to_string(job) + "-" + std::to_string(task);
}

bool TaskCgroups::limits_processes() const {
  for (const Hierarchy& h : hierarchies_) {
    if (h.kind == "pids" || (h.kind == "v2" && Has(h.controllers, "pids"))) return true;
  }
  return false;
}

bool TaskCgroups::isolates_devices() const {
  return !hierarchies_.empty();  // v1 devices.deny, or the v2 eBPF program
}

TaskGroups TaskCgroups::Prepare(uint64_t job, int32_t task, const TaskLimitSpec& spec) {
  TaskGroups g;
  bool cpu = false;
  bool memory = false;
  bool devices_v1 = false;
  for (const Hierarchy& h : hierarchies_) devices_v1 |= h.kind == "devices";
  for (const Hierarchy& h : hierarchies_) {
    const std::string dir = TaskDir(h, job, task);
    EmptyAndRemove(dir, h.kind == "freezer");
    if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
      g.warnings.push_back("cannot create " + dir + ": " + std::strerror(errno));
      continue;
    }
    std::string error;
    auto write = [&](const std::string& file, const std::string& value) {
      if (WriteFile(dir + "/" + file, value, &error)) return true;
      g.warnings.push_back(error);
      return false;
    };
    if (h.kind == "v2") {
      if (Has(h.controllers, "cpu") && spec.cpu_milli > 0) {
        cpu = write("cpu.max", std::to_string(spec.cpu_milli * kCpuPeriodUs / 1000) + " " +
                                   std::to_string(kCpuPeriodUs));
      }
      if (Has(h.controllers, "memory") && spec.memory_mib > 0) {
        memory = write("memory.max", std::to_string(spec.memory_mib * 1024 * 1024));
      }
      if (Has(h.controllers, "pids") && spec.pids_max > 0) {
        g.pids_limited |= write("pids.max", std::to_string(spec.pids_max));
      }
      if (!devices_v1) {
        if (spec.deny_devices.empty() || AttachDeviceDenyList(dir, spec.deny_devices, &error)) {
          g.devices_isolated = true;
        } else {
          g.warnings.push_back(error);
        }
      }
    } else if (h.kind == "pids" && spec.pids_max > 0) {
      g.pids_limited |= write("pids.max", std::to_string(spec.pids_max));
    } else if (h.kind == "memory" && spec.memory_mib > 0) {
      memory = write("memory.limit_in_bytes", std::to_string(spec.memory_mib * 1024 * 1024));
    } else if (h.kind == "cpu" && spec.cpu_milli > 0) {
      cpu = write("cpu.cfs_period_us", std::to_string(kCpuPeriodUs)) &&
            write("cpu.cfs_quota_us", std::to_string(spec.cpu_milli * kCpuPeriodUs / 1000));
    } else if (h.kind == "devices") {
      bool all = true;
      for (const DeviceNumber& d : spec.deny_devices) {
        all &= write("devices.deny",
                     "c " + std::to_string(d.major) + ":" + std::to_string(d.minor) + " rwm");
      }
      g.devices_isolated = all;
    }
    g.procs_files.push_back(dir + "/cgroup.procs");
    g.dirs.push_back(dir);
  }
  if (spec.cpu_milli > 0 && !cpu) g.warnings.push_back("no CPU limit: no cpu controller");
  if (spec.memory_mib > 0 && !memory) {
    g.warnings.push_back("no memory limit: no memory controller");
  }
  return g;
}

std::vector<std::string> TaskCgroups::bases() const {
  std::vector<std::string> out;
  for (const Hierarchy& h : hierarchies_) out.push_back(h.base);
  return out;
}

std::vector<std::string> TaskCgroups::Dirs(uint64_t job, int32_t task) const {
  std::vector<std::string> out;
  for (const Hierarchy& h : hierarchies_) {
    const std::string dir = TaskDir(h, job, task);
    struct stat st {};
    if (::stat(dir.c_str(), &st) == 0) out.push_back(dir);
  }
  return out;
}

void TaskCgroups::Release(uint64_t job, int32_t task) {
  // The freezer first: frozen processes cannot fork while the others are killed.
  for (const Hierarchy& h : hierarchies_) {
    if (h.kind == "freezer") EmptyAndRemove(TaskDir(h, job, task), true);
  }
  for (const Hierarchy& h : hierarchies_) {
    if (h.kind != "freezer") EmptyAndRemove(TaskDir(h, job, task), false);
  }
}

}  // namespace arbiter::exec

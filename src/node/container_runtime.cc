#include "node/container_runtime.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace arbiter::node {

namespace {

constexpr const char* kToolExitMarker = "arbiter-tool-exit=";

int64_t MonotonicMs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

bool WriteFile0600(const std::string& path, const std::string& content) {
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return false;
  const bool ok =
      ::write(fd, content.data(), content.size()) == static_cast<ssize_t>(content.size());
  ::close(fd);
  return ok && ::rename(tmp.c_str(), path.c_str()) == 0;
}

std::string Base64(const std::string& in) {
  static const char* k = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    const uint32_t v = (static_cast<uint8_t>(in[i]) << 16) |
                       (static_cast<uint8_t>(in[i + 1]) << 8) | static_cast<uint8_t>(in[i + 2]);
    for (int s : {18, 12, 6, 0}) out += k[(v >> s) & 63];
  }
  if (i + 1 == in.size()) {
    const uint32_t v = static_cast<uint8_t>(in[i]) << 16;
    out += k[(v >> 18) & 63];
    out += k[(v >> 12) & 63];
    out += "==";
  } else if (i + 2 == in.size()) {
    const uint32_t v = (static_cast<uint8_t>(in[i]) << 16) | (static_cast<uint8_t>(in[i + 1]) << 8);
    out += k[(v >> 18) & 63];
    out += k[(v >> 12) & 63];
    out += k[(v >> 6) & 63];
    out += '=';
  }
  return out;
}

std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  size_t b = 0;
  while (b < s.size() && s[b] == ' ') ++b;
  return s.substr(b);
}

}  // namespace

ToolResult RunTool(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                   int64_t timeout_ms, const std::function<void(const std::string&)>& line,
                   const std::atomic<bool>* cancel) {
  ToolResult r;
  if (argv.empty()) {
    r.exit_code = 127;
    return r;
  }
  // The program runs under sh, which prints its exit status last, on a line of its own (after the
  // program's last line, which may not end in a newline): an executor in this process
  // reaps any child of it (waitpid(-1)), so the status a waitpid of ours would see may be gone.
  std::vector<std::string> args = {
      "/bin/sh", "-c", std::string("\"$@\"; s=$?; echo; echo ") + kToolExitMarker + "$s", "sh"};
  args.insert(args.end(), argv.begin(), argv.end());
  std::vector<std::string> envs = env;
  std::vector<char*> cargv;
  for (std::string& a : args) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  std::vector<char*> cenv;
  for (std::string& e : envs) cenv.push_back(e.data());
  cenv.push_back(nullptr);
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    r.exit_code = 127;
    return r;
  }
  const pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);
    const int in = ::open("/dev/null", O_RDONLY);
    if (in >= 0) dup2(in, STDIN_FILENO);
    dup2(fds[1], STDOUT_FILENO);
    dup2(fds[1], STDERR_FILENO);
    syscall(SYS_close_range, 3U, ~0U, 0U);
    execve(cargv[0], cargv.data(), cenv.data());
    dprintf(STDERR_FILENO, "cannot run %s: %s\n", cargv[0], std::strerror(errno));
    _exit(127);
  }
  ::close(fds[1]);
  if (pid < 0) {
    ::close(fds[0]);
    r.exit_code = 127;
    return r;
  }
  const int64_t until = MonotonicMs() + timeout_ms;
  std::string pending;
  bool timed_out = false;
  int marked = -1;  // the exit status sh printed (-1: none)
  auto take = [&](const std::string& l) {
    if (l.rfind(kToolExitMarker, 0) == 0) {
      marked = std::atoi(l.c_str() + std::strlen(kToolExitMarker));
      return;
    }
    if (line) line(l);
    if (r.output.size() < (1 << 20)) r.output += l + "\n";
  };
  char buf[8192];
  for (;;) {
    const int64_t left = until - MonotonicMs();
    if (left <= 0 || (cancel != nullptr && cancel->load())) {
      timed_out = true;
      ::kill(-pid, SIGKILL);
      break;
    }
    pollfd p{fds[0], POLLIN, 0};
    const int n = poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 200)));
    if (n <= 0) continue;
    const ssize_t got = ::read(fds[0], buf, sizeof(buf));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    // Progress lines may end in '\r' (a terminal's rewrite): both end a line.
    for (ssize_t i = 0; i < got; ++i) {
      const char c = buf[i];
      if (c == '\n' || c == '\r') {
        if (!pending.empty()) take(pending);
        pending.clear();
      } else if (pending.size() < 65536) {
        pending += c;
      }
    }
  }
  if (!pending.empty()) take(pending);
  ::close(fds[0]);
  int status = 0;
  pid_t reaped = 0;
  do {
    reaped = waitpid(pid, &status, 0);
  } while (reaped < 0 && errno == EINTR);
  if (timed_out) {
    r.exit_code = 124;
  } else if (marked >= 0) {
    r.exit_code = marked;
  } else if (reaped == pid && WIFSIGNALED(status)) {
    r.exit_code = 128 + WTERMSIG(status);
  } else {
    r.exit_code = 1;  // ended without saying how (killed)
  }
  return r;
}

std::string PullFailureReason(const std::string& output) {
  // podman ends with "Error: <what failed>: <the registry's message>"; its last such line.
  std::string reason;
  std::istringstream in(output);
  for (std::string l; std::getline(in, l);) {
    const size_t at = l.find("Error: ");
    if (at != std::string::npos) reason = Trim(l.substr(at + 7));
  }
  if (reason.empty()) {
    std::istringstream again(output);
    for (std::string l; std::getline(again, l);) {
      if (!Trim(l).empty()) reason = Trim(l);
    }
  }
  if (reason.empty()) reason = "the pull failed without a message";
  if (reason.size() > 1000) reason = reason.substr(0, 1000) + "...";
  return "ImagePullFailed: " + reason;
}

std::string VolumeName(const std::string& tenant, const std::string& volume) {
  return fmt::format("arbiter-{}_{}", tenant, volume);
}

std::string RegistryOf(const std::string& image) {
  const size_t slash = image.find('/');
  if (slash == std::string::npos) return "docker.io";
  const std::string first = image.substr(0, slash);
  // A registry host has a dot or a port, or is localhost; else it is a Docker Hub namespace.
  if (first.find('.') != std::string::npos || first.find(':') != std::string::npos ||
      first == "localhost") {
    return first;
  }
  return "docker.io";
}

ContainerRuntime::ContainerRuntime(std::string work_dir, ContainerOptions options,
                                   ProgressFn progress)
    : dir_(std::move(work_dir) + "/containers"),
      options_(std::move(options)),
      progress_(std::move(progress)) {
  std::error_code ec;
  std::filesystem::create_directories(dir_ + "/tmp", ec);
  ::chmod(dir_.c_str(), 0700);
  conf_ = dir_ + "/containers.conf";
  // The node's own podman configuration: what works on these machines, nothing shared.
  const std::string conf = fmt::format(
      "[containers]\n"
      "default_ulimits = []\n"
      "netns = \"host\"\n"
      "log_driver = \"k8s-file\"\n"
      "[engine]\n"
      "cgroup_manager = \"cgroupfs\"\n"
      "runtime = \"{}\"\n"
      "events_logger = \"file\"\n"
      "events_logfile_path = \"{}/events.log\"\n"
      "tmp_dir = \"{}/tmp\"\n"
      "static_dir = \"{}/root/libpod\"\n"
      "volume_path = \"{}/volumes\"\n",
      options_.runtime, dir_, dir_, dir_, dir_);
  WriteFile0600(conf_, conf);
  for (const std::string& d : options_.cdi_dirs) {
    for (const auto& f : std::filesystem::directory_iterator(d, ec)) {
      std::ifstream in(f.path());
      std::stringstream s;
      s << in.rdbuf();
      if (s.str().find("nvidia.com/gpu") != std::string::npos) cdi_gpus_ = true;
    }
  }
  thread_ = std::thread([this] { Loop(); });
}

ContainerRuntime::~ContainerRuntime() {
  cancel_ = true;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::vector<std::string> ContainerRuntime::Podman() const {
  return {options_.podman,    "--root",   dir_ + "/root", "--runroot",     dir_ + "/run",
          "--cgroup-manager", "cgroupfs", "--runtime",    options_.runtime};
}

std::vector<std::string> ContainerRuntime::ToolEnv() const {
  return {"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
          "CONTAINERS_CONF=" + conf_, "HOME=" + dir_, "TMPDIR=" + dir_ + "/tmp"};
}

bool ContainerRuntime::Available(std::string* why) {
  std::vector<std::string> argv = Podman();
  argv.insert(argv.end(), {"info", "--format", "{{.Host.OCIRuntime.Name}}"});
  const ToolResult r = RunTool(argv, ToolEnv(), 60000);
  if (r.exit_code != 0) {
    *why = fmt::format("podman cannot run here (exit {}): {}", r.exit_code, Trim(r.output));
    return false;
  }
  return true;
}

std::string ContainerRuntime::Describe() const {
  return fmt::format(
      "podman ({}, cgroupfs), images under {}; GPUs {}", options_.runtime, dir_,
      cdi_gpus_ ? "as CDI devices nvidia.com/gpu=INDEX" : "by environment (no NVIDIA CDI spec)");
}

bool ContainerRuntime::Insecure(const ImagePull& pull) const {
  if (pull.insecure) return true;
  const std::string reg = RegistryOf(pull.image);
  return std::find(options_.insecure_registries.begin(), options_.insecure_registries.end(), reg) !=
         options_.insecure_registries.end();
}

std::string ContainerRuntime::AuthFile(const ImagePull& pull) const {
  if (pull.auth.empty()) return "";
  std::string content = pull.auth;
  if (content.front() != '{') {  // "user:password"
    nlohmann::json j = {{"auths", {{RegistryOf(pull.image), {{"auth", Base64(pull.auth)}}}}}};
    content = j.dump();
  }
  const std::string path = fmt::format("{}/auth-{}.json", dir_, ::getpid());
  return WriteFile0600(path, content) ? path : "";
}

ImageState ContainerRuntime::Ensure(const ImagePull& pull) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = states_.find(pull.image);
  const bool stale = it != states_.end() && it->second.kind == ImageState::Kind::kFailed &&
                     MonotonicMs() - it->second.at_ms > 60000;
  if (stale) states_.erase(it);
  it = states_.find(pull.image);
  if (it != states_.end()) return it->second;
  ImageState s;  // pulling (or looked up first: the pull thread finds a present image at once)
  states_.emplace(pull.image, s);
  queue_.push_back(pull);
  cv_.notify_all();
  return s;
}

void ContainerRuntime::Forget(const std::string& image) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = states_.find(image);
  if (it != states_.end() && it->second.kind != ImageState::Kind::kPulling) states_.erase(it);
}

std::vector<NodeImage> ContainerRuntime::Images(uint64_t* version) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (version != nullptr) *version = images_version_;
  return images_;
}

void ContainerRuntime::Loop() {
  for (;;) {
    ImagePull next;
    bool list = false;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait_for(lock, std::chrono::milliseconds(1000), [&] { return stop_ || !queue_.empty(); });
      if (stop_) return;
      if (!queue_.empty()) {
        next = queue_.front();
        queue_.pop_front();
      } else {
        list = listed_ms_ < 0 || MonotonicMs() - listed_ms_ >= options_.list_every_ms;
      }
    }
    // A node that never ran a container has no storage yet: nothing to list (and no podman to
    // start every so often).
    if (list) {
      std::error_code ec;
      list = std::filesystem::exists(dir_ + "/root", ec);
    }
    if (!next.image.empty()) {
      const ImageState s = Pull(next);
      List();
      std::lock_guard<std::mutex> lock(mu_);
      states_[next.image] = s;
    } else if (list) {
      List();
    }
  }
}

ImageState ContainerRuntime::Pull(const ImagePull& pull) {
  ImageState s;
  const std::vector<std::string> env = ToolEnv();
  auto inspect = [&] {
    std::vector<std::string> argv = Podman();
    argv.insert(argv.end(), {"image", "inspect", "--format", "{{.Digest}}", pull.image});
    return RunTool(argv, env, 60000, nullptr, &cancel_);
  };
  ToolResult have = inspect();
  if (have.exit_code == 0) {  // present: nothing to pull
    s.kind = ImageState::Kind::kReady;
    s.digest = Trim(have.output);
    return s;
  }
  const bool insecure = Insecure(pull);
  const std::string auth = AuthFile(pull);
  // How many layers it has (for a percentage): its manifest, when skopeo can read it.
  int layers = 0;
  {
    std::vector<std::string> argv = {options_.skopeo, "inspect", "--raw",
                                     insecure ? "--tls-verify=false" : "--tls-verify=true"};
    if (!auth.empty()) argv.insert(argv.end(), {"--authfile", auth});
    argv.push_back("docker://" + pull.image);
    const ToolResult raw = RunTool(argv, env, 60000, nullptr, &cancel_);
    if (raw.exit_code == 0) {
      try {
        const nlohmann::json m = nlohmann::json::parse(raw.output);
        if (m.contains("layers") && m["layers"].is_array()) {
          layers = static_cast<int>(m["layers"].size());
        }
      } catch (const std::exception&) {
      }
    }
  }
  if (progress_) progress_(pull.image, fmt::format("pulling {}: 0%", pull.image));
  std::vector<std::string> argv = Podman();
  argv.insert(argv.end(), {"pull", insecure ? "--tls-verify=false" : "--tls-verify=true"});
  if (!auth.empty()) argv.insert(argv.end(), {"--authfile", auth});
  argv.push_back(pull.image);
  int copied = 0;
  const ToolResult r = RunTool(
      argv, env, options_.pull_timeout_ms,
      [&](const std::string& l) {
        if (l.rfind("Copying blob", 0) != 0 || !progress_) return;
        ++copied;
        if (layers > 0) {
          const int done = std::min(copied, layers);
          progress_(pull.image, fmt::format("pulling {}: {}% ({} of {} layers)", pull.image,
                                            done * 100 / layers, done, layers));
        } else {
          progress_(pull.image, fmt::format("pulling {}: layer {}", pull.image, copied));
        }
      },
      &cancel_);
  if (!auth.empty()) ::unlink(auth.c_str());
  if (r.exit_code != 0) {
    s.kind = ImageState::Kind::kFailed;
    s.at_ms = MonotonicMs();
    s.message = r.exit_code == 124 ? "ImagePullFailed: the pull took too long"
                                   : PullFailureReason(r.output);
    spdlog::warn("{}: {}", pull.image, s.message);
    return s;
  }
  have = inspect();
  s.kind = ImageState::Kind::kReady;
  s.digest = have.exit_code == 0 ? Trim(have.output) : "";
  if (progress_) {
    progress_(pull.image, fmt::format("pulled {} ({})", pull.image,
                                      s.digest.empty() ? "digest unknown" : s.digest));
  }
  return s;
}

void ContainerRuntime::List() {
  std::vector<std::string> argv = Podman();
  argv.insert(argv.end(), {"images", "--format", "json"});
  const ToolResult r = RunTool(argv, ToolEnv(), 60000, nullptr, &cancel_);
  std::vector<NodeImage> images;
  if (r.exit_code == 0) {
    try {
      const nlohmann::json list = nlohmann::json::parse(r.output);
      for (const auto& i : list) {
        const std::string digest = i.value("Digest", "");
        const int64_t size = i.value("Size", int64_t{0});
        // By tag and by digest (repo@sha256:...): a job may name it either way.
        for (const char* key : {"Names", "RepoDigests"}) {
          if (!i.contains(key) || !i[key].is_array()) continue;
          for (const auto& n : i[key]) {
            if (images.size() >= kMaxNodeImages) break;
            if (n.is_string()) images.push_back({n.get<std::string>(), digest, size});
          }
        }
      }
    } catch (const std::exception& e) {
      spdlog::warn("cannot read podman's list of images: {}", e.what());
      return;
    }
  }
  std::sort(images.begin(), images.end(),
            [](const NodeImage& a, const NodeImage& b) { return a.name < b.name; });
  std::lock_guard<std::mutex> lock(mu_);
  listed_ms_ = MonotonicMs();
  if (r.exit_code != 0 || images == images_) return;
  images_ = std::move(images);
  ++images_version_;
  // An image no longer present is pulled again when asked for.
  for (auto it = states_.begin(); it != states_.end();) {
    const bool present = std::any_of(images_.begin(), images_.end(),
                                     [&](const NodeImage& i) { return i.name == it->first; });
    const bool by_digest = it->first.find('@') != std::string::npos;
    it = it->second.kind == ImageState::Kind::kReady && !present && !by_digest ? states_.erase(it)
                                                                               : std::next(it);
  }
}

namespace {

// Names podman (or the libraries it uses) reads from its own environment.
bool PodmanReads(const std::string& name) {
  for (const char* prefix :
       {"CONTAINER",  "XDG_",          "REGISTRY_",   "DOCKER_",  "BUILDAH_",   "STORAGE_",
        "PODMAN_",    "TMPDIR",        "HOME",        "PATH",     "LD_",        "GODEBUG",
        "GOMAXPROCS", "HTTP_PROXY",    "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy",
        "no_proxy",   "NOTIFY_SOCKET", "SSL_CERT",    "TZ"}) {
    if (name.rfind(prefix, 0) == 0) return true;
  }
  return false;
}

}  // namespace

bool ContainerRuntime::RunCommand(const TaskContainer& c, const std::string& env_file,
                                  std::vector<std::string>* argv, std::vector<std::string>* env,
                                  std::string* why) const {
  *argv = Podman();
  argv->insert(argv->end(), {"run", "--rm", "--replace", "--name", c.name, "--pull", "never",
                             "--network", "host", "--log-driver", "none", "--init=false"});
  if (c.uid >= 0) {
    argv->push_back(fmt::format("--user={}:{}", c.uid, c.gid >= 0 ? c.gid : c.uid));
    for (int64_t g : c.groups) {
      if (g != c.gid) argv->push_back(fmt::format("--group-add={}", g));
    }
  }
  for (const std::string& m : c.mounts) argv->push_back(fmt::format("--volume={}:{}", m, m));
  for (const Mount& m : c.binds) {
    const std::string& target = m.target.empty() ? m.path : m.target;
    // ':' and ',' separate podman's volume options: a path holding one is refused, not parsed.
    if (m.path.find_first_of(":,") != std::string::npos ||
        target.find_first_of(":,") != std::string::npos) {
      *why =
          fmt::format("mount {} -> {}: a path with ':' or ',' cannot be mounted", m.path, target);
      return false;
    }
    // The tenant's rules were checked on the path as written; a symbolic link on the way (one a
    // job may have made in a read-write folder) would bind whatever it points to instead.
    char resolved[PATH_MAX];
    if (::realpath(m.path.c_str(), resolved) == nullptr) {
      *why = fmt::format("mount {}: no such folder on this node", m.path);
      return false;
    }
    if (m.path != resolved) {
      *why = fmt::format("mount {}: goes through a symbolic link (to {})", m.path, resolved);
      return false;
    }
    argv->push_back(fmt::format("--volume={}:{}:{}", m.path, target, m.read_only ? "ro" : "rw"));
  }
  for (const VolumeBind& v : c.volumes) {
    if (v.target.find_first_of(":,") != std::string::npos) {
      *why = fmt::format("volume {} -> {}: a path with ':' or ',' cannot be mounted", v.name,
                         v.target);
      return false;
    }
    argv->push_back(fmt::format("--volume={}:{}:{}", v.name, v.target, v.read_only ? "ro" : "rw"));
  }
  if (!c.cwd.empty()) argv->push_back("--workdir=" + c.cwd);
  if (cdi_gpus_) {
    for (int32_t g : c.gpus) argv->push_back(fmt::format("--device=nvidia.com/gpu={}", g));
  }
  if (c.cpu_milli > 0) {
    argv->push_back(fmt::format("--cpus={}.{:03d}", c.cpu_milli / 1000, c.cpu_milli % 1000));
  }
  if (c.memory_mib > 0) argv->push_back(fmt::format("--memory={}m", c.memory_mib));
  if (c.pids_max > 0) argv->push_back(fmt::format("--pids-limit={}", c.pids_max));
  *env = ToolEnv();
  std::string file;
  for (const std::string& e : c.env) {
    const size_t eq = e.find('=');
    if (eq == std::string::npos || eq == 0) continue;
    const std::string name = e.substr(0, eq);
    if (e.find('\n') == std::string::npos && e.find('\r') == std::string::npos) {
      file += e + "\n";
    } else if (!PodmanReads(name)) {
      argv->push_back("--env=" + name);
      env->push_back(e);
    } else {
      spdlog::warn("container {}: {} has a line break and podman reads it: not passed", c.name,
                   name);
    }
  }
  if (!env_file.empty()) {
    if (!WriteFile0600(env_file, file)) {
      *why = fmt::format("cannot write {}: {}", env_file, std::strerror(errno));
      return false;
    }
    argv->push_back("--env-file=" + env_file);
  }
  argv->push_back(c.image);
  argv->insert(argv->end(), c.command.begin(), c.command.end());
  return true;
}

std::string ContainerRuntime::VolumeFolder(const std::string& name, const std::string& tenant,
                                           const std::string& volume, std::string* why) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = volumes_.find(name);
    if (it != volumes_.end()) return it->second;
  }
  auto mountpoint = [&](ToolResult* r) {
    std::vector<std::string> argv = Podman();
    argv.insert(argv.end(), {"volume", "inspect", "--format", "{{.Mountpoint}}", name});
    *r = RunTool(argv, ToolEnv(), 60000, nullptr, &cancel_);
    return r->exit_code == 0;
  };
  ToolResult r;
  if (!mountpoint(&r)) {
    std::vector<std::string> argv = Podman();
    argv.insert(argv.end(), {"volume", "create", "--label", "arbiter.tenant=" + tenant, "--label",
                             "arbiter.volume=" + volume, name});
    const ToolResult made = RunTool(argv, ToolEnv(), 60000, nullptr, &cancel_);
    if (!mountpoint(&r)) {
      *why = made.exit_code != 0
                 ? fmt::format("cannot create the volume {} (exit {}): {}", name, made.exit_code,
                               Trim(made.output))
                 : fmt::format("cannot find the volume {}: {}", name, Trim(r.output));
      return "";
    }
    spdlog::info("created the volume {} (tenant {}, volume {})", name, tenant, volume);
  }
  const std::string folder = Trim(r.output);
  if (folder.empty() || folder.front() != '/') {
    *why = fmt::format("the volume {} has no folder on this node ({})", name, folder);
    return "";
  }
  std::lock_guard<std::mutex> lock(mu_);
  volumes_[name] = folder;
  return folder;
}

bool ContainerRuntime::EnsureVolume(const std::string& name, const std::string& tenant,
                                    const std::string& volume, int64_t uid, int64_t gid,
                                    std::string* why) {
  // Twice at most: a volume an operator removed since it was last seen is made again.
  for (int round = 0; round < 2; ++round) {
    const std::string folder = VolumeFolder(name, tenant, volume, why);
    if (folder.empty()) return false;
    // The task's user owns the top of it (not what is in it: files keep their owners).
    if (::chown(folder.c_str(), static_cast<uid_t>(uid), static_cast<gid_t>(gid)) == 0 &&
        ::chmod(folder.c_str(), 0700) == 0) {
      return true;
    }
    *why = fmt::format("cannot give the volume {} ({}) to uid {}: {}", name, folder, uid,
                       std::strerror(errno));
    std::lock_guard<std::mutex> lock(mu_);
    volumes_.erase(name);
  }
  return false;
}

void ContainerRuntime::Remove(const std::string& name) {
  std::error_code ec;
  if (std::filesystem::exists(dir_ + "/root", ec)) RunTool(RemoveCommand(name), ToolEnv(), 60000);
}

std::vector<std::string> ContainerRuntime::RemoveCommand(const std::string& name) const {
  std::vector<std::string> argv = Podman();
  argv.insert(argv.end(), {"rm", "--force", "--ignore", "--time", "0", name});
  return argv;
}

void ContainerRuntime::RemoveLeftovers(const std::string& prefix,
                                       const std::set<std::string>& keep) {
  std::error_code ec;
  if (!std::filesystem::exists(dir_ + "/root", ec)) return;  // never ran a container
  std::vector<std::string> argv = Podman();
  argv.insert(argv.end(), {"ps", "--all", "--format", "{{.Names}}"});
  const ToolResult r = RunTool(argv, ToolEnv(), 60000);
  if (r.exit_code != 0) return;
  std::istringstream in(r.output);
  for (std::string name; std::getline(in, name);) {
    name = Trim(name);
    if (name.rfind(prefix, 0) != 0 || keep.count(name)) continue;
    spdlog::info("removing the container {}, left by an earlier run of this node", name);
    RunTool(RemoveCommand(name), ToolEnv(), 60000);
  }
}

}  // namespace arbiter::node

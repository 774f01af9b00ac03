// A real image registry for tests: Debian's docker-registry on a free 127.0.0.1 port, with its own
// configuration file and storage in a temp dir (plain HTTP, loopback only), and a test image built
// from the static busybox (no internet): a root file system of /bin/busybox and its applets,
// imported with podman into storage of the test's own and pushed to the registry.
#pragma once

#include <fmt/format.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "server_process.h"

namespace arbiter::testing {

// A port no one listens on now (the registry takes it right after).
inline int FreeLoopbackPort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof(a);
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
    port = ntohs(a.sin_port);
  }
  ::close(fd);
  return port;
}

// Runs `command` through sh with a bound on its time; its exit code, its output in *out.
inline int RunShell(const std::string& command, std::string* out = nullptr, int timeout_s = 180) {
  std::string quoted;
  for (char c : command) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  const std::string full = fmt::format("timeout {} sh -c '{}' 2>&1", timeout_s, quoted);
  FILE* p = ::popen(full.c_str(), "r");
  if (p == nullptr) return -1;
  std::string text;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof(buf), p)) > 0;) text.append(buf, n);
  const int status = ::pclose(p);
  if (out != nullptr) *out = text;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

class RegistryProcess {
 public:
  ~RegistryProcess() { Stop(); }

  // Starts the registry with its data under `dir`; false (with *why) when it does not answer
  // within 20 s.
  bool Start(const std::string& dir, std::string* why) {
    dir_ = dir;
    std::filesystem::create_directories(dir + "/data");
    for (int tries = 0; tries < 5; ++tries) {
      port_ = FreeLoopbackPort();
      {
        std::ofstream f(dir + "/config.yml");
        f << "version: 0.1\n"
          << "storage:\n  filesystem:\n    rootdirectory: " << dir << "/data\n"
          << "  delete:\n    enabled: true\n"
          << "http:\n  addr: 127.0.0.1:" << port_ << "\n"
          << "log:\n  level: error\n  accesslog:\n    disabled: true\n";
      }
      pid_ = fork();
      if (pid_ == 0) {
        const std::string log = dir + "/registry.log";
        FILE* f = std::freopen(log.c_str(), "a", stdout);
        (void)f;
        dup2(STDOUT_FILENO, STDERR_FILENO);
        const std::string conf = dir + "/config.yml";
        execlp("docker-registry", "docker-registry", "serve", conf.c_str(), nullptr);
        _exit(127);
      }
      auto client = std::make_unique<httplib::Client>("127.0.0.1", port_);
      client->set_connection_timeout(1, 0);
      for (int i = 0; i < 100; ++i) {  // bounded: 20 s
        auto r = client->Get("/v2/");
        if (r && r->status == 200) return true;
        int status = 0;
        if (waitpid(pid_, &status, WNOHANG) == pid_) {
          pid_ = -1;
          break;  // it exited (the port was taken meanwhile, or no registry): next try
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
      }
      Stop();
    }
    std::ifstream log(dir + "/registry.log");
    std::stringstream s;
    s << log.rdbuf();
    *why = "docker-registry did not start (install it: scripts/install-deps.sh): " + s.str();
    return false;
  }

  void Stop() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    pid_ = -1;
  }

  std::string host() const { return fmt::format("127.0.0.1:{}", port_); }

 private:
  std::string dir_;
  int port_ = 0;
  pid_t pid_ = -1;
};

// podman for the test itself (building and pushing images), with storage of its own under `dir`.
class TestPodman {
 public:
  explicit TestPodman(std::string dir) : dir_(std::move(dir)) {
    std::filesystem::create_directories(dir_ + "/tmp");
    std::ofstream f(dir_ + "/containers.conf");
    f << "[containers]\ndefault_ulimits = []\nnetns = \"host\"\n"
      << "[engine]\ncgroup_manager = \"cgroupfs\"\nruntime = \"runc\"\nevents_logger = \"file\"\n"
      << "events_logfile_path = \"" << dir_ << "/events.log\"\n"
      << "tmp_dir = \"" << dir_ << "/tmp\"\n";
  }

  // "podman ..." with this storage.
  std::string Command(const std::string& args) const {
    return fmt::format(
        "CONTAINERS_CONF={0}/containers.conf podman --root {0}/root --runroot {0}/run {1}", dir_,
        args);
  }
  int Run(const std::string& args, std::string* out = nullptr) const {
    return RunShell(Command(args), out);
  }

  // An image of the static busybox (every applet linked in /bin) named `name`; false (with
  // *why) when it cannot be made.
  bool BuildBusybox(const std::string& name, std::string* why) const {
    const std::string root = dir_ + "/rootfs";
    std::string out;
    const std::string make = fmt::format(
        "set -e; rm -rf {0}; mkdir -p {0}/bin {0}/tmp; cp /bin/busybox {0}/bin/busybox; "
        "for a in $(/bin/busybox --list); do [ \"$a\" = busybox ] || ln -sf busybox {0}/bin/$a; "
        "done; tar -C {0} -cf {1}/rootfs.tar .",
        root, dir_);
    if (RunShell(make, &out) != 0) {
      *why = "cannot make a busybox root (install busybox-static): " + out;
      return false;
    }
    if (Run(fmt::format("import {}/rootfs.tar {}", dir_, name), &out) != 0) {
      *why = "podman import failed: " + out;
      return false;
    }
    return true;
  }

  // Pushes `local` to `remote` (plain HTTP); its digest ("sha256:...") in *digest.
  bool Push(const std::string& local, const std::string& remote, std::string* digest,
            std::string* why) const {
    std::string out;
    const std::string file = dir_ + "/digest";
    if (Run(fmt::format("push --tls-verify=false --digestfile {} {} {}", file, local, remote),
            &out) != 0) {
      *why = "podman push failed: " + out;
      return false;
    }
    std::ifstream f(file);
    std::getline(f, *digest);
    return true;
  }

 private:
  std::string dir_;
};

}  // namespace arbiter::testing

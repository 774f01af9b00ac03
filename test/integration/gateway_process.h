// EchoProcess (arbiter-echo-server, the stand-in model server) and GatewayProcess
// (`arbiter gateway`) as real child processes on loopback ports the kernel picks. Nothing
// outlives a test: the destructors kill the children.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

namespace arbiter::testing {

// The arbiter-echo-server binary, built beside `arbiter`.
inline std::string EchoServerBinary() {
  return (std::filesystem::path(ARBITER_BINARY).parent_path() / "arbiter-echo-server").string();
}

// A child whose stdout is read until a line starting with `prefix` appears; the rest of that
// line is kept (an address, a port).
class LineChild {
 public:
  LineChild() = default;
  LineChild(const LineChild&) = delete;
  LineChild& operator=(const LineChild&) = delete;
  ~LineChild() { Kill(SIGKILL); }

  // Starts `args` with `env` added; false when `prefix` is not printed within 20 s.
  bool Start(const std::vector<std::string>& args, const std::string& prefix,
             const std::vector<std::string>& env = {}) {
    int out[2];
    if (pipe(out) != 0) return false;
    pid_ = fork();
    if (pid_ == 0) {
      dup2(out[1], STDOUT_FILENO);
      close(out[0]);
      close(out[1]);
      for (const std::string& e : env) putenv(const_cast<char*>(e.c_str()));
      std::vector<std::string> copy = args;
      std::vector<char*> argv;
      for (auto& a : copy) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    close(out[1]);
    out_fd_ = out[0];
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    std::string buf;
    while (std::chrono::steady_clock::now() < deadline) {
      pollfd p{out_fd_, POLLIN, 0};
      if (poll(&p, 1, 100) <= 0) continue;
      char c[512];
      const ssize_t n = read(out_fd_, c, sizeof(c));
      if (n <= 0) return false;
      buf.append(c, static_cast<size_t>(n));
      const size_t at = buf.find(prefix);
      if (at == std::string::npos) continue;
      const size_t eol = buf.find('\n', at);
      if (eol == std::string::npos) continue;
      rest_ = buf.substr(at + prefix.size(), eol - at - prefix.size());
      // The pipe stays open (a closed one would kill the child at its next line); these
      // children print a few lines at most, far from filling it.
      return true;
    }
    return false;
  }

  // Sends `sig` and waits for the child; its wait status.
  int Kill(int sig) {
    if (pid_ <= 0) return 0;
    ::kill(pid_, sig);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    if (out_fd_ >= 0) close(out_fd_);
    out_fd_ = -1;
    return status;
  }

  const std::string& rest() const { return rest_; }
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
  int out_fd_ = -1;
  std::string rest_;
};

// arbiter-echo-server --port 0 --id ID.
class EchoProcess {
 public:
  bool Start(const std::string& id, std::vector<std::string> extra = {},
             const std::vector<std::string>& env = {}) {
    std::vector<std::string> args = {EchoServerBinary(), "--port", "0", "--id", id};
    for (auto& e : extra) args.push_back(e);
    if (!child_.Start(args, "listening on 127.0.0.1:", env)) return false;
    port_ = std::atoi(child_.rest().c_str());
    return port_ > 0;
  }
  int Kill(int sig) { return child_.Kill(sig); }
  int port() const { return port_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

 private:
  LineChild child_;
  int port_ = 0;
};

// arbiter gateway --listen 127.0.0.1:0 plus `flags` (--routes-file F, or --server URL ...).
class GatewayProcess {
 public:
  bool Start(std::vector<std::string> flags, const std::vector<std::string>& env = {}) {
    std::vector<std::string> args = {ARBITER_BINARY, "gateway", "--listen", "127.0.0.1:0"};
    for (auto& f : flags) args.push_back(f);
    if (!child_.Start(args, "gateway listening on http://127.0.0.1:", env)) return false;
    port_ = std::atoi(child_.rest().c_str());
    return port_ > 0;
  }
  int Kill(int sig) { return child_.Kill(sig); }
  int port() const { return port_; }

 private:
  LineChild child_;
  int port_ = 0;
};

}  // namespace arbiter::testing

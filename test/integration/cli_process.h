// Running the real `arbiter` client binary in tests: a clean environment (HOME in a temporary
// folder, only the variables a test gives), a working directory, stdin, and a time limit. Output
// is captured separately (stdout, stderr), or through a pseudo-terminal to see what a user's
// terminal would get.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace arbiter::testing {

struct CliResult {
  int code = -1;  // exit status; 128 + signal when killed; -2 when it ran past its time
  std::string out;
  std::string err;
};

struct CliOptions {
  std::map<std::string, std::string> env;  // the whole environment, besides PATH and TMPDIR
  std::string cwd;
  std::string stdin_text;
  int timeout_s = 60;
  bool tty = false;    // stdout (and stderr) on a pseudo-terminal; `err` stays empty
  std::string binary;  // what to run ("": the arbiter under test), e.g. a link named squeue
};

namespace detail {

inline std::vector<std::string> Environment(const CliOptions& o) {
  std::vector<std::string> env;
  for (const char* keep : {"PATH", "TMPDIR"}) {
    const char* v = std::getenv(keep);
    if (v != nullptr && o.env.count(keep) == 0) env.push_back(std::string(keep) + "=" + v);
  }
  for (const auto& [k, v] : o.env) env.push_back(k + "=" + v);
  return env;
}

[[noreturn]] inline void Exec(const std::vector<std::string>& args, const CliOptions& o) {
  if (!o.cwd.empty() && chdir(o.cwd.c_str()) != 0) _exit(126);
  std::vector<std::string> a = {o.binary.empty() ? std::string(ARBITER_BINARY) : o.binary};
  a.insert(a.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& s : a) argv.push_back(s.data());
  argv.push_back(nullptr);
  std::vector<std::string> env = Environment(o);
  std::vector<char*> envp;
  for (auto& s : env) envp.push_back(s.data());
  envp.push_back(nullptr);
  execve(argv[0], argv.data(), envp.data());
  _exit(127);
}

inline int Status(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

}  // namespace detail

// Runs `arbiter ARGS...` to its end (or kills it after o.timeout_s).
inline CliResult RunCli(const std::vector<std::string>& args, const CliOptions& o = {}) {
  CliResult r;
  int out[2], err[2], in[2];
  int master = -1;
  if (pipe(err) != 0 || pipe(in) != 0) return r;
  if (o.tty) {
    master = posix_openpt(O_RDWR | O_NOCTTY);
    if (master < 0 || grantpt(master) != 0 || unlockpt(master) != 0) return r;
    out[0] = master;
    out[1] = -1;
  } else if (pipe(out) != 0) {
    return r;
  }
  const std::string slave = o.tty ? ptsname(master) : "";
  const pid_t pid = fork();
  if (pid == 0) {
    if (o.tty) {
      setsid();
      const int s = open(slave.c_str(), O_RDWR);
      dup2(s, STDOUT_FILENO);
      dup2(s, STDERR_FILENO);
      close(master);
    } else {
      dup2(out[1], STDOUT_FILENO);
      dup2(err[1], STDERR_FILENO);
      close(out[0]);
      close(out[1]);
    }
    dup2(in[0], STDIN_FILENO);
    close(err[0]);
    close(err[1]);
    close(in[0]);
    close(in[1]);
    detail::Exec(args, o);
  }
  if (out[1] >= 0) close(out[1]);
  close(err[1]);
  close(in[0]);
  if (!o.stdin_text.empty()) {
    [[maybe_unused]] ssize_t w = write(in[1], o.stdin_text.data(), o.stdin_text.size());
  }
  close(in[1]);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(o.timeout_s);
  bool out_open = true;
  bool err_open = !o.tty;
  if (o.tty) close(err[0]);
  bool timed_out = false;
  while (out_open || err_open) {
    if (std::chrono::steady_clock::now() > deadline) {
      timed_out = true;
      kill(pid, SIGKILL);
      break;
    }
    pollfd p[2] = {{out_open ? out[0] : -1, POLLIN, 0}, {err_open ? err[0] : -1, POLLIN, 0}};
    if (poll(p, 2, 100) <= 0) continue;
    char buf[4096];
    if (out_open && (p[0].revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
      const ssize_t n = read(out[0], buf, sizeof(buf));
      if (n <= 0) {
        out_open = false;  // EOF, or EIO once the pty's other side is closed
      } else {
        r.out.append(buf, static_cast<size_t>(n));
      }
    }
    if (err_open && (p[1].revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
      const ssize_t n = read(err[0], buf, sizeof(buf));
      if (n <= 0) {
        err_open = false;
      } else {
        r.err.append(buf, static_cast<size_t>(n));
      }
    }
  }
  close(out[0]);
  if (!o.tty) close(err[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  r.code = timed_out ? -2 : detail::Status(status);
  return r;
}

// A long-running `arbiter` (events -f, logs -f): read its output as it comes, then kill it.
class CliProcess {
 public:
  bool Start(const std::vector<std::string>& args, const CliOptions& o) {
    int out[2];
    if (pipe(out) != 0) return false;
    pid_ = fork();
    if (pid_ == 0) {
      dup2(out[1], STDOUT_FILENO);
      const int devnull = open("/dev/null", O_RDWR);
      dup2(devnull, STDIN_FILENO);
      close(out[0]);
      close(out[1]);
      detail::Exec(args, o);
    }
    close(out[1]);
    fd_ = out[0];
    return pid_ > 0;
  }

  // Reads until `done(output so far)` holds or `timeout_s` passes; returns whether it held.
  bool ReadUntil(const std::function<bool(const std::string&)>& done, int timeout_s) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
    while (!done(out_)) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, 100) <= 0) continue;
      char buf[4096];
      const ssize_t n = read(fd_, buf, sizeof(buf));
      if (n <= 0) return done(out_);
      out_.append(buf, static_cast<size_t>(n));
    }
    return true;
  }

  const std::string& output() const { return out_; }

  ~CliProcess() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (fd_ >= 0) close(fd_);
  }

 private:
  pid_t pid_ = -1;
  int fd_ = -1;
  std::string out_;
};

}  // namespace arbiter::testing

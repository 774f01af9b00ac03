// ChildProcess: a process a benchmark starts (a server, an agent, a gateway, nginx, a replica),
// its stdout and stderr in a file of its own.
//
// It ends with the benchmark however the benchmark ends (PR_SET_PDEATHSIG), and is stopped when
// destroyed: SIGTERM, then SIGKILL after the grace given at construction.
//
// Thread safety: one owner.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

namespace arbiter::bench {

class ChildProcess {
 public:
  explicit ChildProcess(int stop_grace_ms = 5000) : stop_grace_ms_(stop_grace_ms) {}
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  ~ChildProcess() { Stop(stop_grace_ms_); }

  // Starts args[0] (a path, or a name looked up in PATH) with `args`, its output to `log`.
  bool Start(const std::vector<std::string>& args, const std::string& log);
  // Waits up to `ms` for `text` in the output; the rest of its line, or nothing when it did not
  // come in time or the process ended.
  std::optional<std::string> WaitFor(const std::string& text, int ms);
  // SIGTERM, up to `grace_ms` for it to end, then SIGKILL. Idempotent.
  void Stop(int grace_ms);
  // Whether it ended (reaping it when it did).
  bool Exited();
  pid_t pid() const { return pid_; }

 private:
  int stop_grace_ms_;
  pid_t pid_ = -1;
  std::string log_;
};

// This executable's path (/proc/self/exe), else "arbiter".
std::string SelfExe();

}  // namespace arbiter::bench

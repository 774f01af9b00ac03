// arbiter-shim: runs one task for the executor and stays with it until every process of the task
// is gone (see exec/shim_spec.h for what it is for).
//
//   arbiter-shim FD        the ShimSpec is read from file descriptor FD (a pipe), then closed
//
// Steps:
//   1. Read the spec; become a session leader and the child subreaper (every process the task
//      starts, even one that leaves its process group or session, stays our descendant); write
//      the pid file.
//   2. Start the task: its own process group, its cgroups joined, RLIMIT_NPROC, stdout and stderr
//      on pipes to the shim (the run's start in the run index first), the configured user
//      (supplementary groups, gid, uid), no new privileges, SIGKILL when the shim dies, the
//      working directory entered as that user, the clean environment.
//   3. Wait, copying the task's output into its log files as it comes (exec/log_pump.h). SIGTERM
//      (a stop) or SIGUSR1 (a stop at the walltime) sends SIGTERM to every process of the task
//      (but its first one, for a spec with stop_spares_main), SIGKILL after the grace period. A
//      stale executor heartbeat (the executor is gone) and the walltime backstop stop it the
//      same way.
//   4. When the task's first process exits: SIGKILL to whatever it left (its group, its cgroups,
//      every descendant), reap it all, copy the rest of its output, write the exit record, exit 0.
//
// The task never waits for the shim to write its output: the pipes hold 1 MiB each and the loop
// reads them whenever they have data, between its other steps (none of which waits long), and
// writes only to local files. Should the shim die, the task dies with it (PDEATHSIG), and what
// else of it still writes gets EPIPE, never a blocked write. A restart of the executor does not
// concern the pipes: the shim, which holds them, goes on.
//
// Only this file, exec/log_pump.cc and exec/shim_spec.cc go into the binary: it stays small (one
// per running task).
#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "exec/log_pump.h"
#include "exec/shim_spec.h"

extern char** environ;

namespace arbiter::exec {
namespace {

int64_t NowMs() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

void Log(const char* fmt, const std::string& a, const std::string& b = "") {
  std::fprintf(stderr, "arbiter-shim[%d]: ", static_cast<int>(getpid()));
  std::fprintf(stderr, fmt, a.c_str(), b.c_str());
  std::fputc('\n', stderr);
}

bool ReadAll(int fd, std::string* out) {
  char buf[65536];
  for (;;) {
    const ssize_t n = read(fd, buf, sizeof(buf));
    if (n == 0) return true;
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    out->append(buf, static_cast<size_t>(n));
  }
}

// Writes `content` to `path` through a temporary file and a rename: readers see all or nothing.
bool WriteAtomically(const std::string& path, const std::string& content) {
  const std::string tmp = path + ".tmp" + std::to_string(getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return false;
  const bool ok =
      ::write(fd, content.data(), content.size()) == static_cast<ssize_t>(content.size());
  ::fsync(fd);
  ::close(fd);
  return ok && ::rename(tmp.c_str(), path.c_str()) == 0;
}

// Every descendant of this process, from /proc (ppid links); the subreaper keeps orphans ours.
std::vector<pid_t> Descendants() {
  std::map<pid_t, std::vector<pid_t>> children;
  DIR* d = opendir("/proc");
  if (d == nullptr) return {};
  while (dirent* e = readdir(d)) {
    char* end = nullptr;
    const long pid = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0' || pid <= 1) continue;
    std::ifstream f("/proc/" + std::string(e->d_name) + "/stat");
    std::string stat;
    std::getline(f, stat);
    const size_t paren = stat.rfind(')');
    if (paren == std::string::npos) continue;
    std::istringstream rest(stat.substr(paren + 1));
    std::string state;
    long ppid = 0;
    if (rest >> state >> ppid)
      children[static_cast<pid_t>(ppid)].push_back(static_cast<pid_t>(pid));
  }
  closedir(d);
  std::vector<pid_t> out;
  std::vector<pid_t> todo = {getpid()};
  while (!todo.empty()) {
    const pid_t p = todo.back();
    todo.pop_back();
    auto it = children.find(p);
    if (it == children.end()) continue;
    for (pid_t c : it->second) {
      out.push_back(c);
      todo.push_back(c);
    }
  }
  return out;
}

std::vector<pid_t> CgroupMembers(const std::vector<std::string>& dirs) {
  std::vector<pid_t> out;
  for (const std::string& dir : dirs) {
    std::ifstream f(dir + "/cgroup.procs");
    for (long pid = 0; f >> pid;) {
      if (pid > 1) out.push_back(static_cast<pid_t>(pid));
    }
  }
  return out;
}

class Shim {
 public:
  explicit Shim(ShimSpec spec) : spec_(std::move(spec)) {}

  int Run() {
    setsid();
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    sigset_t set;
    sigemptyset(&set);
    for (int s : {SIGCHLD, SIGTERM, SIGUSR1, SIGINT, SIGHUP, SIGQUIT}) sigaddset(&set, s);
    sigprocmask(SIG_BLOCK, &set, nullptr);
    signal(SIGPIPE, SIG_IGN);
    sigfd_ = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
    if (sigfd_ < 0) return Fail("signalfd: %s", std::strerror(errno));
    started_ms_ = NowMs();
    const std::string me = std::to_string(getpid()) + " " + std::to_string(spec_.attempt) + " " +
                           ProcessStartTime(getpid()) + " " + BootId() + "\n";
    if (!spec_.pid_path.empty() && !WriteAtomically(spec_.pid_path, me)) {
      return Fail("cannot write %s: %s", spec_.pid_path, std::strerror(errno));
    }
    if (!Start()) return Finish();
    Wait();
    return Finish();
  }

 private:
  int Fail(const char* fmt, const std::string& a, const std::string& b = "") {
    Log(fmt, a, b);
    record_.code = 126;
    record_.failed_to_start = true;
    if (!spec_.exit_path.empty()) WriteAtomically(spec_.exit_path, EncodeExitRecord(record_));
    return 1;
  }

  static int OpenLog(const std::string& path) {
    if (path.empty()) return -1;
    return ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  }

  // The log files, the run's start in the run index, and the pipes the task writes its stdout
  // and stderr to (`out`, `err`: their write ends, for the task). False (the record says why)
  // when one cannot be had.
  bool OpenOutput(int* out, int* err) {
    out_fd_ = OpenLog(spec_.stdout_path);
    err_fd_ = OpenLog(spec_.stderr_path);
    log_fd_ = OpenLog(spec_.log_path);
    if (out_fd_ < 0 || err_fd_ < 0 || (log_fd_ < 0 && !spec_.log_path.empty())) {
      Fail("cannot open the task's logs (%s): %s", spec_.stdout_path, std::strerror(errno));
      return false;
    }
    if (!AppendRunStart(spec_.runs_path, spec_.attempt, spec_.stdout_path, spec_.stderr_path,
                        spec_.log_path)) {
      Log("cannot write %s: %s (this run's output is not told apart from the last one's)",
          spec_.runs_path, std::strerror(errno));
    }
    int fds[2][2];
    if (pipe2(fds[0], O_CLOEXEC) != 0 || pipe2(fds[1], O_CLOEXEC) != 0) {
      Fail("cannot make the task's output pipes: %s", std::strerror(errno));
      return false;
    }
    for (int s = 0; s < 2; ++s) {
      fcntl(fds[s][0], F_SETPIPE_SZ, kPipeBytes);  // best effort: the system may cap it
      fcntl(fds[s][0], F_SETFL, O_NONBLOCK);
      pipes_[s] = fds[s][0];
    }
    *out = fds[0][1];
    *err = fds[1][1];
    pump_ = LogPump(out_fd_, err_fd_, log_fd_);
    return true;
  }

  // Step 2. False when the task could not start (the record says so).
  bool Start() {
    int out = -1;
    int err = -1;
    if (!OpenOutput(&out, &err)) return false;
    const int in = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    int report[2];
    if (in < 0 || pipe2(report, O_CLOEXEC) != 0) {
      Fail("cannot open /dev/null for the task: %s", std::strerror(errno));
      close(out);
      close(err);
      return false;
    }
    // Everything the child needs is built before fork.
    std::vector<char*> argv;
    for (std::string& a : spec_.argv) argv.push_back(a.data());
    argv.push_back(nullptr);
    std::vector<char*> envp;
    for (std::string& e : spec_.env) envp.push_back(e.data());
    envp.push_back(nullptr);
    std::vector<gid_t> groups;
    for (int64_t g : spec_.groups) groups.push_back(static_cast<gid_t>(g));
    const pid_t shim = getpid();
    main_ = fork();
    if (main_ == 0) {
      close(report[0]);
      Child(argv, envp, groups, shim, in, out, err, report[1]);  // does not return
    }
    close(report[1]);
    close(in);
    close(out);
    close(err);
    if (main_ < 0) {
      Fail("fork: %s", std::strerror(errno));
      close(report[0]);
      return false;
    }
    // The child writes one byte before it gives up; nothing when exec succeeds (close on exec).
    char failed = 0;
    ssize_t n = 0;
    do {
      n = read(report[0], &failed, 1);
    } while (n < 0 && errno == EINTR);
    close(report[0]);
    record_.failed_to_start = n == 1;
    return true;
  }

  // Between fork and exec: system calls only, no allocation.
  [[noreturn]] void Child(const std::vector<char*>& argv, const std::vector<char*>& envp,
                          const std::vector<gid_t>& groups, pid_t shim, int in, int out, int err,
                          int report) {
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    for (int s = 1; s < NSIG; ++s) signal(s, SIG_DFL);
    setpgid(0, 0);
    dup2(in, STDIN_FILENO);
    dup2(out, STDOUT_FILENO);
    dup2(err, STDERR_FILENO);
    auto die = [report](const char* what, const char* detail, int code) {
      dprintf(STDERR_FILENO, "arbiter: %s%s: %s\n", what, detail, std::strerror(errno));
      const char one = 1;
      (void)!::write(report, &one, 1);
      _exit(code);
    };
    // Joining the task's cgroups comes first: a task that cannot be tracked does not run.
    for (const std::string& procs : spec_.cgroup_procs) {
      const int fd = ::open(procs.c_str(), O_WRONLY | O_CLOEXEC);
      if (fd < 0 || ::write(fd, "0", 1) != 1)
        die("cannot join the task's cgroup ", procs.c_str(), 126);
      ::close(fd);
    }
    if (spec_.rlimit_nproc > 0) {
      const rlimit r{static_cast<rlim_t>(spec_.rlimit_nproc),
                     static_cast<rlim_t>(spec_.rlimit_nproc)};
      setrlimit(RLIMIT_NPROC, &r);
    }
    umask(022);
    if (spec_.uid >= 0 && static_cast<uid_t>(spec_.uid) != geteuid()) {
      if (setgroups(groups.size(), groups.data()) != 0) die("cannot set the groups", "", 126);
      if (setgid(static_cast<gid_t>(spec_.gid)) != 0) die("cannot switch group", "", 126);
      if (setuid(static_cast<uid_t>(spec_.uid)) != 0) die("cannot switch user", "", 126);
      if (getuid() != static_cast<uid_t>(spec_.uid) || geteuid() != static_cast<uid_t>(spec_.uid)) {
        errno = EPERM;
        die("the user switch did not hold", "", 126);
      }
    }
    if (spec_.no_new_privs) prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
    // After the switch: a change of credentials clears the parent-death signal.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != shim) _exit(137);
    if (!spec_.cwd.empty() && chdir(spec_.cwd.c_str()) != 0) {
      die("cannot enter the working directory ", spec_.cwd.c_str(), 126);
    }
    // Nothing of the shim's reaches the task; the report pipe stays open until exec (it is
    // close-on-exec).
    if (report > 3) syscall(SYS_close_range, 3U, static_cast<unsigned>(report - 1), 0U);
    syscall(SYS_close_range, static_cast<unsigned>(report + 1), ~0U, 0U);
    environ = const_cast<char**>(envp.data());
    execvp(argv[0], argv.data());
    die("cannot run ", argv[0], errno == ENOENT ? 127 : 126);
    _exit(127);
  }

  // Reads what the task has written so far, without waiting (a bounded amount, so that signals
  // are not kept waiting), into the log files. A pipe at its end (every process that held it has
  // closed it or gone) is closed.
  void Drain() {
    static char buf[65536];
    for (int s = 0; s < 2; ++s) {
      const auto stream = static_cast<LogPump::Stream>(s);
      for (int round = 0; round < 64 && pipes_[s] >= 0; ++round) {
        const ssize_t n = read(pipes_[s], buf, sizeof(buf));
        if (n > 0) {
          pump_.Add(stream, std::string_view(buf, static_cast<size_t>(n)), NowMs());
          continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && errno == EAGAIN) break;
        close(pipes_[s]);
        pipes_[s] = -1;
        pump_.End(stream);
      }
    }
    pump_.Flush(NowMs());
  }

  // Waits up to `timeout_ms` for a signal or output (whichever comes first), then reads the
  // output.
  void PollOnce(int timeout_ms) {
    pollfd p[3] = {{sigfd_, POLLIN, 0}, {-1, POLLIN, 0}, {-1, POLLIN, 0}};
    nfds_t n = 1;
    for (int fd : pipes_) {
      if (fd >= 0) p[n++] = {fd, POLLIN, 0};
    }
    const int64_t flush = pump_.next_flush_ms();
    if (flush >= 0) {
      timeout_ms = static_cast<int>(std::clamp<int64_t>(flush - NowMs(), 0, timeout_ms));
    }
    poll(p, n, timeout_ms);
    Drain();
  }

  // Step 3.
  void Wait() {
    while (!main_done_) {
      int timeout = 1000;  // periodic checks; sooner when a kill is due
      if (stopping_) {
        timeout = static_cast<int>(std::clamp<int64_t>(kill_at_ - NowMs(), 0, 1000));
      }
      PollOnce(timeout);
      for (;;) {
        signalfd_siginfo si{};
        if (read(sigfd_, &si, sizeof(si)) != sizeof(si)) break;
        if (si.ssi_signo == SIGTERM) Stop(false);
        if (si.ssi_signo == SIGUSR1) Stop(true);
      }
      Reap();
      const int64_t now = NowMs();
      if (stopping_ && now >= kill_at_) Signal(SIGKILL);
      if (!stopping_ && spec_.walltime_ms > 0 && now >= started_ms_ + spec_.walltime_ms) {
        Stop(true);
      }
      if (!stopping_ && spec_.orphan_timeout_ms > 0) {
        struct stat st {};
        int64_t heard = started_ms_;
        if (!spec_.heartbeat_path.empty() && stat(spec_.heartbeat_path.c_str(), &st) == 0) {
          heard = std::max<int64_t>(
              heard, static_cast<int64_t>(st.st_mtim.tv_sec) * 1000 + st.st_mtim.tv_nsec / 1000000);
        }
        if (now - heard > spec_.orphan_timeout_ms) {
          Log("job %s: the executor is gone (no heartbeat for %s ms): stopping the task",
              std::to_string(spec_.job), std::to_string(now - heard));
          record_.orphaned = true;
          Stop(false);
        }
      }
    }
  }

  void Stop(bool timed_out) {
    if (timed_out) record_.timed_out = true;
    if (stopping_) return;
    stopping_ = true;
    kill_at_ = NowMs() + std::max<int64_t>(0, spec_.grace_ms);
    Signal(SIGTERM);
  }

  // Sends `sig` to every process of the task: its group, its cgroups' members, every descendant.
  // A stop's SIGTERM spares the first process when the spec says so (stop_spares_main), unless it
  // is alone (nothing else of the task started yet).
  void Signal(int sig) {
    if (sig == SIGTERM && spec_.stop_spares_main && main_ > 0) {
      std::vector<pid_t> others;
      for (pid_t p : CgroupMembers(spec_.cgroup_dirs)) {
        if (p != main_) others.push_back(p);
      }
      for (pid_t p : Descendants()) {
        if (p != main_) others.push_back(p);
      }
      if (!others.empty()) {
        for (pid_t p : others) ::kill(p, sig);
        return;
      }
    }
    if (main_ > 0) ::kill(-main_, sig);
    if (sig == SIGKILL) {
      for (const std::string& dir : spec_.cgroup_dirs) {
        const int fd = ::open((dir + "/cgroup.kill").c_str(), O_WRONLY | O_CLOEXEC);
        if (fd >= 0) {
          (void)!::write(fd, "1", 1);
          ::close(fd);
        }
      }
    }
    for (pid_t p : CgroupMembers(spec_.cgroup_dirs)) ::kill(p, sig);
    for (pid_t p : Descendants()) ::kill(p, sig);
  }

  void Reap() {
    for (;;) {
      int status = 0;
      const pid_t r = waitpid(-1, &status, WNOHANG);
      if (r <= 0) return;
      if (r == main_) {
        main_done_ = true;
        record_.code = WIFEXITED(status) ? WEXITSTATUS(status)
                                         : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
      }
    }
  }

  // Step 4: nothing of the task outlives it.
  int Finish() {
    for (int round = 0; round < 500; ++round) {
      Signal(SIGKILL);
      Reap();
      Drain();
      if (Descendants().empty() && CgroupMembers(spec_.cgroup_dirs).empty()) break;
      usleep(10000);
    }
    while (waitpid(-1, nullptr, WNOHANG) > 0) {
    }
    FinishOutput();
    Cleanup();
    if (!spec_.exit_path.empty() && !WriteAtomically(spec_.exit_path, EncodeExitRecord(record_))) {
      Log("cannot write %s: %s", spec_.exit_path, std::strerror(errno));
      return 1;
    }
    return 0;
  }

  // The cleanup command, bounded (a minute): it runs outside the task's groups' reach, as ours.
  void Cleanup() {
    if (spec_.cleanup_argv.empty()) return;
    std::vector<char*> argv;
    for (std::string& a : spec_.cleanup_argv) argv.push_back(a.data());
    argv.push_back(nullptr);
    std::vector<char*> envp;
    for (std::string& e : spec_.env) envp.push_back(e.data());
    envp.push_back(nullptr);
    const pid_t pid = fork();
    if (pid == 0) {
      sigset_t none;
      sigemptyset(&none);
      sigprocmask(SIG_SETMASK, &none, nullptr);
      const int in = ::open("/dev/null", O_RDWR | O_CLOEXEC);
      if (in >= 0) {
        dup2(in, STDIN_FILENO);
        dup2(in, STDOUT_FILENO);
      }
      environ = envp.data();
      execvp(argv[0], argv.data());
      _exit(127);
    }
    if (pid < 0) return;
    const int64_t until = NowMs() + 60000;
    for (;;) {
      int status = 0;
      const pid_t r = waitpid(pid, &status, WNOHANG);
      if (r == pid || (r < 0 && errno != EINTR)) break;
      if (NowMs() > until) {
        ::kill(pid, SIGKILL);
        waitpid(pid, nullptr, 0);
        break;
      }
      usleep(20000);
    }
    while (waitpid(-1, nullptr, WNOHANG) > 0) {
    }
  }

  // The task's processes are gone: the rest of its output is in the pipes. (A process outside the
  // task that was handed a write end could hold a pipe open: it is waited for a second at most.)
  void FinishOutput() {
    const int64_t until = NowMs() + 1000;
    while ((pipes_[0] >= 0 || pipes_[1] >= 0) && NowMs() < until) {
      PollOnce(static_cast<int>(std::max<int64_t>(0, until - NowMs())));
    }
    for (int s = 0; s < 2; ++s) {
      if (pipes_[s] >= 0) close(pipes_[s]);
      pipes_[s] = -1;
      pump_.End(static_cast<LogPump::Stream>(s));
    }
    if (pump_.lost_bytes() > 0) {
      Log("job %s: %s bytes of the task's output could not be written to its logs",
          std::to_string(spec_.job), std::to_string(pump_.lost_bytes()));
    }
    for (int* fd : {&out_fd_, &err_fd_, &log_fd_}) {
      if (*fd >= 0) close(*fd);
      *fd = -1;
    }
  }

  static constexpr int kPipeBytes = 1 << 20;

  ShimSpec spec_;
  ExitRecord record_;
  int out_fd_ = -1;  // the log files
  int err_fd_ = -1;
  int log_fd_ = -1;
  int pipes_[2] = {-1, -1};  // the read ends of the task's stdout and stderr (-1: closed)
  LogPump pump_{-1, -1, -1};
  int sigfd_ = -1;
  pid_t main_ = -1;
  bool main_done_ = false;
  bool stopping_ = false;
  int64_t kill_at_ = 0;
  int64_t started_ms_ = 0;
};

}  // namespace
}  // namespace arbiter::exec

int main(int argc, char** argv) {
  using namespace arbiter::exec;
  const int fd = argc > 1 ? std::atoi(argv[1]) : 3;
  std::string text;
  if (fd < 0 || !ReadAll(fd, &text)) {
    std::fprintf(stderr, "arbiter-shim: cannot read the task's spec from fd %d\n", fd);
    return 2;
  }
  ::close(fd);
  ShimSpec spec;
  std::string error;
  if (!DecodeShimSpec(text, &spec, &error)) {
    std::fprintf(stderr, "arbiter-shim: bad spec: %s\n", error.c_str());
    return 2;
  }
  return Shim(std::move(spec)).Run();
}

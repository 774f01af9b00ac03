// The real arbiter-shim binary, given specs as the executor gives them.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "exec/shim_spec.h"
#include "testing/temp_dir.h"

namespace arbiter::exec {
namespace {

using Clock = std::chrono::steady_clock;

std::string Read(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

bool Alive(pid_t pid) {
  const std::string stat = Read("/proc/" + std::to_string(pid) + "/stat");
  const size_t paren = stat.rfind(')');
  return paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] != 'Z';
}

class ShimTest : public ::testing::Test {
 protected:
  ShimSpec Spec(std::vector<std::string> argv) {
    ShimSpec s;
    s.job = 1;
    s.attempt = 1;
    s.argv = std::move(argv);
    s.env = {"PATH=/usr/bin:/bin", "MARK=shim-test"};
    s.cwd = dir_.path();
    s.stdout_path = dir_.File("out");
    s.stderr_path = dir_.File("err");
    s.log_path = dir_.File("log");
    s.runs_path = dir_.File("runs");
    s.pid_path = dir_.File("pid");
    s.exit_path = dir_.File("exit");
    s.grace_ms = 300;
    return s;
  }

  // Starts the shim with `s` on its fd 3.
  pid_t Start(const ShimSpec& s) {
    int fds[2];
    EXPECT_EQ(pipe(fds), 0);
    const pid_t pid = fork();
    if (pid == 0) {
      close(fds[1]);
      if (fds[0] != 3) {
        dup2(fds[0], 3);
        close(fds[0]);
      }
      execl(ARBITER_SHIM_BINARY, "arbiter-shim", "3", nullptr);
      _exit(127);
    }
    close(fds[0]);
    const std::string text = EncodeShimSpec(s);
    EXPECT_EQ(write(fds[1], text.data(), text.size()), static_cast<ssize_t>(text.size()));
    close(fds[1]);
    return pid;
  }

  // Waits (bounded) for the shim to end; its exit record.
  ExitRecord Wait(pid_t pid, int seconds = 20) {
    const auto until = Clock::now() + std::chrono::seconds(seconds);
    int status = 0;
    while (waitpid(pid, &status, WNOHANG) == 0) {
      if (Clock::now() > until) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        ADD_FAILURE() << "the shim did not end within " << seconds << " s";
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
    ExitRecord r;
    EXPECT_TRUE(DecodeExitRecord(Read(dir_.File("exit")), &r)) << Read(dir_.File("exit"));
    return r;
  }

  testing::TempDir dir_{"shim-test"};
};

// The task sees only the environment it was given, starts in its folder, and its exit code is
// recorded; the pid file names the shim.
TEST_F(ShimTest, RunsTheTaskWithOnlyItsEnvironment) {
  ShimSpec s = Spec({"/bin/sh", "-c", "/usr/bin/env; pwd; exit 3"});
  const pid_t pid = Start(s);
  const ExitRecord r = Wait(pid);
  EXPECT_EQ(r.code, 3);
  EXPECT_FALSE(r.timed_out || r.orphaned || r.failed_to_start);
  const std::string out = Read(dir_.File("out"));
  EXPECT_NE(out.find("MARK=shim-test\n"), std::string::npos) << out;
  EXPECT_EQ(out.find("HOME="), std::string::npos) << out;  // nothing of the test's environment
  EXPECT_NE(out.find(dir_.path() + "\n"), std::string::npos) << out;
  PidRecord p;
  ASSERT_TRUE(DecodePidRecord(Read(dir_.File("pid")), &p));
  EXPECT_EQ(p.pid, pid);
  EXPECT_EQ(p.attempt, 1u);
  struct stat st {};
  ASSERT_EQ(stat(dir_.File("out").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

// Processes that left the task's process group and session die with the task.
TEST_F(ShimTest, EscapedProcessesDieWithTheTask) {
  ShimSpec s = Spec({"/bin/sh", "-c",
                     "setsid sleep 4242.1 & echo $! > escaped; (sleep 4242.2 &); "
                     "sh -c 'setsid sh -c \"sleep 4242.3\" &'; sleep 0.2; exit 0"});
  const pid_t pid = Start(s);
  EXPECT_EQ(Wait(pid).code, 0);
  pid_t escaped = 0;
  std::ifstream(dir_.File("escaped")) >> escaped;
  ASSERT_GT(escaped, 1);
  EXPECT_FALSE(Alive(escaped));
  // Nothing of the task is left anywhere (the markers are unique to this test).
  const std::string ps = [] {
    std::string all;
    for (const char* arg : {"sleep 4242.1", "sleep 4242.2", "sleep 4242.3"}) {
      const std::string cmd = std::string("pgrep -f '^") + arg + "$' || true";
      FILE* p = popen(cmd.c_str(), "r");
      char buf[256];
      while (p != nullptr && fgets(buf, sizeof(buf), p) != nullptr) all += buf;
      if (p != nullptr) pclose(p);
    }
    return all;
  }();
  EXPECT_EQ(ps, "");
}

// SIGTERM reaches every process of the task; one that ignores it is killed after the grace.
TEST_F(ShimTest, StopSendsTermThenKillsAfterTheGrace) {
  ShimSpec s = Spec({"/bin/sh", "-c",
                     "trap '' TERM; setsid sh -c \"trap '' TERM; sleep 1000\" & "
                     "echo ready > ready; while true; do sleep 0.05; done"});
  const pid_t pid = Start(s);
  for (int i = 0; i < 400 && Read(dir_.File("ready")).empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const auto stopped = Clock::now();
  kill(pid, SIGTERM);
  const ExitRecord r = Wait(pid);
  const auto took =
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - stopped).count();
  EXPECT_EQ(r.code, 137);  // SIGKILL: it ignored SIGTERM
  EXPECT_FALSE(r.timed_out);
  EXPECT_GE(took, 250);
  EXPECT_LT(took, 5000);
}

// A first process that forwards a stop to its child and, finding the child already ended, dies of
// the signal itself, as `podman run` does: a stop that spares it records the child's own exit
// code; one that does not, the forwarder's 143.
TEST_F(ShimTest, StopThatSparesTheFirstProcessKeepsTheChildsExitCode) {
  const std::vector<std::string> argv = {
      "/bin/sh", "-c",
      "trap 'exit 143' TERM; "
      "sh -c \"trap 'exit 5' TERM; echo ready > ready; while true; do sleep 0.05; done\" & "
      "wait $!; exit $?"};
  for (const bool spare : {true, false}) {
    std::filesystem::remove(dir_.File("ready"));
    ShimSpec s = Spec(argv);
    s.stop_spares_main = spare;
    s.grace_ms = 5000;
    const pid_t pid = Start(s);
    for (int i = 0; i < 400 && Read(dir_.File("ready")).empty(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    kill(pid, SIGTERM);
    EXPECT_EQ(Wait(pid).code, spare ? 5 : 143) << "spare " << spare;
  }
  // Alone (its child not started yet), the first process gets the stop itself.
  ShimSpec alone = Spec({"/bin/sh", "-c",
                         "trap 'exit 7' TERM; echo ready > ready; "
                         "while true; do :; done"});
  std::filesystem::remove(dir_.File("ready"));
  alone.stop_spares_main = true;
  const pid_t pid = Start(alone);
  for (int i = 0; i < 400 && Read(dir_.File("ready")).empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  kill(pid, SIGTERM);
  EXPECT_EQ(Wait(pid).code, 7);
}

// SIGUSR1 is a stop at the walltime: recorded as timed out.
TEST_F(ShimTest, WalltimeStopIsRecordedAsTimedOut) {
  const pid_t pid = Start(Spec({"/bin/sleep", "1000"}));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  kill(pid, SIGUSR1);
  const ExitRecord r = Wait(pid);
  EXPECT_TRUE(r.timed_out);
  EXPECT_EQ(r.code, 128 + SIGTERM);
  // And the backstop walltime, with no executor to say so.
  ShimSpec s = Spec({"/bin/sleep", "1000"});
  s.walltime_ms = 300;
  EXPECT_TRUE(Wait(Start(s)).timed_out);
}

// Without its executor's heartbeat for the orphan timeout, the task is stopped.
TEST_F(ShimTest, OrphanedTaskStopsWhenItsExecutorIsGone) {
  ShimSpec s = Spec({"/bin/sleep", "1000"});
  s.heartbeat_path = dir_.File("heartbeat");
  std::ofstream(s.heartbeat_path) << "";
  s.orphan_timeout_ms = 1500;
  const auto started = Clock::now();
  const ExitRecord r = Wait(Start(s));
  EXPECT_TRUE(r.orphaned);
  const auto took =
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - started).count();
  EXPECT_GE(took, 1400);
}

TEST_F(ShimTest, ProgramThatCannotRunIsAFailedStart) {
  const ExitRecord r = Wait(Start(Spec({"/no/such/program"})));
  EXPECT_TRUE(r.failed_to_start);
  EXPECT_EQ(r.code, 127);
  EXPECT_NE(Read(dir_.File("err")).find("cannot run /no/such/program"), std::string::npos);
  ShimSpec s = Spec({"/bin/true"});
  s.cwd = dir_.File("missing");
  const ExitRecord bad_cwd = Wait(Start(s));
  EXPECT_TRUE(bad_cwd.failed_to_start);
  EXPECT_EQ(bad_cwd.code, 126);
}

// The task's stdout and stderr come to the shim through pipes: each in its own file, and both in
// the combined log in the order the task wrote them.
TEST_F(ShimTest, OutputIsKeptInTheOrderItWasWritten) {
  const pid_t pid = Start(Spec({"/bin/sh", "-c",
                                "echo out1; sleep 0.1; echo err1 >&2; sleep 0.1; echo out2; "
                                "printf 'err2 ' >&2; echo out3; printf 'no newline' >&2"}));
  EXPECT_EQ(Wait(pid).code, 0);
  // err2's line waited for its end, which never came: it was written when its stream ended;
  // out3, written while it waited, came first.
  EXPECT_EQ(Read(dir_.File("log")), "out1\nerr1\nout2\nout3\nerr2 no newline");
  EXPECT_EQ(Read(dir_.File("out")), "out1\nout2\nout3\n");
  EXPECT_EQ(Read(dir_.File("err")), "err1\nerr2 no newline");
  struct stat st {};
  ASSERT_EQ(stat(dir_.File("log").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  // The run's start is in the run index, before anything it wrote.
  EXPECT_EQ(DecodeRunIndex(Read(dir_.File("runs"))), (std::vector<RunStart>{{1, 0, 0, 0}}));
  ShimSpec again = Spec({"/bin/sh", "-c", "echo second"});
  again.attempt = 2;
  EXPECT_EQ(Wait(Start(again)).code, 0);
  EXPECT_EQ(DecodeRunIndex(Read(dir_.File("runs"))),
            (std::vector<RunStart>{{1, 0, 0, 0}, {2, 15, 20, 35}}));
}

// Much output on both streams at once (more than a pipe holds), binary included, arrives whole:
// the shim reads both as they fill.
TEST_F(ShimTest, LargeAndBinaryOutputArrivesWhole) {
  const pid_t pid = Start(Spec(
      {"/bin/sh", "-c",
       "head -c 3000000 /dev/urandom > data; cat data; cat data >&2; cat data; echo end >&2"}));
  EXPECT_EQ(Wait(pid).code, 0);
  const std::string data = Read(dir_.File("data"));
  ASSERT_EQ(data.size(), 3000000u);
  EXPECT_TRUE(Read(dir_.File("out")) == data + data);
  EXPECT_TRUE(Read(dir_.File("err")) == data + "end\n");
  EXPECT_EQ(Read(dir_.File("log")).size(), 3 * data.size() + 4);
}

// While the shim is stopped (slow), the task goes on writing: its output waits in the pipe, not
// the task; nothing of it is lost.
TEST_F(ShimTest, ATaskDoesNotWaitForASlowShim) {
  const pid_t pid = Start(Spec({"/bin/sh", "-c",
                                "touch started; while [ ! -f go ]; do sleep 0.01; done; "
                                "head -c 500000 /dev/zero; echo wrote > wrote; sleep 0.2"}));
  for (int i = 0; i < 400 && !std::filesystem::exists(dir_.File("started")); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(kill(pid, SIGSTOP), 0);
  std::ofstream(dir_.File("go")) << "";
  bool wrote = false;
  for (int i = 0; i < 500 && !wrote; ++i) {
    wrote = !Read(dir_.File("wrote")).empty();
    if (!wrote) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  kill(pid, SIGCONT);
  EXPECT_TRUE(wrote) << "the task waited for the stopped shim";
  EXPECT_EQ(Wait(pid).code, 0);
  EXPECT_EQ(Read(dir_.File("out")).size(), 500000u);
}

// A task that closes its stdout early keeps its stderr; one whose processes left a pipe open
// behind it ends all the same.
TEST_F(ShimTest, ClosedAndInheritedStreams) {
  const pid_t pid =
      Start(Spec({"/bin/sh", "-c", "exec 1>&-; sleep 0.2; echo still here >&2; exit 4"}));
  EXPECT_EQ(Wait(pid).code, 4);
  EXPECT_EQ(Read(dir_.File("log")), "still here\n");
  const pid_t left = Start(Spec({"/bin/sh", "-c", "(sleep 30; echo late) & echo gone"}));
  const auto started = Clock::now();
  EXPECT_EQ(Wait(left).code, 0);
  EXPECT_LT(Clock::now() - started, std::chrono::seconds(10));
  EXPECT_EQ(Read(dir_.File("out")), "gone\n");
}

// As root: the task runs as the user it names, with no way back (no new privileges).
TEST_F(ShimTest, TaskRunsAsItsUserWithoutNewPrivileges) {
  if (geteuid() != 0) GTEST_SKIP() << "switching users needs root";
  chmod(dir_.path().c_str(), 0777);
  ShimSpec s = Spec({"/bin/sh", "-c",
                     "id -u; id -g; id -G; grep NoNewPrivs /proc/self/status; "
                     "cat /proc/1/environ >/dev/null 2>&1 && echo read-init || echo denied"});
  s.uid = 65534;
  s.gid = 65534;
  s.groups = {65534};
  const ExitRecord r = Wait(Start(s));
  EXPECT_EQ(r.code, 0);
  EXPECT_EQ(Read(dir_.File("out")), "65534\n65534\n65534\nNoNewPrivs:\t1\ndenied\n");
}

}  // namespace
}  // namespace arbiter::exec

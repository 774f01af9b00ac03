#include "exec/shim_spec.h"

#include <gtest/gtest.h>
#include <unistd.h>

namespace arbiter::exec {
namespace {

TEST(ShimSpecTest, RoundTripsEveryField) {
  ShimSpec s;
  s.job = 42;
  s.task = 3;
  s.attempt = 7;
  s.argv = {"sh", "-c", "echo 'a b'\nnext line"};
  s.env = {"A=1", "B=with\nnewline", "EMPTY="};
  s.cwd = "/work/42";
  s.uid = 200001;
  s.gid = 200002;
  s.groups = {200002, 27};
  s.no_new_privs = false;
  s.stdout_path = "/w/jobs/42/task-3.out";
  s.stderr_path = "/w/jobs/42/task-3.err";
  s.cgroup_procs = {"/sys/fs/cgroup/a/cgroup.procs", "/sys/fs/cgroup/pids/a/cgroup.procs"};
  s.cgroup_dirs = {"/sys/fs/cgroup/a"};
  s.rlimit_nproc = 4096;
  s.grace_ms = 1500;
  s.walltime_ms = 60000;
  s.orphan_timeout_ms = 6000;
  s.heartbeat_path = "/w/jobs/executor.heartbeat";
  s.pid_path = "/w/jobs/42/task-3.pid";
  s.exit_path = "/w/jobs/42/task-3.exit";
  ShimSpec back;
  std::string error;
  ASSERT_TRUE(DecodeShimSpec(EncodeShimSpec(s), &back, &error)) << error;
  EXPECT_EQ(back.job, 42u);
  EXPECT_EQ(back.task, 3);
  EXPECT_EQ(back.attempt, 7u);
  EXPECT_EQ(back.argv, s.argv);
  EXPECT_EQ(back.env, s.env);
  EXPECT_EQ(back.cwd, s.cwd);
  EXPECT_EQ(back.uid, 200001);
  EXPECT_EQ(back.gid, 200002);
  EXPECT_EQ(back.groups, s.groups);
  EXPECT_FALSE(back.no_new_privs);
  EXPECT_EQ(back.stdout_path, s.stdout_path);
  EXPECT_EQ(back.stderr_path, s.stderr_path);
  EXPECT_EQ(back.cgroup_procs, s.cgroup_procs);
  EXPECT_EQ(back.cgroup_dirs, s.cgroup_dirs);
  EXPECT_EQ(back.rlimit_nproc, 4096);
  EXPECT_EQ(back.grace_ms, 1500);
  EXPECT_EQ(back.walltime_ms, 60000);
  EXPECT_EQ(back.orphan_timeout_ms, 6000);
  EXPECT_EQ(back.heartbeat_path, s.heartbeat_path);
  EXPECT_EQ(back.pid_path, s.pid_path);
  EXPECT_EQ(back.exit_path, s.exit_path);
  EXPECT_FALSE(back.stop_spares_main);
  // Written only when set: a spec without it reads as it did before.
  EXPECT_EQ(EncodeShimSpec(s).find("stop_spares_main"), std::string::npos);
  s.stop_spares_main = true;
  ASSERT_TRUE(DecodeShimSpec(EncodeShimSpec(s), &back, &error)) << error;
  EXPECT_TRUE(back.stop_spares_main);
}

// A spec from another build is refused whole, never half understood.
TEST(ShimSpecTest, RefusesUnknownTruncatedAndEmpty) {
  ShimSpec s;
  s.argv = {"true"};
  const std::string text = EncodeShimSpec(s);
  ShimSpec out;
  std::string error;
  EXPECT_FALSE(DecodeShimSpec("colour 3\nred\n" + text, &out, &error));
  EXPECT_NE(error.find("unknown record colour"), std::string::npos) << error;
  EXPECT_FALSE(DecodeShimSpec(text.substr(0, text.size() / 2), &out, &error));
  EXPECT_FALSE(DecodeShimSpec("", &out, &error));
  ShimSpec none;
  EXPECT_FALSE(DecodeShimSpec(EncodeShimSpec(none), &out, &error));
  EXPECT_NE(error.find("no program"), std::string::npos);
  EXPECT_FALSE(DecodeShimSpec("uid 3\nabc\nend 0\n\n", &out, &error));
}

TEST(ShimSpecTest, ExitAndPidRecords) {
  ExitRecord r;
  r.code = 137;
  r.timed_out = true;
  ExitRecord back;
  ASSERT_TRUE(DecodeExitRecord(EncodeExitRecord(r), &back));
  EXPECT_EQ(back.code, 137);
  EXPECT_TRUE(back.timed_out);
  EXPECT_FALSE(back.orphaned);
  EXPECT_FALSE(DecodeExitRecord("", &back));
  PidRecord p;
  const std::string self =
      std::to_string(getpid()) + " 9 " + ProcessStartTime(getpid()) + " " + BootId();
  ASSERT_TRUE(DecodePidRecord(self, &p));
  EXPECT_TRUE(p.has_attempt);
  EXPECT_EQ(p.attempt, 9u);
  EXPECT_TRUE(PidRecordAlive(p));
  // The same pid with another start time is another process.
  p.start_time = "1";
  EXPECT_FALSE(PidRecordAlive(p));
  PidRecord other_boot;
  ASSERT_TRUE(DecodePidRecord(std::to_string(getpid()) + " 9 x another-boot", &other_boot));
  EXPECT_FALSE(PidRecordAlive(other_boot));
}

}  // namespace
}  // namespace arbiter::exec

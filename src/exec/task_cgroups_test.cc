#include "exec/task_cgroups.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "testing/temp_dir.h"

namespace arbiter::exec {
namespace {

std::string Read(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

void Write(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

// A machine with cgroup v2 beside v1 controllers (a hybrid hierarchy), as fake files: the
// hierarchies found, where our groups go, and the limits written for a task.
TEST(TaskCgroupsTest, HybridTreeGetsV2TrackingAndV1Limits) {
  testing::TempDir root("cgroup-tree");
  const std::string r = root.path();
  for (const char* d : {"unified/svc", "pids/svc", "memory/svc", "cpu/svc", "devices/svc"}) {
    std::filesystem::create_directories(r + "/" + d);
  }
  Write(r + "/unified/svc/cgroup.controllers", "");  // v2 without controllers: tracking only
  Write(r + "/mountinfo", "41 31 0:38 / " + r + "/unified rw - cgroup2 cgroup2 rw\n" +
                              "39 31 0:36 / " + r + "/pids rw - cgroup cgroup rw,pids\n" +
                              "35 31 0:32 / " + r + "/memory rw - cgroup cgroup rw,memory\n" +
                              "32 31 0:29 / " + r + "/cpu rw - cgroup cgroup rw,cpu,cpuacct\n" +
                              "36 31 0:33 / " + r + "/devices rw - cgroup cgroup rw,devices\n");
  Write(r + "/self", "0::/svc\n8:pids:/svc\n4:memory:/svc\n1:cpu,cpuacct:/svc\n5:devices:/svc\n");
  CgroupOptions o;
  o.scope = "gpu-07-1234";
  o.mountinfo = r + "/mountinfo";
  o.self_cgroup = r + "/self";
  std::string status;
  auto cg = TaskCgroups::Setup(o, &status);
  ASSERT_NE(cg, nullptr) << status;
  EXPECT_NE(status.find("v2 " + r + "/unified/svc/arbiter/gpu-07-1234 (tracking"),
            std::string::npos)
      << status;
  EXPECT_NE(status.find("v1 pids"), std::string::npos) << status;
  EXPECT_TRUE(cg->limits_processes());
  TaskLimitSpec spec;
  spec.cpu_milli = 1500;
  spec.memory_mib = 2048;
  spec.pids_max = 512;
  spec.deny_devices = {{195, 1}, {195, 3}};
  const TaskGroups g = cg->Prepare(7, 1, spec);
  const std::string task = "/arbiter/gpu-07-1234/task-7-1";
  EXPECT_EQ(Read(r + "/pids/svc" + task + "/pids.max"), "512");
  EXPECT_EQ(Read(r + "/memory/svc" + task + "/memory.limit_in_bytes"),
            std::to_string(int64_t{2048} * 1024 * 1024));
  EXPECT_EQ(Read(r + "/cpu/svc" + task + "/cpu.cfs_quota_us"), "150000");
  EXPECT_EQ(Read(r + "/cpu/svc" + task + "/cpu.cfs_period_us"), "100000");
  EXPECT_EQ(Read(r + "/devices/svc" + task + "/devices.deny"), "c 195:3 rwm");  // the last one
  EXPECT_TRUE(g.pids_limited);
  EXPECT_TRUE(g.devices_isolated);
  EXPECT_EQ(g.procs_files.size(), 5u);
  EXPECT_EQ(g.procs_files.front(), r + "/unified/svc" + task + "/cgroup.procs");
  EXPECT_EQ(cg->Dirs(7, 1).size(), 5u);
}

// A v2 group whose controllers are delegated: this process moves into a leaf, the controllers
// are enabled down to the task groups, and the limits are v2's.
TEST(TaskCgroupsTest, DelegatedV2EnablesControllersForTaskGroups) {
  testing::TempDir root("cgroup-v2");
  const std::string r = root.path();
  std::filesystem::create_directories(r + "/system.slice/agent.service");
  Write(r + "/system.slice/agent.service/cgroup.controllers", "cpuset cpu io memory pids\n");
  Write(r + "/mountinfo", "30 23 0:26 / " + r + " rw - cgroup2 cgroup2 rw\n");
  Write(r + "/self", "0::/system.slice/agent.service\n");
  CgroupOptions o;
  o.scope = "n1";
  o.mountinfo = r + "/mountinfo";
  o.self_cgroup = r + "/self";
  o.leaf = "agent";
  std::string status;
  auto cg = TaskCgroups::Setup(o, &status);
  ASSERT_NE(cg, nullptr) << status;
  const std::string svc = r + "/system.slice/agent.service";
  EXPECT_EQ(Read(svc + "/agent/cgroup.procs"), std::to_string(getpid()));
  EXPECT_EQ(Read(svc + "/cgroup.subtree_control"), "+cpu +memory +pids");
  EXPECT_EQ(Read(svc + "/arbiter/n1/cgroup.subtree_control"), "+cpu +memory +pids");
  TaskLimitSpec spec;
  spec.cpu_milli = 500;
  spec.memory_mib = 64;
  spec.pids_max = 100;
  cg->Prepare(3, 0, spec);
  EXPECT_EQ(Read(svc + "/arbiter/n1/task-3-0/cpu.max"), "50000 100000");
  EXPECT_EQ(Read(svc + "/arbiter/n1/task-3-0/memory.max"), std::to_string(64 * 1024 * 1024));
  EXPECT_EQ(Read(svc + "/arbiter/n1/task-3-0/pids.max"), "100");
}

TEST(TaskCgroupsTest, NoHierarchyIsUnavailableWithTheReason) {
  testing::TempDir root("cgroup-none");
  Write(root.File("mountinfo"), "22 1 0:21 / /proc rw - proc proc rw\n");
  Write(root.File("self"), "");
  CgroupOptions o;
  o.scope = "x";
  o.mountinfo = root.File("mountinfo");
  o.self_cgroup = root.File("self");
  std::string status;
  EXPECT_EQ(TaskCgroups::Setup(o, &status), nullptr);
  EXPECT_EQ(status.rfind("unavailable: ", 0), 0u) << status;
}

// On this machine's real cgroups (as root): a task's process limit holds, a denied GPU device
// cannot be opened while an allowed one can, and Release kills what is left.
TEST(TaskCgroupsTest, RealGroupsLimitProcessesDenyDevicesAndKill) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root";
  CgroupOptions o;
  o.scope = "unit-test-" + std::to_string(getpid());
  std::string status;
  auto cg = TaskCgroups::Setup(o, &status);
  if (cg == nullptr) GTEST_SKIP() << status;
  testing::TempDir dir("cgroup-real");
  // Two character devices nothing drives: opening an allowed one fails with ENXIO, a denied one
  // with EPERM, before any driver is asked.
  ASSERT_EQ(mknod(dir.File("gpu0").c_str(), S_IFCHR | 0666, makedev(240, 0)), 0);
  ASSERT_EQ(mknod(dir.File("gpu1").c_str(), S_IFCHR | 0666, makedev(240, 1)), 0);
  TaskLimitSpec spec;
  spec.pids_max = 8;
  spec.deny_devices = {{240, 0}};
  const TaskGroups g = cg->Prepare(1, 0, spec);
  for (const std::string& w : g.warnings) ADD_FAILURE() << w;
  ASSERT_TRUE(g.devices_isolated);
  int report[2];
  ASSERT_EQ(pipe(report), 0);
  const pid_t child = fork();
  if (child == 0) {
    for (const std::string& p : g.procs_files) {
      const int fd = open(p.c_str(), O_WRONLY);
      if (fd < 0 || write(fd, "0", 1) != 1) _exit(90);
      close(fd);
    }
    int denied = open(dir.File("gpu0").c_str(), O_RDWR);
    const int denied_errno = errno;
    int allowed = open(dir.File("gpu1").c_str(), O_RDWR);
    const int allowed_errno = errno;
    int forked = 0;
    for (int i = 0; i < 20; ++i) {
      const pid_t p = fork();
      if (p == 0) {
        pause();
        _exit(0);
      }
      if (p > 0) ++forked;
    }
    const std::string msg = std::to_string(denied < 0 ? denied_errno : 0) + " " +
                            std::to_string(allowed < 0 ? allowed_errno : 0) + " " +
                            std::to_string(forked) + "\n";
    (void)!write(report[1], msg.data(), msg.size());
    pause();
    _exit(0);
  }
  close(report[1]);
  char buf[64] = {0};
  ASSERT_GT(read(report[0], buf, sizeof(buf) - 1), 0);
  close(report[0]);
  int denied_errno = 0, allowed_errno = 0, forked = 0;
  std::istringstream(buf) >> denied_errno >> allowed_errno >> forked;
  EXPECT_EQ(denied_errno, EPERM);
  EXPECT_EQ(allowed_errno, ENXIO);
  if (g.pids_limited) {
    EXPECT_LT(forked, 8);  // the first process and at most 7 more
  }
  cg->Release(1, 0);
  int wstatus = 0;
  EXPECT_EQ(waitpid(child, &wstatus, 0), child);
  EXPECT_TRUE(WIFSIGNALED(wstatus) && WTERMSIG(wstatus) == SIGKILL);
  EXPECT_TRUE(cg->Dirs(1, 0).empty());
  for (const TaskCgroups::Hierarchy& h : cg->hierarchies()) {
    std::filesystem::remove(h.base);  // the test's own scope
  }
}

}  // namespace
}  // namespace arbiter::exec

#include "agent/cgroups.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace arbiter::agent {
namespace {

std::string Read(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// A folder that is not a cgroup v2 mount: unavailable, with the reason, and no limits.
TEST(Cgroups, NotCgroup2IsUnavailableWithTheReason) {
  const std::string dir = std::filesystem::temp_directory_path().string();
  std::string status;
  auto limits = CgroupLimits::Setup(dir, &status);
  EXPECT_EQ(limits, nullptr);
  EXPECT_EQ(status.rfind("unavailable: ", 0), 0u) << status;
  EXPECT_NE(status.find("not a cgroup v2 mount"), std::string::npos) << status;
}

// What the machine offers: either limits, or a reason (this never fails the agent).
TEST(Cgroups, SystemRootSaysWhatItIs) {
  std::string status;
  auto limits = CgroupLimits::Setup("/sys/fs/cgroup", &status);
  if (limits == nullptr) {
    EXPECT_EQ(status.rfind("unavailable: ", 0), 0u) << status;
  } else {
    EXPECT_EQ(status.rfind("v2: ", 0), 0u) << status;
  }
}

// The limits of a task as cpu.max ("QUOTA PERIOD", microseconds) and memory.max (bytes).
TEST(Cgroups, PrepareWritesCpuAndMemoryLimits) {
  std::string tmpl = (std::filesystem::temp_directory_path() / "cgroup-test-XXXXXX").string();
  const std::string base = mkdtemp(tmpl.data());
  CgroupLimits limits(base);
  const std::string procs = limits.Prepare(7, 1, 1500, 2048);
  EXPECT_EQ(procs, base + "/task-7-1/cgroup.procs");
  EXPECT_EQ(Read(base + "/task-7-1/cpu.max"), "150000 100000");
  EXPECT_EQ(Read(base + "/task-7-1/memory.max"), std::to_string(int64_t{2048} * 1024 * 1024));
  // No request, no limit written.
  limits.Prepare(8, 0, 0, 0);
  EXPECT_FALSE(std::filesystem::exists(base + "/task-8-0/cpu.max"));
  std::filesystem::remove_all(base);
}

}  // namespace
}  // namespace arbiter::agent

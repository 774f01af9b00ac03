#include "node/gpu/fake_gpus.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

namespace arbiter::node {
namespace {

TEST(FakeGpus, DiscoverListsEveryGpuWithModelMemoryAndIslands) {
  FakeGpus gpus(8, "A100-80G", 81920);
  const auto found = gpus.Discover();
  ASSERT_EQ(found.size(), 8u);
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(found[i].index, i);
    EXPECT_EQ(found[i].model, "A100-80G");
    EXPECT_EQ(found[i].memory_mib, 81920);
    EXPECT_TRUE(found[i].healthy);
    EXPECT_EQ(found[i].nvlink_domain, i / 4);
    EXPECT_FALSE(found[i].uuid.empty());
  }
  EXPECT_NE(found[0].uuid, found[1].uuid);
  EXPECT_EQ(gpus.Describe(), "fake: 8 x A100-80G");
}

// Utilisation follows whether a task runs on the GPU: busy GPUs 80-99% with 50-90% of memory,
// idle ones 0% and nothing in use; over many samples busy values vary.
TEST(FakeGpus, TelemetryFollowsBusyGpus) {
  FakeGpus gpus(4, "A100-80G", 1000);
  std::set<int32_t> utilisations;
  for (int s = 0; s < 200; ++s) {
    const auto t = gpus.Sample({1, 3});
    ASSERT_EQ(t.size(), 4u);
    for (const GpuTelemetry& g : t) {
      EXPECT_EQ(g.memory_total_mib, 1000);
      EXPECT_TRUE(g.healthy);
      if (g.index == 1 || g.index == 3) {
        EXPECT_GE(g.utilization_pct, 80);
        EXPECT_LE(g.utilization_pct, 99);
        EXPECT_GE(g.memory_used_mib, 500);
        EXPECT_LE(g.memory_used_mib, 900);
        utilisations.insert(g.utilization_pct);
      } else {
        EXPECT_EQ(g.utilization_pct, 0);
        EXPECT_EQ(g.memory_used_mib, 0);
      }
    }
  }
  EXPECT_GT(utilisations.size(), 10u);
  // Idle again once the task is gone.
  for (const GpuTelemetry& g : gpus.Sample({})) EXPECT_EQ(g.utilization_pct, 0);
}

TEST(FakeGpus, SameSequenceEveryRun) {
  FakeGpus a(2, "m", 100);
  FakeGpus b(2, "m", 100);
  for (int s = 0; s < 20; ++s) {
    const auto ta = a.Sample({0});
    const auto tb = b.Sample({0});
    EXPECT_EQ(ta[0].utilization_pct, tb[0].utilization_pct);
    EXPECT_EQ(ta[0].memory_used_mib, tb[0].memory_used_mib);
  }
}

TEST(FakeGpus, InjectedFaultsMakeGpusUnhealthy) {
  FakeGpus gpus(2, "m", 100);
  gpus.SetHealthy(1, false, "XID 79");
  auto t = gpus.Sample({});
  EXPECT_TRUE(t[0].healthy);
  EXPECT_FALSE(t[1].healthy);
  EXPECT_EQ(t[1].health_reason, "XID 79");
  EXPECT_FALSE(gpus.Discover()[1].healthy);
  gpus.SetHealthy(1, true);
  EXPECT_TRUE(gpus.Sample({})[1].healthy);
}

TEST(FakeGpus, FaultsFileIsReadOnEverySample) {
  const std::string path =
      (std::filesystem::temp_directory_path() / ("fake-gpu-faults-" + std::to_string(getpid())))
          .string();
  FakeGpus gpus(4, "m", 100, path);
  EXPECT_TRUE(gpus.Sample({})[2].healthy);  // no file: all healthy
  {
    std::ofstream f(path);
    f << "2 double-bit ECC error\n";
  }
  auto t = gpus.Sample({});
  EXPECT_FALSE(t[2].healthy);
  EXPECT_EQ(t[2].health_reason, "double-bit ECC error");
  EXPECT_TRUE(t[3].healthy);
  std::remove(path.c_str());
  EXPECT_TRUE(gpus.Sample({})[2].healthy);
}

}  // namespace
}  // namespace arbiter::node

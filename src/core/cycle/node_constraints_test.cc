// Jobs that name their nodes (Slurm's --nodelist and --exclude) and jobs that take their nodes
// whole (--exclusive): where they go, what they charge, and why they wait.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/cycle/cycle.h"
#include "testing/builders.h"

namespace arbiter::core {
namespace {

using ::arbiter::testing::ClusterBuilder;
using ::arbiter::testing::JobBuilder;
using ::arbiter::testing::MakeRunning;
using ::arbiter::testing::NamedProfile;
using ::arbiter::testing::TreeBuilder;
using ::arbiter::testing::WholeGpus;
using ::arbiter::testing::World;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

const Admission* AdmissionOf(const CycleResult& r, uint64_t id) {
  for (const Admission& a : r.admissions) {
    if (a.job.value() == id) return &a;
  }
  return nullptr;
}

const Verdict* VerdictOf(const CycleResult& r, uint64_t id) {
  for (const Verdict& v : r.verdicts) {
    if (v.job.value() == id) return &v;
  }
  return nullptr;
}

ClusterBuilder ThreeNodes() {
  ClusterBuilder b;
  b.Node("gpu-01").Gpus(4, "A100").Node("gpu-02").Gpus(4, "A100").Node("gpu-03").Gpus(4, "A100");
  return b;
}

TEST(NodeListTest, TasksGoOnlyToListedNodesAndNeverToExcludedOnes) {
  World w(ThreeNodes(), TreeBuilder().Tenant("t").Queue("a", "t"));
  const QueueId a = w.Queue("a");
  w.Add(JobBuilder(1).Queue(a).Gpus(1).Constraints(w.AddNodeConstraints({"gpu-03"})));
  // binpack would put it beside job 1; gpu-01 is excluded, gpu-03 holds job 1's GPU.
  w.Add(JobBuilder(2).Queue(a).Gpus(1).Constraints(w.AddNodeConstraints({}, {"gpu-01", "gpu-03"})));
  const CycleResult r = w.Run(NamedProfile("binpack"));
  ASSERT_NE(AdmissionOf(r, 1), nullptr);
  EXPECT_EQ(AdmissionOf(r, 1)->tasks[0].node, w.Node("gpu-03"));
  ASSERT_NE(AdmissionOf(r, 2), nullptr);
  EXPECT_EQ(AdmissionOf(r, 2)->tasks[0].node, w.Node("gpu-02"));
}

TEST(NodeListTest, AListOfUnknownNodesMatchesNothingAndTheVerdictSaysWhy) {
  World w(ThreeNodes(), TreeBuilder().Tenant("t").Queue("a", "t"));
  w.Add(JobBuilder(1).Queue(w.Queue("a")).Gpus(1).Constraints(w.AddNodeConstraints({"gpu-99"})));
  w.Add(JobBuilder(2)
            .Queue(w.Queue("a"))
            .Gpus(1)
            .Constraints(w.AddNodeConstraints({}, {"gpu-01", "gpu-02", "gpu-03"})));
  const CycleResult r = w.Run(NamedProfile("binpack"));
  EXPECT_TRUE(r.admissions.empty());
  ASSERT_NE(VerdictOf(r, 1), nullptr);
  EXPECT_THAT(VerdictOf(r, 1)->message, HasSubstr("3 nodes not in the job's node list"));
  ASSERT_NE(VerdictOf(r, 2), nullptr);
  EXPECT_THAT(VerdictOf(r, 2)->message, HasSubstr("3 nodes excluded by the job"));
}

TEST(ExclusiveTest, ATaskTakesAFreeNodeWholeAndIsChargedForIt) {
  World w(ThreeNodes(), TreeBuilder().Tenant("t").Queue("a", "t"));
  const QueueId a = w.Queue("a");
  const GpuModelId a100 = w.Model("A100");
  // gpu-01 has one GPU in use: an exclusive job must not share it.
  w.running.push_back(MakeRunning(100, a, a100, WholeGpus(1), {{w.Node("gpu-01"), {0}}}));
  const uint32_t whole = w.AddNodeConstraints({}, {}, true);
  w.Add(JobBuilder(1).Queue(a).Gpus(1).CpuMilli(1000).Constraints(whole));
  w.Add(JobBuilder(2).Queue(a).Gpus(1));  // binpack would have put it beside job 1
  const CycleResult r = w.Run(NamedProfile("binpack"));
  const Admission* one = AdmissionOf(r, 1);
  ASSERT_NE(one, nullptr);
  ASSERT_EQ(one->tasks.size(), 1u);
  const TaskPlacement& t = one->tasks[0];
  EXPECT_EQ(t.node, w.Node("gpu-02"));
  EXPECT_EQ(t.gpus.size(), 4u);  // every GPU of the node
  EXPECT_EQ(t.cpu_milli, 64000);
  EXPECT_EQ(t.memory_mib, 512 * 1024);
  // Job 2 goes beside job 100, never onto job 1's node.
  const Admission* two = AdmissionOf(r, 2);
  ASSERT_NE(two, nullptr);
  EXPECT_EQ(two->tasks[0].node, w.Node("gpu-01"));

  // In the next cycle the job charges its whole node (4 GPUs), not the 1 it asked for.
  ApplyAdmissions(w.Input(), r, 0, &w.running);
  ASSERT_EQ(w.running.size(), 3u);
  EXPECT_TRUE(w.running[1].exclusive);
  EXPECT_EQ(w.cluster.RunningQuota(w.running[1])[kDimGpu], 4000);
  EXPECT_EQ(w.cluster.RunningQuota(w.running[2])[kDimGpu], 1000);
}

TEST(ExclusiveTest, WaitsForANodeNothingElseUsesAndSaysSo) {
  World w(ThreeNodes(), TreeBuilder().Tenant("t").Queue("a", "t"));
  const QueueId a = w.Queue("a");
  const GpuModelId a100 = w.Model("A100");
  for (uint64_t i = 0; i < 3; ++i) {
    const std::string node = "gpu-0" + std::to_string(i + 1);
    w.running.push_back(MakeRunning(100 + i, a, a100, WholeGpus(1), {{w.Node(node), {0}}}));
  }
  w.Add(JobBuilder(1).Queue(a).Gpus(1).Constraints(w.AddNodeConstraints({}, {}, true)));
  const CycleResult r = w.Run(NamedProfile("binpack"));
  EXPECT_EQ(AdmissionOf(r, 1), nullptr);
  ASSERT_NE(VerdictOf(r, 1), nullptr);
  EXPECT_EQ(VerdictOf(r, 1)->code, VerdictCode::kNoFeasibleNode);
  EXPECT_THAT(VerdictOf(r, 1)->message, HasSubstr("3 nodes in use (the job wants whole nodes)"));
}

TEST(ExclusiveTest, WholeNodesBeyondTheQuotaAreNotAdmittedAndTheSnapshotIsRestored) {
  World w(ThreeNodes(), TreeBuilder().Tenant("t").Queue("a", "t").Max("gpu", 3000));
  const QueueId a = w.Queue("a");
  // Asks for 2 GPUs (within the max of 3) but would hold a 4-GPU node.
  w.Add(JobBuilder(1).Queue(a).Gpus(2).Constraints(w.AddNodeConstraints({}, {}, true)));
  w.Add(JobBuilder(2).Queue(a).Gpus(3).Priority(-1));
  const CycleResult r = w.Run(NamedProfile("binpack"));
  ASSERT_NE(VerdictOf(r, 1), nullptr);
  EXPECT_EQ(VerdictOf(r, 1)->code, VerdictCode::kQuotaExceeded);
  EXPECT_THAT(VerdictOf(r, 1)->message, HasSubstr("its whole nodes exceed the quota"));
  // Nothing of job 1's trial stays: job 2 gets its 3 GPUs within the max.
  ASSERT_NE(AdmissionOf(r, 2), nullptr);
  EXPECT_EQ(AdmissionOf(r, 2)->tasks[0].gpus.size(), 3u);
}

TEST(ExclusiveTest, AGangTakesOneWholeNodePerTask) {
  World w(ThreeNodes(), TreeBuilder().Tenant("t").Queue("a", "t"));
  w.Add(JobBuilder(1)
            .Queue(w.Queue("a"))
            .Gpus(2)
            .Tasks(2)
            .Constraints(w.AddNodeConstraints({"gpu-01", "gpu-02"}, {}, true)));
  w.Add(JobBuilder(2).Queue(w.Queue("a")).Gpus(1));
  const CycleResult r = w.Run(NamedProfile("binpack"));
  const Admission* one = AdmissionOf(r, 1);
  ASSERT_NE(one, nullptr);
  ASSERT_EQ(one->tasks.size(), 2u);
  EXPECT_NE(one->tasks[0].node, one->tasks[1].node);
  ASSERT_NE(AdmissionOf(r, 2), nullptr);
  EXPECT_EQ(AdmissionOf(r, 2)->tasks[0].node, w.Node("gpu-03"));
}

}  // namespace
}  // namespace arbiter::core

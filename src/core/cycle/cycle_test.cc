#include "core/cycle/cycle.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "testing/builders.h"

namespace arbiter::core {
namespace {

using ::arbiter::testing::ClusterBuilder;
using ::arbiter::testing::GpuFraction;
using ::arbiter::testing::JobBuilder;
using ::arbiter::testing::MakeRunning;
using ::arbiter::testing::NamedProfile;
using ::arbiter::testing::TreeBuilder;
using ::arbiter::testing::WholeGpus;
using ::arbiter::testing::World;
using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::IsEmpty;

std::vector<uint64_t> Admitted(const CycleResult& r) {
  std::vector<uint64_t> ids;
  for (const Admission& a : r.admissions) ids.push_back(a.job.value());
  return ids;
}

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

std::map<std::string, int> AdmittedPerQueue(const World& w, const CycleResult& r) {
  std::map<std::string, int> out;
  for (const Admission& a : r.admissions) ++out[w.tree.node(a.queue).name];
  return out;
}

// `count` one-GPU jobs in `queue`, ids first_id, first_id + 1, ...
void AddOneGpuJobs(World& w, const std::string& queue, uint64_t first_id, int count) {
  for (int i = 0; i < count; ++i) {
    w.Add(JobBuilder(first_id + static_cast<uint64_t>(i)).Queue(w.Queue(queue)).Gpus(1));
  }
}

ClusterBuilder OneNode(int gpus, const std::string& model = "A100") {
  ClusterBuilder b;
  b.Node("n0").Gpus(gpus, model);
  return b;
}

// --- Fair share ------------------------------------------------------------------------------

TEST(FairShareOrderTest, EqualQueuesTakeTurns) {
  World w(OneNode(16), TreeBuilder()
                           .Tenant("t")
                           .Queue("a", "t")
                           .Guaranteed("gpu", 4000)
                           .Queue("b", "t")
                           .Guaranteed("gpu", 4000));
  AddOneGpuJobs(w, "a", 1, 4);
  AddOneGpuJobs(w, "b", 11, 4);
  const CycleResult r = w.Run(NamedProfile("binpack"));
  // Equal shares go to the queue with the lower id; each admission raises its queue's share.
  EXPECT_THAT(Admitted(r), ElementsAre(1, 11, 2, 12, 3, 13, 4, 14));
  EXPECT_THAT(r.verdicts, IsEmpty());
}

TEST(FairShareOrderTest, TheQueueWithTheLowerShareGoesFirst) {
  World w(OneNode(16), TreeBuilder()
                           .Tenant("t")
                           .Queue("a", "t")
                           .Guaranteed("gpu", 4000)
                           .Queue("b", "t")
                           .Guaranteed("gpu", 4000));
  // b already runs 3 GPUs: share 3/4; a runs nothing.
  w.running.push_back(
      MakeRunning(100, w.Queue("b"), w.Model("A100"), WholeGpus(3), {{w.Node("n0"), {0, 1, 2}}}));
  AddOneGpuJobs(w, "b", 11, 2);
  AddOneGpuJobs(w, "a", 1, 4);
  const CycleResult r = w.Run(NamedProfile("binpack"));
  // a: 0, 1/4, 2/4 < 3/4; at 3/4 against 3/4 the lower id (a) wins once more.
  EXPECT_THAT(Admitted(r), ElementsAre(1, 2, 3, 4, 11, 12));
}

TEST(FairShareOrderTest, WeightsSkewTheSplit) {
  World w(OneNode(6), TreeBuilder()
                          .Tenant("t")
                          .Queue("a", "t")
                          .Guaranteed("gpu", 4000)
                          .Weight(2000)
                          .Queue("b", "t")
                          .Guaranteed("gpu", 4000));
  AddOneGpuJobs(w, "a", 1, 10);
  AddOneGpuJobs(w, "b", 101, 10);
  const CycleResult r = w.Run(NamedProfile("binpack"));
  // share = U / G / weight: a's admissions count half. Of 6 GPUs a gets 4, b 2.
  EXPECT_EQ(AdmittedPerQueue(w, r), (std::map<std::string, int>{{"a", 4}, {"b", 2}}));
  EXPECT_THAT(Admitted(r), ElementsAre(1, 101, 2, 3, 102, 4));
}

TEST(FairShareOrderTest, TenantsShareBeforeTheirQueues) {
  // No guarantees: shares are measured against the cluster. t1 has two queues, t2 one: t2's queue
  // gets as much as t1's two together.
  World w(OneNode(8), TreeBuilder()
                          .Tenant("t1")
                          .Queue("q1a", "t1")
                          .Queue("q1b", "t1")
                          .Tenant("t2")
                          .Queue("q2", "t2"));
  AddOneGpuJobs(w, "q1a", 1, 10);
  AddOneGpuJobs(w, "q1b", 101, 10);
  AddOneGpuJobs(w, "q2", 201, 10);
  const CycleResult r = w.Run(NamedProfile("binpack"));
  EXPECT_EQ(AdmittedPerQueue(w, r),
            (std::map<std::string, int>{{"q1a", 2}, {"q1b", 2}, {"q2", 4}}));
}

TEST(FairShareOrderTest, DecayedHistoryMakesAHeavyPastUserYield) {
  auto make = [] {
    return World(OneNode(8), TreeBuilder()
                                 .Tenant("t")
                                 .Queue("a", "t")
                                 .Guaranteed("gpu", 4000)
                                 .HalfLife(3600)
                                 .Queue("b", "t")
                                 .Guaranteed("gpu", 4000)
                                 .HalfLife(3600));
  };
  World fresh = make();
  AddOneGpuJobs(fresh, "a", 1, 8);
  AddOneGpuJobs(fresh, "b", 101, 8);
  const CycleResult even = fresh.Run(NamedProfile("binpack"));
  EXPECT_EQ(AdmittedPerQueue(fresh, even), (std::map<std::string, int>{{"a", 4}, {"b", 4}}));

  // a used 4 GPUs on average lately: u(a) = (U + H) / 2 starts at 2 GPUs' worth.
  World w = make();
  AddOneGpuJobs(w, "a", 1, 8);
  AddOneGpuJobs(w, "b", 101, 8);
  w.history.assign(w.tree.size(), QuotaVec());
  w.history[w.Queue("a").value()][kDimGpu] = 4000;
  const CycleResult r = w.Run(NamedProfile("binpack"));
  EXPECT_EQ(AdmittedPerQueue(w, r), (std::map<std::string, int>{{"a", 2}, {"b", 6}}));
  EXPECT_THAT(Admitted(r), ElementsAre(101, 102, 103, 104, 1, 105, 2, 106));
}

TEST(FairShareOrderTest, HistoryIsIgnoredWithoutAHalfLife) {
  World w(OneNode(8), TreeBuilder()
                          .Tenant("t")
                          .Queue("a", "t")
                          .Guaranteed("gpu", 4000)
                          .Queue("b", "t")
                          .Guaranteed("gpu", 4000));
  AddOneGpuJobs(w, "a", 1, 8);
  AddOneGpuJobs(w, "b", 101, 8);
  w.history.assign(w.tree.size(), QuotaVec());
  w.history[w.Queue("a").value()][kDimGpu] = 4000;
  const CycleResult r = w.Run(NamedProfile("binpack"));
  EXPECT_EQ(AdmittedPerQueue(w, r), (std::map<std::string, int>{{"a", 4}, {"b", 4}}));
}

// --- Order within a queue --------------------------------------------------------------------

TEST(QueueOrderTest, PriorityThenSubmitTimeThenId) {
  auto make = [](int gpus) {
    World w(OneNode(gpus), TreeBuilder().Tenant("t").Queue("a", "t"));
    const QueueId a = w.Queue("a");
    w.Add(JobBuilder(1).Queue(a).Gpus(1).Priority(0).SubmitTime(10));
    w.Add(JobBuilder(2).Queue(a).Gpus(1).Priority(100).SubmitTime(50));
    w.Add(JobBuilder(3).Queue(a).Gpus(1).Priority(100).SubmitTime(20));
    w.Add(JobBuilder(5).Queue(a).Gpus(1).Priority(0).SubmitTime(5));
    w.Add(JobBuilder(4).Queue(a).Gpus(1).Priority(0).SubmitTime(5));
    w.Add(JobBuilder(6).Queue(a).Gpus(1).Priority(1000).SubmitTime(100));
    return w;
  };
  const World roomy = make(8);
  EXPECT_THAT(Admitted(roomy.Run(NamedProfile("binpack"))), ElementsAre(6, 3, 2, 4, 5, 1));

  const World tight = make(3);
  const CycleResult r = tight.Run(NamedProfile("binpack"));
  EXPECT_THAT(Admitted(r), ElementsAre(6, 3, 2));
  ASSERT_EQ(r.verdicts.size(), 3u);
  // Verdicts carry the 1-based position in the queue's order.
  EXPECT_EQ(VerdictOf(r, 4)->position, 4);
  EXPECT_EQ(VerdictOf(r, 5)->position, 5);
  EXPECT_EQ(VerdictOf(r, 1)->position, 6);
}

// --- Admission -------------------------------------------------------------------------------

TEST(AdmissionTest, QuotaIsNeverChargedForAJobThatDoesNotPlace) {
  ClusterBuilder b;
  b.Node("n0").Gpus(4, "A100").Node("n1").Gpus(4, "A100").Node("n2").Gpus(8, "A100").Cordoned();
  World w(b, TreeBuilder().Tenant("t").Queue("a", "t").Max("gpu", 8000));
  const QueueId a = w.Queue("a");
  w.Add(JobBuilder(1).Queue(a).Gpus(8));                           // within max, n2 is cordoned
  w.Add(JobBuilder(2).Queue(a).Gpus(2).Tasks(3).DistinctNodes());  // only 2 distinct nodes ready
  w.Add(JobBuilder(3).Queue(a).Gpus(4));
  w.Add(JobBuilder(4).Queue(a).Gpus(4));
  const CycleResult r = w.Run(NamedProfile("binpack"));
  EXPECT_EQ(VerdictOf(r, 1)->code, VerdictCode::kNoFeasibleNode);
  EXPECT_EQ(VerdictOf(r, 2)->code, VerdictCode::kGangIncomplete);
  // Had 1 or 2 been charged, 3 would exceed the max of 8.
  EXPECT_THAT(Admitted(r), ElementsAre(3, 4));
}

TEST(AdmissionTest, AdmissionRecordsPlacementsAndModel) {
  World w(OneNode(8), TreeBuilder().Tenant("t").Queue("a", "t"));
  w.Add(JobBuilder(1).Queue(w.Queue("a")).Gpus(2).CpuMilli(4000).MemoryMib(1024).Tasks(2));
  const CycleResult r = w.Run(NamedProfile("binpack"));
  ASSERT_EQ(r.admissions.size(), 1u);
  const Admission& adm = r.admissions[0];
  EXPECT_EQ(adm.queue, w.Queue("a"));
  EXPECT_EQ(adm.model, w.Model("A100"));
  ASSERT_EQ(adm.tasks.size(), 2u);
  for (const TaskPlacement& t : adm.tasks) {
    EXPECT_EQ(t.node, w.Node("n0"));
    EXPECT_EQ(t.gpus.size(), 2u);
    EXPECT_EQ(t.cpu_milli, 4000);
    EXPECT_EQ(t.memory_mib, 1024);
  }
  EXPECT_FALSE(adm.borrowing());
  EXPECT_EQ(r.stats.jobs_considered, 1);
}

TEST(AdmissionTest, BorrowingIsRecorded) {
  World w(OneNode(8), TreeBuilder()
                          .Tenant("t")
                          .Queue("a", "t")
                          .Guaranteed("gpu", 4000)
                          .Max("gpu", 8000)
                          .Queue("b", "t")
                          .Guaranteed("gpu", 4000)
                          .Queue("c", "t")
                          .Guaranteed("gpu:A100", 1000));
  const QueueId a = w.Queue("a");
  w.Add(JobBuilder(1).Queue(a).Gpus(3));
  w.Add(JobBuilder(2).Queue(a).Gpus(2));
  w.Add(JobBuilder(3).Queue(a).Gpus(2));
  w.Add(JobBuilder(4).Queue(w.Queue("c")).Gpus(1).Priority(-1).SubmitTime(100));
  const CycleResult r = w.Run(NamedProfile("binpack"));
  ASSERT_THAT(Admitted(r), ::testing::UnorderedElementsAre(1, 2, 3, 4));
  EXPECT_FALSE(AdmissionOf(r, 1)->borrowing());
  // 3 + 2 = 5 of a guarantee of 4: 1 borrowed; then 2 more, both borrowed.
  EXPECT_EQ(AdmissionOf(r, 2)->borrowed[kDimGpu], 1000);
  EXPECT_EQ(AdmissionOf(r, 3)->borrowed[kDimGpu], 2000);
  EXPECT_TRUE(AdmissionOf(r, 3)->borrowing());
  // a does not configure gpu:A100: nothing is borrowed there.
  EXPECT_EQ(AdmissionOf(r, 3)->borrowed[ModelDim(w.Model("A100"))], 0);
  // c configures only gpu:A100 and stays within it.
  EXPECT_FALSE(AdmissionOf(r, 4)->borrowing());
}

TEST(AdmissionTest, BorrowingOnAPerModelKey) {
  World w(OneNode(8), TreeBuilder().Tenant("t").Queue("c", "t").Guaranteed("gpu:A100", 1000));
  w.Add(JobBuilder(1).Queue(w.Queue("c")).Gpus(3));
  const CycleResult r = w.Run(NamedProfile("binpack"));
  ASSERT_EQ(r.admissions.size(), 1u);
  EXPECT_EQ(r.admissions[0].borrowed[ModelDim(w.Model("A100"))], 2000);
  EXPECT_EQ(r.admissions[0].borrowed[kDimGpu], 0);
}

TEST(AdmissionTest, ModelsAreTriedInTheJobsOrderOfPreference) {
  ClusterBuilder b;
  b.Node("a100").Gpus(8, "A100").Node("h100").Gpus(8, "H100");
  World w(b, TreeBuilder().Tenant("t").Queue("q", "t"));
  const GpuModelId a100 = w.Model("A100");
  const GpuModelId h100 = w.Model("H100");
  const QueueId q = w.Queue("q");
  w.Add(JobBuilder(1).Queue(q).Gpus(4).Models({h100, a100}));
  w.Add(JobBuilder(2).Queue(q).Gpus(8).Models({h100, a100}));  // H100 has 4 left: A100
  w.Add(JobBuilder(3).Queue(q).Gpus(4));                       // any model: A100 is full
  w.Add(JobBuilder(4).Queue(q).Gpus(1).Model(a100));           // nothing left
  const CycleResult r = w.Run(NamedProfile("binpack"));
  EXPECT_THAT(Admitted(r), ElementsAre(1, 2, 3));
  EXPECT_EQ(AdmissionOf(r, 1)->model, h100);
  EXPECT_EQ(AdmissionOf(r, 2)->model, a100);
  EXPECT_EQ(AdmissionOf(r, 3)->model, h100);
  EXPECT_EQ(AdmissionOf(r, 1)->tasks[0].node, w.Node("h100"));
  EXPECT_EQ(AdmissionOf(r, 2)->tasks[0].node, w.Node("a100"));
}

TEST(AdmissionTest, AModelTheQueueMayNotUseIsSkipped) {
  ClusterBuilder b;
  b.Node("a100").Gpus(8, "A100").Node("h100").Gpus(8, "H100");
  World w(b, TreeBuilder().Tenant("t").Queue("q", "t").Max("gpu:H100", 0));
  w.Add(JobBuilder(1).Queue(w.Queue("q")).Gpus(2).Models({w.Model("H100"), w.Model("A100")}));
  const CycleResult r = w.Run(NamedProfile("binpack"));
  ASSERT_EQ(r.admissions.size(), 1u);
  EXPECT_EQ(r.admissions[0].model, w.Model("A100"));
}

TEST(AdmissionTest, CpuOnlyJobsChargeNoGpu) {
  ClusterBuilder b;
  b.Node("cpu").Cpus(32).Node("gpu").Gpus(8, "A100").Cpus(8);
  World w(b, TreeBuilder().Tenant("t").Queue("q", "t"));
  w.Add(JobBuilder(1).Queue(w.Queue("q")).CpuMilli(16000).MemoryMib(4096));
  const CycleResult r = w.Run(NamedProfile("binpack"));
  ASSERT_EQ(r.admissions.size(), 1u);
  EXPECT_EQ(r.admissions[0].model, kNoModel);
  EXPECT_EQ(r.admissions[0].tasks[0].node, w.Node("cpu"));
  EXPECT_THAT(r.admissions[0].tasks[0].gpus, IsEmpty());
}

TEST(AdmissionTest, ApplyAdmissionsFeedsTheNextCycle) {
  World w(OneNode(8), TreeBuilder().Tenant("t").Queue("q", "t").Max("gpu", 6000));
  const QueueId q = w.Queue("q");
  w.Add(JobBuilder(1).Queue(q).Gpus(4).Priority(7).Walltime(60000));
  w.Add(JobBuilder(2).Queue(q).Gpus(2));
  const CycleResult first = w.Run(NamedProfile("binpack"));
  ASSERT_THAT(Admitted(first), ElementsAre(1, 2));
  ApplyAdmissions(w.Input(), first, 5000, &w.running);
  ASSERT_EQ(w.running.size(), 2u);
  const RunningJob& r1 = w.running[0];
  EXPECT_EQ(r1.id, JobId(1));
  EXPECT_EQ(r1.queue, q);
  EXPECT_EQ(r1.priority, 7);
  EXPECT_EQ(r1.model, w.Model("A100"));
  EXPECT_EQ(r1.start_time, 5000);
  EXPECT_EQ(r1.walltime, 60000);
  EXPECT_EQ(r1.tasks, first.admissions[0].tasks);
  // Next cycle: the queue is at its max; the running jobs' GPUs are taken.
  w.pending.clear();
  w.Add(JobBuilder(3).Queue(q).Gpus(1));
  const CycleResult second = w.Run(NamedProfile("binpack"));
  EXPECT_THAT(second.admissions, IsEmpty());
  ASSERT_EQ(second.verdicts.size(), 1u);
  EXPECT_EQ(second.verdicts[0].code, VerdictCode::kQuotaExceeded);
}

// --- Verdicts --------------------------------------------------------------------------------

class VerdictTest : public ::testing::Test {
 protected:
  static void ExpectVerdict(const CycleResult& r, uint64_t job, VerdictCode code,
                            const std::string& message, int32_t position = 1) {
    const Verdict* v = VerdictOf(r, job);
    ASSERT_NE(v, nullptr) << "job " << job << " has no verdict";
    EXPECT_EQ(VerdictCodeName(v->code), VerdictCodeName(code));
    EXPECT_EQ(v->message, message);
    EXPECT_EQ(v->position, position);
  }
};

TEST_F(VerdictTest, QuotaExceededNamesTheQueueAndTheNumbers) {
  ClusterBuilder b;
  b.Node("n0").Gpus(8, "A100").Node("n1").Gpus(8, "A100");
  World w(b, TreeBuilder()
                 .Tenant("lab")
                 .Queue("research", "lab")
                 .Max("gpu", 8000)
                 .Max("cpu", 4000)
                 .Tenant("vision")
                 .Max("gpu", 4000)
                 .Queue("vision-train", "vision")
                 .Queue("vision-eval", "vision")
                 .Max("gpu:A100", 2000));
  const GpuModelId a100 = w.Model("A100");
  w.running.push_back(MakeRunning(100, w.Queue("research"), a100, WholeGpus(8, 2000),
                                  {{w.Node("n0"), {0, 1, 2, 3, 4, 5, 6, 7}}}));
  w.running.push_back(
      MakeRunning(101, w.Queue("vision-train"), a100, WholeGpus(1), {{w.Node("n1"), {0}}}));
  w.running.push_back(
      MakeRunning(102, w.Queue("vision-eval"), a100, WholeGpus(1), {{w.Node("n1"), {1}}}));
  w.Add(JobBuilder(1).Queue(w.Queue("research")).Gpus(1));
  w.Add(JobBuilder(2).Queue(w.Queue("vision-train")).Gpus(4));
  w.Add(JobBuilder(3).Queue(w.Queue("vision-eval")).Gpus(2));
  w.Add(JobBuilder(4).Queue(w.Queue("research")).CpuMilli(3000).Priority(-1));
  const CycleResult r = w.Run(NamedProfile("binpack"));
  ExpectVerdict(r, 1, VerdictCode::kQuotaExceeded,
                "queue research uses 8 of max 8 GPUs; this job needs 1 more");
  ExpectVerdict(r, 2, VerdictCode::kQuotaExceeded,
                "tenant vision uses 2 of max 4 GPUs; this job needs 4 more");
  ExpectVerdict(r, 3, VerdictCode::kQuotaExceeded,
                "queue vision-eval uses 1 of max 2 GPUs of A100; this job needs 2 more");
  ExpectVerdict(r, 4, VerdictCode::kQuotaExceeded,
                "queue research uses 2 of max 4 CPU; this job needs 3 more", 2);
}

TEST_F(VerdictTest, BorrowLimitSaysWhatIsAvailable) {
  World w(OneNode(8), TreeBuilder()
                          .Tenant("t")
                          .Queue("a", "t")
                          .Guaranteed("gpu", 4000)
                          .LendingLimit("gpu", 2000)
                          .Queue("b", "t")
                          .Guaranteed("gpu", 4000));
  w.Add(JobBuilder(1).Queue(w.Queue("b")).Gpus(8));
  const CycleResult r = w.Run(NamedProfile("binpack"));
  // b has its 4 and may borrow the 2 that a lends: 6 of the 8 it asks for.
  ExpectVerdict(r, 1, VerdictCode::kBorrowLimit,
                "queue b uses 0 of 4 guaranteed GPUs and can get only 6 more; this job needs 8 "
                "(the rest is in use by other queues or held back by their lending limits)");
}

TEST_F(VerdictTest, NoFeasibleNodeSaysWhatTheBestNodeHas) {
  ClusterBuilder b;
  b.Node("n1").Gpus(8, "A100");
  b.Node("n2").Gpus(8, "A100");
  b.Node("n3").Gpus(8, "A100").Cordoned();
  b.Node("n4").Gpus(8, "H100");
  World w(b, TreeBuilder().Tenant("t").Queue("q", "t").Queue("other", "t"));
  const GpuModelId a100 = w.Model("A100");
  w.running.push_back(
      MakeRunning(100, w.Queue("other"), a100, WholeGpus(2), {{w.Node("n1"), {0, 1}}}));
  w.running.push_back(
      MakeRunning(101, w.Queue("other"), a100, WholeGpus(4), {{w.Node("n2"), {0, 1, 2, 3}}}));
  w.running.push_back(MakeRunning(102, w.Queue("other"), a100, GpuFraction(750),
                                  {{w.Node("n1"), {2}}, {w.Node("n2"), {4}}}));
  w.Add(JobBuilder(1).Queue(w.Queue("q")).Gpus(8).Model(a100));
  w.Add(JobBuilder(2).Queue(w.Queue("q")).GpuShare(500).Model(a100));
  const CycleResult r = w.Run(NamedProfile("binpack"));
  ExpectVerdict(r, 1, VerdictCode::kNoFeasibleNode,
                "needs 8 GPUs of model A100 on one node: best node has 5 free; 1 node not ready, "
                "1 node wrong GPU model, 2 nodes not enough free GPUs");
  // The share fits n1's free GPUs: admitted.
  EXPECT_NE(AdmissionOf(r, 2), nullptr);
}

TEST_F(VerdictTest, NoFeasibleNodeForSharesAndCpuOnlyTasks) {
  ClusterBuilder b;
  b.Node("n1").Gpus(1, "A100").Cpus(8);
  b.Node("n2").Gpus(1, "A100").Cpus(8);
  World w(b, TreeBuilder().Tenant("t").Queue("q", "t").Queue("other", "t"));
  const GpuModelId a100 = w.Model("A100");
  TaskResources busy = GpuFraction(750);
  busy.cpu_milli = 4000;
  w.running.push_back(
      MakeRunning(100, w.Queue("other"), a100, busy, {{w.Node("n1"), {0}}, {w.Node("n2"), {0}}}));
  w.Add(JobBuilder(1).Queue(w.Queue("q")).GpuShare(500, 1024).Model(a100));
  w.Add(JobBuilder(2).Queue(w.Queue("q")).CpuMilli(6000).MemoryMib(2048).Priority(-1));
  const CycleResult r = w.Run(NamedProfile("binpack"));
  ExpectVerdict(r, 1, VerdictCode::kNoFeasibleNode,
                "needs 0.5 of a GPU of model A100 with 1024 MiB GPU memory on one node: best GPU "
                "has 0.25 free; 2 nodes not enough free GPUs");
  ExpectVerdict(r, 2, VerdictCode::kNoFeasibleNode,
                "needs 6 CPU and 2048 MiB RAM on one node; 2 nodes not enough CPU", 2);
}

TEST_F(VerdictTest, GangIncompleteSaysHowManyFit) {
  ClusterBuilder b;
  b.Node("n0").Gpus(8, "A100").Node("n1").Gpus(8, "A100").Node("n2").Gpus(8, "A100");
  b.Node("n3").Gpus(8, "A100");
  World w(b, TreeBuilder().Tenant("t").Queue("q", "t").Queue("other", "t"));
  const QueueId q = w.Queue("q");
  const QueueId other = w.Queue("other");
  const GpuModelId a100 = w.Model("A100");
  // Free: n0 7, n1 7, n2 4, n3 none. Every job could start on these nodes, just not now.
  w.running.push_back(MakeRunning(100, other, a100, WholeGpus(1), {{w.Node("n0"), {0}}}));
  w.running.push_back(MakeRunning(101, other, a100, WholeGpus(1), {{w.Node("n1"), {0}}}));
  w.running.push_back(MakeRunning(102, other, a100, WholeGpus(4), {{w.Node("n2"), {0, 1, 2, 3}}}));
  w.running.push_back(
      MakeRunning(103, other, a100, WholeGpus(8), {{w.Node("n3"), {0, 1, 2, 3, 4, 5, 6, 7}}}));
  w.Add(JobBuilder(1).Queue(q).Gpus(6).Tasks(3));
  w.Add(JobBuilder(2).Queue(q).Gpus(1).Tasks(4).DistinctNodes());
  w.Add(JobBuilder(3).Queue(q).Gpus(8).Tasks(2));
  const CycleResult r = w.Run(NamedProfile("binpack"));
  ExpectVerdict(r, 1, VerdictCode::kGangIncomplete,
                "gang of 3 tasks needs 6 GPUs of model A100 per task: only 2 fit at once; 2 nodes "
                "not enough free GPUs");
  ExpectVerdict(r, 2, VerdictCode::kGangIncomplete,
                "gang of 4 tasks needs 1 GPU of model A100 per task on distinct nodes: only 3 "
                "fit at once; 1 node not enough free GPUs",
                2);
  // Not even one task fits: NoFeasibleNode, about each task.
  ExpectVerdict(r, 3, VerdictCode::kNoFeasibleNode,
                "needs 8 GPUs of model A100 on one node for each of 2 tasks: best node has 7 "
                "free; 4 nodes not enough free GPUs",
                3);
}

TEST_F(VerdictTest, EveryModelsReasonIsListedAndTheFirstSetsTheCode) {
  ClusterBuilder b;
  b.Node("a0").Gpus(8, "A100").Node("a1").Gpus(8, "A100").Node("h100").Gpus(8, "H100");
  World w(b, TreeBuilder().Tenant("t").Queue("q", "t").Max("gpu:H100", 0).Queue("other", "t"));
  // H100 is beyond the queue's max for good, A100 only busy: the job may still start.
  const GpuModelId a100 = w.Model("A100");
  for (uint64_t id : {100, 101}) {
    w.running.push_back(MakeRunning(id, w.Queue("other"), a100, WholeGpus(4),
                                    {{w.Node(id == 100 ? "a0" : "a1"), {0, 1, 2, 3}}}));
  }
  w.Add(JobBuilder(1).Queue(w.Queue("q")).Gpus(8).Models({w.Model("H100"), w.Model("A100")}));
  const CycleResult r = w.Run(NamedProfile("binpack"));
  ExpectVerdict(r, 1, VerdictCode::kQuotaExceeded,
                "queue q uses 0 of max 0 GPUs of H100; this job needs 8 more; needs 8 GPUs of "
                "model A100 on one node: best node has 4 free; 1 node wrong GPU model, 2 nodes "
                "not enough free GPUs");
}

TEST_F(VerdictTest, SuspendedBackoffAndNotAllowed) {
  World w(OneNode(8), TreeBuilder()
                          .Tenant("vision")
                          .Queue("train", "vision")
                          .AllowedTypes({"training", "fine-tuning"}));
  w.now = 100000;
  const QueueId train = w.Queue("train");
  w.Add(JobBuilder(1).Queue(train).Gpus(1).Suspended());
  w.Add(JobBuilder(2).Queue(train).Gpus(1).NotBefore(130500));
  w.Add(JobBuilder(3).Queue(train).Gpus(1).Type(JobType::kService));
  w.Add(JobBuilder(4).Queue(w.Queue("vision")).Gpus(1));
  w.Add(JobBuilder(5).Queue(QueueId(99)).Gpus(1));
  w.Add(JobBuilder(6).Queue(QuotaTree::kRoot).Gpus(1));
  w.Add(JobBuilder(7).Queue(train).Gpus(1).NotBefore(100000).Type(JobType::kFineTuning));
  const CycleResult r = w.Run(NamedProfile("binpack"));
  ExpectVerdict(r, 1, VerdictCode::kSuspended, "suspended; resume it to queue it again", 1);
  ExpectVerdict(r, 2, VerdictCode::kBackoff, "waiting 31 s before its next retry", 2);
  EXPECT_EQ(VerdictOf(r, 2)->estimated_start, 130500);
  ExpectVerdict(r, 3, VerdictCode::kNotAllowed, "queue train does not take service jobs", 3);
  // Jobs outside a leaf queue have no position.
  ExpectVerdict(r, 4, VerdictCode::kNotAllowed, "'vision' has child queues; submit to one of them",
                0);
  ExpectVerdict(r, 5, VerdictCode::kNotAllowed, "unknown queue", 0);
  ExpectVerdict(r, 6, VerdictCode::kNotAllowed, "unknown queue", 0);
  // A backoff that has ended does not hold the job back.
  EXPECT_THAT(Admitted(r), ElementsAre(7));
  EXPECT_EQ(r.stats.jobs_considered, 1);
}

TEST_F(VerdictTest, EveryPendingJobGetsExactlyOneAnswer) {
  World w(OneNode(4), TreeBuilder().Tenant("t").Queue("a", "t").Queue("b", "t"));
  AddOneGpuJobs(w, "a", 1, 5);
  AddOneGpuJobs(w, "b", 11, 5);
  const CycleResult r = w.Run(NamedProfile("binpack"));
  std::map<uint64_t, int> answers;
  for (const Admission& a : r.admissions) ++answers[a.job.value()];
  for (const Verdict& v : r.verdicts) ++answers[v.job.value()];
  ASSERT_EQ(answers.size(), w.pending.size());
  for (const auto& [job, n] : answers) EXPECT_EQ(n, 1) << "job " << job;
  EXPECT_EQ(r.admissions.size(), 4u);
}

TEST_F(VerdictTest, EqualShapesThatFailAreAnsweredFromTheCache) {
  ClusterBuilder b;
  b.Node("n0").Gpus(4, "A100").Node("n1").Gpus(4, "A100").Cordoned();
  World w(b, TreeBuilder().Tenant("t").Queue("q", "t"));
  const QueueId q = w.Queue("q");
  w.Add(JobBuilder(1).Queue(q).Gpus(2).Tasks(2).DistinctNodes());
  w.Add(JobBuilder(2).Queue(q).Gpus(2).Tasks(2).DistinctNodes());
  w.Add(JobBuilder(3).Queue(q).Gpus(2));
  const CycleResult r = w.Run(NamedProfile("binpack"));
  ASSERT_NE(VerdictOf(r, 1), nullptr);
  ASSERT_NE(VerdictOf(r, 2), nullptr);
  EXPECT_EQ(VerdictOf(r, 1)->code, VerdictCode::kGangIncomplete);
  EXPECT_EQ(VerdictOf(r, 2)->code, VerdictOf(r, 1)->code);
  EXPECT_EQ(VerdictOf(r, 2)->message, VerdictOf(r, 1)->message);
  EXPECT_EQ(r.stats.failure_cache_hits, 1);
  EXPECT_EQ(r.stats.placement_attempts, 2);  // job 1 and job 3
  EXPECT_THAT(Admitted(r), ElementsAre(3));
}

// --- Inadmissible ----------------------------------------------------------------------------

TEST_F(VerdictTest, InadmissibleBeyondAMaxNamesTheLimitPerTaskOrInAll) {
  ClusterBuilder b;
  b.Node("n0").Gpus(8, "A100").Node("n1").Gpus(8, "A100");
  World w(b, TreeBuilder()
                 .Tenant("vision")
                 .Max("gpu", 12000)
                 .Queue("train", "vision")
                 .Max("gpu", 4000)
                 .Max("memory", 1024)
                 .Queue("eval", "vision"));
  w.Add(JobBuilder(1).Queue(w.Queue("train")).Gpus(8));
  w.Add(JobBuilder(2).Queue(w.Queue("train")).Gpus(2).Tasks(3));
  w.Add(JobBuilder(3).Queue(w.Queue("eval")).Gpus(8).Tasks(2));  // the tenant's max of 12
  w.Add(JobBuilder(4).Queue(w.Queue("train")).MemoryMib(2048));
  w.Add(JobBuilder(5).Queue(w.Queue("eval")).Gpus(6).Tasks(2));  // 12: within every limit
  const CycleResult r = w.Run(NamedProfile("binpack"));
  ExpectVerdict(r, 1, VerdictCode::kInadmissible,
                "queue train allows at most 4 GPUs (its max.gpu); this job asks for 8 GPUs: it "
                "can never start unless the max is raised or the job asks for less");
  ExpectVerdict(r, 2, VerdictCode::kInadmissible,
                "queue train allows at most 4 GPUs (its max.gpu); its 3 tasks ask for 6 GPUs "
                "together: it can never start unless the max is raised or the job asks for less",
                2);
  ExpectVerdict(r, 3, VerdictCode::kInadmissible,
                "tenant vision allows at most 12 GPUs (its max.gpu); its 2 tasks ask for 16 GPUs "
                "together: it can never start unless the max is raised or the job asks for less");
  ExpectVerdict(r, 4, VerdictCode::kInadmissible,
                "queue train allows at most 1024 MiB (its max.memory); this job asks for 2048 "
                "MiB: it can never start unless the max is raised or the job asks for less",
                3);
  EXPECT_THAT(Admitted(r), ElementsAre(5));
  // Neither placed nor tried: the check comes before any placement.
  EXPECT_EQ(r.stats.placement_attempts, 1);
}

TEST_F(VerdictTest, InadmissibleOnTheNodesThereAre) {
  ClusterBuilder b;
  b.Node("n0").Gpus(4, "A100").Cpus(16).MemoryGib(64);
  b.Node("n1").Gpus(4, "A100").Cpus(16).MemoryGib(64).State(NodeState::kDown);  // may come back
  b.Node("n2").Gpus(2, "H100").Cpus(16).MemoryGib(64);
  World w(b, TreeBuilder().Tenant("t").Queue("q", "t"));
  const QueueId q = w.Queue("q");
  const GpuModelId a100 = w.Model("A100");
  w.Add(JobBuilder(1).Queue(q).Gpus(8).Model(a100));
  w.Add(JobBuilder(2).Queue(q).Gpus(4).Model(a100).Tasks(3));
  w.Add(JobBuilder(3).Queue(q).Gpus(1).Tasks(4).DistinctNodes());
  w.Add(JobBuilder(4).Queue(q).CpuMilli(32000));
  w.Add(JobBuilder(5).Queue(q).MemoryMib(128 * 1024));
  w.Add(JobBuilder(6).Queue(q).GpuShare(500, 100 * 1024).Model(a100));
  w.Add(JobBuilder(7).Queue(q).Gpus(3));  // any model: A100 on n0 or n1 could take it
  w.Add(JobBuilder(8).Queue(q).Gpus(4).Model(a100).Tasks(2));  // needs n1 back: waits
  const CycleResult r = w.Run(NamedProfile("binpack"));
  const std::string tail =
      ": it cannot start on the nodes there are, until a node that can take it joins";
  ExpectVerdict(r, 1, VerdictCode::kInadmissible,
                "no node has 8 GPUs of model A100 (the most on one node is 4)" + tail);
  ExpectVerdict(r, 2, VerdictCode::kInadmissible,
                "the job's 3 tasks must start together, but 2 nodes with GPUs of model A100 can "
                "hold 2 such tasks at once" +
                    tail,
                2);
  // Job 3 may use any model: each model's reason is listed.
  ExpectVerdict(r, 3, VerdictCode::kInadmissible,
                "the job's 4 tasks must start together, but 2 nodes with GPUs of model A100 can "
                "hold 2 such tasks at once on distinct nodes" +
                    tail +
                    "; the job's 4 tasks must start together, but 1 node with GPUs of model H100 "
                    "can hold 1 such task at once on distinct nodes" +
                    tail,
                3);
  ExpectVerdict(r, 4, VerdictCode::kInadmissible, "no node has 32 CPU (the largest has 16)" + tail,
                4);
  ExpectVerdict(r, 5, VerdictCode::kInadmissible,
                "no node has 131072 MiB of RAM (the largest has 65536 MiB)" + tail, 5);
  ExpectVerdict(r, 6, VerdictCode::kInadmissible,
                "no GPU of model A100 has 102400 MiB of memory (the largest has 81920 MiB)" + tail,
                6);
  EXPECT_THAT(Admitted(r), ElementsAre(7));
  EXPECT_EQ(VerdictOf(r, 8)->code, VerdictCode::kNoFeasibleNode);
}

TEST_F(VerdictTest, AClusterWithoutNodesIsNotCalledInadmissible) {
  // Nodes may still join (agents register): only the quota's maxima are final.
  World w(ClusterBuilder().Model("A100"),
          TreeBuilder().Tenant("t").Queue("q", "t").Queue("small", "t").Max("gpu", 2000));
  w.Add(JobBuilder(1).Queue(w.Queue("q")).Gpus(8));
  w.Add(JobBuilder(2).Queue(w.Queue("small")).Gpus(4));
  const CycleResult r = w.Run(NamedProfile("binpack"));
  ASSERT_NE(VerdictOf(r, 1), nullptr);
  EXPECT_NE(VerdictOf(r, 1)->code, VerdictCode::kInadmissible);
  ASSERT_NE(VerdictOf(r, 2), nullptr);
  EXPECT_EQ(VerdictOf(r, 2)->code, VerdictCode::kInadmissible);
}

TEST_F(VerdictTest, AFilterTheProfileLeavesOutConcludesNothing) {
  ClusterBuilder b;
  b.Node("n0").Gpus(4, "A100").MemoryGib(64).Node("n1").Gpus(4, "A100").MemoryGib(64);
  World w(b, TreeBuilder().Tenant("t").Queue("q", "t"));
  w.Add(JobBuilder(1).Queue(w.Queue("q")).Gpus(1).MemoryMib(100 * 1024));
  ProfileSpec spec = *Profile::Named("binpack");
  spec.filters = {"node-state", "gpu-model", "gpu", "cpu"};  // RAM is not checked per node
  const Result<Profile> profile = Profile::Build(spec);
  ASSERT_TRUE(profile.ok()) << profile.status().ToString();
  const CycleResult r = w.Run(*profile);
  EXPECT_THAT(Admitted(r), ElementsAre(1));
}

TEST(VerdictCodeTest, NamesAreStable) {
  EXPECT_EQ(VerdictCodeName(VerdictCode::kQuotaExceeded), "QuotaExceeded");
  EXPECT_EQ(VerdictCodeName(VerdictCode::kBorrowLimit), "BorrowLimit");
  EXPECT_EQ(VerdictCodeName(VerdictCode::kNoFeasibleNode), "NoFeasibleNode");
  EXPECT_EQ(VerdictCodeName(VerdictCode::kGangIncomplete), "GangIncomplete");
  EXPECT_EQ(VerdictCodeName(VerdictCode::kWaitingForReservation), "WaitingForReservation");
  EXPECT_EQ(VerdictCodeName(VerdictCode::kLowerPriority), "LowerPriority");
  EXPECT_EQ(VerdictCodeName(VerdictCode::kBudgetExhausted), "BudgetExhausted");
  EXPECT_EQ(VerdictCodeName(VerdictCode::kSuspended), "Suspended");
  EXPECT_EQ(VerdictCodeName(VerdictCode::kBackoff), "Backoff");
  EXPECT_EQ(VerdictCodeName(VerdictCode::kNotAllowed), "NotAllowed");
  EXPECT_EQ(VerdictCodeName(VerdictCode::kInadmissible), "Inadmissible");
}

}  // namespace
}  // namespace arbiter::core

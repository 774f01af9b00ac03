#include "core/placement/framework.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "testing/builders.h"
#include "testing/snapshot_state.h"

namespace arbiter::core {
namespace {

using ::arbiter::testing::CaptureSnapshot;
using ::arbiter::testing::ClusterBuilder;
using ::arbiter::testing::DiffSnapshots;
using ::arbiter::testing::GpuFraction;
using ::arbiter::testing::ModelNamed;
using ::arbiter::testing::NamedProfile;
using ::arbiter::testing::NodeNamed;
using ::arbiter::testing::SnapshotState;
using ::arbiter::testing::TreeBuilder;
using ::arbiter::testing::WholeGpus;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

struct Bed {
  explicit Bed(const ClusterBuilder& b)
      : cluster(b.Build()),
        tree(TreeBuilder().Tenant("t").Queue("q", "t").Build(cluster.models())),
        snap(cluster, tree) {}
  Bed(const Bed&) = delete;
  Bed& operator=(const Bed&) = delete;

  NodeId Node(const std::string& name) const { return NodeNamed(cluster, name); }
  GpuModelId Model(const std::string& name = "A100") const { return ModelNamed(cluster, name); }
  // Takes whole GPUs (milli 1000) or shares of the listed slots of a node.
  void Use(const std::string& node, const std::vector<std::pair<uint16_t, int16_t>>& gpus,
           int64_t gpu_memory_mib = 0) {
    TaskPlacement t;
    t.node = Node(node);
    for (const auto& [slot, milli] : gpus) {
      const int64_t mem = milli == 1000
                              ? snap.gpu_free_memory(cluster.node(t.node).gpu_begin + slot)
                              : gpu_memory_mib;
      t.gpus.push_back({slot, milli, mem});
    }
    snap.Allocate(t);
  }
  TaskRequest Request(const TaskResources& r, const Constraints* c = nullptr) const {
    return {&r, r.gpus > 0 ? Model() : kNoModel, c, JobType::kTraining};
  }

  Cluster cluster;
  QuotaTree tree;
  Snapshot snap;
};

ClusterBuilder Nodes(int count, int gpus, const std::string& prefix = "n") {
  ClusterBuilder b;
  for (int i = 0; i < count; ++i) {
    b.Node(prefix + std::to_string(i))
        .Gpus(gpus / 2, "A100")
        .Domain(0)
        .Gpus(gpus / 2, "A100")
        .Domain(1);
  }
  return b;
}

std::vector<uint16_t> Slots(const TaskPlacement& t) {
  std::vector<uint16_t> out;
  for (const GpuShare& g : t.gpus) out.push_back(g.slot);
  return out;
}

// --- Gangs -----------------------------------------------------------------------------------

TEST(PlaceGangTest, AllOrNothingLeavesTheSnapshotUnchanged) {
  Bed bed(Nodes(2, 8));
  bed.Use("n1", {{0, 250}}, 1024);  // something already runs: the restore must keep it
  const SnapshotState before = CaptureSnapshot(bed.snap);
  const uint64_t release_before = bed.snap.release_version();
  const Profile profile = NamedProfile("default");
  const TaskResources eight = WholeGpus(8, 16000, 65536);
  std::vector<TaskPlacement> out;
  PlacementFailure why;
  // n0 takes one task; n1 has 7 whole GPUs left: the gang of three 8-GPU tasks cannot start.
  EXPECT_FALSE(PlaceGang(bed.snap, profile, nullptr, bed.Request(eight), 3, false, &out, &why));
  EXPECT_EQ(why.tasks_placed, 1);
  EXPECT_THAT(out, IsEmpty());
  SnapshotState after = CaptureSnapshot(bed.snap);
  EXPECT_TRUE(after == before) << DiffSnapshots(before, after);
  EXPECT_EQ(bed.snap.release_version(), release_before);

  // With 7-GPU tasks two fit and the third does not.
  const TaskResources seven = WholeGpus(7, 16000, 65536);
  EXPECT_FALSE(PlaceGang(bed.snap, profile, nullptr, bed.Request(seven), 3, false, &out, &why));
  EXPECT_EQ(why.tasks_placed, 2);
  after = CaptureSnapshot(bed.snap);
  EXPECT_TRUE(after == before) << DiffSnapshots(before, after);
}

TEST(PlaceGangTest, ThreeTaskGangWhereTwoFitReportsTwoPlaced) {
  Bed bed(Nodes(2, 8));
  const SnapshotState before = CaptureSnapshot(bed.snap);
  const TaskResources eight = WholeGpus(8);
  std::vector<TaskPlacement> out;
  PlacementFailure why;
  for (const std::string& policy : Profile::NamedProfiles()) {
    SCOPED_TRACE(policy);
    const Profile profile = NamedProfile(policy);
    EXPECT_FALSE(PlaceGang(bed.snap, profile, nullptr, bed.Request(eight), 3, false, &out, &why));
    EXPECT_EQ(why.tasks_placed, 2);
    EXPECT_THAT(out, IsEmpty());
    const SnapshotState after = CaptureSnapshot(bed.snap);
    EXPECT_TRUE(after == before) << DiffSnapshots(before, after);
  }
}

TEST(PlaceGangTest, PlacesEveryTaskAndCommits) {
  Bed bed(Nodes(2, 8));
  const Profile profile = NamedProfile("default");
  const TaskResources four = WholeGpus(4, 8000, 1024);
  std::vector<TaskPlacement> out;
  PlacementFailure why;
  ASSERT_TRUE(PlaceGang(bed.snap, profile, nullptr, bed.Request(four), 4, false, &out, &why));
  ASSERT_EQ(out.size(), 4u);
  std::map<uint32_t, std::set<uint16_t>> slots_by_node;
  for (const TaskPlacement& t : out) {
    EXPECT_EQ(t.gpus.size(), 4u);
    EXPECT_EQ(t.cpu_milli, 8000);
    EXPECT_EQ(t.memory_mib, 1024);
    for (uint16_t s : Slots(t)) {
      EXPECT_TRUE(slots_by_node[t.node.value()].insert(s).second) << "slot used twice";
    }
  }
  // Topology keeps the gang's tasks together: two per node, each task inside one NVLink domain.
  EXPECT_EQ(slots_by_node[0].size(), 8u);
  EXPECT_EQ(slots_by_node[1].size(), 8u);
  for (const TaskPlacement& t : out) {
    const std::vector<uint16_t> s = Slots(t);
    EXPECT_TRUE(s == std::vector<uint16_t>({0, 1, 2, 3}) ||
                s == std::vector<uint16_t>({4, 5, 6, 7}));
  }
  // Committed: the GPUs stay taken.
  EXPECT_EQ(bed.snap.full_free_gpus(NodeId(0), bed.Model()), 0);
  EXPECT_EQ(bed.snap.full_free_gpus(NodeId(1), bed.Model()), 0);
}

TEST(PlaceGangTest, DistinctNodesPutsEveryTaskOnItsOwnNode) {
  Bed bed(Nodes(3, 8));
  const Profile profile = NamedProfile("binpack");
  const TaskResources one = WholeGpus(1);
  std::vector<TaskPlacement> out;
  PlacementFailure why;
  {
    // Without the rule binpack stacks all three tasks on one node.
    Snapshot::Txn txn(bed.snap);
    ASSERT_TRUE(PlaceGang(bed.snap, profile, nullptr, bed.Request(one), 3, false, &out, &why));
    EXPECT_EQ(out[0].node, out[1].node);
    EXPECT_EQ(out[1].node, out[2].node);
  }
  ASSERT_TRUE(PlaceGang(bed.snap, profile, nullptr, bed.Request(one), 3, true, &out, &why));
  std::set<uint32_t> nodes;
  for (const TaskPlacement& t : out) nodes.insert(t.node.value());
  EXPECT_EQ(nodes.size(), 3u);

  // Four distinct nodes do not exist, however many GPUs are free.
  const SnapshotState before = CaptureSnapshot(bed.snap);
  EXPECT_FALSE(PlaceGang(bed.snap, profile, nullptr, bed.Request(one), 4, true, &out, &why));
  EXPECT_EQ(why.tasks_placed, 3);
  const SnapshotState after = CaptureSnapshot(bed.snap);
  EXPECT_TRUE(after == before) << DiffSnapshots(before, after);
}

TEST(PlaceGangTest, TopologyKeepsAGangInOneRack) {
  ClusterBuilder b;
  b.Node("a0").Gpus(8, "A100").Rack("r1");
  b.Node("b0").Gpus(8, "A100").Rack("r2");
  b.Node("a1").Gpus(8, "A100").Rack("r1");
  Bed bed(b);
  const Profile profile = NamedProfile("topology");
  const TaskResources eight = WholeGpus(8);
  std::vector<TaskPlacement> out;
  PlacementFailure why;
  ASSERT_TRUE(PlaceGang(bed.snap, profile, nullptr, bed.Request(eight), 2, true, &out, &why));
  EXPECT_EQ(out[0].node, bed.Node("a0"));
  EXPECT_EQ(out[1].node, bed.Node("a1"));  // same rack as a0, though b0 has the lower id
}

// --- GPU selection ---------------------------------------------------------------------------

TEST(SelectGpusTest, WholeGpusStayInsideOneNvlinkDomainWhenPossible) {
  Bed bed(Nodes(1, 8));
  bed.Use("n0", {{0, 1000}});  // domain 0 has slots 1-3 free, domain 1 has 4-7
  PlacementContext ctx{&bed.snap, nullptr, nullptr};
  std::vector<GpuShare> out;
  auto select = [&](int gpus) {
    const TaskResources r = WholeGpus(gpus);
    EXPECT_TRUE(SelectGpus(ctx, GpuSelector::kBestFit, bed.Request(r), bed.Node("n0"), &out));
    std::vector<uint16_t> slots;
    for (const GpuShare& g : out) slots.push_back(g.slot);
    return slots;
  };
  // The smallest domain that holds the task, so that the larger island stays whole.
  EXPECT_THAT(select(2), ElementsAre(1, 2));
  EXPECT_THAT(select(3), ElementsAre(1, 2, 3));
  EXPECT_THAT(select(4), ElementsAre(4, 5, 6, 7));
  // No domain holds 5: the largest domain first, then the next.
  EXPECT_THAT(select(5), ElementsAre(1, 4, 5, 6, 7));
  EXPECT_THAT(select(7), ElementsAre(1, 2, 3, 4, 5, 6, 7));
  for (const GpuShare& g : out) {
    EXPECT_EQ(g.milli, 1000);
    EXPECT_EQ(g.memory_mib, 80 * 1024);
  }
  const TaskResources eight = WholeGpus(8);
  EXPECT_FALSE(SelectGpus(ctx, GpuSelector::kBestFit, bed.Request(eight), bed.Node("n0"), &out));
}

TEST(SelectGpusTest, SkipsUnhealthyAndSmallGpus) {
  ClusterBuilder b;
  b.Node("n").Gpus(1, "A100").Gpus(1, "A100").GpuMemory(40 * 1024).Gpus(2, "A100").Unhealthy(2);
  Bed bed(b);
  PlacementContext ctx{&bed.snap, nullptr, nullptr};
  std::vector<GpuShare> out;
  TaskResources r = WholeGpus(2);
  ASSERT_TRUE(SelectGpus(ctx, GpuSelector::kBestFit, bed.Request(r), bed.Node("n"), &out));
  EXPECT_THAT(out, ElementsAre(GpuShare{0, 1000, 80 * 1024}, GpuShare{1, 1000, 40 * 1024}));
  r.gpu_memory_mib = 60 * 1024;  // slot 1 is too small, slot 2 is unhealthy
  ASSERT_TRUE(SelectGpus(ctx, GpuSelector::kBestFit, bed.Request(r), bed.Node("n"), &out));
  EXPECT_THAT(out, ElementsAre(GpuShare{0, 1000, 80 * 1024}, GpuShare{3, 1000, 80 * 1024}));
  r.gpus = 3;
  EXPECT_FALSE(SelectGpus(ctx, GpuSelector::kBestFit, bed.Request(r), bed.Node("n"), &out));
}

TEST(SelectGpusTest, FractionalTasksTakeTheLeastFreeGpuThatHoldsThem) {
  Bed bed(Nodes(1, 4));
  // Free milli [1000, 500, 300, 800]; GPU memory left [80, 60, 20, 70] GiB.
  bed.Use("n0", {{1, 500}}, 20 * 1024);
  bed.Use("n0", {{2, 700}}, 60 * 1024);
  bed.Use("n0", {{3, 200}}, 10 * 1024);
  PlacementContext ctx{&bed.snap, nullptr, nullptr};
  std::vector<GpuShare> out;
  auto select = [&](int32_t milli, int64_t mem) {
    const TaskResources r = GpuFraction(milli, mem);
    if (!SelectGpus(ctx, GpuSelector::kBestFit, bed.Request(r), bed.Node("n0"), &out)) return -1;
    EXPECT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].milli, milli);
    EXPECT_EQ(out[0].memory_mib, mem);
    return static_cast<int>(out[0].slot);
  };
  EXPECT_EQ(select(250, 0), 2);
  EXPECT_EQ(select(300, 0), 2);
  EXPECT_EQ(select(301, 0), 1);
  EXPECT_EQ(select(600, 0), 3);
  EXPECT_EQ(select(900, 0), 0);
  EXPECT_EQ(select(250, 30 * 1024), 1);  // slot 2 has only 20 GiB left
  EXPECT_EQ(select(250, 65 * 1024), 3);
  EXPECT_EQ(select(250, 79 * 1024), 0);
}

// --- PlaceTask -------------------------------------------------------------------------------

TEST(PlaceTaskTest, BinpackFillsTheFullerNodeAndSpreadTheEmptier) {
  Bed bed(Nodes(3, 8));
  bed.Use("n1", {{0, 1000}, {1, 1000}, {2, 1000}, {3, 1000}, {4, 1000}});
  bed.Use("n2", {{0, 1000}});
  GangState gang;
  PlacementContext ctx{&bed.snap, &gang, nullptr};
  const TaskResources two = WholeGpus(2);
  TaskPlacement t;
  {
    Snapshot::Txn txn(bed.snap);
    ASSERT_TRUE(PlaceTask(bed.snap, NamedProfile("binpack"), ctx, bed.Request(two), &t));
    EXPECT_EQ(t.node, bed.Node("n1"));
  }
  {
    Snapshot::Txn txn(bed.snap);
    ASSERT_TRUE(PlaceTask(bed.snap, NamedProfile("spread"), ctx, bed.Request(two), &t));
    EXPECT_EQ(t.node, bed.Node("n0"));
  }
  // PlaceTask reserves what it chose.
  ASSERT_TRUE(PlaceTask(bed.snap, NamedProfile("binpack"), ctx, bed.Request(two), &t));
  EXPECT_EQ(bed.snap.full_free_gpus(bed.Node("n1"), bed.Model()), 1);
}

TEST(PlaceTaskTest, TopologyPrefersANodeWhereTheTaskStaysInOneDomain) {
  Bed bed(Nodes(2, 8));
  // n0: two free GPUs in each domain; n1: four free in domain 1. Same free count.
  bed.Use("n0", {{0, 1000}, {1, 1000}, {4, 1000}, {5, 1000}});
  bed.Use("n1", {{0, 1000}, {1, 1000}, {2, 1000}, {3, 1000}});
  GangState gang;
  PlacementContext ctx{&bed.snap, &gang, nullptr};
  const TaskResources three = WholeGpus(3);
  TaskPlacement t;
  ASSERT_TRUE(PlaceTask(bed.snap, NamedProfile("topology"), ctx, bed.Request(three), &t));
  EXPECT_EQ(t.node, bed.Node("n1"));
  EXPECT_THAT(Slots(t), ElementsAre(4, 5, 6));
}

TEST(PlaceTaskTest, TiesGoToTheLowerNodeId) {
  Bed bed(Nodes(4, 8));
  GangState gang;
  PlacementContext ctx{&bed.snap, &gang, nullptr};
  const TaskResources one = WholeGpus(1);
  // The native profiles (the FGD paper's baselines break ties by lot).
  for (const char* policy : {"default", "binpack", "spread", "topology", "fgd"}) {
    SCOPED_TRACE(policy);
    Snapshot::Txn txn(bed.snap);
    TaskPlacement t;
    ASSERT_TRUE(PlaceTask(bed.snap, NamedProfile(policy), ctx, bed.Request(one), &t));
    EXPECT_EQ(t.node, NodeId(0));
  }
}

TEST(PlaceTaskTest, CpuOnlyTasksGoToSchedulableNodes) {
  ClusterBuilder b;
  b.Node("cordoned").Cpus(64).Cordoned().Node("small").Cpus(4).Node("big").Cpus(32);
  Bed bed(b);
  GangState gang;
  PlacementContext ctx{&bed.snap, &gang, nullptr};
  TaskResources r;
  r.cpu_milli = 8000;
  TaskPlacement t;
  ASSERT_TRUE(PlaceTask(bed.snap, NamedProfile("binpack"), ctx, bed.Request(r), &t));
  EXPECT_EQ(t.node, bed.Node("big"));
  EXPECT_THAT(t.gpus, IsEmpty());
  EXPECT_EQ(bed.snap.free_cpu(bed.Node("big")), 24000);
  r.cpu_milli = 48000;
  const SnapshotState before = CaptureSnapshot(bed.snap);
  EXPECT_FALSE(PlaceTask(bed.snap, NamedProfile("binpack"), ctx, bed.Request(r), &t));
  const SnapshotState after = CaptureSnapshot(bed.snap);
  EXPECT_TRUE(after == before) << DiffSnapshots(before, after);
}

TEST(PlaceTaskTest, FractionalTasksShareAGpuBeforeBreakingAWholeOne) {
  Bed bed(Nodes(2, 2));
  bed.Use("n1", {{1, 500}}, 0);
  GangState gang;
  PlacementContext ctx{&bed.snap, &gang, nullptr};
  const TaskResources half = GpuFraction(500, 1024);
  TaskPlacement t;
  ASSERT_TRUE(PlaceTask(bed.snap, NamedProfile("binpack"), ctx, bed.Request(half), &t));
  EXPECT_EQ(t.node, bed.Node("n1"));
  EXPECT_THAT(t.gpus, ElementsAre(GpuShare{1, 500, 1024}));
  // That GPU is now full; the next half goes to a whole free GPU (n1 slot 0: the fuller node).
  ASSERT_TRUE(PlaceTask(bed.snap, NamedProfile("binpack"), ctx, bed.Request(half), &t));
  EXPECT_EQ(t.node, bed.Node("n1"));
  EXPECT_THAT(t.gpus, ElementsAre(GpuShare{0, 500, 1024}));
}

TEST(PlaceTaskTest, RespectsSelectorsAndTaints) {
  ClusterBuilder b;
  b.Node("plain").Gpus(8, "A100");
  b.Node("tainted").Gpus(8, "A100").Taint("dedicated", "infer").Label("pool", "infer");
  Bed bed(b);
  const Constraints none;
  const Constraints infer =
      bed.cluster.MakeConstraints({{"pool", "infer"}}, {{"dedicated", "infer"}});
  const Constraints select_only = bed.cluster.MakeConstraints({{"pool", "infer"}}, {});
  GangState gang;
  PlacementContext ctx{&bed.snap, &gang, nullptr};
  const TaskResources one = WholeGpus(1);
  TaskPlacement t;
  bed.Use("plain", {{0, 1000}});  // binpack would prefer "plain"
  ASSERT_TRUE(PlaceTask(bed.snap, NamedProfile("binpack"), ctx, bed.Request(one, &infer), &t));
  EXPECT_EQ(t.node, bed.Node("tainted"));
  EXPECT_FALSE(
      PlaceTask(bed.snap, NamedProfile("binpack"), ctx, bed.Request(one, &select_only), &t));
  for (int i = 0; i < 7; ++i) {
    ASSERT_TRUE(PlaceTask(bed.snap, NamedProfile("binpack"), ctx, bed.Request(one, &none), &t));
    EXPECT_EQ(t.node, bed.Node("plain"));
  }
  EXPECT_FALSE(PlaceTask(bed.snap, NamedProfile("binpack"), ctx, bed.Request(one, &none), &t));
}

TEST(DiagnoseTaskTest, CountsTheFirstFailingFilterPerNode) {
  ClusterBuilder b;
  b.Node("six-free").Gpus(8, "A100");
  b.Node("two-free").Gpus(8, "A100");
  b.Node("cordoned").Gpus(8, "A100").Cordoned();
  b.Node("h100").Gpus(8, "H100");
  b.Node("tiny-cpu").Gpus(8, "A100").Cpus(2);
  Bed bed(b);
  bed.Use("six-free", {{0, 1000}, {1, 1000}});
  bed.Use("two-free", {{0, 1000}, {1, 1000}, {2, 1000}, {3, 1000}, {4, 1000}, {5, 750}});
  const Profile profile = NamedProfile("default");
  TaskResources r = WholeGpus(8, 4000);
  int best_whole = -1;
  int32_t best_milli = -1;
  FilterCounts counts = DiagnoseTask(bed.snap, profile, bed.Request(r), &best_whole, &best_milli);
  EXPECT_EQ(counts[FilterCode::kInsufficientGpu], 2);
  EXPECT_EQ(counts[FilterCode::kNodeNotReady], 1);
  EXPECT_EQ(counts[FilterCode::kWrongModel], 1);
  EXPECT_EQ(counts[FilterCode::kInsufficientCpu], 1);  // 8 GPUs free, 2 cores
  EXPECT_EQ(counts[FilterCode::kOk], 0);
  // The cordoned node's 8 GPUs do not count; tiny-cpu passes every non-GPU filter but CPU.
  EXPECT_EQ(best_whole, 8);
  r.cpu_milli = 0;
  counts = DiagnoseTask(bed.snap, profile, bed.Request(r), &best_whole, &best_milli);
  EXPECT_EQ(counts[FilterCode::kOk], 1);
  EXPECT_EQ(best_milli, 1000);
}

}  // namespace
}  // namespace arbiter::core

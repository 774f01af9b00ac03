#include "core/placement/plugins.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "core/placement/framework.h"
#include "core/snapshot.h"
#include "testing/builders.h"

namespace arbiter::core {
namespace {

using ::arbiter::testing::ClusterBuilder;
using ::arbiter::testing::GpuFraction;
using ::arbiter::testing::kMibPerGib;
using ::arbiter::testing::ModelNamed;
using ::arbiter::testing::NodeNamed;
using ::arbiter::testing::TreeBuilder;
using ::arbiter::testing::WholeGpus;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A cluster, an empty tree and a snapshot over them. Not movable: the snapshot points into it.
struct Bed {
  explicit Bed(const ClusterBuilder& b)
      : cluster(b.Build()),
        tree(TreeBuilder().Tenant("t").Queue("q", "t").Build(cluster.models())),
        snap(cluster, tree) {}
  Bed(const Bed&) = delete;
  Bed& operator=(const Bed&) = delete;

  NodeId Node(const std::string& name) const { return NodeNamed(cluster, name); }
  GpuModelId Model(const std::string& name) const { return ModelNamed(cluster, name); }
  // Takes `milli` (and `memory_mib`) of each listed GPU slot of a node, plus CPU and RAM.
  void Use(const std::string& node, const std::vector<std::pair<uint16_t, int16_t>>& gpus,
           int64_t cpu_milli = 0, int64_t memory_mib = 0, int64_t gpu_memory_mib = -1) {
    TaskPlacement t;
    t.node = Node(node);
    t.cpu_milli = cpu_milli;
    t.memory_mib = memory_mib;
    for (const auto& [slot, milli] : gpus) {
      const uint32_t g = cluster.node(t.node).gpu_begin + slot;
      const int64_t mem =
          gpu_memory_mib >= 0 ? gpu_memory_mib : cluster.gpus()[g].memory_mib * milli / 1000;
      t.gpus.push_back({slot, milli, mem});
    }
    snap.Allocate(t);
  }

  Cluster cluster;
  QuotaTree tree;
  Snapshot snap;
};

ClusterBuilder FilterCluster() {
  ClusterBuilder b;
  b.Node("ready")
      .Gpus(4, "A100")
      .Domain(0)
      .Gpus(4, "A100")
      .Domain(1)
      .Label("pool", "train")
      .Rack("r1")
      .Node("cordoned")
      .Gpus(8, "A100")
      .Cordoned()
      .Node("draining")
      .Gpus(8, "A100")
      .State(NodeState::kDraining)
      .Node("down")
      .Gpus(2, "A100")
      .State(NodeState::kDown)
      .Node("h100")
      .Gpus(8, "H100")
      .Label("pool", "infer")
      .Taint("dedicated", "infer")
      .Node("cpu-only")
      .Cpus(32)
      .Node("busy")
      .Gpus(4, "A100")
      .Node("small-mem")
      .Gpus(4, "A100")
      .GpuMemory(40 * kMibPerGib)
      .Node("sick")
      .Gpus(2, "A100")
      .Unhealthy(1)
      .Node("maintenance")
      .Gpus(2, "A100")
      .Taint("maintenance");
  return b;
}

struct FilterCase {
  std::string name;
  std::string filter;
  std::string node;
  TaskResources resources;
  std::string model;  // "" for a CPU-only task
  std::map<std::string, std::string> selector;
  std::vector<Toleration> tolerations;
  FilterCode want;
};

TaskResources Cpu(int64_t milli, int64_t memory_mib = 0) {
  TaskResources r;
  r.cpu_milli = milli;
  r.memory_mib = memory_mib;
  return r;
}

TaskResources GpusWithMemory(int32_t n, int64_t gpu_memory_mib) {
  TaskResources r = WholeGpus(n);
  r.gpu_memory_mib = gpu_memory_mib;
  return r;
}

constexpr FilterCode kOk = FilterCode::kOk;

void PrintTo(const FilterCase& c, std::ostream* os) { *os << c.name; }

std::vector<FilterCase> FilterCases() {
  const TaskResources one = WholeGpus(1);
  const int64_t gib = kMibPerGib;
  return {
      {"StateReady", "node-state", "ready", one, "A100", {}, {}, kOk},
      {"StateCordoned", "node-state", "cordoned", one, "A100", {}, {}, FilterCode::kNodeNotReady},
      {"StateDraining", "node-state", "draining", one, "A100", {}, {}, FilterCode::kNodeNotReady},
      {"StateDown", "node-state", "down", one, "A100", {}, {}, FilterCode::kNodeNotReady},

      {"SelectorNone", "node-selector", "ready", one, "A100", {}, {}, kOk},
      {"SelectorMatches", "node-selector", "ready", one, "A100", {{"pool", "train"}}, {}, kOk},
      {"SelectorOtherValue",
       "node-selector",
       "ready",
       one,
       "A100",
       {{"pool", "infer"}},
       {},
       FilterCode::kSelectorMismatch},
      {"SelectorOneOfTwoMissing",
       "node-selector",
       "ready",
       one,
       "A100",
       {{"pool", "train"}, {"zone", "a"}},
       {},
       FilterCode::kSelectorMismatch},
      {"SelectorNodeWithoutLabels",
       "node-selector",
       "cpu-only",
       Cpu(1000),
       "",
       {{"pool", "train"}},
       {},
       FilterCode::kSelectorMismatch},

      {"TaintNone", "taints", "ready", one, "A100", {}, {}, kOk},
      {"TaintNotTolerated", "taints", "h100", one, "H100", {}, {}, FilterCode::kUntoleratedTaint},
      {"TaintToleratedAnyValue", "taints", "h100", one, "H100", {}, {{"dedicated", ""}}, kOk},
      {"TaintToleratedExactValue",
       "taints",
       "h100",
       one,
       "H100",
       {},
       {{"dedicated", "infer"}},
       kOk},
      {"TaintOtherValue",
       "taints",
       "h100",
       one,
       "H100",
       {},
       {{"dedicated", "train"}},
       FilterCode::kUntoleratedTaint},
      {"TaintOtherKey",
       "taints",
       "h100",
       one,
       "H100",
       {},
       {{"pool", ""}},
       FilterCode::kUntoleratedTaint},
      {"TaintWithoutValueTolerated",
       "taints",
       "maintenance",
       one,
       "A100",
       {},
       {{"maintenance", ""}},
       kOk},
      {"TaintWithoutValueUnknownTolerationValue",
       "taints",
       "maintenance",
       one,
       "A100",
       {},
       {{"maintenance", "soon"}},
       FilterCode::kUntoleratedTaint},

      {"ModelPresent", "gpu-model", "ready", one, "A100", {}, {}, kOk},
      {"ModelAbsent", "gpu-model", "h100", one, "A100", {}, {}, FilterCode::kWrongModel},
      {"ModelOnCpuNode", "gpu-model", "cpu-only", one, "A100", {}, {}, FilterCode::kWrongModel},
      {"ModelCpuTaskAnywhere", "gpu-model", "h100", Cpu(1000), "", {}, {}, kOk},

      {"GpuWholeFits", "gpu", "ready", WholeGpus(8), "A100", {}, {}, kOk},
      {"GpuWholeTooMany",
       "gpu",
       "ready",
       WholeGpus(9),
       "A100",
       {},
       {},
       FilterCode::kInsufficientGpu},
      {"GpuNoWholeFreeOnBusy", "gpu", "busy", one, "A100", {}, {}, FilterCode::kInsufficientGpu},
      {"GpuShareFitsPartlyUsedGpu", "gpu", "busy", GpuFraction(500), "A100", {}, {}, kOk},
      {"GpuShareTooLarge",
       "gpu",
       "busy",
       GpuFraction(501),
       "A100",
       {},
       {},
       FilterCode::kInsufficientGpu},
      {"GpuUnhealthyNotCounted",
       "gpu",
       "sick",
       WholeGpus(2),
       "A100",
       {},
       {},
       FilterCode::kInsufficientGpu},
      {"GpuHealthyOne", "gpu", "sick", one, "A100", {}, {}, kOk},
      {"GpuOnCordonedNode", "gpu", "cordoned", one, "A100", {}, {}, FilterCode::kInsufficientGpu},
      {"GpuOtherModel", "gpu", "h100", one, "A100", {}, {}, FilterCode::kInsufficientGpu},
      {"GpuCpuTask", "gpu", "cpu-only", Cpu(1000), "", {}, {}, kOk},

      {"GpuMemoryTooSmall",
       "gpu-memory",
       "small-mem",
       GpusWithMemory(1, 80 * gib),
       "A100",
       {},
       {},
       FilterCode::kInsufficientGpuMemory},
      {"GpuMemoryEnough",
       "gpu-memory",
       "small-mem",
       GpusWithMemory(4, 40 * gib),
       "A100",
       {},
       {},
       kOk},
      {"GpuMemoryNotAsked", "gpu-memory", "small-mem", one, "A100", {}, {}, kOk},
      {"GpuMemoryShareTooLarge",
       "gpu-memory",
       "busy",
       GpuFraction(250, 41 * gib),
       "A100",
       {},
       {},
       FilterCode::kInsufficientGpuMemory},
      {"GpuMemoryShareFits", "gpu-memory", "busy", GpuFraction(250, 40 * gib), "A100", {}, {}, kOk},

      {"CpuAll", "cpu", "ready", Cpu(64000), "", {}, {}, kOk},
      {"CpuOneMilliTooMany", "cpu", "ready", Cpu(64001), "", {}, {}, FilterCode::kInsufficientCpu},
      {"CpuWhatIsLeft", "cpu", "busy", Cpu(24000), "", {}, {}, kOk},
      {"CpuMoreThanLeft", "cpu", "busy", Cpu(24001), "", {}, {}, FilterCode::kInsufficientCpu},

      {"MemoryAll", "memory", "ready", Cpu(0, 512 * gib), "", {}, {}, kOk},
      {"MemoryTooMuch",
       "memory",
       "ready",
       Cpu(0, 512 * gib + 1),
       "",
       {},
       {},
       FilterCode::kInsufficientMemory},
      {"MemoryWhatIsLeft", "memory", "busy", Cpu(0, 112 * gib), "", {}, {}, kOk},
      {"MemoryMoreThanLeft",
       "memory",
       "busy",
       Cpu(0, 112 * gib + 1),
       "",
       {},
       {},
       FilterCode::kInsufficientMemory},
  };
}

class FilterTest : public ::testing::TestWithParam<FilterCase> {};

TEST_P(FilterTest, Filters) {
  const FilterCase& c = GetParam();
  Bed bed(FilterCluster());
  // busy: three GPUs whole, half of the fourth with 40 of its 80 GiB, 40 of 64 cores, 400 GiB.
  bed.Use("busy", {{0, 1000}, {1, 1000}, {2, 1000}}, 40000, 400 * kMibPerGib);
  bed.Use("busy", {{3, 500}});
  const std::unique_ptr<FilterPlugin> f = MakeFilter(c.filter);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->name(), c.filter);
  const Constraints cons = bed.cluster.MakeConstraints(c.selector, c.tolerations);
  TaskRequest req{&c.resources, c.model.empty() ? kNoModel : bed.Model(c.model), &cons,
                  JobType::kTraining};
  GangState gang;
  PlacementContext ctx{&bed.snap, &gang, nullptr};
  EXPECT_EQ(f->Filter(ctx, req, bed.Node(c.node)), c.want)
      << "got " << FilterCodeName(f->Filter(ctx, req, bed.Node(c.node)));
}

INSTANTIATE_TEST_SUITE_P(Cases, FilterTest, ::testing::ValuesIn(FilterCases()),
                         [](const auto& p) { return p.param.name; });

TEST(FilterTest, EveryBuiltinFilterIsCovered) {
  std::set<std::string> covered;
  for (const FilterCase& c : FilterCases()) covered.insert(c.filter);
  for (std::string_view name : BuiltinFilterNames()) {
    if (name == "gang-distinct-nodes") continue;  // GangFilterTest
    if (name == "node-name") continue;            // NodeNameFilterTest
    if (name == "exclusive") continue;            // ExclusiveFilterTest
    EXPECT_TRUE(covered.count(std::string(name))) << name;
  }
  EXPECT_EQ(MakeFilter("no-such-filter"), nullptr);
  EXPECT_EQ(MakeScore("no-such-score"), nullptr);
}

TEST(GangFilterTest, DistinctNodesExcludesNodesTheGangUses) {
  Bed bed(ClusterBuilder().Node("a").Gpus(8, "A100").Node("b").Gpus(8, "A100"));
  const auto f = MakeFilter("gang-distinct-nodes");
  const TaskResources r = WholeGpus(1);
  TaskRequest req{&r, bed.Model("A100"), nullptr, JobType::kTraining};
  GangState gang;
  gang.tasks_total = 2;
  gang.nodes = {bed.Node("a")};
  gang.distinct_nodes = true;
  PlacementContext ctx{&bed.snap, &gang, nullptr};
  EXPECT_EQ(f->Filter(ctx, req, bed.Node("a")), FilterCode::kGangNodeTaken);
  EXPECT_EQ(f->Filter(ctx, req, bed.Node("b")), kOk);
  gang.distinct_nodes = false;
  EXPECT_EQ(f->Filter(ctx, req, bed.Node("a")), kOk);
  PlacementContext no_gang{&bed.snap, nullptr, nullptr};
  EXPECT_EQ(f->Filter(no_gang, req, bed.Node("a")), kOk);
}

TEST(NodeNameFilterTest, ListedAndExcludedNodes) {
  Bed bed(ClusterBuilder().Node("a").Gpus(8, "A100").Node("b").Gpus(8, "A100"));
  const auto f = MakeFilter("node-name");
  const TaskResources r = WholeGpus(1);
  PlacementContext ctx{&bed.snap, nullptr, nullptr};
  auto with = [&](const std::vector<std::string>& only, const std::vector<std::string>& exclude,
                  const char* node) {
    Constraints c;
    bed.cluster.AddNodeConstraints(only, exclude, false, &c);
    TaskRequest req{&r, bed.Model("A100"), &c, JobType::kTraining};
    return f->Filter(ctx, req, bed.Node(node));
  };
  EXPECT_EQ(with({}, {}, "a"), kOk);
  EXPECT_EQ(with({"b"}, {}, "a"), FilterCode::kNodeNotListed);
  EXPECT_EQ(with({"b"}, {}, "b"), kOk);
  EXPECT_EQ(with({"nowhere"}, {}, "b"), FilterCode::kNodeNotListed);  // unknown: nothing matches
  EXPECT_EQ(with({}, {"a"}, "a"), FilterCode::kNodeExcluded);
  EXPECT_EQ(with({}, {"a", "nowhere"}, "b"), kOk);
  EXPECT_EQ(with({"a", "b"}, {"a"}, "a"), FilterCode::kNodeExcluded);
  TaskRequest none{&r, bed.Model("A100"), nullptr, JobType::kTraining};
  EXPECT_EQ(f->Filter(ctx, none, bed.Node("a")), kOk);
}

TEST(ExclusiveFilterTest, OnlyNodesWithNothingAllocated) {
  Bed bed(
      ClusterBuilder().Node("free").Gpus(4, "A100").Node("gpu").Gpus(4, "A100").Node("cpu").Gpus(
          4, "A100"));
  bed.Use("gpu", {{2, 250}}, 0, 0);
  bed.Use("cpu", {}, 1000, 0);
  const auto f = MakeFilter("exclusive");
  const TaskResources r = WholeGpus(1);
  PlacementContext ctx{&bed.snap, nullptr, nullptr};
  Constraints whole;
  whole.exclusive = true;
  TaskRequest req{&r, bed.Model("A100"), &whole, JobType::kTraining};
  EXPECT_EQ(f->Filter(ctx, req, bed.Node("free")), kOk);
  EXPECT_EQ(f->Filter(ctx, req, bed.Node("gpu")), FilterCode::kNodeShared);
  EXPECT_EQ(f->Filter(ctx, req, bed.Node("cpu")), FilterCode::kNodeShared);
  // A task that does not ask for whole nodes is not this filter's concern.
  Constraints shared;
  TaskRequest other{&r, bed.Model("A100"), &shared, JobType::kTraining};
  EXPECT_EQ(f->Filter(ctx, other, bed.Node("gpu")), kOk);
}

TEST(FilterCodeTest, NamesAreReadable) {
  EXPECT_EQ(FilterCodeName(FilterCode::kInsufficientGpu), "not enough free GPUs");
  EXPECT_EQ(FilterCodeName(FilterCode::kUntoleratedTaint), "taint not tolerated");
  for (int c = 0; c < static_cast<int>(FilterCode::kCount); ++c) {
    EXPECT_NE(FilterCodeName(static_cast<FilterCode>(c)), "unknown");
  }
}

// --- Scores ----------------------------------------------------------------------------------

int64_t ScoreOf(const std::string& plugin, const Bed& bed, const TaskResources& r,
                const std::string& node, const std::vector<GpuShare>& gpus,
                const GangState* gang = nullptr, const TaskDistribution* dist = nullptr) {
  const auto s = MakeScore(plugin);
  EXPECT_NE(s, nullptr);
  TaskRequest req{&r, r.gpus > 0 ? bed.Model("A100") : kNoModel, nullptr, JobType::kTraining};
  PlacementContext ctx{&bed.snap, gang, dist};
  return s->Score(ctx, req, bed.Node(node), gpus);
}

GpuShare Whole(uint16_t slot) { return {slot, 1000, 80 * kMibPerGib}; }

TEST(BinpackScoreTest, PrefersFullerNodes) {
  Bed bed(ClusterBuilder()
              .Node("full")
              .Gpus(8, "A100")
              .Node("empty")
              .Gpus(8, "A100")
              .Node("shared")
              .Gpus(2, "A100")
              .Node("cpu")
              .Cpus(32));
  bed.Use("full", {{0, 1000}, {1, 1000}, {2, 1000}, {3, 1000}, {4, 1000}, {5, 1000}});
  bed.Use("shared", {{0, 500}});
  bed.Use("cpu", {}, 16000);
  const TaskResources one = WholeGpus(1);
  // binpack = kMaxScore x (1 - free GPU milli left after the task / node GPU milli).
  EXPECT_EQ(ScoreOf("binpack", bed, one, "full", {Whole(6)}), 875000);   // 1 of 8 left
  EXPECT_EQ(ScoreOf("binpack", bed, one, "empty", {Whole(0)}), 125000);  // 7 of 8 left
  const TaskResources half = GpuFraction(500);
  EXPECT_EQ(ScoreOf("binpack", bed, half, "shared", {{0, 500, 0}}), 500000);  // 1 of 2 left
  // Nodes without GPUs are measured by CPU: 8 of 32 cores left.
  EXPECT_EQ(ScoreOf("binpack", bed, Cpu(8000), "cpu", {}), 750000);
}

TEST(SpreadScoreTest, PrefersEmptierNodes) {
  Bed bed(ClusterBuilder().Node("full").Gpus(8, "A100").Node("empty").Gpus(8, "A100"));
  bed.Use("full", {{0, 1000}, {1, 1000}, {2, 1000}, {3, 1000}, {4, 1000}, {5, 1000}});
  const TaskResources one = WholeGpus(1);
  EXPECT_EQ(ScoreOf("spread", bed, one, "full", {Whole(6)}), 125000);
  EXPECT_EQ(ScoreOf("spread", bed, one, "empty", {Whole(0)}), 875000);
  EXPECT_EQ(MakeScore("spread")->order(), CandidateOrder::kMostFreeFirst);
  EXPECT_EQ(MakeScore("binpack")->order(), CandidateOrder::kFewestFreeFirst);
}

ClusterBuilder TopologyCluster() {
  ClusterBuilder b;
  for (const auto& [name, rack, block] :
       std::vector<std::tuple<std::string, std::string, std::string>>{
           {"t1", "r1", "b1"}, {"t2", "r1", "b1"}, {"t3", "r2", "b1"}, {"t4", "r3", "b2"}}) {
    b.Node(name).Gpus(4, "A100").Domain(0).Gpus(4, "A100").Domain(1).Rack(rack).Block(block);
  }
  return b;
}

TEST(TopologyScoreTest, PrefersOneNvlinkDomain) {
  Bed bed(TopologyCluster());
  const TaskResources two = WholeGpus(2);
  EXPECT_EQ(ScoreOf("topology", bed, two, "t1", {Whole(0), Whole(1)}), 1000000);
  EXPECT_EQ(ScoreOf("topology", bed, two, "t1", {Whole(3), Whole(4)}), 500000);
  EXPECT_EQ(ScoreOf("topology", bed, WholeGpus(1), "t1", {Whole(5)}), 1000000);
}

TEST(TopologyScoreTest, PrefersNodesRacksAndBlocksTheGangUses) {
  Bed bed(TopologyCluster());
  const TaskResources four = WholeGpus(4);
  const std::vector<GpuShare> gpus = {Whole(0), Whole(1), Whole(2), Whole(3)};
  GangState gang;
  gang.tasks_total = 4;
  // First task: the share of the gang the node could hold. 8 free GPUs hold 2 of 4 tasks.
  EXPECT_EQ(ScoreOf("topology", bed, four, "t1", gpus, &gang), (1000000 + 500000) / 2);

  const NodeInfo& t1 = bed.cluster.node(bed.Node("t1"));
  gang.nodes = {bed.Node("t1")};
  gang.racks = {t1.rack};
  gang.blocks = {t1.block};
  // score = (in-node + gang part) / 2; gang part 100% same node, 60% same rack, 30% same block.
  EXPECT_EQ(ScoreOf("topology", bed, four, "t1", gpus, &gang), 1000000);
  EXPECT_EQ(ScoreOf("topology", bed, four, "t2", gpus, &gang), 800000);
  EXPECT_EQ(ScoreOf("topology", bed, four, "t3", gpus, &gang), 650000);
  EXPECT_EQ(ScoreOf("topology", bed, four, "t4", gpus, &gang), 500000);
  // With distinct nodes the node itself is no bonus (the gang filter excludes it anyway).
  gang.distinct_nodes = true;
  EXPECT_EQ(ScoreOf("topology", bed, four, "t1", gpus, &gang), 800000);
}

// The distribution used by the fgd cases: every typical task wants one whole GPU.
TaskDistribution OneWholeGpu() {
  TaskDistribution d;
  d.classes.push_back({0, 1, 1000, kNoModel, 1.0});
  return d;
}

// fgd's score for a change in fragmentation of `delta` milli: the published 0..100 score,
// floor(100 x sigmoid(-delta / 1000)), in units of kMaxScore / 100.
int64_t FgdScoreFor(double delta) {
  return static_cast<int64_t>(100.0 / (1.0 + std::exp(delta / 1000.0))) * (kMaxScore / 100);
}

TEST(FgdScoreTest, ScoresTheChangeInFragmentation) {
  Bed bed(ClusterBuilder().Node("n").Gpus(2, "A100"));
  bed.Use("n", {{0, 500}}, 0, 0, 0);
  const TaskDistribution dist = OneWholeGpu();
  const TaskResources half = GpuFraction(500);
  // Before: free [500, 1000]: the 500 is too small for a whole-GPU task, F = 500.
  // On slot 0: free [0, 1000], F = 0, delta = -500.
  EXPECT_EQ(ScoreOf("fgd", bed, half, "n", {{0, 500, 0}}, nullptr, &dist), FgdScoreFor(-500));
  EXPECT_EQ(FgdScoreFor(-500), 620000);
  // On slot 1: free [500, 500]: no GPU holds a whole-GPU task, F = 1000, delta = +500.
  EXPECT_EQ(ScoreOf("fgd", bed, half, "n", {{1, 500, 0}}, nullptr, &dist), FgdScoreFor(500));
  EXPECT_EQ(FgdScoreFor(500), 370000);
  // No change in fragmentation: the middle. (A CPU-only task leaves every GPU as it is.)
  EXPECT_EQ(ScoreOf("fgd", bed, Cpu(1000), "n", {}, nullptr, &dist), 500000);
  // Without a distribution every node scores the middle.
  const TaskDistribution empty;
  EXPECT_EQ(ScoreOf("fgd", bed, half, "n", {{1, 500, 0}}, nullptr, &empty), 500000);
  EXPECT_EQ(ScoreOf("fgd", bed, half, "n", {{1, 500, 0}}, nullptr, nullptr), 500000);
}

TEST(FgdScoreTest, PlacementGrowsFragmentationLeast) {
  // "packed" has one free GPU: binpack goes there, and leaves a half GPU no typical task can use.
  // "roomy" has a half-used GPU: fgd fills it and fragmentation shrinks.
  Bed bed(ClusterBuilder().Node("packed").Gpus(4, "A100").Node("roomy").Gpus(4, "A100"));
  bed.Use("packed", {{0, 1000}, {1, 1000}, {2, 1000}});
  bed.Use("roomy", {{0, 500}}, 0, 0, 0);
  const TaskDistribution dist = OneWholeGpu();
  const TaskResources half = GpuFraction(500);
  TaskRequest req{&half, bed.Model("A100"), nullptr, JobType::kTraining};

  // packed: F 0 -> 500, delta +500. roomy slot 0: F 500 -> 0, delta -500.
  EXPECT_EQ(ScoreOf("fgd", bed, half, "packed", {{3, 500, 0}}, nullptr, &dist), FgdScoreFor(500));
  EXPECT_EQ(ScoreOf("fgd", bed, half, "roomy", {{0, 500, 0}}, nullptr, &dist), FgdScoreFor(-500));

  const Profile fgd = ::arbiter::testing::NamedProfile("fgd");
  GangState gang;
  PlacementContext ctx{&bed.snap, &gang, &dist};
  TaskPlacement t;
  ASSERT_TRUE(PlaceTask(bed.snap, fgd, ctx, req, &t));
  EXPECT_EQ(t.node, bed.Node("roomy"));
  EXPECT_THAT(t.gpus, ElementsAre(GpuShare{0, 500, 0}));
}

TEST(FgdSelectorTest, PicksTheGpuThatKeepsTypicalTasksRunnable) {
  // Free [300, 600]; typical tasks want 300 milli. Best fit takes the 300 (leaving 50 that no
  // typical task can use); fgd takes from the 600 and both GPUs still hold a typical task.
  Bed bed(ClusterBuilder().Node("n").Gpus(2, "A100"));
  bed.Use("n", {{0, 700}, {1, 400}}, 0, 0, 0);
  TaskDistribution dist;
  dist.classes.push_back({0, 1, 300, kNoModel, 1.0});
  const TaskResources r = GpuFraction(250);
  TaskRequest req{&r, bed.Model("A100"), nullptr, JobType::kTraining};
  PlacementContext ctx{&bed.snap, nullptr, &dist};
  std::vector<GpuShare> out;
  ASSERT_TRUE(SelectGpus(ctx, GpuSelector::kBestFit, req, bed.Node("n"), &out));
  EXPECT_THAT(out, ElementsAre(GpuShare{0, 250, 0}));
  ASSERT_TRUE(SelectGpus(ctx, GpuSelector::kFgd, req, bed.Node("n"), &out));
  EXPECT_THAT(out, ElementsAre(GpuShare{1, 250, 0}));
}

// --- fgd-plus ------------------------------------------------------------------------------

// Typical tasks: one whole GPU with 8 cores and 32 GiB; the demand ratios 8 cores and 32 GiB per
// GPU.
TaskDistribution EightCoresPerGpu() {
  TaskDistribution d;
  d.classes.push_back({8000, 1, 1000, kNoModel, 1.0});
  d.cpu_per_gpu_milli = 8.0;
  d.memory_per_gpu_milli = 32.0 * 1024 / 1000;
  return d;
}

// kMaxScore / 2 - cost x kMaxScore / (6 x 1000 x largest node's GPUs), as plugins.cc writes it.
int64_t PlusScoreFor(double cost, int max_gpus) {
  return std::llround(static_cast<double>(kMaxScore) / 2 -
                      cost * static_cast<double>(kMaxScore) / (6.0 * 1000 * max_gpus));
}

TEST(FgdPlusScoreTest, CpuOnlyTasksGoWhereCpuIsInSurplusOfTheIdleGpus) {
  // "lean": 4 GPUs and the 32 cores they need at 8 cores a GPU; "rich": 4 GPUs and 96 cores.
  Bed bed(
      ClusterBuilder().Node("lean").Gpus(4, "A100").Cpus(32).Node("rich").Gpus(4, "A100").Cpus(96));
  const TaskDistribution dist = EightCoresPerGpu();
  const TaskResources cpu = Cpu(16000);
  // lean: S 0 -> 4000 - 16000 / 8 = 2000.
  EXPECT_EQ(ScoreOf("fgd-plus", bed, cpu, "lean", {}, nullptr, &dist), PlusScoreFor(2000, 4));
  // rich: 80 cores stay for 4 GPUs: nothing strands.
  EXPECT_EQ(ScoreOf("fgd-plus", bed, cpu, "rich", {}, nullptr, &dist), PlusScoreFor(0, 4));
  // Without typical tasks, best fit alone: leftover 1000 x (16/96 + 4/4) / 2 = 583.3 on lean,
  // 1000 x (80/96 + 1) / 2 = 916.7 on rich, a tenth of each as the cost.
  EXPECT_EQ(ScoreOf("fgd-plus", bed, cpu, "lean", {}, nullptr, nullptr),
            PlusScoreFor(583.33333333 / 10, 4));
  EXPECT_EQ(ScoreOf("fgd-plus", bed, cpu, "rich", {}, nullptr, nullptr),
            PlusScoreFor(916.66666667 / 10, 4));

  // FGD sees no change on either node (8 cores still fit) and takes the lower id; bestfit takes
  // the node with less left over; the default profile keeps lean's CPU for its GPUs.
  GangState gang;
  PlacementContext ctx{&bed.snap, &gang, &dist};
  TaskRequest req{&cpu, kNoModel, nullptr, JobType::kTraining};
  TaskPlacement t;
  ASSERT_TRUE(
      FindPlacement(bed.snap, ::arbiter::testing::NamedProfile("fgd"), ctx, req, &t, nullptr));
  EXPECT_EQ(t.node, bed.Node("lean"));
  ASSERT_TRUE(
      FindPlacement(bed.snap, ::arbiter::testing::NamedProfile("bestfit"), ctx, req, &t, nullptr));
  EXPECT_EQ(t.node, bed.Node("lean"));
  ASSERT_TRUE(
      FindPlacement(bed.snap, ::arbiter::testing::NamedProfile("default"), ctx, req, &t, nullptr));
  EXPECT_EQ(t.node, bed.Node("rich"));
}

TEST(FgdPlusScoreTest, MemoryStrandsGpusLikeCpu) {
  // Both nodes have CPU to spare; "small-ram" has 128 GiB for 4 GPUs that need 4 x 32 GiB.
  Bed bed(ClusterBuilder()
              .Node("small-ram")
              .Gpus(4, "A100")
              .MemoryGib(128)
              .Node("big-ram")
              .Gpus(4, "A100")
              .MemoryGib(512));
  const TaskDistribution dist = EightCoresPerGpu();
  const TaskResources task = Cpu(1000, 64 * kMibPerGib);
  GangState gang;
  PlacementContext ctx{&bed.snap, &gang, &dist};
  TaskRequest req{&task, kNoModel, nullptr, JobType::kTraining};
  TaskPlacement t;
  ASSERT_TRUE(
      FindPlacement(bed.snap, ::arbiter::testing::NamedProfile("default"), ctx, req, &t, nullptr));
  EXPECT_EQ(t.node, bed.Node("big-ram"));
}

TEST(FgdPlusScoreTest, GpuTasksFollowFragmentationAndBestFitWithoutTypicalTasks) {
  // As for fgd: the half GPU goes where it completes a half-used GPU ("roomy"), not where it
  // would leave a half that typical tasks cannot use ("packed").
  Bed bed(ClusterBuilder().Node("packed").Gpus(4, "A100").Node("roomy").Gpus(4, "A100"));
  bed.Use("packed", {{0, 1000}, {1, 1000}, {2, 1000}});
  bed.Use("roomy", {{0, 500}}, 0, 0, 0);
  const TaskDistribution dist = OneWholeGpu();
  const TaskResources half = GpuFraction(500);
  EXPECT_GT(ScoreOf("fgd-plus", bed, half, "roomy", {{0, 500, 0}}, nullptr, &dist),
            ScoreOf("fgd-plus", bed, half, "packed", {{3, 500, 0}}, nullptr, &dist));
  // Without a distribution only the best-fit term is left: the fuller node wins.
  EXPECT_GT(ScoreOf("fgd-plus", bed, half, "packed", {{3, 500, 0}}, nullptr, nullptr),
            ScoreOf("fgd-plus", bed, half, "roomy", {{0, 500, 0}}, nullptr, nullptr));
}

TEST(FgdPlusScoreTest, TasksThatMayRunAnywhereLeaveReservedModelsAlone) {
  // Half the GPUs are T4; tasks that must run on T4 ask for a quarter of the demand, so a T4 GPU
  // costs a task that could run elsewhere min(1, 0.25 / 0.5) = half of what it takes.
  Bed bed(ClusterBuilder().Node("t4").Gpus(4, "T4").Node("g2").Gpus(4, "G2"));
  TaskDistribution dist = OneWholeGpu();
  dist.exclusive_share.assign(2, 0.0);
  dist.exclusive_share[bed.Model("T4").value()] = 0.25;
  const TaskResources one = WholeGpus(1);
  const auto score = MakeScore("fgd-plus");
  GangState gang;
  PlacementContext ctx{&bed.snap, &gang, &dist};
  TaskRequest on_t4{&one, bed.Model("T4"), nullptr, JobType::kTraining};
  TaskRequest on_g2{&one, bed.Model("G2"), nullptr, JobType::kTraining};
  const int64_t t4 = score->Score(ctx, on_t4, bed.Node("t4"), {Whole(0)});
  const int64_t g2 = score->Score(ctx, on_g2, bed.Node("g2"), {Whole(0)});
  // Everything else is equal: the difference is R = 1000 x 0.5 GPU milli.
  EXPECT_EQ(g2 - t4, PlusScoreFor(0, 4) - PlusScoreFor(500, 4));
}

TEST(FgdPlusScoreTest, KeepsWholeNodesForMultiGpuTasksWhileTheirRoomIsScarce) {
  // Two empty 8-GPU nodes and "used", whose 2 idle GPUs have 10 cores left for them. A whole GPU
  // with 10 cores costs 1250 on "used" (the typical task no longer fits its last GPU, dF = 1000;
  // it strands, dS = 1000 - 0 / 8 - (2000 - 10000 / 8) = 250) and nothing on an empty node, so
  // fgd-plus opens one.
  Bed bed(ClusterBuilder()
              .Node("used")
              .Gpus(8, "A100")
              .Cpus(96)
              .Node("whole-a")
              .Gpus(8, "A100")
              .Cpus(96)
              .Node("whole-b")
              .Gpus(8, "A100")
              .Cpus(96));
  bed.Use("used", {{0, 1000}, {1, 1000}, {2, 1000}, {3, 1000}, {4, 1000}, {5, 1000}}, 86000);
  TaskDistribution dist = EightCoresPerGpu();
  const TaskResources one{1, 1000, 0, 10000, 0};
  GangState gang;
  PlacementContext ctx{&bed.snap, &gang, &dist};
  TaskRequest req{&one, bed.Model("A100"), nullptr, JobType::kTraining};
  const Profile def = ::arbiter::testing::NamedProfile("default");
  TaskPlacement t;
  ASSERT_TRUE(FindPlacement(bed.snap, def, ctx, req, &t, nullptr));
  EXPECT_EQ(t.node, bed.Node("whole-a"));

  // Tasks of 8 GPUs and 64 cores ask for 80% of the GPU demand. The two empty nodes hold 16 of
  // the 18 idle GPUs, more than 80% of them: their room is not scarce, and nothing changes.
  dist.multi_gpu = {{8, 64000, 0.8}};
  EXPECT_TRUE(ScarceMultiGpu(dist, bed.snap).classes.empty());
  ASSERT_TRUE(FindPlacement(bed.snap, def, ctx, req, &t, nullptr));
  EXPECT_EQ(t.node, bed.Node("whole-a"));

  // At 90% of the demand (16.2 of 18 GPUs) their room is scarce, and fgd-plus adds the growth of
  // their fragmentation (weight 1): opening a whole node leaves 7 GPUs an 8-GPU task cannot use
  // (+7000), while on "used", where it could not run before either, one idle GPU fewer is
  // unusable (-1000, so 250 in all).
  dist.multi_gpu = {{8, 64000, 0.9}};
  const TaskDistribution scarce = ScarceMultiGpu(dist, bed.snap);
  ASSERT_EQ(scarce.classes.size(), 1u);
  EXPECT_EQ(scarce.classes[0].gpus, 8);
  EXPECT_EQ(scarce.classes[0].cpu_milli, 64000);
  EXPECT_EQ(ScoreOf("fgd-plus", bed, one, "whole-a", {Whole(0)}, nullptr, &dist),
            PlusScoreFor(7000, 8));
  EXPECT_EQ(ScoreOf("fgd-plus", bed, one, "used", {Whole(6)}, nullptr, &dist),
            PlusScoreFor(250, 8));
  ASSERT_TRUE(FindPlacement(bed.snap, def, ctx, req, &t, nullptr));
  EXPECT_EQ(t.node, bed.Node("used"));

  // A shape that needs more CPU: only "whole-a" and "whole-b" have it, and the 64-core tasks
  // cannot use other room either. Demand is what needs at least a shape's room: 0.1 of it for
  // the 90-core shape, 0.1 + 0.2 for the 64-core one.
  dist.multi_gpu = {{8, 64000, 0.2}, {8, 90000, 0.1}};
  EXPECT_TRUE(ScarceMultiGpu(dist, bed.snap).classes.empty());
  dist.multi_gpu = {{8, 64000, 0.2}, {8, 90000, 0.9}};  // 16 < 0.9 x 18 for both
  EXPECT_EQ(ScarceMultiGpu(dist, bed.snap).classes.size(), 2u);
  dist.multi_gpu = {{8, 64000, 0.9}};

  // The cache gives the same classes, and follows the snapshot as it changes.
  FragmentationCache cache(dist);
  EXPECT_EQ(cache.ScarceMultiGpu(bed.snap).classes.size(), 1u);
  bed.Use("whole-b", {}, 40000);  // CPU-only work leaves "whole-b" too few cores for the task
  EXPECT_EQ(cache.ScarceMultiGpu(bed.snap).classes.size(), 1u);
  dist.multi_gpu = {{8, 64000, 0.4}};  // 8 of 18 idle GPUs are room, 40% is 7.2
  FragmentationCache relaxed(dist);
  EXPECT_TRUE(relaxed.ScarceMultiGpu(bed.snap).classes.empty());
  bed.Use("whole-a", {{0, 1000}});  // the last whole node opened: no room at all
  EXPECT_EQ(relaxed.ScarceMultiGpu(bed.snap).classes.size(), 1u);
}

TEST(FgdPlusScoreTest, DefaultProfileNeedsTheDistribution) {
  const Profile p = ::arbiter::testing::NamedProfile("default");
  EXPECT_TRUE(p.needs_distribution());
  EXPECT_EQ(p.gpu_selector(), GpuSelector::kFgd);
  ASSERT_EQ(p.scores().size(), 3u);
  EXPECT_EQ(p.scores()[0].first->name(), "fgd-plus");
  EXPECT_EQ(p.scores()[1].first->name(), "topology");
  EXPECT_EQ(p.scores()[2].first->name(), "image-locality");
}

TEST(TaskDistributionTest, DemandRatiosAreOverEveryGpuTask) {
  std::vector<TaskClass> samples(3);
  samples[0].cpu_milli = 8000;  // one whole GPU, 8 cores, 32 GiB
  samples[0].gpus = 1;
  samples[0].gpu_milli = 1000;
  samples[0].memory_mib = 32768;
  samples[1].cpu_milli = 4000;  // CPU-only: not counted
  samples[1].memory_mib = 1 << 20;
  samples[2].cpu_milli = 2000;  // half a GPU, 2 cores, 1 GiB
  samples[2].gpus = 1;
  samples[2].gpu_milli = 500;
  samples[2].memory_mib = 1024;
  const TaskDistribution d = TaskDistribution::FromTasks(samples);
  EXPECT_DOUBLE_EQ(d.cpu_per_gpu_milli, 10000.0 / 1500);
  EXPECT_DOUBLE_EQ(d.memory_per_gpu_milli, 33792.0 / 1500);
  EXPECT_TRUE(d.exclusive_share.empty());  // no task names a model
  EXPECT_TRUE(d.multi_gpu.empty());        // no task takes several whole GPUs
  EXPECT_DOUBLE_EQ(TaskDistribution::FromTasks({}).cpu_per_gpu_milli, 0);

  // The whole GPU may run on models 1 or 3 only: its 1000 of the 1500 milli split over both.
  samples[0].models = (1u << 1) | (1u << 3);
  const TaskDistribution e = TaskDistribution::FromTasks(samples);
  ASSERT_EQ(e.exclusive_share.size(), 4u);
  EXPECT_DOUBLE_EQ(e.exclusive_share[0], 0);
  EXPECT_DOUBLE_EQ(e.exclusive_share[1], 500.0 / 1500);
  EXPECT_DOUBLE_EQ(e.exclusive_share[3], 500.0 / 1500);

  // Tasks of several whole GPUs: their share of the GPU demand and their mean CPU, by GPU count.
  TaskClass four;
  four.cpu_milli = 30000;
  four.gpus = 4;
  four.gpu_milli = 1000;
  samples.push_back(four);
  four.cpu_milli = 34000;
  samples.push_back(four);
  TaskClass two_halves = four;  // shares of two GPUs: not whole GPUs
  two_halves.gpus = 2;
  two_halves.gpu_milli = 500;
  samples.push_back(two_halves);
  const TaskDistribution f = TaskDistribution::FromTasks(samples);
  ASSERT_EQ(f.multi_gpu.size(), 2u);
  EXPECT_EQ(f.multi_gpu[0].gpus, 4);
  EXPECT_EQ(f.multi_gpu[0].cpu_milli, 30000);
  EXPECT_DOUBLE_EQ(f.multi_gpu[0].share, 4000.0 / 10500);
  EXPECT_EQ(f.multi_gpu[1].cpu_milli, 34000);
}

TEST(TaskDistributionTest, KeepsTheCommonestMultiGpuShapesAndFoldsTheRestDown) {
  // 17 shapes of 2 whole GPUs with 1..17 cores, the one with 5 cores the rarest: its demand
  // joins the shape with 4 cores, whose room it can use.
  std::vector<TaskClass> samples;
  for (int cores = 1; cores <= 17; ++cores) {
    TaskClass t;
    t.cpu_milli = cores * 1000;
    t.gpus = 2;
    t.gpu_milli = 1000;
    for (int k = 0; k < (cores == 5 ? 1 : 2); ++k) samples.push_back(t);
  }
  const TaskDistribution d = TaskDistribution::FromTasks(samples);
  ASSERT_EQ(d.multi_gpu.size(), TaskDistribution::kMaxMultiGpuShapes);
  EXPECT_EQ(d.multi_gpu[3].cpu_milli, 4000);
  EXPECT_DOUBLE_EQ(d.multi_gpu[3].share, 3.0 / 33);
  EXPECT_EQ(d.multi_gpu[4].cpu_milli, 6000);
  EXPECT_DOUBLE_EQ(d.multi_gpu[4].share, 2.0 / 33);
}

// --- Fragmentation and the task distribution -------------------------------------------------

struct FragmentationCase {
  std::string name;
  std::vector<TaskClass> classes;
  int64_t free_cpu;
  std::vector<int32_t> free;
  double want;
};

void PrintTo(const FragmentationCase& c, std::ostream* os) { *os << c.name; }

std::vector<FragmentationCase> FragmentationCases() {
  const TaskClass whole{0, 1, 1000, kNoModel, 0.5};
  const TaskClass half{0, 1, 500, kNoModel, 0.5};
  const std::vector<int32_t> free = {1000, 700, 200, 0};  // idle 1900
  return {
      // whole: one GPU holds it; 700 + 200 too small -> 900. half: two hold it; 200 -> 200.
      {"MixOfWholeAndHalf", {whole, half}, 64000, free, 0.5 * 900 + 0.5 * 200},
      {"TaskNeedsTwoWholeGpus", {{0, 2, 1000, kNoModel, 1.0}}, 64000, free, 1900},
      {"OtherModel", {{0, 1, 500, GpuModelId(1), 1.0}}, 64000, free, 1900},
      {"SameModel", {{0, 1, 500, GpuModelId(0), 1.0}}, 64000, free, 200},
      {"NotEnoughCpu", {{8000, 1, 500, kNoModel, 1.0}}, 4000, free, 1900},
      {"CpuOnlyTaskCannotUseGpus", {{1000, 0, 0, kNoModel, 1.0}}, 64000, free, 1900},
      {"NoIdleGpu", {whole, half}, 64000, {0, 0}, 0},
      {"AllWholeFree", {whole, half}, 64000, {1000, 1000}, 0},
  };
}

class NodeFragmentationTest : public ::testing::TestWithParam<FragmentationCase> {};

TEST_P(NodeFragmentationTest, MatchesHandComputedValue) {
  const FragmentationCase& c = GetParam();
  TaskDistribution d;
  d.classes = c.classes;
  EXPECT_DOUBLE_EQ(NodeFragmentation(d, GpuModelId(0), c.free_cpu, c.free.data(),
                                     static_cast<int>(c.free.size())),
                   c.want);
}

INSTANTIATE_TEST_SUITE_P(Cases, NodeFragmentationTest, ::testing::ValuesIn(FragmentationCases()),
                         [](const auto& p) { return p.param.name; });

TEST(TaskDistributionTest, KeepsTheMostFrequentShapesAndRenormalises) {
  const TaskClass a{4000, 1, 1000, GpuModelId(0), 0};
  const TaskClass b{1000, 1, 500, GpuModelId(0), 0};
  const TaskClass c{0, 2, 1000, kNoModel, 0};
  const TaskClass d{0, 8, 1000, kNoModel, 0};
  // 5 a, 3 b, 1 c, 1 d, interleaved: the order of samples does not matter.
  const std::vector<TaskClass> samples = {d, a, b, a, c, b, a, a, b, a};
  auto shapes = [](const TaskDistribution& dist) {
    std::vector<std::pair<int32_t, double>> out;
    for (const TaskClass& k : dist.classes)
      out.emplace_back(k.gpus * 10000 + k.gpu_milli, k.weight);
    return out;
  };
  using P = std::pair<int32_t, double>;
  // Default coverage (95%) keeps all four; c and d tie on count and come in key order.
  EXPECT_THAT(shapes(TaskDistribution::FromTasks(samples)),
              ElementsAre(P{11000, 0.5}, P{10500, 0.3}, P{21000, 0.1}, P{81000, 0.1}));
  // 75%: a (50%) and b (80% in all); weights renormalised to 5/8 and 3/8.
  EXPECT_THAT(shapes(TaskDistribution::FromTasks(samples, 0.75)),
              ElementsAre(P{11000, 5.0 / 8}, P{10500, 3.0 / 8}));
  // 85%: a, b and c (90%).
  const TaskDistribution d85 = TaskDistribution::FromTasks(samples, 0.85);
  ASSERT_EQ(d85.classes.size(), 3u);
  EXPECT_DOUBLE_EQ(d85.classes[2].weight, 1.0 / 9);
  EXPECT_EQ(d85.classes[2].gpus, 2);
  EXPECT_EQ(d85.classes[0].cpu_milli, 4000);
  EXPECT_EQ(d85.classes[0].model, GpuModelId(0));
  EXPECT_EQ(d85.classes[2].model, kNoModel);
  EXPECT_TRUE(TaskDistribution::FromTasks({}).classes.empty());
}

// --- Profiles --------------------------------------------------------------------------------

struct ProfileErrorCase {
  std::string name;
  ProfileSpec spec;
  std::string field;
  std::string message;
};

void PrintTo(const ProfileErrorCase& c, std::ostream* os) { *os << c.name; }

ProfileSpec Spec(std::vector<ScoreWeightSpec> scores, std::vector<std::string> filters = {},
                 std::string selector = "best-fit", int32_t nodes_to_score = 0) {
  ProfileSpec s;
  s.scores = std::move(scores);
  s.filters = std::move(filters);
  s.gpu_selector = std::move(selector);
  s.nodes_to_score = nodes_to_score;
  return s;
}

std::vector<ProfileErrorCase> ProfileErrorCases() {
  return {
      {"UnknownFilter", Spec({{"binpack", 1}}, {"node-state", "gpu-typo"}), "filters[1]",
       "unknown filter plugin 'gpu-typo'"},
      {"FilterTwice", Spec({{"binpack", 1}}, {"cpu", "cpu"}), "filters[1]",
       "filter 'cpu' listed twice"},
      {"NoScore", Spec({}), "scores", "at least one score"},
      {"UnknownScore", Spec({{"binpack", 1}, {"pack", 1}}), "scores[1].plugin",
       "unknown score plugin 'pack'"},
      {"ZeroWeight", Spec({{"binpack", 0}}), "scores[0].weight",
       "must be between 1 and 1000, got 0"},
      {"WeightTooLarge", Spec({{"binpack", 1}, {"topology", 1001}}), "scores[1].weight",
       "must be between 1 and 1000, got 1001"},
      {"UnknownGpuSelector", Spec({{"binpack", 1}}, {}, "worst-fit"), "gpu_selector",
       "unknown GPU selector 'worst-fit'"},
      {"NegativeNodesToScore", Spec({{"binpack", 1}}, {}, "best-fit", -1), "nodes_to_score",
       "must be >= 0, got -1"},
  };
}

class ProfileBuildErrorTest : public ::testing::TestWithParam<ProfileErrorCase> {};

TEST_P(ProfileBuildErrorTest, NamesTheField) {
  const ProfileErrorCase& c = GetParam();
  const Result<Profile> p = Profile::Build(c.spec);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(p.status().field(), c.field);
  EXPECT_THAT(p.status().message(), HasSubstr(c.message));
}

INSTANTIATE_TEST_SUITE_P(Cases, ProfileBuildErrorTest, ::testing::ValuesIn(ProfileErrorCases()),
                         [](const auto& p) { return p.param.name; });

TEST(ProfileTest, UnknownNamedPolicyListsTheKnownOnes) {
  const Result<ProfileSpec> p = Profile::Named("fifo");
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().field(), "policy");
  EXPECT_THAT(p.status().message(),
              HasSubstr("unknown policy 'fifo'; known: default, binpack, spread, topology, fgd"));
}

TEST(ProfileTest, NamedProfilesBuildWithTheirProperties) {
  for (const std::string& name : Profile::NamedProfiles()) {
    SCOPED_TRACE(name);
    const Profile p = ::arbiter::testing::NamedProfile(name);
    EXPECT_EQ(p.name(), name);
    // No filter list: every built-in filter, in the built-in order.
    std::vector<std::string_view> filters;
    for (const auto& f : p.filters()) filters.push_back(f->name());
    EXPECT_EQ(filters, BuiltinFilterNames());
  }
  const Profile binpack = ::arbiter::testing::NamedProfile("binpack");
  EXPECT_EQ(binpack.order(), CandidateOrder::kFewestFreeFirst);
  EXPECT_TRUE(binpack.stop_at_first_bucket());
  EXPECT_FALSE(binpack.needs_distribution());
  const Profile spread = ::arbiter::testing::NamedProfile("spread");
  EXPECT_EQ(spread.order(), CandidateOrder::kMostFreeFirst);
  EXPECT_TRUE(spread.stop_at_first_bucket());
  const Profile topology = ::arbiter::testing::NamedProfile("topology");
  EXPECT_FALSE(topology.stop_at_first_bucket());  // topology depends on more than free counts
  const Profile fgd = ::arbiter::testing::NamedProfile("fgd");
  EXPECT_TRUE(fgd.needs_distribution());
  EXPECT_EQ(fgd.gpu_selector(), GpuSelector::kFgd);
  EXPECT_FALSE(fgd.stop_at_first_bucket());
}

TEST(ProfileTest, TheHeaviestScoreSetsTheCandidateOrder) {
  const Result<Profile> p = Profile::Build(Spec({{"binpack", 1}, {"spread", 3}}));
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->order(), CandidateOrder::kMostFreeFirst);
  // The two scores disagree on order: stopping at the first bucket would be wrong.
  EXPECT_FALSE(p->stop_at_first_bucket());
  ASSERT_EQ(p->scores().size(), 2u);
  EXPECT_EQ(p->scores()[1].second, 3);
  const Result<Profile> only = Profile::Build(Spec({{"binpack", 1}}, {"gpu", "cpu"}));
  ASSERT_TRUE(only.ok());
  ASSERT_EQ(only->filters().size(), 2u);
  EXPECT_EQ(only->filters()[0]->name(), "gpu");
}

TEST(ProfileTest, NodesToScoreIsAdaptive) {
  const Profile p = ::arbiter::testing::NamedProfile("binpack");
  EXPECT_EQ(p.NodesToScore(10), 10u);
  EXPECT_EQ(p.NodesToScore(100), 100u);
  EXPECT_EQ(p.NodesToScore(1000), 420u);   // 50% - 1000/125 = 42%
  EXPECT_EQ(p.NodesToScore(5000), 500u);   // 50% - 40% = 10%
  EXPECT_EQ(p.NodesToScore(10000), 500u);  // floor of 5%
  EXPECT_EQ(p.NodesToScore(150), 100u);    // never fewer than 100
  const Result<Profile> fixed = Profile::Build(Spec({{"binpack", 1}}, {}, "best-fit", 7));
  ASSERT_TRUE(fixed.ok());
  EXPECT_EQ(fixed->NodesToScore(10000), 7u);
}

// --- image-locality ----------------------------------------------------------------------------

// Four CPU nodes: a and b hold a 500 MiB image, c holds it with no size known, d holds nothing.
struct ImageBed {
  ImageBed()
      : cluster(MakeCluster()),
        tree(TreeBuilder().Tenant("t").Queue("q", "t").Build(cluster.models())),
        snap(cluster, tree) {}
  static Cluster MakeCluster() {
    std::vector<arbiter::Node> nodes;
    for (const char* name : {"a", "b", "c", "d"}) {
      arbiter::Node n;
      n.name = name;
      n.cpu_milli = 8000;
      n.memory_mib = 8192;
      nodes.push_back(n);
    }
    const int64_t size = int64_t{500} << 20;
    nodes[0].images = {{"reg/trainer:1", "sha256:1", size}, {"reg/small:1", "sha256:2", 1 << 20}};
    nodes[1].images = {{"reg/trainer:1", "sha256:1", size}};
    nodes[2].images = {{"reg/trainer:1", "sha256:1", 0}};
    auto c = Cluster::Build({}, nodes);
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return std::move(c).value();
  }
  int64_t Score(const std::string& image, const std::string& node) const {
    const TaskResources r = {};
    TaskRequest req{&r, kNoModel, nullptr, JobType::kTraining};
    req.image = cluster.FindImage(image);
    PlacementContext ctx{&snap, nullptr, nullptr};
    return MakeScore("image-locality")->Score(ctx, req, NodeNamed(cluster, node), {});
  }
  Cluster cluster;
  QuotaTree tree;
  Snapshot snap;
};

TEST(ImageLocalityScoreTest, PrefersNodesThatHoldTheImageWeightedBySize) {
  const ImageBed bed;
  EXPECT_EQ(bed.cluster.image_nodes(bed.cluster.FindImage("reg/trainer:1")), 3u);
  EXPECT_EQ(bed.cluster.FindImage("reg/other:1"), kNoImage);
  // scaled = 500 MiB x 3 / 4 = 375 MiB: kMaxScore x (375 - 23) / (1000 - 23).
  const int64_t held = kMaxScore * ((int64_t{375} << 20) - (int64_t{23} << 20)) /
                       ((int64_t{1000} << 20) - (int64_t{23} << 20));
  EXPECT_EQ(bed.Score("reg/trainer:1", "a"), held);
  EXPECT_EQ(bed.Score("reg/trainer:1", "b"), held);
  EXPECT_EQ(bed.Score("reg/trainer:1", "c"), kMaxScore / 2);  // held, size unknown
  EXPECT_EQ(bed.Score("reg/trainer:1", "d"), 0);              // a pull
  // An image of 1 MiB is not worth a preference; one no node holds, or none, neither.
  EXPECT_EQ(bed.Score("reg/small:1", "a"), 0);
  EXPECT_EQ(bed.Score("reg/other:1", "a"), 0);
  EXPECT_EQ(bed.Score("", "a"), 0);
}

TEST(ImageLocalityScoreTest, IsInTheDefaultProfile) {
  auto spec = Profile::Named("default");
  ASSERT_TRUE(spec.ok());
  bool found = false;
  for (const ScoreWeightSpec& s : spec->scores) found = found || s.plugin == "image-locality";
  EXPECT_TRUE(found);
  EXPECT_TRUE(Profile::Build(*spec).ok());
}

}  // namespace
}  // namespace arbiter::core

#include "sim/inflate.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "common/rng.h"
#include "core/placement/plugins.h"
#include "core/quota/quota_tree.h"

namespace arbiter::sim {
namespace {

const std::string kFixtures = ARBITER_FIXTURES_DIR "/openb";

// The fixture cluster and workload, built once.
struct World {
  core::Cluster cluster;
  std::vector<TraceTask> trace;
  Workload workload;
};

World LoadWorld(const std::string& nodes, const std::string& pods) {
  auto n = LoadOpenbNodes(nodes);
  EXPECT_TRUE(n.ok()) << n.status().ToString();
  auto c = core::Cluster::Build(n->models, n->nodes);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  auto p = LoadOpenbPods(pods);
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  World w{std::move(*c), std::move(*p), {}};
  w.workload = CompileWorkload(w.cluster, w.trace);
  return w;
}

const World& Fixture() {
  static const World w = LoadWorld(kFixtures + "/nodes.csv", kFixtures + "/pods.csv");
  return w;
}

core::Profile MakeProfile(const std::string& name, size_t nodes) {
  auto spec = core::Profile::Named(name);
  EXPECT_TRUE(spec.ok()) << spec.status().ToString();
  spec->nodes_to_score = static_cast<int32_t>(nodes);
  auto p = core::Profile::Build(*spec);
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  return std::move(*p);
}

TraceTask Task(int64_t cpu, int32_t gpus, int32_t milli, std::string spec = "") {
  TraceTask t;
  t.resources.cpu_milli = cpu;
  t.resources.memory_mib = 1024;
  t.resources.gpus = gpus;
  t.resources.gpu_milli = gpus == 0 ? 1000 : milli;
  t.gpu_spec = spec;
  if (!spec.empty()) t.gpu_models = {spec};
  return t;
}

TEST(TypicalTasks, TakesTheMostFrequentClassesUpToTheCoverage) {
  const World& w = Fixture();
  std::vector<TraceTask> tasks;
  for (int i = 0; i < 6; ++i) tasks.push_back(Task(8000, 1, 500));
  for (int i = 0; i < 3; ++i) tasks.push_back(Task(4000, 0, 0));  // CPU-only tasks count too
  tasks.push_back(Task(2000, 1, 1000, "T4"));
  const core::TaskDistribution d = TypicalTasks(w.cluster, tasks, 0.9);
  ASSERT_EQ(d.classes.size(), 2u);  // 6 + 3 of 10 reach 90%
  EXPECT_EQ(d.classes[0].gpu_milli, 500);
  EXPECT_DOUBLE_EQ(d.classes[0].weight, 6.0 / 9.0);
  EXPECT_EQ(d.classes[1].gpus, 0);
  EXPECT_DOUBLE_EQ(d.classes[1].weight, 3.0 / 9.0);
  const core::TaskDistribution all = TypicalTasks(w.cluster, tasks, 1.0);
  ASSERT_EQ(all.classes.size(), 3u);
  const GpuModelId t4 = w.cluster.FindModel("T4");
  EXPECT_TRUE(all.classes[2].AllowsModel(t4));
  EXPECT_FALSE(all.classes[2].AllowsModel(w.cluster.FindModel("G2")));
}

TEST(TypicalTasks, EqualCountsGoInThePublishedOrder) {
  const World& w = Fixture();
  // Equal counts: larger CPU first.
  const core::TaskDistribution d =
      TypicalTasks(w.cluster, {Task(1000, 1, 1000), Task(3000, 1, 1000), Task(2000, 1, 1000)}, 0.5);
  ASSERT_EQ(d.classes.size(), 2u);
  EXPECT_EQ(d.classes[0].cpu_milli, 3000);
  EXPECT_EQ(d.classes[1].cpu_milli, 2000);
}

TEST(CompileWorkload, AllowedModelsFollowTheSpec) {
  const World& w = Fixture();
  std::vector<TraceTask> tasks = {Task(1000, 1, 1000), Task(1000, 1, 1000, "T4"), Task(1000, 0, 0),
                                  Task(1000, 1, 1000, "A100")};
  const Workload wl = CompileWorkload(w.cluster, tasks);
  EXPECT_EQ(wl.tasks[0].models.size(), w.cluster.models().size());
  ASSERT_EQ(wl.tasks[1].models.size(), 1u);
  EXPECT_EQ(wl.tasks[1].models[0], w.cluster.FindModel("T4"));
  EXPECT_TRUE(wl.tasks[2].models.empty());
  EXPECT_TRUE(wl.tasks[3].models.empty());  // a model the cluster lacks: never fits
}

TEST(FragmentationCache, GivesTheDirectValue) {
  const World& w = Fixture();
  core::FragmentationCache cache(w.workload.typical);
  Rng rng(7);
  for (int i = 0; i < 5000; ++i) {
    const auto model = GpuModelId(static_cast<uint16_t>(rng.Uniform(w.cluster.models().size())));
    const int n = 1 + static_cast<int>(rng.Uniform(9));  // 9 GPUs: past the memo's key size
    int32_t free[9];
    for (int g = 0; g < n; ++g) free[g] = static_cast<int32_t>(rng.Uniform(11) * 100);
    const auto cpu = static_cast<int64_t>(rng.Uniform(130)) * 1000;
    EXPECT_EQ(cache.Get(model, cpu, free, n),
              core::NodeFragmentation(w.workload.typical, model, cpu, free, n));
  }
  EXPECT_GT(cache.size(), 0u);
}

TEST(FragmentationCache, PlacementsAreTheSameWithAndWithout) {
  const World& w = Fixture();
  const core::Profile profile = MakeProfile("fgd", w.cluster.num_nodes());
  auto tree = core::QuotaTree::Build({}, w.cluster.models());
  ASSERT_TRUE(tree.ok());
  core::Snapshot with(w.cluster, *tree);
  core::Snapshot without(w.cluster, *tree);
  core::FragmentationCache cache(w.workload.typical);
  const core::PlacementContext cw{&with, nullptr, &w.workload.typical, 0, &cache};
  const core::PlacementContext cn{&without, nullptr, &w.workload.typical, 0, nullptr};
  int placed = 0;
  for (int round = 0; round < 3; ++round) {  // three times the fixture fills the cluster
    for (const SimTask& t : w.workload.tasks) {
      core::TaskPlacement a;
      core::TaskPlacement b;
      const bool ok = PlaceOnAnyModel(with, profile, cw, t, &a);
      ASSERT_EQ(ok, PlaceOnAnyModel(without, profile, cn, t, &b));
      if (ok) {
        ASSERT_EQ(a, b);
        ++placed;
      }
    }
  }
  EXPECT_GT(placed, 300);
}

TEST(FragmentationMeter, EmptyClusterCountsWhatCannotRunAnywhere) {
  const World& w = Fixture();
  auto tree = core::QuotaTree::Build({}, w.cluster.models());
  ASSERT_TRUE(tree.ok());
  core::Snapshot snap(w.cluster, *tree);
  FragmentationMeter meter(snap, w.workload.typical);
  // Nothing is allocated, so only classes that never fit a node (CPU-only tasks, too many GPUs,
  // too much CPU, a wrong model) fragment: the ratio is their weight share, far below 1.
  EXPECT_GT(meter.ratio(), 0.0);
  EXPECT_LT(meter.ratio(), 0.5);
  double sum_f = 0;
  int64_t sum_g = 0;
  for (uint32_t i = 0; i < w.cluster.num_nodes(); ++i) {
    sum_f += meter.NodeFragment(NodeId(i));
    sum_g += meter.NodeIdle(NodeId(i));
  }
  EXPECT_EQ(sum_g, w.cluster.capacity()[core::kDimGpu]);
  EXPECT_NEAR(meter.ratio(), sum_f / static_cast<double>(sum_g), 1e-12);
}

TEST(PlaceOnAnyModel, ScoresEveryAllowedModelInOnePass) {
  // Two single-node models: the task fits on both and goes where the score is higher.
  std::vector<GpuModel> models = {{"A", 16384, 0}, {"B", 16384, 0}};
  std::vector<Node> nodes(2);
  nodes[0].name = "a";
  nodes[1].name = "b";
  for (Node& n : nodes) {
    n.cpu_milli = 64000;
    n.memory_mib = 262144;
  }
  for (int g = 0; g < 8; ++g) nodes[0].gpus.push_back({g, "A", 0, true, 0});  // 8 idle GPUs
  for (int g = 0; g < 2; ++g) nodes[1].gpus.push_back({g, "B", 0, true, 0});  // 2 idle GPUs
  auto cluster = core::Cluster::Build(models, nodes);
  ASSERT_TRUE(cluster.ok());
  auto tree = core::QuotaTree::Build({}, cluster->models());
  ASSERT_TRUE(tree.ok());
  core::Snapshot snap(*cluster, *tree);
  // gpupacking prefers the smaller idle node (33 - 2 idle GPUs beats 33 - 8).
  const core::Profile packing = MakeProfile("gpupacking", 2);
  SimTask task;
  task.resources.gpus = 1;
  task.resources.cpu_milli = 1000;
  task.models = {GpuModelId(0), GpuModelId(1)};
  core::PlacementContext ctx{&snap, nullptr, nullptr, 1};
  core::TaskPlacement out;
  ASSERT_TRUE(PlaceOnAnyModel(snap, packing, ctx, task, &out));
  EXPECT_EQ(out.node, NodeId(1));
  EXPECT_EQ(snap.free_cpu(NodeId(1)), 63000);  // reserved
  // Only model A allowed: node 0.
  task.models = {GpuModelId(0)};
  ASSERT_TRUE(PlaceOnAnyModel(snap, packing, ctx, task, &out));
  EXPECT_EQ(out.node, NodeId(0));
  // No allowed model present: it fits nowhere.
  task.models.clear();
  EXPECT_FALSE(PlaceOnAnyModel(snap, packing, ctx, task, &out));
}

void ExpectWellFormed(const InflateRun& run, double target) {
  const int max_d = static_cast<int>(target * 100 + 1e-9);
  ASSERT_EQ(run.curve.size(), static_cast<size_t>(max_d + 1));
  double last_alloc = 0;
  for (int d = 0; d <= max_d; ++d) {
    const CurvePoint& p = run.curve[static_cast<size_t>(d)];
    EXPECT_EQ(p.demand_pct, d);
    // Never more allocated than arrived, nor than the cluster has; nothing is ever released.
    EXPECT_LE(p.alloc_pct, d + 1e-9);
    EXPECT_LE(p.alloc_pct, 100.0 + 1e-9);
    EXPECT_GE(p.alloc_pct, last_alloc);
    EXPECT_GE(p.frag_pct, 0.0);
    EXPECT_LE(p.frag_pct, 100.0 + 1e-9);
    last_alloc = p.alloc_pct;
  }
  EXPECT_LE(run.demand_pct_end, target * 100 + 1e-9);
  EXPECT_GT(run.demand_pct_end, target * 100 - 9);  // copies take it close to the target
  EXPECT_LE(run.alloc_pct_end, 100.0);
  EXPECT_LE(run.placed, run.tasks);
}

class InflatePolicy : public ::testing::TestWithParam<std::string> {};

TEST_P(InflatePolicy, CurveIsCompleteAndWithinCapacity) {
  const World& w = Fixture();
  const core::Profile profile = MakeProfile(GetParam(), w.cluster.num_nodes());
  auto run = RunInflate(w.cluster, w.workload, profile, 42, 1.3);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ExpectWellFormed(*run, 1.3);
  // Placement works: the cluster takes most of the work before it is full.
  EXPECT_GT(run->curve[50].alloc_pct, 45.0) << GetParam();
}

TEST_P(InflatePolicy, SameSeedSameRun) {
  const World& w = Fixture();
  const core::Profile profile = MakeProfile(GetParam(), w.cluster.num_nodes());
  auto a = RunInflate(w.cluster, w.workload, profile, 7, 1.3);
  auto b = RunInflate(w.cluster, w.workload, profile, 7, 1.3);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->tasks, b->tasks);
  EXPECT_EQ(a->placed, b->placed);
  ASSERT_EQ(a->curve.size(), b->curve.size());
  for (size_t i = 0; i < a->curve.size(); ++i) {
    EXPECT_EQ(a->curve[i].alloc_pct, b->curve[i].alloc_pct) << "seed 7, demand " << i;
    EXPECT_EQ(a->curve[i].frag_pct, b->curve[i].frag_pct) << "seed 7, demand " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Policies, InflatePolicy,
                         ::testing::Values("fgd", "bestfit", "dotprod", "gpupacking",
                                           "gpuclustering", "random", "binpack", "default"));

TEST(Inflate, SeedsShuffleDifferently) {
  const World& w = Fixture();
  const core::Profile profile = MakeProfile("random", w.cluster.num_nodes());
  auto a = RunInflate(w.cluster, w.workload, profile, 1, 1.3);
  auto b = RunInflate(w.cluster, w.workload, profile, 2, 1.3);
  ASSERT_TRUE(a.ok() && b.ok());
  bool differ = a->tasks != b->tasks;
  for (size_t i = 0; i < a->curve.size() && !differ; ++i) {
    differ = a->curve[i].alloc_pct != b->curve[i].alloc_pct;
  }
  EXPECT_TRUE(differ);
}

TEST(Inflate, TargetBelowTheTraceDropsTasks) {
  const World& w = Fixture();  // the fixture asks for about 66% of its GPUs
  const core::Profile profile = MakeProfile("bestfit", w.cluster.num_nodes());
  auto run = RunInflate(w.cluster, w.workload, profile, 42, 0.4);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ExpectWellFormed(*run, 0.4);
  EXPECT_LT(run->tasks, static_cast<int64_t>(w.trace.size()));
}

TEST(Inflate, RejectsBadInput) {
  const World& w = Fixture();
  const core::Profile profile = MakeProfile("fgd", w.cluster.num_nodes());
  EXPECT_FALSE(RunInflate(w.cluster, w.workload, profile, 1, 0).ok());
  EXPECT_FALSE(RunInflate(w.cluster, w.workload, profile, 1, -1).ok());
  Workload empty;
  EXPECT_FALSE(RunInflate(w.cluster, empty, profile, 1, 1.3).ok());
}

TEST(Inflate, MultiGpuAndModelSpecFixtures) {
  const World multi = LoadWorld(kFixtures + "/nodes.csv", kFixtures + "/pods_multigpu.csv");
  const World spec = LoadWorld(kFixtures + "/nodes.csv", kFixtures + "/pods_gpuspec.csv");
  for (const World* w : {&multi, &spec}) {
    const core::Profile profile = MakeProfile("fgd", w->cluster.num_nodes());
    auto run = RunInflate(w->cluster, w->workload, profile, 42, 1.3);
    ASSERT_TRUE(run.ok()) << run.status().ToString();
    ExpectWellFormed(*run, 1.3);
  }
}

// --- The published experiment on the real trace -------------------------------------------------

std::string TracesDir() {
  if (const char* env = std::getenv("ARBITER_TRACES_DIR")) return env;
  return ARBITER_TRACES_DIR;
}

// FGD paper, default trace, 130% demand, mean of seeds 42..51 (ATC'23, and traces/README.md).
constexpr double kPublishedFgd = 95.39;
constexpr double kPublishedBestFit = 93.08;

TEST(InflateFidelity, FgdAndBestFitMatchThePaper) {
  const std::string dir = TracesDir() + "/openb";
  if (!std::filesystem::exists(dir + "/openb_pod_list_default.csv")) {
    GTEST_SKIP() << "no traces at " << dir;
  }
  const World w =
      LoadWorld(dir + "/openb_node_list_gpu_node.csv", dir + "/openb_pod_list_default.csv");
  // Four seeds instead of the paper's ten keep this test to a few seconds, with a looser bound:
  // 0.6 instead of the 0.5 the ten-seed means meet (FGD 95.32, BestFit 93.35; the four-seed means
  // are 95.30 and 93.25; docs/simulator.md).
  const std::vector<uint64_t> seeds = {42, 43, 44, 45};
  for (const auto& [policy, published] :
       {std::pair<std::string, double>{"fgd", kPublishedFgd}, {"bestfit", kPublishedBestFit}}) {
    const core::Profile profile = MakeProfile(policy, w.cluster.num_nodes());
    std::vector<InflateRun> runs;
    for (uint64_t seed : seeds) {
      auto run = RunInflate(w.cluster, w.workload, profile, seed, 1.3);
      ASSERT_TRUE(run.ok()) << run.status().ToString();
      runs.push_back(std::move(*run));
    }
    const std::vector<CurvePoint> mean = MeanCurve(runs);
    ASSERT_EQ(mean.size(), 131u);
    EXPECT_NEAR(mean[130].alloc_pct, published, 0.6) << policy;
    EXPECT_NEAR(mean[0].frag_pct, 14.0, 0.2) << policy;  // the empty cluster's fragmentation
  }
}

}  // namespace
}  // namespace arbiter::sim

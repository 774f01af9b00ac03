#include "core/placement/baselines.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/placement/plugins.h"
#include "core/quota/quota_tree.h"

namespace arbiter::core {
namespace {

// A cluster of nodes described as (cpu cores, GPUs of one model "G"), 256 GiB each.
struct Fixture {
  explicit Fixture(const std::vector<std::pair<int, int>>& shapes) {
    std::vector<Node> nodes;
    for (size_t i = 0; i < shapes.size(); ++i) {
      Node n;
      n.name = fmt::format("n{}", i);
      n.cpu_milli = int64_t{shapes[i].first} * 1000;
      n.memory_mib = 262144;
      for (int g = 0; g < shapes[i].second; ++g) n.gpus.push_back({g, "G", 0, true, 0});
      nodes.push_back(n);
    }
    cluster = std::make_unique<Cluster>(*Cluster::Build({{"G", 16384, 0}}, nodes));
    tree = std::make_unique<QuotaTree>(*QuotaTree::Build({}, cluster->models()));
    snap = std::make_unique<Snapshot>(*cluster, *tree);
  }
  // Uses `milli` of GPU `slot` on node n (and `cpu` milli-cores).
  void Use(uint32_t n, uint16_t slot, int16_t milli, int64_t cpu = 0) {
    TaskPlacement t;
    t.node = NodeId(n);
    t.gpus = {{slot, milli, 0}};
    t.cpu_milli = cpu;
    snap->Allocate(t);
  }
  int64_t Score(std::string_view plugin, const TaskResources& r, uint32_t n) const {
    auto p = MakeScore(plugin);
    PlacementContext ctx{snap.get(), nullptr, nullptr, 3};
    TaskRequest req{&r, r.gpus > 0 ? GpuModelId(0) : kNoModel, nullptr, JobType::kTraining};
    std::vector<GpuShare> gpus;
    EXPECT_TRUE(SelectGpus(ctx, GpuSelector::kBestFit, req, NodeId(n), &gpus));
    return p->Score(ctx, req, NodeId(n), gpus);
  }
  std::unique_ptr<Cluster> cluster;
  std::unique_ptr<QuotaTree> tree;
  std::unique_ptr<Snapshot> snap;
};

TaskResources Gpus(int32_t gpus, int32_t milli, int64_t cpu) {
  TaskResources r;
  r.gpus = gpus;
  r.gpu_milli = milli;
  r.cpu_milli = cpu;
  return r;
}

int64_t P(int64_t published) { return published * kPublishedPoint; }

TEST(Baselines, AreRegisteredAndNamed) {
  for (std::string_view name : BaselineScoreNames()) {
    auto s = MakeScore(name);
    ASSERT_NE(s, nullptr) << name;
    EXPECT_EQ(s->name(), name);
    auto spec = Profile::Named(name);
    ASSERT_TRUE(spec.ok()) << name;
    EXPECT_TRUE(Profile::Build(*spec).ok()) << name;
  }
  EXPECT_EQ(MakeBaselineScore("nope"), nullptr);
}

TEST(Baselines, BestFitIsThePublishedFormula) {
  Fixture f({{128, 8}, {64, 2}});  // the largest node: 128 cores, 8 GPUs
  // Node 1 after an 8-core 1-GPU task: (1 - 0.5 x 56/128 - 0.5 x 1000/8000) x 100 = 71.875 -> 71.
  EXPECT_EQ(f.Score("bestfit", Gpus(1, 1000, 8000), 1), P(71));
  // The empty largest node: (1 - 0.5 x 120/128 - 0.5 x 7/8) x 100 = 9.375 -> 9.
  EXPECT_EQ(f.Score("bestfit", Gpus(1, 1000, 8000), 0), P(9));
}

TEST(Baselines, DotProductPrefersTheSmallestAlignment) {
  Fixture f({{128, 8}, {32, 2}});
  const TaskResources r = Gpus(1, 1000, 16000);
  // Node 0: dot = (1 x 16/128 + 1 x 1/8) / 2 = 0.125 -> 87; node 1: (0.25 x 0.125 + 0.25 x 0.125)
  // / 2 = 0.03125 -> 96.
  EXPECT_EQ(f.Score("dotprod", r, 0), P(87));
  EXPECT_EQ(f.Score("dotprod", r, 1), P(96));
}

TEST(Baselines, GpuPackingTiers) {
  Fixture f({{64, 8}, {64, 2}, {64, 4}, {64, 4}});
  f.Use(2, 0, 1000);  // node 2: one GPU taken whole
  f.Use(3, 0, 300);   // node 3: one GPU shared, 700 free
  // Every GPU idle: max(33 - idle, idle).
  EXPECT_EQ(f.Score("gpupacking", Gpus(1, 1000, 1000), 0), P(25));
  EXPECT_EQ(f.Score("gpupacking", Gpus(1, 1000, 1000), 1), P(31));
  // A partly used node, the task needs k idle GPUs: max(50 - k, 33).
  EXPECT_EQ(f.Score("gpupacking", Gpus(2, 1000, 1000), 2), P(48));
  // The share fits a used GPU with 70% free: 100 - 70 / 10 = 93.
  EXPECT_EQ(f.Score("gpupacking", Gpus(1, 500, 1000), 3), P(93));
  // CPU-only tasks score 0 everywhere.
  EXPECT_EQ(f.Score("gpupacking", Gpus(0, 1000, 1000), 3), 0);
}

TEST(Baselines, GpuClusteringGroupsTaskKinds) {
  Fixture f({{64, 8}, {64, 8}, {64, 8}, {64, 8}});
  f.Use(1, 0, 300);  // node 1 runs a share
  f.Use(2, 0, 300);  // node 2 runs a share and a whole GPU
  f.Use(2, 1, 1000);
  f.Use(3, 0, 1000);  // node 3 runs a whole GPU
  const TaskResources share = Gpus(1, 500, 1000);
  // fill = 25 x (8000 - free) / 8000.
  EXPECT_EQ(f.Score("gpuclustering", share, 0), P(25 + 0));  // no GPU task yet
  EXPECT_EQ(f.Score("gpuclustering", share, 1), P(75 + 0));  // only shares: 25 x 300 / 8000 = 0
  EXPECT_EQ(f.Score("gpuclustering", share, 2), P(50 + 4));  // shares among others: 1300 used
  EXPECT_EQ(f.Score("gpuclustering", share, 3), P(0 + 3));   // only other kinds
  EXPECT_EQ(f.Score("gpuclustering", Gpus(1, 1000, 1000), 3), P(75 + 3));
}

TEST(Baselines, GpuTaskKindsFollowAllocationsAndRollback) {
  Fixture f({{64, 8}});
  EXPECT_TRUE(f.snap->gpu_task_kinds(NodeId(0)).empty());
  {
    Snapshot::Txn txn(*f.snap);
    f.Use(0, 0, 300);
    f.Use(0, 1, 1000);
    f.Use(0, 2, 200);
    const auto& kinds = f.snap->gpu_task_kinds(NodeId(0));
    ASSERT_EQ(kinds.size(), 2u);
    EXPECT_EQ(kinds[0], (std::pair<int16_t, int32_t>{0, 2}));
    EXPECT_EQ(kinds[1], (std::pair<int16_t, int32_t>{1, 1}));
  }
  EXPECT_TRUE(f.snap->gpu_task_kinds(NodeId(0)).empty());  // rolled back
}

TEST(Baselines, RandomIsReproducibleAndSpreads) {
  Fixture f({{64, 2}, {64, 2}, {64, 2}, {64, 2}});
  auto spec = Profile::Named("random");
  auto profile = Profile::Build(*spec);
  ASSERT_TRUE(profile.ok());
  const TaskResources r = Gpus(1, 100, 10);
  std::map<uint32_t, int> hits;
  for (uint64_t seed = 0; seed < 400; ++seed) {
    PlacementContext ctx{f.snap.get(), nullptr, nullptr, seed};
    TaskRequest req{&r, GpuModelId(0), nullptr, JobType::kTraining};
    TaskPlacement a;
    TaskPlacement b;
    ASSERT_TRUE(FindPlacement(*f.snap, *profile, ctx, req, &a, nullptr));
    ASSERT_TRUE(FindPlacement(*f.snap, *profile, ctx, req, &b, nullptr));
    EXPECT_EQ(a.node, b.node) << "seed " << seed;  // a pure function of (seed, version, node)
    ++hits[a.node.value()];
  }
  ASSERT_EQ(hits.size(), 4u);
  for (const auto& [node, count] : hits) EXPECT_GT(count, 60) << "node " << node;
}

TEST(Baselines, DecisionDrawStaysInRangeAndChangesWithTheSnapshot) {
  Fixture f({{64, 2}});
  PlacementContext ctx{f.snap.get(), nullptr, nullptr, 11};
  EXPECT_LT(DecisionDraw(ctx, NodeId(0), 1000), 1000u);
  const uint64_t before = DecisionDraw(ctx, NodeId(0), uint64_t{1} << 40);
  EXPECT_EQ(DecisionDraw(ctx, NodeId(0), uint64_t{1} << 40), before);
  f.Use(0, 0, 10);  // a new snapshot version: a fresh draw
  EXPECT_NE(DecisionDraw(ctx, NodeId(0), uint64_t{1} << 40), before);
  ctx.seed = 12;
  EXPECT_NE(DecisionDraw(ctx, NodeId(0), uint64_t{1} << 40), before);
}

TEST(Baselines, FindPlacementLeavesTheSnapshotAndTiesGoToTheLowerNode) {
  // Four identical empty nodes: bestfit scores them all the same.
  Fixture f({{64, 2}, {64, 2}, {64, 2}, {64, 2}});
  f.Use(3, 0, 1000);
  f.Use(3, 1, 1000);  // node 3 full
  auto profile = Profile::Build(*Profile::Named("bestfit"));
  ASSERT_TRUE(profile.ok());
  const TaskResources r = Gpus(1, 1000, 1000);
  PlacementContext ctx{f.snap.get(), nullptr, nullptr, 0};
  TaskRequest req{&r, GpuModelId(0), nullptr, JobType::kTraining};
  const uint64_t version = f.snap->version();
  TaskPlacement t;
  int64_t score = -1;
  ASSERT_TRUE(FindPlacement(*f.snap, *profile, ctx, req, &t, &score));
  EXPECT_EQ(f.snap->version(), version);  // nothing reserved
  EXPECT_EQ(t.node, NodeId(0));
  EXPECT_EQ(score, f.Score("bestfit", r, 0));
  // After a reservation on node 1, node 1 (now fuller) scores higher than 0 and 2.
  f.Use(1, 0, 1000);
  ASSERT_TRUE(FindPlacement(*f.snap, *profile, ctx, req, &t, nullptr));
  EXPECT_EQ(t.node, NodeId(1));
}

TEST(Fgd, ScoresThePublishedSigmoidOfTheFragmentationDrop) {
  Fixture f({{64, 2}});
  TaskDistribution d;
  TaskClass c;
  c.cpu_milli = 1000;
  c.gpus = 1;
  c.gpu_milli = 600;
  c.weight = 1.0;
  d.classes = {c};
  auto fgd = MakeScore("fgd");
  const TaskResources r = Gpus(1, 500, 1000);
  PlacementContext ctx{f.snap.get(), nullptr, &d, 0};
  TaskRequest req{&r, GpuModelId(0), nullptr, JobType::kTraining};
  // Placing 500 on one of two idle GPUs leaves 500 too small for the class: F grows from 0 to 500.
  std::vector<GpuShare> gpus = {{0, 500, 0}};
  const int64_t expected = static_cast<int64_t>(100.0 / (1.0 + std::exp(0.5)));  // 37
  EXPECT_EQ(fgd->Score(ctx, req, NodeId(0), gpus), P(expected));
  // Through a FragmentationCache the score is the same.
  FragmentationCache cache(d);
  ctx.frag_cache = &cache;
  EXPECT_EQ(fgd->Score(ctx, req, NodeId(0), gpus), P(expected));
  EXPECT_GT(cache.size(), 0u);
}

TEST(Fragmentation, ClassesWithSeveralModels) {
  TaskDistribution d;
  TaskClass c;
  c.gpus = 1;
  c.gpu_milli = 1000;
  c.weight = 1.0;
  c.models = (1u << 1) | (1u << 3);  // models 1 and 3
  d.classes = {c};
  const int32_t idle[2] = {1000, 1000};
  EXPECT_EQ(NodeFragmentation(d, GpuModelId(1), 0, idle, 2), 0.0);
  EXPECT_EQ(NodeFragmentation(d, GpuModelId(3), 0, idle, 2), 0.0);
  EXPECT_EQ(NodeFragmentation(d, GpuModelId(2), 0, idle, 2), 2000.0);  // cannot run: all idle
}

}  // namespace
}  // namespace arbiter::core

#include "core/cluster.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "testing/builders.h"

namespace arbiter::core {
namespace {

using ::arbiter::testing::ClusterBuilder;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(ClusterTest, CompilesNodesGpusAndCapacity) {
  const Cluster c = ClusterBuilder()
                        .Model("A100", 80 * 1024)
                        .Model("H100", 80 * 1024)
                        .Node("n0")
                        .Gpus(4, "A100")
                        .Domain(0)
                        .Gpus(4, "A100")
                        .Domain(1)
                        .Rack("r1")
                        .Label("pool", "train")
                        .Label("arch", "x86")
                        .Node("n1")
                        .Gpus(2, "H100")
                        .GpuMemory(94 * 1024)
                        .Unhealthy(1)
                        .Cpus(32)
                        .Node("n2")
                        .Gpus(8, "A100")
                        .Cordoned()
                        .Node("n3")
                        .Cpus(8)
                        .Build();
  ASSERT_EQ(c.num_nodes(), 4u);
  EXPECT_EQ(c.num_dims(), kFirstModelDim + 2);
  EXPECT_EQ(c.max_gpus_per_node(), 8);
  const GpuModelId a100 = c.FindModel("A100");
  const GpuModelId h100 = c.FindModel("H100");
  EXPECT_EQ(a100, GpuModelId(0));
  EXPECT_EQ(h100, GpuModelId(1));
  EXPECT_EQ(c.FindModel("V100"), kNoModel);
  // Capacity counts ready nodes and healthy GPUs only.
  EXPECT_EQ(c.capacity()[kDimGpu], 9000);
  EXPECT_EQ(c.capacity()[ModelDim(a100)], 8000);
  EXPECT_EQ(c.capacity()[ModelDim(h100)], 1000);
  EXPECT_EQ(c.capacity()[kDimCpu], (64 + 32 + 8) * 1000);
  const NodeInfo& n1 = c.node(NodeId(1));
  EXPECT_EQ(n1.gpu_begin, 8u);
  EXPECT_EQ(n1.gpu_count, 2);
  EXPECT_EQ(c.gpus()[n1.gpu_begin].memory_mib, 94 * 1024);
  EXPECT_FALSE(c.gpus()[n1.gpu_begin + 1].healthy);
  EXPECT_EQ(c.gpus()[5].nvlink_domain, 1);
  EXPECT_FALSE(c.node(NodeId(2)).schedulable());
  NodeId id;
  ASSERT_TRUE(c.FindNode("n3", &id));
  EXPECT_EQ(id, NodeId(3));
  EXPECT_FALSE(c.FindNode("n9", &id));
  // Labels are interned and sorted; "" is id 0 (unknown rack).
  const NodeInfo& n0 = c.node(NodeId(0));
  ASSERT_EQ(n0.labels.size(), 2u);
  EXPECT_LT(n0.labels[0], n0.labels[1]);
  EXPECT_EQ(c.strings().Get(n0.rack), "r1");
  EXPECT_EQ(c.node(NodeId(3)).rack, 0u);
}

TEST(ClusterTest, GpuMemoryDefaultsToTheModels) {
  std::vector<Node> nodes(1);
  nodes[0].name = "n0";
  nodes[0].gpus = {{0, "L4", 0, true, 0}};
  const Result<Cluster> c = Cluster::Build({{"L4", 24 * 1024, 0}}, nodes);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->gpus()[0].memory_mib, 24 * 1024);
}

TEST(ClusterTest, MakeConstraintsInternsKnownNamesOnly) {
  const Cluster c =
      ClusterBuilder().Node("n0").Gpus(1, "A100").Label("pool", "train").Taint("gpu", "a").Build();
  const Constraints k = c.MakeConstraints({{"pool", "train"}, {"zone", "eu"}},
                                          {{"gpu", ""}, {"gpu", "a"}, {"gpu", "b"}});
  ASSERT_EQ(k.selector.size(), 2u);
  EXPECT_EQ(k.selector[0].first, c.strings().Find("pool"));
  EXPECT_EQ(k.selector[1].first, Constraints::kUnknown);  // no node has a zone label
  EXPECT_EQ(k.selector[1].second, Constraints::kUnknown);
  ASSERT_EQ(k.tolerations.size(), 3u);
  EXPECT_EQ(k.tolerations[0].second, Constraints::kAnyValue);
  EXPECT_EQ(k.tolerations[1].second, c.strings().Find("a"));
  EXPECT_EQ(k.tolerations[2].second, Constraints::kUnknown);
}

struct ClusterErrorCase {
  std::string name;
  std::vector<GpuModel> models;
  ClusterBuilder nodes;
  std::string field;
  std::string message;
};

void PrintTo(const ClusterErrorCase& c, std::ostream* os) { *os << c.name; }

std::vector<ClusterErrorCase> ClusterErrorCases() {
  std::vector<ClusterErrorCase> cases;
  const std::vector<GpuModel> a100 = {{"A100", 81920, 0}};
  {
    ClusterBuilder b;
    b.Node("n0").Node("n1").Gpus(2, "A100").Gpus(1, "V100");
    cases.push_back(
        {"UnknownGpuModel", a100, b, "nodes[1].gpus[2].model", "unknown GPU model 'V100'"});
  }
  {
    ClusterBuilder b;
    b.Node("n0").Node("n0");
    cases.push_back({"DuplicateNode", a100, b, "nodes[1].name", "duplicate node name 'n0'"});
  }
  {
    ClusterBuilder b;
    b.Node("n0");
    cases.push_back({"DuplicateModel",
                     {{"A100", 1, 0}, {"H100", 1, 0}, {"A100", 1, 0}},
                     b,
                     "gpu_models[2].name",
                     "duplicate GPU model 'A100'"});
  }
  {
    std::vector<GpuModel> many;
    for (int i = 0; i <= kMaxGpuModels; ++i) many.push_back({"m" + std::to_string(i), 1, 0});
    ClusterBuilder b;
    b.Node("n0");
    cases.push_back({"TooManyModels", many, b, "gpu_models", "at most 16 GPU models"});
  }
  {
    ClusterBuilder b;
    b.Node("n0").Node("bad name");
    cases.push_back({"InvalidNode", a100, b, "nodes[1].name", "is not a valid node name"});
  }
  return cases;
}

class ClusterBuildErrorTest : public ::testing::TestWithParam<ClusterErrorCase> {};

TEST_P(ClusterBuildErrorTest, NamesTheField) {
  const ClusterErrorCase& c = GetParam();
  const Result<Cluster> r = Cluster::Build(c.models, c.nodes.nodes());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().field(), c.field);
  EXPECT_THAT(r.status().message(), HasSubstr(c.message));
}

INSTANTIATE_TEST_SUITE_P(Cases, ClusterBuildErrorTest, ::testing::ValuesIn(ClusterErrorCases()),
                         [](const auto& p) { return p.param.name; });

}  // namespace
}  // namespace arbiter::core

#include "model/node.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

namespace arbiter {
namespace {

using ::testing::HasSubstr;

Node ValidNode() {
  Node n;
  n.name = "gpu-node-01.dc1";
  n.cpu_milli = 64000;
  n.memory_mib = 524288;
  n.gpus = {{0, "A100", 81920, true, 0}, {1, "A100", 81920, true, 0}};
  return n;
}

struct NodeCase {
  std::string name;
  std::function<void(Node&)> edit;
  std::string field;
  std::string message;
};

void PrintTo(const NodeCase& c, std::ostream* os) { *os << c.name; }

std::vector<NodeCase> NodeCases() {
  return {
      {"BadName", [](Node& n) { n.name = "gpu node"; }, "nodes[4].name",
       "'gpu node' is not a valid node name"},
      {"EmptyName", [](Node& n) { n.name = ""; }, "nodes[4].name", "is not a valid node name"},
      {"NegativeCpu", [](Node& n) { n.cpu_milli = -1; }, "nodes[4].cpu_milli", "must be >= 0"},
      {"NegativeMemory", [](Node& n) { n.memory_mib = -1; }, "nodes[4].memory_mib", "must be >= 0"},
      {"NegativeGpuIndex", [](Node& n) { n.gpus[1].index = -1; }, "nodes[4].gpus[1].index",
       "must be >= 0"},
      {"DuplicateGpuIndex", [](Node& n) { n.gpus[1].index = 0; }, "nodes[4].gpus[1].index",
       "duplicate GPU index 0"},
      {"GpuWithoutModel", [](Node& n) { n.gpus[0].model = ""; }, "nodes[4].gpus[0].model",
       "must not be empty"},
      {"NegativeGpuMemory", [](Node& n) { n.gpus[1].memory_mib = -1; },
       "nodes[4].gpus[1].memory_mib", "must be >= 0"},
  };
}

class ValidateNodeTest : public ::testing::TestWithParam<NodeCase> {};

TEST_P(ValidateNodeTest, NamesTheField) {
  const NodeCase& c = GetParam();
  Node n = ValidNode();
  c.edit(n);
  const Status s = ValidateNode(n, "nodes[4]");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.field(), c.field);
  EXPECT_THAT(s.message(), HasSubstr(c.message));
}

INSTANTIATE_TEST_SUITE_P(Cases, ValidateNodeTest, ::testing::ValuesIn(NodeCases()),
                         [](const auto& p) { return p.param.name; });

TEST(ValidateNodeTest, AcceptsValidNodes) {
  EXPECT_TRUE(ValidateNode(ValidNode(), "nodes[0]").ok());
  Node cpu_only = ValidNode();
  cpu_only.gpus.clear();
  EXPECT_TRUE(ValidateNode(cpu_only, "").ok());
  EXPECT_EQ(ValidateNode(Node(), "").field(), "name");
}

TEST(NamesTest, QueueAndHostNames) {
  for (const std::string ok : {"a", "vision", "vision-train", "q1", "0"}) {
    EXPECT_TRUE(IsValidName(ok)) << ok;
  }
  EXPECT_TRUE(IsValidName(std::string(63, 'x')));
  for (const char* bad : {"", "-vision", "Vision", "vision_train", "vision.train", "a b"}) {
    EXPECT_FALSE(IsValidName(bad)) << bad;
  }
  EXPECT_FALSE(IsValidName(std::string(64, 'x')));
  for (const char* ok : {"gpu-01", "GPU_01.dc1.example.com", "10.0.0.1"}) {
    EXPECT_TRUE(IsValidHostName(ok)) << ok;
  }
  for (const char* bad : {"", "gpu 01", "gpu/01", "gpu:01"}) EXPECT_FALSE(IsValidHostName(bad));
  EXPECT_FALSE(IsValidHostName(std::string(254, 'x')));
}

TEST(NodeStateTest, NamesRoundTrip) {
  for (NodeState s :
       {NodeState::kReady, NodeState::kCordoned, NodeState::kDraining, NodeState::kDown}) {
    NodeState parsed = NodeState::kDown;
    ASSERT_TRUE(ParseNodeState(NodeStateName(s), &parsed));
    EXPECT_EQ(parsed, s);
  }
  NodeState untouched = NodeState::kReady;
  EXPECT_FALSE(ParseNodeState("offline", &untouched));
  EXPECT_EQ(untouched, NodeState::kReady);
}

}  // namespace
}  // namespace arbiter

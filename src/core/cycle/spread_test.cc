// The soft spread of a group's jobs (a service's replicas) over nodes and racks, and its hard
// form for a fixed port (PendingJob::spread, spread_distinct).
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <set>
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

// Node name of each admitted job.
std::map<uint64_t, std::string> NodesOf(const World& w, const CycleResult& r) {
  std::map<uint64_t, std::string> out;
  for (const Admission& a : r.admissions) {
    out[a.job.value()] = w.cluster.node(a.tasks.at(0).node).name;
  }
  return out;
}

ClusterBuilder Nodes(int n, int gpus) {
  ClusterBuilder b;
  for (int i = 0; i < n; ++i) b.Node(fmt::format("n{}", i)).Gpus(gpus, "A100");
  return b;
}

// binpack alone would stack every one-GPU job on one node; a spread group takes a node each.
TEST(SpreadTest, AGroupTakesDistinctNodesWhereItCan) {
  for (const char* profile : {"binpack", "default", "fgd"}) {
    World w(Nodes(3, 8), TreeBuilder().Tenant("t").Queue("q", "t"));
    for (uint64_t id = 1; id <= 3; ++id)
      w.Add(JobBuilder(id).Queue(w.Queue("q")).Gpus(1).Spread(7));
    const CycleResult r = w.Run(NamedProfile(profile));
    const auto nodes = NodesOf(w, r);
    ASSERT_EQ(nodes.size(), 3u) << profile;
    std::set<std::string> distinct;
    for (const auto& [id, node] : nodes) distinct.insert(node);
    EXPECT_EQ(distinct.size(), 3u) << profile;
  }
  // Without a group, binpack stacks them.
  World w(Nodes(3, 8), TreeBuilder().Tenant("t").Queue("q", "t"));
  for (uint64_t id = 1; id <= 3; ++id) w.Add(JobBuilder(id).Queue(w.Queue("q")).Gpus(1));
  std::set<std::string> distinct;
  for (const auto& [id, node] : NodesOf(w, w.Run(NamedProfile("binpack")))) distinct.insert(node);
  EXPECT_EQ(distinct.size(), 1u);
}

// Running members count: the new one goes where none runs; other groups do not count.
TEST(SpreadTest, RunningMembersCountAndOtherGroupsDoNot) {
  World w(Nodes(2, 8), TreeBuilder().Tenant("t").Queue("q", "t"));
  RunningJob mine =
      MakeRunning(100, w.Queue("q"), w.Model("A100"), WholeGpus(1), {{w.Node("n0"), {0}}});
  mine.spread = 7;
  RunningJob other =
      MakeRunning(101, w.Queue("q"), w.Model("A100"), WholeGpus(1), {{w.Node("n1"), {0}}});
  other.spread = 8;
  w.running = {mine, other};
  w.Add(JobBuilder(1).Queue(w.Queue("q")).Gpus(1).Spread(7));
  EXPECT_EQ(NodesOf(w, w.Run(NamedProfile("binpack"))).at(1), "n1");
}

// More members than nodes: as even as it goes (two per node of three for six).
TEST(SpreadTest, MoreMembersThanNodesSpreadEvenly) {
  World w(Nodes(3, 8), TreeBuilder().Tenant("t").Queue("q", "t"));
  for (uint64_t id = 1; id <= 6; ++id) w.Add(JobBuilder(id).Queue(w.Queue("q")).Gpus(1).Spread(3));
  std::map<std::string, int> per_node;
  for (const auto& [id, node] : NodesOf(w, w.Run(NamedProfile("binpack")))) ++per_node[node];
  EXPECT_EQ(per_node, (std::map<std::string, int>{{"n0", 2}, {"n1", 2}, {"n2", 2}}));
}

// Racks: with nodes free in both racks, the second member goes to the other rack.
TEST(SpreadTest, RacksArePreferredAfterNodes) {
  ClusterBuilder b;
  b.Node("a1").Gpus(8, "A100").Rack("ra");
  b.Node("a2").Gpus(8, "A100").Rack("ra");
  b.Node("b1").Gpus(8, "A100").Rack("rb");
  World w(b, TreeBuilder().Tenant("t").Queue("q", "t"));
  RunningJob first =
      MakeRunning(100, w.Queue("q"), w.Model("A100"), WholeGpus(1), {{w.Node("a1"), {0}}});
  first.spread = 5;
  w.running = {first};
  w.Add(JobBuilder(1).Queue(w.Queue("q")).Gpus(1).Spread(5));
  EXPECT_EQ(NodesOf(w, w.Run(NamedProfile("binpack"))).at(1), "b1");
}

// Soft: a member still starts beside another when no other node fits.
TEST(SpreadTest, SoftSpreadStillPlacesWhenOnlyOneNodeFits) {
  World w(Nodes(1, 8), TreeBuilder().Tenant("t").Queue("q", "t"));
  for (uint64_t id = 1; id <= 2; ++id) w.Add(JobBuilder(id).Queue(w.Queue("q")).Gpus(1).Spread(1));
  EXPECT_EQ(w.Run(NamedProfile("binpack")).admissions.size(), 2u);
}

// Distinct (a fixed port): never two on one node; the rest wait with a verdict.
TEST(SpreadTest, DistinctGroupsNeverShareANode) {
  World w(Nodes(2, 8), TreeBuilder().Tenant("t").Queue("q", "t"));
  for (uint64_t id = 1; id <= 3; ++id) {
    w.Add(JobBuilder(id).Queue(w.Queue("q")).Gpus(1).Spread(1, /*distinct=*/true));
  }
  // A job of the same shape outside the group is not held back by the group's failure.
  w.Add(JobBuilder(4).Queue(w.Queue("q")).Gpus(1));
  const CycleResult r = w.Run(NamedProfile("binpack"));
  const auto nodes = NodesOf(w, r);
  EXPECT_EQ(nodes.size(), 3u);
  EXPECT_TRUE(nodes.count(4));
  EXPECT_NE(nodes.at(1), nodes.at(2));
  EXPECT_FALSE(nodes.count(3));
  ASSERT_EQ(r.verdicts.size(), 1u);
  EXPECT_EQ(r.verdicts[0].job.value(), 3u);
}

}  // namespace
}  // namespace arbiter::core

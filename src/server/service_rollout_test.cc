#include "server/service_rollout.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <vector>

namespace arbiter::server {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

constexpr ReplicaPhase kP = ReplicaPhase::kPending;
constexpr ReplicaPhase kS = ReplicaPhase::kStarting;
constexpr ReplicaPhase kR = ReplicaPhase::kReady;
constexpr ReplicaPhase kD = ReplicaPhase::kDraining;

TEST(DesiredReplicasTest, CeilOfTheShareAndAtLeastOne) {
  EXPECT_EQ(DesiredReplicas(3, {{1, 100}}), (std::map<int64_t, int32_t>{{1, 3}}));
  EXPECT_EQ(DesiredReplicas(3, {{1, 90}, {2, 10}}), (std::map<int64_t, int32_t>{{1, 3}, {2, 1}}));
  EXPECT_EQ(DesiredReplicas(10, {{1, 50}, {2, 50}}), (std::map<int64_t, int32_t>{{1, 5}, {2, 5}}));
  EXPECT_EQ(DesiredReplicas(4, {{1, 1}, {2, 99}}), (std::map<int64_t, int32_t>{{1, 1}, {2, 4}}));
  EXPECT_EQ(DesiredReplicas(3, {{1, 0}, {2, 100}}), (std::map<int64_t, int32_t>{{1, 0}, {2, 3}}));
  EXPECT_EQ(DesiredReplicas(0, {{1, 100}}), (std::map<int64_t, int32_t>{{1, 0}}));
}

TEST(PlanRolloutTest, AFreshServiceStartsAllItsReplicas) {
  const RolloutPlan p = PlanRollout(3, {1, 0}, {{1, 100}}, {}, true);
  EXPECT_THAT(p.start, ElementsAre(1, 1, 1));
  EXPECT_THAT(p.drain, IsEmpty());
}

TEST(PlanRolloutTest, NothingStartsWhileBackingOff) {
  EXPECT_THAT(PlanRollout(3, {1, 0}, {{1, 100}}, {}, false).start, IsEmpty());
}

TEST(PlanRolloutTest, ScaleDownTakesPendingFirstThenReady) {
  const std::vector<ReplicaView> live = {{10, 1, kR}, {11, 1, kR}, {12, 1, kP}, {13, 1, kS}};
  const RolloutPlan p = PlanRollout(1, {1, 0}, {{1, 100}}, live, true);
  // Surplus 3: the pending and starting ones at once, then ready ones while ready - 1 >= 1.
  EXPECT_THAT(p.drain, ElementsAre(12, 13, 11));
  EXPECT_THAT(p.start, IsEmpty());
}

// A rolling update simulated step by step: surge 1, unavailable 0. Ready never drops below 3.
TEST(PlanRolloutTest, RollingUpdateKeepsReadyAtLeastReplicasMinusUnavailable) {
  for (const RolloutSpec rollout : {RolloutSpec{1, 0}, RolloutSpec{0, 1}, RolloutSpec{2, 1}}) {
    std::vector<ReplicaView> live = {{1, 1, kR}, {2, 1, kR}, {3, 1, kR}};
    uint64_t next = 4;
    for (int steps = 0; steps < 20; ++steps) {
      const RolloutPlan p = PlanRollout(3, rollout, {{2, 100}}, live, true);
      for (uint64_t job : p.drain) {
        std::erase_if(live, [job](const ReplicaView& r) { return r.job == job; });
      }
      // New replicas become ready by the next step.
      for (ReplicaView& r : live) r.phase = kR;
      for (int64_t rev : p.start) live.push_back({next++, rev, kS});
      int ready = 0;
      int total = 0;
      for (const ReplicaView& r : live) {
        ready += r.phase == kR ? 1 : 0;
        ++total;
      }
      EXPECT_GE(ready, 3 - rollout.max_unavailable) << "step " << steps;
      EXPECT_LE(total, 3 + rollout.max_surge) << "step " << steps;
    }
    ASSERT_EQ(live.size(), 3u);
    for (const ReplicaView& r : live) EXPECT_EQ(r.revision, 2);
  }
}

TEST(PlanRolloutTest, AnOldReadyReplicaWaitsForTheNewOneToBeReady) {
  // Surge 1: one new replica started, not ready yet: no old one may go.
  const std::vector<ReplicaView> live = {{1, 1, kR}, {2, 1, kR}, {3, 1, kR}, {4, 2, kS}};
  const RolloutPlan p = PlanRollout(3, {1, 0}, {{2, 100}}, live, true);
  EXPECT_THAT(p.drain, IsEmpty());
  EXPECT_THAT(p.start, IsEmpty());  // total 4 = 3 + surge
}

TEST(PlanRolloutTest, DrainingReplicasDoNotCount) {
  const std::vector<ReplicaView> live = {{1, 1, kD}, {2, 1, kR}, {3, 1, kR}};
  const RolloutPlan p = PlanRollout(3, {1, 0}, {{1, 100}}, live, true);
  EXPECT_THAT(p.start, ElementsAre(1));
}

TEST(PlanRolloutTest, ACanaryRunsBothRevisions) {
  const std::vector<ReplicaView> live = {{1, 1, kR}, {2, 1, kR}, {3, 1, kR}};
  const RolloutPlan p = PlanRollout(3, {1, 0}, {{1, 90}, {2, 10}}, live, true);
  EXPECT_THAT(p.start, ElementsAre(2));
  EXPECT_THAT(p.drain, IsEmpty());
}

TEST(RouteWeightsTest, TargetsScaleWithReadinessAndTheRestStaysOnOldRevisions) {
  // A steady canary: exactly its split.
  auto w = RouteWeights({{1, 90}, {2, 10}}, {{1, 3}, {2, 1}}, {{1, 3}, {2, 1}});
  ASSERT_EQ(w.size(), 2u);
  EXPECT_DOUBLE_EQ(w[0].percent, 90);
  EXPECT_DOUBLE_EQ(w[1].percent, 10);
  // Mid-rollout to revision 2 (100%): 1 of 3 ready gets a third; revision 1 keeps the rest.
  w = RouteWeights({{2, 100}}, {{2, 3}}, {{1, 2}, {2, 1}});
  ASSERT_EQ(w.size(), 2u);
  EXPECT_EQ(w[0].revision, 1);
  EXPECT_NEAR(w[0].percent, 66.6667, 1e-3);
  EXPECT_NEAR(w[1].percent, 33.3333, 1e-3);
  // Two old revisions share the rest by their ready counts.
  w = RouteWeights({{3, 100}}, {{3, 2}}, {{1, 1}, {2, 3}, {3, 0}});
  ASSERT_EQ(w.size(), 3u);
  EXPECT_DOUBLE_EQ(w[0].percent, 25);
  EXPECT_DOUBLE_EQ(w[1].percent, 75);
  EXPECT_DOUBLE_EQ(w[2].percent, 0);
}

TEST(ReplaceBackoffTest, DoublesFromOneSecondToAMinute) {
  EXPECT_EQ(ReplaceBackoffMs(0), 0);
  EXPECT_EQ(ReplaceBackoffMs(1), 1000);
  EXPECT_EQ(ReplaceBackoffMs(2), 2000);
  EXPECT_EQ(ReplaceBackoffMs(6), 32000);
  EXPECT_EQ(ReplaceBackoffMs(7), 60000);
  EXPECT_EQ(ReplaceBackoffMs(100), 60000);
}

TEST(RollbackTargetTest, TheRevisionBelowTheOneWithTheMostTraffic) {
  int64_t out = 0;
  EXPECT_TRUE(RollbackTarget({{3, 100}}, {1, 2, 3}, 3, &out));
  EXPECT_EQ(out, 2);
  EXPECT_TRUE(RollbackTarget({{2, 10}, {3, 90}}, {1, 2, 3}, 3, &out));
  EXPECT_EQ(out, 2);
  EXPECT_TRUE(RollbackTarget({{2, 90}, {3, 10}}, {1, 2, 3}, 3, &out));
  EXPECT_EQ(out, 1);
  EXPECT_FALSE(RollbackTarget({{1, 90}, {2, 10}}, {1, 2}, 2, &out));
  EXPECT_FALSE(RollbackTarget({{1, 100}}, {1}, 1, &out));
}

}  // namespace
}  // namespace arbiter::server

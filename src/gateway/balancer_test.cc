#include "gateway/balancer.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>

#include <cmath>
#include <map>
#include <random>

namespace arbiter::gateway {
namespace {

bool FakeResolve(const std::string&, Replica* r) {
  auto* sin = reinterpret_cast<sockaddr_in*>(&r->addr);
  sin->sin_family = AF_INET;
  r->addr_len = sizeof(sockaddr_in);
  return true;
}

RevisionRoute Rev(int64_t revision, double percent, int replicas, int first_id) {
  RevisionRoute r;
  r.revision = revision;
  r.percent = percent;
  for (int i = 0; i < replicas; ++i) {
    r.replicas.push_back(
        {std::to_string(first_id + i), "127.0.0.1:" + std::to_string(20000 + first_id + i)});
  }
  return r;
}

RouteTable OneService(std::vector<RevisionRoute> revisions, int64_t max_concurrency = 0) {
  RouteTable t;
  t.version = 1;
  ServiceRoute s;
  s.name = "chat";
  s.hosts = {"chat.example.com"};
  s.max_concurrency = max_concurrency;
  s.revisions = std::move(revisions);
  t.services.push_back(std::move(s));
  return t;
}

class BalancerTest : public ::testing::Test {
 protected:
  std::shared_ptr<const Table> Build(const RouteTable& spec, const Table* previous = nullptr) {
    return BuildTable(spec, previous, FakeResolve, stats_, 2, &serial_);
  }
  Stats stats_{2};
  uint64_t serial_ = 0;
};

TEST_F(BalancerTest, FindsServicesByNameAndHost) {
  auto t = Build(OneService({Rev(1, 100, 2, 1)}));
  ASSERT_NE(t->FindByName("chat"), nullptr);
  EXPECT_EQ(t->FindByHost("chat.example.com"), t->FindByName("chat"));
  EXPECT_EQ(t->FindByName("nope"), nullptr);
  EXPECT_EQ(t->FindByHost("other.example.com"), nullptr);
  EXPECT_TRUE(t->loaded);
}

// The revision split: 90/10 over 100,000 draws of a seeded generator lands within 0.5 points.
TEST_F(BalancerTest, WeightedRevisionChoiceFollowsPercents) {
  auto t = Build(OneService({Rev(3, 90, 2, 1), Rev(4, 10, 1, 10)}));
  const Service& s = *t->FindByName("chat");
  std::mt19937_64 rng(42);
  std::uniform_real_distribution<double> u(0, 1);
  std::map<int64_t, int> hits;
  constexpr int kDraws = 100000;
  for (int i = 0; i < kDraws; ++i) ++hits[PickRevision(s, u(rng))->revision];
  EXPECT_NEAR(hits[3] * 100.0 / kDraws, 90, 0.5) << "seed 42";
  EXPECT_NEAR(hits[4] * 100.0 / kDraws, 10, 0.5) << "seed 42";
}

TEST_F(BalancerTest, RevisionsWithoutReplicasGetNothingAndTheRestIsRenormalised) {
  auto t = Build(OneService({Rev(3, 60, 1, 1), Rev(4, 30, 0, 10), Rev(5, 10, 1, 20)}));
  const Service& s = *t->FindByName("chat");
  ASSERT_EQ(s.routable.size(), 2u);
  EXPECT_NEAR(s.routable_weights[0], 60.0 / 70, 1e-9);
  EXPECT_NEAR(s.routable_weights[1], 10.0 / 70, 1e-9);
  EXPECT_EQ(PickRevision(s, 0.0)->revision, 3);
  EXPECT_EQ(PickRevision(s, 0.99)->revision, 5);
}

TEST_F(BalancerTest, AllZeroPercentsSplitByReplicaCount) {
  auto t = Build(OneService({Rev(3, 0, 3, 1), Rev(4, 0, 1, 10)}));
  const Service& s = *t->FindByName("chat");
  ASSERT_EQ(s.routable_weights.size(), 2u);
  EXPECT_NEAR(s.routable_weights[0], 0.75, 1e-9);
}

TEST_F(BalancerTest, NoReplicasNoRevision) {
  auto t = Build(OneService({Rev(3, 100, 0, 1)}));
  const Service& s = *t->FindByName("chat");
  EXPECT_EQ(PickRevision(s, 0.5), nullptr);
  EXPECT_EQ(s.unrouted_revision, 3);
}

TEST_F(BalancerTest, PowerOfTwoChoicesPrefersTheLessLoaded) {
  auto t = Build(OneService({Rev(1, 100, 2, 1)}));
  const Revision& r = t->FindByName("chat")->revisions[0];
  r.replicas[0]->outstanding = 5;
  for (uint64_t x = 0; x < 64; ++x) {
    Acquired a = AcquireReplica(r, 0, 0, nullptr, x * 7919);
    ASSERT_TRUE(a.replica);
    EXPECT_EQ(a.replica->id, "2");
    a.replica->outstanding--;  // as Release does
  }
}

TEST_F(BalancerTest, SpreadsEvenlyWhenIdle) {
  auto t = Build(OneService({Rev(1, 100, 4, 1)}));
  const Revision& r = t->FindByName("chat")->revisions[0];
  std::map<std::string, int> hits;
  std::mt19937_64 rng(7);
  for (int i = 0; i < 40000; ++i) {
    Acquired a = AcquireReplica(r, 0, 0, nullptr, rng());
    ++hits[a.replica->id];
    a.replica->outstanding--;
  }
  for (const auto& [id, n] : hits) EXPECT_NEAR(n, 10000, 500) << id << " seed 7";
}

TEST_F(BalancerTest, NeverAboveMaxConcurrency) {
  auto t = Build(OneService({Rev(1, 100, 3, 1)}, 2));
  const Service& s = *t->FindByName("chat");
  const Revision& r = s.revisions[0];
  for (int i = 0; i < 6; ++i) {
    Acquired a = AcquireReplica(r, s.max_concurrency, 0, nullptr, static_cast<uint64_t>(i) * 31);
    ASSERT_TRUE(a.replica) << i;
  }
  for (const auto& rep : r.replicas) EXPECT_EQ(rep->outstanding.load(), 2);
  Acquired full = AcquireReplica(r, s.max_concurrency, 0, nullptr, 99);
  EXPECT_FALSE(full.replica);
  EXPECT_TRUE(full.any_candidate);
  r.replicas[1]->outstanding--;
  Acquired again = AcquireReplica(r, s.max_concurrency, 0, nullptr, 5);
  ASSERT_TRUE(again.replica);
  EXPECT_EQ(again.replica->id, "2");
}

TEST_F(BalancerTest, SkipsEjectedAndExcludedReplicas) {
  auto t = Build(OneService({Rev(1, 100, 2, 1)}));
  const Revision& r = t->FindByName("chat")->revisions[0];
  r.replicas[0]->ejected_until_ms = 1000;
  for (uint64_t x = 0; x < 32; ++x) {
    Acquired a = AcquireReplica(r, 0, 500, nullptr, x * 13);
    ASSERT_TRUE(a.replica);
    EXPECT_EQ(a.replica->id, "2");
    a.replica->outstanding--;
  }
  // Ejection over: both again.
  std::map<std::string, int> hits;
  for (uint64_t x = 0; x < 64; ++x) {
    Acquired a = AcquireReplica(r, 0, 1000, nullptr, x * 0x9E3779B97F4A7C15ULL);
    ++hits[a.replica->id];
    a.replica->outstanding--;
  }
  EXPECT_EQ(hits.size(), 2u);
  // The excluded one never; nothing else: no candidate.
  Acquired only = AcquireReplica(r, 0, 1000, r.replicas[1].get(), 3);
  ASSERT_TRUE(only.replica);
  EXPECT_EQ(only.replica->id, "1");
  only.replica->outstanding--;
  auto single = Build(OneService({Rev(1, 100, 1, 50)}));
  const Revision& s = single->FindByName("chat")->revisions[0];
  Acquired none = AcquireReplica(s, 0, 0, s.replicas[0].get(), 3);
  EXPECT_FALSE(none.replica);
  EXPECT_FALSE(none.any_candidate);
}

TEST_F(BalancerTest, EveryReplicaEjectedStillRoutes) {
  auto t = Build(OneService({Rev(1, 100, 2, 1)}));
  const Revision& r = t->FindByName("chat")->revisions[0];
  for (const auto& rep : r.replicas) rep->ejected_until_ms = 1000;
  EXPECT_TRUE(AcquireReplica(r, 0, 500, nullptr, 1).replica);
}

TEST_F(BalancerTest, ANewTableKeepsReplicaStateAndQueues) {
  auto first = Build(OneService({Rev(1, 100, 2, 1)}));
  const Service& s1 = *first->FindByName("chat");
  s1.revisions[0].replicas[0]->outstanding = 3;
  RouteTable next = OneService({Rev(1, 50, 1, 1), Rev(2, 50, 1, 30)});
  next.version = 2;
  auto second = Build(next, first.get());
  const Service& s2 = *second->FindByName("chat");
  EXPECT_EQ(s2.shared, s1.shared) << "the wait queue stays";
  EXPECT_EQ(s2.revisions[0].replicas[0], s1.revisions[0].replicas[0]) << "same id and address";
  EXPECT_EQ(s2.revisions[0].replicas[0]->outstanding.load(), 3);
  EXPECT_NE(s2.revisions[1].replicas[0]->serial, s1.revisions[0].replicas[1]->serial);
  // Counters per io thread, one object per service+revision+thread.
  ASSERT_EQ(s2.revisions[0].counters.size(), 2u);
  EXPECT_EQ(s2.revisions[0].counters[0], s1.revisions[0].counters[0]);
}

}  // namespace
}  // namespace arbiter::gateway

// The leadership contract of Store (store.h): the lease, its term, fencing and the servers table,
// for every store kind. Two handles on one store stand for two servers.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "store/open_store.h"
#include "testing/postgres_cluster.h"
#include "testing/temp_dir.h"

namespace arbiter::store {
namespace {

using arbiter::testing::PostgresCluster;
using arbiter::testing::TempDir;

// Opens handles on one fresh store of the kind the test's parameter names: a folder for SQLite,
// a new database of the shared cluster for PostgreSQL.
class StoreHandles {
 public:
  explicit StoreHandles(const std::string& kind) : kind_(kind) {
    if (kind_ != "postgres") return;
    std::string error;
    PostgresCluster* pg = PostgresCluster::ForTests(&error);
    const std::string db = PostgresCluster::UniqueDatabaseName("leadership");
    if (pg == nullptr || !pg->CreateDatabase(db, &error)) {
      error_ = error;
      return;
    }
    uri_ = pg->Uri(db);
  }
  // Why the store cannot be opened ("" when it can).
  const std::string& error() const { return error_; }

  std::unique_ptr<Store> Open() {
    StoreUrl url;
    if (kind_ == "postgres") {
      url.kind = StoreUrl::Kind::kPostgres;
      url.postgres_uri = uri_;
    } else {
      url.sqlite_dir = dir_.path();
    }
    auto store = OpenStore(url);
    EXPECT_TRUE(store.ok()) << store.status().ToString();
    return store.ok() ? std::move(store).value() : nullptr;
  }

 private:
  std::string kind_;
  TempDir dir_;
  std::string uri_;
  std::string error_;
};

class LeadershipTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (!handles_.error().empty()) FAIL() << "no PostgreSQL for the test: " << handles_.error();
  }
  StoreHandles handles_{GetParam()};
};

WriteBatch KvBatch(const std::string& key) {
  WriteBatch b;
  b.PutKv({.key = key, .value = "v"});
  return b;
}

TEST_P(LeadershipTest, FirstAcquireTakesTermOneAndRenewalKeepsIt) {
  auto a = handles_.Open();
  ASSERT_NE(a, nullptr);
  auto fresh = a->ReadLease();
  ASSERT_TRUE(fresh.ok()) << fresh.status().ToString();
  EXPECT_EQ(fresh->term, 0u);
  EXPECT_EQ(fresh->holder, "");

  auto got = a->AcquireLease("a", "http://a", 0, 10'000);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->holder, "a");
  EXPECT_EQ(got->holder_url, "http://a");
  EXPECT_EQ(got->term, 1u);
  EXPECT_GT(got->expires_at_ms, got->now_ms);

  auto renewed = a->AcquireLease("a", "http://a", 1, 10'000);
  ASSERT_TRUE(renewed.ok());
  EXPECT_EQ(renewed->term, 1u);
  EXPECT_GE(renewed->expires_at_ms, got->expires_at_ms);
}

TEST_P(LeadershipTest, AnotherServerCannotTakeALiveLease) {
  auto a = handles_.Open();
  auto b = handles_.Open();
  ASSERT_TRUE(a && b);
  ASSERT_TRUE(a->AcquireLease("a", "http://a", 0, 60'000).ok());
  auto other = b->AcquireLease("b", "http://b", 0, 60'000);
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(other->holder, "a");
  EXPECT_EQ(other->term, 1u);
  // A stale renewal (the wrong term) does not renew either.
  auto stale = b->AcquireLease("b", "http://b", 1, 60'000);
  ASSERT_TRUE(stale.ok());
  EXPECT_EQ(stale->holder, "a");
}

TEST_P(LeadershipTest, AnExpiredLeaseIsTakenWithTheNextTerm) {
  auto a = handles_.Open();
  auto b = handles_.Open();
  ASSERT_TRUE(a && b);
  auto first = a->AcquireLease("a", "http://a", 0, 50);
  ASSERT_TRUE(first.ok());
  // Bounded wait for the store's clock to pass the expiry.
  for (int i = 0; i < 200; ++i) {
    auto l = b->ReadLease();
    ASSERT_TRUE(l.ok());
    if (l->expires_at_ms <= l->now_ms) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  auto taken = b->AcquireLease("b", "http://b", 0, 60'000);
  ASSERT_TRUE(taken.ok());
  EXPECT_EQ(taken->holder, "b");
  EXPECT_EQ(taken->term, 2u);
  // The old holder's renewal with its old term no longer renews.
  auto late = a->AcquireLease("a", "http://a", 1, 60'000);
  ASSERT_TRUE(late.ok());
  EXPECT_EQ(late->holder, "b");
  EXPECT_EQ(late->term, 2u);
}

TEST_P(LeadershipTest, ReleaseHandsTheLeaseOverAtOnce) {
  auto a = handles_.Open();
  auto b = handles_.Open();
  ASSERT_TRUE(a && b);
  ASSERT_TRUE(a->AcquireLease("a", "http://a", 0, 600'000).ok());
  // Releasing with a wrong term changes nothing.
  ASSERT_TRUE(a->ReleaseLease("a", 7).ok());
  EXPECT_EQ(b->AcquireLease("b", "http://b", 0, 60'000)->holder, "a");
  ASSERT_TRUE(a->ReleaseLease("a", 1).ok());
  auto taken = b->AcquireLease("b", "http://b", 0, 60'000);
  ASSERT_TRUE(taken.ok());
  EXPECT_EQ(taken->holder, "b");
  EXPECT_EQ(taken->term, 2u);
}

TEST_P(LeadershipTest, AFencedLeaderCommitsNothingOnceItsTermIsOver) {
  auto a = handles_.Open();
  auto b = handles_.Open();
  ASSERT_TRUE(a && b);
  ASSERT_TRUE(a->AcquireLease("a", "http://a", 0, 600'000).ok());
  a->SetFence(1);
  ASSERT_TRUE(a->Write(KvBatch("while-leader")).ok());

  ASSERT_TRUE(a->ReleaseLease("a", 1).ok());  // stands for a lease lost while a did not notice
  ASSERT_EQ(b->AcquireLease("b", "http://b", 0, 600'000)->term, 2u);
  b->SetFence(2);

  // Every batch of a's group fails, and none is present.
  std::vector<std::shared_future<Status>> futures;
  for (int i = 0; i < 5; ++i) futures.push_back(a->WriteAsync(KvBatch(fmt::format("late-{}", i))));
  for (auto& f : futures) {
    Status st = f.get();
    EXPECT_TRUE(IsFenced(st)) << st.ToString();
    EXPECT_NE(st.message().find("term 1"), std::string::npos) << st.message();
  }
  ASSERT_TRUE(b->Write(KvBatch("new-leader")).ok());
  auto state = b->Load();
  ASSERT_TRUE(state.ok());
  std::vector<std::string> keys;
  for (const auto& kv : state->kv) keys.push_back(kv.key);
  EXPECT_EQ(keys, (std::vector<std::string>{"new-leader", "while-leader"}));
}

TEST_P(LeadershipTest, NoFenceWritesAsAServerAlone) {
  auto a = handles_.Open();
  ASSERT_NE(a, nullptr);
  // A single server never takes the lease: its writes do not depend on it.
  EXPECT_TRUE(a->Write(KvBatch("alone")).ok());
}

TEST_P(LeadershipTest, ServersAreListedWithTheirLatestReport) {
  auto a = handles_.Open();
  ASSERT_NE(a, nullptr);
  ServerRecord s1{
      .id = "s1", .url = "http://s1", .role = "follower", .term = 0, .started_at_ms = 5};
  ASSERT_TRUE(a->PutServer(s1).ok());
  s1.role = "leader";
  s1.term = 3;
  ASSERT_TRUE(a->PutServer(s1).ok());
  ASSERT_TRUE(a->PutServer({.id = "s0", .url = "http://s0", .role = "follower"}).ok());
  auto servers = a->Servers();
  ASSERT_TRUE(servers.ok()) << servers.status().ToString();
  ASSERT_EQ(servers->size(), 2u);
  EXPECT_EQ((*servers)[0].id, "s0");
  EXPECT_EQ((*servers)[1].role, "leader");
  EXPECT_EQ((*servers)[1].term, 3u);
  EXPECT_EQ((*servers)[1].started_at_ms, 5);
  EXPECT_GT((*servers)[1].last_seen_ms, 0);
  // A role outside the three is refused by the schema.
  EXPECT_FALSE(a->PutServer({.id = "s2", .url = "u", .role = "boss"}).ok());
}

INSTANTIATE_TEST_SUITE_P(Stores, LeadershipTest, ::testing::Values("sqlite", "postgres"),
                         [](const auto& p) { return p.param; });

}  // namespace
}  // namespace arbiter::store

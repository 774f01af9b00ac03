// LeaseKeeper (lease_keeper.h): election, renewal, loss and the leader's own deadline, with two
// keepers on one SQLite store standing for two servers and a fake monotonic clock.
#include "server/lease_keeper.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "store/open_store.h"
#include "testing/temp_dir.h"

namespace arbiter::server {
namespace {

using arbiter::testing::TempDir;

class LeaseKeeperTest : public ::testing::Test {
 protected:
  std::unique_ptr<store::Store> Open() {
    store::StoreUrl url;
    url.sqlite_dir = dir_.path();
    auto s = store::OpenStore(url);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return s.ok() ? std::move(s).value() : nullptr;
  }
  std::unique_ptr<LeaseKeeper> Keeper(store::Store* s, const std::string& id) {
    LeaseOptions o{id, "http://" + id, 10'000, 2'000, 1};
    return std::make_unique<LeaseKeeper>(s, o, [this] { return now_ms_; });
  }

  TempDir dir_;
  int64_t now_ms_ = 1'000;  // the fake monotonic clock
};

TEST_F(LeaseKeeperTest, FirstElectedOthersFollowAndKnowTheLeader) {
  auto sa = Open();
  auto sb = Open();
  auto a = Keeper(sa.get(), "a");
  auto b = Keeper(sb.get(), "b");
  EXPECT_EQ(a->Attempt(), LeaseKeeper::Event::kElected);
  EXPECT_EQ(b->Attempt(), LeaseKeeper::Event::kNone);
  EXPECT_TRUE(a->info().leader);
  EXPECT_EQ(a->info().term, 1u);
  EXPECT_FALSE(b->info().leader);
  EXPECT_EQ(b->info().leader_url, "http://a");
  EXPECT_EQ(b->info().term, 1u);
  // A renewal keeps the term.
  EXPECT_EQ(a->Attempt(), LeaseKeeper::Event::kNone);
  EXPECT_EQ(a->info().term, 1u);
  // Both rows are in the servers table.
  auto rows = sa->Servers();
  ASSERT_TRUE(rows.ok());
  ASSERT_EQ(rows->size(), 2u);
  EXPECT_EQ((*rows)[0].role, "leader");
  EXPECT_EQ((*rows)[1].role, "follower");
  EXPECT_NE(a->MetricsText().find("\narbiter_leader 1\n"), std::string::npos) << a->MetricsText();
  EXPECT_NE(a->MetricsText().find("arbiter_lease_renew_seconds_count 1"), std::string::npos);
  EXPECT_NE(b->MetricsText().find("\narbiter_leader 0\n"), std::string::npos);
}

// The leader's deadline is its own monotonic clock from the start of its last successful renewal.
TEST_F(LeaseKeeperTest, ExpiredAfterTheLeaseWithoutARenewal) {
  auto s = Open();
  auto a = Keeper(s.get(), "a");
  EXPECT_FALSE(a->Expired());  // a follower has no deadline
  ASSERT_EQ(a->Attempt(), LeaseKeeper::Event::kElected);
  now_ms_ += 10'000;
  EXPECT_FALSE(a->Expired());
  now_ms_ += 1;
  EXPECT_TRUE(a->Expired());
  ASSERT_EQ(a->Attempt(), LeaseKeeper::Event::kNone);  // renewed: the deadline moves
  EXPECT_FALSE(a->Expired());
}

TEST_F(LeaseKeeperTest, ReleaseHandsOverAndTheOldLeaderLearnsTheNewOne) {
  auto sa = Open();
  auto sb = Open();
  auto a = Keeper(sa.get(), "a");
  auto b = Keeper(sb.get(), "b");
  ASSERT_EQ(a->Attempt(), LeaseKeeper::Event::kElected);
  ASSERT_EQ(b->Attempt(), LeaseKeeper::Event::kNone);
  a->Release();
  EXPECT_FALSE(a->info().leader);
  EXPECT_EQ(b->Attempt(), LeaseKeeper::Event::kElected);
  EXPECT_EQ(b->info().term, 2u);
  EXPECT_EQ(a->Attempt(), LeaseKeeper::Event::kNone);
  EXPECT_EQ(a->info().leader_url, "http://b");
  EXPECT_NE(b->MetricsText().find("arbiter_leader_changes_total 1"), std::string::npos)
      << b->MetricsText();
}

// A leader whose lease another server took loses it at its next renewal.
TEST_F(LeaseKeeperTest, LeaderWhoseLeaseWasTakenLosesIt) {
  auto sa = Open();
  auto sb = Open();
  auto a = Keeper(sa.get(), "a");
  auto b = Keeper(sb.get(), "b");
  ASSERT_EQ(a->Attempt(), LeaseKeeper::Event::kElected);
  // As if a's lease expired while it was stopped: the store ends it.
  ASSERT_TRUE(sb->ReleaseLease("a", 1).ok());
  ASSERT_EQ(b->Attempt(), LeaseKeeper::Event::kElected);
  EXPECT_EQ(a->Attempt(), LeaseKeeper::Event::kLost);
  EXPECT_FALSE(a->info().leader);
  EXPECT_EQ(a->info().leader_url, "http://b");
  EXPECT_EQ(a->info().term, 2u);
}

}  // namespace
}  // namespace arbiter::server

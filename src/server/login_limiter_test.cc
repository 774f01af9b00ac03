#include "server/login_limiter.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <string>

namespace arbiter::server {
namespace {

LoginLimiter::Options Small() {
  LoginLimiter::Options o;
  o.address_burst = 5;
  o.address_per_second = 1;
  o.user_burst = 3;
  o.user_per_second = 0.5;  // a token every 2 s
  return o;
}

TEST(LoginLimiter, UserBucketBurstThenRefill) {
  LoginLimiter l(Small());
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(l.Allow("10.0.0.1", "alice", 0).allowed) << i;
  const auto refused = l.Allow("10.0.0.1", "alice", 0);
  EXPECT_FALSE(refused.allowed);
  EXPECT_EQ(refused.retry_after_seconds, 2);  // (1 - 0) / 0.5
  // Another address does not help: the name's bucket is empty.
  EXPECT_FALSE(l.Allow("10.0.0.2", "alice", 0).allowed);
  // Another name from the same address still may (the address has 2 tokens left).
  EXPECT_TRUE(l.Allow("10.0.0.1", "bob", 0).allowed);
  // One token every 2 s.
  EXPECT_FALSE(l.Allow("10.0.0.1", "alice", 1999).allowed);
  EXPECT_TRUE(l.Allow("10.0.0.1", "alice", 2000).allowed);
  EXPECT_FALSE(l.Allow("10.0.0.1", "alice", 2000).allowed);
}

TEST(LoginLimiter, AddressBucketAcrossNames) {
  LoginLimiter l(Small());
  for (int i = 0; i < 5; ++i) {
    EXPECT_TRUE(l.Allow("10.0.0.9", fmt::format("user{}", i), 0).allowed) << i;
  }
  const auto refused = l.Allow("10.0.0.9", "fresh", 0);
  EXPECT_FALSE(refused.allowed);
  EXPECT_EQ(refused.retry_after_seconds, 1);
  // A refused try takes nothing: the name "fresh" still has its whole burst elsewhere.
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(l.Allow("10.0.0.10", "fresh", 0).allowed) << i;
  EXPECT_TRUE(l.Allow("10.0.0.9", "other", 1000).allowed);
}

TEST(LoginLimiter, RefillIsCappedAtTheBurst) {
  LoginLimiter l(Small());
  EXPECT_TRUE(l.Allow("a", "u", 0).allowed);
  // A day later the bucket holds its burst, not a day's worth.
  int allowed = 0;
  for (int i = 0; i < 10; ++i) allowed += l.Allow("a", "u", 86400000).allowed ? 1 : 0;
  EXPECT_EQ(allowed, 3);
}

TEST(LoginLimiter, ClockGoingBackGivesNothing) {
  LoginLimiter l(Small());
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(l.Allow("a", "u", 10000).allowed);
  EXPECT_FALSE(l.Allow("a", "u", 0).allowed);
  EXPECT_FALSE(l.Allow("a", "u", 10000).allowed);
}

TEST(LoginLimiter, MemoryIsBounded) {
  LoginLimiter::Options o = Small();
  o.max_keys = 100;
  LoginLimiter l(o);
  // Each try from a new address for a new name adds two buckets.
  for (int i = 0; i < 1000; ++i) {
    EXPECT_TRUE(l.Allow(fmt::format("addr{}", i), fmt::format("name{}", i), i).allowed) << i;
    EXPECT_LE(l.size(), 100u) << i;
  }
  // A name under attack keeps its empty bucket while others are dropped, as long as it was used
  // recently.
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(l.Allow("x", "victim", 2000).allowed);
  for (int i = 0; i < 20; ++i) {
    l.Allow(fmt::format("y{}", i), fmt::format("n{}", i), 2000);
  }
  EXPECT_FALSE(l.Allow("z", "victim", 2001).allowed);
}

}  // namespace
}  // namespace arbiter::server

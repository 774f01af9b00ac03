#include "server/lifecycle.h"

#include <gtest/gtest.h>

#include "server/auth.h"

namespace arbiter::server {
namespace {

using S = JobState;

TEST(Lifecycle, NamesRoundTrip) {
  for (int i = 0; i <= static_cast<int>(S::kLost); ++i) {
    const auto s = static_cast<S>(i);
    EXPECT_EQ(ParseJobState(JobStateName(s)), s);
  }
  EXPECT_EQ(JobStateName(S::kTimedOut), "timed-out");
  EXPECT_EQ(JobStateName(S::kRetryWait), "retry-wait");
  EXPECT_FALSE(ParseJobState("done").has_value());
}

TEST(Lifecycle, LegalTransitions) {
  struct Case {
    S from, to;
    bool ok;
  };
  const Case cases[] = {
      {S::kPending, S::kAdmitted, true},
      {S::kAdmitted, S::kStarting, true},
      {S::kStarting, S::kRunning, true},
      {S::kRunning, S::kSucceeded, true},
      {S::kRunning, S::kFailed, true},
      {S::kRunning, S::kTimedOut, true},
      {S::kRunning, S::kPreempting, true},
      {S::kPreempting, S::kPreempted, true},
      {S::kPreempted, S::kPending, true},
      {S::kFailed, S::kRetryWait, true},
      {S::kRetryWait, S::kPending, true},
      {S::kRunning, S::kLost, true},
      {S::kLost, S::kRetryWait, true},
      {S::kPending, S::kSuspended, true},
      {S::kRunning, S::kSuspended, true},
      {S::kSuspended, S::kPending, true},
      {S::kPending, S::kCancelled, true},
      {S::kRunning, S::kCancelled, true},
      {S::kCancelled, S::kRetryWait, true},
      {S::kTimedOut, S::kRetryWait, true},
      {S::kPending, S::kRunning, false},
      {S::kSucceeded, S::kPending, false},
      {S::kSucceeded, S::kCancelled, false},
      {S::kCancelled, S::kCancelled, false},
      {S::kSuspended, S::kRunning, false},
      {S::kPreempted, S::kRunning, false},
      {S::kFailed, S::kRunning, false},
      {S::kPending, S::kPreempting, false},
      {S::kAwaitingApproval, S::kPending, true},
      {S::kAwaitingApproval, S::kRejected, true},
      {S::kAwaitingApproval, S::kCancelled, true},
      {S::kAwaitingApproval, S::kAdmitted, false},
      {S::kAwaitingApproval, S::kSuspended, false},
      {S::kRejected, S::kRetryWait, false},
      {S::kRejected, S::kPending, false},
      {S::kPending, S::kRejected, false},
  };
  for (const Case& c : cases) {
    const Status st = CheckTransition(c.from, c.to);
    EXPECT_EQ(st.ok(), c.ok) << JobStateName(c.from) << " -> " << JobStateName(c.to);
    if (!c.ok) {
      EXPECT_EQ(st.code(), StatusCode::kConflict);
      EXPECT_NE(st.message().find(std::string(JobStateName(c.from))), std::string::npos);
    }
  }
}

TEST(Lifecycle, FinalAndHoldingStates) {
  EXPECT_TRUE(IsFinal(S::kSucceeded));
  EXPECT_TRUE(IsFinal(S::kCancelled));
  EXPECT_FALSE(IsFinal(S::kRetryWait));
  EXPECT_TRUE(IsFinal(S::kRejected));
  EXPECT_FALSE(IsFinal(S::kAwaitingApproval));
  EXPECT_FALSE(HoldsResources(S::kAwaitingApproval));
  EXPECT_EQ(ParseJobState("awaiting_approval"), S::kAwaitingApproval);
  EXPECT_EQ(JobStateName(S::kRejected), "rejected");
  EXPECT_TRUE(HoldsResources(S::kRunning));
  EXPECT_TRUE(HoldsResources(S::kPreempting));
  EXPECT_FALSE(HoldsResources(S::kPending));
}

TEST(Auth, TokensAreRandomAndOnlyTheirHashIsKept) {
  const NewToken a = GenerateToken();
  const NewToken b = GenerateToken();
  EXPECT_NE(a.token, b.token);
  std::string id;
  std::string secret;
  ASSERT_TRUE(ParseToken(a.token, &id, &secret));
  EXPECT_EQ(id, a.id);
  EXPECT_EQ(HashSecret(secret), a.hash_hex);
  EXPECT_EQ(a.hash_hex.size(), 64u);
  EXPECT_EQ(a.token.find(a.hash_hex), std::string::npos);
  EXPECT_FALSE(ParseToken("Bearer x", &id, &secret));
  EXPECT_FALSE(ParseToken("arb__x", &id, &secret));
  EXPECT_TRUE(SecureEquals("abc", "abc"));
  EXPECT_FALSE(SecureEquals("abc", "abd"));
  EXPECT_EQ(HashSecret("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(Auth, Roles) {
  EXPECT_EQ(ParseRole("tenant-admin"), Role::kTenantAdmin);
  EXPECT_EQ(RoleName(Role::kNode), "node");
  EXPECT_FALSE(ParseRole("root").has_value());
}

}  // namespace
}  // namespace arbiter::server

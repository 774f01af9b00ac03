#include "server/token_registry.h"

#include <gtest/gtest.h>

#include <string>

#include "server/auth.h"

namespace arbiter::server {
namespace {

// A token record for `user` and the plain token that authenticates as it.
struct Made {
  store::TokenRecord record;
  std::string token;
};

Made MakeToken(const std::string& user, const std::string& scope, int64_t expires_at_ms = 0) {
  const NewToken t = GenerateToken();
  Made m;
  m.token = t.token;
  m.record.id = t.id;
  m.record.hash_hex = t.hash_hex;
  m.record.user = user;
  m.record.tenant = "vision";
  m.record.role = "member";
  m.record.kind = "user";
  m.record.created_at_ms = 1000;
  m.record.expires_at_ms = expires_at_ms;
  m.record.scope = scope;
  return m;
}

TEST(TokenRegistry, AReadOnlyTokensPrincipalIsReadOnly) {
  TokenRegistry reg;
  reg.SetUsers({{"alice", "vision", Role::kMember}});
  const Made full = MakeToken("alice", "full");
  const Made read_only = MakeToken("alice", "read-only");
  reg.Put(full.record);
  reg.Put(read_only.record);

  auto p = reg.Authenticate(full.token, 2000);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_FALSE(p->read_only);
  auto q = reg.Authenticate(read_only.token, 2000);
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  EXPECT_TRUE(q->read_only);
  EXPECT_EQ(q->user, "alice");
  EXPECT_EQ(q->role, Role::kMember);
  EXPECT_EQ(q->token_id, read_only.record.id);
  // The scope is listed with the token.
  auto e = reg.Find(read_only.record.id);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->record.scope, "read-only");
}

TEST(TokenRegistry, ATokensScopeSurvivesRevocationAndRecordsFromBeforeScopesAreFull) {
  TokenRegistry reg;
  reg.SetUsers({{"alice", "vision", Role::kMember}});
  const Made read_only = MakeToken("alice", "read-only");
  reg.Put(read_only.record);
  auto revoked = reg.Revoke(read_only.record.id);
  ASSERT_TRUE(revoked.has_value());
  EXPECT_EQ(revoked->scope, "read-only");
  EXPECT_FALSE(reg.Authenticate(read_only.token, 2000).ok());
  // A record as a store from before scopes loads it: the column's default, "full".
  store::TokenRecord old;
  EXPECT_EQ(old.scope, "full");
}

TEST(TokenRegistry, ATokenStopsWorkingWhenItsTtlRunsOut) {
  TokenRegistry reg;
  reg.SetUsers({{"alice", "vision", Role::kMember}});
  const Made t = MakeToken("alice", "read-only", /*expires_at_ms=*/61'000);
  reg.Put(t.record);
  EXPECT_TRUE(reg.Authenticate(t.token, 60'999).ok());
  EXPECT_TRUE(reg.Authenticate(t.token, 61'000).ok());
  auto late = reg.Authenticate(t.token, 61'001);
  ASSERT_FALSE(late.ok());
  EXPECT_EQ(late.status().code(), StatusCode::kUnauthenticated);
}

}  // namespace
}  // namespace arbiter::server

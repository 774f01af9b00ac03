#include <gtest/gtest.h>

#include "server/token_registry.h"

namespace arbiter::server {
namespace {

// A stored token for `user` of `kind`, with its plain form in *plain.
store::TokenRecord Record(const std::string& user, const std::string& tenant,
                          const std::string& role, const std::string& kind, std::string* plain) {
  const NewToken t = GenerateToken();
  *plain = t.token;
  store::TokenRecord r;
  r.id = t.id;
  r.hash_hex = t.hash_hex;
  r.user = user;
  r.tenant = tenant;
  r.role = role;
  r.kind = kind;
  return r;
}

TEST(TokenRegistry, UserTokensFollowTheirConfiguredUser) {
  TokenRegistry reg;
  reg.SetTenants({"vision", "speech"});
  reg.SetUsers({{"ann", "speech", Role::kViewer}});
  std::string plain;
  reg.Put(Record("ann", "vision", "member", "user", &plain));
  auto p = reg.Authenticate(plain, 0);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->tenant, "speech");
  EXPECT_EQ(p->role, Role::kViewer);
  reg.SetUsers({});
  EXPECT_EQ(reg.Authenticate(plain, 0).status().code(), StatusCode::kUnauthenticated);
}

TEST(TokenRegistry, DirectoryTokensCarryTheirMappingUntilTheirTenantGoes) {
  TokenRegistry reg;
  reg.SetTenants({"vision"});
  // Not a configured user; a configured user of the same name elsewhere changes nothing.
  reg.SetUsers({{"bea", "speech", Role::kViewer}});
  std::string member, admin;
  store::TokenRecord r = Record("bea", "vision", "member", "ldap", &member);
  r.expires_at_ms = 1000;
  reg.Put(r);
  reg.Put(Record("carl", "", "admin", "ldap", &admin));
  auto p = reg.Authenticate(member, 500);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->user, "bea");
  EXPECT_EQ(p->tenant, "vision");
  EXPECT_EQ(p->role, Role::kMember);
  EXPECT_EQ(reg.Find(r.id)->tenant, "vision");
  // Expired.
  EXPECT_EQ(reg.Authenticate(member, 1001).status().code(), StatusCode::kUnauthenticated);
  // Its tenant deleted: it stops; an admin's (no tenant) does not.
  reg.SetTenants({});
  auto gone = reg.Authenticate(member, 500);
  ASSERT_FALSE(gone.ok());
  EXPECT_NE(gone.status().message().find("tenant vision"), std::string::npos);
  auto a = reg.Authenticate(admin, 500);
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_EQ(a->role, Role::kAdmin);
  // Revoked.
  reg.Revoke(a->token_id);
  EXPECT_FALSE(reg.Authenticate(admin, 500).ok());
}

}  // namespace
}  // namespace arbiter::server

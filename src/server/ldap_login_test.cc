#include "server/ldap_login.h"

#include <gtest/gtest.h>

#include <string>

namespace arbiter::server {
namespace {

using namespace std::string_literals;

TEST(LdapEscape, DnValueRfc4514) {
  struct Case {
    std::string in, want;
  };
  const Case cases[] = {
      {"alice", "alice"},
      {"a.b-c_d@example.com", "a.b-c_d@example.com"},
      // A user name can never add a component or an attribute: ',' '+' '=' ';' are escaped.
      {"alice,ou=admins", "alice\\,ou\\=admins"},
      {"a+cn=x", "a\\+cn\\=x"},
      {"a;b", "a\\;b"},
      {"\"q\"", "\\\"q\\\""},
      {"<x>", "\\<x\\>"},
      {"back\\slash", "back\\\\slash"},
      // '#' and ' ' first, ' ' last; inside they are plain.
      {"#hash", "\\#hash"},
      {"a#b", "a#b"},
      {" lead", "\\ lead"},
      {"trail ", "trail\\ "},
      {"in side", "in side"},
      {" ", "\\ "},
      {"nul\0x"s, "nul\\00x"},
      {"", ""},
  };
  for (const Case& c : cases) EXPECT_EQ(EscapeDnValue(c.in), c.want) << c.in;
}

TEST(LdapEscape, FilterValueRfc4515) {
  struct Case {
    std::string in, want;
  };
  const Case cases[] = {
      {"alice", "alice"},
      {"*", "\\2a"},
      {"a*)(uid=*", "a\\2a\\29\\28uid=\\2a"},
      {"x)(|(objectClass=*)", "x\\29\\28|\\28objectClass=\\2a\\29"},
      {"back\\slash", "back\\5cslash"},
      {"nul\0x"s, "nul\\00x"},
      // A DN's own escapes are escaped again: the filter asserts the DN's exact text.
      {"uid=a\\,b,dc=x", "uid=a\\5c,b,dc=x"},
      {"", ""},
  };
  for (const Case& c : cases) EXPECT_EQ(EscapeFilterValue(c.in), c.want) << c.in;
}

TEST(LdapEscape, ExpandTemplate) {
  EXPECT_EQ(ExpandTemplate("uid={user},ou=people,dc=example,dc=com", {{"user", "alice"}}),
            "uid=alice,ou=people,dc=example,dc=com");
  EXPECT_EQ(
      ExpandTemplate("(|(member={dn})(memberUid={user}))", {{"dn", "uid=a,dc=x"}, {"user", "a"}}),
      "(|(member=uid=a,dc=x)(memberUid=a))");
  // Every occurrence; unknown names and lone braces stay as they are; a value is never expanded
  // again.
  EXPECT_EQ(ExpandTemplate("{user}{user}", {{"user", "x"}}), "xx");
  EXPECT_EQ(ExpandTemplate("{other} { {user", {{"user", "x"}}), "{other} { {user");
  EXPECT_EQ(ExpandTemplate("{user}", {{"user", "{user}"}}), "{user}");
}

TEST(LdapLogin, EmptyPasswordIsRefusedBeforeTheDirectory) {
  api::LdapConfig c;
  c.url = "ldap://127.0.0.1:1";  // never contacted
  c.user_dn = "uid={user},dc=example,dc=com";
  auto r = BindDirectoryUser(c, "alice", "", 1000);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().field(), "password");
}

TEST(LdapLogin, UnreachableDirectoryIsUnavailable) {
  api::LdapConfig c;
  c.url = "ldap://127.0.0.1:1";  // nothing listens on port 1
  c.user_dn = "uid={user},dc=example,dc=com";
  auto r = BindDirectoryUser(c, "alice", "secret", 2000);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable) << r.status().message();
  EXPECT_NE(r.status().message().find("cannot be reached"), std::string::npos);
}

}  // namespace
}  // namespace arbiter::server

// Signing in with a directory (POST /api/v1/login/ldap, arbiter login --ldap) against a real
// OpenLDAP server (SlapdProcess) and the real Arbiter server: the mapped tenant and role, one
// answer for a wrong password and an unknown user, an unmapped user, a directory that is down,
// guessing refused, the token at work (jobs, revocation, a deleted tenant) and the CLI.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "cli_process.h"
#include "server_process.h"
#include "slapd_process.h"

namespace arbiter::testing {
namespace {

using nlohmann::json;

// alice: vision-team (groupOfNames member); bob: speech-team (posixGroup memberUid); carol: no
// group; dave: mapped by name.
constexpr const char* kDirectory = R"(dn: dc=example,dc=com
objectClass: dcObject
objectClass: organization
o: Example
dc: example

dn: ou=people,dc=example,dc=com
objectClass: organizationalUnit
ou: people

dn: ou=groups,dc=example,dc=com
objectClass: organizationalUnit
ou: groups

dn: uid=alice,ou=people,dc=example,dc=com
objectClass: inetOrgPerson
uid: alice
cn: Alice
sn: Liddell
userPassword: wonderland

dn: uid=bob,ou=people,dc=example,dc=com
objectClass: inetOrgPerson
uid: bob
cn: Bob
sn: Builder
userPassword: can-we-fix-it

dn: uid=carol,ou=people,dc=example,dc=com
objectClass: inetOrgPerson
uid: carol
cn: Carol
sn: Nobody
userPassword: no-groups

dn: uid=dave,ou=people,dc=example,dc=com
objectClass: inetOrgPerson
uid: dave
cn: Dave
sn: Admin
userPassword: by-name

dn: cn=vision-team,ou=groups,dc=example,dc=com
objectClass: groupOfNames
cn: vision-team
member: uid=alice,ou=people,dc=example,dc=com

dn: cn=speech-team,ou=groups,dc=example,dc=com
objectClass: posixGroup
cn: speech-team
gidNumber: 5001
memberUid: bob
)";

// The cluster; {identity} is the identity section (or nothing).
constexpr const char* kClusterTemplate = R"(
gpu_models:
  - {{name: A100-80G, memory_mib: 81920}}
priority_classes:
  - {{name: normal, value: 100, preemptible: true}}
tenants:
  - name: vision
    run_as: {{uid: 4300, gid: 4300}}
    queues:
      - {{name: vision-train, guaranteed: {{gpu: 8}}}}
{speech}users:
  - {{name: tina, tenant: vision, role: tenant-admin}}
nodes:
  - {{name: gpu-01, cpu_milli: 128000, memory_mib: 1048576, gpus: {{count: 8, model: A100-80G}}}}
{identity})";

constexpr const char* kSpeechTenant = R"(  - name: speech
    queues:
      - {name: speech-train, guaranteed: {gpu: 8}}
)";

std::string Identity(const std::string& url, bool with_speech) {
  return fmt::format(
      R"(identity:
  ldap:
    url: {}
    user_dn: uid={{user}},ou=people,dc=example,dc=com
    group_base: ou=groups,dc=example,dc=com
    token_ttl_seconds: 3600
  mappings:
    - {{group: vision-team, tenant: vision, role: member}}
{}    - {{user: dave, role: admin}}
)",
      url, with_speech ? "    - {group: speech-team, tenant: speech, role: viewer}\n" : "");
}

std::string Cluster(const std::string& identity, bool with_speech = true) {
  return fmt::format(kClusterTemplate, fmt::arg("speech", with_speech ? kSpeechTenant : ""),
                     fmt::arg("identity", identity));
}

json BodyOf(const httplib::Result& r) {
  if (!r) return json();
  return json::parse(r->body, nullptr, /*allow_exceptions=*/false);
}

class LdapLoginTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!SlapdAvailable()) {
      GTEST_SKIP() << "slapd and ldap-utils are not installed (scripts/install-deps.sh)";
    }
    std::string error;
    ASSERT_TRUE(slapd_.Start(dir_.path() + "/ldap", kDirectory, &error)) << error;
    std::ofstream(dir_.path() + "/cluster.yaml") << Cluster(Identity(slapd_.url(), true));
    ASSERT_TRUE(server_.Start(dir_.path(), {"--config", dir_.path() + "/cluster.yaml"}))
        << server_.output();
    url_ = fmt::format("http://127.0.0.1:{}", server_.port());
  }

  httplib::Result Login(const std::string& user, const std::string& password) {
    return server_.Client("")->Post("/api/v1/login/ldap",
                                    json{{"user", user}, {"password", password}}.dump(),
                                    "application/json");
  }

  // A token from a sign-in that must work.
  std::string TokenOf(const std::string& user, const std::string& password) {
    auto r = Login(user, password);
    EXPECT_TRUE(r && r->status == 200) << user << ": " << (r ? r->body : "no answer");
    const json j = BodyOf(r);
    return j.value("token", "");
  }

  json Whoami(const std::string& token) {
    auto r = server_.Client(token)->Get("/api/v1/whoami");
    EXPECT_TRUE(r && r->status == 200) << (r ? r->body : "no answer");
    return BodyOf(r);
  }

  TempDir dir_;  // declared first: removed after the processes are gone
  SlapdProcess slapd_;
  ServerProcess server_;
  std::string url_;
};

TEST_F(LdapLoginTest, SignInGivesTheMappedTenantAndRole) {
  auto r = Login("alice", "wonderland");
  ASSERT_TRUE(r && r->status == 200) << (r ? r->body : "no answer");
  const json j = BodyOf(r);
  EXPECT_EQ(j["user"], "alice");
  EXPECT_EQ(j["tenant"], "vision");
  EXPECT_EQ(j["role"], "member");
  ASSERT_TRUE(j["expires_at"].is_string());
  EXPECT_EQ(r->get_header_value("Cache-Control"), "no-store");
  EXPECT_EQ(Whoami(j["token"]),
            (json{{"user", "alice"}, {"tenant", "vision"}, {"role", "member"}}));

  // A posixGroup's memberUid (the default filter's third term), and a mapping by user name.
  EXPECT_EQ(Whoami(TokenOf("bob", "can-we-fix-it")),
            (json{{"user", "bob"}, {"tenant", "speech"}, {"role", "viewer"}}));
  EXPECT_EQ(Whoami(TokenOf("dave", "by-name")),
            (json{{"user", "dave"}, {"tenant", ""}, {"role", "admin"}}));
  // The name is taken in lower case, as the directory matches it.
  EXPECT_EQ(Whoami(TokenOf("Alice", "wonderland"))["user"], "alice");

  // The token lists with its expiry, and its user may revoke it: it stops at once.
  const std::string token = TokenOf("alice", "wonderland");
  // More tokens come from signing in, not from POST /api/v1/tokens (there is no configured
  // user for them to follow).
  auto made = server_.Client(token)->Post("/api/v1/tokens", json{{"user", "alice"}}.dump(),
                                          "application/json");
  ASSERT_TRUE(made);
  EXPECT_EQ(made->status, 409) << made->body;
  auto list = BodyOf(server_.Client(token)->Get("/api/v1/tokens"));
  ASSERT_GE(list["items"].size(), 1u);
  EXPECT_EQ(list["items"][0]["user"], "alice");
  EXPECT_EQ(list["items"][0]["tenant"], "vision");
  EXPECT_TRUE(list["items"][0]["expires_at"].is_string());
  const std::string id = token.substr(4, token.find('_', 4) - 4);
  auto revoked = server_.Client(token)->Delete("/api/v1/tokens/" + id);
  ASSERT_TRUE(revoked && revoked->status == 200) << (revoked ? revoked->body : "no answer");
  EXPECT_EQ(server_.Client(token)->Get("/api/v1/whoami")->status, 401);
}

TEST_F(LdapLoginTest, WrongPasswordAndUnknownUserGetOneAnswer) {
  auto wrong = Login("alice", "not-the-password");
  auto unknown = Login("mallory", "wonderland");
  ASSERT_TRUE(wrong && unknown);
  EXPECT_EQ(wrong->status, 401);
  EXPECT_EQ(unknown->status, 401);
  EXPECT_EQ(wrong->body, unknown->body);
  EXPECT_EQ(BodyOf(wrong)["error"]["message"], "invalid user name or password");

  // An empty password would be an unauthenticated bind, which LDAP lets "succeed".
  auto empty = Login("alice", "");
  ASSERT_TRUE(empty);
  EXPECT_EQ(empty->status, 400);
  EXPECT_EQ(BodyOf(empty)["error"]["field"], "password");
  // A name that could change the DN is refused before the directory is asked.
  auto odd = Login("alice,ou=people", "wonderland");
  ASSERT_TRUE(odd);
  EXPECT_EQ(odd->status, 400);
  EXPECT_EQ(BodyOf(odd)["error"]["field"], "user");
  auto extra = server_.Client("")->Post(
      "/api/v1/login/ldap", json{{"user", "alice"}, {"password", "x"}, {"otp", "1"}}.dump(),
      "application/json");
  ASSERT_TRUE(extra);
  EXPECT_EQ(extra->status, 400);
  EXPECT_EQ(BodyOf(extra)["error"]["field"], "otp");

  // Every try is in the audit log, the password never.
  auto audit = server_.Client(server_.admin_token())->Get("/api/v1/audit?limit=1000");
  ASSERT_TRUE(audit && audit->status == 200);
  EXPECT_EQ(audit->body.find("not-the-password"), std::string::npos);
  EXPECT_EQ(audit->body.find("wonderland"), std::string::npos);
  int denied = 0;
  const json records = BodyOf(audit);
  for (const json& rec : records["items"]) {
    if (rec["action"] != "login.ldap") continue;
    EXPECT_EQ(rec["result"], "denied: invalid user name or password");
    EXPECT_TRUE(rec["actor"] == "alice" || rec["actor"] == "mallory") << rec.dump();
    ++denied;
  }
  EXPECT_EQ(denied, 2) << audit->body;
}

TEST_F(LdapLoginTest, UnmappedUserIsForbidden) {
  auto r = Login("carol", "no-groups");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 403) << r->body;
  EXPECT_NE(BodyOf(r)["error"]["message"].get<std::string>().find("no identity mapping matches"),
            std::string::npos)
      << r->body;
  // ... but with the right password only: a wrong one is the same 401 as for anyone.
  auto wrong = Login("carol", "wrong");
  ASSERT_TRUE(wrong);
  EXPECT_EQ(wrong->status, 401);
}

TEST_F(LdapLoginTest, DirectoryDownIsUnavailable) {
  const std::string token = TokenOf("alice", "wonderland");
  slapd_.Stop();
  auto r = Login("alice", "wonderland");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 503) << r->body;
  EXPECT_NE(BodyOf(r)["error"]["message"].get<std::string>().find("cannot be reached"),
            std::string::npos)
      << r->body;
  // Tokens already given keep working: the directory is asked at sign-in only.
  EXPECT_EQ(Whoami(token)["user"], "alice");
}

TEST_F(LdapLoginTest, GuessingIsLimited) {
  // Ten tries for one name go through (each a 401); the next is refused without asking the
  // directory, with Retry-After.
  for (int i = 0; i < 10; ++i) {
    auto r = Login("bob", fmt::format("guess-{}", i));
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 401) << i << ": " << r->body;
  }
  auto limited = Login("bob", "can-we-fix-it");
  ASSERT_TRUE(limited);
  EXPECT_EQ(limited->status, 429) << limited->body;
  EXPECT_FALSE(limited->get_header_value("Retry-After").empty());
  // Another name from the same address is not held back by bob's bucket.
  EXPECT_EQ(Login("alice", "wonderland")->status, 200);
}

TEST_F(LdapLoginTest, DirectoryUserSubmitsIntoItsTenant) {
  const std::string token = TokenOf("alice", "wonderland");
  auto alice = server_.Client(token);
  const std::string body =
      json{{"queue", "vision-train"},
           {"command", {"sleep", "1"}},
           {"resources", {{"gpus", 64}, {"cpu_milli", 1000}, {"memory_mib", 1024}}}}
          .dump();
  auto r = alice->Post("/api/v1/jobs", body, "application/json");
  ASSERT_TRUE(r && r->status == 201) << (r ? r->body : "no answer");
  const uint64_t id = BodyOf(r)["id"].get<uint64_t>();
  auto job = BodyOf(alice->Get(fmt::format("/api/v1/jobs/{}", id)));
  EXPECT_EQ(job["user"], "alice");
  EXPECT_EQ(job["tenant"], "vision");
  // Her own jobs: listed, and hers to cancel.
  auto mine = BodyOf(alice->Get("/api/v1/jobs?user=alice"));
  ASSERT_EQ(mine["items"].size(), 1u);
  // Another tenant's queue is not hers.
  auto other = alice->Post(
      "/api/v1/jobs",
      json{{"queue", "speech-train"}, {"command", {"sleep", "1"}}, {"resources", {{"gpus", 1}}}}
          .dump(),
      "application/json");
  ASSERT_TRUE(other);
  EXPECT_GE(other->status, 400);
  EXPECT_NE(other->status, 201);
  // Her tasks would run as her tenant's run_as (she has no configured user of her own).
  auto tenants = BodyOf(alice->Get("/api/v1/tenants"));
  ASSERT_EQ(tenants["items"].size(), 1u);
  EXPECT_EQ(tenants["items"][0]["run_as"]["uid"], 4300);
  auto cancel = alice->Post(fmt::format("/api/v1/jobs/{}/cancel", id), "", "application/json");
  ASSERT_TRUE(cancel);
  EXPECT_EQ(cancel->status, 200) << cancel->body;
}

TEST_F(LdapLoginTest, DeletingTheTenantEndsItsTokens) {
  const std::string bob = TokenOf("bob", "can-we-fix-it");
  const std::string alice = TokenOf("alice", "wonderland");
  auto admin = server_.Client(server_.admin_token());
  auto r = admin->Put("/api/v1/config", Cluster(Identity(slapd_.url(), false), false),
                      "application/yaml");
  ASSERT_TRUE(r && r->status == 200) << (r ? r->body : "no answer");
  auto gone = server_.Client(bob)->Get("/api/v1/whoami");
  ASSERT_TRUE(gone);
  EXPECT_EQ(gone->status, 401);
  EXPECT_NE(gone->body.find("tenant speech"), std::string::npos) << gone->body;
  EXPECT_EQ(Whoami(alice)["tenant"], "vision");
  // With the mapping gone, bob signs in no more.
  EXPECT_EQ(Login("bob", "can-we-fix-it")->status, 403);
}

TEST_F(LdapLoginTest, NotConfiguredIsNotFound) {
  auto admin = server_.Client(server_.admin_token());
  auto r = admin->Put("/api/v1/config", Cluster(""), "application/yaml");
  ASSERT_TRUE(r && r->status == 200) << (r ? r->body : "no answer");
  auto login = Login("alice", "wonderland");
  ASSERT_TRUE(login);
  EXPECT_EQ(login->status, 404);
  EXPECT_NE(login->body.find("not configured"), std::string::npos) << login->body;
}

TEST_F(LdapLoginTest, CliSignsInWithThePasswordOnStdin) {
  TempDir home;
  CliOptions o;
  o.env = {{"HOME", home.path()}};
  o.stdin_text = "wonderland\n";
  CliResult r =
      RunCli({"login", "--server", url_, "--ldap", "--user", "alice", "--password-stdin"}, o);
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("as alice (tenant vision, role member) until 20"), std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("wonderland"), std::string::npos);
  // Saved like `arbiter login` saves a token: later commands use it.
  o.stdin_text = "";
  r = RunCli({"whoami", "-o", "json"}, o);
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  const json who = json::parse(r.out, nullptr, false);
  EXPECT_EQ(who["user"], "alice");
  EXPECT_EQ(who["tenant"], "vision");

  // A wrong password: the server's answer, exit code 4 (refused), the saved token kept.
  o.stdin_text = "wrong\n";
  r = RunCli({"login", "--server", url_, "--ldap", "--user", "alice"}, o);
  EXPECT_EQ(r.code, 4) << r.out << r.err;
  EXPECT_NE(r.err.find("invalid user name or password"), std::string::npos) << r.err;
  o.stdin_text = "";
  EXPECT_EQ(RunCli({"whoami"}, o).code, 0);
  // No user: a usage error before any request.
  o.stdin_text = "wonderland\n";
  r = RunCli({"login", "--server", url_, "--ldap"}, o);
  EXPECT_EQ(r.code, 2) << r.out << r.err;
}

}  // namespace
}  // namespace arbiter::testing

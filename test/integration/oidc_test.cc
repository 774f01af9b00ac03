// OIDC sign-in against a real provider (test/idp, oidc-provider): its ID tokens are accepted as
// bearer tokens with the tenant and role of the identity mappings; expired, foreign, wrong-audience
// and unmapped tokens are refused, each saying why; a rotated key is fetched; an OIDC user submits
// and owns jobs, signs in to the console, and shows in the audit log by name.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>

#include "idp_process.h"
#include "server_process.h"
#include "tenant_server.h"

namespace arbiter::testing {
namespace {

using nlohmann::json;

std::string IdentityConfig(const std::string& issuer) {
  return std::string(kTenantConfig) + fmt::format(R"(
identity:
  oidc:
    issuer: {}
    audience: arbiter
    client_id: arbiter
    clock_skew_seconds: 0
  mappings:
    - {{group: vision-team, tenant: vision, role: member}}
    - {{group: vision-leads, tenant: vision, role: tenant-admin}}
    - {{group: platform, role: admin}}
)",
                                                  issuer);
}

class OidcTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(idp_.Start()) << idp_.output();
    ASSERT_TRUE(server_.Start({}, {"alice"}));
    auto r = server_.As("admin")->Put("/api/v1/config", IdentityConfig(idp_.issuer()),
                                      "application/yaml");
    ASSERT_TRUE(r && r->status == 200) << (r ? r->body : "no reply");
  }

  std::unique_ptr<httplib::Client> With(const std::string& jwt) const {
    auto c = server_.As("");
    c->set_bearer_token_auth(jwt);
    return c;
  }
  // GET /api/v1/whoami with `jwt`: its status and body.
  std::pair<int, json> WhoAmI(const std::string& jwt) const {
    auto r = With(jwt)->Get("/api/v1/whoami");
    if (!r) return {0, json()};
    return {r->status, BodyJson(r)};
  }
  // Expects `status` with an error body whose message contains `words`.
  void ExpectRefused(const std::string& jwt, int status, const std::string& words) const {
    const auto [code, body] = WhoAmI(jwt);
    EXPECT_EQ(code, status) << body.dump();
    const std::string message = body["error"].value("message", "");
    EXPECT_NE(message.find(words), std::string::npos) << body.dump();
    EXPECT_FALSE(body["error"].value("code", "").empty()) << body.dump();
  }

  IdpProcess idp_;
  TenantServer server_;
};

TEST_F(OidcTest, TokensOfTheIssuerAreTheirMappedUsers) {
  const std::string alice = idp_.IdToken("alice");
  ASSERT_FALSE(alice.empty());
  auto [status, who] = WhoAmI(alice);
  ASSERT_EQ(status, 200) << who.dump();
  EXPECT_EQ(who["user"], "alice");
  EXPECT_EQ(who["tenant"], "vision");
  EXPECT_EQ(who["role"], "member");

  std::tie(status, who) = WhoAmI(idp_.IdToken("carol"));
  ASSERT_EQ(status, 200) << who.dump();
  EXPECT_EQ(who["user"], "carol");
  EXPECT_EQ(who["tenant"], "vision");
  EXPECT_EQ(who["role"], "tenant-admin");

  std::tie(status, who) = WhoAmI(idp_.IdToken("root"));
  ASSERT_EQ(status, 200) << who.dump();
  EXPECT_EQ(who["role"], "admin");

  // Arbiter's own tokens keep working beside them.
  EXPECT_EQ(server_.As("alice")->Get("/api/v1/whoami")->status, 200);
  EXPECT_EQ(server_.As("admin")->Get("/api/v1/whoami")->status, 200);
}

TEST_F(OidcTest, AnOidcUserSubmitsAndOwnsJobsInItsTenant) {
  // carol is no configured user: only the mapping makes her a vision tenant admin; alice as
  // an OIDC user is a member of vision.
  const std::string alice = idp_.IdToken("alice");
  auto r = With(alice)->Post("/api/v1/jobs", JobBody("vision-train"), "application/json");
  ASSERT_TRUE(r && r->status == 201) << (r ? r->body : "no reply");
  const uint64_t id = BodyJson(r)["id"].get<uint64_t>();
  const json job = BodyJson(With(alice)->Get(fmt::format("/api/v1/jobs/{}", id)));
  EXPECT_EQ(job["tenant"], "vision") << job.dump();
  EXPECT_EQ(job["user"], "alice") << job.dump();
  const json mine = BodyJson(With(alice)->Get("/api/v1/jobs?user=alice"));
  ASSERT_EQ(mine["items"].size(), 1u) << mine.dump();
  // The other tenant's queue is not hers.
  auto other = With(alice)->Post("/api/v1/jobs", JobBody("speech-train"), "application/json");
  ASSERT_TRUE(other);
  EXPECT_GE(other->status, 400) << other->body;
  // She owns her job: she may cancel it.
  auto cancel =
      With(alice)->Post(fmt::format("/api/v1/jobs/{}/cancel", id), "", "application/json");
  ASSERT_TRUE(cancel);
  EXPECT_EQ(cancel->status, 200) << cancel->body;
  // The audit log names her.
  const json audit = BodyJson(server_.As("admin")->Get("/api/v1/audit"));
  bool found = false;
  for (const json& a : audit["items"]) {
    found |= a["action"] == "job.submit" && a["actor"] == "alice";
  }
  EXPECT_TRUE(found) << audit.dump();
  // No Arbiter token for a person the provider vouches for.
  auto tok = With(alice)->Post("/api/v1/tokens", R"({"user": "carol"})", "application/json");
  ASSERT_TRUE(tok);
  EXPECT_GE(tok->status, 400);
  auto self = With(idp_.IdToken("carol"))
                  ->Post("/api/v1/tokens", R"({"user": "carol"})", "application/json");
  ASSERT_TRUE(self);
  EXPECT_EQ(self->status, 403) << self->body;
  EXPECT_NE(self->body.find("identity provider"), std::string::npos) << self->body;
}

TEST_F(OidcTest, RefusalsSayWhy) {
  // Mapped to nothing.
  ExpectRefused(idp_.IdToken("mallory"), 403, "not mapped to any tenant/role");
  // Issued for another client.
  ExpectRefused(idp_.IdToken("alice", "other-app"), 401, "wrong audience");
  // Another provider's token, though well signed by it.
  IdpProcess foreign;
  ASSERT_TRUE(foreign.Start()) << foreign.output();
  ExpectRefused(foreign.IdToken("alice"), 401, "wrong issuer");
  // Not a token at all.
  ExpectRefused("eyJhbGciOiJub25lIn0.e30.", 401, "not accepted");
  ExpectRefused("abc.def.ghi", 401, "malformed");
  // Expired: a token of one second's life (no clock skew allowed in this configuration).
  const std::string brief = idp_.IdToken("alice", "arbiter", 1);
  ASSERT_FALSE(brief.empty());
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(15);
  int status = 200;
  json body;
  while (status == 200 && std::chrono::steady_clock::now() < deadline) {
    std::tie(status, body) = WhoAmI(brief);
    if (status == 200) std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  EXPECT_EQ(status, 401) << body.dump();
  EXPECT_NE(body["error"].value("message", "").find("expired"), std::string::npos) << body.dump();
  EXPECT_EQ(body["error"].value("field", ""), "Authorization") << body.dump();
}

TEST_F(OidcTest, ARotatedKeyIsFetched) {
  const std::string before = idp_.IdToken("alice");
  ASSERT_EQ(WhoAmI(before).first, 200);
  ASSERT_TRUE(idp_.Rotate());
  const std::string after = idp_.IdToken("alice");
  ASSERT_FALSE(after.empty());
  // An unknown key id fetches the key set again, at most once per 10 s: within a bound, the new
  // key is known.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  std::pair<int, json> got = WhoAmI(after);
  while (got.first != 200 && std::chrono::steady_clock::now() < deadline) {
    EXPECT_NE(got.second["error"].value("message", "").find("unknown key"), std::string::npos)
        << got.second.dump();
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    got = WhoAmI(after);
  }
  EXPECT_EQ(got.first, 200) << got.second.dump();
  // The old key left the set.
  ExpectRefused(before, 401, "unknown key");
}

TEST_F(OidcTest, ConsoleSessionFromAnIdToken) {
  auto browser = server_.As("");
  auto r = browser->Post("/api/v1/session", json{{"token", idp_.IdToken("carol")}}.dump(),
                         "application/json");
  ASSERT_TRUE(r && r->status == 201) << (r ? r->body : "no reply");
  const std::string set_cookie = r->get_header_value("Set-Cookie");
  const std::string cookie = set_cookie.substr(0, set_cookie.find(';'));
  auto s = browser->Get("/api/v1/session", httplib::Headers{{"Cookie", cookie}});
  ASSERT_TRUE(s);
  EXPECT_EQ(s->status, 200);
  EXPECT_EQ(BodyJson(s)["user"], "carol");
  EXPECT_EQ(BodyJson(s)["role"], "tenant-admin");
  // An unmapped person gets no session.
  auto m = browser->Post("/api/v1/session", json{{"token", idp_.IdToken("mallory")}}.dump(),
                         "application/json");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->status, 403) << m->body;
}

TEST_F(OidcTest, AuthConfigNamesTheEndpoints) {
  auto r = server_.As("")->Get("/api/v1/auth/config");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  const json c = BodyJson(r);
  EXPECT_EQ(c["oidc"]["issuer"], idp_.issuer());
  EXPECT_EQ(c["oidc"]["client_id"], "arbiter");
  EXPECT_EQ(c["oidc"]["device_authorization_endpoint"], idp_.issuer() + "/device/auth");
  EXPECT_EQ(c["oidc"]["token_endpoint"], idp_.issuer() + "/token");
  EXPECT_EQ(c["oidc"]["authorization_endpoint"], idp_.issuer() + "/auth");
  EXPECT_EQ(c["ldap"], false);
}

// `arbiter login --oidc`: the device flow, approved at the provider as a person would, saves the
// ID token and the refresh token; later commands use them, and an expired token is renewed.
TEST_F(OidcTest, CliDeviceLogin) {
  TempDir home;
  const std::string config = home.path() + "/config.yaml";
  const std::string server = fmt::format("http://127.0.0.1:{}", server_.port());
  int err[2];
  ASSERT_EQ(pipe(err), 0);
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(err[1], STDERR_FILENO);
    dup2(err[1], STDOUT_FILENO);
    close(err[0]);
    close(err[1]);
    setenv("ARBITER_CONFIG", config.c_str(), 1);
    execl(ARBITER_BINARY, ARBITER_BINARY, "login", "--oidc", "--server", server.c_str(), "--scope",
          "openid profile groups offline_access", static_cast<char*>(nullptr));
    _exit(127);
  }
  close(err[1]);
  std::string out;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  std::string code;
  bool approved = false;
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd p{err[0], POLLIN, 0};
    if (poll(&p, 1, 200) <= 0) continue;
    char c[512];
    const ssize_t n = read(err[0], c, sizeof(c));
    if (n <= 0) break;
    out.append(c, static_cast<size_t>(n));
    const size_t at = out.find("enter the code ");
    if (!approved && at != std::string::npos && out.find('\n', at) != std::string::npos) {
      code = out.substr(at + 15, out.find('\n', at) - at - 15);
      approved = idp_.ApproveDevice(code, "carol");
      EXPECT_TRUE(approved) << code;
    }
  }
  close(err[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << out;
  EXPECT_NE(out.find("logged in to " + server + " as carol (tenant vision, role tenant-admin)"),
            std::string::npos)
      << out;
  std::ifstream in(config);
  const std::string saved((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(saved.find("token: \"ey"), std::string::npos) << saved;
  EXPECT_NE(saved.find("refresh_token:"), std::string::npos) << saved;
  EXPECT_NE(saved.find("oidc_token_endpoint: \"" + idp_.issuer() + "/token\""), std::string::npos)
      << saved;

  // Later commands use the saved token.
  std::string who;
  EXPECT_EQ(Shell(fmt::format("ARBITER_CONFIG={} {} whoami -o json", config, ARBITER_BINARY), &who),
            0)
      << who;
  EXPECT_NE(who.find("\"carol\""), std::string::npos) << who;

  // An expired token is renewed with the refresh token before the call.
  const json fresh = idp_.Tokens("carol", "arbiter", 1);
  ASSERT_TRUE(fresh.is_object());
  std::ofstream(config) << fmt::format(
      "server: \"{}\"\ntoken: \"{}\"\nrefresh_token: \"{}\"\noidc_token_endpoint: "
      "\"{}/token\"\noidc_client_id: \"arbiter\"\n",
      server, fresh["id_token"].get<std::string>(), fresh["refresh_token"].get<std::string>(),
      idp_.issuer());
  EXPECT_EQ(Shell(fmt::format("ARBITER_CONFIG={} {} whoami -o json", config, ARBITER_BINARY), &who),
            0)
      << who;
  EXPECT_NE(who.find("\"carol\""), std::string::npos) << who;
  std::ifstream again(config);
  const std::string renewed((std::istreambuf_iterator<char>(again)),
                            std::istreambuf_iterator<char>());
  EXPECT_EQ(renewed.find(fresh["id_token"].get<std::string>()), std::string::npos)
      << "the expiring token was not replaced";
}

}  // namespace
}  // namespace arbiter::testing

// The web console's server side: its page and assets from the binary, and console sessions: an
// API token traded for an HttpOnly, SameSite=Strict cookie and a CSRF token that every change made
// through the cookie must carry. Bearer-token callers are unaffected; the API's own checks decide
// what a session may see and do.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <string>

#include "tenant_server.h"

namespace arbiter::testing {
namespace {

using nlohmann::json;

class ConsoleSessionTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(server_.Start()); }

  // A client with no token at all: only cookies and headers given per call.
  std::unique_ptr<httplib::Client> Browser() const { return server_.As(""); }

  struct SignedIn {
    std::string cookie;  // "arbiter_session=..."
    std::string csrf;
    std::string set_cookie;
  };
  // Signs `key` in; fails the test unless it answers 201 with a cookie and a CSRF token.
  SignedIn SignIn(const std::string& key) {
    SignedIn out;
    auto r = Browser()->Post("/api/v1/session", json{{"token", server_.token(key)}}.dump(),
                             "application/json");
    EXPECT_TRUE(r && r->status == 201) << key << ": " << (r ? r->body : "no reply");
    if (!r || r->status != 201) return out;
    out.set_cookie = r->get_header_value("Set-Cookie");
    out.cookie = out.set_cookie.substr(0, out.set_cookie.find(';'));
    out.csrf = BodyJson(r).value("csrf_token", "");
    return out;
  }

  httplib::Result Get(const SignedIn& s, const std::string& path) {
    return Browser()->Get(path, httplib::Headers{{"Cookie", s.cookie}});
  }
  httplib::Result Post(const SignedIn& s, const std::string& path, const std::string& body,
                       const std::string& csrf) {
    httplib::Headers h{{"Cookie", s.cookie}};
    if (!csrf.empty()) h.emplace("X-CSRF-Token", csrf);
    return Browser()->Post(path, h, body, "application/json");
  }
  size_t JobCount() { return BodyJson(server_.As("admin")->Get("/api/v1/jobs"))["items"].size(); }

  TenantServer server_;
};

TEST_F(ConsoleSessionTest, ServesThePageAndItsAssetsFromTheBinary) {
  auto c = Browser();
  for (const char* path : {"/", "/overview", "/jobs", "/jobs/12", "/queues", "/admin"}) {
    auto r = c->Get(path);
    ASSERT_TRUE(r) << path;
    EXPECT_EQ(r->status, 200) << path;
    EXPECT_EQ(r->get_header_value("Content-Type"), "text/html; charset=utf-8") << path;
    EXPECT_NE(r->body.find("/assets/console.js"), std::string::npos) << path;
    EXPECT_NE(r->get_header_value("Content-Security-Policy").find("default-src 'self'"),
              std::string::npos);
    EXPECT_EQ(r->get_header_value("X-Frame-Options"), "DENY");
  }
  auto js = c->Get("/assets/console.js");
  ASSERT_TRUE(js);
  EXPECT_EQ(js->status, 200);
  EXPECT_EQ(js->get_header_value("Content-Type"), "text/javascript; charset=utf-8");
  EXPECT_GT(js->body.size(), 1000u);
  const std::string etag = js->get_header_value("ETag");
  ASSERT_FALSE(etag.empty());
  auto again = c->Get("/assets/console.js", httplib::Headers{{"If-None-Match", etag}});
  ASSERT_TRUE(again);
  EXPECT_EQ(again->status, 304);
  auto css = c->Get("/assets/console.css");
  ASSERT_TRUE(css);
  EXPECT_EQ(css->status, 200);
  // Unknown assets and paths are JSON 404s, as unknown API routes are.
  for (const char* path : {"/assets/nope.js", "/nope", "/api/v1/nope"}) {
    auto r = c->Get(path);
    ASSERT_TRUE(r) << path;
    EXPECT_EQ(r->status, 404) << path;
    EXPECT_EQ(BodyJson(r)["error"]["code"], "not_found") << path << ": " << r->body;
  }
}

TEST_F(ConsoleSessionTest, SignInSetsAnHttpOnlyStrictCookie) {
  const SignedIn s = SignIn("alice");
  EXPECT_EQ(s.cookie.rfind("arbiter_session=", 0), 0u) << s.set_cookie;
  EXPECT_EQ(s.cookie.size(), std::string("arbiter_session=").size() + 64);
  EXPECT_NE(s.set_cookie.find("HttpOnly"), std::string::npos) << s.set_cookie;
  EXPECT_NE(s.set_cookie.find("SameSite=Strict"), std::string::npos) << s.set_cookie;
  EXPECT_NE(s.set_cookie.find("Path=/"), std::string::npos) << s.set_cookie;
  EXPECT_EQ(s.set_cookie.find("Secure"), std::string::npos) << "plain HTTP: " << s.set_cookie;
  EXPECT_EQ(s.csrf.size(), 64u);
  // The cookie value is not the API token, nor is the CSRF token.
  EXPECT_EQ(s.set_cookie.find(server_.token("alice")), std::string::npos);

  // The cookie alone authenticates reads.
  auto who = Get(s, "/api/v1/session");
  ASSERT_TRUE(who);
  EXPECT_EQ(who->status, 200);
  const json w = BodyJson(who);
  EXPECT_EQ(w["user"], "alice");
  EXPECT_EQ(w["tenant"], "vision");
  EXPECT_EQ(w["role"], "member");
  EXPECT_EQ(w["session"], true);
  EXPECT_EQ(w["csrf_token"], s.csrf);
  auto jobs = Get(s, "/api/v1/jobs");
  ASSERT_TRUE(jobs);
  EXPECT_EQ(jobs->status, 200);

  // A bearer caller has no session and no CSRF token.
  const json bearer = BodyJson(server_.As("alice")->Get("/api/v1/session"));
  EXPECT_EQ(bearer["session"], false);
  EXPECT_FALSE(bearer.contains("csrf_token"));

  // Behind a TLS proxy that says so, the cookie is Secure.
  auto tls = Browser()->Post("/api/v1/session", httplib::Headers{{"X-Forwarded-Proto", "https"}},
                             json{{"token", server_.token("alice")}}.dump(), "application/json");
  ASSERT_TRUE(tls);
  EXPECT_NE(tls->get_header_value("Set-Cookie").find("; Secure"), std::string::npos);
}

TEST_F(ConsoleSessionTest, BadSignInsAreRefused) {
  auto c = Browser();
  struct Case {
    std::string body;
    std::string type;
    int status;
    std::string field;
  };
  const Case cases[] = {
      {"{}", "application/json", 400, "token"},
      {R"({"token": 7})", "application/json", 400, "token"},
      {"not json", "application/json", 400, ""},
      // A form of another site could post this: only JSON signs in.
      {json{{"token", server_.token("alice")}}.dump(), "application/x-www-form-urlencoded", 400,
       "Content-Type"},
      {json{{"token", server_.token("alice")}}.dump(), "text/plain", 400, "Content-Type"},
      {json{{"token", "arb_000000000000_" + std::string(48, '0')}}.dump(), "application/json", 401,
       ""},
      {json{{"token", server_.token("node")}}.dump(), "application/json", 403, "token"},
  };
  for (const Case& k : cases) {
    auto r = c->Post("/api/v1/session", k.body, k.type.c_str());
    ASSERT_TRUE(r) << k.body;
    EXPECT_EQ(r->status, k.status) << k.body << " (" << k.type << "): " << r->body;
    EXPECT_EQ(BodyJson(r)["error"].value("field", ""), k.field) << r->body;
    EXPECT_TRUE(r->get_header_value("Set-Cookie").empty()) << k.body;
  }
}

TEST_F(ConsoleSessionTest, ChangesThroughTheCookieNeedTheCsrfToken) {
  const SignedIn s = SignIn("bob");
  const size_t before = JobCount();
  for (const std::string& csrf : {std::string(), std::string(64, 'a'), s.csrf.substr(1)}) {
    auto r = Post(s, "/api/v1/jobs", JobBody("vision-train"), csrf);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 403) << "csrf '" << csrf << "': " << r->body;
    EXPECT_EQ(BodyJson(r)["error"]["field"], "X-CSRF-Token") << r->body;
  }
  EXPECT_EQ(JobCount(), before) << "a refused request changed nothing";
  auto ok = Post(s, "/api/v1/jobs", JobBody("vision-train"), s.csrf);
  ASSERT_TRUE(ok);
  ASSERT_EQ(ok->status, 201) << ok->body;
  const json job = BodyJson(ok);
  EXPECT_EQ(job["user"], "bob");
  EXPECT_EQ(JobCount(), before + 1);
  // Another session's CSRF token does not do.
  const SignedIn other = SignIn("bob");
  auto crossed =
      Post(s, fmt::format("/api/v1/jobs/{}/cancel", job["id"].get<uint64_t>()), "", other.csrf);
  ASSERT_TRUE(crossed);
  EXPECT_EQ(crossed->status, 403) << crossed->body;
  // Bearer callers need none.
  auto bearer = server_.As("bob")->Post(
      fmt::format("/api/v1/jobs/{}/cancel", job["id"].get<uint64_t>()), "", "application/json");
  ASSERT_TRUE(bearer);
  EXPECT_EQ(bearer->status, 200) << bearer->body;
}

TEST_F(ConsoleSessionTest, TheApiDecidesWhatASessionMaySeeAndDo) {
  const uint64_t vision_job = server_.Submit("bob");
  ASSERT_NE(vision_job, 0u);
  // A viewer's session may read its tenant's jobs but not submit.
  const SignedIn vic = SignIn("vic");
  auto read = Get(vic, fmt::format("/api/v1/jobs/{}", vision_job));
  ASSERT_TRUE(read);
  EXPECT_EQ(read->status, 200);
  auto submit = Post(vic, "/api/v1/jobs", JobBody("vision-train"), vic.csrf);
  ASSERT_TRUE(submit);
  EXPECT_EQ(submit->status, 403) << submit->body;
  // Another tenant's member sees none of vision's jobs or queues.
  const SignedIn sam = SignIn("sam");
  auto foreign = Get(sam, fmt::format("/api/v1/jobs/{}", vision_job));
  ASSERT_TRUE(foreign);
  EXPECT_EQ(foreign->status, 404);
  EXPECT_EQ(BodyJson(Get(sam, "/api/v1/jobs"))["items"].size(), 0u);
  for (const json& q : BodyJson(Get(sam, "/api/v1/queues"))["items"]) {
    EXPECT_EQ(q["tenant"], "speech") << q.dump();
  }
  // Admin routes stay admin-only.
  auto config = Get(sam, "/api/v1/config");
  ASSERT_TRUE(config);
  EXPECT_EQ(config->status, 403);
}

TEST_F(ConsoleSessionTest, SignOutEndsTheSession) {
  const SignedIn s = SignIn("alice");
  // Signing out is a change too: without the CSRF token it is refused, and the session lives.
  httplib::Headers no_csrf{{"Cookie", s.cookie}};
  auto refused = Browser()->Delete("/api/v1/session", no_csrf);
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 403);
  EXPECT_EQ(Get(s, "/api/v1/jobs")->status, 200);

  httplib::Headers h{{"Cookie", s.cookie}, {"X-CSRF-Token", s.csrf}};
  auto out = Browser()->Delete("/api/v1/session", h);
  ASSERT_TRUE(out);
  EXPECT_EQ(out->status, 200) << out->body;
  EXPECT_EQ(BodyJson(out)["signed_out"], true);
  const std::string cleared = out->get_header_value("Set-Cookie");
  EXPECT_NE(cleared.find("arbiter_session=;"), std::string::npos) << cleared;
  EXPECT_NE(cleared.find("Max-Age=0"), std::string::npos) << cleared;
  auto after = Get(s, "/api/v1/jobs");
  ASSERT_TRUE(after);
  EXPECT_EQ(after->status, 401);
  EXPECT_EQ(BodyJson(after)["error"]["code"], "unauthenticated");
  // The API token itself still works.
  EXPECT_EQ(server_.As("alice")->Get("/api/v1/jobs")->status, 200);
}

TEST_F(ConsoleSessionTest, RevokingTheTokenEndsItsSessions) {
  const SignedIn s = SignIn("alice");
  ASSERT_EQ(Get(s, "/api/v1/jobs")->status, 200);
  const std::string token = server_.token("alice");
  const std::string id = token.substr(4, token.find('_', 4) - 4);
  auto revoked = server_.As("admin")->Delete(fmt::format("/api/v1/tokens/{}", id));
  ASSERT_TRUE(revoked);
  ASSERT_EQ(revoked->status, 200) << revoked->body;
  auto after = Get(s, "/api/v1/jobs");
  ASSERT_TRUE(after);
  EXPECT_EQ(after->status, 401);
  // A made-up cookie is no session either.
  httplib::Headers fake{{"Cookie", "arbiter_session=" + std::string(64, '0')}};
  auto r = Browser()->Get("/api/v1/jobs", fake);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 401);
}

}  // namespace
}  // namespace arbiter::testing

// The HTTP layer's defences (docs/security.md, "HTTP limits"): strict query parameters, bodies
// read only once the caller may send them, per-route body caps, header deadlines and limits, a
// per-address connection limit, log followers that leave, and idempotency keys bound to their
// request.
#include <arpa/inet.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <vector>

#include "tenant_server.h"

namespace arbiter::testing {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

class HttpLimitsTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(server_.Start()); }
  TenantServer server_;
};

// Whether the server's configuration (GET /api/v1/config, YAML) has the speech tenant.
bool HasSpeech(const TenantServer& server) {
  auto r = server.As("admin")->Get("/api/v1/config");
  return r && r->status == 200 && r->body.find("speech-train") != std::string::npos;
}

// A configuration without the speech tenant: applying it for real would remove speech-train.
std::string WithoutSpeech() {
  std::string c = kTenantConfig;
  const size_t from = c.find("  - name: speech");
  const size_t to = c.find("users:");
  c.erase(from, to - from);
  c.erase(c.find("  - {name: sam"), c.find("nodes:") - c.find("  - {name: sam"));
  return c;
}

TEST_F(HttpLimitsTest, BooleanParametersAreExactlyTrueOrFalse) {
  auto admin = server_.As("admin");
  ASSERT_TRUE(HasSpeech(server_));
  for (const char* value : {"1", "yes", "True", "TRUE", "", "0", "no", "on"}) {
    auto r = admin->Put(fmt::format("/api/v1/config?dry_run={}", value), WithoutSpeech(),
                        "application/yaml");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 400) << value << ": " << r->body;
    const json e = BodyJson(r)["error"];
    EXPECT_EQ(e.value("field", ""), "dry_run") << r->body;
    EXPECT_EQ(e.value("code", ""), "invalid_argument") << r->body;
    EXPECT_NE(e.value("message", "").find("must be true or false"), std::string::npos) << r->body;
    EXPECT_TRUE(HasSpeech(server_)) << "dry_run=" << value << " changed the configuration";
  }
  auto twice =
      admin->Put("/api/v1/config?dry_run=true&dry_run=false", WithoutSpeech(), "application/yaml");
  ASSERT_TRUE(twice);
  EXPECT_EQ(twice->status, 400) << twice->body;
  EXPECT_EQ(BodyJson(twice)["error"].value("field", ""), "dry_run");
  EXPECT_TRUE(HasSpeech(server_));

  // true answers the diff and changes nothing; false applies.
  auto dry = admin->Put("/api/v1/config?dry_run=true", WithoutSpeech(), "application/yaml");
  ASSERT_TRUE(dry);
  EXPECT_EQ(dry->status, 200) << dry->body;
  EXPECT_TRUE(BodyJson(dry)["dry_run"].get<bool>());
  EXPECT_TRUE(HasSpeech(server_));
  auto apply = admin->Put("/api/v1/config?dry_run=false", WithoutSpeech(), "application/yaml");
  ASSERT_TRUE(apply);
  EXPECT_EQ(apply->status, 200) << apply->body;
  EXPECT_FALSE(HasSpeech(server_));
}

// Every boolean parameter of every route in the OpenAPI document refuses a value other than true
// or false, naming itself.
TEST_F(HttpLimitsTest, EveryRoutesBooleansAreChecked) {
  auto admin = server_.As("admin");
  auto doc = admin->Get("/api/v1/openapi.json");
  ASSERT_TRUE(doc);
  const uint64_t job = server_.Submit("alice");
  ASSERT_NE(job, 0u);
  const json paths = BodyJson(doc)["paths"];
  int checked = 0;
  for (const auto& [path, ops] : paths.items()) {
    for (const auto& [method, op] : ops.items()) {
      for (const json& p : op.value("parameters", json::array())) {
        if (p["schema"].value("type", "") != "boolean") continue;
        std::string url = path;
        if (const size_t at = url.find("{id}"); at != std::string::npos) {
          url.replace(at, 4, std::to_string(job));
        }
        url += fmt::format("?{}=1", p.value("name", ""));
        httplib::Result r = method == "get"   ? admin->Get(url)
                            : method == "put" ? admin->Put(url, "{}", "application/json")
                                              : admin->Post(url, "{}", "application/json");
        ASSERT_TRUE(r) << method << " " << url;
        EXPECT_EQ(r->status, 400) << method << " " << url << ": " << r->body;
        EXPECT_EQ(BodyJson(r)["error"].value("field", ""), p.value("name", "")) << r->body;
        ++checked;
      }
    }
  }
  EXPECT_GE(checked, 2);  // dry_run and follow at least
}

// A configuration may be 8 MiB; every other body 1 MiB.
TEST_F(HttpLimitsTest, TheConfigurationMayBeEightMebibytes) {
  constexpr size_t kMiB = size_t{1} << 20;
  auto admin = server_.As("admin");
  // 3 MiB: the configuration and a long comment.
  std::string config = std::string(kTenantConfig) + "# " + std::string(3 * kMiB, 'x') + "\n";
  auto r = admin->Put("/api/v1/config", config, "application/yaml");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body.substr(0, 300);

  config = std::string(kTenantConfig) + "# " + std::string(8 * kMiB, 'x') + "\n";
  r = admin->Put("/api/v1/config", config, "application/yaml");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 413) << r->body.substr(0, 300);
  const json e = BodyJson(r)["error"];
  EXPECT_EQ(e.value("code", ""), "invalid_argument") << r->body;
  EXPECT_NE(e.value("message", "").find("larger than 8388608 bytes"), std::string::npos) << r->body;

  // Elsewhere the cap stays 1 MiB.
  r = server_.As("alice")->Post("/api/v1/jobs", std::string(2 * kMiB, ' '), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 413);
  EXPECT_NE(BodyJson(r)["error"].value("message", "").find("larger than 1048576 bytes"),
            std::string::npos)
      << r->body;
  r = admin->Get("/healthz");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
}

}  // namespace
}  // namespace arbiter::testing

// Approvals over HTTP: a big job waits for approval, its submitter cannot approve it, a tenant
// admin can (with a comment), and the decision is in the audit log.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <string>

#include "tenant_server.h"

namespace arbiter::testing {
namespace {

using nlohmann::json;

TEST(ApprovalsHttpTest, ABigJobWaitsForATenantAdmin) {
  TenantServer server;
  ASSERT_TRUE(server.Start());
  const std::string config = std::string(kTenantConfig) + R"(
approvals:
  - name: big-jobs
    when: {gpus_at_least: 32}
    approvers: {role: tenant-admin}
    expires_after_seconds: 86400
)";
  auto applied = server.As("admin")->Put("/api/v1/config", config, "application/yaml");
  ASSERT_TRUE(applied && applied->status == 200) << (applied ? applied->body : "no reply");

  const uint64_t id = server.Submit("bob");  // 64 GPUs
  ASSERT_NE(id, 0u);
  const std::string job = fmt::format("/api/v1/jobs/{}", id);
  const json got = BodyJson(server.As("bob")->Get(job));
  EXPECT_EQ(got["state"], "awaiting_approval") << got.dump();
  EXPECT_NE(got.value("reason", "").find("rule big-jobs"), std::string::npos) << got.dump();

  EXPECT_EQ(server.As("bob")->Post(job + "/approve", "", "application/json")->status, 403);
  EXPECT_TRUE(BodyJson(server.As("bob")->Get("/api/v1/approvals"))["items"].empty());
  const json listed = BodyJson(server.As("tina")->Get("/api/v1/approvals"));
  ASSERT_EQ(listed["items"].size(), 1u) << listed.dump();
  EXPECT_EQ(listed["items"][0]["job"], id);

  auto bad = server.As("tina")->Post(job + "/approve", R"({"note": "x"})", "application/json");
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400);
  EXPECT_EQ(BodyJson(bad)["error"]["field"], "note") << bad->body;

  auto ok = server.As("tina")->Post(job + "/approve", R"({"comment": "budget checked"})",
                                    "application/json");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200) << ok->body;
  EXPECT_EQ(BodyJson(ok)["state"], "pending");
  EXPECT_EQ(server.As("tina")->Post(job + "/reject", "", "application/json")->status, 409);

  const json audit = BodyJson(server.As("admin")->Get("/api/v1/audit"));
  bool found = false;
  for (const json& a : audit["items"]) {
    if (a["action"] == "job.approve" && a["actor"] == "tina" && a["result"] == "ok" &&
        a["target"] == fmt::format("job/{}", id)) {
      found = a["detail"].value("comment", "") == "budget checked";
    }
  }
  EXPECT_TRUE(found) << audit.dump();
}

}  // namespace
}  // namespace arbiter::testing

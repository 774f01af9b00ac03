// Approvals end to end with the real server, an agent and the `arbiter` client: a 32-GPU job
// waits for approval, its submitter cannot approve it (a clear error), a tenant admin approves it
// with `arbiter approve` and it runs; a quota request changes the configuration once an admin
// approves it and is undone at its `until`; every step is in the audit log.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "agent_process.h"
#include "cli_process.h"
#include "tenant_server.h"

namespace arbiter::testing {
namespace {

using nlohmann::json;

constexpr const char* kConfig = R"(
gpu_models:
  - {name: A100-80G, memory_mib: 81920}
tenants:
  - name: vision
    guaranteed: {gpu: 32}
    queues:
      - {name: vision-train, guaranteed: {gpu: 8}}
  - name: speech
    queues:
      - {name: speech-train, guaranteed: {gpu: 8}}
users:
  - {name: tina, tenant: vision, role: tenant-admin}
  - {name: alice, tenant: vision, role: member}
  - {name: bob, tenant: vision, role: member}
  - {name: vic, tenant: vision, role: viewer}
  - {name: sam, tenant: speech, role: member}
approvals:
  - name: big-jobs
    when: {gpus_at_least: 32}
    approvers: {role: tenant-admin}
    expires_after_seconds: 86400
)";

// Polls `f` every 100 ms until it is true or `seconds` pass.
template <typename F>
bool Eventually(F f, int seconds) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  while (std::chrono::steady_clock::now() < deadline) {
    if (f()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return f();
}

class ApprovalsCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(server_.Start());
    url_ = fmt::format("http://127.0.0.1:{}", server_.port());
    auto applied = server_.As("admin")->Put("/api/v1/config", kConfig, "application/yaml");
    ASSERT_TRUE(applied && applied->status == 200) << (applied ? applied->body : "no reply");
  }

  CliResult Cli(const std::string& user, const std::vector<std::string>& args) {
    CliOptions o;
    o.env["HOME"] = home_.path();
    o.env["ARBITER_SERVER"] = url_;
    o.env["ARBITER_TOKEN"] = server_.token(user);
    o.env["NO_COLOR"] = "1";
    return RunCli(args, o);
  }

  json Get(const std::string& user, const std::string& path) {
    return BodyJson(server_.As(user)->Get(path));
  }

  double Guaranteed() {
    return Get("admin", "/api/v1/queues/vision-train")["guaranteed"].value("gpu", -1.0);
  }

  // Whether the audit log holds `action` by `actor` on `target` with `result` (a prefix).
  bool Audited(const std::string& action, const std::string& actor, const std::string& target,
               const std::string& result = "ok") {
    const json audit = Get("admin", "/api/v1/audit?limit=1000");
    for (const json& a : audit["items"]) {
      if (a["action"] == action && a["actor"] == actor && a["target"] == target &&
          a["result"].get<std::string>().starts_with(result)) {
        return true;
      }
    }
    return false;
  }

  TempDir home_;
  TempDir work_;
  TenantServer server_;
  std::string url_;
};

TEST_F(ApprovalsCliTest, ABigJobWaitsUntilATenantAdminApprovesItWithTheCli) {
  const std::string node_token = NodeToken(*server_.As("admin"), "agent-01");
  ASSERT_FALSE(node_token.empty());
  AgentProcess agent;
  ASSERT_TRUE(
      agent.Start(url_, node_token, "agent-01", work_.path() + "/agent", {"--fake-gpus", "32"}));

  auto submitted =
      server_.As("bob")->Post("/api/v1/jobs", JobBody("vision-train", 32), "application/json");
  ASSERT_TRUE(submitted && submitted->status == 201) << (submitted ? submitted->body : "");
  const uint64_t id = BodyJson(submitted)["id"].get<uint64_t>();
  const std::string job = fmt::format("/api/v1/jobs/{}", id);
  EXPECT_EQ(Get("bob", job)["state"], "awaiting_approval");

  // The submitter sees nothing to decide and may not approve his own job.
  const CliResult bobs = Cli("bob", {"approvals"});
  EXPECT_EQ(bobs.code, 0) << bobs.err;
  EXPECT_NE(bobs.out.find("nothing awaits your approval"), std::string::npos) << bobs.out;
  const CliResult own = Cli("bob", {"approve", std::to_string(id)});
  EXPECT_EQ(own.code, 4) << own.out << own.err;
  EXPECT_NE(own.err.find("nobody decides on their own job"), std::string::npos) << own.err;
  EXPECT_EQ(Get("bob", job)["state"], "awaiting_approval");

  // The tenant admin lists it and approves it.
  const CliResult listed = Cli("tina", {"approvals"});
  EXPECT_EQ(listed.code, 0) << listed.err;
  EXPECT_NE(listed.out.find("big-jobs"), std::string::npos) << listed.out;
  EXPECT_NE(listed.out.find(std::to_string(id)), std::string::npos) << listed.out;
  const CliResult as_json = Cli("tina", {"approvals", "--json"});
  ASSERT_EQ(as_json.code, 0) << as_json.err;
  const json items = json::parse(as_json.out)["items"];
  ASSERT_EQ(items.size(), 1u) << as_json.out;
  EXPECT_EQ(items[0]["kind"], "job");
  EXPECT_EQ(items[0]["gpus"], 32);
  const CliResult approved =
      Cli("tina", {"approve", std::to_string(id), "--comment", "budget checked"});
  EXPECT_EQ(approved.code, 0) << approved.out << approved.err;
  EXPECT_NE(approved.out.find("approved by tina (rule big-jobs): budget checked"),
            std::string::npos)
      << approved.out;

  // It runs, and ends.
  EXPECT_TRUE(Eventually([&] { return Get("bob", job)["state"] == "succeeded"; }, 60))
      << Get("bob", job).dump();

  const std::string target = fmt::format("job/{}", id);
  EXPECT_TRUE(Audited("job.approve", "bob", target, "denied: own job"));
  EXPECT_TRUE(Audited("job.approve", "tina", target));
}

TEST_F(ApprovalsCliTest, AnApprovedQuotaRequestChangesTheConfigurationUntilItsTime) {
  EXPECT_EQ(Guaranteed(), 8);
  // Until a few seconds from now, by the server's clock (RFC 3339).
  const auto until = std::chrono::system_clock::now() + std::chrono::seconds(15);
  const std::time_t t = std::chrono::system_clock::to_time_t(until);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char until_text[32];
  std::strftime(until_text, sizeof until_text, "%Y-%m-%dT%H:%M:%SZ", &tm);

  const CliResult bad = Cli("alice", {"request", "quota", "--queue", "vision-train", "--guaranteed",
                                      "gpu=64", "--until", until_text, "--reason", "too much"});
  EXPECT_EQ(bad.code, 1) << bad.out << bad.err;
  EXPECT_NE(bad.err.find("guaranteed.gpu"), std::string::npos) << bad.err;

  const CliResult asked =
      Cli("alice", {"request", "quota", "--queue", "vision-train", "--guaranteed", "gpu=16",
                    "--until", until_text, "--reason", "paper deadline"});
  ASSERT_EQ(asked.code, 0) << asked.out << asked.err;
  const json requests = Get("alice", "/api/v1/quota-requests");
  ASSERT_EQ(requests["items"].size(), 1u) << requests.dump();
  const std::string id = requests["items"][0]["id"];
  EXPECT_EQ(requests["items"][0]["state"], "pending");

  // The requester, and a tenant admin, may not approve it; an admin does.
  const CliResult own = Cli("alice", {"quota-requests", "approve", id});
  EXPECT_EQ(own.code, 4) << own.out << own.err;
  const CliResult tina = Cli("tina", {"quota-requests", "approve", id});
  EXPECT_EQ(tina.code, 4) << tina.out << tina.err;
  EXPECT_NE(tina.err.find("only admins decide quota requests"), std::string::npos) << tina.err;
  const CliResult listed = Cli("admin", {"approvals"});
  EXPECT_NE(listed.out.find("quota/" + id), std::string::npos) << listed.out;
  const CliResult approved =
      Cli("admin", {"quota-requests", "approve", id, "--comment", "until the deadline"});
  ASSERT_EQ(approved.code, 0) << approved.out << approved.err;
  EXPECT_NE(approved.out.find("gpu=8 -> gpu=16"), std::string::npos) << approved.out;
  EXPECT_EQ(Guaranteed(), 16);
  const json request = Get("alice", "/api/v1/quota-requests/" + id);
  EXPECT_EQ(request["state"], "approved");
  EXPECT_EQ(request["diff"]["before"]["gpu"], 8) << request.dump();
  EXPECT_EQ(request["diff"]["after"]["gpu"], 16);
  const CliResult table = Cli("alice", {"quota-requests"});
  EXPECT_NE(table.out.find("approved"), std::string::npos) << table.out;

  // At `until` the scheduling cycle undoes it.
  EXPECT_TRUE(Eventually(
      [&] { return Get("alice", "/api/v1/quota-requests/" + id)["state"] == "reverted"; }, 60))
      << Get("alice", "/api/v1/quota-requests/" + id).dump();
  EXPECT_EQ(Guaranteed(), 8);

  const std::string target = "quota_request/" + id;
  EXPECT_TRUE(Audited("quota_request.create", "alice", target));
  EXPECT_TRUE(Audited("quota_request.approve", "alice", target, "denied: own request"));
  EXPECT_TRUE(Audited("quota_request.approve", "admin", target));
  EXPECT_TRUE(Audited("quota_request.revert", "arbiter", target));
  EXPECT_TRUE(Audited("config.apply", "arbiter", "config"));
}

}  // namespace
}  // namespace arbiter::testing

// Quota requests: the body's checks, who may ask, see and decide, the configuration change an
// approval makes (diff, audit) and its undoing at `until`, persistence across a restart.
#include "server/quota_requests.h"

#include <gtest/gtest.h>

#include "server/control_plane_test_fixture.h"

namespace arbiter::server {
namespace {

using nlohmann::json;

constexpr const char* kConfig = R"(
gpu_models:
  - {name: A100-80G, memory_mib: 81920}
tenants:
  - name: lab
    guaranteed: {gpu: 32}
    queues:
      - {name: lab-q, guaranteed: {gpu: 8}, aliases: [LabQ]}
      - {name: lab-b}
  - name: other
    queues:
      - {name: other-q}
users:
  - {name: ann, tenant: lab, role: member}
  - {name: tom, tenant: lab, role: tenant-admin}
  - {name: vic, tenant: lab, role: viewer}
  - {name: ola, tenant: other, role: tenant-admin}
)";

constexpr TimeMs kDay = 86400 * 1000;

class QuotaRequestsTest : public ControlPlaneTest {
 protected:
  void SetUp() override { StartWith(kConfig, "cp-quota-requests"); }

  Result<json> Ask(const Principal& p, json body) {
    if (!body.contains("until")) body["until"] = now_ + kDay;
    if (!body.contains("reason")) body["reason"] = "a deadline";
    auto in = ParseQuotaRequestBody(body.dump(), now_);
    if (!in.ok()) return in.status();
    return cp_->CreateQuotaRequest(p, std::move(in).value());
  }
  uint64_t AskOk(const Principal& p, json body) {
    auto r = Ask(p, std::move(body));
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? std::stoull((*r)["id"].get<std::string>()) : 0;
  }
  // Queue `name`'s configured guaranteed amount of `key` (-1: none).
  int64_t Guaranteed(const std::string& name, const std::string& key = "gpu") {
    auto c = api::ParseConfigYaml(cp_->ConfigYaml());
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    for (const api::TenantConfig& t : c->tenants) {
      for (const QueueSpec& q : t.queues) {
        if (q.name != name) continue;
        auto it = q.quota.find(key);
        return it == q.quota.end() || !it->second.guaranteed ? -1 : *it->second.guaranteed;
      }
    }
    return -2;
  }
  // The audit records of `action` that succeeded.
  json AuditOf(const std::string& action) {
    auto r = cp_->ListAudit(admin_, 0, 1000);
    EXPECT_TRUE(r.ok());
    json out = json::array();
    for (const json& a : (*r)["items"]) {
      if (a["action"] == action && a["result"].get<std::string>().starts_with("ok")) {
        out.push_back(a);
      }
    }
    return out;
  }
  Principal ann_{"ann", "lab", Role::kMember, "an"};
  Principal tom_{"tom", "lab", Role::kTenantAdmin, "to"};
  Principal vic_{"vic", "lab", Role::kViewer, "vi"};
  Principal ola_{"ola", "other", Role::kTenantAdmin, "ol"};
  Principal root_{"root", "", Role::kAdmin, "ro"};
};

TEST(QuotaRequestBodyTest, ChecksEveryFieldAndNamesIt) {
  const TimeMs now = 1'700'000'000'000;
  auto field = [&](const std::string& body) {
    auto r = ParseQuotaRequestBody(body, now);
    return r.ok() ? std::string("ok") : r.status().field();
  };
  EXPECT_EQ(field(R"({"queue": "q", "guaranteed": {"gpu": 16}, "until": "2024-01-31",
                     "reason": "r"})"),
            "ok");
  EXPECT_EQ(field(R"({"guaranteed": {"gpu": 16}, "until": "2024-01-31", "reason": "r"})"), "queue");
  EXPECT_EQ(field(R"({"queue": "q", "until": "2024-01-31", "reason": "r"})"), "guaranteed");
  EXPECT_EQ(field(R"({"queue": "q", "guaranteed": {"gpus": 1}, "until": "2024-01-31",
                     "reason": "r"})"),
            "guaranteed.gpus");
  EXPECT_EQ(field(R"({"queue": "q", "guaranteed": {"gpu": -1}, "until": "2024-01-31",
                     "reason": "r"})"),
            "guaranteed.gpu");
  EXPECT_EQ(field(R"({"queue": "q", "guaranteed": {"memory": "12Gb"}, "until": "2024-01-31",
                     "reason": "r"})"),
            "guaranteed.memory");
  EXPECT_EQ(field(R"({"queue": "q", "guaranteed": {"gpu": 1}, "until": "2020-01-01",
                     "reason": "r"})"),
            "until");
  EXPECT_EQ(field(R"({"queue": "q", "guaranteed": {"gpu": 1}, "until": "soon", "reason": "r"})"),
            "until");
  EXPECT_EQ(field(R"({"queue": "q", "guaranteed": {"gpu": 1}, "until": "2024-01-31"})"), "reason");
  EXPECT_EQ(field(R"({"queue": "q", "guaranteed": {"gpu": 1}, "until": "2024-01-31",
                     "reason": "r", "why": 1})"),
            "why");

  auto in = ParseQuotaRequestBody(
      R"({"queue": "q", "guaranteed": {"gpu": 16, "cpu": 0.5, "memory": "2Gi"},
          "until": "2024-01-31", "reason": "r"})",
      now);
  ASSERT_TRUE(in.ok()) << in.status().ToString();
  EXPECT_EQ(in->guaranteed.at("gpu"), 16000);
  EXPECT_EQ(in->guaranteed.at("cpu"), 500);
  EXPECT_EQ(in->guaranteed.at("memory"), 2048);
  EXPECT_EQ(in->until_ms, 1'706'745'600'000);  // the end of 2024-01-31, UTC
}

TEST_F(QuotaRequestsTest, AnApprovalChangesTheConfigurationAndUntilUndoesIt) {
  const uint64_t id = AskOk(ann_, {{"queue", "LabQ"}, {"guaranteed", {{"gpu", 16}}}});
  auto got = cp_->GetQuotaRequest(ann_, id);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ((*got)["queue"], "lab-q");  // the alias resolved
  EXPECT_EQ((*got)["state"], "pending");
  EXPECT_EQ((*got)["may_decide"], false);
  EXPECT_EQ(Guaranteed("lab-q"), 8000);

  // Who sees it, who decides.
  EXPECT_EQ((*cp_->ListQuotaRequests(tom_))["items"].size(), 1u);
  EXPECT_EQ((*cp_->ListQuotaRequests(vic_))["items"].size(), 1u);
  EXPECT_TRUE((*cp_->ListQuotaRequests(ola_))["items"].empty());
  EXPECT_EQ((*cp_->ListQuotaRequests(root_))["items"][0]["may_decide"], true);
  EXPECT_EQ(cp_->DecideQuotaRequest(ann_, id, true, "").status().code(),
            StatusCode::kPermissionDenied);
  EXPECT_EQ(cp_->DecideQuotaRequest(tom_, id, true, "").status().code(),
            StatusCode::kPermissionDenied);
  EXPECT_EQ(cp_->DecideQuotaRequest(ola_, id, true, "").status().code(), StatusCode::kNotFound);

  auto ok = cp_->DecideQuotaRequest(root_, id, true, "until the deadline");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ((*ok)["state"], "approved");
  EXPECT_EQ((*ok)["diff"]["before"]["gpu"], 8);
  EXPECT_EQ((*ok)["diff"]["after"]["gpu"], 16);
  ASSERT_EQ((*ok)["diff"]["changes"].size(), 1u) << ok->dump();
  EXPECT_EQ((*ok)["diff"]["changes"][0]["name"], "lab-q");
  EXPECT_EQ(Guaranteed("lab-q"), 16000);
  EXPECT_EQ(cp_->DecideQuotaRequest(root_, id, false, "").status().code(), StatusCode::kConflict);
  const json approved = AuditOf("quota_request.approve");
  ASSERT_EQ(approved.size(), 1u);
  EXPECT_EQ(approved[0]["detail"]["before"]["gpu"], 8) << approved.dump();
  EXPECT_EQ(approved[0]["detail"]["after"]["gpu"], 16);
  EXPECT_EQ(AuditOf("config.apply").size(), 2u);  // the fixture's, and the approval's

  // It survives a restart, and `until` undoes it.
  cp_.reset();
  Start();
  EXPECT_EQ(Guaranteed("lab-q"), 16000);
  now_ += kDay - 1000;
  ASSERT_TRUE(cp_->RunSchedulingCycle().ok());
  EXPECT_EQ(Guaranteed("lab-q"), 16000);
  now_ += 1000;
  ASSERT_TRUE(cp_->RunSchedulingCycle().ok());
  EXPECT_EQ(Guaranteed("lab-q"), 8000);
  const json after = *cp_->GetQuotaRequest(root_, id);
  EXPECT_EQ(after["state"], "reverted");
  EXPECT_EQ(after["revert"]["changes"].size(), 1u) << after.dump();
  const json reverted = AuditOf("quota_request.revert");
  ASSERT_EQ(reverted.size(), 1u);
  EXPECT_EQ(reverted[0]["actor"], "arbiter");
  EXPECT_EQ(reverted[0]["detail"]["after"]["gpu"], 8);
}

TEST_F(QuotaRequestsTest, AnAmountChangedSinceTheApprovalIsKept) {
  const uint64_t id = AskOk(ann_, {{"queue", "lab-b"}, {"guaranteed", {{"gpu", 4}, {"cpu", 8}}}});
  ASSERT_TRUE(cp_->DecideQuotaRequest(root_, id, true, "").ok());
  EXPECT_EQ(Guaranteed("lab-b"), 4000);
  EXPECT_EQ(Guaranteed("lab-b", "cpu"), 8000);
  // An admin changes the GPUs meanwhile; the CPUs are left as the approval set them.
  std::string yaml = cp_->ConfigYaml();
  auto c = api::ParseConfigYaml(yaml);
  ASSERT_TRUE(c.ok());
  for (api::TenantConfig& t : c->tenants) {
    for (QueueSpec& q : t.queues) {
      if (q.name == "lab-b") q.quota["gpu"].guaranteed = 6000;
    }
  }
  ASSERT_TRUE(cp_->ApplyConfig(admin_, *c, false).ok());
  now_ += kDay;
  ASSERT_TRUE(cp_->RunSchedulingCycle().ok());
  EXPECT_EQ(Guaranteed("lab-b"), 6000);
  EXPECT_EQ(Guaranteed("lab-b", "cpu"), -1);  // none before
  const json r = *cp_->GetQuotaRequest(root_, id);
  EXPECT_EQ(r["state"], "reverted");
  ASSERT_EQ(r["revert"]["kept"].size(), 1u) << r.dump();
  EXPECT_NE(r["revert"]["kept"][0].get<std::string>().find("gpu: 6"), std::string::npos);
}

TEST_F(QuotaRequestsTest, RefusedRequestsNameTheField) {
  // Above the tenant's own guarantee: the configuration refuses it.
  auto big = Ask(ann_, {{"queue", "lab-q"}, {"guaranteed", {{"gpu", 64}}}});
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.status().field(), "guaranteed.gpu") << big.status().ToString();
  EXPECT_NE(big.status().message().find("more than its own"), std::string::npos)
      << big.status().ToString();
  auto model = Ask(ann_, {{"queue", "lab-q"}, {"guaranteed", {{"gpu:H100", 1}}}});
  EXPECT_FALSE(model.ok());
  auto theirs = Ask(ann_, {{"queue", "other-q"}, {"guaranteed", {{"gpu", 1}}}});
  EXPECT_EQ(theirs.status().field(), "queue");
  EXPECT_EQ(Ask(vic_, {{"queue", "lab-q"}, {"guaranteed", {{"gpu", 1}}}}).status().code(),
            StatusCode::kPermissionDenied);
}

TEST_F(QuotaRequestsTest, RejectedAndExpiredRequestsChangeNothing) {
  const uint64_t a = AskOk(tom_, {{"queue", "lab-q"}, {"guaranteed", {{"gpu", 16}}}});
  const uint64_t b = AskOk(tom_, {{"queue", "lab-q"}, {"guaranteed", {{"gpu", 12}}}});
  auto r = cp_->DecideQuotaRequest(root_, a, false, "not this month");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)["state"], "rejected");
  EXPECT_EQ((*r)["comment"], "not this month");
  EXPECT_EQ(AuditOf("quota_request.reject").size(), 1u);
  now_ += kDay;
  ASSERT_TRUE(cp_->RunSchedulingCycle().ok());
  EXPECT_EQ((*cp_->GetQuotaRequest(root_, b))["state"], "expired");
  EXPECT_EQ(cp_->DecideQuotaRequest(root_, b, true, "").status().code(), StatusCode::kConflict);
  EXPECT_EQ(Guaranteed("lab-q"), 8000);
}

}  // namespace
}  // namespace arbiter::server

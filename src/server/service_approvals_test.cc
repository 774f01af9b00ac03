// Approvals of services: a service an approval rule matches (max replicas x GPUs per replica)
// starts no replica until an approver approves it; a rejected or expired one starts nothing; the
// request survives a restart.
#include <gtest/gtest.h>

#include "api/service_codec.h"
#include "server/control_plane_test_fixture.h"

namespace arbiter::server {
namespace {

using nlohmann::json;

constexpr const char* kConfig = R"(
gpu_models:
  - {name: A100-80G, memory_mib: 81920}
tenants:
  - name: lab
    queues:
      - {name: lab-q}
  - name: other
    queues:
      - {name: other-q}
users:
  - {name: ann, tenant: lab, role: member}
  - {name: bea, tenant: lab, role: member}
  - {name: tom, tenant: lab, role: tenant-admin}
  - {name: ola, tenant: other, role: tenant-admin}
approvals:
  - name: big-services
    when: {type: service, gpus_at_least: 4}
    approvers: {role: tenant-admin}
    expires_after_seconds: 3600
)";

class ServiceApprovalsTest : public ControlPlaneTest {
 protected:
  void SetUp() override {
    StartWith(kConfig, "cp-service-approvals");
    Register("gpu-01", "i1", 8);
  }

  json Create(const Principal& p, const std::string& name, int replicas, int gpus,
              json extra = json::object()) {
    json body = {{"name", name},
                 {"queue", "lab-q"},
                 {"replicas", replicas},
                 {"template", {{"command", {"serve"}}, {"resources", {{"gpus", gpus}}}}}};
    body.update(extra);
    auto spec = api::ParseServiceJson(body.dump());
    EXPECT_TRUE(spec.ok()) << spec.status().ToString();
    if (!spec.ok()) return json();
    auto r = cp_->CreateService(p, std::move(spec).value());
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : json();
  }
  json Get(const std::string& name) {
    auto r = cp_->GetService(admin_, name);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : json();
  }
  size_t Replicas(const std::string& name) { return Get(name)["status"]["replicas"].size(); }
  void Reconcile() {
    std::vector<ProbeTarget> targets;
    ASSERT_TRUE(cp_->ReconcileServices({}, &targets).ok());
  }
  // The services `p` may decide, by name.
  std::vector<std::string> Listed(const Principal& p) {
    auto r = cp_->ListApprovals(p);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    std::vector<std::string> out;
    if (!r.ok()) return out;
    for (const json& i : (*r)["items"]) {
      if (i["kind"] == "service") out.push_back(i["id"]);
    }
    return out;
  }
  bool Audited(const std::string& action, const std::string& actor, const std::string& target) {
    auto r = cp_->ListAudit(admin_, 0, 1000);
    EXPECT_TRUE(r.ok());
    for (const json& a : (*r)["items"]) {
      if (a["action"] == action && a["actor"] == actor && a["target"] == target &&
          a["result"] == "ok") {
        return true;
      }
    }
    return false;
  }

  Principal ann_{"ann", "lab", Role::kMember, "an"};
  Principal bea_{"bea", "lab", Role::kMember, "be"};
  Principal tom_{"tom", "lab", Role::kTenantAdmin, "to"};
  Principal ola_{"ola", "other", Role::kTenantAdmin, "ol"};
};

TEST_F(ServiceApprovalsTest, ABigServiceStartsNoReplicaUntilATenantAdminApprovesIt) {
  const json created = Create(ann_, "chat", 2, 2);  // 2 x 2 = 4 GPUs
  EXPECT_EQ(created["approval"]["state"], "awaiting") << created.dump();
  EXPECT_EQ(created["approval"]["rule"], "big-services");
  const std::string blocked = created["status"]["blocked"];
  EXPECT_NE(blocked.find("awaiting approval (rule big-services)"), std::string::npos) << blocked;
  Reconcile();
  EXPECT_EQ(Replicas("chat"), 0u);

  // A small one is not held.
  EXPECT_FALSE(Create(ann_, "small", 1, 1).contains("approval"));
  Reconcile();
  EXPECT_EQ(Replicas("small"), 1u);

  EXPECT_EQ(Listed(tom_), std::vector<std::string>{"chat"});
  EXPECT_EQ(Listed(admin_), std::vector<std::string>{"chat"});
  EXPECT_TRUE(Listed(ann_).empty());
  EXPECT_TRUE(Listed(bea_).empty());
  EXPECT_TRUE(Listed(ola_).empty());
  auto listed = cp_->ListApprovals(tom_);
  ASSERT_TRUE(listed.ok());
  EXPECT_EQ((*listed)["items"][0]["gpus"], 4);
  EXPECT_EQ((*listed)["items"][0]["user"], "ann");

  EXPECT_EQ(cp_->DecideServiceApproval(ann_, "chat", true, "").status().code(),
            StatusCode::kPermissionDenied);
  EXPECT_EQ(cp_->DecideServiceApproval(bea_, "chat", true, "").status().code(),
            StatusCode::kPermissionDenied);
  EXPECT_EQ(cp_->DecideServiceApproval(ola_, "chat", true, "").status().code(),
            StatusCode::kNotFound);
  EXPECT_EQ(cp_->DecideServiceApproval(tom_, "chat", true, std::string(1001, 'x')).status().field(),
            "comment");
  // A service no rule holds is the admins' to decide, as a job is; for them it is not waiting.
  EXPECT_EQ(cp_->DecideServiceApproval(tom_, "small", true, "").status().code(),
            StatusCode::kPermissionDenied);
  EXPECT_EQ(cp_->DecideServiceApproval(admin_, "small", true, "").status().code(),
            StatusCode::kConflict);

  auto ok = cp_->DecideServiceApproval(tom_, "chat", true, "capacity checked");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ((*ok)["approval"]["state"], "approved");
  EXPECT_EQ((*ok)["approval"]["decided_by"], "tom");
  EXPECT_EQ((*ok)["approval"]["comment"], "capacity checked");
  Reconcile();
  EXPECT_EQ(Replicas("chat"), 2u);
  EXPECT_EQ(Get("chat")["status"]["blocked"], "");
  EXPECT_TRUE(Audited("service.approve", "tom", "service/chat"));
  EXPECT_EQ(cp_->DecideServiceApproval(tom_, "chat", false, "").status().code(),
            StatusCode::kConflict);
}

TEST_F(ServiceApprovalsTest, AutoscalingCountsItsMaximumAndARejectedServiceStartsNothing) {
  const json created =
      Create(ann_, "auto", 1, 1,
             {{"replicas", {{"min", 1}, {"max", 4}}}, {"autoscaling", {{"target", 4}}}});
  ASSERT_EQ(created["approval"]["state"], "awaiting") << created.dump();
  auto r = cp_->DecideServiceApproval(admin_, "auto", false, "not now");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)["approval"]["state"], "rejected");
  Reconcile();
  EXPECT_EQ(Replicas("auto"), 0u);
  EXPECT_NE(Get("auto")["status"]["blocked"].get<std::string>().find("rejected by admin"),
            std::string::npos);
  EXPECT_TRUE(Audited("service.reject", "admin", "service/auto"));
}

TEST_F(ServiceApprovalsTest, TheRequestSurvivesARestartAndExpires) {
  Create(ann_, "chat", 4, 1);
  cp_.reset();
  Start();
  EXPECT_EQ(Get("chat")["approval"]["state"], "awaiting");
  EXPECT_EQ(Listed(tom_), std::vector<std::string>{"chat"});
  now_ += 3600 * 1000;
  Reconcile();
  const json s = Get("chat");
  EXPECT_EQ(s["approval"]["state"], "rejected");
  EXPECT_NE(s["approval"]["reason"].get<std::string>().find("approval expired"), std::string::npos)
      << s.dump();
  EXPECT_EQ(Replicas("chat"), 0u);
  EXPECT_TRUE(Audited("service.reject", "arbiter", "service/chat"));
  cp_.reset();
  Start();
  Reconcile();
  EXPECT_EQ(Get("chat")["approval"]["state"], "rejected");
  EXPECT_EQ(Replicas("chat"), 0u);
}

}  // namespace
}  // namespace arbiter::server

// Approvals: a submission an approval rule matches waits in awaiting_approval until an approver
// approves it (pending, then scheduled) or rejects it (rejected), or its request expires.
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
  - {name: carol, tenant: other, role: member}
approvals:
  - name: big-jobs
    when: {gpus_at_least: 8}
    approvers: {role: tenant-admin}
    expires_after_seconds: 3600
  - name: long-jobs
    when: {gpu_hours_at_least: 100}
    approvers: {users: [carol]}
)";

class ApprovalsTest : public ControlPlaneTest {
 protected:
  void SetUp() override {
    StartWith(kConfig, "cp-approvals");
    Register("gpu-01", "i1", 8);
  }
  uint64_t SubmitAs(const Principal& p, json body) {
    if (!body.contains("queue")) body["queue"] = "lab-q";
    if (!body.contains("command")) body["command"] = {"true"};
    auto spec = api::ParseJobSubmission(body.dump());
    EXPECT_TRUE(spec.ok()) << spec.status().ToString();
    if (!spec.ok()) return 0;
    bool created = false;
    auto r = cp_->SubmitJob(p, std::move(spec).value(), "", &created);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? r->id : 0;
  }
  std::string Reason(uint64_t id) { return (*cp_->GetJob(admin_, id))["reason"]; }
  std::vector<uint64_t> Listed(const Principal& p) {
    auto r = cp_->ListApprovals(p);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    std::vector<uint64_t> ids;
    if (r.ok()) {
      for (const json& i : (*r)["items"]) ids.push_back(i["job"].get<uint64_t>());
    }
    return ids;
  }
  json AuditActions() {
    auto r = cp_->ListAudit(admin_, 0, 1000);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    json out = json::array();
    if (!r.ok()) return out;
    for (const json& a : (*r)["items"]) {
      if (a["action"] == "job.approve" || a["action"] == "job.reject") out.push_back(a);
    }
    return out;
  }

  Principal ann_{"ann", "lab", Role::kMember, "an"};
  Principal bea_{"bea", "lab", Role::kMember, "be"};
  Principal tom_{"tom", "lab", Role::kTenantAdmin, "to"};
  Principal ola_{"ola", "other", Role::kTenantAdmin, "ol"};
  Principal carol_{"carol", "other", Role::kMember, "ca"};
  Principal root_{"root", "", Role::kAdmin, "ro"};
};

TEST_F(ApprovalsTest, ABigJobWaitsUntilATenantAdminApprovesItThenRuns) {
  // With a walltime: a job without one has no bound in GPU-hours (the long-jobs rule).
  const uint64_t small = SubmitAs(ann_, {{"resources", {{"gpus", 1}}}, {"walltime_seconds", 3600}});
  const uint64_t big = SubmitAs(ann_, {{"resources", {{"gpus", 8}}}});
  EXPECT_EQ(State(small), "pending");
  EXPECT_EQ(State(big), "awaiting_approval");
  EXPECT_NE(Reason(big).find("rule big-jobs"), std::string::npos) << Reason(big);
  EXPECT_NE(Reason(big).find("tenant admins of lab"), std::string::npos) << Reason(big);
  ASSERT_TRUE(cp_->RunSchedulingCycle().ok());
  EXPECT_EQ(State(big), "awaiting_approval");  // not scheduled
  EXPECT_EQ(State(small), "admitted");

  EXPECT_EQ(Listed(tom_), std::vector<uint64_t>{big});
  EXPECT_EQ(Listed(root_), std::vector<uint64_t>{big});
  EXPECT_TRUE(Listed(ann_).empty());  // her own
  EXPECT_TRUE(Listed(bea_).empty());  // a member
  EXPECT_TRUE(Listed(ola_).empty());  // another tenant's admin

  auto own = cp_->DecideApproval(ann_, big, true, "");
  EXPECT_EQ(own.status().code(), StatusCode::kPermissionDenied) << own.status().ToString();
  auto member = cp_->DecideApproval(bea_, big, true, "");
  EXPECT_EQ(member.status().code(), StatusCode::kPermissionDenied);
  auto stranger = cp_->DecideApproval(ola_, big, true, "");
  EXPECT_EQ(stranger.status().code(), StatusCode::kNotFound);
  auto node = cp_->DecideApproval(node_, big, true, "");
  EXPECT_EQ(node.status().code(), StatusCode::kPermissionDenied);
  auto too_long = cp_->DecideApproval(tom_, big, true, std::string(1001, 'x'));
  EXPECT_EQ(too_long.status().field(), "comment");
  EXPECT_EQ(State(big), "awaiting_approval");

  // The small job ends; the approved big one is scheduled.
  ASSERT_TRUE(cp_->JobAction(admin_, small, "cancel").ok());
  auto ok = cp_->DecideApproval(tom_, big, true, "budget checked");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ((*ok)["state"], "pending");
  EXPECT_NE(Reason(big).find("approved by tom (rule big-jobs): budget checked"), std::string::npos)
      << Reason(big);
  ASSERT_TRUE(cp_->RunSchedulingCycle().ok());
  EXPECT_EQ(State(big), "admitted");
  auto again = cp_->DecideApproval(tom_, big, false, "");
  EXPECT_EQ(again.status().code(), StatusCode::kConflict);

  const json audit = AuditActions();
  ASSERT_GE(audit.size(), 4u);
  bool approved = false;
  for (const json& a : audit) {
    if (a["actor"] == "tom" && a["result"] == "ok") approved = true;
  }
  EXPECT_TRUE(approved) << audit.dump();
}

TEST_F(ApprovalsTest, ARejectedJobEndsAndCannotBeRetried) {
  const uint64_t big = SubmitAs(ann_, {{"resources", {{"gpus", 8}}}});
  auto r = cp_->DecideApproval(root_, big, false, "too big this week");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(State(big), "rejected");
  EXPECT_NE(Reason(big).find("rejected by root (rule big-jobs): too big this week"),
            std::string::npos);
  EXPECT_EQ(cp_->JobAction(ann_, big, "retry").status().code(), StatusCode::kConflict);
  EXPECT_TRUE(Listed(root_).empty());
}

TEST_F(ApprovalsTest, NamedApproversDecideAcrossTenantsAndGpuHoursCount) {
  // 4 GPUs x 30 h = 120 GPU-hours: the long-jobs rule, whose approver is carol.
  const uint64_t id =
      SubmitAs(ann_, {{"resources", {{"gpus", 4}}}, {"walltime_seconds", 30 * 3600}});
  const uint64_t short_one =
      SubmitAs(ann_, {{"resources", {{"gpus", 4}}}, {"walltime_seconds", 3600}});
  EXPECT_EQ(State(id), "awaiting_approval");
  EXPECT_EQ(State(short_one), "pending");
  EXPECT_EQ(Listed(carol_), std::vector<uint64_t>{id});
  EXPECT_TRUE(Listed(tom_).empty());
  EXPECT_EQ(cp_->DecideApproval(tom_, id, true, "").status().code(), StatusCode::kPermissionDenied);
  auto ok = cp_->DecideApproval(carol_, id, true, "");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(State(id), "pending");
}

TEST_F(ApprovalsTest, AnExpiredRequestIsRejectedSayingSo) {
  const uint64_t a = SubmitAs(ann_, {{"resources", {{"gpus", 8}}}});
  const uint64_t b = SubmitAs(ann_, {{"resources", {{"gpus", 8}}}});
  now_ += 3599 * 1000;
  ASSERT_TRUE(cp_->RunSchedulingCycle().ok());
  EXPECT_EQ(State(a), "awaiting_approval");
  now_ += 1000;
  // Deciding on an expired request rejects it instead.
  auto late = cp_->DecideApproval(tom_, a, true, "");
  EXPECT_EQ(late.status().code(), StatusCode::kConflict);
  EXPECT_NE(late.status().message().find("approval expired"), std::string::npos)
      << late.status().ToString();
  EXPECT_EQ(State(a), "rejected");
  // The cycle expires the others.
  ASSERT_TRUE(cp_->RunSchedulingCycle().ok());
  EXPECT_EQ(State(b), "rejected");
  EXPECT_NE(Reason(b).find("approval expired (rule big-jobs)"), std::string::npos) << Reason(b);
}

TEST_F(ApprovalsTest, TheRequestSurvivesARestart) {
  const uint64_t big = SubmitAs(ann_, {{"resources", {{"gpus", 8}}}});
  cp_.reset();
  Start();
  EXPECT_EQ(State(big), "awaiting_approval");
  EXPECT_EQ(Listed(tom_), std::vector<uint64_t>{big});
  ASSERT_TRUE(cp_->DecideApproval(tom_, big, true, "").ok());
  EXPECT_EQ(State(big), "pending");
}

}  // namespace
}  // namespace arbiter::server

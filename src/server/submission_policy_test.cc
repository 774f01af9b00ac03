// What a submission may ask for (docs/security.md, "What a job may ask for"): reserved
// environment variables, who may use a priority class, default CPU and memory, live tasks per
// tenant, and jobs no configuration could ever admit.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "server/control_plane_test_fixture.h"

namespace arbiter::server {
namespace {

using nlohmann::json;

constexpr const char* kConfig = R"(
priority_classes:
  - {name: normal, value: 100}
tenants:
  - name: lab
    queues:
      - name: lab-q
users:
  - {name: alice, tenant: lab, role: member}
)";

class SubmissionPolicyTest : public ControlPlaneTest {
 protected:
  void SetUp() override { StartWith(kConfig, "arbiter-submission"); }

  // Submits `body` as `p`; the status.
  Status SubmitAs(const Principal& p, json body) {
    if (!body.contains("queue")) body["queue"] = "lab-q";
    if (!body.contains("command")) body["command"] = {"true"};
    auto spec = api::ParseJobSubmission(body.dump());
    if (!spec.ok()) return spec.status();
    bool created = false;
    auto r = cp_->SubmitJob(p, std::move(spec).value(), "", &created);
    return r.ok() ? Status::Ok() : r.status();
  }

  Principal alice_{"alice", "lab", Role::kMember, "t-alice"};
};

TEST_F(SubmissionPolicyTest, ReservedEnvironmentVariablesAreRefusedNamingThem) {
  for (const char* name : {"CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "ARBITER_JOB_ID",
                           "ARBITER_ANYTHING", "RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR",
                           "MASTER_PORT", "LD_PRELOAD", "HOME", "TMPDIR"}) {
    const Status st = SubmitAs(alice_, {{"env", {{name, "x"}}}});
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << name;
    EXPECT_EQ(st.field(), std::string("env.") + name);
    EXPECT_NE(st.message().find("set by Arbiter"), std::string::npos) << st.message();
  }
  // Ordinary variables, PATH, LD_LIBRARY_PATH, SLURM_* (sbatch sets them) and ARBITER_ARRAY_*
  // (arbiter submit --array sets them) are the job's own.
  EXPECT_TRUE(SubmitAs(alice_, {{"env",
                                 {{"HF_HOME", "/data/hf"},
                                  {"PATH", "/opt/bin:/usr/bin"},
                                  {"LD_LIBRARY_PATH", "/opt/cuda/lib64"},
                                  {"SLURM_JOB_NAME", "x"},
                                  {"ARBITER_ARRAY_INDEX", "3"}}}})
                  .ok());
}

TEST_F(SubmissionPolicyTest, ABatchWithAReservedVariableCreatesNothing) {
  std::vector<JobSpec> specs;
  for (int i = 0; i < 2; ++i) {
    json body = {{"queue", "lab-q"}, {"command", {"true"}}};
    if (i == 1) body["env"] = {{"CUDA_VISIBLE_DEVICES", "0"}};
    specs.push_back(*api::ParseJobSubmission(body.dump()));
  }
  bool created = false;
  auto r = cp_->SubmitJobs(alice_, std::move(specs), "", &created);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().field(), "jobs[1].env.CUDA_VISIBLE_DEVICES");
  EXPECT_FALSE(created);
  EXPECT_EQ(json::parse(*cp_->ListJobs(admin_, {}))["items"].size(), 0u);
}

// Priority classes that name who may use them.
constexpr const char* kClassesConfig = R"(
priority_classes:
  - {name: normal, value: 100}
  - {name: prod, value: 1000, preemptible: false, preempts_anywhere: true, allowed_tenants: [lab]}
  - {name: serve, value: 500, allowed_queues: [other-serve]}
tenants:
  - name: lab
    queues:
      - name: lab-q
  - name: other
    queues:
      - name: other-serve
        queues: [{name: other-serve-a}]
      - name: other-q
users:
  - {name: alice, tenant: lab, role: member}
  - {name: bob, tenant: other, role: member}
)";

class PriorityClassAccessTest : public SubmissionPolicyTest {
 protected:
  void SetUp() override { StartWith(kClassesConfig, "arbiter-classes"); }
  Principal bob_{"bob", "other", Role::kMember, "t-bob"};
};

TEST_F(PriorityClassAccessTest, AClassForOneTenantIsRefusedToAnother) {
  const Status st = SubmitAs(bob_, {{"queue", "other-q"}, {"priority_class", "prod"}});
  EXPECT_EQ(st.code(), StatusCode::kPermissionDenied) << st.ToString();
  EXPECT_EQ(st.field(), "priority_class");
  EXPECT_NE(st.message().find("'prod'"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("tenant other"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("queue other-q"), std::string::npos) << st.message();
  EXPECT_EQ(json::parse(*cp_->ListJobs(admin_, {}))["items"].size(), 0u);
  // The tenant it names may use it; everyone may use a class that names no one.
  EXPECT_TRUE(SubmitAs(alice_, {{"queue", "lab-q"}, {"priority_class", "prod"}}).ok());
  EXPECT_TRUE(SubmitAs(bob_, {{"queue", "other-q"}, {"priority_class", "normal"}}).ok());
}

TEST_F(PriorityClassAccessTest, AClassForAQueueServesItAndTheQueuesUnderIt) {
  EXPECT_TRUE(SubmitAs(bob_, {{"queue", "other-serve-a"}, {"priority_class", "serve"}}).ok());
  const Status st = SubmitAs(bob_, {{"queue", "other-q"}, {"priority_class", "serve"}});
  EXPECT_EQ(st.code(), StatusCode::kPermissionDenied) << st.ToString();
  EXPECT_EQ(st.field(), "priority_class");
  EXPECT_NE(st.message().find("'serve'"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("queue other-serve"), std::string::npos) << st.message();
}

TEST_F(PriorityClassAccessTest, AdminsAreHeldToTheJobsQueueToo) {
  const Status st = SubmitAs(admin_, {{"queue", "other-q"}, {"priority_class", "prod"}});
  EXPECT_EQ(st.code(), StatusCode::kPermissionDenied) << st.ToString();
  EXPECT_EQ(st.field(), "priority_class");
  EXPECT_TRUE(SubmitAs(admin_, {{"queue", "lab-q"}, {"priority_class", "prod"}}).ok());
}

TEST_F(PriorityClassAccessTest, ABatchWithAForbiddenClassCreatesNothing) {
  std::vector<JobSpec> specs;
  specs.push_back(*api::ParseJobSubmission(
      json{{"queue", "other-q"}, {"command", {"true"}}, {"priority_class", "normal"}}.dump()));
  specs.push_back(*api::ParseJobSubmission(
      json{{"queue", "other-q"}, {"command", {"true"}}, {"priority_class", "prod"}}.dump()));
  bool created = false;
  auto r = cp_->SubmitJobs(bob_, std::move(specs), "", &created);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(r.status().field(), "jobs[1].priority_class");
  EXPECT_FALSE(created);
  EXPECT_EQ(json::parse(*cp_->ListJobs(admin_, {}))["items"].size(), 0u);
}

TEST_F(PriorityClassAccessTest, ListedWithTheClasses) {
  const json items = (*cp_->ListPriorityClasses(alice_))["items"];
  ASSERT_EQ(items.size(), 3u);
  EXPECT_EQ(items[1]["allowed_tenants"], json::array({"lab"}));
  EXPECT_EQ(items[2]["allowed_queues"], json::array({"other-serve"}));
  EXPECT_EQ(items[0]["allowed_tenants"], json::array());
}

}  // namespace
}  // namespace arbiter::server

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

}  // namespace
}  // namespace arbiter::server

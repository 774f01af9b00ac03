// Jobs that could never start: refused at submission when a max of their queue or tenant makes
// them so, accepted when only the nodes there are now do (agents may register bigger ones), and
// Inadmissible in the scheduling cycle when a later configuration or the nodes make them so.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "server/control_plane_test_fixture.h"

namespace arbiter::server {
namespace {

using nlohmann::json;

constexpr const char* kConfig = R"(
gpu_models:
  - {name: A100-80G, memory_mib: 81920}
tenants:
  - name: lab
    max: {gpu: 16}
    queues:
      - {name: lab-q, max: {gpu: 8, memory: 64Gi}}
      - {name: lab-open}
)";

// kConfig with lab-q's max lowered to 4 GPUs.
constexpr const char* kLowered = R"(
gpu_models:
  - {name: A100-80G, memory_mib: 81920}
tenants:
  - name: lab
    max: {gpu: 16}
    queues:
      - {name: lab-q, max: {gpu: 4, memory: 64Gi}}
      - {name: lab-open}
)";

class AdmissibilityTest : public ControlPlaneTest {
 protected:
  void SetUp() override { StartWith(kConfig, "cp-admissible"); }

  Status SubmitStatus(json body) {
    if (!body.contains("queue")) body["queue"] = "lab-q";
    if (!body.contains("command")) body["command"] = {"true"};
    auto spec = api::ParseJobSubmission(body.dump());
    if (!spec.ok()) return spec.status();
    bool created = false;
    auto r = cp_->SubmitJob(alice_, std::move(spec).value(), "", &created);
    return r.ok() ? Status::Ok() : r.status();
  }

  Status Apply(const char* yaml) {
    auto parsed = api::ParseConfigYaml(yaml);
    EXPECT_TRUE(parsed.ok()) << parsed.status().ToString();
    auto r = cp_->ApplyConfig(admin_, *parsed, false);
    return r.ok() ? Status::Ok() : r.status();
  }

  json Why(uint64_t id) {
    auto r = cp_->WhyPending(admin_, id);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : json();
  }

  size_t Jobs() { return json::parse(*cp_->ListJobs(admin_, {}))["items"].size(); }

  Principal alice_{"alice", "lab", Role::kMember, "t-alice"};
};

TEST_F(AdmissibilityTest, BeyondAMaxIsRefusedAtSubmissionNamingTheLimit) {
  Status st = SubmitStatus({{"resources", {{"gpus", 12}}}});
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(st.field(), "resources.gpus");
  EXPECT_EQ(st.message(),
            "queue lab-q allows at most 8 GPUs (its max.gpu); this job asks for 12 GPUs: it can "
            "never start unless the max is raised or the job asks for less");

  // Each task fits, the gang does not: the field is tasks.
  st = SubmitStatus({{"tasks", 3}, {"resources", {{"gpus", 4}}}});
  EXPECT_EQ(st.field(), "tasks");
  EXPECT_NE(st.message().find("its 3 tasks ask for 12 GPUs together"), std::string::npos)
      << st.message();

  st = SubmitStatus({{"resources", {{"memory_mib", 131072}}}});
  EXPECT_EQ(st.field(), "resources.memory_mib");
  EXPECT_NE(st.message().find("at most 65536 MiB (its max.memory)"), std::string::npos)
      << st.message();

  // The tenant's max binds a queue that sets none.
  st = SubmitStatus({{"queue", "lab-open"}, {"tasks", 2}, {"resources", {{"gpus", 10}}}});
  EXPECT_EQ(st.field(), "tasks");
  EXPECT_NE(st.message().find("tenant lab allows at most 16 GPUs"), std::string::npos)
      << st.message();
  EXPECT_EQ(Jobs(), 0u);

  // At the max is within it.
  EXPECT_TRUE(SubmitStatus({{"resources", {{"gpus", 8}}}}).ok());
}

TEST_F(AdmissibilityTest, ABatchWithAJobBeyondAMaxCreatesNothing) {
  std::vector<JobSpec> specs;
  for (int gpus : {1, 9}) {
    json body = {{"queue", "lab-q"}, {"command", {"true"}}, {"resources", {{"gpus", gpus}}}};
    specs.push_back(*api::ParseJobSubmission(body.dump()));
  }
  bool created = false;
  auto r = cp_->SubmitJobs(alice_, std::move(specs), "", &created);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().field(), "jobs[1].resources.gpus");
  EXPECT_FALSE(created);
  EXPECT_EQ(Jobs(), 0u);
}

TEST_F(AdmissibilityTest, BeforeAnyNodeRegistersAFeasibleJobIsAcceptedAndWaits) {
  // No node at all: nothing is known about nodes yet.
  const uint64_t id = Submit({{"queue", "lab-open"}, {"resources", {{"gpus", 8}}}});
  ASSERT_NE(id, 0u);
  ASSERT_TRUE(cp_->RunSchedulingCycle().ok());
  EXPECT_EQ(State(id), "pending");
  EXPECT_NE(Why(id)["code"], "Inadmissible") << Why(id).dump();

  // A node too small for it: accepted, but the cycle says no node there is can take it.
  Register("gpu-01", "i1", 4);
  const uint64_t later = Submit({{"queue", "lab-open"}, {"resources", {{"gpus", 8}}}});
  ASSERT_NE(later, 0u);
  ASSERT_TRUE(cp_->RunSchedulingCycle().ok());
  const json why = Why(later);
  EXPECT_EQ(why["code"], "Inadmissible") << why.dump();
  EXPECT_NE(why["message"].get<std::string>().find(
                "no node has 8 GPUs of model A100-80G (the most on one node is 4)"),
            std::string::npos)
      << why.dump();

  // A node big enough joins: the first one starts.
  Register("gpu-02", "i2", 8);
  ASSERT_TRUE(cp_->RunSchedulingCycle().ok());
  EXPECT_EQ(State(id), "admitted") << Why(id).dump();
  EXPECT_NE(Why(later)["code"], "Inadmissible") << Why(later).dump();
}

TEST_F(AdmissibilityTest, LoweringAMaxBelowAPendingJobMakesItInadmissible) {
  const uint64_t id = Submit({{"resources", {{"gpus", 6}}}});
  ASSERT_NE(id, 0u);
  ASSERT_TRUE(cp_->RunSchedulingCycle().ok());
  EXPECT_NE(Why(id)["code"], "Inadmissible") << Why(id).dump();

  ASSERT_TRUE(Apply(kLowered).ok());
  ASSERT_TRUE(cp_->RunSchedulingCycle().ok());
  json why = Why(id);
  EXPECT_EQ(why["state"], "pending");
  EXPECT_EQ(why["code"], "Inadmissible") << why.dump();
  EXPECT_EQ(why["message"],
            "queue lab-q allows at most 4 GPUs (its max.gpu); this job asks for 6 GPUs: it can "
            "never start unless the max is raised or the job asks for less");
  // The same job submitted now is refused.
  EXPECT_EQ(SubmitStatus({{"resources", {{"gpus", 6}}}}).field(), "resources.gpus");

  // Raised again: it may start once there is room.
  ASSERT_TRUE(Apply(kConfig).ok());
  ASSERT_TRUE(cp_->RunSchedulingCycle().ok());
  EXPECT_NE(Why(id)["code"], "Inadmissible") << Why(id).dump();
}

}  // namespace
}  // namespace arbiter::server

// Tasks that ask for no CPU or memory still count (a minimum per task, against quotas and node
// capacity), and live tasks have a ceiling per tenant (max.tasks, with a server-wide default).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

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
      - {name: lab-small, max: {tasks: 4}}
)";

class TaskLimitsTest : public ControlPlaneTest {
 protected:
  void SetUp() override { StartWith(kConfig, "cp-task-limits"); }

  json Why(uint64_t id) { return *cp_->WhyPending(admin_, id); }
  json Queue(const std::string& name) { return *cp_->GetQueue(admin_, name); }
};

TEST_F(TaskLimitsTest, TasksAskingForNothingCountTheMinimumAgainstQueueAndNode) {
  Register("gpu-01", "i1");  // 32 CPUs, 64 GiB
  const uint64_t small = Submit({{"tasks", 10}});
  const json spec = *cp_->GetJob(admin_, small);
  EXPECT_EQ(spec["resources"]["cpu_milli"], 100) << spec.dump();
  EXPECT_EQ(spec["resources"]["memory_mib"], 128);
  ASSERT_TRUE(cp_->RunSchedulingCycle().ok());
  EXPECT_NE(State(small), "pending");
  const json usage = Queue("lab-q")["usage"];
  EXPECT_DOUBLE_EQ(usage["cpu"].get<double>(), 1.0) << usage.dump();
  EXPECT_EQ(usage["memory_mib"], 1280);
  EXPECT_EQ(usage["tasks"], 10);

  // 400 tasks of 0.1 CPU need 40 CPUs: the node has 32. They do not all start at once, as 400
  // processes asking for nothing did.
  const uint64_t many = Submit({{"tasks", 400}});
  ASSERT_TRUE(cp_->RunSchedulingCycle().ok());
  EXPECT_EQ(State(many), "pending");
  EXPECT_NE(Why(many)["message"].get<std::string>().find("CPU"), std::string::npos)
      << Why(many).dump();

  // A job asking for more than the minimum keeps what it asked for.
  const uint64_t big = Submit({{"resources", {{"cpu_milli", 4000}, {"memory_mib", 8192}}}});
  const json b = *cp_->GetJob(admin_, big);
  EXPECT_EQ(b["resources"]["cpu_milli"], 4000);
  EXPECT_EQ(b["resources"]["memory_mib"], 8192);
}

TEST_F(TaskLimitsTest, ATenantsLiveTasksHaveACeiling) {
  cp_->SetTaskLimits({100, 128, 12});
  Register("gpu-01", "i1");
  const uint64_t first = Submit({{"tasks", 8}});
  ASSERT_TRUE(cp_->RunSchedulingCycle().ok());
  EXPECT_NE(State(first), "pending");
  const uint64_t second = Submit({{"tasks", 8}});
  ASSERT_TRUE(cp_->RunSchedulingCycle().ok());
  EXPECT_EQ(State(second), "pending");
  const json why = Why(second);
  EXPECT_EQ(why["code"], "QuotaExceeded") << why.dump();
  EXPECT_NE(why["message"].get<std::string>().find("tenant lab uses 8 of max 12 live tasks"),
            std::string::npos)
      << why.dump();
  // More tasks than the ceiling at all: refused at submission, naming the field.
  auto spec = api::ParseJobSubmission(
      json{{"queue", "lab-q"}, {"command", {"true"}}, {"tasks", 13}}.dump());
  ASSERT_TRUE(spec.ok());
  bool created = false;
  auto r = cp_->SubmitJob(admin_, std::move(spec).value(), "", &created);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().field(), "tasks");
  EXPECT_NE(r.status().message().find("at most 12 live tasks"), std::string::npos)
      << r.status().message();
}

TEST_F(TaskLimitsTest, AQueuesMaxTasksIsItsOwnCeiling) {
  Register("gpu-01", "i1");
  const uint64_t a = Submit({{"queue", "lab-small"}, {"tasks", 3}});
  const uint64_t b = Submit({{"queue", "lab-small"}, {"tasks", 2}});
  ASSERT_TRUE(cp_->RunSchedulingCycle().ok());
  EXPECT_NE(State(a), "pending");
  EXPECT_EQ(State(b), "pending");
  EXPECT_NE(Why(b)["message"].get<std::string>().find("queue lab-small uses 3 of max 4 live tasks"),
            std::string::npos)
      << Why(b).dump();
  EXPECT_EQ(Queue("lab-small")["max"]["tasks"], 4);
}

TEST_F(TaskLimitsTest, TasksTakeAMaxOnly) {
  for (const char* kind : {"guaranteed", "lending_limit"}) {
    const std::string yaml = std::string(R"(
tenants:
  - name: lab
    queues:
      - {name: lab-q, )") + kind +
                             ": {tasks: 2}}\n";
    auto parsed = api::ParseConfigYaml(yaml);
    ASSERT_FALSE(parsed.ok()) << kind;
    EXPECT_EQ(parsed.status().field(), std::string("tenants[0].queues[0].") + kind + ".tasks");
  }
  auto ok = api::ParseConfigYaml(kConfig);
  ASSERT_TRUE(ok.ok());
  // The canonical form keeps it.
  EXPECT_NE(api::DumpConfigYaml(*ok).find("tasks: 4"), std::string::npos)
      << api::DumpConfigYaml(*ok);
}

// A node in the configuration that names no CPU or memory has what its agent reports: otherwise
// it could run nothing, every task counting at least the minimums.
TEST_F(TaskLimitsTest, AConfiguredNodeWithoutCpuOrMemoryHasWhatItsAgentReports) {
  auto c = api::ParseConfigYaml(std::string(kConfig) + R"(nodes:
  - {name: gpu-01, gpus: {count: 4, model: A100-80G}}
)");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_TRUE(cp_->ApplyConfig(admin_, *c, false).ok());
  const uint64_t job = Submit({{"resources", {{"gpus", 1}}}});
  ASSERT_TRUE(cp_->RunSchedulingCycle().ok());
  EXPECT_EQ(State(job), "pending");  // no agent yet: nothing known of its CPUs
  Register("gpu-01", "i1");          // 32 CPUs, 64 GiB
  ASSERT_TRUE(cp_->RunSchedulingCycle().ok());
  EXPECT_NE(State(job), "pending") << Why(job).dump();
  // Still so after the configuration is applied again.
  ASSERT_TRUE(cp_->ApplyConfig(admin_, *c, false).ok());
  const uint64_t next = Submit({{"resources", {{"gpus", 1}}}});
  ASSERT_TRUE(cp_->RunSchedulingCycle().ok());
  EXPECT_NE(State(next), "pending") << Why(next).dump();
}

}  // namespace
}  // namespace arbiter::server

// Applying a configuration while jobs run: what it would leave behind is refused unless pruned,
// and a pruned job's GPUs stay taken until its node reports the tasks gone (real SQLite store,
// fake clock).
#include <gtest/gtest.h>

#include "server/control_plane_test_fixture.h"

namespace arbiter::server {
namespace {

using nlohmann::json;

constexpr const char* kConfig = R"(
gpu_models:
  - {name: A100-80G, memory_mib: 81920}
priority_classes:
  - {name: normal, value: 100, preemptible: true}
tenants:
  - name: lab
    queues:
      - {name: lab-q, guaranteed: {gpu: 4}}
      - {name: lab-b, guaranteed: {gpu: 0}}
)";

// kConfig without queue lab-b.
constexpr const char* kWithoutLabB = R"(
gpu_models:
  - {name: A100-80G, memory_mib: 81920}
priority_classes:
  - {name: normal, value: 100, preemptible: true}
tenants:
  - name: lab
    queues:
      - {name: lab-q, guaranteed: {gpu: 4}}
)";

// kConfig without priority class normal.
constexpr const char* kWithoutNormal = R"(
gpu_models:
  - {name: A100-80G, memory_mib: 81920}
tenants:
  - name: lab
    queues:
      - {name: lab-q, guaranteed: {gpu: 4}}
      - {name: lab-b, guaranteed: {gpu: 0}}
)";

class ConfigApplyTest : public ControlPlaneTest {
 protected:
  void SetUp() override { StartWith(kConfig, "cp-config"); }

  Result<ControlPlane::ConfigApplied> Apply(const char* yaml, bool dry_run, bool prune) {
    auto parsed = api::ParseConfigYaml(yaml);
    EXPECT_TRUE(parsed.ok()) << parsed.status().ToString();
    return cp_->ApplyConfig(admin_, *parsed, dry_run, prune);
  }
};

TEST_F(ConfigApplyTest, DeletingAQueueWithLiveJobsIsRefusedUnlessPruned) {
  const uint64_t id = Submit({{"queue", "lab-b"}, {"resources", {{"gpus", 1}}}});  // pending
  auto refused = Apply(kWithoutLabB, false, false);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kConflict);
  EXPECT_EQ(refused.status().field(), "prune");
  EXPECT_NE(refused.status().message().find(std::to_string(id) + " (queue 'lab-b' is deleted)"),
            std::string::npos)
      << refused.status().message();
  // Nothing changed: the queue takes submissions still.
  EXPECT_NE(Submit({{"queue", "lab-b"}}), 0u);
  auto dry = Apply(kWithoutLabB, true, false);
  ASSERT_TRUE(dry.ok()) << dry.status().ToString();
  EXPECT_EQ(dry->affected_total, 2u);
  ASSERT_EQ(dry->affected.size(), 2u);
  EXPECT_EQ(dry->affected[0].id, id);
  EXPECT_EQ(dry->affected[0].queue, "lab-b");
  EXPECT_EQ(dry->cancelled, 0u);
  EXPECT_EQ(State(id), "pending");
  auto pruned = Apply(kWithoutLabB, false, true);
  ASSERT_TRUE(pruned.ok()) << pruned.status().ToString();
  EXPECT_EQ(pruned->cancelled, 2u);
  const json job = *cp_->GetJob(admin_, id);
  EXPECT_EQ(job["state"], "cancelled");
  EXPECT_NE(job["reason"].get<std::string>().find("queue 'lab-b' is deleted"), std::string::npos)
      << job;
}

TEST_F(ConfigApplyTest, DeletingAPriorityClassInUseIsRefused) {
  Submit({{"priority_class", "normal"}});
  auto refused = Apply(kWithoutNormal, false, false);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kConflict);
  EXPECT_NE(refused.status().message().find("priority class 'normal' is deleted"),
            std::string::npos)
      << refused.status().message();
}

TEST_F(ConfigApplyTest, FinishedJobsNeverHoldADeletionBack) {
  Register("gpu-01", "i1");
  const uint64_t id = Submit({{"queue", "lab-b"}, {"resources", {{"gpus", 1}}}});
  ASSERT_TRUE(cp_->RunSchedulingCycle().ok());
  Beat("gpu-01", "i1",
       {{1, id, 0, 1, TaskEvent::kStarted, 0, false}, {2, id, 0, 1, TaskEvent::kExited, 0, false}});
  ASSERT_EQ(State(id), "succeeded");
  auto applied = Apply(kWithoutLabB, false, false);
  ASSERT_TRUE(applied.ok()) << applied.status().ToString();
  EXPECT_EQ(applied->affected_total, 0u);
}

// A pruned job whose tasks still run keeps its GPUs, counted against the root, until its node
// reports them gone: nothing else is placed on them meanwhile.
TEST_F(ConfigApplyTest, APrunedJobKeepsItsGpusUntilItsTasksAreGone) {
  Register("gpu-01", "i1", 4);
  const uint64_t old_job = Submit({{"queue", "lab-b"}, {"resources", {{"gpus", 4}}}});
  ASSERT_TRUE(cp_->RunSchedulingCycle().ok());
  Beat("gpu-01", "i1", {{1, old_job, 0, 1, TaskEvent::kStarted, 0, false}});
  ASSERT_EQ(State(old_job), "running");
  auto pruned = Apply(kWithoutLabB, false, true);
  ASSERT_TRUE(pruned.ok()) << pruned.status().ToString();
  EXPECT_EQ(pruned->cancelled, 1u);
  EXPECT_EQ(State(old_job), "cancelled");
  const uint64_t next = Submit({{"queue", "lab-q"}, {"resources", {{"gpus", 4}}}});
  ASSERT_TRUE(cp_->RunSchedulingCycle().ok());
  EXPECT_EQ(State(next), "pending");  // the GPUs are still the stopping job's
  Beat("gpu-01", "i1", {{2, old_job, 0, 1, TaskEvent::kExited, 143, false}});
  ASSERT_TRUE(cp_->RunSchedulingCycle().ok());
  EXPECT_NE(State(next), "pending");
}

}  // namespace
}  // namespace arbiter::server

// Requeue (Slurm's scontrol requeue) and resume of a job still stopping: back to its queue only
// once its processes are gone, so the GPUs they hold are never handed out twice.
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
)";

class RequeueTest : public ControlPlaneTest {
 protected:
  void SetUp() override {
    StartWith(kConfig, "cp-requeue");
    Register("gpu-01", "i1", 4);
  }
  // A 4-GPU job running on gpu-01 (attempt `attempt`).
  uint64_t Running() {
    const uint64_t id = Submit({{"resources", {{"gpus", 4}}}});
    EXPECT_TRUE(cp_->RunSchedulingCycle().ok());
    Beat("gpu-01", "i1", {{seq_++, id, 0, 1, TaskEvent::kStarted, 0, false}});
    EXPECT_EQ(State(id), "running");
    return id;
  }
  uint64_t seq_ = 1;
};

TEST_F(RequeueTest, ARunningJobGoesBackToItsQueueOnceStopped) {
  const uint64_t id = Running();
  const uint64_t other = Submit({{"resources", {{"gpus", 4}}}});
  auto r = cp_->JobAction(admin_, id, "requeue");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)["state"], "suspended");
  EXPECT_EQ((*r)["stopping"], "requeue");
  // Its processes still hold the GPUs: nothing else starts on them.
  ASSERT_TRUE(cp_->RunSchedulingCycle().ok());
  EXPECT_EQ(State(other), "pending");
  Beat("gpu-01", "i1", {{seq_++, id, 0, 1, TaskEvent::kExited, 143, false}});
  EXPECT_EQ(State(id), "pending");
  // Back in its queue with its submit time: it goes before the job submitted after it.
  ASSERT_TRUE(cp_->RunSchedulingCycle().ok());
  EXPECT_EQ(State(id), "admitted");
  EXPECT_EQ(State(other), "pending");
  // Only placed jobs may be requeued.
  auto again = cp_->JobAction(admin_, other, "requeue");
  EXPECT_EQ(again.status().code(), StatusCode::kConflict);
  EXPECT_NE(again.status().message().find("only admitted, starting or running"), std::string::npos);
}

TEST_F(RequeueTest, AnAdmittedJobThatHasNotStartedIsPendingAtOnce) {
  const uint64_t id = Submit({{"resources", {{"gpus", 1}}}});
  ASSERT_TRUE(cp_->RunSchedulingCycle().ok());
  ASSERT_EQ(State(id), "admitted");
  ASSERT_TRUE(cp_->JobAction(admin_, id, "requeue").ok());
  EXPECT_EQ(State(id), "pending");
}

TEST_F(RequeueTest, ResumingAJobStillStoppingWaitsForItsProcesses) {
  const uint64_t id = Running();
  const uint64_t other = Submit({{"resources", {{"gpus", 4}}}});
  ASSERT_TRUE(cp_->JobAction(admin_, id, "suspend").ok());
  auto resumed = cp_->JobAction(admin_, id, "resume");
  ASSERT_TRUE(resumed.ok()) << resumed.status().ToString();
  EXPECT_EQ((*resumed)["state"], "suspended");
  ASSERT_TRUE(cp_->RunSchedulingCycle().ok());
  EXPECT_EQ(State(other), "pending");  // the suspended job's processes still hold the GPUs
  Beat("gpu-01", "i1", {{seq_++, id, 0, 1, TaskEvent::kExited, 143, false}});
  EXPECT_EQ(State(id), "pending");
}

}  // namespace
}  // namespace arbiter::server

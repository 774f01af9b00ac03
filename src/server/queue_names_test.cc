// Which queue a submission lands in: the tenant's default_queue when it names none, and queue
// aliases (Slurm partition names such as gpu_A100) or other letter case for a queue's name.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "server/control_plane_test_fixture.h"

namespace arbiter::server {
namespace {

using nlohmann::json;

constexpr const char* kConfig = R"(
tenants:
  - name: hpc
    default_queue: hpc-a100
    queues:
      - {name: hpc-a100, aliases: [gpu_a100, A100.short]}
      - {name: hpc-h100}
  - name: lab
    queues:
      - {name: lab-q, aliases: [lab_gpu]}
users:
  - {name: alice, tenant: hpc, role: member}
  - {name: bob, tenant: lab, role: member}
)";

class QueueNamesTest : public ControlPlaneTest {
 protected:
  void SetUp() override { StartWith(kConfig, "arbiter-queue-names"); }

  // Submits `body` (command ["true"] added) as `p`: the created job, or the error.
  Result<json> SubmitAs(const Principal& p, json body) {
    body["command"] = {"true"};
    auto spec = api::ParseJobSubmission(body.dump());
    if (!spec.ok()) return spec.status();
    bool created = false;
    auto r = cp_->SubmitJob(p, std::move(spec).value(), "", &created);
    if (!r.ok()) return r.status();
    return cp_->GetJob(p, r->id);
  }

  Principal alice_{"alice", "hpc", Role::kMember, "t-alice"};
  Principal bob_{"bob", "lab", Role::kMember, "t-bob"};
};

TEST_F(QueueNamesTest, NoQueueGoesToTheTenantsDefault) {
  auto j = SubmitAs(alice_, json::object());
  ASSERT_TRUE(j.ok()) << j.status().ToString();
  EXPECT_EQ((*j)["queue"], "hpc-a100");
  // The record names the queue it went to, so a restart reads it back the same.
  Start();
  EXPECT_EQ((*cp_->GetJob(admin_, (*j)["id"]))["queue"], "hpc-a100");
}

TEST_F(QueueNamesTest, WithoutADefaultTheQueueIsRequiredAndTheErrorListsTheQueues) {
  auto j = SubmitAs(bob_, json::object());
  ASSERT_FALSE(j.ok());
  EXPECT_EQ(j.status().field(), "queue");
  EXPECT_EQ(j.status().message(),
            "is required: tenant lab has no default_queue; queues you can use: lab-q");
}

TEST_F(QueueNamesTest, AliasesAndOtherCaseFindTheQueue) {
  for (const char* name : {"gpu_a100", "GPU_A100", "a100.SHORT", "HPC-A100", "hpc-a100"}) {
    auto j = SubmitAs(alice_, {{"queue", name}});
    ASSERT_TRUE(j.ok()) << name << ": " << j.status().ToString();
    EXPECT_EQ((*j)["queue"], "hpc-a100") << name;
  }
  auto h = SubmitAs(alice_, {{"queue", "HPC-H100"}});
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  EXPECT_EQ((*h)["queue"], "hpc-h100");
}

TEST_F(QueueNamesTest, AnotherTenantsAliasIsNotFound) {
  auto j = SubmitAs(alice_, {{"queue", "lab_gpu"}});
  ASSERT_FALSE(j.ok());
  EXPECT_EQ(j.status().field(), "queue");
  EXPECT_EQ(j.status().message(),
            "queue lab_gpu not found; queues you can use: hpc-a100, hpc-h100");
  auto k = SubmitAs(bob_, {{"queue", "lab_GPU"}});
  ASSERT_TRUE(k.ok()) << k.status().ToString();
  EXPECT_EQ((*k)["queue"], "lab-q");
}

}  // namespace
}  // namespace arbiter::server

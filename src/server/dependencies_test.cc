// Jobs that wait for other jobs (depends_on, Slurm's --dependency): the pure evaluation, and the
// control plane's driver on a real store with a fake clock: a waiting job has a verdict naming the
// job it waits for, starts once that job has ended as asked, and ends when it never can.
#include "server/dependencies.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <map>

#include "server/control_plane_test_fixture.h"

namespace arbiter::server {
namespace {

using nlohmann::json;
using Kind = DependencyVerdict::Kind;

DependencyVerdict Eval(const std::vector<Dependency>& deps,
                       const std::map<uint64_t, DependedJob>& jobs, uint64_t blocker = 0) {
  return EvaluateDependencies(
      deps,
      [&](uint64_t id) -> std::optional<DependedJob> {
        auto it = jobs.find(id);
        return it == jobs.end() ? std::nullopt : std::optional<DependedJob>(it->second);
      },
      blocker);
}

const DependedJob kRunning{JobState::kRunning, true, false};
const DependedJob kSucceeded{JobState::kSucceeded, true, true};
const DependedJob kFailed{JobState::kFailed, true, true};
const DependedJob kPending{JobState::kPending, false, false};

TEST(Dependencies, EachTypeAsSlurmMeansIt) {
  using T = DependencyType;
  EXPECT_EQ(Eval({{T::kAfterOk, 7}}, {{7, kSucceeded}}).kind, Kind::kMet);
  EXPECT_EQ(Eval({{T::kAfterOk, 7}}, {{7, kRunning}}).message,
            "waiting for job 7 (running) to succeed (afterok:7)");
  EXPECT_EQ(Eval({{T::kAfterOk, 7}}, {{7, kFailed}}).message,
            "dependency never satisfied: job 7 failed (afterok:7)");
  EXPECT_EQ(Eval({{T::kAfterNotOk, 7}}, {{7, kFailed}}).kind, Kind::kMet);
  EXPECT_EQ(Eval({{T::kAfterNotOk, 7}}, {{7, kSucceeded}}).kind, Kind::kNever);
  EXPECT_EQ(Eval({{T::kAfterAny, 7}}, {{7, kFailed}}).kind, Kind::kMet);
  EXPECT_EQ(Eval({{T::kAfterAny, 7}}, {{7, kRunning}}).kind, Kind::kWaiting);
  EXPECT_EQ(Eval({{T::kAfter, 7}}, {{7, kRunning}}).kind, Kind::kMet);
  EXPECT_EQ(Eval({{T::kAfter, 7}}, {{7, kPending}}).message,
            "waiting for job 7 (pending) to start (after:7)");
  EXPECT_EQ(Eval({{T::kAfterOk, 9}}, {}).message,
            "dependency never satisfied: job 9 does not exist (afterok:9)");
  // A failed job that will be retried is in retry-wait, not ended: still worth waiting for.
  EXPECT_EQ(Eval({{T::kAfterOk, 7}}, {{7, {JobState::kRetryWait, true, false}}}).kind,
            Kind::kWaiting);
  // Every one must hold; one that never can ends the wait, whatever comes before it.
  EXPECT_EQ(Eval({{T::kAfterOk, 7}, {T::kAfterOk, 8}}, {{7, kRunning}, {8, kFailed}}).kind,
            Kind::kNever);
  EXPECT_EQ(Eval({{T::kSingleton, 0}}, {}, 3).message,
            "waiting for job 3 of the same user and name to end (singleton)");
  EXPECT_EQ(Eval({{T::kSingleton, 0}}, {}, 0).kind, Kind::kMet);
}

constexpr const char* kConfig = R"(
gpu_models:
  - {name: A100-80G, memory_mib: 81920}
tenants:
  - name: lab
    queues:
      - {name: lab-q, guaranteed: {gpu: 8}}
  - name: other
    queues:
      - {name: other-q, guaranteed: {gpu: 0}}
users:
  - {name: ann, tenant: lab, role: member}
  - {name: olaf, tenant: other, role: member}
)";

class DependencyDriverTest : public ControlPlaneTest {
 protected:
  void SetUp() override {
    StartWith(kConfig, "cp-deps");
    Register("gpu-01", "i1");
  }
  // Runs job `id`'s current attempt to its end with `code` on gpu-01.
  void Finish(uint64_t id, int32_t code) {
    uint64_t attempt = 0;
    const json out = Beat("gpu-01", "i1");  // kept: ranging over a temporary dangles
    for (const json& a : out["assignments"]) {
      if (a["job"] == id) attempt = a["attempt"];
    }
    ASSERT_NE(attempt, 0u) << out.dump();
    Beat("gpu-01", "i1",
         {{++seq_, id, 0, attempt, TaskEvent::kStarted, 0, false},
          {++seq_, id, 0, attempt, TaskEvent::kExited, code, false}});
  }
  void Cycle() { ASSERT_TRUE(cp_->RunSchedulingCycle().ok()); }
  json Job(uint64_t id) { return *cp_->GetJob(admin_, id); }
  uint64_t seq_ = 0;
};

TEST_F(DependencyDriverTest, AfterOkWaitsWithAVerdictThenStarts) {
  const uint64_t a = Submit({{"resources", {{"gpus", 1}}}});
  const uint64_t b =
      Submit({{"resources", {{"gpus", 1}}}, {"depends_on", {{{"type", "afterok"}, {"job", a}}}}});
  Cycle();
  EXPECT_EQ(State(a), "admitted");
  EXPECT_EQ(State(b), "pending");  // GPUs are free: only the dependency holds it
  const json v = Job(b)["pending"];
  EXPECT_EQ(v["code"], "Dependency") << v.dump();
  // As the cycle found job a when it began.
  EXPECT_EQ(v["message"], fmt::format("waiting for job {} (pending) to succeed (afterok:{})", a, a))
      << v.dump();
  EXPECT_EQ(Job(b)["depends_on"],
            json::parse(fmt::format(R"([{{"job":{},"type":"afterok"}}])", a)));
  Finish(a, 0);
  Cycle();
  EXPECT_EQ(State(b), "admitted");
}

// A dependency on an array's id waits for all its jobs, as Slurm's does.
TEST_F(DependencyDriverTest, AnArraysIdStandsForAllItsJobs) {
  auto spec = api::ParseJobSubmission(
      json{{"queue", "lab-q"}, {"command", {"true"}}, {"resources", {{"gpus", 1}}}}.dump());
  ASSERT_TRUE(spec.ok());
  api::ArrayRequest array{"0-1", {0, 1}, 0};
  bool created = false;
  auto arr = cp_->SubmitArray(admin_, std::move(spec).value(), array, "", &created);
  ASSERT_TRUE(arr.ok()) << arr.status().ToString();
  const uint64_t first = arr->id;
  const uint64_t second = first + 1;
  const uint64_t ok = Submit({{"depends_on", {{{"type", "afterok"}, {"job", first}}}}});
  const uint64_t notok = Submit({{"depends_on", {{{"type", "afternotok"}, {"job", first}}}}});
  Cycle();
  Finish(first, 0);
  Cycle();
  // One of two succeeded: both still wait.
  EXPECT_EQ(State(ok), "pending");
  EXPECT_EQ(State(notok), "pending");
  Finish(second, 5);
  Cycle();
  EXPECT_EQ(State(ok), "cancelled");
  EXPECT_EQ(Job(ok)["reason"],
            fmt::format("dependency never satisfied: job {} failed (afterok:{})", first, first));
  EXPECT_EQ(State(notok), "admitted");
}

TEST_F(DependencyDriverTest, AFailedDependencyEndsTheJobWithTheReason) {
  const uint64_t a = Submit({{"resources", {{"gpus", 1}}}});
  const uint64_t ok = Submit({{"depends_on", {{{"type", "afterok"}, {"job", a}}}}});
  const uint64_t notok = Submit({{"depends_on", {{{"type", "afternotok"}, {"job", a}}}}});
  const uint64_t any = Submit({{"depends_on", {{{"type", "afterany"}, {"job", a}}}}});
  Cycle();
  Finish(a, 3);
  EXPECT_EQ(State(a), "failed");
  Cycle();
  EXPECT_EQ(State(ok), "cancelled");
  EXPECT_EQ(Job(ok)["reason"],
            fmt::format("dependency never satisfied: job {} failed (afterok:{})", a, a))
      << Job(ok).dump();
  EXPECT_EQ(State(notok), "admitted");
  EXPECT_EQ(State(any), "admitted");
}

TEST_F(DependencyDriverTest, SingletonRunsOneJobOfANameAtATime) {
  const uint64_t first = Submit({{"name", "nightly"}, {"resources", {{"gpus", 1}}}});
  const json single = {{{"type", "singleton"}}};
  const uint64_t second =
      Submit({{"name", "nightly"}, {"resources", {{"gpus", 1}}}, {"depends_on", single}});
  const uint64_t other =
      Submit({{"name", "weekly"}, {"resources", {{"gpus", 1}}}, {"depends_on", single}});
  Cycle();
  EXPECT_EQ(State(other), "admitted");
  EXPECT_EQ(State(second), "pending");
  EXPECT_EQ(Job(second)["pending"]["message"],
            fmt::format("waiting for job {} of the same user and name to end (singleton)", first));
  Finish(first, 1);  // however it ends
  Cycle();
  EXPECT_EQ(State(second), "admitted");
}

TEST_F(DependencyDriverTest, OnlyJobsTheSubmitterCanSee) {
  Principal olaf{"olaf", "other", Role::kMember, "o"};
  Principal ann{"ann", "lab", Role::kMember, "an"};
  auto mine = api::ParseJobSubmission(R"({"queue": "lab-q", "command": ["true"]})");
  bool created = false;
  auto a = cp_->SubmitJob(ann, *mine, "", &created);
  ASSERT_TRUE(a.ok());
  auto theirs = api::ParseJobSubmission(fmt::format(
      R"({{"queue": "other-q", "command": ["true"], "depends_on": [{{"type": "afterok", "job": {}}}]}})",
      a->id));
  ASSERT_TRUE(theirs.ok()) << theirs.status().ToString();
  auto denied = cp_->SubmitJob(olaf, *theirs, "", &created);
  ASSERT_FALSE(denied.ok());
  EXPECT_EQ(denied.status().field(), "depends_on[0].job");
  EXPECT_EQ(denied.status().message(), fmt::format("job {} not found", a->id));
}

TEST(DependencyCodec, BadDependenciesNameTheField) {
  auto bad = api::ParseJobSubmission(
      R"({"queue": "q", "command": ["true"], "depends_on": [{"type": "afterwards", "job": 1}]})");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().field(), "depends_on[0].type");
  auto no_job = api::ParseJobSubmission(
      R"({"queue": "q", "command": ["true"], "depends_on": [{"type": "afterok"}]})");
  ASSERT_FALSE(no_job.ok());
  EXPECT_EQ(no_job.status().field(), "depends_on[0].job");
  auto single = api::ParseJobSubmission(
      R"({"queue": "q", "command": ["true"], "depends_on": [{"type": "singleton", "job": 3}]})");
  ASSERT_FALSE(single.ok());
  EXPECT_EQ(single.status().field(), "depends_on[0].job");
  auto good = api::ParseJobSubmission(
      R"({"queue": "q", "command": ["true"], "depends_on": [{"type": "afterany", "job": 4}, {"type": "singleton"}]})");
  ASSERT_TRUE(good.ok()) << good.status().ToString();
  EXPECT_EQ(api::JobSpecJsonText(*good).find(
                R"("depends_on":[{"job":4,"type":"afterany"},{"type":"singleton"}])") !=
                std::string::npos,
            true)
      << api::JobSpecJsonText(*good);
}

}  // namespace
}  // namespace arbiter::server

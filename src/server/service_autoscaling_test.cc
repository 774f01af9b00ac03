// Autoscaling and lending on a real control plane with a fake clock: the gateways' load reports
// drive the service's replica count (decisions, events, timings), a request waiting at a service
// scaled to zero starts a replica at once, and a service's queue lends its idle guarantee to
// training only within its reclaim deadline, taking it back by preemption when it scales up.
#include <gtest/gtest.h>

#include <string>

#include "api/service_codec.h"
#include "server/control_plane_test_fixture.h"

namespace arbiter::server {
namespace {

using nlohmann::json;

constexpr const char* kConfig = R"(
gpu_models:
  - {name: A100-80G, memory_mib: 81920}
priority_classes:
  - {name: train, value: 10, preemptible: true, min_runtime_seconds: 600, grace_period_seconds: 5}
  - {name: slow-train, value: 10, preemptible: true, grace_period_seconds: 60}
tenants:
  - name: lab
    queues:
      - {name: serving, guaranteed: {gpu: 6}}
      - {name: training}
)";

class ServiceAutoscalingTest : public ControlPlaneTest {
 protected:
  void SetUp() override {
    StartWith(kConfig, "cp-autoscaling");
    Register("gpu-01", "i1");  // 4 GPUs each
    Register("gpu-02", "i2");
  }

  json Create(json body) {
    body["queue"] = "serving";
    body["template"] = {{"command", {"serve"}}, {"resources", {{"gpus", 1}}}};
    auto spec = api::ParseServiceJson(body.dump());
    EXPECT_TRUE(spec.ok()) << spec.status().ToString();
    auto r = cp_->CreateService(admin_, std::move(spec).value());
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : json();
  }

  std::vector<ProbeTarget> Reconcile() {
    std::vector<ProbeTarget> targets;
    Status st = cp_->ReconcileServices(probes_, &targets);
    EXPECT_TRUE(st.ok()) << st.ToString();
    return targets;
  }

  // A scheduling cycle; each node's agent starts what it was given and reports those that it
  // was told to stop as exited.
  void ScheduleAndStart() {
    ASSERT_TRUE(cp_->RunSchedulingCycle().ok());
    for (const auto& [node, instance] : {std::pair{"gpu-01", "i1"}, {"gpu-02", "i2"}}) {
      const json out = Beat(node, instance);
      std::vector<TaskReport> reports;
      for (const json& a : out["assignments"]) {
        const uint64_t job = a["job"].get<uint64_t>();
        const int32_t task = a["task"].get<int32_t>();
        const uint64_t attempt = a["attempt"].get<uint64_t>();
        if (!a["run"].get<bool>()) {
          reports.push_back({++seq_, job, task, attempt, TaskEvent::kExited, 143, false});
        } else if (!a["started"].get<bool>()) {
          reports.push_back({++seq_, job, task, attempt, TaskEvent::kStarted, 0, false});
        }
      }
      if (!reports.empty()) Beat(node, instance, reports);
    }
  }

  void AllReady() {
    for (const ProbeTarget& t : Reconcile()) probes_[t.job].ready = true;
    Reconcile();
  }

  // One second: a gateway's report of `concurrency` for chat, then a reconcile.
  void Second(double concurrency, int64_t waiting = 0, bool no_replica = false) {
    now_ += 1000;
    GatewayLoad load;
    load.gateway = "gw-1";
    load.services.push_back({"chat", concurrency, concurrency * 10, waiting, no_replica});
    ASSERT_TRUE(cp_->RecordGatewayLoad(node_, load).ok());
    Reconcile();
  }

  json Svc() { return (*cp_->GetService(admin_, "chat"))["status"]; }

  // The attempt its node runs `job` in.
  uint64_t AttemptOf(uint64_t job) {
    for (const auto& [node, instance] : {std::pair{"gpu-01", "i1"}, {"gpu-02", "i2"}}) {
      for (const json& a : Beat(node, instance)["assignments"]) {
        if (a["job"].get<uint64_t>() == job) return a["attempt"].get<uint64_t>();
      }
    }
    return 0;
  }

  bool HasEvent(const std::string& needle) {
    const json st = Svc();
    for (const json& e : st["events"]) {
      if (e["message"].get<std::string>().find(needle) != std::string::npos) return true;
    }
    return false;
  }

  std::map<uint64_t, ProbeStatus> probes_;
  uint64_t seq_ = 0;
};

TEST_F(ServiceAutoscalingTest, ABurstScalesUpInPanicAndTheQuietScalesDownAfterIt) {
  Create({{"name", "chat"},
          {"replicas", {{"min", 1}, {"max", 6}}},
          {"autoscaling",
           {{"target", 10}, {"target_utilization", 100}, {"stable_window_seconds", 10}}}});
  Reconcile();
  ScheduleAndStart();
  AllReady();
  EXPECT_EQ(Svc()["ready"], 1);
  EXPECT_EQ(Svc()["autoscaling"]["desired"], 1);

  // 35 in flight against one ready replica carrying 10: panic, 4 replicas at the first sample.
  Second(35);
  json st = Svc();
  EXPECT_EQ(st["autoscaling"]["desired"], 4) << st.dump();
  EXPECT_TRUE(st["autoscaling"]["panicking"].get<bool>());
  ASSERT_FALSE(st["autoscaling"]["decisions"].empty());
  const json d = st["autoscaling"]["decisions"].back();
  EXPECT_EQ(d["from"], 1);
  EXPECT_EQ(d["to"], 4);
  EXPECT_TRUE(HasEvent("1 -> 4: panic: 35.0 requests in flight over 1 s"))
      << Svc()["events"].dump();

  // The new replicas start and turn ready: the scale-up is timed from the decision.
  ScheduleAndStart();
  now_ += 500;
  AllReady();
  st = Svc();
  EXPECT_EQ(st["ready"], 4);
  EXPECT_EQ(st["autoscaling"]["scale_up"]["count"], 1) << st.dump();
  EXPECT_DOUBLE_EQ(st["autoscaling"]["scale_up"]["last_seconds"].get<double>(), 0.5);
  EXPECT_TRUE(HasEvent("4 replicas ready 0.50 s after the decision"));
  const std::string metrics = cp_->MetricsText();
  EXPECT_NE(metrics.find("arbiter_service_replicas_desired{service=\"chat\",tenant=\"lab\"} 4"),
            std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("arbiter_service_replicas_ready{service=\"chat\",tenant=\"lab\"} 4"),
            std::string::npos);
  EXPECT_NE(metrics.find("arbiter_service_scale_up_seconds{kind=\"all\",quantile=\"0.99\","
                         "service=\"chat\",tenant=\"lab\"} 0.5"),
            std::string::npos);

  // The burst ends: panic holds the count a stable window after it last held, then the count
  // halves at most per decision down to the minimum.
  for (int i = 0; i < 9; ++i) Second(0);
  EXPECT_EQ(Svc()["autoscaling"]["desired"], 4);
  for (int i = 0; i < 10 && Svc()["autoscaling"]["desired"] != 1; ++i) {
    Second(0);
    ScheduleAndStart();
    AllReady();
  }
  st = Svc();
  EXPECT_EQ(st["autoscaling"]["desired"], 1) << st.dump();
  EXPECT_FALSE(st["autoscaling"]["panicking"].get<bool>());
  EXPECT_TRUE(HasEvent("4 -> 2:")) << st.dump();
}

TEST_F(ServiceAutoscalingTest, ScalesToZeroAndAWaitingRequestBringsOneBackAtOnce) {
  Create({{"name", "chat"},
          {"replicas", {{"min", 0}, {"max", 3}}},
          {"autoscaling",
           {{"target", 10}, {"stable_window_seconds", 6}, {"scale_to_zero_grace_seconds", 2}}}});
  Reconcile();
  EXPECT_EQ(Svc()["autoscaling"]["desired"], 0);
  EXPECT_TRUE(Svc()["replicas"].empty());
  // The gateway holds a request for a service with no replica and says so: one starts now.
  now_ += 300;
  GatewayLoad load;
  load.gateway = "gw-1";
  load.services.push_back({"chat", 1, 0, 1, true});
  ASSERT_TRUE(cp_->RecordGatewayLoad(node_, load).ok());
  Reconcile();
  EXPECT_EQ(Svc()["autoscaling"]["desired"], 1);
  EXPECT_TRUE(HasEvent("0 -> 1: a request waits and no replica runs"));
  ScheduleAndStart();
  now_ += 1200;
  AllReady();
  json st = Svc();
  EXPECT_EQ(st["ready"], 1);
  EXPECT_EQ(st["autoscaling"]["cold_start"]["count"], 1) << st.dump();
  EXPECT_DOUBLE_EQ(st["autoscaling"]["cold_start"]["last_seconds"].get<double>(), 1.2);
  // No more requests: after the stable window and the grace, back to zero.
  for (int i = 0; i < 12 && Svc()["autoscaling"]["desired"] != 0; ++i) Second(0);
  EXPECT_EQ(Svc()["autoscaling"]["desired"], 0);
  EXPECT_TRUE(HasEvent("scale to zero"));
  ScheduleAndStart();
  now_ += 6000;  // its drain
  Reconcile();
  ScheduleAndStart();
  Reconcile();
  EXPECT_EQ(Svc()["ready"], 0);
}

TEST_F(ServiceAutoscalingTest, LentGuaranteeIsReclaimedFromTheBorrowerThatLosesLeast) {
  Create({{"name", "chat"},
          {"replicas", {{"min", 1}, {"max", 6}}},
          {"reclaim_deadline_seconds", 10},
          {"autoscaling",
           {{"target", 10}, {"target_utilization", 100}, {"stable_window_seconds", 10}}}});
  Reconcile();
  ScheduleAndStart();
  AllReady();
  // Training borrows the serving queue's idle guarantee: 7 GPUs of 8, one job a GPU, each
  // with a 600 s minimum runtime and a 5 s grace (within the deadline).
  std::vector<uint64_t> training;
  for (int i = 0; i < 7; ++i) {
    training.push_back(Submit({{"queue", "training"},
                               {"priority_class", "train"},
                               {"command", {"train"}},
                               {"resources", {{"gpus", 1}}}}));
  }
  ScheduleAndStart();
  for (uint64_t id : training) {
    EXPECT_EQ((*cp_->GetJob(admin_, id))["state"], "running") << id;
  }
  // Checkpoints: all but the last job wrote one 1 s ago; the last one never did.
  now_ += 120'000;
  for (size_t i = 0; i + 1 < training.size(); ++i) {
    cp_->ReportTaskCheckpointed(training[i], 0, AttemptOf(training[i]));
  }
  now_ += 1000;
  // A burst: the service wants 3; two GPUs come back from the borrowers, within the minimum
  // runtime they were lent on the deadline's terms; the one that never checkpointed (it would
  // lose 121 s of work) is not among them.
  Second(25);
  EXPECT_EQ(Svc()["autoscaling"]["desired"], 3);
  ASSERT_TRUE(cp_->RunSchedulingCycle().ok());
  int preempting = 0;
  for (uint64_t id : training) {
    const std::string state = (*cp_->GetJob(admin_, id))["state"];
    if (state == "preempting") ++preempting;
    if (id == training.back()) {
      EXPECT_EQ(state, "running");
    }
  }
  EXPECT_EQ(preempting, 2) << Svc().dump() << "\n" << (*cp_->GetJob(admin_, training[0])).dump();
  // The victims stop; the replicas start and turn ready: the scale-up was a reclaim.
  ScheduleAndStart();
  ScheduleAndStart();
  now_ += 2000;
  AllReady();
  ScheduleAndStart();
  AllReady();
  const json st = Svc();
  EXPECT_EQ(st["ready"], 3) << st.dump();
  EXPECT_EQ(st["autoscaling"]["reclaim"]["count"], 1) << st.dump();
  EXPECT_TRUE(HasEvent("(GPUs reclaimed from borrowers)")) << st.dump();
}

TEST_F(ServiceAutoscalingTest, ABorrowerSlowerToStopThanTheDeadlineDoesNotGetTheLentGpus) {
  Create(
      {{"name", "chat"}, {"replicas", {{"min", 1}, {"max", 6}}}, {"reclaim_deadline_seconds", 10}});
  Reconcile();
  ScheduleAndStart();
  AllReady();
  // 8 GPUs: the service holds 1 of its 6; 2 belong to nobody. A 60 s grace may take those 2,
  // not the 5 idle ones the serving queue lends within 10 s.
  const uint64_t big = Submit({{"queue", "training"},
                               {"priority_class", "slow-train"},
                               {"command", {"train"}},
                               {"resources", {{"gpus", 3}}}});
  const uint64_t fits = Submit({{"queue", "training"},
                                {"priority_class", "slow-train"},
                                {"command", {"train"}},
                                {"resources", {{"gpus", 2}}}});
  ScheduleAndStart();
  const json waiting = *cp_->GetJob(admin_, big);
  EXPECT_EQ(waiting["state"], "pending");
  EXPECT_NE(waiting.dump().find("lent only to jobs that stop within 10 s"), std::string::npos)
      << waiting.dump();
  EXPECT_EQ((*cp_->GetJob(admin_, fits))["state"], "running");
  // With a 5 s grace the same job borrows them.
  const uint64_t quick = Submit({{"queue", "training"},
                                 {"priority_class", "train"},
                                 {"command", {"train"}},
                                 {"resources", {{"gpus", 3}}}});
  ScheduleAndStart();
  EXPECT_EQ((*cp_->GetJob(admin_, quick))["state"], "running");
}

}  // namespace
}  // namespace arbiter::server

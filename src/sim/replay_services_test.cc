// Services in the replay: the request trace, the request queue, and scripted replays of a service
// beside training jobs on one node of 8 GPUs (scale-up under a burst, scale to zero and back, a
// reclaim that preempts a borrowing training job, the reclaim deadline, determinism).
#include "sim/replay_services.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "api/service_codec.h"
#include "sim/replay.h"

namespace arbiter::sim {
namespace {

using ::testing::HasSubstr;

const std::string kAzure = ARBITER_FIXTURES_DIR "/azure-llm/conv_head600.csv";

TEST(AzureRequestsTest, LoadsTheExcerpt) {
  auto r = LoadAzureRequests(kAzure);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->size(), 600u);
  EXPECT_EQ((*r)[0].at, 0);
  EXPECT_EQ((*r)[0].context_tokens, 374);
  EXPECT_EQ((*r)[0].generated_tokens, 44);
  // 18:15:46.680 to 18:15:50.995
  EXPECT_EQ((*r)[1].at, 4315);  // each time cut to ms: 50.995 - 46.680
  // 18:15:46.680 to 18:18:14.869
  EXPECT_EQ(r->back().at, 148189);
  for (size_t i = 1; i < r->size(); ++i) EXPECT_LE((*r)[i - 1].at, (*r)[i].at);
}

TEST(AzureRequestsTest, ErrorsNameTheLineAndColumn) {
  const std::string path = ::testing::TempDir() + "/bad_requests.csv";
  std::ofstream(path) << "TIMESTAMP,ContextTokens,GeneratedTokens\n"
                         "2023-11-16 18:15:46.6805900,374,44\n"
                         "2023-11-16 18:15:47,x,44\n";
  auto r = LoadAzureRequests(path);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().field(), path + ":3: ContextTokens");
}

TEST(PlaceRequestsTest, ShiftsCompressesAndPrices) {
  std::vector<TraceRequest> t = {{0, 1000, 10}, {60000, 0, 0}};
  RequestModel m;
  m.offset_seconds = 100;
  m.compress = 60;
  m.prefill_ms_per_token = 0.5;
  m.decode_ms_per_token = 20;
  const std::vector<ServiceRequest> r = PlaceRequests(t, 5000, m);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].arrival, 105000);  // start + offset
  EXPECT_EQ(r[1].arrival, 106000);  // + 60 s / 60
  EXPECT_EQ(r[0].prefill_ms, 500);
  EXPECT_EQ(r[0].service_ms, 700);  // 500 + 10 x 20
  EXPECT_EQ(r[1].service_ms, 1);    // at least 1 ms
}

TEST(RequestQueueTest, QueuesForAFreeSlot) {
  // One replica of one slot; three requests of 1 s (prefill 100 ms) at 0, 0 and 500 ms.
  const std::vector<ServiceRequest> req = {{0, 100, 1000}, {0, 100, 1000}, {500, 100, 1000}};
  RequestQueue q(&req, 1, 0, 0, /*slo_ms=*/600, 0);
  q.SetReady(1);
  q.AdvanceTo(1000);
  // [0, 500): 1 in flight + 1 waiting; [500, 1000): 1 + 2.
  const core::AutoscaleSample s = q.TakeSample();
  EXPECT_DOUBLE_EQ(s.concurrency, 2.5);
  EXPECT_DOUBLE_EQ(s.rps, 3);
  q.AdvanceTo(10000);
  const RequestOutcomes o = q.Outcomes();
  EXPECT_EQ(o.arrived, 3);
  EXPECT_EQ(o.served, 3);
  // Waits 0, 1 s and 1.5 s: only the first token of the first is within 600 ms.
  EXPECT_EQ(o.within_slo, 1);
  EXPECT_THAT(o.wait_seconds, ::testing::ElementsAre(0, 1, 1.5));
  EXPECT_THAT(o.latency_seconds, ::testing::ElementsAre(1, 2, 2.5));
}

TEST(RequestQueueTest, TimesOutAndRejectsWithoutReplicas) {
  const std::vector<ServiceRequest> req = {{0, 0, 10}, {100, 0, 10}, {200, 0, 10}};
  RequestQueue q(&req, 4, /*queue_max=*/2, /*timeout=*/1000, 500, 0);
  q.AdvanceTo(5000);
  const RequestOutcomes o = q.Outcomes();
  EXPECT_EQ(o.arrived, 3);
  EXPECT_EQ(o.rejected, 1);  // the third finds two waiting
  EXPECT_EQ(o.timed_out, 2);
  EXPECT_EQ(o.served, 0);
  EXPECT_FALSE(q.waiting());
}

TraceJob TrainJob(int64_t submit, int64_t duration, int32_t gpus) {
  TraceJob j;
  j.submit_time = submit;
  j.duration = duration;
  j.tenant = "research";
  j.queue = "train";
  j.type = JobType::kTraining;
  j.priority_class = "normal";
  j.tasks = 1;
  j.resources.gpus = gpus;
  j.resources.gpu_milli = kMilliPerGpu;
  j.resources.cpu_milli = 1000;
  j.resources.memory_mib = 1024;
  return j;
}

ServiceSpec Chat(const std::string& replicas, int64_t reclaim_deadline = 0) {
  auto s = api::ParseServiceYaml(fmt::format(R"(name: chat
queue: chat
tenant: serving
template: {{command: [python3, server.py], resources: {{gpus: 1}}}}
replicas: {}
autoscaling: {{target: 2, target_utilization: 100, stable_window_seconds: 20}}
max_concurrency: 2
slo: {{latency_ms: 1000}}
reclaim_deadline_seconds: {}
)",
                                             replicas, reclaim_deadline));
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return *s;
}

// `n` requests of 2 s each, one every `gap_ms` from `from_ms`.
std::vector<ServiceRequest> Requests(TimeMs from_ms, int n, DurationMs gap_ms) {
  std::vector<ServiceRequest> r;
  for (int i = 0; i < n; ++i) r.push_back({from_ms + i * gap_ms, 100, 2000});
  return r;
}

// One node of 8 A100s; tenant research with queue train, tenant serving with queue chat, each
// guaranteed 4 GPUs.
class ServiceScenario {
 public:
  ServiceScenario(std::vector<TraceJob> jobs, ServiceSpec service,
                  std::vector<ServiceRequest> requests) {
    Node n;
    n.name = "n0";
    n.cpu_milli = 64000;
    n.memory_mib = 524288;
    for (int g = 0; g < 8; ++g) n.gpus.push_back({g, "A100", 81920, true, 0});
    cluster_ = std::make_unique<core::Cluster>(*core::Cluster::Build({{"A100", 81920, 0}}, {n}));
    trace_.file = "scenario.csv";
    for (const std::string_view c : TraceColumns()) trace_.columns.emplace_back(c);
    for (size_t i = 0; i < jobs.size(); ++i) {
      jobs[i].line = i + 2;
      jobs[i].name = fmt::format("j{}", i + 1);
    }
    trace_.jobs = std::move(jobs);
    std::vector<QueueSpec> specs;
    for (const auto& [tenant, queue] :
         {std::pair<std::string, std::string>{"research", "train"}, {"serving", "chat"}}) {
      QueueSpec t;
      t.name = tenant;
      t.is_tenant = true;
      specs.push_back(t);
      QueueSpec q;
      q.name = queue;
      q.parent = tenant;
      q.quota["gpu"] = QuotaLimits{4000, std::nullopt, std::nullopt};
      specs.push_back(q);
    }
    const std::vector<ServiceSpec> services = {service};
    lending_ = ApplyReclaimDeadlines(services, trace_, DefaultPriorityClasses(), &specs);
    tree_ = std::make_unique<core::QuotaTree>(*core::QuotaTree::Build(specs, cluster_->models()));
    auto w = CompileReplay(trace_, *cluster_, *tree_, DefaultPriorityClasses());
    EXPECT_TRUE(w.ok()) << w.status().ToString();
    workload_ = std::move(*w);
    const Status st = CompileServices(services, {std::move(requests)}, lending_,
                                      DefaultPriorityClasses(), &workload_);
    EXPECT_TRUE(st.ok()) << st.ToString();
    options_.cycle_interval = SecondsToMs(10);
    options_.replica_startup = SecondsToMs(30);
    auto profile = core::Profile::Build(*core::Profile::Named("default"));
    profile_ = std::make_unique<core::Profile>(std::move(*profile));
  }

  ReplayReport Run(int32_t static_replicas = -1) {
    ReplayOptions o = options_;
    o.static_replicas = static_replicas;
    return RunReplay(workload_, *profile_, "default", o);
  }
  const std::vector<std::string>& lending() const { return lending_; }

 private:
  std::unique_ptr<core::Cluster> cluster_;
  std::unique_ptr<core::QuotaTree> tree_;
  std::unique_ptr<core::Profile> profile_;
  Trace trace_;
  ReplayWorkload workload_;
  ReplayOptions options_;
  std::vector<std::string> lending_;
};

TEST(ReplayServicesTest, ScalesUpUnderABurst) {
  // 10 requests a second of 2 s each from t = 60 s for 60 s: 20 in flight, 2 per replica (target
  // 2 at 100%) wants 10 replicas; the range stops at 4.
  ServiceScenario sc({}, Chat("{min: 1, max: 4}"), Requests(60000, 600, 100));
  const ReplayReport r = sc.Run();
  ASSERT_EQ(r.services.size(), 1u);
  const ServiceReport& s = r.services[0];
  EXPECT_EQ(s.scaling, "autoscaled 1..4");
  EXPECT_EQ(s.requests, 600);
  EXPECT_EQ(s.ready_max, 4);
  EXPECT_EQ(s.desired_max, 4);
  EXPECT_GE(s.scale_ups, 1);
  // Nothing else runs: every replica is placed at once and ready after its 30 s start-up.
  EXPECT_EQ(s.scale_up.count, 4);
  EXPECT_DOUBLE_EQ(s.scale_up.p50, 30);
  EXPECT_DOUBLE_EQ(s.scale_up.max, 30);
  // 8 slots against 20 requests of demand: most wait, and many time out after 30 s.
  EXPECT_LT(s.within_slo_pct, 50);
  EXPECT_GT(s.within_slo, 0);
  EXPECT_GT(s.latency.p99, s.latency.p50);
  EXPECT_GT(s.gpu_hours, 0);
}

TEST(ReplayServicesTest, ScalesToZeroAndBack) {
  // A request every 2 s for 20 s, ten quiet minutes, the same again.
  std::vector<ServiceRequest> req = Requests(10000, 10, 2000);
  for (const ServiceRequest& x : Requests(10000 + 630000, 10, 2000)) req.push_back(x);
  ServiceScenario sc({}, Chat("{min: 0, max: 2}"), req);
  const ReplayReport r = sc.Run();
  const ServiceReport& s = r.services[0];
  EXPECT_EQ(s.ready_min, 0);
  EXPECT_GE(s.ready_max, 1);
  EXPECT_GE(s.scale_ups, 2);    // from zero, twice
  EXPECT_GE(s.scale_downs, 1);  // to zero between
  EXPECT_GE(s.scale_up.count, 2);
  // The series shows 0, then a replica, 0 again in the quiet minutes, then a replica again.
  const std::vector<double>& series = s.ready_series;
  ASSERT_GT(series.size(), 600u);
  EXPECT_EQ(series.front(), 0);
  EXPECT_GE(series[60], 1);   // a minute in: serving
  EXPECT_EQ(series[500], 0);  // the quiet minutes
  EXPECT_GE(series[700], 1);  // back
  EXPECT_EQ(s.served + s.timed_out, 20);
}

TEST(ReplayServicesTest, ReclaimPreemptsABorrowingTrainingJob) {
  // A training job of 8 GPUs starts at 0, borrowing the chat queue's idle 4; from 400 s (past
  // its 300 s minimum runtime) the service wants replicas within its guarantee: they reclaim.
  ServiceScenario sc({TrainJob(0, 3600, 8)}, Chat("{min: 0, max: 4}"), Requests(400000, 600, 100));
  EXPECT_THAT(sc.lending()[0], HasSubstr("lends its idle guarantee"));
  const ReplayReport r = sc.Run();
  EXPECT_EQ(r.preemptions_by_reason[1], 1);  // reclaim
  const ServiceReport& s = r.services[0];
  EXPECT_EQ(s.reclaim_victims, 1);
  ASSERT_GE(s.reclaim.count, 1);
  // The victim's grace period (30 s) and no more: the replica is placed when it stops.
  EXPECT_DOUBLE_EQ(s.reclaim.p50, 30);
  EXPECT_GT(r.gpu_hours_lost_to_preemption, 0);
  // Scale-up includes the reclaim: decision to ready >= 30 s grace + 30 s start-up.
  EXPECT_GE(s.scale_up.max, 60);
  // Without the service the job would have run 8 GPU-hours; it restarted and finished later.
  EXPECT_EQ(r.completed, 1);
}

TEST(ReplayServicesTest, ReclaimDeadlineShorterThanTheGraceStopsLending) {
  // The normal class's grace period (30 s) exceeds a 10 s deadline: the chat queue lends nothing
  // to its jobs,
  // so two 4-GPU jobs of the train queue (guaranteed 4) run one after the other, and nothing is
  // reclaimed.
  ServiceScenario sc({TrainJob(0, 3600, 4), TrainJob(0, 3600, 4)}, Chat("{min: 0, max: 4}", 10),
                     Requests(400000, 600, 100));
  EXPECT_THAT(sc.lending()[0], HasSubstr("not to classes normal (30 s)"));
  const ReplayReport r = sc.Run();
  EXPECT_EQ(r.preemptions, 0);
  // The second job waits for the first: it never borrows the chat queue's idle guarantee.
  EXPECT_EQ(r.jobs_waited, 1);
  EXPECT_EQ(r.services[0].reclaim.count, 0);
}

TEST(ReplayServicesTest, StaticArmHoldsItsReplicas) {
  ServiceScenario sc({TrainJob(0, 3600, 8)}, Chat("{min: 0, max: 4}"), Requests(400000, 100, 1000));
  const ReplayReport zero = sc.Run(/*static_replicas=*/0);
  const ReplayReport two = sc.Run(/*static_replicas=*/2);
  EXPECT_EQ(zero.services[0].scaling, "static 0");
  EXPECT_EQ(zero.services[0].served, 0);
  EXPECT_EQ(zero.services[0].gpu_hours, 0);
  EXPECT_EQ(zero.preemptions, 0);
  // Without the service the 8-GPU job runs its hour untouched: 8 GPU-hours.
  EXPECT_DOUBLE_EQ(zero.gpu_hours_jobs, 8);
  // Two replicas from the start hold 2 GPUs, for good: the 8-GPU job never fits beside them and
  // is reported unfinished.
  EXPECT_EQ(two.services[0].ready_max, 2);
  EXPECT_EQ(two.services[0].ready_min, 0);  // before the first start-up ends
  EXPECT_EQ(two.unfinished, 1);
}

TEST(ReplayServicesTest, Deterministic) {
  ServiceScenario sc({TrainJob(0, 3600, 8), TrainJob(100, 600, 2)}, Chat("{min: 0, max: 4}"),
                     Requests(400000, 600, 100));
  const nlohmann::json a = ReplayReportJson(sc.Run());
  const nlohmann::json b = ReplayReportJson(sc.Run());
  EXPECT_EQ(a.dump(), b.dump());
  EXPECT_TRUE(a.contains("services"));
}

TEST(LoadServiceSpecsTest, ReadsYamlDocumentsWithKind) {
  const std::string path = ::testing::TempDir() + "/services.yaml";
  std::ofstream(path) << "kind: Service\nname: a\ntemplate: {command: [x]}\nreplicas: 2\n---\n"
                         "kind: Service\nname: b\ntemplate: {command: [x]}\n"
                         "replicas: {min: 0, max: 3}\n";
  auto s = LoadServiceSpecs(path);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  ASSERT_EQ(s->size(), 2u);
  EXPECT_EQ((*s)[0].replicas, 2);
  EXPECT_TRUE((*s)[1].autoscaling.has_value());
  EXPECT_EQ((*s)[1].max_replicas, 3);
  std::ofstream(path) << "name: a\ntemplate: {command: [x]}\nreplicas: -1\n";
  auto bad = LoadServiceSpecs(path);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().field(), path + ": services[0].replicas");
}

TEST(AddServiceQueuesTest, CarvesTheServicesGuaranteeOutOfTheOthers) {
  std::vector<QueueSpec> specs(2);
  specs[0].name = "t";
  specs[0].is_tenant = true;
  specs[1].name = "q";
  specs[1].parent = "t";
  specs[1].quota["gpu"] = QuotaLimits{8000, std::nullopt, std::nullopt};
  AddServiceQueues({Chat("{min: 0, max: 2}")}, 8000, &specs);
  ASSERT_EQ(specs.size(), 4u);
  EXPECT_EQ(*specs[1].quota["gpu"].guaranteed, 6000);  // 8 x (8 - 2) / 8
  EXPECT_EQ(specs[2].name, "serving");
  EXPECT_EQ(specs[3].name, "chat");
  EXPECT_EQ(*specs[3].quota["gpu"].guaranteed, 2000);
}

}  // namespace
}  // namespace arbiter::sim

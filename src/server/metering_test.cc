// Metering on a real SQLite store and a fake clock: every interval during which a task held GPUs
// is recorded exactly once (cancellation before the start, lost nodes and retries, a server
// restart), and the samples and reports the server computes from the records.
#include <gtest/gtest.h>

#include <limits>

#include "server/control_plane_test_fixture.h"
#include "server/sampler.h"

namespace arbiter::server {
namespace {

using nlohmann::json;

constexpr const char* kConfig = R"(
gpu_models:
  - {name: A100-80G, memory_mib: 81920, price_per_hour: 3.6}
priority_classes:
  - {name: critical, value: 1000, preemptible: false}
  - {name: low, value: 0, preemptible: true, min_runtime_seconds: 0, grace_period_seconds: 5}
tenants:
  - name: lab
    queues:
      - {name: lab-q, guaranteed: {gpu: 8}}
)";

struct Interval {
  uint64_t job;
  int64_t gpu_milli, start, end;
  bool operator==(const Interval&) const = default;
};

void PrintTo(const Interval& i, std::ostream* os) {
  *os << "{job " << i.job << ", " << i.gpu_milli << " milli, [" << i.start << ", " << i.end << ")}";
}

class MeteringTest : public ControlPlaneTest {
 protected:
  void SetUp() override { StartWith(kConfig, "cp-metering"); }

  void Register(const std::string& instance = "i1", int gpus = 4) {
    ControlPlaneTest::Register("gpu-01", instance, gpus);
  }
  void Beat(std::vector<TaskReport> reports, std::vector<GpuTelemetry> gpus = {},
            const std::string& instance = "i1") {
    ControlPlaneTest::Beat("gpu-01", instance, std::move(reports), std::move(gpus));
  }

  std::vector<Interval> Recorded() {
    auto usage =
        store_->Usage(std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max());
    EXPECT_TRUE(usage.ok());
    std::vector<Interval> out;
    for (const auto& u : *usage) out.push_back({u.job_id, u.gpu_milli, u.start_ms, u.end_ms});
    return out;
  }

  Principal member_{"alice", "lab", Role::kMember, "m"};
};

TEST_F(MeteringTest, ACancelBeforeTheStartIsMeteredFromTheAdmission) {
  Register();
  const uint64_t id = Submit({{"resources", {{"gpus", 2}}}});
  now_ += 1000;
  const TimeMs admitted = now_;
  ASSERT_TRUE(cp_->RunSchedulingCycle().ok());
  ASSERT_EQ(State(id), "admitted");
  now_ += 60'000;
  ASSERT_TRUE(cp_->JobAction(admin_, id, "cancel").ok());
  EXPECT_EQ(Recorded(), (std::vector<Interval>{{id, 2000, admitted, now_}}));
  // The GPUs are free again.
  const uint64_t next = Submit({{"resources", {{"gpus", 4}}}});
  ASSERT_TRUE(cp_->RunSchedulingCycle().ok());
  EXPECT_EQ(State(next), "admitted");
}

TEST_F(MeteringTest, EachRunIsMeteredOnceFromItsOwnAdmission) {
  Register();
  EXPECT_TRUE(cp_->DetectDownNodes(6000, "").empty());  // the server's loop starts watching
  const uint64_t id = Submit(
      {{"resources", {{"gpus", 1}}}, {"retry", {{"max_retries", 2}, {"backoff_seconds", 0}}}});
  now_ += 1000;
  const TimeMs first = now_;
  ASSERT_TRUE(cp_->RunSchedulingCycle().ok());
  now_ += 1000;
  Beat({{1, id, 0, 1, TaskEvent::kStarted, 0, false}});
  ASSERT_EQ(State(id), "running");
  now_ += 7000;
  const TimeMs first_lost = now_;
  ASSERT_EQ(cp_->DetectDownNodes(6000, "").size(), 1u);
  ASSERT_EQ(State(id), "retry-wait");
  Beat({});  // the node is back
  now_ += 1000;
  const TimeMs second = now_;
  ASSERT_TRUE(cp_->RunSchedulingCycle().ok());  // the backoff is over: pending, admitted
  ASSERT_EQ(State(id), "admitted");
  // Lost again before its task started: the second run is metered from its own admission, not
  // from the first run's start.
  now_ += 7000;
  ASSERT_EQ(cp_->DetectDownNodes(6000, "").size(), 1u);
  EXPECT_EQ(Recorded(),
            (std::vector<Interval>{{id, 1000, first, first_lost}, {id, 1000, second, now_}}));
}

TEST_F(MeteringTest, APreemptedRunIsMeteredToItsStopAndTheRequeuedRunFromItsAdmission) {
  Register();
  const uint64_t low = Submit({{"resources", {{"gpus", 4}}}, {"priority_class", "low"}});
  now_ += 1000;
  const TimeMs first = now_;
  ASSERT_TRUE(cp_->RunSchedulingCycle().ok());
  Beat({{1, low, 0, 1, TaskEvent::kStarted, 0, false}});
  ASSERT_EQ(State(low), "running");
  const uint64_t urgent = Submit({{"resources", {{"gpus", 4}}}, {"priority_class", "critical"}});
  now_ += 60'000;
  ASSERT_TRUE(cp_->RunSchedulingCycle().ok());
  ASSERT_EQ(State(low), "preempting");
  now_ += 5000;  // the grace period: the agent stops it and reports the exit
  const TimeMs stopped = now_;
  Beat({{2, low, 0, 1, TaskEvent::kExited, 143, false}});
  ASSERT_EQ(State(low), "pending");
  ASSERT_TRUE(cp_->RunSchedulingCycle().ok());
  ASSERT_EQ(State(urgent), "admitted");
  const TimeMs urgent_admitted = now_;
  Beat({{3, urgent, 0, 1, TaskEvent::kStarted, 0, false}});
  now_ += 10'000;
  const TimeMs urgent_done = now_;
  Beat({{4, urgent, 0, 1, TaskEvent::kExited, 0, false}});
  now_ += 1000;
  const TimeMs second = now_;
  ASSERT_TRUE(cp_->RunSchedulingCycle().ok());
  ASSERT_EQ(State(low), "admitted");
  now_ += 2000;
  ASSERT_TRUE(cp_->JobAction(admin_, low, "cancel").ok());
  EXPECT_EQ(Recorded(), (std::vector<Interval>{{low, 4000, first, stopped},
                                               {urgent, 4000, urgent_admitted, urgent_done},
                                               {low, 4000, second, now_}}));
  // The preemptions report counts the run's work lost: 4 GPUs from running to the preemption.
  reports::Query q{first - 1, now_ + 1, std::nullopt, 0, "", ""};
  auto r = cp_->Report(admin_, "preemptions", q);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const json rows = reports::ToJson("preemptions", q, *r)["rows"];
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0]["reason"], "priority");
  EXPECT_EQ(rows[0]["gpu_hours_lost"], 0.066667);  // 4 GPUs x 1 min, rounded
}

TEST_F(MeteringTest, AnIntervalOpenAcrossARestartIsRecordedOnce) {
  Register();
  const uint64_t id = Submit({{"resources", {{"gpus", 2}}}});
  now_ += 1000;
  const TimeMs admitted = now_;
  ASSERT_TRUE(cp_->RunSchedulingCycle().ok());
  Beat({{1, id, 0, 1, TaskEvent::kStarted, 0, false}});
  now_ += 3'600'000;
  Start();  // the server restarts; the agent registers again and reports the exit
  Register("i1");
  const std::vector<TaskReport> exit = {{2, id, 0, 1, TaskEvent::kExited, 0, false}};
  Beat(exit);
  ASSERT_EQ(State(id), "succeeded");
  now_ += 1000;
  Beat(exit);  // sent again: applied once
  Start();
  Register("i2");
  Beat(exit, {}, "i2");
  const std::vector<Interval> want = {{id, 2000, admitted, admitted + 3'600'000}};
  EXPECT_EQ(Recorded(), want);
  auto usage = store_->Usage(0, now_);
  ASSERT_TRUE(usage.ok());
  EXPECT_EQ((*usage)[0].cost_micro, 7'200'000);  // 2 GPU-hours at 3.6
}

TEST_F(MeteringTest, SamplesFeedTheReports) {
  Register();
  const uint64_t small = Submit({{"resources", {{"gpus", 2}}}});
  const uint64_t big = Submit({{"resources", {{"gpus", 4}}}});
  now_ += 1000;
  const TimeMs admitted = now_;
  ASSERT_TRUE(cp_->RunSchedulingCycle().ok());
  ASSERT_EQ(State(small), "admitted");
  ASSERT_EQ(State(big), "pending");
  const json gpus = (*cp_->GetJob(admin_, small))["placement"][0]["gpus"];
  std::vector<GpuTelemetry> telemetry;
  for (int g = 0; g < 4; ++g) {
    GpuTelemetry t;
    t.index = g;
    const bool used = std::find(gpus.begin(), gpus.end(), json(g)) != gpus.end();
    t.utilization_pct = used ? 100 : 0;
    t.memory_used_mib = used ? 1024 : 0;
    telemetry.push_back(t);
  }
  Beat({{1, small, 0, 1, TaskEvent::kStarted, 0, false}}, telemetry);
  const TimeMs sampled = now_;
  ASSERT_TRUE(cp_->RecordSamples(60'000).ok());
  auto samples = store_->ClusterSamples(sampled, sampled + 1);
  ASSERT_TRUE(samples.ok());
  ASSERT_EQ(samples->size(), 1u);
  const json d = json::parse((*samples)[0].data_json);
  EXPECT_EQ(d["gpus_total"], 4000);
  EXPECT_EQ(d["gpus_allocated"], 2000);
  EXPECT_EQ(d["gpus_busy"], 2000);
  EXPECT_EQ(d["gpus_free"], 2000);
  EXPECT_EQ(d["fragmented"], 2000);  // the only waiting job needs 4 GPUs on one node
  EXPECT_EQ(d["queues"]["lab-q"]["pending_jobs"], 1);
  EXPECT_EQ(d["queues"]["lab-q"]["pending_gpus"], 4000);
  EXPECT_EQ(d["waiting"]["jobs"], 1);
  EXPECT_EQ(d["waiting"]["by_reason"]["no_capacity"], 1);
  EXPECT_EQ(store_->GpuSamples(sampled, sampled + 60'000)->size(), 4u);

  reports::Query q{sampled - 60'000, sampled + 60'000, std::nullopt, 0, "", ""};
  auto cluster = cp_->Report(admin_, "cluster", q);
  ASSERT_TRUE(cluster.ok()) << cluster.status().ToString();
  const json c = reports::ToJson("cluster", q, *cluster)["rows"][0];
  EXPECT_EQ(c["allocation_rate"], 0.5);
  EXPECT_EQ(c["utilization"], 0.5);
  auto idle = cp_->Report(admin_, "idle-while-queued", q);
  ASSERT_TRUE(idle.ok());
  const json rows = reports::ToJson("idle-while-queued", q, *idle)["rows"];
  EXPECT_EQ(rows[1]["reason"], "no_capacity");
  EXPECT_EQ(rows[1]["idle_gpu_hours"], 0.033333);  // 2 GPUs for a minute

  // Usage counts the interval still open, up to now: 2 GPUs since the admission.
  now_ = sampled + 60'000;
  auto usage = cp_->Report(member_, "usage", q);
  ASSERT_TRUE(usage.ok()) << usage.status().ToString();
  const json u = reports::ToJson("usage", q, *usage)["rows"][0];
  EXPECT_EQ(u["tenant"], "lab");
  ASSERT_EQ(now_ - admitted, 60'000);
  EXPECT_EQ(u["gpu_hours"], 0.033333);
  EXPECT_EQ(u["busy_gpu_hours"], 0.033333);
  // Cluster-wide reports are for admins.
  EXPECT_EQ(cp_->Report(member_, "cluster", q).status().code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(cp_->Report(node_, "usage", q).status().code(), StatusCode::kPermissionDenied);
}

TEST_F(MeteringTest, TheSamplerSamplesEachIntervalAndRollsUpOldGpuSamples) {
  Register("i1", 2);
  SamplerOptions o;
  o.interval_ms = 60'000;
  o.compact_every_ms = 60'000;
  o.retention.raw_gpu_ms = 120'000;
  Sampler sampler(cp_.get(), store_.get(), o, [this] { return now_; });
  const TimeMs t0 = now_;
  auto beat = [&] {
    GpuTelemetry a, b;
    a.index = 0;
    a.utilization_pct = 50;
    a.memory_used_mib = 100;
    b.index = 1;
    b.utilization_pct = 100;
    b.memory_used_mib = 300;
    Beat({}, {a, b});
  };
  beat();
  ASSERT_TRUE(sampler.Tick().ok());
  now_ += 30'000;
  beat();
  ASSERT_TRUE(sampler.Tick().ok());  // not yet an interval: no sample
  for (TimeMs at : {60'000, 120'000, 180'000}) {
    now_ = t0 + at;
    beat();
    ASSERT_TRUE(sampler.Tick().ok());
  }
  // Samples at t0, +60, +120 and +180 s; the retention ran at t0, +60, +120 and +180 s.
  auto cluster = store_->ClusterSamples(t0, now_ + 1);
  ASSERT_TRUE(cluster.ok());
  EXPECT_EQ(cluster->size(), 4u);
  // At +180 s the raw samples before +60 s were rolled up: the one at t0, per GPU.
  auto gpus = store_->GpuSamples(t0 - 3'600'000, now_ + 1);
  ASSERT_TRUE(gpus.ok());
  int hourly = 0, raw = 0;
  for (const auto& g : *gpus) {
    if (g.resolution_ms == store::GpuSampleRecord::kHourMs) {
      ++hourly;
      EXPECT_EQ(g.span_ms, 60'000);
      EXPECT_EQ(g.busy_ms, g.gpu == 0 ? 30'000 : 60'000);
      EXPECT_EQ(g.memory_max_mib, g.gpu == 0 ? 100 : 300);
    } else {
      ++raw;
    }
  }
  EXPECT_EQ(hourly, 2);
  EXPECT_EQ(raw, 6);
}

}  // namespace
}  // namespace arbiter::server

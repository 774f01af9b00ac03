// The Prometheus metrics, on a real SQLite store and a fake clock: gauges follow the live state,
// counters count job admissions, starts, ends by outcome and preemptions by reason, histograms
// observe wait and cycle times, and every label comes from a bounded set.
#include "server/metrics.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>
#include <sstream>

#include "server/control_plane_test_fixture.h"

namespace arbiter::server {
namespace {

using nlohmann::json;

// One sample of the text format: name, labels (without quotes), value.
struct Sample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
};

// Parses the samples of the text exposition format.
std::vector<Sample> ParseSamples(const std::string& text) {
  std::vector<Sample> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    Sample s;
    size_t i = line.find_first_of("{ ");
    s.name = line.substr(0, i);
    if (line[i] == '{') {
      // name="value",... }: values may hold any character but an unescaped quote.
      ++i;
      while (i < line.size() && line[i] != '}') {
        const size_t eq = line.find('=', i);
        std::string value;
        size_t v = eq + 2;  // past ="
        for (; v < line.size() && line[v] != '"'; ++v) {
          if (line[v] == '\\') ++v;
          value += line[v];
        }
        s.labels[line.substr(i, eq - i)] = value;
        i = v + 1;
        if (i < line.size() && line[i] == ',') ++i;
      }
      ++i;
    }
    s.value = std::stod(line.substr(i + 1));
    out.push_back(std::move(s));
  }
  return out;
}

// The value of the sample `name` whose labels include `labels`; NaN when there is none, and a
// test failure when several match.
double Value(const std::string& text, const std::string& name,
             const std::map<std::string, std::string>& labels = {}) {
  double found = std::nan("");
  int matches = 0;
  for (const Sample& s : ParseSamples(text)) {
    if (s.name != name) continue;
    bool all = true;
    for (const auto& [k, v] : labels) {
      auto it = s.labels.find(k);
      all = all && it != s.labels.end() && it->second == v;
    }
    if (!all) continue;
    found = s.value;
    ++matches;
  }
  EXPECT_LE(matches, 1) << name << " matches several samples";
  return found;
}

TEST(ServerMetricsTest, RendersTheSnapshotsGaugesInBaseUnits) {
  ServerMetrics m;
  MetricsSnapshot s;
  MetricsSnapshot::GpuGroup g;
  g.node = "gpu-01";
  g.model = "A100-80G";
  g.gpus = 8;
  g.unhealthy = 1;
  g.allocated_milli = 2500;
  g.memory_mib = 8 * 81920;
  g.memory_allocated_mib = 2 * 81920 + 10240;
  s.gpus.push_back(g);
  g.node = "gpu-02";
  g.allocated_milli = 0;
  g.with_telemetry = 4;
  g.busy = 3;
  g.utilization_pct = 200;
  g.memory_used_mib = 1024;
  s.gpus.push_back(g);
  s.nodes = {{"gpu-01", "ready"}, {"gpu-02", "cordoned"}};
  MetricsSnapshot::QueueInfo q;
  q.tenant = "vision";
  q.queue = "vision-train";
  q.guaranteed_milli = 8000;
  q.max_milli = 16000;
  q.used_milli = 10000;
  q.borrowed_milli = 2000;
  q.jobs_by_state = {{"pending", 3}, {"running", 2}};
  s.queues.push_back(q);
  q.queue = "vision-dev";
  q.max_milli = -1;
  q.jobs_by_state.clear();
  s.queues.push_back(q);
  store::StoreStats st;
  st.commits = 7;
  st.batches = 9;
  st.failed_batches = 1;
  st.total_commit_us = 1500;
  st.commit_us_histogram = {2, 3, 2, 0, 0, 0, 0, 0};

  const std::string text = m.Render(s, st);
  const std::map<std::string, std::string> n1 = {{"node", "gpu-01"}, {"gpu_model", "A100-80G"}};
  const std::map<std::string, std::string> n2 = {{"node", "gpu-02"}, {"gpu_model", "A100-80G"}};
  EXPECT_EQ(Value(text, "arbiter_gpus", n1), 8);
  EXPECT_EQ(Value(text, "arbiter_gpus_unhealthy", n1), 1);
  EXPECT_EQ(Value(text, "arbiter_gpus_allocated", n1), 2.5);
  EXPECT_EQ(Value(text, "arbiter_gpu_memory_bytes", n1), 8.0 * 81920 * 1024 * 1024);
  EXPECT_EQ(Value(text, "arbiter_gpu_memory_allocated_bytes", n1),
            (2.0 * 81920 + 10240) * 1024 * 1024);
  // Telemetry only where an agent sent some.
  EXPECT_TRUE(std::isnan(Value(text, "arbiter_gpus_busy", n1)));
  EXPECT_EQ(Value(text, "arbiter_gpus_busy", n2), 3);
  EXPECT_EQ(Value(text, "arbiter_gpu_utilization_ratio", n2), 0.5);
  EXPECT_EQ(Value(text, "arbiter_gpu_memory_used_bytes", n2), 1024.0 * 1024 * 1024);

  EXPECT_EQ(Value(text, "arbiter_nodes", {{"state", "ready"}}), 1);
  EXPECT_EQ(Value(text, "arbiter_nodes", {{"state", "cordoned"}}), 1);
  EXPECT_EQ(Value(text, "arbiter_nodes", {{"state", "down"}}), 0);
  EXPECT_EQ(Value(text, "arbiter_node_state", {{"node", "gpu-02"}, {"state", "cordoned"}}), 1);
  EXPECT_EQ(Value(text, "arbiter_node_state", {{"node", "gpu-02"}, {"state", "ready"}}), 0);

  const std::map<std::string, std::string> train = {{"tenant", "vision"},
                                                    {"queue", "vision-train"}};
  EXPECT_EQ(Value(text, "arbiter_queue_guaranteed_gpus", train), 8);
  EXPECT_EQ(Value(text, "arbiter_queue_max_gpus", train), 16);
  EXPECT_EQ(Value(text, "arbiter_queue_used_gpus", train), 10);
  EXPECT_EQ(Value(text, "arbiter_queue_borrowed_gpus", train), 2);
  EXPECT_TRUE(std::isnan(Value(text, "arbiter_queue_max_gpus", {{"queue", "vision-dev"}})));
  EXPECT_EQ(Value(text, "arbiter_jobs", {{"queue", "vision-train"}, {"state", "pending"}}), 3);
  EXPECT_EQ(Value(text, "arbiter_jobs", {{"queue", "vision-train"}, {"state", "running"}}), 2);
  // Every non-final state is there, zeros included, so dashboards need no "or vector(0)".
  EXPECT_EQ(Value(text, "arbiter_jobs", {{"queue", "vision-dev"}, {"state", "pending"}}), 0);
  EXPECT_TRUE(std::isnan(Value(text, "arbiter_jobs", {{"state", "succeeded"}})));

  EXPECT_EQ(Value(text, "arbiter_store_commits_total"), 7);
  EXPECT_EQ(Value(text, "arbiter_store_batches_total", {{"result", "committed"}}), 8);
  EXPECT_EQ(Value(text, "arbiter_store_batches_total", {{"result", "failed"}}), 1);
  // Cumulative buckets in seconds: 100 us, 300 us, 1 ms, ...
  EXPECT_EQ(Value(text, "arbiter_store_commit_duration_seconds_bucket", {{"le", "0.0001"}}), 2);
  EXPECT_EQ(Value(text, "arbiter_store_commit_duration_seconds_bucket", {{"le", "0.0003"}}), 5);
  EXPECT_EQ(Value(text, "arbiter_store_commit_duration_seconds_bucket", {{"le", "+Inf"}}), 7);
  EXPECT_EQ(Value(text, "arbiter_store_commit_duration_seconds_count"), 7);
  EXPECT_DOUBLE_EQ(Value(text, "arbiter_store_commit_duration_seconds_sum"), 0.0015);
  EXPECT_NE(text.find("# TYPE arbiter_store_commits_total counter"), std::string::npos);
  EXPECT_NE(text.find("# TYPE arbiter_gpus gauge"), std::string::npos);
  EXPECT_NE(text.find("# TYPE arbiter_scheduling_cycle_duration_seconds histogram"),
            std::string::npos);
}

TEST(ServerMetricsTest, RequestLatencyIsLabelledByRouteTemplateAndStatusClass) {
  ServerMetrics m;
  m.HttpRequest("GET", "/api/v1/jobs/{id}", 200, 0.002);
  m.HttpRequest("GET", "/api/v1/jobs/{id}", 204, 0.004);
  ServerMetrics::Route* route = m.RouteHandle("GET", "/api/v1/jobs/{id}");
  EXPECT_EQ(route, m.RouteHandle("GET", "/api/v1/jobs/{id}"));
  EXPECT_NE(route, m.RouteHandle("POST", "/api/v1/jobs/{id}"));
  route->Observe(404, 0.001);
  const std::string text = m.Render({}, {});
  const std::map<std::string, std::string> ok = {
      {"method", "GET"}, {"route", "/api/v1/jobs/{id}"}, {"status_class", "2xx"}};
  EXPECT_EQ(Value(text, "arbiter_http_request_duration_seconds_count", ok), 2);
  EXPECT_DOUBLE_EQ(Value(text, "arbiter_http_request_duration_seconds_sum", ok), 0.006);
  EXPECT_EQ(Value(text, "arbiter_http_request_duration_seconds_count", {{"status_class", "4xx"}}),
            1);
}

constexpr const char* kConfig = R"(
gpu_models:
  - {name: A100-80G, memory_mib: 81920}
priority_classes:
  - {name: high, value: 1000, preemptible: false}
  - {name: low, value: 10, preemptible: true, min_runtime_seconds: 0, grace_period_seconds: 0}
tenants:
  - name: lab
    queues:
      - {name: lab-q, guaranteed: {gpu: 2}, max: {gpu: 4}}
      - {name: lab-dev, guaranteed: {gpu: 2}}
)";

// The control plane's metrics through a job's life on an agent's node.
class ControlPlaneMetricsTest : public ControlPlaneTest {
 protected:
  void SetUp() override {
    StartWith(kConfig, "cp-metrics");
    Register("gpu-01", "i1");
  }

  uint64_t Submit(const std::string& queue, int gpus, const std::string& priority_class = "") {
    json body = {{"queue", queue}, {"resources", {{"gpus", gpus}}}};
    if (!priority_class.empty()) body["priority_class"] = priority_class;
    return ControlPlaneTest::Submit(std::move(body));
  }
  void Beat(std::vector<TaskReport> reports, std::vector<GpuTelemetry> gpus = {}) {
    ControlPlaneTest::Beat("gpu-01", "i1", std::move(reports), std::move(gpus));
  }

  uint64_t seq_ = 0;
};

const std::map<std::string, std::string> kLabQ = {{"tenant", "lab"}, {"queue", "lab-q"}};
const std::map<std::string, std::string> kGpu01 = {{"node", "gpu-01"}, {"gpu_model", "A100-80G"}};

TEST_F(ControlPlaneMetricsTest, AJobsLifeMovesGaugesAndCounters) {
  const uint64_t id = Submit("lab-q", 3);
  std::string text = cp_->MetricsText();
  EXPECT_EQ(Value(text, "arbiter_jobs", {{"queue", "lab-q"}, {"state", "pending"}}), 1);
  EXPECT_EQ(Value(text, "arbiter_gpus", kGpu01), 4);
  EXPECT_EQ(Value(text, "arbiter_gpus_allocated", kGpu01), 0);
  EXPECT_EQ(Value(text, "arbiter_queue_guaranteed_gpus", kLabQ), 2);
  EXPECT_EQ(Value(text, "arbiter_queue_max_gpus", kLabQ), 4);
  EXPECT_TRUE(std::isnan(Value(text, "arbiter_job_admissions_total", kLabQ)));
  EXPECT_EQ(Value(text, "arbiter_job_submissions_total", kLabQ), 1);

  now_ += 30'000;  // waits 30 s
  ASSERT_TRUE(cp_->RunSchedulingCycle().ok());
  ASSERT_EQ(State(id), "admitted");
  text = cp_->MetricsText();
  EXPECT_EQ(Value(text, "arbiter_job_admissions_total", kLabQ), 1);
  EXPECT_EQ(Value(text, "arbiter_job_wait_seconds_count", kLabQ), 1);
  EXPECT_DOUBLE_EQ(Value(text, "arbiter_job_wait_seconds_sum", kLabQ), 30);
  EXPECT_EQ(Value(text, "arbiter_job_wait_seconds_bucket", {{"queue", "lab-q"}, {"le", "15"}}), 0);
  EXPECT_EQ(Value(text, "arbiter_job_wait_seconds_bucket", {{"queue", "lab-q"}, {"le", "30"}}), 1);
  EXPECT_EQ(Value(text, "arbiter_gpus_allocated", kGpu01), 3);
  EXPECT_EQ(Value(text, "arbiter_gpu_memory_allocated_bytes", kGpu01), 3.0 * 81920 * 1024 * 1024);
  EXPECT_EQ(Value(text, "arbiter_queue_used_gpus", kLabQ), 3);
  EXPECT_EQ(Value(text, "arbiter_queue_borrowed_gpus", kLabQ), 1);
  EXPECT_EQ(Value(text, "arbiter_scheduling_cycles_total"), 1);
  EXPECT_EQ(Value(text, "arbiter_scheduling_cycle_duration_seconds_count"), 1);

  // Started; the agent's telemetry says two GPUs are busy.
  std::vector<GpuTelemetry> telemetry(4);
  for (int g = 0; g < 4; ++g) {
    telemetry[g].index = g;
    telemetry[g].utilization_pct = g < 2 ? 90 : 0;
    telemetry[g].memory_used_mib = g < 2 ? 1000 : 0;
    telemetry[g].memory_total_mib = 81920;
  }
  Beat({{++seq_, id, 0, 1, TaskEvent::kStarted, 0, false}}, telemetry);
  ASSERT_EQ(State(id), "running");
  text = cp_->MetricsText();
  EXPECT_EQ(Value(text, "arbiter_job_starts_total", kLabQ), 1);
  EXPECT_EQ(Value(text, "arbiter_jobs", {{"queue", "lab-q"}, {"state", "running"}}), 1);
  EXPECT_EQ(Value(text, "arbiter_jobs", {{"queue", "lab-q"}, {"state", "pending"}}), 0);
  EXPECT_EQ(Value(text, "arbiter_gpus_busy", kGpu01), 2);
  EXPECT_DOUBLE_EQ(Value(text, "arbiter_gpu_utilization_ratio", kGpu01), 0.45);
  EXPECT_EQ(Value(text, "arbiter_gpu_memory_used_bytes", kGpu01), 2000.0 * 1024 * 1024);

  Beat({{++seq_, id, 0, 1, TaskEvent::kExited, 0, false}});
  ASSERT_EQ(State(id), "succeeded");
  text = cp_->MetricsText();
  EXPECT_EQ(Value(text, "arbiter_job_ends_total", {{"queue", "lab-q"}, {"outcome", "succeeded"}}),
            1);
  EXPECT_EQ(Value(text, "arbiter_gpus_allocated", kGpu01), 0);
  EXPECT_EQ(Value(text, "arbiter_queue_used_gpus", kLabQ), 0);
  EXPECT_EQ(Value(text, "arbiter_node_state", {{"node", "gpu-01"}, {"state", "ready"}}), 1);
  // The store committed the job's changes.
  EXPECT_GT(Value(text, "arbiter_store_commits_total"), 0);
  EXPECT_GT(Value(text, "arbiter_store_commit_duration_seconds_count"), 0);
}

TEST_F(ControlPlaneMetricsTest, AReplayedSubmissionCountsOnce) {
  for (int i = 0; i < 2; ++i) {
    auto spec = api::ParseJobSubmission(
        json{{"queue", "lab-q"}, {"command", {"true"}}, {"resources", {{"gpus", 1}}}}.dump());
    ASSERT_TRUE(spec.ok());
    bool created = false;
    ASSERT_TRUE(cp_->SubmitJob(admin_, std::move(spec).value(), "key-1", &created).ok());
    EXPECT_EQ(created, i == 0);
  }
  EXPECT_EQ(Value(cp_->MetricsText(), "arbiter_job_submissions_total", kLabQ), 1);
}

TEST_F(ControlPlaneMetricsTest, EndsAreCountedByOutcome) {
  const uint64_t failing = Submit("lab-q", 1);
  const uint64_t queued = Submit("lab-q", 1);
  ASSERT_TRUE(cp_->JobAction(admin_, queued, "cancel").ok());
  ASSERT_TRUE(cp_->RunSchedulingCycle().ok());
  ASSERT_EQ(State(failing), "admitted");
  Beat({{++seq_, failing, 0, 1, TaskEvent::kStarted, 0, false},
        {++seq_, failing, 0, 1, TaskEvent::kExited, 3, false}});
  ASSERT_EQ(State(failing), "failed");
  const uint64_t slow = Submit("lab-q", 1);
  ASSERT_TRUE(cp_->RunSchedulingCycle().ok());
  Beat({{++seq_, slow, 0, 1, TaskEvent::kStarted, 0, false},
        {++seq_, slow, 0, 1, TaskEvent::kExited, 137, true}});
  ASSERT_EQ(State(slow), "timed-out");
  const std::string text = cp_->MetricsText();
  for (const char* outcome : {"failed", "cancelled", "timed-out"}) {
    EXPECT_EQ(Value(text, "arbiter_job_ends_total", {{"queue", "lab-q"}, {"outcome", outcome}}), 1)
        << outcome;
  }
  EXPECT_TRUE(std::isnan(Value(text, "arbiter_job_ends_total", {{"outcome", "succeeded"}})));
  EXPECT_EQ(Value(text, "arbiter_job_starts_total", kLabQ), 2);
}

TEST_F(ControlPlaneMetricsTest, PreemptionsAreCountedByReasonAndVictimQueue) {
  const uint64_t low = Submit("lab-dev", 4, "low");
  ASSERT_TRUE(cp_->RunSchedulingCycle().ok());
  Beat({{++seq_, low, 0, 1, TaskEvent::kStarted, 0, false}});
  ASSERT_EQ(State(low), "running");
  const uint64_t high = Submit("lab-dev", 4, "high");
  ASSERT_TRUE(cp_->RunSchedulingCycle().ok());
  ASSERT_EQ(State(low), "preempting") << (*cp_->WhyPending(admin_, high)).dump();
  Beat({{++seq_, low, 0, 1, TaskEvent::kExited, 143, false}});
  const std::string text = cp_->MetricsText();
  EXPECT_EQ(
      Value(text, "arbiter_preemptions_total", {{"queue", "lab-dev"}, {"reason", "priority"}}), 1);
  EXPECT_EQ(Value(text, "arbiter_job_ends_total", {{"queue", "lab-dev"}, {"outcome", "preempted"}}),
            1);
}

TEST_F(ControlPlaneMetricsTest, AQueueReclaimingItsGuaranteeCountsAsReclaim) {
  const uint64_t borrower = Submit("lab-dev", 4, "low");  // 2 of them lab-q's guarantee
  ASSERT_TRUE(cp_->RunSchedulingCycle().ok());
  Beat({{++seq_, borrower, 0, 1, TaskEvent::kStarted, 0, false}});
  std::string text = cp_->MetricsText();
  EXPECT_EQ(Value(text, "arbiter_queue_borrowed_gpus", {{"queue", "lab-dev"}}), 2);
  const uint64_t owner = Submit("lab-q", 2, "low");
  ASSERT_TRUE(cp_->RunSchedulingCycle().ok());
  ASSERT_EQ(State(borrower), "preempting") << (*cp_->WhyPending(admin_, owner)).dump();
  text = cp_->MetricsText();
  EXPECT_EQ(Value(text, "arbiter_preemptions_total", {{"queue", "lab-dev"}, {"reason", "reclaim"}}),
            1);
  EXPECT_TRUE(std::isnan(Value(text, "arbiter_preemptions_total", {{"reason", "priority"}})));
}

TEST_F(ControlPlaneMetricsTest, LabelsComeFromBoundedSets) {
  for (int i = 0; i < 5; ++i) Submit("lab-q", 1);
  ASSERT_TRUE(cp_->RunSchedulingCycle().ok());
  cp_->metrics().HttpRequest("GET", "/api/v1/jobs/{id}", 200, 0.001);
  const std::set<std::string> allowed = {"tenant", "queue",        "node",   "gpu_model",
                                         "state",  "outcome",      "reason", "method",
                                         "route",  "status_class", "result", "le"};
  const std::string text = cp_->MetricsText();
  size_t samples = 0;
  for (const Sample& s : ParseSamples(text)) {
    ++samples;
    EXPECT_EQ(s.name.rfind("arbiter_", 0), 0u) << s.name;
    for (const auto& [k, v] : s.labels) EXPECT_TRUE(allowed.count(k)) << s.name << " " << k;
  }
  EXPECT_GT(samples, 50u);
}

}  // namespace
}  // namespace arbiter::server

// Reports over a small scripted history, with every expected figure worked out by hand.
//
// Period [T0, T0 + 10 h), T0 = 2026-11-10T00:00Z. Two tenants, one queue each, 4 GPUs guaranteed
// each. Price 2 per GPU-hour. Times in hours from T0:
//   job 1 vision-train alice training 2 GPUs: pending 0, admitted+running 1, preempted (reclaim)
//         3, pending 3, admitted+running 4, succeeded 6.      usage [1,3) [4,6) x 2 GPUs
//   job 2 vision-train bob inference 1 GPU: pending 0, admitted+running 2, exits 1 at 5.
//                                                            usage [2,5) x 1 GPU
//   job 3 nlp-dev carol training 4 GPUs: pending 2, admitted+running 3, succeeded 9.
//                                                            usage [3,9) x 4 GPUs
//   job 4 nlp-dev carol training 1 GPU: pending -3, admitted -2, running -2, lost at 2,
//         retry-wait 2, pending 2.5, still pending at 10.    usage [-2,2) x 1 GPU
// Cluster samples at 4, 5 and 6 h, one hour each; GPU telemetry: a raw minute at 4 h (50 %) and
// an hourly row at 5 h (half an hour busy).
#include "server/reports.h"

#include <gtest/gtest.h>

namespace arbiter::server::reports {
namespace {

using nlohmann::json;
constexpr int64_t kHour = 3'600'000;
constexpr int64_t kT0 = 1'794'268'800'000;  // 2026-11-10T00:00:00Z

int64_t At(double hours) { return kT0 + static_cast<int64_t>(hours * kHour); }

store::UsageRecord Use(uint64_t job, const JobInfo& j, int64_t milli, double from, double to) {
  store::UsageRecord u;
  u.job_id = job;
  u.tenant = j.tenant;
  u.queue = j.queue;
  u.user = j.user;
  u.job_type = j.type;
  u.gpu_model = j.gpu_model;
  u.gpu_milli = milli;
  u.start_ms = At(from);
  u.end_ms = At(to);
  // 2 per GPU-hour, in millionths.
  u.cost_micro = static_cast<int64_t>(static_cast<double>(milli) / 1000 * (to - from) * 2e6);
  return u;
}

class ReportsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const JobInfo j1{"vision", "vision-train", "alice", "training", "A100", 2000};
    const JobInfo j2{"vision", "vision-train", "bob", "inference", "A100", 1000};
    const JobInfo j3{"nlp", "nlp-dev", "carol", "training", "A100", 4000};
    const JobInfo j4{"nlp", "nlp-dev", "carol", "training", "A100", 1000};
    in_.jobs = {{1, j1}, {2, j2}, {3, j3}, {4, j4}};
    in_.usage = {Use(4, j4, 1000, -2, 2), Use(1, j1, 2000, 1, 3), Use(2, j2, 1000, 2, 5),
                 Use(1, j1, 2000, 4, 6), Use(3, j3, 4000, 3, 9)};
    struct E {
      uint64_t job;
      double at;
      const char *from, *to, *reason;
    };
    const E events[] = {
        {4, -3, "", "pending", "submitted"},
        {4, -2, "pending", "admitted", "admitted"},
        {4, -2, "admitted", "starting", "dispatched"},
        {4, -2, "starting", "running", "all tasks started"},
        {1, 0, "", "pending", "submitted"},
        {2, 0, "", "pending", "submitted"},
        {1, 1, "pending", "admitted", "admitted"},
        {1, 1, "admitted", "starting", "dispatched"},
        {1, 1, "starting", "running", "all tasks started"},
        {2, 2, "pending", "admitted", "admitted"},
        {2, 2, "admitted", "running", "all tasks started"},
        {3, 2, "", "pending", "submitted"},
        {4, 2, "running", "lost", "its processes are gone (node restarted or down)"},
        {4, 2, "lost", "retry-wait", "retry 1 of 3 in 1800 s"},
        {4, 2.5, "retry-wait", "pending", "retry backoff over"},
        {1, 3, "running", "preempting", "preempted by job 3 (reclaim)"},
        {1, 3, "preempting", "preempted", "stopped for a preemption"},
        {1, 3, "preempted", "pending", "requeued after preemption"},
        {3, 3, "pending", "admitted", "admitted"},
        {3, 3, "admitted", "running", "all tasks started"},
        {1, 4, "pending", "admitted", "admitted"},
        {1, 4, "admitted", "running", "all tasks started"},
        {2, 5, "running", "failed", "a task exited with code 1"},
        {1, 6, "running", "succeeded", "all tasks exited 0"},
        {3, 9, "running", "succeeded", "all tasks exited 0"},
    };
    uint64_t seq = 0;
    for (const E& e : events)
      in_.events.push_back({++seq, e.job, At(e.at), e.from, e.to, e.reason, "{}"});
    const json running4 = json::array({{{"tenant", "vision"},
                                        {"queue", "vision-train"},
                                        {"user", "alice"},
                                        {"type", "training"},
                                        {"gpu_model", "A100"},
                                        {"gpus", 2000},
                                        {"busy", 1000}},
                                       {{"tenant", "vision"},
                                        {"queue", "vision-train"},
                                        {"user", "bob"},
                                        {"type", "inference"},
                                        {"gpu_model", "A100"},
                                        {"gpus", 1000},
                                        {"busy", nullptr}},
                                       {{"tenant", "nlp"},
                                        {"queue", "nlp-dev"},
                                        {"user", "carol"},
                                        {"type", "training"},
                                        {"gpu_model", "A100"},
                                        {"gpus", 4000},
                                        {"busy", 3000}}});
    auto sample = [](int64_t alloc, int64_t free, int64_t frag, int64_t idle, int64_t pending,
                     int64_t pending_gpus, json reasons, json running) {
      int64_t waiting = 0;
      for (const auto& [k, v] : reasons.items()) waiting += v.get<int64_t>();
      return json{
          {"gpus_total", 8000},
          {"gpus_allocated", alloc},
          {"gpus_busy", nullptr},
          {"gpus_free", free},
          {"fragmented", frag},
          {"idle_nodes", idle},
          {"queues",
           {{"nlp-dev",
             {{"tenant", "nlp"}, {"pending_jobs", pending}, {"pending_gpus", pending_gpus}}}}},
          {"waiting", {{"jobs", waiting}, {"by_reason", reasons}}},
          {"running", running}}
          .dump();
    };
    in_.cluster_samples = {
        {At(4), kHour, sample(7000, 1000, 1000, 0, 1, 1000, {{"quota", 1}}, running4)},
        {At(5), kHour, sample(6000, 2000, 0, 1, 1, 1000, {{"quota", 1}}, json::array())},
        {At(6), kHour,
         sample(4000, 4000, 0, 1, 2, 3000, {{"quota", 1}, {"wrong_model", 1}}, json::array())},
    };
    in_.gpu_samples = {{60'000, "n1", 0, At(4), 60'000, 30'000, 100, 60'000 * 100},
                       {kHour, "n1", 0, At(5), kHour, kHour / 2, 300, kHour * 200}};
    in_.budgets = {{"vision", 100, "month"}};
    in_.entitlements = {{"vision", "vision", "", true, 4000},
                        {"vision-train", "vision", "vision", false, 4000},
                        {"nlp", "nlp", "", true, 4000},
                        {"nlp-dev", "nlp", "nlp", false, 4000}};
    in_.now_ms = At(10);
  }

  // The report as JSON rows (column -> value).
  json Rows(std::string_view name, std::optional<GroupBy> by = std::nullopt, int64_t step = 0,
            std::string tenant = "") {
    Query q{At(0), At(10), by, step, std::move(tenant), ""};
    auto t = Compute(name, q, in_);
    EXPECT_TRUE(t.ok()) << t.status().ToString();
    return t.ok() ? ToJson(name, q, *t)["rows"] : json();
  }

  Inputs in_;
};

TEST_F(ReportsTest, UsageClipsIntervalsToThePeriodAndForecastsTheBudget) {
  const json rows = Rows("usage");
  ASSERT_EQ(rows.size(), 2u);
  // nlp: job 3 4 GPUs x 6 h = 24, job 4 clipped to [0,2) = 2; cost 48 + 8 x 2/4.
  EXPECT_EQ(rows[0]["tenant"], "nlp");
  EXPECT_EQ(rows[0]["gpu_hours"], 26.0);
  EXPECT_EQ(rows[0]["busy_gpu_hours"], 3.0);  // carol: 3 busy GPUs for 1 h
  EXPECT_EQ(rows[0]["cost"], 52.0);
  EXPECT_TRUE(rows[0]["budget_gpu_hours"].is_null());
  // vision: job 1 2 x (2 + 2) = 8, job 2 1 x 3 = 3.
  EXPECT_EQ(rows[1]["tenant"], "vision");
  EXPECT_EQ(rows[1]["gpu_hours"], 11.0);
  EXPECT_EQ(rows[1]["busy_gpu_hours"], 1.0);
  EXPECT_EQ(rows[1]["cost"], 22.0);
  EXPECT_EQ(rows[1]["budget_gpu_hours"], 100);
  EXPECT_EQ(rows[1]["budget_used_gpu_hours"], 11.0);
  EXPECT_EQ(rows[1]["budget_used_pct"], 11.0);
  // November: 720 h, 226 h of it gone at now (9 days 10 h): 11 x 720 / 226.
  EXPECT_EQ(rows[1]["forecast_gpu_hours"], 35.044248);
}

TEST_F(ReportsTest, UsageByUserHasNoBusyFigureWithoutTelemetry) {
  const json rows = Rows("usage", GroupBy::kUser);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0]["user"], "alice");
  EXPECT_EQ(rows[0]["gpu_hours"], 8.0);
  EXPECT_EQ(rows[1]["user"], "bob");
  EXPECT_TRUE(rows[1]["busy_gpu_hours"].is_null());
  EXPECT_FALSE(rows[1].contains("budget_gpu_hours"));
  EXPECT_EQ(rows[2]["gpu_hours"], 26.0);
}

TEST_F(ReportsTest, UsageSeriesSplitsIntervalsAtTheSteps) {
  const json rows = Rows("usage", GroupBy::kTenant, 5 * kHour);
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(rows[0]["period_start"], "2026-11-10T00:00:00Z");
  EXPECT_EQ(rows[0]["tenant"], "nlp");
  EXPECT_EQ(rows[0]["gpu_hours"], 10.0);  // job 3 [3,5) x 4 + job 4 [0,2)
  EXPECT_EQ(rows[1]["gpu_hours"], 9.0);   // vision: job 1 [1,3)+[4,5) x 2 + job 2 [2,5)
  EXPECT_EQ(rows[2]["period_start"], "2026-11-10T05:00:00Z");
  EXPECT_EQ(rows[2]["gpu_hours"], 16.0);
  EXPECT_EQ(rows[3]["gpu_hours"], 2.0);
}

TEST_F(ReportsTest, WaitCountsEachAdmissionInThePeriod) {
  const json rows = Rows("wait");
  ASSERT_EQ(rows.size(), 3u);
  // nlp-dev training: job 3 waited 1 h; job 4's admission was before the period; it waits again
  // since 2.5 h and is still waiting at 10 h.
  EXPECT_EQ(rows[0]["queue"], "nlp-dev");
  EXPECT_EQ(rows[0]["type"], "training");
  EXPECT_EQ(rows[0]["admissions"], 1);
  EXPECT_EQ(rows[0]["wait_p50_s"], 3600.0);
  EXPECT_EQ(rows[0]["wait_max_s"], 3600.0);
  EXPECT_EQ(rows[0]["waiting_at_end"], 1);
  EXPECT_EQ(rows[0]["longest_waiting_s"], 27000.0);
  // vision-train inference: job 2, 2 h.
  EXPECT_EQ(rows[1]["type"], "inference");
  EXPECT_EQ(rows[1]["wait_p99_s"], 7200.0);
  // vision-train training: job 1 twice, 1 h before each run.
  EXPECT_EQ(rows[2]["type"], "training");
  EXPECT_EQ(rows[2]["admissions"], 2);
  EXPECT_EQ(rows[2]["wait_p90_s"], 3600.0);
  EXPECT_EQ(rows[2]["waiting_at_end"], 0);
  EXPECT_TRUE(rows[2]["longest_waiting_s"].is_null());
}

TEST(WaitPercentiles, AreNearestRank) {
  Inputs in;
  for (uint64_t id = 1; id <= 10; ++id) {
    in.jobs[id] = {"t", "q", "u", "training", "", 1000};
    in.events.push_back({0, id, 0, "", "pending", "submitted", "{}"});
  }
  for (uint64_t id = 1; id <= 10; ++id) {
    in.events.push_back({0, id, static_cast<int64_t>(id) * 1000, "pending", "admitted", "", "{}"});
  }
  Query q{0, 100'000, GroupBy::kType, 0, "", ""};
  auto t = Compute("wait", q, in);
  ASSERT_TRUE(t.ok());
  const json row = ToJson("wait", q, *t)["rows"][0];
  EXPECT_EQ(row["admissions"], 10);
  EXPECT_EQ(row["wait_p50_s"], 5.0);
  EXPECT_EQ(row["wait_p90_s"], 9.0);
  EXPECT_EQ(row["wait_p99_s"], 10.0);
  EXPECT_EQ(row["wait_max_s"], 10.0);
}

TEST_F(ReportsTest, FailuresCountOneOutcomePerRunAndNameTheCauses) {
  const json rows = Rows("failures");
  ASSERT_EQ(rows.size(), 2u);
  // nlp-dev: job 4 lost at 2 h, job 3 succeeded; vision-train: job 2 exit 1, job 1 succeeded
  // (its preempted run is not an outcome).
  EXPECT_EQ(rows[0]["queue"], "nlp-dev");
  EXPECT_EQ(rows[0]["runs"], 2);
  EXPECT_EQ(rows[0]["failed"], 1);
  EXPECT_EQ(rows[0]["failure_rate"], 0.5);
  EXPECT_EQ(rows[0]["top_causes"], "lost node (1)");
  EXPECT_EQ(rows[1]["queue"], "vision-train");
  EXPECT_EQ(rows[1]["succeeded"], 1);
  EXPECT_EQ(rows[1]["top_causes"], "exit code 1 (1)");
}

TEST_F(ReportsTest, PreemptionsCountTheWorkLost) {
  const json rows = Rows("preemptions");
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0]["queue"], "vision-train");
  EXPECT_EQ(rows[0]["reason"], "reclaim");
  EXPECT_EQ(rows[0]["preemptions"], 1);
  EXPECT_EQ(rows[0]["jobs"], 1);
  EXPECT_EQ(rows[0]["gpu_hours_lost"], 4.0);  // 2 GPUs running from 1 h to 3 h
}

TEST_F(ReportsTest, FairnessComparesUseWithEntitlement) {
  const json rows = Rows("fairness");
  ASSERT_EQ(rows.size(), 2u);
  // Entitled: 4 GPUs x 10 h = 40 GPU-hours each. Shares 26/40 and 11/40;
  // Jain = (0.65 + 0.275)^2 / (2 x (0.65^2 + 0.275^2)).
  EXPECT_EQ(rows[0]["queue"], "nlp-dev");
  EXPECT_EQ(rows[0]["entitled_gpu_hours"], 40.0);
  EXPECT_EQ(rows[0]["share_of_entitlement"], 0.65);
  EXPECT_EQ(rows[1]["share_of_entitlement"], 0.275);
  EXPECT_EQ(rows[0]["jain_index"], 0.858846);
  const json tenants = Rows("fairness", GroupBy::kTenant);
  ASSERT_EQ(tenants.size(), 2u);
  EXPECT_EQ(tenants[1]["tenant"], "vision");
  EXPECT_EQ(tenants[1]["gpu_hours"], 11.0);
  EXPECT_EQ(tenants[1]["guaranteed_gpus"], 4.0);
}

TEST_F(ReportsTest, ClusterFromTheSamples) {
  const json rows = Rows("cluster");
  ASSERT_EQ(rows.size(), 1u);
  const json& r = rows[0];
  EXPECT_EQ(r["samples"], 3);
  EXPECT_EQ(r["gpu_hours_total"], 24.0);
  EXPECT_EQ(r["gpu_hours_allocated"], 17.0);  // 7 + 6 + 4
  EXPECT_EQ(r["allocation_rate"], 0.708333);
  EXPECT_EQ(r["busy_gpu_hours"], 0.508333);  // half an hour + one minute at 50 %
  EXPECT_EQ(r["utilization"], 0.021181);
  EXPECT_EQ(r["node_idle_hours"], 2.0);
  EXPECT_EQ(r["avg_pending_jobs"], 1.333333);
  EXPECT_EQ(r["avg_pending_gpus"], 1.666667);
  EXPECT_EQ(r["max_pending_jobs"], 2);
  // (1 min at 100 MiB + 60 min at 200 MiB) / 61 min; the highest 300 MiB.
  EXPECT_EQ(r["avg_gpu_memory_used_mib"], 198.360656);
  EXPECT_EQ(r["max_gpu_memory_used_mib"], 300);
  const json queues = Rows("cluster", GroupBy::kQueue);
  ASSERT_EQ(queues.size(), 1u);
  EXPECT_EQ(queues[0]["queue"], "nlp-dev");
  EXPECT_EQ(queues[0]["max_pending_jobs"], 2);
}

TEST_F(ReportsTest, FragmentationFromTheSamples) {
  const json r = Rows("fragmentation")[0];
  EXPECT_EQ(r["free_gpu_hours"], 7.0);
  EXPECT_EQ(r["fragmented_gpu_hours"], 1.0);
  EXPECT_EQ(r["fragmented_share"], 0.142857);
  EXPECT_EQ(r["avg_fragmented_gpus"], 0.333333);
  EXPECT_EQ(r["max_fragmented_gpus"], 1.0);
}

TEST_F(ReportsTest, IdleWhileQueuedByReason) {
  const json rows = Rows("idle-while-queued");
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0]["reason"], "(any)");
  EXPECT_EQ(rows[0]["waiting_job_hours"], 4.0);  // 1 + 1 + 2
  EXPECT_EQ(rows[0]["idle_gpu_hours"], 7.0);     // 1 + 2 + 4
  EXPECT_EQ(rows[1]["reason"], "quota");
  EXPECT_EQ(rows[1]["waiting_job_hours"], 3.0);
  EXPECT_EQ(rows[1]["idle_gpu_hours"], 7.0);
  EXPECT_EQ(rows[2]["reason"], "wrong_model");
  EXPECT_EQ(rows[2]["idle_gpu_hours"], 4.0);
}

TEST_F(ReportsTest, ATenantSeesOnlyItsOwnRecords) {
  const json usage = Rows("usage", GroupBy::kUser, 0, "vision");
  ASSERT_EQ(usage.size(), 2u);
  EXPECT_EQ(usage[0]["user"], "alice");
  EXPECT_EQ(usage[0]["busy_gpu_hours"], 1.0);
  EXPECT_EQ(usage[1]["user"], "bob");
  const json wait = Rows("wait", std::nullopt, 0, "vision");
  for (const json& r : wait) EXPECT_EQ(r["queue"], "vision-train");
  const json fair = Rows("fairness", std::nullopt, 0, "vision");
  ASSERT_EQ(fair.size(), 1u);
  EXPECT_EQ(fair[0]["jain_index"], 1.0);
}

TEST_F(ReportsTest, BadQueriesNameTheField) {
  auto field = [&](std::string_view name, Query q) {
    auto t = Compute(name, q, in_);
    EXPECT_FALSE(t.ok());
    return t.ok() ? std::string() : t.status().field();
  };
  EXPECT_EQ(field("usge", {At(0), At(1), std::nullopt, 0, ""}), "report");
  EXPECT_EQ(field("usage", {At(1), At(1), std::nullopt, 0, ""}), "to");
  EXPECT_EQ(field("usage", {At(0), At(10), std::nullopt, 1, ""}), "step");
  EXPECT_EQ(field("fairness", {At(0), At(1), GroupBy::kUser, 0, ""}), "group_by");
  EXPECT_EQ(field("fragmentation", {At(0), At(1), GroupBy::kQueue, 0, ""}), "group_by");
}

TEST(ReportCsv, QuotesFieldsAndLeavesNullEmpty) {
  Table t{{"queue", "top_causes", "rate"}, {{"a", "exit code 1 (2); \"x\", y", nullptr}}};
  EXPECT_EQ(ToCsv(t), "queue,top_causes,rate\r\na,\"exit code 1 (2); \"\"x\"\", y\",\r\n");
}

TEST(BudgetPeriods, AreUtcDaysWeeksAndMonths) {
  const int64_t now = kT0 + 5 * kHour;  // Tuesday 2026-11-10 05:00
  EXPECT_EQ(BudgetPeriod("day", now), std::make_pair(kT0, kT0 + 24 * kHour));
  EXPECT_EQ(BudgetPeriod("week", now), std::make_pair(kT0 - 24 * kHour, kT0 + 6 * 24 * kHour));
  EXPECT_EQ(BudgetPeriod("month", now),
            std::make_pair(kT0 - 9 * 24 * kHour, kT0 + 21 * 24 * kHour));
}

TEST(WaitReasons, RefineNoFeasibleNodeByTheFreeGpus) {
  EXPECT_EQ(WaitReason("QuotaExceeded", 0, 0, 1000), "quota");
  EXPECT_EQ(WaitReason("GangIncomplete", 0, 0, 1000), "gang");
  EXPECT_EQ(WaitReason("Inadmissible", 8000, 8000, 1000), "inadmissible");
  EXPECT_EQ(WaitReason("NoFeasibleNode", 8000, 8000, 8000), "fragmented");
  EXPECT_EQ(WaitReason("NoFeasibleNode", 0, 8000, 8000), "wrong_model");
  EXPECT_EQ(WaitReason("NoFeasibleNode", 0, 1000, 8000), "no_capacity");
  EXPECT_EQ(WaitReason("", 0, 0, 1000), "not_yet_scheduled");
  EXPECT_EQ(WaitReason("Dependency", 8000, 8000, 1000), "dependency");
  EXPECT_EQ(WaitReason("ArrayThrottled", 8000, 8000, 1000), "array_throttle");
}

}  // namespace
}  // namespace arbiter::server::reports

namespace arbiter::server::reports {
namespace {

// Five weeks of one tenant's demand with a weekly season (GPUs held all day: 8 on weekdays, 2 at
// weekends), and one job that waited a whole day with 4 GPUs: the forecast's history is exactly
// that, and the seasonal-naive forecast repeats the last week.
TEST(ForecastReport, DailyDemandIsAllocatedPlusQueuedAndRepeatsTheSeason) {
  constexpr int64_t kDay = 24 * kHour;
  Inputs in;
  in.now_ms = kT0 + 35 * kDay + kHour;
  const JobInfo j{"vision", "vision-train", "alice", "training", "A100", 8000, "", 0};
  for (int d = 0; d < 35; ++d) {
    const int64_t gpus = d % 7 < 5 ? 8 : 2;  // T0 is a Tuesday: the season starts there
    store::UsageRecord u = Use(100 + d, j, gpus * 1000, 24.0 * d, 24.0 * (d + 1));
    in.usage.push_back(u);
  }
  // Job 7 waits through day 10 with 4 GPUs: pending at 10 d, admitted at 11 d.
  in.jobs[7] = JobInfo{"vision", "vision-train", "alice", "training", "A100", 4000, "", 0};
  in.events.push_back({1, 7, kT0 + 10 * kDay, "", "pending", "submitted", "{}"});
  in.events.push_back({2, 7, kT0 + 11 * kDay, "pending", "admitted", "", "{}"});
  Query q;
  q.from_ms = kT0;
  q.to_ms = in.now_ms;  // today (day 35) is not over: left out
  q.horizon_ms = 7 * kDay;
  auto t = Compute("forecast", q, in);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ASSERT_EQ(t->columns[0], "tenant");
  std::vector<double> history;
  std::vector<double> naive;
  std::map<std::string, json> backtest;
  for (const auto& row : t->rows) {
    ASSERT_EQ(row[0], "vision");
    if (row[2] == "history") history.push_back(row[4].get<double>());
    if (row[2] == "forecast" && row[3] == "seasonal_naive") naive.push_back(row[4].get<double>());
    if (row[2] == "backtest") backtest[row[3].get<std::string>()] = row;
  }
  ASSERT_EQ(history.size(), 35u);
  EXPECT_DOUBLE_EQ(history[0], 8 * 24);
  EXPECT_DOUBLE_EQ(history[5], 2 * 24);
  EXPECT_DOUBLE_EQ(history[10], 8 * 24 + 4 * 24);  // a weekday, plus the day job 7 waited
  ASSERT_EQ(naive.size(), 7u);
  for (size_t h = 0; h < 7; ++h) EXPECT_DOUBLE_EQ(naive[h], history[28 + h]) << h;
  // Both models forecast and are backtested over the history.
  ASSERT_EQ(backtest.size(), 2u);
  EXPECT_GT(backtest["seasonal_trend"][9].get<int64_t>(), 0);
  EXPECT_LT(backtest["seasonal_naive"][7].get<double>(), 10);  // sMAPE, percent
  // The first forecast day is the day after the last whole day.
  for (const auto& row : t->rows) {
    if (row[2] == "forecast") {
      EXPECT_EQ(row[1], "2026-12-15");
      break;
    }
  }
}

TEST(ForecastReport, ShortHistoriesAndBadHorizonsNameTheField) {
  Inputs in;
  in.now_ms = kT0 + 3 * 24 * kHour;
  Query q;
  q.from_ms = kT0;
  q.to_ms = in.now_ms;
  EXPECT_EQ(Compute("forecast", q, in).status().field(), "since");
  q.from_ms = kT0 - 30 * 24 * kHour;
  q.horizon_ms = 400 * 24 * kHour;
  EXPECT_EQ(Compute("forecast", q, in).status().field(), "horizon");
  q.horizon_ms = 0;
  q.step_ms = 24 * kHour;
  EXPECT_EQ(Compute("forecast", q, in).status().field(), "step");
}

}  // namespace
}  // namespace arbiter::server::reports

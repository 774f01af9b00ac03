// Scripted replays on a small cluster, with the expected numbers worked out by hand in comments.
#include "sim/replay.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "core/cycle/cycle.h"
#include "sim/convert.h"

namespace arbiter::sim {
namespace {

using ::testing::HasSubstr;

const std::string kFixtures = ARBITER_FIXTURES_DIR "/openb";

TraceJob Job(int64_t submit, int64_t duration, int32_t gpus, int32_t tasks = 1,
             const std::string& queue = "q", const std::string& klass = "normal",
             int64_t walltime = 0) {
  TraceJob j;
  j.submit_time = submit;
  j.duration = duration;
  j.tenant = "t-" + queue;
  j.queue = queue;
  j.type = JobType::kTraining;
  j.priority_class = klass;
  j.tasks = tasks;
  j.resources.gpus = gpus;
  j.resources.gpu_milli = kMilliPerGpu;
  j.resources.cpu_milli = 1000;
  j.resources.memory_mib = 1024;
  j.walltime = walltime;
  return j;
}

// `nodes` nodes of 8 A100s; the default queue tree unless `queues` gives (name, guaranteed GPUs).
class Scenario {
 public:
  Scenario(std::vector<TraceJob> jobs, int nodes = 2,
           const std::vector<std::pair<std::string, int64_t>>& queues = {}) {
    std::vector<Node> ns;
    for (int i = 0; i < nodes; ++i) {
      Node n;
      n.name = fmt::format("n{}", i);
      n.cpu_milli = 64000;
      n.memory_mib = 524288;
      for (int g = 0; g < 8; ++g) n.gpus.push_back({g, "A100", 81920, true, 0});
      ns.push_back(std::move(n));
    }
    cluster_ = std::make_unique<core::Cluster>(*core::Cluster::Build({{"A100", 81920, 0}}, ns));
    trace_.file = "scenario.csv";
    for (const std::string_view c : TraceColumns()) trace_.columns.emplace_back(c);
    for (size_t i = 0; i < jobs.size(); ++i) {
      jobs[i].line = i + 2;
      if (jobs[i].name.empty()) jobs[i].name = fmt::format("j{}", i + 1);
    }
    trace_.jobs = std::move(jobs);
    std::vector<QueueSpec> specs = DefaultQueueTree(trace_, *cluster_);
    if (!queues.empty()) {
      specs.clear();
      for (const auto& [name, g] : queues) {
        QueueSpec t;
        t.name = "t-" + name;
        t.is_tenant = true;
        specs.push_back(t);
        QueueSpec q;
        q.name = name;
        q.parent = t.name;
        q.quota["gpu"] = QuotaLimits{g * kMilliPerGpu, std::nullopt, std::nullopt};
        specs.push_back(q);
      }
    }
    auto tree = core::QuotaTree::Build(specs, cluster_->models());
    EXPECT_TRUE(tree.ok()) << tree.status().ToString();
    tree_ = std::make_unique<core::QuotaTree>(std::move(*tree));
    auto w = CompileReplay(trace_, *cluster_, *tree_, DefaultPriorityClasses());
    EXPECT_TRUE(w.ok()) << w.status().ToString();
    workload_ = std::make_unique<ReplayWorkload>(std::move(*w));
  }

  ReplayReport Run(const std::string& policy = "binpack", ReplayOptions o = {}) const {
    auto profile = core::Profile::Build(*core::Profile::Named(policy));
    EXPECT_TRUE(profile.ok());
    return RunReplay(*workload_, *profile, policy, o);
  }

  const ReplayWorkload& workload() const { return *workload_; }

 private:
  std::unique_ptr<core::Cluster> cluster_;
  std::unique_ptr<core::QuotaTree> tree_;
  Trace trace_;
  std::unique_ptr<ReplayWorkload> workload_;
};

constexpr double kGpuSecondsPerHour = 3600.0;

TEST(Replay, WaitsMakespanAndAllocationOfAFifoQueue) {
  // A and B fill both nodes at 0. C (t=10) waits for B's end at 50. D, a gang of two 8-GPU tasks
  // (t=20), needs both nodes: C takes the free node first (submitted earlier), D starts when A
  // ends at 100 and ends at 120.
  Scenario s({Job(0, 100, 8), Job(0, 50, 8), Job(10, 30, 8), Job(20, 20, 8, 2)});
  const ReplayReport r = s.Run();
  EXPECT_EQ(r.jobs, 4);
  EXPECT_EQ(r.completed, 4);
  EXPECT_EQ(r.timed_out, 0);
  EXPECT_EQ(r.dropped, 0);
  EXPECT_EQ(r.unfinished, 0);
  // Waits: A 0, B 0, C 40, D 80. Nearest rank over 4 values: p50 = the 2nd, p95 = the 4th.
  EXPECT_EQ(r.wait.count, 4);
  EXPECT_EQ(r.jobs_waited, 2);
  EXPECT_DOUBLE_EQ(r.wait.p50, 0);
  EXPECT_DOUBLE_EQ(r.wait.p95, 80);
  EXPECT_DOUBLE_EQ(r.wait.max, 80);
  EXPECT_DOUBLE_EQ(r.wait.mean, 30);
  // JCT: A 100, B 50, C 80 - 10 = 70, D 120 - 20 = 100.
  EXPECT_DOUBLE_EQ(r.jct.p50, 70);
  EXPECT_DOUBLE_EQ(r.jct.max, 100);
  EXPECT_DOUBLE_EQ(r.makespan_seconds, 120);
  // GPUs allocated: 16 on [0,80), 8 on [80,100), 16 on [100,120): 1760 GPU-s of 16 x 120.
  EXPECT_NEAR(r.gpu_alloc_pct, 100.0 * 1760 / 1920, 1e-9);
  EXPECT_NEAR(r.gpu_hours_allocated, 1760 / kGpuSecondsPerHour, 1e-12);
  // Idle while jobs waited: 8 GPUs on [80,100) while D waited.
  EXPECT_NEAR(r.gpu_hours_idle_while_waiting, 160 / kGpuSecondsPerHour, 1e-12);
  EXPECT_EQ(r.preemptions, 0);
  ASSERT_EQ(r.queues.size(), 1u);
  EXPECT_EQ(r.queues[0].name, "q");
  EXPECT_NEAR(r.queues[0].entitlement_pct, 100, 1e-9);  // the only queue: all of the demand
  EXPECT_NEAR(r.queues[0].gpu_share_pct, r.gpu_alloc_pct, 1e-9);
  // q has jobs waiting on [10,100) (C until 50, D until 100), holding 16 GPUs on [10,80) and 8
  // on [80,100): 1280 GPU-s of 16 x 90.
  EXPECT_NEAR(r.queues[0].waiting_time_pct, 100.0 * 90 / 120, 1e-9);
  EXPECT_NEAR(r.queues[0].share_while_waiting_pct, 100.0 * 1280 / (16.0 * 90), 1e-9);
  ASSERT_EQ(r.types.size(), 1u);
  EXPECT_EQ(r.types[0].name, "training");
  // 120 one-second steps, 100% until 80, 50% until 100, 100% to the end.
  ASSERT_EQ(r.alloc_series.alloc_pct.size(), 120u);
  EXPECT_DOUBLE_EQ(r.alloc_series.step_seconds, 1);
  EXPECT_DOUBLE_EQ(r.alloc_series.alloc_pct[79], 100);
  EXPECT_DOUBLE_EQ(r.alloc_series.alloc_pct[80], 50);
  EXPECT_DOUBLE_EQ(r.alloc_series.alloc_pct[119], 100);
  // Waits 0, 0, 40, 80: two jobs waited longer than 0 s, one longer than 40 s, none than 80 s.
  EXPECT_EQ(r.wait_survival, (std::vector<std::pair<double, int64_t>>{{0, 2}, {40, 1}, {80, 0}}));
  // The arrivals end at 20 s: both nodes are full until then.
  EXPECT_EQ(r.arrival_alloc_series.alloc_pct, std::vector<double>(20, 100.0));

  // At most 4 points: the step doubles to 32 s. [0,32) and [32,64): 16 of 16 GPUs; [64,96): 16
  // on 16 s, 8 on 16 s; [96,120): 8 on 4 s, 16 on 20 s.
  ReplayOptions o;
  o.max_series_points = 4;
  const AllocSeries a = s.Run("binpack", o).alloc_series;
  EXPECT_DOUBLE_EQ(a.step_seconds, 32);
  ASSERT_EQ(a.alloc_pct.size(), 4u);
  EXPECT_NEAR(a.alloc_pct[0], 100, 1e-12);
  EXPECT_NEAR(a.alloc_pct[1], 100, 1e-12);
  EXPECT_NEAR(a.alloc_pct[2], 100.0 * (16 * 16 + 8 * 16) / (16 * 32), 1e-12);
  EXPECT_NEAR(a.alloc_pct[3], 100.0 * (8 * 4 + 16 * 20) / (16 * 24), 1e-12);
}

TEST(Replay, AllocationOverTheBusyWindowAndPerDay) {
  // A (8 GPUs, 100 s) and B (8 GPUs, three days) fill both nodes at 0; C (t=10) waits for A and
  // runs on [100, 150). Work is queued or arriving until 100: the busy window is [0, 100), fully
  // allocated, while B running alone for three days brings the whole run's average near 50%.
  constexpr int64_t kDay = 86400;
  Scenario s({Job(0, 100, 8), Job(0, 3 * kDay, 8), Job(10, 50, 8)});
  const ReplayReport r = s.Run();
  EXPECT_EQ(r.completed, 3);
  EXPECT_NEAR(r.busy_hours, 100 / kGpuSecondsPerHour, 1e-12);
  EXPECT_NEAR(r.gpu_alloc_busy_pct, 100, 1e-9);
  // 16 GPUs on [0, 150), then 8 to the end at 3 days.
  EXPECT_NEAR(r.gpu_alloc_pct, 100.0 * (16.0 * 150 + 8.0 * (3 * kDay - 150)) / (16.0 * 3 * kDay),
              1e-9);
  ASSERT_EQ(r.gpu_alloc_daily_pct.size(), 3u);
  EXPECT_NEAR(r.gpu_alloc_daily_pct[0], 100.0 * (16.0 * 150 + 8.0 * (kDay - 150)) / (16.0 * kDay),
              1e-9);
  EXPECT_NEAR(r.gpu_alloc_daily_pct[1], 50, 1e-9);
  EXPECT_NEAR(r.gpu_alloc_daily_pct[2], 50, 1e-9);
  const nlohmann::json j = ReplayReportJson(r);
  EXPECT_NEAR(j.at("gpu_alloc_busy_pct").get<double>(), 100, 1e-9);
  EXPECT_EQ(j.at("gpu_alloc_daily_pct").size(), 3u);
}

TEST(AllocSeriesBuilder, MergesStepsExactlyAndStaysBounded) {
  // 10 GPUs; 5 allocated on [0, 3 s), 10 on [3 s, 10 s), then 0 until 1000 s.
  AllocSeriesBuilder b(0, 10 * kMilliPerGpu, 8);
  b.Add(0, 3000, 5 * kMilliPerGpu);
  b.Add(3000, 10000, 10 * kMilliPerGpu);
  AllocSeries s = b.Finish(10000);
  EXPECT_DOUBLE_EQ(s.step_seconds, 2);  // 10 one-second steps would be more than 8
  ASSERT_EQ(s.alloc_pct.size(), 5u);
  EXPECT_DOUBLE_EQ(s.alloc_pct[0], 50);
  EXPECT_DOUBLE_EQ(s.alloc_pct[1], 75);  // [2 s, 4 s): half at 50%, half at 100%
  EXPECT_DOUBLE_EQ(s.alloc_pct[4], 100);
  b.Add(10000, 1000000, 0);
  s = b.Finish(1000000);
  EXPECT_LE(s.alloc_pct.size(), 8u);
  EXPECT_DOUBLE_EQ(s.step_seconds, 128);  // the smallest power of two with 1000 s in 8 steps
  EXPECT_NEAR(s.alloc_pct[0], 100.0 * (5 * 3 + 10 * 7) / (10 * 128), 1e-12);
  // The same allocation cut into other pieces gives the same series.
  AllocSeriesBuilder c(0, 10 * kMilliPerGpu, 8);
  for (TimeMs t = 0; t < 3000; t += 700) c.Add(t, std::min<TimeMs>(t + 700, 3000), 5000);
  for (TimeMs t = 3000; t < 10000; t += 999) c.Add(t, std::min<TimeMs>(t + 999, 10000), 10000);
  c.Add(10000, 1000000, 0);
  EXPECT_EQ(c.Finish(1000000).alloc_pct, s.alloc_pct);
  // A partial last step averages over its own width; nothing before the start.
  AllocSeriesBuilder d(5000, 1000, 100);
  d.Add(5000, 6500, 1000);
  const AllocSeries e = d.Finish(6500);
  ASSERT_EQ(e.alloc_pct.size(), 2u);
  EXPECT_DOUBLE_EQ(e.alloc_pct[1], 100);
  EXPECT_TRUE(d.Finish(5000).alloc_pct.empty());
  // Cut at `until`: what comes after is left out, the last step ends there.
  AllocSeriesBuilder u(0, 1000, 100, 2500);
  u.Add(0, 2000, 1000);
  u.Add(2000, 9000, 500);
  EXPECT_EQ(u.Finish(9000).alloc_pct, (std::vector<double>{100, 100, 50}));
}

TEST(SurvivalCurve, JobsLongerThanEachDistinctValueAtMostMaxPoints) {
  EXPECT_TRUE(SurvivalCurve({}).empty());
  // No zero: the curve starts at (0, n).
  EXPECT_EQ(SurvivalCurve({5, 1, 5, 3}),
            (std::vector<std::pair<double, int64_t>>{{0, 4}, {1, 3}, {3, 2}, {5, 0}}));
  EXPECT_EQ(SurvivalCurve({0, 0, 0}), (std::vector<std::pair<double, int64_t>>{{0, 0}}));
  std::vector<double> v;
  for (int i = 0; i <= 1000; ++i) v.push_back(i);
  const auto c = SurvivalCurve(v, 11);
  ASSERT_EQ(c.size(), 11u);
  EXPECT_EQ(c.front(), (std::pair<double, int64_t>{0, 1000}));
  EXPECT_EQ(c[1], (std::pair<double, int64_t>{100, 900}));
  EXPECT_EQ(c.back(), (std::pair<double, int64_t>{1000, 0}));
}

TEST(Replay, AJobLongerThanItsWalltimeEndsTimedOut) {
  // E runs 100 s but has a walltime of 60: stopped at 60. F completes at 30.
  Scenario s({Job(0, 100, 1, 1, "q", "normal", 60), Job(0, 30, 1, 1, "q", "normal", 40)});
  const ReplayReport r = s.Run();
  EXPECT_EQ(r.completed, 1);
  EXPECT_EQ(r.timed_out, 1);
  EXPECT_DOUBLE_EQ(r.jct.max, 60);
  EXPECT_DOUBLE_EQ(r.makespan_seconds, 60);
  // 2 GPUs on [0,30), 1 on [30,60) of 16 x 60.
  EXPECT_NEAR(r.gpu_alloc_pct, 100.0 * 90 / 960, 1e-9);
}

TEST(Replay, BackfillsAShortJobAroundAReservation) {
  // A (8 GPUs) and B (4) run to their walltimes at 100. C, a 2 x 8 gang (t=1), reserves both
  // nodes from 100. D (4 GPUs, walltime 50, t=2) ends before 100: backfilled at once on B's node.
  // E (4 GPUs, walltime 200, t=3) would overrun the reservation: waits until C ends at 150.
  Scenario s({Job(0, 100, 8, 1, "q", "normal", 100), Job(0, 100, 4, 1, "q", "normal", 100),
              Job(1, 50, 8, 2, "q", "normal", 50), Job(2, 50, 4, 1, "q", "normal", 50),
              Job(3, 200, 4, 1, "q", "normal", 200)});
  const ReplayReport r = s.Run();
  EXPECT_EQ(r.completed, 5);
  // Waits: A 0, B 0, C 99, D 0, E 147.
  EXPECT_DOUBLE_EQ(r.wait.max, 147);
  EXPECT_DOUBLE_EQ(r.wait.mean, (99.0 + 147.0) / 5);
  EXPECT_DOUBLE_EQ(r.makespan_seconds, 350);
}

// The same reclaim with a stop latency of 5 s: b2 stops 5 s after its grace period, at 375;
// a's job waits for it and runs on [375,475); b2 restarts at 475 and ends at 1475.
TEST(Replay, StopLatencyDelaysTheVictimsStopAndThePreemptor) {
  Scenario s({Job(0, 1000, 8, 1, "b"), Job(10, 1000, 8, 1, "b"), Job(100, 100, 8, 1, "a")}, 2,
             {{"a", 8}, {"b", 8}});
  ReplayOptions o;
  o.stop_latency = SecondsToMs(5);
  const ReplayReport r = s.Run("binpack", o);
  EXPECT_EQ(r.preemptions, 1);
  EXPECT_DOUBLE_EQ(r.makespan_seconds, 1475);
  ASSERT_EQ(r.queues.size(), 2u);
  EXPECT_DOUBLE_EQ(r.queues[1].wait.max, 275);  // a: 100 -> 375
  EXPECT_NEAR(r.gpu_hours_lost_to_preemption, 8 * 365 / kGpuSecondsPerHour, 1e-12);
}

TEST(Replay, ReclaimPreemptsTheBorrowerWithTheLeastLostWorkOnceItMayBePreempted) {
  // Queues a and b are guaranteed 8 GPUs each. b's b1 (t=0) and b2 (t=10) borrow the whole
  // cluster for 1000 s. a's job (t=100) is within a's guarantee, so it may reclaim, but b's jobs
  // are younger than the 300 s minimum runtime until 300 and 310. The periodic cycles at 160,
  // 220, 280 find nothing; at 340 both are candidates and b2 has lost less work (330 s against
  // 340): it is preempted, stops after its 30 s grace period at 370, and a's job runs on
  // [370,470). b2 restarts from scratch at 470 and ends at 1470.
  Scenario s({Job(0, 1000, 8, 1, "b"), Job(10, 1000, 8, 1, "b"), Job(100, 100, 8, 1, "a")}, 2,
             {{"a", 8}, {"b", 8}});
  for (bool skip : {true, false}) {
    ReplayOptions o;
    o.skip_idle_cycles = skip;
    const ReplayReport r = s.Run("binpack", o);
    SCOPED_TRACE(skip ? "idle cycles skipped" : "every cycle run");
    EXPECT_EQ(r.completed, 3);
    EXPECT_EQ(r.preemptions, 1);
    EXPECT_EQ(r.preemption_decisions, 1);
    EXPECT_EQ(r.jobs_preempted, 1);
    EXPECT_EQ(r.preemptions_by_reason[1], 1);  // reclaim
    EXPECT_DOUBLE_EQ(r.makespan_seconds, 1470);
    // b2 ran [10,370) on 8 GPUs before it was stopped.
    EXPECT_NEAR(r.gpu_hours_lost_to_preemption, 8 * 360 / kGpuSecondsPerHour, 1e-12);
    ASSERT_EQ(r.queues.size(), 2u);
    const QueueReport& b = r.queues[0];
    const QueueReport& a = r.queues[1];
    EXPECT_EQ(b.name, "b");
    EXPECT_EQ(b.preempted, 1);
    EXPECT_DOUBLE_EQ(a.wait.max, 270);  // 100 -> 370
    EXPECT_DOUBLE_EQ(b.wait.max, 100);  // b2: pending 370 -> 470
    // b holds 8 GPUs on [0,10), 16 on [10,370), 8 on [370,470), 16 on [470,1000), 8 after.
    const double b_gpu_s = 8 * 10 + 16 * 360 + 8 * 100 + 16 * 530 + 8 * 470;
    EXPECT_NEAR(b.gpu_share_pct, 100.0 * b_gpu_s / (16 * 1470), 1e-9);
    EXPECT_NEAR(a.gpu_share_pct, 100.0 * 800 / (16 * 1470), 1e-9);
    EXPECT_NEAR(a.entitlement_pct, 50, 1e-9);
    EXPECT_NEAR(a.share_while_waiting_pct, 0, 1e-9);   // nothing while it waited
    EXPECT_NEAR(b.share_while_waiting_pct, 50, 1e-9);  // b1's 8 GPUs while b2 waited
    const double xa = a.gpu_share_pct / 50;
    const double xb = b.gpu_share_pct / 50;
    EXPECT_NEAR(r.jain, (xa + xb) * (xa + xb) / (2 * (xa * xa + xb * xb)), 1e-9);
    EXPECT_NEAR(r.jain_while_waiting, 0.5, 1e-9);  // x = 0 and 1
    if (skip) {
      // Cycles at 0, 10, 100, 340 (the first that can preempt), 370 (a starts), 430 (periodic:
      // b2 still cannot start; the next one would be at 670, when a may be preempted) and 470.
      EXPECT_EQ(r.cycles, 7);
    } else {
      EXPECT_GT(r.cycles, 7);
    }
  }
}

TEST(Replay, PriorityPreemptionStopsAWholeGangAfterItsGracePeriod) {
  // A best-effort gang of 2 x 8 (no minimum runtime) holds the cluster; a critical 8-GPU job at 5
  // preempts it (both tasks go), starts at 35 when the gang's grace period is over, ends at 45.
  // The gang restarts at 45 and runs its whole 1000 s again.
  Scenario s({Job(0, 1000, 8, 2, "q", "best-effort"), Job(5, 10, 8, 1, "q", "critical")});
  const ReplayReport r = s.Run();
  EXPECT_EQ(r.completed, 2);
  EXPECT_EQ(r.preemptions, 1);
  EXPECT_EQ(r.preemptions_by_reason[0], 1);  // priority
  EXPECT_DOUBLE_EQ(r.wait.max, 30);          // critical: 5 -> 35; the gang: 35 -> 45
  EXPECT_DOUBLE_EQ(r.wait.mean, (30.0 + 10.0) / 2);
  EXPECT_DOUBLE_EQ(r.makespan_seconds, 1045);
  EXPECT_NEAR(r.gpu_hours_lost_to_preemption, 16 * 35 / kGpuSecondsPerHour, 1e-12);
}

TEST(Replay, DropsJobsThatCanNeverRunWithTheReason) {
  TraceJob wrong_model = Job(0, 10, 1);
  wrong_model.gpu_models = {"H100"};
  Scenario s({Job(0, 10, 16), wrong_model, Job(0, 10, 8, 3), Job(5, 10, 8)});
  const ReplayReport r = s.Run();
  EXPECT_EQ(r.dropped, 3);
  EXPECT_EQ(r.completed, 1);
  ASSERT_EQ(r.dropped_jobs.size(), 3u);
  EXPECT_THAT(r.dropped_jobs[0].reason, HasSubstr("Inadmissible"));
  EXPECT_THAT(r.dropped_jobs[0].reason,
              HasSubstr("no node has 16 GPUs of model A100 (the most on one node is 8)"));
  EXPECT_THAT(r.dropped_jobs[1].reason, HasSubstr("asks for GPU models H100"));
  EXPECT_THAT(r.dropped_jobs[2].reason,
              HasSubstr("the job's 3 tasks must start together, but 2 nodes with GPUs of model "
                        "A100 can hold 2 such tasks at once"));
  EXPECT_DOUBLE_EQ(r.makespan_seconds, 15);
}

TEST(Replay, StopsAtTheTimeLimit) {
  Scenario s({Job(0, 100, 8), Job(0, 100, 8), Job(10, 100, 8)});
  ReplayOptions o;
  o.time_limit = SecondsToMs(50);
  const ReplayReport r = s.Run("binpack", o);
  EXPECT_TRUE(r.time_limit_reached);
  EXPECT_EQ(r.completed, 0);
  EXPECT_EQ(r.unfinished, 3);
  EXPECT_DOUBLE_EQ(r.makespan_seconds, 50);
  EXPECT_NEAR(r.gpu_alloc_pct, 100, 1e-9);
  ASSERT_EQ(r.unfinished_jobs.size(), 3u);
  EXPECT_EQ(r.unfinished_jobs[0].reason, "running at the time limit");
  EXPECT_THAT(r.unfinished_jobs[2].reason, HasSubstr("waiting at the end: NoFeasibleNode"));
  EXPECT_DOUBLE_EQ(r.wait.max, 0);  // only started jobs count
}

TEST(Replay, ErrorsNameTheTraceLineAndColumn) {
  std::vector<Node> ns(1);
  ns[0].name = "n0";
  ns[0].gpus.push_back({0, "A100", 81920, true, 0});
  auto cluster = *core::Cluster::Build({{"A100", 81920, 0}}, ns);
  auto trace = ParseTrace(
      "submit_time,duration,tenant,queue,type,priority_class,tasks,gpus_per_task,gpu_milli,"
      "gpu_models,walltime\n"
      "0,10,t,q,training,normal,1,1,1000,,0\n"
      "0,10,t,q,training,urgent,1,1,1000,,0\n",
      "trace.csv");
  ASSERT_TRUE(trace.ok());
  auto tree = *core::QuotaTree::Build(DefaultQueueTree(*trace, cluster), cluster.models());
  auto w = CompileReplay(*trace, cluster, tree, DefaultPriorityClasses());
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().field(), "trace.csv:3:6");
  EXPECT_THAT(w.status().message(),
              HasSubstr("unknown class 'urgent'; the classes are critical, high, normal"));
  std::vector<QueueSpec> other = {QueueSpec{}, QueueSpec{}};
  other[0].name = "t";
  other[0].is_tenant = true;
  other[1].name = "elsewhere";
  other[1].parent = "t";
  auto tree2 = *core::QuotaTree::Build(other, cluster.models());
  w = CompileReplay(*trace, cluster, tree2, DefaultPriorityClasses());
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().field(), "trace.csv:2:4");
  EXPECT_THAT(w.status().message(), HasSubstr("'q' is not a queue of the queue tree"));
}

TEST(DefaultQueueTree, GuaranteesFollowTheGpuDemand) {
  // Demand in GPU-seconds: a 8 x 100 + 4 x 50 (walltime) = 1000, b 2 x 1 x 500 = 1000,
  // c 0 (CPU only): a and b get half of the 16 GPUs each.
  std::vector<TraceJob> jobs = {Job(0, 100, 8, 1, "a"), Job(0, 80, 4, 1, "a", "normal", 50),
                                Job(0, 500, 1, 2, "b"), Job(0, 500, 0, 1, "c")};
  Scenario s(jobs);
  ASSERT_EQ(s.workload().queues.size(), 3u);
  EXPECT_EQ(s.workload().queues[0].guaranteed_gpu_milli, 8000);
  EXPECT_EQ(s.workload().queues[1].guaranteed_gpu_milli, 8000);
  EXPECT_EQ(s.workload().queues[2].guaranteed_gpu_milli, 0);
  EXPECT_EQ(s.workload().queues[0].tenant, "t-a");
}

TEST(Replay, DeterministicForASeed) {
  auto pods = LoadOpenbPods(kFixtures + "/pods.csv");
  ASSERT_TRUE(pods.ok());
  ConvertOptions co;
  co.time_scale = 0.0001;  // arrivals within about 1,300 s: the small cluster queues them
  auto jobs = ConvertOpenbPods(*pods, co);
  ASSERT_TRUE(jobs.ok());
  // Durations cut to under an hour (deterministically) so that the run stays short.
  for (TraceJob& j : *jobs) j.duration = j.duration % 3000 + 1;
  Scenario s(*jobs, 3);
  for (const char* policy : {"random", "fgd"}) {
    ReplayOptions o;
    o.seed = 7;
    const nlohmann::json a = ReplayReportJson(s.Run(policy, o));
    const nlohmann::json b = ReplayReportJson(s.Run(policy, o));
    EXPECT_EQ(a.dump(), b.dump()) << policy;
    EXPECT_GT(a["wait_seconds"]["max"].get<double>(), 0) << policy;
    o.skip_idle_cycles = false;
    nlohmann::json c = ReplayReportJson(s.Run(policy, o));
    EXPECT_GE(c["cycles"].get<int64_t>(), a["cycles"].get<int64_t>());
    c["cycles"] = a["cycles"];
    EXPECT_EQ(a.dump(), c.dump()) << policy << ": skipping idle cycles changed the result";
  }
}

TEST(Replay, TypicalTasksComeFromTheWorkloadOrFromEachCyclesPendingJobs) {
  Scenario s({Job(0, 100, 8), Job(0, 50, 8), Job(10, 30, 8)});
  for (const bool from_pending : {false, true}) {
    ReplayOptions o;
    o.typical_from_pending = from_pending;
    int cycles = 0;
    int with_workloads = 0;
    o.before_cycle = [&](const core::CycleInput& in) {
      ++cycles;
      if (in.distribution == &s.workload().typical) ++with_workloads;
    };
    const ReplayReport r = s.Run("default", o);
    EXPECT_EQ(r.completed, 3);
    EXPECT_GT(cycles, 0);
    // Unset, the cycle derives the typical tasks from its pending jobs, as the server's does.
    EXPECT_EQ(with_workloads, from_pending ? 0 : cycles) << from_pending;
  }
}

}  // namespace
}  // namespace arbiter::sim

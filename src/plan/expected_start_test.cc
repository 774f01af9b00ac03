// The expected start on states where the answer is known, worked out in the comments.
#include "plan/expected_start.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "plan/start_calibration.h"
#include "sim/replay.h"
#include "testing/builders.h"

namespace arbiter::plan {
namespace {

using testing::ClusterBuilder;
using ::testing::HasSubstr;
using testing::JobBuilder;
using testing::TreeBuilder;

constexpr TimeMs kNow = SecondsToMs(1'000'000);

std::vector<DurationMs> Times(std::initializer_list<int64_t> seconds) {
  std::vector<DurationMs> v;
  for (int64_t s : seconds) v.push_back(SecondsToMs(s));
  return v;
}

// One node of 8 GPUs, one queue "q" of tenant "t"; jobs take all 8 GPUs.
class Estimate : public ::testing::Test {
 protected:
  Estimate()
      : world_(ClusterBuilder().Node("n1").Gpus(8, "A100"),
               TreeBuilder().Tenant("t").Queue("q", "t").DefaultWalltime(0)),
        profile_(testing::NamedProfile("default")) {
    world_.now = kNow;
  }

  // A running job of `user` on all 8 GPUs, started `elapsed_s` ago.
  void Running(uint64_t id, const std::string& user, int64_t elapsed_s, int64_t walltime_s = 0) {
    core::RunningJob r =
        testing::MakeRunning(id, world_.Queue("q"), world_.Model("A100"), testing::WholeGpus(8),
                             {{world_.Node("n1"), {0, 1, 2, 3, 4, 5, 6, 7}}});
    r.start_time = kNow - SecondsToMs(elapsed_s);
    r.walltime = SecondsToMs(walltime_s);
    world_.running.push_back(r);
    running_owners_.push_back({user, "q"});
  }

  void Pending(uint64_t id, const std::string& user, TimeMs submit) {
    world_.Add(JobBuilder(id).Queue(world_.Queue("q")).Gpus(8).SubmitTime(submit));
    pending_owners_.push_back({user, "q"});
  }

  StartEstimate Run(uint64_t target, StartEstimateOptions o = {},
                    const std::vector<RecentArrival>* recent = nullptr, DurationMs window = 0) {
    SortRunTimes(&history_);
    StartEstimateInput in;
    in.cluster = &world_.cluster;
    in.tree = &world_.tree;
    in.profile = &profile_;
    in.running = &world_.running;
    in.pending = &world_.pending;
    in.constraints = &world_.constraints;
    in.running_owners = running_owners_;
    in.pending_owners = pending_owners_;
    in.now = kNow;
    in.target = JobId(target);
    in.recent = recent;
    in.arrival_window = window;
    return EstimateStart(in, history_, o);
  }

  testing::World world_;
  core::Profile profile_;
  std::vector<JobOwner> running_owners_;
  std::vector<JobOwner> pending_owners_;
  RunTimeHistory history_;
};

// The running job has run 600 s and every run of its user took 3,600 s: it ends in 3,000 s in
// every draw, and the pending job, which needs its GPUs, starts then.
TEST_F(Estimate, OneRunningJobWithAKnownRunTime) {
  history_.by_user["t/alice"] = Times({3600, 3600, 3600, 3600, 3600});
  Running(1, "t/alice", 600);
  Pending(2, "t/bob", kNow - 100);
  const StartEstimate e = Run(2);
  ASSERT_TRUE(e.found);
  EXPECT_EQ(e.samples, 32);
  EXPECT_EQ(e.started, 32);
  ASSERT_TRUE(e.p50 && e.p90);
  EXPECT_EQ(*e.p50, kNow + SecondsToMs(3000));
  EXPECT_EQ(*e.p90, kNow + SecondsToMs(3000));
  EXPECT_EQ(e.source, RunTimeSource::kUser);
  EXPECT_FALSE(e.bounded());
  EXPECT_EQ(e.bound_note, "");
}

// A job ahead of the target in the queue runs first: the running job ends in 1,000 s, the job
// ahead then runs its user's 3,600 s, so the target starts after 4,600 s.
TEST_F(Estimate, WaitsForTheJobsAheadInTheQueue) {
  history_.by_user["t/alice"] = Times({1600, 1600, 1600, 1600, 1600});
  history_.by_user["t/carol"] = Times({3600, 3600, 3600, 3600, 3600});
  Running(1, "t/alice", 600);
  Pending(2, "t/carol", kNow - 200);
  Pending(3, "t/bob", kNow - 100);
  const StartEstimate e = Run(3);
  ASSERT_TRUE(e.p50 && e.p90);
  EXPECT_EQ(*e.p50, kNow + SecondsToMs(4600));
  EXPECT_EQ(*e.p90, kNow + SecondsToMs(4600));
}

// Jobs keep arriving: over the last 10,000 s, two jobs of a higher priority were submitted
// (each runs carol's 3,600 s). Without them the target starts when the running job ends (in
// 3,000 s); with them drawn as future arrivals (Poisson, one per 5,000 s on average), those that
// arrive before then go first, so the estimate is later in some draws and never earlier.
TEST_F(Estimate, LaterArrivalsOfAHigherPriorityGoFirst) {
  history_.by_user["t/alice"] = Times({3600, 3600, 3600, 3600, 3600});
  history_.by_user["t/carol"] = Times({3600, 3600, 3600, 3600, 3600});
  Running(1, "t/alice", 600);
  world_.running.back().preemptible = false;
  Pending(2, "t/bob", kNow - 100);
  std::vector<RecentArrival> recent;
  for (uint64_t i = 0; i < 2; ++i) {
    RecentArrival a;
    a.job = JobBuilder(100 + i)
                .Queue(world_.Queue("q"))
                .Gpus(8)
                .Priority(1000)
                .SubmitTime(kNow - SecondsToMs(4000 * static_cast<int64_t>(i + 1)))
                .Build();
    a.owner = {"t/carol", "q"};
    recent.push_back(a);
  }
  StartEstimateOptions o;
  o.samples = 64;
  const StartEstimate alone = Run(2, o);
  const StartEstimate with = Run(2, o, &recent, SecondsToMs(10000));
  ASSERT_TRUE(alone.p50 && alone.p90);
  EXPECT_EQ(*alone.p90, kNow + SecondsToMs(3000));
  EXPECT_EQ(alone.arrivals_per_draw, 0);
  ASSERT_GE(with.starts.size(), 60u);  // a few draws may queue arrivals past the horizon
  // About 1 - e^(-3000/5000) = 45% of the draws have an arrival before 3,000 s: it runs first.
  const auto later = std::count_if(with.starts.begin(), with.starts.end(),
                                   [](TimeMs t) { return t > kNow + SecondsToMs(3000); });
  EXPECT_GE(later, 15);
  EXPECT_LE(later, 50);
  EXPECT_GE(with.starts.front(), kNow + SecondsToMs(3000));
  ASSERT_TRUE(with.p90);
  EXPECT_GE(*with.p90, kNow + SecondsToMs(6600));  // after one arrival's 3,600 s at least
  EXPECT_GT(with.arrivals_per_draw, 0);
  EXPECT_FALSE(with.arrivals_for);  // 14 days of arrivals at this rate stay far below the cap
}

// Completed runs alone are biased short: the long ones are still running. Four runs of 1 to 4 s
// give each a quarter; two runs still going at 10 s keep a third of the mass past 4 s.
TEST(KaplanMeier, RunsInProgressCarryMassPastTheLongestCompletedRun) {
  const RunTimeDistribution plain = KaplanMeier(Times({1, 2, 3, 4}), {});
  EXPECT_EQ(plain.times, Times({1, 2, 3, 4}));
  EXPECT_THAT(plain.cdf, ::testing::ElementsAre(0.25, 0.5, 0.75, 1.0));
  EXPECT_EQ(plain.longest, SecondsToMs(4));

  // Two runs still going at 10 s: at 1..4 s the risk set is 6, 5, 4, 3.
  const RunTimeDistribution censored = KaplanMeier(Times({1, 2, 3, 4}), Times({10, 10}));
  ASSERT_EQ(censored.cdf.size(), 4u);
  EXPECT_NEAR(censored.cdf[0], 1.0 / 6, 1e-12);
  EXPECT_NEAR(censored.cdf[3], 4.0 / 6, 1e-12);
  EXPECT_EQ(censored.longest, SecondsToMs(10));
  EXPECT_DOUBLE_EQ(censored.mean, 2500.0);

  // A run still going at 2.5 s left the risk set before 3 s: 3 and 4 s split what remains.
  const RunTimeDistribution early = KaplanMeier(Times({1, 2, 3, 4}), {2500});
  EXPECT_NEAR(early.cdf[1], 2.0 / 5, 1e-12);
  EXPECT_NEAR(early.cdf[2], 1.0 - 3.0 / 5 / 2, 1e-12);
  EXPECT_NEAR(early.cdf[3], 1.0, 1e-12);
}

// The running job (alice, run 7,200 s, whose runs take 10,800 s) ends in 3,600 s; carol's job
// ahead of the target has only the cluster's history: five runs of 600 s, and alice's run in
// progress at 7,200 s. So carol's job runs 600 s in 5 of 6 draws and at least 7,200 s in the
// rest: the target's P50 is 4,200 s away, its P90 at least 10,800 s (without the run in progress
// both were 4,200 s).
TEST_F(Estimate, RunsInProgressLengthenTheRunTimes) {
  history_.by_user["t/alice"] = Times({10800, 10800, 10800, 10800, 10800});
  history_.cluster = Times({600, 600, 600, 600, 600});
  Running(1, "t/alice", 7200);
  Pending(2, "t/carol", kNow - 200);
  Pending(3, "t/bob", kNow - 100);
  StartEstimateOptions o;
  o.samples = 200;
  const StartEstimate e = Run(3, o);
  ASSERT_TRUE(e.p50 && e.p90);
  EXPECT_EQ(*e.p50, kNow + SecondsToMs(4200));
  EXPECT_GE(*e.p90, kNow + SecondsToMs(3600 + 7200));
}

// Too few runs of the user (2 < 5): the queue's runs (1,800 s) give 1,200 s left.
TEST_F(Estimate, FallsBackToTheQueue) {
  history_.by_user["t/alice"] = Times({100, 100});
  history_.by_queue["q"] = Times({1800, 1800, 1800, 1800, 1800});
  Running(1, "t/alice", 600);
  Pending(2, "t/bob", kNow - 100);
  const StartEstimate e = Run(2);
  ASSERT_TRUE(e.p50);
  EXPECT_EQ(*e.p50, kNow + SecondsToMs(1200));
  EXPECT_EQ(e.source, RunTimeSource::kQueue);
}

// No history: the running job's walltime (2 h, 600 s run) says when it ends at the latest.
TEST_F(Estimate, FallsBackToTheWalltime) {
  Running(1, "t/alice", 600, 7200);
  Pending(2, "t/bob", kNow - 100);
  const StartEstimate e = Run(2);
  ASSERT_TRUE(e.p50 && e.p90);
  EXPECT_EQ(*e.p50, kNow + SecondsToMs(6600));
  EXPECT_EQ(*e.p90, kNow + SecondsToMs(6600));
  EXPECT_EQ(e.source, RunTimeSource::kWalltime);
}

// Nothing known: the running job runs past the horizon, and so does the wait.
TEST_F(Estimate, NothingKnownIsAfterTheHorizon) {
  Running(1, "t/alice", 600);
  Pending(2, "t/bob", kNow - 100);
  StartEstimateOptions o;
  o.samples = 4;
  o.horizon = SecondsToMs(86400);
  const StartEstimate e = Run(2, o);
  EXPECT_TRUE(e.found);
  EXPECT_FALSE(e.p50.has_value());
  EXPECT_FALSE(e.p90.has_value());
  EXPECT_EQ(e.horizon_reached, 4);
  EXPECT_EQ(e.source, RunTimeSource::kNone);
  EXPECT_THAT(e.bound_note, HasSubstr("4 of 4 draws reached the horizon of 24 h"));
}

// The running job has outlived every sample (7,200 s run, samples 1,000..3,000 s): its remaining
// time follows a Pareto tail of scale 7,200 s (as long again at the median), so the draws spread
// and P90 is later than P50.
TEST_F(Estimate, OutlivedHistoryGetsAMemorylessTail) {
  history_.by_user["t/alice"] = Times({1000, 1500, 2000, 2500, 3000});
  Running(1, "t/alice", 7200);
  Pending(2, "t/bob", kNow - 100);
  StartEstimateOptions o;
  o.samples = 50;
  const StartEstimate e = Run(2, o);
  ASSERT_TRUE(e.p50 && e.p90);
  EXPECT_GT(*e.p50, kNow);
  EXPECT_GT(*e.p90, *e.p50);
  // The median remaining time is 7,200 s; 50 draws put the P50 within a factor 3 of it.
  EXPECT_GT(*e.p50 - kNow, SecondsToMs(2400));
  EXPECT_LT(*e.p50 - kNow, SecondsToMs(21600));
}

// Nothing is known of the running job, so it runs past the horizon, and three jobs came in the
// last hour: each draw's arrivals pile up behind the target for 14 days, hundreds of pending jobs
// in each of hundreds of cycles. The work bound cuts every draw off early: the estimate says so,
// and how far the draws got (the target starts later than that).
TEST_F(Estimate, TheWorkBoundCutsDrawsOffAndSaysHowFarTheyGot) {
  Running(1, "t/alice", 1);
  Pending(2, "t/bob", kNow - 100);
  std::vector<RecentArrival> recent;
  for (uint64_t i = 0; i < 3; ++i) {
    RecentArrival a;
    a.job = JobBuilder(100 + i).Queue(world_.Queue("q")).Gpus(8).SubmitTime(kNow - 1000).Build();
    a.owner = {"t/carol", "q"};
    recent.push_back(a);
  }
  StartEstimateOptions o;
  o.samples = 8;
  o.max_work = 8 * 5000;
  const StartEstimate e = Run(2, o, &recent, SecondsToMs(3600));
  EXPECT_EQ(e.work_cut, 8);
  EXPECT_EQ(e.horizon_reached, 0);
  EXPECT_TRUE(e.bounded());
  EXPECT_FALSE(e.p50.has_value());
  // Each draw ends after the cycle that reaches its share: at most one cycle's work (its
  // pending jobs, fewer than 400 here, and the node) beyond it.
  EXPECT_GE(e.work, o.max_work);
  EXPECT_LE(e.work, o.max_work + 8 * 400);
  ASSERT_TRUE(e.work_cut_after.has_value());
  EXPECT_GT(*e.work_cut_after, SecondsToMs(3600));
  EXPECT_LT(*e.work_cut_after, o.horizon);
  EXPECT_EQ(e.simulated, *e.work_cut_after);
  EXPECT_THAT(e.bound_note,
              HasSubstr("8 of 8 draws stopped at the work bound (the earliest after"));
}

// A bound the draws stay within changes nothing: the same draws, the same estimate.
TEST_F(Estimate, AWorkBoundNotReachedChangesNothing) {
  history_.by_user["t/alice"] = Times({1000, 2000, 3000, 4000, 5000});
  Running(1, "t/alice", 600);
  Pending(2, "t/bob", kNow - 100);
  const StartEstimate free = Run(2);
  StartEstimateOptions o;
  o.max_work = 1'000'000;
  const StartEstimate bounded = Run(2, o);
  EXPECT_EQ(bounded.starts, free.starts);
  EXPECT_EQ(bounded.work, free.work);
  EXPECT_GT(free.work, 0);
  EXPECT_EQ(bounded.work_cut, 0);
  EXPECT_FALSE(bounded.bounded());
  EXPECT_EQ(bounded.simulated, o.horizon);
}

TEST_F(Estimate, EqualSeedsGiveEqualEstimates) {
  history_.by_user["t/alice"] = Times({1000, 1500, 2000, 2500, 3000, 9000});
  Running(1, "t/alice", 1200);
  Pending(2, "t/bob", kNow - 100);
  const StartEstimate a = Run(2);
  const StartEstimate b = Run(2);
  EXPECT_EQ(a.starts, b.starts);
  StartEstimateOptions o;
  o.seed = 99;
  EXPECT_NE(Run(2, o).starts, a.starts);
}

// The queue depth cap: two of three pending jobs are replayed, the target among them, and the
// estimate says so.
TEST_F(Estimate, QueueDepthCapIsReported) {
  history_.by_user["t/alice"] = Times({3600, 3600, 3600, 3600, 3600});
  Running(1, "t/alice", 600);
  Pending(2, "t/bob", kNow - 300);
  Pending(3, "t/bob", kNow - 200);
  Pending(4, "t/bob", kNow - 100);
  StartEstimateOptions o;
  o.max_pending = 2;
  const StartEstimate e = Run(4, o);
  EXPECT_EQ(e.pending_replayed, 2u);
  EXPECT_EQ(e.pending_total, 3u);
  EXPECT_TRUE(e.bounded());
  EXPECT_THAT(e.bound_note, HasSubstr("replayed the first 2 of 3 pending jobs"));
  EXPECT_EQ(SelectPending(world_.pending, JobId(4), 2),
            (std::vector<size_t>{0, 2}));  // job 2 first, then the target in place of job 3
}

TEST_F(Estimate, UnknownTargetIsNotFound) {
  Running(1, "t/alice", 600);
  Pending(2, "t/bob", kNow - 100);
  EXPECT_FALSE(Run(7).found);
}

// Calibration on a trace where every run takes 100 s and jobs queue on one node: once the history
// has runs, every estimate is exact, so every job starts at (not after) both estimates.
TEST(Calibration, ExactRunTimesHitEveryEstimate) {
  const core::Cluster cluster = ClusterBuilder().Node("n1").Gpus(8, "A100").Build();
  const core::QuotaTree tree = TreeBuilder().Tenant("t").Queue("q", "t").Build(cluster.models());
  sim::ReplayWorkload w;
  w.cluster = &cluster;
  w.tree = &tree;
  w.queues.push_back({testing::QueueNamed(tree, "q"), "q", "t", 0});
  for (int i = 0; i < 12; ++i) {
    sim::ReplayJob j;
    j.name = "j";
    j.pending = JobBuilder(static_cast<uint64_t>(i + 1))
                    .Queue(testing::QueueNamed(tree, "q"))
                    .Gpus(8)
                    .SubmitTime(SecondsToMs(10 * i))
                    .Build();
    j.duration = SecondsToMs(100);
    w.jobs.push_back(j);
  }
  const core::Profile profile = testing::NamedProfile("default");
  CalibrationOptions o;
  o.estimate.samples = 4;
  o.min_samples = 1;
  o.replay.cycle_interval = SecondsToMs(10);
  o.arrival_window = 0;  // nothing arrives in the estimates: the trace's later jobs queue behind
  const CalibrationReport r = Calibrate(w, profile, o);
  EXPECT_EQ(r.jobs, 12);
  EXPECT_EQ(r.started_at_once, 1);  // the first job
  EXPECT_EQ(r.estimated, 11);
  EXPECT_EQ(r.scored, 11);
  EXPECT_EQ(r.before_p50, 11);
  EXPECT_EQ(r.before_p90, 11);
  EXPECT_DOUBLE_EQ(r.p90_hit_pct, 100.0);
}

}  // namespace
}  // namespace arbiter::plan

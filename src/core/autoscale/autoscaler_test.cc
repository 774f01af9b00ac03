#include "core/autoscale/autoscaler.h"

#include <gtest/gtest.h>

namespace arbiter::core {
namespace {

// Target 10 in flight per replica at 70%: each replica carries 7.
AutoscalingSpec Spec() {
  AutoscalingSpec a;
  a.target = 10;
  return a;
}

// Feeds `seconds` samples of `concurrency`, one per second from *t, and decides after each.
AutoscaleDecision Feed(Autoscaler& s, TimeMs* t, int seconds, double concurrency, int32_t ready,
                       int32_t* current) {
  AutoscaleDecision d;
  for (int i = 0; i < seconds; ++i) {
    *t += 1000;
    s.Record({*t, concurrency, 0});
    d = s.Decide(*t, ready, *current, false);
    *current = d.desired;
  }
  return d;
}

TEST(Autoscaler, SteadyLoadGetsCeilOfDemandOverTheTargetShare) {
  Autoscaler s(Spec(), 1, 20);
  TimeMs t = 1'000'000;
  int32_t current = 3;
  const AutoscaleDecision d = Feed(s, &t, 60, 41, 3, &current);
  EXPECT_FALSE(d.panicking);  // 41 / 7 = 5.9 replicas' worth: under twice the 3 ready
  EXPECT_DOUBLE_EQ(d.per_replica, 7);
  EXPECT_NEAR(d.stable_demand, 41, 1e-9);
  EXPECT_EQ(d.desired, 6);
  EXPECT_EQ(d.reason, "41.0 requests in flight over 60 s, target 7 per replica");
}

TEST(Autoscaler, ANewServiceAveragesOverTheSecondsItHasSeen) {
  Autoscaler s(Spec(), 1, 20);
  TimeMs t = 0;
  int32_t current = 1;
  // Ten seconds of 14 in flight: 2 replicas' worth, not a sixth of it.
  const AutoscaleDecision d = Feed(s, &t, 10, 14, 2, &current);
  EXPECT_NEAR(d.stable_demand, 14, 1e-9);
  EXPECT_EQ(d.desired, 2);
}

TEST(Autoscaler, ABurstPanicsAndNothingScalesDownUntilAStableWindowAfterIt) {
  Autoscaler s(Spec(), 1, 50);
  TimeMs t = 0;
  int32_t current = 2;
  Feed(s, &t, 60, 7, 2, &current);  // quiet: 1 replica's worth
  EXPECT_EQ(current, 1);
  // A burst of 60 in flight: over 6 s that is 8.6 replicas' worth, 8.6x one ready replica.
  AutoscaleDecision d = Feed(s, &t, 6, 60, 1, &current);
  EXPECT_TRUE(d.panicking);
  EXPECT_EQ(d.desired, 9);
  EXPECT_NE(d.reason.find("panic: 60.0 requests in flight over 6 s"), std::string::npos)
      << d.reason;
  // The burst ends; the stable window still remembers it, and panic holds the count.
  d = Feed(s, &t, 30, 0, 9, &current);
  EXPECT_TRUE(d.panicking);
  EXPECT_EQ(d.desired, 9);
  // A stable window after the panic condition last held: panic ends, the count follows the
  // stable demand again, at most halving each decision (max_scale_down_rate 2).
  d = Feed(s, &t, 30, 0, 9, &current);
  EXPECT_FALSE(d.panicking);
  EXPECT_LT(d.desired, 9);
}

TEST(Autoscaler, ScaleDownIsRateLimitedAndDelayed) {
  AutoscalingSpec a = Spec();
  a.scale_down_delay_ms = 20'000;
  Autoscaler s(a, 1, 50);
  TimeMs t = 0;
  int32_t current = 10;
  Feed(s, &t, 60, 70, 10, &current);
  EXPECT_EQ(current, 10);
  // The load drops to 1 replica's worth: the stable window still averages the old load, and
  // once it has forgotten it the delay holds the highest decision of the last 20 s.
  AutoscaleDecision d = Feed(s, &t, 1, 7, 10, &current);
  EXPECT_EQ(d.desired, 10);
  d = Feed(s, &t, 59, 7, 10, &current);
  EXPECT_GT(d.desired, 1);
  d = Feed(s, &t, 21, 7, 10, &current);
  EXPECT_EQ(d.desired, 5);  // floor(10 ready / 2): halving at most, whatever the demand
  // Five ready: halving allows 2, the delay holds 5 another 20 s.
  EXPECT_EQ(Feed(s, &t, 1, 7, 5, &current).desired, 5);
  EXPECT_EQ(Feed(s, &t, 20, 7, 5, &current).desired, 2);
  EXPECT_EQ(Feed(s, &t, 21, 7, 2, &current).desired, 1);
}

TEST(Autoscaler, ScalesToZeroAfterTheGraceAndBackAtTheFirstWaitingRequest) {
  AutoscalingSpec a = Spec();
  a.stable_window_ms = 10'000;
  a.panic_window_ms = 1'000;
  a.scale_to_zero_grace_ms = 15'000;
  Autoscaler s(a, 0, 5);
  TimeMs t = 0;
  int32_t current = 1;
  Feed(s, &t, 5, 3, 1, &current);
  EXPECT_EQ(current, 1);
  // No demand: the stable window forgets it after 10 s, the grace keeps one replica 15 s.
  AutoscaleDecision d = Feed(s, &t, 14, 0, 1, &current);
  EXPECT_EQ(d.desired, 1);
  d = Feed(s, &t, 1, 0, 1, &current);
  EXPECT_EQ(d.desired, 0);
  EXPECT_EQ(d.reason, "no requests for 15 s: scale to zero");
  EXPECT_EQ(Feed(s, &t, 30, 0, 0, &current).desired, 0);
  // A request arrives and waits: one replica at once, before its load shows in a sample.
  t += 300;
  d = s.Decide(t, 0, 0, /*waiting=*/true);
  EXPECT_EQ(d.desired, 1);
  EXPECT_EQ(d.reason, "a request waits and no replica runs");
}

TEST(Autoscaler, StaysWithinMinAndMax) {
  Autoscaler s(Spec(), 2, 4);
  TimeMs t = 0;
  int32_t current = 2;
  EXPECT_EQ(Feed(s, &t, 60, 0, 2, &current).desired, 2);
  const AutoscaleDecision d = Feed(s, &t, 60, 700, 2, &current);
  EXPECT_EQ(d.desired, 4);
  EXPECT_NE(d.reason.find("(within replicas 2..4)"), std::string::npos) << d.reason;
}

TEST(Autoscaler, RequestsPerSecondIsAMetricToo) {
  AutoscalingSpec a;
  a.metric = AutoscaleMetric::kRps;
  EXPECT_DOUBLE_EQ(a.EffectiveTarget(), 200);
  a.target = 50;
  a.target_utilization = 100;
  Autoscaler s(a, 1, 100);
  TimeMs t = 0;
  int32_t current = 1;
  AutoscaleDecision d;
  for (int i = 0; i < 60; ++i) {
    t += 1000;
    s.Record({t, /*concurrency=*/1, /*rps=*/420});
    d = s.Decide(t, current, current, false);
    current = d.desired;
  }
  EXPECT_EQ(d.desired, 9);  // ceil(420 / 50)
  EXPECT_NE(d.reason.find("420.0 requests/s"), std::string::npos) << d.reason;
}

TEST(Autoscaler, ScaleUpIsRateLimited) {
  AutoscalingSpec a = Spec();
  a.max_scale_up_rate = 2;
  a.panic_threshold = 1000;  // no panic: the stable window alone
  Autoscaler s(a, 1, 100);
  TimeMs t = 0;
  int32_t current = 2;
  EXPECT_EQ(Feed(s, &t, 60, 140, 2, &current).desired, 4);  // 20 wanted, 2 x 2 allowed
}

}  // namespace
}  // namespace arbiter::core

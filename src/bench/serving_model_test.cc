#include "bench/serving_model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

namespace arbiter::bench {
namespace {

TEST(LlmTraceTest, ParsesTheAzureFormatRelativeToTheFirstRequest) {
  std::istringstream in(
      "TIMESTAMP,ContextTokens,GeneratedTokens\r\n"
      "2023-11-16 18:15:46.6805900,374,44\r\n"
      "2023-11-16 18:15:50.9951690,396,109\n"
      "2023-11-16 18:15:46.1805900,10,1\n"
      "2023-11-17 00:00:00.0,5,6\n");
  std::vector<TraceRequest> t;
  std::string error;
  ASSERT_TRUE(ParseLlmTrace(in, &t, &error)) << error;
  ASSERT_EQ(t.size(), 4u);
  EXPECT_DOUBLE_EQ(t[0].at_s, 0);  // sorted: the earliest first
  EXPECT_EQ(t[0].context_tokens, 10);
  EXPECT_NEAR(t[1].at_s, 0.5, 1e-6);
  EXPECT_EQ(t[1].context_tokens, 374);
  EXPECT_EQ(t[1].generated_tokens, 44);
  EXPECT_NEAR(t[2].at_s, 4.814579, 1e-6);
  EXPECT_NEAR(t[3].at_s, 5 * 3600 + 44 * 60 + 13.81941, 1e-5);  // across midnight
}

TEST(LlmTraceTest, BadInputNamesTheLineAndField) {
  auto error_of = [](const std::string& text) {
    std::istringstream in(text);
    std::vector<TraceRequest> t;
    std::string error;
    EXPECT_FALSE(ParseLlmTrace(in, &t, &error)) << text;
    return error;
  };
  EXPECT_NE(error_of("a,b,c\n").find("line 1: the header"), std::string::npos);
  EXPECT_NE(error_of("").find("line 1"), std::string::npos);
  EXPECT_NE(error_of("TIMESTAMP,ContextTokens,GeneratedTokens\n").find("no request"),
            std::string::npos);
  const std::string h = "TIMESTAMP,ContextTokens,GeneratedTokens\n";
  EXPECT_NE(error_of(h + "2023-11-16 18:15:46.1,1\n").find("line 2: 3 fields"), std::string::npos);
  EXPECT_NE(error_of(h + "2023-11-16 18:15:46.1,1,2\nyesterday,1,2\n").find("line 3: TIMESTAMP"),
            std::string::npos);
  EXPECT_NE(error_of(h + "2023-11-16 18:15:46.1,-1,2\n").find("line 2: ContextTokens"),
            std::string::npos);
  EXPECT_NE(error_of(h + "2023-11-16 18:15:46.1,1,x\n").find("line 2: GeneratedTokens"),
            std::string::npos);
}

TEST(DayNightTest, TroughAtStartPeakAtHalfPeriodAndTheIntegral) {
  const DayNight d{100, 0.2};
  EXPECT_NEAR(RateMultiplier(d, 0), 0.2, 1e-12);
  EXPECT_NEAR(RateMultiplier(d, 50), 1.0, 1e-12);
  EXPECT_NEAR(RateMultiplier(d, 25), 0.6, 1e-12);
  EXPECT_NEAR(RateMultiplier(d, 100), 0.2, 1e-12);
  // Over a whole period the mean multiplier is (1 + trough) / 2.
  EXPECT_NEAR(TraceSecondsAt(d, 10, 100), 10 * 100 * 0.6, 1e-9);
  EXPECT_DOUBLE_EQ(TraceSecondsAt(d, 10, 0), 0);
  // The integral's slope is speedup x m(t).
  for (double t : {3.0, 25.0, 49.0, 77.0}) {
    const double slope = (TraceSecondsAt(d, 10, t + 1e-4) - TraceSecondsAt(d, 10, t - 1e-4)) / 2e-4;
    EXPECT_NEAR(slope, 10 * RateMultiplier(d, t), 1e-5) << t;
  }
}

TEST(ServiceTimeTest, PrefillAndDecodeInProportionToTheirTokens) {
  const ServiceTimeModel m;  // 0.02 ms a prompt token, 0.5 ms a generated one
  EXPECT_EQ(ServiceTimeMs(m, 1000, 200), 120);
  EXPECT_EQ(ServiceTimeMs(m, 0, 0), 0);
  EXPECT_EQ(ServiceTimeMs({1, 10}, 3, 4), 43);
}

TEST(ArrivalScheduleTest, FollowsTheMultiplierAndLoopsTheTrace) {
  // One request a second of trace for 10 s.
  std::vector<TraceRequest> trace;
  for (int i = 0; i < 10; ++i) trace.push_back({static_cast<double>(i), 100, 10});
  const DayNight flat{100, 1.0};  // a multiplier of 1 throughout
  const auto a = ArrivalSchedule(trace, flat, 2.0, 12, ServiceTimeModel{});
  // 24 trace seconds: the trace (10 s, looped every 10 s: 9 s span + 1 s mean gap) 2.4 times.
  ASSERT_EQ(a.size(), 24u);
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_NEAR(a[i].at_s, static_cast<double>(i) / 2, 1e-6) << i;
    EXPECT_EQ(a[i].delay_ms, 7);
  }
  // Under a day/night pattern, the arrivals thin out at night and crowd at the peak.
  std::vector<TraceRequest> dense;
  for (int i = 0; i < 10000; ++i) dense.push_back({i * 0.1, 0, 0});
  const DayNight d{100, 0.1};
  const auto b = ArrivalSchedule(dense, d, 1.0, 100, ServiceTimeModel{});
  int night = 0, day = 0;
  for (const Arrival& x : b) {
    night += x.at_s < 10 ? 1 : 0;
    day += x.at_s >= 45 && x.at_s < 55 ? 1 : 0;
  }
  EXPECT_NEAR(static_cast<double>(b.size()), TraceSecondsAt(d, 1.0, 100) * 10, 2);
  EXPECT_NEAR(day, 10 * 10 * 0.99, 3);  // m ~ 1 around the peak
  EXPECT_LT(night, 20);                 // m ~ 0.1 .. 0.32 at night
  for (size_t i = 1; i < b.size(); ++i) EXPECT_LE(b[i - 1].at_s, b[i].at_s);
}

TEST(PeakReplicasTest, TheBusiestWindowsWorkOverAReplicasSlots) {
  std::vector<Arrival> a;
  // 10 s at 10 requests/s of 100 ms (1 busy slot), then 10 s at 40/s (4 busy slots).
  for (int i = 0; i < 100; ++i) a.push_back({i * 0.1, 100});
  for (int i = 0; i < 400; ++i) a.push_back({10 + i * 0.025, 100});
  EXPECT_EQ(PeakReplicas(a, 5, 4, 0.6), 2);   // 4 slots busy / (4 x 0.6)
  EXPECT_EQ(PeakReplicas(a, 5, 4, 0.3), 4);   // 4 / 1.2
  EXPECT_EQ(PeakReplicas(a, 5, 8, 0.7), 1);   // 4 / 5.6
  EXPECT_EQ(PeakReplicas({}, 5, 4, 0.5), 1);  // at least one
}

TEST(LatencyFiguresTest, FailuresCountAgainstTheSlo) {
  std::vector<RequestOutcome> o;
  for (int i = 1; i <= 100; ++i) o.push_back({static_cast<double>(i), true});
  o.push_back({5, false});
  const LatencyFigures f = ComputeLatencies(o, 90);
  EXPECT_EQ(f.requests, 101);
  EXPECT_EQ(f.failed, 1);
  EXPECT_NEAR(f.slo_attainment, 90.0 / 101, 1e-12);
  EXPECT_NEAR(f.p50_ms, 50.5, 1e-9);
  EXPECT_NEAR(f.p99_ms, 99.01, 1e-9);
  EXPECT_EQ(ComputeLatencies({}, 90).slo_attainment, 0);
}

TEST(TrainingFiguresTest, GpuTimeAndWorkLostToPreemption) {
  const std::string record =
      "start 1000 0\n"
      "ckpt 11000 10\n"
      "ckpt 21000 20\n"
      "term 25000 24\n"  // preempted: 4 s since its checkpoint lost
      "start 30000 20\n"
      "garbage\n"
      "ckpt 40000 30\n"
      "end 50000 40\n"
      "start 60000 0\n";  // another job's run, still going
  const auto runs = ParseTrainingRuns(record);
  ASSERT_EQ(runs.size(), 3u);
  EXPECT_TRUE(runs[0].terminated);
  EXPECT_EQ(runs[0].last_checkpoint_ms, 21000);
  EXPECT_TRUE(runs[1].finished);
  EXPECT_EQ(runs[2].end_ms, 0);

  constexpr double kH = 3600.0 * 1000.0;
  const TrainingFigures all = ComputeTraining(runs, 0, 70000, 1);
  EXPECT_NEAR(all.gpu_hours, (24000 + 20000 + 10000) / kH, 1e-12);
  EXPECT_NEAR(all.lost_gpu_hours, 4000 / kH, 1e-12);
  EXPECT_EQ(all.preemptions, 1);
  EXPECT_EQ(all.jobs_finished, 1);

  // A window from 22 s to 45 s: clipped, and the loss counted from the window's start at most.
  const TrainingFigures w = ComputeTraining(runs, 22000, 45000, 2);
  EXPECT_NEAR(w.gpu_hours, 2 * (3000 + 15000) / kH, 1e-12);
  EXPECT_NEAR(w.lost_gpu_hours, 2 * 3000 / kH, 1e-12);
  EXPECT_EQ(w.jobs_finished, 0);
  // A run terminated after the window (stopped at the end of the run) is no preemption.
  EXPECT_EQ(ComputeTraining(runs, 0, 24000, 1).preemptions, 0);
}

}  // namespace
}  // namespace arbiter::bench

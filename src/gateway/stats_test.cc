#include "gateway/stats.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace arbiter::gateway {
namespace {

TEST(LatencyBucketsTest, BoundsAreInclusive) {
  EXPECT_EQ(ServiceLatencyBucket(0), 0u);
  EXPECT_EQ(ServiceLatencyBucket(1), 0u);
  EXPECT_EQ(ServiceLatencyBucket(1.5), 1u);
  EXPECT_EQ(ServiceLatencyBucket(60000), 14u);
  EXPECT_EQ(ServiceLatencyBucket(60001), 15u);
  EXPECT_EQ(kServiceLatencyBucketCount, 16u);
}

TEST(StatsTest, SumsShardsAndMakesWindows) {
  Stats stats(2);
  RouteCounters* a = stats.Counters(0, "chat", 3);
  RouteCounters* b = stats.Counters(1, "chat", 3);
  EXPECT_EQ(stats.Counters(0, "chat", 3), a) << "one object per shard and route";
  a->Record(200, false, 0.5, 0);
  b->Record(503, true, 7, 3);
  b->Record(404, false, 150, 0);
  a->AddInFlight(2);
  const auto first = stats.Totals();
  const RouteTotals& t = first.at({"chat", 3});
  EXPECT_EQ(t.requests, 3u);
  EXPECT_EQ(t.status[0], 1u);
  EXPECT_EQ(t.status[2], 1u);
  EXPECT_EQ(t.status[3], 1u);
  EXPECT_EQ(t.gateway_503, 1u);
  EXPECT_EQ(t.latency[0], 1u);
  EXPECT_EQ(t.latency[3], 1u);  // 7 ms: <= 10
  EXPECT_EQ(t.latency[7], 1u);  // 150 ms: <= 200
  EXPECT_NEAR(t.latency_sum_ms, 157.5, 1e-6);
  EXPECT_NEAR(t.queue_wait_sum_ms, 3, 1e-6);
  EXPECT_EQ(t.in_flight, 2);

  a->Record(201, false, 2, 0);
  const auto second = stats.Totals();
  const RouteTotals d = second.at({"chat", 3}).Minus(t);
  EXPECT_EQ(d.requests, 1u);
  EXPECT_EQ(d.status[0], 1u);
  EXPECT_EQ(d.gateway_503, 0u);
  EXPECT_EQ(d.latency[1], 1u);

  const auto body = nlohmann::json::parse(StatsWindowJson("gw:1", 10, 20, {{{"chat", 3}, d}}));
  EXPECT_EQ(body["gateway"], "gw:1");
  EXPECT_EQ(body["window_start_ms"], 10);
  EXPECT_EQ(body["window_end_ms"], 20);
  ASSERT_EQ(body["services"].size(), 1u);
  const auto& s = body["services"][0];
  EXPECT_EQ(s["name"], "chat");
  EXPECT_EQ(s["revision"], 3);
  EXPECT_EQ(s["requests"], 1);
  EXPECT_EQ(s["status"]["2xx"], 1);
  EXPECT_EQ(s["status"]["5xx"], 0);
  EXPECT_EQ(s["gateway_503"], 0);
  EXPECT_EQ(s["latency_buckets"].size(), 16u);
  EXPECT_EQ(s["latency_buckets"][1], 1);
  EXPECT_DOUBLE_EQ(s["latency_sum_ms"].get<double>(), 2);
}

TEST(StatsTest, PrometheusTextHasEveryFamily) {
  Stats stats(1);
  stats.Counters(0, "chat", 3)->Record(200, false, 3, 0);
  const std::string text = RoutesPrometheusText(stats.Totals());
  for (const char* want :
       {"arbiter_gateway_requests_total{service=\"chat\",revision=\"3\",code=\"2xx\"} 1",
        "arbiter_gateway_request_duration_seconds_bucket{service=\"chat\",revision=\"3\","
        "le=\"0.005\"} 1",
        "arbiter_gateway_request_duration_seconds_bucket{service=\"chat\",revision=\"3\","
        "le=\"+Inf\"} 1",
        "arbiter_gateway_request_duration_seconds_count{service=\"chat\",revision=\"3\"} 1",
        "arbiter_gateway_queue_wait_seconds_bucket{service=\"chat\",revision=\"3\","
        "le=\"0.001\"} 1",
        "arbiter_gateway_requests_in_flight{service=\"chat\",revision=\"3\"} 0",
        "# TYPE arbiter_gateway_rejected_total counter"}) {
    EXPECT_NE(text.find(want), std::string::npos) << want << "\n" << text;
  }
  EXPECT_EQ(PrometheusLabel("a\"b\\c\n"), "a\\\"b\\\\c\\n");
}

}  // namespace
}  // namespace arbiter::gateway

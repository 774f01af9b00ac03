#include "server/serving_stats.h"

#include <gtest/gtest.h>

namespace arbiter::server {
namespace {

std::array<int64_t, kServiceLatencyBuckets> Buckets(
    std::initializer_list<std::pair<size_t, int64_t>> c) {
  std::array<int64_t, kServiceLatencyBuckets> b{};
  for (const auto& [i, n] : c) b[i] = n;
  return b;
}

TEST(ServingStatsTest, QuantilesInterpolateInsideTheirBucket) {
  // 100 requests in (10, 20] ms: the median is at 15, p99 at 19.9.
  const auto b = Buckets({{4, 100}});
  EXPECT_DOUBLE_EQ(LatencyQuantileMs(b, 0.5), 15);
  EXPECT_NEAR(LatencyQuantileMs(b, 0.99), 19.9, 1e-9);
  // Half in (0, 1], half in (100, 200]: the median ends the first bucket.
  const auto c = Buckets({{0, 50}, {7, 50}});
  EXPECT_DOUBLE_EQ(LatencyQuantileMs(c, 0.5), 1);
  EXPECT_DOUBLE_EQ(LatencyQuantileMs(c, 0.75), 150);
  // The unbounded bucket answers its lower bound; nothing: 0.
  EXPECT_DOUBLE_EQ(LatencyQuantileMs(Buckets({{15, 3}}), 0.5), 60000);
  EXPECT_DOUBLE_EQ(LatencyQuantileMs(Buckets({}), 0.5), 0);
}

TEST(ServingStatsTest, ShareWithinALimit) {
  const auto b = Buckets({{4, 50}, {8, 50}});  // (10, 20] and (200, 500]
  EXPECT_DOUBLE_EQ(ShareWithinMs(b, 20), 0.5);
  EXPECT_DOUBLE_EQ(ShareWithinMs(b, 500), 1);
  EXPECT_DOUBLE_EQ(ShareWithinMs(b, 350), 0.75);
  EXPECT_DOUBLE_EQ(ShareWithinMs(Buckets({}), 1), 1);
}

TEST(ServingStatsTest, FiguresAddAndRoundTrip) {
  ServingFigures a;
  a.requests = 10;
  a.status_2xx = 9;
  a.status_5xx = 1;
  a.latency[3] = 10;
  a.ready_samples = 1;
  a.ready_sum = 3;
  a.ready_min = 3;
  a.ready_max = 3;
  ServingFigures b = a;
  b.gateway_503 = 2;
  b.ready_min = 1;
  b.ready_sum = 1;
  b.ready_max = 1;
  a.Add(b);
  EXPECT_EQ(a.requests, 20);
  EXPECT_EQ(a.errors(), 4);
  EXPECT_EQ(a.latency[3], 20);
  EXPECT_EQ(a.ready_samples, 2);
  EXPECT_EQ(a.ready_min, 1);
  EXPECT_EQ(a.ready_max, 3);
  EXPECT_EQ(ServingFiguresFromJson(ServingFiguresToJson(a).dump()), a);
}

TEST(ServingStatsTest, GatewayReportErrorsNameTheField) {
  auto ok = ParseGatewayStats(R"({"gateway": "g:1", "window_start_ms": 60000,
    "window_end_ms": 70000, "services": [{"name": "chat", "revision": 3, "requests": 2,
    "status": {"2xx": 2}, "gateway_503": 0, "latency_buckets": [0, 2], "latency_sum_ms": 3.5,
    "queue_wait_sum_ms": 0}]})");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->services[0].figures.latency[1], 2);
  EXPECT_EQ(MinuteOf(ok->window_start_ms + 59000), 60000);
  const std::pair<const char*, const char*> bad[] = {
      {R"({"window_start_ms": 1, "window_end_ms": 2, "bogus": 1})", "bogus"},
      {R"({"window_end_ms": 2})", "window_start_ms"},
      {R"({"window_start_ms": 5, "window_end_ms": 2})", "window_end_ms"},
      {R"({"window_start_ms": 1, "window_end_ms": 2, "services": [{"name": "Bad!", "revision": 1}]})",
       "services[0].name"},
      {R"({"window_start_ms": 1, "window_end_ms": 2, "services": [{"name": "a", "revision": 1,
         "requests": -1}]})",
       "services[0].requests"},
      {R"({"window_start_ms": 1, "window_end_ms": 2, "services": [{"name": "a", "revision": 1,
         "latency_buckets": [1, "x"]}]})",
       "services[0].latency_buckets[1]"},
      {R"({"window_start_ms": 1, "window_end_ms": 2, "services": [{"name": "a", "revision": 1,
         "status": {"6xx": 1}}]})",
       "services[0].status.6xx"},
  };
  for (const auto& [body, field] : bad) {
    auto r = ParseGatewayStats(body);
    ASSERT_FALSE(r.ok()) << body;
    EXPECT_EQ(r.status().field(), field) << body;
  }
}

}  // namespace
}  // namespace arbiter::server

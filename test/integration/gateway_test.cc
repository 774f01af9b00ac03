// `arbiter gateway` with a routes file in front of arbiter-echo-server replicas, all real
// processes on loopback.
#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "gateway_process.h"
#include "server_process.h"

namespace arbiter::testing {
namespace {

using nlohmann::json;

json Replicas(const std::vector<const EchoProcess*>& echoes, const std::string& prefix) {
  json out = json::array();
  for (size_t i = 0; i < echoes.size(); ++i) {
    out.push_back({{"id", prefix + std::to_string(i + 1)}, {"address", echoes[i]->address()}});
  }
  return out;
}

class GatewayTest : public ::testing::Test {
 protected:
  // Starts `count` echo servers named PREFIX1..PREFIXn.
  std::vector<const EchoProcess*> Echoes(int count, const std::string& prefix) {
    std::vector<const EchoProcess*> out;
    for (int i = 0; i < count; ++i) {
      auto e = std::make_unique<EchoProcess>();
      EXPECT_TRUE(e->Start(prefix + std::to_string(i + 1))) << "arbiter-echo-server";
      out.push_back(e.get());
      echoes_.push_back(std::move(e));
    }
    return out;
  }

  void StartGateway(const json& routes, std::vector<std::string> extra = {}) {
    const std::string file = dir_.path() + "/routes.json";
    std::ofstream(file) << routes.dump(2);
    std::vector<std::string> flags = {"--routes-file", file, "--threads", "2"};
    for (auto& e : extra) flags.push_back(e);
    ASSERT_TRUE(gateway_.Start(flags)) << "arbiter gateway did not start";
  }

  httplib::Client Client() {
    httplib::Client c("127.0.0.1", gateway_.port());
    c.set_keep_alive(true);
    c.set_read_timeout(10, 0);
    return c;
  }

  TempDir dir_;
  std::vector<std::unique_ptr<EchoProcess>> echoes_;
  GatewayProcess gateway_;
};

TEST_F(GatewayTest, BalancesOverReplicasAndForwards) {
  const auto echoes = Echoes(3, "r");
  StartGateway(
      {{"version", 1},
       {"services",
        {{{"name", "chat"},
          {"revisions",
           {{{"revision", 1}, {"percent", 100}, {"replicas", Replicas(echoes, "r")}}}}}}}});
  httplib::Client c = Client();
  std::map<std::string, int> by_replica;
  for (int i = 0; i < 300; ++i) {
    auto r = c.Get("/s/chat/v1/models?i=" + std::to_string(i));
    ASSERT_TRUE(r) << httplib::to_string(r.error());
    ASSERT_EQ(r->status, 200) << r->body;
    const json body = json::parse(r->body);
    EXPECT_EQ(body["path"], "/v1/models");
    EXPECT_EQ(body["query"], "i=" + std::to_string(i));
    EXPECT_EQ(body["id"], r->get_header_value("X-Arbiter-Replica"));
    EXPECT_EQ(r->get_header_value("X-Arbiter-Revision"), "1");
    ++by_replica[r->get_header_value("X-Arbiter-Replica")];
  }
  ASSERT_EQ(by_replica.size(), 3u);
  for (const auto& [id, n] : by_replica) EXPECT_GT(n, 60) << id;
}

// 90/10 between two revisions, within 3 points over 2,000 requests (the binomial standard
// deviation is 0.67 points).
TEST_F(GatewayTest, SplitsTrafficByPercent) {
  const auto stable = Echoes(2, "s");
  const auto canary = Echoes(1, "c");
  StartGateway({{"version", 1},
                {"services",
                 {{{"name", "chat"},
                   {"revisions",
                    {{{"revision", 3}, {"percent", 90}, {"replicas", Replicas(stable, "s")}},
                     {{"revision", 4}, {"percent", 10}, {"replicas", Replicas(canary, "c")}}}}}}}});
  httplib::Client c = Client();
  std::map<std::string, int> by_revision;
  constexpr int kRequests = 2000;
  for (int i = 0; i < kRequests; ++i) {
    auto r = c.Get("/s/chat/x");
    ASSERT_TRUE(r && r->status == 200);
    ++by_revision[r->get_header_value("X-Arbiter-Revision")];
  }
  EXPECT_NEAR(by_revision["3"] * 100.0 / kRequests, 90, 3);
  EXPECT_NEAR(by_revision["4"] * 100.0 / kRequests, 10, 3);
}

// A replica killed under load: requests in flight on it and those that pick it before it is
// ejected go to another replica; not one fails.
TEST_F(GatewayTest, KillingAReplicaFailsNoRequest) {
  const auto echoes = Echoes(4, "r");
  StartGateway(
      {{"version", 1},
       {"services",
        {{{"name", "chat"},
          {"revisions",
           {{{"revision", 1}, {"percent", 100}, {"replicas", Replicas(echoes, "r")}}}}}}}});
  std::atomic<bool> stop{false};
  std::atomic<int> ok{0};
  std::atomic<int> failed{0};
  std::atomic<int> to_killed_after{0};
  std::atomic<bool> killed{false};
  std::atomic<int64_t> killed_at_ms{0};
  std::mutex mu;
  std::string first_failure;
  auto now_ms = [] {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  };
  std::vector<std::thread> clients;
  for (int t = 0; t < 8; ++t) {
    clients.emplace_back([&] {
      httplib::Client c = Client();
      while (!stop) {
        const bool sent_after_kill = killed;  // (an answer may be on its way as it is killed)
        auto r = c.Get("/s/chat/work?delay_ms=2");
        if (r && r->status == 200) {
          ++ok;
          // Nothing sent after the kill is answered by it (one probe per ejection period is
          // retried elsewhere).
          if (sent_after_kill && r->get_header_value("X-Arbiter-Replica") == "r1") {
            ++to_killed_after;
          }
        } else {
          ++failed;
          std::lock_guard<std::mutex> lock(mu);
          if (first_failure.empty()) {
            first_failure =
                r ? std::to_string(r->status) + " " + r->body : httplib::to_string(r.error());
          }
        }
      }
    });
  }
  const auto wait_for_ok = [&](int n) {
    for (int i = 0; i < 1000 && ok < n; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  };
  wait_for_ok(200);
  echoes_[0]->Kill(SIGKILL);
  killed_at_ms = now_ms();
  killed = true;
  const int before = ok;
  wait_for_ok(before + 1500);
  stop = true;
  for (auto& t : clients) t.join();
  EXPECT_EQ(failed.load(), 0) << first_failure;
  EXPECT_GE(ok.load(), before + 1000);
  EXPECT_EQ(to_killed_after.load(), 0);
  auto metrics = Client().Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_NE(metrics->body.find("arbiter_gateway_retries_total{service=\"chat\",revision=\"1\"}"),
            std::string::npos);
}

TEST_F(GatewayTest, AFullQueueAnswers503WithAJsonBody) {
  const auto echoes = Echoes(1, "r");
  StartGateway(
      {{"version", 1},
       {"services",
        {{{"name", "slow"},
          {"max_concurrency", 1},
          {"queue_max", 1},
          {"queue_timeout_ms", 20000},
          {"revisions",
           {{{"revision", 1}, {"percent", 100}, {"replicas", Replicas(echoes, "r")}}}}}}}});
  std::vector<int> statuses(3, 0);
  std::vector<std::string> bodies(3);
  std::vector<std::thread> clients;
  for (int i = 0; i < 3; ++i) {
    clients.emplace_back([&, i] {
      // In order: the first runs, the second waits, the third finds the queue full.
      std::this_thread::sleep_for(std::chrono::milliseconds(150 * i));
      httplib::Client c = Client();
      auto r = c.Get("/s/slow/x?delay_ms=1200");
      if (r) {
        statuses[static_cast<size_t>(i)] = r->status;
        bodies[static_cast<size_t>(i)] = r->body;
      }
    });
  }
  for (auto& t : clients) t.join();
  EXPECT_EQ(statuses[0], 200);
  EXPECT_EQ(statuses[1], 200);
  ASSERT_EQ(statuses[2], 503) << bodies[2];
  const json body = json::parse(bodies[2]);
  EXPECT_EQ(body["error"]["code"], "unavailable");
  EXPECT_NE(body["error"]["message"].get<std::string>().find("request_queue.max"),
            std::string::npos);
}

TEST_F(GatewayTest, UnknownServiceHostRoutesAndMetrics) {
  const auto echoes = Echoes(1, "r");
  StartGateway(
      {{"version", 9},
       {"services",
        {{{"name", "chat"},
          {"hosts", {"chat.example.com"}},
          {"revisions",
           {{{"revision", 2}, {"percent", 100}, {"replicas", Replicas(echoes, "r")}}}}}}}});
  httplib::Client c = Client();
  auto unknown = c.Get("/s/nope/x");
  ASSERT_TRUE(unknown);
  EXPECT_EQ(unknown->status, 404);
  EXPECT_EQ(json::parse(unknown->body)["error"]["code"], "not_found");

  auto host = c.Get("/v1/chat?x=1", {{"Host", "chat.example.com:8000"}});
  ASSERT_TRUE(host);
  ASSERT_EQ(host->status, 200) << host->body;
  const json body = json::parse(host->body);
  EXPECT_EQ(body["path"], "/v1/chat") << "a host route forwards the whole path";
  EXPECT_EQ(body["headers"]["x-forwarded-host"], "chat.example.com:8000");
  EXPECT_EQ(host->get_header_value("X-Arbiter-Revision"), "2");

  // A request is counted once its answer has been written, which the client may see first:
  // bounded, until the count is there.
  auto metrics = c.Get("/metrics");
  for (int i = 0; i < 200 && metrics &&
                  metrics->body.find("revision=\"2\",code=\"2xx\"} 1") == std::string::npos;
       ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    metrics = c.Get("/metrics");
  }
  ASSERT_TRUE(metrics);
  EXPECT_EQ(metrics->status, 200);
  for (const char* want :
       {"arbiter_gateway_requests_total{service=\"chat\",revision=\"2\",code=\"2xx\"} 1",
        "arbiter_gateway_request_duration_seconds_bucket{service=\"chat\",revision=\"2\",",
        "arbiter_gateway_requests_in_flight{service=\"chat\",revision=\"2\"} 0",
        "arbiter_gateway_queue_length{service=\"chat\"} 0",
        "arbiter_gateway_unknown_service_requests_total 1", "arbiter_gateway_routes_version 9"}) {
    EXPECT_NE(metrics->body.find(want), std::string::npos) << want << "\n" << metrics->body;
  }
  // promtool, when installed, accepts the text.
  const std::string file = dir_.path() + "/metrics.txt";
  std::ofstream(file) << metrics->body;
  std::string out;
  const int rc =
      Shell("command -v promtool >/dev/null || exit 77; promtool check metrics < " + file, &out);
  if (rc != 77) {
    EXPECT_EQ(rc, 0) << out;
  }
}

TEST_F(GatewayTest, BadFlagsAndFilesAreNamed) {
  std::string out;
  EXPECT_EQ(Shell(std::string(ARBITER_BINARY) + " gateway --listen 127.0.0.1:0", &out), 2);
  EXPECT_NE(out.find("--routes-file"), std::string::npos) << out;
  const std::string file = dir_.path() + "/bad.json";
  std::ofstream(file) << R"({"services": [{"name": "a", "revisions": [{"replicas": [{"id": "1",
      "address": "nohost"}]}]}]})";
  EXPECT_EQ(
      Shell(std::string(ARBITER_BINARY) + " gateway --listen 127.0.0.1:0 --routes-file " + file,
            &out),
      2);
  EXPECT_NE(out.find("services[0].revisions[0].replicas[0].address"), std::string::npos) << out;
  EXPECT_EQ(Shell(std::string(ARBITER_BINARY) +
                      " gateway --listen 127.0.0.1:0 --server http://127.0.0.1:1",
                  &out),
            2);
  EXPECT_NE(out.find("token"), std::string::npos) << out;
}

}  // namespace
}  // namespace arbiter::testing

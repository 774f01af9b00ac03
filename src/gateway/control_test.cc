// The gateway's dealings with the server: the long-polled routing table and the stats posts,
// against a stand-in server (cpp-httplib) on loopback.
#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "gateway/gateway.h"
#include "gateway/routes.h"

namespace arbiter::gateway {
namespace {

using nlohmann::json;

// Serves GET /api/v1/gateway/routes (long poll) and POST /api/v1/gateway/stats as the contract
// says, for the token "tok".
class FakeServer {
 public:
  FakeServer() {
    server_.Get("/api/v1/gateway/routes",
                [this](const httplib::Request& req, httplib::Response& res) {
                  if (req.get_header_value("Authorization") != "Bearer tok") {
                    res.status = 401;
                    return;
                  }
                  const int64_t after = std::stoll(req.get_param_value("after"));
                  const int64_t wait_ms = std::stoll(req.get_param_value("wait_ms"));
                  std::unique_lock<std::mutex> lock(mu_);
                  ++polls_;
                  cv_.wait_for(lock, std::chrono::milliseconds(wait_ms),
                               [&] { return table_.version > after || closing_; });
                  res.set_content(RouteTableJson(table_), "application/json");
                });
    server_.Post("/api/v1/gateway/stats",
                 [this](const httplib::Request& req, httplib::Response& res) {
                   std::lock_guard<std::mutex> lock(mu_);
                   if (req.get_header_value("Authorization") != "Bearer tok") {
                     res.status = 401;
                     return;
                   }
                   if (fail_posts_ > 0) {
                     --fail_posts_;
                     ++failed_posts_;
                     res.status = 503;
                     return;
                   }
                   posts_.push_back(json::parse(req.body));
                   res.status = 204;
                 });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
  }
  ~FakeServer() { Stop(); }

  void Stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      closing_ = true;
      cv_.notify_all();
    }
    server_.stop();
    if (thread_.joinable()) thread_.join();
  }

  void SetTable(RouteTable t) {
    std::lock_guard<std::mutex> lock(mu_);
    table_ = std::move(t);
    cv_.notify_all();
  }
  void FailPosts(int n) {
    std::lock_guard<std::mutex> lock(mu_);
    fail_posts_ = n;
  }
  std::vector<json> posts() {
    std::lock_guard<std::mutex> lock(mu_);
    return posts_;
  }
  int failed_posts() {
    std::lock_guard<std::mutex> lock(mu_);
    return failed_posts_;
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

 private:
  httplib::Server server_;
  std::thread thread_;
  int port_ = 0;
  std::mutex mu_;
  std::condition_variable cv_;
  RouteTable table_;
  bool closing_ = false;
  int polls_ = 0;
  int fail_posts_ = 0;
  int failed_posts_ = 0;
  std::vector<json> posts_;
};

// A service whose replica is the fake server itself (it answers 404 on other paths: enough to
// see where a request went).
RouteTable Table(int64_t version, const std::vector<std::string>& names, int replica_port) {
  RouteTable t;
  t.version = version;
  for (const std::string& n : names) {
    ServiceRoute s;
    s.name = n;
    RevisionRoute r;
    r.revision = 1;
    r.percent = 100;
    r.replicas.push_back({"fake", "127.0.0.1:" + std::to_string(replica_port)});
    s.revisions.push_back(r);
    t.services.push_back(s);
  }
  return t;
}

template <typename F>
bool WaitUntil(F f, int ms = 10000) {
  for (int i = 0; i < ms / 10; ++i) {
    if (f()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return f();
}

TEST(ControlTest, LearnsRoutesByLongPollAndKeepsThemWhenTheServerIsGone) {
  FakeServer server;
  // The replica: another stand-in, answering every path.
  httplib::Server replica;
  replica.Get(".*", [](const httplib::Request& req, httplib::Response& res) {
    res.set_content("{\"path\":\"" + req.path + "\"}", "application/json");
  });
  const int replica_port = replica.bind_to_any_port("127.0.0.1");
  std::thread replica_thread([&] { replica.listen_after_bind(); });

  server.SetTable(Table(1, {"chat"}, replica_port));
  GatewayOptions o;
  o.server_url = server.url();
  o.token = "tok";
  o.threads = 1;
  o.routes_wait_ms = 1000;
  o.stats_interval_ms = 100000;
  Gateway g(o);
  ASSERT_TRUE(g.Start().ok());
  EXPECT_EQ(g.routes_version(), 1) << "the first table is there when Start returns";
  httplib::Client c("127.0.0.1", g.port());
  auto r = c.Get("/s/chat/a");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(c.Get("/s/later/a")->status, 404);

  server.SetTable(Table(2, {"chat", "later"}, replica_port));
  ASSERT_TRUE(WaitUntil([&] { return g.routes_version() == 2; }));
  EXPECT_EQ(c.Get("/s/later/a")->status, 200);

  server.Stop();  // the server goes away: the last table stays
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(c.Get("/s/later/b")->status, 200);
  EXPECT_NE(g.metrics_text().find("arbiter_gateway_routes_version 2"), std::string::npos);
  g.Stop();
  replica.stop();
  replica_thread.join();
}

TEST(ControlTest, PostsStatsWindowsAndMergesAFailedOne) {
  FakeServer server;
  httplib::Server replica;
  replica.Get(".*", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("{}", "application/json");
  });
  const int replica_port = replica.bind_to_any_port("127.0.0.1");
  std::thread replica_thread([&] { replica.listen_after_bind(); });
  server.SetTable(Table(1, {"chat"}, replica_port));
  server.FailPosts(2);

  GatewayOptions o;
  o.server_url = server.url();
  o.token = "tok";
  o.threads = 2;
  o.id = "gw-test";
  o.stats_interval_ms = 150;
  Gateway g(o);
  ASSERT_TRUE(g.Start().ok());
  httplib::Client c("127.0.0.1", g.port());
  constexpr int kRequests = 25;
  for (int i = 0; i < kRequests; ++i) ASSERT_EQ(c.Get("/s/chat/x")->status, 200);
  // Every request shows up exactly once in the accepted windows, whatever failed before.
  auto counted = [&] {
    int64_t n = 0;
    for (const json& p : server.posts()) {
      for (const json& s : p["services"]) n += s["requests"].get<int64_t>();
    }
    return n;
  };
  ASSERT_TRUE(WaitUntil([&] { return counted() >= kRequests && server.failed_posts() == 2; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(400));  // later windows add nothing
  EXPECT_EQ(counted(), kRequests);
  const auto posts = server.posts();
  ASSERT_FALSE(posts.empty());
  int64_t previous_end = 0;
  for (const json& p : posts) {
    EXPECT_EQ(p["gateway"], "gw-test");
    EXPECT_LE(p["window_start_ms"].get<int64_t>(), p["window_end_ms"].get<int64_t>());
    if (previous_end != 0) {
      EXPECT_EQ(p["window_start_ms"].get<int64_t>(), previous_end);
    }
    previous_end = p["window_end_ms"].get<int64_t>();
    for (const json& s : p["services"]) {
      EXPECT_EQ(s["name"], "chat");
      EXPECT_EQ(s["revision"], 1);
      EXPECT_EQ(s["latency_buckets"].size(), 16u);
      EXPECT_EQ(s["status"]["2xx"], s["requests"]);
      EXPECT_EQ(s["gateway_503"], 0);
    }
  }
  g.Stop();
  replica.stop();
  replica_thread.join();
}

}  // namespace
}  // namespace arbiter::gateway
